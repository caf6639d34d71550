//! The store's contract: migrations, atomic batches, label maps, data versions, paging, runs, blobs.

use std::time::Duration;

use easeml_store::{
    AppId, Blob, BlobHash, ConstraintLimits, Error, ExampleId, Lease, MIGRATIONS, NewApp,
    NewExample, NewOutput, PageRequest, RunId, RunState, RunValidation, Store, StoreOptions,
    StoredOutput, UnitResult, best_run, broken_constraints,
};

fn new_app(name: &str, label_capacity: Option<u64>, declared: Option<&[&str]>) -> NewApp {
    NewApp {
        name: name.to_owned(),
        manifest: format!("{{\"app\": \"{name}\"}}"),
        system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[3]], []}}".to_owned(),
        label_capacity,
        declared_labels: declared.map(|labels| labels.iter().map(|l| l.to_string()).collect()),
    }
}

fn labelled(input: u8, label: &str) -> NewExample {
    NewExample {
        input: Blob::Bytes(vec![b'E', b'M', b'X', b'1', input]),
        output: NewOutput::Label(label.to_owned()),
    }
}

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("home")).unwrap();
    (dir, store)
}

/// A run of `candidate`, queued as a unit and leased: running, as a worker has it.
fn leased_run(store: &mut Store, app: AppId, candidate: &str) -> Lease {
    let (_, unit) = store.queue_unit(app, candidate, "{}").unwrap();
    store
        .lease_unit_by_id(unit, "worker:test", Duration::from_secs(60))
        .unwrap()
        .unwrap()
}

/// A run of `candidate` taken through the unit protocol to a finished commit.
fn finished_run(
    store: &mut Store,
    app: AppId,
    candidate: &str,
    (quality, cost_seconds, latency): (f64, f64, f64),
    validation: &RunValidation,
) -> RunId {
    let lease = leased_run(store, app, candidate);
    let checkpoint = store.put_blob(candidate.as_bytes()).unwrap();
    store
        .commit_unit(
            &lease,
            &finished(&checkpoint, validation, quality, cost_seconds, latency),
        )
        .unwrap();
    lease.run
}

fn finished<'a>(
    checkpoint: &'a BlobHash,
    validation: &'a RunValidation,
    quality: f64,
    cost_seconds: f64,
    infer_latency_seconds: f64,
) -> UnitResult<'a> {
    UnitResult::Finished {
        quality,
        cost_seconds,
        checkpoint,
        validation,
        infer_latency_seconds,
        trials: None,
    }
}

fn total(store: &Store, app: AppId) -> u64 {
    store.examples(app, PageRequest::default()).unwrap().total
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
    old.insert_examples(app.id, &[labelled(1, "cat"), labelled(2, "dog")])
        .unwrap();
    drop(old);

    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as u32);
    assert_eq!(total(&store, app.id), 2);
    assert_eq!(store.app(app.id).unwrap().data_version, 1);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn runs_of_a_store_from_before_run_validation_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    // A store of the build before migration 3 (no `protocol`, `quality_std`) with a finished run,
    // written with that build's columns.
    let before = MIGRATIONS
        .iter()
        .position(|migration| migration.name == "run validation")
        .unwrap();
    let mut old =
        Store::open_migrated(dir.path(), &StoreOptions::default(), &MIGRATIONS[..before]).unwrap();
    assert_eq!(old.schema_version().unwrap(), before as u32);
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
    });
    let store = Store::open_migrated(home, &StoreOptions::default(), &newer).unwrap();
    format!("version {}", store.schema_version().unwrap())
}

#[test]
fn a_batch_is_stored_whole_or_not_at_all() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    // The third distinct label does not fit an output [2]: the whole batch is refused.
    let batch = [
        labelled(1, "cat"),
        labelled(2, "dog"),
        labelled(3, "bird"),
        labelled(4, "cat"),
    ];
    let error = store.insert_examples(app.id, &batch).unwrap_err();
    assert_eq!(
        error.to_string(),
        "app `pets`: label `bird` would be label number 3, but the output [2] holds at most 2; the labels so far are: cat, dog"
    );
    assert_eq!(total(&store, app.id), 0);
    assert_eq!(store.app(app.id).unwrap().data_version, 0);
    assert_eq!(
        store.label_map(app.id).unwrap().unwrap().labels,
        Vec::<String>::new()
    );

    let report = store
        .insert_examples(
            app.id,
            &[labelled(1, "dog"), labelled(2, "cat"), labelled(3, "dog")],
        )
        .unwrap();
    assert_eq!(report.ids.len(), 3);
    assert_eq!(report.data_version, 1);
    assert_eq!(
        report.new_labels,
        vec![("dog".to_owned(), 0), ("cat".to_owned(), 1)]
    );
    let page = store.examples(app.id, PageRequest::default()).unwrap();
    let labels: Vec<(u32, &str)> = page
        .items
        .iter()
        .map(|item| match &item.output {
            StoredOutput::Label { index, name } => (*index, name.as_str()),
            StoredOutput::Blob(_) => panic!("a label was expected"),
        })
        .collect();
    assert_eq!(labels, [(0, "dog"), (1, "cat"), (0, "dog")]);
    // A later batch keeps the first-seen order and the limit.
    let error = store
        .insert_examples(app.id, &[labelled(9, "fish")])
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("label `fish` would be label number 3")
    );
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn declared_labels_are_fixed_and_ordered() {
    let (_dir, mut store) = open();
    let (app, _) = store
        .register_app(&new_app("zoo", Some(3), Some(&["dog", "cat", "sea lion"])))
        .unwrap();
    let report = store
        .insert_examples(app.id, &[labelled(1, "sea lion")])
        .unwrap();
    assert!(report.new_labels.is_empty());
    assert_eq!(
        store.example(app.id, report.ids[0]).unwrap().output,
        StoredOutput::Label {
            index: 2,
            name: "sea lion".to_owned()
        }
    );
    let error = store
        .insert_examples(app.id, &[labelled(1, "horse")])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "app `zoo`: unknown label `horse`; the declared labels are: dog, cat, sea lion"
    );
}

#[test]
fn labels_need_a_label_map() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("reg", None, None)).unwrap();
    let error = store
        .insert_examples(app.id, &[labelled(1, "x")])
        .unwrap_err();
    assert!(matches!(error, Error::NoLabels(_)), "{error}");
}

#[test]
fn toggling_bumps_the_data_version_only_on_change() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let (other, _) = store
        .register_app(&new_app("other", Some(2), None))
        .unwrap();
    let ids = store
        .insert_examples(app.id, &[labelled(1, "cat"), labelled(2, "dog")])
        .unwrap()
        .ids;
    assert_eq!(store.app(app.id).unwrap().data_version, 1);
    assert_eq!(store.set_enabled(app.id, ids[0], false).unwrap(), 2);
    assert_eq!(store.set_enabled(app.id, ids[0], false).unwrap(), 2);
    assert_eq!(store.set_enabled(app.id, ids[0], true).unwrap(), 3);
    assert_eq!(store.example_counts(app.id).unwrap(), (2, 2));
    store.set_enabled(app.id, ids[1], false).unwrap();
    assert_eq!(store.example_counts(app.id).unwrap(), (2, 1));
    assert!(!store.example(app.id, ids[1]).unwrap().enabled);
    // Another app cannot see or toggle these examples.
    let error = store.set_enabled(other.id, ids[0], false).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("app `other` has no example {}", ids[0].0)
    );
    assert_eq!(store.app(other.id).unwrap().data_version, 0);
    let error = store
        .set_enabled(app.id, ExampleId(999_999), true)
        .unwrap_err();
    assert_eq!(error.to_string(), "app `pets` has no example 999999");
}

#[test]
fn examples_are_listed_page_by_page() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let (other, _) = store
        .register_app(&new_app("other", Some(2), None))
        .unwrap();
    let batch: Vec<NewExample> = (0..25).map(|i| labelled(i, "cat")).collect();
    store.insert_examples(other.id, &batch[..3]).unwrap();
    let ids = store.insert_examples(app.id, &batch).unwrap().ids;
    let mut request = PageRequest {
        after: None,
        limit: 10,
    };
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.examples(app.id, request).unwrap();
        assert_eq!(page.total, 25);
        pages += 1;
        seen.extend(page.items.iter().map(|item| item.id));
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids);
    // Identical inputs share one blob file.
    let page = store
        .examples(
            app.id,
            PageRequest {
                after: None,
                limit: 1,
            },
        )
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(
        Blob::Bytes(store.blob(&page.items[0].input).unwrap()),
        batch[0].input
    );
}

#[test]
fn runs_move_through_their_states() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let lease = leased_run(&mut store, app.id, "resnet18");
    assert_eq!(store.run(lease.run).unwrap().state, RunState::Running);
    let checkpoint = store.put_blob(b"weights").unwrap();
    let plain = RunValidation::default();
    // A commit's values are checked before anything is written.
    let error = store
        .commit_unit(&lease, &finished(&checkpoint, &plain, 1.5, 1.0, 0.0))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("run {}: quality 1.5 is outside [0, 1]", lease.run.0)
    );
    let bad_spread = RunValidation {
        protocol: Some("5-fold".into()),
        quality_std: Some(f64::NAN),
        validated_examples: None,
    };
    let error = store
        .commit_unit(&lease, &finished(&checkpoint, &bad_spread, 0.5, 1.0, 0.0))
        .unwrap_err();
    assert!(
        error.to_string().contains("standard deviation NaN"),
        "{error}"
    );
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let error = store
            .commit_unit(&lease, &finished(&checkpoint, &plain, 0.5, 1.0, bad))
            .unwrap_err();
        assert!(
            error.to_string().contains("is not a non-negative number"),
            "{error}"
        );
    }
    assert_eq!(store.run(lease.run).unwrap().state, RunState::Running);
    let validation = RunValidation {
        protocol: Some("5-fold stratified".into()),
        quality_std: Some(0.05),
        validated_examples: None,
    };
    store
        .commit_unit(
            &lease,
            &finished(&checkpoint, &validation, 0.75, 12.5, 0.002),
        )
        .unwrap();
    let record = store.run(lease.run).unwrap();
    assert_eq!(record.state, RunState::Done);
    assert_eq!(record.quality, Some(0.75));
    assert_eq!(record.cost_seconds, Some(12.5));
    assert_eq!(record.infer_latency_seconds, Some(0.002));
    assert_eq!(record.validation, validation);
    assert_eq!(record.checkpoint, Some(checkpoint));
    assert!(record.finished_ms.is_some());

    // A failed run keeps a latency measured before it failed.
    let lease = leased_run(&mut store, app.id, "nin");
    store
        .commit_unit(
            &lease,
            &UnitResult::Failed {
                reason: "too slow",
                cost_seconds: Some(0.1),
                infer_latency_seconds: Some(0.5),
            },
        )
        .unwrap();
    let record = store.run(lease.run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert_eq!(record.infer_latency_seconds, Some(0.5));
    assert_eq!(record.error.as_deref(), Some("too slow"));
    assert_eq!(store.runs(app.id).unwrap().len(), 2);
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
fn measured_latencies_decide_which_run_is_served() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let plain = RunValidation::default();
    let slow = finished_run(&mut store, app.id, "vgg16", (0.9, 10.0, 0.050), &plain);
    let fast = finished_run(&mut store, app.id, "small_cnn", (0.8, 10.0, 0.002), &plain);
    let long = finished_run(&mut store, app.id, "resnet50", (0.95, 100.0, 0.004), &plain);
    assert_eq!(store.run(slow).unwrap().infer_latency_seconds, Some(0.050));
    let runs = store.runs(app.id).unwrap();
    let best = |limits: &ConstraintLimits| best_run(&runs, limits).map(|run| run.id);
    assert_eq!(best(&ConstraintLimits::default()), Some(long));
    let latency = ConstraintLimits {
        train_time: None,
        infer_latency: Some(0.020),
    };
    assert_eq!(best(&latency), Some(long));
    let both = ConstraintLimits {
        train_time: Some(60.0),
        infer_latency: Some(0.020),
    };
    assert_eq!(best(&both), Some(fast));
    let broken: Vec<String> = [slow, fast, long]
        .iter()
        .map(|id| {
            let run = runs.iter().find(|run| run.id == *id).unwrap();
            broken_constraints(run, &both)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    assert_eq!(
        broken,
        [
            "infer_latency 50.00 ms > 20.00 ms",
            "",
            "train_time 100.0 s > 60.0 s"
        ]
    );
    // At the limit is within it.
    let exact = ConstraintLimits {
        train_time: None,
        infer_latency: Some(0.050),
    };
    assert_eq!(best(&exact), Some(long));
    assert!(broken_constraints(&runs[0], &exact).is_empty());
}

#[test]
fn a_run_keeps_its_trials_as_text() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let lease = leased_run(&mut store, app.id, "mlp_small");
    let checkpoint = store.put_blob(b"weights").unwrap();
    let validation = RunValidation::default();
    let with_trials = |trials| UnitResult::Finished {
        quality: 0.5,
        cost_seconds: 1.0,
        checkpoint: &checkpoint,
        validation: &validation,
        infer_latency_seconds: 0.0,
        trials: Some(trials),
    };
    let too_long = "x".repeat(easeml_store::MAX_TRIALS_BYTES + 1);
    let error = store
        .commit_unit(&lease, &with_trials(&too_long))
        .unwrap_err();
    assert!(error.to_string().contains("more than the"), "{error}");
    assert_eq!(store.run(lease.run).unwrap().trials, None);
    let json = r#"[{"learning_rate":0.001}]"#;
    store.commit_unit(&lease, &with_trials(json)).unwrap();
    assert_eq!(store.run(lease.run).unwrap().trials.as_deref(), Some(json));
}

#[test]
fn tokens_are_checked_by_hash() {
    let (_dir, mut store) = open();
    let (app, token) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let (other, other_token) = store
        .register_app(&new_app("other", Some(2), None))
        .unwrap();
    assert_eq!(token.len(), 64);
    assert!(store.verify_token(app.id, &token).unwrap());
    assert!(!store.verify_token(app.id, &other_token).unwrap());
    assert!(!store.verify_token(other.id, &token).unwrap());
    assert!(!store.verify_token(app.id, "").unwrap());
    let error = store
        .register_app(&new_app("pets", None, None))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "an app named `pets` is already registered"
    );
}

#[test]
fn corrupt_blobs_are_detected() {
    let (_dir, store) = open();
    let hash = store.put_blob(b"some tensor bytes").unwrap();
    assert_eq!(store.put_blob(b"some tensor bytes").unwrap(), hash);
    std::fs::write(store.blob_path(&hash), b"other bytes").unwrap();
    let error = store.blob(&hash).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("blob {hash} is corrupt: its bytes hash to ")),
        "{error}"
    );
}

#[test]
fn removing_an_app_removes_its_rows() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    store
        .insert_examples(app.id, &[labelled(1, "cat")])
        .unwrap();
    store.queue_unit(app.id, "resnet18", "{}").unwrap();
    store.remove_app(app.id).unwrap();
    assert!(store.app_by_name("pets").unwrap().is_none());
    assert_eq!(store.apps().unwrap().len(), 0);
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
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
fn garbage_collection_keeps_referenced_and_young_blobs() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    store
        .insert_examples(app.id, &[labelled(1, "cat")])
        .unwrap();
    let run = finished_run(
        &mut store,
        app.id,
        "resnet18",
        (0.5, 1.0, 0.0),
        &RunValidation::default(),
    );
    let checkpoint = store.run(run).unwrap().checkpoint.unwrap();
    let orphan = store.put_blob(b"left by a failed batch").unwrap();
    // Young blobs are kept.
    assert_eq!(
        store
            .collect_garbage(std::time::Duration::from_secs(3600))
            .unwrap(),
        (0, 0)
    );
    assert_eq!(
        store.collect_garbage(std::time::Duration::ZERO).unwrap(),
        (1, b"left by a failed batch".len() as u64)
    );
    assert!(store.blob(&orphan).is_err());
    assert_eq!(store.blob(&checkpoint).unwrap(), b"resnet18");
    let page = store.examples(app.id, PageRequest::default()).unwrap();
    assert!(store.blob(&page.items[0].input).is_ok());
}

#[test]
fn a_batch_may_name_blobs_written_before() {
    let (_dir, mut store) = open();
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let written = store.put_blob(b"EMX1 early").unwrap();
    let example = NewExample {
        input: Blob::Stored(written.clone()),
        output: NewOutput::Label("cat".to_owned()),
    };
    let ids = store.insert_examples(app.id, &[example]).unwrap().ids;
    assert_eq!(store.example(app.id, ids[0]).unwrap().input, written);
    let missing = easeml_store::BlobHash::of(b"never written");
    let example = NewExample {
        input: Blob::Stored(missing.clone()),
        output: NewOutput::Label("cat".to_owned()),
    };
    let error = store.insert_examples(app.id, &[example]).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("blob {missing} is not in the store")
    );
    assert_eq!(total(&store, app.id), 1);
}
