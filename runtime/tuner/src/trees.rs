//! The ensemble of decision trees of TrimTuner's DT variant: bagged extra-trees.
//!
//! As TrimTuner's code (scikit-learn's `BaggingRegressor` over `ExtraTreeRegressor` with their
//! defaults): `trees` trees, each grown on a bootstrap sample (n draws with replacement) of the
//! observations until its leaves are pure or hold one point; at every node each non-constant
//! feature gets one threshold drawn uniformly between its smallest and largest value in the node
//! and the split of largest variance reduction wins. The prediction is the mean over trees and the
//! uncertainty their standard deviation (population form, as `np.std`). The random stream is
//! seeded from the ensemble's seed alone, so refitting on the same data gives the same trees.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One node of a tree.
#[derive(Debug, Clone)]
enum Node {
    /// A leaf predicting the mean of its targets.
    Leaf(f64),
    /// `input[feature] <= threshold` goes to `left`, else to `right` (node indices).
    Split {
        feature: usize,
        threshold: f64,
        left: usize,
        right: usize,
    },
}

/// One extremely randomized regression tree.
#[derive(Debug, Clone, Default)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, input: &[f64]) -> f64 {
        let mut index = 0;
        loop {
            match self.nodes[index] {
                Node::Leaf(value) => return value,
                Node::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    index = if input[feature] <= threshold {
                        left
                    } else {
                        right
                    };
                }
            }
        }
    }

    /// Grows a tree on `rows` (indices into `inputs` / `targets`, repeats allowed).
    fn grow(inputs: &[Vec<f64>], targets: &[f64], rows: Vec<usize>, rng: &mut ChaCha8Rng) -> Tree {
        let mut tree = Tree::default();
        // (node index to fill, rows of that node)
        let mut pending = vec![(0usize, rows)];
        tree.nodes.push(Node::Leaf(0.0));
        while let Some((node, rows)) = pending.pop() {
            let mean = rows.iter().map(|&r| targets[r]).sum::<f64>() / rows.len() as f64;
            let pure = rows
                .iter()
                .all(|&r| (targets[r] - targets[rows[0]]).abs() <= 1e-12);
            if rows.len() < 2 || pure {
                tree.nodes[node] = Node::Leaf(mean);
                continue;
            }
            match best_random_split(inputs, targets, &rows, rng) {
                None => tree.nodes[node] = Node::Leaf(mean),
                Some((feature, threshold)) => {
                    let (left_rows, right_rows): (Vec<usize>, Vec<usize>) =
                        rows.iter().partition(|&&r| inputs[r][feature] <= threshold);
                    let left = tree.nodes.len();
                    tree.nodes.push(Node::Leaf(0.0));
                    let right = tree.nodes.len();
                    tree.nodes.push(Node::Leaf(0.0));
                    tree.nodes[node] = Node::Split {
                        feature,
                        threshold,
                        left,
                        right,
                    };
                    pending.push((left, left_rows));
                    pending.push((right, right_rows));
                }
            }
        }
        tree
    }
}

/// One random threshold per non-constant feature; the one of largest variance reduction.
#[allow(clippy::needless_range_loop)]
fn best_random_split(
    inputs: &[Vec<f64>],
    targets: &[f64],
    rows: &[usize],
    rng: &mut ChaCha8Rng,
) -> Option<(usize, f64)> {
    let dimension = inputs[rows[0]].len();
    let total: f64 = rows.iter().map(|&r| targets[r]).sum();
    let count = rows.len() as f64;
    let mut best: Option<(f64, usize, f64)> = None;
    for feature in 0..dimension {
        let (low, high) = rows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                (lo.min(inputs[r][feature]), hi.max(inputs[r][feature]))
            });
        if high - low <= 1e-12 {
            continue;
        }
        let threshold = rng.gen_range(low..high);
        let (mut left_sum, mut left_count) = (0.0, 0.0);
        for &r in rows {
            if inputs[r][feature] <= threshold {
                left_sum += targets[r];
                left_count += 1.0;
            }
        }
        let right_count = count - left_count;
        if left_count == 0.0 || right_count == 0.0 {
            continue;
        }
        let right_sum = total - left_sum;
        // Variance reduction up to constants: the between-children sum of squares.
        let score = left_sum * left_sum / left_count + right_sum * right_sum / right_count;
        if best.is_none_or(|(best_score, _, _)| score > best_score) {
            best = Some((score, feature, threshold));
        }
    }
    best.map(|(_, feature, threshold)| (feature, threshold))
}

/// Bagged extra-trees: mean and spread across trees.
#[derive(Debug, Clone)]
pub struct ExtraTrees {
    n_trees: usize,
    seed: u64,
    trees: Vec<Tree>,
}

/// The standard deviation used where the spread across trees is not finite (TrimTuner's code).
pub const FALLBACK_STANDARD_DEVIATION: f64 = 0.1;

impl ExtraTrees {
    /// An unfitted ensemble of `n_trees` trees whose randomness comes from `seed`.
    pub fn new(n_trees: usize, seed: u64) -> Self {
        ExtraTrees {
            n_trees: n_trees.max(1),
            seed,
            trees: Vec::new(),
        }
    }

    /// Number of trees.
    pub fn n_trees(&self) -> usize {
        self.n_trees
    }

    /// Fits every tree on its bootstrap sample of `(inputs, targets)` (replacing any earlier fit).
    /// With no observations every tree predicts 0.
    pub fn fit(&mut self, inputs: &[Vec<f64>], targets: &[f64]) {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let n = inputs.len().min(targets.len());
        self.trees = (0..self.n_trees)
            .map(|_| {
                if n == 0 {
                    return Tree {
                        nodes: vec![Node::Leaf(0.0)],
                    };
                }
                let rows: Vec<usize> = (0..n).map(|_| rng.gen_range(0..n)).collect();
                Tree::grow(inputs, targets, rows, &mut rng)
            })
            .collect();
    }

    /// The prediction of every tree at `input`.
    pub fn predict_each(&self, input: &[f64]) -> Vec<f64> {
        if self.trees.is_empty() {
            return vec![0.0; self.n_trees];
        }
        self.trees.iter().map(|tree| tree.predict(input)).collect()
    }

    /// Mean and standard deviation across trees at `input`.
    pub fn predict(&self, input: &[f64]) -> (f64, f64) {
        let each = self.predict_each(input);
        let mean = each.iter().sum::<f64>() / each.len() as f64;
        let variance = each.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / each.len() as f64;
        let deviation = variance.sqrt();
        (
            mean,
            if deviation.is_finite() {
                deviation
            } else {
                FALLBACK_STANDARD_DEVIATION
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut inputs = Vec::new();
        let mut targets = Vec::new();
        for i in 0..15 {
            for j in 0..15 {
                let (a, b) = (i as f64 / 14.0, j as f64 / 14.0);
                inputs.push(vec![a, b]);
                targets.push((3.0 * a).sin() + b * b);
            }
        }
        (inputs, targets)
    }

    #[test]
    fn the_ensemble_fits_a_known_function() {
        let (inputs, targets) = grid();
        let mut trees = ExtraTrees::new(10, 7);
        trees.fit(&inputs, &targets);
        // Held-out points between the grid's.
        let mut squared = 0.0;
        let mut count = 0.0;
        for i in 0..10 {
            for j in 0..10 {
                let (a, b) = ((i as f64 + 0.5) / 10.0, (j as f64 + 0.3) / 10.0);
                let (mean, deviation) = trees.predict(&[a, b]);
                assert!(deviation.is_finite() && deviation >= 0.0);
                squared += (mean - ((3.0 * a).sin() + b * b)).powi(2);
                count += 1.0;
            }
        }
        let rmse = (squared / count).sqrt();
        assert!(rmse < 0.08, "held-out RMSE {rmse}");
    }

    #[test]
    fn refits_are_reproducible_and_spread_vanishes_on_a_constant() {
        let (inputs, targets) = grid();
        let mut first = ExtraTrees::new(5, 3);
        first.fit(&inputs, &targets);
        let mut second = ExtraTrees::new(5, 3);
        second.fit(&inputs, &targets);
        assert_eq!(
            first.predict_each(&[0.31, 0.77]),
            second.predict_each(&[0.31, 0.77])
        );
        let constant = vec![2.5; inputs.len()];
        first.fit(&inputs, &constant);
        assert_eq!(first.predict(&[0.1, 0.2]), (2.5, 0.0));
        // Training points far apart disagree across bootstrap samples: some spread.
        let mut sparse = ExtraTrees::new(10, 1);
        sparse.fit(&[vec![0.0], vec![1.0], vec![0.5]], &[0.0, 1.0, 0.2]);
        assert!(sparse.predict(&[0.9]).1 > 0.0);
    }
}
