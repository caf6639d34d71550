//! The served model's expected quality on new examples in the status report (`best.expected` of
//! `status --json`): the engine's estimate (`easeml_store::EstimateRecord`, computed by the
//! engine's `ensemble::estimate`: its choice of model replayed on resamples of the candidates'
//! validation answers and scored on the answers each resample left out), with its 95% interval.
//! A validation quality describes one run; this describes the choice, so it is lower where a dozen
//! candidates were measured on the same few answers (the winner's curse). Present only when the
//! recorded estimate describes the model served: the same data version and the same kind (one run,
//! or an ensemble).

use easeml_store::EstimateRecord;
use serde::{Deserialize, Serialize};

use super::Status;

/// How the expected quality was measured, as the report says it.
pub const EXPECTED_METHOD: &str = "bootstrap bias-corrected cross-validation";

/// The served model's expected quality (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedQuality {
    /// The expected quality on new examples, in `[0, 1]` (the report's metric).
    pub quality: f64,
    /// Its 95% interval.
    pub interval: [f64; 2],
    /// How many resamples of the validation answers measured it.
    pub resamples: u64,
    /// How: [`EXPECTED_METHOD`].
    pub method: String,
}

impl Status {
    /// Adds the expected quality of the served model from the app's recorded `estimates`, when
    /// one describes it (see the module documentation).
    pub fn add_estimate(&mut self, estimates: &[EstimateRecord]) {
        let Some(best) = &mut self.best else {
            return;
        };
        let Some(estimate) = estimates.iter().find(|estimate| {
            estimate.data_version == best.data_version
                && estimate.ensemble == best.ensemble.is_some()
        }) else {
            return;
        };
        best.expected = Some(ExpectedQuality {
            quality: estimate.quality,
            interval: [estimate.low, estimate.high],
            resamples: estimate.resamples,
            method: EXPECTED_METHOD.to_owned(),
        });
    }
}

impl ExpectedQuality {
    /// `0.962, 95% interval 0.929-0.986 (bootstrap bias-corrected cross-validation, 200 resamples of
    /// the validation answers)`.
    pub fn text(&self) -> String {
        let [low, high] = self.interval;
        format!(
            "{:.3}, 95% interval {low:.3}-{high:.3} ({}, {} resamples of the validation answers)",
            self.quality, self.method, self.resamples
        )
    }
}

#[cfg(test)]
mod tests {
    use easeml_store::{AppId, ConstraintLimits, RunId, RunRecord, RunState};

    use super::*;
    use crate::status::QualityMetric;
    use crate::status::tests::record;

    fn estimate(data_version: u64, ensemble: bool) -> EstimateRecord {
        EstimateRecord {
            app: AppId(1),
            data_version,
            ensemble,
            quality: 0.91,
            low: 0.84,
            high: 0.97,
            resamples: 200,
            runs_seen: RunId(2),
            created_ms: 1,
        }
    }

    fn status(runs: &[RunRecord]) -> Status {
        Status::from_runs(
            "app".to_owned(),
            String::new(),
            2,
            (80, 80),
            runs,
            &ConstraintLimits::default(),
            (QualityMetric::Accuracy, &[]),
        )
    }

    #[test]
    fn the_estimate_is_reported_only_for_the_model_served() {
        let runs = [
            record(1, 1, 0.95, RunState::Done),
            record(2, 2, 0.95, RunState::Done),
        ];
        // Of the served version and kind (one run): reported, in the text too.
        let mut report = status(&runs);
        report.add_estimate(&[estimate(1, false), estimate(2, false)]);
        let expected = report.best.as_ref().unwrap().expected.clone().unwrap();
        assert_eq!(expected.quality, 0.91);
        assert_eq!(expected.interval, [0.84, 0.97]);
        assert_eq!(expected.method, EXPECTED_METHOD);
        assert!(report.to_string().contains(
            "expected on new examples: 0.910, 95% interval 0.840-0.970 (bootstrap bias-corrected cross-validation, 200 resamples of the validation answers)"
        ), "{report}");
        // Of an older data version, or of an ensemble while one run serves: not reported.
        for other in [estimate(1, false), estimate(2, true)] {
            let mut report = status(&runs);
            report.add_estimate(&[other]);
            assert_eq!(report.best.as_ref().unwrap().expected, None);
            assert!(!report.to_string().contains("expected on new examples"));
        }
        // Nothing served: nothing to add to.
        let mut empty = status(&[]);
        empty.add_estimate(&[estimate(2, false)]);
        assert!(empty.best.is_none());
    }
}
