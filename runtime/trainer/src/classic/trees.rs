//! CART regression trees over histogram bins: what the random forest and the gradient-boosted
//! trees both grow.
//!
//! Each fit bins every feature of its training rows once (`Binned`: up to 255 bins per feature,
//! one per distinct value when there are no more, else at quantiles; the split thresholds are the
//! midpoints between bins), then grows trees depth first. One criterion serves both models: every
//! row carries a target vector `t` (width `w`) and a weight `h`; a node's score is
//! `sum_k S_k^2 / (H + lambda)` with `S = sum t`, `H = sum h`, its leaf value `S / (H + lambda)`,
//! and a split's gain the children's scores minus the parent's. With one-hot class targets, unit
//! weights and `lambda = 0` that is the Gini decrease (the forest's classification trees), with
//! values the variance decrease (its regression trees), with `t = -gradient`, `h = hessian` the
//! Newton step of gradient boosting (Chen and Guestrin 2016's gain without its `gamma`).
//! A value that is not a number goes left at every split (binned with the smallest values).

use serde::{Deserialize, Serialize};

use crate::synthetic::Rng;

/// The most bins per feature (bin indices fit a `u8`).
pub(crate) const MAX_BINS: usize = 255;

/// The `feature` of a leaf.
const LEAF: u32 = u32::MAX;

/// The features of a fit's rows, binned.
#[derive(Debug, Clone)]
pub(crate) struct Binned {
    /// Per feature, the split thresholds between its bins (ascending); bin `b` holds the values
    /// `x` with `edges[b - 1] < x <= edges[b]`, and values that are not numbers.
    pub edges: Vec<Vec<f32>>,
    /// Feature-major: the bin of local row `i` of feature `f` at `f * rows + i`.
    pub bins: Vec<u8>,
    /// The number of rows binned.
    pub rows: usize,
}

/// The thresholds of one feature's values: one bin per distinct value when there are at most
/// [`MAX_BINS`], else bins of about equal counts.
fn edges_of(mut values: Vec<f32>) -> Vec<f32> {
    values.retain(|value| value.is_finite());
    values.sort_by(f32::total_cmp);
    let total = values.len();
    let mut distinct: Vec<(f32, usize)> = Vec::new();
    for value in values {
        match distinct.last_mut() {
            Some((last, count)) if *last == value => *count += 1,
            _ => distinct.push((value, 1)),
        }
    }
    let midpoint = |low: f32, high: f32| {
        let middle = ((f64::from(low) + f64::from(high)) / 2.0) as f32;
        // low <= edge < high, so that `high` lands in the upper bin.
        if middle >= high || middle < low {
            low
        } else {
            middle
        }
    };
    let mut edges = Vec::new();
    if distinct.len() <= MAX_BINS {
        for pair in distinct.windows(2) {
            edges.push(midpoint(pair[0].0, pair[1].0));
        }
        return edges;
    }
    let mut cumulative = 0usize;
    for pair in distinct.windows(2) {
        cumulative += pair[0].1;
        let target = (edges.len() + 1) as f64 * total as f64 / MAX_BINS as f64;
        if cumulative as f64 >= target {
            edges.push(midpoint(pair[0].0, pair[1].0));
        }
    }
    edges
}

/// Cells of the table [`mean_bins`] reads at most (rows sampled evenly, at least 16 of them).
const BIN_SAMPLE_CELLS: usize = 1 << 18;

/// How many bins a feature of `table` gets on average when a tree fit bins it ([`edges_of`]: one
/// per distinct value, at most [`MAX_BINS`] + 1), estimated on rows spread evenly over the table
/// (up to [`BIN_SAMPLE_CELLS`] values, so a continuous feature of a large table may read fewer
/// distinct values than it has). For the cost estimate: a split's scan is per bin.
pub(crate) fn mean_bins(table: &super::table::Table<'_>) -> f64 {
    let features = table.features.max(1);
    let rows = table.values.len() / features;
    let wanted = (BIN_SAMPLE_CELLS / features).max(16);
    let step = rows.div_ceil(wanted).max(1);
    let mut column = Vec::new();
    let mut total = 0usize;
    for feature in 0..features {
        column.clear();
        column.extend(
            (0..rows)
                .step_by(step)
                .map(|row| table.values[row * features + feature])
                .filter(|value| value.is_finite()),
        );
        column.sort_by(f32::total_cmp);
        column.dedup();
        total += column.len().clamp(1, MAX_BINS + 1);
    }
    total as f64 / features as f64
}

/// The bin of `value` among `edges`.
fn bin_of(edges: &[f32], value: f32) -> u8 {
    // Not a number: `value > edge` is false for every edge, bin 0.
    edges.partition_point(|&edge| value > edge).min(MAX_BINS) as u8
}

impl Binned {
    /// Bins `rows` of the row-major `values` (`features` per row).
    pub(crate) fn new(values: &[f32], features: usize, rows: &[usize]) -> Self {
        let n = rows.len();
        let mut edges = Vec::with_capacity(features);
        let mut bins = vec![0u8; features * n];
        for feature in 0..features {
            let column: Vec<f32> = rows
                .iter()
                .map(|&row| values[row * features + feature])
                .collect();
            let feature_edges = edges_of(column.clone());
            for (slot, &value) in bins[feature * n..(feature + 1) * n].iter_mut().zip(&column) {
                *slot = bin_of(&feature_edges, value);
            }
            edges.push(feature_edges);
        }
        Self {
            edges,
            bins,
            rows: n,
        }
    }
}

/// A fitted tree, flattened in pre-order: a split's left child follows it, `next` is its right
/// child; a leaf's `next` indexes its values in `leaves` (`width` each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// The feature each node splits on (`u32::MAX` for a leaf).
    pub feature: Vec<u32>,
    /// Rows with a value above the threshold go right; others (and values that are not numbers)
    /// go left.
    pub threshold: Vec<f32>,
    /// The right child of a split, the leaf index of a leaf.
    pub next: Vec<u32>,
    /// The leaves' values, `width` per leaf.
    pub leaves: Vec<f32>,
    /// Values per leaf.
    pub width: u32,
}

impl Tree {
    /// The values of the leaf `row` falls into.
    pub fn leaf(&self, row: &[f32]) -> &[f32] {
        let width = self.width as usize;
        let mut node = 0;
        loop {
            let feature = self.feature[node];
            let next = self.next[node] as usize;
            if feature == LEAF {
                return &self.leaves[next * width..(next + 1) * width];
            }
            let value = row.get(feature as usize).copied().unwrap_or(0.0);
            node = if value > self.threshold[node] {
                next
            } else {
                node + 1
            };
        }
    }

    /// True when the tree is well formed for rows of `features` values and leaves of `width`
    /// values (a checkpoint read from disk is checked before it predicts: every path moves
    /// forward and ends at a leaf in range).
    pub fn is_valid(&self, features: usize, width: usize) -> bool {
        let nodes = self.feature.len();
        if nodes == 0
            || self.threshold.len() != nodes
            || self.next.len() != nodes
            || self.width as usize != width
            || width == 0
            || !self.leaves.len().is_multiple_of(width)
        {
            return false;
        }
        let n_leaves = self.leaves.len() / width;
        (0..nodes).all(|node| {
            let next = self.next[node] as usize;
            if self.feature[node] == LEAF {
                next < n_leaves
            } else {
                (self.feature[node] as usize) < features
                    && node + 1 < nodes
                    && next > node + 1
                    && next < nodes
            }
        })
    }

    /// Multiplies every leaf value by `factor` (the shrinkage of boosting).
    pub(crate) fn scale(&mut self, factor: f32) {
        for value in &mut self.leaves {
            *value *= factor;
        }
    }
}

/// How trees grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GrowParams {
    /// The deepest a leaf may be (the root is at depth 0).
    pub max_depth: usize,
    /// The fewest rows in a leaf.
    pub min_leaf: usize,
    /// The smallest total weight in a leaf.
    pub min_weight: f64,
    /// Added to every node's weight (0 for the forest, 1 for boosting).
    pub lambda: f64,
    /// Features examined per split (fewer than all: a random subset per node, as in a random
    /// forest; more are examined when none of them splits).
    pub features_per_split: usize,
    /// Extremely randomized splits (Geurts, Ernst and Wehenkel, "Extremely randomized trees",
    /// Machine Learning 2006): each feature examined offers one cut, drawn uniformly among the bin
    /// boundaries between the node's lowest and highest bin of that feature, instead of its best
    /// one; the best of those cuts splits the node. The bins being the fit's quantiles, that is
    /// the paper's uniform threshold between the node's minimum and maximum, in quantile space
    /// (robust to a skewed feature's outliers).
    pub random_cuts: bool,
}

/// One tree's growth over binned rows.
pub(crate) struct Grower<'a> {
    binned: &'a Binned,
    /// Per local row, `width` target values.
    targets: &'a [f64],
    /// Per local row, its weight.
    weights: &'a [f64],
    width: usize,
    params: GrowParams,
    tree: Tree,
    order: Vec<usize>,
    hist_sum: Vec<f64>,
    hist_weight: Vec<f64>,
    hist_count: Vec<usize>,
}

/// The best split found at a node.
struct Split {
    gain: f64,
    feature: usize,
    bin: u8,
}

impl<'a> Grower<'a> {
    /// A grower over `binned` rows with `targets` (`width` per row) and `weights`.
    pub(crate) fn new(
        binned: &'a Binned,
        targets: &'a [f64],
        weights: &'a [f64],
        width: usize,
        params: GrowParams,
    ) -> Self {
        Self {
            binned,
            targets,
            weights,
            width,
            params,
            tree: Tree {
                feature: Vec::new(),
                threshold: Vec::new(),
                next: Vec::new(),
                leaves: Vec::new(),
                width: width as u32,
            },
            order: (0..binned.edges.len()).collect(),
            hist_sum: vec![0.0; (MAX_BINS + 1) * width],
            hist_weight: vec![0.0; MAX_BINS + 1],
            hist_count: vec![0; MAX_BINS + 1],
        }
    }

    /// Grows a tree on `rows` (local row indices; repeated for a bootstrap sample).
    pub(crate) fn grow(mut self, rows: &mut [u32], rng: &mut Rng) -> Tree {
        self.node(rows, 0, rng);
        self.tree
    }

    fn score(&self, sum: &[f64], weight: f64) -> f64 {
        let denominator = weight + self.params.lambda;
        if denominator <= 0.0 {
            return 0.0;
        }
        sum.iter().map(|s| s * s).sum::<f64>() / denominator
    }

    fn push_leaf(&mut self, sum: &[f64], weight: f64) -> usize {
        let denominator = weight + self.params.lambda;
        let index = self.tree.feature.len();
        self.tree.feature.push(LEAF);
        self.tree.threshold.push(0.0);
        self.tree
            .next
            .push((self.tree.leaves.len() / self.width.max(1)) as u32);
        for &s in sum {
            let value = if denominator > 0.0 {
                s / denominator
            } else {
                0.0
            };
            self.tree.leaves.push(value as f32);
        }
        index
    }

    fn node(&mut self, rows: &mut [u32], depth: usize, rng: &mut Rng) -> usize {
        let width = self.width;
        let mut sum = vec![0.0; width];
        let mut weight = 0.0;
        for &row in rows.iter() {
            let row = row as usize;
            weight += self.weights[row];
            for (s, t) in sum
                .iter_mut()
                .zip(&self.targets[row * width..(row + 1) * width])
            {
                *s += t;
            }
        }
        let min_leaf = self.params.min_leaf.max(1);
        if depth >= self.params.max_depth || rows.len() < 2 * min_leaf {
            return self.push_leaf(&sum, weight);
        }
        let Some(split) = self.best_split(rows, &sum, weight, rng) else {
            return self.push_leaf(&sum, weight);
        };
        // Partition: rows in bins up to `split.bin` go left.
        let n = self.binned.rows;
        let column = &self.binned.bins[split.feature * n..(split.feature + 1) * n];
        let mut boundary = 0;
        for index in 0..rows.len() {
            if column[rows[index] as usize] <= split.bin {
                rows.swap(index, boundary);
                boundary += 1;
            }
        }
        let index = self.tree.feature.len();
        self.tree.feature.push(split.feature as u32);
        self.tree
            .threshold
            .push(self.binned.edges[split.feature][split.bin as usize]);
        self.tree.next.push(0);
        let (left, right) = rows.split_at_mut(boundary);
        self.node(left, depth + 1, rng);
        let right_index = self.node(right, depth + 1, rng);
        self.tree.next[index] = right_index as u32;
        index
    }

    fn best_split(
        &mut self,
        rows: &[u32],
        sum: &[f64],
        weight: f64,
        rng: &mut Rng,
    ) -> Option<Split> {
        let width = self.width;
        let features = self.order.len();
        let wanted = self.params.features_per_split.clamp(1, features.max(1));
        let parent = self.score(sum, weight);
        let min_leaf = self.params.min_leaf.max(1);
        let n = self.binned.rows;
        let mut best: Option<Split> = None;
        let mut left_sum = vec![0.0; width];
        for position in 0..features {
            if position >= wanted && best.is_some() {
                break;
            }
            if wanted < features {
                // A partial Fisher-Yates shuffle: the features examined are a random subset.
                let pick = position + rng.below((features - position) as u64) as usize;
                self.order.swap(position, pick);
            }
            let feature = self.order[position];
            let n_bins = self.binned.edges[feature].len() + 1;
            if n_bins < 2 {
                continue; // constant on these rows' fit
            }
            let column = &self.binned.bins[feature * n..(feature + 1) * n];
            self.hist_sum[..n_bins * width].fill(0.0);
            self.hist_weight[..n_bins].fill(0.0);
            self.hist_count[..n_bins].fill(0);
            for &row in rows {
                let row = row as usize;
                let bin = column[row] as usize;
                self.hist_weight[bin] += self.weights[row];
                self.hist_count[bin] += 1;
                for (s, t) in self.hist_sum[bin * width..(bin + 1) * width]
                    .iter_mut()
                    .zip(&self.targets[row * width..(row + 1) * width])
                {
                    *s += t;
                }
            }
            // Under random cuts, the one boundary this feature offers (none when the node's
            // rows all fall in one bin).
            let random_cut = if self.params.random_cuts {
                let lowest = self.hist_count[..n_bins].iter().position(|&c| c > 0);
                let highest = self.hist_count[..n_bins].iter().rposition(|&c| c > 0);
                match (lowest, highest) {
                    (Some(lowest), Some(highest)) if lowest < highest => {
                        Some(lowest + rng.below((highest - lowest) as u64) as usize)
                    }
                    _ => continue,
                }
            } else {
                None
            };
            left_sum.fill(0.0);
            let (mut left_weight, mut left_count) = (0.0, 0usize);
            for bin in 0..n_bins - 1 {
                left_weight += self.hist_weight[bin];
                left_count += self.hist_count[bin];
                for (s, h) in left_sum
                    .iter_mut()
                    .zip(&self.hist_sum[bin * width..(bin + 1) * width])
                {
                    *s += h;
                }
                if let Some(cut) = random_cut {
                    if bin != cut {
                        continue;
                    }
                } else if self.hist_count[bin] == 0 && bin > 0 {
                    continue; // same partition as the bin before
                }
                let right_count = rows.len() - left_count;
                let right_weight = weight - left_weight;
                if left_count < min_leaf || right_count < min_leaf {
                    continue;
                }
                if left_weight < self.params.min_weight || right_weight < self.params.min_weight {
                    continue;
                }
                let right_denominator = right_weight + self.params.lambda;
                let right_score = if right_denominator > 0.0 {
                    sum.iter()
                        .zip(&left_sum)
                        .map(|(s, l)| (s - l) * (s - l))
                        .sum::<f64>()
                        / right_denominator
                } else {
                    0.0
                };
                let gain = self.score(&left_sum, left_weight) + right_score - parent;
                if gain > 1e-12 * parent.abs().max(1e-12)
                    && gain.is_finite()
                    && best.as_ref().is_none_or(|best| gain > best.gain)
                {
                    best = Some(Split {
                        gain,
                        feature,
                        bin: bin as u8,
                    });
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grow(values: &[f32], features: usize, targets: &[f64], params: GrowParams) -> Tree {
        let n = values.len() / features;
        let rows: Vec<usize> = (0..n).collect();
        let binned = Binned::new(values, features, &rows);
        let weights = vec![1.0; n];
        let width = targets.len() / n;
        let mut local: Vec<u32> = (0..n as u32).collect();
        Grower::new(&binned, targets, &weights, width, params).grow(&mut local, &mut Rng::new(1))
    }

    const DEEP: GrowParams = GrowParams {
        max_depth: 8,
        min_leaf: 1,
        min_weight: 0.0,
        lambda: 0.0,
        features_per_split: usize::MAX,
        random_cuts: false,
    };

    #[test]
    fn a_tree_splits_a_separable_feature_once() {
        // Feature 0 is noise, feature 1 separates the classes at 0.5.
        let values = [0.3, 0.1, 0.9, 0.2, 0.1, 0.8, 0.5, 0.9, 0.7, 0.4, 0.2, 0.6];
        let classes = [0, 0, 1, 1, 0, 1];
        let targets: Vec<f64> = classes
            .iter()
            .flat_map(|&c| if c == 0 { [1.0, 0.0] } else { [0.0, 1.0] })
            .collect();
        let tree = grow(&values, 2, &targets, DEEP);
        assert_eq!(tree.feature.len(), 3, "{tree:?}");
        assert_eq!(tree.feature[0], 1);
        assert!(
            (tree.threshold[0] - 0.5).abs() < 1e-6,
            "{}",
            tree.threshold[0]
        );
        assert!(tree.is_valid(2, 2));
        for (row, &class) in values.chunks(2).zip(&classes) {
            let leaf = tree.leaf(row);
            assert_eq!(leaf[class], 1.0, "{row:?}");
        }
        // Not a number goes left, with the small values.
        assert_eq!(tree.leaf(&[0.0, f32::NAN]), &[1.0, 0.0]);
    }

    #[test]
    fn random_cuts_still_separate_and_differ_from_the_best_cut() {
        // One feature, classes split at 10 of 20 evenly spaced values: the best cut is at the
        // boundary; a random cut lands anywhere, and the tree keeps cutting until it is pure.
        let values: Vec<f32> = (0..20).map(|i| i as f32).collect();
        let targets: Vec<f64> = (0..20)
            .flat_map(|i| if i < 10 { [1.0, 0.0] } else { [0.0, 1.0] })
            .collect();
        let best = grow(&values, 1, &targets, DEEP);
        assert_eq!(best.feature.len(), 3);
        let random = GrowParams {
            random_cuts: true,
            max_depth: 32,
            ..DEEP
        };
        let mut thresholds = Vec::new();
        for seed in 0..8 {
            let n = values.len();
            let rows: Vec<usize> = (0..n).collect();
            let binned = Binned::new(&values, 1, &rows);
            let weights = vec![1.0; n];
            let mut local: Vec<u32> = (0..n as u32).collect();
            let tree = Grower::new(&binned, &targets, &weights, 2, random)
                .grow(&mut local, &mut Rng::new(seed));
            assert!(tree.is_valid(1, 2));
            for (i, value) in values.iter().enumerate() {
                let class = usize::from(i >= 10);
                assert_eq!(
                    tree.leaf(&[*value])[class],
                    1.0,
                    "seed {seed}, value {value}"
                );
            }
            thresholds.push(tree.threshold[0]);
        }
        // The root's cut varies with the seed, and is not always the best one.
        assert!(
            thresholds.iter().any(|&t| (t - thresholds[0]).abs() > 1e-6),
            "{thresholds:?}"
        );
        let best_cut = best.threshold[0];
        assert!(
            thresholds.iter().any(|&t| (t - best_cut).abs() > 1e-6),
            "{thresholds:?}"
        );
    }

    #[test]
    fn constant_features_and_one_row_give_a_leaf() {
        let tree = grow(&[1.0, 1.0, 1.0, 1.0], 2, &[3.0, 5.0], DEEP);
        assert_eq!(tree.feature, vec![LEAF]);
        assert_eq!(tree.leaf(&[0.0, 0.0]), &[4.0]);
        let tree = grow(&[2.0], 1, &[7.0], DEEP);
        assert_eq!(tree.leaf(&[9.0]), &[7.0]);
    }

    #[test]
    fn many_values_are_binned_by_quantiles() {
        let values: Vec<f32> = (0..10_000).map(|i| i as f32 / 7.0).collect();
        let edges = edges_of(values.clone());
        assert!(
            edges.len() < MAX_BINS && edges.len() > 200,
            "{}",
            edges.len()
        );
        assert!(edges.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(bin_of(&edges, f32::NEG_INFINITY), 0);
        assert_eq!(bin_of(&edges, f32::NAN), 0);
        assert_eq!(bin_of(&edges, f32::INFINITY) as usize, edges.len());
    }

    #[test]
    fn a_malformed_tree_is_refused() {
        let mut tree = grow(&[0.0, 1.0], 1, &[0.0, 1.0], DEEP);
        assert!(tree.is_valid(1, 1));
        assert!(!tree.is_valid(0, 1));
        tree.next[0] = 0; // a loop
        assert!(!tree.is_valid(1, 1));
    }
}
