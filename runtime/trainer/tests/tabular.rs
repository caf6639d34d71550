//! The table models that are not tch modules (`gbdt`, `random_forest`, `knn`, `kernel_ridge`) as
//! whole runs: a
//! checkpoint round trip, the cost estimate, the time limit, and data that could trip them (one
//! class, constant features, a single example, values that are not finite).

use easeml_trainer::classic::{ClassicModel, is_classic};
use easeml_trainer::{
    Budget, Candidate, Checkpoint, Examples, Inputs, ModelKind, Prediction, Predictor, RunOutcome,
    Targets, estimate_cost, synthetic, train,
};
use tch::Device;

const MODELS: [&str; 4] = ["gbdt", "random_forest", "knn", "kernel_ridge"];

fn budget() -> Budget {
    let mut budget = Budget::new(Device::Cpu);
    budget.max_seconds = 60.0;
    budget
}

fn succeeded(model: &str, examples: &Examples, budget: &Budget) -> (Checkpoint, f64) {
    let run = train(&Candidate::parse(model).unwrap(), examples, budget).unwrap();
    match run.outcome {
        RunOutcome::Succeeded {
            checkpoint,
            quality,
        } => (checkpoint, quality),
        RunOutcome::Failed { reason } => panic!("{model} failed: {reason}"),
    }
}

fn table(features: usize, values: Vec<f32>, targets: Targets) -> Examples {
    let n = values.len() / features;
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Dense {
            shape: vec![features as i64],
            values,
        },
        targets,
    }
}

#[test]
fn the_table_models_are_classic_and_fit_only_tables() {
    for model in MODELS {
        let kind = ModelKind::from_id(model).unwrap();
        assert!(is_classic(kind), "{model}");
        // Trees and sequences are not tables.
        let trees = synthetic::tree_depth(20, 2, 1);
        assert!(train(&Candidate::new(kind), &trees, &budget()).is_err());
        // The f_k normalization is a network layer: a classic model refuses it.
        let candidate = Candidate::parse(&format!("{model}+norm_k2")).unwrap();
        assert!(train(&candidate, &synthetic::tabular_sign(30, 2, 1), &budget()).is_err());
    }
}

#[test]
fn a_reloaded_checkpoint_predicts_the_same() {
    let classification = synthetic::tabular_sign(300, 4, 11);
    let regression = synthetic::tabular_linear(120, 3, 12);
    for model in MODELS {
        for examples in [&classification, &regression] {
            let (checkpoint, _) = succeeded(model, examples, &budget());
            assert!(checkpoint.weights.is_empty(), "{model}: no tensor weights");
            let dir = std::env::temp_dir().join(format!(
                "easeml-tabular-test-{}-{model}",
                std::process::id()
            ));
            checkpoint.save(&dir).unwrap();
            let reloaded = Checkpoint::load(&dir).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            // The state is f32 values: JSON numbers read back to the same f32 (the f64 forms in
            // the metadata may differ in their last bit, serde_json's parser being the fast one).
            let kind = ModelKind::from_id(model).unwrap();
            assert_eq!(
                ClassicModel::from_extra(kind, reloaded.meta.extra.as_ref()).unwrap(),
                ClassicModel::from_extra(kind, checkpoint.meta.extra.as_ref()).unwrap(),
                "{model}"
            );
            assert_eq!(reloaded.meta.candidate, checkpoint.meta.candidate);
            assert_eq!(reloaded.meta.task, checkpoint.meta.task);
            let before = Predictor::new(&checkpoint, Device::Cpu)
                .unwrap()
                .predict(&examples.inputs)
                .unwrap();
            let after = Predictor::new(&reloaded, Device::Cpu)
                .unwrap()
                .predict(&examples.inputs)
                .unwrap();
            assert_eq!(before, after, "{model}");
            assert_eq!(before.len(), examples.len());
            match (&before[0], &examples.targets) {
                (
                    Prediction::Class {
                        index,
                        probabilities,
                    },
                    Targets::Classes { .. },
                ) => {
                    assert_eq!(probabilities.len(), 2, "{model}");
                    assert!((probabilities.iter().sum::<f32>() - 1.0).abs() < 1e-4);
                    assert!((0..2).contains(index));
                }
                (Prediction::Values { shape, values }, Targets::Dense { .. }) => {
                    assert_eq!(shape, &vec![1], "{model}");
                    assert_eq!(values.len(), 1);
                }
                other => panic!("{model}: {other:?}"),
            }
        }
    }
}

#[test]
fn a_malformed_state_is_refused_not_run() {
    let examples = synthetic::tabular_sign(60, 3, 13);
    for model in MODELS {
        let (mut checkpoint, _) = succeeded(model, &examples, &budget());
        let kind = ModelKind::from_id(model).unwrap();
        let original = checkpoint.meta.extra.clone().unwrap();
        let extra = checkpoint.meta.extra.as_mut().unwrap();
        // Every model keeps its input width as `features`.
        extra["features"] = serde_json::json!(0);
        assert!(
            ClassicModel::from_extra(kind, Some(&*extra)).is_err(),
            "{model}"
        );
        *extra = original;
        if model == "knn" || model == "kernel_ridge" {
            // One float short (the buffer is packed; a plain array reads too).
            extra["points"] = serde_json::json!([0.0]);
        } else {
            // A split whose right child is itself: a loop.
            extra["trees"][0]["next"][0] = serde_json::json!(0);
        }
        assert!(
            ClassicModel::from_extra(kind, Some(&*extra)).is_err(),
            "{model}"
        );
        assert!(ClassicModel::from_extra(kind, None).is_err());
        // Inputs of another width are refused by the predictor, not sliced.
        let (checkpoint, _) = succeeded(model, &examples, &budget());
        let wider = synthetic::tabular_sign(5, 7, 1);
        assert!(
            Predictor::new(&checkpoint, Device::Cpu)
                .unwrap()
                .predict(&wider.inputs)
                .is_err()
        );
    }
}

#[test]
fn cost_estimates_are_finite_positive_and_grow_with_the_data() {
    for model in MODELS {
        let candidate = Candidate::parse(model).unwrap();
        // Both under the split (a table of 1,000 rows and more).
        let small = estimate_cost(&candidate, &synthetic::tabular_sign(1000, 4, 1), &budget())
            .unwrap()
            .seconds;
        let large = estimate_cost(&candidate, &synthetic::tabular_sign(3000, 4, 1), &budget())
            .unwrap()
            .seconds;
        let regression = estimate_cost(&candidate, &synthetic::tabular_linear(50, 4, 1), &budget())
            .unwrap()
            .seconds;
        for seconds in [small, large, regression] {
            assert!(seconds.is_finite() && seconds > 0.0, "{model}: {seconds}");
        }
        assert!(large > small, "{model}: {large} <= {small}");
    }
}

#[test]
fn a_short_time_limit_cuts_the_trees_and_the_settings() {
    let examples = synthetic::tabular_sign(4000, 10, 21);
    let mut budget = budget();
    budget.max_seconds = 0.3;
    for model in MODELS {
        let run = train(&Candidate::parse(model).unwrap(), &examples, &budget);
        if model == "kernel_ridge" {
            // Its one eigendecomposition cannot stop halfway: past the limit the run has no model
            // and says why with the typed error (the engine then tries another candidate, or
            // drops the run when the session's end cut it), or it made it in time.
            match run {
                Ok(run) => assert!(run.checkpoint().is_some()),
                Err(error @ easeml_trainer::Error::OutOfTime { .. }) => {
                    assert!(error.to_string().contains("time limit"), "{error}");
                }
                Err(error) => panic!("kernel_ridge: {error}"),
            }
            continue;
        }
        let run = run.unwrap();
        eprintln!(
            "{model}: {:.2}s, {} trials",
            run.cost_seconds,
            run.trials.len()
        );
        // A fit always makes one round or one tree and its validation is not cut (k-NN's is all
        // of its work): a margin, wide for a debug build on a loaded machine (alone, the trees
        // take under 0.5 s here).
        let margin = if model == "knn" { 10.0 } else { 5.0 };
        assert!(
            run.cost_seconds < budget.max_seconds + margin,
            "{model}: {:.2}s",
            run.cost_seconds
        );
        assert!(run.checkpoint().is_some(), "{model}: {:?}", run.outcome);
        // The trees the limit kept are at most those of a run without it (on a fast, idle machine
        // boosting may finish all of its rounds inside 0.3 s, so no count below that is certain:
        // the cost bound above is the check that the limit holds).
        let trees = |run: &easeml_trainer::TrainedRun| {
            let extra = run.checkpoint().unwrap().meta.extra.as_ref().unwrap();
            extra
                .get("trees")
                .and_then(|trees| trees.as_array())
                .map(Vec::len)
        };
        if let Some(cut) = trees(&run) {
            let mut unlimited = budget.clone();
            unlimited.max_seconds = 600.0;
            let full = train(&Candidate::parse(model).unwrap(), &examples, &unlimited).unwrap();
            let full = trees(&full).unwrap();
            assert!(
                cut <= full,
                "{model}: {cut} trees in 0.3 s, {full} without a limit"
            );
        }
    }
}

#[test]
fn degenerate_tables_train_without_panicking() {
    let one_class = table(
        2,
        (0..40).map(|i| i as f32).collect(),
        Targets::Classes {
            n_classes: 3,
            labels: vec![1; 20],
        },
    );
    let constant = table(
        3,
        vec![0.5; 90],
        Targets::Classes {
            n_classes: 2,
            labels: (0..30).map(|i| i % 2).collect(),
        },
    );
    let constant_regression = table(
        3,
        vec![1.0; 30],
        Targets::Dense {
            shape: vec![1],
            values: (0..10).map(|i| i as f32).collect(),
        },
    );
    let single = table(
        2,
        vec![1.0, 2.0],
        Targets::Classes {
            n_classes: 2,
            labels: vec![1],
        },
    );
    let single_regression = table(
        1,
        vec![3.0],
        Targets::Dense {
            shape: vec![1],
            values: vec![7.0],
        },
    );
    let mut not_finite_values: Vec<f32> = (0..80).map(|i| (i % 7) as f32).collect();
    not_finite_values[3] = f32::NAN;
    not_finite_values[10] = f32::INFINITY;
    not_finite_values[11] = f32::NEG_INFINITY;
    let not_finite = table(
        2,
        not_finite_values,
        Targets::Classes {
            n_classes: 2,
            labels: (0..40).map(|i| i64::from(i % 3 == 0)).collect(),
        },
    );
    for model in MODELS {
        for (name, examples) in [
            ("one class", &one_class),
            ("constant features", &constant),
            ("constant regression", &constant_regression),
            ("one example", &single),
            ("one regression example", &single_regression),
            ("values not finite", &not_finite),
        ] {
            let run = train(&Candidate::parse(model).unwrap(), examples, &budget())
                .unwrap_or_else(|error| panic!("{model} on {name}: {error}"));
            let Some(checkpoint) = run.checkpoint() else {
                panic!("{model} on {name}: {:?}", run.outcome);
            };
            let predictions = Predictor::new(checkpoint, Device::Cpu)
                .unwrap()
                .predict(&examples.inputs)
                .unwrap();
            assert_eq!(predictions.len(), examples.len(), "{model} on {name}");
            for prediction in &predictions {
                match prediction {
                    Prediction::Class { probabilities, .. } => {
                        assert!(
                            probabilities.iter().all(|p| p.is_finite()),
                            "{model} on {name}"
                        );
                    }
                    Prediction::Values { values, .. } => {
                        assert!(values.iter().all(|v| v.is_finite()), "{model} on {name}");
                    }
                    other => panic!("{model} on {name}: {other:?}"),
                }
            }
            if name == "one class" {
                assert!(
                    predictions
                        .iter()
                        .all(|p| matches!(p, Prediction::Class { index: 1, .. })),
                    "{model}: {predictions:?}"
                );
            }
        }
    }
}
