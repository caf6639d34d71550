//! Kernel ridge with a Gaussian (RBF) kernel: regularized least squares in the dual (Saunders,
//! Gammerman and Vovk 1998), one-vs-rest on +/-1 targets for classes (Rifkin and Klautau, "In
//! defense of one-vs-all classification", JMLR 2004), the target means as intercepts.
//!
//! A fit keeps its rows (standardized as k-NN does, or raw), the kernel's `gamma`, the dual
//! coefficients and the intercepts; a prediction is `intercept + sum_i c_i exp(-gamma |x - x_i|^2)`
//! per output (classes: the largest wins, probabilities a softmax of the values).
//!
//! - `gamma` is the setting times scikit-learn's `gamma="scale"`, `1 / (features * var(X))` (the
//!   variance of every value of the fitted rows): settings `{1, 3, 1/3}`, negative for the raw
//!   features (images: pixels are on one scale already, and k-NN's reason applies), positive for
//!   standardized ones (tables).
//! - The regularization is chosen inside each fit by exact leave-one-out over [`alpha_grid`]: one
//!   symmetric eigendecomposition `K = Q diag(l) Q^T` serves every alpha, the left-out residual of
//!   row `i` is `c_i / ((K + alpha I)^-1)_ii` (the target means are kept fixed). Classes choose by
//!   leave-one-out accuracy (then squared error), values by squared error; on ties the larger alpha.
//! - At most [`MAX_ROWS`] rows are fitted (evenly spaced among the rows given): the kernel matrix
//!   and its eigenvectors are `n x n` doubles each, so memory stays bounded on any input.
//!
//! The dense algebra (kernel matrices, the eigendecomposition, batched predictions) runs on the CPU
//! through libtorch, which the trainer links anyway: a pure-Rust eigendecomposition of a few
//! thousand rows would be tens of times slower.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::minirocket::softmax_prediction;
use super::table::{Table, Target, evenly_spaced, standardization, standardize_into};
use super::{ClassicModel, Clock, Learner};
use crate::error::{Error, Result};
use crate::infer::Prediction;

/// The most rows one fit keeps (about 72 MB per `n x n` matrix of doubles).
pub const MAX_ROWS: usize = 3000;

/// Rows per batch of predictions (bounds the query-by-points kernel block).
const PREDICT_BATCH: usize = 512;

/// The regularizations leave-one-out chooses from: `10^-6 .. 10^1`, half a decade apart (the
/// kernel's diagonal is 1).
pub fn alpha_grid() -> Vec<f64> {
    (0..=14)
        .map(|i| 10f64.powf(-6.0 + 0.5 * i as f64))
        .collect()
}

/// A fitted kernel ridge model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRidge {
    /// Values per input row.
    pub features: usize,
    /// Classes for classification, 0 for regression.
    pub classes: usize,
    /// Output values per row (the classes' count for classification).
    pub outputs: usize,
    /// The kernel's width: `exp(-gamma |x - y|^2)`.
    pub gamma: f64,
    /// The regularization leave-one-out chose.
    pub alpha: f64,
    /// Per feature, the mean subtracted.
    #[serde(with = "super::packed")]
    pub mean: Vec<f32>,
    /// Per feature, the divisor.
    #[serde(with = "super::packed")]
    pub scale: Vec<f32>,
    /// The kept rows, standardized, `features` each.
    #[serde(with = "super::packed")]
    pub points: Vec<f32>,
    /// Per kept row, its `outputs` dual coefficients.
    #[serde(with = "super::packed")]
    pub coefficients: Vec<f32>,
    /// Per output, the intercept (the fitted targets' mean).
    pub intercepts: Vec<f64>,
    /// The buffers above as the tensors a prediction multiplies, built by the first prediction
    /// (a batch-1 prediction would otherwise convert every kept row again).
    #[serde(skip)]
    pub(crate) prepared: PreparedTensors,
}

/// A kernel ridge model's tensors: its kept rows, their squared norms, the coefficients and the
/// intercepts, in doubles. Not part of the model's state: a clone starts empty and every two
/// compare equal. Behind a mutex (held only to take shallow clones), since tensors are not `Sync`.
#[derive(Default)]
pub(crate) struct PreparedTensors(std::sync::Mutex<Option<[Tensor; 4]>>);

impl Clone for PreparedTensors {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for PreparedTensors {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for PreparedTensors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreparedTensors")
    }
}

impl KernelRidge {
    /// True when the buffers agree with the shapes.
    pub fn is_valid(&self) -> bool {
        let rows = self.points.len() / self.features.max(1);
        self.features > 0
            && self.outputs > 0
            && (self.classes == 0 || self.classes == self.outputs)
            && self.gamma.is_finite()
            && self.gamma > 0.0
            && rows > 0
            && self.mean.len() == self.features
            && self.scale.len() == self.features
            && self.points.len() == rows * self.features
            && self.coefficients.len() == rows * self.outputs
            && self.intercepts.len() == self.outputs
    }

    /// The predictions for `rows` of a dense buffer with `features` values per row.
    pub fn predict_rows(&self, values: &[f32], rows: &[usize]) -> Result<Vec<Prediction>> {
        let [points, point_norms, coefficients, intercepts] = self.tensors();
        let mut predictions = Vec::with_capacity(rows.len());
        let mut query = Vec::new();
        for chunk in rows.chunks(PREDICT_BATCH) {
            query.clear();
            query.resize(chunk.len() * self.features, 0.0f32);
            for (slot, &row) in query.chunks_mut(self.features).zip(chunk) {
                let start = row.checked_mul(self.features);
                let input = start
                    .and_then(|start| values.get(start..start + self.features))
                    .ok_or_else(|| {
                        Error::BadCheckpoint("the inputs do not fit the model".into())
                    })?;
                standardize_into(&self.mean, &self.scale, input, slot);
            }
            let queries = Tensor::from_slice(&query)
                .to_kind(Kind::Double)
                .view([chunk.len() as i64, self.features as i64]);
            let kernel = rbf(&queries, &points, &point_norms, self.gamma);
            let decision = kernel.matmul(&coefficients) + &intercepts;
            let decision: Vec<f64> = Vec::<f64>::try_from(decision.contiguous().view([-1]))?;
            for values in decision.chunks(self.outputs) {
                predictions.push(if self.classes > 0 {
                    softmax_prediction(values)
                } else {
                    Prediction::Values {
                        shape: vec![self.outputs as i64],
                        values: values.iter().map(|&v| v as f32).collect(),
                    }
                });
            }
        }
        Ok(predictions)
    }
}

impl KernelRidge {
    /// [`PreparedTensors`], built on first use.
    fn tensors(&self) -> [Tensor; 4] {
        let mut prepared = self
            .prepared
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tensors = prepared.get_or_insert_with(|| {
            let n = self.points.len() / self.features;
            let points = Tensor::from_slice(&self.points)
                .to_kind(Kind::Double)
                .view([n as i64, self.features as i64]);
            let point_norms = points.square().sum_dim_intlist(1, false, Kind::Double);
            let coefficients = Tensor::from_slice(&self.coefficients)
                .to_kind(Kind::Double)
                .view([n as i64, self.outputs as i64]);
            [
                points,
                point_norms,
                coefficients,
                Tensor::from_slice(&self.intercepts),
            ]
        });
        tensors.each_ref().map(Tensor::shallow_clone)
    }
}

/// `exp(-gamma |a_i - b_j|^2)` for rows `a_i` of `a` and `b_j` of `b` (`b_norms`: the squared norms
/// of `b`'s rows).
fn rbf(a: &Tensor, b: &Tensor, b_norms: &Tensor, gamma: f64) -> Tensor {
    let a_norms = a.square().sum_dim_intlist(1, true, Kind::Double);
    let squared = (a_norms + b_norms.unsqueeze(0) - a.matmul(&b.tr()) * 2.0).clamp_min(0.0);
    (squared * -gamma).exp()
}

/// The kernel ridge learner.
pub(crate) struct KernelRidgeLearner<'a> {
    table: Table<'a>,
    image: bool,
}

impl<'a> KernelRidgeLearner<'a> {
    /// The learner over `table`; `image` when the inputs are images (raw pixels first).
    pub(crate) fn new(table: Table<'a>, image: bool) -> Self {
        Self { table, image }
    }
}

impl Learner for KernelRidgeLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        let sign = if self.image { -1.0 } else { 1.0 };
        [1.0, 3.0, 1.0 / 3.0].iter().map(|g| sign * g).collect()
    }

    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
        if rows.is_empty() {
            return Err(Error::BadExamples("no rows to fit kernel ridge on".into()));
        }
        let out_of_time = |doing: &str| Error::OutOfTime {
            limit_seconds: clock.limit,
            doing: format!("kernel ridge was {doing}"),
        };
        let rows = evenly_spaced(rows, MAX_ROWS);
        let table = self.table;
        let (n, features) = (rows.len(), table.features);
        let (mean, scale) = standardization(&table, &rows, setting > 0.0);
        let mut points = vec![0.0f32; n * features];
        for (slot, &row) in points.chunks_mut(features).zip(&rows) {
            standardize_into(&mean, &scale, table.row(row), slot);
        }
        let x = Tensor::from_slice(&points)
            .to_kind(Kind::Double)
            .view([n as i64, features as i64]);
        let variance = x.var(false).double_value(&[]);
        let base = if variance.is_finite() && variance > 1e-12 {
            1.0 / (features as f64 * variance)
        } else {
            1.0 / features as f64
        };
        let gamma = setting.abs().max(1e-6) * base;
        let norms = x.square().sum_dim_intlist(1, false, Kind::Double);
        let kernel = rbf(&x, &x, &norms, gamma);
        if clock.expired() {
            return Err(out_of_time("computing its kernel matrix"));
        }
        // Targets: +/-1 per class, or the values; centered by their means (the intercepts).
        let outputs = table.outputs().max(1);
        let mut targets = table.target_matrix(&rows);
        if table.is_classification() {
            for value in &mut targets {
                *value = 2.0 * *value - 1.0;
            }
        }
        let targets = Tensor::from_slice(&targets).view([n as i64, outputs as i64]);
        let intercepts = targets.mean_dim(0, false, Kind::Double);
        let centered = &targets - &intercepts;
        let (eigenvalues, eigenvectors) = kernel.linalg_eigh("L");
        if clock.expired() {
            return Err(out_of_time("decomposing its kernel matrix"));
        }
        let eigenvalues = eigenvalues.clamp_min(0.0);
        let projected = eigenvectors.tr().matmul(&centered);
        let squared_vectors = eigenvectors.square();
        let labels: Vec<i64> = match table.target {
            Target::Classes { labels, .. } => rows.iter().map(|&row| labels[row]).collect(),
            Target::Values { .. } => Vec::new(),
        };
        // (score, alpha, coefficients): the score is (correct, -squared error), larger better.
        let mut best: Option<((usize, f64), f64, Tensor)> = None;
        for alpha in alpha_grid().into_iter().rev() {
            let weights = (&eigenvalues + alpha).reciprocal();
            let coefficients = eigenvectors.matmul(&(&projected * weights.unsqueeze(1)));
            let diagonal = squared_vectors.matmul(&weights);
            let residuals = &coefficients / diagonal.unsqueeze(1);
            let squared_error = residuals.square().sum(Kind::Double).double_value(&[]);
            if !squared_error.is_finite() {
                continue;
            }
            let correct = if labels.is_empty() {
                0
            } else {
                let left_out = (&targets - &residuals).argmax(1, false);
                let left_out = Vec::<i64>::try_from(left_out)?;
                left_out.iter().zip(&labels).filter(|(a, b)| a == b).count()
            };
            let score = (correct, -squared_error);
            if best.as_ref().is_none_or(|(best_score, ..)| {
                score.0 > best_score.0 || (score.0 == best_score.0 && score.1 > best_score.1)
            }) {
                best = Some((score, alpha, coefficients));
            }
        }
        let (_, alpha, coefficients) =
            best.ok_or_else(|| Error::BadExamples("kernel ridge could not be solved".into()))?;
        let coefficients: Vec<f64> =
            Vec::<f64>::try_from(coefficients.to_device(Device::Cpu).contiguous().view([-1]))?;
        let intercepts: Vec<f64> = Vec::<f64>::try_from(intercepts)?;
        Ok(ClassicModel::KernelRidge(KernelRidge {
            features,
            classes: if table.is_classification() {
                outputs
            } else {
                0
            },
            outputs,
            gamma,
            alpha,
            mean,
            scale,
            points,
            coefficients: coefficients.iter().map(|&c| c as f32).collect(),
            intercepts,
            prepared: PreparedTensors::default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Examples, Inputs, Targets};

    fn clock() -> Clock {
        Clock {
            started: std::time::Instant::now(),
            limit: 60.0,
        }
    }

    #[test]
    fn rings_that_no_line_separates_are_learned() {
        // Class 1 inside radius 1, class 0 on a ring of radius 2: no linear model separates them.
        let mut values = Vec::new();
        let mut labels = Vec::new();
        for i in 0..80 {
            let angle = i as f32 * 0.61;
            let radius = if i % 2 == 0 { 0.5 } else { 2.0 };
            values.extend([radius * angle.cos(), radius * angle.sin()]);
            labels.push(i64::from(i % 2 == 0));
        }
        let examples = Examples {
            ids: Examples::sequential_ids(80),
            inputs: Inputs::Dense {
                shape: vec![2],
                values: values.clone(),
            },
            targets: Targets::Classes {
                n_classes: 2,
                labels: labels.clone(),
            },
        };
        let table = Table::of(&examples).unwrap();
        let train: Vec<usize> = (0..60).collect();
        let mut learner = KernelRidgeLearner::new(table, false);
        assert_eq!(learner.settings()[0], 1.0);
        assert!(KernelRidgeLearner::new(table, true).settings()[0] < 0.0);
        let ClassicModel::KernelRidge(model) = learner.fit(&train, 1.0, &clock()).unwrap() else {
            panic!("not kernel ridge");
        };
        assert!(model.is_valid());
        let test: Vec<usize> = (60..80).collect();
        let predictions = model.predict_rows(&values, &test).unwrap();
        let correct = Prediction::count_correct(&predictions, test.iter().map(|&row| labels[row]));
        assert_eq!(correct, 20);
        // The model survives its checkpoint form.
        let extra = ClassicModel::KernelRidge(model.clone()).to_extra().unwrap();
        let back = ClassicModel::from_extra(crate::candidate::ModelKind::KernelRidge, Some(&extra))
            .unwrap();
        assert_eq!(back, ClassicModel::KernelRidge(model.clone()));
        // A broken state is refused, not trusted.
        let mut broken = model;
        broken.coefficients.pop();
        let extra = serde_json::to_value(&broken).unwrap();
        assert!(
            ClassicModel::from_extra(crate::candidate::ModelKind::KernelRidge, Some(&extra))
                .is_err()
        );
        // Rows that do not fit the model are an error, not a panic.
        assert!(model_rows_error(&back));
    }

    fn model_rows_error(model: &ClassicModel) -> bool {
        let ClassicModel::KernelRidge(model) = model else {
            return false;
        };
        model.predict_rows(&[0.0; 3], &[1]).is_err()
    }

    #[test]
    fn a_smooth_function_is_regressed_and_noise_is_regularized() {
        // y = sin(x) on [0, 6]; leave-one-out must pick a small alpha for clean data and a larger
        // one when the targets are noise.
        let xs: Vec<f32> = (0..120).map(|i| i as f32 * 0.05).collect();
        let fit = |targets: Vec<f32>| {
            let examples = Examples {
                ids: Examples::sequential_ids(120),
                inputs: Inputs::Dense {
                    shape: vec![1],
                    values: xs.clone(),
                },
                targets: Targets::Dense {
                    shape: vec![1],
                    values: targets,
                },
            };
            let table = Table::of(&examples).unwrap();
            let rows: Vec<usize> = (0..120).step_by(2).collect();
            let ClassicModel::KernelRidge(model) = KernelRidgeLearner::new(table, false)
                .fit(&rows, 1.0, &clock())
                .unwrap()
            else {
                panic!("not kernel ridge");
            };
            model
        };
        let clean = fit(xs.iter().map(|x| x.sin()).collect());
        let held_out: Vec<usize> = (1..120).step_by(2).collect();
        let predictions = clean.predict_rows(&xs, &held_out).unwrap();
        for (prediction, &row) in predictions.iter().zip(&held_out) {
            let Prediction::Values { values, .. } = prediction else {
                panic!("not values");
            };
            assert!(
                (values[0] - xs[row].sin()).abs() < 0.05,
                "{values:?} at {row}"
            );
        }
        // Targets with no relation to x: a deterministic scramble.
        let noise = fit((0..120)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect());
        assert!(
            noise.alpha > clean.alpha,
            "{} vs {}",
            noise.alpha,
            clean.alpha
        );
    }

    #[test]
    fn fits_keep_at_most_max_rows() {
        let rows: Vec<usize> = (0..10_000).collect();
        let kept = evenly_spaced(&rows, MAX_ROWS);
        assert_eq!(kept.len(), MAX_ROWS);
        assert_eq!(kept[0], 0);
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(evenly_spaced(&rows[..5], MAX_ROWS), rows[..5].to_vec());
    }
}
