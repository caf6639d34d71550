//! `easeml bench tuner` end to end on TrimTuner's CNN table with a tiny protocol (skipped when
//! ../shared/data is absent, as PROVENANCE.md says).

use std::path::PathBuf;
use std::process::Command;

fn easeml() -> Command {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
}

fn cnn_table() -> Option<PathBuf> {
    let dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let path = dir.join("trimtuner/cnn.csv");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipping: TrimTuner's table not found at {} (set EASEML_SHARED_DATA)",
            path.display()
        );
        None
    }
}

#[test]
fn help_documents_the_interface() {
    let output = easeml()
        .args(["bench", "tuner", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--table",
        "--max-cost",
        "--seeds",
        "--iterations",
        "--policies",
        "--out",
        "trimtuner:FILE",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn a_tiny_replay_writes_the_summary_schema() {
    let Some(path) = cnn_table() else { return };
    let out = std::env::temp_dir().join(format!("easeml-cli-test-{}-tuner", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = easeml()
        .args(["bench", "tuner", "--table"])
        .arg(format!("trimtuner:{}", path.display()))
        .args([
            "--max-cost",
            "0.1",
            "--seeds",
            "2",
            "--iterations",
            "6",
            "--threads",
            "2",
        ])
        .args([
            "--policies",
            "trimtuner_dt,trimtuner_gp,eic,eic_usd,fabolas,random",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("111 feasible"), "{stdout}");
    assert!(stdout.contains("39 within 5%"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["level_trend"], "cost");
    assert_eq!(summary["table_two"]["feasible"], 111);
    for policy in [
        "trimtuner_dt",
        "trimtuner_gp",
        "eic",
        "eic_usd",
        "fabolas",
        "random",
    ] {
        let entry = &summary["policies"][policy];
        for level in ["0.9", "0.95", "0.98"] {
            let cost = &entry["cost_to_optimum"][level];
            assert!(
                cost.is_null() || cost.as_f64().is_some_and(|c| c > 0.0),
                "{policy} {level}"
            );
            assert_eq!(
                entry["cost_to_optimum_per_seed"][level]
                    .as_array()
                    .unwrap()
                    .len(),
                2
            );
        }
        assert!(entry["final_accuracy_fraction"].is_number(), "{policy}");
        assert!(entry["mean_s"].is_number(), "{policy}");
        assert!(entry["recommend_seconds_mean"].is_number(), "{policy}");
    }
    for file in ["curves.csv", "accuracy_c.svg", "accuracy_c.png"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_wrong_table_spec_is_refused() {
    let out =
        std::env::temp_dir().join(format!("easeml-cli-test-{}-tuner-bad", std::process::id()));
    let output = easeml()
        .args([
            "bench",
            "tuner",
            "--table",
            "matrix:x.csv",
            "--max-cost",
            "0.1",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("trimtuner:FILE"));
}

#[test]
fn an_unknown_level_trend_is_refused_with_the_known_ones() {
    let out = std::env::temp_dir().join(format!(
        "easeml-cli-test-{}-tuner-bad-trend",
        std::process::id()
    ));
    let output = easeml()
        .args([
            "bench",
            "tuner",
            "--table",
            "trimtuner:cnn.csv",
            "--max-cost",
            "0.1",
            "--level-trend",
            "loss",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown --level-trend `loss`") && stderr.contains("neither, cost, both"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written for a refused run");
}
