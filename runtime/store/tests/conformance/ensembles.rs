// Out-of-fold answers and ensembles (included by tests/conformance.rs once per backend).

fn with_oof(store: &Store, bytes: &[u8]) -> RunValidation {
    RunValidation {
        protocol: Some("5-fold stratified".into()),
        quality_std: Some(0.01),
        validated_examples: Some(10),
        confusion: None,
        oof: Some(store.put_blob(bytes).unwrap()),
    }
}

fn ensemble_of(app: AppId, members: &[(RunId, f64)], quality: f64) -> easeml_store::EnsembleRecord {
    easeml_store::EnsembleRecord {
        app,
        data_version: 1,
        members: members
            .iter()
            .map(|&(run, weight)| easeml_store::EnsembleMember { run, weight })
            .collect(),
        quality,
        single_quality: 0.8,
        loss: None,
        single_loss: None,
        validated_examples: 10,
        confusion: Some("{\"cells\":[[0,0,9],[1,0,1]]}".into()),
        runs_seen: members.iter().map(|(run, _)| *run).max().unwrap(),
        created_ms: 0,
    }
}

#[test]
fn runs_keep_their_validation_answers_and_an_ensemble_of_them_is_served_when_it_is_better() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("ens", Some(2), None)).unwrap();
    store
        .insert_examples(app.id, &[labelled(1, "cat")])
        .unwrap();
    let first_answers = with_oof(&store, b"answers of the first run");
    let first = finished_run(&mut store, app.id, "knn", (0.8, 1.0, 0.001), &first_answers);
    let second_answers = with_oof(&store, b"answers of the second run");
    let second = finished_run(&mut store, app.id, "gbdt", (0.78, 5.0, 0.002), &second_answers);
    assert_eq!(store.run(first).unwrap().validation, first_answers);
    let oof = store.run(second).unwrap().validation.oof.unwrap();
    // The answers are referenced: garbage collection keeps them.
    store.collect_garbage(std::time::Duration::ZERO).unwrap();
    assert_eq!(store.blob(&oof).unwrap(), b"answers of the second run");

    let limits = ConstraintLimits::default();
    let runs = store.runs(app.id).unwrap();
    assert!(store.ensembles(app.id).unwrap().is_empty());
    let served = easeml_store::served(&runs, &[], &limits).unwrap();
    assert!(served.ensemble().is_none());

    // Weights that do not sum to 1 are refused in words, nothing stored.
    let error = store
        .put_ensemble(&ensemble_of(app.id, &[(first, 0.5), (second, 0.6)], 0.9))
        .unwrap_err();
    assert!(error.to_string().contains("weights sum to"), "{error}");
    assert!(store.ensembles(app.id).unwrap().is_empty());

    store
        .put_ensemble(&ensemble_of(app.id, &[(first, 0.25), (second, 0.75)], 0.9))
        .unwrap();
    // A recomputation replaces it.
    let better = ensemble_of(app.id, &[(first, 0.5), (second, 0.5)], 0.95);
    store.put_ensemble(&better).unwrap();
    let ensembles = store.ensembles(app.id).unwrap();
    assert_eq!(ensembles.len(), 1);
    assert_eq!(ensembles[0].members, better.members);
    assert_eq!(ensembles[0].quality, 0.95);
    assert_eq!(ensembles[0].confusion, better.confusion);
    let served = easeml_store::served(&runs, &ensembles, &limits).unwrap();
    assert_eq!(served.ensemble().map(|e| e.quality), Some(0.95));
    // An infer_latency limit below the members' summed latency serves the best run alone.
    let tight = ConstraintLimits {
        train_time: None,
        infer_latency: Some(0.0025),
    };
    assert!(easeml_store::served(&runs, &ensembles, &tight).unwrap().ensemble().is_none());
    // An ensemble no better than the best single run is not served.
    store
        .put_ensemble(&ensemble_of(app.id, &[(first, 0.5), (second, 0.5)], 0.8))
        .unwrap();
    let ensembles = store.ensembles(app.id).unwrap();
    assert!(easeml_store::served(&runs, &ensembles, &limits).unwrap().ensemble().is_none());
    // The same quality with a lower cross-entropy (a classifier's tie) is kept, but under k-fold a
    // gain within two of the best run's standard errors (here 0.01 / sqrt(5) each) is not served.
    let mut tie = ensemble_of(app.id, &[(first, 0.5), (second, 0.5)], 0.8);
    tie.loss = Some(0.2);
    tie.single_loss = Some(0.3);
    store.put_ensemble(&tie).unwrap();
    let ensembles = store.ensembles(app.id).unwrap();
    assert_eq!(ensembles[0].loss, Some(0.2));
    assert!(ensembles[0].beats_single_run());
    assert!(easeml_store::served(&runs, &ensembles, &limits).unwrap().ensemble().is_none());
    let within = ensemble_of(app.id, &[(first, 0.5), (second, 0.5)], 0.808);
    store.put_ensemble(&within).unwrap();
    let ensembles = store.ensembles(app.id).unwrap();
    assert!(easeml_store::served(&runs, &ensembles, &limits).unwrap().ensemble().is_none());
    assert!(store.remove_ensemble(app.id, 1).unwrap());
    assert!(!store.remove_ensemble(app.id, 1).unwrap());

    // Removing the app removes its ensembles.
    store.put_ensemble(&better).unwrap();
    store.remove_app(app.id).unwrap();
    let (again, _) = store.register_app(&new_app("ens", Some(2), None)).unwrap();
    assert!(store.ensembles(again.id).unwrap().is_empty());
}

#[test]
fn an_estimate_of_the_served_model_is_kept_per_data_version_and_replaced_by_a_recomputation() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let (app, _) = store.register_app(&new_app("est", Some(2), None)).unwrap();
    let estimate = |quality: f64, low: f64, high: f64| easeml_store::EstimateRecord {
        app: app.id,
        data_version: 1,
        ensemble: true,
        quality,
        low,
        high,
        resamples: 200,
        runs_seen: RunId(4),
        created_ms: 0,
    };
    assert!(store.estimates(app.id).unwrap().is_empty());
    // A quality outside its interval is refused in words, nothing stored.
    let error = store.put_estimate(&estimate(0.7, 0.8, 0.9)).unwrap_err();
    assert!(error.to_string().contains("outside its interval"), "{error}");
    assert!(store.estimates(app.id).unwrap().is_empty());

    store.put_estimate(&estimate(0.85, 0.8, 0.9)).unwrap();
    let mut replaced = estimate(0.875, 0.75, 0.95);
    replaced.ensemble = false;
    store.put_estimate(&replaced).unwrap();
    let stored = store.estimates(app.id).unwrap();
    assert_eq!(stored.len(), 1);
    assert!(stored[0].created_ms > 0);
    assert_eq!(
        easeml_store::EstimateRecord {
            created_ms: 0,
            ..stored[0].clone()
        },
        replaced
    );
    assert!(store.remove_estimate(app.id, 1).unwrap());
    assert!(!store.remove_estimate(app.id, 1).unwrap());

    // Removing the app removes its estimates.
    store.put_estimate(&replaced).unwrap();
    store.remove_app(app.id).unwrap();
    let (again, _) = store.register_app(&new_app("est", Some(2), None)).unwrap();
    assert!(store.estimates(again.id).unwrap().is_empty());
}
