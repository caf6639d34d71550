//! Time-series classification on real data: each model trained with the default budget on the CPU
//! (`easeml_trainer::train`), then its test accuracy, seconds and checkpoint size.
//!
//! `cargo run -p easeml-trainer --example timeseries_classic -- TRAIN TEST [MODEL...]` (models:
//! `minirocket dtw_knn gru` unless given). Files: one series per line, `LABEL<TAB>STEPS`, steps
//! separated by `;`, the values of a step by `,` (`nan` for a missing value). The data are not in
//! the repository: the UCR/UEA sets inside sktime's wheel convert to this format (see the report of
//! the `seqclassic` branch, issue 14).

use std::collections::BTreeMap;
use std::time::Instant;

use easeml_trainer::data::Sequences;
use easeml_trainer::{
    Budget, Candidate, Examples, Inputs, Prediction, Predictor, RunOutcome, Targets, train,
};
use tch::Device;

fn read(path: &str) -> anyhow::Result<Vec<(String, Vec<Vec<f32>>)>> {
    let text = std::fs::read_to_string(path)?;
    let mut rows = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let (label, steps) = line
            .split_once('\t')
            .ok_or_else(|| anyhow::anyhow!("no tab in a line of {path}"))?;
        let steps = steps
            .split(';')
            .map(|step| {
                step.split(',')
                    .map(|value| value.trim().parse::<f32>().unwrap_or(f32::NAN))
                    .collect()
            })
            .collect();
        rows.push((label.to_owned(), steps));
    }
    Ok(rows)
}

fn examples(
    rows: &[(String, Vec<Vec<f32>>)],
    classes: &BTreeMap<String, i64>,
) -> anyhow::Result<Examples> {
    let step = rows.first().map_or(1, |(_, steps)| steps[0].len()) as i64;
    let series: Vec<Vec<Vec<f32>>> = rows.iter().map(|(_, steps)| steps.clone()).collect();
    Ok(Examples {
        ids: Examples::sequential_ids(rows.len()),
        inputs: Inputs::Sequences(Sequences::from_nested(step, &series)?),
        targets: Targets::Classes {
            n_classes: classes.len() as i64,
            labels: rows.iter().map(|(label, _)| classes[label]).collect(),
        },
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [train_path, test_path, models @ ..] = args.as_slice() else {
        anyhow::bail!("usage: timeseries_classic TRAIN TEST [MODEL...]");
    };
    let models: Vec<&str> = if models.is_empty() {
        vec!["minirocket", "dtw_knn", "gru"]
    } else {
        models.iter().map(String::as_str).collect()
    };
    let (train_rows, test_rows) = (read(train_path)?, read(test_path)?);
    let mut classes = BTreeMap::new();
    for (label, _) in train_rows.iter().chain(&test_rows) {
        let next = classes.len() as i64;
        classes.entry(label.clone()).or_insert(next);
    }
    let (train_set, test_set) = (
        examples(&train_rows, &classes)?,
        examples(&test_rows, &classes)?,
    );
    let Targets::Classes { labels, .. } = &test_set.targets else {
        unreachable!()
    };
    println!(
        "{} training, {} test series, {} classes",
        train_rows.len(),
        test_rows.len(),
        classes.len()
    );
    for model in models {
        let budget = Budget::new(Device::Cpu);
        let started = Instant::now();
        let run = train(&Candidate::parse(model)?, &train_set, &budget)?;
        let train_seconds = started.elapsed().as_secs_f64();
        let quality = match &run.outcome {
            RunOutcome::Succeeded { quality, .. } => *quality,
            RunOutcome::Failed { reason } => {
                println!("{model}: failed after {train_seconds:.1}s: {reason}");
                continue;
            }
        };
        let checkpoint = run
            .checkpoint()
            .ok_or_else(|| anyhow::anyhow!("no checkpoint"))?;
        let state_bytes = checkpoint
            .meta
            .extra
            .as_ref()
            .map_or(0, |extra| extra.to_string().len());
        let started = Instant::now();
        let predictions = Predictor::new(checkpoint, Device::Cpu)?.predict(&test_set.inputs)?;
        let predict_seconds = started.elapsed().as_secs_f64();
        let correct = Prediction::count_correct(&predictions, labels.iter().copied());
        println!(
            "{model}: test accuracy {:.4} ({correct}/{}), validation quality {quality:.4} ({:?}), \
             train {train_seconds:.1}s, predict {predict_seconds:.1}s, state {state_bytes} bytes, \
             settings tried {:?}",
            correct as f64 / labels.len() as f64,
            labels.len(),
            run.validation,
            run.trials
                .iter()
                .map(|trial| trial.learning_rate.to_bits())
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
        );
    }
    Ok(())
}
