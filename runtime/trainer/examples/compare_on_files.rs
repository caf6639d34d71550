//! Trains candidates on a real data set from two JSON Lines files and prints, per candidate, the run's
//! validation quality, its accuracy on the held-out file and its seconds (one CPU thread, the default
//! budget: the paper's grid of three rates, 20 epochs, k-fold below 200 examples, 1,000 rows of a table).
//!
//! ```text
//! cargo run -p easeml-trainer --example compare_on_files -- TRAIN.jsonl HELDOUT.jsonl fcn,gru
//! ```
//!
//! Each line is `{"x": X, "y": CLASS_INDEX}`, with `X` a sequence of steps (`[[f32; A], ...]`, a
//! time series) or a flat list of values (an image, then give its shape as `--image H,W,C`).

use easeml_trainer::data::Sequences;
use easeml_trainer::infer::Prediction;
use easeml_trainer::{
    Budget, Candidate, Examples, Inputs, Predictor, Targets, estimate_cost, train,
};
use serde_json::Value;
use tch::Device;

fn read(path: &str, image: Option<&[i64]>) -> (Inputs, Vec<i64>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let mut labels = Vec::new();
    let mut sequences: Vec<Vec<Vec<f32>>> = Vec::new();
    let mut flat: Vec<f32> = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap();
        labels.push(value["y"].as_i64().unwrap());
        let numbers = |value: &Value| -> Vec<f32> {
            value
                .as_array()
                .unwrap()
                .iter()
                .map(|number| number.as_f64().unwrap() as f32)
                .collect()
        };
        match image {
            Some(_) => flat.extend(numbers(&value["x"])),
            None => sequences.push(value["x"].as_array().unwrap().iter().map(numbers).collect()),
        }
    }
    let inputs = match image {
        Some(shape) => Inputs::Dense {
            shape: shape.to_vec(),
            values: flat,
        },
        None => {
            let step = sequences[0][0].len() as i64;
            Inputs::Sequences(Sequences::from_nested(step, &sequences).unwrap())
        }
    };
    (inputs, labels)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let image: Option<Vec<i64>> = args.iter().position(|arg| arg == "--image").map(|index| {
        args[index + 1]
            .split(',')
            .map(|dim| dim.parse().unwrap())
            .collect()
    });
    let positional: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(index, arg)| {
            !arg.starts_with("--") && (*index == 0 || args[index - 1] != "--image")
        })
        .map(|(_, arg)| arg)
        .collect();
    let [train_path, heldout_path, models] = positional[..] else {
        panic!("usage: TRAIN.jsonl HELDOUT.jsonl MODEL[,MODEL...] [--image H,W,C]");
    };
    let (inputs, labels) = read(train_path, image.as_deref());
    let (heldout, heldout_labels) = read(heldout_path, image.as_deref());
    let n_classes = labels.iter().chain(&heldout_labels).max().unwrap() + 1;
    let examples = Examples {
        ids: Examples::sequential_ids(labels.len()),
        inputs,
        targets: Targets::Classes { n_classes, labels },
    };
    tch::set_num_threads(1);
    let mut budget = Budget::new(Device::Cpu);
    // `EPOCHS=N` and `PATIENCE=N` override the default 20 and 3 (for diagnosis).
    let number = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.parse().ok())
    };
    if let Some(epochs) = number("EPOCHS") {
        budget.max_epochs = epochs;
    }
    if let Some(patience) = number("PATIENCE") {
        budget.patience = patience;
    }
    for model in models.split(',') {
        let candidate = Candidate::parse(model).unwrap();
        let estimate = estimate_cost(&candidate, &examples, &budget).unwrap();
        let run = train(&candidate, &examples, &budget).unwrap();
        let accuracy = run.checkpoint().map(|checkpoint| {
            let predictor = Predictor::new(checkpoint, Device::Cpu).unwrap();
            let predictions = predictor.predict(&heldout).unwrap();
            let correct = Prediction::count_correct(&predictions, heldout_labels.iter().copied());
            correct as f64 / heldout_labels.len() as f64
        });
        let refit = run.refit.as_ref().map_or(String::new(), |refit| {
            format!(
                ", refit: rate {} for {}/{} epochs{}",
                refit.learning_rate,
                refit.epochs,
                refit.planned_epochs,
                refit
                    .fallback
                    .as_ref()
                    .map_or(String::new(), |why| format!(" (fold model served: {why})"))
            )
        });
        println!(
            "{model}: validation {:.3} ({}), held-out accuracy {}, {:.1} s (estimated {:.1} s){refit}",
            run.quality().unwrap_or(f64::NAN),
            run.protocol(),
            accuracy.map_or("-".to_owned(), |accuracy| format!("{accuracy:.3}")),
            run.cost_seconds,
            estimate.seconds,
        );
    }
}
