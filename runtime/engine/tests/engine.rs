//! The engine over a real store with real training runs (small tabular tasks, so each run takes
//! well under a second on the CPU).

use std::time::Duration;

use easeml_compiler::{Registry, compile};
use easeml_engine::unit::UnitSpec;
use easeml_engine::{Engine, EngineConfig, Error, Event, ServedModel, Step, checkpoint_blob};
use easeml_object::{Object, codec};
use easeml_store::{AppId, Blob, NewApp, NewExample, NewOutput, RunState, Store};
use tch::Device;

fn config() -> EngineConfig {
    let mut config = EngineConfig::for_device(Device::Cpu);
    config.max_run_seconds = 10.0;
    config.max_epochs = 8;
    config.min_steps = 0; // the epochs as set: a quick test, not a good model
    config
}

/// A unit's spec as the engine of [`config`] writes it.
fn spec() -> String {
    let config = config();
    UnitSpec {
        max_seconds: config.max_run_seconds,
        deadline_ms: None,
        max_epochs: config.max_epochs,
        min_steps: config.min_steps,
        seed: config.seed,
        tuning: config.tuning.name().to_owned(),
        race_floor: None,
    }
    .to_json()
}

/// Registers the program as an app with the manifest easemlc writes for it.
fn register(store: &mut Store, source: &str, name: &str) -> AppId {
    let compiled = compile(source, name, &Registry::builtin()).expect("the program compiles");
    let schema = &compiled.schema;
    let manifest = easeml_compiler::codegen::manifest(&compiled).to_json();
    let label_capacity = schema.label_capacity();
    store
        .register_app(&NewApp {
            name: schema.app.clone(),
            manifest,
            system_type: schema.system_type(),
            label_capacity,
            declared_labels: schema.labels.clone(),
        })
        .expect("registered")
        .0
        .id
}

/// Two clusters: label `left` when x < y.
fn clusters(n: usize, offset: usize) -> Vec<(Vec<f32>, &'static str)> {
    (offset..offset + n)
        .map(|i| {
            let a = ((i * 37) % 100) as f32 / 100.0;
            let b = ((i * 61) % 100) as f32 / 100.0;
            let label = if a < b { "left" } else { "right" };
            (vec![a, b], label)
        })
        .collect()
}

fn feed_labels(
    store: &mut Store,
    app: AppId,
    rows: &[(Vec<f32>, &str)],
) -> easeml_store::InsertReport {
    let examples: Vec<NewExample> = rows
        .iter()
        .map(|(x, label)| NewExample {
            input: Blob::Bytes(codec::encode(&Object::single(x.clone()))),
            output: NewOutput::Label((*label).to_owned()),
        })
        .collect();
    store.insert_examples(app, &examples).expect("stored")
}

fn feed_regression(store: &mut Store, app: AppId, n: usize) {
    let examples: Vec<NewExample> = (0..n)
        .map(|i| {
            let x = [
                (i % 7) as f32 / 7.0,
                (i % 5) as f32 / 5.0,
                (i % 3) as f32 / 3.0,
            ];
            let y = 0.5 * x[0] - 0.3 * x[1] + 0.2 * x[2];
            NewExample {
                input: Blob::Bytes(codec::encode(&Object::single(x.to_vec()))),
                output: NewOutput::Blob(Blob::Bytes(codec::encode(&Object::single(vec![y])))),
            }
        })
        .collect();
    store.insert_examples(app, &examples).expect("stored");
}

const SIDES: &str = "app sides\nInput = [2]\nOutput = [2]\nlabels = [left, right]\n";
const LEVEL: &str = "app level\nInput = [3]\nOutput = [1]\n";

/// A fresh store with the app `sides` and `examples` of its [`clusters`], closed again.
fn sides_home(examples: usize) -> (tempfile::TempDir, AppId) {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, sides, &clusters(examples, 0));
    (home, sides)
}

#[test]
fn two_apps_are_trained_to_exhaustion_and_their_best_models_serve() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    let level = register(&mut store, LEVEL, "level");
    feed_labels(&mut store, sides, &clusters(120, 0));
    feed_regression(&mut store, level, 60);
    drop(store);

    let mut engine = Engine::open(home.path(), config()).unwrap();
    let mut events = Vec::new();
    let summary = engine.train(None, &mut |event| events.push(event)).unwrap();
    assert!(summary.exhausted, "{summary:?}");
    // Seven candidates each (a forest, boosted trees, kernel ridge, two MLPs, a linear/logistic
    // model, k-NN), every one tried once.
    assert_eq!(summary.finished + summary.failed, 14, "{events:#?}");
    assert!(summary.finished >= 8, "{events:#?}");
    let registered = events
        .iter()
        .filter(|event| matches!(event, Event::AppRegistered { .. }))
        .count();
    assert_eq!(registered, 2);
    for app in [sides, level] {
        let runs = engine.store().runs(app).unwrap();
        let mut candidates: Vec<_> = runs.iter().map(|run| run.candidate.clone()).collect();
        candidates.sort();
        candidates.dedup();
        assert_eq!(candidates.len(), 7, "{runs:#?}");
        assert!(runs.iter().all(|run| run.state != RunState::Running));
        // The two apps' runs interleave in the store, yet each app counts its own from 1.
        let numbers: Vec<u64> = runs.iter().map(|run| run.number).collect();
        assert_eq!(
            numbers,
            (1..=runs.len() as u64).collect::<Vec<_>>(),
            "{runs:#?}"
        );
        // Both apps have fewer than 200 examples: every finished run was cross-validated, and
        // the store keeps the protocol and the spread.
        let protocol = if app == sides {
            "5-fold stratified"
        } else {
            "5-fold"
        };
        for run in runs.iter().filter(|run| run.state == RunState::Done) {
            // A classic model's k-fold runs its repeats (`Budget::k_fold_repeats`).
            let model = easeml_trainer::Candidate::parse(&run.candidate)
                .unwrap()
                .model;
            let repeated = format!("{protocol} x{}", easeml_trainer::K_FOLD_REPEATS);
            let classic = easeml_trainer::classic::is_classic(model);
            // A network's folds may have stopped below the app's best run (the race), or its
            // chosen rate repeated them when its first partition was cheap enough (how cheap
            // depends on this machine's speed: either protocol).
            let recorded = run.validation.protocol.as_deref().unwrap_or_default();
            let raced = easeml_stats::protocol::Protocol::parse(recorded)
                .is_some_and(|protocol| protocol.is_raced());
            if raced {
                assert!(app == sides && recorded.starts_with(&format!("{protocol}, ")));
            } else if classic {
                assert_eq!(recorded, repeated, "{run:#?}");
            } else {
                assert!(recorded == protocol || recorded == repeated, "{run:#?}");
            }
            assert!(
                run.validation.quality_std.is_some()
                    || easeml_stats::protocol::Protocol::parse(recorded)
                        .and_then(|protocol| protocol.measured_folds())
                        == Some(1),
                "{run:#?}"
            );
            // A classifier's run keeps how its validation answers fell: every example once
            // (k-fold), the right ones on the diagonal making up the quality.
            match (app == sides, run.validation.confusion.as_deref()) {
                (true, Some(stored)) => {
                    let confusion = easeml_object::Confusion::from_json(stored).expect("reads");
                    let total: u64 = confusion.cells.iter().map(|cell| cell[2]).sum();
                    let right: u64 = confusion
                        .cells
                        .iter()
                        .filter(|cell| cell[0] == cell[1])
                        .map(|cell| cell[2])
                        .sum();
                    assert_eq!(Some(total), run.validation.validated_examples, "{run:#?}");
                    // The quality is the mean of the folds' accuracies, the diagonal's share
                    // their pooled one: equal within the folds' size differences.
                    let pooled = right as f64 / total as f64;
                    assert!(
                        (pooled - run.quality.unwrap()).abs() < 0.05,
                        "{pooled} vs {run:#?}"
                    );
                }
                (true, None) => panic!("a classifier's run without confusion counts: {run:#?}"),
                (false, confusion) => assert_eq!(confusion, None, "{run:#?}"),
            }
        }
    }
    // Every unit after the classifier's first carries the floor a network's k-fold races: the
    // highest lower bound of an earlier run's accuracy (`easeml_trainer::race`); the regression's
    // carry none.
    for app in [sides, level] {
        let runs = engine.store().runs(app).unwrap();
        let floors: Vec<f64> = runs
            .iter()
            .filter(|run| run.state == RunState::Done)
            .map(|run| {
                let answers = run.validation.validated_examples.unwrap() as usize;
                easeml_trainer::race::floor(run.quality.unwrap(), answers)
            })
            .collect();
        for (index, run) in runs.iter().enumerate() {
            let unit = engine.store().unit_of_run(run.id).unwrap().unwrap();
            let spec = UnitSpec::from_json(&unit.spec).unwrap();
            match (app == sides && index > 0, spec.race_floor) {
                (true, Some(floor)) => assert!(floors.contains(&floor), "{floor} {floors:?}"),
                (false, None) => {}
                (_, floor) => panic!("run {index} of {app:?}: race floor {floor:?}"),
            }
        }
    }
    let finished: Vec<&Event> = events
        .iter()
        .filter(|event| matches!(event, Event::RunFinished { .. }))
        .collect();
    // Each event names the run by its number within its app.
    for event in &finished {
        if let Event::RunFinished { run, number, .. } = event {
            assert_eq!(engine.store().run(*run).unwrap().number, *number);
        }
    }
    assert!(
        finished.iter().all(|event| matches!(event,
            Event::RunFinished { protocol, quality_std: Some(_), .. } if protocol.contains("-fold"))),
        "{finished:#?}"
    );
    // Every trained model's batch-1 latency was measured before it was marked done.
    for app in [sides, level] {
        for run in engine.store().runs(app).unwrap() {
            if run.state == RunState::Done {
                let latency = run.infer_latency_seconds.expect("measured");
                assert!(latency > 0.0 && latency < 1.0, "{run:#?}");
            }
        }
    }
    // Nothing left: another step trains nothing.
    assert!(engine.step(None, &mut |_| {}).unwrap().is_none());

    let served = ServedModel::load(engine.store(), sides, Device::Cpu)
        .unwrap()
        .expect("a best model");
    assert_eq!(served.run().state, RunState::Done);
    let held_out = clusters(50, 1000);
    let inputs: Vec<Object> = held_out
        .iter()
        .map(|(x, _)| Object::single(x.clone()))
        .collect();
    let answers = served.predict(&inputs).unwrap();
    assert_eq!(answers.len(), held_out.len());
    let correct = answers
        .iter()
        .zip(&held_out)
        .filter(|(answer, (_, label))| answer.output == serde_json::json!(label))
        .count();
    assert!(correct >= 40, "{correct}/50 held-out points right");
    assert!(answers.iter().all(|answer| answer.confidence.is_some()));
    for answer in &answers {
        // Every class's probability, in class order: they sum to 1, the answered class is the most
        // probable one, and `confidence` is its probability.
        let probabilities = answer.probabilities.as_ref().expect("class probabilities");
        assert_eq!(probabilities.len(), 2, "{answer:?}");
        let sum: f32 = probabilities.iter().sum();
        assert!((sum - 1.0).abs() < 1e-4, "{answer:?}");
        let class = answer.class.expect("a class") as usize;
        assert_eq!(Some(probabilities[class]), answer.confidence, "{answer:?}");
        assert!(
            probabilities.iter().all(|&p| p <= probabilities[class]),
            "{answer:?}"
        );
    }

    // Any one run's model loads by itself, served or not, and answers as itself; a run of
    // another app or one without a checkpoint is refused in words.
    let best = served.run().id;
    for run in engine.store().runs(sides).unwrap() {
        match ServedModel::of_run(engine.store(), sides, run.id, Device::Cpu) {
            Ok(model) => {
                assert_eq!(run.state, RunState::Done, "{run:#?}");
                assert_eq!(model.run().id, run.id);
                assert!(model.ensemble().is_none());
                let answers = model.predict(&inputs).unwrap();
                assert_eq!(answers.len(), inputs.len());
                if run.id == best {
                    let served = served.predict(&inputs).unwrap();
                    let outputs = |answers: &[easeml_engine::Inference]| {
                        answers.iter().map(|a| a.output.clone()).collect::<Vec<_>>()
                    };
                    assert_eq!(outputs(&answers), outputs(&served));
                }
            }
            Err(error) => {
                assert!(run.checkpoint.is_none(), "{error}: {run:#?}");
                assert!(
                    error.to_string().contains("without a checkpoint"),
                    "{error}"
                );
            }
        }
    }
    let error = ServedModel::of_run(engine.store(), level, best, Device::Cpu).unwrap_err();
    assert!(
        error.to_string().contains("is not a run of `level`"),
        "{error}"
    );

    let served = ServedModel::load(engine.store(), level, Device::Cpu)
        .unwrap()
        .expect("a best model");
    let answers = served
        .predict(&[Object::single(vec![0.1, 0.2, 0.3])])
        .unwrap();
    let value = answers[0].output.as_array().expect("a [1] array");
    assert_eq!(value.len(), 1);
    assert!(answers[0].class.is_none());
}

/// The label the served model of `app` gives `point`, and the run that answered.
fn served_answer(store: &Store, app: AppId, point: [f32; 2]) -> (easeml_store::RunRecord, String) {
    let served = ServedModel::load(store, app, Device::Cpu)
        .unwrap()
        .expect("a served model");
    let answer = served
        .predict(&[Object::single(point.to_vec())])
        .unwrap()
        .remove(0);
    let label = answer.output.as_str().expect("a label").to_owned();
    (served.run().clone(), label)
}

#[test]
fn the_served_model_follows_the_data_when_examples_are_disabled_or_fed() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, sides, &clusters(40, 0));
    // A dense corner of mislabelled examples: every point there has x > y, so is `right`, but
    // these say `left`. The models learn the corner, and score well on it (it is consistent).
    let corner: Vec<(Vec<f32>, &str)> = (0..24)
        .map(|i| {
            let x = 0.85 + (i % 4) as f32 * 0.03;
            let y = 0.05 + (i / 4) as f32 * 0.02;
            (vec![x, y], "left")
        })
        .collect();
    let mislabelled = feed_labels(&mut store, sides, &corner).ids;
    drop(store);
    let probe = [0.9, 0.1];

    let mut engine = Engine::open(home.path(), config()).unwrap();
    assert!(engine.train(None, &mut |_| {}).unwrap().exhausted);
    let (before, answer) = served_answer(engine.store(), sides, probe);
    assert_eq!(
        answer, "left",
        "the served model learned the corner: {before:#?}"
    );

    // The user disables the examples the model depends on (the refine loop): the engine retrains
    // on the new data, and the model served is one trained without them, though the old one's
    // quality (measured on data that held the corner) may be higher.
    let mut other = Store::open(home.path()).unwrap();
    let mut version = 0;
    for id in &mislabelled {
        version = other.set_enabled(sides, *id, false).unwrap();
    }
    // Until a run on the new data finishes, the old model keeps serving.
    assert_eq!(served_answer(engine.store(), sides, probe).0.id, before.id);
    assert!(engine.train(None, &mut |_| {}).unwrap().exhausted);
    let (after, answer) = served_answer(engine.store(), sides, probe);
    assert_eq!(after.data_version, version, "{after:#?}");
    assert_ne!(after.id, before.id);
    assert_eq!(answer, "right", "served without the corner: {after:#?}");

    // A feed does the same: the next finished run on the new version is what serves.
    let version = feed_labels(&mut other, sides, &clusters(12, 700)).data_version;
    assert_eq!(served_answer(engine.store(), sides, probe).0.id, after.id);
    loop {
        let run = engine
            .step(None, &mut |_| {})
            .unwrap()
            .and_then(Step::into_run)
            .expect("runs on the new data");
        assert_eq!(run.data_version, version);
        if run.state == RunState::Done {
            assert_eq!(served_answer(engine.store(), sides, probe).0.id, run.id);
            break;
        }
    }
}

/// A latency limit no model meets (10 ns: reading the clock takes longer) and one every model meets.
const SIDES_TOO_FAST: &str = "app sides\nInput = [2]\nOutput = [2]\nlabels = [left, right]\nconstraint infer_latency <= 0.00001ms\n";
const SIDES_EASY: &str = "app easy\nInput = [2]\nOutput = [2]\nlabels = [left, right]\nconstraint infer_latency <= 10s\n";

#[test]
fn a_model_over_the_latency_limit_is_not_trained_or_never_served() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES_TOO_FAST, "sides");
    let easy = register(&mut store, SIDES_EASY, "easy");
    feed_labels(&mut store, sides, &clusters(60, 0));
    feed_labels(&mut store, easy, &clusters(60, 0));
    drop(store);
    let mut engine = Engine::open(home.path(), config()).unwrap();
    let mut events = Vec::new();
    assert!(
        engine
            .train(None, &mut |event| events.push(event))
            .unwrap()
            .exhausted
    );
    let runs = engine.store().runs(sides).unwrap();
    assert_eq!(runs.len(), 7, "{runs:#?}");
    let (mut probed, mut measured) = (0, 0);
    for run in &runs {
        let latency = run.infer_latency_seconds;
        match run.state {
            // A network is timed untrained and, too slow already, not trained: no checkpoint.
            RunState::Failed => {
                let error = run.error.as_deref().unwrap();
                assert!(
                    error.starts_with("not trained: its untrained network takes")
                        && error.contains("on cpu")
                        && error.contains("over the `infer_latency` limit of 10.0 ns;"),
                    "{error}"
                );
                assert!(
                    latency.unwrap() > 1e-8 && run.checkpoint.is_none(),
                    "{run:#?}"
                );
                probed += 1;
            }
            // A classic model is measured once trained, and never served.
            RunState::Done => {
                assert!(latency.unwrap() > 1e-8, "{run:#?}");
                measured += 1;
            }
            _ => panic!("{run:#?}"),
        }
    }
    assert!(probed >= 2 && measured >= 2, "{runs:#?}");
    let limits = engine.store().app(sides).map(|app| {
        easeml_engine::AppModel::from_manifest(&app.name, &app.manifest)
            .unwrap()
            .constraint_limits()
    });
    let limits = limits.unwrap();
    assert_eq!(limits.infer_latency, Some(1e-8));
    assert!(easeml_engine::best_run(&runs, &limits).is_none());
    let broken = easeml_engine::broken_constraints(&runs[0], &limits);
    assert_eq!(broken.len(), 1);
    assert!(
        broken[0].to_string().starts_with("infer_latency "),
        "{broken:?}"
    );
    assert!(
        ServedModel::load(engine.store(), sides, Device::Cpu)
            .unwrap()
            .is_none()
    );
    // The events say the same: every finished run of the app broke the limit, none is the best.
    for event in &events {
        if let Event::RunFinished {
            app,
            broken_constraints,
            best,
            ..
        } = event
            && app == "sides"
        {
            assert!(!best && broken_constraints.len() == 1, "{event:?}");
        }
    }
    // Under a limit every model meets, nothing is refused and the best model serves.
    let runs = engine.store().runs(easy).unwrap();
    assert!(
        runs.iter()
            .all(|run| run.state == RunState::Done && run.infer_latency_seconds.is_some()),
        "{runs:#?}"
    );
    assert!(
        ServedModel::load(engine.store(), easy, Device::Cpu)
            .unwrap()
            .is_some()
    );
}

#[test]
fn with_trimtuner_a_network_run_searches_settings_and_shares_and_keeps_its_trials() {
    // 1,000 rows of a table: the split (`K_FOLD_BELOW_TABLES`), where the tuner runs.
    let examples: usize = easeml_trainer::train::K_FOLD_BELOW_TABLES;
    let (home, sides) = sides_home(examples);
    let mut config = config();
    config.tuning = easeml_engine::Tuning::TrimTuner;
    config.max_run_seconds = 2.0;
    let mut engine = Engine::open(home.path(), config).unwrap();
    assert!(engine.train(None, &mut |_| {}).unwrap().exhausted);
    let runs = engine.store().runs(sides).unwrap();
    let status = easeml_client::Status::from_runs(
        "sides".to_owned(),
        String::new(),
        1,
        (examples as u64, examples as u64),
        &runs,
        &easeml_store::ConstraintLimits::default(),
        (easeml_client::QualityMetric::Accuracy, &[]),
    );
    let mut tuned = 0;
    for (run, report) in runs.iter().zip(&status.runs) {
        if run.state != RunState::Done {
            continue;
        }
        // Every finished run keeps its trials; a network's are TrimTuner's.
        assert!(!report.trials.is_empty(), "{run:#?}");
        let network = ["mlp_small", "mlp_large", "logistic"].contains(&run.candidate.as_str());
        assert_eq!(
            report.trials.iter().all(|trial| trial.tuned.is_some()),
            network,
            "{run:#?}"
        );
        if network {
            tuned += 1;
            let shares: Vec<f64> = report
                .trials
                .iter()
                .map(|trial| trial.tuned.as_ref().unwrap().data_fraction)
                .collect();
            assert!(shares.iter().any(|&share| share < 1.0), "{shares:?}");
            assert!(run.cost_seconds.unwrap() < 2.0 + 2.0, "{run:#?}");
        }
    }
    assert!(tuned >= 2, "{runs:#?}");
    let text = status.to_string();
    eprintln!("{text}");
    assert!(text.contains("trimtuner: "), "{text}");
    assert!(text.contains(" at 1/60"), "{text}");
}

#[test]
fn new_data_reopens_an_app_and_a_removed_app_is_dropped() {
    let (home, sides) = sides_home(40);
    let mut engine = Engine::open(home.path(), config()).unwrap();
    assert!(engine.train(None, &mut |_| {}).unwrap().exhausted);
    assert!(engine.step(None, &mut |_| {}).unwrap().is_none());

    // Another process feeds more examples: the app's candidates are eligible again.
    let mut other = Store::open(home.path()).unwrap();
    feed_labels(&mut other, sides, &clusters(20, 500));
    let mut events = Vec::new();
    let run = engine
        .step(None, &mut |event| events.push(event))
        .unwrap()
        .and_then(Step::into_run)
        .expect("a run on the new data");
    assert_eq!(run.data_version, 2);
    assert!(
        events.iter().any(|event| matches!(
            event,
            Event::DataChanged {
                data_version: 2,
                ..
            }
        )),
        "{events:?}"
    );
    other.remove_app(sides).unwrap();
    assert!(engine.step(None, &mut |_| {}).unwrap().is_none());
}

#[test]
fn one_engine_per_store_and_interrupted_runs_are_rerun_first() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, sides, &clusters(40, 0));
    // A run that a killed engine's in-process worker left running, its lease still alive; that
    // engine trained under a budget that has run out since (its deadline bounds nothing now).
    let mut killed_session = UnitSpec::from_json(&spec()).unwrap();
    killed_session.deadline_ms = Some(easeml_store::now_ms() - 60_000);
    let (interrupted, _) = store
        .queue_unit(sides, "knn", &killed_session.to_json())
        .unwrap();
    store
        .lease_unit("in-process:killed", Duration::from_secs(3600))
        .unwrap()
        .unwrap();
    assert_eq!(store.run(interrupted).unwrap().state, RunState::Running);
    drop(store);

    let mut engine = Engine::open(home.path(), config()).unwrap();
    match Engine::open(home.path(), config()) {
        Err(error @ Error::Busy { .. }) => {
            let message = error.to_string();
            assert!(
                message.starts_with("another process already trains the store at ")
                    && message.contains("it holds the lock file ")
                    && message.contains("train.lock); wait for it to finish or stop it"),
                "{message}"
            );
        }
        other => panic!("expected the store to be busy, got {other:?}"),
    }
    let run = engine
        .step(None, &mut |_| {})
        .unwrap()
        .and_then(Step::into_run)
        .expect("a run");
    assert_eq!(run.id, interrupted);
    assert_eq!(run.state, RunState::Done);
    // The re-run counts as trained: the remaining six candidates follow, then nothing.
    let summary = engine.train(None, &mut |_| {}).unwrap();
    assert_eq!(summary.finished + summary.failed, 6);
    drop(engine);
    // The lock goes with the engine.
    Engine::open(home.path(), config()).unwrap();
}

#[test]
fn a_run_the_sessions_end_cuts_before_it_has_a_model_is_dropped_not_failed() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, sides, &clusters(3000, 0));
    let mut engine = Engine::open(home.path(), config()).unwrap();
    // A unit of a session that ends in a second: kernel ridge on 2,400 rows has no model by then
    // (one eigendecomposition of a 2,400 x 2,400 kernel matrix takes seconds on this machine's two
    // cores, and it cannot stop halfway; on 1,600 rows an idle machine made it in time). Leasing
    // the unit takes the engine 50 to 100 ms of that second.
    let mut ending = UnitSpec::from_json(&spec()).unwrap();
    ending.deadline_ms = Some(easeml_store::now_ms() + 1000);
    let (cut, _) = store
        .queue_unit(sides, "kernel_ridge", &ending.to_json())
        .unwrap();
    let mut events = Vec::new();
    match engine.step(None, &mut |event| events.push(event)).unwrap() {
        Some(Step::Dropped(run)) => assert_eq!(run, cut),
        other => panic!("expected the run to be dropped, got {other:?} ({events:?})"),
    }
    assert!(
        events.iter().any(|event| matches!(
            event,
            Event::RunDropped { candidate, run, reason, .. }
                if candidate == "kernel_ridge" && *run == cut && reason.contains("time limit")
        )),
        "{events:?}"
    );
    // Nothing is recorded: no failed run holds the candidate down, a later session tries it.
    assert!(store.run(cut).is_err());
    assert!(store.open_units().unwrap().is_empty());
    assert!(
        store
            .runs(sides)
            .unwrap()
            .iter()
            .all(|run| run.candidate != "kernel_ridge")
    );
}

#[test]
fn a_unit_whose_spec_cannot_be_read_fails_saying_so_and_the_engine_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let sides = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, sides, &clusters(40, 0));
    let (garbled, _) = store.queue_unit(sides, "logistic", "not a spec").unwrap();
    drop(store);

    let mut engine = Engine::open(home.path(), config()).unwrap();
    let run = engine
        .step(None, &mut |_| {})
        .unwrap()
        .and_then(Step::into_run)
        .expect("a run");
    assert_eq!(run.id, garbled);
    assert_eq!(run.state, RunState::Failed);
    let error = run.error.unwrap();
    assert!(
        error.contains("a work unit's spec is unreadable"),
        "{error}"
    );
    let next = engine
        .step(None, &mut |_| {})
        .unwrap()
        .and_then(Step::into_run)
        .expect("the engine goes on");
    assert_ne!(next.id, garbled);
    assert_eq!(next.state, RunState::Done);
}

#[test]
fn apps_with_too_few_examples_or_a_broken_manifest_wait_without_stopping_the_others() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let few = register(&mut store, SIDES, "sides");
    feed_labels(&mut store, few, &clusters(2, 0));
    let broken = store
        .register_app(&NewApp {
            name: "broken".to_owned(),
            manifest: "{\"schema\": 3}".to_owned(),
            system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[1]], []}}".to_owned(),
            label_capacity: None,
            declared_labels: None,
        })
        .unwrap()
        .0
        .id;
    feed_regression(&mut store, broken, 10);
    let level = register(&mut store, LEVEL, "level");
    feed_regression(&mut store, level, 30);
    drop(store);

    let mut engine = Engine::open(home.path(), config()).unwrap();
    let mut events = Vec::new();
    let summary = engine
        .train(Some(Duration::from_secs(120)), &mut |event| {
            events.push(event)
        })
        .unwrap();
    assert!(summary.exhausted);
    assert_eq!(summary.finished + summary.failed, 7, "only `level` trains");
    let skipped: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            Event::AppSkipped { app, reason } => Some((app.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{events:?}");
    // The app with too few examples is said to wait, once, with how many it has and needs.
    assert_eq!(skipped[0].0, "sides");
    assert!(
        skipped[0]
            .1
            .starts_with("2 enabled example(s); training starts at 4"),
        "{}",
        skipped[0].1
    );
    assert_eq!(skipped[1].0, "broken");
    assert!(
        skipped[1].1.contains("its manifest cannot be used")
            && skipped[1].1.contains("expected struct Schema"),
        "{}",
        skipped[1].1
    );
    assert!(engine.store().runs(few).unwrap().is_empty());
    assert!(
        ServedModel::load(engine.store(), few, Device::Cpu)
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_time_budget_stops_the_loop() {
    let (home, _) = sides_home(40);
    let mut engine = Engine::open(home.path(), config()).unwrap();
    // Under a second left: no run starts.
    let summary = engine
        .train(Some(Duration::from_millis(500)), &mut |_| {})
        .unwrap();
    assert_eq!(summary.finished + summary.failed, 0);
    assert!(!summary.exhausted);
}

#[test]
fn checkpoint_blobs_that_are_not_checkpoints_are_refused() {
    for bytes in [
        b"".as_slice(),
        b"EMCK1\n".as_slice(),
        b"EMCK1\n\xff\x00\x00\x00{}".as_slice(),
        b"EMCK1\n\x02\x00\x00\x00{}weights".as_slice(),
        b"PK\x03\x04 something else".as_slice(),
    ] {
        let error = checkpoint_blob::decode(bytes).unwrap_err();
        assert!(error.to_string().starts_with("checkpoint:"), "{error}");
    }
}
