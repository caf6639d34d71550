//! k-nearest neighbours (Cover and Hart 1967) on standardized or raw features: a fit keeps its
//! rows, each feature shifted by its mean and divided by its standard deviation over those rows (a
//! constant feature by 1; values that are not finite count as the mean), or as they are. A
//! prediction takes the `k` rows nearest in Euclidean distance: classification weighs each
//! neighbour's vote by `1 / (distance + 1e-6)` (the probabilities are the normalized weights),
//! regression averages the neighbours' values.
//!
//! The run's one setting is [`CHOOSE`]: each fit chooses `k` and the scaling itself, by exact
//! leave-one-out over the rows it is given (every row predicted from the others; at most
//! [`MAX_LEAVE_ONE_OUT_QUERIES`] of them, evenly spaced, asked), from the learner's grid: on
//! tables standardized `k` in {5, 9, 3, 1}, then raw {1, 5}; on images (inputs of two or more
//! dimensions) raw {1, 5, 3} first, then standardized {1, 5} (pixels are on one scale already, and
//! standardizing a nearly constant border pixel blows its noise up: on scikit-learn's 8x8 digits,
//! 1-NN is 0.997 on raw pixels, 0.978 standardized). Ties go to the earlier setting. The run's
//! validation part then judges a choice it took no part in (kernel ridge chooses its `alpha` the
//! same way): the run's quality is not the best of six scores on one small split, and on the
//! development tasks' digits leave-one-out over 1,150 rows prefers raw 1-NN (0.9861 against 3-NN's
//! 0.9854), which the 287-row split could not tell apart. A setting other than [`CHOOSE`] (`k`,
//! negative for raw features) fits that `k` and scaling directly.

use serde::{Deserialize, Serialize};

use super::forest::class_prediction;
use super::table::{Table, Target, evenly_spaced, standardization, standardize_into};
use super::{ClassicModel, Clock, Learner};
use crate::batch::{Expected, QualityAccumulator};
use crate::error::{Error, Result};
use crate::infer::Prediction;

/// A fitted k-NN model: the standardization and the kept rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knn {
    /// Neighbours per prediction.
    pub k: usize,
    /// Values per input row.
    pub features: usize,
    /// Classes for classification, 0 for regression.
    pub classes: usize,
    /// Output values per row for regression.
    pub outputs: usize,
    /// Per feature, the mean subtracted.
    #[serde(with = "super::packed")]
    pub mean: Vec<f32>,
    /// Per feature, the divisor.
    #[serde(with = "super::packed")]
    pub scale: Vec<f32>,
    /// The kept rows, standardized, `features` each.
    #[serde(with = "super::packed")]
    pub points: Vec<f32>,
    /// Per kept row, its class (classification) or its `outputs` values.
    #[serde(with = "super::packed")]
    pub targets: Vec<f32>,
}

impl Knn {
    /// True when the buffers agree with the shapes.
    pub fn is_valid(&self) -> bool {
        let rows = self.points.len() / self.features.max(1);
        let width = if self.classes > 0 { 1 } else { self.outputs };
        self.features > 0
            && self.k > 0
            && width > 0
            && self.mean.len() == self.features
            && self.scale.len() == self.features
            && self.points.len() == rows * self.features
            && rows > 0
            && self.targets.len() == rows * width
            && (self.classes == 0
                || self
                    .targets
                    .iter()
                    .all(|&class| class >= 0.0 && (class as usize) < self.classes))
    }

    fn standardize(&self, row: &[f32], out: &mut [f32]) {
        standardize_into(&self.mean, &self.scale, row, out);
    }

    /// The prediction for `row`.
    pub fn predict(&self, row: &[f32]) -> Prediction {
        let mut query = vec![0.0; self.features];
        self.standardize(row, &mut query);
        self.vote(&self.nearest(&query, self.k, None))
    }

    /// The `k` kept rows nearest to `query` (already standardized), nearest first, ties by row;
    /// `leave_out` is a kept row that does not count (leave-one-out).
    fn nearest(&self, query: &[f32], k: usize, leave_out: Option<usize>) -> Vec<(f32, usize)> {
        let mut distances: Vec<(f32, usize)> = self
            .points
            .chunks(self.features)
            .enumerate()
            .filter(|&(index, _)| Some(index) != leave_out)
            .map(|(index, point)| {
                let squared: f32 = point
                    .iter()
                    .zip(query)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum();
                (squared, index)
            })
            .collect();
        let order = |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        let k = k.clamp(1, distances.len().max(1));
        if k < distances.len() {
            distances.select_nth_unstable_by(k - 1, order);
            distances.truncate(k);
        }
        distances.sort_unstable_by(order);
        distances
    }

    /// The prediction of the neighbours `nearest` (squared distances and kept rows).
    fn vote(&self, nearest: &[(f32, usize)]) -> Prediction {
        if self.classes > 0 {
            let mut votes = vec![0.0f64; self.classes];
            for &(squared, index) in nearest {
                let weight = 1.0 / (f64::from(squared).sqrt() + 1e-6);
                if let Some(vote) = votes.get_mut(self.targets[index] as usize) {
                    *vote += weight;
                }
            }
            let total: f64 = votes.iter().sum();
            let probabilities = votes
                .iter()
                .map(|vote| (vote / total.max(f64::MIN_POSITIVE)) as f32)
                .collect();
            class_prediction(probabilities)
        } else {
            let mut mean = vec![0.0f64; self.outputs];
            for &(_, index) in nearest {
                for (m, &value) in mean
                    .iter_mut()
                    .zip(&self.targets[index * self.outputs..(index + 1) * self.outputs])
                {
                    *m += f64::from(value);
                }
            }
            Prediction::Values {
                shape: vec![self.outputs as i64],
                values: mean
                    .iter()
                    .map(|m| (m / nearest.len().max(1) as f64) as f32)
                    .collect(),
            }
        }
    }

    /// The leave-one-out quality of each `k` in `ks` (at most the kept rows less one): each of
    /// the kept rows `queries` predicted from the others, scored by the trainer's quality rule.
    /// `None` when the clock ran out first.
    fn leave_one_out(&self, ks: &[usize], queries: &[usize], clock: &Clock) -> Option<Vec<f64>> {
        let most = ks.iter().copied().max()?;
        let mut accumulators = vec![QualityAccumulator::default(); ks.len()];
        for &query in queries {
            if clock.expired() {
                return None;
            }
            let point = &self.points[query * self.features..(query + 1) * self.features];
            let nearest = self.nearest(point, most, Some(query));
            let expected = if self.classes > 0 {
                Expected::Class(self.targets[query] as i64)
            } else {
                Expected::Values(&self.targets[query * self.outputs..(query + 1) * self.outputs])
            };
            for (&k, accumulator) in ks.iter().zip(&mut accumulators) {
                accumulator.add_prediction(&self.vote(&nearest[..k.min(nearest.len())]), expected);
            }
        }
        let classification = self.classes > 0;
        Some(
            accumulators
                .iter()
                .map(|accumulator| accumulator.finite_quality(classification).unwrap_or(0.0))
                .collect(),
        )
    }
}

/// The setting that makes a fit choose `k` and the scaling by leave-one-out (the run's one).
pub const CHOOSE: f64 = 0.0;

/// The most rows a fit's leave-one-out predicts (evenly spaced among its rows; each against all
/// of them): its cost is at most this many times the fit's rows' distances, per scaling.
pub const MAX_LEAVE_ONE_OUT_QUERIES: usize = 1000;

/// The k-NN learner.
pub(crate) struct KnnLearner<'a> {
    table: Table<'a>,
    image: bool,
}

impl<'a> KnnLearner<'a> {
    /// The learner over `table`; `image` when the inputs are images (raw pixels first).
    pub(crate) fn new(table: Table<'a>, image: bool) -> Self {
        Self { table, image }
    }
}

impl KnnLearner<'_> {
    /// The settings a fit chooses from, in order of preference (`k`, negative for raw features).
    pub(crate) fn grid(&self) -> Vec<f64> {
        if self.image {
            vec![-1.0, -5.0, -3.0, 1.0, 5.0]
        } else {
            vec![5.0, 9.0, 3.0, 1.0, -1.0, -5.0]
        }
    }

    /// The fit of exactly `setting` on `rows`.
    fn fit_setting(&self, rows: &[usize], setting: f64) -> Knn {
        let (k, standardized) = (setting.abs(), setting > 0.0);
        let table = self.table;
        let features = table.features;
        let (mean, scale) = standardization(&table, rows, standardized);
        let mut model = Knn {
            k: (k.max(1.0) as usize).min(rows.len()),
            features,
            classes: 0,
            outputs: table.outputs(),
            mean,
            scale,
            points: vec![0.0; rows.len() * features],
            targets: Vec::new(),
        };
        let mut points = std::mem::take(&mut model.points);
        for (slot, &row) in points.chunks_mut(features).zip(rows) {
            model.standardize(table.row(row), slot);
        }
        model.points = points;
        match table.target {
            Target::Classes { n_classes, labels } => {
                model.classes = n_classes;
                model.targets = rows.iter().map(|&row| labels[row] as f32).collect();
            }
            Target::Values { outputs, values } => {
                model.targets = rows
                    .iter()
                    .flat_map(|&row| values[row * outputs..(row + 1) * outputs].iter().copied())
                    .collect();
            }
        }
        model
    }

    /// The setting of [`KnnLearner::grid`] with the best leave-one-out quality on `rows` (the
    /// earlier on ties; the first when fewer than two rows or the clock ran out).
    fn choose(&self, rows: &[usize], clock: &Clock) -> f64 {
        let grid = self.grid();
        let queries = evenly_spaced(
            &(0..rows.len()).collect::<Vec<_>>(),
            MAX_LEAVE_ONE_OUT_QUERIES,
        );
        // (quality, position in the grid, setting)
        let mut best: Option<(f64, usize, f64)> = None;
        for standardized in [true, false] {
            let scaled: Vec<(usize, f64)> = grid
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, setting)| (setting > 0.0) == standardized)
                .filter(|&(_, setting)| (setting.abs() as usize) < rows.len())
                .collect();
            let Some(&(_, first)) = scaled.first() else {
                continue;
            };
            let model = self.fit_setting(rows, first);
            let ks: Vec<usize> = scaled.iter().map(|&(_, s)| s.abs() as usize).collect();
            let Some(qualities) = model.leave_one_out(&ks, &queries, clock) else {
                break;
            };
            for (&(position, setting), quality) in scaled.iter().zip(qualities) {
                let better = best.is_none_or(|(best_quality, best_position, _)| {
                    quality > best_quality || (quality == best_quality && position < best_position)
                });
                if better {
                    best = Some((quality, position, setting));
                }
            }
        }
        best.map_or(grid[0], |(_, _, setting)| setting)
    }
}

impl Learner for KnnLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        vec![CHOOSE]
    }

    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
        if rows.is_empty() {
            return Err(Error::BadExamples("no rows to fit k-NN on".into()));
        }
        let setting = if setting == CHOOSE {
            self.choose(rows, clock)
        } else {
            setting
        };
        Ok(ClassicModel::Knn(self.fit_setting(rows, setting)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_standardized_neighbour_wins() {
        // Feature 1 has a huge scale but carries no signal; standardized, feature 0 decides.
        let values = [
            0.0, 1000.0, 0.1, -1000.0, 1.0, 1000.0, 0.9, -1000.0, 0.5, 0.0,
        ];
        let examples = crate::data::Examples {
            ids: crate::data::Examples::sequential_ids(5),
            inputs: crate::data::Inputs::Dense {
                shape: vec![2],
                values: values.to_vec(),
            },
            targets: crate::data::Targets::Classes {
                n_classes: 2,
                labels: vec![0, 0, 1, 1, 0],
            },
        };
        let table = Table::of(&examples).unwrap();
        let clock = Clock {
            started: std::time::Instant::now(),
            limit: 1.0,
        };
        let ClassicModel::Knn(raw) = KnnLearner::new(table, true)
            .fit(&[0, 1, 2, 3], -1.0, &clock)
            .unwrap()
        else {
            panic!("not k-NN");
        };
        // A negative setting keeps the raw features; images try those first.
        assert_eq!(
            (raw.k, raw.mean.clone(), raw.scale.clone()),
            (1, vec![0.0; 2], vec![1.0; 2])
        );
        assert_eq!(KnnLearner::new(table, true).grid()[0], -1.0);
        assert!(KnnLearner::new(table, false).grid()[0] > 0.0);
        // The run has one setting: each fit chooses.
        assert_eq!(KnnLearner::new(table, true).settings(), vec![CHOOSE]);
        let ClassicModel::Knn(model) = KnnLearner::new(table, false)
            .fit(&[0, 1, 2, 3], 1.0, &clock)
            .unwrap()
        else {
            panic!("not k-NN");
        };
        assert!(model.is_valid());
        let Prediction::Class { index, .. } = model.predict(&[0.95, -900.0]) else {
            panic!("not a class");
        };
        assert_eq!(index, 1);
        let Prediction::Class { index, .. } = model.predict(&[0.05, 900.0]) else {
            panic!("not a class");
        };
        assert_eq!(index, 0);
        // Not a number counts as the mean: still a prediction.
        assert!(matches!(
            model.predict(&[f32::NAN, f32::INFINITY]),
            Prediction::Class { .. }
        ));
    }

    fn clock() -> Clock {
        Clock {
            started: std::time::Instant::now(),
            limit: 60.0,
        }
    }

    /// `n` two-feature rows: feature 0 is the class signal (the class plus a little noise),
    /// feature 1 is noise `wide` times larger, with no signal.
    fn signal_and_noise(n: usize, wide: f32) -> crate::data::Examples {
        let mut state = 12345u64;
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        let labels: Vec<i64> = (0..n).map(|i| (i % 2) as i64).collect();
        let values = labels
            .iter()
            .flat_map(|&label| [label as f32 + 0.3 * uniform(), wide * uniform()])
            .collect();
        crate::data::Examples {
            ids: crate::data::Examples::sequential_ids(n),
            inputs: crate::data::Inputs::Dense {
                shape: vec![2],
                values,
            },
            targets: crate::data::Targets::Classes {
                n_classes: 2,
                labels,
            },
        }
    }

    fn fitted(learner: &mut KnnLearner<'_>, rows: &[usize], setting: f64) -> Knn {
        let ClassicModel::Knn(model) = learner.fit(rows, setting, &clock()).unwrap() else {
            panic!("not k-NN");
        };
        model
    }

    #[test]
    fn leave_one_out_leaves_the_row_out() {
        // Labels that no feature predicts: with itself among its neighbours every row would be
        // right (1-NN on the training rows scores 1.0); left out, about half are.
        let mut examples = signal_and_noise(200, 1.0);
        if let crate::data::Targets::Classes { labels, .. } = &mut examples.targets {
            for (i, label) in labels.iter_mut().enumerate() {
                *label = i64::from((i * 7919) % 13 < 6);
            }
        }
        let table = Table::of(&examples).unwrap();
        let rows: Vec<usize> = (0..200).collect();
        let model = fitted(&mut KnnLearner::new(table, false), &rows, 1.0);
        let queries: Vec<usize> = (0..200).collect();
        let qualities = model.leave_one_out(&[1, 3], &queries, &clock()).unwrap();
        assert!(
            qualities.iter().all(|&q| q < 0.75),
            "leave-one-out saw the row itself: {qualities:?}"
        );
    }

    #[test]
    fn each_fit_chooses_the_scaling_leave_one_out_prefers() {
        // The noise feature is 100x wider than the signal: raw distances are all noise, and only
        // standardized features find the class. Images try raw first; leave-one-out must still
        // choose a standardized setting, on the rows of the fit alone.
        let examples = signal_and_noise(300, 100.0);
        let table = Table::of(&examples).unwrap();
        let rows: Vec<usize> = (0..240).collect();
        let mut learner = KnnLearner::new(table, true);
        let chosen = learner.choose(&rows, &clock());
        assert!(chosen > 0.0, "chose raw features: {chosen}");
        let model = fitted(&mut learner, &rows, CHOOSE);
        assert_eq!(model.k, chosen as usize);
        assert!(model.scale.iter().any(|&s| s != 1.0), "not standardized");
        // And it is right on the rows it never saw.
        let correct = (240..300)
            .filter(|&row| {
                matches!(model.predict(table.row(row)),
                    Prediction::Class { index, .. } if index == (row % 2) as i64)
            })
            .count();
        assert!(correct >= 57, "{correct} of 60");
        // Where raw is as good (no wide noise), images keep their first choice, raw 1-NN: ties
        // go to the earlier setting.
        let clean = signal_and_noise(300, 0.0);
        let table = Table::of(&clean).unwrap();
        assert_eq!(KnnLearner::new(table, true).choose(&rows, &clock()), -1.0);
    }

    #[test]
    fn a_fit_on_too_few_rows_or_out_of_time_takes_the_first_setting() {
        let examples = signal_and_noise(10, 1.0);
        let table = Table::of(&examples).unwrap();
        let learner = KnnLearner::new(table, false);
        // One row: nothing to leave out.
        assert_eq!(learner.choose(&[3], &clock()), learner.grid()[0]);
        let expired = Clock {
            started: std::time::Instant::now(),
            limit: 0.0,
        };
        assert_eq!(
            learner.choose(&[0, 1, 2, 3, 4, 5], &expired),
            learner.grid()[0]
        );
        // Two rows: only k = 1 can leave one out, and it is chosen.
        assert_eq!(learner.choose(&[0, 1], &clock()).abs(), 1.0);
    }
}
