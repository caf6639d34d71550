//! Which run is an app's best model: the one rule shared by the status report, inference and the
//! engine's summaries, and the one rule for which constraint a run broke.
//!
//! The best run is chosen among the eligible runs of the newest data version that has one: the
//! finished (`done`) run with the highest validation quality, where a k-fold mean counts **less
//! its standard error** (`std / sqrt(k)` of its fold qualities, Hastie et al., ESL 7.10: a lower
//! bound that accounts for the spread); the earliest run on ties. On small data a dozen
//! candidates' CV means differ by less than their spread, and the highest mean is the luckiest as
//! often as the best (issue 48): a run whose folds agree beats one a little higher on average but
//! all over the place. Under the split every run is measured on the same rows, and the quality
//! counts as it is. (A first version served the cheapest run within one standard error of the top
//! mean; on the small series tasks it served 1-NN DTW over MiniRocket: `bench/results/quality`.)
//! A run whose folds the time limit cut (`5-fold stratified, 2 folds trained`) counts its spread
//! over the folds it trained; one cut to a single fold, which has no spread of its own, counts
//! less the widest standard error of the other runs of its version.
//!
//! **Ensembles** ([`served`]): when the engine recorded an ensemble of the best run's data version
//! that beats the best single run on its members' validation answers by more than two of the best
//! run's standard errors (k-fold, [`ENSEMBLE_MARGIN_SE`]: a gain inside the spread is noise, and
//! the weights were chosen on those answers) or, under the split, at all (a higher quality, or the
//! same quality and a lower cross-entropy: `EnsembleRecord::beats_single_run`), and every member is still an eligible finished run of that version (with the members'
//! summed latency within `infer_latency`), the ensemble answers instead. [`best_run`] stays the
//! run the ensemble is reported beside (its strongest single run). A run is eligible when it
//! breaks none of the app's constraints (LANGUAGE.md: a model known to violate a constraint is never
//! served): its cost must meet `train_time` and its measured inference latency must meet
//! `infer_latency`. A run whose latency was never measured (recorded before the store kept it) is not
//! known to break it, so it still counts.
//!
//! **The served model follows the data** (ease.ml's refine loop): a feed or a toggle makes a new data
//! version, and as soon as one eligible run on it finishes, the best of the runs on that version is
//! served, even when a run on older data scored higher (its quality was measured on other data, and
//! its model may depend on examples the user has since disabled). Until then the best run of the
//! newest older version keeps serving, so an app never goes without a model while it retrains.
//! Data versions only grow, so the newest version with an eligible run is the current one as soon as
//! any run on the current data has finished; no caller needs to pass the current version.

use std::fmt;

use easeml_stats::protocol::Protocol;

use crate::ensembles::EnsembleRecord;
use crate::store::{RunRecord, RunState};
use crate::time::format_seconds;

/// An app needs at least this many enabled examples before it is trained (so that the split by id
/// leaves examples on both sides): the engine's rule, which the status report and the client's
/// messages state.
pub const MIN_TRAINING_EXAMPLES: usize = 4;

/// An app's constraint limits in seconds (the schema's `constraint` lines; the store does not read
/// schemas, so callers pass the numbers).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConstraintLimits {
    /// `train_time <= ...`: the most a run may cost.
    pub train_time: Option<f64>,
    /// `infer_latency <= ...`: the most one example's batch-1 inference may take.
    pub infer_latency: Option<f64>,
}

/// A constraint a run broke, with what was measured and the limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokenConstraint {
    /// The metric, as `.eml` files name it: `train_time` or `infer_latency`.
    pub metric: &'static str,
    /// What the run measured, seconds.
    pub measured: f64,
    /// The limit, seconds.
    pub limit: f64,
}

impl fmt::Display for BrokenConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} > {}",
            self.metric,
            format_seconds(self.measured),
            format_seconds(self.limit)
        )
    }
}

/// The constraints `run` is known to break, in the order `train_time`, `infer_latency`.
pub fn broken_constraints(run: &RunRecord, limits: &ConstraintLimits) -> Vec<BrokenConstraint> {
    [
        ("train_time", run.cost_seconds, limits.train_time),
        (
            "infer_latency",
            run.infer_latency_seconds,
            limits.infer_latency,
        ),
    ]
    .into_iter()
    .filter_map(|(metric, measured, limit)| match (measured, limit) {
        (Some(measured), Some(limit)) if measured > limit => Some(BrokenConstraint {
            metric,
            measured,
            limit,
        }),
        _ => None,
    })
    .collect()
}

/// The best run of `runs` (see the module documentation): among the eligible runs of the newest
/// data version that has one, the highest quality, a k-fold mean less its standard error.
pub fn best_run<'a>(runs: &'a [RunRecord], limits: &ConstraintLimits) -> Option<&'a RunRecord> {
    let newest = runs
        .iter()
        .filter(|run| eligible(run, limits))
        .map(|run| run.data_version)
        .max()?;
    let widest = widest_standard_error(runs, limits, newest);
    let bound = |run: &RunRecord| quality_of(run) - spread(run, widest).unwrap_or(0.0);
    let mut best: Option<&RunRecord> = None;
    for run in of_version(runs, limits, newest) {
        if best.is_none_or(|best| bound(run) > bound(best)) {
            best = Some(run);
        }
    }
    best
}

/// Whether a run can be served: finished, and breaking none of the app's constraints.
fn eligible(run: &RunRecord, limits: &ConstraintLimits) -> bool {
    run.state == RunState::Done && broken_constraints(run, limits).is_empty()
}

/// The eligible runs of data version `version`: the runs the best one is chosen among.
fn of_version<'a>(
    runs: &'a [RunRecord],
    limits: &ConstraintLimits,
    version: u64,
) -> impl Iterator<Item = &'a RunRecord> {
    runs.iter()
        .filter(move |run| run.data_version == version && eligible(run, limits))
}

fn quality_of(run: &RunRecord) -> f64 {
    run.quality.unwrap_or(0.0)
}

/// The folds a k-fold run's mean is over, as its recorded protocol says
/// ([`Protocol::measured_folds`]: a repeated k-fold counts its folds once, a cut one the folds
/// trained), or `None` for another protocol.
fn folds_of(protocol: &str) -> Option<u32> {
    Protocol::parse(protocol)?.measured_folds()
}

/// The standard error of a k-fold run's mean quality, `std / sqrt(k)`; `None` for a run
/// measured otherwise (the split: every run is measured on the same rows, so their differences
/// are not fold noise), and for a run the time limit cut to one fold (no spread of its own: see
/// [`spread`]).
fn standard_error(run: &RunRecord) -> Option<f64> {
    let std = run.validation.quality_std.filter(|std| std.is_finite())?;
    let k = folds_of(run.validation.protocol.as_deref()?)?;
    Some(std / f64::from(k).sqrt())
}

/// The standard error a run's quality counts less: its own ([`standard_error`]), or, for a k-fold
/// run the time limit cut to one fold, `widest` ([`widest_standard_error`] of its version's
/// runs: a single fold has no spread to measure, and counting it as certain would let a lucky
/// fold of a slow network beat every candidate measured on all folds); `None` under the split.
fn spread(run: &RunRecord, widest: f64) -> Option<f64> {
    let one_fold = run
        .validation
        .protocol
        .as_deref()
        .and_then(folds_of)
        .is_some_and(|folds| folds == 1);
    standard_error(run).or(one_fold.then_some(widest))
}

/// The widest standard error among the eligible runs of data version `version`, 0 when none has
/// one.
fn widest_standard_error(runs: &[RunRecord], limits: &ConstraintLimits, version: u64) -> f64 {
    of_version(runs, limits, version)
        .filter_map(standard_error)
        .fold(0.0, f64::max)
}

/// Under k-fold, how many of the best run's standard errors an ensemble must gain before it is
/// served: 2, a 95% margin. Its weights were chosen on the very answers that score it, and on the
/// small series tasks a gain of one standard error (two examples of 50) did not hold on the test
/// set (`bench/results/quality/README.md`).
pub const ENSEMBLE_MARGIN_SE: f64 = 2.0;

/// What answers `infer`: one run's model, or an ensemble of runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Served<'a> {
    /// The best run ([`best_run`]).
    Run(&'a RunRecord),
    /// An ensemble of runs of the best run's data version.
    Ensemble {
        /// The ensemble.
        ensemble: &'a EnsembleRecord,
        /// The best run, which the report names beside the ensemble.
        best: &'a RunRecord,
    },
}

impl<'a> Served<'a> {
    /// The best run (for an ensemble: the run [`best_run`] picks, reported beside it).
    pub fn run(&self) -> &'a RunRecord {
        match *self {
            Served::Run(run) | Served::Ensemble { best: run, .. } => run,
        }
    }

    /// The ensemble, when one is served.
    pub fn ensemble(&self) -> Option<&'a EnsembleRecord> {
        match *self {
            Served::Run(_) => None,
            Served::Ensemble { ensemble, .. } => Some(ensemble),
        }
    }
}

/// What answers `infer` (see the module documentation): the ensemble of the best run's data
/// version when it is recorded, beats the best single run on the same validation answers and all
/// its members are eligible finished runs of that version; else the best run.
pub fn served<'a>(
    runs: &'a [RunRecord],
    ensembles: &'a [EnsembleRecord],
    limits: &ConstraintLimits,
) -> Option<Served<'a>> {
    let best = best_run(runs, limits)?;
    // Under k-fold, a gain within two of the best run's standard errors is noise.
    let widest = widest_standard_error(runs, limits, best.data_version);
    let margin = spread(best, widest).map(|se| ENSEMBLE_MARGIN_SE * se);
    let usable = |ensemble: &&EnsembleRecord| {
        if ensemble.data_version != best.data_version
            || ensemble.app != best.app
            || !ensemble.beats_single_run()
            || margin.is_some_and(|margin| ensemble.quality - ensemble.single_quality <= margin)
            || ensemble.members.len() < 2
        {
            return false;
        }
        let mut latency = 0.0;
        for member in &ensemble.members {
            let Some(run) = runs.iter().find(|run| run.id == member.run) else {
                return false;
            };
            if !eligible(run, limits)
                || run.data_version != ensemble.data_version
                || run.checkpoint.is_none()
            {
                return false;
            }
            latency += run.infer_latency_seconds.unwrap_or(0.0);
        }
        limits.infer_latency.is_none_or(|limit| latency <= limit)
    };
    Some(match ensembles.iter().find(usable) {
        Some(ensemble) => Served::Ensemble { ensemble, best },
        None => Served::Run(best),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AppId, RunId, RunValidation};

    fn run(id: i64, quality: f64, std: Option<f64>, cost: f64) -> RunRecord {
        RunRecord {
            id: RunId(id),
            number: id as u64,
            app: AppId(1),
            candidate: format!("c{id}"),
            state: RunState::Done,
            data_version: 1,
            quality: Some(quality),
            cost_seconds: Some(cost),
            checkpoint: None,
            queued_ms: 0,
            started_ms: None,
            finished_ms: None,
            error: None,
            validation: RunValidation {
                protocol: Some(
                    if std.is_some() {
                        "5-fold stratified"
                    } else {
                        "split 20%"
                    }
                    .into(),
                ),
                quality_std: std,
                ..RunValidation::default()
            },
            infer_latency_seconds: None,
            trials: None,
        }
    }

    /// A k-fold run the time limit cut to `folds` folds.
    fn cut_run(id: i64, quality: f64, folds: u32, std: Option<f64>) -> RunRecord {
        let mut cut = run(id, quality, std, 1.0);
        let noun = if folds == 1 { "fold" } else { "folds" };
        cut.validation.protocol = Some(format!("5-fold stratified, {folds} {noun} trained"));
        cut
    }

    #[test]
    fn a_run_cut_to_fewer_folds_counts_its_spread_over_the_folds_it_trained() {
        let limits = ConstraintLimits::default();
        // 0.94 +- 0.10 over 2 folds (SE 0.071, bound 0.869) against 0.90 +- 0.05 over 5 (SE
        // 0.022, bound 0.878).
        let runs = [
            run(1, 0.90, Some(0.05), 1.0),
            cut_run(2, 0.94, 2, Some(0.10)),
        ];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(1)));
        // Over 5 folds the same spread would have won (SE 0.045, bound 0.895).
        let runs = [run(1, 0.90, Some(0.05), 1.0), run(2, 0.94, Some(0.10), 1.0)];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(2)));
    }

    #[test]
    fn a_run_cut_to_one_fold_borrows_the_widest_spread_of_the_others() {
        let limits = ConstraintLimits::default();
        // Against 0.93 +- 0.1 over 5 folds (SE 0.045) and 0.92 +- 0.2 (SE 0.089), one fold at
        // 1.0 counts as 1.0 - 0.089 = 0.911, above 0.93 - 0.045 = 0.885, and is served; one fold
        // at 0.95 counts as 0.861 and is not.
        let runs = [
            run(1, 0.93, Some(0.1), 1.0),
            run(2, 0.92, Some(0.2), 1.0),
            cut_run(3, 1.0, 1, None),
        ];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(3)));
        let runs = [
            run(1, 0.93, Some(0.1), 1.0),
            run(2, 0.92, Some(0.2), 1.0),
            cut_run(3, 0.95, 1, None),
        ];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(1)));
        // Counted as certain, 0.95 would have won.
        assert!(0.95 > 0.93 - 0.1 / 5f64.sqrt());
        // Alone it is served (nothing to compare its fold with).
        let runs = [cut_run(3, 0.95, 1, None)];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(3)));
    }

    #[test]
    fn a_k_fold_mean_counts_less_its_standard_error() {
        // 0.90 +- 0.20 (SE 0.089) against 0.88 +- 0.02 (SE 0.009): the steady run is served.
        let runs = [
            run(1, 0.90, Some(0.20), 1.0),
            run(2, 0.88, Some(0.02), 56.0),
            run(3, 0.80, Some(0.01), 0.1),
        ];
        let limits = ConstraintLimits::default();
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(2)));
        // The case: 0.986 +- 0.032 against 0.971 +- 0.039: the higher mean stays.
        let runs = [
            run(1, 0.986, Some(0.032), 56.0),
            run(2, 0.971, Some(0.039), 13.0),
        ];
        assert_eq!(best_run(&runs, &limits).map(|r| r.id), Some(RunId(1)));
    }

    #[test]
    fn outside_one_standard_error_or_under_the_split_the_highest_quality_wins() {
        let limits = ConstraintLimits::default();
        let kfold = [
            run(1, 0.99, Some(0.01), 50.0),
            run(2, 0.95, Some(0.01), 1.0),
        ];
        assert_eq!(best_run(&kfold, &limits).map(|r| r.id), Some(RunId(1)));
        let split = [run(1, 0.99, None, 50.0), run(2, 0.985, None, 1.0)];
        assert_eq!(best_run(&split, &limits).map(|r| r.id), Some(RunId(1)));
    }
}
