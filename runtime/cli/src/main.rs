//! `easeml`, the runtime binary: `easeml serve` (the HTTP server and refine pages), `easeml apps`
//! (the apps of a local store), `easeml train` (the multi-tenant loop over a local store, in
//! process or coordinating workers), `easeml export` (an app's served model written to a folder),
//! `easeml worker` / `easeml workers list` (work-unit workers), and with the default feature `lab`
//! `easeml bench ...`, the lab's benchmarks (easeml-bench's harnesses: scheduler, trainer, tuner,
//! quality, mop, store, service).

mod apps;
mod export;
mod openmp;
mod serve;
mod train;
mod web_compiler;
mod worker;

use clap::{Parser, Subcommand};

/// easeml: a declarative machine-learning service (runtime binary).
#[derive(Debug, Parser)]
#[command(name = "easeml", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the JSON API (/api/v1) and every app's refine page over HTTP.
    Serve(serve::ServeArgs),
    /// List, register and remove the apps of a local store.
    Apps(apps::AppsArgs),
    /// Train candidate models of every app in a local store, in the foreground.
    Train(train::TrainArgs),
    /// Write the model an app serves to a folder, to run without easeml: TorchScript (networks)
    /// or JSON (kernel ridge, k-NN, tree ensembles), with easeml-export.json and a README.
    Export(export::ExportArgs),
    /// Run one worker: lease work units of the store, train them, commit them (until Ctrl-C or
    /// SIGTERM; a unit in hand is given back).
    Worker(worker::WorkerArgs),
    /// The store's workers.
    Workers(worker::WorkersArgs),
    /// Benchmarks of the runtime's components.
    #[cfg(feature = "lab")]
    Bench {
        #[command(subcommand)]
        bench: easeml_bench::harness::BenchCommand,
    },
    /// Benchmarks of the runtime's components (not in this build: it has no `lab` feature).
    #[cfg(not(feature = "lab"))]
    Bench {
        /// The benchmark and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// What `easeml bench` says in a build without the lab.
#[cfg(not(feature = "lab"))]
const NO_LAB: &str = "this easeml was built without the `lab` feature, so it has no benchmarks; \
     build it with its default features for `easeml bench ...` (`cargo build -p easeml-cli`, or \
     `cargo install --path runtime/cli`)";

/// Runs the command; an error is printed as `error: what: why` (its chain of causes, never a
/// backtrace, even with `RUST_BACKTRACE` set) with exit status 1.
/// Whether the command answers requests while training runs in the same process (`serve`, the
/// service bench): those run with OpenMP's threads sleeping when idle ([`openmp`]).
fn serves_requests(command: &Command) -> bool {
    match command {
        Command::Serve(_) => true,
        #[cfg(feature = "lab")]
        Command::Bench {
            bench: easeml_bench::harness::BenchCommand::Service(_),
        } => true,
        _ => false,
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if serves_requests(&cli.command) {
        openmp::passive_or_restart();
    }
    let result = match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Apps(args) => apps::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Workers(args) => worker::run_workers(&args),
        #[cfg(feature = "lab")]
        Command::Bench { bench } => easeml_bench::harness::run(&bench),
        #[cfg(not(feature = "lab"))]
        Command::Bench { .. } => Err(anyhow::anyhow!(NO_LAB)),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", easeml_runtime::error_chain(error.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}
