//! `cargo xtask`: the project's automation, in Rust instead of shell scripts (rust-analyzer's xtask
//! pattern), so the README's commands are the same on every machine.
//!
//! - `cargo xtask setup`: libtorch for the trainer (PyPI's `torch` in a venv under the user's cache
//!   dir), Chromium for the browser tests, munge + Slurm for the Slurm cluster test and the
//!   PostgreSQL server for the store's conformance suite (Debian packages: [`packages`]),
//!   idempotent and quick when already done.
//! - `cargo xtask env`: the shell exports that let plain `cargo` build the trainer
//!   (`eval "$(cargo xtask env)"`).
//! - `cargo xtask test`: everything CI checks (tidy, fmt, clippy, docs, the whole test suite), with
//!   the time each step took; runs `setup` first.
//! - `cargo xtask tidy`: the architecture's machine-checkable rules (`tidy.rs`).
//! - `cargo xtask demo [--budget 4m] [--tuner grid|trimtuner] [--workers N]`: the main job end to end on the embedded default: four apps
//!   (tabular, images, sequences) compiled, built, fed real data, trained together by one scheduler,
//!   asked about held-out data, and plotted (`demo.rs`).
//! - `cargo xtask fuzz [--seconds N]`: the cargo-fuzz target over parse + check + explain.
//! - `cargo xtask bench`: the criterion benchmarks.
//! - `cargo xtask bless`: refresh the golden generated files under `tests/golden/`.
//! - `cargo xtask gpu-bundle`: the GPU check's binaries built against a lent machine's PyTorch
//!   2.11, with the script that runs them there (`gpu.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

mod demo;
mod doc_links;
mod gpu;
mod lab;
mod packages;
mod sizes;
mod test_tally;
mod tidy;
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
    /// Install libtorch (PyPI `torch` in a virtual environment under the user's cache dir),
    /// Chromium + chromedriver (the browser tests), munge + Slurm (the Slurm cluster test),
    /// PostgreSQL (the store's conformance suite) and python3-venv (the Python package's test) with
    /// apt-get; a quick no-op when already done.
    Setup,
    /// Print the shell exports that let plain `cargo` build and run the trainer:
    /// `eval "$(cargo xtask env)"`.
    Env,
    /// Run every check CI runs: tidy, rustfmt, clippy (-D warnings), rustdoc (-D warnings), all
    /// tests.
    Test,
    /// Check the architecture's rules: forbidden dependency edges (from `cargo metadata`) and that
    /// every path and item ARCHITECTURE.md names exists.
    Tidy,
    /// Run the main job end to end on the embedded default: compile four example apps, build them,
    /// feed them real data, train across them within the budget, infer on held-out data, plot.
    Demo {
        /// How long the multi-tenant training may take in all (e.g. 90s, 4m, 10m).
        #[arg(long, default_value = "4m")]
        budget: String,
        /// How networks choose their settings: `grid` or `trimtuner` (`easeml train --tuner`).
        #[arg(long, default_value = "grid")]
        tuner: String,
        /// Training runs at once (`easeml train --workers`; default: one worker per core, at most
        /// 4; 1 trains in one process).
        #[arg(long)]
        workers: Option<usize>,
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
    /// Build the GPU check for a lent GPU machine (PyTorch 2.11 there): `easeml` and the trainer's
    /// tests against libtorch 2.11 (tch 0.24) into `gpu-check/`, with `run.sh`; then run it there
    /// with the device tool (`carry: ["gpu-check"]`, `bash gpu-check/run.sh`).
    GpuBundle,
}

/// [`OPTIONAL_FEATURES`] as a literal, for the lists built from it with `concat!`.
macro_rules! optional_features {
    () => {
        "easeml-cli/s3"
    };
}

/// The optional features `cargo xtask test` builds with: S3 blobs (`easeml-store/s3`, through the
/// CLI).
const OPTIONAL_FEATURES: &str = optional_features!();

/// What the lint and documentation steps build, with `--no-default-features`: the CLI's default
/// `lab` and [`OPTIONAL_FEATURES`]. The members' defaults are named rather than taken, so that the
/// lab-less step ([`LAB_LESS_FEATURES`]) differs from these in the CLI's features alone: cargo
/// counts a package's `default` among its features, and easeml-runtime's (its `engine`, which the
/// CLI turns on anyway) would otherwise set it apart.
const LINT_FEATURES: &str = concat!("easeml-cli/lab,", optional_features!());

/// [`LINT_FEATURES`] without the lab: the service binary as a deployment builds it
/// (`--no-default-features`), every other package with the features the first clippy step gave
/// it, so that only the CLI is checked again.
const LAB_LESS_FEATURES: &str = OPTIONAL_FEATURES;

fn main() -> Result<()> {
    let cli = Cli::parse();
    let root = project_root();
    std::env::set_current_dir(&root)?;
    match cli.command {
        Task::Setup => {
            setup()?;
            packages::ensure(&packages::CHROMIUM);
            packages::ensure(&packages::SLURM);
            packages::ensure(&packages::POSTGRES);
            packages::ensure(&packages::PYTHON_VENV);
            Ok(())
        }
        Task::Env => {
            let torch = TorchEnv::locate()?;
            print!("{}", torch.shell_exports());
            Ok(())
        }
        Task::Test => test(),
        Task::Tidy => tidy::run(&root),
        Task::Demo {
            budget,
            tuner,
            workers,
        } => demo::run(&root, &budget, &tuner, workers),
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
        Task::GpuBundle => {
            let torch = TorchEnv::locate()?;
            let python = if torch.is_installed() {
                torch.python()
            } else {
                PathBuf::from("python3")
            };
            gpu::bundle(&root, &python)
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
fn run_step(name: &str, command: Command) -> Result<()> {
    run_step_with(name, command, false).map(|_| ())
}

/// [`run_step`] that also hands back what the step wrote to stderr (echoed when it ends).
fn run_step_capturing_stderr(name: &str, command: Command) -> Result<String> {
    run_step_with(name, command, true)
}

fn run_step_with(name: &str, mut command: Command, capture_stderr: bool) -> Result<String> {
    eprintln!("==> {name}");
    let started = Instant::now();
    let could_not_start = || format!("could not start the step `{name}`");
    let (status, stderr) = if capture_stderr {
        let output = command
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|child| child.wait_with_output())
            .with_context(could_not_start)?;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        eprint!("{stderr}");
        (output.status, stderr)
    } else {
        (
            command.status().with_context(could_not_start)?,
            String::new(),
        )
    };
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("step `{name}` failed after {seconds:.1}s ({status})");
    }
    eprintln!("==> {name}: ok in {seconds:.1}s");
    Ok(stderr)
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
    let tidy_started = Instant::now();
    eprintln!("==> tidy");
    tidy::run(&project_root())?;
    eprintln!(
        "==> tidy: ok in {:.1}s",
        tidy_started.elapsed().as_secs_f64()
    );
    setup()?;
    packages::ensure(&packages::CHROMIUM);
    packages::ensure(&packages::SLURM);
    packages::ensure(&packages::POSTGRES);
    packages::ensure(&packages::PYTHON_VENV);
    // Every package of Cargo.lock for every platform into cargo's cache: a build fetches only the
    // host's, and the generated crates' test resolves them all offline (`cargo metadata
    // --offline`, runtime/cli/tests/web.rs), as a user's download beside a checkout does.
    run_step("cargo fetch", cargo(&["fetch", "--locked"]))?;
    run_step("rustfmt", cargo(&["fmt", "--all", "--check"]))?;
    // Every step builds with the optional features on (S3 blobs), so that their code is linted and
    // their tests run; the store is linted once without them too (its S3-less error path), and the
    // service binary once without its default `lab` feature.
    run_step(
        "clippy",
        check_cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--no-default-features",
            "--features",
            LINT_FEATURES,
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    run_step(
        "clippy (store without S3)",
        check_cargo(&[
            "clippy",
            "-p",
            "easeml-store",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // The service binary without the lab (its `bench` says so; tidy checks its dependencies), with
    // every other feature as the first step has it: cargo unifies features over the packages a
    // command selects, so `-p easeml-cli` alone would give shared dependencies (serde, reqwest,
    // ...) other features than the workspace does and check some 50 crates again (88 s of a cold
    // run); over the whole workspace only the CLI is checked again.
    run_step(
        "clippy (easeml without the lab)",
        check_cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--no-default-features",
            "--features",
            LAB_LESS_FEATURES,
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    let mut doc = check_cargo(&[
        "doc",
        "--workspace",
        "--no-deps",
        "--quiet",
        "--no-default-features",
        "--features",
        LINT_FEATURES,
    ]);
    doc.env("RUSTDOCFLAGS", "-Dwarnings");
    run_step("rustdoc", doc)?;
    run_step(
        "store tests without S3",
        check_cargo(&["test", "-p", "easeml-store", "--lib"]),
    )?;
    let mut tests = check_cargo(&["test", "--workspace", "--features", OPTIONAL_FEATURES]);
    tests.env("INSTA_UPDATE", "no");
    let tally = test_tally::run_tests_counting("tests", tests)?;
    eprintln!(
        "==> all checks passed in {:.1}s; {tally}",
        started.elapsed().as_secs_f64()
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
