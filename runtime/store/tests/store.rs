//! What only the SQLite store has: the database file in WAL mode, upgrades of stores written by
//! older builds (rows written with their columns), durability settings. Everything else runs
//! against both backends in `tests/conformance.rs`.

use std::time::Duration;

use easeml_store::{
    ConstraintLimits, Error, MIGRATIONS, RunId, RunState, RunValidation, Store, StoreOptions,
    UnitId, UnitState, best_run,
};

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("home")).unwrap();
    (dir, store)
}

/// The helpers the conformance suite uses (not every one is needed here).
#[allow(dead_code)]
mod helpers {
    use std::time::Duration;

    use easeml_store::{
        AppId, Blob, BlobHash, Lease, NewApp, NewExample, NewOutput, PageRequest, RunId,
        RunValidation, Store, UnitResult,
    };

    include!("conformance/helpers.rs");
}

use helpers::{finished_run, labelled, new_app, total};

/// A store at `home` as the builds before migration `version` left it (every earlier migration
/// applied, none from `version` on).
fn store_before(home: &std::path::Path, version: u32) -> Store {
    let before = MIGRATIONS
        .iter()
        .position(|migration| migration.version == version)
        .unwrap();
    Store::open_migrated(home, &StoreOptions::default(), &MIGRATIONS[..before]).unwrap()
}

#[test]
fn a_fresh_store_is_migrated_in_wal_mode_and_sound() {
    let (dir, store) = open();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
    assert!(dir.path().join("home/easeml.sqlite3").exists());
    assert!(dir.path().join("home/easeml.sqlite3-wal").exists());
    assert!(dir.path().join("home/blobs/tmp").is_dir());
    // Opening again applies nothing and keeps the version.
    drop(store);
    let store = Store::open(dir.path().join("home")).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
}

#[test]
fn an_existing_store_is_upgraded_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut old =
        Store::open_migrated(dir.path(), &StoreOptions::default(), &MIGRATIONS[..1]).unwrap();
    assert_eq!(old.schema_version().unwrap(), 1);
    let (app, _) = old.register_app(&new_app("old", Some(3), None)).unwrap();
    // Stores of older builds keep every blob in the blob folder (no `blob_bytes` table yet); the
    // rows are written with that build's columns.
    let hashes: Vec<_> = [1u8, 2]
        .iter()
        .map(|input| old.put_blob(&[b'E', b'M', b'X', b'1', *input]).unwrap())
        .collect();
    drop(old);
    let connection = rusqlite::Connection::open(dir.path().join("easeml.sqlite3")).unwrap();
    for (index, (hash, label)) in hashes.iter().zip(["cat", "dog"]).enumerate() {
        connection
            .execute(
                "INSERT INTO examples (app, input_sha256, label_index, enabled, data_version, created_ms) \
                 VALUES (?1, ?2, ?3, 1, 1, 0)",
                rusqlite::params![app.id.0, hash.as_str(), index as i64],
            )
            .unwrap();
        connection
            .execute(
                "INSERT INTO label_maps (app, label, label_index) VALUES (?1, ?2, ?3)",
                rusqlite::params![app.id.0, label, index as i64],
            )
            .unwrap();
    }
    connection
        .execute("UPDATE apps SET data_version = 1 WHERE id = ?1", [app.id.0])
        .unwrap();
    drop(connection);

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    assert_eq!(total(&store, app.id), 2);
    // The counts kept on the app's row start from the examples the old store had.
    assert_eq!(store.example_counts(app.id).unwrap(), (2, 2));
    let page = store
        .examples(app.id, easeml_store::PageRequest::default())
        .unwrap();
    let records: Vec<_> = page.items.iter().collect();
    let bytes = store.example_bytes(&records).unwrap();
    for ((record, bytes), input) in records.iter().zip(bytes).zip([1u8, 2]) {
        let expected = b"EMX1".iter().chain(&[input]).copied().collect::<Vec<_>>();
        assert_eq!(bytes.input, expected);
        assert_eq!(store.blob(&record.input).unwrap(), expected);
        assert!(store.blob_path(&record.input).unwrap().is_file());
    }
    assert_eq!(store.app(app.id).unwrap().data_version, 1);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn small_blobs_of_a_store_from_before_blobs_in_rows_stay_readable_and_kept() {
    // A store of the builds between migrations 10 and 14: small inputs and outputs in the table
    // `blob_bytes`, keyed by their hash, the rows naming them (that build's columns).
    let dir = tempfile::tempdir().unwrap();
    let mut old = store_before(dir.path(), 14);
    let (app, _) = old.register_app(&new_app("old", None, None)).unwrap();
    drop(old);
    let (input, output) = (b"EMX1 small input".to_vec(), b"EMX1 small output".to_vec());
    let (input_hash, output_hash) = (
        easeml_store::BlobHash::of(&input),
        easeml_store::BlobHash::of(&output),
    );
    let connection = rusqlite::Connection::open(dir.path().join("easeml.sqlite3")).unwrap();
    for (hash, bytes) in [(&input_hash, &input), (&output_hash, &output)] {
        connection
            .execute(
                "INSERT INTO blob_bytes (sha256, bytes) VALUES (?1, ?2)",
                rusqlite::params![hash.as_str(), bytes],
            )
            .unwrap();
    }
    connection
        .execute(
            "INSERT INTO examples (app, input_sha256, output_sha256, enabled, data_version, created_ms) \
             VALUES (?1, ?2, ?3, 1, 1, 0)",
            rusqlite::params![app.id.0, input_hash.as_str(), output_hash.as_str()],
        )
        .unwrap();
    drop(connection);

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    let page = store
        .examples(app.id, easeml_store::PageRequest::default())
        .unwrap();
    let expected = easeml_store::ExampleBytes {
        input: input.clone(),
        output: Some(output.clone()),
    };
    assert_eq!(
        store.example_bytes(&[&page.items[0]]).unwrap(),
        vec![expected.clone()]
    );
    // Still referenced: the garbage collection keeps them.
    assert_eq!(store.collect_garbage(Duration::ZERO).unwrap(), (0, 0));
    assert_eq!(
        store.example_bytes(&[&page.items[0]]).unwrap(),
        vec![expected]
    );
}

#[test]
fn runs_of_a_store_from_before_run_validation_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    // A store of the build before migration 3 (no `protocol`, `quality_std`) with a finished run,
    // written with that build's columns.
    let mut old = store_before(dir.path(), 3);
    assert_eq!(old.schema_version().unwrap(), 2);
    let (app, _) = old.register_app(&new_app("old", Some(3), None)).unwrap();
    drop(old);
    let connection = rusqlite::Connection::open(dir.path().join("easeml.sqlite3")).unwrap();
    connection
        .execute(
            "INSERT INTO runs (app, candidate, state, data_version, quality, cost_seconds, queued_ms) \
             VALUES (?1, 'mlp_small', 'done', 0, 1.0, 2.5, 0)",
            [app.id.0],
        )
        .unwrap();
    drop(connection);

    let mut store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    let runs = store.runs(app.id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].quality, Some(1.0));
    assert_eq!(runs[0].validation, RunValidation::default());
    // New runs record how they were validated.
    let validation = RunValidation {
        protocol: Some("split 20%".into()),
        quality_std: None,
        validated_examples: None,
        confusion: None,
        oof: None,
    };
    let run = finished_run(&mut store, app.id, "logistic", (0.5, 1.0, 0.0), &validation);
    assert_eq!(store.run(run).unwrap().validation, validation);
    // Runs from before migration 4 have no measured latency, so they are not known to break an
    // `infer_latency` limit: the old best keeps serving.
    assert_eq!(runs[0].infer_latency_seconds, None);
    let limits = ConstraintLimits {
        train_time: None,
        infer_latency: Some(0.001),
    };
    let runs = store.runs(app.id).unwrap();
    assert_eq!(best_run(&runs, &limits).map(|run| run.id), Some(runs[0].id));
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn a_store_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let migrated = migrate_to_version_99(dir.path());
    let error = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "has schema version 99, newer than this build's {}; upgrade easeml",
            MIGRATIONS.len()
        )),
        "{error} / {migrated}"
    );
}

/// Marks the store as migrated to version 99 through a store of a "newer build": a migration list
/// whose last entry is 99.
fn migrate_to_version_99(home: &std::path::Path) -> String {
    let mut newer: Vec<easeml_store::Migration> = MIGRATIONS.to_vec();
    newer.push(easeml_store::Migration {
        version: 99,
        name: "from the future",
        sql: "CREATE TABLE future (x INTEGER);",
        postgres_sql: None,
    });
    let store = Store::open_migrated(home, &StoreOptions::default(), &newer).unwrap();
    format!("version {}", store.schema_version().unwrap())
}

#[test]
fn a_running_run_without_a_unit_from_an_older_store_is_requeued_or_failed() {
    let (dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    // Before migration 6 a run had no unit; a killed engine left this one running.
    let connection = rusqlite::Connection::open(dir.path().join("home/easeml.sqlite3")).unwrap();
    connection
        .execute(
            "INSERT INTO runs (app, candidate, state, data_version, queued_ms, started_ms) \
             VALUES (?1, 'vgg16', 'running', 0, 0, 0)",
            [app.id.0],
        )
        .unwrap();
    let interrupted = RunId(connection.last_insert_rowid());
    drop(connection);
    assert_eq!(store.requeue_interrupted().unwrap(), 1);
    assert_eq!(store.run(interrupted).unwrap().state, RunState::Queued);
    assert_eq!(store.queued_runs_without_unit().unwrap(), [interrupted]);
    store.fail_run(interrupted, "out of memory", None).unwrap();
    let record = store.run(interrupted).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert_eq!(record.error.as_deref(), Some("out of memory"));
    assert!(matches!(
        store.fail_run(RunId(999), "gone", None),
        Err(Error::NoSuchRun(999))
    ));
}

#[test]
fn full_durability_stores_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        durability: easeml_store::Durability::Full,
    };
    let mut store = Store::open_with(dir.path(), &options).unwrap();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let report = store
        .insert_examples(app.id, &[labelled(1, "cat"), labelled(2, "dog")])
        .unwrap();
    assert_eq!(report.ids.len(), 2);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn a_queued_run_without_a_unit_gets_one_once() {
    let (dir, mut store) = open();
    let (app, _) = store
        .register_app(&new_app("units", Some(3), None))
        .unwrap();
    let app = app.id;
    // Before migration 6 a run was queued without a unit.
    let connection = rusqlite::Connection::open(dir.path().join("home/easeml.sqlite3")).unwrap();
    connection
        .execute(
            "INSERT INTO runs (app, candidate, state, data_version, queued_ms) \
             VALUES (?1, 'a', 'queued', 0, 0)",
            [app.0],
        )
        .unwrap();
    let run = easeml_store::RunId(connection.last_insert_rowid());
    drop(connection);
    assert_eq!(store.queued_runs_without_unit().unwrap(), [run]);
    let unit = store.queue_unit_for_run(run, "{}").unwrap().unwrap();
    assert_eq!(store.queue_unit_for_run(run, "{}").unwrap(), None);
    assert_eq!(store.unit_of_run(run).unwrap().unwrap().id, unit);
    let lease = store
        .lease_unit("w", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(lease.run, run);
}

#[test]
fn units_of_a_store_from_before_sub_epochs_are_kept_and_leased_again() {
    let dir = tempfile::tempdir().unwrap();
    // A store of the build before migration 7 (units were whole runs only) with a unit whose
    // worker died holding it, written with that build's columns.
    let mut old = store_before(dir.path(), 7);
    let (app, _) = old.register_app(&new_app("old", Some(3), None)).unwrap();
    drop(old);
    let connection = rusqlite::Connection::open(dir.path().join("easeml.sqlite3")).unwrap();
    connection
        .execute(
            "INSERT INTO runs (id, app, candidate, state, data_version, queued_ms, started_ms) \
             VALUES (7, ?1, 'mlp_small', 'running', 1, 0, 1)",
            [app.id.0],
        )
        .unwrap();
    connection
        .execute(
            "INSERT INTO units (id, run, kind, spec, state, attempt, losses, lease_owner, lease_expires_ms, created_ms) \
             VALUES (3, 7, 'run', '{\"max_seconds\": 5}', 'leased', 1, 0, 'worker:dead', 10, 0)",
            [],
        )
        .unwrap();
    drop(connection);

    let mut store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    let units = store.open_units().unwrap();
    assert_eq!(units.len(), 1);
    assert_eq!((units[0].id, units[0].run), (UnitId(3), RunId(7)));
    assert_eq!((units[0].state, units[0].attempt), (UnitState::Leased, 1));
    // Its lease expired with its worker: the next worker takes it over, as before the migration.
    let lease = store
        .lease_unit("worker:next", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.unit, lease.run, lease.attempt),
        (UnitId(3), RunId(7), 2)
    );
    assert_eq!(lease.spec, "{\"max_seconds\": 5}");
    assert_eq!(store.unit(UnitId(3)).unwrap().losses, 1);
    // Still one whole-run unit per run.
    assert!(store.queue_unit_for_run(RunId(7), "{}").unwrap().is_none());
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn a_database_name_that_is_not_a_plain_identifier_is_refused_before_any_server_is_asked() {
    for name in ["", "1st", "x; DROP DATABASE y", "naïve", &"n".repeat(64)] {
        let error = easeml_store::create_database("postgres://nobody@127.0.0.1:1", name)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not a plain database name"),
            "{name}: {error}"
        );
    }
    // A plain name gets as far as the server (none listens there).
    let error = easeml_store::create_database("postgres://nobody@127.0.0.1:1", "fine_name_2")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("creating the database fine_name_2"),
        "{error}"
    );
}

#[test]
fn runs_of_a_store_from_before_run_numbers_are_numbered_within_their_app() {
    let dir = tempfile::tempdir().unwrap();
    // A store of the build before migration 13 (runs known by their store-wide id only), with
    // runs of two apps interleaved, written with that build's columns.
    let mut old = store_before(dir.path(), 13);
    let (first, _) = old.register_app(&new_app("first", Some(3), None)).unwrap();
    let (second, _) = old.register_app(&new_app("second", Some(3), None)).unwrap();
    drop(old);
    let connection = rusqlite::Connection::open(dir.path().join("easeml.sqlite3")).unwrap();
    for (id, app) in [(4, first.id), (5, second.id), (9, first.id), (12, first.id)] {
        connection
            .execute(
                "INSERT INTO runs (id, app, candidate, state, data_version, queued_ms) \
                 VALUES (?1, ?2, 'knn', 'done', 1, 0)",
                [id, app.0],
            )
            .unwrap();
    }
    drop(connection);

    let mut store = Store::open(dir.path()).unwrap();
    let numbers = |store: &Store, app| -> Vec<(i64, u64)> {
        store
            .runs(app)
            .unwrap()
            .iter()
            .map(|run| (run.id.0, run.number))
            .collect()
    };
    assert_eq!(numbers(&store, first.id), [(4, 1), (9, 2), (12, 3)]);
    assert_eq!(numbers(&store, second.id), [(5, 1)]);
    // New runs count on from there.
    let (run, _) = store.queue_unit(first.id, "gbdt", "{}").unwrap();
    assert_eq!(store.run(run).unwrap().number, 4);
    let (run, _) = store.queue_unit(second.id, "gbdt", "{}").unwrap();
    assert_eq!(store.run(run).unwrap().number, 2);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}
