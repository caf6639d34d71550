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

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::ArgMatches;
use indicatif::{ProgressBar, ProgressStyle};

use easeml_runtime::Client;
use easeml_runtime::app_cli::{Baked, EngineCommands, Entry, format_seconds, run_with};

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
fn train(client: &Client, arguments: &ArgMatches) -> Result<(), String> {
    let budget = arguments.get_one::<std::time::Duration>("budget").copied();
    let device = easeml_engine::choose_device().map_err(|error| error.to_string())?;
    let mut config = easeml_engine::EngineConfig::for_device(device);
    if let Some(max_run) = arguments.get_one::<std::time::Duration>("max-run") {
        config.max_run_seconds = max_run.as_secs_f64();
    }
    let home = client
        .store()
        .ok_or("`train` runs over the local store")?
        .home()
        .to_owned();
    let mut engine =
        easeml_engine::Engine::open(&home, config).map_err(|error| error.to_string())?;
    train_with_progress(&mut engine, budget)?;
    let status = client.status().map_err(|error| error.to_string())?;
    print!("{status}");
    Ok(())
}

/// `export --out DIR [--force]`: the served model of the local store written to DIR
/// (`easeml_engine::export::export_app`).
fn export(client: &Client, arguments: &ArgMatches) -> Result<(), String> {
    let store = client.store().ok_or("`export` reads the local store")?;
    let out = arguments
        .get_one::<String>("out")
        .ok_or("give the folder to write: --out DIR")?;
    let report = easeml_engine::export::export_app(
        store,
        client.app_name(),
        std::path::Path::new(out),
        arguments.get_flag("force"),
    )
    .map_err(|error| error.to_string())?;
    println!("{report}");
    Ok(())
}

/// Runs the engine's loop as a training session: a line saying where, on what and for how long,
/// a spinner (on a terminal) and one line per finished run, then how many runs finished and
/// whether anything is left to train. Shared by the apps' `train` and `easeml train`.
pub fn train_with_progress(
    engine: &mut easeml_engine::Engine,
    budget: Option<std::time::Duration>,
) -> Result<easeml_engine::TrainSummary, String> {
    use easeml_engine::Event;
    eprintln!(
        "training every app in {} {}{}",
        engine.store().home().display(),
        if engine.config().coordinate {
            "by coordinating its workers".to_owned()
        } else {
            format!("on {}", easeml_engine::device_name(engine.config().device))
        },
        budget.map_or_else(String::new, |budget| format!(
            " for at most {}",
            format_seconds(budget.as_secs_f64())
        ))
    );
    // On a terminal: a spinner that says what trains now, finished runs printed above it. Elsewhere
    // (a log, CI, a pipe): plain lines, a start line per run included, so the log still shows what
    // happened and when.
    let terminal = std::io::stderr().is_terminal();
    let progress = if terminal {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let say = |line: String| {
        if terminal {
            progress.println(line);
        } else {
            eprintln!("{line}");
        }
    };
    let mut on_event = |event: Event| match event {
        Event::AppRegistered { app, candidates } => {
            say(format!("{app}: {candidates} candidate models"));
        }
        Event::DataChanged { app, data_version } => say(format!(
            "{app}: data changed (version {data_version}); every candidate is eligible again"
        )),
        Event::AppSkipped { app, reason } => {
            say(format!("{app}: left out: {reason}"));
        }
        Event::CandidateLeftOut {
            app,
            candidate,
            reason,
        } => {
            say(format!("{app}: {candidate} left out: {reason}"));
        }
        Event::RunStarted {
            app,
            candidate,
            run,
            max_seconds,
        } => {
            let message = format!(
                "{app}: training {candidate} (run {}, at most {})",
                run.0,
                format_seconds(max_seconds)
            );
            if terminal {
                progress.set_message(message);
            } else {
                eprintln!("{message}");
            }
        }
        Event::RunFinished {
            app,
            candidate,
            quality,
            quality_std,
            protocol,
            cost_seconds,
            infer_latency_seconds,
            broken_constraints,
            best,
            ..
        } => say(format!(
            "{app}: {candidate:<22} quality {quality:.3}{} ({protocol})  cost {:>7}  latency {}{}{}",
            quality_std.map_or_else(String::new, |std| format!(" ± {std:.3}")),
            format_seconds(cost_seconds),
            format_seconds(infer_latency_seconds),
            if broken_constraints.is_empty() {
                String::new()
            } else {
                format!("  broke {} (never served)", broken_constraints.join(", "))
            },
            if best { "  * best so far" } else { "" }
        )),
        Event::RunFailed {
            app,
            candidate,
            reason,
            ..
        } => say(format!("{app}: {candidate:<22} failed: {reason}")),
        Event::RunDropped {
            app,
            candidate,
            reason,
            ..
        } => say(format!(
            "{app}: {candidate:<22} dropped: the session ended before it had a model ({reason}); a later session tries it again"
        )),
        Event::MopRunStarted {
            app,
            candidate,
            run,
            learning_rate,
            partitions,
            epochs,
            resumed,
            data_parallel,
        } => say(format!(
            "{app}: {candidate:<22} {} by {} (run {}, learning rate {learning_rate}): {epochs} epoch(s) over {partitions} partition(s), one per worker{}",
            if resumed { "resumed" } else { "training" },
            if data_parallel {
                "data parallelism"
            } else {
                "model hopping"
            },
            run.0,
            if data_parallel { ", all at once" } else { "" }
        )),
        Event::RunProgress {
            app,
            candidate,
            done,
            total,
            ..
        } => {
            let message = format!("{app}: {candidate} by model hopping, {done}/{total} sub-epochs");
            if terminal {
                progress.set_message(message);
            } else if total > 0 && done * 10 / total != (done - 1) * 10 / total {
                // Logs get a line per tenth.
                eprintln!("{message}");
            }
        }
        Event::WorkersChanged { live } => say(format!(
            "{live} worker{} live{}",
            if live == 1 { "" } else { "s" },
            if live == 0 {
                " (waiting for workers: start them with `easeml worker`)"
            } else {
                ""
            }
        )),
    };
    let summary = engine.train(budget, &mut on_event);
    progress.finish_and_clear();
    let summary = summary.map_err(|error| error.to_string())?;
    eprintln!(
        "{} run{} finished, {} failed{}{}",
        summary.finished,
        if summary.finished == 1 { "" } else { "s" },
        summary.failed,
        if summary.dropped > 0 {
            format!(", {} dropped at the session's end", summary.dropped)
        } else {
            String::new()
        },
        if summary.unfinished > 0 {
            format!(
                "; {} model-hopping run{} go on in the next session",
                summary.unfinished,
                if summary.unfinished == 1 { "" } else { "s" }
            )
        } else if summary.exhausted {
            "; nothing is left to train on the current data".to_owned()
        } else {
            "; the budget is spent (run `train` again to go on)".to_owned()
        }
    );
    Ok(summary)
}
