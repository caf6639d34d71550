//! k-nearest neighbours (Cover and Hart 1967) on standardized features: a fit keeps its rows,
//! each feature shifted by its mean and divided by its standard deviation over those rows (a
//! constant feature by 1; values that are not finite count as the mean). A prediction takes the
//! `k` rows nearest in Euclidean distance: classification weighs each neighbour's vote by
//! `1 / (distance + 1e-6)` (the probabilities are the normalized weights), regression averages the
//! neighbours' values. The settings are `k` in {5, 9, 3, 1} (at most the number of rows), then
//! `k` in {1, 5} on the raw features (a setting of `-k`: no standardization). Images (inputs of two
//! or more dimensions) try the raw features first, {1, 5, 3}, then standardized {1, 5}: pixels are
//! on one scale already, and standardizing a nearly constant border pixel blows its noise up (on
//! scikit-learn's 8x8 digits, 1-NN is 0.997 on raw pixels, 0.978 standardized).

use serde::{Deserialize, Serialize};

use super::forest::class_prediction;
use super::table::{Table, Target, standardization, standardize_into};
use super::{ClassicModel, Clock, Learner};
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
    pub mean: Vec<f32>,
    /// Per feature, the divisor.
    pub scale: Vec<f32>,
    /// The kept rows, standardized, `features` each.
    pub points: Vec<f32>,
    /// Per kept row, its class (classification) or its `outputs` values.
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
        let mut distances: Vec<(f32, usize)> = self
            .points
            .chunks(self.features)
            .enumerate()
            .map(|(index, point)| {
                let squared: f32 = point
                    .iter()
                    .zip(&query)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum();
                (squared, index)
            })
            .collect();
        let k = self.k.clamp(1, distances.len().max(1));
        if k < distances.len() {
            distances.select_nth_unstable_by(k - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        }
        let nearest = &distances[..k.min(distances.len())];
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
}

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

impl Learner for KnnLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        if self.image {
            vec![-1.0, -5.0, -3.0, 1.0, 5.0]
        } else {
            vec![5.0, 9.0, 3.0, 1.0, -1.0, -5.0]
        }
    }

    fn fit(&mut self, rows: &[usize], setting: f64, _clock: &Clock) -> Result<ClassicModel> {
        if rows.is_empty() {
            return Err(Error::BadExamples("no rows to fit k-NN on".into()));
        }
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
        Ok(ClassicModel::Knn(model))
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
        assert_eq!(KnnLearner::new(table, true).settings()[0], -1.0);
        assert!(KnnLearner::new(table, false).settings()[0] > 0.0);
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
}
