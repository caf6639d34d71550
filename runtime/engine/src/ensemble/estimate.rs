//! The served model's expected quality on new examples, with an honest 95% interval (issue 48):
//! bootstrap bias-corrected cross-validation (BBC-CV; Tsamardinos, Greasidou and Borboudakis,
//! "Bootstrapping the out-of-sample predictions for efficient and accurate cross-validation",
//! Machine Learning 107, 2018).
//!
//! **Why**: a run's validation quality is an honest estimate of *that* run, but the served model
//! is the best of a dozen or more candidates measured on the same answers, and the best of many
//! noisy scores is biased upward (the winner's curse): on wine the served model's 5-fold quality
//! was 0.993 on 142 answers and its test accuracy 0.944. A Wilson interval around 0.993 says
//! nothing of that choice.
//!
//! **How**: every candidate's validation answers are out-of-fold (k-fold) or on the rows every
//! run shares (the split), so the choice can be replayed on resamples of those rows without
//! training anything. Each resample draws the rows with replacement; on the rows drawn the choice
//! is made again (the best single run, or Caruana's selection and then the ensemble when it beats
//! that run: [`Kind`]); the model chosen is scored on the rows *not* drawn (about 37% of them),
//! which played no part in the choice. The expected quality is the mean of those scores and the
//! interval their 2.5th and 97.5th percentiles. The replay chooses by quality alone (the store's
//! rule also discounts a run's fold spread and asks an ensemble for a margin: both make the real
//! choice less lucky than the replay's), and each out-of-bag score rests on a third of the rows,
//! so the interval is wide rather than narrow: BBC-CV's authors report it conservative.
//!
//! **Cost**: a resample of the single-run choice scores every candidate once on the rows drawn;
//! one of the ensemble's runs the selection's [`super::select::ROUNDS`] rounds. The resamples are
//! [`RESAMPLES`], fewer (not below [`MIN_RESAMPLES`]) when the selection's work would pass
//! [`MAX_WORK`] answer values, so a recomputation after a run stays well under a second.

use easeml_trainer::synthetic::Rng;

use super::select::{Truth, best_single, quality_of, select};

/// The resamples of an estimate when the work allows.
pub const RESAMPLES: usize = 200;

/// The fewest resamples of an estimate (its percentiles are the 2nd and 49th of 50 then).
pub const MIN_RESAMPLES: usize = 50;

/// The most answer values the resamples of an ensemble's estimate may add up (rounds x runs x
/// values a resample), above which there are fewer resamples.
pub const MAX_WORK: usize = 150_000_000;

/// Which choice an estimate replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The best single run on the rows drawn.
    Single,
    /// Caruana's selection on the rows drawn, served when it beats the best single run there.
    Ensemble,
}

/// An expected quality with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The mean of the resamples' out-of-bag qualities (within the interval).
    pub quality: f64,
    /// The 2.5th percentile of those qualities.
    pub low: f64,
    /// The 97.5th percentile.
    pub high: f64,
    /// How many resamples had rows left out and measured it.
    pub resamples: usize,
}

/// The answers and truth of `rows` (by index, repeats allowed), each answer `width` values a row.
fn gather(
    answers: &[&[f32]],
    truth: &Truth,
    width: usize,
    rows: &[usize],
) -> (Vec<Vec<f32>>, Truth) {
    let pick = |values: &[f32]| -> Vec<f32> {
        rows.iter()
            .flat_map(|&row| values[row * width..(row + 1) * width].iter().copied())
            .collect()
    };
    let gathered = answers.iter().map(|answer| pick(answer)).collect();
    let truth = match truth {
        Truth::Classes(labels) => Truth::Classes(rows.iter().map(|&row| labels[row]).collect()),
        Truth::Values(values) => Truth::Values(pick(values)),
    };
    (gathered, truth)
}

/// The counts of the model `kind` chooses on these answers (one run, or the selected ensemble
/// when it beats the best single run).
fn choose(answers: &[&[f32]], truth: &Truth, kind: Kind) -> Option<Vec<usize>> {
    let mut counts = vec![0; answers.len()];
    match kind {
        Kind::Single => counts[best_single(answers, truth)?] = 1,
        Kind::Ensemble => {
            let selection = select(answers, truth)?;
            if selection.beats_single_run() {
                return Some(selection.counts);
            }
            counts[selection.single] = 1;
        }
    }
    Some(counts)
}

/// The estimate of `kind`'s choice among `answers` (one slice per candidate run, `width` values
/// a row, every one of the truth's layout), from a generator seeded with `seed` (the same answers
/// and seed give the same estimate); `None` when the answers do not fit the truth or there are
/// fewer than two rows.
pub fn estimate(
    answers: &[&[f32]],
    truth: &Truth,
    width: usize,
    kind: Kind,
    seed: u64,
) -> Option<Estimate> {
    let len = answers.first()?.len();
    let truth_len = match truth {
        Truth::Classes(labels) => labels.len() * width,
        Truth::Values(values) => values.len(),
    };
    if width == 0 || len != truth_len || answers.iter().any(|answer| answer.len() != len) {
        return None;
    }
    let rows = len / width;
    if rows < 2 || rows * width != len {
        return None;
    }
    let resamples = match kind {
        Kind::Single => RESAMPLES,
        Kind::Ensemble => {
            let work = super::select::ROUNDS * answers.len() * len;
            (MAX_WORK / work.max(1)).clamp(MIN_RESAMPLES, RESAMPLES)
        }
    };
    let mut rng = Rng::new(seed);
    let mut qualities = Vec::with_capacity(resamples);
    let mut drawn = vec![false; rows];
    for _ in 0..resamples {
        drawn.fill(false);
        let in_bag: Vec<usize> = (0..rows)
            .map(|_| {
                let row = rng.below(rows as u64) as usize;
                drawn[row] = true;
                row
            })
            .collect();
        let out_of_bag: Vec<usize> = (0..rows).filter(|&row| !drawn[row]).collect();
        if out_of_bag.is_empty() {
            continue;
        }
        let (bag_answers, bag_truth) = gather(answers, truth, width, &in_bag);
        let bag_slices: Vec<&[f32]> = bag_answers.iter().map(Vec::as_slice).collect();
        let counts = choose(&bag_slices, &bag_truth, kind)?;
        let (out_answers, out_truth) = gather(answers, truth, width, &out_of_bag);
        let out_slices: Vec<&[f32]> = out_answers.iter().map(Vec::as_slice).collect();
        qualities.push(quality_of(&out_slices, &counts, &out_truth)?);
    }
    summarize(qualities)
}

/// The mean and the 2.5th and 97.5th percentiles (nearest rank) of `qualities`; the mean is kept
/// within them (a few very low resamples can pull it below a 2.5th percentile they are under).
fn summarize(mut qualities: Vec<f64>) -> Option<Estimate> {
    if qualities.is_empty() {
        return None;
    }
    qualities.sort_by(f64::total_cmp);
    let n = qualities.len();
    let low = qualities[((n as f64 * 0.025).ceil() as usize).clamp(1, n) - 1];
    let high = qualities[((n as f64 * 0.975).ceil() as usize).clamp(1, n) - 1];
    let mean = qualities.iter().sum::<f64>() / n as f64;
    Some(Estimate {
        quality: mean.clamp(low, high),
        low,
        high,
        resamples: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two-class answers for `labels`: probability 0.9 on the class a run answers, which is the
    /// label except on the rows in `wrong`.
    fn answering(labels: &[i64], wrong: &[usize]) -> Vec<f32> {
        labels
            .iter()
            .enumerate()
            .flat_map(|(row, &label)| {
                let answer = if wrong.contains(&row) {
                    1 - label
                } else {
                    label
                };
                if answer == 0 { [0.9, 0.1] } else { [0.1, 0.9] }
            })
            .collect()
    }

    #[test]
    fn percentiles_are_nearest_rank_and_the_mean_stays_within_them() {
        let qualities: Vec<f64> = (0..200).map(|i| f64::from(i) / 199.0).collect();
        let estimate = summarize(qualities).unwrap();
        assert_eq!(estimate.resamples, 200);
        // Ranks 5 and 195 of 200.
        assert_eq!(estimate.low, 4.0 / 199.0);
        assert_eq!(estimate.high, 194.0 / 199.0);
        assert!((estimate.quality - 0.5).abs() < 1e-12);
        // 97% of the resamples at 1 and 3% at 0: the mean 0.97 is below the 2.5th percentile.
        let skewed: Vec<f64> = (0..100).map(|i| if i < 3 { 0.0 } else { 1.0 }).collect();
        let estimate = summarize(skewed).unwrap();
        assert_eq!((estimate.low, estimate.high), (0.0, 1.0));
        let lopsided: Vec<f64> = (0..100).map(|i| if i < 2 { 0.0 } else { 1.0 }).collect();
        let estimate = summarize(lopsided).unwrap();
        assert_eq!(
            (estimate.low, estimate.quality, estimate.high),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(summarize(Vec::new()), None);
    }

    #[test]
    fn one_run_right_everywhere_is_estimated_at_one() {
        let labels: Vec<i64> = (0..40).map(|row| row % 2).collect();
        let right = answering(&labels, &[]);
        let estimate =
            super::estimate(&[&right], &Truth::Classes(labels), 2, Kind::Single, 7).unwrap();
        assert_eq!(
            (estimate.low, estimate.quality, estimate.high),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(estimate.resamples, RESAMPLES);
    }

    #[test]
    fn the_best_of_many_equally_good_runs_is_estimated_below_its_validation_quality() {
        // Twenty runs, each wrong on a row with probability 0.15, independently: every run's
        // accuracy on new rows is 0.85, but the best of them on these 80 rows looks better by
        // luck. The replayed choice is scored on rows it did not see: below the winner's
        // validation quality, its interval around the true 0.85. (With errors this independent
        // the rows a resample's winner did not see hold more of its errors than its share, so
        // the estimate errs low: BBC-CV is conservative.)
        let labels: Vec<i64> = (0..80).map(|row| row % 2).collect();
        let mut rng = Rng::new(11);
        let runs: Vec<Vec<f32>> = (0..20)
            .map(|_| {
                let wrong: Vec<usize> = (0..80).filter(|_| rng.uniform() < 0.15).collect();
                answering(&labels, &wrong)
            })
            .collect();
        let slices: Vec<&[f32]> = runs.iter().map(Vec::as_slice).collect();
        let truth = Truth::Classes(labels);
        let winner = (0..runs.len())
            .filter_map(|run| {
                let mut counts = vec![0; runs.len()];
                counts[run] = 1;
                quality_of(&slices, &counts, &truth)
            })
            .fold(0.0, f64::max);
        assert!(
            winner > 0.88,
            "the luckiest run looks better than 0.85: {winner}"
        );
        let estimate = super::estimate(&slices, &truth, 2, Kind::Single, 1).unwrap();
        assert!(
            estimate.quality < winner - 0.05,
            "{estimate:?} against {winner}"
        );
        assert!(estimate.low < 0.85 && 0.85 < estimate.high, "{estimate:?}");
        assert!(estimate.low <= estimate.quality && estimate.quality <= estimate.high);
        // The same answers and seed give the same estimate; another seed a close one.
        assert_eq!(
            super::estimate(&slices, &truth, 2, Kind::Single, 1),
            Some(estimate)
        );
        let other = super::estimate(&slices, &truth, 2, Kind::Single, 2).unwrap();
        assert!((other.quality - estimate.quality).abs() < 0.02, "{other:?}");
    }

    #[test]
    fn an_ensemble_of_runs_wrong_on_different_rows_is_estimated_above_its_members() {
        // Three runs, each confidently right on two thirds of the rows and mildly wrong on the
        // rest, wrong on different rows: their average is right everywhere.
        let labels: Vec<i64> = (0..60).map(|row| row % 2).collect();
        let runs: Vec<Vec<f32>> = (0..3)
            .map(|run| {
                labels
                    .iter()
                    .enumerate()
                    .flat_map(|(row, &label)| {
                        let wrong = row % 3 == run;
                        let p = if wrong { 0.4 } else { 0.95 };
                        if label == 0 {
                            [p, 1.0 - p]
                        } else {
                            [1.0 - p, p]
                        }
                    })
                    .collect()
            })
            .collect();
        let slices: Vec<&[f32]> = runs.iter().map(Vec::as_slice).collect();
        let truth = Truth::Classes(labels);
        let single = super::estimate(&slices, &truth, 2, Kind::Single, 3).unwrap();
        let ensemble = super::estimate(&slices, &truth, 2, Kind::Ensemble, 3).unwrap();
        assert!(single.quality < 0.7, "{single:?}");
        assert!(ensemble.quality > 0.98, "{ensemble:?}");
    }

    #[test]
    fn regression_answers_are_estimated_as_clipped_r_squared() {
        let truth: Vec<f32> = (0..50).map(|row| row as f32).collect();
        let close: Vec<f32> = truth
            .iter()
            .map(|v| v + if (*v as i32) % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let far: Vec<f32> = truth.iter().map(|_| 25.0).collect();
        let estimate =
            super::estimate(&[&far, &close], &Truth::Values(truth), 1, Kind::Single, 5).unwrap();
        assert!(
            estimate.quality > 0.98 && estimate.quality < 1.0,
            "{estimate:?}"
        );
    }

    #[test]
    fn answers_that_do_not_fit_or_a_single_row_estimate_nothing() {
        let truth = Truth::Classes(vec![0, 1]);
        assert_eq!(super::estimate(&[], &truth, 2, Kind::Single, 1), None);
        assert_eq!(
            super::estimate(&[&[0.5, 0.5, 0.5]], &truth, 2, Kind::Single, 1),
            None
        );
        let one = Truth::Classes(vec![0]);
        assert_eq!(
            super::estimate(&[&[0.9, 0.1]], &one, 2, Kind::Single, 1),
            None
        );
    }
}
