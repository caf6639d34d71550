//! The training steps of Cerebro's model hopper parallelism (MOP): a run's data split into
//! partitions by id hash, and its training state ([`crate::hop::TrainingState`]) hopping between
//! the workers that hold them, one sub-epoch (one epoch's pass over one partition) at a time.
//!
//! - [`partition_of`]: an example's partition, from its id alone (the same on every worker).
//! - [`initial_state`]: the run's state before its first sub-epoch: the model initialized from the
//!   run's seed (as a run of the trainer initializes it), its input normalizer fitted on every
//!   training row, a fresh Adam.
//! - [`train_sub_epoch`]: one sub-epoch from a state's bytes to the next state's bytes. Its batch
//!   order and every random draw come from [`crate::hop::begin_sub_epoch`]`(seed, epoch,
//!   partition)`, so the result depends on the input state, the rows and those three numbers only:
//!   replaying a run's visit log gives bit-identical weights on the CPU with one thread.
//! - [`evaluate_state`]: a state's validation quality and loss (the trainer's one quality rule, the same
//!   accumulator as [`crate::train()`]); [`answers_of_state`]: its validation answers and, for
//!   classes, how they fell (what a run of the trainer keeps for ensembles and the per-class
//!   view); [`checkpoint_of_state`]: the servable checkpoint.
//!
//! A sub-epoch's dropout masks come from a generator of its own ([`crate::native::RunRandomness`]),
//! so sub-epochs, and runs of [`crate::train()`], train concurrently in one process without
//! changing each other's results; only building a model (libtorch's process-wide generator,
//! seeded, draws the initial weights) takes the trainer's initialization lock.
//! Networks only: the classic models do not train by epochs, and the adversarial models keep a
//! discriminator the state does not carry.

use serde::{Deserialize, Serialize};
use tch::{Device, nn};

use crate::batch::{Confusion, QualityAccumulator, example_batch, loss};
use crate::candidate::{Candidate, ModelKind};
use crate::checkpoint::{Checkpoint, CheckpointMeta, safetensors_bytes};
use crate::data::{Examples, mix64};
use crate::error::{Error, Result};
use crate::hop::{SubEpoch, TrainingState, begin_sub_epoch};
use crate::models::{self, Model, ModelConfig};
use crate::oof::OutOfFold;
use crate::optim::Adam;
use crate::task::Task;
use crate::train::Evaluation;

/// Mixed into ids before hashing them to partitions, so that the partitions do not follow the
/// train/validation split (which hashes the ids with no salt).
const PARTITION_SALT: u64 = 0x6d6f_705f_7061_7274;

/// What fixes a MOP run's training, the same for all of its sub-epochs (the coordinator sends it
/// with every unit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MopSetup {
    /// The candidate id.
    pub candidate: String,
    /// The task (from every example, so that a partition's missing classes change nothing).
    pub task: Task,
    /// The model's widths.
    pub config: ModelConfig,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// The run's seed (initialization and every sub-epoch's draws).
    pub seed: u64,
    /// Examples per batch.
    pub batch_size: usize,
}

/// What a sub-epoch ended with.
#[derive(Debug, Clone, PartialEq)]
pub enum SubEpochOutcome {
    /// The next state's bytes and the mean training loss of its batches.
    Trained {
        /// [`TrainingState::to_bytes`].
        state: Vec<u8>,
        /// The mean batch loss.
        loss: f64,
    },
    /// The loss became NaN or infinite: the run failed.
    Diverged(String),
}

/// The partition (of `partitions`, at least 1) of the example with id `id`.
pub fn partition_of(id: u64, partitions: u64) -> u64 {
    mix64(id ^ PARTITION_SALT) % partitions.max(1)
}

/// The rows among `rows` whose examples are in `partition`.
pub fn partition_rows(
    examples: &Examples,
    rows: &[usize],
    partitions: u64,
    partition: u64,
) -> Vec<usize> {
    rows.iter()
        .copied()
        .filter(|&row| {
            examples
                .ids
                .get(row)
                .is_some_and(|&id| partition_of(id, partitions) == partition)
        })
        .collect()
}

/// Whether a model can train by hopping sub-epochs: the networks, less the adversarial pair (a
/// classic model fits all its rows at once; a GAN's two optimizers take turns within a batch).
pub fn can_hop(model: ModelKind) -> bool {
    !crate::classic::is_classic(model) && !matches!(model, ModelKind::Gan | ModelKind::Pix2Pix)
}

/// A model and optimizer of the setup on `device`, initialized from `init_seed` under the trainer's
/// initialization lock (libtorch's generator is process-wide; [`crate::train()`] takes it too).
fn build(setup: &MopSetup, device: Device, init_seed: u64) -> Result<(nn::VarStore, Model, Adam)> {
    let candidate = Candidate::parse(&setup.candidate)?;
    if !can_hop(candidate.model) {
        return Err(Error::Mop(format!(
            "`{}` cannot train by hopping sub-epochs (only networks without an adversary can): train it with task parallelism",
            setup.candidate
        )));
    }
    if !(setup.learning_rate.is_finite() && setup.learning_rate > 0.0) {
        return Err(Error::Mop(format!(
            "the learning rate {} is not a positive number",
            setup.learning_rate
        )));
    }
    let store = nn::VarStore::new(device);
    let model = crate::train::seeded_init(init_seed, || {
        models::build(&store.root(), &candidate, &setup.task, &setup.config)
    })?;
    let adam = Adam::with_defaults(&store, setup.learning_rate)?;
    Ok((store, model, adam))
}

/// A model and optimizer of the setup holding `state`.
pub(crate) fn restored(
    setup: &MopSetup,
    state: &[u8],
    device: Device,
) -> Result<(nn::VarStore, Model, Adam, TrainingState)> {
    let state = TrainingState::from_bytes(state)?;
    let (mut store, model, mut adam) = build(setup, device, 0)?;
    state.restore(&mut store, &mut adam)?;
    Ok((store, model, adam, state))
}

/// The run's state before its first sub-epoch (see the module docs); `train_rows` fit the input
/// normalizer and a regression's output scale, as a run of the trainer fits them on its training
/// rows ([`Model::fit_transforms`]).
pub fn initial_state(
    setup: &MopSetup,
    examples: &Examples,
    train_rows: &[usize],
    device: Device,
) -> Result<Vec<u8>> {
    let (store, mut model, adam) = build(setup, device, setup.seed)?;
    model.fit_transforms(&setup.task, examples, train_rows);
    TrainingState::capture(&store, &adam, setup.seed, None)?.to_bytes()
}

/// Trains one sub-epoch: restores `state`, visits `rows` of `examples` (the partition's training
/// rows) once in batches, in an order drawn from `(seed, epoch, partition)`, and returns the next
/// state (see the module docs).
pub fn train_sub_epoch(
    setup: &MopSetup,
    state: &[u8],
    examples: &Examples,
    rows: &[usize],
    at: SubEpoch,
    device: Device,
) -> Result<SubEpochOutcome> {
    if rows.is_empty() {
        return Err(Error::Mop(format!(
            "partition {} has no training rows: use fewer partitions than training examples",
            at.partition
        )));
    }
    if let Some(&row) = rows.iter().find(|&&row| row >= examples.len()) {
        return Err(Error::Mop(format!(
            "row {row} is not among the {} examples",
            examples.len()
        )));
    }
    let (store, model, mut adam, restored_state) = restored(setup, state, device)?;
    let seed = restored_state.header.seed;
    let (sub_seed, _randomness) = begin_sub_epoch(seed, at.epoch, at.partition, device)?;
    let mut order = rows.to_vec();
    order.sort_by_key(|&row| (mix64(sub_seed ^ examples.ids[row]), row));
    let mut loss_sum = 0.0;
    let mut batches = 0usize;
    for batch in order.chunks(setup.batch_size.max(1)) {
        let (input, targets) = example_batch(examples, &setup.task, &setup.config, batch, device);
        let outputs = model.forward(&input, true);
        let batch_loss = loss(&outputs, &targets);
        let value = batch_loss.double_value(&[]);
        if !value.is_finite() {
            return Ok(SubEpochOutcome::Diverged(format!(
                "the loss is {value} in epoch {} on partition {}",
                at.epoch, at.partition
            )));
        }
        adam.backward_step(&batch_loss)?;
        loss_sum += value;
        batches += 1;
    }
    let state = TrainingState::capture(&store, &adam, seed, Some(at))?.to_bytes()?;
    Ok(SubEpochOutcome::Trained {
        state,
        loss: loss_sum / batches.max(1) as f64,
    })
}

/// The validation quality in `[0, 1]` and loss of `state` on `rows` of `examples` (what
/// [`crate::EarlyStopping`] reads); `None` when an output is not finite.
pub fn evaluate_state(
    setup: &MopSetup,
    state: &[u8],
    examples: &Examples,
    rows: &[usize],
    device: Device,
) -> Result<Option<Evaluation>> {
    let (_store, model, _adam, _state) = restored(setup, state, device)?;
    let _guard = tch::no_grad_guard();
    let mut accumulator = QualityAccumulator::default();
    for batch in rows.chunks(setup.batch_size.max(1) * 4) {
        let (input, targets) = example_batch(examples, &setup.task, &setup.config, batch, device);
        accumulator.add(&model.forward(&input, false), &targets);
    }
    Ok(accumulator.finite_evaluation(setup.task.is_classification()))
}

/// The answers of the model in `state` for `rows` of `examples` (class probabilities, or the
/// output values: [`OutOfFold`], rows as given) and, for a classifier, how they fell against the
/// targets ([`Confusion`]): what [`crate::train()`] keeps of a run's validation answers, for the
/// model of a MOP run's best epoch.
pub fn answers_of_state(
    setup: &MopSetup,
    state: &[u8],
    examples: &Examples,
    rows: &[usize],
    device: Device,
) -> Result<(OutOfFold, Option<Confusion>)> {
    let (_store, model, _adam, _state) = restored(setup, state, device)?;
    let _guard = tch::no_grad_guard();
    let classification = setup.task.is_classification();
    let mut accumulator = QualityAccumulator::default();
    let mut answers = OutOfFold::default();
    for batch in rows.chunks(setup.batch_size.max(1) * 4) {
        let (input, targets) = example_batch(examples, &setup.task, &setup.config, batch, device);
        let outputs = model.forward(&input, false);
        accumulator.add(&outputs, &targets);
        answers.push_outputs(batch, &outputs, classification);
    }
    Ok((answers, accumulator.confusion()))
}

/// The servable checkpoint of `state`: every variable (as a run of the trainer keeps them), with
/// the setup's metadata.
pub fn checkpoint_of_state(setup: &MopSetup, state: &[u8]) -> Result<Checkpoint> {
    let state = TrainingState::from_bytes(state)?;
    let weights: Vec<_> = state.variables.into_iter().collect();
    Ok(Checkpoint {
        meta: CheckpointMeta {
            candidate: setup.candidate.clone(),
            task: setup.task.clone(),
            config: setup.config,
            learning_rate: setup.learning_rate,
            seed: setup.seed,
            extra: None,
        },
        weights: safetensors_bytes(&weights)?,
    })
}
