//! `easeml serve`: the HTTP server of `easeml_runtime::server` over a store directory, and the
//! engine's training loop over every app of that store on a background thread (in process, or
//! coordinating workers with `--workers`, as `easeml train`), until Ctrl-C or SIGTERM. Shutdown is graceful: requests in flight finish, and so does the training run in flight
//! (a run killed with the process is re-queued and re-run first at the next start).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use easeml_runtime::app_cli::parse_duration;
use easeml_runtime::engine::local_workers::{LocalWorkers, worker_devices};
use easeml_runtime::engine::{Engine, EngineConfig, Event, device_name};
use easeml_runtime::server;
use easeml_runtime::store::BoundHome;

/// `easeml serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    #[command(flatten)]
    store: StoreArgs,
    /// A file holding the admin token; then registering an app needs it (`Authorization: Bearer`).
    /// Without it anyone who reaches the server may register apps.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// The largest request body in bytes (larger requests get 413).
    #[arg(long, value_name = "BYTES", default_value_t = server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// The most connections served at once. Past it a new connection takes the place of the one
    /// that has waited longest for a request; only when every connection has a request in flight
    /// is it refused with 503.
    #[arg(long, value_name = "N", default_value_t = server::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// How long a client may take to send a request's headers once it has begun them (then the
    /// connection is closed), e.g. `10s`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// How long a connection may wait, sending nothing, for its first or next request (then it is
    /// closed), e.g. `60s`.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// How long reading one request's body may take (a slower body gets 408), e.g. `60s`.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    body_timeout: Duration,
    /// Serve only: do not train (another process, e.g. `easeml train`, trains the store).
    #[arg(long)]
    no_train: bool,
    /// The web console's downloads take easeml's runtime from this git repository (at
    /// --download-runtime-rev), so an unpacked download builds anywhere; default: a checkout of
    /// easeml in a folder `easeml` beside the unpacked one.
    #[arg(long, value_name = "URL")]
    download_runtime_git: Option<String>,
    /// With --download-runtime-git: the commit or tag (default: the repository's default branch).
    #[arg(long, value_name = "REV", requires = "download_runtime_git")]
    download_runtime_rev: Option<String>,
    /// The longest one training run may take (default: 2m on the CPU, 10m on CUDA).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    max_run: Option<Duration>,
    /// Training runs at once: 1 (the default) trains in this process; N > 1 starts N local
    /// `easeml worker` processes and coordinates them; 0 coordinates workers started elsewhere.
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// The devices of the local workers, in turn, e.g. `cpu` or `cuda:0,cuda:1`.
    #[arg(long, value_name = "cpu,cuda:0,...", value_delimiter = ',')]
    devices: Option<Vec<String>>,
    #[command(flatten)]
    parallelism: crate::train::ParallelismArgs,
    /// The CPU niceness of training in this process (0-19, default 0: the requests' priority):
    /// above 0, training yields the cores to requests (more answers, fewer runs when both want
    /// every core).
    #[arg(long, value_name = "0-19", default_value_t = 0,
          value_parser = clap::value_parser!(i32).range(0..=19))]
    train_nice: i32,
    /// The format of the logs on standard error (level: RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines with key=value fields.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the store of a command is: `--store` (alias `--data`) and `--blobs`, the same on every
/// command that opens a store (flattened into its arguments).
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// The store: a folder (SQLite, blobs inside) or a `postgres://` URL (rows in PostgreSQL, blobs
    /// in --blobs). Default: $EASEML_STORE, else $EASEML_HOME, else the platform data dir.
    #[arg(long = "store", alias = "data", value_name = "DIR|URL", global = true)]
    pub store: Option<PathBuf>,
    /// A `postgres://` store's blobs: a folder every worker sees (default: $EASEML_HOME, else the
    /// platform data dir), or `s3://bucket/prefix` (built with the `s3` feature; AWS_* settings).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX", global = true)]
    pub blobs: Option<PathBuf>,
}

impl StoreArgs {
    /// The store's folder ([`data_dir`]); it may not hold a store yet.
    pub fn home(&self) -> Result<PathBuf> {
        Ok(self.bind()?.path)
    }

    /// The store's folder, and whether this command bound it to its database just now (to be
    /// undone if the command is refused: [`open_engine`]).
    pub fn bind(&self) -> Result<BoundHome> {
        data_dir(self.store.as_ref(), self.blobs.as_ref())
    }

    /// The store's folder when it holds a store ([`existing_store`]).
    pub fn existing_home(&self) -> Result<PathBuf> {
        existing_store(self.home()?)
    }
}

/// Opens the engine (the store's one coordinator) over `bound`'s store. When that is refused (the
/// store is trained by another process, or cannot be opened), a binding of a `--blobs` folder that
/// this command made just before is undone, so that a mistyped folder is left as it was found.
pub fn open_engine(bound: BoundHome, config: EngineConfig) -> Result<Engine> {
    match Engine::open(&bound.path, config) {
        Ok(engine) => Ok(engine),
        Err(error) => {
            let path = bound.path.clone();
            let fresh = bound.is_fresh();
            if let Err(undo) = bound.undo() {
                tracing::warn!(error = %undo, "undoing the binding of {}", path.display());
            }
            let error = anyhow::Error::new(error);
            Err(if fresh {
                error.context(format!(
                    "opening the store for training (the binding of {} to the database, made by this command, was undone)",
                    path.display()
                ))
            } else {
                error.context(format!(
                    "opening the store at {} for training",
                    path.display()
                ))
            })
        }
    }
}

/// The store's folder: `--store`/`--data` (a folder, or a `postgres://` URL whose blobs go to
/// `--blobs` or `$EASEML_BLOBS`: [`easeml_runtime::store::bind_store_home`]), else `$EASEML_STORE`, else `$EASEML_HOME`,
/// else the platform data dir.
fn data_dir(data: Option<&PathBuf>, blobs: Option<&PathBuf>) -> Result<BoundHome> {
    let blobs = blobs.cloned().or_else(|| {
        std::env::var_os("EASEML_BLOBS")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    });
    match data {
        Some(location) => Ok(easeml_runtime::store::bind_store_home(
            &location.to_string_lossy(),
            blobs.as_deref(),
        )?),
        None => Ok(easeml_runtime::store::default_home()?.into()),
    }
}

/// `home` when it holds a store; else an error saying how one comes to be (commands that only
/// read or train a store must not create an empty one at a mistyped path).
pub fn existing_store(home: PathBuf) -> Result<PathBuf> {
    if !easeml_runtime::store::Store::exists(&home) {
        bail!(
            "no easeml store in {}: feed an app first (its `feed` command creates the store), or point --store (or EASEML_HOME) at an existing store",
            home.display()
        );
    }
    Ok(home)
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> Result<()> {
    // `POST .../infer` answers with the engine's models.
    easeml_runtime::install_engine();
    server::init_logging(args.log_format == LogFormat::Json);
    let bound = args.store.bind()?;
    let home = bound.path.clone();
    let mut config = server::Config::new(&home);
    config.listen = args.listen;
    config.max_body_bytes = args.max_body_bytes;
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    for (flag, value) in [
        ("--header-timeout", args.header_timeout),
        ("--idle-timeout", args.idle_timeout),
        ("--body-timeout", args.body_timeout),
    ] {
        if value.is_zero() {
            bail!("{flag} must be longer than 0 s, e.g. 10s");
        }
    }
    config.max_connections = args.max_connections;
    config.header_timeout = args.header_timeout;
    config.idle_timeout = args.idle_timeout;
    config.body_timeout = args.body_timeout;
    let web_compiler = match &args.download_runtime_git {
        Some(url) => crate::web_compiler::WebCompiler::with_runtime(
            easeml_compiler::codegen::RuntimeSource::Git {
                url: url.clone(),
                rev: args.download_runtime_rev.clone(),
            },
        ),
        None => crate::web_compiler::WebCompiler::builtin(),
    };
    config.compiler = Some(server::CompilerHook(std::sync::Arc::new(web_compiler)));
    if let Some(file) = &args.admin_token_file {
        let token = easeml_runtime::store::tokens::read_admin_token_file(file)
            .map_err(anyhow::Error::msg)?;
        config.admin_token = Some(token);
    }
    // The train lock is taken before the server starts, so a store trained elsewhere is an error
    // at once rather than a log line later; the loop itself starts once the server listens.
    let engine = if args.no_train {
        None
    } else {
        let devices = worker_devices(args.workers, args.devices.as_deref())?;
        let device = devices[0];
        let mut engine_config = EngineConfig::for_device(device);
        if let Some(max_run) = args.max_run {
            engine_config.max_run_seconds = max_run.as_secs_f64();
        }
        engine_config.coordinate = args.workers != 1;
        args.parallelism.apply(args.workers, &mut engine_config)?;
        let engine = open_engine(bound, engine_config)?;
        let workers = if args.workers > 1 {
            Some(LocalWorkers::start(
                &home,
                args.workers,
                &devices,
                engine.config().lease_ttl,
            )?)
        } else {
            None
        };
        Some((engine, device, workers))
    };
    let runtime = server::runtime().context("starting the async runtime")?;
    let server = runtime.block_on(server::Server::bind(config))?;
    let address = server.local_addr()?;
    let trainer = engine.map(|(engine, device, workers)| {
        if engine.config().coordinate {
            tracing::info!(
                workers = args.workers,
                "coordinating the workers of the store"
            );
        } else {
            tracing::info!(device = %device_name(device), "training every app of the store");
        }
        (Trainer::start(engine, args.train_nice), workers)
    });
    println!(
        "easeml: serving http://{address} (store {}); Ctrl-C stops",
        home.display()
    );
    let served = runtime.block_on(server.run(server::shutdown_signal()));
    if let Some((trainer, workers)) = trainer {
        trainer.stop();
        drop(workers);
    }
    served.context("serving")
}

/// The engine's loop on a thread: a run at a time, a short nap when nothing is left to train (a feed
/// or toggle makes candidates eligible again), stopping between runs when asked.
struct Trainer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Trainer {
    fn start(mut engine: Engine, nice: i32) -> Trainer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            yield_to_requests(nice);
            let mut seen = EventLog::default();
            let mut log_event = |event: Event| {
                if seen.is_news(&event) {
                    log_event(event);
                }
            };
            while !flag.load(Ordering::SeqCst) {
                if engine.config().coordinate {
                    // Until nothing is left to train now (or the server stops); a feed makes
                    // candidates eligible again.
                    match engine.coordinate_until(None, &flag, &mut log_event) {
                        Ok(_) => nap(&flag, Duration::from_secs(2)),
                        Err(error) => {
                            tracing::error!(%error, "coordinating failed");
                            nap(&flag, Duration::from_secs(10));
                        }
                    }
                    continue;
                }
                match engine.step(None, &mut log_event) {
                    Ok(Some(_)) => {}
                    Ok(None) => nap(&flag, Duration::from_secs(2)),
                    Err(error) => {
                        tracing::error!(%error, "training step failed");
                        nap(&flag, Duration::from_secs(10));
                    }
                }
            }
        });
        Trainer { stop, thread }
    }

    /// Asks the loop to stop and waits for the run in flight to finish.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        if !self.thread.is_finished() {
            tracing::info!("waiting for the training run in flight to finish");
        }
        if self.thread.join().is_err() {
            tracing::error!("the training thread panicked");
        }
    }
}

/// Lowers the calling thread's CPU priority to `nice` (`--train-nice`; Linux: a thread's own
/// niceness, inherited by the threads it starts: libtorch's and the trainer's workers); 0 leaves
/// it. Training then yields the cores to the server's requests and takes all of them when nothing
/// is asked. Not the default: with 64 clients on this 2-core machine, nice 10 gave 8% more
/// answers and a 9% lower mean p99 but a third fewer runs (bench/results/service, fix 8). A
/// refusal is logged and training goes on at the normal priority.
fn yield_to_requests(nice: i32) {
    if nice == 0 {
        return;
    }
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), nice) {
        tracing::warn!(%error, "cannot lower the training thread's priority; it competes with requests");
    }
}

/// What the server's log has said across coordinating sessions: each session reports the live
/// workers it starts with, and the loop starts one every two seconds when idle, so the count is
/// logged only when it differs from the last one logged (not 1,600 times an hour).
#[derive(Debug, Default)]
struct EventLog {
    live_workers: Option<usize>,
}

impl EventLog {
    /// Whether `event` says something the log has not said yet.
    fn is_news(&mut self, event: &Event) -> bool {
        match event {
            Event::WorkersChanged { live } => self.live_workers.replace(*live) != Some(*live),
            _ => true,
        }
    }
}

fn nap(stop: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(100);
    let mut slept = Duration::ZERO;
    while slept < total && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(step);
        slept += step;
    }
}

fn log_event(event: Event) {
    match event {
        Event::AppRegistered { app, candidates } => {
            tracing::info!(%app, candidates, "app joined the scheduler")
        }
        Event::DataChanged { app, data_version } => {
            tracing::info!(%app, data_version, "data changed; candidates eligible again")
        }
        Event::AppSkipped { app, reason } => tracing::warn!(%app, %reason, "app left out"),
        Event::CandidateLeftOut {
            app,
            candidate,
            reason,
        } => tracing::warn!(%app, %candidate, %reason, "candidate left out"),
        Event::CandidatesSetAside {
            app,
            candidates,
            kin,
            kin_quality,
            best,
            best_quality,
        } => {
            tracing::info!(%app, ?candidates, %kin, kin_quality, %best, best_quality, "candidates set aside: their kin is far below the best")
        }
        Event::RunStarted {
            app,
            candidate,
            run,
            number,
            max_seconds,
        } => tracing::info!(%app, %candidate, run = run.0, number, max_seconds, "run started"),
        Event::RunFinished {
            app,
            candidate,
            run,
            number,
            quality,
            quality_std,
            protocol,
            cost_seconds,
            infer_latency_seconds,
            broken_constraints,
            best,
        } => {
            tracing::info!(%app, %candidate, run = run.0, number, quality, quality_std, %protocol, cost_seconds, infer_latency_seconds, ?broken_constraints, best, "run finished")
        }
        Event::RunFailed {
            app,
            candidate,
            run,
            number,
            reason,
        } => tracing::warn!(%app, %candidate, run = run.0, number, %reason, "run failed"),
        Event::RunDropped {
            app,
            candidate,
            run,
            number,
            reason,
        } => {
            tracing::info!(%app, %candidate, run = run.0, number, %reason, "run dropped: the session ended before it had a model")
        }
        Event::WorkersChanged { live } => tracing::info!(live, "live workers"),
        Event::MopRunStarted {
            app,
            candidate,
            run,
            number,
            learning_rate,
            partitions,
            epochs,
            resumed,
            data_parallel,
        } => {
            tracing::info!(%app, %candidate, run = run.0, number, learning_rate, partitions, epochs, resumed, data_parallel, "model hopping run started")
        }
        Event::RunProgress {
            app,
            candidate,
            run,
            number,
            done,
            total,
        } => {
            tracing::debug!(%app, %candidate, run = run.0, number, done, total, "sub-epochs committed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_worker_count_is_logged_when_it_changes_only() {
        let mut log = EventLog::default();
        let live = |live| Event::WorkersChanged { live };
        let said: Vec<bool> = [2, 2, 2, 3, 3, 0, 2]
            .into_iter()
            .map(|count| log.is_news(&live(count)))
            .collect();
        assert_eq!(said, [true, false, false, true, false, true, true]);
        let other = Event::AppSkipped {
            app: "pics".to_owned(),
            reason: "too few".to_owned(),
        };
        assert!(log.is_news(&other) && log.is_news(&other));
    }
}
