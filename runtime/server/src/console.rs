//! The web console's API (issue 19): compiling a `.eml` program sent from the browser, downloading
//! the files `easemlc` generates for it, and the operator's overview of every app.
//!
//! The server never links the compiler: compiling comes through a [`ProgramCompiler`] set in
//! [`crate::Config::compiler`] (`easeml serve` gives one built on `easeml-compiler`); without one
//! these routes answer 501 and the page says compiling is not available. Registering the compiled
//! program is the ordinary `POST /api/v1/apps` with the manifest the compile route returns.
//!
//! | route | who | what |
//! |---|---|---|
//! | `POST /api/v1/compile?file=NAME.eml` | as registration | body: the program; `{ok: true, app, explain, explanation, manifest}` or `{ok: false, rendered, diagnostics}` |
//! | `POST /api/v1/compile/download?file=NAME.eml` | as registration | body: the program; `APP.tar` of every file `easemlc` writes, under `APP/` |
//! | `GET /api/v1/admin/overview` | the admin token (configured) | every app's status, the open work units (the queue), the workers |

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{authorize_admin, authorize_operator};
use super::{ApiError, AppState};

/// The largest program the compile routes read (a `.eml` program is a few hundred bytes).
pub const MAX_PROGRAM_BYTES: usize = 256 << 10;

/// The longest file name the compile routes take.
const MAX_FILE_NAME: usize = 200;

/// What compiling a program gave.
#[derive(Debug, Clone)]
pub enum Compilation {
    /// The program has errors.
    Failed {
        /// The diagnostics exactly as `easemlc` prints them (no colour).
        rendered: String,
        /// The diagnostics in `easemlc --json`'s form.
        diagnostics: Value,
    },
    /// The program compiled.
    Compiled(CompiledProgram),
}

/// A program that compiled.
#[derive(Debug, Clone)]
pub struct CompiledProgram {
    /// The app's name.
    pub app: String,
    /// Its `easeml.json`, the body of `POST /api/v1/apps`.
    pub manifest: String,
    /// `easemlc explain`'s text.
    pub explain: String,
    /// `easemlc explain --json`'s value (the candidate list among it).
    pub explanation: Value,
}

/// Why the generated files could not be made.
#[derive(Debug, Clone)]
pub enum GenerateFailure {
    /// The program has errors, rendered as `easemlc` prints them.
    Program(String),
    /// The compiler failed (a bug of the compiler, never the program's).
    Internal(String),
}

/// The compiler as the web console uses it; `easeml serve` implements it over `easeml-compiler`.
/// `file` is the name diagnostics show (its stem is the app name of a program without `app`).
pub trait ProgramCompiler: Send + Sync {
    /// Compiles and explains a program.
    fn compile(&self, program: &[u8], file: &str) -> Compilation;

    /// The app's name and every file `easemlc` writes for the program (paths relative to the
    /// output folder: the client crate, and whatever else the code generator writes beside it),
    /// with `server` baked into the binaries as `easemlc --server` does.
    fn generate(
        &self,
        program: &[u8],
        file: &str,
        server: Option<&str>,
    ) -> Result<(String, BTreeMap<String, String>), GenerateFailure>;
}

/// A [`ProgramCompiler`] shared by the server's handlers.
#[derive(Clone)]
pub struct CompilerHook(pub Arc<dyn ProgramCompiler>);

impl std::fmt::Debug for CompilerHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompilerHook(..)")
    }
}

/// The query of the compile routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileQuery {
    /// The program's file name (default `program.eml`).
    file: Option<String>,
}

/// The checked file name of a compile request.
fn file_name(query: Result<Query<FileQuery>, QueryRejection>) -> Result<String, ApiError> {
    let Query(query) = query?;
    let file = query.file.unwrap_or_else(|| "program.eml".to_owned());
    if file.is_empty()
        || file.len() > MAX_FILE_NAME
        || file
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\')
    {
        return Err(ApiError::bad_request(format!(
            "`file` must be a file name of 1 to {MAX_FILE_NAME} bytes without `/`, `\\` or control characters"
        )));
    }
    Ok(file)
}

/// The compiler, the caller checked as registration checks, and the program read within
/// [`MAX_PROGRAM_BYTES`].
async fn program_request(
    state: &AppState,
    headers: &HeaderMap,
    request: Request,
) -> Result<(CompilerHook, Vec<u8>), ApiError> {
    let compiler = state.config().compiler.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "compiling is not available on this server: `easeml serve` compiles programs; compile with `easemlc` and register the app's easeml.json",
        )
    })?;
    authorize_admin(state, headers)?;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a program may be at most {MAX_PROGRAM_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_PROGRAM_BYTES as u64) {
        return Err(too_large());
    }
    let limit = state.config().body_timeout;
    let body = tokio::time::timeout(
        limit,
        axum::body::to_bytes(request.into_body(), MAX_PROGRAM_BYTES),
    )
    .await
    .map_err(|_| super::api::body_timeout(limit))?
    .map_err(|_| too_large())?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the program is empty: send the .eml text as the body",
        ));
    }
    Ok((compiler, body.to_vec()))
}

/// Runs compiler work on a blocking thread, at most [`COMPILES_AT_ONCE`] at a time. The permit
/// moves into the blocking closure and is given back when the work ends, not when the request
/// does: a client that hangs up cannot free the slot while its compile still runs on (issue 49).
async fn compiler_work<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    let permit = Arc::clone(&state.shared.compiles)
        .acquire_owned()
        .await
        .map_err(ApiError::internal)?;
    tokio::task::spawn_blocking(move || {
        let outcome = work();
        drop(permit);
        outcome
    })
    .await
    .map_err(ApiError::internal)
}

/// How many programs are compiled at once (generating a crate runs rustfmt per file).
pub(crate) const COMPILES_AT_ONCE: usize = 2;

/// `POST /api/v1/compile?file=NAME.eml`: compiles and explains the program of the body.
pub(crate) async fn compile(
    State(state): State<AppState>,
    query: Result<Query<FileQuery>, QueryRejection>,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let file = file_name(query)?;
    let headers = request.headers().clone();
    let (compiler, program) = program_request(&state, &headers, request).await?;
    let outcome = compiler_work(&state, move || compiler.0.compile(&program, &file)).await?;
    Ok(Json(match outcome {
        Compilation::Failed {
            rendered,
            diagnostics,
        } => json!({"ok": false, "rendered": rendered, "diagnostics": diagnostics}),
        Compilation::Compiled(compiled) => json!({
            "ok": true,
            "app": compiled.app,
            "explain": compiled.explain,
            "explanation": compiled.explanation,
            "manifest": compiled.manifest,
        }),
    }))
}

/// `POST /api/v1/compile/download?file=NAME.eml`: `APP.tar`, every file `easemlc` writes for the
/// program under `APP/`, the binaries pointed at this server (the URL the request came to).
pub(crate) async fn download(
    State(state): State<AppState>,
    query: Result<Query<FileQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let file = file_name(query)?;
    let headers = request.headers().clone();
    let server = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .filter(|host| {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .map(|host| format!("http://{host}"));
    let (compiler, program) = program_request(&state, &headers, request).await?;
    let generated = compiler_work(&state, move || {
        compiler.0.generate(&program, &file, server.as_deref())
    })
    .await?;
    let (app, files) = match generated {
        Ok(generated) => generated,
        Err(GenerateFailure::Program(rendered)) => {
            return Err(ApiError::bad_request(format!(
                "the program has errors:\n{rendered}"
            )));
        }
        Err(GenerateFailure::Internal(message)) => return Err(ApiError::internal(message)),
    };
    let archive = tar(&app, &files).map_err(ApiError::internal)?;
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{app}.tar\""))
        .map_err(ApiError::internal)?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-tar"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        Body::from(archive),
    )
        .into_response())
}

/// `GET /api/v1/admin/overview`: every app's status, the open work units, the workers.
pub(crate) async fn overview(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    authorize_operator(&state, &headers)?;
    let state = state.clone();
    let value = tokio::task::spawn_blocking(move || -> Result<Value, ApiError> {
        let pool = &state.shared.pool;
        let mut store = pool.get()?;
        let names: Vec<(i64, String)> = store
            .apps()?
            .into_iter()
            .map(|app| (app.id.0, app.name))
            .collect();
        let mut apps = Vec::new();
        for (id, name) in &names {
            let client = easeml_client::Client::attach(store, name)?;
            let status = client.status();
            store = client
                .into_store()
                .ok_or_else(|| ApiError::internal("an attached client without its store"))?;
            let status = status?;
            apps.push(json!({"id": id, "status": status}));
        }
        let app_name = |id: i64| {
            names
                .iter()
                .find(|(app, _)| *app == id)
                .map_or_else(String::new, |(_, name)| name.clone())
        };
        let open = store.open_units()?;
        // A MOP run queues every epoch's sub-epochs at once: the queue shows each run's current
        // epoch (the units a worker can lease next), not the ones behind it.
        let mut current: std::collections::HashMap<i64, u64> = std::collections::HashMap::new();
        for unit in &open {
            if let Some((epoch, _)) = unit.sub_epoch {
                let entry = current.entry(unit.run.0).or_insert(epoch);
                *entry = (*entry).min(epoch);
            }
        }
        let units: Vec<Value> = open
            .iter()
            .filter(|unit| {
                unit.sub_epoch
                    .is_none_or(|(epoch, _)| current.get(&unit.run.0) == Some(&epoch))
            })
            .map(|unit| {
                json!({
                    "unit": unit.id.0,
                    "run": unit.run.0,
                    "app": app_name(unit.app.0),
                    "candidate": unit.candidate,
                    "state": unit.state.as_str(),
                    "attempt": unit.attempt,
                    "owner": unit.lease_owner,
                    "queued_ms": unit.created_ms,
                    "epoch": unit.sub_epoch.map(|(epoch, _)| epoch),
                    "partition": unit.sub_epoch.map(|(_, partition)| partition),
                })
            })
            .collect();
        let workers: Vec<Value> = store
            .workers()?
            .iter()
            .map(|worker| {
                json!({
                    "id": worker.id,
                    "device": worker.device,
                    "state": worker.state.as_str(),
                    "unit": worker.unit.map(|unit| unit.0),
                    "heartbeat_ms": worker.heartbeat_ms,
                })
            })
            .collect();
        pool.put(store);
        Ok(json!({
            "now_ms": easeml_store::now_ms(),
            "apps": apps,
            "units": units,
            "workers": workers,
        }))
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(value))
}

/// A POSIX ustar archive of `files` under the folder `root` (regular files, mode 644, modified
/// now), read by `tar xf`.
pub(crate) fn tar(root: &str, files: &BTreeMap<String, String>) -> Result<Vec<u8>, String> {
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let mut out = Vec::new();
    for (relative, content) in files {
        let path = format!("{root}/{relative}");
        let mut header = [0u8; 512];
        // Names up to 100 bytes go in `name`; longer ones are split at a `/` into `prefix` (155).
        let (prefix, name) = if path.len() <= 100 {
            ("", path.as_str())
        } else {
            let split = path
                .char_indices()
                .filter(|&(at, c)| c == '/' && at <= 155 && path.len() - at - 1 <= 100)
                .map(|(at, _)| at)
                .next()
                .ok_or_else(|| format!("the path `{path}` is too long for a tar archive"))?;
            (&path[..split], &path[split + 1..])
        };
        header[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut header[100..108], 0o644);
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], content.len() as u64);
        octal(&mut header[136..148], mtime);
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
        header[148..156].fill(b' ');
        let checksum: u64 = header.iter().map(|&byte| u64::from(byte)).sum();
        octal(&mut header[148..155], checksum);
        out.extend_from_slice(&header);
        out.extend_from_slice(content.as_bytes());
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

/// `value` as zero-padded octal digits ending in NUL, filling `field`.
fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let digits = format!("{value:0width$o}");
    let digits = digits.as_bytes();
    let start = digits.len().saturating_sub(width);
    field[..width].copy_from_slice(&digits[start..]);
    field[width] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    /// A compiler that waits for a gate to open, counting the calls that entered.
    struct GatedCompiler {
        entered: AtomicUsize,
        open: Mutex<bool>,
        opened: Condvar,
    }

    impl ProgramCompiler for GatedCompiler {
        fn compile(&self, _program: &[u8], _file: &str) -> Compilation {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
            Compilation::Failed {
                rendered: String::new(),
                diagnostics: Value::Null,
            }
        }

        fn generate(
            &self,
            _program: &[u8],
            _file: &str,
            _server: Option<&str>,
        ) -> Result<(String, BTreeMap<String, String>), GenerateFailure> {
            Err(GenerateFailure::Internal("not in this test".to_owned()))
        }
    }

    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "waited a minute for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_compile_whose_client_hung_up_keeps_its_permit_until_the_work_ends() {
        let dir = tempfile::tempdir().unwrap();
        let compiler = Arc::new(GatedCompiler {
            entered: AtomicUsize::new(0),
            open: Mutex::new(false),
            opened: Condvar::new(),
        });
        let mut config = crate::Config::new(dir.path().join("home"));
        config.compiler = Some(CompilerHook(compiler.clone()));
        let state = AppState::new(config).unwrap();
        let permits = Arc::clone(&state.shared.compiles);
        let runtime = crate::runtime().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = crate::conn::Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        };
        let server = runtime.spawn(crate::conn::serve(
            listener,
            crate::router(state),
            limits,
            async move {
                let _ = stopped.await;
            },
        ));
        // Two compiles take both permits; their clients hang up while the work runs.
        let clients: Vec<std::net::TcpStream> = (0..COMPILES_AT_ONCE)
            .map(|_| {
                let mut socket = std::net::TcpStream::connect(address).unwrap();
                socket
                    .write_all(b"POST /api/v1/compile HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
                    .unwrap();
                socket
            })
            .collect();
        wait_for("both compiles to start", || {
            compiler.entered.load(Ordering::SeqCst) == COMPILES_AT_ONCE
        });
        assert_eq!(permits.available_permits(), 0);
        for client in clients {
            client.shutdown(std::net::Shutdown::Both).unwrap();
        }
        // The request futures are dropped (the server saw the clients leave), the work runs on:
        // the permits stay taken. (Before issue 49 they came back at once.)
        let watch_until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < watch_until {
            assert_eq!(
                permits.available_permits(),
                0,
                "a hung-up client's compile gave its permit back while its work still ran"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        *compiler.open.lock().unwrap() = true;
        compiler.opened.notify_all();
        wait_for("the permits to come back once the work ended", || {
            permits.available_permits() == COMPILES_AT_ONCE
        });
        let _ = stop.send(());
        runtime.block_on(server).unwrap().unwrap();
    }

    #[test]
    fn tar_headers_carry_names_sizes_and_checksums() {
        let mut files = BTreeMap::new();
        files.insert("Cargo.toml".to_owned(), "[package]\n".to_owned());
        let long = format!("{}/lib.rs", "d".repeat(120));
        files.insert(long.clone(), "x".repeat(700));
        let archive = tar("app", &files).unwrap();
        // header + 1 block, header + 2 blocks, two zero blocks.
        assert_eq!(archive.len(), 512 * (2 + 3 + 2));
        let first = &archive[..512];
        assert_eq!(&first[..15], b"app/Cargo.toml\0");
        assert_eq!(&first[124..135], b"00000000012");
        let stored: u64 = u64::from_str_radix(
            std::str::from_utf8(&first[148..154])
                .unwrap()
                .trim_start_matches('0'),
            8,
        )
        .unwrap();
        let mut blank = first.to_vec();
        blank[148..156].fill(b' ');
        assert_eq!(stored, blank.iter().map(|&b| u64::from(b)).sum::<u64>());
        let second = &archive[1024..1536];
        assert_eq!(&second[345..349], b"app/");
        assert_eq!(&second[..7], b"lib.rs\0");
        assert!(tar("app", &BTreeMap::from([("a".repeat(300), String::new())])).is_err());
    }
}
