//! The harnesses of `easeml bench ...`, the interface of record of every benchmark: argument
//! parsing ([`BenchCommand`], which the `easeml` binary embeds as its `bench` subcommand when built
//! with its default feature `lab`), the runs, and the files each writes to `--out` (plotted by
//! [`plot`]).
//!
//! They run inside the `easeml` binary: `bench trainer`'s memory check runs `easeml bench trainer
//! --memory-child`, `bench mop --real` starts `easeml worker` processes and `bench service` starts
//! `easeml serve`, all as children of the running binary. Their process tests are easeml-cli's test targets (`bench/tests/cli/`, declared
//! in `runtime/cli/Cargo.toml`), so they run the real `easeml`.

mod mop;
mod mop_real;
mod peers;
pub mod plot;
mod quality;
mod scheduler;
mod service;
mod store;
mod trainer;
mod tuner;

use clap::Subcommand;

/// The benchmarks of `easeml bench`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Replay multi-tenant model selection over a quality (and cost) table, as in the ease.ml paper
    /// (figures 9-11): writes curves.csv, summary.json and loss.svg / loss.png to --out.
    Scheduler(scheduler::SchedulerBenchArgs),
    /// The trainer against PyTorch in Python on the same torch install (images/s of training and
    /// inference, ratio Rust/Python) and the peak memory of a training run: prints a table, writes
    /// summary.json and throughput.svg to --out.
    Trainer(trainer::TrainerBenchArgs),
    /// Replay TrimTuner's evaluation over one of its tables (constrained tuning with
    /// sub-sampling): prints Table II and the cost to 90/95/98% of the feasible optimum per policy,
    /// writes summary.json, curves.csv and accuracy_c.svg / accuracy_c.png to --out.
    Tuner(tuner::TunerBenchArgs),
    /// easeml's test accuracy on task folders (a `.eml`, train.txt, test.txt each) against peers
    /// (knn1, FLAML) on the same splits, within one budget: writes summary.json, summary.md,
    /// scores.svg / scores.png and quality.svg / quality.png to --out.
    Quality(quality::QualityBenchArgs),
    /// Model hopper parallelism (Cerebro's randomized scheduler) against a lock-step rotation and
    /// task parallelism on replicated data: `--simulate` over seeded instances (makespan over the
    /// open-shop lower bound per strategy, summary.json and makespan.svg / makespan.png in --out),
    /// or `--real`: K models trained by real workers one at a time, task-parallel, by hopping and
    /// data-parallel (wall time, qualities and data held, summary.json).
    Mop(mop::MopBenchArgs),
    /// The store's backends side by side: feed throughput and lease + commit cycles per second
    /// with 1, 4 and 16 concurrent workers, SQLite and (with --postgres) PostgreSQL; checks every
    /// unit is committed once; writes summary.json and cycles.svg / cycles.png to --out.
    Store(store::StoreBenchArgs),
    /// The service under load: N apps of mixed workloads registered, fed M examples each from C
    /// concurrent clients over HTTP and asked while W workers train; feed examples/s and MB/s,
    /// infer p50/p99, status and scheduling-decision time, peak RSS, store bytes per example,
    /// examples acknowledged against stored; `--sweep` fits growth exponents (summary.json,
    /// growth.svg / growth.png in --out).
    Service(service::ServiceBenchArgs),
}

/// Runs one benchmark.
pub fn run(command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Scheduler(args) => scheduler::run(args),
        BenchCommand::Trainer(args) => trainer::run(args),
        BenchCommand::Tuner(args) => tuner::run(args),
        BenchCommand::Quality(args) => quality::run(args),
        BenchCommand::Mop(args) => mop::run(args),
        BenchCommand::Store(args) => store::run(args),
        BenchCommand::Service(args) => service::run(args),
    }
}
