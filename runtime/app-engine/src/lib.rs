//! The engine's side of a generated app: what its `<app>-infer` and `<app>-train` binaries run, and
//! the training session of `easeml train` ([`train_with_progress`]). Of a generated crate's
//! binaries only these two use this crate, and so only they link libtorch.
//!
//! [`run_engine`] installs the engine as the process's model loader
//! (`easeml_engine::install_local_models`) and gives `easeml_runtime::app_cli` the `train` and
//! `export` commands (`<app> export` runs `<app>-train export`).
//! The `<app>`, `<app>-feed` and `<app>-refine` binaries call `easeml_runtime::app_cli::run`, which
//! cannot reach this crate (the generated crate depends on easeml-runtime without its `engine`
//! feature), so their crate graph holds no libtorch binding at all; `<app> train` and an embedded
//! `<app> infer` start the sibling binary in their place. The golden crates test checks the
//! binaries' `NEEDED` entries.

use std::process::ExitCode;

use clap::ArgMatches;

use easeml_runtime::Client;
use easeml_runtime::app_cli::{Baked, CommandError, EngineCommands, Entry, run_with};

/// The training session's printer, which lives beside the engine's events
/// (`easeml_engine::progress`), so that `easeml train` shares it without this crate.
pub use easeml_engine::progress::train_with_progress;

/// Runs one of the app's engine binaries (`<app>-infer`, `<app>-train`) with the process
/// arguments: `easeml_runtime::app_cli::run` with the engine in this process.
pub fn run_engine(manifest_json: &str, entry: Entry, baked: &Baked) -> ExitCode {
    run_engine_from(manifest_json, entry, baked, std::env::args_os())
}

/// [`run_engine`] with the arguments given (the first is the program's name), for tests and
/// wrappers; with `Entry::App` it is an `<app>` that trains and infers in this process.
pub fn run_engine_from(
    manifest_json: &str,
    entry: Entry,
    baked: &Baked,
    arguments: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> ExitCode {
    easeml_engine::install_local_models();
    run_with(
        manifest_json,
        entry,
        baked,
        arguments,
        Some(&EngineCommands { train, export }),
    )
}

/// `train` over the local store, in this process.
fn train(client: &Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    let budget = arguments.get_one::<std::time::Duration>("budget").copied();
    let device = easeml_engine::choose_device().map_err(failed)?;
    let mut config = easeml_engine::EngineConfig::for_device(device);
    if let Some(max_run) = arguments.get_one::<std::time::Duration>("max-run") {
        config.max_run_seconds = max_run.as_secs_f64();
    }
    let home = client
        .store()
        .ok_or_else(|| usage("`train` runs over the local store"))?
        .home()
        .to_owned();
    let mut engine = easeml_engine::Engine::open(&home, config).map_err(failed)?;
    train_with_progress(&mut engine, budget).map_err(failed)?;
    let status = client.status()?;
    print!("{status}");
    Ok(())
}

/// `export --out DIR [--force]`: the served model of the local store written to DIR
/// (`easeml_engine::export::export_app`).
fn export(client: &Client, arguments: &ArgMatches) -> Result<(), CommandError> {
    let store = client
        .store()
        .ok_or_else(|| usage("`export` reads the local store"))?;
    let out = arguments
        .get_one::<String>("out")
        .ok_or_else(|| usage("give the folder to write: --out DIR"))?;
    let report = easeml_engine::export::export_app(
        store,
        client.app_name(),
        std::path::Path::new(out),
        arguments.get_flag("force"),
    )
    .map_err(failed)?;
    println!("{report}");
    Ok(())
}

/// The engine's (or the trainer's) error as the command's ([`CommandError::Failed`], its words
/// and source kept).
fn failed(error: impl std::error::Error + Send + Sync + 'static) -> CommandError {
    CommandError::Failed(Box::new(error))
}

fn usage(words: &str) -> CommandError {
    CommandError::Usage(words.to_owned())
}
