//! The Gaussian process over one user's candidate models, with incremental posterior updates.
//!
//! State after `t` observations at candidates `o_1..o_t` with values `y`:
//! `L` is the Cholesky factor of `K_oo + noise I`, `V = L^-1 K_o*` (t x K, one row per observation),
//! `z = L^-1 (y - m_o)`. Then for every candidate `k`: `mean(k) = m(k) + V[:,k]' z` and
//! `variance(k) = K(k,k) - |V[:,k]|^2`. Adding one observation appends one row to `L`, `V` and `z`
//! (a rank-one extension of the Cholesky factor): O(t K) work, never a fresh O(t^3) solve. The new
//! diagonal entry of `L` is floored by a relative jitter so that duplicate or near-duplicate
//! observations never produce NaN; variances are clamped at zero.
//!
//! Hallucinated observations (GP-BUCB, Desautels, Krause and Burdick, JMLR 2014): while a run of
//! candidate `k` is in flight, the GP may condition on a *hallucinated* observation of `k` equal to
//! the current posterior mean. Its whitened residual is zero by construction, so the mean does not
//! change; only the variance shrinks (at `k` and at the candidates correlated with it). The real
//! observations' factor `L`, `V`, `z` is never touched by hallucinations: they are a temporary
//! extension (extra rows of `V` only, `z` = 0 for them) kept next to it and recomputed from the
//! real factor whenever a real observation arrives, a candidate is added or a hallucination is
//! forgotten (O(h (t + h) K) work for `h` hallucinations; `h` is the number of runs in flight, small).
//! Invariants: [`UserGp::mean`] never depends on hallucinations; with none,
//! [`UserGp::variance`] is the real observations' posterior variance bit for bit; the amplitude
//! estimate reads the real observations only.

use nalgebra::{DMatrix, DVector};

/// Smallest squared pivot of the Cholesky extension, relative to the prior variance of the point.
const RELATIVE_JITTER: f64 = 1e-9;

/// The posterior over one user's candidates.
#[derive(Debug, Clone)]
pub struct UserGp {
    prior_mean: Vec<f64>,
    prior_covariance: DMatrix<f64>,
    noise_variance: f64,
    /// Lower-triangular rows of the Cholesky factor of `K_oo + noise I`.
    cholesky_rows: Vec<Vec<f64>>,
    /// `V = L^-1 K_o*`, one row (of length K) per observation.
    projected_rows: Vec<Vec<f64>>,
    /// `z = L^-1 (y - m_o)`.
    whitened_targets: Vec<f64>,
    observed_candidates: Vec<usize>,
    posterior_mean: Vec<f64>,
    posterior_variance: Vec<f64>,
    /// Pseudo-observations of the per-user amplitude estimate (`None`: amplitude fixed at 1).
    amplitude_prior_strength: Option<f64>,
    /// Whether the amplitude estimate leaves out the first observation's residual (see
    /// [`UserGp::with_level_free_amplitude`]).
    amplitude_skips_first_residual: bool,
    /// The amplitude factor for the current observations (kept up to date: decisions read it once
    /// per candidate).
    amplitude_factor: f64,
    /// Candidates with a hallucinated observation (one entry per hallucination, in order).
    hallucinated_candidates: Vec<usize>,
    /// `V` rows of the hallucinations, each against the real rows and the hallucinations before it.
    hallucinated_rows: Vec<Vec<f64>>,
    /// Posterior variance given the real and the hallucinated observations (`None`: no hallucination,
    /// [`UserGp::variance`] is `posterior_variance`).
    hallucinated_variance: Option<Vec<f64>>,
}

impl UserGp {
    /// A GP with the given prior (mean vector, latent covariance) and observation noise.
    pub fn new(
        prior_mean: DVector<f64>,
        prior_covariance: DMatrix<f64>,
        noise_variance: f64,
    ) -> Self {
        let posterior_variance = prior_covariance.diagonal().iter().copied().collect();
        UserGp {
            posterior_mean: prior_mean.iter().copied().collect(),
            prior_mean: prior_mean.iter().copied().collect(),
            prior_covariance,
            noise_variance: noise_variance.max(0.0),
            cholesky_rows: Vec::new(),
            projected_rows: Vec::new(),
            whitened_targets: Vec::new(),
            observed_candidates: Vec::new(),
            posterior_variance,
            amplitude_prior_strength: None,
            amplitude_skips_first_residual: false,
            amplitude_factor: 1.0,
            hallucinated_candidates: Vec::new(),
            hallucinated_rows: Vec::new(),
            hallucinated_variance: None,
        }
    }

    /// Turns on the per-user amplitude: the user's kernel is `a^2 K` with `a^2` estimated from its
    /// own observations, `a^2 = (c + |z|^2) / (c + t)` (`z` the whitened residuals, `t` their number,
    /// `c` = `prior_strength` pseudo-observations at amplitude 1). Users whose qualities deviate
    /// from the history more than the kernel expects get wider bounds, users that follow it get
    /// narrower ones. The posterior mean does not change; [`UserGp::standard_deviation`] scales.
    pub fn with_amplitude_estimate(mut self, prior_strength: f64) -> Self {
        self.amplitude_prior_strength =
            (prior_strength.is_finite() && prior_strength > 0.0).then_some(prior_strength);
        self.amplitude_factor = self.estimate_amplitude();
        self
    }

    /// The same GP whose amplitude estimate (if on) leaves out the whitened residual of the first
    /// observation. That residual is the user's surprise against the history's mean: it measures
    /// how far the user's *level* is from the history users' (a data set much harder or easier than
    /// theirs), which the kernel's offset term then absorbs, not how widely its candidates spread;
    /// the later residuals are predictions given that level. `a^2 = (c + sum_{i>=2} z_i^2) / (c + t - 1)`.
    pub fn with_level_free_amplitude(mut self) -> Self {
        self.set_level_free_amplitude(true);
        self
    }

    /// Switches the level-free amplitude estimate (see [`UserGp::with_level_free_amplitude`]) on
    /// or off.
    pub fn set_level_free_amplitude(&mut self, level_free: bool) {
        self.amplitude_skips_first_residual = level_free;
        self.amplitude_factor = self.estimate_amplitude();
    }

    /// The whitened residual of the first observation (`None` before it): the user's first
    /// quality against the history's prior, in prior standard deviations (noise included); its
    /// square has expectation 1 when the user is one of the history's kind.
    pub fn first_whitened_residual(&self) -> Option<f64> {
        self.whitened_targets.first().copied()
    }

    /// The user's amplitude factor `a` (1 when the estimate is off).
    pub fn amplitude(&self) -> f64 {
        self.amplitude_factor
    }

    fn estimate_amplitude(&self) -> f64 {
        match self.amplitude_prior_strength {
            None => 1.0,
            Some(strength) => {
                let skipped = usize::from(self.amplitude_skips_first_residual)
                    .min(self.whitened_targets.len());
                let residuals = &self.whitened_targets[skipped..];
                let squared: f64 = residuals.iter().map(|z| z * z).sum();
                let estimate = ((strength + squared) / (strength + residuals.len() as f64)).sqrt();
                if estimate.is_finite() { estimate } else { 1.0 }
            }
        }
    }

    /// Number of candidates.
    pub fn n_candidates(&self) -> usize {
        self.prior_mean.len()
    }

    /// Number of (real) observations conditioned on; hallucinations are not counted.
    pub fn n_observations(&self) -> usize {
        self.observed_candidates.len()
    }

    /// Number of hallucinated observations (runs in flight the GP accounts for).
    pub fn n_hallucinated(&self) -> usize {
        self.hallucinated_candidates.len()
    }

    /// The candidates with a hallucinated observation, in the order they were hallucinated.
    pub fn hallucinated_candidates(&self) -> &[usize] {
        &self.hallucinated_candidates
    }

    /// Posterior mean of every candidate (hallucinations never change it).
    pub fn mean(&self) -> &[f64] {
        &self.posterior_mean
    }

    /// Posterior variance of every candidate given the real and the hallucinated observations
    /// (never negative, never NaN): what decisions use.
    pub fn variance(&self) -> &[f64] {
        self.hallucinated_variance
            .as_deref()
            .unwrap_or(&self.posterior_variance)
    }

    /// Posterior variance of every candidate given the real observations only.
    pub fn observed_variance(&self) -> &[f64] {
        &self.posterior_variance
    }

    /// Posterior standard deviation of one candidate (hallucinations included), times the user's
    /// amplitude (what decisions use).
    pub fn standard_deviation(&self, candidate: usize) -> f64 {
        self.variance()[candidate].max(0.0).sqrt() * self.amplitude()
    }

    /// Conditions on a hallucinated observation of `candidate` equal to its current posterior mean
    /// (GP-BUCB): the mean is unchanged, the variance of `candidate` and of the candidates
    /// correlated with it shrinks. Undone by [`UserGp::forget_hallucination`]. An unknown
    /// candidate is ignored.
    pub fn hallucinate(&mut self, candidate: usize) {
        if candidate >= self.n_candidates() {
            return;
        }
        self.hallucinated_candidates.push(candidate);
        self.extend_hallucination(candidate);
    }

    /// Removes one hallucinated observation of `candidate` (its run finished or was cancelled);
    /// a no-op when it has none. The others are recomputed against the real observations.
    pub fn forget_hallucination(&mut self, candidate: usize) {
        if let Some(position) = self
            .hallucinated_candidates
            .iter()
            .position(|&c| c == candidate)
        {
            self.hallucinated_candidates.remove(position);
            self.rebuild_hallucinations();
        }
    }

    /// The real observation `quality` of `candidate` replaces one hallucinated observation of it
    /// (its run finished): [`UserGp::forget_hallucination`] then [`UserGp::add_observation`], with
    /// the remaining hallucinations recomputed once.
    pub fn observe_in_place_of_hallucination(&mut self, candidate: usize, quality: f64) {
        let position = self
            .hallucinated_candidates
            .iter()
            .position(|&c| c == candidate);
        match position {
            Some(position) if quality.is_finite() && candidate < self.n_candidates() => {
                self.hallucinated_candidates.remove(position);
                if self.hallucinated_candidates.is_empty() {
                    self.hallucinated_rows.clear();
                    self.hallucinated_variance = None;
                }
                // Rebuilds the remaining hallucinations against the extended real factor.
                self.add_observation(candidate, quality);
            }
            _ => {
                self.forget_hallucination(candidate);
                self.add_observation(candidate, quality);
            }
        }
    }

    /// Recomputes every hallucination's row from the real factor (after it changed).
    fn rebuild_hallucinations(&mut self) {
        self.hallucinated_rows.clear();
        self.hallucinated_variance = None;
        let candidates = self.hallucinated_candidates.clone();
        for candidate in candidates {
            self.extend_hallucination(candidate);
        }
    }

    /// Appends the `V` row of one hallucinated observation of `candidate` (a rank-one extension
    /// over the real rows and the hallucinations before it; its whitened residual is 0) and
    /// shrinks the hallucinated variance by it.
    fn extend_hallucination(&mut self, candidate: usize) {
        let rows: Vec<&Vec<f64>> = self
            .projected_rows
            .iter()
            .chain(&self.hallucinated_rows)
            .collect();
        let new_row = extension_row(
            &self.prior_covariance,
            self.noise_variance,
            &rows,
            candidate,
        );
        let mut variance = self
            .hallucinated_variance
            .take()
            .unwrap_or_else(|| self.posterior_variance.clone());
        for (value, projected) in variance.iter_mut().zip(&new_row) {
            let shrunk = *value - projected * projected;
            *value = if shrunk.is_finite() {
                shrunk.max(0.0)
            } else {
                0.0
            };
        }
        self.hallucinated_variance = Some(variance);
        self.hallucinated_rows.push(new_row);
    }

    /// Conditions on one observation `quality` of `candidate` (a rank-one Cholesky extension).
    /// A non-finite quality is ignored (callers validate before).
    pub fn add_observation(&mut self, candidate: usize, quality: f64) {
        if !quality.is_finite() || candidate >= self.n_candidates() {
            return;
        }
        let n_candidates = self.n_candidates();
        let projected_column: Vec<f64> = self
            .projected_rows
            .iter()
            .map(|row| row[candidate])
            .collect();
        let prior_variance = self.prior_covariance[(candidate, candidate)] + self.noise_variance;
        let squared_pivot = prior_variance - projected_column.iter().map(|v| v * v).sum::<f64>();
        let pivot = squared_pivot
            .max(RELATIVE_JITTER * prior_variance.abs().max(1e-12))
            .sqrt();
        let mut new_row = vec![0.0; n_candidates];
        for (other, value) in new_row.iter_mut().enumerate() {
            let mut sum = self.prior_covariance[(candidate, other)];
            for (row, weight) in self.projected_rows.iter().zip(&projected_column) {
                sum -= weight * row[other];
            }
            *value = sum / pivot;
        }
        let explained: f64 = projected_column
            .iter()
            .zip(&self.whitened_targets)
            .map(|(a, b)| a * b)
            .sum();
        let whitened = (quality - self.prior_mean[candidate] - explained) / pivot;
        for (other, &projected) in new_row.iter().enumerate() {
            let mean = self.posterior_mean[other] + projected * whitened;
            let variance = self.posterior_variance[other] - projected * projected;
            self.posterior_mean[other] = if mean.is_finite() {
                mean
            } else {
                self.prior_mean[other]
            };
            self.posterior_variance[other] = if variance.is_finite() {
                variance.max(0.0)
            } else {
                0.0
            };
        }
        let mut cholesky_row = projected_column;
        cholesky_row.push(pivot);
        self.cholesky_rows.push(cholesky_row);
        self.projected_rows.push(new_row);
        self.whitened_targets.push(whitened);
        self.observed_candidates.push(candidate);
        self.amplitude_factor = self.estimate_amplitude();
        if !self.hallucinated_candidates.is_empty() {
            self.rebuild_hallucinations();
        }
    }

    /// Adds a candidate with the given prior mean, prior variance and prior covariance with every
    /// existing candidate (in order). Its posterior is computed by one forward substitution.
    pub fn add_candidate(&mut self, prior_mean: f64, prior_variance: f64, covariances: &[f64]) {
        let n_old = self.n_candidates();
        let mut grown = DMatrix::<f64>::zeros(n_old + 1, n_old + 1);
        grown
            .view_mut((0, 0), (n_old, n_old))
            .copy_from(&self.prior_covariance);
        for (other, &value) in covariances.iter().enumerate().take(n_old) {
            grown[(n_old, other)] = value;
            grown[(other, n_old)] = value;
        }
        grown[(n_old, n_old)] = prior_variance;
        self.prior_covariance = grown;
        self.prior_mean.push(prior_mean);
        // New column of V: forward substitution L v = k_o(new).
        let mut column: Vec<f64> = Vec::with_capacity(self.n_observations());
        for (row_index, &observed) in self.observed_candidates.iter().enumerate() {
            let mut sum = self.prior_covariance[(observed, n_old)];
            for (previous, value) in column.iter().enumerate() {
                sum -= self.cholesky_rows[row_index][previous] * value;
            }
            column.push(sum / self.cholesky_rows[row_index][row_index]);
        }
        let mut mean = prior_mean;
        let mut variance = prior_variance;
        for (row_index, value) in column.iter().enumerate() {
            self.projected_rows[row_index].push(*value);
            mean += value * self.whitened_targets[row_index];
            variance -= value * value;
        }
        self.posterior_mean
            .push(if mean.is_finite() { mean } else { prior_mean });
        self.posterior_variance.push(if variance.is_finite() {
            variance.max(0.0)
        } else {
            0.0
        });
        if !self.hallucinated_candidates.is_empty() {
            self.rebuild_hallucinations();
        }
    }
}

/// The new `V` row (length K) when the observations whose `V` rows are `rows` are extended by one
/// noisy observation of `candidate`: `(K(c, .) - sum_r V[r,c] V[r,.]) / pivot`, the pivot floored by
/// the relative jitter (as in [`UserGp::add_observation`]).
fn extension_row(
    prior_covariance: &DMatrix<f64>,
    noise_variance: f64,
    rows: &[&Vec<f64>],
    candidate: usize,
) -> Vec<f64> {
    let projected_column: Vec<f64> = rows.iter().map(|row| row[candidate]).collect();
    let prior_variance = prior_covariance[(candidate, candidate)] + noise_variance;
    let squared_pivot = prior_variance - projected_column.iter().map(|v| v * v).sum::<f64>();
    let pivot = squared_pivot
        .max(RELATIVE_JITTER * prior_variance.abs().max(1e-12))
        .sqrt();
    (0..prior_covariance.ncols())
        .map(|other| {
            let mut sum = prior_covariance[(candidate, other)];
            for (row, weight) in rows.iter().zip(&projected_column) {
                sum -= weight * row[other];
            }
            sum / pivot
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;

    /// The textbook posterior by a direct solve.
    fn direct_posterior(
        prior_mean: &DVector<f64>,
        covariance: &DMatrix<f64>,
        noise: f64,
        observed: &[(usize, f64)],
    ) -> (Vec<f64>, Vec<f64>) {
        let t = observed.len();
        let n = prior_mean.len();
        let k_oo = DMatrix::from_fn(t, t, |a, b| {
            covariance[(observed[a].0, observed[b].0)] + if a == b { noise } else { 0.0 }
        });
        let residual = DVector::from_fn(t, |a, _| observed[a].1 - prior_mean[observed[a].0]);
        let inverse = k_oo.try_inverse().unwrap();
        let mut mean = Vec::new();
        let mut variance = Vec::new();
        for k in 0..n {
            let k_o = DVector::from_fn(t, |a, _| covariance[(observed[a].0, k)]);
            mean.push(prior_mean[k] + (k_o.transpose() * &inverse * &residual)[(0, 0)]);
            variance.push(covariance[(k, k)] - (k_o.transpose() * &inverse * &k_o)[(0, 0)]);
        }
        (mean, variance)
    }

    fn example() -> (DVector<f64>, DMatrix<f64>) {
        let mean = DVector::from_vec(vec![0.5, 0.6, 0.4, 0.55]);
        let covariance = DMatrix::from_row_slice(
            4,
            4,
            &[
                1.0, 0.8, 0.3, 0.1, //
                0.8, 1.0, 0.5, 0.2, //
                0.3, 0.5, 1.0, 0.6, //
                0.1, 0.2, 0.6, 1.0,
            ],
        );
        (mean, covariance)
    }

    #[test]
    fn one_observation_matches_the_closed_form() {
        let (mean, covariance) = example();
        let mut gp = UserGp::new(mean.clone(), covariance.clone(), 0.5);
        gp.add_observation(0, 1.5);
        // mean(k) = m(k) + K(k,0) (y - m(0)) / (K(0,0) + noise); variance = K(k,k) - K(k,0)^2 / 1.5
        for k in 0..4 {
            let expected_mean = mean[k] + covariance[(k, 0)] * (1.5 - 0.5) / 1.5;
            let expected_variance = covariance[(k, k)] - covariance[(k, 0)].powi(2) / 1.5;
            assert!((gp.mean()[k] - expected_mean).abs() < 1e-12);
            assert!((gp.variance()[k] - expected_variance).abs() < 1e-12);
        }
    }

    #[test]
    fn incremental_updates_match_a_direct_solve() {
        let (mean, covariance) = example();
        let observations = [(2, 0.9), (0, 0.3), (3, 0.7)];
        let mut gp = UserGp::new(mean.clone(), covariance.clone(), 0.01);
        for (index, &(candidate, quality)) in observations.iter().enumerate() {
            gp.add_observation(candidate, quality);
            let (expected_mean, expected_variance) =
                direct_posterior(&mean, &covariance, 0.01, &observations[..=index]);
            for k in 0..4 {
                assert!((gp.mean()[k] - expected_mean[k]).abs() < 1e-10);
                assert!((gp.variance()[k] - expected_variance[k]).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn duplicate_observations_on_a_singular_kernel_stay_finite() {
        // Rank-one kernel and no noise: every extension after the first is singular.
        let mean = DVector::from_vec(vec![0.0, 0.0, 0.0]);
        let covariance = DMatrix::from_element(3, 3, 1.0);
        let mut gp = UserGp::new(mean, covariance, 0.0);
        for quality in [0.5, 0.5, 0.7, 0.2] {
            gp.add_observation(1, quality);
            assert!(gp.mean().iter().all(|m| m.is_finite()));
            assert!(gp.variance().iter().all(|v| v.is_finite() && *v >= 0.0));
        }
    }

    #[test]
    fn an_added_candidate_gets_the_posterior_of_a_full_rebuild() {
        let (mean, covariance) = example();
        let small_mean = DVector::from_vec(vec![mean[0], mean[1], mean[2]]);
        let small_covariance = covariance.view((0, 0), (3, 3)).into_owned();
        let mut gp = UserGp::new(small_mean, small_covariance, 0.05);
        gp.add_observation(0, 0.2);
        gp.add_observation(2, 0.8);
        gp.add_candidate(
            mean[3],
            covariance[(3, 3)],
            &[covariance[(3, 0)], covariance[(3, 1)], covariance[(3, 2)]],
        );
        let (expected_mean, expected_variance) =
            direct_posterior(&mean, &covariance, 0.05, &[(0, 0.2), (2, 0.8)]);
        for k in 0..4 {
            assert!((gp.mean()[k] - expected_mean[k]).abs() < 1e-10);
            assert!((gp.variance()[k] - expected_variance[k]).abs() < 1e-10);
        }
        gp.add_observation(3, 0.9);
        let (expected_mean, _) =
            direct_posterior(&mean, &covariance, 0.05, &[(0, 0.2), (2, 0.8), (3, 0.9)]);
        for k in 0..4 {
            assert!((gp.mean()[k] - expected_mean[k]).abs() < 1e-10);
        }
    }

    #[test]
    fn hallucinations_keep_the_mean_and_shrink_the_variance_as_a_direct_solve() {
        let (mean, covariance) = example();
        let real = [(2, 0.9), (0, 0.3)];
        let mut gp = UserGp::new(mean.clone(), covariance.clone(), 0.01);
        for &(candidate, quality) in &real {
            gp.add_observation(candidate, quality);
        }
        let mean_before = gp.mean().to_vec();
        let variance_before = gp.variance().to_vec();
        gp.hallucinate(1);
        gp.hallucinate(3);
        assert_eq!(gp.mean(), &mean_before[..], "the mean never moves");
        assert_eq!(gp.observed_variance(), &variance_before[..]);
        assert_eq!(gp.n_observations(), 2);
        assert_eq!(gp.hallucinated_candidates(), &[1, 3]);
        // Hallucinated observations at the posterior mean: the textbook posterior over all four.
        let observed = [real[0], real[1], (1, mean_before[1]), (3, mean_before[3])];
        let (expected_mean, expected_variance) =
            direct_posterior(&mean, &covariance, 0.01, &observed);
        for k in 0..4 {
            assert!((gp.mean()[k] - expected_mean[k]).abs() < 1e-10);
            assert!((gp.variance()[k] - expected_variance[k]).abs() < 1e-10);
            assert!(gp.variance()[k] <= variance_before[k] + 1e-15);
        }
        assert!(gp.variance()[1] < 0.5 * variance_before[1]);
        assert!(gp.variance()[3] < 0.5 * variance_before[3]);
        // Forgetting both gives back the real posterior, bit for bit.
        gp.forget_hallucination(1);
        gp.forget_hallucination(7);
        let (_, expected_variance) =
            direct_posterior(&mean, &covariance, 0.01, &[real[0], real[1], (3, 0.0)]);
        for k in 0..4 {
            assert!((gp.variance()[k] - expected_variance[k]).abs() < 1e-10);
        }
        gp.forget_hallucination(3);
        assert_eq!(gp.n_hallucinated(), 0);
        assert_eq!(gp.variance(), &variance_before[..]);
        assert_eq!(gp.mean(), &mean_before[..]);
    }

    #[test]
    fn a_real_observation_replaces_its_hallucination() {
        let (mean, covariance) = example();
        let mut plain = UserGp::new(mean.clone(), covariance.clone(), 0.05);
        let mut gp = UserGp::new(mean.clone(), covariance.clone(), 0.05);
        plain.add_observation(2, 0.9);
        gp.add_observation(2, 0.9);
        gp.hallucinate(0);
        gp.hallucinate(3);
        gp.observe_in_place_of_hallucination(0, 0.4);
        plain.add_observation(0, 0.4);
        // The real factor never sees the hallucinations.
        assert_eq!(gp.mean(), plain.mean());
        assert_eq!(gp.observed_variance(), plain.variance());
        assert_eq!(gp.hallucinated_candidates(), &[3]);
        let (_, expected_variance) = direct_posterior(
            &mean,
            &covariance,
            0.05,
            &[(2, 0.9), (0, 0.4), (3, plain.mean()[3])],
        );
        for k in 0..4 {
            assert!((gp.variance()[k] - expected_variance[k]).abs() < 1e-10);
        }
        // A candidate added while a hallucination is outstanding is shrunk by it too.
        gp.add_candidate(0.5, 1.0, &[0.1, 0.2, 0.3, 0.9]);
        plain.add_candidate(0.5, 1.0, &[0.1, 0.2, 0.3, 0.9]);
        assert!(gp.variance()[4] < plain.variance()[4]);
        gp.observe_in_place_of_hallucination(3, 0.6);
        plain.add_observation(3, 0.6);
        assert_eq!(gp.mean(), plain.mean());
        assert_eq!(gp.variance(), plain.variance());
    }

    #[test]
    fn the_level_free_amplitude_ignores_the_first_residual() {
        let (mean, covariance) = example();
        let noise = 0.01;
        let plain =
            UserGp::new(mean.clone(), covariance.clone(), noise).with_amplitude_estimate(1.0);
        let level_free = UserGp::new(mean, covariance, noise)
            .with_amplitude_estimate(1.0)
            .with_level_free_amplitude();
        let mut gps = [plain, level_free];
        for gp in &mut gps {
            // A user far above the history's level (3 prior standard deviations) ...
            gp.add_observation(0, 3.5);
        }
        let z1_squared = 3.0f64.powi(2) / (1.0 + noise);
        assert!((gps[0].amplitude() - ((1.0 + z1_squared) / 2.0).sqrt()).abs() < 1e-9);
        assert_eq!(gps[1].amplitude(), 1.0);
        for gp in &mut gps {
            // ... whose next quality is exactly what the posterior predicts given that level.
            let predicted = gp.mean()[1];
            gp.add_observation(1, predicted);
        }
        assert!((gps[0].amplitude() - ((1.0 + z1_squared) / 3.0).sqrt()).abs() < 1e-9);
        assert!((gps[1].amplitude() - 0.5f64.sqrt()).abs() < 1e-9);
        // The mean never depends on the amplitude.
        assert_eq!(gps[0].mean(), gps[1].mean());
    }
}
