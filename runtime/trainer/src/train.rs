//! A training run: (candidate, examples, budget) to a checkpoint, a validation quality in `[0,1]`, the
//! measured cost and the learning curve.
//!
//! The quality is measured by one of two protocols ([`Validation::choose`]):
//! - **the split** (at least [`Budget::k_fold_below`] examples): the examples are split by id (see
//!   [`crate::data::split_by_id`]); each learning rate of the grid (the paper's {0.1, 0.01, 0.001})
//!   is tried with Adam from the same seed-derived initialization, with early stopping
//!   ([`EarlyStopping`]: on the validation quality, and for value outputs also on the validation
//!   loss); the best weights over all trials are kept and their quality reported;
//! - **k-fold cross-validation** (fewer examples): each learning rate trains one model per fold
//!   (stratified by class for classification, [`crate::data::k_folds`]), each with early stopping on
//!   its fold, and its folds are scored at the one epoch with the best mean over them (not each
//!   fold at its own best: `k_fold.rs`); the rate with the best such mean wins, and the run
//!   reports that mean and the folds' standard deviation there. A classic model's k-fold is repeated [`Budget::k_fold_repeats`]
//!   times over other partitions ([`Validation::for_candidate`]): its fits are cheap, and the
//!   repeats' mean depends less on one partition's luck. The checkpoint is a model refit on every example with that rate
//!   for that scored epoch's count ([`Refit`]); when the time limit leaves
//!   no room for the refit, or it diverges, the best fold model is served instead (recorded).
//!   When not even one more epoch fits, the folds not yet started are not trained and the quality
//!   is the mean of those that were ([`TrainedRun::folds_trained`], the fold cut of
//!   `train_k_fold`). A network's folds also stop when they can no longer reach the app's best run
//!   ([`Budget::race_floor`], [`crate::race`]; [`TrainedRun::raced`]).
//!
//! A trial whose loss or outputs become NaN or infinite fails; when every trial fails the run is
//! [`RunOutcome::Failed`], never a panic. A model that is not a network and has no fitted model
//! when its time limit ends is [`crate::Error::OutOfTime`] instead: no fault of the model's, which
//! the engine tells apart (a run its session's end cut is dropped, not failed).

use std::collections::HashMap;
use std::time::Instant;

use easeml_stats::protocol::{KFold, Protocol};
use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use crate::batch::{Confusion, QualityAccumulator, TargetBatch, loss};
use crate::candidate::{Candidate, ModelKind};
use crate::checkpoint::{Checkpoint, CheckpointMeta, safetensors_bytes};
use crate::data::{Examples, Targets, k_folds, mix64, split_by_id};
use crate::error::Result;
use crate::models::recovery::Discriminator;
use crate::models::{self, BatchInput, Model, ModelConfig};
use crate::native::RunRandomness;
use crate::oof::OutOfFold;
use crate::optim::Adam;
use crate::precision::Precision;
use crate::prefetch::BatchMaker;
use crate::task::Task;

mod k_fold;
mod trial;

pub use k_fold::refit_epochs;
use k_fold::train_k_fold;

pub(crate) use trial::{BestTrial, TrialContext, Weights, run_trial, seeded_init};

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
    /// Epochs without progress ([`EarlyStopping`]) before stopping.
    pub patience: usize,
    /// The fewest optimizer steps a trial is allowed before it must stop (0: no floor): on small
    /// data, where an epoch is one or two batches, `max_epochs` and `patience` are raised so that a
    /// trial may take this many steps and waits `min_steps / 10` steps for a gain
    /// ([`Budget::scaled_to`]). The time limit still bounds every trial.
    pub min_steps: usize,
    /// Share of the examples (by id hash) held out for validation, under the split.
    pub validation_fraction: f64,
    /// Below this many examples the quality is measured by k-fold cross-validation instead of the
    /// split ([`Validation::choose`]); 0 never does. Tables have a limit of their own,
    /// `k_fold_below_tables`.
    pub k_fold_below: usize,
    /// The same limit for a table (one `Tensor[A]` row of features per example,
    /// [`crate::data::Inputs::is_table`]): [`K_FOLD_BELOW_TABLES`] by default; 0 never does.
    pub k_fold_below_tables: usize,
    /// The number of folds of k-fold cross-validation (at most one per example).
    pub folds: usize,
    /// How many times a k-fold cross-validation is repeated, each time with another partition
    /// (1: once): a classic model's from the start ([`Validation::for_candidate`]), a network's
    /// for its chosen learning rate after the grid (`train_k_fold`), each while cheap enough
    /// (`k_fold_repeats_max_seconds`).
    pub k_fold_repeats: usize,
    /// Those repeats are kept only while every repeat, predicted from the first (a classic
    /// model's every setting, from its first setting's first repeat; a network's chosen rate,
    /// from its folds), takes at most this many seconds and half of `max_seconds`
    /// ([`K_FOLD_REPEATS_MAX_SECONDS`] by default); otherwise the run keeps one.
    pub k_fold_repeats_max_seconds: f64,
    /// The highest lower bound of the accuracy of the app's runs so far ([`crate::race::floor`]),
    /// which a network's k-fold races: a learning rate whose folds put even its upper bound below
    /// it stops ([`crate::race`]). `None` (the default): no race.
    pub race_floor: Option<f64>,
    /// The base seed; trial `i` uses a seed derived from it and records it.
    pub seed: u64,
    /// Widths of the models.
    pub model: ModelConfig,
    /// The device.
    pub device: Device,
    /// Mixed-precision forward passes ([`crate::precision`]: bfloat16 where the device has it,
    /// float16 on older GPUs). On by default on a CUDA device with bfloat16
    /// ([`Precision::mixed_by_default`]), off elsewhere.
    pub mixed_precision: bool,
    /// How a network's run under the split chooses its settings: the learning-rate grid, or a
    /// TrimTuner search ([`crate::tune`]).
    pub tuning: crate::tune::Tuning,
}

impl Budget {
    /// The paper's grid (Adam's default rate 0.001 first, then 0.01 and 0.1), 20 epochs, 10 minutes,
    /// batch 32, patience 3, 20% validation, or [`FOLDS`]-fold cross-validation below
    /// [`K_FOLD_BELOW`] examples ([`K_FOLD_BELOW_TABLES`] rows of a table), on `device`.
    pub fn new(device: Device) -> Self {
        Self {
            learning_rates: vec![0.001, 0.01, 0.1],
            max_epochs: 20,
            max_seconds: 600.0,
            batch_size: 32,
            patience: 3,
            min_steps: 0,
            validation_fraction: 0.2,
            k_fold_below: K_FOLD_BELOW,
            k_fold_below_tables: K_FOLD_BELOW_TABLES,
            folds: FOLDS,
            k_fold_repeats: K_FOLD_REPEATS,
            k_fold_repeats_max_seconds: K_FOLD_REPEATS_MAX_SECONDS,
            race_floor: None,
            seed: 0,
            model: ModelConfig::for_device(device),
            device,
            mixed_precision: Precision::mixed_by_default(device),
            tuning: crate::tune::Tuning::Grid,
        }
    }
}

impl Budget {
    /// The most seconds a run's k-fold repeats may take, predicted from its first repeat:
    /// [`Budget::k_fold_repeats_max_seconds`] and half of `max_seconds`, the one bound of both
    /// kinds (a classic model's settings, a network's chosen rate) and of the cost estimate,
    /// checked by `classic::keeps_repeats`.
    pub fn repeats_bound(&self) -> f64 {
        self.k_fold_repeats_max_seconds.min(self.max_seconds / 2.0)
    }

    /// The budget of the fits of a run that trains on `rows` examples per fit: with `min_steps`,
    /// `max_epochs` is raised to `ceil(min_steps / steps per epoch)` and `patience` to
    /// `ceil(min_steps / 10 / steps per epoch)` where those are larger (never lowered). With 40
    /// examples and batches of 32 (two steps an epoch), the default 20 epochs are 40 steps and a
    /// patience of 3 epochs is 6: early stopping then fires on the noise of tiny folds, and the
    /// refit trains a handful of steps (`DECISIONS.md`).
    pub fn scaled_to(&self, rows: usize) -> Budget {
        let mut budget = self.clone();
        if self.min_steps == 0 {
            return budget;
        }
        let steps_per_epoch = rows.div_ceil(self.batch_size.max(1)).max(1);
        budget.max_epochs = budget
            .max_epochs
            .max(self.min_steps.div_ceil(steps_per_epoch));
        budget.patience = budget
            .patience
            .max((self.min_steps / 10).div_ceil(steps_per_epoch));
        budget
    }

    /// The budget one run on `examples` with the training/validation `sets` trains under, the one
    /// both training and the cost estimate use: [`Budget::scaled_to`] the rows of its first fit,
    /// and the model config [`ModelConfig::fitted_to`](crate::models::ModelConfig::fitted_to) the
    /// data.
    pub(crate) fn for_run(&self, examples: &Examples, sets: &[(Vec<usize>, Vec<usize>)]) -> Budget {
        let mut budget = self.scaled_to(
            sets.first()
                .map_or(examples.len(), |(train, _)| train.len()),
        );
        budget.model = budget.model.fitted_to(examples);
        budget
    }
}

/// Runs on fewer examples than this validate by k-fold cross-validation (the default of
/// [`Budget::k_fold_below`]): below it the split's validation part has fewer than 40 examples, so its
/// accuracy moves in steps of more than 0.025 and one lucky split decides.
pub const K_FOLD_BELOW: usize = 200;

/// A table (one `Tensor[A]` row of features per example) is cross-validated below this many
/// rows (the default of [`Budget::k_fold_below_tables`]), not [`K_FOLD_BELOW`]: every model of a
/// table (k-NN, the trees, kernel ridge, the linear models, the MLPs) fits a few hundred rows in
/// milliseconds to a second, so five folds (three times over, for a classic model) cost little,
/// while the split's 20% of 353 rows, 71, chose an ensemble whose R^2 on the test set was 0.03
/// below a member's alone (diabetes; DECISIONS.md, "Tables below 1,000 rows are
/// cross-validated"). Images, series and trees keep 200: a network's epoch on them is costly, and
/// k-fold trains it six times.
pub const K_FOLD_BELOW_TABLES: usize = 1000;

/// The default fold count ([`Budget::folds`]): each fold model trains on 80% of the examples, as
/// under the split, and the run trains five of them plus the refit per learning rate.
pub const FOLDS: usize = 5;

/// The default [`Budget::k_fold_repeats`]: a k-fold cross-validation runs three times over three
/// partitions, so that the choice among a dozen candidates measured on a few dozen examples
/// depends less on which examples one partition happened to put together (issue 48: the winner's
/// curse of "highest CV mean wins"). A classic model's fits take milliseconds to seconds on such
/// data; a small network's (an MLP on a table of 142 rows) a fraction of a second.
pub const K_FOLD_REPEATS: usize = 3;

/// The default [`Budget::k_fold_repeats_max_seconds`]: a k-fold keeps its repeats only when its
/// first repeat shows that every repeat would take at most this many seconds (and half the run's
/// time limit). On a hundred series of 1,460 steps in a
/// release build, MiniRocket (one setting, about 6 s a repeat) keeps them; DTW 1-NN (its windows on
/// three repeats, about 67 s) does not. The apps of one engine share its time: a repeat that costs
/// a minute takes it from another app's models.
pub const K_FOLD_REPEATS_MAX_SECONDS: f64 = 30.0;

/// A classification trial stops at a perfect validation accuracy only when it was measured on at
/// least this many examples (then the error rate is below 3% with 95% confidence, the rule of
/// three); on fewer, a perfect score is luck as often as not, and patience decides.
pub const PERFECT_SCORE_MIN_ROWS: usize = 100;

/// How a run measures its quality.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Validation {
    /// One split by id: `fraction` of the examples held out.
    Split {
        /// The share held out.
        fraction: f64,
    },
    /// k-fold cross-validation, the model served refit on every example.
    KFold {
        /// The number of folds.
        folds: usize,
        /// Whether the folds are stratified by class (classification).
        stratified: bool,
        /// How many times it runs, each time over another partition ([`k_folds`]' `repeat`):
        /// every example is validated once per repeat.
        #[serde(default = "one_repeat")]
        repeats: usize,
    },
}

fn one_repeat() -> usize {
    1
}

impl Validation {
    /// The protocol of a run on `examples`: k-fold when there are fewer than
    /// [`Budget::k_fold_below`] examples ([`Budget::k_fold_below_tables`] rows of a table) and
    /// at least two folds can be made, else the split. It depends on the examples alone, so
    /// every candidate of an app on one data version is measured the same way.
    pub fn choose(examples: &Examples, budget: &Budget) -> Validation {
        let n = examples.len();
        let folds = budget.folds.min(n);
        let below = if examples.inputs.is_table() {
            budget.k_fold_below_tables
        } else {
            budget.k_fold_below
        };
        if n < below && folds >= 2 {
            Validation::KFold {
                folds,
                stratified: matches!(examples.targets, Targets::Classes { .. }),
                repeats: 1,
            }
        } else {
            Validation::Split {
                fraction: budget.validation_fraction,
            }
        }
    }

    /// The protocol of `candidate`'s run on `examples`: [`Validation::choose`], and for a classic
    /// model under k-fold, [`Budget::k_fold_repeats`] repeats (the first repeat's fits may show
    /// that the others would cost too much: then the run keeps one, `classic::train_run`). The
    /// one rule training and the cost estimate both follow.
    pub fn for_candidate(
        candidate: &Candidate,
        examples: &Examples,
        budget: &Budget,
    ) -> Validation {
        match Validation::choose(examples, budget) {
            Validation::KFold {
                folds, stratified, ..
            } if crate::classic::is_classic(candidate.model) => Validation::KFold {
                folds,
                stratified,
                repeats: budget.k_fold_repeats.max(1),
            },
            validation => validation,
        }
    }

    /// How many times every example is validated: the k-fold repeats, 1 for the split.
    pub fn repeats(&self) -> usize {
        match *self {
            Validation::Split { .. } => 1,
            Validation::KFold { repeats, .. } => repeats.max(1),
        }
    }

    /// The `(training rows, validation rows)` of each model the protocol measures: one pair for
    /// the split, one per fold for k-fold (the first repeat's folds first, then the next's).
    pub fn sets(&self, examples: &Examples) -> Vec<(Vec<usize>, Vec<usize>)> {
        match *self {
            Validation::Split { fraction } => vec![split_by_id(&examples.ids, fraction)],
            Validation::KFold {
                folds,
                stratified,
                repeats,
            } => {
                let classes = match &examples.targets {
                    Targets::Classes { labels, .. } if stratified => Some(labels.as_slice()),
                    _ => None,
                };
                (0..repeats.max(1) as u64)
                    .flat_map(|repeat| k_folds(&examples.ids, folds, classes, repeat))
                    .map(|validation| {
                        let mut held_out = vec![false; examples.len()];
                        for &row in &validation {
                            held_out[row] = true;
                        }
                        let train = (0..examples.len()).filter(|&row| !held_out[row]).collect();
                        (train, validation)
                    })
                    .collect()
            }
        }
    }

    /// How many examples are validated: every one under k-fold (each by its fold's model), the
    /// held-out part under the split.
    pub fn validated(&self, examples: &Examples) -> usize {
        match *self {
            Validation::Split { fraction } => split_by_id(&examples.ids, fraction).1.len(),
            Validation::KFold { .. } => examples.len(),
        }
    }

    /// The protocol as recorded ([`easeml_stats::protocol`]), every fold trained.
    pub fn protocol(&self) -> Protocol {
        match *self {
            Validation::Split { fraction } => Protocol::Split {
                // Clamped as `split_by_id` clamps it (a NaN casts to 0).
                percent: (fraction.clamp(0.0, 1.0) * 100.0).round() as u32,
            },
            Validation::KFold {
                folds,
                stratified,
                repeats,
            } => Protocol::KFold(KFold {
                folds: u32::try_from(folds).unwrap_or(u32::MAX),
                stratified,
                repeats: u32::try_from(repeats.max(1)).unwrap_or(u32::MAX),
                trained: None,
                raced: false,
            }),
        }
    }

    /// The protocol in reports: `split 20%`, `5-fold stratified`, `5-fold`, and for a repeated
    /// k-fold the repeats after an `x`: `5-fold stratified x3` ([`Validation::protocol`] written
    /// out).
    pub fn describe(&self) -> String {
        self.protocol().to_string()
    }
}

/// The refit of a k-fold run: the model served, trained on every example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refit {
    /// The learning rate (the one with the best mean fold quality).
    pub learning_rate: f64,
    /// The seed of its initialization and shuffles (that rate's, as in its folds).
    pub seed: u64,
    /// The epochs the rule asks for: the epoch the chosen rate's folds were scored at (where
    /// none was kept, the upper median of the fold models' best epochs, [`refit_epochs`]).
    pub planned_epochs: usize,
    /// The epochs trained (0 when it was not started).
    pub epochs: usize,
    /// Why the checkpoint is the best fold model instead of the refit (no time left, diverged),
    /// or `None` when the refit is the checkpoint.
    pub fallback: Option<String>,
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

/// One model trained for a learning rate of the grid (one per fold under k-fold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningRateTrial {
    /// The learning rate.
    pub learning_rate: f64,
    /// The fold it validated on (k-fold), `None` under the split.
    #[serde(default)]
    pub fold: Option<usize>,
    /// The seed of the initialization and the shuffles.
    pub seed: u64,
    /// Epochs run.
    pub epochs: usize,
    /// The best validation quality, when the trial did not fail.
    pub best_quality: Option<f64>,
    /// The epoch of the best validation quality (from 1), when the trial did not fail.
    #[serde(default)]
    pub best_epoch: Option<usize>,
    /// Why the trial failed (e.g. "loss is NaN at epoch 1").
    pub failure: Option<String>,
    /// A TrimTuner trial's other settings and its cost (`crate::tune`), `None` for the grid's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<crate::tune::TunedTrial>,
    /// For classification: how the validation answers of its best epoch fell. Kept in memory for
    /// the run's [`TrainedRun::confusion`], not written with the trials.
    #[serde(skip)]
    pub confusion: Option<Confusion>,
    /// The validation answers of its best epoch ([`OutOfFold`]), kept in memory for the run's
    /// [`TrainedRun::oof`], not written with the trials.
    #[serde(skip)]
    pub oof: Option<OutOfFold>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// At least one trial trained: the best weights.
    Succeeded {
        /// The kept weights and their metadata.
        checkpoint: Checkpoint,
        /// Their validation quality in `[0,1]` (under k-fold: the mean over the folds).
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
    /// One entry per learning rate with its seed; under k-fold one per learning rate and fold.
    pub trials: Vec<LearningRateTrial>,
    /// Examples used for training the checkpoint and for validation (under k-fold both are every
    /// example: each is validated once, by the model of its fold).
    pub n_train: usize,
    /// See `n_train`.
    pub n_validation: usize,
    /// How the quality was measured.
    pub validation: Validation,
    /// The standard deviation of the fold qualities of the chosen learning rate (k-fold; sample
    /// standard deviation, `k - 1` in the denominator), `None` under the split.
    pub quality_std: Option<f64>,
    /// Under k-fold, how many folds the chosen learning rate trained when the time limit left no
    /// room for the others (the fold cut of `train_k_fold`): the quality is the mean of those
    /// folds. `None` when every fold trained, and under the split.
    pub folds_trained: Option<usize>,
    /// Under k-fold, whether the chosen learning rate's folds stopped because they could no longer
    /// reach [`Budget::race_floor`] ([`crate::race`]; `folds_trained` says after how many).
    pub raced: bool,
    /// The refit on every example (k-fold, when some learning rate trained on every fold; and for
    /// the models that are not networks under the split too, `crate::classic`).
    pub refit: Option<Refit>,
    /// For classification: how the validation answers behind the reported quality fell (the best
    /// trial's best epoch under the split; every fold of the chosen setting under k-fold, a
    /// network's at its scored epoch), `None`
    /// for value outputs and failed runs.
    pub confusion: Option<Confusion>,
    /// The validation answers behind the reported quality (the same answers as `confusion`:
    /// under k-fold every example's, out-of-fold), `None` for outputs that are not classes or
    /// values and for failed runs.
    pub oof: Option<OutOfFold>,
}

impl TrainedRun {
    /// The validation quality, or `None` for a failed run.
    pub fn quality(&self) -> Option<f64> {
        match &self.outcome {
            RunOutcome::Succeeded { quality, .. } => Some(*quality),
            RunOutcome::Failed { .. } => None,
        }
    }

    /// How the quality was measured, as the store records it ([`easeml_stats::protocol`]):
    /// [`Validation::describe`], and for a k-fold run whose folds the time limit cut, `5-fold
    /// stratified, 2 folds trained` (the store reads the fold count back to weigh the mean's
    /// spread), `..., 2 folds trained, raced` when they stopped below the race's floor
    /// ([`TrainedRun::raced`]).
    pub fn protocol(&self) -> String {
        let mut protocol = self.validation.protocol();
        if let (Protocol::KFold(k_fold), Some(trained)) = (&mut protocol, self.folds_trained) {
            k_fold.trained = Some(u32::try_from(trained).unwrap_or(u32::MAX));
            k_fold.raced = self.raced;
        }
        protocol.to_string()
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
    crate::device::prepare(budget.device);
    let task = Task::of(examples)?;
    candidate.check_fits(&task)?;
    let validation = Validation::for_candidate(candidate, examples, budget);
    let sets = validation.sets(examples);
    let scaled = budget.for_run(examples, &sets);
    let budget = &scaled;
    if crate::classic::is_classic(candidate.model) {
        return crate::classic::train_run(
            candidate, examples, &task, budget, validation, &sets, started,
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
        n_train: examples.len(),
        n_validation: examples.len(),
        validation,
        quality_std: None,
        folds_trained: None,
        raced: false,
        refit: None,
        confusion: None,
        oof: None,
    };
    let shared = Shared {
        candidate,
        examples,
        task: &task,
        budget,
        started,
    };
    match validation {
        Validation::Split { .. } => {
            let (train_rows, validation_rows) = &sets[0];
            run.n_train = train_rows.len();
            run.n_validation = validation_rows.len();
            match budget.tuning {
                crate::tune::Tuning::Grid => {
                    train_split(&shared, train_rows, validation_rows, &mut run)?;
                }
                crate::tune::Tuning::TrimTuner => {
                    crate::tune::train_tuned(&shared, train_rows, validation_rows, &mut run)?;
                }
            }
        }
        Validation::KFold { .. } => train_k_fold(&shared, &sets, &mut run)?,
    }
    run.cost_seconds = started.elapsed().as_secs_f64();
    Ok(run)
}

/// What every trial of a run shares.
pub(crate) struct Shared<'a> {
    pub(crate) candidate: &'a Candidate,
    pub(crate) examples: &'a Examples,
    pub(crate) task: &'a Task,
    pub(crate) budget: &'a Budget,
    pub(crate) started: Instant,
}

impl<'a> Shared<'a> {
    /// The context of one trial on `train_rows` / `validation_rows`.
    pub(crate) fn context(
        &self,
        train_rows: &'a [usize],
        validation_rows: &'a [usize],
        deadline: f64,
    ) -> TrialContext<'a> {
        TrialContext {
            candidate: self.candidate,
            examples: self.examples,
            task: self.task,
            budget: self.budget,
            train_rows,
            validation_rows,
            started: self.started,
            deadline,
            rates_left: 1,
            grid_end: self.budget.max_seconds,
            trainings_per_rate: 1,
            refit_epochs: None,
            takes_the_rest: None,
            cut_short: false,
            epoch_scores: None,
        }
    }

    /// The checkpoint of weights trained with `learning_rate` from `seed`.
    pub(crate) fn checkpoint(
        &self,
        learning_rate: f64,
        seed: u64,
        weights: &Weights,
    ) -> Result<Checkpoint> {
        Ok(Checkpoint {
            meta: CheckpointMeta {
                candidate: self.candidate.id(),
                task: self.task.clone(),
                config: self.budget.model,
                learning_rate,
                seed,
                extra: None,
            },
            weights: safetensors_bytes(weights)?,
        })
    }
}

/// The split: every rate of the grid trains on the training part, the best weights are kept.
fn train_split(
    shared: &Shared<'_>,
    train_rows: &[usize],
    validation_rows: &[usize],
    run: &mut TrainedRun,
) -> Result<()> {
    let budget = shared.budget;
    let mut best: Option<BestTrial> = None;
    let n_rates = budget.learning_rates.len().max(1);
    for (trial_index, &learning_rate) in budget.learning_rates.iter().enumerate() {
        let seed = trial_seed(budget, trial_index);
        let deadline = budget.max_seconds * (trial_index + 1) as f64 / n_rates as f64;
        let mut context = shared.context(train_rows, validation_rows, deadline);
        context.rates_left = n_rates - trial_index;
        let (trial_record, kept) = run_trial(&mut context, learning_rate, seed, &mut run.curve)?;
        if let (Some(quality), Some(weights)) = (trial_record.best_quality, kept)
            && best.as_ref().is_none_or(|best| quality > best.quality)
        {
            best = Some(BestTrial {
                quality,
                learning_rate,
                seed,
                weights,
                confusion: trial_record.confusion.clone(),
                oof: trial_record.oof.clone(),
            });
        }
        run.trials.push(trial_record);
        if let Some(epoch_seconds) = context.takes_the_rest {
            skip_rates(budget, trial_index, epoch_seconds, 1, &mut run.trials);
            break;
        }
    }
    run.outcome = match best {
        Some(best) => {
            run.confusion = best.confusion;
            run.oof = best.oof;
            RunOutcome::Succeeded {
                checkpoint: shared.checkpoint(best.learning_rate, best.seed, &best.weights)?,
                quality: best.quality,
            }
        }
        None => failed_outcome(&run.trials),
    };
    Ok(())
}

/// Records the rates after `trial_index` as not tried (a trial's first epoch showed the grid cannot
/// fit the time limit); `folds` is 1 under the split, k under k-fold.
fn skip_rates(
    budget: &Budget,
    trial_index: usize,
    epoch_seconds: f64,
    folds: usize,
    trials: &mut Vec<LearningRateTrial>,
) {
    let per_fold = if folds > 1 {
        format!(" on each of {folds} folds")
    } else {
        String::new()
    };
    let n_rates = budget.learning_rates.len().max(1);
    for (skipped, &learning_rate) in budget
        .learning_rates
        .iter()
        .enumerate()
        .skip(trial_index + 1)
    {
        trials.push(LearningRateTrial {
            learning_rate,
            fold: None,
            seed: trial_seed(budget, skipped),
            epochs: 0,
            best_quality: None,
            best_epoch: None,
            tuned: None,
            confusion: None,
            oof: None,
            failure: Some(format!(
                "not tried: an epoch took {epoch_seconds:.1} s, too slow to give {} rates {} \
                 epochs each{per_fold} in the {:.0} s limit",
                n_rates - trial_index,
                min_epochs_per_rate(budget),
                budget.max_seconds
            )),
        });
    }
}

/// The outcome of a run none of whose rates trained: every trial's failure.
pub(crate) fn failed_outcome(trials: &[LearningRateTrial]) -> RunOutcome {
    RunOutcome::Failed {
        reason: trials
            .iter()
            .map(|trial| {
                let fold = trial
                    .fold
                    .map_or(String::new(), |fold| format!(" fold {}", fold + 1));
                format!(
                    "lr {}{fold}: {}",
                    trial.learning_rate,
                    trial.failure.as_deref().unwrap_or("no result")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// The seed of the grid's `index`-th trial.
pub(crate) fn trial_seed(budget: &Budget, index: usize) -> u64 {
    mix64(budget.seed ^ (index as u64).wrapping_mul(0x1000_0001))
}

/// One epoch's validation: the quality a run reports (accuracy, or R^2 clipped to `[0, 1]`) and the
/// mean training loss on the same rows (`None` for models that are not networks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// The validation quality.
    pub quality: f64,
    /// The validation loss.
    pub loss: Option<f64>,
}

/// The relative drop of the validation loss below its lowest so far that counts as progress for
/// value outputs ([`EarlyStopping`]): 0.1%.
pub const MIN_LOSS_GAIN: f64 = 1e-3;

/// The trainer's one early-stopping rule, for whole runs ([`train()`]) and the coordinator's MOP
/// and data-parallel runs (the engine): an epoch makes progress when its validation quality beats
/// the best so far, or, for value outputs (regression, translation, recovery), when its
/// validation loss is at least [`MIN_LOSS_GAIN`] below the lowest so far. Quality alone misses
/// progress there: R^2 clipped at 0 stays 0 while a model climbs from below zero, and a
/// translation's quality ignores its stop logit, so a seq2seq run whose second epoch peaked by
/// luck stopped at its sixth (0.20 on CUDA, where the same run on the CPU went on to 0.69).
/// Classification watches accuracy only: its validation loss keeps falling as confidence grows
/// after accuracy has settled, which would only lengthen runs. The weights kept are always the
/// best quality's.
#[derive(Debug, Clone)]
pub struct EarlyStopping {
    classification: bool,
    best_quality: f64,
    best_loss: f64,
    since_progress: usize,
}

impl EarlyStopping {
    /// No epoch seen yet.
    pub fn new(classification: bool) -> Self {
        Self {
            classification,
            best_quality: f64::NEG_INFINITY,
            best_loss: f64::INFINITY,
            since_progress: 0,
        }
    }

    /// Records the next epoch's evaluation (`None`: its outputs were not finite, no progress);
    /// true when its quality is the best so far (the weights to keep).
    pub fn record(&mut self, evaluation: Option<&Evaluation>) -> bool {
        let Some(evaluation) = evaluation else {
            self.since_progress += 1;
            return false;
        };
        let best = evaluation.quality > self.best_quality;
        let lower_loss = !self.classification
            && evaluation
                .loss
                .is_some_and(|loss| loss < self.best_loss - MIN_LOSS_GAIN * self.best_loss.abs());
        if best {
            self.best_quality = evaluation.quality;
        }
        if let Some(loss) = evaluation.loss {
            self.best_loss = self.best_loss.min(loss);
        }
        if best || lower_loss {
            self.since_progress = 0;
        } else {
            self.since_progress += 1;
        }
        best
    }

    /// The epochs recorded since the last that made progress (all of them if none did).
    pub fn epochs_without_progress(&self) -> usize {
        self.since_progress
    }

    /// The best quality recorded (`-inf` before any).
    pub fn best_quality(&self) -> f64 {
        self.best_quality
    }
}

/// Loads named tensors into a store's variables (used by inference).
pub(crate) fn load_into(store: &mut nn::VarStore, named: Vec<(String, Tensor)>) -> Result<()> {
    let named: HashMap<String, Tensor> = named.into_iter().collect();
    let mut variables = store.variables();
    tch::no_grad(|| -> Result<()> {
        for (name, variable) in variables.iter_mut() {
            // Checkpoints from before the warm batch norms kept their count in the store lack
            // it; inference does not read it.
            // Checkpoints from before a regression's output scale lack it: they were trained
            // without one, and load as the identity (mean 0, std 1).
            if !named.contains_key(name)
                && (name.rsplit('.').next() == Some(models::WARM_BATCHES_NAME)
                    || name.starts_with(&format!("{}.", crate::normalize::OUTPUT_SCALE_NAME)))
            {
                continue;
            }
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
