//! One trial: one learning rate trained from a seed, epoch after epoch, under the run's time
//! limit (the grid's share of it), early stopping and the adversary of GAN and pix2pix; its best
//! weights and record. The seeded initialization every model of the trainer goes through.

use super::*;
use crate::loss_scale::LossScaler;

pub(crate) struct TrialContext<'a> {
    pub(crate) candidate: &'a Candidate,
    pub(crate) examples: &'a Examples,
    pub(crate) task: &'a Task,
    pub(crate) budget: &'a Budget,
    pub(crate) train_rows: &'a [usize],
    pub(crate) validation_rows: &'a [usize],
    pub(crate) started: Instant,
    /// Seconds since `started` by which the trial stops.
    pub(crate) deadline: f64,
    /// The rates still to try, this one included; the grid check after the first epoch runs
    /// when more than one is left.
    pub(crate) rates_left: usize,
    /// Seconds since `started` by which the rates still to try must be done.
    pub(crate) grid_end: f64,
    /// Trainings per rate (1 under the split, the fold count under k-fold): a trial that keeps
    /// the rest of the grid's time keeps this share of it.
    pub(crate) trainings_per_rate: usize,
    /// A refit: exactly this many epochs, no validation, the last weights kept.
    pub(crate) refit_epochs: Option<usize>,
    /// Set by the trial when it keeps the rest of the time: the seconds of its first epoch.
    pub(crate) takes_the_rest: Option<f64>,
    /// Set by the trial when the deadline stopped an epoch before its last batch.
    pub(crate) cut_short: bool,
    /// When `Some`, the trial adds every evaluated epoch's score to it (a k-fold rate scores
    /// its folds at one epoch: `k_fold::RateResult::score_at_one_epoch`).
    pub(crate) epoch_scores: Option<EpochScores>,
}

/// A trial's kept [`EpochScore`]s, epoch by epoch, and how many answer values they hold
/// (bounded by [`EPOCH_ANSWERS_MAX_VALUES`]).
#[derive(Debug, Default)]
pub(crate) struct EpochScores {
    pub(crate) scores: Vec<EpochScore>,
    kept_values: usize,
}

impl EpochScores {
    /// Adds an evaluated epoch's score, its answers while the kept answers stay within
    /// [`EPOCH_ANSWERS_MAX_VALUES`] (past it `None`: the fold's best epoch's stand in).
    pub(crate) fn keep(
        &mut self,
        quality: f64,
        confusion: &Option<Confusion>,
        oof: &Option<OutOfFold>,
    ) {
        let oof = oof
            .as_ref()
            .filter(|oof| self.kept_values + oof.values.len() <= EPOCH_ANSWERS_MAX_VALUES)
            .cloned();
        self.kept_values += oof.as_ref().map_or(0, |oof| oof.values.len());
        self.scores.push(EpochScore {
            quality,
            confusion: confusion.clone(),
            oof,
        });
    }
}

/// The validation answers of one epoch of a trial: its quality, and how its answers fell and
/// the answers themselves (kept while a trial's kept answers stay within
/// [`EPOCH_ANSWERS_MAX_VALUES`]; past it `None`, and the fold's best epoch's stand in).
#[derive(Debug, Clone, Default)]
pub(crate) struct EpochScore {
    pub(crate) quality: f64,
    pub(crate) confusion: Option<Confusion>,
    pub(crate) oof: Option<OutOfFold>,
}

/// The most answer values (probabilities or output values) a trial keeps over its epochs'
/// [`EpochScore`]s: 4 MiB of `f32`, the store's bound on a run's answers. A fold of 40 examples
/// of 10 classes keeps 20 epochs in 8,000; a fold of images answered by images keeps none.
pub(crate) const EPOCH_ANSWERS_MAX_VALUES: usize = 1 << 20;

/// The adversary of GAN and pix2pix, in its own `VarStore` (not part of the checkpoint).
struct Adversary {
    _store: nn::VarStore,
    discriminator: Discriminator,
    optimizer: Adam,
}

/// Named weights, as the `VarStore` names them.
pub(crate) type Weights = Vec<(String, Tensor)>;

/// The best trial so far: quality, learning rate, seed, weights.
pub(crate) struct BestTrial {
    pub(crate) quality: f64,
    pub(crate) learning_rate: f64,
    pub(crate) seed: u64,
    pub(crate) weights: Weights,
    /// How its validation answers fell (classification).
    pub(crate) confusion: Option<Confusion>,
    /// Its validation answers.
    pub(crate) oof: Option<OutOfFold>,
}

/// Runs `build` with libtorch's process-wide generator seeded with `seed`, under the trainer's
/// initialization lock: tch's initializers draw from that generator and take no other, so seeding
/// and initializing under one lock is what makes an initialization reproducible while other runs
/// in the process initialize too. Every model the trainer builds goes through here, also those
/// whose initial weights do not matter (a checkpoint's, a cost or latency probe's, seeded with 0):
/// drawing outside the lock would shift a concurrent run's seeded draws (the runs' other random
/// draws come from generators of their own, [`RunRandomness`]).
pub(crate) fn seeded_init<T>(seed: u64, build: impl FnOnce() -> T) -> T {
    static INIT_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _lock = INIT_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // The bits reinterpreted: every u64 is a distinct generator seed.
    tch::manual_seed(seed as i64);
    build()
}

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

/// The seed of a trial's dropout generator: another stream than its initialization's (libtorch's
/// generator seeded with `seed` itself).
fn dropout_seed(seed: u64) -> u64 {
    mix64(seed ^ 0xD809_0075_EED5_0000)
}

/// Trains one learning rate; returns its record and, unless it failed, its best weights.
pub(crate) fn run_trial(
    context: &mut TrialContext<'_>,
    learning_rate: f64,
    seed: u64,
    curve: &mut Vec<CurvePoint>,
) -> Result<(LearningRateTrial, Option<Weights>)> {
    let budget = context.budget;
    let device = budget.device;
    let mut record = LearningRateTrial {
        learning_rate,
        fold: None,
        seed,
        epochs: 0,
        best_quality: None,
        best_epoch: None,
        failure: None,
        tuned: None,
        confusion: None,
        oof: None,
    };
    if !(learning_rate.is_finite() && learning_rate > 0.0) {
        record.failure = Some(format!(
            "the learning rate {learning_rate} is not a positive number"
        ));
        return Ok((record, None));
    }
    let store = nn::VarStore::new(device);
    let mut model = seeded_init(seed, || {
        models::build(
            &store.root(),
            context.candidate,
            context.task,
            &budget.model,
        )
    })?;
    model.fit_transforms(context.task, context.examples, context.train_rows);
    // The trial's dropout masks come from a generator of its own, so they, and with them the
    // trial's weights, depend on its seed only, not on what else trains in this process.
    let _randomness = RunRandomness::enter(device, dropout_seed(seed))?;
    // Adam with explicit state (`crate::optim`): libtorch's Adam, its moments readable.
    let mut optimizer = Adam::with_defaults(&store, learning_rate)?;
    // Forward passes in float16 (an older GPU) scale the loss (`crate::loss_scale`).
    optimizer.set_loss_scaler(LossScaler::for_precision(Precision::on(
        context.budget.device,
        context.budget.mixed_precision,
    )));
    let mut adversary = new_adversary(context, seed, learning_rate)?;
    let mut best_weights = None;
    let mut best_epoch = 0;
    let mut stopping = EarlyStopping::new(context.task.is_classification());
    let mut order = context.train_rows.to_vec();
    let trial_started = context.started.elapsed().as_secs_f64();
    // The time limit is a promise (`constraint train_time`, the engine's run limit): a batch is
    // only started when it and the evaluation after it still fit before the deadline. The
    // evaluation's time is measured after the first one; before that it is estimated from the
    // batches (a forward pass over the validation rows is about a third of a training step's work
    // per row).
    let mut evaluation_seconds: Option<f64> = None;
    let max_epochs = context.refit_epochs.unwrap_or(budget.max_epochs).max(1);
    for epoch in 1..=max_epochs {
        // A deterministic shuffle from the trial seed and the epoch.
        order.sort_by_key(|&row| mix64(seed ^ mix64(epoch as u64) ^ context.examples.ids[row]));
        let pass = match train_epoch(
            context,
            (&model, &mut optimizer, &mut adversary),
            &order,
            epoch,
            evaluation_seconds,
        ) {
            Ok(pass) => pass,
            Err(failure) => {
                record.failure = Some(failure);
                break;
            }
        };
        record.epochs = epoch;
        if context.refit_epochs.is_some() {
            if pass.deadline_reached {
                break;
            }
            continue;
        }
        if epoch == 1 && context.rates_left > 1 {
            keep_the_rest_if_slow(context, trial_started);
        }
        let evaluation_started = context.started.elapsed().as_secs_f64();
        let evaluated = evaluate(context, &model);
        evaluation_seconds = Some(context.started.elapsed().as_secs_f64() - evaluation_started);
        let (evaluation, confusion, oof) = match evaluated {
            Some(evaluated) => evaluated,
            None => {
                record.failure = Some(format!("the outputs are not finite at epoch {epoch}"));
                break;
            }
        };
        let quality = evaluation.quality;
        if let Some(scores) = context.epoch_scores.as_mut() {
            scores.keep(quality, &confusion, &oof);
        }
        curve.push(CurvePoint {
            learning_rate,
            epoch,
            train_loss: pass.loss_sum / pass.batches.max(1) as f64,
            validation_quality: quality,
            seconds: context.started.elapsed().as_secs_f64(),
        });
        if stopping.record(Some(&evaluation)) {
            best_epoch = epoch;
            best_weights = Some(snapshot(&store));
            record.confusion = confusion;
            record.oof = oof;
        }
        if stopping.epochs_without_progress() >= budget.patience.max(1)
            || context.started.elapsed().as_secs_f64() + evaluation_seconds.unwrap_or(0.0)
                > context.deadline
            || (stopping.best_quality() >= 1.0
                && context.task.is_classification()
                && context.validation_rows.len() >= PERFECT_SCORE_MIN_ROWS)
        {
            break;
        }
    }
    if record.failure.is_some() {
        return Ok((record, None));
    }
    if context.refit_epochs.is_some() {
        return Ok((record, Some(snapshot(&store))));
    }
    record.best_quality = best_weights.as_ref().map(|_| stopping.best_quality());
    record.best_epoch = best_weights.as_ref().map(|_| best_epoch);
    Ok((record, best_weights))
}

/// The adversary of a GAN or pix2pix trial (none for other models), from a stream of its own.
fn new_adversary(
    context: &TrialContext<'_>,
    seed: u64,
    learning_rate: f64,
) -> Result<Option<Adversary>> {
    let (device, budget) = (context.budget.device, context.budget);
    Ok(match (context.candidate.model, context.task) {
        (ModelKind::Gan | ModelKind::Pix2Pix, Task::ImageRecovery { input, output }) => {
            let adversary_store = nn::VarStore::new(device);
            // From a stream of its own.
            let discriminator = seeded_init(mix64(seed ^ 0xAD5E_25A2_0000_0000), || {
                Discriminator::new(
                    &adversary_store.root(),
                    context.candidate.model,
                    input,
                    output,
                    &budget.model,
                )
            });
            let optimizer = Adam::with_defaults(&adversary_store, learning_rate)?;
            Some(Adversary {
                _store: adversary_store,
                discriminator,
                optimizer,
            })
        }
        _ => None,
    })
}

/// One epoch's pass over the training rows: its summed loss, its batches, and whether the
/// deadline stopped it.
struct EpochPass {
    loss_sum: f64,
    batches: usize,
    deadline_reached: bool,
}

/// Trains one epoch over `order` (a batch is only started when it and the evaluation after it
/// still fit before the deadline); `Err` says why the trial failed.
fn train_epoch(
    context: &mut TrialContext<'_>,
    (model, optimizer, adversary): (&Model, &mut Adam, &mut Option<Adversary>),
    order: &[usize],
    epoch: usize,
    evaluation_seconds: Option<f64>,
) -> std::result::Result<EpochPass, String> {
    let batch_size = context.budget.batch_size.max(1);
    batch_maker(context).prefetched(order.chunks(batch_size), |batches| {
        train_batches(
            context,
            (model, optimizer, adversary),
            batches,
            order.len(),
            epoch,
            evaluation_seconds,
        )
    })
}

/// The steps of [`train_epoch`], over its batches as they come.
fn train_batches(
    context: &mut TrialContext<'_>,
    (model, optimizer, adversary): (&Model, &mut Adam, &mut Option<Adversary>),
    batches: &mut dyn Iterator<Item = (&'_ [usize], BatchInput, TargetBatch)>,
    rows_in_epoch: usize,
    epoch: usize,
    evaluation_seconds: Option<f64>,
) -> std::result::Result<EpochPass, String> {
    let budget = context.budget;
    let batch_size = budget.batch_size.max(1);
    let mut pass = EpochPass {
        loss_sum: 0.0,
        batches: 0,
        deadline_reached: false,
    };
    loop {
        // Waiting for a batch counts as the batch's time, as its gathering did before.
        let batch_started = context.started.elapsed().as_secs_f64();
        let Some((rows, input, targets)) = batches.next() else {
            break;
        };
        // tch unwraps some of libtorch's errors (oneDNN has no float16 LSTM on the CPU, say): a
        // panic in the forward pass fails the trial, not the process.
        let outputs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            forward(model, &input, true, budget)
        }))
        .map_err(|payload| {
            format!(
                "libtorch failed in the forward pass at epoch {epoch}: {}",
                panic_message(payload.as_ref())
            )
        })?;
        let mut batch_loss = loss(&outputs, &targets);
        if let (Some(adversary), TargetBatch::Dense(real), BatchInput::Dense(inputs)) =
            (adversary.as_mut(), &targets, &input)
        {
            match adversarial_step(adversary, inputs, real, &outputs, batch_loss) {
                Ok(with_adversary) => batch_loss = with_adversary,
                Err(error) => {
                    return Err(format!(
                        "libtorch failed in the discriminator step at epoch {epoch}: {error}"
                    ));
                }
            }
        }
        let loss_value = batch_loss.double_value(&[]);
        if !loss_value.is_finite() {
            return Err(format!("the loss is {loss_value} at epoch {epoch}"));
        }
        // libtorch throwing inside the step (e.g. an absurd learning rate overflowing a float)
        // is a failed trial, not a crash: an error from the step, or a panic from tch.
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            optimizer.backward_step(&batch_loss)
        }));
        match stepped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                return Err(format!(
                    "libtorch failed in the optimizer step at epoch {epoch}: {error}"
                ));
            }
            Err(payload) => {
                return Err(format!(
                    "libtorch failed in the optimizer step at epoch {epoch}: {}",
                    panic_message(payload.as_ref())
                ));
            }
        }
        pass.loss_sum += loss_value;
        pass.batches += 1;
        let now = context.started.elapsed().as_secs_f64();
        let batch_seconds = now - batch_started;
        let evaluation = evaluation_seconds.unwrap_or_else(|| {
            batch_seconds / rows.len().max(1) as f64 * context.validation_rows.len() as f64 / 3.0
        });
        if now + batch_seconds + evaluation > context.deadline {
            pass.deadline_reached = true;
            context.cut_short = pass.batches * batch_size < rows_in_epoch;
            break;
        }
    }
    Ok(pass)
}

/// After a trial's first epoch, with more rates left: a trial whose epochs are too slow for the
/// rest of the grid keeps the rest of the grid's time (its share of it, per training).
fn keep_the_rest_if_slow(context: &mut TrialContext<'_>, trial_started: f64) {
    let budget = context.budget;
    let now = context.started.elapsed().as_secs_f64();
    let epoch_seconds = now - trial_started;
    let time_left = context.grid_end - trial_started;
    let trainings_per_rate = context.trainings_per_rate.max(1);
    let needed = min_epochs_per_rate(budget) * context.rates_left * trainings_per_rate;
    if epoch_seconds * needed as f64 > time_left {
        context.deadline = trial_started + time_left / trainings_per_rate as f64;
        context.takes_the_rest = Some(epoch_seconds);
    }
}

/// One discriminator step, then the generator's loss with the adversarial term added.
fn adversarial_step(
    adversary: &mut Adversary,
    inputs: &Tensor,
    real: &Tensor,
    fake: &Tensor,
    reconstruction_loss: Tensor,
) -> Result<Tensor> {
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
        adversary.optimizer.backward_step(&discriminator_loss)?;
    }
    let fooled = bce(&adversary.discriminator.forward(inputs, fake, true), 1.0);
    Ok(reconstruction_loss + 0.01 * fooled)
}

/// What builds a trial's batches (ahead of their use: [`crate::prefetch`]).
fn batch_maker<'a>(context: &TrialContext<'a>) -> BatchMaker<'a> {
    let budget: &'a Budget = context.budget;
    BatchMaker {
        examples: context.examples,
        task: context.task,
        config: &budget.model,
        device: budget.device,
        ahead: crate::prefetch::ahead_on(budget.device),
    }
}

/// What a caught panic said (its `&str` or `String` payload), or that it said nothing readable.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A forward pass in the budget's precision ([`Precision::on`]).
pub(super) fn forward(model: &Model, input: &BatchInput, train: bool, budget: &Budget) -> Tensor {
    Precision::on(budget.device, budget.mixed_precision)
        .forward(budget.device, || model.forward(input, train))
}

/// The validation quality and loss, with how the answers fell for classification and the answers
/// themselves (classes or values), or `None` when an output was not finite.
fn evaluate(
    context: &TrialContext<'_>,
    model: &Model,
) -> Option<(Evaluation, Option<Confusion>, Option<OutOfFold>)> {
    let _guard = tch::no_grad_guard();
    let mut accumulator = QualityAccumulator::default();
    let classification = context.task.is_classification();
    let keep = matches!(
        context.examples.targets,
        Targets::Classes { .. } | Targets::Dense { .. }
    );
    let mut answers = OutOfFold::default();
    let chunks = context
        .validation_rows
        .chunks(context.budget.batch_size.max(1) * 4);
    batch_maker(context).prefetched(chunks, |batches| {
        for (rows, input, targets) in batches {
            let outputs = forward(model, &input, false, context.budget);
            accumulator.add(&outputs, &targets);
            if keep {
                answers.push_outputs(rows, &outputs, classification);
            }
        }
    });
    let evaluation = accumulator.finite_evaluation(classification)?;
    let answers = (keep && answers.rows.len() == context.validation_rows.len()).then_some(answers);
    Some((evaluation, accumulator.confusion(), answers))
}
