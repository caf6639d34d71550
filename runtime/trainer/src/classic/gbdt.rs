//! Gradient-boosted decision trees (Friedman 2001), histogram-based as in LightGBM and
//! scikit-learn's `HistGradientBoosting`: each round fits one regression tree per output
//! ([`super::trees`], Newton leaves `-G / (H + 1)`) to the loss's gradients and adds it shrunk by
//! [`LEARNING_RATE`]. Classification minimizes the softmax log-loss (one tree per class per round,
//! the scores starting at the log of the smoothed class frequencies), regression the squared loss
//! (starting at the mean). With 50 or more rows a fit holds out a tenth of them (by a hash of the
//! row) and stops [`PATIENCE`] rounds after the held-out loss last improved, keeping the rounds up
//! to its best; otherwise it runs [`SMALL_ROUNDS`] rounds. A fit also stops adding rounds when its
//! share of the run's time limit ends (after at least one). The settings are the trees' depth
//! limit, {6, 3}.

use serde::{Deserialize, Serialize};

use super::forest::class_prediction;
use super::table::{Table, Target, TimeShares};
use super::trees::{Binned, GrowParams, Grower, Tree};
use super::{ClassicModel, Clock, Learner};
use crate::data::mix64;
use crate::error::{Error, Result};
use crate::infer::Prediction;
use crate::synthetic::Rng;

/// The shrinkage of every tree.
pub const LEARNING_RATE: f32 = 0.1;
/// The most rounds a fit runs.
pub const MAX_ROUNDS: usize = 300;
/// Rounds without a better held-out loss before a fit stops.
pub const PATIENCE: usize = 20;
/// Rounds of a fit on fewer than [`HOLD_OUT_FROM`] rows (nothing held out).
pub const SMALL_ROUNDS: usize = 100;
/// The fewest rows from which a fit holds a tenth out for early stopping.
pub const HOLD_OUT_FROM: usize = 50;

/// A fitted boosted ensemble.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gbdt {
    /// Values per input row.
    pub features: usize,
    /// Classes (classification) or output values (regression).
    pub outputs: usize,
    /// True for classification (softmax of the scores).
    pub classification: bool,
    /// The initial score of each output.
    pub base: Vec<f32>,
    /// Round-major: the tree of output `k` in round `r` is `trees[r * outputs + k]` (leaves
    /// already shrunk).
    pub trees: Vec<Tree>,
}

impl Gbdt {
    /// True when the shapes agree and every tree is well formed.
    pub fn is_valid(&self) -> bool {
        self.outputs > 0
            && self.base.len() == self.outputs
            && self.trees.len().is_multiple_of(self.outputs)
            && self
                .trees
                .iter()
                .all(|tree| tree.is_valid(self.features, 1))
    }

    /// The raw scores of `row` (logits, or the regression values).
    pub fn scores(&self, row: &[f32]) -> Vec<f64> {
        let mut scores: Vec<f64> = self.base.iter().map(|&b| f64::from(b)).collect();
        for round in self.trees.chunks(self.outputs.max(1)) {
            for (score, tree) in scores.iter_mut().zip(round) {
                *score += f64::from(tree.leaf(row)[0]);
            }
        }
        scores
    }

    /// The prediction for `row`.
    pub fn predict(&self, row: &[f32]) -> Prediction {
        let scores = self.scores(row);
        if self.classification {
            class_prediction(softmax(&scores).iter().map(|&p| p as f32).collect())
        } else {
            Prediction::Values {
                shape: vec![self.outputs as i64],
                values: scores.iter().map(|&s| s as f32).collect(),
            }
        }
    }
}

fn softmax(scores: &[f64]) -> Vec<f64> {
    let maximum = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exponentials: Vec<f64> = scores.iter().map(|s| (s - maximum).exp()).collect();
    let total: f64 = exponentials.iter().sum();
    exponentials.iter().map(|e| e / total).collect()
}

/// The mean loss of `scores` (`width` per row) against `targets` (one-hot classes or values).
fn loss(scores: &[f64], targets: &[f64], width: usize, classification: bool) -> f64 {
    let n = scores.len() / width.max(1);
    let mut total = 0.0;
    for (row_scores, row_targets) in scores.chunks(width).zip(targets.chunks(width)) {
        if classification {
            let probabilities = softmax(row_scores);
            for (p, t) in probabilities.iter().zip(row_targets) {
                if *t > 0.0 {
                    total -= t * p.max(1e-15).ln();
                }
            }
        } else {
            total += row_scores
                .iter()
                .zip(row_targets)
                .map(|(s, t)| (s - t).powi(2))
                .sum::<f64>();
        }
    }
    total / n.max(1) as f64
}

/// One fit's training history (for tests): the training loss after each round.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    pub train_loss: Vec<f64>,
}

/// The settings: the trees' depths, in order of preference.
pub(crate) const DEPTHS: [f64; 2] = [6.0, 3.0];

/// The fewest rows in a leaf of a tree grown on `rows` rows: a fiftieth of them, 1 to 20.
pub(crate) fn min_leaf(rows: usize) -> usize {
    (rows / 50).clamp(1, 20)
}

/// A fit of at least [`HOLD_OUT_FROM`] rows holds about one row in this many out for early
/// stopping (by a hash of the row and the seed).
pub(crate) const HELD_OUT_ONE_IN: u64 = 10;

/// The boosted trees' learner.
pub(crate) struct GbdtLearner<'a> {
    table: Table<'a>,
    shares: TimeShares,
    seed: u64,
    /// The last fit's history.
    pub(crate) history: History,
}

impl<'a> GbdtLearner<'a> {
    /// The learner over `table`, for `sets` validation sets.
    pub(crate) fn new(table: Table<'a>, sets: usize, seed: u64) -> Self {
        Self {
            table,
            shares: TimeShares::new(2 * sets.max(1)),
            seed,
            history: History::default(),
        }
    }

    fn base(&self, rows: &[usize]) -> Vec<f64> {
        let width = self.table.outputs();
        match self.table.target {
            Target::Classes { labels, .. } => {
                let mut counts = vec![1.0; width];
                for &row in rows {
                    if let Some(count) = usize::try_from(labels[row])
                        .ok()
                        .and_then(|label| counts.get_mut(label))
                    {
                        *count += 1.0;
                    }
                }
                let total: f64 = counts.iter().sum();
                counts.iter().map(|count| (count / total).ln()).collect()
            }
            Target::Values { values, .. } => {
                let mut mean = vec![0.0; width];
                for &row in rows {
                    for (m, &v) in mean.iter_mut().zip(&values[row * width..(row + 1) * width]) {
                        *m += f64::from(v);
                    }
                }
                mean.iter().map(|m| m / rows.len().max(1) as f64).collect()
            }
        }
    }
}

impl Learner for GbdtLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        DEPTHS.to_vec()
    }

    fn fit(&mut self, rows: &[usize], depth: f64, clock: &Clock) -> Result<ClassicModel> {
        let deadline = self.shares.next_deadline(clock);
        if rows.is_empty() {
            return Err(Error::BadExamples("no rows to fit boosted trees on".into()));
        }
        let table = self.table;
        let features = table.features;
        let width = table.outputs();
        let classification = table.is_classification();
        let salt = mix64(self.seed);
        let (train, held): (Vec<usize>, Vec<usize>) = if rows.len() >= HOLD_OUT_FROM {
            rows.iter()
                .partition(|&&row| !mix64(row as u64 ^ salt).is_multiple_of(HELD_OUT_ONE_IN))
        } else {
            (rows.to_vec(), Vec::new())
        };
        let (train, held) = if train.is_empty() || held.is_empty() {
            (rows.to_vec(), Vec::new())
        } else {
            (train, held)
        };
        let n = train.len();
        let binned = Binned::new(table.values, features, &train);
        let targets = table.target_matrix(&train);
        let held_targets = table.target_matrix(&held);
        let base = self.base(&train);
        let mut scores: Vec<f64> = (0..n).flat_map(|_| base.iter().copied()).collect();
        let mut held_scores: Vec<f64> =
            (0..held.len()).flat_map(|_| base.iter().copied()).collect();
        let params = GrowParams {
            max_depth: depth.max(1.0) as usize,
            min_leaf: min_leaf(n),
            min_weight: 1e-3,
            lambda: 1.0,
            features_per_split: usize::MAX,
            random_cuts: false,
        };
        let max_rounds = if held.is_empty() {
            SMALL_ROUNDS
        } else {
            MAX_ROUNDS
        };
        let mut rng = Rng::new(self.seed);
        let mut trees: Vec<Tree> = Vec::new();
        let mut best = (f64::INFINITY, 0usize);
        let mut gradient = vec![0.0; n];
        let mut hessian = vec![0.0; n];
        let mut local: Vec<u32> = (0..n as u32).collect();
        self.history = History::default();
        for round in 0..max_rounds {
            if round > 0 && clock.elapsed() >= deadline {
                break;
            }
            let probabilities: Vec<f64> = if classification {
                scores.chunks(width).flat_map(softmax).collect()
            } else {
                Vec::new()
            };
            for output in 0..width {
                for i in 0..n {
                    let t = targets[i * width + output];
                    let (g, h) = if classification {
                        let p = probabilities[i * width + output];
                        (p - t, (p * (1.0 - p)).max(1e-6))
                    } else {
                        (scores[i * width + output] - t, 1.0)
                    };
                    gradient[i] = -g;
                    hessian[i] = h;
                }
                let mut tree =
                    Grower::new(&binned, &gradient, &hessian, 1, params).grow(&mut local, &mut rng);
                tree.scale(LEARNING_RATE);
                for (i, &row) in train.iter().enumerate() {
                    scores[i * width + output] += f64::from(tree.leaf(table.row(row))[0]);
                }
                for (i, &row) in held.iter().enumerate() {
                    held_scores[i * width + output] += f64::from(tree.leaf(table.row(row))[0]);
                }
                trees.push(tree);
            }
            self.history
                .train_loss
                .push(loss(&scores, &targets, width, classification));
            if !held.is_empty() {
                let held_loss = loss(&held_scores, &held_targets, width, classification);
                if held_loss < best.0 {
                    best = (held_loss, round + 1);
                } else if round + 1 - best.1 >= PATIENCE {
                    break;
                }
            }
        }
        if !held.is_empty() && best.1 > 0 {
            trees.truncate(best.1 * width);
        }
        Ok(ClassicModel::Gbdt(Gbdt {
            features,
            outputs: width,
            classification,
            base: base.iter().map(|&b| b as f32).collect(),
            trees,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic;

    fn clock() -> Clock {
        Clock {
            started: std::time::Instant::now(),
            limit: f64::INFINITY,
        }
    }

    #[test]
    fn the_training_loss_decreases_every_round() {
        for examples in [
            synthetic::tabular_linear(40, 3, 1),
            synthetic::tabular_sign(40, 3, 2),
        ] {
            let table = Table::of(&examples).unwrap();
            let mut learner = GbdtLearner::new(table, 1, 7);
            let rows: Vec<usize> = (0..examples.len()).collect();
            learner.fit(&rows, 3.0, &clock()).unwrap();
            let losses = &learner.history.train_loss;
            assert_eq!(losses.len(), SMALL_ROUNDS);
            assert!(
                losses.windows(2).all(|pair| pair[1] <= pair[0] + 1e-9),
                "{losses:?}"
            );
            assert!(losses[losses.len() - 1] < 0.5 * losses[0], "{losses:?}");
        }
    }

    #[test]
    fn an_expired_clock_still_gives_one_round() {
        let examples = synthetic::tabular_sign(200, 4, 3);
        let table = Table::of(&examples).unwrap();
        let mut learner = GbdtLearner::new(table, 1, 7);
        let rows: Vec<usize> = (0..examples.len()).collect();
        let expired = Clock {
            started: std::time::Instant::now(),
            limit: 0.0,
        };
        let ClassicModel::Gbdt(model) = learner.fit(&rows, 3.0, &expired).unwrap() else {
            panic!("not a gbdt");
        };
        assert_eq!(model.trees.len(), 2);
        assert!(model.is_valid());
    }
}
