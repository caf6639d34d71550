//! `easeml train`: the multi-tenant training loop over a local store, in the foreground (the same
//! loop and progress display as a generated app's `train`, over every app of the store).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use easeml_app_engine::train_with_progress;
use easeml_runtime::app_cli::parse_duration;
use easeml_runtime::engine::{Engine, EngineConfig};
use easeml_runtime::store::Store;
use easeml_trainer::Tuning;

use crate::plot::QualityCurve;

/// Arguments of `easeml train`.
#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    #[command(flatten)]
    store: crate::serve::StoreArgs,
    /// Stop after this long, e.g. 90s, 10m, 2h (default: until every candidate is trained).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    budget: Option<Duration>,
    /// The longest one training run may take (default: 2m on the CPU, 10m on CUDA).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    max_run: Option<Duration>,
    /// Write every app's best quality over time (all runs in the store) to DIR: quality.csv,
    /// quality.svg and quality.png.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// How a network's run chooses its settings: `grid` (the learning-rate grid on all the data)
    /// or `trimtuner` (a TrimTuner search over learning rate, batch size and epoch cap on nested
    /// shares of the data, then the incumbent on all of it; runs of 200 examples or more).
    #[arg(long, value_name = "grid|trimtuner", default_value = "grid", value_parser = parse_tuning)]
    tuner: Tuning,
    /// Training runs at once: 1 (the default) trains in this process, one run at a time; N > 1
    /// starts N `easeml worker` processes over the store and coordinates them (the cores divided
    /// among them); 0 coordinates workers started elsewhere (`easeml worker`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// The devices of the local workers, in turn, e.g. `cpu` or `cuda:0,cuda:1` (default: the one
    /// $EASEML_DEVICE names, else CUDA when available, else the CPU).
    #[arg(long, value_name = "cpu,cuda:0,...", value_delimiter = ',')]
    devices: Option<Vec<String>>,
    /// The time to live of a work unit's lease: a unit of a worker silent this long goes to
    /// another worker.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    lease_ttl: Duration,
    /// How the workers share the training: `task` (each unit a whole run over all the data; the
    /// default) or `mop` (Cerebro's model hopper parallelism: each network candidate of each app
    /// trains `--epochs` epochs, the data cut into one partition per worker, each worker training
    /// the models that hop to it on its partition; needs --workers N with N >= 2, or --workers 0
    /// with at least two workers running, one partition each).
    #[arg(long, value_name = "task|mop", default_value = "task", value_parser = parse_parallelism)]
    parallelism: Parallelism,
    /// `--parallelism mop`: the epochs of each model.
    #[arg(long, value_name = "N", default_value_t = 5)]
    epochs: u64,
}

/// How `easeml train` shares its work among workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// A unit is a whole run.
    Task,
    /// Model hopper parallelism: a unit is a sub-epoch.
    Mop,
}

fn parse_parallelism(name: &str) -> Result<Parallelism, String> {
    match name {
        "task" => Ok(Parallelism::Task),
        "mop" => Ok(Parallelism::Mop),
        _ => Err(format!("unknown parallelism `{name}` (known: task, mop)")),
    }
}

fn parse_tuning(name: &str) -> Result<Tuning, String> {
    Tuning::from_name(name)
        .ok_or_else(|| format!("unknown tuner `{name}` (known: grid, trimtuner)"))
}

/// Trains the store's apps and prints each app's best model at the end.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let home = args.store.existing_home()?;
    let devices = crate::worker::worker_devices(args.workers, args.devices.as_deref())?;
    let mut config = EngineConfig::for_device(devices[0]);
    if let Some(max_run) = args.max_run {
        config.max_run_seconds = max_run.as_secs_f64();
    }
    config.tuning = args.tuner;
    config.lease_ttl = args.lease_ttl;
    config.coordinate = args.workers != 1;
    if args.parallelism == Parallelism::Mop && args.workers == 1 {
        bail!(
            "--parallelism mop needs --workers N with N >= 2 (the data is cut into one partition per worker), or --workers 0 with at least two `easeml worker`s running; with one worker, task parallelism trains the same models without hopping"
        );
    }
    if args.epochs == 0 {
        bail!("--epochs must be at least 1");
    }
    let mut engine = Engine::open(&home, config)
        .with_context(|| format!("opening the store at {}", home.display()))?;
    let workers = match args.workers {
        0 => {
            eprintln!(
                "coordinating the workers of {} (start them with `easeml worker --store {}`)",
                home.display(),
                home.display()
            );
            None
        }
        1 => None,
        count => Some(crate::worker::LocalWorkers::start(
            &home,
            count,
            &devices,
            args.lease_ttl,
        )?),
    };
    match (args.parallelism, &workers) {
        (Parallelism::Mop, workers) => {
            // The engine holds the train lock; the MOP coordinator works over its own connection.
            let mut store = Store::open(&home)?;
            let ids = match workers {
                Some(workers) => crate::train_mop::worker_ids(&store, &workers.pids())?,
                None => crate::train_mop::live_workers(&store, args.lease_ttl)?,
            };
            let runs = crate::train_mop::start_runs(&mut store, args.epochs, &ids, None)?;
            eprintln!(
                "training {} model(s) by model hopper parallelism over {} workers, {} epoch(s) each",
                runs.len(),
                ids.len(),
                args.epochs
            );
            let deadline = args.budget.map(|budget| Instant::now() + budget);
            crate::train_mop::coordinate(&home, &runs, deadline)?;
        }
        _ => {
            train_with_progress(&mut engine, args.budget).map_err(anyhow::Error::msg)?;
        }
    }
    for app in engine.store().apps()? {
        let runs = engine.store().runs(app.id)?;
        let limits = easeml_runtime::engine::AppModel::from_manifest(&app.name, &app.manifest)
            .map(|model| model.constraint_limits())
            .unwrap_or_default();
        match easeml_runtime::engine::best_run(&runs, &limits) {
            Some(best) => println!(
                "{}: best {} quality {:.3} ({} runs)",
                app.name,
                best.candidate,
                best.quality.unwrap_or(0.0),
                runs.len()
            ),
            None => println!("{}: no model yet ({} runs)", app.name, runs.len()),
        }
    }
    if let Some(out) = &args.plot {
        let curves = quality_curves(engine.store())?;
        let mut csv = String::from("app,minutes,best_quality\n");
        for curve in &curves {
            for (minutes, quality) in &curve.points {
                csv.push_str(&format!("{},{minutes:.4},{quality:.6}\n", curve.app));
            }
        }
        std::fs::create_dir_all(out)
            .with_context(|| format!("cannot create `{}`", out.display()))?;
        std::fs::write(out.join("quality.csv"), csv)
            .with_context(|| format!("cannot write into `{}`", out.display()))?;
        for note in crate::plot::write_quality_plots(&curves, out)? {
            eprintln!("note: {note}");
        }
        eprintln!(
            "wrote {}/quality.csv, quality.svg and quality.png",
            out.display()
        );
    }
    Ok(())
}

/// Every app's best quality over time, from the store's finished runs; time starts when the first
/// run of the store started.
fn quality_curves(store: &easeml_runtime::store::Store) -> anyhow::Result<Vec<QualityCurve>> {
    let mut per_app = Vec::new();
    let mut origin = i64::MAX;
    for app in store.apps()? {
        let mut runs: Vec<_> = store
            .runs(app.id)?
            .into_iter()
            .filter(|run| run.quality.is_some() && run.finished_ms.is_some())
            .collect();
        runs.sort_by_key(|run| run.finished_ms);
        if let Some(first) = runs.iter().filter_map(|run| run.started_ms).min() {
            origin = origin.min(first);
        }
        per_app.push((app.name, runs));
    }
    Ok(per_app
        .into_iter()
        .map(|(app, runs)| {
            let mut best = f64::NEG_INFINITY;
            let points = runs
                .iter()
                .map(|run| {
                    best = best.max(run.quality.unwrap_or(0.0));
                    let minutes = (run.finished_ms.unwrap_or(origin) - origin) as f64 / 60_000.0;
                    (minutes, best)
                })
                .collect();
            QualityCurve { app, points }
        })
        .collect())
}
