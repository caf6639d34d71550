//! Ensembles end to end (issue 48) on real data, the UCI wine table (178 examples: 5-fold
//! stratified cross-validation): every finished run keeps its validation answers in the store, the
//! engine recomputes the ensemble after each run, `infer` answers with the members' probabilities
//! averaged by weight when an ensemble is served (and exported: its members' folders), `status`
//! shows `best.ensemble` exactly then, and `best.expected` (the engine's estimate of the served
//! model's quality on new examples) exactly when the recorded estimate is of the model served;
//! after a refine the served model (ensemble or run) and its estimate follow the new data.

use std::path::Path;

use easeml_client::{Client, Connection, FeedOptions};
use easeml_compiler::{Registry, compile};
use easeml_engine::ensemble::answers::Answers;
use easeml_engine::ensemble::select::Truth;
use easeml_engine::{Engine, EngineConfig, checkpoint_blob};
use easeml_store::{EnsembleMember, EnsembleRecord, RunState, Store, served};
use easeml_trainer::{Inputs, Prediction, Predictor};
use serde_json::{Value, json};

const WINE: &str = include_str!("../../../examples/rust-schema/data/wine.csv");
const PROGRAM: &str = "Input = [13]\nOutput = [3]\nlabels = [cultivar_1, cultivar_2, cultivar_3]\n";
const CANDIDATES: [&str; 4] = ["knn", "kernel_ridge", "random_forest", "logistic"];

/// The wine rows: 13 measurements and the class index.
fn wine() -> Vec<(Vec<f32>, usize)> {
    WINE.lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let (x, y) = cells.split_at(13);
            (
                x.iter().map(|v| v.parse().unwrap()).collect(),
                y[0].parse().unwrap(),
            )
        })
        .collect()
}

fn lines(rows: &[(Vec<f32>, usize)]) -> String {
    let labels = ["cultivar_1", "cultivar_2", "cultivar_3"];
    rows.iter()
        .map(|(x, y)| format!("{}\n", json!({"input": x, "output": labels[*y]})))
        .collect()
}

fn app() -> easeml_client::AppSpec {
    let schema = compile(PROGRAM, "app", &Registry::builtin())
        .unwrap()
        .schema;
    let compiled =
        easeml_compiler::Compiled::from_schema(schema, &Registry::builtin()).expect("a template");
    let mut manifest = easeml_compiler::codegen::manifest(&compiled);
    let all: Vec<String> = manifest.candidates.iter().map(|c| c.id.clone()).collect();
    manifest
        .candidates
        .retain(|candidate| CANDIDATES.contains(&candidate.id.as_str()));
    assert!(manifest.candidates.len() >= 3, "candidates: {all:?}");
    easeml_client::AppSpec::from_manifest(&manifest).unwrap()
}

/// Trains every candidate on the current data.
fn train(home: &Path) {
    let mut config = EngineConfig::for_device(tch::Device::Cpu);
    config.max_run_seconds = 30.0;
    let mut engine = Engine::open(home, config).unwrap();
    for _ in 0..3 * CANDIDATES.len() {
        if engine.step(None, &mut |_| {}).unwrap().is_none() {
            break;
        }
    }
}

/// Each member's probabilities for `inputs`, from its own checkpoint.
fn member_answers(store: &Store, run: easeml_store::RunId, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let record = store.run(run).unwrap();
    let checkpoint =
        checkpoint_blob::decode(&store.blob(record.checkpoint.as_ref().unwrap()).unwrap()).unwrap();
    let predictor = Predictor::new(&checkpoint, tch::Device::Cpu).unwrap();
    let batch = Inputs::Dense {
        shape: vec![13],
        values: inputs.iter().flatten().copied().collect(),
    };
    predictor
        .predict(&batch)
        .unwrap()
        .into_iter()
        .map(|prediction| match prediction {
            Prediction::Class { probabilities, .. } => probabilities,
            other => panic!("not probabilities: {other:?}"),
        })
        .collect()
}

/// `infer` answers with the weighted average of the members' probabilities.
fn check_averaged(
    store: &Store,
    client: &mut Client,
    ensemble: &EnsembleRecord,
    inputs: &[Vec<f32>],
) {
    let report = client.infer(inputs.iter().map(|x| json!(x))).unwrap();
    let mut expected = vec![vec![0.0f64; 3]; inputs.len()];
    for member in &ensemble.members {
        for (row, answer) in member_answers(store, member.run, inputs).iter().enumerate() {
            for (slot, &p) in expected[row].iter_mut().zip(answer) {
                *slot += member.weight * f64::from(p);
            }
        }
    }
    for ((_, answer), expected) in report.answers.iter().zip(&expected) {
        let probabilities = answer.probabilities.as_ref().expect("probabilities");
        for (got, want) in probabilities.iter().zip(expected) {
            assert!(
                (f64::from(*got) - want).abs() < 1e-5,
                "{probabilities:?} vs {expected:?}"
            );
        }
        let class = easeml_engine::ensemble::argmax(expected);
        assert_eq!(answer.class, Some(class as u32));
    }
}

fn status_json(client: &Client) -> Value {
    serde_json::to_value(client.status().unwrap()).unwrap()
}

/// `best.ensemble` is present exactly when an ensemble is served, with its members' weights
/// summing to 1.
fn check_status(client: &Client, ensemble: Option<&EnsembleRecord>) {
    let status = status_json(client);
    let shown = &status["best"]["ensemble"];
    match ensemble {
        None => assert!(shown.is_null(), "{status:#}"),
        Some(ensemble) => {
            let members = shown["members"].as_array().expect("members");
            assert_eq!(members.len(), ensemble.members.len(), "{status:#}");
            let total: f64 = members.iter().map(|m| m["weight"].as_f64().unwrap()).sum();
            assert!((total - 1.0).abs() < 1e-9, "{status:#}");
            for (shown, member) in members.iter().zip(&ensemble.members) {
                assert_eq!(shown["run"].as_i64(), Some(member.run.0));
                assert!(
                    CANDIDATES
                        .iter()
                        .any(|c| shown["candidate"].as_str().unwrap().starts_with(c))
                );
            }
            assert_eq!(shown["quality"].as_f64(), Some(ensemble.quality));
            assert!(
                client
                    .status()
                    .unwrap()
                    .to_string()
                    .contains("served as an ensemble")
            );
        }
    }
}

/// The engine recorded the served model's expected quality (one run's or the ensemble's, as
/// served) for the served data version, and `status` reports it as `best.expected`; `None` for
/// `served_kind` says the recorded one describes another model than the served, and `status`
/// leaves it out.
fn check_expected(store: &Store, client: &Client, version: u64, served_kind: Option<bool>) {
    let app = store.app_by_name("app").unwrap().unwrap();
    let estimates = store.estimates(app.id).unwrap();
    let estimate = estimates
        .iter()
        .find(|estimate| estimate.data_version == version)
        .expect("an estimate of the served data version");
    assert!(estimate.low <= estimate.quality && estimate.quality <= estimate.high);
    assert!(estimate.resamples >= easeml_engine::ensemble::estimate::MIN_RESAMPLES as u64);
    let status = status_json(client);
    let expected = &status["best"]["expected"];
    match served_kind {
        Some(ensemble) => {
            assert_eq!(estimate.ensemble, ensemble, "{estimate:?}");
            assert_eq!(expected["quality"].as_f64(), Some(estimate.quality));
            assert_eq!(
                expected["interval"],
                json!([estimate.low, estimate.high]),
                "{status:#}"
            );
            assert_eq!(
                expected["method"].as_str(),
                Some(easeml_client::EXPECTED_METHOD)
            );
            let text = client.status().unwrap().to_string();
            assert!(text.contains("expected on new examples: "), "{text}");
        }
        None => assert!(expected.is_null(), "{status:#}"),
    }
}

fn served_ensemble(store: &Store) -> (u64, Option<EnsembleRecord>) {
    let app = store.app_by_name("app").unwrap().unwrap();
    let runs = store.runs(app.id).unwrap();
    let ensembles = store.ensembles(app.id).unwrap();
    let served = served(&runs, &ensembles, &Default::default()).unwrap();
    (served.run().data_version, served.ensemble().cloned())
}

#[test]
fn runs_keep_their_answers_and_a_served_ensemble_averages_its_members_and_follows_the_data() {
    easeml_engine::install_local_models();
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let rows = wine();
    let (first, later) = rows.split_at(160);
    let mut client = Client::open(&Connection::embedded(&home), app()).unwrap();
    let options = FeedOptions::default();
    client
        .feed_lines(std::io::Cursor::new(lines(first)), &options)
        .unwrap();
    train(&home);

    // Every finished run kept its answers: one per example, out-of-fold, against the truth.
    let store = Store::open(&home).unwrap();
    let app_id = store.app_by_name("app").unwrap().unwrap().id;
    let runs = store.runs(app_id).unwrap();
    let done: Vec<_> = runs
        .iter()
        .filter(|run| run.state == RunState::Done)
        .collect();
    assert!(done.len() >= 3, "{}", client.status().unwrap());
    for run in &done {
        let blob = store
            .blob(run.validation.oof.as_ref().expect("answers kept"))
            .unwrap();
        let answers = Answers::decode(&blob).unwrap();
        assert_eq!(answers.ids.len(), 160, "{}", run.candidate);
        assert_eq!(answers.width, 3);
        let Truth::Classes(labels) = &answers.truth else {
            panic!("class truth");
        };
        assert_eq!(labels.len(), 160);
        for row in answers.values.chunks(3) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{row:?}");
        }
    }

    let inputs: Vec<Vec<f32>> = later.iter().take(8).map(|(x, _)| x.clone()).collect();
    let (version, natural) = served_ensemble(&store);
    check_status(&client, natural.as_ref());
    check_expected(&store, &client, version, Some(natural.is_some()));
    println!("the engine's ensemble on wine: {natural:?}");
    let ensemble = match natural {
        Some(ensemble) => ensemble,
        None => {
            // The data gave no ensemble better than its best run: record one of two real runs,
            // so that serving is checked whatever the data chose.
            let mut store = Store::open(&home).unwrap();
            let record = EnsembleRecord {
                app: app_id,
                data_version: version,
                members: vec![
                    EnsembleMember {
                        run: done[0].id,
                        weight: 0.25,
                    },
                    EnsembleMember {
                        run: done[1].id,
                        weight: 0.75,
                    },
                ],
                quality: 1.0,
                single_quality: 0.5,
                loss: None,
                single_loss: None,
                validated_examples: 160,
                confusion: None,
                runs_seen: done[1].id,
                created_ms: 0,
            };
            store.put_ensemble(&record).unwrap();
            // The engine's estimate is of the single run it served: not of this ensemble.
            check_expected(&store, &client, version, None);
            record
        }
    };
    check_status(&client, Some(&ensemble));
    check_averaged(&store, &mut client, &ensemble, &inputs);
    // The ensemble is exported: one folder per member, with the weights served.
    let out = temp.path().join("export");
    let report = easeml_engine::export::export_app(&store, "app", &out, false).unwrap();
    assert_eq!(report.members.len(), ensemble.members.len(), "{report}");
    for (exported, member) in report.members.iter().zip(&ensemble.members) {
        assert_eq!(exported.run, member.run);
        assert_eq!(exported.weight, member.weight);
        assert!(
            out.join(&exported.dir).join(exported.model.file).is_file(),
            "{report}"
        );
    }

    // Refine: new data. The old version's model serves until runs on the new data finish, then
    // the served model (an ensemble or a run) is of the new version only.
    client
        .feed_lines(std::io::Cursor::new(lines(later)), &options)
        .unwrap();
    let current = store.app(app_id).unwrap().data_version;
    assert!(current > version);
    assert_eq!(served_ensemble(&store).0, version);
    train(&home);
    let (served_version, ensemble) = served_ensemble(&store);
    assert_eq!(served_version, current);
    let status = status_json(&client);
    assert_eq!(
        status["best"]["data_version"].as_u64(),
        Some(current),
        "{status:#}"
    );
    check_status(&client, ensemble.as_ref());
    check_expected(&store, &client, current, Some(ensemble.is_some()));
    if let Some(ensemble) = ensemble {
        assert_eq!(ensemble.data_version, current);
        for member in &ensemble.members {
            assert_eq!(store.run(member.run).unwrap().data_version, current);
        }
        check_averaged(&store, &mut client, &ensemble, &inputs);
    }
}
