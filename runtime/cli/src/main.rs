//! `easeml`, the runtime binary: `easeml serve` (the HTTP server and refine pages), `easeml apps`
//! (the apps of a local store), `easeml train` (the multi-tenant loop over a local store, in
//! process or coordinating workers), `easeml export` (an app's served model written to a folder), `easeml worker` / `easeml workers list` (work-unit workers) and
//! `easeml bench scheduler` (the ease.ml replay benchmark), `easeml bench tuner` (TrimTuner's replay),
//! `easeml bench quality` (test accuracy on task folders against knn1 and FLAML), `easeml bench mop
//! --simulate` (Cerebro's model hopper parallelism against task parallelism, simulated),
//! `easeml bench store` and `easeml bench service` (the service under load).

mod apps;
mod bench_mop;
mod bench_mop_real;
mod bench_quality;
mod bench_scheduler;
mod bench_service;
mod bench_store;
mod bench_trainer;
mod bench_tuner;
mod export;
mod peers;
mod plot;
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
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Replay multi-tenant model selection over a quality (and cost) table, as in the ease.ml paper
    /// (figures 9-11): writes curves.csv, summary.json and loss.svg / loss.png to --out.
    Scheduler(bench_scheduler::SchedulerBenchArgs),
    /// The trainer against PyTorch in Python on the same torch install (images/s of training and
    /// inference, ratio Rust/Python) and the peak memory of a training run: prints a table, writes
    /// summary.json and throughput.svg to --out.
    Trainer(bench_trainer::TrainerBenchArgs),
    /// Replay TrimTuner's evaluation over one of its tables (constrained tuning with
    /// sub-sampling): prints Table II and the cost to 90/95/98% of the feasible optimum per policy,
    /// writes summary.json, curves.csv and accuracy_c.svg / accuracy_c.png to --out.
    Tuner(bench_tuner::TunerBenchArgs),
    /// easeml's test accuracy on task folders (a `.eml`, train.txt, test.txt each) against peers
    /// (knn1, FLAML) on the same splits, within one budget: writes summary.json, summary.md and
    /// scores.svg / scores.png to --out.
    Quality(bench_quality::QualityBenchArgs),
    /// Model hopper parallelism (Cerebro's randomized scheduler) against a lock-step rotation and
    /// task parallelism on replicated data: `--simulate` over seeded instances (makespan over the
    /// open-shop lower bound per strategy, summary.json and makespan.svg / makespan.png in --out),
    /// or `--real`: K models trained by real workers one at a time, task-parallel, by hopping and
    /// data-parallel (wall time, qualities and data held, summary.json).
    Mop(bench_mop::MopBenchArgs),
    /// The store's backends side by side: feed throughput and lease + commit cycles per second
    /// with 1, 4 and 16 concurrent workers, SQLite and (with --postgres) PostgreSQL; checks every
    /// unit is committed once; writes summary.json and cycles.svg / cycles.png to --out.
    Store(bench_store::StoreBenchArgs),
    /// The service under load: N apps of mixed workloads registered, fed M examples each from C
    /// concurrent clients over HTTP and asked while W workers train; feed examples/s and MB/s,
    /// infer p50/p99, status and scheduling-decision time, peak RSS, store bytes per example,
    /// examples acknowledged against stored; `--sweep` fits growth exponents (summary.json,
    /// growth.svg / growth.png in --out).
    Service(bench_service::ServiceBenchArgs),
}

/// Runs the command; an error is printed as `error: what: why` (its chain of causes, never a
/// backtrace, even with `RUST_BACKTRACE` set) with exit status 1.
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Apps(args) => apps::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Workers(args) => worker::run_workers(&args),
        Command::Bench {
            bench: BenchCommand::Scheduler(args),
        } => bench_scheduler::run(&args),
        Command::Bench {
            bench: BenchCommand::Trainer(args),
        } => bench_trainer::run(&args),
        Command::Bench {
            bench: BenchCommand::Tuner(args),
        } => bench_tuner::run(&args),
        Command::Bench {
            bench: BenchCommand::Quality(args),
        } => bench_quality::run(&args),
        Command::Bench {
            bench: BenchCommand::Mop(args),
        } => bench_mop::run(&args),
        Command::Bench {
            bench: BenchCommand::Store(args),
        } => bench_store::run(&args),
        Command::Bench {
            bench: BenchCommand::Service(args),
        } => bench_service::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `what: why: ...` from an error and its causes, leaving out a cause whose text the message
/// already holds (the crates' errors name their cause in their own message).
fn error_chain(error: &anyhow::Error) -> String {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}
