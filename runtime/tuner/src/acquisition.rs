//! The pieces of TrimTuner's decision: P(feasible), CEA and its filter, the incumbent, entropy
//! search over representer points (FABOLAS' information gain about the `s = 1` optimum), and
//! the EIc baseline's constrained expected improvement.
//!
//! Models predict `loss = log(1 - accuracy)` and `log(cost)`. As in TrimTuner's code, the predicted
//! accuracy is `1 - exp(mean loss)` and the cost is `N(exp(m), (exp(m) sd)^2)` (the log-normal's
//! first-order moments), so `P(cost <= max) = Phi((max - exp(m)) / (exp(m) sd))`; with no spread
//! it is 1 or 0 (the code's scipy call would give NaN).

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr_normal::standard_normal;

use crate::model::{Belief, Model};
use crate::stats::{normal_cdf, normal_pdf, normal_quantile};

/// Standard normal draws from any `Rng` (Box-Muller), so that only `rand` is needed.
mod rand_distr_normal {
    use rand::Rng;

    /// One standard normal draw.
    pub fn standard_normal(rng: &mut impl Rng) -> f64 {
        let u: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
        let v: f64 = rng.r#gen::<f64>();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// The predicted accuracy of a loss prediction: `1 - exp(mean loss)`.
pub fn predicted_accuracy(loss_mean: f64) -> f64 {
    1.0 - loss_mean.exp()
}

/// `P(cost <= max_cost)` from a log-cost prediction `(mean, sd)`.
pub fn probability_feasible(log_cost_mean: f64, log_cost_deviation: f64, max_cost: f64) -> f64 {
    let cost = log_cost_mean.exp();
    let deviation = cost * log_cost_deviation;
    if deviation > 0.0 && deviation.is_finite() {
        normal_cdf((max_cost - cost) / deviation)
    } else if cost <= max_cost {
        1.0
    } else {
        0.0
    }
}

/// The models of one policy: loss and log cost.
#[derive(Debug, Clone)]
pub struct Models {
    /// Model of `log(1 - accuracy)`.
    pub loss: Model,
    /// Model of `log(cost)`.
    pub log_cost: Model,
}

impl Models {
    /// Predicted accuracy and P(feasible) at `input` (P = 1 without a constraint).
    pub fn accuracy_and_feasibility(&self, input: &[f64], max_cost: Option<f64>) -> (f64, f64) {
        let (loss, _) = self.loss.predict(input);
        let probability = max_cost.map_or(1.0, |max| {
            let (mean, deviation) = self.log_cost.predict(input);
            probability_feasible(mean, deviation, max)
        });
        (predicted_accuracy(loss), probability)
    }

    /// Constrained Expected Accuracy (Eq. 6): predicted accuracy x P(feasible).
    pub fn cea(&self, input: &[f64], max_cost: f64) -> f64 {
        let (accuracy, probability) = self.accuracy_and_feasibility(input, Some(max_cost));
        accuracy * probability
    }

    /// The models refit with one simulated observation `(input, loss, log_cost)`.
    pub fn with_observation(&self, input: &[f64], loss: f64, log_cost: f64) -> Models {
        Models {
            loss: self.loss.with_observation(input, loss),
            log_cost: self.log_cost.with_observation(input, log_cost),
        }
    }
}

/// The indices of the `share` (at least one) of `scores` with the largest values, best first.
/// Non-finite scores rank last.
pub fn top_share(scores: &[f64], share: f64) -> Vec<usize> {
    if scores.is_empty() {
        return Vec::new();
    }
    let keep = ((scores.len() as f64 * share) as usize).clamp(1, scores.len());
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let key = |i: usize| {
        if scores[i].is_finite() {
            scores[i]
        } else {
            f64::NEG_INFINITY
        }
    };
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    order.truncate(keep);
    order
}

/// The incumbent among `candidates` (model inputs at `s = 1`, one per tested configuration): with
/// a constraint, the largest CEA (TrimTuner's code, `incumbent_estimation_cea`); without one
/// (FABOLAS), the largest predicted accuracy. Returns the index into `candidates`.
pub fn incumbent(models: &Models, candidates: &[Vec<f64>], max_cost: Option<f64>) -> Option<usize> {
    let scores: Vec<f64> = candidates
        .iter()
        .map(|input| {
            let (accuracy, probability) = models.accuracy_and_feasibility(input, max_cost);
            accuracy * probability
        })
        .collect();
    top_share(&scores, 0.0).first().copied()
}

/// Expected improvement below `best` of a Gaussian `(mean, deviation)` (minimisation).
pub fn expected_improvement(mean: f64, deviation: f64, best: f64) -> f64 {
    if deviation <= 0.0 || !deviation.is_finite() {
        return (best - mean).max(0.0);
    }
    let z = (best - mean) / deviation;
    ((best - mean) * normal_cdf(z) + deviation * normal_pdf(z)).max(0.0)
}

/// Constrained expected improvement (EIc, CherryPick): the loss's expected improvement below
/// `best_feasible_loss` times P(feasible); with no feasible observation yet, P(feasible) alone.
pub fn constrained_expected_improvement(
    models: &Models,
    input: &[f64],
    best_feasible_loss: Option<f64>,
    max_cost: f64,
) -> f64 {
    let (log_cost, log_cost_deviation) = models.log_cost.predict(input);
    let probability = probability_feasible(log_cost, log_cost_deviation, max_cost);
    match best_feasible_loss {
        Some(best) => {
            let (loss, deviation) = models.loss.predict(input);
            expected_improvement(loss, deviation, best) * probability
        }
        None => probability,
    }
}

/// Draws `count` distinct indices with probabilities proportional to `weights` (non-positive or
/// non-finite weights are never drawn unless nothing else is left).
pub fn sample_without_replacement(weights: &[f64], count: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut remaining: Vec<(usize, f64)> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| (i, if w.is_finite() && *w > 0.0 { *w } else { 0.0 }))
        .collect();
    let mut chosen = Vec::with_capacity(count.min(weights.len()));
    while chosen.len() < count && !remaining.is_empty() {
        let total: f64 = remaining.iter().map(|(_, w)| w).sum();
        let position = if total > 0.0 {
            let mut target = rng.r#gen::<f64>() * total;
            let mut position = remaining.len() - 1;
            for (index, (_, weight)) in remaining.iter().enumerate() {
                if target < *weight {
                    position = index;
                    break;
                }
                target -= weight;
            }
            position
        } else {
            rng.gen_range(0..remaining.len())
        };
        chosen.push(remaining.swap_remove(position).0);
    }
    chosen
}

/// Entropy search over representer points (FABOLAS' information gain, Eq. 3 without the cost).
///
/// `p_min`, the distribution of the loss minimiser over the representers (points at `s = 1`), is
/// estimated from joint samples of the representers' losses. The information gain of testing a
/// point is the entropy of `p_min` now minus its expected entropy after observing the point, the
/// expectation over `fantasies` equally spaced quantiles of the observation's predictive
/// distribution (as RoBO's `InformationGain` does with its `Np` quantiles). The samples after a
/// fantasy are the current samples shifted by Gaussian conditioning (Matheron's rule), and every
/// candidate uses the same random numbers, so candidates are compared without sampling noise
/// between them. RoBO approximates `p_min` by expectation propagation (EPMGP) and measures
/// entropy relative to the representers' log-EI base measure; here the base measure is uniform,
/// as in the paper's Eq. 2.
#[derive(Debug, Clone)]
pub struct EntropySearch {
    belief: Belief,
    /// Standard normal draws, one row per sample, one column per belief factor.
    draws: DMatrix<f64>,
    /// Per sample: draw of the candidate's residual.
    residual_draws: Vec<f64>,
    /// Per sample: draw of the observation noise.
    noise_draws: Vec<f64>,
    /// Standard normal quantiles of the fantasised observations.
    quantiles: Vec<f64>,
    /// Per sample: the representers' sampled losses.
    samples: Vec<Vec<f64>>,
    /// Entropy of the current `p_min`.
    current_entropy: f64,
}

impl EntropySearch {
    /// Prepares entropy search for `loss_model` over `representers` (model inputs at `s = 1`).
    pub fn new(
        loss_model: &Model,
        representers: &[Vec<f64>],
        n_samples: usize,
        n_fantasies: usize,
        rng: &mut impl Rng,
    ) -> Self {
        let belief = loss_model.belief(representers);
        let rank = belief.factor.ncols();
        let n_samples = n_samples.max(1);
        let draws = DMatrix::from_fn(n_samples, rank, |_, _| standard_normal(rng));
        let residual_draws = (0..n_samples).map(|_| standard_normal(rng)).collect();
        let noise_draws = (0..n_samples).map(|_| standard_normal(rng)).collect();
        let n_fantasies = n_fantasies.max(1);
        let quantiles = (1..=n_fantasies)
            .map(|j| normal_quantile(j as f64 / (n_fantasies + 1) as f64))
            .collect();
        let samples: Vec<Vec<f64>> = (0..n_samples)
            .map(|s| {
                let shifted = &belief.factor * draws.row(s).transpose();
                belief
                    .means
                    .iter()
                    .zip(shifted.iter())
                    .map(|(m, d)| m + d)
                    .collect()
            })
            .collect();
        let current_entropy =
            minimiser_entropy(samples.iter().map(|s| s.as_slice()), representers.len());
        EntropySearch {
            belief,
            draws,
            residual_draws,
            noise_draws,
            quantiles,
            samples,
            current_entropy,
        }
    }

    /// Entropy of the current `p_min` (nats).
    pub fn current_entropy(&self) -> f64 {
        self.current_entropy
    }

    /// The expected reduction of `p_min`'s entropy from observing `loss_model` at `input`.
    pub fn information_gain(&self, loss_model: &Model, input: &[f64]) -> f64 {
        let loading = loss_model.loading(&self.belief, input);
        let noise = loss_model.noise_variance();
        let latent_variance = loading.weights.norm_squared() + loading.residual_variance;
        let observation_variance = latent_variance + noise;
        if observation_variance <= 1e-300 || !observation_variance.is_finite() {
            return 0.0;
        }
        let cross = &self.belief.factor * &loading.weights;
        let residual_deviation = loading.residual_variance.sqrt();
        let noise_deviation = noise.sqrt();
        let observation_deviation = observation_variance.sqrt();
        let n = self.belief.means.len();
        // Per sample, the candidate's sampled observation less its mean: the same for every
        // fantasised quantile.
        let shared = &self.draws * &loading.weights;
        let sampled: Vec<f64> = (0..self.samples.len())
            .map(|s| {
                shared[s]
                    + residual_deviation * self.residual_draws[s]
                    + noise_deviation * self.noise_draws[s]
            })
            .collect();
        let cross: Vec<f64> = cross.iter().copied().collect();
        let mut expected_entropy = 0.0;
        let mut counts = vec![0usize; n];
        for quantile in &self.quantiles {
            let offset = observation_deviation * quantile;
            counts.iter_mut().for_each(|c| *c = 0);
            for (sample, drawn) in self.samples.iter().zip(&sampled) {
                let shift = (offset - drawn) / observation_variance;
                counts[argmin_shifted(sample, &cross, shift)] += 1;
            }
            expected_entropy += entropy_of_counts(&counts, self.samples.len());
        }
        expected_entropy /= self.quantiles.len() as f64;
        self.current_entropy - expected_entropy
    }
}

/// The index of the least `base[i] + slope[i] * shift` (the first on ties).
fn argmin_shifted(base: &[f64], slope: &[f64], shift: f64) -> usize {
    let mut best = 0;
    let mut least = f64::INFINITY;
    for (index, (b, c)) in base.iter().zip(slope).enumerate() {
        let value = b + c * shift;
        if value < least {
            best = index;
            least = value;
        }
    }
    best
}

fn argmin(values: &[f64]) -> usize {
    let mut best = 0;
    for (index, value) in values.iter().enumerate() {
        if *value < values[best] {
            best = index;
        }
    }
    best
}

fn entropy_of_counts(counts: &[usize], total: usize) -> f64 {
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|&c| {
            let p = c as f64 / total as f64;
            -p * p.ln()
        })
        .sum()
}

fn minimiser_entropy<'a>(samples: impl Iterator<Item = &'a [f64]>, n: usize) -> f64 {
    let mut counts = vec![0usize; n.max(1)];
    let mut total = 0;
    for sample in samples {
        counts[argmin(sample)] += 1;
        total += 1;
    }
    entropy_of_counts(&counts, total.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::Basis;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Models fitted on points `[a, s]` with loss `-a` (accuracy grows with a) and log cost
    /// `log(a)` (cost = a): the configurations above a = 0.5 are infeasible at max cost 0.5.
    fn models(kind: fn() -> Model) -> Models {
        let inputs: Vec<Vec<f64>> = (1..=10).map(|i| vec![i as f64 / 10.0, 1.0]).collect();
        let loss: Vec<f64> = inputs.iter().map(|p| (1.0 - 0.5 * p[0]).ln()).collect();
        let log_cost: Vec<f64> = inputs.iter().map(|p| p[0].ln()).collect();
        let mut models = Models {
            loss: kind(),
            log_cost: kind(),
        };
        models.loss.fit(&inputs, &loss);
        models.log_cost.fit(&inputs, &log_cost);
        models
    }

    fn trees() -> Model {
        Model::trees(10, 1)
    }

    fn gp() -> Model {
        Model::gp(Basis::Constant)
    }

    #[test]
    fn feasibility_is_a_normal_tail_and_a_step_without_spread() {
        assert_eq!(probability_feasible(0.5f64.ln(), 0.0, 1.0), 1.0);
        assert_eq!(probability_feasible(2f64.ln(), 0.0, 1.0), 0.0);
        assert!((probability_feasible(0.0, 0.5, 1.0) - 0.5).abs() < 1e-6);
        assert!(probability_feasible(0.0, 0.5, 1.2) > 0.6);
    }

    #[test]
    fn cea_keeps_the_top_share() {
        let scores = [0.3, 0.9, f64::NAN, 0.1, 0.5, 0.7, 0.2, 0.8, 0.4, 0.6];
        assert_eq!(top_share(&scores, 0.3), vec![1, 7, 5]);
        assert_eq!(top_share(&scores, 0.0), vec![1]);
        assert_eq!(top_share(&scores, 1.0).len(), 10);
        assert_eq!(*top_share(&scores, 1.0).last().unwrap(), 2);
        // The filter over CEA scores of real models keeps the feasible and accurate ones.
        let models = models(trees);
        let inputs: Vec<Vec<f64>> = (1..=10).map(|i| vec![i as f64 / 10.0, 1.0]).collect();
        let cea: Vec<f64> = inputs.iter().map(|p| models.cea(p, 0.5)).collect();
        let kept = top_share(&cea, 0.2);
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|&i| inputs[i][0] <= 0.5 + 1e-9), "{kept:?}");
    }

    #[test]
    fn the_incumbent_is_the_feasible_argmax_at_full_data() {
        for kind in [trees as fn() -> Model, gp] {
            let models = models(kind);
            let candidates: Vec<Vec<f64>> = (1..=10).map(|i| vec![i as f64 / 10.0, 1.0]).collect();
            let best = incumbent(&models, &candidates, Some(0.5)).unwrap();
            assert!(
                (candidates[best][0] - 0.5).abs() < 0.11,
                "{:?}",
                candidates[best]
            );
            // Without the constraint (FABOLAS) the most accurate wins.
            let unconstrained = incumbent(&models, &candidates, None).unwrap();
            assert!(candidates[unconstrained][0] >= 0.9);
        }
    }

    #[test]
    fn eic_is_zero_where_feasibility_is_zero() {
        let mut models = models(trees);
        // Every observed cost is 2 (no spread among the trees): P(cost <= 0.5) = 0 everywhere.
        let inputs: Vec<Vec<f64>> = (1..=10).map(|i| vec![i as f64 / 10.0, 1.0]).collect();
        models.log_cost.fit(&inputs, &[2f64.ln(); 10]);
        for input in &inputs {
            assert_eq!(
                constrained_expected_improvement(&models, input, Some(0.0), 0.5),
                0.0
            );
            assert_eq!(
                constrained_expected_improvement(&models, input, None, 0.5),
                0.0
            );
        }
        // Where it is feasible, a loss below the best has a positive EIc.
        assert!(constrained_expected_improvement(&models, &inputs[3], Some(0.0), 3.0) > 0.0);
        assert!((expected_improvement(0.0, 1.0, 0.0) - normal_pdf(0.0)).abs() < 1e-12);
    }

    #[test]
    fn entropy_search_values_points_that_inform_about_the_minimiser() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // A GP over one feature with a few observations: the minimiser is uncertain in the gap.
        let inputs = vec![
            vec![0.0, 1.0],
            vec![0.1, 1.0],
            vec![0.9, 1.0],
            vec![1.0, 1.0],
        ];
        let targets = vec![0.0, -0.2, -0.25, 0.1];
        let mut model = Model::gp(Basis::Constant);
        model.fit(&inputs, &targets);
        let representers: Vec<Vec<f64>> = (0..11).map(|i| vec![i as f64 / 10.0, 1.0]).collect();
        let search = EntropySearch::new(&model, &representers, 256, 7, &mut rng);
        assert!(search.current_entropy() > 0.5);
        let in_the_gap = search.information_gain(&model, &[0.5, 1.0]);
        let at_a_known_point = search.information_gain(&model, &[0.0, 1.0]);
        assert!(
            in_the_gap > at_a_known_point,
            "{in_the_gap} vs {at_a_known_point}"
        );
        assert!(in_the_gap > 0.0);
        // The same candidate always gets the same value (common random numbers).
        assert_eq!(in_the_gap, search.information_gain(&model, &[0.5, 1.0]));
    }

    #[test]
    fn weighted_sampling_draws_distinct_indices_and_skips_zero_weights() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let drawn = sample_without_replacement(&[0.0, 1.0, 2.0, 0.0, 5.0], 3, &mut rng);
        let mut sorted = drawn.clone();
        sorted.sort();
        assert_eq!(sorted, vec![1, 2, 4]);
    }
}
