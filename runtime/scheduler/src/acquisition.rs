//! Single-user policies: which candidate of one user to train next.
//!
//! GP-UCB (Algorithm 1) picks `argmax_k mean(k) + sqrt(beta_t) sd(k)`; cost-aware GP-UCB
//! (section 3.2) picks `argmax_k mean(k) + sqrt(beta_t / c_k) sd(k)` with `c_k` the candidate's cost
//! normalised over all users (so the most expensive candidate of all has cost 1). `beta_t` is
//! `log(K t^2 / delta)` (the practical form) or `2 c* log(pi^2 K t^2 / (6 delta))` (Theorem 1), with
//! `t` the user's own step (observations + 1). GP-EI and GP-EI per second (Spearmint's criterion)
//! use the expected improvement over the best quality observed so far. A fixed order (MostCited,
//! MostRecent) trains candidates by rank. Scores are sanitised: a non-finite score never wins.

pub use easeml_stats::{normal_cdf, normal_pdf};
use serde::{Deserialize, Serialize};

/// Which form of `beta_t` GP-UCB uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BetaForm {
    /// `log(K t^2 / delta)` (Algorithm 1 and 2 of the paper; the default).
    Practical,
    /// `2 c* log(pi^2 K t^2 / (6 delta))` (Theorem 1), `c*` the largest normalised cost.
    Theorem,
}

/// How one user's next candidate is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum CandidatePolicy {
    /// GP-UCB, optionally cost-aware.
    Ucb {
        /// Divide `beta_t` by the candidate's normalised cost.
        cost_aware: bool,
        /// The form of `beta_t`.
        beta_form: BetaForm,
        /// The confidence parameter `delta` in (0, 1).
        delta: f64,
        /// Multiplies `beta_t` (1 = the paper; Srinivas et al. scale it by 1/5 in their experiments).
        beta_scale: f64,
    },
    /// GP expected improvement, optionally per unit of (normalised) cost ("EI per second").
    ExpectedImprovement {
        /// Divide the expected improvement by the candidate's normalised cost.
        per_cost: bool,
    },
    /// Train candidates in a fixed order of model ids (ids not listed come last, in order).
    FixedOrder {
        /// Model ids, first trained first.
        model_order: Vec<String>,
    },
}

impl CandidatePolicy {
    /// GP-UCB with the practical beta and delta = 0.1.
    pub fn ucb(cost_aware: bool) -> Self {
        CandidatePolicy::Ucb {
            cost_aware,
            beta_form: BetaForm::Practical,
            delta: 0.1,
            beta_scale: 1.0,
        }
    }

    /// Whether the policy weighs candidates by their cost (cost-aware GP-UCB, EI per unit cost):
    /// the scheduler's cost mode, which Algorithm 2's line 8 follows.
    pub fn is_cost_aware(&self) -> bool {
        matches!(
            self,
            CandidatePolicy::Ucb {
                cost_aware: true,
                ..
            } | CandidatePolicy::ExpectedImprovement { per_cost: true }
        )
    }
}

/// `beta_t` for a user with `n_candidates` candidates at its own step `step` (1-based).
pub fn beta(
    form: BetaForm,
    n_candidates: usize,
    step: usize,
    delta: f64,
    largest_normalised_cost: f64,
) -> f64 {
    let k = n_candidates.max(1) as f64;
    let t = step.max(1) as f64;
    let delta = if delta > 0.0 && delta < 1.0 {
        delta
    } else {
        0.1
    };
    let value = match form {
        BetaForm::Practical => (k * t * t / delta).ln(),
        BetaForm::Theorem => {
            2.0 * largest_normalised_cost.max(1e-12)
                * (std::f64::consts::PI.powi(2) * k * t * t / (6.0 * delta)).ln()
        }
    };
    value.max(0.0)
}

/// The (cost-aware when `normalised_cost` is not 1) upper confidence bound of one candidate.
pub fn upper_confidence_bound(
    mean: f64,
    standard_deviation: f64,
    beta_t: f64,
    normalised_cost: f64,
) -> f64 {
    let cost = if normalised_cost.is_finite() && normalised_cost > 0.0 {
        normalised_cost
    } else {
        1.0
    };
    sanitise(mean + (beta_t / cost).sqrt() * standard_deviation)
}

/// The expected improvement of a candidate over `best_quality` (maximisation).
pub fn expected_improvement(mean: f64, standard_deviation: f64, best_quality: f64) -> f64 {
    if standard_deviation <= 1e-12 || !standard_deviation.is_finite() {
        return sanitise((mean - best_quality).max(0.0));
    }
    let z = (mean - best_quality) / standard_deviation;
    sanitise((mean - best_quality) * normal_cdf(z) + standard_deviation * normal_pdf(z))
}

/// Points of the quadrature in [`expected_remaining_regret`].
const REGRET_QUADRATURE_POINTS: usize = 48;

/// The expected remaining regret of a user: `E[max(best, max_k min(f_k, ceiling))] - best`, how much
/// better than `best_quality` its best candidate is expected to be, under the independent normal
/// marginals `(mean, standard deviation)` of its candidates (the posterior's, ignoring their
/// correlation) and a quality ceiling no model exceeds. Computed as `integral over x in
/// [best, ceiling] of P(max_k f_k > x)`, with `P(max_k f_k <= x) = prod_k Phi((x - mean_k) / sd_k)`,
/// by the midpoint rule over 48 points (`REGRET_QUADRATURE_POINTS`) up to 6 standard deviations past the
/// largest mean. Unlike an upper confidence bound it grows with the number of plausible candidates,
/// not only with the widest one; unlike one candidate's expected improvement it counts every run
/// the user still needs. 0 without candidates; never NaN.
pub fn expected_remaining_regret(marginals: &[(f64, f64)], best_quality: f64, ceiling: f64) -> f64 {
    let top = marginals
        .iter()
        .map(|&(mean, sd)| mean + 6.0 * sd.max(0.0))
        .fold(f64::NEG_INFINITY, f64::max)
        .min(ceiling);
    // NaN bounds (or best) fall through to 0 as well.
    if top.is_nan() || top <= best_quality || !best_quality.is_finite() {
        return 0.0;
    }
    let step = (top - best_quality) / REGRET_QUADRATURE_POINTS as f64;
    let mut integral = 0.0;
    for point in 0..REGRET_QUADRATURE_POINTS {
        let x = best_quality + (point as f64 + 0.5) * step;
        let below: f64 = marginals
            .iter()
            .map(|&(mean, sd)| {
                if sd > 1e-12 && sd.is_finite() {
                    normal_cdf((x - mean) / sd)
                } else if mean <= x {
                    1.0
                } else {
                    0.0
                }
            })
            .product();
        integral += (1.0 - below) * step;
    }
    if integral.is_finite() {
        integral.max(0.0)
    } else {
        0.0
    }
}

/// Maps NaN to negative infinity (it never wins) and +infinity to `f64::MAX` (finite).
fn sanitise(score: f64) -> f64 {
    if score.is_nan() {
        f64::NEG_INFINITY
    } else if score == f64::INFINITY {
        f64::MAX
    } else {
        score
    }
}

/// Index of the largest score among `eligible` indices (ties: the lowest index); `None` if empty.
pub fn argmax_eligible(scores: impl Iterator<Item = (usize, f64)>) -> Option<(usize, f64)> {
    let mut best: Option<(usize, f64)> = None;
    for (index, score) in scores {
        let score = sanitise(score);
        if best.is_none_or(|(_, best_score)| score > best_score) {
            best = Some((index, score));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beta_forms() {
        let practical = beta(BetaForm::Practical, 10, 2, 0.1, 1.0);
        assert!((practical - (10.0f64 * 4.0 / 0.1).ln()).abs() < 1e-12);
        let theorem = beta(BetaForm::Theorem, 10, 2, 0.1, 0.5);
        let expected = 2.0 * 0.5 * (std::f64::consts::PI.powi(2) * 40.0 / 0.6).ln();
        assert!((theorem - expected).abs() < 1e-12);
    }

    #[test]
    fn cheaper_candidates_get_a_wider_bound() {
        let cheap = upper_confidence_bound(0.5, 0.1, 4.0, 0.25);
        let expensive = upper_confidence_bound(0.5, 0.1, 4.0, 1.0);
        assert!((cheap - 0.9).abs() < 1e-12);
        assert!((expensive - 0.7).abs() < 1e-12);
    }

    #[test]
    fn expected_remaining_regret_counts_every_plausible_candidate() {
        // One candidate, no ceiling: E[max(best, f)] - best is its expected improvement.
        let single = expected_remaining_regret(&[(0.6, 0.1)], 0.55, f64::INFINITY);
        let improvement = expected_improvement(0.6, 0.1, 0.55);
        assert!(
            (single - improvement).abs() < 1e-3 * improvement,
            "{single} {improvement}"
        );
        // More plausible candidates: more regret left than the best single one's improvement.
        let three = expected_remaining_regret(&[(0.6, 0.1); 3], 0.55, f64::INFINITY);
        assert!(three > single + 0.02, "{three} {single}");
        // Nothing can beat the ceiling; a certain candidate counts only above the best.
        let capped = expected_remaining_regret(&[(0.9, 0.5)], 0.8, 1.0);
        assert!(capped > 0.0 && capped <= 0.2 + 1e-12, "{capped}");
        assert!((expected_remaining_regret(&[(0.7, 0.0)], 0.6, 1.0) - 0.1).abs() < 1e-12);
        assert_eq!(expected_remaining_regret(&[(0.5, 0.0)], 0.6, 1.0), 0.0);
        assert_eq!(expected_remaining_regret(&[], 0.6, 1.0), 0.0);
        assert_eq!(expected_remaining_regret(&[(0.5, f64::NAN)], 0.6, 1.0), 0.0);
    }

    #[test]
    fn expected_improvement_is_positive_and_nan_free() {
        let value = expected_improvement(0.5, 0.1, 0.5);
        assert!((value - 0.1 * normal_pdf(0.0)).abs() < 1e-12);
        assert_eq!(expected_improvement(0.3, 0.0, 0.5), 0.0);
        assert_eq!(
            argmax_eligible([(0, f64::NAN), (1, 0.2), (2, 0.2)].into_iter()),
            Some((1, 0.2))
        );
    }
}
