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
//! **Cost**: the choice of the best single run is replayed on per-row scores (each candidate's
//! rows reduced once to right-or-wrong and cross-entropy, or squared error), `rows x runs` a
//! resample and no copy of the answers. Caruana's selection is replayed as such (the rows drawn
//! copied, [`super::select::ROUNDS`] rounds over every run) where [`MAX_WORK`] answer values allow
//! [`MIN_RESAMPLES`] of them; past that (a large app: up to 32 runs of 2^20 values) the served
//! ensemble's weights are held fixed and its averaged answers compete with the single runs on each
//! resample (on that many answers the weights hardly overfit). Resamples are [`RESAMPLES`], fewer
//! (not below [`MIN_RESAMPLES`]) past [`MAX_WORK`], so a recomputation after a run stays under a
//! second (0.66 s at the bound, release build) and its memory within the answers' own.

use easeml_trainer::synthetic::Rng;

use super::select::{Truth, quality_of, select};

/// The resamples of an estimate when the work allows.
pub const RESAMPLES: usize = 200;

/// The fewest resamples of an estimate (its percentiles are the 2nd and 49th of 50 then).
pub const MIN_RESAMPLES: usize = 50;

/// The most work the resamples of an estimate may add up (a resample's: rounds x runs x answer
/// values for a replayed selection, runs x rows for per-row scores), above which there are fewer
/// resamples (and past which at [`MIN_RESAMPLES`] an ensemble's selection is not replayed).
pub const MAX_WORK: usize = 150_000_000;

/// Which choice an estimate replays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind<'a> {
    /// The best single run on the rows drawn.
    Single,
    /// An ensemble, these its weights over the answers given (the served one's): Caruana's
    /// selection on the rows drawn, served when it beats the best single run there; past
    /// [`MAX_WORK`] these weights instead, held fixed, against the best single run.
    Ensemble(&'a [f64]),
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

/// One candidate's answers reduced to what a resample's score needs, per row: for classes
/// whether the row was answered right (1 or 0) and its cross-entropy; for values the row's squared
/// error (summed over its values) and 0.
struct RowScores {
    hit: Vec<f32>,
    loss: Vec<f32>,
}

/// The truth's per-row sums of values and of their squares (values only: the subset's R^2 needs
/// its own mean).
struct ValueSums {
    sum: Vec<f64>,
    squares: Vec<f64>,
    width: usize,
}

impl ValueSums {
    /// The sums of `truth`'s rows of `width` values; `None` for classes.
    fn of(truth: &Truth, width: usize) -> Option<ValueSums> {
        let Truth::Values(values) = truth else {
            return None;
        };
        let rows = |f: fn(f32) -> f64| -> Vec<f64> {
            values
                .chunks(width)
                .map(|row| row.iter().map(|&v| f(v)).sum())
                .collect()
        };
        Some(ValueSums {
            sum: rows(f64::from),
            squares: rows(|v| f64::from(v).powi(2)),
            width,
        })
    }
}

impl RowScores {
    /// `answer`'s rows against `truth`, scored as the selection scores them (the most likely
    /// class, the first on ties; the label's probability floored at 1e-12).
    fn of(answer: &[f32], truth: &Truth, width: usize) -> RowScores {
        let rows = answer.len() / width;
        let (mut hit, mut loss) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
        for row in 0..rows {
            let values = &answer[row * width..(row + 1) * width];
            match truth {
                Truth::Classes(labels) => {
                    let label = labels[row];
                    hit.push(f32::from(u8::from(super::argmax(values) as i64 == label)));
                    let p = usize::try_from(label)
                        .ok()
                        .and_then(|label| values.get(label))
                        .map_or(0.0, |&p| f64::from(p));
                    loss.push(-p.max(1e-12).ln() as f32);
                }
                Truth::Values(truth) => {
                    let error: f64 = values
                        .iter()
                        .zip(&truth[row * width..(row + 1) * width])
                        .map(|(&a, &t)| (f64::from(a) - f64::from(t)).powi(2))
                        .sum();
                    hit.push(error as f32);
                    loss.push(0.0);
                }
            }
        }
        RowScores { hit, loss }
    }

    /// The quality and cross-entropy on the rows weighted by `weight(row)` (a row drawn twice
    /// counts twice): accuracy, or R^2 clipped to `[0, 1]` over every value as the selection
    /// computes it.
    fn score(&self, sums: Option<&ValueSums>, weight: impl Fn(usize) -> f64) -> (f64, f64) {
        let (mut total, mut hit, mut loss) = (0.0, 0.0, 0.0);
        let (mut sum, mut squares) = (0.0, 0.0);
        for row in 0..self.hit.len() {
            let w = weight(row);
            if w == 0.0 {
                continue;
            }
            total += w;
            hit += w * f64::from(self.hit[row]);
            loss += w * f64::from(self.loss[row]);
            if let Some(sums) = sums {
                sum += w * sums.sum[row];
                squares += w * sums.squares[row];
            }
        }
        let Some(sums) = sums else {
            return (hit / total.max(1.0), loss / total.max(1.0));
        };
        let values = total * sums.width as f64;
        let spread = squares - sum * sum / values.max(1.0);
        let r_squared = if spread <= 1e-12 {
            if hit <= 1e-9 { 1.0 } else { 0.0 }
        } else {
            (1.0 - hit / spread).clamp(0.0, 1.0)
        };
        (r_squared, 0.0)
    }
}

/// The counts of the model the engine serves of an ensemble's candidates: the selected ensemble
/// when it beats the best single run, else that run.
fn choose_ensemble(answers: &[&[f32]], truth: &Truth) -> Option<Vec<usize>> {
    let selection = select(answers, truth)?;
    if selection.beats_single_run() {
        return Some(selection.counts);
    }
    let mut counts = vec![0; answers.len()];
    counts[selection.single] = 1;
    Some(counts)
}

/// A resample: how many times each row was drawn.
fn draw(rng: &mut Rng, rows: usize, bag: &mut [u32]) {
    bag.fill(0);
    for _ in 0..rows {
        bag[rng.below(rows as u64) as usize] += 1;
    }
}

/// The estimate of `kind`'s choice among `answers` (one slice per candidate run, `width` values
/// a row, every one of the truth's layout), from a generator seeded with `seed` (the same answers
/// and seed give the same estimate); `None` when the answers do not fit the truth or there are
/// fewer than two rows.
pub fn estimate(
    answers: &[&[f32]],
    truth: &Truth,
    width: usize,
    kind: Kind<'_>,
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
    let mut rng = Rng::new(seed);
    let selection_work = super::select::ROUNDS * answers.len() * len;
    match kind {
        Kind::Ensemble(_) if selection_work * MIN_RESAMPLES <= MAX_WORK => {
            let resamples = (MAX_WORK / selection_work.max(1)).clamp(MIN_RESAMPLES, RESAMPLES);
            replay_selection(answers, truth, width, resamples, &mut rng)
        }
        Kind::Ensemble(weights) => {
            let averaged = average(answers, weights)?;
            replay_choice(answers, Some(&averaged), truth, width, &mut rng)
        }
        Kind::Single => replay_choice(answers, None, truth, width, &mut rng),
    }
}

/// The answers averaged with `weights` (one per answer, summing to 1 or not: they are
/// normalized); `None` when they do not fit.
fn average(answers: &[&[f32]], weights: &[f64]) -> Option<Vec<f32>> {
    let total: f64 = weights.iter().sum();
    if weights.len() != answers.len() || total <= 0.0 {
        return None;
    }
    let mut sum = vec![0.0f64; answers.first()?.len()];
    for (answer, &weight) in answers.iter().zip(weights).filter(|(_, w)| **w > 0.0) {
        for (s, &a) in sum.iter_mut().zip(answer.iter()) {
            *s += weight / total * f64::from(a);
        }
    }
    Some(sum.into_iter().map(|v| v as f32).collect())
}

/// The choice of the best single run (or, with `ensemble`, of those fixed answers when they beat
/// it) replayed on resamples, from per-row scores: no copy of the answers, `rows x runs` a
/// resample.
fn replay_choice(
    answers: &[&[f32]],
    ensemble: Option<&[f32]>,
    truth: &Truth,
    width: usize,
    rng: &mut Rng,
) -> Option<Estimate> {
    let runs: Vec<RowScores> = answers
        .iter()
        .map(|answer| RowScores::of(answer, truth, width))
        .collect();
    let ensemble = ensemble.map(|answer| RowScores::of(answer, truth, width));
    let sums = ValueSums::of(truth, width);
    let rows = runs.first()?.hit.len();
    let work = (runs.len() + 1) * rows;
    let resamples = (MAX_WORK / work.max(1)).clamp(MIN_RESAMPLES, RESAMPLES);
    let better = |a: (f64, f64), b: (f64, f64)| a.0 > b.0 || (a.0 == b.0 && a.1 < b.1);
    let mut bag = vec![0u32; rows];
    let mut qualities = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        draw(rng, rows, &mut bag);
        if bag.iter().all(|&count| count > 0) {
            continue;
        }
        let in_bag = |row: usize| f64::from(bag[row]);
        let mut chosen: Option<(&RowScores, (f64, f64))> = None;
        for run in &runs {
            let score = run.score(sums.as_ref(), in_bag);
            if chosen.is_none_or(|(_, best)| better(score, best)) {
                chosen = Some((run, score));
            }
        }
        let (mut model, best) = chosen?;
        if let Some(ensemble) = &ensemble
            && better(ensemble.score(sums.as_ref(), in_bag), best)
        {
            model = ensemble;
        }
        let out_of_bag = |row: usize| f64::from(u8::from(bag[row] == 0));
        qualities.push(model.score(sums.as_ref(), out_of_bag).0);
    }
    summarize(qualities)
}

/// Caruana's selection replayed on resamples (the answers of the rows drawn copied for each; only
/// where [`MAX_WORK`] allows [`MIN_RESAMPLES`] of them).
fn replay_selection(
    answers: &[&[f32]],
    truth: &Truth,
    width: usize,
    resamples: usize,
    rng: &mut Rng,
) -> Option<Estimate> {
    let rows = answers.first()?.len() / width;
    let mut qualities = Vec::with_capacity(resamples);
    let mut bag = vec![0u32; rows];
    for _ in 0..resamples {
        draw(rng, rows, &mut bag);
        let in_bag: Vec<usize> = (0..rows)
            .flat_map(|row| std::iter::repeat_n(row, bag[row] as usize))
            .collect();
        let out_of_bag: Vec<usize> = (0..rows).filter(|&row| bag[row] == 0).collect();
        if out_of_bag.is_empty() {
            continue;
        }
        let (bag_answers, bag_truth) = gather(answers, truth, width, &in_bag);
        let bag_slices: Vec<&[f32]> = bag_answers.iter().map(Vec::as_slice).collect();
        let counts = choose_ensemble(&bag_slices, &bag_truth)?;
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
        let (runs, truth) = thirds_right(60);
        let slices: Vec<&[f32]> = runs.iter().map(Vec::as_slice).collect();
        let single = super::estimate(&slices, &truth, 2, Kind::Single, 3).unwrap();
        let thirds = [1.0 / 3.0; 3];
        let ensemble = super::estimate(&slices, &truth, 2, Kind::Ensemble(&thirds), 3).unwrap();
        assert!(single.quality < 0.7, "{single:?}");
        assert!(ensemble.quality > 0.98, "{ensemble:?}");
    }

    /// The three runs above over `rows` rows.
    fn thirds_right(rows: usize) -> (Vec<Vec<f32>>, Truth) {
        let labels: Vec<i64> = (0..rows as i64).map(|row| row % 2).collect();
        let runs = (0..3)
            .map(|run| {
                labels
                    .iter()
                    .enumerate()
                    .flat_map(|(row, &label)| {
                        let p = if row % 3 == run { 0.4 } else { 0.95 };
                        if label == 0 {
                            [p, 1.0 - p]
                        } else {
                            [1.0 - p, p]
                        }
                    })
                    .collect()
            })
            .collect();
        (runs, Truth::Classes(labels))
    }

    #[test]
    fn past_the_work_bound_the_served_weights_are_held_fixed_against_the_single_runs() {
        // 3 runs x 60,000 values: a replayed selection would pass MAX_WORK at MIN_RESAMPLES.
        let (runs, truth) = thirds_right(30_000);
        let slices: Vec<&[f32]> = runs.iter().map(Vec::as_slice).collect();
        const { assert!(super::super::select::ROUNDS * 3 * 60_000 * MIN_RESAMPLES > MAX_WORK) };
        let thirds = [1.0 / 3.0; 3];
        let ensemble = super::estimate(&slices, &truth, 2, Kind::Ensemble(&thirds), 4).unwrap();
        assert_eq!(
            (ensemble.low, ensemble.quality, ensemble.high),
            (1.0, 1.0, 1.0)
        );
        // Weights that favour one run make an average no better than it: the single run's 2/3.
        let lopsided = [0.9, 0.05, 0.05];
        let favoured = super::estimate(&slices, &truth, 2, Kind::Ensemble(&lopsided), 4).unwrap();
        assert!((favoured.quality - 2.0 / 3.0).abs() < 0.01, "{favoured:?}");
        // Weights that do not fit the answers estimate nothing.
        assert_eq!(
            super::estimate(&slices, &truth, 2, Kind::Ensemble(&[1.0]), 4),
            None
        );
    }

    #[test]
    fn per_row_scores_weigh_rows_as_copies_of_them_would() {
        // Classes and values: the score of rows weighted by a draw equals the selection's score
        // of the rows copied that many times.
        let mut rng = Rng::new(5);
        let labels: Vec<i64> = (0..30).map(|_| rng.below(3) as i64).collect();
        let probabilities: Vec<f32> = (0..90).map(|_| rng.uniform()).collect();
        let values: Vec<f32> = (0..60).map(|_| rng.uniform() * 4.0).collect();
        let truth_values: Vec<f32> = values.iter().map(|v| v + rng.uniform() - 0.5).collect();
        let mut bag = vec![0u32; 30];
        draw(&mut rng, 30, &mut bag);
        let rows: Vec<usize> = (0..30)
            .flat_map(|row| std::iter::repeat_n(row, bag[row] as usize))
            .collect();
        for (answer, truth, width) in [
            (&probabilities, Truth::Classes(labels.clone()), 3),
            (&values, Truth::Values(truth_values.clone()), 2),
        ] {
            let sums = ValueSums::of(&truth, width);
            let fast = RowScores::of(answer, &truth, width)
                .score(sums.as_ref(), |row| f64::from(bag[row]))
                .0;
            let (copied, copied_truth) = gather(&[answer], &truth, width, &rows);
            let slow = quality_of(&[&copied[0]], &[1], &copied_truth).unwrap();
            assert!((fast - slow).abs() < 1e-9, "{fast} against {slow}");
        }
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
