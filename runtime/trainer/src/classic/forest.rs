//! The random forest (Breiman 2001): bagged CART trees ([`super::trees`]), each grown to full depth
//! (at most [`MAX_DEPTH`]) on a bootstrap sample of the fit's rows, examining a random subset of
//! the features at each split (`sqrt(features)` for classification, `features / 3` for
//! regression, at least one). A classification leaf holds its rows' class distribution and the
//! forest's probabilities are the mean of its trees' leaves; a regression forest averages leaf
//! means. The settings are the fewest rows per leaf ({1, 3} for classification, {5, 1} for
//! regression, the usual defaults first). A fit grows [`TREES`] trees, fewer when its share of
//! the run's time limit ends (at least one).

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
        if self.table.is_classification() {
            vec![1.0, 3.0]
        } else {
            vec![5.0, 1.0]
        }
    }

    fn fit(&mut self, rows: &[usize], min_leaf: f64, clock: &Clock) -> Result<ClassicModel> {
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
        let per_split = if classification {
            (features as f64).sqrt().round() as usize
        } else {
            features / 3
        }
        .max(1);
        let params = GrowParams {
            max_depth: MAX_DEPTH,
            min_leaf: min_leaf.max(1.0) as usize,
            min_weight: 0.0,
            lambda: 0.0,
            features_per_split: per_split,
        };
        let mut rng = Rng::new(self.seed ^ rows.len() as u64 ^ min_leaf.to_bits());
        let mut trees = Vec::with_capacity(TREES);
        let mut sample = vec![0u32; rows.len()];
        while trees.len() < TREES && (trees.is_empty() || clock.elapsed() < deadline) {
            for slot in &mut sample {
                *slot = rng.below(rows.len() as u64) as u32;
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
