//! What the served model is expected to score on new examples: per app and data version, the
//! engine's selection-aware estimate of the served model's quality (issue 48: the bootstrap bias
//! corrected cross-validation of Tsamardinos, Greasidou and Borboudakis, computed by the engine's
//! `ensemble::estimate` over the runs' stored validation answers) with its 95% interval. A
//! validation quality is the best of a dozen candidates measured on the same few answers, so it is
//! the luckiest as often as the best; this estimate replays the choice on resamples of the answers
//! and scores the chosen model on the answers left out. The store keeps one record per (app,
//! data version), replaced by every recomputation; the status report uses it when it describes
//! the model served (the same data version and the same kind, one run or an ensemble).

use crate::db::{DbResult, Row};
use crate::params;
use crate::store::{AppId, RunId, Store};
use crate::time::now_ms;
use crate::{Error, Result, db};

/// The expected quality of an app's served model on one data version.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimateRecord {
    /// The app.
    pub app: AppId,
    /// The data version the runs trained on.
    pub data_version: u64,
    /// Whether it estimates an ensemble's quality (the engine's choice replayed with the
    /// ensemble's selection) rather than one run's.
    pub ensemble: bool,
    /// The expected quality on new examples (the mean over the resamples).
    pub quality: f64,
    /// The 95% interval's lower end (the resamples' 2.5th percentile).
    pub low: f64,
    /// Its upper end (the 97.5th percentile).
    pub high: f64,
    /// How many resamples measured it.
    pub resamples: u64,
    /// The highest run id it looked at (a later run is not in it yet).
    pub runs_seen: RunId,
    /// When it was recorded, ms since the epoch (set by [`Store::put_estimate`]).
    pub created_ms: i64,
}

impl EstimateRecord {
    /// Why the record cannot be stored, in words, or `None`.
    fn problem(&self) -> Option<String> {
        for (what, value) in [
            ("quality", self.quality),
            ("low", self.low),
            ("high", self.high),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Some(format!("{what} {value} is outside [0, 1]"));
            }
        }
        if !(self.low <= self.quality && self.quality <= self.high) {
            return Some(format!(
                "the quality {} is outside its interval {}-{}",
                self.quality, self.low, self.high
            ));
        }
        if self.resamples == 0 {
            return Some("an estimate needs at least one resample".into());
        }
        None
    }
}

fn estimate_from_row(row: &Row) -> DbResult<EstimateRecord> {
    Ok(EstimateRecord {
        app: AppId(row.get(0)?),
        data_version: row.get::<i64>(1)?.max(0) as u64,
        ensemble: row.get::<i64>(2)? != 0,
        quality: row.get(3)?,
        low: row.get(4)?,
        high: row.get(5)?,
        resamples: row.get::<i64>(6)?.max(0) as u64,
        runs_seen: RunId(row.get(7)?),
        created_ms: row.get(8)?,
    })
}

const ESTIMATE_COLUMNS: &str =
    "app, data_version, ensemble, quality, low, high, resamples, runs_seen, created_ms";

impl Store {
    /// Records `estimate` as its app's estimate of its data version, replacing the one there was.
    /// Refused in words when a number is outside `[0, 1]` or the quality outside its interval.
    pub fn put_estimate(&mut self, estimate: &EstimateRecord) -> Result<()> {
        if let Some(problem) = estimate.problem() {
            return Err(Error::InvalidInput(format!(
                "estimate of app {} on data version {}: {problem}",
                estimate.app.0, estimate.data_version
            )));
        }
        let context = format!("recording the estimate of app {}", estimate.app.0);
        self.connection
            .execute(
                &format!(
                    "INSERT INTO estimates ({ESTIMATE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT (app, data_version) DO UPDATE SET ensemble = excluded.ensemble,
                       quality = excluded.quality, low = excluded.low, high = excluded.high,
                       resamples = excluded.resamples, runs_seen = excluded.runs_seen,
                       created_ms = excluded.created_ms"
                ),
                params![
                    estimate.app.0,
                    estimate.data_version,
                    i64::from(estimate.ensemble),
                    estimate.quality,
                    estimate.low,
                    estimate.high,
                    estimate.resamples,
                    estimate.runs_seen.0,
                    now_ms()
                ],
            )
            .map_err(db(context))?;
        Ok(())
    }

    /// Removes the app's estimate of `data_version`, if any; returns whether there was one.
    pub fn remove_estimate(&mut self, app: AppId, data_version: u64) -> Result<bool> {
        let removed = self
            .connection
            .execute(
                "DELETE FROM estimates WHERE app = ?1 AND data_version = ?2",
                params![app.0, data_version],
            )
            .map_err(db(format!("removing the estimate of app {}", app.0)))?;
        Ok(removed > 0)
    }

    /// Every estimate of the app, by data version.
    pub fn estimates(&self, app: AppId) -> Result<Vec<EstimateRecord>> {
        self.connection
            .query_map(
                &format!(
                    "SELECT {ESTIMATE_COLUMNS} FROM estimates WHERE app = ?1 ORDER BY data_version"
                ),
                [app.0],
                estimate_from_row,
            )
            .map_err(db(format!("listing the estimates of app {}", app.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(quality: f64, low: f64, high: f64) -> EstimateRecord {
        EstimateRecord {
            app: AppId(1),
            data_version: 1,
            ensemble: false,
            quality,
            low,
            high,
            resamples: 200,
            runs_seen: RunId(3),
            created_ms: 0,
        }
    }

    #[test]
    fn an_estimate_outside_its_interval_or_the_unit_range_is_named() {
        assert_eq!(estimate(0.9, 0.8, 0.95).problem(), None);
        let outside = estimate(0.7, 0.8, 0.95).problem().unwrap();
        assert!(outside.contains("outside its interval"), "{outside}");
        let above = estimate(0.9, 0.8, 1.5).problem().unwrap();
        assert!(above.contains("high 1.5 is outside [0, 1]"), "{above}");
        let mut none = estimate(0.9, 0.8, 0.95);
        none.resamples = 0;
        assert!(none.problem().unwrap().contains("resample"));
    }
}
