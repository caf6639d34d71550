//! Trains two image classifiers and one sequence classifier on small synthetic data made here, and
//! prints each run's validation quality, measured cost, the cost estimated beforehand, and a
//! prediction from the reloaded checkpoint.
//!
//! `cargo run -p easeml-trainer --example train_small` (after `eval "$(cargo xtask env)"`);
//! `EASEML_DEVICE=cpu|cuda|cuda:N` picks the device.

use anyhow::{Context, Result};
use easeml_trainer::device::{choose_device, device_name};
use easeml_trainer::infer::Prediction;
use easeml_trainer::{Budget, Candidate, Predictor, estimate_cost, synthetic, train};

fn main() -> Result<()> {
    let device = choose_device()?;
    let mut budget = Budget::new(device);
    budget.max_epochs = 6;
    budget.patience = 2;
    budget.max_seconds = 120.0;
    println!(
        "device {}, {} threads, width x{}, learning rates {:?}",
        device_name(device),
        tch::get_num_threads(),
        budget.model.width,
        budget.learning_rates
    );
    let images = synthetic::quadrant_images(600, [16, 16, 3], 1);
    let sequences = synthetic::sequence_sign(600, 3, 2);
    let jobs = [
        (
            "resnet18",
            &images,
            "which quadrant is brighter, [16,16,3], 4 classes",
        ),
        (
            "alexnet+norm_k2",
            &images,
            "the same, f_2-normalized inputs",
        ),
        (
            "lstm",
            &sequences,
            "sign of a sum, sequences of 3..8 x [3], 2 classes",
        ),
    ];
    for (candidate_id, examples, what) in jobs {
        let candidate = Candidate::parse(candidate_id)?;
        let estimate = estimate_cost(&candidate, examples, &budget)?;
        let run = train(&candidate, examples, &budget)?;
        let checkpoint = run
            .checkpoint()
            .with_context(|| format!("{candidate_id} failed: {:?}", run.outcome))?;
        let predictor = Predictor::new(checkpoint, device)?;
        let first = predictor.predict(&examples.inputs)?.remove(0);
        let first = match first {
            Prediction::Class {
                index,
                probabilities,
            } => format!("class {index} (p = {:.2})", probabilities[index as usize]),
            other => format!("{other:?}"),
        };
        println!(
            "{candidate_id:>16}: quality {:.3}, cost {:.1}s (estimated {:.1}s, {:.2} MFLOP/example), \
             {} epochs over {} rates, best lr {}; first example -> {first}   [{what}]",
            run.quality().unwrap_or(0.0),
            run.cost_seconds,
            estimate.seconds,
            estimate.forward_flops_per_example / 1e6,
            run.curve.len(),
            run.trials.len(),
            checkpoint.meta.learning_rate,
        );
    }
    Ok(())
}
