//! The models that are not tch modules ("classic" models): fitted by their own solvers on the CPU,
//! their whole state JSON in the checkpoint's metadata (`CheckpointMeta::extra`), no weights file;
//! the float buffers that grow with the training rows packed into strings (`packed.rs`).
//!
//! One run protocol serves them all (`train_run`, called by [`crate::train()`]): each model offers
//! a short list of settings (its hyper-parameter grid, in order of preference: the regularization
//! `C` of the tree-kernel SVM, say); every setting is fitted on the training part of each of the
//! run's validation sets (the split's one pair, or the k folds) and scored on the validation part
//! with the trainer's one quality rule (`QualityAccumulator`: accuracy, or clipped R^2); the best
//! mean wins, and the model served is refit on every example with it (under k-fold always, under
//! the split when one more fit still ends inside the limit; else the split's model is served, and
//! the run's `Refit` says why). A setting is only
//! started while the run's time limit has time left (a fit that runs long stops itself at the
//! deadline where its algorithm allows, or fails, [`Clock`]; so does a validation that runs past
//! it). In a trial record a classic model's `learning_rate` is
//! its setting's value (documented in `DECISIONS.md`).
//!
//! To add a model: a `ModelKind`, a [`Learner`] (its settings and its fit), a [`ClassicModel`]
//! variant (its prediction), and its arm in [`learner`], [`ClassicModel::from_extra`] and
//! [`run_flops`].
//!
//! The models: `tree_kernel.rs` (the tree-kernel SVM), and for tables `gbdt.rs` (gradient-boosted
//! trees), `forest.rs` (the random forest), both over `trees.rs` (histogram CART), and `knn.rs`
//! (k-nearest neighbours), `kernel_ridge.rs` (kernel ridge, Gaussian kernel; tables and images);
//! `table.rs` is the tabular examples as those see them.

pub mod dtw_knn;
pub mod forest;
pub mod gbdt;
pub mod kernel_ridge;
pub mod knn;
pub mod minirocket;
pub mod multirocket;
pub mod packed;
mod table;
pub mod tree_kernel;
pub mod trees;

use std::time::Instant;

use serde::Serialize;

use crate::batch::{Confusion, Expected, QualityAccumulator};
use crate::candidate::{Candidate, ModelKind};
use crate::checkpoint::{Checkpoint, CheckpointMeta};
use crate::data::{Examples, Inputs, Targets};
use crate::error::{Error, Result};
use crate::infer::Prediction;
use crate::oof::OutOfFold;
use crate::task::Task;
use crate::train::{
    Budget, CurvePoint, LearningRateTrial, Refit, RunOutcome, TrainedRun, Validation,
};

use dtw_knn::DtwKnn;
use forest::RandomForest;
use gbdt::Gbdt;
use kernel_ridge::KernelRidge;
use knn::Knn;
use minirocket::MiniRocket;
use multirocket::MultiRocket;
use table::Table;
use tree_kernel::TreeKernelSvm;

/// True for the models trained by this module rather than by the tch loop.
pub fn is_classic(kind: ModelKind) -> bool {
    matches!(
        kind,
        ModelKind::TreeKernelSvm
            | ModelKind::MiniRocket
            | ModelKind::MultiRocket
            | ModelKind::DtwKnn
            | ModelKind::Gbdt
            | ModelKind::RandomForest
            | ModelKind::Knn
            | ModelKind::KernelRidge
    )
}

/// A fitted classic model: what a checkpoint keeps and a [`crate::Predictor`] runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ClassicModel {
    /// The tree-kernel SVM.
    TreeKernelSvm(TreeKernelSvm),
    /// MiniRocket features and a ridge classifier.
    MiniRocket(MiniRocket),
    /// MultiRocket features and a ridge classifier (boxed: two transforms inline would make every
    /// classic model that large).
    MultiRocket(Box<MultiRocket>),
    /// 1-nearest-neighbour under dynamic time warping.
    DtwKnn(DtwKnn),
    /// Gradient-boosted trees.
    Gbdt(Gbdt),
    /// The random forest.
    RandomForest(RandomForest),
    /// k-nearest neighbours.
    Knn(Knn),
    /// Kernel ridge with a Gaussian kernel.
    KernelRidge(KernelRidge),
}

/// A classic model's state from a checkpoint's `extra`, refused unless `is_valid` (the state is
/// one a fit makes): a checkpoint is data, and a model predicts from it without further checks.
fn checked_state<M: serde::de::DeserializeOwned>(
    kind: ModelKind,
    extra: serde_json::Value,
    is_valid: fn(&M) -> bool,
) -> Result<M> {
    let model: M = serde_json::from_value(extra)?;
    if is_valid(&model) {
        Ok(model)
    } else {
        Err(Error::BadCheckpoint(format!(
            "the {} state is malformed",
            kind.id()
        )))
    }
}

impl ClassicModel {
    /// The model stored in a checkpoint's `extra` for a candidate of `kind` (each model's state is
    /// stored as its own JSON object, so checkpoints written before this enum existed still load).
    pub fn from_extra(kind: ModelKind, extra: Option<&serde_json::Value>) -> Result<Self> {
        let extra = extra
            .cloned()
            .ok_or_else(|| Error::BadCheckpoint(format!("the {} state is missing", kind.id())))?;
        match kind {
            ModelKind::TreeKernelSvm => {
                checked_state(kind, extra, TreeKernelSvm::is_valid).map(Self::TreeKernelSvm)
            }
            ModelKind::MiniRocket => {
                checked_state(kind, extra, MiniRocket::is_valid).map(Self::MiniRocket)
            }
            ModelKind::MultiRocket => checked_state(kind, extra, MultiRocket::is_valid)
                .map(|model| Self::MultiRocket(Box::new(model))),
            ModelKind::DtwKnn => checked_state(kind, extra, DtwKnn::is_valid).map(Self::DtwKnn),
            ModelKind::Gbdt => checked_state(kind, extra, Gbdt::is_valid).map(Self::Gbdt),
            ModelKind::RandomForest => {
                checked_state(kind, extra, RandomForest::is_valid).map(Self::RandomForest)
            }
            ModelKind::Knn => checked_state(kind, extra, Knn::is_valid).map(Self::Knn),
            ModelKind::KernelRidge => {
                checked_state(kind, extra, KernelRidge::is_valid).map(Self::KernelRidge)
            }
            _ => Err(Error::BadCheckpoint(format!(
                "{} is not a classic model",
                kind.id()
            ))),
        }
    }

    /// The state for the checkpoint's `extra`.
    pub fn to_extra(&self) -> Result<serde_json::Value> {
        fn json(value: &impl Serialize) -> Result<serde_json::Value> {
            Ok(serde_json::to_value(value)?)
        }
        match self {
            Self::TreeKernelSvm(svm) => json(svm),
            Self::MiniRocket(model) => json(model),
            Self::MultiRocket(model) => json(model),
            Self::DtwKnn(model) => json(model),
            Self::Gbdt(model) => json(model),
            Self::RandomForest(model) => json(model),
            Self::Knn(model) => json(model),
            Self::KernelRidge(model) => json(model),
        }
    }

    /// One prediction for each of `rows` of `inputs` (inputs already checked against the task).
    pub fn predict(&self, inputs: &Inputs, rows: &[usize]) -> Result<Vec<Prediction>> {
        match (self, inputs) {
            (Self::TreeKernelSvm(svm), Inputs::Trees { trees, .. }) => {
                Ok(rows.iter().map(|&row| svm.predict(&trees[row])).collect())
            }
            (Self::MiniRocket(model), Inputs::Sequences(sequences))
                if sequences.step as usize == model.transform.channels =>
            {
                Ok(rows
                    .iter()
                    .map(|&row| model.predict(sequences, row))
                    .collect())
            }
            (Self::MultiRocket(model), Inputs::Sequences(sequences))
                if sequences.step as usize == model.transform.channels =>
            {
                Ok(rows
                    .iter()
                    .map(|&row| model.predict(sequences, row))
                    .collect())
            }
            (Self::DtwKnn(model), Inputs::Sequences(sequences))
                if sequences.step as usize == model.channels =>
            {
                Ok(rows
                    .iter()
                    .map(|&row| model.predict(sequences, row))
                    .collect())
            }
            (Self::Gbdt(model), Inputs::Dense { values, .. }) => {
                Ok(dense_rows(values, model.features, rows, |row| {
                    model.predict(row)
                })?)
            }
            (Self::RandomForest(model), Inputs::Dense { values, .. }) => {
                Ok(dense_rows(values, model.features, rows, |row| {
                    model.predict(row)
                })?)
            }
            (Self::Knn(model), Inputs::Dense { values, .. }) => {
                Ok(dense_rows(values, model.features, rows, |row| {
                    model.predict(row)
                })?)
            }
            (Self::KernelRidge(model), Inputs::Dense { values, .. }) => {
                model.predict_rows(values, rows)
            }
            _ => Err(Error::BadCheckpoint(
                "the inputs do not fit the model's kind".into(),
            )),
        }
    }
}

/// `predict` of each of `rows` of a dense buffer with `features` values per row.
fn dense_rows(
    values: &[f32],
    features: usize,
    rows: &[usize],
    predict: impl Fn(&[f32]) -> Prediction,
) -> Result<Vec<Prediction>> {
    rows.iter()
        .map(|&row| {
            let start = row.checked_mul(features);
            start
                .and_then(|start| values.get(start..start + features))
                .map(&predict)
                .ok_or_else(|| Error::BadCheckpoint("the inputs do not fit the model".into()))
        })
        .collect()
}

/// The run's time limit, for fits that can stop early (adding trees, say).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// When the run started.
    pub started: Instant,
    /// The run's time limit in seconds from `started`.
    pub limit: f64,
}

impl Clock {
    /// Seconds since the run started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// True once the limit is reached.
    pub fn expired(&self) -> bool {
        self.elapsed() >= self.limit
    }
}

/// What one run of a classic model fits: made once per run (so work shared by the folds, like a
/// kernel matrix, is done once), then asked for fits on rows of the examples.
pub trait Learner {
    /// The settings to try, in order of preference (at least one).
    fn settings(&self) -> Vec<f64>;
    /// Fits on `rows` of the run's examples with `setting`.
    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel>;
}

/// The learner of a classic `kind` over `examples`; `sets` are the run's validation sets (the rows
/// some fit will train on are their training parts).
pub fn learner<'a>(
    kind: ModelKind,
    examples: &'a Examples,
    task: &Task,
    sets: &[(Vec<usize>, Vec<usize>)],
    seed: u64,
) -> Result<Box<dyn Learner + 'a>> {
    let does_not_fit = || Error::CandidateDoesNotFit {
        candidate: kind.id().to_owned(),
        task: task.name().to_owned(),
    };
    match kind {
        ModelKind::TreeKernelSvm => Ok(Box::new(
            tree_kernel::SvmLearner::new(examples, sets).ok_or_else(does_not_fit)?,
        )),
        ModelKind::MiniRocket => Ok(Box::new(
            minirocket::MiniRocketLearner::new(examples, seed).ok_or_else(does_not_fit)?,
        )),
        ModelKind::MultiRocket => Ok(Box::new(
            multirocket::MultiRocketLearner::new(examples, seed).ok_or_else(does_not_fit)?,
        )),
        ModelKind::DtwKnn => Ok(Box::new(
            dtw_knn::DtwLearner::new(examples).ok_or_else(does_not_fit)?,
        )),
        ModelKind::Gbdt => Ok(Box::new(gbdt::GbdtLearner::new(
            Table::of(examples).ok_or_else(does_not_fit)?,
            sets.len(),
            seed,
        ))),
        ModelKind::RandomForest => Ok(Box::new(forest::ForestLearner::new(
            Table::of(examples).ok_or_else(does_not_fit)?,
            sets.len(),
            seed,
        ))),
        ModelKind::Knn => Ok(Box::new(knn::KnnLearner::new(
            Table::of(examples).ok_or_else(does_not_fit)?,
            is_image(examples),
        ))),
        ModelKind::KernelRidge => Ok(Box::new(kernel_ridge::KernelRidgeLearner::new(
            Table::of(examples).ok_or_else(does_not_fit)?,
            is_image(examples),
        ))),
        _ => Err(does_not_fit()),
    }
}

/// True for dense inputs of two or more dimensions (images): their models try the raw pixels first.
fn is_image(examples: &Examples) -> bool {
    matches!(&examples.inputs, Inputs::Dense { shape, .. } if shape.len() > 1)
}

/// The predicted floating-point work of a run of `kind` on `examples` with these validation sets
/// (for the cost estimate: a prior the scheduler calibrates with measured costs).
pub fn run_flops(kind: ModelKind, examples: &Examples, sets: &[(Vec<usize>, Vec<usize>)]) -> f64 {
    let trained = |(train, _): &(Vec<usize>, Vec<usize>)| train.len() as f64;
    let fits: f64 = sets.iter().map(trained).sum::<f64>() + examples.len() as f64;
    // The rows of every fit: each set's training part, and the refit on every example.
    let fit_rows: Vec<f64> = sets
        .iter()
        .map(trained)
        .chain([examples.len() as f64])
        .collect();
    match kind {
        // Kernel evaluations: about nodes^2 per pair of trees, every pair of training trees once,
        // two settings of C.
        ModelKind::TreeKernelSvm => {
            let nodes = 50.0;
            let n = sets.first().map_or(0.0, trained);
            nodes * nodes * n * n + 2.0 * fits * n
        }
        // The transform (about 10,000 features x (3 channel sums + 1 comparison) per step, the
        // dilations' shared parts besides) of every fitted and validated series, then the ridge:
        // its Gram matrix (n^2 p) and ten factorizations (n^3 each, with the inverse).
        // MultiRocket: two transforms of DEFAULT_BIASES biases, each bias a pass over the pooled
        // output (four operators) rather than a binary search; four features a bias in the ridge.
        ModelKind::MiniRocket | ModelKind::MultiRocket => {
            let (length, channels) = sequence_shape(examples);
            let (per_series, features) = if kind == ModelKind::MiniRocket {
                let features = minirocket::DEFAULT_FEATURES as f64;
                (
                    features * length * (1.0 + 3.0 * channels.min(9.0) / 2.0),
                    features,
                )
            } else {
                let biases = 2.0 * multirocket::DEFAULT_BIASES as f64;
                (
                    biases * length * (4.0 + 3.0 * channels.min(9.0) / 2.0),
                    biases * multirocket::POOLING_OPERATORS as f64,
                )
            };
            let transformed = fits + sets.iter().map(|(_, v)| v.len() as f64).sum::<f64>();
            let ridge: f64 = sets
                .iter()
                .map(trained)
                .chain(std::iter::once(examples.len() as f64))
                .map(|n| n * n * features + 10.0 * n * n * n)
                .sum();
            per_series * transformed + ridge
        }
        // Every validation series against every training series of its set, for each of the four
        // windows: DTW cells (length x (2w + 1)) x channels x 3 flops, about a third of them
        // computed after pruning (the lower bounds are linear).
        ModelKind::DtwKnn => {
            let (length, channels) = sequence_shape(examples);
            let pairs: f64 = sets
                .iter()
                .map(|(train, validation)| train.len() as f64 * validation.len() as f64)
                .sum();
            let windows: f64 = dtw_knn::WINDOWS
                .iter()
                .map(|fraction| length * (2.0 * (fraction * length).round() + 1.0))
                .sum();
            pairs * windows * channels + fits
        }
        // The tree and neighbour loops are branchy scalar code: one of their steps is counted as
        // `SCALAR_STEP` FLOPs of the tensor speed the estimate assumes (calibrated on digits,
        // 1437 rows x 64 features, 10 classes, and on the tables of a few hundred continuous rows
        // named in `tree_fit_steps`).
        // Boosted trees (`gbdt_flops`): about 150 rounds (early stopping at `gbdt::PATIENCE` of
        // up to `gbdt::MAX_ROUNDS`: 35-60 on diabetes, 110-230 on friedman1) of one tree per
        // output, every feature examined, each depth setting; a fit grows on the rows it does not
        // hold out, with leaves of at least `gbdt::min_leaf` rows, and splits about 16 nodes of a
        // depth-6 tree (every node of a depth-3 one: 5.7-6.1 of 7 measured).
        ModelKind::Gbdt => gbdt_flops(examples, &fit_rows),
        // The forest (`forest_flops`): each setting grows 100 trees, examining
        // `forest::features_per_split` of the features at a split, about `forest_splits_per_row`
        // nodes split per row fitted, the rows at about log2(rows) levels.
        ModelKind::RandomForest => forest_flops(examples, &fit_rows),
        // Each fit's leave-one-out (its rows against at most `MAX_LEAVE_ONE_OUT_QUERIES` of
        // them, standardized and raw), then the distances from every validation row to every
        // training row.
        ModelKind::Knn => {
            let (features, _) = table_shape(examples);
            let queries = knn::MAX_LEAVE_ONE_OUT_QUERIES as f64;
            let leave_one_out: f64 = sets
                .iter()
                .map(trained)
                .chain([examples.len() as f64])
                .map(|n| 2.0 * n * n.min(queries))
                .sum();
            let pairs: f64 = sets
                .iter()
                .map(|(train, validation)| train.len() as f64 * validation.len() as f64)
                .sum();
            2.0 * ((leave_one_out + pairs) * 3.0 * features + fits * features)
        }
        // Per fit and each of the three settings: the kernel matrix (n^2 features), its
        // eigendecomposition (about 4 n^3 as libtorch's LAPACK runs it, measured against
        // `CPU_FLOPS_PER_THREAD`: 3.4-4.5 on 280-360 rows, 1.5 on 1,150; it was counted as 10) and
        // the validation rows' kernel against the fitted ones; then the refit on every example,
        // once (the chosen setting's; it was counted for each setting); n at most `MAX_ROWS`.
        ModelKind::KernelRidge => {
            let (features, outputs) = table_shape(examples);
            let capped = |n: f64| n.min(kernel_ridge::MAX_ROWS as f64);
            let fit = |n: f64| 2.0 * n * n * features + 4.0 * n * n * n;
            let per_setting: f64 = sets
                .iter()
                .map(|(train, validation)| {
                    let n = capped(train.len() as f64);
                    fit(n) + 2.0 * validation.len() as f64 * n * (features + outputs)
                })
                .sum();
            3.0 * per_setting + fit(capped(examples.len() as f64))
        }
        _ => fits,
    }
}

/// The mean length (at least 1) and the channels of sequence inputs, `(1, 1)` for others.
fn sequence_shape(examples: &Examples) -> (f64, f64) {
    match &examples.inputs {
        Inputs::Sequences(sequences) if !sequences.is_empty() => (
            (sequences.offsets.last().copied().unwrap_or(0) as f64 / sequences.len() as f64)
                .max(1.0),
            sequences.step.max(1) as f64,
        ),
        _ => (1.0, 1.0),
    }
}

/// [`run_flops`] of the boosted trees, fits of `fit_rows` rows each (see its comments).
fn gbdt_flops(examples: &Examples, fit_rows: &[f64]) -> f64 {
    let (features, outputs) = table_shape(examples);
    let bins = tree_bins(examples);
    let per_fit = |rows: f64| {
        let grown = if rows >= gbdt::HOLD_OUT_FROM as f64 {
            rows * (1.0 - 1.0 / gbdt::HELD_OUT_ONE_IN as f64)
        } else {
            rows
        };
        let min_leaf = gbdt::min_leaf(grown as usize) as f64;
        let per_round: f64 = gbdt::DEPTHS
            .iter()
            .map(|&depth| {
                let splits = (depth.exp2() - 1.0)
                    .min(16.0)
                    .min(grown / (2.0 * min_leaf))
                    .max(1.0);
                let levels = depth.min(grown.max(2.0).log2());
                tree_fit_steps(grown, levels, splits, features, bins, 1.0)
            })
            .sum();
        150.0 * outputs * per_round
    };
    SCALAR_STEP * fit_rows.iter().map(|&rows| per_fit(rows)).sum::<f64>()
}

/// [`run_flops`] of the forest, fits of `fit_rows` rows each (see its comments).
fn forest_flops(examples: &Examples, fit_rows: &[f64]) -> f64 {
    let (features, outputs) = table_shape(examples);
    let bins = tree_bins(examples);
    let classification = matches!(examples.targets, Targets::Classes { .. });
    let per_fit = |rows: f64| -> f64 {
        forest::settings(classification)
            .into_iter()
            .map(|setting| {
                let extra_trees = forest::is_extra_trees(setting);
                let examined =
                    forest::features_per_split(features as usize, classification, extra_trees)
                        as f64;
                let splits = forest_splits_per_row(classification, extra_trees) * rows;
                let levels = rows.max(2.0).log2();
                forest::TREES as f64 * tree_fit_steps(rows, levels, splits, examined, bins, outputs)
            })
            .sum()
    };
    SCALAR_STEP * fit_rows.iter().map(|&rows| per_fit(rows)).sum::<f64>()
}

/// Steps of growing one tree on `rows` rows (`width` target values each) that reach `levels`
/// levels on average and split `splits` nodes, `examined` features at each: every row's entry in
/// the histogram of each examined feature at each level, and at each split the clearing and scan
/// of each examined feature's bins (at most one per row). The scans dominate on a few hundred
/// continuous rows: estimated from the rows alone, friedman1's forest (400 rows x 10) took 43
/// times its estimate, breast_cancer's (455 x 30) 18 times, diabetes' boosted trees 1.7 times.
fn tree_fit_steps(
    rows: f64,
    levels: f64,
    splits: f64,
    examined: f64,
    bins: f64,
    width: f64,
) -> f64 {
    rows * levels * examined * (width + 3.0)
        + splits * examined * bins.min(rows) * (2.0 * width + 5.0)
}

/// Nodes a forest's tree splits per row it fits, measured (nodes per tree over fitted rows) on
/// diabetes, friedman1, breast_cancer, wine, iris and digits: a grown tree of values splits about
/// every row without a bootstrap (extra trees, one row per leaf) and a sixth of them with five
/// rows per leaf; a tree of classes stops at pure nodes (0.04-0.13 of the rows for the forest,
/// 0.12-0.27 for extra trees).
fn forest_splits_per_row(classification: bool, extra_trees: bool) -> f64 {
    match (classification, extra_trees) {
        (true, false) => 0.08,
        (true, true) => 0.2,
        (false, false) => 0.16,
        (false, true) => 1.0,
    }
}

/// The mean bins of a table's features in a tree fit ([`trees::mean_bins`]; 1 for others).
fn tree_bins(examples: &Examples) -> f64 {
    Table::of(examples).map_or(1.0, |table| trees::mean_bins(&table))
}

/// FLOPs of the assumed tensor speed one step of a tree loop costs (see [`run_flops`]).
const SCALAR_STEP: f64 = 8.0;

/// Features and outputs of tabular examples (1 and 1 for others).
fn table_shape(examples: &Examples) -> (f64, f64) {
    Table::of(examples).map_or((1.0, 1.0), |table| {
        (table.features as f64, table.outputs() as f64)
    })
}

/// The validation quality of `model` on `rows` (accuracy, or clipped R^2) with, for classification,
/// how its answers fell, and the answers themselves ([`OutOfFold`]: probabilities or values);
/// `None` when it predicted a value that is not finite. Predictions are made
/// one row at a time while `clock` has time left: a validation that runs past the limit (1-NN DTW's
/// searches, say) is an error.
pub(crate) fn quality(
    model: &ClassicModel,
    examples: &Examples,
    rows: &[usize],
    clock: &Clock,
) -> Result<Option<Validated>> {
    let mut predictions = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(1) {
        if clock.expired() {
            return Err(Error::OutOfTime {
                limit_seconds: clock.limit,
                doing: format!(
                    "validating (after {} of {} validation examples)",
                    predictions.len(),
                    rows.len()
                ),
            });
        }
        predictions.extend(model.predict(&examples.inputs, chunk)?);
    }
    let mut accumulator = QualityAccumulator::default();
    let mut answers = OutOfFold::default();
    let classification = matches!(examples.targets, Targets::Classes { .. });
    let wrong_kind =
        || Error::BadExamples("a classic model predicted the wrong kind of output".into());
    for (&row, prediction) in rows.iter().zip(&predictions) {
        let expected = match &examples.targets {
            Targets::Classes { labels, .. } => Expected::Class(labels[row]),
            Targets::Dense { shape, values } => {
                let width = crate::data::numel(shape);
                Expected::Values(&values[row * width..(row + 1) * width])
            }
            _ => return Err(wrong_kind()),
        };
        if !accumulator.add_prediction(prediction, expected) {
            return Err(wrong_kind());
        }
        match prediction {
            Prediction::Class { probabilities, .. } => answers.push(row, probabilities),
            Prediction::Values { values, .. } => answers.push(row, values),
            _ => {}
        }
    }
    Ok(accumulator.finite_quality(classification).map(|quality| {
        let answers = (answers.rows.len() == rows.len()).then_some(answers);
        (quality, accumulator.confusion(), answers)
    }))
}

/// A validation's quality, how its answers fell (classification) and the answers.
pub(crate) type Validated = (f64, Option<Confusion>, Option<OutOfFold>);

/// A setting's folds' answers: how they fell (classification) and the answers themselves.
type FoldAnswers = (Confusion, OutOfFold);

/// What a classic run's search over its settings has found so far.
#[derive(Default)]
struct Search {
    /// Whether the sets are k-fold's (a record per fold) and the run's seed.
    k_fold: bool,
    seed: u64,
    /// The sets of one repeat of a repeated k-fold (all of them otherwise): the confusion counts
    /// the first repeat's answers, each example once.
    sets_per_repeat: usize,
    /// The repeats still planned: all of the protocol's, until the first repeat of the first
    /// setting that completes one shows that they would cost too much ([`keeps_repeats`]); then
    /// one.
    repeats: usize,
    /// Whether that check was made (a setting whose first repeat failed leaves it to the next).
    repeats_checked: bool,
    /// How many settings the learner tries (for that prediction).
    settings: usize,
    /// [`Budget::repeats_bound`].
    repeats_max_seconds: f64,
    trials: Vec<LearningRateTrial>,
    curve: Vec<CurvePoint>,
    /// (mean quality, sample std, setting, the model of the best fold, the folds' answers)
    best: Option<(f64, f64, f64, ClassicModel, FoldAnswers)>,
    failure: Option<String>,
    /// The last failure when it was the time limit ending a fit or a validation.
    out_of_time: Option<Error>,
    /// The longest fit so far: under the split, the refit on every example starts only when one
    /// more such fit (on 25% more rows) still ends inside the limit.
    longest_fit: f64,
}

impl Search {
    /// Fits and validates `setting` on every validation set (a record and a curve point each);
    /// the setting with the best mean quality over complete sets is kept.
    fn try_setting(
        &mut self,
        learner: &mut (dyn Learner + '_),
        examples: &Examples,
        sets: &[(Vec<usize>, Vec<usize>)],
        (trial_index, setting): (usize, f64),
        clock: &Clock,
    ) {
        let mut qualities = Vec::new();
        let mut confusion = Confusion::default();
        let mut oof = OutOfFold::default();
        let mut best_fold: Option<(f64, ClassicModel)> = None;
        let setting_started = clock.elapsed();
        let mut sets = &sets[..(self.sets_per_repeat * self.repeats).min(sets.len())];
        for (fold, (train_rows, validation_rows)) in sets.iter().enumerate() {
            if fold == self.sets_per_repeat
                && !std::mem::replace(&mut self.repeats_checked, true)
                && !keeps_repeats(
                    clock.elapsed() - setting_started,
                    self.settings,
                    self.repeats,
                    self.repeats_max_seconds,
                )
            {
                self.repeats = 1;
                sets = &sets[..self.sets_per_repeat];
                break;
            }
            let fit_started = clock.elapsed();
            let fitted = learner.fit(train_rows, setting, clock);
            self.longest_fit = self.longest_fit.max(clock.elapsed() - fit_started);
            let fitted = fitted
                .and_then(|model| Ok((quality(&model, examples, validation_rows, clock)?, model)));
            let (quality, model) = match fitted {
                Ok((Some((quality, answers, fold_oof)), model)) => {
                    if let Some(answers) = answers
                        && fold < self.sets_per_repeat
                    {
                        confusion.merge(&answers);
                    }
                    if let Some(fold_oof) = fold_oof {
                        oof.merge(&fold_oof);
                    }
                    (quality, model)
                }
                Ok((None, _)) => {
                    self.failure =
                        Some("the model predicted a value that is not finite".to_owned());
                    break;
                }
                Err(error) => {
                    self.failure = Some(error.to_string());
                    self.out_of_time = matches!(error, Error::OutOfTime { .. }).then_some(error);
                    break;
                }
            };
            self.curve.push(CurvePoint {
                learning_rate: setting,
                epoch: 1,
                train_loss: 0.0,
                validation_quality: quality,
                seconds: clock.elapsed(),
            });
            self.trials.push(LearningRateTrial {
                learning_rate: setting,
                fold: self.k_fold.then_some(fold),
                seed: self.seed ^ trial_index as u64,
                epochs: 1,
                best_quality: Some(quality),
                best_epoch: Some(1),
                failure: None,
                tuned: None,
                confusion: None,
                oof: None,
            });
            qualities.push(quality);
            if best_fold.as_ref().is_none_or(|(best, _)| quality > *best) {
                best_fold = Some((quality, model));
            }
        }
        if qualities.len() < sets.len() {
            return; // a fold failed: this setting has no complete score
        }
        let Some((_, model)) = best_fold else {
            return;
        };
        let mean = qualities.iter().sum::<f64>() / qualities.len() as f64;
        let std = if qualities.len() < 2 {
            0.0
        } else {
            (qualities.iter().map(|q| (q - mean).powi(2)).sum::<f64>()
                / (qualities.len() - 1) as f64)
                .sqrt()
        };
        if self
            .best
            .as_ref()
            .is_none_or(|(best_mean, ..)| mean > *best_mean)
        {
            // A repeated k-fold answered every example once per repeat: one answer each, the mean.
            let oof = oof.averaged_by_row();
            self.best = Some((mean, std, setting, model, (confusion, oof)));
        }
    }
}

/// Whether a repeated k-fold keeps its `repeats` after its first setting's first repeat took
/// `first_repeat_seconds`: every one of the learner's `settings` on every repeat, predicted at that
/// cost, must take at most `max_seconds` (the run's [`Budget::repeats_bound`]).
pub(crate) fn keeps_repeats(
    first_repeat_seconds: f64,
    settings: usize,
    repeats: usize,
    max_seconds: f64,
) -> bool {
    let predicted = first_repeat_seconds * settings.max(1) as f64 * repeats as f64;
    predicted <= max_seconds
}

/// The model served and the refit's record: `setting` refit on every example when `refit_fits`
/// (under k-fold always; under the split when it fits in the time left: the validation part is a
/// fifth of the data, and k-NN or DTW gain from every stored example). Should the refit fail, or
/// not fit, the best fold's (or the split's) `model` is served.
fn refit_served(
    learner: &mut (dyn Learner + '_),
    examples: &Examples,
    (setting, model): (f64, ClassicModel),
    clock: &Clock,
    refit_fits: bool,
    seed: u64,
) -> (ClassicModel, Refit) {
    let record = |epochs, fallback| Refit {
        learning_rate: setting,
        seed,
        planned_epochs: 1,
        epochs,
        fallback,
    };
    if !refit_fits {
        let fallback = "no time left for the refit on every example: the model trained on the \
                        split's training part is served";
        return (model, record(0, Some(fallback.into())));
    }
    let all_rows: Vec<usize> = (0..examples.len()).collect();
    let unlimited = Clock {
        limit: f64::INFINITY,
        ..*clock
    };
    match learner.fit(&all_rows, setting, &unlimited) {
        Ok(refitted) => (refitted, record(1, None)),
        Err(error) => (model, record(0, Some(error.to_string()))),
    }
}

/// The training run of a classic model (called by [`crate::train()`]).
pub(crate) fn train_run(
    candidate: &Candidate,
    examples: &Examples,
    task: &Task,
    budget: &Budget,
    validation: Validation,
    sets: &[(Vec<usize>, Vec<usize>)],
    started: Instant,
) -> Result<TrainedRun> {
    let clock = Clock {
        started,
        limit: budget.max_seconds,
    };
    if candidate.norm_k.is_some() {
        // The f_k normalization is a layer of the networks; a classic model has none.
        return Err(Error::CandidateDoesNotFit {
            candidate: candidate.id(),
            task: task.name().to_owned(),
        });
    }
    let mut learner = learner(candidate.model, examples, task, sets, budget.seed)?;
    let k_fold = matches!(validation, Validation::KFold { .. });
    let sets_per_repeat = sets.len() / validation.repeats();
    let settings = learner.settings();
    let mut search = Search {
        k_fold,
        seed: budget.seed,
        sets_per_repeat,
        repeats: validation.repeats(),
        settings: settings.len(),
        repeats_max_seconds: budget.repeats_bound(),
        ..Search::default()
    };
    for (trial_index, setting) in settings.into_iter().enumerate() {
        // A later setting starts only with time left; the first always runs.
        if trial_index > 0 && clock.expired() {
            break;
        }
        search.try_setting(
            learner.as_mut(),
            examples,
            sets,
            (trial_index, setting),
            &clock,
        );
    }
    let Search {
        trials,
        curve,
        best,
        failure,
        out_of_time,
        longest_fit,
        repeats,
        ..
    } = search;
    // The protocol the run kept: its repeats cut to one when they would have cost too much.
    let validation = match validation {
        Validation::KFold {
            folds, stratified, ..
        } => Validation::KFold {
            folds,
            stratified,
            repeats,
        },
        split => split,
    };
    let mut quality_std = None;
    let mut refit = None;
    let mut validation_confusion = None;
    let mut validation_answers = None;
    let validated_rows: usize = sets[..sets_per_repeat]
        .iter()
        .map(|(_, rows)| rows.len())
        .sum();
    let outcome = match best {
        Some((quality, std, setting, model, (confusion, oof))) => {
            validation_confusion = (!confusion.is_empty()).then_some(confusion);
            validation_answers = (oof.rows.len() == validated_rows).then_some(oof);
            if k_fold {
                quality_std = Some(std);
            }
            let refit_fits = k_fold || clock.elapsed() + 1.25 * longest_fit <= clock.limit;
            let (model, record) = refit_served(
                learner.as_mut(),
                examples,
                (setting, model),
                &clock,
                refit_fits,
                budget.seed,
            );
            refit = Some(record);
            RunOutcome::Succeeded {
                checkpoint: Checkpoint {
                    meta: CheckpointMeta {
                        candidate: candidate.id(),
                        task: task.clone(),
                        config: budget.model,
                        learning_rate: setting,
                        seed: budget.seed,
                        extra: Some(model.to_extra()?),
                    },
                    weights: Vec::new(),
                },
                quality,
            }
        }
        None => {
            // The time limit ended the run before any model: an error, so that the caller tells
            // it apart from a model that fails (the engine drops a run its session's end cut).
            if let Some(error) = out_of_time {
                return Err(error);
            }
            RunOutcome::Failed {
                reason: failure
                    .unwrap_or_else(|| format!("no {} was fitted", candidate.model.id())),
            }
        }
    };
    let (n_train, n_validation) = match (k_fold, sets.first()) {
        (false, Some((train_rows, validation_rows))) => (train_rows.len(), validation_rows.len()),
        _ => (examples.len(), examples.len()),
    };
    Ok(TrainedRun {
        candidate: candidate.id(),
        outcome,
        cost_seconds: started.elapsed().as_secs_f64(),
        curve,
        trials,
        n_train,
        n_validation,
        validation,
        quality_std,
        folds_trained: None,
        raced: false,
        refit,
        confusion: validation_confusion,
        oof: validation_answers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_kept_while_every_setting_of_every_repeat_fits_the_bound() {
        // Three repeats of two settings at 4 s a repeat: 24 s, inside 30 s.
        assert!(keeps_repeats(4.0, 2, 3, 30.0));
        // At 6 s a repeat, 36 s: over it.
        assert!(!keeps_repeats(6.0, 2, 3, 30.0));
        // No settings count as one.
        assert!(keeps_repeats(9.0, 0, 3, 30.0));
        assert!(!keeps_repeats(11.0, 0, 3, 30.0));
    }

    /// A tree's work is per bin of the features it scans: 400 continuous rows get 256 bins a
    /// feature and cost the forest and the boosted trees several times what the same rows cost
    /// with four distinct values a feature (the estimate that left the scans out was the same for
    /// both, and 43 times under friedman1's measured forest).
    #[test]
    fn a_tree_models_cost_counts_the_bins_its_splits_scan() {
        use crate::data::{Inputs, Targets};
        let continuous = crate::synthetic::tabular_linear(400, 10, 3);
        let mut coarse = continuous.clone();
        if let Inputs::Dense { values, .. } = &mut coarse.inputs {
            values
                .iter_mut()
                .for_each(|value| *value = (*value * 2.0).round());
        }
        let bins = |examples: &Examples| tree_bins(examples);
        assert_eq!(bins(&continuous), 256.0);
        assert!((3.0..=5.0).contains(&bins(&coarse)), "{}", bins(&coarse));
        let sets = crate::train::Validation::KFold {
            folds: 5,
            stratified: false,
            repeats: 3,
        }
        .sets(&continuous);
        for kind in [ModelKind::RandomForest, ModelKind::Gbdt] {
            let ratio = run_flops(kind, &continuous, &sets) / run_flops(kind, &coarse, &sets);
            assert!(ratio > 3.0, "{kind:?}: {ratio}");
        }
        // A constant feature has one bin.
        let mut constant = continuous.clone();
        if let Inputs::Dense { values, .. } = &mut constant.inputs {
            values.iter_mut().for_each(|value| *value = 1.0);
        }
        assert_eq!(bins(&constant), 1.0);
        assert!(matches!(continuous.targets, Targets::Dense { .. }));
    }

    /// A learner that fails its first setting and delegates the others to `inner`.
    struct FailsFirstSetting<'a> {
        inner: Box<dyn Learner + 'a>,
        first: f64,
    }

    impl Learner for FailsFirstSetting<'_> {
        fn settings(&self) -> Vec<f64> {
            self.inner.settings()
        }

        fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
            if setting == self.first {
                return Err(Error::BadExamples("the first setting fails".to_owned()));
            }
            self.inner.fit(rows, setting, clock)
        }
    }

    #[test]
    fn the_repeats_cost_check_falls_to_the_first_setting_that_completes_a_repeat() {
        let examples = Examples {
            ids: (0..60).collect(),
            inputs: crate::data::Inputs::Dense {
                shape: vec![2],
                values: (0..120).map(|value| (value % 7) as f32).collect(),
            },
            targets: crate::data::Targets::Classes {
                labels: (0..60).map(|row| row % 3).collect(),
                n_classes: 3,
            },
        };
        let task = Task::TabularClassification {
            features: 2,
            n_classes: 3,
        };
        let validation = Validation::KFold {
            folds: 5,
            stratified: true,
            repeats: 3,
        };
        let sets = validation.sets(&examples);
        let inner = learner(ModelKind::KernelRidge, &examples, &task, &sets, 7).unwrap();
        let settings = inner.settings();
        assert!(settings.len() >= 2, "{settings:?}");
        let mut failing = FailsFirstSetting {
            inner,
            first: settings[0],
        };
        let mut search = Search {
            k_fold: true,
            sets_per_repeat: 5,
            repeats: 3,
            settings: settings.len(),
            // No repeat fits a bound of nothing: the check, once made, keeps one.
            repeats_max_seconds: 0.0,
            ..Search::default()
        };
        let clock = Clock {
            started: Instant::now(),
            limit: 60.0,
        };
        search.try_setting(&mut failing, &examples, &sets, (0, settings[0]), &clock);
        assert!(search.failure.is_some() && !search.repeats_checked);
        assert_eq!(search.repeats, 3);
        search.try_setting(&mut failing, &examples, &sets, (1, settings[1]), &clock);
        assert!(search.repeats_checked);
        assert_eq!(search.repeats, 1);
        // The second setting trained one repeat's five folds and has a complete score.
        assert_eq!(search.trials.len(), 5);
        assert!(search.best.is_some());
    }
}
