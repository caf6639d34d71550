//! Greedy ensemble selection with replacement (Caruana, Niculescu-Mizil, Crew and Ksikes, ICML
//! 2004) over the runs' validation answers: start from nothing, and each round add the run whose
//! answers, averaged into the ensemble so far, give the best quality; a run may be added again
//! (its weight grows). The ensemble kept is the best of every round's (the earliest on ties), its
//! weights each run's count over the rounds to it. The first round picks the best single run, so
//! the kept ensemble is never worse than it on these answers.
//!
//! Quality is the trainer's: accuracy of the averaged probabilities' most likely class (ties
//! between rounds or runs broken by the lower cross-entropy, then the lower index: deterministic),
//! or R^2 clipped to `[0, 1]` of the averaged values (over every output value, as the trainer
//! pools them).

/// The truth the answers are scored against.
#[derive(Debug, Clone, PartialEq)]
pub enum Truth {
    /// One class index per row; the answers are class probabilities.
    Classes(Vec<i64>),
    /// `rows * width` values; the answers are values of the same layout.
    Values(Vec<f32>),
}

/// The rounds of the selection (Caruana et al. use a few dozen to a few hundred; the weights are
/// multiples of 1 / rounds at most).
pub const ROUNDS: usize = 25;

/// The selected ensemble.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// How many times each run (by index into the answers given) was added; the weights are
    /// these over their sum.
    pub counts: Vec<usize>,
    /// The ensemble's quality on the answers.
    pub quality: f64,
    /// The best single run's quality on the same answers.
    pub single_quality: f64,
    /// For classes, the ensemble's mean cross-entropy on the answers; `None` for values.
    pub loss: Option<f64>,
    /// For classes, the best single run's mean cross-entropy.
    pub single_loss: Option<f64>,
    /// The index of the best single run.
    pub single: usize,
}

impl Selection {
    /// Whether the ensemble beats the best single run: a higher quality, or the same and a lower
    /// cross-entropy (the store's `EnsembleRecord::beats_single_run`, on the same numbers).
    pub fn beats_single_run(&self) -> bool {
        self.quality > self.single_quality
            || (self.quality == self.single_quality
                && matches!((self.loss, self.single_loss), (Some(loss), Some(single)) if loss < single))
    }

    /// Each run's weight (its count over the rounds kept); they sum to 1.
    pub fn weights(&self) -> Vec<f64> {
        let total: usize = self.counts.iter().sum();
        self.counts
            .iter()
            .map(|&count| count as f64 / total.max(1) as f64)
            .collect()
    }
}

/// A score to maximize: the quality, then the lower cross-entropy (classification).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score {
    quality: f64,
    neg_loss: f64,
}

impl Score {
    fn better_than(&self, other: &Score) -> bool {
        (self.quality, self.neg_loss) > (other.quality, other.neg_loss)
    }
}

/// The score of `(sum + addition) / count` (the average of `count` answers summed in `sum`, and
/// one more in `addition` when given), without a copy of the sum.
fn score(sum: &[f64], addition: Option<&[f32]>, count: usize, truth: &Truth) -> Score {
    let scale = 1.0 / count.max(1) as f64;
    let value = |index: usize| sum[index] + addition.map_or(0.0, |a| f64::from(a[index]));
    match truth {
        Truth::Classes(labels) => {
            let width = sum.len() / labels.len().max(1);
            let (mut correct, mut loss) = (0usize, 0.0);
            for (row, &label) in labels.iter().enumerate() {
                let start = row * width;
                let mut best = 0;
                let mut best_value = value(start);
                for class in 1..width {
                    let candidate = value(start + class);
                    if candidate > best_value {
                        (best, best_value) = (class, candidate);
                    }
                }
                correct += usize::from(best as i64 == label);
                let p = usize::try_from(label)
                    .ok()
                    .filter(|&label| label < width)
                    .map_or(0.0, |label| value(start + label) * scale);
                loss -= p.max(1e-12).ln();
            }
            Score {
                quality: correct as f64 / labels.len().max(1) as f64,
                neg_loss: -loss / labels.len().max(1) as f64,
            }
        }
        Truth::Values(values) => Score {
            quality: r_squared(value, scale, values),
            neg_loss: 0.0,
        },
    }
}

/// `clamp(1 - SSE / SST, 0, 1)` over every value, as the trainer's quality accumulator computes it.
fn r_squared(sum: impl Fn(usize) -> f64, scale: f64, truth: &[f32]) -> f64 {
    let n = truth.len() as f64;
    if n == 0.0 {
        return 0.0;
    }
    let mean = truth.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    let (mut sse, mut sst) = (0.0, 0.0);
    for (index, &actual) in truth.iter().enumerate() {
        let actual = f64::from(actual);
        sse += (sum(index) * scale - actual).powi(2);
        sst += (actual - mean).powi(2);
    }
    if sst <= 1e-12 {
        return if sse <= 1e-9 { 1.0 } else { 0.0 };
    }
    (1.0 - sse / sst).clamp(0.0, 1.0)
}

/// The run whose answers, added to the `count - 1` summed in `sum`, score best (the earliest on
/// ties), with that score; `None` when there are no answers.
fn best_addition(
    sum: &[f64],
    answers: &[&[f32]],
    count: usize,
    truth: &Truth,
) -> Option<(Score, usize)> {
    let mut pick: Option<(Score, usize)> = None;
    for (index, answer) in answers.iter().enumerate() {
        let trial = score(sum, Some(answer), count, truth);
        if pick.is_none_or(|(best, _)| trial.better_than(&best)) {
            pick = Some((trial, index));
        }
    }
    pick
}

/// Whether `answers` (one slice per run) all fit `truth`'s layout, and their common length.
fn fitting_len(answers: &[&[f32]], truth: &Truth) -> Option<usize> {
    let len = match truth {
        Truth::Classes(labels) => answers.first()?.len().max(labels.len()),
        Truth::Values(values) => values.len(),
    };
    if answers.is_empty() || answers.iter().any(|answer| answer.len() != len || len == 0) {
        return None;
    }
    if let Truth::Classes(labels) = truth
        && (labels.is_empty() || len % labels.len() != 0)
    {
        return None;
    }
    Some(len)
}

/// The index of the best single run of `answers` (the selection's first round); `None` when the
/// answers do not fit the truth.
pub fn best_single(answers: &[&[f32]], truth: &Truth) -> Option<usize> {
    let len = fitting_len(answers, truth)?;
    best_addition(&vec![0.0; len], answers, 1, truth).map(|(_, index)| index)
}

/// The quality of `answers` averaged with `counts` (how many times each run is in the average, as
/// [`Selection::counts`]); `None` when the answers do not fit the truth or no count is positive.
pub fn quality_of(answers: &[&[f32]], counts: &[usize], truth: &Truth) -> Option<f64> {
    let len = fitting_len(answers, truth)?;
    let total: usize = counts.iter().sum();
    if counts.len() != answers.len() || total == 0 {
        return None;
    }
    let mut sum = vec![0.0f64; len];
    for (answer, &count) in answers.iter().zip(counts).filter(|&(_, &count)| count > 0) {
        for (s, &a) in sum.iter_mut().zip(answer.iter()) {
            *s += count as f64 * f64::from(a);
        }
    }
    Some(score(&sum, None, total, truth).quality)
}

/// Selects an ensemble over `answers` (one slice per run, each of the truth's layout) in
/// [`ROUNDS`] rounds; `None` when there are no answers or one's length does not fit the truth.
pub fn select(answers: &[&[f32]], truth: &Truth) -> Option<Selection> {
    let len = fitting_len(answers, truth)?;
    let mut sum = vec![0.0f64; len];
    let mut counts = vec![0usize; answers.len()];
    let mut kept: Option<(Score, Vec<usize>)> = None;
    let mut single = None;
    for round in 0..ROUNDS {
        let (round_score, index) = best_addition(&sum, answers, round + 1, truth)?;
        if round == 0 {
            single = Some((round_score, index));
        }
        for (s, &a) in sum.iter_mut().zip(answers[index].iter()) {
            *s += f64::from(a);
        }
        counts[index] += 1;
        if kept
            .as_ref()
            .is_none_or(|(best, _)| round_score.better_than(best))
        {
            kept = Some((round_score, counts.clone()));
        }
    }
    let (kept_score, counts) = kept?;
    let (single_score, single) = single?;
    let classes = matches!(truth, Truth::Classes(_));
    Some(Selection {
        counts,
        quality: kept_score.quality,
        single_quality: single_score.quality,
        loss: classes.then_some(-kept_score.neg_loss),
        single_loss: classes.then_some(-single_score.neg_loss),
        single,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four rows of two classes, labels 0, 1, 0, 1.
    fn labels() -> Truth {
        Truth::Classes(vec![0, 1, 0, 1])
    }

    #[test]
    fn a_run_that_is_right_everywhere_is_picked_alone() {
        let right = [0.9, 0.1, 0.2, 0.8, 0.7, 0.3, 0.4, 0.6];
        let wrong = [0.1, 0.9, 0.8, 0.2, 0.3, 0.7, 0.6, 0.4];
        let selection = select(&[&wrong, &right], &labels()).unwrap();
        assert_eq!(selection.single, 1);
        assert_eq!(selection.counts, vec![0, 1]);
        assert_eq!(selection.weights(), vec![0.0, 1.0]);
        assert_eq!(selection.quality, 1.0);
        assert_eq!(selection.single_quality, 1.0);
    }

    #[test]
    fn runs_right_on_different_rows_average_to_a_better_ensemble_with_weights_summing_to_one() {
        // a is right on rows 0, 1, 2 (confidently wrong on 3); b on rows 1, 2, 3 (wrong on 0);
        // c on rows 0, 2, 3 (wrong on 1), each wrong answer a mild one.
        let a = [0.9, 0.1, 0.1, 0.9, 0.9, 0.1, 0.6, 0.4];
        let b = [0.4, 0.6, 0.1, 0.9, 0.9, 0.1, 0.1, 0.9];
        let c = [0.9, 0.1, 0.6, 0.4, 0.9, 0.1, 0.1, 0.9];
        let selection = select(&[&a, &b, &c], &labels()).unwrap();
        assert_eq!(selection.single_quality, 0.75);
        assert_eq!(selection.quality, 1.0);
        assert!(selection.counts.iter().filter(|&&count| count > 0).count() >= 2);
        let sum: f64 = selection.weights().iter().sum();
        assert!((sum - 1.0).abs() < 1e-12);
    }

    #[test]
    fn at_equal_accuracy_a_lower_cross_entropy_beats_the_best_single_run() {
        // Both are right everywhere; a is sure on rows 0-1 and hesitant on 2-3, b the reverse.
        let a = [0.99, 0.01, 0.01, 0.99, 0.55, 0.45, 0.45, 0.55];
        let b = [0.55, 0.45, 0.45, 0.55, 0.99, 0.01, 0.01, 0.99];
        let selection = select(&[&a, &b], &labels()).unwrap();
        assert_eq!((selection.quality, selection.single_quality), (1.0, 1.0));
        assert!(selection.loss.unwrap() < selection.single_loss.unwrap());
        assert!(selection.beats_single_run());
        assert_eq!(selection.counts.iter().filter(|&&c| c > 0).count(), 2);
    }

    #[test]
    fn a_run_can_be_added_more_than_once() {
        // Regression: the truth is 1.0 everywhere; a answers 1.2, b answers 0.4. The average
        // 2/3 a + 1/3 b is exact, so a is taken twice.
        let truth = Truth::Values(vec![1.0, 1.0, 1.0, 0.0]);
        let a = [1.2, 1.2, 1.2, 0.0];
        let b = [0.6, 0.6, 0.6, 0.0];
        let selection = select(&[&a, &b], &truth).unwrap();
        assert!(selection.counts[0] >= 2, "{selection:?}");
        assert!(selection.counts[1] >= 1, "{selection:?}");
        assert!(selection.quality > selection.single_quality);
    }

    #[test]
    fn ties_go_to_the_earlier_run_and_repeat_the_same_way() {
        let same = [0.9, 0.1, 0.2, 0.8, 0.7, 0.3, 0.4, 0.6];
        let first = select(&[&same, &same], &labels()).unwrap();
        assert_eq!(first.single, 0);
        assert_eq!(first.counts, vec![1, 0]);
        assert_eq!(first, select(&[&same, &same], &labels()).unwrap());
    }

    #[test]
    fn answers_that_do_not_fit_the_truth_select_nothing() {
        assert_eq!(select(&[], &labels()), None);
        assert_eq!(select(&[&[0.5, 0.5]], &labels()), None);
    }
}
