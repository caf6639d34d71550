//! The `Store`: one SQLite connection plus the blob directory of one home directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::blobs::{BlobHash, Blobs};
use crate::db::{Db, DbResult, OptionalExt, Row};
use crate::labels::LabelMap;
use crate::migrations::{self, MIGRATIONS, Migration};
use crate::params;
use crate::time::now_ms;
use crate::tokens;
use crate::{Error, Result, db, io};

mod examples;
pub use examples::ExampleBytes;

/// The id of a registered app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub i64);

/// The id of a stored example (unique across apps, increasing in insertion order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExampleId(pub i64);

/// The id of a training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId(pub i64);

/// How hard the store works to keep acknowledged writes across failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// SQLite `synchronous=NORMAL` in WAL mode and blob files not fsynced: every acknowledged batch
    /// survives a crash or kill of the process; the last batches may be lost on power loss.
    #[default]
    Process,
    /// SQLite `synchronous=FULL` and every blob file fsynced before its batch commits: acknowledged
    /// batches also survive power loss. Slower.
    Full,
}

/// How to open a store.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// See [`Durability`].
    pub durability: Durability,
}

/// An app to register.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApp {
    /// The app's name (unique in the store).
    pub name: String,
    /// The manifest, as JSON text.
    pub manifest: String,
    /// The canonical system data type.
    pub system_type: String,
    /// D when the output is exactly one `[D]` tensor (then examples may carry labels), else `None`.
    pub label_capacity: Option<u64>,
    /// The labels declared by the program, in order (their count is D).
    pub declared_labels: Option<Vec<String>>,
}

/// A registered app.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// Its id.
    pub id: AppId,
    /// Its name.
    pub name: String,
    /// Its manifest, JSON text.
    pub manifest: String,
    /// Its canonical system data type.
    pub system_type: String,
    /// D, when examples may carry labels.
    pub label_capacity: Option<u64>,
    /// Whether the labels were declared by the program.
    pub labels_declared: bool,
    /// The data version: bumped by every stored batch and every toggle that changes a flag.
    pub data_version: u64,
    /// When it was registered, ms since the epoch.
    pub created_ms: i64,
}

/// The bytes of a blob to store with a batch: in memory, or already written with
/// [`Store::put_blob`] (large feeds write as they go to bound their memory; should the batch fail,
/// such blobs stay unreferenced until [`Store::collect_garbage`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Blob {
    /// Bytes to write.
    Bytes(Vec<u8>),
    /// A blob already in the store.
    Stored(BlobHash),
}

/// The output of an example to store.
#[derive(Debug, Clone, PartialEq)]
pub enum NewOutput {
    /// An encoded output object.
    Blob(Blob),
    /// A class label, mapped to its index by the app's label map.
    Label(String),
}

/// An example to store: the encoded input and the output.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExample {
    /// The encoded input object (`easeml_object::codec`).
    pub input: Blob,
    /// The output.
    pub output: NewOutput,
}

/// What a stored batch did.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertReport {
    /// The new examples' ids, in the batch's order.
    pub ids: Vec<ExampleId>,
    /// The app's data version after the batch.
    pub data_version: u64,
    /// Labels first seen in this batch, with their indices.
    pub new_labels: Vec<(String, u32)>,
}

/// A stored example's output.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredOutput {
    /// An output blob.
    Blob(BlobHash),
    /// A label.
    Label {
        /// Its index.
        index: u32,
        /// Its name.
        name: String,
    },
}

/// A stored example.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleRecord {
    /// Its id.
    pub id: ExampleId,
    /// The input blob.
    pub input: BlobHash,
    /// The output.
    pub output: StoredOutput,
    /// Whether training uses it.
    pub enabled: bool,
    /// The app's data version that added it.
    pub data_version: u64,
    /// When it was stored, ms since the epoch.
    pub created_ms: i64,
}

/// Which page of examples to list: those with ids above `after`, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// List examples with ids greater than this (the previous page's `next`); `None` from the start.
    pub after: Option<ExampleId>,
    /// At most this many (clamped to 1..=10,000).
    pub limit: u32,
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest {
            after: None,
            limit: 100,
        }
    }
}

/// Which examples a listing keeps ([`Store::examples_filtered`]); the default keeps all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExampleFilter {
    /// Only enabled (`Some(true)`) or only disabled (`Some(false)`) examples.
    pub enabled: Option<bool>,
    /// Only examples with this label.
    pub label: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items, in id order.
    pub items: Vec<T>,
    /// The request for the next page, when there may be more.
    pub next: Option<PageRequest>,
    /// How many items the whole listing has.
    pub total: u64,
}

/// A training run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Waiting for a device.
    Queued,
    /// Training now.
    Running,
    /// Finished with a quality.
    Done,
    /// Failed with an error.
    Failed,
}

impl RunState {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }

    fn parse(text: &str) -> RunState {
        match text {
            "queued" => RunState::Queued,
            "running" => RunState::Running,
            "done" => RunState::Done,
            _ => RunState::Failed,
        }
    }
}

/// A training run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Its id (unique in the store; what the API and the other records name it by).
    pub id: RunId,
    /// Its number within its app: 1 for the app's first run, then 2, ... (what people see: an
    /// app's runs count on from 1 whatever other apps run).
    pub number: u64,
    /// The app.
    pub app: AppId,
    /// The candidate id, e.g. `resnet18+norm_k2`.
    pub candidate: String,
    /// Its state.
    pub state: RunState,
    /// The app's data version it trains on.
    pub data_version: u64,
    /// The quality in [0, 1], when done.
    pub quality: Option<f64>,
    /// The cost in seconds, when done or failed.
    pub cost_seconds: Option<f64>,
    /// The checkpoint blob, when done.
    pub checkpoint: Option<BlobHash>,
    /// When it was queued, ms since the epoch.
    pub queued_ms: i64,
    /// When it started.
    pub started_ms: Option<i64>,
    /// When it finished or failed.
    pub finished_ms: Option<i64>,
    /// Why it failed.
    pub error: Option<String>,
    /// How its quality was measured, when done (empty for runs recorded before it was kept).
    pub validation: RunValidation,
    /// Its measured inference latency in seconds per example (batch 1, on the serving device), when
    /// measured (committed with the run: [`crate::UnitResult`]): after training, or before it when the untrained
    /// model already breaks the app's `infer_latency` constraint.
    pub infer_latency_seconds: Option<f64>,
    /// The trainer's trials of the run as JSON text (committed with it; the store keeps it
    /// and never reads it), when recorded.
    pub trials: Option<String>,
}

/// How a run's quality was measured: the trainer's protocol and the spread of the quality. The
/// store keeps the protocol as the trainer describes it and never interprets it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunValidation {
    /// The protocol, e.g. `5-fold stratified` or `split 20%`.
    pub protocol: Option<String>,
    /// The standard deviation of the quality over the folds (k-fold), else `None`.
    pub quality_std: Option<f64>,
    /// How many examples measured the quality (the validation part, or all of them under k-fold),
    /// when known (`None` for runs recorded before it was kept).
    pub validated_examples: Option<u64>,
    /// For a classifier: how the validation answers fell, by (true class, predicted class), as the
    /// JSON text the engine writes (`easeml_object::Confusion`; the store keeps it and never reads
    /// it, at most [`MAX_CONFUSION_BYTES`]); `None` otherwise.
    pub confusion: Option<String>,
    /// The blob of the run's validation answers (class probabilities or values of every
    /// validated example: out-of-fold under k-fold), written by the engine in its own format and
    /// bounded by it; the store keeps the hash and never reads the blob. `None` when not kept
    /// (MOP runs, runs recorded before it was kept).
    pub oof: Option<BlobHash>,
}

/// One store: its rows (`easeml.sqlite3` under the home directory, or a PostgreSQL database) and
/// its blobs (`blobs/` under the home directory, or an S3 prefix its `blobs.url` names).
#[derive(Debug)]
pub struct Store {
    home: PathBuf,
    pub(crate) connection: Db,
    blobs: Blobs,
}

const DATABASE_FILE: &str = "easeml.sqlite3";

/// The states a run may fail or be given its latency in.
const QUEUED_OR_RUNNING: &[RunState] = &[RunState::Queued, RunState::Running];

/// The most JSON a run's trials may take (a run has tens of trials of a few hundred bytes each).
pub const MAX_TRIALS_BYTES: usize = 1 << 20;
/// The most JSON a run's confusion counts may take (a cell is about 15 bytes: 1 MiB holds every
/// cell of a 250-class problem).
pub const MAX_CONFUSION_BYTES: usize = 1 << 20;
/// An example's input or output of at most this many bytes is kept in the example's own row
/// (`examples.input_bytes`, `output_bytes`; before schema version 14 in the table `blob_bytes`,
/// still read), rather than as a file or object of its own: tables, series and small images, read
/// by the example ([`Store::example_bytes`]). Larger ones (e.g. a 256x256 image's 768 KiB) are
/// blobs.
pub const INLINE_BLOB_BYTES: usize = 16 * 1024;
/// Blobs (or examples) read by one query of [`Store::blobs`] (or [`Store::example_bytes`]; well
/// under SQLite's and PostgreSQL's limits on a statement's parameters).
const BLOBS_PER_QUERY: usize = 1000;

const RUN_COLUMNS: &str = "id, app, candidate, state, data_version, quality, cost_seconds, checkpoint_sha256, queued_ms, started_ms, finished_ms, error, protocol, quality_std, infer_latency_seconds, trials, validated_examples, confusion, oof_sha256, number";

impl Store {
    /// Whether `home` holds a store (its database file), without creating anything.
    pub fn exists(home: impl AsRef<Path>) -> bool {
        home.as_ref().join(DATABASE_FILE).is_file()
            || home.as_ref().join(crate::POSTGRES_URL_FILE).is_file()
    }

    /// Opens (creating when needed) the store under `home` and brings its schema up to date.
    pub fn open(home: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(home, &StoreOptions::default())
    }

    /// [`Store::open`] with options. A home whose [`crate::POSTGRES_URL_FILE`] names a database
    /// (see [`crate::store_home`]) opens that PostgreSQL store, its blobs in the home.
    pub fn open_with(home: impl AsRef<Path>, options: &StoreOptions) -> Result<Store> {
        let home = home.as_ref();
        match crate::Pointer::DATABASE.read(home)? {
            Some(url) => Store::open_postgres_migrated(&url, home, options, MIGRATIONS),
            None => Store::open_migrated(home, options, MIGRATIONS),
        }
    }

    /// Opens the store applying only `migrations` (tests of upgrades use a prefix of [`MIGRATIONS`]).
    pub fn open_migrated(
        home: &Path,
        options: &StoreOptions,
        migrations: &[Migration],
    ) -> Result<Store> {
        fs::create_dir_all(home).map_err(io(home, "creating the store directory"))?;
        let path = home.join(DATABASE_FILE);
        let connection = rusqlite::Connection::open(&path)
            .map_err(|error| db(format!("opening {}", path.display()))(error.into()))?;
        connection
            .busy_timeout(Duration::from_secs(10))
            .map_err(|error| db("setting the busy timeout")(error.into()))?;
        let connection = Db::Sqlite(connection);
        let journal_mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", (), |row| row.get(0))
            .map_err(db("switching to WAL mode"))?;
        if !journal_mode.eq_ignore_ascii_case("wal") {
            return Err(Error::Database {
                context: format!(
                    "switching to WAL mode (the database stays in {journal_mode} mode)"
                ),
                source: rusqlite::Error::InvalidQuery.into(),
            });
        }
        let synchronous = match options.durability {
            Durability::Process => "NORMAL",
            Durability::Full => "FULL",
        };
        connection
            .execute_batch(&format!(
                "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON;"
            ))
            .map_err(db("setting pragmas"))?;
        migrations::migrate(&connection, migrations, &path)?;
        let blobs = Blobs::open_in(home, options.durability == Durability::Full)?;
        Ok(Store {
            home: home.to_owned(),
            connection,
            blobs,
        })
    }

    /// Opens the store whose rows are in the PostgreSQL database at `url`
    /// (`postgres://user:password@host:port/database`) and whose blobs are under `home` (a folder
    /// every worker sees), bringing the database's schema up to date.
    pub fn open_postgres(url: &str, home: impl AsRef<Path>) -> Result<Store> {
        Store::open_postgres_migrated(url, home.as_ref(), &StoreOptions::default(), MIGRATIONS)
    }

    /// [`Store::open_postgres`] applying only `migrations` (tests of upgrades).
    pub fn open_postgres_migrated(
        url: &str,
        home: &Path,
        options: &StoreOptions,
        migrations: &[Migration],
    ) -> Result<Store> {
        fs::create_dir_all(home).map_err(io(home, "creating the store directory"))?;
        let place = redact_url(url);
        let connection = crate::db::PgConnection::connect(url).map_err(db(format!(
            "connecting to {place} (is the server up, and does the database exist? `createdb` makes one)"
        )))?;
        let connection = Db::Postgres(Box::new(std::cell::RefCell::new(connection)));
        migrations::migrate(&connection, migrations, Path::new(&place))?;
        let blobs = Blobs::open_in(home, options.durability == Durability::Full)?;
        Ok(Store {
            home: home.to_owned(),
            connection,
            blobs,
        })
    }

    /// Which database engine keeps the rows.
    pub fn dialect(&self) -> crate::db::Dialect {
        self.connection.dialect()
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The schema version of the database (the last applied migration).
    pub fn schema_version(&self) -> Result<u32> {
        migrations::current_version(&self.connection)
    }

    /// Checks the store: SQLite's `PRAGMA integrity_check` (PostgreSQL checks its own pages), and
    /// that every example belongs to an app (on PostgreSQL no foreign key keeps that: migration
    /// 15). `Ok(())` when both hold, else the findings in words.
    pub fn integrity_check(&self) -> Result<std::result::Result<(), Vec<String>>> {
        let mut findings: Vec<String> = match self.dialect() {
            crate::db::Dialect::Sqlite => self
                .connection
                .query_map("PRAGMA integrity_check", (), |row| row.get(0))
                .map_err(db("running the integrity check"))?,
            crate::db::Dialect::Postgres => vec!["ok".to_owned()],
        };
        if findings == ["ok"] {
            findings.clear();
        }
        let orphans: i64 = self
            .connection
            .query_row(
                "SELECT COUNT(*) FROM examples WHERE NOT EXISTS (SELECT 1 FROM apps WHERE apps.id = examples.app)",
                (),
                |row| row.get(0),
            )
            .map_err(db("checking that every example has its app"))?;
        if orphans > 0 {
            findings.push(format!(
                "{orphans} example(s) belong to no app (left by a removed app)"
            ));
        }
        Ok(if findings.is_empty() {
            Ok(())
        } else {
            Err(findings)
        })
    }

    // ----- apps -----

    /// Registers an app; returns it and its token (shown once: only its sha256 is stored).
    pub fn register_app(&mut self, new_app: &NewApp) -> Result<(App, String)> {
        let token = tokens::issue()?;
        let context = format!("registering app `{}`", new_app.name);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let inserted = transaction.query_row(
            "INSERT INTO apps (name, manifest, system_type, token_sha256, label_capacity, labels_declared, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
            params![
                new_app.name,
                new_app.manifest,
                new_app.system_type,
                tokens::hash(&token),
                new_app.label_capacity.map(|capacity| capacity as i64),
                new_app.declared_labels.is_some(),
                now_ms()
            ],
            |row| row.get(0),
        );
        let id = match inserted {
            Ok(id) => AppId(id),
            // The name is taken (checked by the database, so two registrations cannot race).
            Err(error) if error.is_unique_violation() => {
                return Err(Error::AppExists(new_app.name.clone()));
            }
            Err(error) => return Err(db(context)(error)),
        };
        if let Some(labels) = &new_app.declared_labels {
            for (index, label) in labels.iter().enumerate() {
                transaction
                    .execute(
                        "INSERT INTO label_maps (app, label, label_index) VALUES (?1, ?2, ?3)",
                        params![id.0, label, index as i64],
                    )
                    .map_err(db(context.clone()))?;
            }
        }
        transaction.commit().map_err(db(context))?;
        Ok((self.app(id)?, token))
    }

    /// The app with this id.
    pub fn app(&self, id: AppId) -> Result<App> {
        self.query_app("id = ?1", id.0)?
            .ok_or(Error::NoSuchAppId(id.0))
    }

    /// The app with this name, if registered.
    pub fn app_by_name(&self, name: &str) -> Result<Option<App>> {
        self.query_app("name = ?1", name)
    }

    /// Every app, by id.
    pub fn apps(&self) -> Result<Vec<App>> {
        self.connection
            .query_map(
                &format!("SELECT {APP_COLUMNS} FROM apps ORDER BY id"),
                (),
                app_from_row,
            )
            .map_err(db("listing apps"))
    }

    /// Removes an app with all its examples, labels and runs (blob files stay until collected).
    /// The examples are removed here, not by a foreign key's cascade (PostgreSQL's examples have
    /// none: migration 15), after the app's row: its deletion waits for a feed that holds the
    /// row and keeps later feeds out, so no example of the app is committed after this one.
    pub fn remove_app(&mut self, id: AppId) -> Result<()> {
        let context = format!("removing app {}", id.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let removed = transaction
            .execute("DELETE FROM apps WHERE id = ?1", [id.0])
            .map_err(db(context.clone()))?;
        if removed == 0 {
            return Err(Error::NoSuchAppId(id.0));
        }
        transaction
            .execute("DELETE FROM examples WHERE app = ?1", [id.0])
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(())
    }

    /// Whether `token` is the app's token (compared in constant time, as hashes).
    pub fn verify_token(&self, id: AppId, token: &str) -> Result<bool> {
        let stored: String = self
            .connection
            .query_row(
                "SELECT token_sha256 FROM apps WHERE id = ?1",
                [id.0],
                |row| row.get(0),
            )
            .optional()
            .map_err(db("reading an app token"))?
            .ok_or(Error::NoSuchAppId(id.0))?;
        Ok(tokens::matches_hash(token, &stored))
    }

    fn query_app<P: crate::db::ToValue>(&self, condition: &str, value: P) -> Result<Option<App>> {
        self.connection
            .query_row(
                &format!("SELECT {APP_COLUMNS} FROM apps WHERE {condition}"),
                [value],
                app_from_row,
            )
            .optional()
            .map_err(db("reading an app"))
    }

    /// The app's label map (empty labels when no label was seen yet), or `None` when its output
    /// takes no labels.
    pub fn label_map(&self, id: AppId) -> Result<Option<LabelMap>> {
        let app = self.app(id)?;
        read_label_map(&self.connection, &app)
    }

    // ----- blobs -----

    /// Stores bytes as a blob (a no-op when the same bytes are stored); returns its hash.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<BlobHash> {
        self.blobs.put(bytes)
    }

    /// Reads a blob, checking its hash: from the database when it is a small blob a store before
    /// schema version 14 kept there (table `blob_bytes`), else from the blob folder or bucket. A
    /// small input or output in its example's row is not a blob: read it with
    /// [`Store::example_bytes`].
    pub fn blob(&self, hash: &BlobHash) -> Result<Vec<u8>> {
        match self.inline_blob(hash)? {
            Some(bytes) => crate::blobs::verified(hash, bytes),
            None => self.blobs.get(hash),
        }
    }

    /// The bytes of every blob in `hashes`, in order (as [`Store::blob`] reads one): the small
    /// ones kept in the database a thousand to a query, the others from their files. For reading many at once (the engine loads an app's examples a page at a time).
    pub fn blobs(&self, hashes: &[&BlobHash]) -> Result<Vec<Vec<u8>>> {
        let mut inline: std::collections::HashMap<String, Vec<u8>> =
            std::collections::HashMap::with_capacity(hashes.len());
        for chunk in hashes.chunks(BLOBS_PER_QUERY) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("?{i}")).collect();
            let texts: Vec<String> = chunk.iter().map(|hash| hash.as_str().to_owned()).collect();
            let values: Vec<&dyn crate::db::ToValue> = texts
                .iter()
                .map(|text| text as &dyn crate::db::ToValue)
                .collect();
            let rows = self
                .connection
                .query_map(
                    &format!(
                        "SELECT sha256, bytes FROM blob_bytes WHERE sha256 IN ({})",
                        placeholders.join(", ")
                    ),
                    values.as_slice(),
                    |row| Ok((row.get::<String>(0)?, row.get::<Vec<u8>>(1)?)),
                )
                .map_err(db("reading blobs"))?;
            inline.extend(rows);
        }
        hashes
            .iter()
            .map(|hash| match inline.get(hash.as_str()) {
                // A hash named twice is read twice from the map, never moved out.
                Some(bytes) => crate::blobs::verified(hash, bytes.clone()),
                None => self.blobs.get(hash),
            })
            .collect()
    }

    /// A small blob's bytes from the database, if it is there.
    fn inline_blob(&self, hash: &BlobHash) -> Result<Option<Vec<u8>>> {
        self.connection
            .query_row(
                "SELECT bytes FROM blob_bytes WHERE sha256 = ?1",
                [hash.as_str()],
                |row| row.get(0),
            )
            .optional()
            .map_err(db("reading a blob"))
    }

    /// Where a blob's file is; `None` when the blobs are not files (S3) or the blob is a small one
    /// kept in the database.
    pub fn blob_path(&self, hash: &BlobHash) -> Option<PathBuf> {
        match self.inline_blob(hash) {
            Ok(Some(_)) => None,
            _ => self.blobs.path(hash),
        }
    }

    /// Removes blob files that no example, run or open MOP run's sub-epoch refers to (left by failed
    /// batches, removed apps, crashes; the training states of a finished MOP run, whose model is its
    /// checkpoint) and that are older than `min_age` (so that blobs of a batch being stored right now
    /// are kept; storing a blob that exists refreshes its age). Use a `min_age` well above the
    /// longest feed. Returns (files removed, bytes freed).
    pub fn collect_garbage(&self, min_age: Duration) -> Result<(usize, u64)> {
        let referenced: std::collections::HashSet<String> = self
            .connection
            .query_map(
                "SELECT input_sha256 FROM examples
                 UNION SELECT output_sha256 FROM examples WHERE output_sha256 IS NOT NULL
                 UNION SELECT checkpoint_sha256 FROM runs WHERE checkpoint_sha256 IS NOT NULL
                 UNION SELECT oof_sha256 FROM runs WHERE oof_sha256 IS NOT NULL
                 UNION SELECT u.input_sha256 FROM units u JOIN runs r ON r.id = u.run
                   WHERE u.input_sha256 IS NOT NULL AND r.state IN ('queued', 'running')
                 UNION SELECT u.result_sha256 FROM units u JOIN runs r ON r.id = u.run
                   WHERE u.result_sha256 IS NOT NULL AND r.state IN ('queued', 'running')",
                (),
                |row| row.get(0),
            )
            .map_err(db("listing referenced blobs"))?
            .into_iter()
            .collect();
        let (inline_removed, inline_freed) = self.collect_inline_garbage()?;
        let (removed, freed) = self.blobs.collect_garbage(&referenced, min_age)?;
        Ok((removed + inline_removed, freed + inline_freed))
    }

    /// Removes the small blobs in the table `blob_bytes` that no example refers to (left by
    /// removed apps). Only stores of schema versions 10-13 wrote them there, each in the
    /// transaction of the rows that named it, so no age is needed; feeds since keep small blobs
    /// in their rows and never write the table. On PostgreSQL the table is locked first (from
    /// when feeds wrote it; nothing else contends for it now). Returns (blobs removed, bytes
    /// freed).
    fn collect_inline_garbage(&self) -> Result<(usize, u64)> {
        let context = "removing unreferenced blobs from the database";
        let transaction = self.connection.transaction().map_err(db(context))?;
        if transaction.dialect() == crate::db::Dialect::Postgres {
            transaction
                .execute("LOCK TABLE blob_bytes IN SHARE ROW EXCLUSIVE MODE", ())
                .map_err(db(context))?;
        }
        let freed: Vec<i64> = transaction
            .query_map(
                "DELETE FROM blob_bytes
                 WHERE sha256 NOT IN (SELECT input_sha256 FROM examples)
                   AND sha256 NOT IN (SELECT output_sha256 FROM examples WHERE output_sha256 IS NOT NULL)
                 RETURNING CAST(LENGTH(bytes) AS BIGINT)",
                (),
                |row| row.get(0),
            )
            .map_err(db(context))?;
        transaction.commit().map_err(db(context))?;
        Ok((
            freed.len(),
            freed.iter().map(|&bytes| bytes.max(0) as u64).sum(),
        ))
    }

    // ----- examples -----

    // ----- runs -----

    /// Marks a queued or running run as failed.
    pub fn fail_run(&mut self, run: RunId, error: &str, cost_seconds: Option<f64>) -> Result<()> {
        self.transition(run, QUEUED_OR_RUNNING, "failed", |connection| {
            connection.execute(
                "UPDATE runs SET state = 'failed', error = ?1, cost_seconds = ?2, finished_ms = ?3 WHERE id = ?4",
                params![error, cost_seconds, now_ms(), run.0],
            )
        })
    }

    /// Puts every running run without a work unit back in the queue (after a crash); returns how
    /// many. A run with a unit is a worker's: it comes back when its lease expires
    /// ([`Store::lease_unit`]) or its coordinator gives it back ([`Store::release_leases_of`]).
    pub fn requeue_interrupted(&mut self) -> Result<usize> {
        self.connection
            .execute(
                "UPDATE runs SET state = 'queued', started_ms = NULL WHERE state = 'running' AND NOT EXISTS (SELECT 1 FROM units WHERE units.run = runs.id)",
                (),
            )
            .map_err(db("re-queueing interrupted runs"))
    }

    /// One run.
    pub fn run(&self, run: RunId) -> Result<RunRecord> {
        self.connection
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                [run.0],
                run_from_row,
            )
            .optional()
            .map_err(db(format!("reading run {}", run.0)))?
            .ok_or(Error::NoSuchRun(run.0))
    }

    /// Every run of the app, by id.
    pub fn runs(&self, id: AppId) -> Result<Vec<RunRecord>> {
        let app = self.app(id)?;
        let context = format!("listing runs of app `{}`", app.name);
        self.connection
            .query_map(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE app = ?1 ORDER BY id"),
                [id.0],
                run_from_row,
            )
            .map_err(db(context))
    }

    /// Applies `update` to a run in one of the states `from`, checked in the same transaction.
    fn transition(
        &mut self,
        run: RunId,
        from: &[RunState],
        wanted: &'static str,
        update: impl FnOnce(&Db) -> DbResult<usize>,
    ) -> Result<()> {
        let context = format!("marking run {} {wanted}", run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let state = locked_run_state(&transaction, run, &context)?;
        if !from.contains(&RunState::parse(&state)) {
            return Err(Error::RunState {
                id: run.0,
                state,
                wanted,
            });
        }
        update(&transaction).map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))
    }
}

/// A run's state as stored, its row locked for the rest of `transaction` (PostgreSQL's `FOR
/// UPDATE`; a SQLite write transaction holds the whole database): the one read before a run's
/// state changes. [`Error::NoSuchRun`] when there is no such run.
pub(crate) fn locked_run_state(transaction: &Db, run: RunId, context: &str) -> Result<String> {
    transaction
        .query_row(
            &format!(
                "SELECT state FROM runs WHERE id = ?1{}",
                transaction.dialect().for_update()
            ),
            [run.0],
            |row| row.get(0),
        )
        .optional()
        .map_err(db(context.to_owned()))?
        .ok_or(Error::NoSuchRun(run.0))
}

/// `Ok` when a finished run's values are in range: quality in [0, 1], cost and spread >= 0.
pub(crate) fn check_finished_values(
    run: RunId,
    quality: f64,
    cost_seconds: f64,
    validation: &RunValidation,
) -> Result<()> {
    if !(0.0..=1.0).contains(&quality) {
        return Err(Error::RunValue {
            id: run.0,
            what: format!("quality {quality} is outside [0, 1]"),
        });
    }
    non_negative(run, cost_seconds, || format!("cost {cost_seconds} s"))?;
    if let Some(std) = validation.quality_std {
        non_negative(run, std, || format!("quality standard deviation {std}"))?;
    }
    Ok(())
}

/// `Ok` when a run's trials JSON of `bytes` bytes is at most [`MAX_TRIALS_BYTES`].
pub(crate) fn check_trials_size(run: RunId, bytes: usize) -> Result<()> {
    if bytes > MAX_TRIALS_BYTES {
        return Err(Error::RunValue {
            id: run.0,
            what: format!(
                "its trials are {bytes} bytes of JSON, more than the {MAX_TRIALS_BYTES} kept"
            ),
        });
    }
    Ok(())
}

/// `Ok` when `value` is a finite number >= 0, else the error naming it (`what`).
pub(crate) fn non_negative(run: RunId, value: f64, what: impl FnOnce() -> String) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        return Ok(());
    }
    Err(Error::RunValue {
        id: run.0,
        what: format!("{} is not a non-negative number", what()),
    })
}

const APP_COLUMNS: &str =
    "id, name, manifest, system_type, label_capacity, labels_declared, data_version, created_ms";

fn app_from_row(row: &Row) -> DbResult<App> {
    Ok(App {
        id: AppId(row.get(0)?),
        name: row.get(1)?,
        manifest: row.get(2)?,
        system_type: row.get(3)?,
        label_capacity: row.get::<Option<i64>>(4)?.map(|capacity| capacity as u64),
        labels_declared: row.get(5)?,
        data_version: row.get::<i64>(6)? as u64,
        created_ms: row.get(7)?,
    })
}

/// The app, read in a write transaction: its row locked on PostgreSQL until the transaction ends.
fn query_app_in(connection: &Db, id: AppId) -> Result<App> {
    connection
        .query_row(
            &format!(
                "SELECT {APP_COLUMNS} FROM apps WHERE id = ?1{}",
                connection.dialect().for_update()
            ),
            [id.0],
            app_from_row,
        )
        .optional()
        .map_err(db("reading an app"))?
        .ok_or(Error::NoSuchAppId(id.0))
}

fn read_label_map(connection: &Db, app: &App) -> Result<Option<LabelMap>> {
    let Some(capacity) = app.label_capacity else {
        return Ok(None);
    };
    let context = format!("reading the label map of app `{}`", app.name);
    let labels: Vec<String> = connection
        .query_map(
            "SELECT label FROM label_maps WHERE app = ?1 ORDER BY label_index",
            [app.id.0],
            |row| row.get(0),
        )
        .map_err(db(context))?;
    Ok(Some(LabelMap {
        labels,
        capacity,
        declared: app.labels_declared,
    }))
}

fn run_from_row(row: &Row) -> DbResult<RunRecord> {
    Ok(RunRecord {
        id: RunId(row.get(0)?),
        app: AppId(row.get(1)?),
        candidate: row.get(2)?,
        state: RunState::parse(&row.get::<String>(3)?),
        data_version: row.get::<i64>(4)? as u64,
        quality: row.get(5)?,
        cost_seconds: row.get(6)?,
        checkpoint: row.get::<Option<String>>(7)?.map(trusted_hash),
        queued_ms: row.get(8)?,
        started_ms: row.get(9)?,
        finished_ms: row.get(10)?,
        error: row.get(11)?,
        validation: RunValidation {
            protocol: row.get(12)?,
            quality_std: row.get(13)?,
            validated_examples: row.get::<Option<i64>>(16)?.map(|count| count.max(0) as u64),
            confusion: row.get(17)?,
            oof: row.get::<Option<String>>(18)?.map(trusted_hash),
        },
        infer_latency_seconds: row.get(14)?,
        trials: row.get(15)?,
        number: row
            .get::<Option<i64>>(19)?
            .map_or(0, |number| number.max(0) as u64),
    })
}

/// A hash read back from the database, which only ever stores hashes the store computed (a damaged
/// one fails when its blob is read).
fn trusted_hash(text: String) -> BlobHash {
    BlobHash::from_database(text)
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((credentials, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}
