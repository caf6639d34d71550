//! `easeml bench store`: the store's two backends side by side in one run. For SQLite (a
//! temporary folder) and PostgreSQL (a fresh database on the server of `--postgres`): feed
//! throughput (one feeder, batches of examples with their blobs), and with 1, 4 and 16 concurrent
//! workers (threads, each with its own connection, as worker processes have) lease + commit
//! cycles of trivial units: cycles per second and the latency of one cycle (median, p99). Every
//! unit must be committed exactly once: the run checks it and says so. Writes `summary.json` and
//! `cycles.svg` / `cycles.png`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use easeml_runtime::store::{
    Blob, NewApp, NewExample, NewOutput, RunState, RunValidation, Store, UnitResult,
};
use serde_json::{Value, json};

use crate::harness::plot::{BarPlot, write_bar_plots};

/// Arguments of `easeml bench store`.
#[derive(Debug, Args)]
pub struct StoreBenchArgs {
    /// A PostgreSQL server whose user may create databases, as `postgres://user[:password]@host:port`
    /// (no database: the bench creates and drops its own). Without it only SQLite is measured.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Concurrent workers, comma-separated.
    #[arg(
        long,
        default_value = "1,4,16",
        value_delimiter = ',',
        value_name = "N,..."
    )]
    workers: Vec<usize>,
    /// Units per measurement.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    units: usize,
    /// Examples fed per backend (batches of 100, 1 KiB input blobs).
    #[arg(long, default_value_t = 5000, value_name = "N")]
    examples: usize,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// One backend under measurement: how to make a fresh store of it.
enum Backend {
    Sqlite,
    Postgres { server: String },
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// A fresh, empty store's folder (for PostgreSQL: a new database bound to a new blob folder).
    fn fresh(&self, scratch: &Path, label: &str) -> anyhow::Result<PathBuf> {
        let folder = scratch.join(format!("{}-{label}", self.name()));
        match self {
            Backend::Sqlite => Ok(folder),
            Backend::Postgres { server } => {
                let database = format!("easeml_bench_{}_{label}", std::process::id());
                let url = easeml_runtime::store::create_database(server, &database)?;
                Ok(easeml_runtime::store::store_home(&url, Some(&folder))?)
            }
        }
    }

    /// Drops what [`Backend::fresh`] made on the server.
    fn clean(&self, label: &str) {
        if let Backend::Postgres { server } = self
            && let Ok(mut admin) =
                postgres::Client::connect(&format!("{server}/postgres"), postgres::NoTls)
        {
            let database = format!("easeml_bench_{}_{label}", std::process::id());
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {database}"));
        }
    }
}

fn register(store: &mut Store, name: &str) -> anyhow::Result<easeml_runtime::store::AppId> {
    let (app, _) = store.register_app(&NewApp {
        name: name.to_owned(),
        manifest: "{}".to_owned(),
        system_type: "{input: {[Tensor[256]], []}, output: {[Tensor[2]], []}}".to_owned(),
        label_capacity: Some(2),
        declared_labels: Some(vec!["a".to_owned(), "b".to_owned()]),
    })?;
    Ok(app.id)
}

/// Examples per second fed by one feeder.
fn feed_throughput(home: &Path, examples: usize) -> anyhow::Result<f64> {
    let mut store = Store::open(home)?;
    let app = register(&mut store, "feed")?;
    let started = Instant::now();
    let mut fed = 0;
    while fed < examples {
        let batch: Vec<NewExample> = (fed..(fed + 100).min(examples))
            .map(|index| {
                let mut input = vec![0u8; 1024];
                input[..8].copy_from_slice(&(index as u64).to_le_bytes());
                NewExample {
                    input: Blob::Bytes(input),
                    output: NewOutput::Label(if index % 2 == 0 { "a" } else { "b" }.to_owned()),
                }
            })
            .collect();
        fed += store.insert_examples(app, &batch)?.ids.len();
    }
    Ok(fed as f64 / started.elapsed().as_secs_f64())
}

/// One measurement of lease + commit cycles.
struct Cycles {
    per_second: f64,
    median_ms: f64,
    p99_ms: f64,
    committed: usize,
    duplicated: usize,
    lost: usize,
}

/// The `share` quantile of `sorted` (nearest rank); NaN when empty.
pub(crate) fn percentile(sorted: &[f64], share: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * share).round() as usize]
}

/// `units` units leased and committed by `workers` threads, each with its own connection.
fn lease_commit_cycles(home: &Path, workers: usize, units: usize) -> anyhow::Result<Cycles> {
    let mut store = Store::open(home)?;
    let app = register(&mut store, "units")?;
    for _ in 0..units {
        store.queue_unit(app, "logistic", "{}")?;
    }
    let checkpoint = store.put_blob(b"a checkpoint")?;
    drop(store);
    let barrier = Arc::new(Barrier::new(workers + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..workers)
        .map(|index| {
            let home = home.to_owned();
            let barrier = Arc::clone(&barrier);
            let failed = Arc::clone(&failed);
            let checkpoint = checkpoint.clone();
            std::thread::spawn(move || -> anyhow::Result<(Vec<i64>, Vec<f64>)> {
                let mut store = Store::open(&home)?;
                let owner = format!("worker:bench:{index}");
                let validation = RunValidation::default();
                let mut committed = Vec::new();
                let mut latencies = Vec::new();
                barrier.wait();
                while !failed.load(Ordering::Relaxed) {
                    let cycle = Instant::now();
                    let Some(lease) = store.lease_unit(&owner, Duration::from_secs(60))? else {
                        break;
                    };
                    let result = UnitResult::Finished {
                        quality: 0.5,
                        cost_seconds: 0.0,
                        checkpoint: &checkpoint,
                        validation: &validation,
                        infer_latency_seconds: 0.0,
                        trials: None,
                    };
                    if let Err(error) = store.commit_unit(&lease, &result) {
                        failed.store(true, Ordering::Relaxed);
                        return Err(error.into());
                    }
                    latencies.push(cycle.elapsed().as_secs_f64() * 1000.0);
                    committed.push(lease.unit.0);
                }
                Ok((committed, latencies))
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let mut committed = Vec::new();
    let mut latencies = Vec::new();
    for thread in threads {
        let (units, times) = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a bench worker panicked"))??;
        committed.extend(units);
        latencies.extend(times);
    }
    let seconds = started.elapsed().as_secs_f64();
    let total = committed.len();
    committed.sort_unstable();
    committed.dedup();
    let duplicated = total - committed.len();
    let store = Store::open(home)?;
    let done = store
        .runs(app)?
        .iter()
        .filter(|run| run.state == RunState::Done)
        .count();
    latencies.sort_by(f64::total_cmp);
    Ok(Cycles {
        per_second: total as f64 / seconds,
        median_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        committed: done,
        duplicated,
        lost: units.saturating_sub(committed.len()),
    })
}

/// The bench's stores, removed when it ends.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the bench.
pub fn run(args: &StoreBenchArgs) -> anyhow::Result<()> {
    if args.workers.is_empty() || args.workers.contains(&0) || args.workers.iter().any(|w| *w > 256)
    {
        bail!("--workers takes counts from 1 to 256, e.g. --workers 1,4,16");
    }
    if args.units == 0 || args.units > 1_000_000 {
        bail!("--units takes 1 to 1000000");
    }
    if let Some(url) = &args.postgres
        && (!easeml_runtime::store::is_postgres_url(url)
            || url.trim_end_matches('/').matches('/').count() > 2)
    {
        bail!(
            "--postgres takes a server as postgres://user[:password]@host:port, without a database (the bench makes its own), not `{}`",
            easeml_runtime::store::redact_url(url)
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let scratch = ScratchDir(args.out.join("scratch"));
    let _ = std::fs::remove_dir_all(scratch.path());
    let mut backends = vec![Backend::Sqlite];
    match &args.postgres {
        Some(server) => backends.push(Backend::Postgres {
            server: server.trim_end_matches('/').to_owned(),
        }),
        None => eprintln!("no --postgres server: measuring SQLite only"),
    }
    let mut summary = serde_json::Map::new();
    let mut groups: Vec<(String, Vec<Option<f64>>)> = args
        .workers
        .iter()
        .map(|workers| (format!("{workers} worker(s)"), vec![None; backends.len()]))
        .collect();
    println!(
        "{:<9} {:>8} {:>12} {:>11} {:>10} {:>10}  check",
        "backend", "workers", "cycles/s", "median ms", "p99 ms", "feed ex/s"
    );
    for (b, backend) in backends.iter().enumerate() {
        let home = backend.fresh(scratch.path(), "feed")?;
        let feed = feed_throughput(&home, args.examples)?;
        backend.clean("feed");
        let mut rows = Vec::new();
        for (g, &workers) in args.workers.iter().enumerate() {
            let label = format!("w{workers}");
            let home = backend.fresh(scratch.path(), &label)?;
            let cycles = lease_commit_cycles(&home, workers, args.units)?;
            backend.clean(&label);
            let check =
                if cycles.duplicated == 0 && cycles.lost == 0 && cycles.committed == args.units {
                    "every unit committed once".to_owned()
                } else {
                    format!(
                        "FAILED: {} committed, {} duplicated, {} lost",
                        cycles.committed, cycles.duplicated, cycles.lost
                    )
                };
            println!(
                "{:<9} {:>8} {:>12.0} {:>11.2} {:>10.2} {:>10.0}  {check}",
                backend.name(),
                workers,
                cycles.per_second,
                cycles.median_ms,
                cycles.p99_ms,
                feed
            );
            groups[g].1[b] = Some(cycles.per_second);
            rows.push(json!({
                "workers": workers,
                "cycles_per_second": cycles.per_second,
                "cycle_median_ms": cycles.median_ms,
                "cycle_p99_ms": cycles.p99_ms,
                "committed": cycles.committed,
                "duplicated": cycles.duplicated,
                "lost": cycles.lost,
            }));
            if cycles.duplicated != 0 || cycles.lost != 0 || cycles.committed != args.units {
                bail!("{}: {check}", backend.name());
            }
        }
        summary.insert(
            backend.name().to_owned(),
            json!({"feed_examples_per_second": feed, "lease_commit": rows}),
        );
    }
    if backends.len() == 2 {
        let ratios: Vec<Value> = args
            .workers
            .iter()
            .enumerate()
            .map(|(g, workers)| {
                let values = &groups[g].1;
                json!({"workers": workers, "postgres_over_sqlite": values[1].zip(values[0]).map(|(p, s)| p / s)})
            })
            .collect();
        summary.insert(
            "cycles_postgres_over_sqlite".to_owned(),
            Value::Array(ratios),
        );
    }
    summary.insert("units".to_owned(), json!(args.units));
    let path = args.out.join("summary.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&Value::Object(summary))?,
    )
    .with_context(|| format!("writing {}", path.display()))?;
    let plot = BarPlot {
        title: "lease + commit cycles per second".to_owned(),
        y_label: "cycles / s".to_owned(),
        series: backends.iter().map(|b| b.name().to_owned()).collect(),
        groups,
    };
    for note in write_bar_plots(&plot, &args.out, "cycles")? {
        eprintln!("{note}");
    }
    eprintln!(
        "wrote {}, cycles.svg and cycles.png in {}",
        path.display(),
        args.out.display()
    );
    Ok(())
}
