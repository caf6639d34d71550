//! Peak memory of a training run on 10 000 examples of `[32,32,3]` (ResNet-18 at the CPU width, one
//! epoch, one learning rate), against the size of the model, its Adam state and one batch of
//! activations. The examples themselves (one contiguous buffer, 123 MB) are made before the baseline
//! is taken: they belong to the caller, not to the run.
//!
//! `cargo run -p easeml-trainer --example bench_memory` (Linux: reads `VmHWM` from /proc).

use anyhow::{Context, Result};
use easeml_trainer::models::{self, BatchInput};
use easeml_trainer::{Budget, Candidate, Task, synthetic, train};
use tch::{Device, Kind, Tensor, nn};

/// Peak resident memory so far, in bytes.
fn peak_rss() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    let kilobytes: u64 = line
        .split_whitespace()
        .nth(1)
        .context("bad VmHWM line")?
        .parse()?;
    Ok(kilobytes * 1024)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn main() -> Result<()> {
    let examples = synthetic::quadrant_images(10_000, [32, 32, 3], 1);
    let mut budget = Budget::new(Device::Cpu);
    budget.learning_rates = vec![0.01];
    budget.max_epochs = 1;
    let candidate = Candidate::parse("resnet18")?;
    let task = Task::of(&examples)?;

    // Model size and one batch of activations, measured on a separate copy of the model; then a
    // short run on a few examples warms libtorch up before the baseline.
    let store = nn::VarStore::new(Device::Cpu);
    let model = models::build(&store.root(), &candidate, &task, &budget.model)?;
    let parameters: u64 = store
        .trainable_variables()
        .iter()
        .map(|tensor| 4 * tensor.numel() as u64)
        .sum();
    let batch = Tensor::rand(
        [budget.batch_size as i64, 32, 32, 3],
        (Kind::Float, Device::Cpu),
    );
    let (_, activations) = models::forward_footprint(|| {
        let _ = model.forward(&BatchInput::Dense(batch), true);
    });
    let warmup = synthetic::quadrant_images(64, [32, 32, 3], 2);
    train(&candidate, &warmup, &budget)?;
    let baseline = peak_rss()?;

    let run = train(&candidate, &examples, &budget)?;
    let peak = peak_rss()?;
    // Weights, gradients, Adam's two moments, and the best-weights snapshot.
    let model_and_optimizer = 5 * parameters;
    let bound = model_and_optimizer + activations;
    println!(
        "resnet18 width x{}, batch {}, {} examples ({:.0} MB of data, made before the baseline)",
        budget.model.width,
        budget.batch_size,
        examples.len(),
        mb(4 * 10_000 * 32 * 32 * 3)
    );
    println!(
        "run: quality {:.3}, {:.1}s; peak RSS grew by {:.1} MB (baseline {:.1} MB, peak {:.1} MB)",
        run.quality().unwrap_or(0.0),
        run.cost_seconds,
        mb(peak.saturating_sub(baseline)),
        mb(baseline),
        mb(peak)
    );
    println!(
        "model {:.1} MB x5 (weights, grads, Adam moments, snapshot) = {:.1} MB, one batch of \
         activations >= {:.1} MB: bound {:.1} MB, ratio {:.2} (target <= 2)",
        mb(parameters),
        mb(model_and_optimizer),
        mb(activations),
        mb(bound),
        peak.saturating_sub(baseline) as f64 / bound as f64
    );
    Ok(())
}
