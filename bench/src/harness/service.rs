//! `easeml bench service`: what a shared service costs as its load grows. One configuration
//! starts `easeml serve` (this binary, a child process, on a fresh SQLite or PostgreSQL store),
//! registers N apps of mixed workloads (tabular, 8x8 images, series) over HTTP, feeds M generated
//! examples to each from C concurrent clients (the real remote client, in its own request sizes)
//! while the server only serves, then serves the same store again with W training workers and,
//! once a tabular app serves a model (`first_model_s`), for the training budget keeps feeding
//! small batches while C clients ask one tabular answer at a time of the apps that serve one, and
//! measures: feed examples/s and MB/s (with serde_json's parse rate of the
//! same lines in this process as the physical reference), infer latency p50/p99/max, one app's
//! `status` over HTTP, the server's peak RSS and its RSS with the apps registered and idle, the
//! workers' peak RSS, the store's bytes per example, the runs finished, and the examples
//! acknowledged against those stored (they must be equal). After the server stops, one
//! scheduling decision over all N apps is timed in this process (`Engine::time_decision`).
//!
//! `--sweep apps|examples|clients` repeats the configuration with one size stepped by powers of
//! ten (clients by 4) up to the given one and fits each cost's growth exponent against the work
//! (a least-squares line through log-log points): `summary.json` (`growth.<metric>.exponent`,
//! every point under `sweep`) and `growth.svg` / `growth.png`.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use easeml_runtime::app_cli::parse_duration;
use easeml_runtime::engine::{Engine, EngineConfig};
use easeml_runtime::{AppSpec, Client, Connection, Error as ClientError, FeedOptions, Manifest};
use serde_json::{Value, json};

use crate::harness::plot::{GrowthPlot, write_growth_plots};
use crate::harness::store::percentile;

/// Arguments of `easeml bench service`.
#[derive(Debug, Args)]
pub struct ServiceBenchArgs {
    /// Apps registered (workloads in turn: tabular, images, series).
    #[arg(long, default_value_t = 4, value_name = "N")]
    apps: usize,
    /// Examples fed to each app before training is measured.
    #[arg(long, default_value_t = 10_000, value_name = "M")]
    examples: usize,
    /// Concurrent clients, feeding and asking.
    #[arg(long, default_value_t = 8, value_name = "C")]
    clients: usize,
    /// Training runs at once on the server (`easeml serve --workers`; 0: no training).
    #[arg(long, default_value_t = 1, value_name = "W")]
    workers: usize,
    /// The store's backend.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite)]
    store: StoreKind,
    /// With `--store postgres`: a PostgreSQL server whose user may create databases, as
    /// `postgres://user[:password]@host:port` (no database: the bench makes and drops its own).
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Step one size by powers of ten (clients by 4) up to the given one, and fit growth exponents.
    #[arg(long, value_enum)]
    sweep: Option<Sweep>,
    /// How long training runs while feeding and asking go on, per configuration, e.g. `30s`.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    budget: Duration,
    /// The longest one training run may take on the server.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    max_run: Duration,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Where the service keeps its apps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    Sqlite,
    Postgres,
}

/// The size a sweep steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Sweep {
    Apps,
    Examples,
    Clients,
}

/// The most a configuration may ask for (a typo should not fill the disk).
const MAX_APPS: usize = 10_000;
const MAX_EXAMPLES: usize = 10_000_000;
const MAX_CLIENTS: usize = 1024;
/// Examples per `feed_lines` call (the client cuts them into requests of its own size).
const FEED_CHUNK: usize = 20_000;
/// Examples of each background feed during the training budget.
const TRICKLE: usize = 100;

/// The workloads an app can have, in the order apps take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Tabular,
    Images,
    Series,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Tabular, Workload::Images, Workload::Series];

    fn of_app(index: usize) -> Workload {
        Workload::ALL[index % Workload::ALL.len()]
    }

    fn program(self) -> &'static str {
        match self {
            Workload::Tabular => "Input = [16]\nOutput = [2]\nlabels = [no, yes]\n",
            Workload::Images => "Input = [8, 8]\nOutput = [4]\nlabels = [a, b, c, d]\n",
            Workload::Series => concat!(
                "type Input\n  frame :: Tensor[4]\n  next :: Nullable{Input}\nend\n",
                "Output = [3]\nlabels = [low, mid, high]\n"
            ),
        }
    }

    /// Example `index` as a feed line: inputs from a seeded generator, the label a function of
    /// them (so that models can learn something and training is real work).
    fn line(self, app: usize, index: usize) -> String {
        let mut state = (app as u64) << 32 ^ index as u64 ^ 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 20_001) as f64 / 10_000.0 - 1.0
        };
        let numbers = |count: usize, next: &mut dyn FnMut() -> f64| -> Vec<String> {
            (0..count).map(|_| format!("{:.4}", next())).collect()
        };
        match self {
            Workload::Tabular => {
                let values = numbers(16, &mut next);
                let sum: f64 = values[..4]
                    .iter()
                    .filter_map(|v| v.parse::<f64>().ok())
                    .sum();
                let label = if sum > 0.0 { "yes" } else { "no" };
                format!("[{}] {label}", values.join(", "))
            }
            Workload::Images => {
                let rows: Vec<String> = (0..8)
                    .map(|_| format!("[{}]", numbers(8, &mut next).join(", ")))
                    .collect();
                let label = ["a", "b", "c", "d"][index % 4];
                format!("[{}] {label}", rows.join(", "))
            }
            Workload::Series => {
                let length = 4 + index % 9;
                let frames: Vec<String> = (0..length)
                    .map(|_| format!("{{\"frame\": [{}]}}", numbers(4, &mut next).join(", ")))
                    .collect();
                let label = ["low", "mid", "high"][length % 3];
                format!(
                    "{{\"input\": [{}], \"output\": \"{label}\"}}",
                    frames.join(", ")
                )
            }
        }
    }
}

/// One configuration's sizes.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    apps: usize,
    examples: usize,
    clients: usize,
}

/// Runs `easeml bench service`.
pub fn run(args: &ServiceBenchArgs) -> anyhow::Result<()> {
    check_sizes(args)?;
    if args.store == StoreKind::Postgres && args.postgres.is_none() {
        bail!(
            "--store postgres needs --postgres postgres://USER@HOST:PORT: \
             a server whose user may create databases; the bench makes and drops its own"
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let full = Sizes {
        apps: args.apps,
        examples: args.examples,
        clients: args.clients,
    };
    let points = sweep_points(full, args.sweep);
    let mut measured = Vec::new();
    for (step, sizes) in points.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} apps x {} examples, {} clients, {} workers, {:?} store",
            step + 1,
            points.len(),
            sizes.apps,
            sizes.examples,
            sizes.clients,
            args.workers,
            args.store
        );
        let result = measure(args, *sizes, &args.out.join(format!("run-{step}")))?;
        eprintln!("    {}", one_line(&result));
        measured.push(result);
    }
    let mut summary = measured.last().cloned().unwrap_or(Value::Null);
    summary["config"]["workers"] = json!(args.workers);
    summary["config"]["store"] = json!(format!("{:?}", args.store).to_lowercase());
    summary["config"]["budget_s"] = json!(args.budget.as_secs_f64());
    if let Some(sweep) = args.sweep {
        let (growth, plot) = growth(sweep, &measured);
        summary["growth"] = growth;
        if sweep == Sweep::Apps
            && let [first, .., last] = measured.as_slice()
        {
            // The server's memory per registered idle app: the slope of its RSS against the apps.
            let apps = |point: &Value| point["config"]["apps"].as_f64().unwrap_or(f64::NAN);
            let idle = |point: &Value| lookup(point, "rss_mb.server_idle_apps");
            let per_app_kb = (idle(last) - idle(first)) * 1024.0 / (apps(last) - apps(first));
            summary["rss_kb_per_idle_app"] = json!(per_app_kb);
            eprintln!("server memory per idle app: {per_app_kb:.0} KB");
        }
        summary["sweep"] = json!({"size": format!("{sweep:?}").to_lowercase(), "points": measured});
        for note in write_growth_plots(&plot, &args.out)? {
            eprintln!("note: {note}");
        }
        for (metric, fit) in summary["growth"].as_object().into_iter().flatten() {
            eprintln!("growth of {metric}: exponent {}", fit["exponent"]);
        }
    }
    let path = args.out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    let lost = measured
        .iter()
        .any(|point| point["acknowledged"] != point["stored"]);
    if lost {
        bail!("examples acknowledged and stored differ (see summary.json): the service lost data");
    }
    Ok(())
}

fn check_sizes(args: &ServiceBenchArgs) -> anyhow::Result<()> {
    for (flag, value, max) in [
        ("--apps", args.apps, MAX_APPS),
        ("--examples", args.examples, MAX_EXAMPLES),
        ("--clients", args.clients, MAX_CLIENTS),
    ] {
        if value == 0 || value > max {
            bail!("{flag} {value}: give a number from 1 to {max}");
        }
    }
    if args.workers > 64 {
        bail!(
            "--workers {}: at most 64 local worker processes",
            args.workers
        );
    }
    Ok(())
}

/// The configurations of a sweep: the stepped size from its smallest value up to the given one.
fn sweep_points(full: Sizes, sweep: Option<Sweep>) -> Vec<Sizes> {
    let steps = |top: usize, first: usize, factor: usize| {
        let mut values = Vec::new();
        let mut value = first;
        while value < top {
            values.push(value);
            value *= factor;
        }
        values.push(top);
        values
    };
    match sweep {
        None => vec![full],
        Some(Sweep::Apps) => steps(full.apps, 1, 10)
            .into_iter()
            .map(|apps| Sizes { apps, ..full })
            .collect(),
        Some(Sweep::Examples) => steps(full.examples, 1000.min(full.examples), 10)
            .into_iter()
            .map(|examples| Sizes { examples, ..full })
            .collect(),
        Some(Sweep::Clients) => steps(full.clients, 1, 4)
            .into_iter()
            .map(|clients| Sizes { clients, ..full })
            .collect(),
    }
}

/// The store a configuration's service keeps its apps in (for PostgreSQL, a database the bench
/// made and drops).
struct BenchStore {
    home: PathBuf,
    database: Option<(String, String)>,
}

impl BenchStore {
    fn create(args: &ServiceBenchArgs, folder: &Path) -> anyhow::Result<BenchStore> {
        let (StoreKind::Postgres, Some(server)) = (&args.store, &args.postgres) else {
            return Ok(BenchStore {
                home: folder.join("store"),
                database: None,
            });
        };
        let label = folder
            .file_name()
            .map(|name| name.to_string_lossy().replace('-', "_"))
            .unwrap_or_default();
        let name = format!("easeml_bench_service_{}_{label}", std::process::id());
        let url = easeml_runtime::store::create_database(server, &name)?;
        let database = Some((server.clone(), name));
        Ok(BenchStore {
            home: easeml_runtime::store::store_home(&url, Some(&folder.join("blobs")))?,
            database,
        })
    }

    /// The store's size on disk (for PostgreSQL: the database's size plus the blob folder).
    fn bytes(&self) -> anyhow::Result<u64> {
        let mut bytes = folder_bytes(&self.home);
        if let Some((server, name)) = &self.database {
            let mut client =
                postgres::Client::connect(&format!("{server}/postgres"), postgres::NoTls)?;
            let row = client.query_one("SELECT pg_database_size($1)", &[name])?;
            bytes += row.get::<_, i64>(0).max(0) as u64;
        }
        Ok(bytes)
    }
}

impl Drop for BenchStore {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.database
            && let Ok(mut admin) =
                postgres::Client::connect(&format!("{server}/postgres"), postgres::NoTls)
        {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }
}

/// The server under measurement (`easeml serve`, a child process) and its URL.
struct Service {
    child: Child,
    url: String,
}

impl Service {
    /// Starts `easeml serve` on `store` at `port`: serving only, or training with `--workers`.
    fn start(
        args: &ServiceBenchArgs,
        store: &BenchStore,
        port: u16,
        train: bool,
        log: &Path,
    ) -> anyhow::Result<Service> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--store"])
            .arg(&store.home)
            .args(["--max-run", &format!("{}s", args.max_run.as_secs().max(1))])
            .args(["--max-connections", &(4 * args.clients + 16).to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?);
        match args.workers {
            workers if train && workers > 0 => command.args(["--workers", &workers.to_string()]),
            _ => command.arg("--no-train"),
        };
        let child = command.spawn().context("starting `easeml serve`")?;
        let mut service = Service {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        service.wait_until_up(log)?;
        Ok(service)
    }

    fn wait_until_up(&mut self, log: &Path) -> anyhow::Result<()> {
        let started = Instant::now();
        let address = self.url.trim_start_matches("http://").to_owned();
        while std::net::TcpStream::connect(&address).is_err() {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "`easeml serve` exited ({status}) before answering; its log: {}",
                    log.display()
                );
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!("`easeml serve` did not listen within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Peak and current resident memory of the server, and the largest peak of its workers, MB.
    fn memory(&self) -> (f64, f64, Option<f64>) {
        let pid = self.child.id();
        let workers = children(pid)
            .into_iter()
            .filter_map(|child| proc_status_mb(child, "VmHWM"))
            .reduce(f64::max);
        (
            proc_status_mb(pid, "VmHWM").unwrap_or(f64::NAN),
            proc_status_mb(pid, "VmRSS").unwrap_or(f64::NAN),
            workers,
        )
    }

    /// Stops the server as Ctrl-C would (runs in flight finish) and waits for it.
    fn stop(&mut self) -> anyhow::Result<()> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > Duration::from_secs(120) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process's `/proc/PID/status` field (kB) in MB.
fn proc_status_mb(pid: u32, field: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|line| line.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The direct children of a process.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|child| child.parse().ok())
        .collect()
}

/// The disk space a folder takes (allocated blocks, as `du` counts them: a file of 300 bytes
/// takes a block of 4 KiB).
fn folder_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let allocated = |metadata: std::fs::Metadata| metadata.blocks() * 512;
    let Ok(entries) = std::fs::read_dir(path) else {
        return std::fs::metadata(path).map(allocated).unwrap_or(0);
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => folder_bytes(&entry.path()),
            _ => entry.metadata().map(allocated).unwrap_or(0),
        })
        .sum()
}

/// The apps (app `i` is `bench_i`) and how to reach them. A client is not shared between
/// threads: each thread opens its own clients ([`Apps::client`]), with the token the
/// registration saved in the bench's token folder.
struct Apps {
    connection: Connection,
    specs: Vec<AppSpec>,
}

/// One thread's open clients, by app.
type Clients = BTreeMap<usize, Client>;

impl Apps {
    /// Registers `count` apps through the remote client from `threads` threads.
    fn register(url: &str, count: usize, threads: usize, tokens: &Path) -> anyhow::Result<Apps> {
        let apps = Apps {
            connection: Connection::Remote {
                url: url.to_owned(),
                token: None,
                admin_token: None,
                token_dir: Some(tokens.to_owned()),
            },
            specs: (0..count).map(app_spec).collect::<anyhow::Result<_>>()?,
        };
        let next = AtomicUsize::new(0);
        let failure = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..threads.min(count) {
                scope.spawn(|| {
                    while let Some(spec) = apps.specs.get(next.fetch_add(1, Ordering::SeqCst)) {
                        if let Err(error) = Client::open(&apps.connection, spec.clone()) {
                            *lock(&failure) = Some(anyhow::Error::new(error));
                        }
                    }
                });
            }
        });
        match lock(&failure).take() {
            Some(error) => Err(error.context("registering the bench's apps")),
            None => Ok(apps),
        }
    }

    fn len(&self) -> usize {
        self.specs.len()
    }

    /// This thread's client of app `index`, opened on first use.
    fn client<'a>(&self, mine: &'a mut Clients, index: usize) -> anyhow::Result<&'a mut Client> {
        if let std::collections::btree_map::Entry::Vacant(entry) = mine.entry(index) {
            entry.insert(
                Client::open(&self.connection, self.specs[index].clone())
                    .with_context(|| format!("opening bench_{index}"))?,
            );
        }
        mine.get_mut(&index).context("a client just opened")
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// App `index`'s program compiled by the built-in registry, as the client registers it.
fn app_spec(index: usize) -> anyhow::Result<AppSpec> {
    let name = format!("bench_{index}");
    let registry = easeml_compiler::Registry::builtin();
    let program = Workload::of_app(index).program();
    let (_, compiled) = easeml_compiler::compile_bytes(program.as_bytes(), &name, &registry);
    let compiled = compiled.map_err(|_| anyhow::anyhow!("the bench's program for {name} fails"))?;
    let manifest: Manifest = easeml_compiler::codegen::manifest(&compiled);
    Ok(AppSpec::from_manifest(&manifest)?)
}

/// What feeding measured.
#[derive(Debug, Default)]
struct Fed {
    examples: usize,
    bytes: usize,
    seconds: f64,
}

/// Feeds `examples` examples to every app from `threads` clients; chunks of one app go in order.
fn feed_all(apps: &Apps, examples: usize, threads: usize) -> anyhow::Result<Fed> {
    // The lines exist before the clock starts, as a user's file does: the feed's time is the
    // client's checks, the requests and the server's work, not this generator's (formatting the
    // numbers was ~15% of the bench process's time in the clock before).
    let chunks: Vec<(usize, String)> = (0..apps.len())
        .flat_map(|app| {
            (0..examples).step_by(FEED_CHUNK).map(move |first| {
                (
                    app,
                    feed_text(app, first..(first + FEED_CHUNK).min(examples)),
                )
            })
        })
        .collect();
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Fed::default());
    let failure = Mutex::new(None);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut mine = Clients::new();
                while let Some((app, text)) = chunks.get(next.fetch_add(1, Ordering::SeqCst)) {
                    match feed_chunk(apps, &mut mine, *app, text) {
                        Ok(added) => {
                            let mut totals = lock(&totals);
                            totals.examples += added;
                            totals.bytes += text.len();
                        }
                        Err(error) => *lock(&failure) = Some(error),
                    }
                }
            });
        }
    });
    if let Some(error) = lock(&failure).take() {
        return Err(error);
    }
    let mut fed = totals
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    fed.seconds = started.elapsed().as_secs_f64();
    Ok(fed)
}

/// The lines of examples `range` of app `app`, one a line.
fn feed_text(app: usize, range: std::ops::Range<usize>) -> String {
    let workload = Workload::of_app(app);
    let mut text = String::new();
    for index in range {
        text.push_str(&workload.line(app, index));
        text.push('\n');
    }
    text
}

/// One feed call of `text` (lines of app `app`): the examples stored.
fn feed_chunk(apps: &Apps, mine: &mut Clients, app: usize, text: &str) -> anyhow::Result<usize> {
    let report = apps
        .client(mine, app)?
        .feed_lines(text.as_bytes(), &FeedOptions::default())
        .with_context(|| format!("feeding bench_{app}"))?;
    Ok(report.added)
}

/// How fast serde_json parses the JSON of the fed lines in this process (the physical reference
/// for the feed's MB/s), in MB/s: the first [`FEED_CHUNK`] lines of each workload the apps have,
/// parsed apart from the feed so that the feed's time holds none of it.
fn serde_json_mb_per_s(apps: usize, examples: usize) -> f64 {
    let (mut bytes, mut seconds) = (0, 0.0);
    for app in 0..apps.min(Workload::ALL.len()) {
        let text = feed_text(app, 0..examples.min(FEED_CHUNK));
        let started = Instant::now();
        for line in text.lines() {
            let value = match Workload::of_app(app) {
                Workload::Series => serde_json::from_str::<Value>(line),
                _ => serde_json::from_str::<Value>(line.rsplit_once(' ').map_or(line, |(v, _)| v)),
            };
            std::hint::black_box(value.ok());
        }
        seconds += started.elapsed().as_secs_f64();
        bytes += text.len();
    }
    bytes as f64 / 1e6 / seconds.max(1e-9)
}

/// What the clients' questions measured while training ran.
#[derive(Debug, Default)]
struct Asked {
    latencies_ms: Vec<f64>,
    before_a_model: usize,
    failed: usize,
    trickled: usize,
    status_ms: Vec<f64>,
    /// How long the first models of the asked apps took (before the budget).
    first_model_s: f64,
}

/// How long the training phase waits for a first model of an asked app before its budget starts.
const FIRST_MODEL_WAIT: Duration = Duration::from_secs(600);

/// Waits until at least one app of `candidates` serves a model (the server trains them), so that
/// the budget measures answers of models while training goes on rather than the wait for the
/// first one; returns the seconds waited and the apps that serve a model by then.
fn wait_for_first_models(apps: &Apps, candidates: &[usize]) -> anyhow::Result<(f64, Vec<usize>)> {
    let started = Instant::now();
    let mut mine = Clients::new();
    loop {
        let mut serving = Vec::new();
        for &app in candidates {
            if apps.client(&mut mine, app)?.status()?.best.is_some() {
                serving.push(app);
            }
        }
        if !serving.is_empty() {
            return Ok((started.elapsed().as_secs_f64(), serving));
        }
        if started.elapsed() > FIRST_MODEL_WAIT {
            bail!(
                "no tabular app had a model after {} s of training: see serve-train.log",
                FIRST_MODEL_WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Once a tabular app serves a model, for `budget`: `threads` clients ask one tabular answer at a
/// time (round robin over the tabular apps that served a model by then), one feeder adds batches
/// of [`TRICKLE`] examples to every app in turn, and one app's status is read every half second.
fn ask_while_training(
    apps: &Apps,
    examples: usize,
    threads: usize,
    budget: Duration,
    training: bool,
) -> anyhow::Result<Asked> {
    let tabular: Vec<usize> = (0..apps.len())
        .filter(|app| Workload::of_app(*app) == Workload::Tabular)
        .collect();
    // Without training workers no model comes: the questions then measure the 409 answers.
    let (first_model_s, tabular) = if training {
        wait_for_first_models(apps, &tabular)?
    } else {
        (f64::NAN, tabular)
    };
    let stop = AtomicBool::new(false);
    let asked = Mutex::new(Asked::default());
    let turn = AtomicUsize::new(0);
    let fed_next = AtomicUsize::new(examples);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut mine = Clients::new();
                while !stop.load(Ordering::SeqCst) {
                    let app = tabular[turn.fetch_add(1, Ordering::SeqCst) % tabular.len()];
                    let line =
                        Workload::Tabular.line(app, usize::MAX - turn.load(Ordering::SeqCst));
                    let input = line
                        .rsplit_once(' ')
                        .map_or(line.as_str(), |(input, _)| input);
                    let started = Instant::now();
                    let answer = apps.client(&mut mine, app).map(|client| {
                        client.infer_lines(input.as_bytes(), &FeedOptions::default())
                    });
                    let elapsed = started.elapsed().as_secs_f64() * 1e3;
                    let mut asked = lock(&asked);
                    match answer {
                        Ok(Ok(_)) => asked.latencies_ms.push(elapsed),
                        Ok(Err(ClientError::NoModel { .. })) => {
                            asked.before_a_model += 1;
                            drop(asked);
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Ok(Err(_)) | Err(_) => asked.failed += 1,
                    }
                }
            });
        }
        scope.spawn(|| {
            let mut mine = Clients::new();
            let mut app = 0;
            while !stop.load(Ordering::SeqCst) {
                let first = fed_next.fetch_add(TRICKLE, Ordering::SeqCst);
                let text = feed_text(app, first..first + TRICKLE);
                if let Ok(added) = feed_chunk(apps, &mut mine, app, &text) {
                    lock(&asked).trickled += added;
                }
                app = (app + 1) % apps.len();
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        scope.spawn(|| {
            let mut mine = Clients::new();
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let status = apps
                    .client(&mut mine, 0)
                    .and_then(|client| Ok(client.status()?));
                if status.is_ok() {
                    lock(&asked)
                        .status_ms
                        .push(started.elapsed().as_secs_f64() * 1e3);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        std::thread::sleep(budget);
        stop.store(true, Ordering::SeqCst);
    });
    let mut asked = asked
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    asked.first_model_s = first_model_s;
    Ok(asked)
}

/// One configuration, measured; its `summary.json` object.
fn measure(args: &ServiceBenchArgs, sizes: Sizes, folder: &Path) -> anyhow::Result<Value> {
    let _ = std::fs::remove_dir_all(folder);
    std::fs::create_dir_all(folder)?;
    let store = BenchStore::create(args, folder)?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    // Feeding is measured on a server that only serves, so that training does not share the
    // cores with it; then the same store is served with training while feeding and asking go on.
    let mut service = Service::start(args, &store, port, false, &folder.join("serve-feed.log"))?;
    let registered_started = Instant::now();
    let apps = Apps::register(
        &service.url,
        sizes.apps,
        sizes.clients,
        &folder.join("tokens"),
    )?;
    let register_seconds = registered_started.elapsed().as_secs_f64();
    let (_, idle_rss, _) = service.memory();
    let fed = feed_all(&apps, sizes.examples, sizes.clients)?;
    let (feed_peak_rss, _, _) = service.memory();
    service.stop()?;
    let mut service = Service::start(args, &store, port, true, &folder.join("serve-train.log"))?;
    let asked = ask_while_training(
        &apps,
        sizes.examples,
        sizes.clients,
        args.budget,
        args.workers > 0,
    )?;
    let (train_peak_rss, _, worker_rss) = service.memory();
    let peak_rss = feed_peak_rss.max(train_peak_rss);
    let mut stored = 0u64;
    let mut runs_done = 0usize;
    let mut mine = Clients::new();
    for app in 0..apps.len() {
        let status = apps.client(&mut mine, app)?.status()?;
        stored += status.examples;
        runs_done += status
            .runs
            .iter()
            .filter(|run| run.state == easeml_runtime::RunState::Done)
            .count();
    }
    service.stop()?;
    let store_bytes = store.bytes()?;
    let decision_ms = time_decisions(&store.home)?;
    let acknowledged = fed.examples + asked.trickled;
    let mut latencies = asked.latencies_ms.clone();
    latencies.sort_by(f64::total_cmp);
    let mut status_ms = asked.status_ms.clone();
    status_ms.sort_by(f64::total_cmp);
    let mb = fed.bytes as f64 / 1e6;
    Ok(json!({
        "config": {"apps": sizes.apps, "examples": sizes.examples, "clients": sizes.clients},
        "register_s": register_seconds,
        "feed": {
            "examples": fed.examples,
            "seconds": fed.seconds,
            "examples_per_s": fed.examples as f64 / fed.seconds,
            "mb_per_s": mb / fed.seconds,
            "serde_json_mb_per_s": serde_json_mb_per_s(sizes.apps, sizes.examples),
        },
        "infer": {
            "answers": latencies.len(),
            "p50_ms": percentile(&latencies, 0.5),
            "p99_ms": percentile(&latencies, 0.99),
            "max_ms": latencies.last().copied().unwrap_or(f64::NAN),
            "before_a_model": asked.before_a_model,
            "failed": asked.failed,
        },
        "first_model_s": asked.first_model_s,
        "status_ms": percentile(&status_ms, 0.5),
        "decision_ms": decision_ms,
        "rss_mb": {
            "server": peak_rss,
            "server_idle_apps": idle_rss,
            "worker": worker_rss,
        },
        "store": {
            "bytes": store_bytes,
            "bytes_per_example": store_bytes as f64 / (stored.max(1)) as f64,
        },
        "runs_done": runs_done,
        "acknowledged": acknowledged,
        "stored": stored,
    }))
}

/// The median of up to 20 timed scheduling decisions over the store's apps (an engine opened on
/// the stopped server's store, in this process); NaN when nothing is left to decide.
fn time_decisions(home: &Path) -> anyhow::Result<f64> {
    let mut engine = Engine::open(home, EngineConfig::for_device(tch::Device::Cpu))?;
    let mut times = Vec::new();
    for _ in 0..20 {
        match engine.time_decision(&mut |_| {})? {
            Some(elapsed) => times.push(elapsed.as_secs_f64() * 1e3),
            None => break,
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(percentile(&times, 0.5))
}

fn one_line(point: &Value) -> String {
    format!(
        "feed {:.0} examples/s ({:.1} MB/s), infer p50 {:.1} ms p99 {:.1} ms, status {:.1} ms, \
         decision {:.2} ms, server RSS {:.0} MB, {:.0} bytes/example, {} runs, acknowledged {} \
         stored {}",
        point["feed"]["examples_per_s"].as_f64().unwrap_or(f64::NAN),
        point["feed"]["mb_per_s"].as_f64().unwrap_or(f64::NAN),
        point["infer"]["p50_ms"].as_f64().unwrap_or(f64::NAN),
        point["infer"]["p99_ms"].as_f64().unwrap_or(f64::NAN),
        point["status_ms"].as_f64().unwrap_or(f64::NAN),
        point["decision_ms"].as_f64().unwrap_or(f64::NAN),
        point["rss_mb"]["server"].as_f64().unwrap_or(f64::NAN),
        point["store"]["bytes_per_example"]
            .as_f64()
            .unwrap_or(f64::NAN),
        point["runs_done"],
        point["acknowledged"],
        point["stored"],
    )
}

/// The metrics whose growth a sweep fits, as paths into a point's JSON.
const GROWTH_METRICS: [&str; 8] = [
    "feed.seconds",
    "feed.examples_per_s",
    "infer.p99_ms",
    "status_ms",
    "decision_ms",
    "rss_mb.server",
    "rss_mb.server_idle_apps",
    "store.bytes_per_example",
];

/// Each metric's growth exponent against the work of the sweep (examples fed in all for the apps
/// and examples sweeps, clients for the clients sweep), and the plot of them.
fn growth(sweep: Sweep, points: &[Value]) -> (Value, GrowthPlot) {
    let work = |point: &Value| -> f64 {
        let config = &point["config"];
        let number = |key: &str| config[key].as_f64().unwrap_or(f64::NAN);
        match sweep {
            Sweep::Clients => number("clients"),
            Sweep::Apps | Sweep::Examples => number("apps") * number("examples"),
        }
    };
    let mut fits = BTreeMap::new();
    let mut series = Vec::new();
    for metric in GROWTH_METRICS {
        let pairs: Vec<(f64, f64)> = points
            .iter()
            .map(|point| (work(point), lookup(point, metric)))
            .filter(|(x, y)| x.is_finite() && *x > 0.0 && y.is_finite() && *y > 0.0)
            .collect();
        let Some(exponent) = log_log_slope(&pairs) else {
            continue;
        };
        fits.insert(
            metric.to_owned(),
            json!({"exponent": exponent, "points": pairs}),
        );
        let first = pairs[0].1;
        series.push((
            format!("{metric} (exponent {exponent:.2})"),
            pairs.iter().map(|(x, y)| (*x, y / first)).collect(),
        ));
    }
    let x_label = match sweep {
        Sweep::Clients => "concurrent clients",
        Sweep::Apps => "examples in all (apps x examples per app; apps grow)",
        Sweep::Examples => "examples in all (apps x examples per app; examples grow)",
    };
    (
        serde_json::to_value(fits).unwrap_or_default(),
        GrowthPlot {
            title: format!("easeml bench service --sweep {sweep:?}").to_lowercase(),
            x_label: x_label.to_owned(),
            series,
        },
    )
}

/// A dotted path's number in a point (`feed.seconds`).
fn lookup(point: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(point, |value, key| &value[key])
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// The least-squares slope of `ln y` against `ln x`; `None` below two distinct x.
fn log_log_slope(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points.iter().map(|(x, y)| (x.ln(), y.ln())).collect();
    let n = logs.len() as f64;
    let mean_x = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = logs.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (logs.len() >= 2 && sxx > 1e-12).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_power_law_is_its_exponent() {
        let points: Vec<(f64, f64)> = [1.0, 10.0, 100.0, 1000.0]
            .iter()
            .map(|x: &f64| (*x, 3.0 * x.powf(1.5)))
            .collect();
        let slope = log_log_slope(&points).unwrap();
        assert!((slope - 1.5).abs() < 1e-9, "{slope}");
        assert_eq!(log_log_slope(&points[..1]), None);
        assert_eq!(log_log_slope(&[(5.0, 1.0), (5.0, 2.0)]), None);
    }

    #[test]
    fn a_sweep_steps_from_its_smallest_size_to_the_given_one() {
        let full = Sizes {
            apps: 300,
            examples: 50_000,
            clients: 64,
        };
        let apps: Vec<usize> = sweep_points(full, Some(Sweep::Apps))
            .iter()
            .map(|s| s.apps)
            .collect();
        assert_eq!(apps, [1, 10, 100, 300]);
        let examples: Vec<usize> = sweep_points(full, Some(Sweep::Examples))
            .iter()
            .map(|s| s.examples)
            .collect();
        assert_eq!(examples, [1000, 10_000, 50_000]);
        let clients: Vec<usize> = sweep_points(full, Some(Sweep::Clients))
            .iter()
            .map(|s| s.clients)
            .collect();
        assert_eq!(clients, [1, 4, 16, 64]);
        assert_eq!(sweep_points(full, None).len(), 1);
    }

    #[test]
    fn every_workload_line_is_a_valid_feed_line_of_its_app() {
        let home = tempfile::tempdir().unwrap();
        for app in 0..3 {
            let mut client =
                Client::open(&Connection::embedded(home.path()), app_spec(app).unwrap()).unwrap();
            let lines: String = [0, 1, 7, 12_345]
                .iter()
                .map(|index| Workload::of_app(app).line(app, *index) + "\n")
                .collect();
            let report = client
                .feed_lines(lines.as_bytes(), &FeedOptions::default())
                .unwrap_or_else(|error| panic!("app {app}: {error}\n{lines}"));
            assert_eq!(report.added, 4);
        }
    }
}
