//! `easeml bench mop --simulate` end to end with small numbers (the summary's keys, the plots) and
//! its refusals of bad arguments; `--real` with two models of one epoch (every mode trained, the
//! summary's keys).

use std::path::PathBuf;
use std::process::{Command, Output};

fn easeml() -> Command {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
}

fn out_dir(name: &str) -> PathBuf {
    let out =
        std::env::temp_dir().join(format!("easeml-cli-test-{}-mop-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    out
}

fn mop(args: &[&str], out: &PathBuf) -> Output {
    easeml()
        .args(["bench", "mop"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn help_documents_the_interface() {
    let output = easeml().args(["bench", "mop", "--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--simulate",
        "--models",
        "--workers",
        "--heterogeneous",
        "--seeds",
        "--epochs",
        "--copy-seconds-per-partition",
        "--sweep",
        "--out",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn the_interface_of_record_writes_the_summary() {
    let out = out_dir("record");
    let output = mop(
        &[
            "--simulate",
            "--models",
            "8",
            "--workers",
            "4",
            "--heterogeneous",
            "--seeds",
            "3",
            "--epochs",
            "2",
            "--copy-seconds-per-partition",
            "1.5",
        ],
        &out,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for name in [
        "mop_randomized",
        "mop_epoch_first",
        "task_parallel",
        "round_robin",
    ] {
        assert!(stdout.contains(name), "{stdout}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let parameters = &summary["parameters"];
    assert_eq!(parameters["models"], 8);
    assert_eq!(parameters["workers"], 4);
    assert_eq!(parameters["epochs"], 2);
    assert_eq!(parameters["heterogeneous"], true);
    assert_eq!(parameters["seeds"], 3);
    assert_eq!(parameters["copy_seconds_per_partition"], 1.5);
    for name in [
        "mop_randomized",
        "mop_epoch_first",
        "task_parallel",
        "round_robin",
    ] {
        let entry = &summary["strategies"][name];
        let ratio = &entry["makespan_over_lower_bound"];
        let (mean, max) = (
            ratio["mean"].as_f64().unwrap(),
            ratio["max"].as_f64().unwrap(),
        );
        assert!(mean > 0.0 && max >= mean, "{name}: {ratio}");
        if name != "task_parallel" {
            assert!(mean >= 1.0 - 1e-9, "{name} beats the lower bound: {mean}");
        }
        assert!(entry["partitions_per_worker"].is_u64(), "{name}");
    }
    assert_eq!(
        summary["strategies"]["task_parallel"]["partitions_per_worker"],
        4
    );
    assert_eq!(
        summary["strategies"]["mop_randomized"]["partitions_per_worker"],
        1
    );
    assert_eq!(summary["strategies"]["task_parallel"]["copy_seconds"], 4.5);
    assert!(
        summary["strategies"]["task_parallel"]["makespan_with_copy_over_lower_bound"]["mean"]
            .is_f64()
    );
    assert_eq!(summary["per_seed"].as_array().unwrap().len(), 3);
    assert!(summary.get("sweep").is_none());
    for file in ["makespan.svg", "makespan.png"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_sweep_covers_several_model_counts() {
    let out = out_dir("sweep");
    let output = mop(
        &[
            "--simulate",
            "--models",
            "4",
            "--workers",
            "2",
            "--seeds",
            "2",
            "--epochs",
            "2",
            "--sweep",
        ],
        &out,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let models: Vec<u64> = summary["sweep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["models"].as_u64().unwrap())
        .collect();
    assert_eq!(models, vec![1, 2, 4, 8, 16]);
    assert!(
        summary["sweep"][0]["strategies"]["mop_randomized"]["makespan_over_lower_bound"]["mean"]
            .is_f64()
    );
    for file in ["sweep.svg", "sweep.png"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = out_dir("bad");
    for (args, expected) in [
        (
            vec!["--simulate", "--models", "0", "--workers", "4"],
            "--models must be at least 1",
        ),
        (
            vec!["--simulate", "--models", "4", "--workers", "0"],
            "--workers must be at least 1",
        ),
        (
            vec![
                "--simulate",
                "--models",
                "4",
                "--workers",
                "2",
                "--seeds",
                "0",
            ],
            "--seeds must be at least 1",
        ),
        (
            vec!["--simulate", "--models", "100000", "--workers", "1000"],
            "must be at most",
        ),
        (
            vec!["--models", "4", "--workers", "2"],
            "say how: `easeml bench mop --simulate`",
        ),
        (
            vec!["--real", "--models", "2", "--workers", "1"],
            "--real needs --models K >= 1, --epochs E >= 1 and --workers P >= 2",
        ),
        (
            vec!["--real", "--simulate", "--models", "2", "--workers", "2"],
            "cannot be used with",
        ),
        (
            vec![
                "--real",
                "--models",
                "2",
                "--workers",
                "2",
                "--examples",
                "99999999999",
            ],
            "at most 1000 models on at most 1000000 examples",
        ),
        (
            vec!["--real", "--models", "100000", "--workers", "2"],
            "at most 1000 models",
        ),
        (
            vec![
                "--simulate",
                "--models",
                "4",
                "--workers",
                "2",
                "--copy-seconds-per-partition=-1",
            ],
            "--copy-seconds-per-partition must be a non-negative number",
        ),
        (
            vec!["--simulate", "--models", "-3", "--workers", "2"],
            "--models",
        ),
        (
            vec![
                "--simulate",
                "--models",
                "4",
                "--workers",
                "2",
                "--devices",
                "cpu",
            ],
            "--real",
        ),
        (
            vec![
                "--real",
                "--models",
                "2",
                "--workers",
                "2",
                "--devices",
                "tpu:0",
            ],
            "--devices: ",
        ),
    ] {
        let output = mop(&args, &out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert!(
        !out.join("summary.json").exists(),
        "a refused run wrote a summary"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_real_run_trains_every_mode_and_writes_the_summary() {
    let out = out_dir("real");
    let output = easeml()
        .args(["bench", "mop", "--real", "--models", "2", "--workers", "2"])
        .args([
            "--epochs",
            "1",
            "--examples",
            "200",
            "--devices",
            "cpu",
            "--out",
        ])
        .arg(&out)
        .env("EASEML_DEVICE", "cpu")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for (mode, copies) in [
        ("sequential", 1.0),
        ("task_parallel", 2.0),
        ("mop", 1.0),
        ("data_parallel", 1.0),
    ] {
        let entry = &summary["modes"][mode];
        assert!(entry["wall_seconds"].as_f64().unwrap() > 0.0, "{summary}");
        assert_eq!(entry["qualities"].as_array().unwrap().len(), 2, "{summary}");
        assert_eq!(entry["data_copies"].as_f64(), Some(copies), "{summary}");
    }
    assert_eq!(summary["devices"], serde_json::json!(["cpu"]), "{summary}");
    // The scratch stores are gone.
    assert!(!out.join("stores").exists());
    let _ = std::fs::remove_dir_all(&out);
}
