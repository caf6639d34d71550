//! A measurement, not a check (ignored; run with `--ignored --nocapture`): on the wine and
//! breast-cancer tables of `examples/rust-schema/data` (both cross-validated: below 1,000 rows),
//! cut 80/20 by a fixed shuffle, every tabular candidate is trained and the test accuracy of what
//! each rule would serve is printed: the highest validation quality (the rule before issue 48),
//! `best_run` (a k-fold mean less its standard error), the served ensemble, and the best run on
//! the test set (hindsight).

use std::path::Path;

use easeml_client::{Client, Connection, FeedOptions};
use easeml_compiler::{Registry, compile};
use easeml_engine::{Engine, EngineConfig, checkpoint_blob};
use easeml_store::{RunRecord, RunState, Store, best_run, served};
use easeml_trainer::{Inputs, Prediction, Predictor};
use serde_json::json;

struct Table {
    rows: Vec<(Vec<f32>, usize)>,
    features: usize,
    labels: Vec<String>,
}

fn table(csv: &str) -> Table {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let features: usize = header[1].parse().unwrap();
    let rows = lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            (
                cells[..features]
                    .iter()
                    .map(|v| v.parse().unwrap())
                    .collect(),
                cells[features].parse().unwrap(),
            )
        })
        .collect();
    Table {
        rows,
        features,
        labels: header[2..].iter().map(|l| l.to_string()).collect(),
    }
}

/// A fixed shuffle (a linear congruential generator's order).
fn shuffled(mut rows: Vec<(Vec<f32>, usize)>) -> Vec<(Vec<f32>, usize)> {
    let mut state: u64 = 42;
    for i in (1..rows.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        rows.swap(i, (state >> 33) as usize % (i + 1));
    }
    rows
}

fn accuracy(store: &Store, run: &RunRecord, test: &[(Vec<f32>, usize)], features: usize) -> f64 {
    let probabilities = answers(store, run, test, features);
    correct(&probabilities, test)
}

fn answers(
    store: &Store,
    run: &RunRecord,
    test: &[(Vec<f32>, usize)],
    features: usize,
) -> Vec<Vec<f32>> {
    let checkpoint =
        checkpoint_blob::decode(&store.blob(run.checkpoint.as_ref().unwrap()).unwrap()).unwrap();
    let predictor = Predictor::new(&checkpoint, tch::Device::Cpu).unwrap();
    let batch = Inputs::Dense {
        shape: vec![features as i64],
        values: test.iter().flat_map(|(x, _)| x.clone()).collect(),
    };
    predictor
        .predict(&batch)
        .unwrap()
        .into_iter()
        .map(|p| match p {
            Prediction::Class { probabilities, .. } => probabilities,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn correct(probabilities: &[Vec<f32>], test: &[(Vec<f32>, usize)]) -> f64 {
    let right = probabilities
        .iter()
        .zip(test)
        .filter(|(p, (_, y))| {
            let p: Vec<f64> = p.iter().map(|&v| f64::from(v)).collect();
            easeml_engine::ensemble::argmax(&p) == *y
        })
        .count();
    right as f64 / test.len() as f64
}

fn measure(name: &str, csv: &str, home: &Path) {
    let table = table(csv);
    let rows = shuffled(table.rows.clone());
    let cut = rows.len() * 4 / 5;
    let (train, test) = rows.split_at(cut);
    let program = format!(
        "app {name}\nInput = [{}]\nOutput = [{}]\nlabels = [{}]\n",
        table.features,
        table.labels.len(),
        table.labels.join(", ")
    );
    let schema = compile(&program, name, &Registry::builtin())
        .unwrap()
        .schema;
    let compiled = easeml_compiler::Compiled::from_schema(schema, &Registry::builtin()).unwrap();
    let manifest = easeml_compiler::codegen::manifest(&compiled);
    let candidates = manifest.candidates.len();
    let spec = easeml_client::AppSpec::from_manifest(&manifest).unwrap();
    let mut client = Client::open(&Connection::embedded(home), spec).unwrap();
    let lines: String = train
        .iter()
        .map(|(x, y)| format!("{}\n", json!({"input": x, "output": table.labels[*y]})))
        .collect();
    client
        .feed_lines(std::io::Cursor::new(lines), &FeedOptions::default())
        .unwrap();
    let mut config = EngineConfig::for_device(tch::Device::Cpu);
    config.max_run_seconds = 20.0;
    let mut engine = Engine::open(home, config).unwrap();
    for _ in 0..candidates + 2 {
        if engine.step(None, &mut |_| {}).unwrap().is_none() {
            break;
        }
    }
    drop(engine);
    let store = Store::open(home).unwrap();
    let app = store.app_by_name(name).unwrap().unwrap();
    let runs = store.runs(app.id).unwrap();
    let limits = Default::default();
    let done: Vec<&RunRecord> = runs.iter().filter(|r| r.state == RunState::Done).collect();
    println!(
        "\n{name}: {} train / {} test, {} runs done",
        train.len(),
        test.len(),
        done.len()
    );
    for run in &done {
        println!(
            "  run {:>2} {:<22} validation {:.3}{} cost {:>6.1} s  test {:.3}",
            run.id.0,
            run.candidate,
            run.quality.unwrap_or(0.0),
            run.validation
                .quality_std
                .map(|s| format!(" ± {s:.3}"))
                .unwrap_or_default(),
            run.cost_seconds.unwrap_or(0.0),
            accuracy(&store, run, test, table.features)
        );
    }
    let highest = done
        .iter()
        .copied()
        .reduce(|a, b| if b.quality > a.quality { b } else { a })
        .unwrap();
    let chosen = best_run(&runs, &limits).unwrap();
    let hindsight = done
        .iter()
        .map(|run| accuracy(&store, run, test, table.features))
        .fold(0.0, f64::max);
    println!(
        "  highest validation quality: {} -> test {:.3}",
        highest.candidate,
        accuracy(&store, highest, test, table.features)
    );
    println!(
        "  best_run (mean less SE):    {} -> test {:.3}",
        chosen.candidate,
        accuracy(&store, chosen, test, table.features)
    );
    let ensembles = store.ensembles(app.id).unwrap();
    match served(&runs, &ensembles, &limits).unwrap().ensemble() {
        Some(ensemble) => {
            let mut sum = vec![vec![0.0f32; table.labels.len()]; test.len()];
            for member in &ensemble.members {
                let run = store.run(member.run).unwrap();
                for (row, answer) in answers(&store, &run, test, table.features)
                    .iter()
                    .enumerate()
                {
                    for (slot, p) in sum[row].iter_mut().zip(answer) {
                        *slot += member.weight as f32 * p;
                    }
                }
            }
            let members: Vec<String> = ensemble
                .members
                .iter()
                .map(|m| format!("{} {:.2}", store.run(m.run).unwrap().candidate, m.weight))
                .collect();
            println!(
                "  ensemble ({}): validation {:.3} (single {:.3}) -> test {:.3}",
                members.join(", "),
                ensemble.quality,
                ensemble.single_quality,
                correct(&sum, test)
            );
        }
        None => println!(
            "  no ensemble served (recorded: {:?})",
            ensembles
                .iter()
                .map(|e| (e.quality, e.single_quality))
                .collect::<Vec<_>>()
        ),
    }
    println!("  best run on the test set (hindsight): {hindsight:.3}");
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn measure_ensembles_and_the_choice_rule_on_two_tables() {
    let temp = tempfile::tempdir().unwrap();
    measure(
        "wine",
        include_str!("../../../examples/rust-schema/data/wine.csv"),
        &temp.path().join("wine"),
    );
    measure(
        "breast_cancer",
        include_str!("../../../examples/rust-schema/data/breast_cancer.csv"),
        &temp.path().join("breast_cancer"),
    );
}
