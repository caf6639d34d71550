//! `easeml train`: the multi-tenant training loop over a local store, in the foreground (the same
//! loop and progress display as a generated app's `train`, over every app of the store).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use easeml_runtime::app_cli::parse_duration;
use easeml_runtime::engine::EngineConfig;
use easeml_runtime::engine::local_workers::{LocalWorkers, worker_devices};
use easeml_runtime::engine::mop::Parallelism;
use easeml_runtime::engine::progress::{quality_curves, train_with_progress};
use easeml_trainer::Tuning;

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
    /// Write every app's best quality over time (all runs in the store) to DIR: quality.csv, and
    /// quality.svg and quality.png in a build with the `lab` feature (the default).
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// How a network's run chooses its settings: `grid` (the learning-rate grid on all the data)
    /// or `trimtuner` (a TrimTuner search over learning rate, batch size and epoch cap on nested
    /// shares of the data, then the incumbent on all of it; runs under the split: 200 examples or more, 1,000 rows of a table).
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
    #[command(flatten)]
    parallelism: ParallelismArgs,
}

/// How a coordinator's workers share the training (`easeml train` and `easeml serve`).
#[derive(Debug, Clone, clap::Args)]
pub struct ParallelismArgs {
    /// With two or more workers, how a decided run trains: `task` (a whole run on one worker,
    /// over all the app's data), `mop` (Cerebro's model hopper parallelism for every network: the
    /// data cut into one partition per live worker, the model hopping between them for --epochs
    /// epochs), `data` (data parallelism for every network: the same partitions, every epoch
    /// trained by all the workers at once, gradients averaged over TCP) or `auto` (the default:
    /// when an app's data copied to every worker would exceed --mop-above, its networks hop
    /// while at least half as many of its models are left to train as there are workers, and
    /// train data-parallel below that; task parallelism otherwise).
    #[arg(long, value_name = "auto|task|mop|data", default_value = "auto", value_parser = parse_parallelism)]
    pub parallelism: Parallelism,
    /// The epochs of a model trained by hopping, at most (1 to 1000: every epoch's units are
    /// queued when the run starts).
    #[arg(
        long,
        value_name = "N",
        default_value_t = easeml_runtime::engine::DEFAULT_MOP_EPOCHS,
        value_parser = clap::value_parser!(u64).range(1..=easeml_runtime::engine::mop::MAX_MOP_EPOCHS)
    )]
    pub epochs: u64,
    /// A model trained by hopping stops once this many epochs have passed without a better
    /// validation quality (0: it trains all --epochs).
    #[arg(long, value_name = "N", default_value_t = easeml_runtime::engine::DEFAULT_MOP_PATIENCE)]
    pub patience: u64,
    /// `--parallelism auto`: the size above which an app's data copied to every worker makes its
    /// networks hop instead, e.g. 512M, 2G, 0 (bytes, or with K, M, G: binary units).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub mop_above: u64,
}

impl ParallelismArgs {
    /// Checks the arguments against the worker count and writes them into `config`.
    pub fn apply(&self, workers: usize, config: &mut EngineConfig) -> anyhow::Result<()> {
        if matches!(self.parallelism, Parallelism::Mop | Parallelism::Data) && workers == 1 {
            let name = if self.parallelism == Parallelism::Mop {
                "mop"
            } else {
                "data"
            };
            bail!(
                "--parallelism {name} needs --workers N with N >= 2 (the data is cut into one partition per worker), or --workers 0 with at least two `easeml worker`s running; with one worker, task parallelism trains the same models on all the data"
            );
        }
        config.parallelism = self.parallelism;
        config.mop_epochs = self.epochs;
        config.mop_patience = self.patience;
        config.mop_above_bytes = self.mop_above;
        Ok(())
    }
}

fn parse_parallelism(name: &str) -> Result<Parallelism, String> {
    Parallelism::from_name(name).ok_or_else(|| {
        format!(
            "unknown parallelism `{name}` (known: {})",
            Parallelism::NAMES
        )
    })
}

/// A size in bytes: digits, optionally followed by K, M or G (binary units, an optional `B` or
/// `iB` after them), e.g. `512M`, `2G`, `0`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => {
            return Err(format!(
                "`{text}` is not a size: write bytes, or a number with K, M or G, e.g. 512M"
            ));
        }
    };
    let number: u64 = number.parse().map_err(|_| {
        format!("`{text}` is not a size: write bytes, or a number with K, M or G, e.g. 512M")
    })?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large a size"))
}

fn parse_tuning(name: &str) -> Result<Tuning, String> {
    Tuning::from_name(name)
        .ok_or_else(|| format!("unknown tuner `{name}` (known: grid, trimtuner)"))
}

/// Trains the store's apps and prints each app's best model at the end.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let bound = args.store.bind()?;
    let home = crate::serve::existing_store(bound.path.clone())?;
    let devices = worker_devices(args.workers, args.devices.as_deref())?;
    let mut config = EngineConfig::for_device(devices[0]);
    if let Some(max_run) = args.max_run {
        config.max_run_seconds = max_run.as_secs_f64();
    }
    config.tuning = args.tuner;
    config.lease_ttl = args.lease_ttl;
    config.coordinate = args.workers != 1;
    args.parallelism.apply(args.workers, &mut config)?;
    let mut engine = crate::serve::open_engine(bound, config)?;
    let _workers = match args.workers {
        0 => {
            eprintln!(
                "coordinating the workers of {} (start them with `easeml worker --store {}`)",
                home.display(),
                home.display()
            );
            None
        }
        1 => None,
        count => Some(LocalWorkers::start(&home, count, &devices, args.lease_ttl)?),
    };
    train_with_progress(&mut engine, args.budget)?;
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
        write_quality(engine.store(), out)?;
    }
    Ok(())
}

/// `--plot DIR`: quality.csv, and with the `lab` feature quality.svg and quality.png.
fn write_quality(store: &easeml_runtime::store::Store, out: &Path) -> anyhow::Result<()> {
    let curves = quality_curves(store)?;
    let mut csv = String::from("app,minutes,best_quality\n");
    for (app, points) in &curves {
        for (minutes, quality) in points {
            csv.push_str(&format!("{app},{minutes:.4},{quality:.6}\n"));
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{}`", out.display()))?;
    std::fs::write(out.join("quality.csv"), csv)
        .with_context(|| format!("cannot write into `{}`", out.display()))?;
    #[cfg(feature = "lab")]
    {
        let curves: Vec<_> = curves
            .into_iter()
            .map(|(app, points)| easeml_bench::harness::plot::QualityCurve { app, points })
            .collect();
        for note in easeml_bench::harness::plot::write_quality_plots(&curves, out)? {
            eprintln!("note: {note}");
        }
        eprintln!(
            "wrote {}/quality.csv, quality.svg and quality.png",
            out.display()
        );
    }
    #[cfg(not(feature = "lab"))]
    eprintln!(
        "wrote {}/quality.csv (quality.svg and quality.png need an easeml built with the `lab` feature, its default)",
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_are_bytes_or_binary_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("3mb"), Ok(3 << 20));
        for bad in ["", "M", "1.5G", "-1", "1T", "99999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
