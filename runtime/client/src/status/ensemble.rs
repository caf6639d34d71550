//! The served ensemble in the status report (`best.ensemble` of `status --json`): its members with
//! their candidates and weights, its quality on the members' validation answers beside the best
//! single run's on the same answers, and for accuracy its Wilson interval. Present only when the
//! store's rule (`easeml_store::served`) serves an ensemble.

use easeml_store::{ConstraintLimits, EnsembleRecord, RunRecord};
use serde::{Deserialize, Serialize};

use super::{QualityMetric, Status};

/// One member of the served ensemble.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleMemberReport {
    /// Its run's id.
    pub run: i64,
    /// That run's number within the app, as the report shows it (0 from an older server).
    #[serde(default)]
    pub number: u64,
    /// The run's candidate.
    pub candidate: String,
    /// Its weight in the average (the weights sum to 1).
    pub weight: f64,
}

/// The served ensemble (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleReport {
    /// Its members, by run id.
    pub members: Vec<EnsembleMemberReport>,
    /// Its quality on the members' validation answers (out-of-fold under k-fold).
    pub quality: f64,
    /// The best single run's quality on the same answers, measured the same way.
    pub single_quality: f64,
    /// How many validation answers measured both.
    pub validated_examples: u64,
    /// For accuracy, the 95% Wilson interval of `quality` on `validated_examples`. The weights
    /// were selected on the same answers, so the accuracy on new examples tends to fall in its
    /// lower part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
}

impl EnsembleReport {
    fn of(ensemble: &EnsembleRecord, runs: &[RunRecord], metric: QualityMetric) -> EnsembleReport {
        let members = ensemble
            .members
            .iter()
            .map(|member| {
                let run = runs.iter().find(|run| run.id == member.run);
                EnsembleMemberReport {
                    run: member.run.0,
                    number: run.map_or(0, |run| run.number),
                    candidate: run.map(|run| run.candidate.clone()).unwrap_or_default(),
                    weight: member.weight,
                }
            })
            .collect();
        let examples = ensemble.validated_examples as f64;
        let interval = match metric {
            QualityMetric::Accuracy if examples > 0.0 => easeml_stats::wilson_interval(
                ensemble.quality * examples,
                examples,
                easeml_stats::Z_95,
            )
            .map(|(low, high)| [low, high]),
            _ => None,
        };
        EnsembleReport {
            members,
            quality: ensemble.quality,
            single_quality: ensemble.single_quality,
            validated_examples: ensemble.validated_examples,
            interval,
        }
    }

    /// `run 3 kernel_ridge 0.40, run 5 gbdt 0.60`.
    pub fn members_text(&self) -> String {
        self.members
            .iter()
            .map(|member| {
                let number = if member.number > 0 {
                    member.number
                } else {
                    member.run.max(0) as u64
                };
                format!("run {number} {} {:.2}", member.candidate, member.weight)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Status {
    /// Adds the served ensemble, when the store's rule serves one over `runs` (the runs the
    /// report was built from) and the app's `ensembles`, to `best` and the summary.
    pub fn add_ensemble(
        &mut self,
        runs: &[RunRecord],
        ensembles: &[EnsembleRecord],
        limits: &ConstraintLimits,
    ) {
        let Some(served) = easeml_store::served(runs, ensembles, limits) else {
            return;
        };
        let Some(ensemble) = served.ensemble() else {
            return;
        };
        let Some(best) = &mut self.best else {
            return;
        };
        let metric = if best.metric == QualityMetric::Accuracy.name() {
            QualityMetric::Accuracy
        } else {
            QualityMetric::RSquared
        };
        let report = EnsembleReport::of(ensemble, runs, metric);
        self.summary = self.summary.replacen(
            &format!("serving {} (run {}", best.candidate, best.number),
            &format!(
                "serving an ensemble of {} runs ({}; {} {:.3}, best single run {:.3}), best run {} (run {}",
                report.members.len(),
                report.members_text(),
                best.metric,
                report.quality,
                report.single_quality,
                best.candidate,
                best.number
            ),
            1,
        );
        best.ensemble = Some(report);
    }
}
