// The store's contract (included by tests/conformance.rs once per backend): atomic batches, label
// maps, data versions, paging, runs, tokens, blobs.

#[test]
fn a_batch_is_stored_whole_or_not_at_all() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("reg", None, None)).unwrap();
    let error = store
        .insert_examples(app.id, &[labelled(1, "x")])
        .unwrap_err();
    assert!(matches!(error, Error::NoLabels(_)), "{error}");
}

#[test]
fn toggling_bumps_the_data_version_only_on_change() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    assert_eq!(store.example_counts(other.id).unwrap(), (0, 0));
    assert!(matches!(
        store.example_counts(AppId(other.id.0 + 100)),
        Err(Error::NoSuchAppId(_))
    ));
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
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
        Blob::Bytes(store.example_bytes(&[&page.items[0]]).unwrap()[0].input.clone()),
        batch[0].input
    );
}

#[test]
fn runs_move_through_their_states() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
        confusion: None,
        oof: None,
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
        // Kept as the engine wrote it (the store never reads it).
        confusion: Some("{\"cells\":[[0,0,3],[1,0,1]]}".into()),
        oof: None,
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
fn the_served_run_follows_the_data_version() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("refined", Some(2), None)).unwrap();
    let report = store
        .insert_examples(app.id, &[labelled(1, "cat"), labelled(2, "dog")])
        .unwrap();
    let plain = RunValidation::default();
    let limits = ConstraintLimits::default();
    let best = |store: &Store| {
        let runs = store.runs(app.id).unwrap();
        best_run(&runs, &limits).map(|run| (run.id, run.data_version))
    };
    let old = finished_run(&mut store, app.id, "forest", (0.99, 1.0, 0.001), &plain);
    let first = report.data_version;
    assert_eq!(best(&store), Some((old, first)));

    // A toggle makes a new data version: the old best serves until a run on it finishes...
    let second = store.set_enabled(app.id, report.ids[0], false).unwrap();
    assert!(second > first);
    let failed = leased_run(&mut store, app.id, "mlp");
    store
        .commit_unit(
            &failed,
            &UnitResult::Failed {
                reason: "diverged",
                cost_seconds: Some(0.1),
                infer_latency_seconds: None,
            },
        )
        .unwrap();
    assert_eq!(best(&store), Some((old, first)), "a failed run serves nothing");
    // ...then the best run on the new data serves, although the old one scored higher (on data
    // that held the disabled example).
    let new = finished_run(&mut store, app.id, "knn", (0.6, 1.0, 0.001), &plain);
    assert_eq!(best(&store), Some((new, second)));
    let better = finished_run(&mut store, app.id, "gbdt", (0.7, 1.0, 0.001), &plain);
    assert_eq!(best(&store), Some((better, second)));

    // A feed does the same; a run on the new data that breaks a constraint is never served, so
    // the newest version with an eligible run keeps serving.
    let third = store
        .insert_examples(app.id, &[labelled(3, "cat")])
        .unwrap()
        .data_version;
    assert!(third > second);
    let slow = finished_run(&mut store, app.id, "vgg16", (0.9, 100.0, 0.001), &plain);
    let runs = store.runs(app.id).unwrap();
    let within = ConstraintLimits {
        train_time: Some(10.0),
        infer_latency: None,
    };
    assert_eq!(best_run(&runs, &within).map(|run| run.id), Some(better));
    assert_eq!(best(&store), Some((slow, third)));
}

#[test]
fn measured_latencies_decide_which_run_is_served() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    let Some((fixture, store)) = open() else {
        return;
    };
    let hash = store.put_blob(b"some tensor bytes").unwrap();
    assert_eq!(store.put_blob(b"some tensor bytes").unwrap(), hash);
    fixture.overwrite_blob(&store, &hash, b"other bytes");
    let error = store.blob(&hash).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("blob {hash} is corrupt: its bytes hash to ")),
        "{error}"
    );
}

#[test]
fn removing_an_app_removes_its_rows() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
fn an_app_removed_while_another_connection_feeds_it_leaves_no_example_behind() {
    // The removal and a stream of feeds race on two connections: each feed is stored whole before
    // the removal or refused after it, and no example outlives its app (on PostgreSQL no foreign
    // key keeps that: the feed's app lock and the removal's order do).
    let Some((fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let mut feeder = fixture.open();
    let stored = std::sync::atomic::AtomicUsize::new(0);
    let refusal = std::thread::scope(|scope| {
        let feeding = scope.spawn(|| {
            // Feeds until refused (a bound so that a removal that never lands cannot hang).
            for batch in 0..100_000u32 {
                let examples: Vec<NewExample> = (0..50u32)
                    .map(|index| labelled((batch * 50 + index) as u8, "cat"))
                    .collect();
                match feeder.insert_examples(app.id, &examples) {
                    Ok(_) => {
                        stored.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(error) => return Some(error.to_string()),
                }
            }
            None
        });
        // Removed once some feeds are in, while the others go on.
        while stored.load(std::sync::atomic::Ordering::SeqCst) < 3 && !feeding.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        store.remove_app(app.id).unwrap();
        feeding.join().unwrap()
    });
    let refusal = refusal.expect("a feed after the removal is refused");
    assert!(refusal.contains(&app.id.0.to_string()), "{refusal}");
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
    let left: i64 = fixture
        .open()
        .example_counts(app.id)
        .map(|(all, _)| all as i64)
        .unwrap_or(0);
    assert_eq!(left, 0);
}

#[test]
fn garbage_collection_keeps_referenced_and_young_blobs() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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
    assert!(store.example_bytes(&[&page.items[0]]).is_ok());
}

#[test]
fn small_example_blobs_live_in_their_rows_and_large_ones_are_blobs_collected_with_the_app() {
    let Some((fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("pets", Some(2), None)).unwrap();
    let small = b"EMX1\x07".to_vec();
    let large = NewExample {
        input: Blob::Bytes(vec![3; easeml_store::INLINE_BLOB_BYTES + 1]),
        output: NewOutput::Label("dog".to_owned()),
    };
    let recovery = NewExample {
        input: Blob::Bytes(b"EMX1 in".to_vec()),
        output: NewOutput::Blob(Blob::Bytes(b"EMX1 out".to_vec())),
    };
    store
        .insert_examples(app.id, &[labelled(7, "cat"), large])
        .unwrap();
    let (other, _) = store.register_app(&new_app("more", None, None)).unwrap();
    store.insert_examples(other.id, &[recovery]).unwrap();
    let page = store.examples(app.id, PageRequest::default()).unwrap();
    let (small_hash, large_hash) = (&page.items[0].input, &page.items[1].input);
    // The small input is in its example's row, read by the example from any connection (not a
    // blob: no file, no blob by its hash); the large one is a blob of the folder or bucket.
    assert!(
        store
            .blob_path(small_hash)
            .is_none_or(|path| !path.exists())
    );
    assert!(store.blob(small_hash).is_err());
    let read = fixture.open();
    let bytes = read
        .example_bytes(&[&page.items[0], &page.items[1]])
        .unwrap();
    assert_eq!(bytes[0].input, small);
    assert_eq!(bytes[0].output, None);
    assert_eq!(bytes[1].input.len(), easeml_store::INLINE_BLOB_BYTES + 1);
    assert_eq!(read.blob(large_hash).unwrap(), bytes[1].input);
    // An output blob is kept the same way.
    let other_page = store.examples(other.id, PageRequest::default()).unwrap();
    assert_eq!(
        read.example_bytes(&[&other_page.items[0]]).unwrap()[0],
        easeml_store::ExampleBytes {
            input: b"EMX1 in".to_vec(),
            output: Some(b"EMX1 out".to_vec()),
        }
    );
    // Removing the app frees its large blob; its rows took the small one with them.
    store.remove_app(app.id).unwrap();
    assert_eq!(
        store.collect_garbage(std::time::Duration::ZERO).unwrap(),
        (1, easeml_store::INLINE_BLOB_BYTES as u64 + 1)
    );
    assert!(store.blob(large_hash).is_err());
    let error = store
        .example_bytes(&[&page.items[0]])
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "example {} is no longer in the store (its app was removed)",
            page.items[0].id.0
        )
    );
}

#[test]
fn a_batch_of_many_statements_keeps_feed_order_and_ids() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("many", Some(2), None)).unwrap();
    // More rows than one INSERT carries, with repeated inputs (shared small blobs).
    let examples: Vec<NewExample> = (0..1234u32)
        .map(|index| NewExample {
            input: Blob::Bytes(format!("EMX1{}", index % 1000).into_bytes()),
            output: NewOutput::Label(if index % 3 == 0 { "a" } else { "b" }.to_owned()),
        })
        .collect();
    let report = store.insert_examples(app.id, &examples).unwrap();
    assert_eq!(report.ids.len(), 1234);
    assert!(report.ids.windows(2).all(|pair| pair[0].0 < pair[1].0));
    assert_eq!(store.example_counts(app.id).unwrap(), (1234, 1234));
    let mut request = PageRequest {
        after: None,
        limit: 500,
    };
    let mut index = 0u32;
    loop {
        let page = store.examples(app.id, request).unwrap();
        let records: Vec<_> = page.items.iter().collect();
        for (record, bytes) in records.iter().zip(store.example_bytes(&records).unwrap()) {
            assert_eq!(record.id, report.ids[index as usize]);
            assert_eq!(bytes.input, format!("EMX1{}", index % 1000).into_bytes());
            index += 1;
        }
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    assert_eq!(index, 1234);
}

#[test]
fn feeds_on_two_connections_at_once_get_distinct_ids_in_each_feeds_order() {
    // Two connections (two server threads, or two processes) feed two apps and one shared app
    // at once, batches larger than one INSERT carries: every id is drawn once, each batch's ids
    // rise in its rows' order, and each app lists its examples in the order they were fed.
    let Some((fixture, mut first)) = open() else {
        return;
    };
    let (shared, _) = first.register_app(&new_app("shared", Some(2), None)).unwrap();
    let mut apps = Vec::new();
    for name in ["left", "right"] {
        apps.push(first.register_app(&new_app(name, Some(2), None)).unwrap().0.id);
    }
    let feed = |store: &mut Store, own: AppId, side: u32| {
        let mut reports = Vec::new();
        for batch in 0..4u32 {
            for app in [own, shared.id] {
                let examples: Vec<NewExample> = (0..700u32)
                    .map(|index| NewExample {
                        input: Blob::Bytes(format!("EMX1 {side} {batch} {index}").into_bytes()),
                        output: NewOutput::Label("a".to_owned()),
                    })
                    .collect();
                let report = store.insert_examples(app, &examples).unwrap();
                reports.push((app, format!("EMX1 {side} {batch} "), report.ids));
            }
        }
        reports
    };
    let mut second = fixture.open();
    let (left, right) = std::thread::scope(|scope| {
        let left = scope.spawn(|| feed(&mut first, apps[0], 0));
        let right = scope.spawn(|| feed(&mut second, apps[1], 1));
        (left.join().unwrap(), right.join().unwrap())
    });
    let store = fixture.open();
    let mut every_id = std::collections::BTreeSet::new();
    let mut fed: std::collections::HashMap<i64, (AppId, Vec<u8>)> = Default::default();
    for (app, prefix, ids) in left.iter().chain(&right) {
        assert_eq!(ids.len(), 700);
        assert!(ids.windows(2).all(|pair| pair[0].0 < pair[1].0), "{ids:?}");
        for (index, id) in ids.iter().enumerate() {
            assert!(every_id.insert(id.0), "id {} drawn twice", id.0);
            fed.insert(id.0, (*app, format!("{prefix}{index}").into_bytes()));
        }
    }
    for app in [apps[0], apps[1], shared.id] {
        let page = store
            .examples(
                app,
                PageRequest {
                    after: None,
                    limit: 10_000,
                },
            )
            .unwrap();
        let records: Vec<_> = page.items.iter().collect();
        let expected = if app == shared.id { 5600 } else { 2800 };
        assert_eq!(records.len(), expected);
        assert!(records.windows(2).all(|pair| pair[0].id.0 < pair[1].id.0));
        for (record, bytes) in records.iter().zip(store.example_bytes(&records).unwrap()) {
            let (fed_app, input) = &fed[&record.id.0];
            assert_eq!(*fed_app, app);
            assert_eq!(&bytes.input, input);
        }
        assert_eq!(
            store.example_counts(app).unwrap(),
            (expected as u64, expected as u64)
        );
    }
}

#[test]
fn a_batch_may_name_blobs_written_before() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
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

#[test]
fn many_examples_bytes_read_at_once_as_one_by_one_in_order_and_checked() {
    let Some((fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("blobs", Some(3), None)).unwrap();
    // More than one query's worth, a large one kept outside the rows, and one example named
    // twice.
    let mut examples: Vec<NewExample> = (0..1_100u32)
        .map(|i| NewExample {
            input: Blob::Bytes(i.to_le_bytes().to_vec()),
            output: NewOutput::Label("a".to_owned()),
        })
        .collect();
    examples.push(NewExample {
        input: Blob::Bytes(vec![7; 40_000]),
        output: NewOutput::Label("a".to_owned()),
    });
    store.insert_examples(app.id, &examples).unwrap();
    let records = store
        .examples(app.id, PageRequest { after: None, limit: 2_000 })
        .unwrap()
        .items;
    let mut named: Vec<&easeml_store::ExampleRecord> = records.iter().collect();
    named.push(&records[3]);
    let many = store.example_bytes(&named).unwrap();
    assert_eq!(many.len(), named.len());
    for (record, bytes) in named.iter().zip(&many) {
        assert_eq!(bytes, &store.example_bytes(&[record]).unwrap()[0]);
    }
    assert_eq!(many[1_101].input, 3u32.to_le_bytes());
    assert_eq!(many[1_100].input.len(), 40_000);
    // A damaged blob (the large one, outside the rows) is refused, alone or among others.
    let damaged = records[1_100].input.clone();
    fixture.overwrite_blob(&store, &damaged, b"not the bytes");
    assert!(store.blob(&damaged).is_err());
    let error = store
        .example_bytes(&[&records[0], &records[1_100]])
        .unwrap_err()
        .to_string();
    assert!(error.starts_with(&format!("blob {damaged} is corrupt")), "{error}");
}
