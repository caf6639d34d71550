//! k-fold cross-validation of a network (`train_k_fold`, called by [`super::train`] below
//! `Budget::k_fold_below` examples): every learning rate trains one model per fold, scored at
//! the one epoch with the best mean over its folds (`RateResult::score_at_one_epoch`), the rate
//! with the best such mean is refit on every example for that many epochs, the time
//! limit cuts the folds it has no room for, a rate that can no longer reach the app's best run
//! stops (see `train_k_fold`), and a cheap chosen rate repeats its folds over other partitions
//! (`repeat_the_chosen_rate`).

use crate::batch::Confusion;
use crate::error::Result;
use crate::oof::OutOfFold;
use crate::race;

use super::trial::{EpochScore, EpochScores};
use super::{
    Refit, RunOutcome, Shared, TrainedRun, Validation, Weights, failed_outcome, run_trial,
    skip_rates, trial_seed,
};

/// k-fold cross-validation: every rate trains one model per fold, its folds scored at one epoch;
/// the rate with the best mean fold quality there is refit on every example (see the module
/// documentation).
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
        let mut result = RateResult::new(learning_rate, seed);
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
            let schedule = FoldSchedule {
                deadline,
                grid_end,
                trainings_per_rate: k,
                rates_left: (fold == 0).then_some(n_rates - rate_index),
                keeps_a_cut_fold: true,
            };
            let trained =
                result.train_fold(shared, (train_rows, validation_rows), fold, schedule, run)?;
            fold_seconds += trained.seconds;
            fold_epochs += trained.epochs;
            if let Some(epoch_seconds) = trained.takes_the_rest {
                window = (trial_started, grid_end);
                cut = Some(epoch_seconds);
            }
            // A rate with a failed fold has no mean: its other folds are not trained.
            if !trained.added {
                break;
            }
            if let Some(floor) = budget.race_floor
                && shared.task.is_classification()
                && fold + 1 < sets.len()
                && race::outrun(mean(&result.fold_bests), result.answers, floor)
            {
                result.raced = true;
                break;
            }
        }
        result.score_at_one_epoch(k);
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
    if let Some(best) = best.as_mut() {
        repeat_the_chosen_rate(shared, sets, best, run)?;
    }
    match best {
        Some(best) => serve_the_best_rate(shared, sets, best, run),
        None => {
            run.outcome = failed_outcome(&run.trials);
            Ok(())
        }
    }
}

/// **Repeats** (issue 48, item 1): the chosen rate's mean over one partition is the best of the
/// grid's means on it, and a cheap network's folds on a small table cost a fraction of a second,
/// so that mean can be made less lucky as a classic model's is: when the rate trained every fold
/// (not cut, not raced) and its folds' seconds times `Budget::k_fold_repeats` fit the repeats'
/// bound ([`super::Budget::repeats_bound`], checked by `classic::keeps_repeats`) with the refit's
/// time still left, the rate trains the folds of the other partitions too (`data::k_folds`'
/// repeats, as a classic model's), each partition's folds by a deadline within that bound. Its
/// folds are then scored again together at one epoch chosen over every fold
/// (`RateResult::score_at_one_epoch`): quality and spread over every fold, answers averaged per
/// example, confusion the first partition's, the refit's epochs that epoch; the run's protocol
/// `5-fold stratified x3`. A failed fold, or one the deadline cut, drops the repeats: the run is
/// then the unrepeated one. Only the chosen rate
/// repeats (the grid's other rates lost on the first partition); the race does not apply (the
/// rate is the run's best).
fn repeat_the_chosen_rate(
    shared: &Shared<'_>,
    sets: &[(Vec<usize>, Vec<usize>)],
    best: &mut RateResult,
    run: &mut TrainedRun,
) -> Result<()> {
    let budget = shared.budget;
    let repeats = budget.k_fold_repeats.max(1);
    let Validation::KFold {
        folds, stratified, ..
    } = run.validation
    else {
        return Ok(());
    };
    let k = sets.len();
    if repeats < 2 || best.raced || best.qualities.len() != k {
        return Ok(());
    }
    let now = shared.started.elapsed().as_secs_f64();
    let more = best.seconds * (repeats - 1) as f64;
    let refit = refit_estimate(best, k.max(2));
    if !crate::classic::keeps_repeats(best.seconds, 1, repeats, budget.repeats_bound())
        || now + more + refit > budget.max_seconds
    {
        return Ok(());
    }
    let repeated = Validation::KFold {
        folds,
        stratified,
        repeats,
    };
    let all_sets = repeated.sets(shared.examples);
    let extra = all_sets.get(k..).unwrap_or_default();
    // Each fold's share of the time the repeats may take: what the bound leaves them (at
    // least a quarter more than the first partition's folds took; an early-stopped fold's
    // epochs vary), never the refit's.
    let allowed = (1.25 * more).max(budget.repeats_bound() - best.seconds);
    let end = (now + allowed).min(budget.max_seconds - refit);
    let mut added = RateResult::new(best.learning_rate, best.seed);
    for (index, (train_rows, validation_rows)) in extra.iter().enumerate() {
        let schedule = FoldSchedule {
            deadline: now + (end - now) * (index + 1) as f64 / extra.len().max(1) as f64,
            grid_end: end,
            trainings_per_rate: extra.len(),
            rates_left: None,
            keeps_a_cut_fold: false,
        };
        let rows = (train_rows.as_slice(), validation_rows.as_slice());
        let trained = added.train_fold(shared, rows, k + index, schedule, run)?;
        // A failed fold, or one the deadline cut, leaves the run unrepeated.
        if !trained.added {
            return Ok(());
        }
    }
    best.absorb(added);
    best.score_at_one_epoch(k);
    run.validation = repeated;
    Ok(())
}

/// The refit's seconds, estimated from the chosen rate's folds: their seconds per epoch, scaled by
/// the `k / (k - 1)` larger data, times the refit's epochs ([`RateResult::refit_epochs`]).
fn refit_estimate(best: &RateResult, k: usize) -> f64 {
    let seconds_per_epoch = best.seconds / best.epochs.max(1) as f64 * k as f64 / (k - 1) as f64;
    seconds_per_epoch * best.refit_epochs() as f64
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
    /// Each fold's best epoch's validation quality, as the folds train: what the race reads
    /// (the optimistic side).
    fold_bests: Vec<f64>,
    /// Each fold's validation quality at the rate's one scored epoch, once scored
    /// ([`RateResult::score_at_one_epoch`]; empty before): the rate's mean and spread.
    qualities: Vec<f64>,
    /// Each fold's best epoch.
    best_epochs: Vec<usize>,
    /// Each fold's answers, epoch by epoch, and at its best epoch.
    folds: Vec<FoldScores>,
    /// The one epoch every fold is scored at, once scored (`None`: a fold kept no epochs, and
    /// each fold is scored at its best).
    scored_epoch: Option<usize>,
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

/// One fold of a rate: its trial's epoch scores ([`super::TrialContext::epoch_scores`]) and
/// its best epoch's answers (which stand in where an epoch kept none).
struct FoldScores {
    epochs: Vec<EpochScore>,
    best: EpochScore,
}

impl FoldScores {
    /// The fold's score at `epoch` (0-based), its last where it stopped before `epoch` (early
    /// stopping saw no progress after it). The fold kept at least one epoch.
    fn at(&self, epoch: usize) -> &EpochScore {
        &self.epochs[epoch.min(self.epochs.len().saturating_sub(1))]
    }
}

/// When and how one fold of a rate trains ([`RateResult::train_fold`]).
struct FoldSchedule {
    /// Seconds since the run started by which the fold stops.
    deadline: f64,
    /// Seconds by which the rates still to try must be done ([`super::TrialContext::grid_end`]).
    grid_end: f64,
    /// Fold trainings per rate in this schedule ([`super::TrialContext::trainings_per_rate`]).
    trainings_per_rate: usize,
    /// On a rate's first fold of the grid: the rates still to try, this one included (the
    /// trial's grid check after its first epoch).
    rates_left: Option<usize>,
    /// Whether a fold the deadline stopped before an epoch's last batch still counts (the
    /// grid's folds: yes; the repeats': no, the run is then the unrepeated one).
    keeps_a_cut_fold: bool,
}

/// What one fold's training left for its caller.
struct FoldTrained {
    seconds: f64,
    epochs: usize,
    /// Whether the fold counts (it trained, and a cut fold only where the schedule keeps it).
    added: bool,
    /// The trial's [`super::TrialContext::takes_the_rest`]: the seconds of its first epoch when
    /// it keeps the rest of the grid's time.
    takes_the_rest: Option<f64>,
}

impl RateResult {
    fn new(learning_rate: f64, seed: u64) -> RateResult {
        RateResult {
            learning_rate,
            seed,
            fold_bests: Vec::new(),
            qualities: Vec::new(),
            best_epochs: Vec::new(),
            folds: Vec::new(),
            scored_epoch: None,
            best_fold: None,
            confusion: Confusion::default(),
            oof: OutOfFold::default(),
            seconds: 0.0,
            epochs: 0,
            answers: 0,
            raced: false,
        }
    }

    /// Trains fold `fold` of this rate on `rows` (train, validation) by `schedule`, records its
    /// trial in `run` and adds the fold ([`RateResult::add_fold`]) when it counts: the one
    /// fold training of the grid and of the repeats.
    fn train_fold(
        &mut self,
        shared: &Shared<'_>,
        (train_rows, validation_rows): (&[usize], &[usize]),
        fold: usize,
        schedule: FoldSchedule,
        run: &mut TrainedRun,
    ) -> Result<FoldTrained> {
        let mut context = shared.context(train_rows, validation_rows, schedule.deadline);
        if let Some(rates_left) = schedule.rates_left {
            context.rates_left = rates_left;
        }
        context.grid_end = schedule.grid_end;
        context.trainings_per_rate = schedule.trainings_per_rate;
        context.epoch_scores = Some(EpochScores::default());
        let started = shared.started.elapsed().as_secs_f64();
        let (mut record, kept) =
            run_trial(&mut context, self.learning_rate, self.seed, &mut run.curve)?;
        record.fold = Some(fold);
        let seconds = shared.started.elapsed().as_secs_f64() - started;
        self.seconds += seconds;
        self.epochs += record.epochs;
        let counts = schedule.keeps_a_cut_fold || !context.cut_short;
        let added = match (record.best_quality, kept) {
            (Some(quality), Some(weights)) if counts => {
                let answers = validation_rows.len();
                self.add_fold(&record, quality, weights, answers, &mut context);
                true
            }
            _ => false,
        };
        let trained = FoldTrained {
            seconds,
            epochs: record.epochs,
            added,
            takes_the_rest: context.takes_the_rest,
        };
        run.trials.push(record);
        Ok(trained)
    }

    /// Adds a fold that trained: its best quality and epoch, its count of validation
    /// `answers`, its epochs' scores (taken from `context`), and its weights when they are the
    /// best fold's so far. Its quality counts once the rate is scored
    /// ([`RateResult::score_at_one_epoch`]).
    fn add_fold(
        &mut self,
        record: &super::LearningRateTrial,
        quality: f64,
        weights: Weights,
        answers: usize,
        context: &mut super::TrialContext<'_>,
    ) {
        self.fold_bests.push(quality);
        self.answers += answers;
        self.best_epochs
            .push(record.best_epoch.unwrap_or(record.epochs));
        self.folds.push(FoldScores {
            epochs: context
                .epoch_scores
                .take()
                .map(|kept| kept.scores)
                .unwrap_or_default(),
            best: EpochScore {
                quality,
                confusion: record.confusion.clone(),
                oof: record.oof.clone(),
            },
        });
        self.keep_best_fold(quality, weights);
    }

    /// Keeps `weights` as the best fold model when its `quality` beats the one kept.
    fn keep_best_fold(&mut self, quality: f64, weights: Weights) {
        if self
            .best_fold
            .as_ref()
            .is_none_or(|(best, _)| quality > *best)
        {
            self.best_fold = Some((quality, weights));
        }
    }

    /// Adds the folds of `other` (the same rate's repeats): they are scored again together.
    fn absorb(&mut self, other: RateResult) {
        self.fold_bests.extend(other.fold_bests);
        self.best_epochs.extend(other.best_epochs);
        self.folds.extend(other.folds);
        self.seconds += other.seconds;
        self.epochs += other.epochs;
        self.answers += other.answers;
        if let Some((quality, weights)) = other.best_fold {
            self.keep_best_fold(quality, weights);
        }
    }

    /// **One epoch for every fold** (issue 48): each fold's best epoch is the best of up to
    /// `max_epochs` noisy scores on a few dozen examples, so a mean of fold bests is lucky where
    /// a classic model's setting, chosen once for all its folds, is not (mlp_small on 120 iris
    /// flowers: 0.975 over fold bests, 0.944 at its best single epoch). So the rate is scored
    /// at the one epoch whose mean over its folds is highest (the earliest of equals), a
    /// fold that stopped before it counting its last epoch (early stopping saw no progress
    /// after it); each fold's quality, how its answers fell (the first `partition_folds`
    /// folds: one partition, every example once) and its answers (each example's mean over
    /// the partitions) are that epoch's, the refit trains that many epochs. Where a fold kept
    /// no epochs (none evaluated), each fold counts its best, as before.
    fn score_at_one_epoch(&mut self, partition_folds: usize) {
        let longest = self.folds.iter().map(|fold| fold.epochs.len()).max();
        let scored = match longest {
            Some(longest) if self.folds.iter().all(|fold| !fold.epochs.is_empty()) => {
                let mut chosen = (0, f64::NEG_INFINITY);
                for epoch in 0..longest {
                    let sum: f64 = self.folds.iter().map(|fold| fold.at(epoch).quality).sum();
                    let mean = sum / self.folds.len() as f64;
                    if mean > chosen.1 {
                        chosen = (epoch, mean);
                    }
                }
                Some(chosen.0)
            }
            _ => None,
        };
        self.scored_epoch = scored.map(|epoch| epoch + 1);
        let score = |fold: &FoldScores| -> (f64, Option<Confusion>, Option<OutOfFold>) {
            let Some(epoch) = scored else {
                return (
                    fold.best.quality,
                    fold.best.confusion.clone(),
                    fold.best.oof.clone(),
                );
            };
            let at = fold.at(epoch);
            (
                at.quality,
                at.confusion.clone().or_else(|| fold.best.confusion.clone()),
                at.oof.clone().or_else(|| fold.best.oof.clone()),
            )
        };
        self.qualities.clear();
        self.confusion = Confusion::default();
        self.oof = OutOfFold::default();
        for (index, fold) in self.folds.iter().enumerate() {
            let (quality, confusion, oof) = score(fold);
            self.qualities.push(quality);
            if let Some(confusion) = confusion
                && index < partition_folds
            {
                self.confusion.merge(&confusion);
            }
            if let Some(oof) = oof {
                self.oof.merge(&oof);
            }
        }
        if self.folds.len() > partition_folds {
            self.oof = std::mem::take(&mut self.oof).averaged_by_row();
        }
    }

    /// The refit's epochs: the scored epoch, or (no epochs kept) [`refit_epochs`] of the
    /// folds' best epochs.
    fn refit_epochs(&self) -> usize {
        self.scored_epoch
            .unwrap_or_else(|| refit_epochs(&self.best_epochs))
    }

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
        mean(&self.qualities)
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

/// The mean of `values` (0 for none).
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// The refit's epoch count where a rate's folds kept no epoch scores (so no one scored epoch):
/// the upper median of the fold models' best epochs, at least 1.
pub fn refit_epochs(best_epochs: &[usize]) -> usize {
    let mut sorted = best_epochs.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(1).max(1)
}

/// Trains the chosen rate on every example for [`RateResult::refit_epochs`] epochs, when the time left allows
/// (estimated from its folds' seconds per epoch, scaled by the `k / (k - 1)` larger data); returns
/// the record and, when the refit completed, its weights.
fn refit(shared: &Shared<'_>, best: &RateResult, k: usize) -> Result<(Refit, Option<Weights>)> {
    let budget = shared.budget;
    let planned = best.refit_epochs();
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
    let estimate = refit_estimate(best, k);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fold whose epochs scored `qualities`, each answering its one row `row` with the
    /// quality as the answer (so the answers show which epoch they came from).
    fn fold(row: usize, qualities: &[f64]) -> FoldScores {
        let score = |quality: f64| {
            let mut oof = OutOfFold::default();
            oof.push(row, &[quality as f32]);
            EpochScore {
                quality,
                confusion: None,
                oof: Some(oof),
            }
        };
        let best = qualities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        FoldScores {
            epochs: qualities.iter().map(|&quality| score(quality)).collect(),
            best: score(best),
        }
    }

    fn rate(folds: Vec<FoldScores>) -> RateResult {
        let mut rate = RateResult::new(0.01, 7);
        rate.folds = folds;
        rate
    }

    #[test]
    fn folds_are_scored_at_the_epoch_with_the_best_mean_a_stopped_fold_counting_its_last() {
        // Fold 0 peaks at epoch 1, fold 1 at epoch 3; fold 2 stopped after epoch 2 (its last,
        // 0.6, counts after it). Means: epoch 1 (0.9 + 0.5 + 0.7) / 3 = 0.7, epoch 2 0.7,
        // epoch 3 (0.7 + 1.0 + 0.6) / 3 = 0.767: the bests' mean would be 0.867.
        let mut rate = rate(vec![
            fold(0, &[0.9, 0.8, 0.7]),
            fold(1, &[0.5, 0.7, 1.0]),
            fold(2, &[0.7, 0.6]),
        ]);
        rate.score_at_one_epoch(3);
        assert_eq!(rate.scored_epoch, Some(3));
        assert_eq!(rate.refit_epochs(), 3);
        assert_eq!(rate.qualities, vec![0.7, 1.0, 0.6]);
        assert!((rate.mean() - 2.3 / 3.0).abs() < 1e-12);
        assert_eq!(rate.oof.rows, vec![0, 1, 2]);
        assert_eq!(rate.oof.values, vec![0.7, 1.0, 0.6]);
    }

    #[test]
    fn equal_means_score_the_earliest_epoch() {
        let mut rate = rate(vec![fold(0, &[0.5, 1.0, 0.5]), fold(1, &[1.0, 0.5, 1.0])]);
        rate.score_at_one_epoch(2);
        assert_eq!(rate.scored_epoch, Some(1));
        assert_eq!(rate.qualities, vec![0.5, 1.0]);
    }

    #[test]
    fn an_epoch_without_answers_takes_its_folds_best_answers_and_no_epochs_the_bests() {
        let mut with_gap = fold(0, &[0.4, 0.8]);
        with_gap.epochs[1].oof = None;
        let mut rate = rate(vec![with_gap, fold(1, &[0.6, 0.9])]);
        rate.score_at_one_epoch(2);
        assert_eq!(rate.scored_epoch, Some(2));
        // Fold 0's best (0.8) stands in for its missing answers at epoch 2.
        assert_eq!(rate.oof.values, vec![0.8, 0.9]);
        // No epochs kept at all (an older trial, or none evaluated): each fold's best, and the
        // refit the upper median of the best epochs.
        let mut bare = rate_of_bests();
        bare.score_at_one_epoch(2);
        assert_eq!(bare.scored_epoch, None);
        assert_eq!(bare.qualities, vec![0.9, 0.8]);
        assert_eq!(bare.refit_epochs(), refit_epochs(&[4, 9]));
    }

    fn rate_of_bests() -> RateResult {
        let mut folds = vec![fold(0, &[0.9]), fold(1, &[0.8])];
        for fold in &mut folds {
            fold.epochs.clear();
        }
        let mut rate = rate(folds);
        rate.best_epochs = vec![4, 9];
        rate
    }

    #[test]
    fn repeated_partitions_are_scored_together_and_their_answers_averaged() {
        // Two partitions of the same two rows: folds 0-1 and 2-3; the confusion would count
        // the first partition only, the answers are each row's mean over both.
        let mut first = rate(vec![fold(0, &[0.2, 0.6]), fold(1, &[0.4, 0.8])]);
        first.score_at_one_epoch(2);
        let second = rate(vec![fold(0, &[1.0, 0.2]), fold(1, &[1.0, 0.4])]);
        first.absorb(second);
        first.score_at_one_epoch(2);
        // Means over four folds: epoch 1 0.65, epoch 2 0.5.
        assert_eq!(first.scored_epoch, Some(1));
        assert_eq!(first.qualities, vec![0.2, 0.4, 1.0, 1.0]);
        assert_eq!(first.oof.rows, vec![0, 1]);
        assert_eq!(first.oof.values, vec![0.6, 0.7]);
    }
}
