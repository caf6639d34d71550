//! `easeml bench trainer`: its help, a `--quick` run on the CPU (the Python side included: the torch
//! venv's python, as `cargo xtask env` sets it up), and the libtorch linking of the `easeml` binary.
//! No timing thresholds: speed targets live in the benchmark's output, not in tests.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "easeml-cli-trainer-test-{}-{name}",
        std::process::id()
    ));
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
        .args(["bench", "trainer", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--device",
        "--models",
        "--batch",
        "--threads",
        "--rounds",
        "--python",
        "--out",
        "--quick",
        "--mixed-precision",
        "--size",
        "--peer",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
    assert!(!help.contains("--memory-child"), "{help}");
}

#[test]
fn a_quick_cpu_run_reports_positive_throughputs_and_the_memory_check() {
    let dir = scratch_dir("quick");
    let out = dir.join("out");
    let output = easeml()
        .args(["bench", "trainer", "--quick", "--device", "cpu"])
        .args(["--threads", "2", "--size", "8,16", "--peer", "eager,amp"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("resnet18"), "{stdout}");
    assert!(out.join("throughput.svg").is_file());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["device"], "cpu");
    assert_eq!(summary["quick"], true);
    let rows = summary["throughput"].as_array().unwrap();
    let models: Vec<&str> = rows
        .iter()
        .map(|row| row["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["resnet18", "small_cnn", "resnet18", "small_cnn"]);
    let sizes: Vec<i64> = rows
        .iter()
        .map(|row| row["size"].as_i64().unwrap())
        .collect();
    assert_eq!(sizes, [8, 8, 16, 16]);
    // The interface of record: `rust.<model>` and `peers.<peer>.<model>` (the first size), and
    // every size under `by_size`.
    assert_eq!(summary["sizes"], serde_json::json!([8, 16]));
    for size in ["8", "16"] {
        let at = &summary["by_size"][size];
        for model in ["resnet18", "small_cnn"] {
            for key in ["train", "infer"] {
                let rust = at["rust"][model][key].as_f64().unwrap_or(f64::NAN);
                assert!(rust > 0.0, "rust {model} {key} at {size}: {summary:#}");
                for peer in ["eager", "amp"] {
                    let value = at["peers"][peer][model][key].as_f64().unwrap_or(f64::NAN);
                    assert!(value > 0.0, "{peer} {model} {key} at {size}: {summary:#}");
                }
            }
            assert!(
                at["peers"]["amp"][model]["warmup_seconds"]
                    .as_f64()
                    .unwrap()
                    >= 0.0
            );
        }
    }
    assert_eq!(summary["rust"], summary["by_size"]["8"]["rust"]);
    assert_eq!(summary["peers"], summary["by_size"]["8"]["peers"]);
    // The table's Python column is the first peer's.
    assert_eq!(
        rows[0]["python"]["train"],
        summary["peers"]["eager"]["resnet18"]["train"]
    );
    for row in rows {
        for side in ["rust", "python"] {
            for key in ["train", "infer"] {
                let value = row[side][key].as_f64().unwrap_or(f64::NAN);
                assert!(value > 0.0, "{side} {key} of {}: {value}", row["model"]);
            }
        }
        assert!(row["ratio"]["train"].as_f64().unwrap() > 0.0);
    }
    // The test runs under the same environment as the build, so both sides use one torch install.
    assert_eq!(summary["torch"]["same_install"], true, "{summary:#}");
    let memory = &summary["memory"];
    assert_eq!(memory["examples"], 500);
    assert!(memory["bound_bytes"].as_u64().unwrap() > 0);
    assert!(
        memory["peak_rss_bytes"].as_u64().unwrap()
            >= memory["baseline_rss_bytes"].as_u64().unwrap()
    );
    assert!(memory["ratio"].as_f64().unwrap().is_finite());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The stderr of `easeml bench trainer --quick ARGS`, which must fail.
fn refused(args: &[&str]) -> String {
    let output = easeml()
        .args(["bench", "trainer", "--quick"])
        .args(args)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn bad_models_and_devices_are_clear_errors() {
    assert!(refused(&["--models", "vgg"]).contains("unknown model `vgg`"));
    assert!(refused(&["--device", "tpu"]).contains("bad device `tpu`"));
    assert!(
        refused(&["--size", "32,0", "--no-python"]).contains("--size must be positive (got 0)")
    );
    assert!(refused(&["--batch", "0", "--no-python"]).contains("--batch must be positive (got 0)"));
    assert!(refused(&["--width", "0", "--no-python"]).contains("--width must be positive (got 0)"));
    let stderr = refused(&["--peer", "jax"]);
    assert!(
        stderr.contains("jax") && stderr.contains("eager, amp, compile"),
        "{stderr}"
    );
}

/// The `easeml` binary finds libtorch without `LD_LIBRARY_PATH` (RUNPATH to torch-sys's lib dir) and
/// keeps `libtorch_cuda` linked when the install has it (runtime/cli/build.rs).
#[test]
fn the_binary_has_an_rpath_to_libtorch_and_keeps_libtorch_cuda() {
    let Some(lib_dir) = option_env!("EASEML_LIBTORCH_LIB") else {
        panic!("build.rs did not see easeml-trainer's lib dir (DEP_EASEML_TORCH_LIBTORCH_LIB)");
    };
    let exe = env!("CARGO_BIN_EXE_easeml");
    let output = Command::new("readelf")
        .arg("-d")
        .arg(exe)
        .output()
        .expect("readelf (binutils) is needed for this test");
    assert!(output.status.success());
    let dynamic = String::from_utf8_lossy(&output.stdout);
    let rpath_line = dynamic
        .lines()
        .find(|line| line.contains("(RUNPATH)") || line.contains("(RPATH)"))
        .unwrap_or_else(|| panic!("no rpath in {exe}:\n{dynamic}"));
    assert!(rpath_line.contains(lib_dir), "{rpath_line} lacks {lib_dir}");
    let needed = |name: &str| {
        dynamic
            .lines()
            .any(|line| line.contains("(NEEDED)") && line.contains(&format!("[{name}]")))
    };
    assert!(needed("libtorch_cpu.so"), "{dynamic}");
    if Path::new(lib_dir).join("libtorch_cuda.so").exists() {
        assert!(
            needed("libtorch_cuda.so"),
            "libtorch_cuda.so is not NEEDED:\n{dynamic}"
        );
    }
}

#[test]
fn mixed_precision_on_the_cpu_follows_its_bfloat16_arithmetic() {
    let dir = scratch_dir("mixed");
    let out = dir.join("out");
    let output = easeml()
        .args([
            "bench",
            "trainer",
            "--quick",
            "--device",
            "cpu",
            "--threads",
            "2",
        ])
        .args(["--size", "8", "--mixed-precision", "--no-memory"])
        .args(["--run-examples", "40", "--run-epochs", "1"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !easeml_trainer::precision::cpu_native_bf16() {
        assert!(!output.status.success());
        assert!(stderr.contains("avx512_bf16"), "{stderr}");
        assert!(stderr.contains("drop --mixed-precision"), "{stderr}");
        return;
    }
    assert!(output.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["mixed_precision_type"], "bfloat16");
    let rows = summary["throughput"].as_array().unwrap();
    let mixed: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|row| row["mixed_precision"] == true)
        .collect();
    assert_eq!(mixed.len(), 2, "{summary:#}");
    for row in mixed {
        // The Python side autocasts to the same type (`--amp bfloat16`).
        assert!(row["python"]["train"].as_f64().unwrap() > 0.0, "{row:#}");
    }
    let runs = summary["training_runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["mixed_precision"], true);
    assert!(runs[1]["images_per_second"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}
