//! `cargo xtask demo`: the main job end to end on the embedded default, as DESIGN.md tells it.
//!
//! Four example apps of three kinds (tabular, images, sequences) are compiled by `easemlc`, their
//! generated crates built, and fed real data from files on disk through their own `<app>-feed`
//! binaries; then ONE scheduler (`easeml train --budget --workers N`, one worker per core by
//! default) trains candidates across all of them, each
//! app's `<app>-infer` answers its held-out examples (and prints the held-out accuracy), each status
//! report is printed, and `target/demo/quality.svg` plots every app's best quality over time
//! (`held_out.tsv` keeps the held-out scores; `--tuner trimtuner` writes to `target/demo-trimtuner`). The
//! real data comes from packages that ship it (`demo_data.py`): scikit-learn's bundled data sets, and
//! the UCI Japanese Vowels data inside sktime's wheel (downloaded once from PyPI, not installed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Result;

use crate::{cargo, run_step, run_step_capturing_stderr, setup};

/// The demo's apps, by example stem (`examples/<stem>.eml`): two tabular tasks, images, sequences.
const DEMO_APPS: [&str; 4] = [
    "breast_cancer",
    "wine_cultivar",
    "handwritten_digits",
    "vowel_speakers",
];

/// The script that writes every app's feed files.
const DEMO_DATA: &str = include_str!("demo_data.py");

/// The wheel whose bundled data files hold the Japanese Vowels data (only the wheel is downloaded).
const SKTIME_WHEEL: &str = "sktime-1.2.0-py3-none-any.whl";

/// The most local workers the demo starts by default (four small apps feed no more).
const MAX_DEFAULT_WORKERS: usize = 4;

/// Runs the demo with `budget` (e.g. `3m`) for the multi-tenant training, networks tuned by
/// `tuner` (`grid` or `trimtuner`), `workers` runs at once (default: one per core, at most
/// [`MAX_DEFAULT_WORKERS`]). The store and outputs of a `trimtuner` run go to
/// `target/demo-trimtuner`, so the two can be compared side by side.
pub fn run(root: &Path, budget: &str, tuner: &str, workers: Option<usize>) -> Result<()> {
    if !["grid", "trimtuner"].contains(&tuner) {
        anyhow::bail!("unknown tuner `{tuner}` (known: grid, trimtuner)");
    }
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    let (workers, why) = match workers {
        Some(0) => anyhow::bail!(
            "--workers 0 would wait for workers started elsewhere; the demo needs at least 1"
        ),
        Some(count) => (count, "as asked".to_owned()),
        None => {
            let count = cores.min(MAX_DEFAULT_WORKERS);
            (
                count,
                format!("one per core of {cores}, at most {MAX_DEFAULT_WORKERS}"),
            )
        }
    };
    eprintln!("==> the demo trains with {workers} worker(s) ({why})");
    let started = Instant::now();
    let torch = setup()?;
    let python = torch.python();
    let demo_dir = match tuner {
        "grid" => root.join("target/demo"),
        other => root.join(format!("target/demo-{other}")),
    };
    let data_dir = demo_dir.join("data");
    let home = demo_dir.join("home");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&data_dir)?;
    export_data(&python, &demo_dir, &data_dir)?;
    run_step(
        "build easemlc and easeml",
        cargo(&[
            "build",
            "-p",
            "easeml-compiler",
            "--bin",
            "easemlc",
            "-p",
            "easeml-cli",
            "--bin",
            "easeml",
        ]),
    )?;
    let easemlc = root.join("target/debug/easemlc");
    let easeml = root.join("target/debug/easeml");
    let runtime = std::fs::canonicalize(root.join("runtime/core"))?;
    // The workspace's own target dir: the generated crates use the same profiles, so the runtime and
    // the libtorch bindings built for `easeml` are reused, not built again.
    let target = root.join("target");
    for app in DEMO_APPS {
        let example = root.join(format!("examples/{app}.eml"));
        let mut explain = Command::new(&easemlc);
        explain.arg("explain").arg(&example);
        run_step(&format!("easemlc explain examples/{app}.eml"), explain)?;
        let crate_dir = demo_dir.join("apps").join(app);
        let mut build = Command::new(&easemlc);
        build
            .arg(&example)
            .arg("-o")
            .arg(&crate_dir)
            .arg("--runtime-path")
            .arg(&runtime);
        run_step(&format!("easemlc examples/{app}.eml"), build)?;
        std::fs::copy(root.join("Cargo.lock"), crate_dir.join("Cargo.lock"))?;
        let mut cargo_build = cargo(&["build", "--offline", "--manifest-path"]);
        cargo_build
            .arg(crate_dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target);
        run_step(
            &format!("cargo build the generated `{app}` crate"),
            cargo_build,
        )?;
    }
    let binary = |name: &str| target.join("debug").join(name);
    for app in DEMO_APPS {
        let mut feed = Command::new(binary(&format!("{app}-feed")));
        feed.arg(data_dir.join(format!("{app}.train.txt")))
            .env("EASEML_HOME", &home);
        run_step(&format!("{app}-feed {app}.train.txt"), feed)?;
    }
    let mut train = Command::new(&easeml);
    train
        .args([
            "train",
            "--budget",
            budget,
            "--max-run",
            "45s",
            "--tuner",
            tuner,
            "--workers",
            &workers.to_string(),
            "--plot",
        ])
        .arg(&demo_dir)
        .arg("--data")
        .arg(&home);
    run_step(
        &format!(
            "easeml train --budget {budget} --tuner {tuner} --workers {workers} (one scheduler over the {} apps)",
            DEMO_APPS.len()
        ),
        train,
    )?;
    let mut scores = Vec::new();
    for app in DEMO_APPS {
        let answers = demo_dir.join(format!("{app}.answers.txt"));
        let mut infer = Command::new(binary(&format!("{app}-infer")));
        infer
            .arg(data_dir.join(format!("{app}.heldout.txt")))
            .env("EASEML_HOME", &home)
            .stdout(std::fs::File::create(&answers)?);
        let stderr = run_step_capturing_stderr(
            &format!("{app}-infer {app}.heldout.txt > {}", answers.display()),
            infer,
        )?;
        let score = held_out_score(&stderr);
        scores.push((app, score));
        let mut status = Command::new(binary(app));
        status.env("EASEML_HOME", &home);
        run_step(&format!("{app} (the status report)"), status)?;
    }
    eprintln!("==> held-out results (the examples no app was fed), tuner {tuner}");
    let mut table = String::new();
    for (app, score) in &scores {
        eprintln!("    {app:<20} {score}");
        table.push_str(&format!("{app}\t{score}\n"));
    }
    std::fs::write(demo_dir.join("held_out.tsv"), table)?;
    eprintln!(
        "==> demo done in {:.1} min: the store is {}; the answers and quality.svg / quality.png / \
         quality.csv (every app's best quality over time) are in {}",
        started.elapsed().as_secs_f64() / 60.0,
        home.display(),
        demo_dir.display()
    );
    Ok(())
}

/// Downloads sktime's wheel once (for its bundled data files) and runs `demo_data.py`.
fn export_data(python: &Path, demo_dir: &Path, data_dir: &Path) -> Result<()> {
    let has_sklearn = Command::new(python)
        .args(["-c", "import sklearn"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_sklearn {
        let mut pip = Command::new(python);
        pip.args(["-m", "pip", "install", "--quiet", "scikit-learn"]);
        run_step("install scikit-learn (for its bundled real data sets)", pip)?;
    }
    let downloads = demo_dir.join("downloads");
    let wheel: PathBuf = downloads.join(SKTIME_WHEEL);
    if !wheel.is_file() {
        let mut pip = Command::new(python);
        pip.args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "sktime==1.2.0",
            "--dest",
        ])
        .arg(&downloads);
        run_step(
            "download sktime's wheel (8 MB; for the Japanese Vowels data it ships)",
            pip,
        )?;
    }
    let script = demo_dir.join("demo_data.py");
    std::fs::write(&script, DEMO_DATA)?;
    let mut export = Command::new(python);
    export.arg(&script).arg(data_dir).arg(&wheel);
    run_step("write the real data sets as feed files", export)
}

/// Runs one step whose standard error is passed through; returns its last `accuracy` /
/// `mean squared error` line (what `infer` prints when the inputs carry their true outputs).
/// The last score line an `-infer` binary printed (`...: accuracy ...` or `...: mean squared
/// error ...`).
fn held_out_score(stderr: &str) -> String {
    stderr
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(_, rest)| rest)
        .rfind(|rest| rest.starts_with("accuracy") || rest.starts_with("mean squared error"))
        .unwrap_or("(no score printed)")
        .to_owned()
}
