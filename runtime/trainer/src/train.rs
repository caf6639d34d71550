//! A training run: (candidate, examples, budget) to a checkpoint, a validation quality in `[0,1]`, the
//! measured cost and the learning curve.
//!
//! The examples are split by id (see [`crate::data::split_by_id`]); each learning rate of the grid
//! (the paper's {0.1, 0.01, 0.001}) is tried with Adam from the same seed-derived initialization, with
//! early stopping on the validation quality; the best weights over all trials are kept. A trial whose
//! loss or outputs become NaN or infinite fails; when every trial fails the run is
//! [`RunOutcome::Failed`], never a panic.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor, nn};

use crate::batch::{
    QualityAccumulator, TargetBatch, input_batch, loss, target_batch, target_steps,
};
use crate::candidate::{Candidate, ModelKind};
use crate::checkpoint::{Checkpoint, CheckpointMeta, safetensors_bytes};
use crate::data::{Examples, Inputs, mix64, split_by_id};
use crate::error::Result;
use crate::models::recovery::Discriminator;
use crate::models::{self, BatchInput, Model, ModelConfig};
use crate::task::Task;

/// What a run may spend, and how it trains.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The learning-rate grid, in order of preference; each is tried and the best kept, unless one
    /// epoch is too slow for the grid to fit the time limit (see [`min_epochs_per_rate`]).
    pub learning_rates: Vec<f64>,
    /// Epochs per learning rate at most.
    pub max_epochs: usize,
    /// Wall-clock seconds for the whole run (split evenly over the grid).
    pub max_seconds: f64,
    /// Examples per batch.
    pub batch_size: usize,
    /// Epochs without a better validation quality before stopping.
    pub patience: usize,
    /// Share of the examples (by id hash) held out for validation.
    pub validation_fraction: f64,
    /// The base seed; trial `i` uses a seed derived from it and records it.
    pub seed: u64,
    /// Widths of the models.
    pub model: ModelConfig,
    /// The device.
    pub device: Device,
    /// Autocast (float16) forward passes on CUDA; ignored on the CPU. Off by default: without a
    /// gradient scaler small gradients can underflow, so it is an explicit choice.
    pub mixed_precision: bool,
}

impl Budget {
    /// The paper's grid (Adam's default rate 0.001 first, then 0.01 and 0.1), 20 epochs, 10 minutes,
    /// batch 32, patience 3, 20% validation, on `device`.
    pub fn new(device: Device) -> Self {
        Self {
            learning_rates: vec![0.001, 0.01, 0.1],
            max_epochs: 20,
            max_seconds: 600.0,
            batch_size: 32,
            patience: 3,
            validation_fraction: 0.2,
            seed: 0,
            model: ModelConfig::for_device(device),
            device,
            mixed_precision: false,
        }
    }
}

/// One point of the learning curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The trial's learning rate.
    pub learning_rate: f64,
    /// The epoch (from 1).
    pub epoch: usize,
    /// The mean training loss of the epoch.
    pub train_loss: f64,
    /// The validation quality after the epoch.
    pub validation_quality: f64,
    /// Seconds since the run started.
    pub seconds: f64,
}

/// One learning rate of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningRateTrial {
    /// The learning rate.
    pub learning_rate: f64,
    /// The seed of the initialization and the shuffles.
    pub seed: u64,
    /// Epochs run.
    pub epochs: usize,
    /// The best validation quality, when the trial did not fail.
    pub best_quality: Option<f64>,
    /// Why the trial failed (e.g. "loss is NaN at epoch 1").
    pub failure: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// At least one trial trained: the best weights.
    Succeeded {
        /// The kept weights and their metadata.
        checkpoint: Checkpoint,
        /// Their validation quality in `[0,1]`.
        quality: f64,
    },
    /// Every trial failed (diverged).
    Failed {
        /// Why, e.g. every trial's failure.
        reason: String,
    },
}

/// The result of a training run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainedRun {
    /// The candidate id.
    pub candidate: String,
    /// The outcome.
    pub outcome: RunOutcome,
    /// Measured wall-clock seconds of the whole run.
    pub cost_seconds: f64,
    /// The learning curve of every trial.
    pub curve: Vec<CurvePoint>,
    /// One entry per learning rate, with its seed.
    pub trials: Vec<LearningRateTrial>,
    /// Examples used for training and for validation.
    pub n_train: usize,
    /// See `n_train`.
    pub n_validation: usize,
}

impl TrainedRun {
    /// The validation quality, or `None` for a failed run.
    pub fn quality(&self) -> Option<f64> {
        match &self.outcome {
            RunOutcome::Succeeded { quality, .. } => Some(*quality),
            RunOutcome::Failed { .. } => None,
        }
    }

    /// The checkpoint, or `None` for a failed run.
    pub fn checkpoint(&self) -> Option<&Checkpoint> {
        match &self.outcome {
            RunOutcome::Succeeded { checkpoint, .. } => Some(checkpoint),
            RunOutcome::Failed { .. } => None,
        }
    }
}

/// The fewest epochs worth giving one learning rate: the early-stopping patience plus two, so a rate
/// can show gains beyond one patience window. The time limit is split evenly over the grid; when the
/// first epoch of a trial shows that the rates still to try cannot each get this many epochs in the
/// time left, that trial keeps the whole rest of the time and the rates after it are not tried
/// (recorded as such): one well-trained model beats three that barely started, which is what an
/// expensive model under a short limit (an image network on the CPU) would otherwise get.
pub fn min_epochs_per_rate(budget: &Budget) -> usize {
    budget.patience.max(1) + 2
}

/// Trains `candidate` on `examples` within `budget`.
pub fn train(candidate: &Candidate, examples: &Examples, budget: &Budget) -> Result<TrainedRun> {
    let started = Instant::now();
    let task = Task::of(examples)?;
    candidate.check_fits(&task)?;
    let (train_rows, validation_rows) = split_by_id(&examples.ids, budget.validation_fraction);
    if candidate.model == ModelKind::TreeKernelSvm {
        return crate::tree_kernel::train_run(
            candidate,
            examples,
            &task,
            budget,
            &train_rows,
            &validation_rows,
            started,
        );
    }
    let mut run = TrainedRun {
        candidate: candidate.id(),
        outcome: RunOutcome::Failed {
            reason: "no learning rate to try".into(),
        },
        cost_seconds: 0.0,
        curve: Vec::new(),
        trials: Vec::new(),
        n_train: train_rows.len(),
        n_validation: validation_rows.len(),
    };
    let mut best: Option<BestTrial> = None;
    let n_rates = budget.learning_rates.len().max(1);
    for (trial_index, &learning_rate) in budget.learning_rates.iter().enumerate() {
        let seed = trial_seed(budget, trial_index);
        let deadline = budget.max_seconds * (trial_index + 1) as f64 / n_rates as f64;
        let mut context = TrialContext {
            candidate,
            examples,
            task: &task,
            budget,
            train_rows: &train_rows,
            validation_rows: &validation_rows,
            started,
            deadline,
            rates_left: n_rates - trial_index,
            takes_the_rest: None,
        };
        let trial = run_trial(&mut context, learning_rate, seed, &mut run.curve)?;
        let (trial_record, kept) = trial;
        if let (Some(quality), Some(weights)) = (trial_record.best_quality, kept)
            && best.as_ref().is_none_or(|best| quality > best.quality)
        {
            best = Some(BestTrial {
                quality,
                learning_rate,
                seed,
                weights,
            });
        }
        run.trials.push(trial_record);
        if let Some(epoch_seconds) = context.takes_the_rest {
            for (skipped, &learning_rate) in budget
                .learning_rates
                .iter()
                .enumerate()
                .skip(trial_index + 1)
            {
                run.trials.push(LearningRateTrial {
                    learning_rate,
                    seed: trial_seed(budget, skipped),
                    epochs: 0,
                    best_quality: None,
                    failure: Some(format!(
                        "not tried: an epoch took {epoch_seconds:.1} s, too slow to give {} rates \
                         {} epochs each in the {:.0} s limit",
                        n_rates - trial_index,
                        min_epochs_per_rate(budget),
                        budget.max_seconds
                    )),
                });
            }
            break;
        }
    }
    run.outcome = match best {
        Some(BestTrial {
            quality,
            learning_rate,
            seed,
            weights,
        }) => RunOutcome::Succeeded {
            checkpoint: Checkpoint {
                meta: CheckpointMeta {
                    candidate: candidate.id(),
                    task: task.clone(),
                    config: budget.model,
                    learning_rate,
                    seed,
                    extra: None,
                },
                weights: safetensors_bytes(&weights)?,
            },
            quality,
        },
        None => RunOutcome::Failed {
            reason: run
                .trials
                .iter()
                .map(|trial| {
                    format!(
                        "lr {}: {}",
                        trial.learning_rate,
                        trial.failure.as_deref().unwrap_or("no result")
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        },
    };
    run.cost_seconds = started.elapsed().as_secs_f64();
    Ok(run)
}

/// The seed of the grid's `index`-th trial.
fn trial_seed(budget: &Budget, index: usize) -> u64 {
    mix64(budget.seed ^ (index as u64).wrapping_mul(0x1000_0001))
}

struct TrialContext<'a> {
    candidate: &'a Candidate,
    examples: &'a Examples,
    task: &'a Task,
    budget: &'a Budget,
    train_rows: &'a [usize],
    validation_rows: &'a [usize],
    started: Instant,
    /// Seconds since `started` by which the trial stops.
    deadline: f64,
    /// The rates still to try, this one included.
    rates_left: usize,
    /// Set by the trial when it keeps the rest of the time: the seconds of its first epoch.
    takes_the_rest: Option<f64>,
}

/// The adversary of GAN and pix2pix, in its own `VarStore` (not part of the checkpoint).
struct Adversary {
    _store: nn::VarStore,
    discriminator: Discriminator,
    optimizer: nn::Optimizer,
}

/// Named weights, as the `VarStore` names them.
type Weights = Vec<(String, Tensor)>;

/// The best trial so far: quality, learning rate, seed, weights.
struct BestTrial {
    quality: f64,
    learning_rate: f64,
    seed: u64,
    weights: Weights,
}

/// Serializes seeding + initialization (see `run_trial`).
static INIT_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A copy of every variable, on the CPU.
fn snapshot(store: &nn::VarStore) -> Weights {
    let mut named: Vec<(String, Tensor)> = store
        .variables()
        .into_iter()
        .map(|(name, tensor)| (name, tensor.detach().to_device(Device::Cpu).copy()))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

/// Trains one learning rate; returns its record and, unless it failed, its best weights.
fn run_trial(
    context: &mut TrialContext<'_>,
    learning_rate: f64,
    seed: u64,
    curve: &mut Vec<CurvePoint>,
) -> Result<(LearningRateTrial, Option<Weights>)> {
    let budget = context.budget;
    let device = budget.device;
    let mut record = LearningRateTrial {
        learning_rate,
        seed,
        epochs: 0,
        best_quality: None,
        failure: None,
    };
    if !(learning_rate.is_finite() && learning_rate > 0.0) {
        record.failure = Some(format!(
            "the learning rate {learning_rate} is not a positive number"
        ));
        return Ok((record, None));
    }
    let store = nn::VarStore::new(device);
    let mut model = {
        // libtorch's generator is process-wide: seeding and initializing under one lock makes the
        // initialization reproducible even when runs train concurrently.
        let _lock = INIT_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tch::manual_seed(seed as i64);
        models::build(
            &store.root(),
            context.candidate,
            context.task,
            &budget.model,
        )?
    };
    if let (Some(normalizer), Inputs::Dense { shape, values }) =
        (model.normalizer.as_mut(), &context.examples.inputs)
    {
        let shape = match context.task {
            Task::ImageClassification { input, .. } | Task::ImageRecovery { input, .. } => {
                input.clone()
            }
            _ => shape.clone(),
        };
        normalizer.fit(values, &shape, context.train_rows);
    }
    let mut optimizer = nn::Adam::default().build(&store, learning_rate)?;
    let mut adversary = match (context.candidate.model, context.task) {
        (ModelKind::Gan | ModelKind::Pix2Pix, Task::ImageRecovery { input, output }) => {
            let adversary_store = nn::VarStore::new(device);
            let discriminator = Discriminator::new(
                &adversary_store.root(),
                context.candidate.model,
                input,
                output,
                &budget.model,
            );
            let optimizer = nn::Adam::default().build(&adversary_store, learning_rate)?;
            Some(Adversary {
                _store: adversary_store,
                discriminator,
                optimizer,
            })
        }
        _ => None,
    };
    let mut best_weights = None;
    let mut best_quality = f64::NEG_INFINITY;
    let mut epochs_without_gain = 0;
    let mut order = context.train_rows.to_vec();
    let batch_size = budget.batch_size.max(1);
    let trial_started = context.started.elapsed().as_secs_f64();
    // The time limit is a promise (`constraint train_time`, the engine's run limit): a batch is
    // only started when it and the evaluation after it still fit before the deadline. The
    // evaluation's time is measured after the first one; before that it is estimated from the
    // batches (a forward pass over the validation rows is about a third of a training step's work
    // per row).
    let mut evaluation_seconds: Option<f64> = None;
    'epochs: for epoch in 1..=budget.max_epochs.max(1) {
        // A deterministic shuffle from the trial seed and the epoch.
        order.sort_by_key(|&row| mix64(seed ^ mix64(epoch as u64) ^ context.examples.ids[row]));
        let mut loss_sum = 0.0;
        let mut n_batches = 0usize;
        for rows in order.chunks(batch_size) {
            let batch_started = context.started.elapsed().as_secs_f64();
            let (input, targets) = batches(context, rows);
            let outputs = forward(&model, &input, true, budget);
            let mut batch_loss = loss(&outputs, &targets);
            if let (Some(adversary), TargetBatch::Dense(real), BatchInput::Dense(inputs)) =
                (adversary.as_mut(), &targets, &input)
            {
                batch_loss = adversarial_step(adversary, inputs, real, &outputs, batch_loss);
            }
            let loss_value = batch_loss.double_value(&[]);
            if !loss_value.is_finite() {
                record.failure = Some(format!("the loss is {loss_value} at epoch {epoch}"));
                break 'epochs;
            }
            // tch panics when libtorch throws inside the step (e.g. an absurd learning rate
            // overflowing a float): that is a failed trial, not a crash.
            let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                optimizer.backward_step(&batch_loss)
            }));
            if stepped.is_err() {
                record.failure = Some(format!(
                    "libtorch failed in the optimizer step at epoch {epoch}"
                ));
                break 'epochs;
            }
            loss_sum += loss_value;
            n_batches += 1;
            let now = context.started.elapsed().as_secs_f64();
            let batch_seconds = now - batch_started;
            let evaluation = evaluation_seconds.unwrap_or_else(|| {
                batch_seconds / rows.len().max(1) as f64 * context.validation_rows.len() as f64
                    / 3.0
            });
            if now + batch_seconds + evaluation > context.deadline {
                break;
            }
        }
        record.epochs = epoch;
        if epoch == 1 && context.rates_left > 1 {
            let now = context.started.elapsed().as_secs_f64();
            let epoch_seconds = now - trial_started;
            let time_left = budget.max_seconds - trial_started;
            let needed = min_epochs_per_rate(budget) * context.rates_left;
            if epoch_seconds * needed as f64 > time_left {
                context.deadline = budget.max_seconds;
                context.takes_the_rest = Some(epoch_seconds);
            }
        }
        let evaluation_started = context.started.elapsed().as_secs_f64();
        let evaluated = evaluate(context, &model);
        evaluation_seconds = Some(context.started.elapsed().as_secs_f64() - evaluation_started);
        let quality = match evaluated {
            Some(quality) => quality,
            None => {
                record.failure = Some(format!("the outputs are not finite at epoch {epoch}"));
                break;
            }
        };
        curve.push(CurvePoint {
            learning_rate,
            epoch,
            train_loss: loss_sum / n_batches.max(1) as f64,
            validation_quality: quality,
            seconds: context.started.elapsed().as_secs_f64(),
        });
        if quality > best_quality {
            best_quality = quality;
            best_weights = Some(snapshot(&store));
            epochs_without_gain = 0;
        } else {
            epochs_without_gain += 1;
        }
        if epochs_without_gain >= budget.patience.max(1)
            || context.started.elapsed().as_secs_f64() + evaluation_seconds.unwrap_or(0.0)
                > context.deadline
            || (best_quality >= 1.0 && context.task.is_classification())
        {
            break;
        }
    }
    if record.failure.is_some() {
        return Ok((record, None));
    }
    record.best_quality = best_weights.as_ref().map(|_| best_quality);
    Ok((record, best_weights))
}

/// One discriminator step, then the generator's loss with the adversarial term added.
fn adversarial_step(
    adversary: &mut Adversary,
    inputs: &Tensor,
    real: &Tensor,
    fake: &Tensor,
    reconstruction_loss: Tensor,
) -> Tensor {
    let real_logits = adversary.discriminator.forward(inputs, real, true);
    let fake_logits = adversary
        .discriminator
        .forward(inputs, &fake.detach(), true);
    let bce = |logits: &Tensor, target: f64| {
        logits.binary_cross_entropy_with_logits::<Tensor>(
            &logits.full_like(target),
            None,
            None,
            tch::Reduction::Mean,
        )
    };
    let discriminator_loss = bce(&real_logits, 1.0) + bce(&fake_logits, 0.0);
    if discriminator_loss.double_value(&[]).is_finite() {
        adversary.optimizer.backward_step(&discriminator_loss);
    }
    let fooled = bce(&adversary.discriminator.forward(inputs, fake, true), 1.0);
    reconstruction_loss + 0.01 * fooled
}

fn batches(context: &TrialContext<'_>, rows: &[usize]) -> (BatchInput, TargetBatch) {
    let device = context.budget.device;
    let steps = target_steps(context.examples, rows);
    let input = input_batch(
        &context.examples.inputs,
        context.task,
        &context.budget.model,
        rows,
        steps,
        device,
    );
    let targets = target_batch(
        context.examples,
        context.task,
        &context.budget.model,
        rows,
        device,
    );
    (input, targets)
}

fn forward(model: &Model, input: &BatchInput, train: bool, budget: &Budget) -> Tensor {
    if budget.mixed_precision && budget.device.is_cuda() {
        tch::autocast(true, || model.forward(input, train)).to_kind(Kind::Float)
    } else {
        model.forward(input, train)
    }
}

/// The validation quality, or `None` when an output was not finite.
fn evaluate(context: &TrialContext<'_>, model: &Model) -> Option<f64> {
    let _guard = tch::no_grad_guard();
    let mut accumulator = QualityAccumulator::default();
    for rows in context
        .validation_rows
        .chunks(context.budget.batch_size.max(1) * 4)
    {
        let (input, targets) = batches(context, rows);
        let outputs = forward(model, &input, false, context.budget);
        accumulator.add(&outputs, &targets);
    }
    if accumulator.saw_non_finite() {
        return None;
    }
    Some(accumulator.quality(context.task.is_classification()))
}

/// Loads named tensors into a store's variables (used by inference).
pub(crate) fn load_into(store: &mut nn::VarStore, named: Vec<(String, Tensor)>) -> Result<()> {
    let named: HashMap<String, Tensor> = named.into_iter().collect();
    let mut variables = store.variables();
    tch::no_grad(|| -> Result<()> {
        for (name, variable) in variables.iter_mut() {
            let source = named.get(name).ok_or_else(|| {
                crate::error::Error::BadCheckpoint(format!("no tensor `{name}` in the checkpoint"))
            })?;
            if source.size() != variable.size() {
                return Err(crate::error::Error::BadCheckpoint(format!(
                    "`{name}` has shape {:?} in the checkpoint, {:?} in the model",
                    source.size(),
                    variable.size()
                )));
            }
            variable.f_copy_(source)?;
        }
        Ok(())
    })
}
