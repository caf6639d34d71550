//! `easeml bench scheduler` end to end on a small matrix written by the test.

use std::path::PathBuf;
use std::process::Command;

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("easeml-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn easeml() -> Command {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
}

#[test]
fn help_documents_the_interface() {
    let output = easeml()
        .args(["bench", "scheduler", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--dataset",
        "--cost-aware",
        "--repeats",
        "--test-users",
        "--seed",
        "--policies",
        "--out",
        "--parallel",
        "--no-hallucination",
        "--history-covariance",
        "synthetic:SIGMA_M,ALPHA",
        "matrix:QUALITY_FILE[,COST_FILE]",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn a_matrix_with_costs_produces_every_output() {
    let dir = scratch_dir("matrix");
    let mut quality = String::from("user,a,b,c,d,e\n");
    let mut cost = String::new();
    for user in 0..8 {
        let row: Vec<String> = (0..5)
            .map(|model| format!("{:.2}", 0.5 + ((user * 7 + model * 3) % 10) as f64 / 25.0))
            .collect();
        quality.push_str(&format!("u{user},{}\n", row.join(",")));
        let costs: Vec<String> = (0..5)
            .map(|model| format!("{}", 1 + (model + user) % 4))
            .collect();
        cost.push_str(&format!("{}\n", costs.join(" ")));
    }
    std::fs::write(dir.join("quality.csv"), quality).unwrap();
    std::fs::write(dir.join("cost.txt"), cost).unwrap();
    let out = dir.join("out");
    let spec = format!(
        "matrix:{},{}",
        dir.join("quality.csv").display(),
        dir.join("cost.txt").display()
    );
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", &spec, "--cost-aware"])
        .args(["--repeats", "3", "--test-users", "3", "--seed", "4"])
        .args([
            "--policies",
            "hybrid,round_robin,random,spearmint,most_cited",
        ])
        .args(["--line8", "expected-improvement"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in ["curves.csv", "summary.json", "loss.svg", "loss.png"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["mode"], "cost_aware");
    assert_eq!(summary["repeats"], 3);
    assert_eq!(summary["line8_rule"], "expected_improvement");
    // 8 users, 3 test users asked for: no note. (The note is tested below.)
    assert!(!String::from_utf8_lossy(&output.stderr).contains("note:"));
    let hybrid = &summary["policies"]["hybrid"];
    assert!(hybrid["cost_to_mean_loss"].get("0.1").is_some());
    assert!(hybrid["final_mean_loss"].is_number());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_costs_are_refused_and_unknown_ones_filled_with_a_note() {
    let dir = scratch_dir("costs");
    let quality = "user,a,b,c\nu0,0.5,0.6,0.7\nu1,0.4,0.8,0.2\nu2,0.3,0.9,0.1\nu3,0.6,0.2,0.5\n";
    std::fs::write(dir.join("quality.csv"), quality).unwrap();
    let run = |cost: &str| {
        std::fs::write(dir.join("cost.csv"), cost).unwrap();
        let spec = format!(
            "matrix:{},{}",
            dir.join("quality.csv").display(),
            dir.join("cost.csv").display()
        );
        let _ = std::fs::remove_dir_all(dir.join("out"));
        easeml()
            .args(["bench", "scheduler", "--dataset", &spec, "--cost-aware"])
            .args([
                "--repeats",
                "2",
                "--test-users",
                "2",
                "--policies",
                "default,round_robin",
            ])
            .arg("--out")
            .arg(dir.join("out"))
            .output()
            .unwrap()
    };
    let output = run("user,a,b,c\nu0,1,inf,2\nu1,1,2,3\nu2,1,2,3\nu3,1,2,3\n");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the cost of user `u0` for model `b` is inf")
            && stderr.contains("finite numbers >= 0"),
        "{stderr}"
    );
    assert!(
        !dir.join("out").exists(),
        "nothing is written for a refused table"
    );
    // One quality above 1 in a table of fractions: an error, not a table divided by 100 whole.
    std::fs::write(
        dir.join("quality.csv"),
        quality.replace("u1,0.4,0.8", "u1,0.4,1.02"),
    )
    .unwrap();
    let output = run("user,a,b,c\nu0,1,2,2\nu1,1,2,3\nu2,1,2,3\nu3,1,2,3\n");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the quality of user `u1` for model `b` is 1.02"),
        "{stderr}"
    );
    std::fs::write(dir.join("quality.csv"), quality).unwrap();
    let output = run("user,a,b,c\nu0,1,,2\nu1,1,2,0\nu2,1,2,3\nu3,1,2,3\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("note: 2 cost cells of known qualities were empty or 0"),
        "{stderr}"
    );
    assert!(dir.join("out").join("summary.json").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_policies_and_missing_data_are_clear_errors() {
    let dir = scratch_dir("errors");
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", "synthetic:0.5,0.1"])
        .args(["--policies", "hybrid,nonsense", "--repeats", "1"])
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown policy `nonsense`"));
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", "synthetic:0.5,0.1"])
        .args(["--line8", "largest", "--repeats", "1"])
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid value 'largest'") && stderr.contains("expected-improvement"),
        "{stderr}"
    );
    // A bad value caught after parsing: one `error:` line with its cause, no backtrace even when
    // the environment asks for backtraces.
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", "synthetic:0.5,0.1"])
        .args(["--repeats", "0"])
        .arg("--out")
        .arg(dir.join("out"))
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("--repeats must be at least 1"),
        "{stderr}"
    );
    assert!(!stderr.contains("backtrace"), "{stderr}");
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", "synthetic:0.5,0.1"])
        .args(["--history-covariance", "1.5", "--repeats", "1"])
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("got `1.5`") && stderr.contains("cross_validated"),
        "{stderr}"
    );
    assert!(
        !dir.join("out").exists(),
        "nothing is written for a refused run"
    );
    let output = easeml()
        .args([
            "bench",
            "scheduler",
            "--dataset",
            "delgado179",
            "--repeats",
            "1",
        ])
        .arg("--data-dir")
        .arg(dir.join("absent"))
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Optuna for its TPE peer (its GP sampler, which needs torch, is not asked for here).
const OPTUNA_PACKAGES: &[&str] = &["optuna==5.0.0"];

/// A Python with optuna: `$EASEML_PEER_PYTHON`, else a venv of the test's own under the target dir
/// ([`OPTUNA_PACKAGES`] from PyPI, made once); `None` (after `missing_part`, which fails the test
/// under `cargo xtask test`) when none can be had.
fn optuna_python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os("EASEML_PEER_PYTHON") {
        return Some(PathBuf::from(python));
    }
    match easeml_test_support::pypi_venv(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "optuna-venv",
        OPTUNA_PACKAGES,
    ) {
        Ok(venv) => Some(venv.join("bin/python")),
        Err(why) => {
            easeml_test_support::missing_part(
                "the Optuna peers' test",
                "a Python with optuna",
                &why,
                "It installs optuna from PyPI into a venv under the target dir (python3 with venv: `cargo xtask setup`), or set EASEML_PEER_PYTHON",
            );
            None
        }
    }
}

#[test]
fn optuna_peers_run_over_the_same_splits() {
    let Some(python) = optuna_python() else {
        return;
    };
    let dir = scratch_dir("peers");
    let rows: Vec<String> = (0..6)
        .map(|user| {
            let row: Vec<String> = (0..6)
                .map(|model| format!("{:.2}", 0.4 + ((user * 5 + model * 7) % 11) as f64 / 20.0))
                .collect();
            row.join(" ")
        })
        .collect();
    std::fs::write(dir.join("quality.txt"), rows.join("\n")).unwrap();
    let spec = format!("matrix:{}", dir.join("quality.txt").display());
    let output = easeml()
        .env("EASEML_PEER_PYTHON", python)
        .args(["bench", "scheduler", "--dataset", &spec])
        .args(["--repeats", "2", "--test-users", "3"])
        .args(["--policies", "round_robin,optuna_tpe"])
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap())
            .unwrap();
    assert!(summary["policies"]["optuna_tpe"]["final_mean_loss"].is_number());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn more_test_users_than_the_table_allows_are_capped_with_a_note() {
    let dir = scratch_dir("cap");
    let rows = ["0.5 0.6 0.7", "0.6 0.5 0.9", "0.7 0.8 0.6", "0.9 0.6 0.5"];
    std::fs::write(dir.join("quality.txt"), rows.join("\n")).unwrap();
    let spec = format!("matrix:{}", dir.join("quality.txt").display());
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", &spec])
        .args(["--repeats", "1", "--test-users", "10"])
        .args(["--policies", "round_robin"])
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("allows 2 test users here, not 10")
            && stderr.contains("at least two users must be left to build the kernel"),
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["test_users"], 2);
    // Too few users for any replay: the error alone, no note about test users before it.
    std::fs::write(dir.join("two.txt"), rows[..2].join("\n")).unwrap();
    let spec = format!("matrix:{}", dir.join("two.txt").display());
    let output = easeml()
        .args(["bench", "scheduler", "--dataset", &spec])
        .args(["--repeats", "1", "--policies", "round_robin"])
        .arg("--out")
        .arg(dir.join("out2"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        format!(
            "error: data set: `{}` has 2 users; the replay needs at least 3",
            "two.txt"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}
