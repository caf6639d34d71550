//! Either surrogate (extra-trees or FABOLAS GP) behind one interface: point predictions, the joint
//! belief over representer points that entropy search needs, and fantasies (the model refit with
//! one simulated observation).
//!
//! A joint belief is a mean vector and a factor `F` (n x r) with covariance `F F'`; a candidate
//! point loads on the same `r` standard normals (`weights`) plus an independent residual. For the
//! GP, `F` is the Cholesky factor of the posterior covariance and the loading comes from the
//! posterior cross-covariances. For the trees, `F` holds the per-tree deviations from the mean
//! divided by `sqrt(trees)` (the covariance across trees, whose diagonal is the spread the trees
//! report) and a candidate loads on the same trees. TrimTuner's code instead gives the trees a
//! diagonal joint covariance (zero covariance between a candidate and the representer points), so
//! its information gain is the same for every candidate; this is the place where the crate
//! follows the paper's model ("mean and spread across trees") to its consequence for the joint.

use nalgebra::{Cholesky, DMatrix, DVector};

use crate::gp::{Basis, FabolasGp};
use crate::trees::ExtraTrees;

/// The observation noise variance the tree ensemble reports (TrimTuner's code: `get_noise`).
pub const TREE_NOISE_VARIANCE: f64 = 1e-3;

/// A surrogate model of one target (loss or log cost) over model inputs.
#[derive(Debug, Clone)]
pub enum Model {
    /// Bagged extra-trees, with the data they were fitted on (for fantasies).
    Trees {
        /// The ensemble (fitted on the targets less the level trend, if any).
        ensemble: ExtraTrees,
        /// Fitted inputs.
        inputs: Vec<Vec<f64>>,
        /// Fitted targets.
        targets: Vec<f64>,
        /// The level trend: `None` for plain trees (TrimTuner's code), else the slope of the
        /// target in the level feature (the input's last coordinate) within configurations,
        /// see [`level_slope`].
        trend: Option<f64>,
    },
    /// A GP with FABOLAS' kernel.
    Gp(FabolasGp),
}

/// The joint Gaussian belief over a set of points: `means` and covariance `factor * factor'`.
#[derive(Debug, Clone)]
pub struct Belief {
    /// Mean at each point.
    pub means: Vec<f64>,
    /// n x r factor of the covariance.
    pub factor: DMatrix<f64>,
    /// The points (model inputs).
    pub points: Vec<Vec<f64>>,
}

/// How one more point's value loads on a [`Belief`]'s standard normals.
#[derive(Debug, Clone)]
pub struct Loading {
    /// Mean of the point's latent value.
    pub mean: f64,
    /// Weights on the belief's `r` standard normals.
    pub weights: DVector<f64>,
    /// Variance left over, independent of the belief.
    pub residual_variance: f64,
}

/// Fits `ensemble` to `(inputs, targets)`, over the residuals of the level trend when `trend` is
/// on (its slope refitted here; see [`Model::trees_with_level_trend`]).
fn fit_trees(
    ensemble: &mut ExtraTrees,
    inputs: &[Vec<f64>],
    targets: &[f64],
    trend: &mut Option<f64>,
) {
    match trend {
        Some(slope) => {
            *slope = level_slope(inputs, targets);
            let residuals: Vec<f64> = inputs
                .iter()
                .zip(targets)
                .map(|(input, target)| target - *slope * level_feature(input))
                .collect();
            ensemble.fit(inputs, &residuals);
        }
        None => ensemble.fit(inputs, targets),
    }
}

impl Model {
    /// An unfitted ensemble of `n_trees` extra-trees seeded by `seed`.
    pub fn trees(n_trees: usize, seed: u64) -> Self {
        Model::Trees {
            ensemble: ExtraTrees::new(n_trees, seed),
            inputs: Vec::new(),
            targets: Vec::new(),
            trend: None,
        }
    }

    /// An unfitted ensemble of `n_trees` extra-trees over the residuals of a linear trend in the
    /// level feature (see [`level_slope`]): trees are piecewise constant, so a configuration
    /// seen only on small shares is otherwise predicted at `s = 1` as it was on the small
    /// shares; the trend carries what the tested configurations show of how the target grows
    /// with the share.
    pub fn trees_with_level_trend(n_trees: usize, seed: u64) -> Self {
        Model::Trees {
            ensemble: ExtraTrees::new(n_trees, seed),
            inputs: Vec::new(),
            targets: Vec::new(),
            trend: Some(0.0),
        }
    }

    /// An unfitted GP with FABOLAS' kernel over the given basis.
    pub fn gp(basis: Basis) -> Self {
        Model::Gp(FabolasGp::new(basis))
    }

    /// Fits the model to `(inputs, targets)`.
    pub fn fit(&mut self, new_inputs: &[Vec<f64>], new_targets: &[f64]) {
        match self {
            Model::Trees {
                ensemble,
                inputs,
                targets,
                trend,
            } => {
                *inputs = new_inputs.to_vec();
                *targets = new_targets.to_vec();
                fit_trees(ensemble, inputs, targets, trend);
            }
            Model::Gp(gp) => gp.fit(new_inputs, new_targets),
        }
    }

    /// Mean and standard deviation at `input`.
    pub fn predict(&self, input: &[f64]) -> (f64, f64) {
        match self {
            Model::Trees {
                ensemble, trend, ..
            } => {
                let (mean, deviation) = ensemble.predict(input);
                (mean + trend_at(*trend, input), deviation)
            }
            Model::Gp(gp) => gp.predict(input),
        }
    }

    /// The observation noise variance.
    pub fn noise_variance(&self) -> f64 {
        match self {
            Model::Trees { .. } => TREE_NOISE_VARIANCE,
            Model::Gp(gp) => gp.noise_variance(),
        }
    }

    /// The model refit with one more observation: trees are regrown (same seed), the GP keeps
    /// its hyperparameters.
    pub fn with_observation(&self, input: &[f64], target: f64) -> Model {
        match self {
            Model::Trees { .. } => {
                // One copy of the stored data (the clone), refit in place.
                let mut model = self.clone();
                if let Model::Trees {
                    ensemble,
                    inputs,
                    targets,
                    trend,
                } = &mut model
                {
                    inputs.push(input.to_vec());
                    targets.push(target);
                    fit_trees(ensemble, inputs, targets, trend);
                }
                model
            }
            Model::Gp(gp) => Model::Gp(gp.with_observation(input, target)),
        }
    }

    /// The joint belief over `points`.
    pub fn belief(&self, points: &[Vec<f64>]) -> Belief {
        match self {
            Model::Trees {
                ensemble, trend, ..
            } => {
                let scale = 1.0 / (ensemble.n_trees() as f64).sqrt();
                let each: Vec<Vec<f64>> = points.iter().map(|p| ensemble.predict_each(p)).collect();
                let centres: Vec<f64> = each
                    .iter()
                    .map(|e| e.iter().sum::<f64>() / e.len() as f64)
                    .collect();
                let factor = DMatrix::from_fn(points.len(), ensemble.n_trees(), |i, t| {
                    (each[i][t] - centres[i]) * scale
                });
                let means = centres
                    .iter()
                    .zip(points)
                    .map(|(centre, point)| centre + trend_at(*trend, point))
                    .collect();
                Belief {
                    means,
                    factor,
                    points: points.to_vec(),
                }
            }
            Model::Gp(gp) => {
                let (means, mut covariance) = gp.joint(points);
                let n = points.len();
                let mut jitter = 1e-10 * covariance.diagonal().max().max(1e-12);
                let factor = loop {
                    if let Some(c) = Cholesky::new(covariance.clone()) {
                        break c.unpack();
                    }
                    for i in 0..n {
                        covariance[(i, i)] += jitter;
                    }
                    jitter *= 10.0;
                };
                Belief {
                    means,
                    factor,
                    points: points.to_vec(),
                }
            }
        }
    }

    /// How `input` loads on `belief` (which this model made).
    pub fn loading(&self, belief: &Belief, input: &[f64]) -> Loading {
        match self {
            Model::Trees {
                ensemble, trend, ..
            } => {
                let scale = 1.0 / (ensemble.n_trees() as f64).sqrt();
                let each = ensemble.predict_each(input);
                let centre = each.iter().sum::<f64>() / each.len() as f64;
                let weights =
                    DVector::from_iterator(each.len(), each.iter().map(|p| (p - centre) * scale));
                Loading {
                    mean: centre + trend_at(*trend, input),
                    weights,
                    residual_variance: 0.0,
                }
            }
            Model::Gp(gp) => {
                let (mean, deviation) = gp.predict(input);
                let cross = DVector::from_vec(gp.cross_covariance(input, &belief.points));
                let weights = belief
                    .factor
                    .solve_lower_triangular(&cross)
                    .unwrap_or_else(|| DVector::zeros(cross.len()));
                let residual_variance = (deviation * deviation - weights.norm_squared()).max(0.0);
                Loading {
                    mean,
                    weights,
                    residual_variance,
                }
            }
        }
    }
}

/// The level feature of a model input (its last coordinate; see `Space::input`).
fn level_feature(input: &[f64]) -> f64 {
    input.last().copied().unwrap_or(0.0)
}

fn trend_at(trend: Option<f64>, input: &[f64]) -> f64 {
    trend.map_or(0.0, |slope| slope * level_feature(input))
}

/// The least-squares slope of `targets` in the level feature *within* configurations (inputs
/// equal but for the level): each configuration's own mean is taken out, so which
/// configurations happened to be tested on which shares does not bias it. 0 while no
/// configuration has been tested at two levels.
pub fn level_slope(inputs: &[Vec<f64>], targets: &[f64]) -> f64 {
    /// One configuration's features and its (level, target) pairs.
    type Group<'a> = (&'a [f64], Vec<(f64, f64)>);
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (input, target) in inputs.iter().zip(targets) {
        let features = &input[..input.len().saturating_sub(1)];
        let pair = (level_feature(input), *target);
        match groups.iter_mut().find(|(f, _)| *f == features) {
            Some((_, members)) => members.push(pair),
            None => groups.push((features, vec![pair])),
        }
    }
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (_, members) in &groups {
        let n = members.len() as f64;
        let level_mean = members.iter().map(|(l, _)| l).sum::<f64>() / n;
        let target_mean = members.iter().map(|(_, t)| t).sum::<f64>() / n;
        for (level, target) in members {
            covariance += (level - level_mean) * (target - target_mean);
            variance += (level - level_mean).powi(2);
        }
    }
    if variance > 1e-12 && covariance.is_finite() {
        covariance / variance
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> (Vec<Vec<f64>>, Vec<f64>) {
        let inputs: Vec<Vec<f64>> = (0..12)
            .map(|i| vec![i as f64 / 11.0, (i % 3) as f64 / 2.0, 1.0])
            .collect();
        let targets = inputs.iter().map(|p| p[0] * p[0] - p[1]).collect();
        (inputs, targets)
    }

    #[test]
    fn beliefs_and_loadings_reproduce_each_models_covariances() {
        let (inputs, targets) = data();
        let points = vec![
            vec![0.2, 0.5, 1.0],
            vec![0.7, 0.0, 1.0],
            vec![0.95, 1.0, 1.0],
        ];
        for mut model in [Model::trees(10, 4), Model::gp(Basis::Loss)] {
            model.fit(&inputs, &targets);
            let belief = model.belief(&points);
            let covariance = &belief.factor * belief.factor.transpose();
            for (index, point) in points.iter().enumerate() {
                let (mean, deviation) = model.predict(point);
                assert!((belief.means[index] - mean).abs() < 1e-9);
                assert!((covariance[(index, index)] - deviation * deviation).abs() < 1e-6);
                // A point of the belief loads on it exactly: its covariance row is reproduced.
                let loading = model.loading(&belief, point);
                let row = &belief.factor * &loading.weights;
                for other in 0..points.len() {
                    assert!((row[other] - covariance[(index, other)]).abs() < 1e-6);
                }
                assert!(loading.residual_variance < 1e-6);
            }
        }
    }

    #[test]
    fn the_level_slope_is_taken_within_configurations() {
        // Two configurations, each `level * 2 + offset`; the pooled slope over these points
        // would be biased by the offsets (the expensive one seen only on small shares).
        let inputs = vec![
            vec![0.0, 0.0],
            vec![0.0, 0.5],
            vec![0.0, 1.0],
            vec![1.0, 0.0],
            vec![1.0, 0.25],
        ];
        let targets = vec![0.0, 1.0, 2.0, 5.0, 5.5];
        assert!((level_slope(&inputs, &targets) - 2.0).abs() < 1e-12);
        // No configuration at two levels: no trend.
        assert_eq!(
            level_slope(&[vec![0.0, 0.0], vec![1.0, 1.0]], &[0.0, 3.0]),
            0.0
        );
        assert_eq!(level_slope(&[], &[]), 0.0);
    }

    #[test]
    fn trees_with_a_level_trend_extrapolate_to_the_full_share() {
        // Log cost grows by 3 from the smallest share to the full one in every configuration;
        // configuration 1 is tested on small shares only.
        let mut inputs = Vec::new();
        let mut targets = Vec::new();
        for level in [0.0, 0.25, 0.5, 1.0] {
            inputs.push(vec![0.0, level]);
            targets.push(3.0 * level);
        }
        for level in [0.0, 0.25, 0.5] {
            inputs.push(vec![1.0, level]);
            targets.push(1.0 + 3.0 * level);
        }
        let mut plain = Model::trees(10, 2);
        plain.fit(&inputs, &targets);
        let mut trend = Model::trees_with_level_trend(10, 2);
        trend.fit(&inputs, &targets);
        let (with_trend, _) = trend.predict(&[1.0, 1.0]);
        let (without, _) = plain.predict(&[1.0, 1.0]);
        assert!((with_trend - 4.0).abs() < 0.5, "trend: {with_trend}");
        assert!(
            without <= 3.0,
            "plain trees stay within what they saw: {without}"
        );
        // The belief and the fantasy carry the trend too.
        let belief = trend.belief(&[vec![1.0, 1.0]]);
        assert!((belief.means[0] - with_trend).abs() < 1e-9);
        let loading = trend.loading(&belief, &[1.0, 1.0]);
        assert!((loading.mean - with_trend).abs() < 1e-9);
        let fantasy = trend.with_observation(&[1.0, 1.0], 4.0);
        assert!((fantasy.predict(&[1.0, 1.0]).0 - 4.0).abs() < 0.5);
    }
}
