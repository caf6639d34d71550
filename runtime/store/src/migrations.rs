//! Versioned schema migrations: ordered SQL scripts, each applied once in its own transaction and
//! recorded in `schema_migrations`. A new version is a new entry at the end of [`MIGRATIONS`]; an
//! applied entry is never edited.

use std::path::Path;

use crate::db::{Db, Dialect, OptionalExt};
use crate::params;
use crate::{Error, Result, db, time::now_ms};

/// One schema migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its version, 1, 2, ... in order.
    pub version: u32,
    /// A short name, recorded with it.
    pub name: &'static str,
    /// The SQL script (written for SQLite; PostgreSQL runs it through `postgres_schema`).
    pub sql: &'static str,
    /// PostgreSQL's own script, when the translation cannot express the change (SQLite cannot
    /// drop a constraint, so it rebuilds the table; PostgreSQL drops the constraint, keeping its
    /// identity sequence).
    pub postgres_sql: Option<&'static str>,
}

/// Every migration of this build, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "tables",
        sql: r#"
CREATE TABLE apps (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    manifest       TEXT NOT NULL,              -- the app's manifest, JSON
    system_type    TEXT NOT NULL,              -- the canonical system data type
    token_sha256   TEXT NOT NULL,              -- hex sha256 of the app's token
    label_capacity INTEGER,                    -- D when the output is one [D] tensor, else NULL
    labels_declared INTEGER NOT NULL DEFAULT 0 CHECK (labels_declared IN (0, 1)),
    data_version   INTEGER NOT NULL DEFAULT 0, -- bumped on every feed and every toggle
    created_ms     INTEGER NOT NULL
);
CREATE TABLE examples (
    id             INTEGER PRIMARY KEY,
    app            INTEGER NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    input_sha256   TEXT NOT NULL,
    output_sha256  TEXT,                       -- the output blob, or NULL when labelled
    label_index    INTEGER,                    -- the label's index, or NULL
    enabled        INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    data_version   INTEGER NOT NULL,           -- the app's data version that added it
    created_ms     INTEGER NOT NULL,
    CHECK ((output_sha256 IS NULL) <> (label_index IS NULL))
);
CREATE TABLE label_maps (
    app            INTEGER NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    label          TEXT NOT NULL,
    label_index    INTEGER NOT NULL,
    PRIMARY KEY (app, label),
    UNIQUE (app, label_index)
);
CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    app            INTEGER NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    candidate      TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    data_version   INTEGER NOT NULL,           -- the app's data version the run trains on
    quality        REAL,                       -- in [0, 1] when done
    cost_seconds   REAL,
    checkpoint_sha256 TEXT,
    queued_ms      INTEGER NOT NULL,
    started_ms     INTEGER,
    finished_ms    INTEGER,
    error          TEXT
);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 2,
        name: "indexes",
        sql: r#"
CREATE INDEX examples_by_app ON examples(app, id);
CREATE INDEX runs_by_app ON runs(app, id);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 3,
        name: "run validation",
        sql: r#"
ALTER TABLE runs ADD COLUMN protocol TEXT;      -- how the quality was measured, e.g. '5-fold stratified'; NULL before version 3
ALTER TABLE runs ADD COLUMN quality_std REAL;   -- the standard deviation of the fold qualities (k-fold), else NULL
"#,
        postgres_sql: None,
    },
    Migration {
        version: 4,
        name: "inference latency",
        sql: r#"
ALTER TABLE runs ADD COLUMN infer_latency_seconds REAL; -- measured batch-1 inference time per example on the serving device; NULL when not measured
"#,
        postgres_sql: None,
    },
    Migration {
        version: 5,
        name: "run trials",
        sql: r#"
ALTER TABLE runs ADD COLUMN trials TEXT; -- the trainer's trials of the run as JSON (learning rates, TrimTuner settings and data shares); NULL before version 5
"#,
        postgres_sql: None,
    },
    Migration {
        version: 6,
        name: "work units, leases and workers",
        sql: r#"
ALTER TABLE runs ADD COLUMN validated_examples INTEGER; -- how many examples measured the quality; NULL before version 6
CREATE TABLE units (
    id             INTEGER PRIMARY KEY,
    run            INTEGER NOT NULL UNIQUE REFERENCES runs(id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('run')), -- a whole training run (MOP sub-epochs later)
    spec           TEXT NOT NULL,              -- what the worker needs beyond the run, JSON (the engine's)
    state          TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'committed')),
    attempt        INTEGER NOT NULL DEFAULT 0, -- bumped by every lease: with lease_owner, the fencing token
    losses         INTEGER NOT NULL DEFAULT 0, -- leases that expired with their worker
    lease_owner    TEXT,
    lease_expires_ms INTEGER,
    created_ms     INTEGER NOT NULL,
    committed_ms   INTEGER
);
CREATE INDEX units_by_state ON units(state, id);
CREATE TABLE workers (
    id             TEXT PRIMARY KEY,           -- `worker:<host>:<pid>:<random>` or `in-process:<host>:<pid>:<random>`
    host           TEXT NOT NULL,
    pid            INTEGER NOT NULL,
    device         TEXT NOT NULL,
    threads        INTEGER NOT NULL,
    started_ms     INTEGER NOT NULL,
    heartbeat_ms   INTEGER NOT NULL,
    unit           INTEGER,                    -- the unit it holds, if any
    state          TEXT NOT NULL CHECK (state IN ('idle', 'busy', 'stopped')),
    slurm_job      TEXT                        -- `<job>` or `<array job>_<task>` under Slurm, else NULL
);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 7,
        name: "sub-epoch units (model hopper parallelism)",
        sql: r#"
CREATE TABLE units_v7 (
    id             INTEGER PRIMARY KEY,
    run            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind           TEXT NOT NULL CHECK (kind IN ('run', 'sub_epoch')), -- a whole run, or one MOP sub-epoch of it
    spec           TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'committed')),
    attempt        INTEGER NOT NULL DEFAULT 0,
    losses         INTEGER NOT NULL DEFAULT 0,
    lease_owner    TEXT,
    lease_expires_ms INTEGER,
    created_ms     INTEGER NOT NULL,
    committed_ms   INTEGER,
    epoch          INTEGER,                    -- sub_epoch: the epoch (from 0)
    part           INTEGER,                    -- sub_epoch: the data partition
    target_worker  TEXT,                       -- sub_epoch: the worker holding the partition, if any
    lease_rank     INTEGER NOT NULL DEFAULT 0, -- leased in this order (random for sub-epochs: Cerebro's shuffle)
    input_sha256   TEXT,                       -- sub_epoch: the training state it started from (set by the lease)
    result_sha256  TEXT,                       -- sub_epoch: the training state it ended with (set by the commit)
    seconds        REAL,                       -- sub_epoch: its worker's seconds
    seq            INTEGER                     -- sub_epoch: its place in the run's visit log (set by the commit)
);
INSERT INTO units_v7 (id, run, kind, spec, state, attempt, losses, lease_owner, lease_expires_ms, created_ms, committed_ms)
    SELECT id, run, kind, spec, state, attempt, losses, lease_owner, lease_expires_ms, created_ms, committed_ms FROM units;
DROP TABLE units;
ALTER TABLE units_v7 RENAME TO units;
CREATE INDEX units_by_state ON units(state, id);
CREATE UNIQUE INDEX units_one_per_run ON units(run) WHERE kind = 'run';
CREATE UNIQUE INDEX units_one_per_sub_epoch ON units(run, epoch, part) WHERE kind = 'sub_epoch';
CREATE INDEX units_by_run ON units(run, seq);
CREATE INDEX units_open_by_rank ON units(lease_rank, id) WHERE state <> 'committed'; -- the lease's scan, in its order, over open units only
"#,
        postgres_sql: Some(
            r#"
ALTER TABLE units DROP CONSTRAINT units_run_key;
ALTER TABLE units DROP CONSTRAINT units_kind_check;
ALTER TABLE units ADD CONSTRAINT units_kind_check CHECK (kind IN ('run', 'sub_epoch'));
ALTER TABLE units ADD COLUMN epoch BIGINT;
ALTER TABLE units ADD COLUMN part BIGINT;
ALTER TABLE units ADD COLUMN target_worker TEXT;
ALTER TABLE units ADD COLUMN lease_rank BIGINT NOT NULL DEFAULT 0;
ALTER TABLE units ADD COLUMN input_sha256 TEXT;
ALTER TABLE units ADD COLUMN result_sha256 TEXT;
ALTER TABLE units ADD COLUMN seconds DOUBLE PRECISION;
ALTER TABLE units ADD COLUMN seq BIGINT;
CREATE UNIQUE INDEX units_one_per_run ON units(run) WHERE kind = 'run';
CREATE UNIQUE INDEX units_one_per_sub_epoch ON units(run, epoch, part) WHERE kind = 'sub_epoch';
CREATE INDEX units_by_run ON units(run, seq);
CREATE INDEX units_open_by_rank ON units(lease_rank, id) WHERE state <> 'committed'; -- the lease's scan, in its order, over open units only
"#,
        ),
    },
    Migration {
        version: 8,
        name: "gang ranks (data parallelism)",
        sql: r#"
ALTER TABLE units ADD COLUMN gang INTEGER; -- sub_epoch: the ranks of its data-parallel epoch (part = its rank), or NULL for a hop
ALTER TABLE units ADD COLUMN endpoint TEXT; -- gang rank: `host:port` of its holder's gradient listener (set under the lease)
"#,
        postgres_sql: None,
    },
    Migration {
        version: 9,
        name: "validation confusion counts",
        sql: r#"
ALTER TABLE runs ADD COLUMN confusion TEXT; -- a classifier's validation answers by (true, predicted) class as JSON (easeml_object::Confusion); NULL otherwise and before version 9
"#,
        postgres_sql: None,
    },
    Migration {
        version: 10,
        name: "small blobs in the database",
        sql: r#"
CREATE TABLE blob_bytes ( -- blobs of at most INLINE_BLOB_BYTES, written with the rows that name them (Store::insert_examples)
    sha256 TEXT PRIMARY KEY,
    bytes  BLOB NOT NULL
) WITHOUT ROWID; -- one B-tree keyed by the hash, not a row-id table plus an index of the hashes
"#,
        postgres_sql: Some(
            r#"
CREATE TABLE blob_bytes (
    sha256 TEXT PRIMARY KEY,
    bytes  BYTEA NOT NULL
);
"#,
        ),
    },
    Migration {
        version: 11,
        name: "example counts kept on the app",
        sql: r#"
ALTER TABLE apps ADD COLUMN example_count INTEGER NOT NULL DEFAULT 0; -- the app's examples, kept by insert_examples (status reads it instead of counting)
ALTER TABLE apps ADD COLUMN enabled_count INTEGER NOT NULL DEFAULT 0; -- of them enabled, kept by insert_examples and set_enabled
UPDATE apps SET
    example_count = (SELECT COUNT(*) FROM examples e WHERE e.app = apps.id),
    enabled_count = (SELECT COALESCE(SUM(e.enabled), 0) FROM examples e WHERE e.app = apps.id);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 12,
        name: "out-of-fold predictions and ensembles",
        sql: r#"
ALTER TABLE runs ADD COLUMN oof_sha256 TEXT; -- the blob of the run's validation answers (out-of-fold under k-fold; the engine's format, bounded); NULL when not kept
CREATE TABLE ensembles (
    app            INTEGER NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    data_version   INTEGER NOT NULL,           -- the data version of every member
    members        TEXT NOT NULL,              -- `run:weight` pairs separated by spaces, weights summing to 1
    quality        REAL NOT NULL,              -- the ensemble's quality on its members' validation answers
    single_quality REAL NOT NULL,              -- the best single run's quality on the same answers
    loss           REAL,                       -- a classifier's mean cross-entropy on those answers (ties of quality), else NULL
    single_loss    REAL,                       -- the best single run's, likewise
    validated_examples INTEGER NOT NULL,       -- how many validation answers measured both
    confusion      TEXT,                       -- a classifier's answers by (true, predicted) class as JSON, as runs keep them
    runs_seen      INTEGER NOT NULL,           -- the highest run id the selection looked at
    created_ms     INTEGER NOT NULL,
    PRIMARY KEY (app, data_version)
);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 13,
        name: "runs numbered within their app",
        sql: r#"
ALTER TABLE apps ADD COLUMN runs_made INTEGER NOT NULL DEFAULT 0; -- runs ever made for the app: the last run's number
ALTER TABLE runs ADD COLUMN number INTEGER;                        -- the run's number within its app: 1, 2, ... (what people see)
UPDATE runs SET number = (SELECT COUNT(*) FROM runs AS earlier WHERE earlier.app = runs.app AND earlier.id <= runs.id);
UPDATE apps SET runs_made = (SELECT COALESCE(MAX(number), 0) FROM runs WHERE runs.app = apps.id);
CREATE UNIQUE INDEX runs_app_number ON runs (app, number);
"#,
        postgres_sql: None,
    },
    Migration {
        version: 14,
        name: "small example blobs in the example's row",
        sql: r#"
ALTER TABLE examples ADD COLUMN input_bytes BLOB;  -- the input's encoding when at most INLINE_BLOB_BYTES, else NULL (a blob: input_sha256)
ALTER TABLE examples ADD COLUMN output_bytes BLOB; -- the output's likewise, NULL for a label or a larger output
"#,
        postgres_sql: Some(
            r#"
ALTER TABLE examples ADD COLUMN input_bytes BYTEA;
ALTER TABLE examples ADD COLUMN output_bytes BYTEA;
"#,
        ),
    },
    Migration {
        version: 15,
        name: "examples without a per-row foreign key check on PostgreSQL",
        // PostgreSQL checks a foreign key by a query per inserted row: half of a feed's COPY.
        // The rule it kept holds by the store's own writes instead: a feed inserts under its
        // app's row lock (the app exists until it commits), and `Store::remove_app` removes the
        // app's examples in the transaction that removes the app. SQLite keeps its key (checked
        // in-process, cheap).
        sql: "-- nothing on SQLite",
        postgres_sql: Some("ALTER TABLE examples DROP CONSTRAINT IF EXISTS examples_app_fkey;"),
    },
    Migration {
        version: 16,
        name: "the served model's expected quality",
        sql: r#"
CREATE TABLE estimates (
    app            INTEGER NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    data_version   INTEGER NOT NULL,           -- the data version of the runs it looked at
    ensemble       INTEGER NOT NULL CHECK (ensemble IN (0, 1)), -- 1: it estimates an ensemble's quality, 0: one run's
    quality        REAL NOT NULL,              -- the expected quality on new examples (mean over the resamples)
    low            REAL NOT NULL,              -- the 95% interval: the resamples' 2.5th percentile
    high           REAL NOT NULL,              -- and 97.5th
    resamples      INTEGER NOT NULL,           -- how many resamples measured it
    runs_seen      INTEGER NOT NULL,           -- the highest run id it looked at
    created_ms     INTEGER NOT NULL,
    PRIMARY KEY (app, data_version)
);
"#,
        postgres_sql: None,
    },
];

/// The schema of `sql` (written for SQLite) in PostgreSQL's types: integers are `BIGINT`, an
/// `INTEGER PRIMARY KEY` (SQLite's row id) a `BIGINT` identity, reals `DOUBLE PRECISION`. The one
/// translation rule, so that both engines apply the same migrations.
pub fn postgres_schema(sql: &str) -> String {
    sql.replace(
        "INTEGER PRIMARY KEY",
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    )
    .replace("INTEGER", "BIGINT")
    .replace("REAL", "DOUBLE PRECISION")
}

/// A key for PostgreSQL's advisory lock that serializes migrations (any fixed number: "easeml").
const MIGRATION_LOCK: i64 = 0x6561_7365_6d6c;

/// Brings the database to the newest of `migrations`; returns the version it is at. `place`
/// names the database in errors.
pub(crate) fn migrate(connection: &Db, migrations: &[Migration], place: &Path) -> Result<u32> {
    connection
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version    BIGINT PRIMARY KEY,
                name       TEXT NOT NULL,
                applied_ms BIGINT NOT NULL
            );",
        )
        .map_err(db("creating schema_migrations"))?;
    let known = migrations.last().map_or(0, |migration| migration.version);
    let current = current_version(connection)?;
    if current > known {
        return Err(Error::NewerSchema {
            path: place.to_owned(),
            found: current,
            known,
        });
    }
    for migration in migrations
        .iter()
        .filter(|migration| migration.version > current)
    {
        let context = format!(
            "applying migration {} ({})",
            migration.version, migration.name
        );
        let transaction = connection.transaction().map_err(db(context.clone()))?;
        let sql = match transaction.dialect() {
            Dialect::Sqlite => migration.sql.to_owned(),
            Dialect::Postgres => {
                // One migrating process at a time (SQLite's BEGIN IMMEDIATE does this there).
                transaction
                    .execute("SELECT pg_advisory_xact_lock(?1)", [MIGRATION_LOCK])
                    .map_err(db(context.clone()))?;
                match migration.postgres_sql {
                    Some(sql) => sql.to_owned(),
                    None => postgres_schema(migration.sql),
                }
            }
        };
        // Another process may have applied it meanwhile.
        if current_version(&transaction)? >= migration.version {
            continue;
        }
        transaction
            .execute_batch(&sql)
            .map_err(db(context.clone()))?;
        transaction
            .execute(
                "INSERT INTO schema_migrations (version, name, applied_ms) VALUES (?1, ?2, ?3)",
                params![migration.version, migration.name, now_ms()],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
    }
    current_version(connection)
}

pub(crate) fn current_version(connection: &Db) -> Result<u32> {
    connection
        .query_row("SELECT MAX(version) FROM schema_migrations", (), |row| {
            row.get::<Option<u32>>(0)
        })
        .optional()
        .map(|version| version.flatten().unwrap_or(0))
        .map_err(db("reading the schema version"))
}
