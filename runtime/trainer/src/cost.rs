//! The cost estimate before training, for the scheduler: the model's forward FLOPs per example
//! (counted by running one example through the layers), times the work of a run (forward + backward
//! is about 3x forward; every epoch of every learning rate), divided by an assumed device speed.

use serde::{Deserialize, Serialize};
use tch::{Device, nn};

use crate::batch::input_batch;
use crate::candidate::{Candidate, ModelKind};
use crate::data::{Examples, split_by_id};
use crate::error::Result;
use crate::models::{self, count_flops};
use crate::task::Task;
use crate::train::Budget;

/// Assumed sustained FLOP/s of one CPU thread in training (a deliberately rough prior; the scheduler
/// replaces it with measured costs as runs finish).
pub const CPU_FLOPS_PER_THREAD: f64 = 5e9;
/// Assumed sustained FLOP/s of a CUDA device in training.
pub const CUDA_FLOPS: f64 = 2e13;

/// The predicted cost of a training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostEstimate {
    /// Forward FLOPs for one example.
    pub forward_flops_per_example: f64,
    /// FLOPs of the whole run at most (every epoch of every learning rate).
    pub total_flops: f64,
    /// `total_flops / device speed`, capped by the budget's `max_seconds`.
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
    let (train_rows, validation_rows) = split_by_id(&examples.ids, budget.validation_fraction);
    let forward = if candidate.model == ModelKind::TreeKernelSvm {
        // Kernel evaluations: about (nodes^2) per pair, n_train pairs per example.
        let nodes = 50.0;
        nodes * nodes * train_rows.len() as f64
    } else {
        let store = nn::VarStore::new(Device::Cpu);
        let model = models::build(&store.root(), candidate, &task, &budget.model)?;
        let _guard = tch::no_grad_guard();
        let sample: Vec<usize> = (0..examples.len().min(8)).collect();
        let steps = crate::batch::target_steps(examples, &sample);
        let batch = input_batch(
            &examples.inputs,
            &task,
            &budget.model,
            &sample,
            steps,
            Device::Cpu,
        );
        count_flops(|| {
            let _ = model.forward(&batch, false);
        }) as f64
            / sample.len().max(1) as f64
    };
    let epochs = budget.max_epochs.max(1) as f64 * budget.learning_rates.len().max(1) as f64;
    let total_flops =
        epochs * (3.0 * forward * train_rows.len() as f64 + forward * validation_rows.len() as f64);
    let speed = match budget.device {
        Device::Cuda(_) => CUDA_FLOPS,
        _ => CPU_FLOPS_PER_THREAD * f64::from(tch::get_num_threads().max(1)),
    };
    Ok(CostEstimate {
        forward_flops_per_example: forward,
        total_flops,
        seconds: (total_flops / speed).min(budget.max_seconds),
    })
}
