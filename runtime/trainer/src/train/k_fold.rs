//! k-fold cross-validation of a network (`train_k_fold`, called by [`super::train`] below
//! `Budget::k_fold_below` examples): every learning rate trains one model per fold, the rate
//! with the best mean fold quality is refit on every example ([`refit_epochs`]), the time
//! limit cuts the folds it has no room for, and a rate that can no longer reach the app's best run
//! stops (see `train_k_fold`).

use crate::batch::Confusion;
use crate::error::Result;
use crate::oof::OutOfFold;
use crate::race;

use super::{
    Refit, RunOutcome, Shared, TrainedRun, Weights, failed_outcome, run_trial, skip_rates,
    trial_seed,
};

/// k-fold cross-validation: every rate trains one model per fold; the rate with the best mean fold
/// quality is refit on every example (see the module documentation).
///
/// Time: the folds of every rate share `max_seconds * R k / (R k + k / (k - 1))` (R rates, k folds;
/// the refit, on `k / (k - 1)` times a fold's data, is counted as that many fold trainings), each
/// rate an equal window and each fold an equal share of it, unused time passing on; the refit has
/// until `max_seconds`. When the first epoch of a rate's first fold shows that the rates left cannot
/// each give every fold [`min_epochs_per_rate`] epochs, that rate keeps the whole fold time and the
/// later ones are not tried (as under the split).
///
/// **The fold cut**: a fold trains at least one epoch whatever its deadline, so an expensive model
/// (an image network on the CPU) under a short limit would otherwise overrun it k times over (a
/// 5.6 s limit took 17 s on 41 images of 256x256x3). Before every fold but the run's first, when
/// one epoch (the run's mean so far) would end past the time limit, the folds stop: the rate in
/// progress keeps the folds it trained (their mean is its quality, `folds_trained` says how many,
/// and the store weighs the spread by that count), the later rates are not tried (recorded), and
/// there is no time for a refit, so the best fold model is served.
///
/// **The race** ([`crate::race`]): with a `Budget::race_floor` on a classification task, after
/// every fold of a rate but its last, when even the upper bound of its folds' mean so far is below
/// the floor, the rate's folds stop. The rate keeps the folds it trained (as under the fold cut,
/// and it loses to a rate that trained every fold); the later rates still run, each racing on its
/// own. When the rate chosen was stopped so, the run is `raced`, and its best fold model is served
/// without a refit: it is not the app's best, and the refit would only spend more time on it.
pub(super) fn train_k_fold(
    shared: &Shared<'_>,
    sets: &[(Vec<usize>, Vec<usize>)],
    run: &mut TrainedRun,
) -> Result<()> {
    let budget = shared.budget;
    let k = sets.len().max(2);
    let n_rates = budget.learning_rates.len().max(1);
    let fold_trainings = (n_rates * k) as f64;
    let refit_share = k as f64 / (k - 1) as f64;
    let grid_end = budget.max_seconds * fold_trainings / (fold_trainings + refit_share);
    let mut best: Option<RateResult> = None;
    // Seconds and epochs of every fold trained so far (the fold cut's estimate of one epoch).
    let (mut fold_seconds, mut fold_epochs) = (0.0, 0usize);
    let mut out_of_time = false;
    for (rate_index, &learning_rate) in budget.learning_rates.iter().enumerate() {
        let seed = trial_seed(budget, rate_index);
        let mut window = (
            grid_end * rate_index as f64 / n_rates as f64,
            grid_end * (rate_index + 1) as f64 / n_rates as f64,
        );
        let mut result = RateResult {
            learning_rate,
            seed,
            qualities: Vec::new(),
            best_epochs: Vec::new(),
            best_fold: None,
            confusion: Confusion::default(),
            oof: OutOfFold::default(),
            seconds: 0.0,
            epochs: 0,
            answers: 0,
            raced: false,
        };
        let mut cut = None;
        for (fold, (train_rows, validation_rows)) in sets.iter().enumerate() {
            let trial_started = shared.started.elapsed().as_secs_f64();
            if fold_epochs > 0
                && trial_started + fold_seconds / fold_epochs as f64 > budget.max_seconds
            {
                out_of_time = true;
                break;
            }
            let deadline = window.0 + (window.1 - window.0) * (fold + 1) as f64 / k as f64;
            let mut context = shared.context(train_rows, validation_rows, deadline);
            if fold == 0 {
                context.rates_left = n_rates - rate_index;
            }
            context.grid_end = grid_end;
            context.trainings_per_rate = k;
            let (mut record, kept) = run_trial(&mut context, learning_rate, seed, &mut run.curve)?;
            record.fold = Some(fold);
            let seconds = shared.started.elapsed().as_secs_f64() - trial_started;
            result.seconds += seconds;
            result.epochs += record.epochs;
            fold_seconds += seconds;
            fold_epochs += record.epochs;
            if let Some(epoch_seconds) = context.takes_the_rest {
                window = (trial_started, grid_end);
                cut = Some(epoch_seconds);
            }
            let succeeded = match (record.best_quality, kept) {
                (Some(quality), Some(weights)) => {
                    result.qualities.push(quality);
                    if let Some(confusion) = &record.confusion {
                        result.confusion.merge(confusion);
                    }
                    if let Some(oof) = &record.oof {
                        result.oof.merge(oof);
                    }
                    result
                        .best_epochs
                        .push(record.best_epoch.unwrap_or(record.epochs));
                    if result
                        .best_fold
                        .as_ref()
                        .is_none_or(|(best, _)| quality > *best)
                    {
                        result.best_fold = Some((quality, weights));
                    }
                    result.answers += validation_rows.len();
                    true
                }
                _ => false,
            };
            run.trials.push(record);
            // A rate with a failed fold has no mean: its other folds are not trained.
            if !succeeded {
                break;
            }
            if let Some(floor) = budget.race_floor
                && shared.task.is_classification()
                && fold + 1 < sets.len()
                && race::outrun(result.mean(), result.answers, floor)
            {
                result.raced = true;
                break;
            }
        }
        // Every fold trained, or the time limit cut the folds after some trained (a failed fold
        // leaves the rate without a mean: its loop stops before the time limit can cut it).
        let complete = result.qualities.len() == sets.len() || out_of_time || result.raced;
        let tried = !result.qualities.is_empty();
        if complete
            && tried
            && best
                .as_ref()
                .is_none_or(|best| result.beats(best, sets.len()))
        {
            best = Some(result);
        }
        if out_of_time {
            // The rate in progress is recorded as not tried too when none of its folds trained
            // (then an earlier rate trained a fold: `fold_epochs` counts it).
            let last_tried = if tried {
                rate_index
            } else {
                rate_index.saturating_sub(1)
            };
            let epoch_seconds = fold_seconds / fold_epochs.max(1) as f64;
            skip_rates(budget, last_tried, epoch_seconds, k, &mut run.trials);
            break;
        }
        if let Some(epoch_seconds) = cut {
            skip_rates(budget, rate_index, epoch_seconds, k, &mut run.trials);
            break;
        }
    }
    match best {
        Some(best) => serve_the_best_rate(shared, sets, best, run),
        None => {
            run.outcome = failed_outcome(&run.trials);
            Ok(())
        }
    }
}

/// The run's quality, spread and checkpoint from the chosen rate: its folds' mean and deviation,
/// the folds it trained when the time limit cut the others, and the refit (or the best fold
/// model).
fn serve_the_best_rate(
    shared: &Shared<'_>,
    sets: &[(Vec<usize>, Vec<usize>)],
    best: RateResult,
    run: &mut TrainedRun,
) -> Result<()> {
    let k = sets.len().max(2);
    let (quality, std) = (best.mean(), best.std());
    run.quality_std = (best.qualities.len() >= 2).then_some(std);
    run.raced = best.raced;
    let trained = best.qualities.len();
    if trained < sets.len() {
        run.folds_trained = Some(trained);
        run.n_validation = sets[..trained].iter().map(|(_, rows)| rows.len()).sum();
    }
    run.confusion = (!best.confusion.is_empty()).then(|| best.confusion.clone());
    run.oof = (best.oof.rows.len() == shared.examples.len()).then(|| best.oof.clone());
    let (refit, weights) = refit(shared, &best, k)?;
    let (learning_rate, seed) = (best.learning_rate, best.seed);
    let weights = match weights {
        Some(weights) => weights,
        None => best
            .best_fold
            .map(|(_, weights)| weights)
            .unwrap_or_default(),
    };
    run.refit = Some(refit);
    run.outcome = RunOutcome::Succeeded {
        checkpoint: shared.checkpoint(learning_rate, seed, &weights)?,
        quality,
    };
    Ok(())
}

/// The folds of one learning rate.
struct RateResult {
    learning_rate: f64,
    seed: u64,
    /// Each fold's best validation quality.
    qualities: Vec<f64>,
    /// Each fold's best epoch.
    best_epochs: Vec<usize>,
    /// The fold model with the best quality (served when the refit cannot be).
    best_fold: Option<(f64, Weights)>,
    /// How its folds' validation answers fell, summed (classification).
    confusion: Confusion,
    /// Its folds' validation answers, every example once.
    oof: OutOfFold,
    /// Seconds and epochs of its fold trainings, for the refit's time estimate.
    seconds: f64,
    epochs: usize,
    /// The validation answers of its folds so far.
    answers: usize,
    /// Whether its folds stopped below the race's floor ([`crate::race`]).
    raced: bool,
}

impl RateResult {
    /// Whether this rate is preferred to `other` (`folds` in the protocol): one that trained
    /// every fold beats one the time limit cut, whatever their means (a mean of fewer folds is
    /// the noisier one); else the higher mean.
    fn beats(&self, other: &RateResult, folds: usize) -> bool {
        let every_fold = |rate: &RateResult| rate.qualities.len() == folds;
        match (every_fold(self), every_fold(other)) {
            (true, false) => true,
            (false, true) => false,
            _ => self.mean() > other.mean(),
        }
    }

    fn mean(&self) -> f64 {
        self.qualities.iter().sum::<f64>() / self.qualities.len().max(1) as f64
    }

    /// The sample standard deviation (0 for one fold).
    fn std(&self) -> f64 {
        let n = self.qualities.len();
        if n < 2 {
            return 0.0;
        }
        let mean = self.mean();
        let squares: f64 = self.qualities.iter().map(|q| (q - mean).powi(2)).sum();
        (squares / (n - 1) as f64).sqrt()
    }
}

/// The refit rule's epoch count: the upper median of the fold models' best epochs, at least 1.
pub fn refit_epochs(best_epochs: &[usize]) -> usize {
    let mut sorted = best_epochs.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(1).max(1)
}

/// Trains the chosen rate on every example for [`refit_epochs`] epochs, when the time left allows
/// (estimated from its folds' seconds per epoch, scaled by the `k / (k - 1)` larger data); returns
/// the record and, when the refit completed, its weights.
fn refit(shared: &Shared<'_>, best: &RateResult, k: usize) -> Result<(Refit, Option<Weights>)> {
    let budget = shared.budget;
    let planned = refit_epochs(&best.best_epochs);
    let mut record = Refit {
        learning_rate: best.learning_rate,
        seed: best.seed,
        planned_epochs: planned,
        epochs: 0,
        fallback: None,
    };
    if best.raced {
        record.fallback = Some(format!(
            "no refit: its folds stopped after {} of {k}, below the app's best run; the best fold \
             model is served",
            best.qualities.len()
        ));
        return Ok((record, None));
    }
    let now = shared.started.elapsed().as_secs_f64();
    let time_left = budget.max_seconds - now;
    let seconds_per_epoch = best.seconds / best.epochs.max(1) as f64 * k as f64 / (k - 1) as f64;
    let estimate = seconds_per_epoch * planned as f64;
    if estimate > time_left {
        record.fallback = Some(format!(
            "no time for the refit: {planned} epochs on every example take about {estimate:.1} s, \
             {:.1} s were left; the best fold model is served",
            time_left.max(0.0)
        ));
        return Ok((record, None));
    }
    let all_rows: Vec<usize> = (0..shared.examples.len()).collect();
    let mut context = shared.context(&all_rows, &[], budget.max_seconds);
    context.refit_epochs = Some(planned);
    let mut curve = Vec::new();
    let (trial, weights) = run_trial(&mut context, best.learning_rate, best.seed, &mut curve)?;
    record.epochs = trial.epochs;
    if let Some(failure) = trial.failure {
        record.fallback = Some(format!(
            "the refit failed ({failure}); the best fold model is served"
        ));
        return Ok((record, None));
    }
    if context.cut_short || trial.epochs < planned {
        record.fallback = Some(format!(
            "the time limit stopped the refit in epoch {} of {planned}; the best fold model is \
             served",
            trial.epochs
        ));
        return Ok((record, None));
    }
    Ok((record, weights))
}
