//! The cost estimate before training, for the scheduler: the work of a run (forward + backward is
//! about 3x forward; every epoch of every learning rate, of every fold and the refit under k-fold)
//! times the cost of one forward pass per
//! example. On the CPU that cost is measured: the model runs a batch of up to 8 examples (fewer
//! of large inputs: `COST_SAMPLE_MAX_VALUES`; best of two timed passes, after the pass that counts
//! its FLOPs), because on small inputs per-layer overhead,
//! not FLOPs, decides the speed (on 8x8 images SqueezeNet has the fewest FLOPs of the image models
//! and is still three times slower per epoch than NIN). On CUDA, where that timing would be of the
//! wrong device, it is the counted FLOPs divided by an assumed device speed. Either way it is a
//! prior: the scheduler calibrates it with the costs runs actually take.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use tch::{Device, nn};

use crate::batch::input_batch;
use crate::candidate::Candidate;
use crate::data::Examples;
use crate::error::Result;
use crate::models::{self, count_flops};
use crate::task::Task;
use crate::train::{Budget, Validation};

/// Assumed sustained FLOP/s of one CPU thread in training (a deliberately rough prior; the scheduler
/// replaces it with measured costs as runs finish).
pub const CPU_FLOPS_PER_THREAD: f64 = 5e9;
/// Assumed sustained FLOP/s of a CUDA device in training.
pub const CUDA_FLOPS: f64 = 2e13;

/// Examples in the batch a network's forward pass is measured on: up to 8, fewer when they would
/// hold more than [`COST_SAMPLE_MAX_VALUES`] input values (at least one).
const COST_SAMPLE_EXAMPLES: usize = 8;

/// The most input values the measured batch holds: 2^18, so 8 examples up to 32,768 values each
/// (a 104x104x3 image) and one 256x256x3 image. On large inputs the arithmetic, not per-layer
/// overhead, decides the speed, so one example measures it as well as eight; eight such images
/// made a session of 38 candidates (a 256x256x3 app) spend 5.4 s estimating before its first run.
const COST_SAMPLE_MAX_VALUES: usize = 1 << 18;

/// How many examples [`estimate_cost`] runs a network's forward pass on.
fn cost_sample_len(examples: &Examples) -> usize {
    let per_example = match &examples.inputs {
        crate::data::Inputs::Dense { shape, .. } => shape.iter().fold(1usize, |values, &side| {
            values.saturating_mul(usize::try_from(side).unwrap_or(1).max(1))
        }),
        _ => 1,
    };
    let fits = (COST_SAMPLE_MAX_VALUES / per_example.max(1)).max(1);
    examples.len().min(COST_SAMPLE_EXAMPLES).min(fits)
}

/// The predicted cost of a training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostEstimate {
    /// Forward FLOPs for one example.
    pub forward_flops_per_example: f64,
    /// FLOPs of the whole run at most (every epoch of every learning rate).
    pub total_flops: f64,
    /// Seconds of one forward pass per example: measured on the CPU, `forward_flops_per_example /
    /// CUDA_FLOPS` on CUDA.
    pub forward_seconds_per_example: f64,
    /// The seconds of the whole run at most, capped by the budget's `max_seconds`.
    pub seconds: f64,
}

/// Estimates the cost of `train(candidate, examples, budget)` without training.
pub fn estimate_cost(
    candidate: &Candidate,
    examples: &Examples,
    budget: &Budget,
) -> Result<CostEstimate> {
    let task = Task::of(examples)?;
    candidate.check_fits(&task)?;
    let validation = Validation::for_candidate(candidate, examples, budget);
    let sets = validation.sets(examples);
    let scaled = budget.for_run(examples, &sets);
    let budget = &scaled;
    // Rows trained and validated per epoch of one learning rate, over its folds (or the split).
    let trained: usize = sets.iter().map(|(train, _)| train.len()).sum();
    let validated: usize = sets.iter().map(|(_, validation)| validation.len()).sum();
    // The refit trains every example, without validation.
    let refit_rows = match validation {
        Validation::KFold { .. } => examples.len(),
        Validation::Split { .. } => 0,
    };
    let speed = match budget.device {
        Device::Cuda(_) => CUDA_FLOPS,
        _ => CPU_FLOPS_PER_THREAD * f64::from(tch::get_num_threads().max(1)),
    };
    if crate::classic::is_classic(candidate.model) {
        // A classic model's work is its fits, not epochs of forward and backward passes.
        let total_flops = crate::classic::run_flops(candidate.model, examples, &sets);
        let per_example = total_flops / examples.len().max(1) as f64;
        return Ok(CostEstimate {
            forward_flops_per_example: per_example,
            total_flops,
            forward_seconds_per_example: per_example / speed,
            seconds: (total_flops / speed).min(budget.max_seconds),
        });
    }
    let (forward, forward_seconds) = {
        let store = nn::VarStore::new(Device::Cpu);
        let model = crate::train::seeded_init(0, || {
            models::build(&store.root(), candidate, &task, &budget.model)
        })?;
        let _guard = tch::no_grad_guard();
        let sample: Vec<usize> = (0..cost_sample_len(examples)).collect();
        let per_example = sample.len().max(1) as f64;
        let steps = crate::batch::target_steps(examples, &sample);
        let batch = input_batch(
            &examples.inputs,
            &task,
            &budget.model,
            &sample,
            steps,
            Device::Cpu,
        );
        let flops = count_flops(|| {
            let _ = model.forward(&batch, false);
        }) as f64
            / per_example;
        let seconds = match budget.device {
            Device::Cuda(_) => flops / speed,
            _ => {
                let timed = || {
                    let started = Instant::now();
                    let _ = model.forward(&batch, false);
                    started.elapsed().as_secs_f64()
                };
                timed().min(timed()) / per_example
            }
        };
        (flops, seconds)
    };
    let rates = budget.learning_rates.len().max(1) as f64;
    let epochs = budget.max_epochs.max(1) as f64;
    // One learning rate's folds (or split), and the grid's.
    let rate_work = |per_example: f64| {
        epochs * (3.0 * per_example * trained as f64 + per_example * validated as f64)
    };
    // A k-fold network repeats its chosen rate's folds when they are cheap enough
    // (`train_k_fold`'s repeats, the rule of `classic::keeps_repeats`): counted when this
    // estimate of them is.
    let repeats = budget.k_fold_repeats.max(1);
    let bound = budget.repeats_bound();
    let repeated = matches!(validation, Validation::KFold { .. })
        && repeats > 1
        && crate::classic::keeps_repeats(rate_work(forward_seconds), 1, repeats, bound);
    let extra_rates = if repeated { (repeats - 1) as f64 } else { 0.0 };
    let run_work = |per_example: f64| {
        (rates + extra_rates) * rate_work(per_example)
            + epochs * 3.0 * per_example * refit_rows as f64
    };
    let total_flops = run_work(forward);
    Ok(CostEstimate {
        forward_flops_per_example: forward,
        total_flops,
        forward_seconds_per_example: forward_seconds,
        seconds: run_work(forward_seconds).min(budget.max_seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic;

    #[test]
    fn large_inputs_are_measured_on_fewer_examples() {
        let sample = |side: i64, count: usize| {
            cost_sample_len(&synthetic::quadrant_images(count, [side, side, 3], 1))
        };
        // Small images: eight, or as many as there are.
        assert_eq!(sample(8, 40), 8);
        assert_eq!(sample(8, 3), 3);
        // 104x104x3 = 32,448 values: eight still fit in 2^18.
        assert_eq!(sample(104, 40), 8);
        // 128x128x3: five; 256x256x3 and larger: one.
        assert_eq!(sample(128, 40), 5);
        assert_eq!(sample(256, 10), 1);
        assert_eq!(sample(400, 2), 1);
    }
}
