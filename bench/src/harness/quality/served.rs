//! What the served model told its user, held against its test score: the validation quality,
//! expected quality and 95% interval `status` reports for the served model (the ensemble's, when
//! one answers), whether the test score fell inside that interval, counted over tasks and repeats (issue 48's target:
//! 90% or more), and a served ensemble's name in the table.

use easeml_runtime::EnsembleMemberReport;
use serde_json::{Value, json};

use super::Outcome;

/// A served ensemble as the table names it: `ensemble: resnet1d 0.54, fcn 0.12, ...`, the members
/// by weight, heaviest first (ties by candidate).
pub(super) fn ensemble_label(members: &[EnsembleMemberReport]) -> String {
    let mut members: Vec<&EnsembleMemberReport> = members.iter().collect();
    members.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then_with(|| a.candidate.cmp(&b.candidate))
    });
    let named: Vec<String> = members
        .iter()
        .map(|member| format!("{} {:.2}", member.candidate, member.weight))
        .collect();
    format!("ensemble: {}", named.join(", "))
}

/// Whether easeml's test score lies in the interval its status reported (`None` without both).
pub(super) fn within_interval(outcome: &Outcome) -> Option<bool> {
    let [low, high] = outcome.easeml_interval?;
    let score = outcome.easeml?;
    Some(low <= score && score <= high)
}

/// The table's cell of what the served model was expected to score: `0.986 [0.959, 1.000]` (the
/// engine's expected quality and its interval), `[0.961, 0.999]` (an interval without an
/// estimate: the validation quality's), or `-`.
pub(super) fn expected_cell(outcome: &Outcome) -> String {
    let interval = outcome
        .easeml_interval
        .map(|[low, high]| format!("[{low:.3}, {high:.3}]"));
    match (outcome.easeml_expected, interval) {
        (Some(expected), Some(interval)) => format!("{expected:.3} {interval}"),
        (None, Some(interval)) => interval,
        (Some(expected), None) => format!("{expected:.3}"),
        (None, None) => "-".to_owned(),
    }
}

/// How often the served model's test score fell within its reported interval, over every task and
/// repeat that has both (issue 48's honesty target: 90% or more).
#[derive(Debug, PartialEq)]
pub(super) struct IntervalCount {
    within: usize,
    with_interval: usize,
}

impl IntervalCount {
    pub(super) fn of(runs: &[Vec<Outcome>]) -> IntervalCount {
        let judged: Vec<bool> = runs.iter().flatten().filter_map(within_interval).collect();
        IntervalCount {
            within: judged.iter().filter(|&&within| within).count(),
            with_interval: judged.len(),
        }
    }

    pub(super) fn json(&self) -> Value {
        json!({ "within": self.within, "with_interval": self.with_interval })
    }

    pub(super) fn markdown(&self) -> String {
        if self.with_interval == 0 {
            return String::new();
        }
        format!(
            "\nTest score within the served model's reported 95% interval: {} of {} ({:.0}%)\n",
            self.within,
            self.with_interval,
            100.0 * self.within as f64 / self.with_interval as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_scores_are_judged_against_the_reported_interval() {
        let outcome = |easeml: Option<f64>, interval: Option<[f64; 2]>| Outcome {
            easeml,
            easeml_interval: interval,
            ..Outcome::default()
        };
        assert_eq!(
            within_interval(&outcome(Some(0.9), Some([0.85, 0.95]))),
            Some(true)
        );
        assert_eq!(
            within_interval(&outcome(Some(0.85), Some([0.85, 0.95]))),
            Some(true)
        );
        assert_eq!(
            within_interval(&outcome(Some(0.8), Some([0.85, 0.95]))),
            Some(false)
        );
        // A task without an interval (R^2 before the engine estimated it) or without a model is
        // not judged.
        assert_eq!(within_interval(&outcome(Some(0.8), None)), None);
        assert_eq!(within_interval(&outcome(None, Some([0.85, 0.95]))), None);
        // Counted over every task of every repeat that has both.
        let runs = vec![
            vec![
                outcome(Some(0.9), Some([0.85, 0.95])),
                outcome(Some(0.7), None),
            ],
            vec![
                outcome(Some(0.99), Some([0.85, 0.95])),
                outcome(None, Some([0.5, 0.6])),
            ],
        ];
        let count = IntervalCount::of(&runs);
        assert_eq!(
            count,
            IntervalCount {
                within: 1,
                with_interval: 2
            }
        );
        assert_eq!(count.json(), json!({"within": 1, "with_interval": 2}));
        assert_eq!(
            count.markdown(),
            "\nTest score within the served model's reported 95% interval: 1 of 2 (50%)\n"
        );
        assert_eq!(IntervalCount::of(&[]).markdown(), "");
    }

    #[test]
    fn the_expected_quality_reads_with_its_interval() {
        let outcome = |expected: Option<f64>, interval: Option<[f64; 2]>| Outcome {
            easeml_expected: expected,
            easeml_interval: interval,
            ..Outcome::default()
        };
        assert_eq!(
            expected_cell(&outcome(Some(0.98634), Some([0.95918, 1.0]))),
            "0.986 [0.959, 1.000]"
        );
        assert_eq!(
            expected_cell(&outcome(None, Some([0.9611, 0.9987]))),
            "[0.961, 0.999]"
        );
        assert_eq!(expected_cell(&outcome(Some(0.5), None)), "0.500");
        assert_eq!(expected_cell(&outcome(None, None)), "-");
    }

    #[test]
    fn a_served_ensemble_is_named_by_its_members_heaviest_first() {
        let member = |candidate: &str, weight: f64| EnsembleMemberReport {
            run: 1,
            number: 1,
            candidate: candidate.to_owned(),
            weight,
        };
        assert_eq!(
            ensemble_label(&[
                member("fcn", 0.125),
                member("resnet1d", 0.5),
                member("gru", 0.25),
                member("dtw_knn", 0.125)
            ]),
            "ensemble: resnet1d 0.50, gru 0.25, dtw_knn 0.12, fcn 0.12"
        );
    }
}
