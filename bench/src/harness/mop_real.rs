//! `easeml bench mop --real`: K models of one app trained for real in four modes, each over its
//! own copy of the same store, all in one run:
//! - `sequential`: one worker process (all the cores), the models one after the other;
//! - `task_parallel`: `--workers` worker processes (the cores divided), each model's epochs on
//!   whichever worker is free, every worker needing all the training rows (the data held
//!   `--workers` times over);
//! - `mop`: the same workers, the training rows cut into one partition per worker and the models
//!   hopping between them (the data held once);
//! - `data_parallel`: the same workers and partitions, each model's every epoch trained by all
//!   the workers at once (a gang: gradients averaged over TCP each step, so an epoch is the
//!   smallest partition's batches of `workers x batch` examples), the models one after another's
//!   epoch (the data held once).
//!
//! Every mode trains the same models (candidate, learning rate, seed) with the same code
//! (`easeml_runtime::engine::mop`: sequential and task parallel are one partition, MOP is one per
//! worker) for the same epochs, so the wall times compare the schedules. Writes `summary.json`:
//! per mode the wall seconds, every model's final validation quality and their mean, and the
//! training rows each worker holds and their sum over the workers.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use easeml_runtime::engine::mop::{self, MopPlan, MopStatus};
use easeml_runtime::store::{AppId, RunId, Store, WorkerState};
use easeml_runtime::{AppSpec, Client, Connection};
use serde_json::{Value, json};
use tch::Device;

use easeml_trainer::mop::partition_rows;

use easeml_runtime::engine::local_workers::LocalWorkers;

/// The most examples `--real` makes (they are generated in memory and fed at once).
const MAX_EXAMPLES: usize = 1_000_000;

/// The most models `--real` trains in each mode.
const MAX_MODELS: usize = 1000;

/// The benchmark's app: 16 features, 2 classes.
const APP: &str = "app bench_mop\nInput = [16]\nOutput = [2]\nlabels = [low, high]";

/// The models: candidates and learning rates in turn.
const CANDIDATES: [&str; 2] = ["mlp_large", "mlp_small"];
const RATES: [f64; 3] = [0.001, 0.003, 0.01];

/// What `--real` needs from `easeml bench mop`'s arguments.
#[derive(Debug, Clone)]
pub struct RealArgs {
    /// Models (K).
    pub models: usize,
    /// Workers of the parallel modes.
    pub workers: usize,
    /// Epochs per model.
    pub epochs: usize,
    /// Examples of the app.
    pub examples: usize,
    /// The workers' devices, in turn (the sequential mode's one worker takes the first).
    pub devices: Vec<Device>,
    /// The output folder.
    pub out: PathBuf,
}

/// `count` examples: label `high` when a fixed weighted sum of the features is positive.
fn feed_lines(count: usize) -> String {
    (0..count)
        .map(|i| {
            let x: Vec<f32> = (0..16)
                .map(|j| (((i * 131 + j * 71) % 97) as f32 / 48.5) - 1.0)
                .collect();
            let score: f32 = x
                .iter()
                .enumerate()
                .map(|(j, v)| if j % 3 == 0 { -v } else { *v })
                .sum();
            let label = if score > 0.0 { "high" } else { "low" };
            format!(
                "{} {label}\n",
                serde_json::to_string(&x).unwrap_or_default()
            )
        })
        .collect()
}

/// A store at `home` holding the app and its examples.
fn make_store(home: &Path, examples: usize) -> anyhow::Result<AppId> {
    let compiled =
        easeml_compiler::compile(APP, "bench_mop", &easeml_compiler::Registry::builtin()).map_err(
            |failure| anyhow::anyhow!("the benchmark's app does not compile: {failure:?}"),
        )?;
    let spec =
        AppSpec::from_manifest_json(&easeml_compiler::codegen::manifest(&compiled).to_json())
            .map_err(|error| anyhow::anyhow!("the benchmark's manifest: {error}"))?;
    let mut client = Client::open(&Connection::embedded(home), spec)
        .map_err(|error| anyhow::anyhow!("creating the store at {}: {error}", home.display()))?;
    client
        .feed_lines(
            std::io::Cursor::new(feed_lines(examples)),
            &Default::default(),
        )
        .map_err(|error| anyhow::anyhow!("feeding the benchmark's app: {error}"))?;
    let store = Store::open(home)?;
    let app = store
        .app_by_name("bench_mop")?
        .context("the benchmark's app was not registered")?;
    Ok(app.id)
}

/// One mode's outcome.
fn mode(
    out: &Path,
    name: &str,
    args: &RealArgs,
    workers: usize,
    partitions: u64,
    gang: bool,
) -> anyhow::Result<Value> {
    let home = out.join("stores").join(name);
    if home.exists() {
        std::fs::remove_dir_all(&home)
            .with_context(|| format!("removing the old store {}", home.display()))?;
    }
    let app = make_store(&home, args.examples)?;
    let local = LocalWorkers::start(&home, workers, &args.devices, Duration::from_secs(30))?;
    let mut store = Store::open(&home)?;
    let ids = worker_ids(&store, &local.pids())?;
    // Targets only when the data is partitioned: task parallelism lets any worker take any unit.
    let targets: &[String] = if partitions > 1 { &ids } else { &[] };
    let started = Instant::now();
    let mut runs = Vec::new();
    for index in 0..args.models {
        let candidate = CANDIDATES[index % CANDIDATES.len()];
        let mut plan = MopPlan::new(partitions, args.epochs as u64);
        plan.learning_rate = RATES[(index / CANDIDATES.len()) % RATES.len()];
        plan.seed = index as u64 + 1;
        plan.gang = gang;
        let run = mop::start_run(&mut store, app, candidate, &plan, targets)?;
        runs.push(MopRun {
            app: "bench_mop".to_owned(),
            candidate: candidate.to_owned(),
            run,
        });
    }
    let statuses = coordinate(&home, &runs, None)?;
    let wall = started.elapsed().as_secs_f64();
    drop(local);
    let mut qualities = Vec::new();
    for (run, status) in runs.iter().zip(&statuses) {
        match status {
            MopStatus::Done(quality) => qualities.push(*quality),
            other => bail!("{name}: run {} ended {other:?}", run.run.0),
        }
    }
    // Each worker holds its partition's training rows (MOP) or every training row (the others).
    let held: Vec<usize> = {
        let model = easeml_runtime::engine::AppModel::from_manifest(
            "bench_mop",
            &store.app(app)?.manifest,
        )?;
        let examples = easeml_runtime::engine::load_examples(&store, app, &model)?
            .context("the benchmark's app has too few examples")?;
        let train = easeml_trainer::data::split_by_id(&examples.ids, 0.2).0;
        if partitions > 1 {
            (0..partitions)
                .map(|partition| partition_rows(&examples, &train, partitions, partition).len())
                .collect()
        } else {
            vec![train.len(); workers]
        }
    };
    let train_rows: usize = if partitions > 1 {
        held.iter().sum()
    } else {
        held[0]
    };
    let mean = qualities.iter().sum::<f64>() / qualities.len().max(1) as f64;
    eprintln!(
        "{name}: {workers} worker(s), {partitions} partition(s): {wall:.2} s, mean quality {mean:.3}"
    );
    Ok(json!({
        "workers": workers,
        "partitions": partitions,
        "wall_seconds": wall,
        "qualities": qualities,
        "mean_quality": mean,
        "training_rows": train_rows,
        "rows_held_per_worker": held,
        "rows_held_in_all": held.iter().sum::<usize>(),
        "data_copies": held.iter().sum::<usize>() as f64 / train_rows.max(1) as f64,
    }))
}

/// Runs the four modes and writes `summary.json`.
pub fn run(args: &RealArgs) -> anyhow::Result<()> {
    if args.models == 0 || args.epochs == 0 || args.workers < 2 {
        bail!(
            "--real needs --models K >= 1, --epochs E >= 1 and --workers P >= 2 (got {}, {}, {})",
            args.models,
            args.epochs,
            args.workers
        );
    }
    if args.examples > MAX_EXAMPLES || args.models > MAX_MODELS {
        bail!(
            "--real trains at most {MAX_MODELS} models on at most {MAX_EXAMPLES} examples (got {} and {})",
            args.models,
            args.examples
        );
    }
    if args.examples < 10 * args.workers {
        bail!(
            "--examples {} is too few for {} partitions: give at least {}",
            args.examples,
            args.workers,
            10 * args.workers
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create `{}`", args.out.display()))?;
    let sequential = mode(&args.out, "sequential", args, 1, 1, false)?;
    let task = mode(&args.out, "task_parallel", args, args.workers, 1, false)?;
    let partitions = args.workers as u64;
    let hopping = mode(&args.out, "mop", args, args.workers, partitions, false)?;
    let data = mode(
        &args.out,
        "data_parallel",
        args,
        args.workers,
        partitions,
        true,
    )?;
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
    let summary = json!({
        "benchmark": "mop --real",
        "app": "16 features, 2 classes (synthetic)",
        "examples": args.examples,
        "models": args.models,
        "epochs": args.epochs,
        "workers": args.workers,
        "devices": args.devices.iter().map(|&device| easeml_trainer::device::device_name(device)).collect::<Vec<_>>(),
        "cores": cores,
        "threads_per_worker": {"sequential": cores, "parallel": (cores / args.workers).max(1)},
        "model_list": (0..args.models).map(|index| json!({
            "candidate": CANDIDATES[index % CANDIDATES.len()],
            "learning_rate": RATES[(index / CANDIDATES.len()) % RATES.len()],
            "seed": index + 1,
        })).collect::<Vec<_>>(),
        "modes": {"sequential": sequential, "task_parallel": task, "mop": hopping, "data_parallel": data},
    });
    let path = args.out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    // The stores are scratch.
    let _ = std::fs::remove_dir_all(args.out.join("stores"));
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// One MOP run being coordinated.
#[derive(Debug, Clone, PartialEq)]
pub struct MopRun {
    /// The app's name.
    pub app: String,
    /// The candidate.
    pub candidate: String,
    /// The run.
    pub run: RunId,
}

/// The ids of the live workers among the processes `pids`, waiting up to a minute for them.
pub fn worker_ids(store: &Store, pids: &[u32]) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    loop {
        let ids: Vec<String> = store
            .workers()?
            .into_iter()
            .filter(|worker| pids.contains(&worker.pid) && worker.state != WorkerState::Stopped)
            .map(|worker| worker.id)
            .collect();
        if ids.len() >= pids.len() {
            return Ok(ids);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "only {} of {} local workers registered within a minute",
                ids.len(),
                pids.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Advances the runs until every one is done or failed, or `deadline` passes (their open units
/// stay in the store for the next session); prints each run's end. Returns the runs' statuses.
pub fn coordinate(
    home: &Path,
    runs: &[MopRun],
    deadline: Option<Instant>,
) -> anyhow::Result<Vec<MopStatus>> {
    let mut store = Store::open(home).with_context(|| format!("opening {}", home.display()))?;
    let mut statuses: Vec<Option<MopStatus>> = vec![None; runs.len()];
    loop {
        let mut open = 0;
        for (run, status) in runs.iter().zip(statuses.iter_mut()) {
            if matches!(status, Some(MopStatus::Done(_) | MopStatus::Failed(_))) {
                continue;
            }
            let now = mop::advance(&mut store, run.run)?;
            match &now {
                MopStatus::Done(quality) => eprintln!(
                    "{}/{}: MOP run {} done, quality {quality:.3}",
                    run.app, run.candidate, run.run.0
                ),
                MopStatus::Failed(reason) => eprintln!(
                    "{}/{}: MOP run {} failed: {reason}",
                    run.app, run.candidate, run.run.0
                ),
                MopStatus::Training { .. } => open += 1,
            }
            *status = Some(now);
        }
        if open == 0 || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Ok(statuses.into_iter().flatten().collect());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
