//! The GP of TrimTuner's GP variant and of the GP baselines, with FABOLAS' kernel.
//!
//! Inputs are `(x, s)` with the level feature last ([`crate::space`]). The kernel is, as TrimTuner's
//! code builds it with george, an amplitude times a product over the features of `x` of
//! one-dimensional Matern-5/2 kernels (one length-scale each; the Matern shape is easeml-stats'
//! [`KernelKind::Matern52`], one rule in one place) times a Bayesian-linear-regression kernel in
//! `s` over a basis `phi(s)`: `k_s(s, s') = 1 + w phi(s) phi(s')` with FABOLAS' bases,
//! `(1 - s)^2` for the loss (its decrease flattens towards the full data set) and `s` for the log
//! cost ([`Basis`]). The EIc baselines see only full-data points and use [`Basis::Constant`]
//! (the Matern part alone). Targets are centred on their mean. Hyperparameters (amplitude,
//! length-scales, the basis weight, noise) maximise the log marginal likelihood (a bounded pattern
//! search in log space, warm-started from the previous fit); TrimTuner's code instead marginalises
//! them by MCMC (emcee, 12 or more samples), which is the difference that makes its GP variant
//! minutes slow. The scheduler's `UserGp` is not used for the posterior: it conditions a fixed
//! candidate set's prior covariance matrix with rank-one updates, while here the
//! hyperparameters change at every fit and the acquisition needs posterior covariances between
//! arbitrary points (representers and candidates); the posterior is a dense Cholesky solve over
//! the observations (at most a few dozen).

use easeml_stats::KernelKind;
use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

/// The basis of the kernel's `s` part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// No `s` dependence (full-data-only models).
    Constant,
    /// `phi(s) = (1 - s)^2`: FABOLAS' basis for the loss.
    Loss,
    /// `phi(s) = s`: FABOLAS' basis for the (log) cost.
    Cost,
}

impl Basis {
    fn phi(self, s: f64) -> f64 {
        match self {
            Basis::Constant => 0.0,
            Basis::Loss => (1.0 - s).powi(2),
            Basis::Cost => s,
        }
    }
}

/// The kernel's hyperparameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GpHyperparameters {
    /// Amplitude (signal variance) of the product kernel.
    pub amplitude: f64,
    /// One length-scale per feature of `x` (features scaled to [0, 1]).
    pub length_scales: Vec<f64>,
    /// Weight `w` of the basis term in `k_s = 1 + w phi phi'` (unused with [`Basis::Constant`]).
    pub basis_weight: f64,
    /// Observation noise variance.
    pub noise_variance: f64,
}

impl GpHyperparameters {
    fn defaults(dimension: usize, target_variance: f64) -> Self {
        let scale = target_variance.max(1e-4);
        GpHyperparameters {
            amplitude: scale,
            length_scales: vec![0.5; dimension],
            basis_weight: 1.0,
            noise_variance: 1e-2 * scale,
        }
    }

    fn to_log(&self) -> Vec<f64> {
        let mut log = vec![self.amplitude.ln()];
        log.extend(self.length_scales.iter().map(|l| l.ln()));
        log.push(self.basis_weight.ln());
        log.push(self.noise_variance.ln());
        log
    }

    fn from_log(log: &[f64]) -> Self {
        let dimension = log.len() - 3;
        GpHyperparameters {
            amplitude: log[0].exp(),
            length_scales: log[1..=dimension].iter().map(|l| l.exp()).collect(),
            basis_weight: log[dimension + 1].exp(),
            noise_variance: log[dimension + 2].exp(),
        }
    }
}

/// Bounds of the log hyperparameters: amplitude and noise relative to the targets' variance.
fn log_bounds(dimension: usize, target_variance: f64) -> Vec<(f64, f64)> {
    let scale = target_variance.max(1e-4).ln();
    let mut bounds = vec![(scale - 7.0, scale + 5.0)];
    bounds.extend(std::iter::repeat_n((0.05f64.ln(), 20f64.ln()), dimension));
    bounds.push((1e-3f64.ln(), 1e3f64.ln()));
    bounds.push(((1e-8f64).max(1e-6 * target_variance).ln(), scale));
    bounds
}

/// A GP over `(x, s)` inputs with FABOLAS' kernel.
#[derive(Debug, Clone)]
pub struct FabolasGp {
    basis: Basis,
    hyperparameters: Option<GpHyperparameters>,
    inputs: Vec<Vec<f64>>,
    targets: Vec<f64>,
    target_mean: f64,
    /// Lower Cholesky factor of `K + noise I` over the observations.
    cholesky: Option<DMatrix<f64>>,
    /// `(K + noise I)^-1 (y - mean)`.
    weights: DVector<f64>,
}

impl FabolasGp {
    /// An unfitted GP with the given basis in `s`.
    pub fn new(basis: Basis) -> Self {
        FabolasGp {
            basis,
            hyperparameters: None,
            inputs: Vec::new(),
            targets: Vec::new(),
            target_mean: 0.0,
            cholesky: None,
            weights: DVector::zeros(0),
        }
    }

    /// The fitted hyperparameters (`None` before the first fit).
    pub fn hyperparameters(&self) -> Option<&GpHyperparameters> {
        self.hyperparameters.as_ref()
    }

    /// The prior covariance of two inputs under `hyperparameters`.
    pub fn kernel(&self, hyperparameters: &GpHyperparameters, a: &[f64], b: &[f64]) -> f64 {
        let dimension = hyperparameters.length_scales.len();
        let mut value = hyperparameters.amplitude;
        for d in 0..dimension {
            value *=
                KernelKind::Matern52.shape((a[d] - b[d]).abs() / hyperparameters.length_scales[d]);
        }
        if self.basis != Basis::Constant {
            let (s_a, s_b) = (a[dimension], b[dimension]);
            value *= 1.0 + hyperparameters.basis_weight * self.basis.phi(s_a) * self.basis.phi(s_b);
        }
        value
    }

    fn covariance_matrix(&self, hyperparameters: &GpHyperparameters) -> DMatrix<f64> {
        let n = self.inputs.len();
        DMatrix::from_fn(n, n, |i, j| {
            self.kernel(hyperparameters, &self.inputs[i], &self.inputs[j])
                + if i == j {
                    hyperparameters.noise_variance
                } else {
                    0.0
                }
        })
    }

    /// Log marginal likelihood of the centred targets under `hyperparameters` (None if the
    /// covariance is not positive definite).
    fn log_marginal_likelihood(&self, hyperparameters: &GpHyperparameters) -> Option<f64> {
        let cholesky = Cholesky::new(self.covariance_matrix(hyperparameters))?;
        let residual = DVector::from_iterator(
            self.targets.len(),
            self.targets.iter().map(|y| y - self.target_mean),
        );
        let solved = cholesky.solve(&residual);
        let log_determinant: f64 = cholesky.l_dirty().diagonal().iter().map(|v| v.ln()).sum();
        let value = -0.5 * residual.dot(&solved)
            - log_determinant
            - 0.5 * self.targets.len() as f64 * (2.0 * std::f64::consts::PI).ln();
        value.is_finite().then_some(value)
    }

    /// Fits the GP to `(inputs, targets)`: hyperparameters by maximum marginal likelihood (warm
    /// start from the previous fit), then the posterior.
    pub fn fit(&mut self, inputs: &[Vec<f64>], targets: &[f64]) {
        self.inputs = inputs.to_vec();
        self.targets = targets.to_vec();
        let n = targets.len().max(1) as f64;
        self.target_mean = targets.iter().sum::<f64>() / n;
        let variance = targets
            .iter()
            .map(|y| (y - self.target_mean).powi(2))
            .sum::<f64>()
            / n;
        let dimension = inputs.first().map_or(0, |i| i.len()).saturating_sub(1);
        let bounds = log_bounds(dimension, variance);
        let start = match &self.hyperparameters {
            Some(previous) if previous.length_scales.len() == dimension => previous.to_log(),
            _ => GpHyperparameters::defaults(dimension, variance).to_log(),
        };
        let start: Vec<f64> = start
            .iter()
            .zip(&bounds)
            .map(|(v, (lo, hi))| v.clamp(*lo, *hi))
            .collect();
        let basis_index = dimension + 1;
        let frozen = |index: usize| self.basis == Basis::Constant && index == basis_index;
        let objective = |log: &[f64]| {
            self.log_marginal_likelihood(&GpHyperparameters::from_log(log))
                .unwrap_or(f64::NEG_INFINITY)
        };
        let best = if targets.len() >= 2 {
            pattern_search(&start, &bounds, &frozen, objective, 400)
        } else {
            start
        };
        self.condition(GpHyperparameters::from_log(&best));
    }

    /// Conditions on the stored observations with fixed hyperparameters.
    fn condition(&mut self, hyperparameters: GpHyperparameters) {
        let mut covariance = self.covariance_matrix(&hyperparameters);
        let n = self.inputs.len();
        let mut jitter = 1e-10 * (hyperparameters.amplitude + hyperparameters.noise_variance);
        let cholesky: Cholesky<f64, Dyn> = loop {
            if let Some(c) = Cholesky::new(covariance.clone()) {
                break c;
            }
            for i in 0..n {
                covariance[(i, i)] += jitter;
            }
            jitter *= 10.0;
        };
        let residual = DVector::from_iterator(n, self.targets.iter().map(|y| y - self.target_mean));
        self.weights = cholesky.solve(&residual);
        self.cholesky = Some(cholesky.unpack());
        self.hyperparameters = Some(hyperparameters);
    }

    /// The GP conditioned on one more observation with the same hyperparameters (a fantasy).
    pub fn with_observation(&self, input: &[f64], target: f64) -> FabolasGp {
        let mut fantasy = self.clone();
        fantasy.inputs.push(input.to_vec());
        fantasy.targets.push(target);
        if let Some(hyperparameters) = self.hyperparameters.clone() {
            fantasy.condition(hyperparameters);
        }
        fantasy
    }

    fn hyperparameters_or_default(&self, dimension: usize) -> GpHyperparameters {
        self.hyperparameters
            .clone()
            .unwrap_or_else(|| GpHyperparameters::defaults(dimension, 1.0))
    }

    /// `L^-1 k(observations, input)`.
    fn projection(&self, hyperparameters: &GpHyperparameters, input: &[f64]) -> DVector<f64> {
        let n = self.inputs.len();
        let cross = DVector::from_iterator(
            n,
            self.inputs
                .iter()
                .map(|o| self.kernel(hyperparameters, o, input)),
        );
        match &self.cholesky {
            Some(l) if n > 0 => l.solve_lower_triangular(&cross).unwrap_or(cross),
            _ => DVector::zeros(0),
        }
    }

    /// Posterior mean and standard deviation of the latent function at `input`.
    pub fn predict(&self, input: &[f64]) -> (f64, f64) {
        let hyperparameters = self.hyperparameters_or_default(input.len() - 1);
        let prior = self.kernel(&hyperparameters, input, input);
        if self.inputs.is_empty() {
            return (self.target_mean, prior.sqrt());
        }
        let cross = DVector::from_iterator(
            self.inputs.len(),
            self.inputs
                .iter()
                .map(|o| self.kernel(&hyperparameters, o, input)),
        );
        let mean = self.target_mean + cross.dot(&self.weights);
        let projection = self.projection(&hyperparameters, input);
        let variance = (prior - projection.norm_squared()).max(0.0);
        (mean, variance.sqrt())
    }

    /// Posterior means and covariance matrix of the latent function at `inputs`.
    pub fn joint(&self, inputs: &[Vec<f64>]) -> (Vec<f64>, DMatrix<f64>) {
        let dimension = inputs.first().map_or(0, |i| i.len().saturating_sub(1));
        let hyperparameters = self.hyperparameters_or_default(dimension);
        let projections: Vec<DVector<f64>> = inputs
            .iter()
            .map(|i| self.projection(&hyperparameters, i))
            .collect();
        let means = inputs.iter().map(|i| self.predict(i).0).collect();
        let covariance = DMatrix::from_fn(inputs.len(), inputs.len(), |a, b| {
            let prior = self.kernel(&hyperparameters, &inputs[a], &inputs[b]);
            if projections[a].is_empty() {
                prior
            } else {
                prior - projections[a].dot(&projections[b])
            }
        });
        (means, covariance)
    }

    /// Posterior covariances between `input` and each of `others`.
    pub fn cross_covariance(&self, input: &[f64], others: &[Vec<f64>]) -> Vec<f64> {
        let hyperparameters = self.hyperparameters_or_default(input.len() - 1);
        let projection = self.projection(&hyperparameters, input);
        others
            .iter()
            .map(|other| {
                let prior = self.kernel(&hyperparameters, input, other);
                if projection.is_empty() {
                    prior
                } else {
                    prior - projection.dot(&self.projection(&hyperparameters, other))
                }
            })
            .collect()
    }

    /// The observation noise variance (0 before a fit).
    pub fn noise_variance(&self) -> f64 {
        self.hyperparameters
            .as_ref()
            .map_or(0.0, |h| h.noise_variance)
    }
}

/// Maximises `objective` over a box by coordinate pattern search (Hooke-Jeeves without the
/// pattern move): steps of 1 halved down to 1/32 in log space, at most `budget` evaluations.
fn pattern_search(
    start: &[f64],
    bounds: &[(f64, f64)],
    frozen: &dyn Fn(usize) -> bool,
    objective: impl Fn(&[f64]) -> f64,
    budget: usize,
) -> Vec<f64> {
    let mut best = start.to_vec();
    let mut best_value = objective(&best);
    let mut evaluations = 1;
    let mut step = 1.0;
    while step >= 1.0 / 32.0 && evaluations < budget {
        let mut improved = false;
        for index in 0..best.len() {
            if frozen(index) {
                continue;
            }
            for direction in [1.0, -1.0] {
                let mut trial = best.clone();
                trial[index] =
                    (trial[index] + direction * step).clamp(bounds[index].0, bounds[index].1);
                if trial[index] == best[index] {
                    continue;
                }
                let value = objective(&trial);
                evaluations += 1;
                if value > best_value {
                    best = trial;
                    best_value = value;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Vec<Vec<f64>> {
        let mut inputs = Vec::new();
        for i in 0..6 {
            for s in [0.0, 0.4, 1.0] {
                inputs.push(vec![i as f64 / 5.0, (i * 7 % 5) as f64 / 4.0, s]);
            }
        }
        inputs
    }

    #[test]
    fn the_fabolas_kernel_is_positive_semidefinite() {
        for basis in [Basis::Loss, Basis::Cost, Basis::Constant] {
            let gp = FabolasGp::new(basis);
            let hyperparameters = GpHyperparameters {
                amplitude: 1.3,
                length_scales: vec![0.3, 0.8],
                basis_weight: 2.0,
                noise_variance: 0.0,
            };
            let points = inputs();
            let matrix = DMatrix::from_fn(points.len(), points.len(), |a, b| {
                gp.kernel(&hyperparameters, &points[a], &points[b])
            });
            assert!((matrix.clone() - matrix.transpose()).amax() < 1e-12);
            let eigenvalues = matrix.symmetric_eigenvalues();
            let smallest = eigenvalues.iter().copied().fold(f64::INFINITY, f64::min);
            assert!(smallest > -1e-9, "{basis:?}: eigenvalue {smallest}");
        }
    }

    #[test]
    fn the_fit_interpolates_and_is_uncertain_away_from_data() {
        let points = inputs();
        let targets: Vec<f64> = points
            .iter()
            .map(|p| (2.0 * p[0]).sin() - 0.5 * (1.0 - p[2]).powi(2))
            .collect();
        let mut gp = FabolasGp::new(Basis::Loss);
        gp.fit(&points, &targets);
        for (point, target) in points.iter().zip(&targets) {
            let (mean, _) = gp.predict(point);
            assert!((mean - target).abs() < 0.05, "{mean} vs {target}");
        }
        let (_, near) = gp.predict(&points[0]);
        let (_, far) = gp.predict(&[0.5, 3.0, 1.0]);
        assert!(far > near);
        let (means, covariance) = gp.joint(&points[..3]);
        assert_eq!(means.len(), 3);
        assert!((covariance[(0, 0)].sqrt() - near).abs() < 1e-9);
        let cross = gp.cross_covariance(&points[0], &points[..3]);
        assert!((cross[1] - covariance[(0, 1)]).abs() < 1e-9);
        // A fantasy at the posterior mean keeps the mean and shrinks the variance there.
        let probe = vec![0.55, 0.45, 1.0];
        let (mean, deviation) = gp.predict(&probe);
        let fantasy = gp.with_observation(&probe, mean);
        let (fantasy_mean, fantasy_deviation) = fantasy.predict(&probe);
        assert!((fantasy_mean - mean).abs() < 1e-6);
        assert!(fantasy_deviation < deviation);
    }
}
