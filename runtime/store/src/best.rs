//! Which run is an app's best model: the one rule shared by the status report, inference and the
//! engine's summaries, and the one rule for which constraint a run broke.
//!
//! The best run is the finished (`done`) run with the highest validation quality, the earliest on
//! ties, among the eligible runs of the newest data version that has one. A run is eligible when it
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

/// The best run of `runs` (see the module documentation): the best eligible run of the newest data
/// version that has one.
pub fn best_run<'a>(runs: &'a [RunRecord], limits: &ConstraintLimits) -> Option<&'a RunRecord> {
    let mut best: Option<&RunRecord> = None;
    for run in runs {
        if run.state != RunState::Done || !broken_constraints(run, limits).is_empty() {
            continue;
        }
        let better = best.is_none_or(|best| {
            (run.data_version, run.quality.unwrap_or(0.0))
                > (best.data_version, best.quality.unwrap_or(0.0))
        });
        if better {
            best = Some(run);
        }
    }
    best
}
