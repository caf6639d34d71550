//! `easeml bench quality` end to end on two tiny tasks written by the test (a tabular one and a
//! variable-length sequence one, `--peers knn1`, knn1's accuracy checked against this file's own
//! 1-nearest neighbour; the budget is generous for a loaded CI machine, but the engine stops as
//! soon as every candidate is trained: seconds), a regression task, FLAML (where its venv is) and
//! every error path of the command: each must be a clear error naming the task folder and what is
//! wrong, found before any training.
//!
//! The command runs the real `easemlc`: it is looked for beside `easeml` and built there with
//! `cargo build -p easeml-compiler --bin easemlc` when missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "easeml-cli-test-{}-quality-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `easemlc` binary beside `easeml` (built once when missing).
fn easemlc() -> &'static Path {
    static EASEMLC: OnceLock<PathBuf> = OnceLock::new();
    EASEMLC.get_or_init(|| {
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_easeml"));
        let path = exe
            .parent()
            .unwrap()
            .join(format!("easemlc{}", std::env::consts::EXE_SUFFIX));
        if !path.is_file() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-p", "easeml-compiler", "--bin", "easemlc"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cannot run cargo to build easemlc");
            assert!(status.success(), "building easemlc failed");
        }
        assert!(path.is_file(), "no easemlc at {}", path.display());
        path
    })
}

fn bench(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "quality"])
        .args(args)
        .arg("--out")
        .arg(out)
        .env("EASEML_EASEMLC", easemlc())
        .env("EASEML_DEVICE", "cpu")
        .env_remove("EASEML_PEER_PYTHON")
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A tiny deterministic generator (the test's data must not depend on a crate's RNG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `blobs`: two overlapping clouds in 2-D. Returns (lines, inputs, labels).
fn blobs(rng: &mut Lcg, n: usize) -> (Vec<String>, Vec<Vec<f64>>, Vec<String>) {
    let mut lines = Vec::new();
    let mut inputs = Vec::new();
    let mut labels = Vec::new();
    for i in 0..n {
        let (label, centre) = if i % 2 == 0 {
            ("left", -0.6)
        } else {
            ("right", 0.6)
        };
        let x = [centre + 2.0 * (rng.next() - 0.5), 2.0 * (rng.next() - 0.5)];
        let x: Vec<f64> = x.iter().map(|v| (v * 1000.0).round() / 1000.0).collect();
        lines.push(format!("[{}, {}] {label}", x[0], x[1]));
        inputs.push(vec![x[0], x[1]]);
        labels.push(label.to_owned());
    }
    (lines, inputs, labels)
}

/// `waves`: rising or falling series of 3 to 7 readings, noisy. Returns (lines, series, labels).
fn waves(rng: &mut Lcg, n: usize) -> (Vec<String>, Vec<Vec<f64>>, Vec<String>) {
    let mut lines = Vec::new();
    let mut inputs = Vec::new();
    let mut labels = Vec::new();
    for i in 0..n {
        let rising = i % 2 == 0;
        let length = 3 + (rng.next() * 5.0) as usize;
        let series: Vec<f64> = (0..length)
            .map(|t| {
                let trend = t as f64 / (length - 1) as f64;
                let value = if rising { trend } else { 1.0 - trend } + 1.2 * (rng.next() - 0.5);
                (value * 1000.0).round() / 1000.0
            })
            .collect();
        let label = if rising { "rising" } else { "falling" };
        let records: Vec<String> = series
            .iter()
            .map(|v| format!("{{\"value\": [{v}]}}"))
            .collect();
        lines.push(format!(
            "{{\"input\": [{}], \"output\": \"{label}\"}}",
            records.join(", ")
        ));
        inputs.push(series);
        labels.push(label.to_owned());
    }
    (lines, inputs, labels)
}

fn write_task(dir: &Path, name: &str, eml: &str, train: &[String], test: &[String]) -> PathBuf {
    let task = dir.join(name);
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join(format!("{name}.eml")), eml).unwrap();
    std::fs::write(task.join("train.txt"), train.join("\n") + "\n").unwrap();
    std::fs::write(task.join("test.txt"), test.join("\n") + "\n").unwrap();
    task
}

const BLOBS_EML: &str = "Input = [2]\nOutput = [2]\nlabels = [left, right]\n";
const WAVES_EML: &str = "type Input\n  value :: Tensor[1]\n  next :: Nullable{Input}\nend\nOutput = [2]\nlabels = [rising, falling]\n";

/// Linear resampling of a series to `length` points (this test's own, as the command documents).
fn resample(series: &[f64], length: usize) -> Vec<f64> {
    let n = series.len();
    (0..length)
        .map(|i| {
            if n == 1 || length == 1 {
                return series[0];
            }
            let position = i as f64 * (n - 1) as f64 / (length - 1) as f64;
            let low = position.floor() as usize;
            let high = (low + 1).min(n - 1);
            let weight = position - low as f64;
            series[low] + (series[high] - series[low]) * weight
        })
        .collect()
}

/// The accuracy of 1-nearest neighbour (Euclidean, the first on ties).
fn knn1_accuracy(
    train: &[Vec<f64>],
    train_labels: &[String],
    test: &[Vec<f64>],
    test_labels: &[String],
) -> f64 {
    let mut correct = 0;
    for (query, truth) in test.iter().zip(test_labels) {
        let mut best = (0, f64::INFINITY);
        for (index, row) in train.iter().enumerate() {
            let distance: f64 = row.iter().zip(query).map(|(a, b)| (a - b).powi(2)).sum();
            if distance < best.1 {
                best = (index, distance);
            }
        }
        if &train_labels[best.0] == truth {
            correct += 1;
        }
    }
    correct as f64 / test.len() as f64
}

#[test]
fn help_documents_the_interface() {
    let output = Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "quality", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--task",
        "--budget",
        "--peers",
        "--out",
        "--repeat",
        "--no-ensembles",
        "--no-set-aside",
        "knn1",
        "flaml",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn two_tiny_tasks_are_trained_answered_and_compared_with_knn1() {
    let dir = scratch_dir("end-to-end");
    let mut rng = Lcg(7);
    let (blob_train, blob_x, blob_y) = blobs(&mut rng, 40);
    let (blob_test, blob_test_x, blob_test_y) = blobs(&mut rng, 16);
    let (wave_train, wave_x, wave_y) = waves(&mut rng, 24);
    let (wave_test, wave_test_x, wave_test_y) = waves(&mut rng, 12);
    let blobs_dir = write_task(&dir, "blobs", BLOBS_EML, &blob_train, &blob_test);
    let waves_dir = write_task(&dir, "waves", WAVES_EML, &wave_train, &wave_test);
    let out = dir.join("out");
    let output = bench(
        &[
            "--task",
            blobs_dir.to_str().unwrap(),
            "--task",
            waves_dir.to_str().unwrap(),
            "--budget",
            "30s",
            "--peers",
            "knn1",
        ],
        &out,
    );
    let log = stderr(&output);
    assert!(output.status.success(), "{log}");
    // Progress on stderr, the table on stdout.
    assert!(log.contains("==> blobs: fed 40 examples"), "{log}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(
        "| task | metric | train | test | easeml | expected [95%] | easeml model | best family | knn1 |"
    ));
    for file in [
        "summary.json",
        "summary.md",
        "scores.svg",
        "scores.png",
        "quality.svg",
        "quality.png",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    // The best validation quality over the session, per app.
    let quality_svg = std::fs::read_to_string(out.join("quality.svg")).unwrap();
    assert!(quality_svg.contains("<svg"), "{quality_svg}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["budget_seconds"], 30.0);
    assert_eq!(summary["peers"], serde_json::json!(["knn1"]));
    // The mean rank across the two tasks, for easeml and each peer (1 to 2 with two methods).
    assert_eq!(summary["repeat"], 1);
    for method in ["easeml", "knn1"] {
        let rank = summary["mean_rank"][method].as_f64().expect("a mean rank");
        assert!((1.0..=2.0).contains(&rank), "{summary}");
        assert_eq!(summary["mean_rank_std"][method], 0.0);
    }
    assert!(
        stdout.contains("Mean rank across tasks (1 = best; 1 repeat): easeml "),
        "{stdout}"
    );
    let tasks = summary["tasks"].as_object().unwrap();
    assert_eq!(tasks.len(), 2);
    for (app, test_size) in [("blobs", 16), ("waves", 12)] {
        let entry = &summary["tasks"][app];
        assert_eq!(entry["metric"], "accuracy");
        assert_eq!(entry["test_examples"], test_size);
        let easeml = entry["easeml"].as_f64().expect("easeml's accuracy");
        assert!((0.0..=1.0).contains(&easeml), "{entry}");
        assert!(
            entry["easeml_model"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert!(entry.get("flaml").is_none(), "flaml was not asked for");
        // What the app reported beside the test score: its validation accuracy, the accuracy it
        // expects on new examples with the 95% interval around it, and whether the test accuracy
        // fell inside.
        let validation = entry["easeml_validation"]
            .as_f64()
            .expect("a validation quality");
        assert!((0.0..=1.0).contains(&validation), "{entry}");
        let expected = entry["easeml_expected"]
            .as_f64()
            .expect("an expected quality");
        let [low, high] = [0, 1].map(|end| entry["easeml_interval"][end].as_f64().unwrap());
        assert!(low <= expected && expected <= high, "{entry}");
        assert_eq!(
            entry["easeml_within_interval"].as_bool(),
            Some(low <= easeml && easeml <= high),
            "{entry}"
        );
    }
    // Every family's own model on the test set: the served model held against the best.
    let mut judged = 0;
    for entry in tasks.values() {
        let families = entry["easeml_families"].as_object().expect("families");
        assert!(families.len() >= 2, "{entry}");
        let mut best: Option<(&String, f64)> = None;
        for (family, scored) in families {
            assert!(!family.contains('+'), "a family, not a variant: {family}");
            assert!(
                scored["candidate"]
                    .as_str()
                    .is_some_and(|candidate| candidate.split('+').next() == Some(family)),
                "{entry}"
            );
            assert!(
                scored["run"].as_u64().is_some_and(|run| run >= 1),
                "{entry}"
            );
            let score = scored["score"].as_f64().expect("every family answers");
            assert!((0.0..=1.0).contains(&score), "{entry}");
            if best.is_none_or(|(_, top)| score > top) {
                best = Some((family, score));
            }
            // The served single run, loaded by itself, scores what the served model scored.
            if scored["candidate"] == entry["easeml_model"] {
                assert_eq!(scored["score"], entry["easeml"], "{entry}");
            }
        }
        let (family, top) = best.unwrap();
        assert_eq!(entry["easeml_best_family"], family.as_str(), "{entry}");
        let gap = entry["easeml_below_best_family"].as_f64().expect("a gap");
        assert!(
            (gap - (top - entry["easeml"].as_f64().unwrap())).abs() < 1e-12,
            "{entry}"
        );
        judged += 1;
    }
    assert_eq!(summary["best_family"]["judged"], judged);
    assert_eq!(summary["best_family"]["margin"], 0.03);
    assert!(
        stdout.contains("Served model within 0.03 of the best single family's test score: "),
        "{stdout}"
    );
    let within = tasks
        .values()
        .filter(|entry| entry["easeml_within_interval"] == true)
        .count();
    assert_eq!(
        summary["within_interval"],
        serde_json::json!({"within": within, "with_interval": 2})
    );
    assert!(
        stdout.contains(&format!(
            "Test score within the served model's reported 95% interval: {within} of 2"
        )),
        "{stdout}"
    );
    // knn1 on the flattened inputs: the blobs as they are; the waves resampled linearly to the
    // longest training series.
    let expected = knn1_accuracy(&blob_x, &blob_y, &blob_test_x, &blob_test_y);
    assert_eq!(summary["tasks"]["blobs"]["knn1"].as_f64(), Some(expected));
    let longest = wave_x.iter().map(Vec::len).max().unwrap();
    let flatten = |series: &Vec<Vec<f64>>| -> Vec<Vec<f64>> {
        series.iter().map(|s| resample(s, longest)).collect()
    };
    let expected = knn1_accuracy(
        &flatten(&wave_x),
        &wave_y,
        &flatten(&wave_test_x),
        &wave_test_y,
    );
    assert_eq!(summary["tasks"]["waves"]["knn1"].as_f64(), Some(expected));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the command on `tasks` and returns its stderr; it must fail quickly and not panic.
fn fails(args: &[&str], out: &Path) -> String {
    let output = bench(args, out);
    let log = stderr(&output);
    assert!(!output.status.success(), "succeeded:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        !log.contains("training every app"),
        "trained before failing:\n{log}"
    );
    log
}

/// [`fails`] on one task folder with a one-second budget and the knn1 peer.
fn fails_on(task: &Path, out: &Path) -> String {
    fails(
        &[
            "--task",
            task.to_str().unwrap(),
            "--budget",
            "1s",
            "--peers",
            "knn1",
        ],
        out,
    )
}

#[test]
fn bad_task_folders_are_clear_errors() {
    let dir = scratch_dir("folders");
    let out = dir.join("out");
    let good_train = ["[0, 0] left", "[1, 1] right", "[0, 1] left", "[1, 0] right"];
    let good_train: Vec<String> = good_train.iter().map(|s| s.to_string()).collect();
    let good_test = vec!["[0, 0] left".to_owned()];

    let no_eml = dir.join("no_eml");
    std::fs::create_dir_all(&no_eml).unwrap();
    std::fs::write(no_eml.join("train.txt"), "").unwrap();
    std::fs::write(no_eml.join("test.txt"), "").unwrap();
    let log = fails_on(&no_eml, &out);
    assert!(
        log.contains(&format!("task `{}`: no `.eml` file", no_eml.display())),
        "{log}"
    );

    let two = write_task(&dir, "two", BLOBS_EML, &good_train, &good_test);
    std::fs::write(two.join("other.eml"), BLOBS_EML).unwrap();
    let log = fails_on(&two, &out);
    assert!(
        log.contains(&format!(
            "task `{}`: 2 `.eml` files (other.eml, two.eml)",
            two.display()
        )),
        "{log}"
    );

    let no_train = write_task(&dir, "no_train", BLOBS_EML, &good_train, &good_test);
    std::fs::remove_file(no_train.join("train.txt")).unwrap();
    let log = fails_on(&no_train, &out);
    assert!(
        log.contains(&format!("task `{}`: no train.txt", no_train.display())),
        "{log}"
    );

    let no_test = write_task(&dir, "no_test", BLOBS_EML, &good_train, &good_test);
    std::fs::remove_file(no_test.join("test.txt")).unwrap();
    let log = fails_on(&no_test, &out);
    assert!(
        log.contains(&format!("task `{}`: no test.txt", no_test.display())),
        "{log}"
    );

    let missing = dir.join("missing");
    let log = fails_on(&missing, &out);
    assert!(
        log.contains(&format!("task `{}`: not a folder", missing.display())),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_programs_and_lines_are_clear_errors() {
    let dir = scratch_dir("lines");
    let out = dir.join("out");
    let train: Vec<String> = [
        "[0, 0] left",
        "[1, 1] right",
        "[0, 1, 2] left",
        "[1, 0] right",
        "[1, 0]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let test = vec!["[0, 0] left".to_owned()];
    let bad_lines = write_task(&dir, "bad_lines", BLOBS_EML, &train, &test);
    let log = fails_on(&bad_lines, &out);
    assert!(
        log.contains(&format!(
            "task `{}`: 2 bad line(s) in train.txt",
            bad_lines.display()
        )),
        "{log}"
    );
    assert!(
        log.contains("train.txt line 3:") && log.contains("train.txt line 5:"),
        "{log}"
    );

    let good_train: Vec<String> = train[..2].iter().chain(&train[3..4]).cloned().collect();
    let empty_test = write_task(
        &dir,
        "empty_test",
        BLOBS_EML,
        &good_train,
        &["# nothing".to_owned()],
    );
    let log = fails_on(&empty_test, &out);
    assert!(
        log.contains(&format!(
            "task `{}`: test.txt has no examples",
            empty_test.display()
        )),
        "{log}"
    );

    let unlabelled = write_task(
        &dir,
        "unlabelled",
        BLOBS_EML,
        &good_train,
        &["[0, 0]".to_owned()],
    );
    let log = fails_on(&unlabelled, &out);
    assert!(log.contains("test.txt line 1: missing the output"), "{log}");

    let broken = write_task(
        &dir,
        "broken",
        "Input = [2\nOutput = [2]\n",
        &good_train,
        &test,
    );
    let log = fails_on(&broken, &out);
    assert!(
        log.contains(&format!(
            "task `{}`: `broken.eml` does not compile",
            broken.display()
        )),
        "{log}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_are_clear_errors() {
    let dir = scratch_dir("options");
    let out = dir.join("out");
    let train: Vec<String> = ["[0, 0] left", "[1, 1] right", "[0, 1] left", "[1, 0] right"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let task = write_task(
        &dir,
        "blobs",
        BLOBS_EML,
        &train,
        &["[0, 0] left".to_owned()],
    );
    let task = task.to_str().unwrap();

    let log = fails(
        &["--task", task, "--budget", "1s", "--peers", "knn1,svm"],
        &out,
    );
    assert!(
        log.contains("unknown peer `svm` (known: knn1, flaml)"),
        "{log}"
    );

    let log = fails(
        &["--task", task, "--budget", "ten", "--peers", "knn1"],
        &out,
    );
    assert!(log.contains("`ten` is not a duration"), "{log}");
    let log = fails(&["--task", task, "--budget", "0s", "--peers", "knn1"], &out);
    assert!(log.contains("must be positive"), "{log}");

    // FLAML with no usable peer Python: an actionable error before anything is trained.
    let output = Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args([
            "bench", "quality", "--task", task, "--budget", "1s", "--peers", "flaml",
        ])
        .arg("--out")
        .arg(&out)
        .env("EASEML_EASEMLC", easemlc())
        .env("EASEML_PEER_PYTHON", dir.join("no-venv/bin/python"))
        .output()
        .unwrap();
    let log = stderr(&output);
    assert!(
        !output.status.success() && !log.contains("panicked"),
        "{log}"
    );
    assert!(
        log.contains("EASEML_PEER_PYTHON=") && log.contains("does not exist"),
        "{log}"
    );

    // A peer Python without FLAML: says how to install it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let python = dir.join("python-without-flaml");
        std::fs::write(
            &python,
            "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'flaml'\" >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_easeml"))
            .args([
                "bench", "quality", "--task", task, "--budget", "1s", "--out",
            ])
            .arg(&out)
            .env("EASEML_EASEMLC", easemlc())
            .env("EASEML_PEER_PYTHON", &python)
            .output()
            .unwrap();
        let log = stderr(&output);
        assert!(
            !output.status.success() && !log.contains("panicked"),
            "{log}"
        );
        assert!(
            log.contains("cannot import FLAML (ModuleNotFoundError: No module named 'flaml')")
                && log.contains("-m pip install -r")
                && log.contains("requirements-flaml.txt"),
            "{log}"
        );
    }

    // The same app in two task folders.
    let log = fails(
        &[
            "--task", task, "--task", task, "--budget", "1s", "--peers", "knn1",
        ],
        &out,
    );
    assert!(log.contains("both define the app `blobs`"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLAML without its GPU libraries (`flaml[automl]` pulls xgboost with CUDA's NCCL, 800 MB; the
/// CPU build of xgboost is the same module): what the test's own venv installs.
const FLAML_PACKAGES: &[&str] = &[
    "flaml==2.8.0",
    "lightgbm==4.7.0",
    "xgboost-cpu==3.2.0",
    "scikit-learn==1.9.1",
    "pandas==3.1.1",
    "cloudpickle==3.1.3",
];

/// A Python with FLAML: `$EASEML_PEER_PYTHON`, else `bench/peers/.venv` where it has flaml, else a
/// venv of the test's own under the target dir ([`FLAML_PACKAGES`] from PyPI, made once); `None`
/// (after `missing_part`, which fails the test under `cargo xtask test`) when none can be had.
fn flaml_python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os("EASEML_PEER_PYTHON") {
        return Some(PathBuf::from(python));
    }
    let has_flaml = |python: &Path| {
        Command::new(python)
            .args(["-c", "import flaml.automl"])
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let peers =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/.venv/bin/python");
    if has_flaml(&peers) {
        return Some(peers);
    }
    let made = easeml_test_support::pypi_venv(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "flaml-venv",
        FLAML_PACKAGES,
    )
    .map(|venv| venv.join("bin/python"))
    .and_then(|python| {
        if has_flaml(&python) {
            Ok(python)
        } else {
            Err(format!("{} cannot import flaml.automl", python.display()))
        }
    });
    match made {
        Ok(python) => Some(python),
        Err(why) => {
            easeml_test_support::missing_part(
                "the FLAML peer's test",
                "a Python with FLAML",
                &why,
                "It installs FLAML from PyPI into a venv under the target dir (python3 with venv: `cargo xtask setup`), or set EASEML_PEER_PYTHON",
            );
            None
        }
    }
}

/// FLAML end to end: `--peers flaml` answers the test set through a real FLAML run (the FLAML
/// files' parsing is also covered by the unit tests of `bench/src/harness/quality/flaml.rs`).
#[test]
fn flaml_answers_the_test_set_through_a_real_flaml_run() {
    let Some(python) = flaml_python() else {
        return;
    };
    let dir = scratch_dir("flaml");
    let mut rng = Lcg(11);
    let (train, _, _) = blobs(&mut rng, 40);
    let (test, _, _) = blobs(&mut rng, 10);
    let task = write_task(&dir, "blobs", BLOBS_EML, &train, &test);
    let out = dir.join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "quality", "--task"])
        .arg(&task)
        .args(["--budget", "2s", "--peers", "flaml", "--out"])
        .arg(&out)
        .env("EASEML_EASEMLC", easemlc())
        .env("EASEML_DEVICE", "cpu")
        .env("EASEML_PEER_PYTHON", &python)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let entry = &summary["tasks"]["blobs"];
    let flaml = entry["flaml"].as_f64().expect("FLAML's accuracy");
    assert!((0.0..=1.0).contains(&flaml), "{entry}");
    assert!(entry["flaml_model"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(entry.get("knn1").is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A regression app (`Output = [1]`) is scored by R^2, easeml's answers and knn1's alike.
#[test]
fn a_regression_task_is_scored_by_r2() {
    let dir = scratch_dir("regression");
    let mut rng = Lcg(3);
    let mut rows = |n: usize| {
        let mut lines = Vec::new();
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for _ in 0..n {
            let x: Vec<f64> = (0..3)
                .map(|_| ((rng.next() * 2.0 - 1.0) * 1000.0).round() / 1000.0)
                .collect();
            let y = ((2.0 * x[0] - x[1] + 0.5 * x[2] + 0.2 * (rng.next() - 0.5)) * 1000.0).round()
                / 1000.0;
            lines.push(format!("[{}, {}, {}] {y}", x[0], x[1], x[2]));
            xs.push(x);
            ys.push(y);
        }
        (lines, xs, ys)
    };
    let (train, train_x, train_y) = rows(40);
    let (test, test_x, test_y) = rows(15);
    let task = write_task(&dir, "linear", "Input = [3]\nOutput = [1]\n", &train, &test);
    let out = dir.join("out");
    let output = bench(
        &[
            "--task",
            task.to_str().unwrap(),
            "--budget",
            "20s",
            "--peers",
            "knn1",
        ],
        &out,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let entry = &summary["tasks"]["linear"];
    assert_eq!(entry["metric"], "r2");
    let easeml = entry["easeml"].as_f64().expect("easeml's R^2");
    assert!(easeml.is_finite() && easeml <= 1.0, "{entry}");
    // R^2 has a validation quality and an expected one with its interval (the resamples'
    // percentiles; no binomial interval), held to the test score like an accuracy.
    assert!(entry["easeml_validation"].is_f64(), "{entry}");
    let expected = entry["easeml_expected"].as_f64().expect("an expected R^2");
    let [low, high] = [0, 1].map(|end| entry["easeml_interval"][end].as_f64().unwrap());
    assert!(low <= expected && expected <= high, "{entry}");
    assert_eq!(
        entry["easeml_within_interval"].as_bool(),
        Some(low <= easeml && easeml <= high),
        "{entry}"
    );
    let predicted: Vec<f64> = test_x
        .iter()
        .map(|query| {
            let mut best = (0, f64::INFINITY);
            for (index, row) in train_x.iter().enumerate() {
                let distance: f64 = row.iter().zip(query).map(|(a, b)| (a - b).powi(2)).sum();
                if distance < best.1 {
                    best = (index, distance);
                }
            }
            train_y[best.0]
        })
        .collect();
    let mean = test_y.iter().sum::<f64>() / test_y.len() as f64;
    let ss_tot: f64 = test_y.iter().map(|y| (y - mean).powi(2)).sum();
    let ss_res: f64 = test_y
        .iter()
        .zip(&predicted)
        .map(|(y, p)| (y - p).powi(2))
        .sum();
    let knn1 = entry["knn1"].as_f64().unwrap();
    assert!(
        (knn1 - (1.0 - ss_res / ss_tot)).abs() < 1e-5,
        "{knn1} {entry}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLAML failing on a task (here a stand-in interpreter that imports but cannot run the script) is
/// reported and recorded in the summary; the other methods' results are kept.
#[cfg(unix)]
#[test]
fn a_failing_flaml_run_is_recorded_not_fatal() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir("flaml-fails");
    let mut rng = Lcg(5);
    let (train, _, _) = blobs(&mut rng, 20);
    let (test, _, _) = blobs(&mut rng, 6);
    let task = write_task(&dir, "blobs", BLOBS_EML, &train, &test);
    let python = dir.join("python-that-fails");
    std::fs::write(
        &python,
        "#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho 'FLAML blew up' >&2\nexit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "quality", "--task"])
        .arg(&task)
        .args(["--budget", "1s", "--peers", "knn1,flaml", "--out"])
        .arg(&out)
        .env("EASEML_EASEMLC", easemlc())
        .env("EASEML_DEVICE", "cpu")
        .env("EASEML_PEER_PYTHON", &python)
        .output()
        .unwrap();
    let log = stderr(&output);
    assert!(output.status.success(), "{log}");
    assert!(log.contains("warning: blobs: the FLAML peer"), "{log}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let entry = &summary["tasks"]["blobs"];
    assert!(entry["flaml"].is_null(), "{entry}");
    assert!(
        entry["flaml_error"].as_str().unwrap().contains("failed"),
        "{entry}"
    );
    assert!(entry["knn1"].is_number(), "{entry}");
    let _ = std::fs::remove_dir_all(&dir);
}
