//! An app's ensembles: per data version, the weighted set of its runs that the engine's greedy
//! ensemble selection chose over their stored validation answers (`runs.oof_sha256`), with the
//! ensemble's quality and the best single run's on the same answers. Whether an ensemble is served
//! is `best.rs`'s rule ([`crate::served`]); the store only keeps the record, one per (app, data
//! version), replaced by every recomputation.

use crate::db::{DbResult, Row};
use crate::params;
use crate::store::{AppId, RunId, Store};
use crate::time::now_ms;
use crate::{Error, Result, db};

/// One member of an ensemble: a run and its weight (the share of its answers in the average).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnsembleMember {
    /// The run.
    pub run: RunId,
    /// Its weight in (0, 1]; an ensemble's weights sum to 1.
    pub weight: f64,
}

/// An ensemble of an app's runs on one data version.
#[derive(Debug, Clone, PartialEq)]
pub struct EnsembleRecord {
    /// The app.
    pub app: AppId,
    /// The data version every member trained on.
    pub data_version: u64,
    /// The members, by run id, weights summing to 1.
    pub members: Vec<EnsembleMember>,
    /// The ensemble's quality (accuracy, or clipped R^2) on the members' validation answers.
    pub quality: f64,
    /// The best single run's quality on the same answers, measured the same way.
    pub single_quality: f64,
    /// For a classifier, the mean cross-entropy of the ensemble's averaged probabilities on the
    /// answers (what breaks a tie of quality); `None` for values.
    pub loss: Option<f64>,
    /// The best single run's mean cross-entropy on the same answers, likewise.
    pub single_loss: Option<f64>,
    /// How many validation answers measured both.
    pub validated_examples: u64,
    /// For a classifier: the ensemble's answers by (true, predicted) class, as JSON in the form
    /// runs keep (`easeml_object::Confusion`); `None` otherwise.
    pub confusion: Option<String>,
    /// The highest run id the selection looked at (a later run is not in it yet).
    pub runs_seen: RunId,
    /// When it was recorded, ms since the epoch (set by [`Store::put_ensemble`]).
    pub created_ms: i64,
}

/// The tolerance on the sum of an ensemble's weights.
const WEIGHT_SUM_TOLERANCE: f64 = 1e-6;

impl EnsembleRecord {
    /// Whether it beats the best single run on the same answers: a higher quality, or the same
    /// quality and a lower cross-entropy (classification). `best.rs`'s condition for serving it.
    pub fn beats_single_run(&self) -> bool {
        self.quality > self.single_quality
            || (self.quality == self.single_quality
                && matches!((self.loss, self.single_loss), (Some(loss), Some(single)) if loss < single))
    }

    /// Why the record cannot be stored, in words, or `None`.
    fn problem(&self) -> Option<String> {
        if self.members.is_empty() {
            return Some("an ensemble needs at least one member".into());
        }
        if let Some(member) = self
            .members
            .iter()
            .find(|member| !(member.weight.is_finite() && member.weight > 0.0))
        {
            return Some(format!(
                "member run {} has weight {}, not in (0, 1]",
                member.run.0, member.weight
            ));
        }
        let sum: f64 = self.members.iter().map(|member| member.weight).sum();
        if (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
            return Some(format!("the weights sum to {sum}, not 1"));
        }
        for (what, value) in [
            ("quality", self.quality),
            ("single quality", self.single_quality),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Some(format!("{what} {value} is outside [0, 1]"));
            }
        }
        for (what, value) in [("loss", self.loss), ("single loss", self.single_loss)] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Some(format!("{what} {value} is not a non-negative number"));
            }
        }
        None
    }
}

/// `run:weight` pairs separated by spaces (weights written with Rust's shortest round-trip form).
fn members_text(members: &[EnsembleMember]) -> String {
    members
        .iter()
        .map(|member| format!("{}:{}", member.run.0, member.weight))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The inverse of [`members_text`]; pairs that do not read are skipped (the store writes them).
fn parse_members(text: &str) -> Vec<EnsembleMember> {
    text.split_whitespace()
        .filter_map(|pair| {
            let (run, weight) = pair.split_once(':')?;
            Some(EnsembleMember {
                run: RunId(run.parse().ok()?),
                weight: weight.parse().ok()?,
            })
        })
        .collect()
}

fn ensemble_from_row(row: &Row) -> DbResult<EnsembleRecord> {
    Ok(EnsembleRecord {
        app: AppId(row.get(0)?),
        data_version: row.get::<i64>(1)?.max(0) as u64,
        members: parse_members(&row.get::<String>(2)?),
        quality: row.get(3)?,
        single_quality: row.get(4)?,
        validated_examples: row.get::<i64>(5)?.max(0) as u64,
        confusion: row.get(6)?,
        runs_seen: RunId(row.get(7)?),
        created_ms: row.get(8)?,
        loss: row.get(9)?,
        single_loss: row.get(10)?,
    })
}

const ENSEMBLE_COLUMNS: &str = "app, data_version, members, quality, single_quality, validated_examples, confusion, runs_seen, created_ms, loss, single_loss";

impl Store {
    /// Records `ensemble` as its app's ensemble of its data version, replacing the one there was.
    /// Refused in words when its weights do not sum to 1 or a quality is outside `[0, 1]`.
    pub fn put_ensemble(&mut self, ensemble: &EnsembleRecord) -> Result<()> {
        if let Some(problem) = ensemble.problem() {
            return Err(Error::InvalidInput(format!(
                "ensemble of app {} on data version {}: {problem}",
                ensemble.app.0, ensemble.data_version
            )));
        }
        let context = format!("recording the ensemble of app {}", ensemble.app.0);
        self.connection
            .execute(
                &format!(
                    "INSERT INTO ensembles ({ENSEMBLE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                     ON CONFLICT (app, data_version) DO UPDATE SET members = excluded.members,
                       quality = excluded.quality, single_quality = excluded.single_quality,
                       validated_examples = excluded.validated_examples,
                       confusion = excluded.confusion, runs_seen = excluded.runs_seen,
                       created_ms = excluded.created_ms, loss = excluded.loss,
                       single_loss = excluded.single_loss"
                ),
                params![
                    ensemble.app.0,
                    ensemble.data_version,
                    members_text(&ensemble.members),
                    ensemble.quality,
                    ensemble.single_quality,
                    ensemble.validated_examples,
                    ensemble.confusion,
                    ensemble.runs_seen.0,
                    now_ms(),
                    ensemble.loss,
                    ensemble.single_loss
                ],
            )
            .map_err(db(context))?;
        Ok(())
    }

    /// Removes the app's ensemble of `data_version`, if any (a recomputation found none better
    /// than the best single run); returns whether there was one.
    pub fn remove_ensemble(&mut self, app: AppId, data_version: u64) -> Result<bool> {
        let removed = self
            .connection
            .execute(
                "DELETE FROM ensembles WHERE app = ?1 AND data_version = ?2",
                params![app.0, data_version],
            )
            .map_err(db(format!("removing the ensemble of app {}", app.0)))?;
        Ok(removed > 0)
    }

    /// Every ensemble of the app, by data version.
    pub fn ensembles(&self, app: AppId) -> Result<Vec<EnsembleRecord>> {
        self.connection
            .query_map(
                &format!(
                    "SELECT {ENSEMBLE_COLUMNS} FROM ensembles WHERE app = ?1 ORDER BY data_version"
                ),
                [app.0],
                ensemble_from_row,
            )
            .map_err(db(format!("listing the ensembles of app {}", app.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_through_their_text() {
        let members = vec![
            EnsembleMember {
                run: RunId(3),
                weight: 0.1,
            },
            EnsembleMember {
                run: RunId(12),
                weight: 0.9,
            },
        ];
        assert_eq!(parse_members(&members_text(&members)), members);
    }
}
