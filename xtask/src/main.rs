//! `cargo xtask`: the project's automation, in Rust instead of shell scripts (rust-analyzer's xtask
//! pattern), so the README's commands are the same on every machine.
//!
//! - `cargo xtask setup`: libtorch for the trainer (PyPI's `torch` in a venv under the user's cache
//!   dir) and Chromium for the refine page's browser test (Debian packages), idempotent and quick
//!   when already done.
//! - `cargo xtask env`: the shell exports that let plain `cargo` build the trainer
//!   (`eval "$(cargo xtask env)"`).
//! - `cargo xtask test`: everything CI checks (fmt, clippy, docs, the whole test suite), with the
//!   time each step took; runs `setup` first.
//! - `cargo xtask demo [--budget 3m]`: the main job end to end on the embedded default: three apps
//!   compiled, built, fed real data, trained together, asked about held-out data, and plotted.
//! - `cargo xtask fuzz [--seconds N]`: the cargo-fuzz target over parse + check + explain.
//! - `cargo xtask bench`: the criterion benchmarks.
//! - `cargo xtask bless`: refresh the golden generated files under `tests/golden/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

mod browser;
mod torch;

use torch::{TorchEnv, setup};

/// Project automation for easeml.
#[derive(Parser)]
#[command(name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install libtorch (PyPI `torch` in a virtual environment under the user's cache dir) and
    /// Chromium + chromedriver (apt-get, for the refine page's browser test); a quick no-op when
    /// already done.
    Setup,
    /// Print the shell exports that let plain `cargo` build and run the trainer:
    /// `eval "$(cargo xtask env)"`.
    Env,
    /// Run every check CI runs: rustfmt, clippy (-D warnings), rustdoc (-D warnings), all tests.
    Test,
    /// Run the main job end to end on the embedded default: compile three example apps, build them,
    /// feed them real data, train across them within the budget, infer on held-out data, plot.
    Demo {
        /// How long the multi-tenant training may take in all (e.g. 90s, 3m, 10m).
        #[arg(long, default_value = "3m")]
        budget: String,
    },
    /// Fuzz parse + check + explain with cargo-fuzz (installs cargo-fuzz when missing).
    Fuzz {
        /// How long to fuzz, in seconds.
        #[arg(long, default_value_t = 600)]
        seconds: u64,
    },
    /// Run the criterion benchmarks of the compiler front end.
    Bench,
    /// Refresh the golden generated files under `tests/golden/` (review the diff afterwards).
    Bless,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = project_root();
    std::env::set_current_dir(&root)?;
    match cli.command {
        Task::Setup => {
            setup()?;
            browser::ensure_chromium();
            Ok(())
        }
        Task::Env => {
            let torch = TorchEnv::locate()?;
            print!("{}", torch.shell_exports());
            Ok(())
        }
        Task::Test => test(),
        Task::Demo { budget } => demo(&root, &budget),
        Task::Fuzz { seconds } => fuzz(seconds),
        Task::Bench => run_step(
            "criterion benchmarks",
            cargo(&["bench", "-p", "easeml-compiler"]),
        ),
        Task::Bless => {
            let mut bless = cargo(&["test", "-q", "-p", "easeml-tests", "--test", "golden_files"]);
            bless.env("EASEML_BLESS", "1");
            run_step("refresh tests/golden", bless)
        }
    }
}

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A cargo command with the libtorch environment of `torch::TorchEnv` applied when it is installed,
/// so that every step builds `torch-sys` against the same install (and never rebuilds it because an
/// environment variable changed between steps).
fn cargo(args: &[&str]) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.args(args);
    if let Ok(torch) = TorchEnv::locate()
        && torch.is_installed()
    {
        torch.apply(&mut command);
    }
    command
}

/// Runs one named step, prints how long it took, and fails with the step's name when it fails.
fn run_step(name: &str, mut command: Command) -> Result<()> {
    eprintln!("==> {name}");
    let started = Instant::now();
    let status = command
        .status()
        .with_context(|| format!("could not start the step `{name}`"))?;
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("step `{name}` failed after {seconds:.1}s ({status})");
    }
    eprintln!("==> {name}: ok in {seconds:.1}s");
    Ok(())
}

/// A cargo command for `cargo xtask test`: without incremental compilation, whose caches only cost
/// disk and time in a run from a fresh clone.
fn check_cargo(args: &[&str]) -> Command {
    let mut command = cargo(args);
    command.env("CARGO_INCREMENTAL", "0");
    command
}

fn test() -> Result<()> {
    let started = Instant::now();
    setup()?;
    browser::ensure_chromium();
    run_step("rustfmt", cargo(&["fmt", "--all", "--check"]))?;
    run_step(
        "clippy",
        check_cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    let mut doc = check_cargo(&["doc", "--workspace", "--no-deps", "--quiet"]);
    doc.env("RUSTDOCFLAGS", "-Dwarnings");
    run_step("rustdoc", doc)?;
    let mut tests = check_cargo(&["test", "--workspace"]);
    tests.env("INSTA_UPDATE", "no");
    run_step("tests", tests)?;
    eprintln!(
        "==> all checks passed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The apps of the demo: (example stem, the scikit-learn loader that ships its real data).
const DEMO_APPS: [(&str, &str); 3] = [
    ("breast_cancer", "load_breast_cancer"),
    ("wine_cultivar", "load_wine"),
    ("handwritten_digits", "load_digits"),
];

/// Writes each demo app's real data (from scikit-learn's bundled datasets) as feed files:
/// `<app>.train.txt` (80%) and `<app>.heldout.txt` (20%), one `INPUT LABEL` line per example.
const EXPORT_DATA: &str = r#"
import json, random, sys
from sklearn import datasets
out = sys.argv[1]
apps = {"breast_cancer": ("load_breast_cancer", None, ["malignant", "benign"]),
        "wine_cultivar": ("load_wine", None, None),
        "handwritten_digits": ("load_digits", (8, 8), [str(d) for d in range(10)])}
for app, (loader, shape, names) in apps.items():
    data = getattr(datasets, loader)()
    lines = []
    for x, y in zip(data.data, data.target):
        x = [float(v) / (16.0 if shape else 1.0) for v in x]
        if shape:
            x = [x[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
        label = names[y] if names else str(data.target_names[y])
        lines.append(json.dumps(x) + " " + label)
    random.Random(0).shuffle(lines)  # the data sets are sorted by class; hold out a fair 20%
    cut = len(lines) * 4 // 5
    with open(f"{out}/{app}.train.txt", "w") as f:
        f.write("\n".join(lines[:cut]) + "\n")
    with open(f"{out}/{app}.heldout.txt", "w") as f:
        f.write("\n".join(lines[cut:]) + "\n")
    print(f"{app}: {cut} training and {len(lines) - cut} held-out examples from sklearn.datasets.{loader}")
"#;

/// The main job: compile three example apps, generate and build their crates, feed each the real
/// data of a scikit-learn data set (80%) through its generated `feed` binary, train across the three
/// apps within `budget` (one scheduler decides which candidate of which app runs next), answer the
/// held-out 20% with each app's `infer` binary (which prints the held-out accuracy), print each
/// status report, and plot every app's best quality over time.
fn demo(root: &Path, budget: &str) -> Result<()> {
    let torch = setup()?;
    let python = torch.python();
    let has_sklearn = Command::new(&python)
        .args(["-c", "import sklearn"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_sklearn {
        let mut pip = Command::new(&python);
        pip.args(["-m", "pip", "install", "--quiet", "scikit-learn"]);
        run_step("install scikit-learn (for its bundled real data sets)", pip)?;
    }
    let demo_dir = root.join("target/demo");
    let data_dir = demo_dir.join("data");
    let home = demo_dir.join("home");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&data_dir)?;
    let mut export = Command::new(&python);
    export.arg("-c").arg(EXPORT_DATA).arg(&data_dir);
    run_step("export real data sets from scikit-learn", export)?;
    run_step(
        "build easemlc and easeml",
        cargo(&[
            "build",
            "--quiet",
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
    for (app, _) in DEMO_APPS {
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
        let mut cargo_build = cargo(&["build", "--quiet", "--offline", "--manifest-path"]);
        cargo_build
            .arg(crate_dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target);
        run_step(
            &format!("cargo build the generated `{app}` crate"),
            cargo_build,
        )?;
    }
    let binary = |name: &str| target.join("debug").join(name);
    for (app, _) in DEMO_APPS {
        let mut feed = Command::new(binary(&format!("{app}-feed")));
        feed.arg(data_dir.join(format!("{app}.train.txt")))
            .env("EASEML_HOME", &home);
        run_step(&format!("{app}-feed {app}.train.txt"), feed)?;
    }
    let mut train = Command::new(&easeml);
    train
        .args(["train", "--budget", budget, "--max-run", "45s", "--plot"])
        .arg(&demo_dir)
        .arg("--data")
        .arg(&home);
    run_step(
        &format!("easeml train --budget {budget} (one scheduler over the three apps)"),
        train,
    )?;
    for (app, _) in DEMO_APPS {
        let answers = demo_dir.join(format!("{app}.answers.txt"));
        let mut infer = Command::new(binary(&format!("{app}-infer")));
        infer
            .arg(data_dir.join(format!("{app}.heldout.txt")))
            .env("EASEML_HOME", &home)
            .stdout(std::fs::File::create(&answers)?);
        run_step(
            &format!("{app}-infer {app}.heldout.txt > {}", answers.display()),
            infer,
        )?;
        let mut status = Command::new(binary(app));
        status.env("EASEML_HOME", &home);
        run_step(&format!("{app} (the status report)"), status)?;
    }
    eprintln!(
        "==> demo done: the store is {}, the answers and quality.svg / quality.png / quality.csv are in {}",
        home.display(),
        demo_dir.display()
    );
    Ok(())
}

fn fuzz(seconds: u64) -> Result<()> {
    let has_cargo_fuzz = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_cargo_fuzz {
        run_step(
            "install cargo-fuzz",
            cargo(&["install", "--locked", "cargo-fuzz"]),
        )?;
    }
    // Seed the corpus with every example and fixture (the corpus folder itself is not committed).
    let corpus = std::path::Path::new("fuzz/corpus/front_end");
    std::fs::create_dir_all(corpus)?;
    for folder in ["examples", "tests/fixtures"] {
        for entry in std::fs::read_dir(folder)? {
            let path = entry?.path();
            if path.extension().is_some_and(|extension| extension == "eml")
                && let Some(name) = path.file_name()
            {
                std::fs::copy(&path, corpus.join(name))?;
            }
        }
    }
    let max_time = format!("-max_total_time={seconds}");
    let mut fuzz = cargo(&[
        "fuzz",
        "run",
        "--fuzz-dir",
        "fuzz",
        "front_end",
        "--",
        &max_time,
        "-max_len=4096",
    ]);
    // cargo-fuzz needs nightly flags; the machine has one stable toolchain.
    fuzz.env("RUSTC_BOOTSTRAP", "1");
    run_step("cargo fuzz run front_end", fuzz)
}
