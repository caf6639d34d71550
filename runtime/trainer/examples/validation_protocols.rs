//! The split against k-fold cross-validation on small data: for several small synthetic data sets
//! (and one classifier), each protocol's reported quality and the accuracy of the model it serves
//! on 2000 fresh examples of the same task, under the same budget. Prints one row per data set and
//! the mean absolute gap between reported and held-out quality per protocol.
//!
//! `cargo run -p easeml-trainer --example validation_protocols [N] [DATA SETS]` (after
//! `eval "$(cargo xtask env)"`); N = 50 examples and 10 data sets by default.

use anyhow::{Context, Result};
use easeml_trainer::infer::Prediction;
use easeml_trainer::{
    Budget, Candidate, Examples, Predictor, Targets, TrainedRun, synthetic, train,
};
use tch::Device;

/// Accuracy of the run's checkpoint on `held_out`.
fn held_out_accuracy(run: &TrainedRun, held_out: &Examples) -> Result<f64> {
    let predictor = Predictor::new(run.checkpoint().context("the run failed")?, Device::Cpu)?;
    let predictions = predictor.predict(&held_out.inputs)?;
    let Targets::Classes { labels, .. } = &held_out.targets else {
        anyhow::bail!("not classes")
    };
    let correct = Prediction::count_correct(&predictions, labels.iter().copied());
    Ok(correct as f64 / labels.len() as f64)
}

fn main() -> Result<()> {
    tch::set_num_threads(1);
    let mut arguments = std::env::args().skip(1);
    let n: usize = arguments.next().map_or(Ok(50), |n| n.parse())?;
    let data_sets: u64 = arguments.next().map_or(Ok(10), |n| n.parse())?;
    let candidate = Candidate::parse("mlp_small")?;
    let mut budget = Budget::new(Device::Cpu);
    budget.max_seconds = 20.0;
    let mut split_budget = budget.clone();
    split_budget.k_fold_below = 0;
    split_budget.k_fold_below_tables = 0;
    let held_out = synthetic::tabular_sign(2000, 4, 999);
    println!(
        "{n} examples, mlp_small, grid {:?}, {} s limit",
        budget.learning_rates, budget.max_seconds
    );
    println!(
        "data  split: reported  held-out  seconds   k-fold: reported (std)  held-out  seconds"
    );
    let (mut split_gap, mut k_fold_gap) = (0.0, 0.0);
    let (mut split_held, mut k_fold_held) = (0.0, 0.0);
    for seed in 0..data_sets {
        let examples = synthetic::tabular_sign(n, 4, 100 + seed);
        let split = train(&candidate, &examples, &split_budget)?;
        let k_fold = train(&candidate, &examples, &budget)?;
        let (split_quality, k_fold_quality) = (
            split.quality().context("split run failed")?,
            k_fold.quality().context("k-fold run failed")?,
        );
        let split_accuracy = held_out_accuracy(&split, &held_out)?;
        let k_fold_accuracy = held_out_accuracy(&k_fold, &held_out)?;
        split_gap += (split_quality - split_accuracy).abs();
        k_fold_gap += (k_fold_quality - k_fold_accuracy).abs();
        split_held += split_accuracy;
        k_fold_held += k_fold_accuracy;
        println!(
            "{seed:>4}  {split_quality:>15.3}  {split_accuracy:>8.3}  {:>7.1}   {k_fold_quality:>9.3} ({:.3})  {k_fold_accuracy:>8.3}  {:>7.1}{}",
            split.cost_seconds,
            k_fold.quality_std.unwrap_or(f64::NAN),
            k_fold.cost_seconds,
            k_fold
                .refit
                .as_ref()
                .and_then(|refit| refit.fallback.as_deref())
                .map_or(String::new(), |why| format!("  ({why})"))
        );
    }
    let count = data_sets.max(1) as f64;
    println!(
        "mean held-out accuracy: split {:.3}, k-fold {:.3}; mean |reported - held-out|: split {:.3}, k-fold {:.3}",
        split_held / count,
        k_fold_held / count,
        split_gap / count,
        k_fold_gap / count
    );
    Ok(())
}
