//! The HTTP server: `easeml serve` (many apps, one token each) and the generated binaries' `refine`
//! command (one app, a per-process token), over the same store as the embedded client.
//!
//! A JSON API under `/api/v1` (axum on tokio) and the refine web page at `/apps/{name}/refine`:
//!
//! | route | what |
//! |---|---|
//! | `GET /api/v1/health` | `{"ok": true}`; no token |
//! | `POST /api/v1/apps` | body: the app's `easeml.json`; registers it, answers `{id, name, token}` (admin token when configured) |
//! | `GET /api/v1/apps/{name}/status` | the figure-5 report ([`easeml_client::Status`]) |
//! | `GET /api/v1/apps/{name}/runs` | the runs of the report |
//! | `POST /api/v1/apps/{name}/examples` | a feed: the `feed` line formats as text, or with `?format=csv&label_column=NAME` (or `tsv`) a table with a header row; all examples or none |
//! | `GET /api/v1/apps/{name}/examples?after=&limit=&enabled=&label=&preview=` | one page of examples (`preview=N`: each with at most N numbers of its input) |
//! | `GET /api/v1/apps/{name}/examples/{id}` | one example, input and output as JSON |
//! | `GET /api/v1/apps/{name}/examples/{id}/thumbnail.png` | a PNG of an image input |
//! | `PATCH /api/v1/apps/{name}/examples/{id}` | `{"enabled": bool}` |
//! | `POST /api/v1/compile?file=NAME.eml`, `POST /api/v1/compile/download` | the web console: see `console.rs` (needs [`Config::compiler`]) |
//! | `GET /api/v1/admin/overview` | every app's status, the queue, the workers (the admin token) |
//! | `GET /`, `GET /apps/{name}/dashboard` | the web console: compile, register, download; the dashboards |
//! | `POST /api/v1/apps/{name}/infer` | answers from the best model so far (409 before any is trained; 501 in a process without the engine, such as an app's refine server) |
//!
//! Every app route needs `Authorization: Bearer <the app's token>`: no token is 401, a token that is
//! not this app's is 403 (also for an app that does not exist, so names do not leak). The store keeps
//! only a sha256 of each token and compares in constant time. Errors are `{"error": "..."}` with a
//! 4xx status (a feed's bad lines also come as `errors: [{line, message}]`); bodies above
//! [`Config::max_body_bytes`] are 413. A feed never reads files: a path in it is a bad line.
//!
//! Store work runs on tokio's blocking threads with connections from a small pool; feeds are
//! limited to [`Config::max_concurrent_feeds`] at a time (they are CPU-bound, and this bounds the
//! memory of checked batches). Graceful shutdown stops accepting connections and lets requests in
//! flight finish (a feed in flight is then stored whole, or not at all).

mod api;
mod auth;
mod conn;
mod console;
mod error;
mod infer;
pub(crate) mod json;
mod page;
mod pool;
mod thumbnail;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tokio::sync::Semaphore;

pub use console::{
    Compilation, CompiledProgram, CompilerHook, GenerateFailure, MAX_PROGRAM_BYTES, ProgramCompiler,
};
pub use error::ApiError;

/// What can go wrong starting, running or stopping a server (its answers to requests are
/// [`ApiError`]s).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Listening, the async runtime, or a model's thread failed.
    #[error("{what}: {source}")]
    Serve {
        /// What the server was doing, e.g. `cannot listen on 127.0.0.1:9000`.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A client library call failed (the store, a manifest).
    #[error(transparent)]
    Client(#[from] easeml_client::Error),
}

impl From<easeml_store::Error> for ServerError {
    fn from(error: easeml_store::Error) -> ServerError {
        ServerError::Client(easeml_client::Error::Store(error))
    }
}

/// The result type of the server's set-up calls.
pub type Result<T> = std::result::Result<T, ServerError>;

use pool::StorePool;

/// The largest request body accepted by default (64 MiB: about 3,000 `[32,32,3]` examples as inline
/// JSON).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

/// The most connections served at once by default. Past it a new connection takes the place of
/// the one idle longest; only when every connection has a request in flight is it refused (503).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How long a connection may take to send a request's headers once it has begun them, by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may wait between requests (or before its first) by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long reading one request's body may take by default (64 MiB at about 9 Mbit/s).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// How a server runs. Build one with [`Config::new`] and set the fields that differ.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The address to listen on (default `127.0.0.1:9000`; port 0 picks a free one).
    pub listen: SocketAddr,
    /// The store's home directory.
    pub home: PathBuf,
    /// When set, registering an app needs `Authorization: Bearer <admin token>`; when not, anyone
    /// who can reach the server may register apps.
    pub admin_token: Option<String>,
    /// The largest request body, in bytes; larger requests get 413.
    pub max_body_bytes: usize,
    /// How many feeds are checked and stored at once; more wait their turn.
    pub max_concurrent_feeds: usize,
    /// Serve one app only (the generated binaries' `refine` command); see [`RefineOnly`].
    pub refine_only: Option<RefineOnly>,
    /// The compiler of the web console's compile routes (`easeml serve` sets it); without one they
    /// answer 501 and the page says compiling is not available.
    pub compiler: Option<CompilerHook>,
    /// The most connections served at once ([`DEFAULT_MAX_CONNECTIONS`]): past it a new connection
    /// takes the place of the one that has waited longest for a request, and is refused with 503
    /// only when every connection has a request in flight.
    pub max_connections: usize,
    /// A connection that has begun a request's headers must finish them within this long, or it
    /// is closed ([`DEFAULT_HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
    /// A connection with no request in flight and nothing sent is closed after this long
    /// ([`DEFAULT_IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// Reading a request's body may take at most this long; a slower body is answered 408
    /// ([`DEFAULT_BODY_TIMEOUT`]).
    pub body_timeout: Duration,
}

impl Config {
    /// The defaults for a store under `home`.
    pub fn new(home: impl Into<PathBuf>) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 9000)),
            home: home.into(),
            admin_token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrent_feeds: std::thread::available_parallelism()
                .map_or(2, |cores| cores.get())
                .clamp(2, 8),
            refine_only: None,
            compiler: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// The embedded `refine` page's mode: one app, served to this machine only. A random token, made per
/// process, is written into the page (and accepted for that app besides its stored token), so the
/// page works without asking while other local websites, which cannot read the page, cannot toggle
/// examples. Requests whose `Host` is not a loopback name are refused (DNS rebinding), and
/// registration is off.
#[derive(Clone)]
pub struct RefineOnly {
    app: String,
    token: String,
}

impl RefineOnly {
    /// The mode for `app`, with a fresh random token.
    pub fn new(app: impl Into<String>) -> crate::Result<RefineOnly> {
        Ok(RefineOnly {
            app: app.into(),
            token: easeml_store::tokens::issue().map_err(easeml_client::Error::Store)?,
        })
    }

    /// The app served.
    pub fn app(&self) -> &str {
        &self.app
    }
}

impl std::fmt::Debug for RefineOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefineOnly")
            .field("app", &self.app)
            .field("token", &"(hidden)")
            .finish()
    }
}

/// What every handler shares: the configuration, the store connections, the feed permits.
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    pool: StorePool,
    feeds: Semaphore,
    /// The compile permits of the web console (owned permits: held by the blocking work).
    compiles: Arc<Semaphore>,
    /// The thread that owns the loaded models and answers inferences.
    infer: infer::InferWorker,
}

impl AppState {
    /// Opens the store under `config.home` (creating and migrating it when needed) and makes the
    /// state the handlers share.
    pub fn new(config: Config) -> crate::Result<AppState> {
        let pool = StorePool::open(config.home.clone())?;
        let feeds = Semaphore::new(config.max_concurrent_feeds.max(1));
        let infer = infer::InferWorker::start(config.home.clone()).map_err(|source| {
            crate::ServerError::Serve {
                what: "starting the inference thread".to_owned(),
                source,
            }
        })?;
        Ok(AppState {
            shared: Arc::new(Shared {
                config,
                pool,
                feeds,
                compiles: Arc::new(Semaphore::new(console::COMPILES_AT_ONCE)),
                infer,
            }),
        })
    }

    fn config(&self) -> &Config {
        &self.shared.config
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// The whole application: API, refine page, body limit, request logs (for tests: serve it on any
/// listener).
pub fn router(state: AppState) -> Router {
    let max_body = state.config().max_body_bytes;
    const APP: &str = "/api/v1/apps/{name}";
    Router::new()
        .route("/api/v1/health", get(api::health))
        .route("/api/v1/apps", post(api::register))
        .route(&format!("{APP}/status"), get(api::status))
        .route(&format!("{APP}/runs"), get(api::runs))
        .route(
            &format!("{APP}/examples"),
            post(api::feed).get(api::list_examples),
        )
        .route(
            &format!("{APP}/examples/{{id}}"),
            get(api::get_example).patch(api::set_enabled),
        )
        .route(
            &format!("{APP}/examples/{{id}}/thumbnail.png"),
            get(api::thumbnail),
        )
        .route(&format!("{APP}/infer"), post(api::infer))
        .route("/api/v1/compile", post(console::compile))
        .route("/api/v1/compile/download", post(console::download))
        .route("/api/v1/admin/overview", get(console::overview))
        .route("/apps/{name}/refine", get(page::refine_page))
        .route("/apps/{name}/dashboard", get(page::dashboard_page))
        .route("/", get(page::index))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::check_host,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

/// One structured log line per request: method, route (the pattern, so tokens and ids stay out of
/// the logs), status, milliseconds.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(no route)".to_owned(), |path| path.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if response.status().is_server_error() {
        tracing::warn!(%method, %route, status, elapsed_ms, "request");
    } else {
        tracing::info!(%method, %route, status, elapsed_ms, "request");
    }
    response
}

/// A server bound to its address, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    state: AppState,
}

impl Server {
    /// Opens the store and binds `config.listen`.
    pub async fn bind(config: Config) -> crate::Result<Server> {
        let listen = config.listen;
        let state = AppState::new(config)?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| crate::ServerError::Serve {
                what: format!("cannot listen on {listen}"),
                source,
            })?;
        Ok(Server { listener, state })
    }

    /// The address actually bound (the port chosen when `listen` had port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then stops accepting and waits for the requests in flight.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let address = self.listener.local_addr()?;
        tracing::info!(%address, home = %self.state.config().home.display(), "serving");
        let config = self.state.config();
        let limits = conn::Limits {
            max_connections: config.max_connections.max(1),
            header_timeout: config.header_timeout.max(Duration::from_millis(1)),
            idle_timeout: config.idle_timeout.max(Duration::from_millis(1)),
        };
        conn::serve(self.listener, router(self.state), limits, shutdown).await?;
        tracing::info!(%address, "stopped");
        Ok(())
    }
}

/// A server serving from a thread of this process until [`ServerThread::stop`] or drop: for the
/// tests, the benchmarks and programs that embed the service beside other work.
#[derive(Debug)]
pub struct ServerThread {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl ServerThread {
    /// Binds `config.listen` (port 0: a free port) and serves from a new thread with its own
    /// [`runtime`]; returns once the server listens, or the error that kept it from listening.
    pub fn spawn(config: Config) -> crate::Result<ServerThread> {
        let (ready_sender, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || -> std::io::Result<()> {
            let runtime = runtime()?;
            runtime.block_on(async move {
                let server = match Server::bind(config).await {
                    Ok(server) => server,
                    Err(error) => {
                        let _ = ready_sender.send(Err(error));
                        return Ok(());
                    }
                };
                let _ = ready_sender.send(server.local_addr().map_err(serve_error));
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await
            })
        });
        match ready.recv() {
            Ok(Ok(address)) => Ok(ServerThread {
                address,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            // The thread ended without a word: its runtime did not start (or it panicked).
            Err(_) => Err(crate::ServerError::Serve {
                what: "starting the server thread".to_owned(),
                source: match thread.join() {
                    Ok(Err(source)) => source,
                    _ => std::io::Error::other("the server thread ended before listening"),
                },
            }),
        }
    }

    /// The address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://ADDRESS`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stops accepting, lets the requests in flight finish and waits for the thread (drop does
    /// the same and ignores the outcome). A second call does nothing.
    pub fn stop(&mut self) -> crate::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(source))) => Err(serve_error(source)),
            Some(Err(_)) => Err(serve_error(std::io::Error::other(
                "the server thread panicked",
            ))),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Binds `config.listen` and serves until `shutdown` completes (graceful: requests in flight finish).
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> crate::Result<()> {
    let server = Server::bind(config).await?;
    server.run(shutdown).await.map_err(serve_error)
}

fn serve_error(source: std::io::Error) -> ServerError {
    crate::ServerError::Serve {
        what: "serving".to_owned(),
        source,
    }
}

/// Completes on Ctrl-C or, on Unix, SIGTERM: the usual `shutdown` of [`serve`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing the requests in flight");
}

/// A tokio runtime for the server binaries: worker threads, and blocking threads with 8 MiB stacks
/// (decoding and printing deep recursive examples recurses up to `easeml_object::MAX_DEPTH`).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 << 20)
        .build()
}

/// Installs the tracing subscriber of the server binaries: logs to standard error, as text or JSON
/// lines, at `RUST_LOG`'s levels (default `info`). A second call does nothing.
pub fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Serves the refine page of one app from the local store under `home` until Ctrl-C: the embedded
/// `refine` command. `on_ready` gets the page's URL once the server listens.
pub fn serve_refine_page(
    home: PathBuf,
    app: &str,
    listen: SocketAddr,
    on_ready: impl FnOnce(&str),
) -> crate::Result<()> {
    let mut config = Config::new(home);
    config.listen = listen;
    config.refine_only = Some(RefineOnly::new(app)?);
    let runtime = runtime().map_err(|source| crate::ServerError::Serve {
        what: "starting the async runtime".to_owned(),
        source,
    })?;
    runtime.block_on(async {
        let server = Server::bind(config).await?;
        let address = server.local_addr().map_err(serve_error)?;
        on_ready(&format!("http://{address}/apps/{app}/refine"));
        server.run(shutdown_signal()).await.map_err(serve_error)
    })
}
