//! Every model family's own test score, held against the served model's (issue 48's third target:
//! the served model, an ensemble or the choice rule's single run, no more than
//! [`FAMILY_MARGIN`] below the best single family's test score on any task).
//!
//! A family is a candidate up to its first `+` (the scheduler's [`family`]: `small_cnn` and
//! `small_cnn+norm_k1` are one). Each family's model is the run the store's choice rule
//! ([`best_run`]) would serve were that family the app's only one, loaded by itself
//! ([`ServedModel::of_run`]) and asked test.txt: what a user who had picked that family in advance
//! would have got. The best of those scores is an oracle's pick (chosen on the test set), so the
//! served model may fall below it by luck of the test set; the margin says by how much it may.

use std::collections::BTreeMap;

use easeml_runtime::engine::{AppModel, ServedModel, best_run};
use easeml_runtime::store::{RunRecord, Store};
use easeml_scheduler::family;
use serde_json::{Value, json};

use super::{Outcome, Task};

/// How far below the best single family's test score the served model may fall (the 0.03).
pub(super) const FAMILY_MARGIN: f64 = 0.03;

/// One family's model and its test score.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FamilyScore {
    /// The family (a candidate up to its first `+`).
    pub family: String,
    /// The candidate of the run chosen within the family.
    pub candidate: String,
    /// That run's number within its app.
    pub run: u64,
    /// Its test score (accuracy, or R^2), `None` when it could not answer (a warning says why).
    pub score: Option<f64>,
}

/// Every family's test score on `task` (see the module documentation), families by name.
pub(super) fn family_scores(
    store: &Store,
    task: &Task,
    device: tch::Device,
) -> anyhow::Result<Vec<FamilyScore>> {
    let Some(app) = store.app_by_name(&task.app)? else {
        return Ok(Vec::new());
    };
    let limits = AppModel::from_manifest(&app.name, &app.manifest)?.constraint_limits();
    let mut by_family: BTreeMap<&str, Vec<RunRecord>> = BTreeMap::new();
    let runs = store.runs(app.id)?;
    for run in &runs {
        by_family
            .entry(family(&run.candidate))
            .or_default()
            .push(run.clone());
    }
    let inputs: Vec<_> = task
        .test
        .iter()
        .map(|example| example.input.clone())
        .collect();
    let mut scores = Vec::new();
    for (name, runs) in &by_family {
        let Some(chosen) = best_run(runs, &limits) else {
            continue;
        };
        let answered = ServedModel::of_run(store, app.id, chosen.id, device)
            .and_then(|model| model.predict(&inputs));
        let score = match answered {
            Ok(answers) => task.score_answers(&answers),
            Err(error) => {
                eprintln!(
                    "warning: task `{}`: family {name} (run {}) cannot answer test.txt: {}",
                    task.files.dir.display(),
                    chosen.number,
                    easeml_runtime::error_chain(&error)
                );
                None
            }
        };
        scores.push(FamilyScore {
            family: (*name).to_owned(),
            candidate: chosen.candidate.clone(),
            run: chosen.number,
            score,
        });
    }
    Ok(scores)
}

/// The family with the best test score (the first by name among equals), if any scored.
pub(super) fn best_family(families: &[FamilyScore]) -> Option<&FamilyScore> {
    families
        .iter()
        .filter(|family| family.score.is_some())
        .fold(None, |best: Option<&FamilyScore>, family| match best {
            Some(best) if best.score >= family.score => Some(best),
            _ => Some(family),
        })
}

/// How far the served model's test score lies below the best family's (negative: above it).
pub(super) fn below_best_family(outcome: &Outcome) -> Option<f64> {
    Some(best_family(&outcome.families)?.score? - outcome.easeml?)
}

/// A task's families in summary.json: `{family: {candidate, run, score}}`.
pub(super) fn families_json(families: &[FamilyScore]) -> Value {
    let entries: serde_json::Map<String, Value> = families
        .iter()
        .map(|family| {
            (
                family.family.clone(),
                json!({ "candidate": family.candidate, "run": family.run, "score": family.score }),
            )
        })
        .collect();
    Value::Object(entries)
}

/// The table's cell of the best family: `logistic 1.000`, or `-`.
pub(super) fn best_family_cell(outcome: &Outcome) -> String {
    match best_family(&outcome.families) {
        Some(FamilyScore {
            family,
            score: Some(score),
            ..
        }) => format!("{family} {score:.3}"),
        _ => "-".to_owned(),
    }
}

/// How often the served model's test score was within [`FAMILY_MARGIN`] of the best family's, over
/// every task and repeat with both, and the widest gap.
#[derive(Debug, PartialEq)]
pub(super) struct FamilyCount {
    within: usize,
    judged: usize,
    /// The widest gap: the task, the family, by how much the served model fell below it.
    worst: Option<(String, String, f64)>,
}

impl FamilyCount {
    /// Counted over `runs` (each repeat's outcomes, in the order of `apps`, the tasks' app names).
    pub(super) fn of(apps: &[&str], runs: &[Vec<Outcome>]) -> FamilyCount {
        let mut count = FamilyCount {
            within: 0,
            judged: 0,
            worst: None,
        };
        for outcomes in runs {
            for (app, outcome) in apps.iter().zip(outcomes) {
                let (Some(gap), Some(best)) =
                    (below_best_family(outcome), best_family(&outcome.families))
                else {
                    continue;
                };
                count.judged += 1;
                if gap <= FAMILY_MARGIN + 1e-12 {
                    count.within += 1;
                }
                if count
                    .worst
                    .as_ref()
                    .is_none_or(|(_, _, worst)| gap > *worst)
                {
                    count.worst = Some(((*app).to_owned(), best.family.clone(), gap));
                }
            }
        }
        count
    }

    pub(super) fn json(&self) -> Value {
        json!({
            "margin": FAMILY_MARGIN,
            "within": self.within,
            "judged": self.judged,
            "worst": self.worst.as_ref().map(|(app, family, gap)| {
                json!({ "task": app, "family": family, "below": gap })
            }),
        })
    }

    pub(super) fn markdown(&self) -> String {
        let Some((app, family, gap)) = &self.worst else {
            return String::new();
        };
        let worst = if *gap > 0.0 {
            format!("widest gap: {app}, {gap:.3} below {family}")
        } else {
            "never below the best family".to_owned()
        };
        format!(
            "\nServed model within {FAMILY_MARGIN} of the best single family's test score: {} of {} \
             ({worst})\n",
            self.within, self.judged
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(name: &str, score: Option<f64>) -> FamilyScore {
        FamilyScore {
            family: name.to_owned(),
            candidate: format!("{name}+v2"),
            run: 3,
            score,
        }
    }

    #[test]
    fn the_best_family_is_the_highest_score_first_by_name_among_equals() {
        let families = vec![
            family("gbdt", Some(0.9)),
            family("knn", None),
            family("logistic", Some(0.95)),
            family("mlp", Some(0.95)),
        ];
        assert_eq!(best_family(&families).unwrap().family, "logistic");
        assert_eq!(best_family(&[family("knn", None)]), None);
        assert_eq!(best_family(&[]), None);
        let outcome = Outcome {
            easeml: Some(0.9),
            families: families.clone(),
            ..Outcome::default()
        };
        assert!((below_best_family(&outcome).unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(best_family_cell(&outcome), "logistic 0.950");
        assert_eq!(best_family_cell(&Outcome::default()), "-");
        // Counted over tasks and repeats: within the margin, the widest gap named.
        let runs = vec![
            vec![
                outcome,
                Outcome {
                    easeml: Some(0.97),
                    families: vec![family("knn", Some(0.99))],
                    ..Outcome::default()
                },
            ],
            vec![Outcome::default(), Outcome::default()],
        ];
        let count = FamilyCount::of(&["wine", "iris"], &runs);
        assert_eq!(count.within, 1);
        assert_eq!(count.judged, 2);
        assert_eq!(
            count.markdown(),
            "\nServed model within 0.03 of the best single family's test score: 1 of 2 (widest \
             gap: wine, 0.050 below logistic)\n"
        );
        assert_eq!(count.json()["worst"]["family"], "logistic");
        let above = FamilyCount::of(
            &["iris"],
            &[vec![Outcome {
                easeml: Some(1.0),
                families: vec![family("knn", Some(0.99))],
                ..Outcome::default()
            }]],
        );
        assert!(
            above
                .markdown()
                .ends_with("1 of 1 (never below the best family)\n")
        );
        assert_eq!(FamilyCount::of(&[], &[]).markdown(), "");
        assert_eq!(
            families_json(&families[..2]),
            json!({
                "gbdt": {"candidate": "gbdt+v2", "run": 3, "score": 0.9},
                "knn": {"candidate": "knn+v2", "run": 3, "score": null},
            })
        );
    }
}
