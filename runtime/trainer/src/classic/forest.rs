//! The random forest (Breiman 2001) and its extremely randomized variant (Geurts, Ernst and
//! Wehenkel 2006), one learner whose settings choose between them: trees of CART
//! ([`super::trees`]), each grown to full depth (at most [`MAX_DEPTH`]), examining a random
//! subset of the features at each split.
//! - **Random forest** (a positive setting): each tree on a bootstrap sample of the fit's rows,
//!   the best cut of `sqrt(features)` features for classification, `features / 3` for regression
//!   (at least one).
//! - **Extra trees** (a negative setting): each tree on every row of the fit, one random cut per
//!   feature examined (`GrowParams::random_cuts`), the best of them; `sqrt(features)` features
//!   for classification, all of them for regression (the paper's and scikit-learn's defaults).
//!   On small tables the variance its randomness removes is what decides: FLAML's extra trees
//!   were the model that beat ours on wine (1.000 against 0.944) and on a regression of the
//!   unseen set (issue 48).
//!
//! The setting's magnitude is the fewest rows per leaf. The settings are {1, -1} for
//! classification (the forest, then extra trees, each with leaves of one row) and {5, -1} for
//! regression (the forest with the usual leaves of five, then extra trees); the k-fold keeps the
//! better. A classification leaf holds its rows' class distribution and the forest's probabilities
//! are the mean of its trees' leaves; a regression forest averages leaf means. Both are the same
//! fitted [`RandomForest`] (served, exported and checkpointed alike). A fit grows [`TREES`]
//! trees, fewer when its share of the run's time limit ends (at least one).

use serde::{Deserialize, Serialize};

use super::table::{Table, TimeShares};
use super::trees::{Binned, GrowParams, Grower, Tree};
use super::{ClassicModel, Clock, Learner};
use crate::error::{Error, Result};
use crate::infer::Prediction;
use crate::synthetic::Rng;

/// Trees per forest.
pub const TREES: usize = 100;
/// The deepest a tree grows.
pub const MAX_DEPTH: usize = 32;

/// A fitted forest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RandomForest {
    /// Values per input row.
    pub features: usize,
    /// Classes (classification) or output values (regression).
    pub outputs: usize,
    /// True for a classification forest.
    pub classification: bool,
    /// The trees (at least one).
    pub trees: Vec<Tree>,
}

impl RandomForest {
    /// True when every tree is well formed for the forest's shapes.
    pub fn is_valid(&self) -> bool {
        !self.trees.is_empty()
            && self
                .trees
                .iter()
                .all(|tree| tree.is_valid(self.features, self.outputs))
    }

    /// The mean of the trees' leaves for `row`.
    pub fn mean(&self, row: &[f32]) -> Vec<f32> {
        let mut total = vec![0.0f64; self.outputs];
        for tree in &self.trees {
            for (sum, &value) in total.iter_mut().zip(tree.leaf(row)) {
                *sum += f64::from(value);
            }
        }
        let n = self.trees.len().max(1) as f64;
        total.iter().map(|sum| (sum / n) as f32).collect()
    }

    /// The prediction for `row`.
    pub fn predict(&self, row: &[f32]) -> Prediction {
        let mean = self.mean(row);
        if self.classification {
            class_prediction(mean)
        } else {
            Prediction::Values {
                shape: vec![self.outputs as i64],
                values: mean,
            }
        }
    }
}

/// The most probable class of `probabilities` (the first on ties).
pub(crate) fn class_prediction(probabilities: Vec<f32>) -> Prediction {
    let index = probabilities
        .iter()
        .enumerate()
        .fold(None, |best: Option<(usize, f32)>, (index, &p)| match best {
            Some((_, best_p)) if best_p >= p => best,
            _ => Some((index, p)),
        })
        .map_or(0, |(index, _)| index as i64);
    Prediction::Class {
        index,
        probabilities,
    }
}

/// Whether a forest setting asks for extra trees (negative: see the module documentation).
pub fn is_extra_trees(setting: f64) -> bool {
    setting < 0.0
}

/// The forest's settings (see the module documentation): the random forest's fewest rows per leaf
/// (1 for classes, 5 for values), then extra trees (-1: one row per leaf).
pub(crate) fn settings(classification: bool) -> Vec<f64> {
    if classification {
        vec![1.0, -1.0]
    } else {
        vec![5.0, -1.0]
    }
}

/// Features examined per split: sqrt(features) for classes, a third of them for values (every
/// one under extra trees), at least one.
pub(crate) fn features_per_split(
    features: usize,
    classification: bool,
    extra_trees: bool,
) -> usize {
    if classification {
        (features as f64).sqrt().round() as usize
    } else if extra_trees {
        features
    } else {
        features / 3
    }
    .max(1)
}

/// The forest's learner.
pub(crate) struct ForestLearner<'a> {
    table: Table<'a>,
    shares: TimeShares,
    seed: u64,
}

impl<'a> ForestLearner<'a> {
    /// The learner over `table`, for `sets` validation sets.
    pub(crate) fn new(table: Table<'a>, sets: usize, seed: u64) -> Self {
        let settings = 2;
        Self {
            table,
            shares: TimeShares::new(settings * sets.max(1)),
            seed,
        }
    }
}

impl Learner for ForestLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        settings(self.table.is_classification())
    }

    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
        let extra_trees = is_extra_trees(setting);
        let min_leaf = setting.abs();
        let deadline = self.shares.next_deadline(clock);
        if rows.is_empty() {
            return Err(Error::BadExamples("no rows to fit a forest on".into()));
        }
        let features = self.table.features;
        let width = self.table.outputs();
        let binned = Binned::new(self.table.values, features, rows);
        let targets = self.table.target_matrix(rows);
        let weights = vec![1.0; rows.len()];
        let classification = self.table.is_classification();
        let per_split = features_per_split(features, classification, extra_trees);
        let params = GrowParams {
            max_depth: MAX_DEPTH,
            min_leaf: min_leaf.max(1.0) as usize,
            min_weight: 0.0,
            lambda: 0.0,
            features_per_split: per_split,
            random_cuts: extra_trees,
        };
        let mut rng = Rng::new(self.seed ^ rows.len() as u64 ^ setting.to_bits());
        let mut trees = Vec::with_capacity(TREES);
        let mut sample = vec![0u32; rows.len()];
        while trees.len() < TREES && (trees.is_empty() || clock.elapsed() < deadline) {
            for (index, slot) in sample.iter_mut().enumerate() {
                *slot = if extra_trees {
                    index as u32
                } else {
                    rng.below(rows.len() as u64) as u32
                };
            }
            let grower = Grower::new(&binned, &targets, &weights, width, params);
            trees.push(grower.grow(&mut sample, &mut rng));
        }
        Ok(ClassicModel::RandomForest(RandomForest {
            features,
            outputs: width,
            classification,
            trees,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Task;
    use crate::classic::{ModelKind, learner};
    use crate::synthetic::tabular_sign;

    #[test]
    fn extra_trees_grow_on_every_row_with_random_cuts_and_learn_as_the_forest_does() {
        // The class is the sign of x0 + x1: a diagonal boundary that axis-aligned cuts approach.
        let examples = tabular_sign(300, 4, 5);
        let task = Task::TabularClassification {
            features: 4,
            n_classes: 2,
        };
        let fit_rows: Vec<usize> = (0..200).collect();
        let test_rows: Vec<usize> = (200..300).collect();
        let sets = vec![(fit_rows.clone(), test_rows.clone())];
        let mut forest = learner(ModelKind::RandomForest, &examples, &task, &sets, 11).unwrap();
        assert_eq!(forest.settings(), vec![1.0, -1.0]);
        assert!(!is_extra_trees(1.0) && is_extra_trees(-1.0));
        let clock = Clock {
            started: std::time::Instant::now(),
            limit: f64::INFINITY,
        };
        let crate::Targets::Classes { labels, .. } = &examples.targets else {
            unreachable!()
        };
        let mut answers = Vec::new();
        for setting in [1.0, -1.0] {
            let model = forest.fit(&fit_rows, setting, &clock).unwrap();
            let ClassicModel::RandomForest(fitted) = &model else {
                panic!("a forest setting fits a forest")
            };
            assert_eq!(fitted.trees.len(), TREES);
            assert!(fitted.is_valid());
            let predictions = model.predict(&examples.inputs, &test_rows).unwrap();
            let right =
                Prediction::count_correct(&predictions, test_rows.iter().map(|&row| labels[row]));
            assert!(right >= 85, "setting {setting}: {right} of 100 right");
            answers.push(predictions);
        }
        // Different trees: the probabilities differ somewhere.
        assert_ne!(answers[0], answers[1]);
    }
}
