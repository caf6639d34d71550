//! easeml's store: every app's examples, label maps and runs in SQLite (WAL mode), and the bytes of
//! tensors and checkpoints as content-addressed files (DESIGN.md sections 1-2).
//!
//! Layout of a store's home directory (`$EASEML_HOME`, default [`default_home`]):
//! ```text
//! easeml.sqlite3 (+ -wal, -shm)   apps, examples, label_maps, runs, ensembles, estimates, units, workers, schema_migrations
//! blobs/ab/abcdef...              one file per distinct blob, named by the sha256 of its bytes
//! blobs/tmp/                      blobs being written (renamed into place when complete)
//! ```
//! The store is schema-agnostic: it keeps encoded blobs (see `easeml_object::codec`), label
//! strings and the manifest as JSON text; checking examples against a schema is the client
//! library's job, done before anything reaches the store. It never sees tch or HTTP.

mod best;
mod blobs;
pub mod db;
mod ensembles;
mod estimates;
mod labels;
mod migrations;
mod store;
mod time;
pub mod tokens;
mod units;

pub use best::{
    BrokenConstraint, ConstraintLimits, ENSEMBLE_MARGIN_SE, MIN_TRAINING_EXAMPLES, Served,
    best_run, broken_constraints, served,
};
pub use blobs::{BLOBS_URL_FILE, BlobHash, is_s3_url};
pub use ensembles::{EnsembleMember, EnsembleRecord};
pub use estimates::EstimateRecord;
pub use labels::{LabelError, LabelMap};
pub use migrations::{MIGRATIONS, Migration};
pub use store::{
    App, AppId, Blob, Durability, ExampleBytes, ExampleFilter, ExampleId, ExampleRecord,
    INLINE_BLOB_BYTES, InsertReport, MAX_CONFUSION_BYTES, MAX_TRIALS_BYTES, NewApp, NewExample,
    NewOutput, Page, PageRequest, RunId, RunRecord, RunState, RunValidation, Store, StoreOptions,
    StoredOutput, redact_url,
};
pub use time::{format_seconds, format_utc, now_ms};
pub use units::{
    IN_PROCESS_ROLE, Lease, MAX_LOSSES, NewSubEpoch, NewWorker, SubEpochLease, SubEpochRecord,
    UnitId, UnitKind, UnitRecord, UnitResult, UnitState, WorkerRecord, WorkerState, is_in_process,
    worker_id,
};

use std::path::PathBuf;

/// Everything that can go wrong in the store. Every variant says what, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A database error (SQLite or PostgreSQL), with what the store was doing.
    #[error("store database: {context}: {source}")]
    Database {
        /// What the store was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: db::DbError,
    },
    /// A file-system error, with the path.
    #[error("store file {path}: {context}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the store was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A store location that cannot be used, and why.
    #[error("store location: {0}")]
    Location(String),
    /// An error of the S3-compatible object storage that keeps the blobs, with where and what
    /// the store was doing.
    #[error("blob storage {location}: {context}: {message}")]
    ObjectStorage {
        /// The bucket and prefix (`s3://bucket/prefix`).
        location: String,
        /// What the store was doing.
        context: String,
        /// What the object storage answered.
        message: String,
    },
    /// No home directory given and none could be found.
    #[error("no store directory: set EASEML_HOME (the platform has no data directory)")]
    NoHome,
    /// The database was written by a newer easeml.
    #[error(
        "the store at {path} has schema version {found}, newer than this build's {known}; upgrade easeml"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found in `schema_migrations`.
        found: u32,
        /// The newest version this build knows.
        known: u32,
    },
    /// An app name that is not registered.
    #[error("no app named `{0}` in the store")]
    NoSuchApp(String),
    /// An app id that is not registered.
    #[error("no app with id {0} in the store")]
    NoSuchAppId(i64),
    /// An app registered twice.
    #[error("an app named `{0}` is already registered")]
    AppExists(String),
    /// An example id that does not exist or belongs to another app.
    #[error("app `{app}` has no example {id}")]
    NoSuchExample {
        /// The app's name.
        app: String,
        /// The example id asked for.
        id: i64,
    },
    /// A run id that does not exist or belongs to another app.
    #[error("no run {0} in the store")]
    NoSuchRun(i64),
    /// A run state change that its current state does not allow.
    #[error("run {id} is {state}, so it cannot be {wanted}")]
    RunState {
        /// The run.
        id: i64,
        /// Its current state.
        state: String,
        /// The change asked for (`started`, `finished`, `failed`).
        wanted: &'static str,
    },
    /// A quality or cost out of its range.
    #[error("run {id}: {what}")]
    RunValue {
        /// The run.
        id: i64,
        /// What is wrong, e.g. `quality 1.5 is outside [0, 1]`.
        what: String,
    },
    /// A label the app's label map cannot take.
    #[error("app `{app}`: {source}")]
    Label {
        /// The app's name.
        app: String,
        /// What is wrong with the label.
        #[source]
        source: LabelError,
    },
    /// An example with a label for an app whose output is not one `[D]` tensor.
    #[error(
        "app `{0}` has no label map (its output is not one [D] tensor); give the output as a tensor"
    )]
    NoLabels(String),
    /// A blob whose bytes no longer match its name.
    #[error("blob {hash} is corrupt: its bytes hash to {actual}")]
    CorruptBlob {
        /// The blob's name.
        hash: BlobHash,
        /// The sha256 of the bytes found.
        actual: BlobHash,
    },
    /// A blob named by a batch that is not in the store.
    #[error("blob {0} is not in the store")]
    MissingBlob(BlobHash),
    /// A string that is not a blob hash.
    #[error("`{0}` is not a blob hash (64 lower-case hex digits)")]
    BadHash(String),
    /// A commit whose fencing token the unit no longer holds.
    #[error(
        "unit {unit}: the lease of attempt {attempt} by `{owner}` is no longer valid (the unit is now {now}); its result is not recorded"
    )]
    StaleLease {
        /// The unit.
        unit: i64,
        /// The committing lease's attempt.
        attempt: u32,
        /// The committing worker.
        owner: String,
        /// What the unit is now.
        now: String,
    },
    /// A unit id that does not exist.
    #[error("no unit {0} in the store")]
    NoSuchUnit(i64),
    /// A work-unit operation its arguments or the unit's state do not allow (the message says
    /// what and what to do instead).
    #[error("{0}")]
    InvalidInput(String),
    /// The operating system's random source failed (needed for app tokens).
    #[error("cannot generate an app token: {0}")]
    Random(String),
}

/// The result type of the store.
pub type Result<T> = std::result::Result<T, Error>;

/// Where the store lives when no location is given: `$EASEML_STORE` when set and not empty (a
/// folder or a `postgres://` URL, see [`store_home`], with `$EASEML_BLOBS`), else `$EASEML_HOME`
/// when set and not empty, else the platform data directory + `easeml` (e.g.
/// `~/.local/share/easeml`).
pub fn default_home() -> Result<PathBuf> {
    if let Some(location) = std::env::var_os("EASEML_STORE").filter(|value| !value.is_empty()) {
        let blobs = std::env::var_os("EASEML_BLOBS")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from);
        return store_home(&location.to_string_lossy(), blobs.as_deref());
    }
    platform_home()
}

fn platform_home() -> Result<PathBuf> {
    match std::env::var_os("EASEML_HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home)),
        _ => dirs::data_dir()
            .map(|dir| dir.join("easeml"))
            .ok_or(Error::NoHome),
    }
}

/// The local folder of a PostgreSQL store whose blobs are at the S3 location `url`, with the
/// location recorded in its [`BLOBS_URL_FILE`] once the bucket answers.
fn s3_home(location: &str, url: &str) -> Result<PathBuf> {
    let pair = BlobHash::of(format!("{location}\n{url}").as_bytes());
    let home = platform_home()?
        .join("s3-stores")
        .join(&pair.as_str()[..16]);
    loop {
        match Pointer::BLOBS.read(&home)? {
            Some(recorded) if recorded == url => return Ok(home),
            Some(recorded) => {
                return Err(Error::Location(format!(
                    "{} records the blob location {recorded}, not {url}: remove it to bind the folder again",
                    home.join(BLOBS_URL_FILE).display(),
                )));
            }
            None => {}
        }
        // The bucket must answer before the folder exists and names it.
        drop(blobs::Blobs::open_s3(url)?);
        std::fs::create_dir_all(&home).map_err(io(&home, "creating the store's local folder"))?;
        if Pointer::BLOBS.create(&home, url)? {
            return Ok(home);
        }
        // Another process recorded it meanwhile: check what it wrote.
    }
}

/// A file of a store's folder that records where part of the store is: [`POSTGRES_URL_FILE`] or
/// [`BLOBS_URL_FILE`]. Written once (by [`store_home`]), read by every open.
pub(crate) struct Pointer {
    file: &'static str,
    /// What it records, for messages ("database URL").
    what: &'static str,
    /// Readable by its owner only (a database URL may hold a password).
    private: bool,
}

impl Pointer {
    pub(crate) const DATABASE: Pointer = Pointer {
        file: POSTGRES_URL_FILE,
        what: "database URL",
        private: true,
    };
    pub(crate) const BLOBS: Pointer = Pointer {
        file: BLOBS_URL_FILE,
        what: "blob location",
        private: false,
    };

    /// What the file in `home` records (trimmed); `None` when there is no such file.
    pub(crate) fn read(&self, home: &std::path::Path) -> Result<Option<String>> {
        let path = home.join(self.file);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim().to_owned())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io(&path, format!("reading the store's {}", self.what))(
                error,
            )),
        }
    }

    /// Records `text` in `home` unless the file exists; `false` when it did (another process
    /// recorded it first: the caller reads what it says).
    pub(crate) fn create(&self, home: &std::path::Path, text: &str) -> Result<bool> {
        let path = home.join(self.file);
        let context = format!("recording the store's {}", self.what);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if self.private {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        match options.open(&path) {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(text.as_bytes())
                    .map_err(io(&path, context))?;
                Ok(true)
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(io(&path, context)(error)),
        }
    }
}

/// The file in a store's folder that names the PostgreSQL database keeping the store's rows (the
/// folder then keeps only the blobs). Written by [`store_home`]; [`Store::open`] follows it.
pub const POSTGRES_URL_FILE: &str = "postgres.url";

/// Whether a store location is a PostgreSQL URL.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Makes an empty database `name` on the PostgreSQL server at `server`
/// (`postgres://user@host:port`, no database; the user may create databases), dropping one of
/// that name first; returns its URL, a store location. For benchmarks and tests that want a fresh
/// store on a server. `name` must be a plain identifier (letters, digits, `_`; not starting with a
/// digit): it is written into the statement.
pub fn create_database(server: &str, name: &str) -> Result<String> {
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if !plain || name.len() > 63 {
        return Err(Error::Location(format!(
            "`{name}` is not a plain database name: use letters, digits and `_` (not first), at most 63"
        )));
    }
    let context = format!("creating the database {name} on {}", redact_url(server));
    let mut admin = postgres::Client::connect(&format!("{server}/postgres"), postgres::NoTls)
        .map_err(|error| Error::Location(format!("{context}: {error}")))?;
    // One statement per call: neither may run inside a transaction block.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .and_then(|()| admin.batch_execute(&format!("CREATE DATABASE {name}")))
        .map_err(|error| Error::Location(format!("{context}: {error}")))?;
    Ok(format!("{server}/{name}"))
}

/// The folder of the store at `location`, as users write it (`--store`, `EASEML_STORE`): a folder
/// (the SQLite store, blobs inside), or a `postgres://user:password@host:port/database` URL whose
/// blobs go to `blobs` (`--blobs`, `EASEML_BLOBS`): a folder every worker sees (default
/// `$EASEML_HOME` or the platform data directory), or an S3 location `s3://bucket/prefix` (with
/// the `s3` feature), whose folder is then a local one under `$EASEML_HOME/s3-stores/`, named by
/// the pair (the same on every machine), that records the location in [`BLOBS_URL_FILE`].
/// For a URL the folder records it in [`POSTGRES_URL_FILE`] (readable by its owner
/// only: the URL may hold a password), so that every command and worker given the folder opens
/// the same database. A folder already bound to another database, or holding an SQLite store, is
/// refused; nothing is bound before the database (and the bucket) answer.
pub fn store_home(location: &str, blobs: Option<&std::path::Path>) -> Result<PathBuf> {
    Ok(bind_store_home(location, blobs)?.path)
}

/// A store's folder ([`store_home`]) and whether this call bound it to its database just now, so
/// that a command refused right after (a second coordinator: `easeml_engine::Error::Busy`) can
/// [`undo`](BoundHome::undo) the binding and leave a mistyped `--blobs` folder as it found it.
#[derive(Debug)]
pub struct BoundHome {
    /// The store's folder.
    pub path: PathBuf,
    /// `Some(before)` when this call wrote the folder's [`POSTGRES_URL_FILE`]: the names in the
    /// folder before (`None`: the folder did not exist).
    fresh: Option<Option<std::collections::BTreeSet<std::ffi::OsString>>>,
}

impl From<PathBuf> for BoundHome {
    /// A folder this call did not bind (a local store's, or the default one).
    fn from(path: PathBuf) -> BoundHome {
        BoundHome { path, fresh: None }
    }
}

impl BoundHome {
    /// Whether this call bound the folder to its database.
    pub fn is_fresh(&self) -> bool {
        self.fresh.is_some()
    }

    /// Undoes a binding made by this call: removes [`POSTGRES_URL_FILE`] and what appeared in the
    /// folder since (the folder itself when it did not exist before) as far as it holds no data:
    /// empty folders and empty files (the engine's lock file); a file with bytes in it is never
    /// removed. A binding that was there before is kept.
    pub fn undo(self) -> Result<()> {
        let Some(before) = self.fresh else {
            return Ok(());
        };
        let pointer = self.path.join(POSTGRES_URL_FILE);
        std::fs::remove_file(&pointer).map_err(io(&pointer, "removing the binding just made"))?;
        match before {
            None => remove_empty(&self.path),
            Some(before) => {
                for entry in std::fs::read_dir(&self.path)
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    if !before.contains(&entry.file_name()) {
                        remove_empty(&entry.path());
                    }
                }
            }
        }
        Ok(())
    }
}

/// Removes `path` when it holds no data: an empty file (a lock file), or a folder of such, depth
/// first (best effort: a file with bytes in it stays, and so do the folders above it).
fn remove_empty(path: &std::path::Path) {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return;
    };
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            remove_empty(&entry.path());
        }
        // Fails (and is meant to) when anything is left inside.
        let _ = std::fs::remove_dir(path);
    } else if metadata.is_file() && metadata.len() == 0 {
        let _ = std::fs::remove_file(path);
    }
}

/// [`store_home`], saying whether the folder was bound just now ([`BoundHome`]).
pub fn bind_store_home(location: &str, blobs: Option<&std::path::Path>) -> Result<BoundHome> {
    if !is_postgres_url(location) {
        if blobs.is_some() {
            return Err(Error::Location(format!(
                "--blobs (EASEML_BLOBS) goes with a postgres:// store; the store `{location}` is a folder and keeps its blobs inside"
            )));
        }
        return Ok(BoundHome {
            path: PathBuf::from(location),
            fresh: None,
        });
    }
    let s3 = blobs
        .and_then(std::path::Path::to_str)
        .filter(|blobs| is_s3_url(blobs));
    let home = match (s3, blobs) {
        (Some(url), _) => s3_home(location, url)?,
        (None, Some(folder)) => folder.to_owned(),
        (None, None) => platform_home()?,
    };
    match Pointer::DATABASE.read(&home)? {
        Some(recorded) if recorded == location => {
            return Ok(BoundHome {
                path: home,
                fresh: None,
            });
        }
        Some(recorded) => {
            return Err(Error::Location(format!(
                "the blob folder {} belongs to the store at {}, not {}: give each PostgreSQL store its own --blobs folder (or remove {} to bind this folder to another database)",
                home.display(),
                store::redact_url(&recorded),
                store::redact_url(location),
                home.join(POSTGRES_URL_FILE).display()
            )));
        }
        None => {}
    }
    if Store::exists(&home) {
        return Err(Error::Location(format!(
            "{} holds an SQLite store; give the PostgreSQL store another --blobs folder",
            home.display()
        )));
    }
    // The database must answer (and takes the schema) before the folder is bound to it: a
    // mistyped URL binds nothing.
    let before = std::fs::read_dir(&home).ok().map(|entries| {
        entries
            .flatten()
            .map(|entry| entry.file_name())
            .collect::<std::collections::BTreeSet<_>>()
    });
    drop(Store::open_postgres(location, &home)?);
    if !Pointer::DATABASE.create(&home, location)? {
        // Another process recorded it meanwhile: check what it wrote.
        return bind_store_home(location, Some(&home));
    }
    Ok(BoundHome {
        path: home,
        fresh: Some(before),
    })
}

pub(crate) fn db(context: impl Into<String>) -> impl FnOnce(db::DbError) -> Error {
    let context = context.into();
    move |source| Error::Database { context, source }
}

pub(crate) fn io(
    path: impl Into<PathBuf>,
    context: impl Into<String>,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    let context = context.into();
    move |source| Error::Io {
        path,
        context,
        source,
    }
}
