//! Which run is an app's best model: the one rule shared by the status report, inference and the
//! engine's summaries.
//!
//! The best run is the finished (`done`) run with the highest validation quality, the earliest on
//! ties, among the runs whose cost meets the app's `train_time` constraint (LANGUAGE.md: a model known
//! to violate a constraint is never served). Runs of every data version count: after the data
//! changes, the old best keeps serving until a better run on the new data finishes.

use crate::store::{RunRecord, RunState};

/// An app needs at least this many enabled examples before it is trained (so that the split by id
/// leaves examples on both sides): the engine's rule, which the status report and the client's
/// messages state.
pub const MIN_TRAINING_EXAMPLES: usize = 4;

/// True when a run's cost breaks the `train_time` limit (seconds).
pub fn over_train_time(run: &RunRecord, train_time_limit: Option<f64>) -> bool {
    matches!((run.cost_seconds, train_time_limit), (Some(cost), Some(limit)) if cost > limit)
}

/// The best run of `runs` (see the module documentation).
pub fn best_run(runs: &[RunRecord], train_time_limit: Option<f64>) -> Option<&RunRecord> {
    let mut best: Option<&RunRecord> = None;
    for run in runs {
        if run.state != RunState::Done || over_train_time(run, train_time_limit) {
            continue;
        }
        let quality = run.quality.unwrap_or(0.0);
        if best.is_none_or(|best| quality > best.quality.unwrap_or(0.0)) {
            best = Some(run);
        }
    }
    best
}
