//! MiniRocket: random-but-almost-deterministic convolutional features and a ridge classifier.
//!
//! Dempster, Schmidt and Webb, "MINIROCKET: A Very Fast (Almost) Deterministic Transform for Time
//! Series Classification", KDD 2021 (reference code: `github.com/angus924/minirocket`; the
//! multivariate and variable-length variants as in sktime's `MiniRocketMultivariate` and
//! `MiniRocketMultivariateVariable`).
//!
//! The transform: the 84 kernels of length 9 whose weights are -1 except three 2s (every choice of
//! 3 of the 9 positions), at dilations `floor(2^e)` for 32 exponents `e` evenly spaced in
//! `[0, log2((L - 1) / 8)]` (deduplicated; `L` the longest training series), the ~10,000 features
//! split across the dilations in proportion to how often each came up; each (dilation, kernel)
//! combination sums the convolutions of a random subset of the channels (1 to 9 channels,
//! `floor(2^u)`, `u` uniform in `[0, log2(min(C, 9) + 1))`, as sktime); its biases are quantiles
//! (a low-discrepancy sequence, `i * golden ratio mod 1`) of its output on one random training
//! series; each feature is the proportion of positive values (PPV) of the output minus a bias.
//! Convolutions are "same" with zero padding; the PPV is taken over the whole output or, for every
//! other (dilation, kernel) combination, over the part not touched by padding (the paper's
//! alternating padding).
//!
//! Variable length: every series is convolved at its own length and its PPV taken over its own
//! output (as sktime's variable-length variant); the dilations are fitted to the longest training
//! series. A series shorter than the receptive field is not padded: the zero padding of the
//! convolution covers it, and the unpadded PPV falls back to the whole output when nothing is left
//! unpadded. A series of length 0 gives PPV 0. Values that are not finite are read as 0.
//!
//! The classifier: features standardized (training mean and standard deviation, constant features
//! scale 1), one-vs-rest ridge regression on +/-1 targets with centered targets (the intercept),
//! its regularization chosen by exact leave-one-out error over 10 values `10^-3 .. 10^3` like
//! sklearn's `RidgeClassifierCV` (the paper's setting): the grid applies to features normalized as
//! sklearn's `normalize=True` did (centered, unit L2 norm), that is `alpha * n` on standardized
//! features. Leave-one-out comes in closed form from the dual (`n x n`) problem, one Cholesky
//! factorization per alpha. Probabilities are a softmax of the decision values.

use serde::{Deserialize, Serialize};

use super::{ClassicModel, Clock, Learner};
use crate::data::{Examples, Inputs, Sequences, Targets};
use crate::error::{Error, Result};
use crate::infer::Prediction;
use crate::synthetic::Rng;

/// The kernel length.
const KERNEL_LENGTH: usize = 9;
/// The number of kernels (`C(9, 3)`).
pub const N_KERNELS: usize = 84;
/// The paper's default feature budget.
pub const DEFAULT_FEATURES: usize = 10_000;
/// The paper's maximum number of dilations per kernel.
const MAX_DILATIONS_PER_KERNEL: usize = 32;
/// The most channels one combination sums.
const MAX_CHANNELS_PER_COMBINATION: usize = 9;

/// The 84 kernels: the positions of the three weights 2, in lexicographic order.
pub fn kernels() -> Vec<[usize; 3]> {
    let mut kernels = Vec::with_capacity(N_KERNELS);
    for a in 0..KERNEL_LENGTH {
        for b in a + 1..KERNEL_LENGTH {
            for c in b + 1..KERNEL_LENGTH {
                kernels.push([a, b, c]);
            }
        }
    }
    kernels
}

/// The dilations for series of `length` and the number of features of each (the reference
/// `fit_dilations`).
pub fn fit_dilations(length: usize, n_features: usize) -> (Vec<usize>, Vec<usize>) {
    let per_kernel = (n_features / N_KERNELS).max(1);
    let true_max = per_kernel.min(MAX_DILATIONS_PER_KERNEL);
    let multiplier = per_kernel as f64 / true_max as f64;
    let ratio = (length.saturating_sub(1) as f64 / (KERNEL_LENGTH - 1) as f64).max(1.0);
    let max_exponent = ratio.log2();
    let mut dilations: Vec<usize> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    for i in 0..true_max {
        let exponent = if true_max == 1 {
            0.0
        } else {
            max_exponent * i as f64 / (true_max - 1) as f64
        };
        let dilation = (2f64.powf(exponent).floor() as usize).max(1);
        if dilations.last() == Some(&dilation) {
            if let Some(count) = counts.last_mut() {
                *count += 1;
            }
        } else {
            dilations.push(dilation);
            counts.push(1);
        }
    }
    let mut per_dilation: Vec<usize> = counts
        .iter()
        .map(|&count| (count as f64 * multiplier) as usize)
        .collect();
    let mut remainder = per_kernel.saturating_sub(per_dilation.iter().sum());
    let mut i = 0;
    while remainder > 0 {
        per_dilation[i] += 1;
        remainder -= 1;
        i = (i + 1) % per_dilation.len();
    }
    (dilations, per_dilation)
}

/// The low-discrepancy quantiles of the reference code: `i * golden ratio mod 1`, `i = 1..=n`.
fn quantiles(n: usize) -> Vec<f64> {
    let phi = (5f64.sqrt() + 1.0) / 2.0;
    (1..=n).map(|i| (i as f64 * phi) % 1.0).collect()
}

/// The `q`-quantile of sorted values with linear interpolation (numpy's default).
fn quantile_sorted(sorted: &[f32], q: f64) -> f32 {
    if sorted.is_empty() {
        return 0.0;
    }
    let position = q * (sorted.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = (low + 1).min(sorted.len() - 1);
    let fraction = position - low as f64;
    (f64::from(sorted[low]) * (1.0 - fraction) + f64::from(sorted[high]) * fraction) as f32
}

/// One series, channel-major (`values[c * length + t]`), non-finite values read as 0.
pub(crate) struct Series {
    pub(crate) length: usize,
    pub(crate) values: Vec<f32>,
}

impl Series {
    /// The first-order difference, `x[c][t + 1] - x[c][t]` (one step shorter; empty stays empty).
    pub(crate) fn difference(&self, channels: usize) -> Series {
        let length = self.length.saturating_sub(1);
        let mut values = Vec::with_capacity(channels * length);
        for c in 0..channels {
            let x = &self.values[c * self.length..(c + 1) * self.length];
            values.extend(x.windows(2).map(|pair| pair[1] - pair[0]));
        }
        Series { length, values }
    }
}

/// Series `row` of `sequences`.
pub(crate) fn series(sequences: &Sequences, row: usize) -> Series {
    let step = sequences.step.max(1) as usize;
    let steps = sequences.steps(row);
    let length = steps.len() / step;
    let mut values = vec![0f32; length * step];
    for t in 0..length {
        for c in 0..step {
            let value = steps[t * step + c];
            values[c * length + t] = if value.is_finite() { value } else { 0.0 };
        }
    }
    Series { length, values }
}

/// What a series classifier learns from: the examples' sequences and class labels. One `of` for
/// every series learner (MiniRocket, MultiRocket, DTW 1-NN): `None` for other examples.
pub(crate) struct SeriesClasses<'a> {
    /// The input series.
    pub(crate) sequences: &'a Sequences,
    /// Each example's class.
    pub(crate) labels: &'a [i64],
    /// The number of classes (at least 1).
    pub(crate) n_classes: usize,
}

impl<'a> SeriesClasses<'a> {
    /// The examples' series and classes, `None` unless the inputs are sequences and the targets
    /// classes.
    pub(crate) fn of(examples: &'a Examples) -> Option<Self> {
        let (Inputs::Sequences(sequences), Targets::Classes { n_classes, labels }) =
            (&examples.inputs, &examples.targets)
        else {
            return None;
        };
        Some(Self {
            sequences,
            labels,
            n_classes: (*n_classes).max(1) as usize,
        })
    }

    /// The ridge classifier over the `features` of the series of `rows`, each transformed under
    /// `clock` (`model` names the learner in the out-of-time error).
    pub(crate) fn fit_ridge(
        &self,
        rows: &[usize],
        clock: &Clock,
        model: &str,
        features: impl Fn(&Series) -> Vec<f32>,
    ) -> Result<RidgeClassifier> {
        let mut training = Vec::with_capacity(rows.len());
        for &row in rows {
            if clock.expired() {
                return Err(Error::BadExamples(format!(
                    "{model} ran out of time transforming the training series"
                )));
            }
            training.push(features(&series(self.sequences, row)));
        }
        let labels: Vec<i64> = rows.iter().map(|&row| self.labels[row]).collect();
        RidgeClassifier::fit(training, &labels, self.n_classes, clock)
    }
}

/// The per-channel convolution parts at one dilation: `alpha[c][t]` (the sum of `-x` over the 9
/// taps) and `gamma[c][j][t]` (`3 x` at tap `j`), so that a kernel with 2s at `(i, j, k)` is
/// `alpha + gamma[i] + gamma[j] + gamma[k]`.
struct Parts {
    length: usize,
    alpha: Vec<f32>,
    gamma: Vec<f32>,
}

impl Parts {
    fn new(series: &Series, channels: usize, dilation: usize) -> Self {
        let length = series.length;
        let mut alpha = vec![0f32; channels * length];
        let mut gamma = vec![0f32; channels * KERNEL_LENGTH * length];
        let half = (KERNEL_LENGTH / 2) as isize;
        for c in 0..channels {
            let x = &series.values[c * length..(c + 1) * length];
            let alpha_c = &mut alpha[c * length..(c + 1) * length];
            for tap in 0..KERNEL_LENGTH {
                let shift = (tap as isize - half) * dilation as isize;
                let gamma_ct = &mut gamma[(c * KERNEL_LENGTH + tap) * length..][..length];
                // out[t] uses x[t + shift] where in range.
                let start = (-shift).max(0) as usize;
                let end = (length as isize - shift.max(0)).max(0) as usize;
                for t in start.min(end)..end {
                    let value = x[(t as isize + shift) as usize];
                    alpha_c[t] -= value;
                    gamma_ct[t] = 3.0 * value;
                }
            }
        }
        Self {
            length,
            alpha,
            gamma,
        }
    }

    /// The output of `kernel` summed over `channels` into `out`.
    fn convolve(&self, kernel: &[usize; 3], channels: &[u16], out: &mut Vec<f32>) {
        let length = self.length;
        out.clear();
        out.resize(length, 0.0);
        for &c in channels {
            let c = c as usize;
            let alpha = &self.alpha[c * length..(c + 1) * length];
            let g0 = &self.gamma[(c * KERNEL_LENGTH + kernel[0]) * length..][..length];
            let g1 = &self.gamma[(c * KERNEL_LENGTH + kernel[1]) * length..][..length];
            let g2 = &self.gamma[(c * KERNEL_LENGTH + kernel[2]) * length..][..length];
            for t in 0..length {
                out[t] += alpha[t] + g0[t] + g1[t] + g2[t];
            }
        }
    }
}

/// The fitted transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transform {
    /// Channels per step.
    pub channels: usize,
    /// The dilations.
    pub dilations: Vec<usize>,
    /// Features per kernel at each dilation.
    pub features_per_dilation: Vec<usize>,
    /// The channels of each (dilation, kernel) combination, dilation-major.
    pub combination_channels: Vec<Vec<u16>>,
    /// One bias per feature.
    #[serde(with = "super::packed")]
    pub biases: Vec<f32>,
}

impl Transform {
    /// Fits the dilations to the longest of `rows`, the channel subsets and the biases, from `seed`.
    fn fit(sequences: &Sequences, rows: &[usize], n_features: usize, seed: u64) -> Result<Self> {
        let channels = sequences.step.max(1) as usize;
        Self::fit_on(
            &|row| series(sequences, row),
            channels,
            rows,
            n_features,
            seed,
        )
    }

    /// [`Transform::fit`] over the series `series_of(row)` gives for each of `rows` (the raw series,
    /// or a representation of them such as their differences), each of `channels` channels: the
    /// dilations fitted to the longest, one bias per feature (`n_features` of them).
    pub(crate) fn fit_on(
        series_of: &dyn Fn(usize) -> Series,
        channels: usize,
        rows: &[usize],
        n_features: usize,
        seed: u64,
    ) -> Result<Self> {
        if rows.is_empty() {
            return Err(Error::BadExamples(
                "minirocket needs a training series".into(),
            ));
        }
        let longest = rows
            .iter()
            .map(|&row| series_of(row).length)
            .max()
            .unwrap_or(1);
        let (dilations, features_per_dilation) = fit_dilations(longest, n_features);
        let mut rng = Rng::new(seed);
        let n_combinations = dilations.len() * N_KERNELS;
        let max_channels = channels.min(MAX_CHANNELS_PER_COMBINATION);
        let max_exponent = ((max_channels + 1) as f64).log2();
        let combination_channels: Vec<Vec<u16>> = (0..n_combinations)
            .map(|_| {
                let count = (2f64.powf(f64::from(rng.uniform()) * max_exponent) as usize)
                    .clamp(1, max_channels);
                // A partial Fisher-Yates shuffle: `count` distinct channels.
                let mut pool: Vec<u16> = (0..channels as u16).collect();
                for i in 0..count {
                    let j = i + rng.below((channels - i) as u64) as usize;
                    pool.swap(i, j);
                }
                pool.truncate(count);
                pool
            })
            .collect();
        let total: usize = features_per_dilation.iter().sum::<usize>() * N_KERNELS;
        let quantiles = quantiles(total);
        let kernels = kernels();
        let mut biases = Vec::with_capacity(total);
        let mut output = Vec::new();
        for (d, (&dilation, &per_kernel)) in
            dilations.iter().zip(&features_per_dilation).enumerate()
        {
            for (k, kernel) in kernels.iter().enumerate() {
                let row = rows[rng.below(rows.len() as u64) as usize];
                let example = series_of(row);
                let parts = Parts::new(&example, channels, dilation);
                parts.convolve(
                    kernel,
                    &combination_channels[d * N_KERNELS + k],
                    &mut output,
                );
                output.sort_by(f32::total_cmp);
                for _ in 0..per_kernel {
                    biases.push(quantile_sorted(&output, quantiles[biases.len()]));
                }
            }
        }
        Ok(Self {
            channels,
            dilations,
            features_per_dilation,
            combination_channels,
            biases,
        })
    }

    /// The number of features (biases).
    pub fn n_features(&self) -> usize {
        self.biases.len()
    }

    /// Whether the parts agree (a checkpoint's state is read back through this): a features count
    /// and a channel subset per (dilation, kernel), positive dilations, channels in range.
    pub fn is_valid(&self) -> bool {
        let combinations = self.dilations.len() * N_KERNELS;
        self.channels >= 1
            && self.features_per_dilation.len() == self.dilations.len()
            && self.dilations.iter().all(|&d| d >= 1)
            && self.combination_channels.len() == combinations
            && self.combination_channels.iter().all(|subset| {
                !subset.is_empty() && subset.iter().all(|&c| usize::from(c) < self.channels)
            })
            && self
                .features_per_dilation
                .iter()
                .try_fold(0usize, |sum, &n| sum.checked_add(n.checked_mul(N_KERNELS)?))
                == Some(self.biases.len())
    }

    /// Visits every (dilation, kernel) combination of one series in order: its pooled output
    /// (the alternating padding rule) and its biases.
    pub(crate) fn for_each_pooled(&self, series: &Series, mut visit: impl FnMut(&[f32], &[f32])) {
        let kernels = kernels();
        let mut output = Vec::new();
        let mut start = 0;
        for (d, (&dilation, &per_kernel)) in self
            .dilations
            .iter()
            .zip(&self.features_per_dilation)
            .enumerate()
        {
            let parts = Parts::new(series, self.channels, dilation);
            let padding = (KERNEL_LENGTH - 1) * dilation / 2;
            for (k, kernel) in kernels.iter().enumerate() {
                parts.convolve(
                    kernel,
                    &self.combination_channels[d * N_KERNELS + k],
                    &mut output,
                );
                let pooled: &[f32] = if (d + k) % 2 == 1 && series.length > 2 * padding {
                    &output[padding..series.length - padding]
                } else {
                    &output
                };
                visit(pooled, &self.biases[start..start + per_kernel]);
                start += per_kernel;
            }
        }
    }

    /// The features of one series: one proportion of positive values (PPV) per bias.
    pub(crate) fn features(&self, series: &Series) -> Vec<f32> {
        let mut features = Vec::with_capacity(self.n_features());
        let mut sorted = Vec::new();
        self.for_each_pooled(series, |pooled, biases| {
            if pooled.is_empty() {
                features.extend(std::iter::repeat_n(0.0, biases.len()));
            } else if biases.len() >= 8 {
                // Many biases: sort once, count by binary search.
                sorted.clear();
                sorted.extend_from_slice(pooled);
                sorted.sort_unstable_by(f32::total_cmp);
                for &bias in biases {
                    let positive = sorted.len() - sorted.partition_point(|&value| value <= bias);
                    features.push(positive as f32 / sorted.len() as f32);
                }
            } else {
                for &bias in biases {
                    let positive = pooled.iter().filter(|&&value| value > bias).count();
                    features.push(positive as f32 / pooled.len() as f32);
                }
            }
        });
        features
    }
}

/// A fitted MiniRocket classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MiniRocket {
    /// The transform.
    pub transform: Transform,
    /// The standardization and the ridge classifier over its features.
    #[serde(flatten)]
    pub ridge: RidgeClassifier,
}

/// Features standardized, then a one-vs-rest ridge classifier: what MiniRocket and MultiRocket
/// put after their transforms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RidgeClassifier {
    /// The training mean of each feature.
    #[serde(with = "super::packed")]
    pub mean: Vec<f32>,
    /// The training standard deviation of each feature (1 for constant ones).
    #[serde(with = "super::packed")]
    pub scale: Vec<f32>,
    /// Per class, the ridge weights of the standardized features.
    #[serde(with = "super::packed::rows")]
    pub weights: Vec<Vec<f32>>,
    /// Per class, the intercept.
    pub intercepts: Vec<f64>,
    /// The chosen regularization (on the normalized scale of the grid).
    pub alpha: f64,
}

impl RidgeClassifier {
    /// Standardizes `features` (one row per training series) and fits the classifier, its alpha
    /// by leave-one-out (`fit_ridge`).
    pub(crate) fn fit(
        mut features: Vec<Vec<f32>>,
        labels: &[i64],
        n_classes: usize,
        clock: &Clock,
    ) -> Result<Self> {
        let p = features.first().map_or(0, Vec::len);
        let n = features.len().max(1) as f64;
        let mut mean = vec![0f64; p];
        for row in &features {
            for (m, &f) in mean.iter_mut().zip(row) {
                *m += f64::from(f);
            }
        }
        mean.iter_mut().for_each(|m| *m /= n);
        let mut variance = vec![0f64; p];
        for row in &features {
            for ((v, &f), &m) in variance.iter_mut().zip(row).zip(&mean) {
                *v += (f64::from(f) - m).powi(2);
            }
        }
        let scale: Vec<f32> = variance
            .iter()
            .map(|&v| {
                let std = (v / n).sqrt();
                if std > 1e-12 { std as f32 } else { 1.0 }
            })
            .collect();
        let mean: Vec<f32> = mean.iter().map(|&m| m as f32).collect();
        for row in &mut features {
            for ((f, &m), &s) in row.iter_mut().zip(&mean).zip(&scale) {
                *f = (*f - m) / s;
            }
        }
        let (weights, intercepts, alpha) = fit_ridge(&features, labels, n_classes, clock)?;
        Ok(Self {
            mean,
            scale,
            weights,
            intercepts,
            alpha,
        })
    }

    /// The decision value of each class for one series' features.
    pub fn decision(&self, features: &[f32]) -> Vec<f64> {
        let standardized: Vec<f64> = features
            .iter()
            .zip(self.mean.iter().zip(&self.scale))
            .map(|(&f, (&m, &s))| f64::from((f - m) / s))
            .collect();
        self.weights
            .iter()
            .zip(&self.intercepts)
            .map(|(weights, intercept)| {
                intercept
                    + weights
                        .iter()
                        .zip(&standardized)
                        .map(|(&w, &z)| f64::from(w) * z)
                        .sum::<f64>()
            })
            .collect()
    }

    /// The number of classes.
    pub fn n_classes(&self) -> usize {
        self.weights.len()
    }

    /// Whether it reads `features` features: a mean, a scale and a weight per feature and class,
    /// an intercept per class.
    pub fn is_valid(&self, features: usize) -> bool {
        self.mean.len() == features
            && self.scale.len() == features
            && !self.weights.is_empty()
            && self.weights.iter().all(|class| class.len() == features)
            && self.intercepts.len() == self.weights.len()
    }
}

impl MiniRocket {
    /// The decision value of each class for `row` of `sequences`.
    pub fn decision(&self, sequences: &Sequences, row: usize) -> Vec<f64> {
        let features = self.transform.features(&series(sequences, row));
        self.ridge.decision(&features)
    }

    /// Whether the transform and the classifier agree ([`Transform::is_valid`],
    /// [`RidgeClassifier::is_valid`]).
    pub fn is_valid(&self) -> bool {
        self.transform.is_valid() && self.ridge.is_valid(self.transform.n_features())
    }

    /// The predicted class of `row`; probabilities are a softmax of the decision values.
    pub fn predict(&self, sequences: &Sequences, row: usize) -> Prediction {
        softmax_prediction(&self.decision(sequences, row))
    }
}

/// The class with the largest value (the first on ties) and a softmax of the values.
pub(crate) fn softmax_prediction(decision: &[f64]) -> Prediction {
    let maximum = decision.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exponentials: Vec<f64> = decision.iter().map(|d| (d - maximum).exp()).collect();
    let total: f64 = exponentials.iter().sum();
    let mut index = 0;
    for (i, value) in decision.iter().enumerate() {
        if *value > decision[index] {
            index = i;
        }
    }
    Prediction::Class {
        index: index as i64,
        probabilities: exponentials.iter().map(|e| (e / total) as f32).collect(),
    }
}

/// The regularization grid of sklearn's `RidgeClassifierCV` in the paper: `10^-3 .. 10^3`, 10 values.
pub fn alpha_grid() -> Vec<f64> {
    (0..10)
        .map(|i| 10f64.powf(-3.0 + 6.0 * i as f64 / 9.0))
        .collect()
}

/// The lower Cholesky factor of the symmetric positive definite `matrix` (`n x n`, row-major), `None`
/// when it is not positive definite.
fn cholesky(matrix: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut factor = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut sum = matrix[i * n + j];
            for k in 0..j {
                sum -= factor[i * n + k] * factor[j * n + k];
            }
            if i == j {
                if !sum.is_finite() || sum <= 0.0 {
                    return None;
                }
                factor[i * n + i] = sum.sqrt();
            } else {
                factor[i * n + j] = sum / factor[j * n + j];
            }
        }
    }
    Some(factor)
}

/// Ridge in the dual for one regularization: `(K + lambda I)^-1 Y` (`n x m`, row-major) and the
/// diagonal of `(K + lambda I)^-1`, `None` when the factorization fails.
fn dual_solve(
    gram: &[f64],
    n: usize,
    lambda: f64,
    targets: &[f64],
    m: usize,
) -> Option<(Vec<f64>, Vec<f64>)> {
    let mut matrix = gram.to_vec();
    for i in 0..n {
        matrix[i * n + i] += lambda;
    }
    let factor = cholesky(&matrix, n)?;
    // The inverse of the factor, lower triangular: column by column, forward substitution.
    let mut inverse = vec![0.0; n * n];
    for col in 0..n {
        inverse[col * n + col] = 1.0 / factor[col * n + col];
        for i in col + 1..n {
            let mut sum = 0.0;
            for k in col..i {
                sum -= factor[i * n + k] * inverse[k * n + col];
            }
            inverse[i * n + col] = sum / factor[i * n + i];
        }
    }
    // (K + lambda I)^-1 = L^-T L^-1: its diagonal is the squared column norms of L^-1.
    let diagonal: Vec<f64> = (0..n)
        .map(|col| (col..n).map(|k| inverse[k * n + col].powi(2)).sum())
        .collect();
    // coefficients = L^-T (L^-1 Y)
    let mut half = vec![0.0; n * m];
    for i in 0..n {
        for k in 0..=i {
            let l = inverse[i * n + k];
            for j in 0..m {
                half[i * m + j] += l * targets[k * m + j];
            }
        }
    }
    let mut coefficients = vec![0.0; n * m];
    for i in 0..n {
        for k in i..n {
            let l = inverse[k * n + i];
            for j in 0..m {
                coefficients[i * m + j] += l * half[k * m + j];
            }
        }
    }
    Some((coefficients, diagonal))
}

/// The leave-one-out squared error of ridge (no intercept) with `lambda`, in closed form:
/// the residual of row `i` left out is `c_i / ((K + lambda I)^-1)_ii`.
pub fn loo_error(gram: &[f64], n: usize, lambda: f64, targets: &[f64], m: usize) -> Option<f64> {
    let (coefficients, diagonal) = dual_solve(gram, n, lambda, targets, m)?;
    Some(
        (0..n)
            .map(|i| {
                (0..m)
                    .map(|j| (coefficients[i * m + j] / diagonal[i]).powi(2))
                    .sum::<f64>()
            })
            .sum(),
    )
}

/// Fits the ridge classifier on standardized `features` (`n` rows of `p`): returns the weights per
/// class, the intercepts and the chosen alpha.
fn fit_ridge(
    features: &[Vec<f32>],
    labels: &[i64],
    n_classes: usize,
    clock: &Clock,
) -> Result<(Vec<Vec<f32>>, Vec<f64>, f64)> {
    let n = features.len();
    let p = features.first().map_or(0, Vec::len);
    let m = n_classes.max(1);
    let mut targets = vec![0.0; n * m];
    for (i, &label) in labels.iter().enumerate() {
        for j in 0..m {
            targets[i * m + j] = if label as usize == j { 1.0 } else { -1.0 };
        }
    }
    let intercepts: Vec<f64> = (0..m)
        .map(|j| (0..n).map(|i| targets[i * m + j]).sum::<f64>() / n.max(1) as f64)
        .collect();
    for i in 0..n {
        for j in 0..m {
            targets[i * m + j] -= intercepts[j];
        }
    }
    let mut gram = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let value: f64 = features[i]
                .chunks(8)
                .zip(features[j].chunks(8))
                .map(|(a, b)| f64::from(a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()))
                .sum();
            gram[i * n + j] = value;
            gram[j * n + i] = value;
        }
        if clock.expired() {
            return Err(Error::BadExamples(
                "minirocket ran out of time computing the ridge's Gram matrix".into(),
            ));
        }
    }
    // The grid applies to features of unit L2 norm (sklearn's normalize=True): alpha * n here.
    let mut best: Option<(f64, f64)> = None;
    for alpha in alpha_grid() {
        if best.is_some() && clock.expired() {
            break;
        }
        let lambda = alpha * n as f64;
        if let Some(error) = loo_error(&gram, n, lambda, &targets, m)
            && best.is_none_or(|(best_error, _)| error < best_error)
        {
            best = Some((error, alpha));
        }
    }
    let alpha = best.map_or(1.0, |(_, alpha)| alpha);
    let (coefficients, _) = dual_solve(&gram, n, (alpha * n as f64).max(1e-9), &targets, m)
        .ok_or_else(|| Error::BadExamples("minirocket's ridge could not be solved".into()))?;
    let mut weights = vec![vec![0f64; p]; m];
    for (i, row) in features.iter().enumerate() {
        for (j, class_weights) in weights.iter_mut().enumerate() {
            let c = coefficients[i * m + j];
            if c != 0.0 {
                for (w, &z) in class_weights.iter_mut().zip(row) {
                    *w += c * f64::from(z);
                }
            }
        }
    }
    let weights = weights
        .into_iter()
        .map(|class| class.into_iter().map(|w| w as f32).collect())
        .collect();
    Ok((weights, intercepts, alpha))
}

/// MiniRocket's learner: one setting, the feature budget (the ridge's alpha is chosen inside each
/// fit by leave-one-out); each fit draws its transform from the run's seed.
pub(crate) struct MiniRocketLearner<'a> {
    data: SeriesClasses<'a>,
    seed: u64,
}

impl<'a> MiniRocketLearner<'a> {
    /// The learner over sequence inputs with class targets, `None` for other examples.
    pub(crate) fn new(examples: &'a Examples, seed: u64) -> Option<Self> {
        SeriesClasses::of(examples).map(|data| Self { data, seed })
    }
}

impl Learner for MiniRocketLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        vec![DEFAULT_FEATURES as f64]
    }

    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
        let features = setting.max(1.0) as usize;
        let transform = Transform::fit(self.data.sequences, rows, features, self.seed)?;
        let ridge = self.data.fit_ridge(rows, clock, "minirocket", |series| {
            transform.features(series)
        })?;
        Ok(ClassicModel::MiniRocket(MiniRocket { transform, ridge }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_84_kernels_are_the_choices_of_3_of_9() {
        let kernels = kernels();
        assert_eq!(kernels.len(), 84);
        let mut seen = std::collections::HashSet::new();
        for kernel in &kernels {
            assert!(kernel[0] < kernel[1] && kernel[1] < kernel[2] && kernel[2] < 9);
            assert!(seen.insert(*kernel));
        }
        // The weights: six -1 and three 2, summing to 0.
        for kernel in &kernels {
            let weights: Vec<i32> = (0..9)
                .map(|i| if kernel.contains(&i) { 2 } else { -1 })
                .collect();
            assert_eq!(weights.iter().sum::<i32>(), 0);
        }
    }

    #[test]
    fn dilations_follow_the_reference() {
        // The reference code on a series of length 150: 119 features per kernel.
        let (dilations, per_dilation) = fit_dilations(150, 10_000);
        assert_eq!(per_dilation.iter().sum::<usize>(), 119);
        assert_eq!(dilations[0], 1);
        assert!(*dilations.last().unwrap() <= 149 / 8);
        assert!(dilations.windows(2).all(|pair| pair[0] < pair[1]));
        // Short series: one dilation.
        assert_eq!(fit_dilations(1, 10_000).0, vec![1]);
        assert_eq!(fit_dilations(9, 10_000).0, vec![1]);
    }

    #[test]
    fn the_convolution_matches_the_kernel_weights() {
        let x: Vec<f32> = (0..20).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
        let series = Series {
            length: 20,
            values: x.clone(),
        };
        let parts = Parts::new(&series, 1, 2);
        let mut out = Vec::new();
        let kernel = [0, 4, 8];
        parts.convolve(&kernel, &[0], &mut out);
        assert_eq!(out.len(), 20);
        for (t, &got) in out.iter().enumerate() {
            let mut expected = 0.0;
            for tap in 0..9 {
                let index = t as isize + (tap as isize - 4) * 2;
                if (0..20).contains(&index) {
                    let weight = if kernel.contains(&tap) { 2.0 } else { -1.0 };
                    expected += weight * x[index as usize];
                }
            }
            assert!((got - expected).abs() < 1e-5, "{t}: {got} vs {expected}");
        }
    }

    /// Ridge without intercept on n - 1 rows, predicting the left-out row.
    fn brute_force_loo(x: &[Vec<f64>], y: &[f64], lambda: f64) -> f64 {
        let n = x.len();
        let p = x[0].len();
        let mut error = 0.0;
        for out in 0..n {
            // Primal: (X^T X + lambda I) w = X^T y.
            let mut a = vec![0.0; p * p];
            let mut b = vec![0.0; p];
            for i in (0..n).filter(|&i| i != out) {
                for r in 0..p {
                    b[r] += x[i][r] * y[i];
                    for c in 0..p {
                        a[r * p + c] += x[i][r] * x[i][c];
                    }
                }
            }
            for r in 0..p {
                a[r * p + r] += lambda;
            }
            let factor = cholesky(&a, p).unwrap();
            let mut z = vec![0.0; p];
            for r in 0..p {
                let s: f64 = (0..r).map(|k| factor[r * p + k] * z[k]).sum();
                z[r] = (b[r] - s) / factor[r * p + r];
            }
            let mut w = vec![0.0; p];
            for r in (0..p).rev() {
                let s: f64 = (r + 1..p).map(|k| factor[k * p + r] * w[k]).sum();
                w[r] = (z[r] - s) / factor[r * p + r];
            }
            let prediction: f64 = (0..p).map(|r| w[r] * x[out][r]).sum();
            error += (y[out] - prediction).powi(2);
        }
        error
    }

    #[test]
    fn the_closed_form_leave_one_out_matches_brute_force() {
        let mut rng = Rng::new(3);
        for (n, p) in [(6, 3), (5, 9)] {
            let x: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    (0..p)
                        .map(|_| f64::from(rng.uniform()) * 2.0 - 1.0)
                        .collect()
                })
                .collect();
            let y: Vec<f64> = (0..n).map(|_| f64::from(rng.uniform())).collect();
            let mut gram = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    gram[i * n + j] = (0..p).map(|r| x[i][r] * x[j][r]).sum();
                }
            }
            for lambda in [0.01, 0.5, 3.0] {
                let closed = loo_error(&gram, n, lambda, &y, 1).unwrap();
                let brute = brute_force_loo(&x, &y, lambda);
                assert!(
                    (closed - brute).abs() < 1e-8 * brute.max(1.0),
                    "n {n} p {p} lambda {lambda}: {closed} vs {brute}"
                );
            }
        }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [0.0, 1.0, 2.0, 10.0];
        assert_eq!(quantile_sorted(&sorted, 0.0), 0.0);
        assert_eq!(quantile_sorted(&sorted, 1.0), 10.0);
        assert!((quantile_sorted(&sorted, 0.5) - 1.5).abs() < 1e-6);
        assert_eq!(quantile_sorted(&[], 0.5), 0.0);
    }
}
