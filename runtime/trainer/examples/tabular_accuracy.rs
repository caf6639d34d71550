//! Test accuracy (classification) or R^2 (regression) of the tabular candidates on a table read
//! from a CSV file: one row per example, the features then the target in the last column (a class
//! index, or with `--regression` a real value). The rows are shuffled with a fixed seed and split
//! 80/20; each candidate trains on the 80% with the default `Budget` (its own validation protocol
//! inside it) and is scored on the 20% through its reloaded checkpoint; each setting's mean
//! validation quality is printed below (a forest's 1 and -1: the random forest and extra trees).
//!
//! `cargo run --release -p easeml-trainer --example tabular_accuracy -- FILE.csv [--regression]
//! [CANDIDATE...]` (after `source <(cargo xtask env)`); the candidates default to gbdt,
//! random_forest, knn, mlp_small and logistic (linear for regression). The data is not part of
//! the repository (DECISIONS.md names the scikit-learn data sets measured).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use easeml_trainer::device::choose_device;
use easeml_trainer::infer::Prediction;
use easeml_trainer::synthetic::Rng;
use easeml_trainer::{
    Budget, Candidate, Checkpoint, Examples, Inputs, Predictor, Targets, TrainedRun, estimate_cost,
    train,
};

fn main() -> Result<()> {
    let mut arguments: Vec<String> = std::env::args().skip(1).collect();
    let regression = arguments.iter().any(|argument| argument == "--regression");
    arguments.retain(|argument| argument != "--regression");
    let Some(path) = arguments.first().cloned() else {
        bail!("usage: tabular_accuracy FILE.csv [--regression] [CANDIDATE...]");
    };
    let mut candidates: Vec<String> = arguments[1..].to_vec();
    if candidates.is_empty() {
        let last = if regression { "linear" } else { "logistic" };
        candidates = ["gbdt", "random_forest", "knn", "mlp_small", last]
            .map(String::from)
            .to_vec();
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Vec<f32> = line
            .split(',')
            .map(|field| field.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("line {}", number + 1))?;
        if row.len() < 2 || rows.first().is_some_and(|first| first.len() != row.len()) {
            bail!("line {} has {} fields", number + 1, row.len());
        }
        rows.push(row);
    }
    // A fixed shuffle, then 80/20.
    let mut rng = Rng::new(2024);
    for index in (1..rows.len()).rev() {
        let other = rng.below(index as u64 + 1) as usize;
        rows.swap(index, other);
    }
    let n_train = rows.len() * 4 / 5;
    let (train_rows, test_rows) = rows.split_at(n_train);
    let n_classes = if regression {
        0
    } else {
        rows.iter()
            .map(|row| row[row.len() - 1] as i64)
            .max()
            .unwrap_or(0)
            + 1
    };
    let examples = |part: &[Vec<f32>], first_id: u64| -> Examples {
        let features = part[0].len() - 1;
        let values = part
            .iter()
            .flat_map(|row| row[..features].iter().copied())
            .collect();
        let targets = if regression {
            Targets::Dense {
                shape: vec![1],
                values: part.iter().map(|row| row[features]).collect(),
            }
        } else {
            Targets::Classes {
                n_classes,
                labels: part.iter().map(|row| row[features] as i64).collect(),
            }
        };
        Examples {
            ids: (first_id..first_id + part.len() as u64).collect(),
            inputs: Inputs::Dense {
                shape: vec![features as i64],
                values,
            },
            targets,
        }
    };
    let train_examples = examples(train_rows, 0);
    let test_examples = examples(test_rows, train_rows.len() as u64);
    let device = choose_device()?;
    let budget = Budget::new(device);
    let test_sum: f64 = test_rows
        .iter()
        .map(|row| f64::from(row[row.len() - 1]))
        .sum();
    println!(
        "{path}: {} train, {} test (target sum {test_sum}), {} features{}",
        train_rows.len(),
        test_rows.len(),
        rows[0].len() - 1,
        if regression {
            ", regression (R^2)".to_owned()
        } else {
            format!(", {n_classes} classes (accuracy)")
        }
    );
    for id in candidates {
        let candidate = Candidate::parse(&id)?;
        let estimate = estimate_cost(&candidate, &train_examples, &budget)?;
        let started = Instant::now();
        let run = train(&candidate, &train_examples, &budget)?;
        let seconds = started.elapsed().as_secs_f64();
        let Some(checkpoint) = run.checkpoint() else {
            println!("{id:>14}: failed: {:?}", run.outcome);
            continue;
        };
        // Through a saved and reloaded checkpoint, as a served model.
        let dir = std::env::temp_dir().join(format!("easeml-tabular-{}-{id}", std::process::id()));
        checkpoint.save(&dir)?;
        let reloaded = Checkpoint::load(&dir)?;
        let size = std::fs::metadata(dir.join("model.json")).map_or(0, |m| m.len());
        std::fs::remove_dir_all(&dir).ok();
        let predictor = Predictor::new(&reloaded, device)?;
        let predictions = predictor.predict(&test_examples.inputs)?;
        let score = test_score(&predictions, &test_examples.targets, &id)?;
        println!(
            "{id:>14}: test {score:.3}  validation {:.3}  fit {seconds:.2}s  (estimated {:.2}s)  \
             setting {}  {:?}  checkpoint {} KiB",
            run.quality().unwrap_or(f64::NAN),
            estimate.seconds,
            reloaded.meta.learning_rate,
            run.validation,
            size / 1024,
        );
        println!(
            "{:>14}  settings' validation means: {}",
            "",
            setting_means(&run)
        );
    }
    Ok(())
}

/// Each setting's mean validation quality over its folds (the choice the run made), as
/// `setting: mean` pairs.
fn setting_means(run: &TrainedRun) -> String {
    let mut settings: Vec<(f64, f64, usize)> = Vec::new();
    for trial in &run.trials {
        let Some(quality) = trial.best_quality else {
            continue;
        };
        match settings
            .iter_mut()
            .find(|(setting, ..)| *setting == trial.learning_rate)
        {
            Some((_, sum, count)) => (*sum, *count) = (*sum + quality, *count + 1),
            None => settings.push((trial.learning_rate, quality, 1)),
        }
    }
    let means: Vec<String> = settings
        .iter()
        .map(|(setting, sum, count)| format!("{setting}: {:.4}", sum / *count as f64))
        .collect();
    means.join(", ")
}

/// The test accuracy (classes) or R^2 (values) of `predictions` against `targets`.
fn test_score(predictions: &[Prediction], targets: &Targets, id: &str) -> Result<f64> {
    Ok(match targets {
        Targets::Classes { labels, .. } => {
            let correct = Prediction::count_correct(predictions, labels.iter().copied());
            correct as f64 / labels.len() as f64
        }
        Targets::Dense { values, .. } => {
            let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
            let (mut residual, mut total) = (0.0, 0.0);
            for (prediction, &actual) in predictions.iter().zip(values) {
                let Prediction::Values { values: got, .. } = prediction else {
                    bail!("{id} predicted no values");
                };
                residual += (f64::from(got[0]) - f64::from(actual)).powi(2);
                total += (f64::from(actual) - mean).powi(2);
            }
            1.0 - residual / total.max(f64::MIN_POSITIVE)
        }
        _ => bail!("unexpected targets"),
    })
}
