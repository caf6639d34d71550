//! The tree-kernel SVM: a real kernel method over trees, not a tch module.
//!
//! The kernel is a subtree kernel in the style of Collins and Duffy, with a Gaussian similarity of
//! node values: for nodes `a`, `b`, `C(a,b) = lambda * s(a,b) * prod_i (1 + C(a_i, b_i))` when they
//! have the same number of children, else `lambda * s(a,b)`, with `s(a,b) = exp(-gamma |x_a - x_b|^2)`;
//! `K(T,U) = sum over node pairs of C`, normalized to `K(T,U) / sqrt(K(T,T) K(U,U))`, plus 1 (a bias).
//! Training is one-vs-rest dual coordinate descent for the hinge-loss SVM (Hsieh et al. 2008) over
//! the precomputed kernel matrix; the regularization `C` is chosen on validation from {1, 10} (the
//! run protocol of every classic model, `super::train_run`). The checkpoint keeps the support trees
//! and their coefficients (in the metadata's `extra`).

use serde::{Deserialize, Serialize};

use super::{ClassicModel, Clock, Learner};
use crate::data::{Examples, Inputs, Targets, Tree};
use crate::error::Result;
use crate::infer::Prediction;

/// The kernel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TreeKernel {
    /// Decay of larger shared fragments.
    pub lambda: f64,
    /// Width of the node-value similarity.
    pub gamma: f64,
}

/// A node of a tree, flattened for the kernel.
struct FlatNode<'a> {
    value: &'a [f32],
    children: Vec<usize>,
}

fn flatten<'a>(tree: &'a Tree, nodes: &mut Vec<FlatNode<'a>>) -> usize {
    let index = nodes.len();
    nodes.push(FlatNode {
        value: &tree.value,
        children: Vec::new(),
    });
    let children = tree
        .children
        .iter()
        .map(|child| flatten(child, nodes))
        .collect();
    nodes[index].children = children;
    index
}

impl TreeKernel {
    /// The unnormalized kernel.
    pub fn raw(&self, a: &Tree, b: &Tree) -> f64 {
        let (mut nodes_a, mut nodes_b) = (Vec::new(), Vec::new());
        flatten(a, &mut nodes_a);
        flatten(b, &mut nodes_b);
        let n_b = nodes_b.len();
        let mut memo = vec![f64::NAN; nodes_a.len() * n_b];
        // Pre-order puts children after parents: fill from the last nodes back.
        for i in (0..nodes_a.len()).rev() {
            for j in (0..n_b).rev() {
                let (node_a, node_b) = (&nodes_a[i], &nodes_b[j]);
                let distance: f64 = node_a
                    .value
                    .iter()
                    .zip(node_b.value)
                    .map(|(x, y)| f64::from(x - y).powi(2))
                    .sum();
                let mut value = self.lambda * (-self.gamma * distance).exp();
                if node_a.children.len() == node_b.children.len() {
                    for (&child_a, &child_b) in node_a.children.iter().zip(&node_b.children) {
                        value *= 1.0 + memo[child_a * n_b + child_b];
                    }
                }
                memo[i * n_b + j] = value;
            }
        }
        memo.iter().sum()
    }
}

/// A trained one-vs-rest SVM over trees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeKernelSvm {
    /// The kernel.
    pub kernel: TreeKernel,
    /// The support trees.
    pub support: Vec<Tree>,
    /// `K(t,t)` of each support tree.
    pub self_kernels: Vec<f64>,
    /// Per class, `alpha_i * y_i` for each support tree.
    pub coefficients: Vec<Vec<f64>>,
}

impl TreeKernelSvm {
    /// Whether the state is one a fit makes (checked on a checkpoint's before it predicts): finite
    /// kernel parameters, a self-kernel per support tree, and per class one coefficient per
    /// support tree.
    pub fn is_valid(&self) -> bool {
        self.kernel.lambda.is_finite()
            && self.kernel.gamma.is_finite()
            && self.self_kernels.len() == self.support.len()
            && !self.coefficients.is_empty()
            && self
                .coefficients
                .iter()
                .all(|class| class.len() == self.support.len())
    }

    fn kernel_with_support(&self, tree: &Tree) -> Vec<f64> {
        let self_kernel = self.kernel.raw(tree, tree);
        self.support
            .iter()
            .zip(&self.self_kernels)
            .map(|(support, &support_self)| {
                normalized(self.kernel.raw(tree, support), self_kernel, support_self)
            })
            .collect()
    }

    /// The decision values per class.
    pub fn decision(&self, tree: &Tree) -> Vec<f64> {
        let kernels = self.kernel_with_support(tree);
        self.coefficients
            .iter()
            .map(|coefficients| coefficients.iter().zip(&kernels).map(|(a, k)| a * k).sum())
            .collect()
    }

    /// The predicted class; probabilities are a softmax of the decision values.
    pub fn predict(&self, tree: &Tree) -> Prediction {
        let decision = self.decision(tree);
        let maximum = decision.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exponentials: Vec<f64> = decision.iter().map(|d| (d - maximum).exp()).collect();
        let total: f64 = exponentials.iter().sum();
        let index = decision
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(index, _)| index as i64)
            .unwrap_or(0);
        Prediction::Class {
            index,
            probabilities: exponentials.iter().map(|e| (e / total) as f32).collect(),
        }
    }
}

fn normalized(raw: f64, self_a: f64, self_b: f64) -> f64 {
    raw / (self_a * self_b).sqrt().max(1e-12) + 1.0
}

/// Dual coordinate descent for one binary problem; returns `alpha_i * y_i`.
fn solve_binary(kernel: &[Vec<f64>], labels: &[f64], c: f64, max_passes: usize) -> Vec<f64> {
    let n = labels.len();
    let mut alpha = vec![0.0; n];
    // decision[i] = sum_j alpha_j y_j K_ij
    let mut decision = vec![0.0; n];
    for _ in 0..max_passes {
        let mut largest_change: f64 = 0.0;
        for i in 0..n {
            let gradient = labels[i] * decision[i] - 1.0;
            let updated = (alpha[i] - gradient / kernel[i][i].max(1e-12)).clamp(0.0, c);
            let change = updated - alpha[i];
            if change != 0.0 {
                alpha[i] = updated;
                for (j, value) in decision.iter_mut().enumerate() {
                    *value += change * labels[i] * kernel[i][j];
                }
                largest_change = largest_change.max(change.abs());
            }
        }
        if largest_change < 1e-6 {
            break;
        }
    }
    alpha.iter().zip(labels).map(|(a, y)| a * y).collect()
}

/// The tree-kernel SVM's learner: the kernel matrix over every row some fit trains on is computed
/// once per run (under the split its training part; under k-fold every row), each fit solves on
/// its sub-matrix; the settings are the regularization `C` in {1, 10}.
pub(crate) struct SvmLearner<'a> {
    kernel: TreeKernel,
    trees: &'a [Tree],
    labels: &'a [i64],
    n_classes: i64,
    /// `position[row]`: the row's index in `matrix`, `usize::MAX` when it is in no training part.
    position: Vec<usize>,
    self_kernels: Vec<f64>,
    matrix: Vec<Vec<f64>>,
}

impl<'a> SvmLearner<'a> {
    /// The learner over tree inputs with class targets, `None` for other examples.
    pub(crate) fn new(examples: &'a Examples, sets: &[(Vec<usize>, Vec<usize>)]) -> Option<Self> {
        let (Inputs::Trees { trees, .. }, Targets::Classes { n_classes, labels }) =
            (&examples.inputs, &examples.targets)
        else {
            return None;
        };
        let kernel = TreeKernel {
            lambda: 0.5,
            gamma: 1.0,
        };
        let mut position = vec![usize::MAX; trees.len()];
        let mut matrix_rows: Vec<usize> = Vec::new();
        for (train_rows, _) in sets {
            for &row in train_rows {
                if position[row] == usize::MAX {
                    position[row] = matrix_rows.len();
                    matrix_rows.push(row);
                }
            }
        }
        let self_kernels: Vec<f64> = matrix_rows
            .iter()
            .map(|&row| kernel.raw(&trees[row], &trees[row]))
            .collect();
        let n = matrix_rows.len();
        let mut matrix = vec![vec![0.0; n]; n];
        for i in 0..n {
            for j in i..n {
                let value = normalized(
                    kernel.raw(&trees[matrix_rows[i]], &trees[matrix_rows[j]]),
                    self_kernels[i],
                    self_kernels[j],
                );
                matrix[i][j] = value;
                matrix[j][i] = value;
            }
        }
        Some(Self {
            kernel,
            trees,
            labels,
            n_classes: *n_classes,
            position,
            self_kernels,
            matrix,
        })
    }

    /// The row's kernel-matrix index, computing its row of the matrix when it has none (the refit
    /// under the split, which trains on rows outside the training part).
    fn ensure(&mut self, row: usize) -> usize {
        if self.position[row] != usize::MAX {
            return self.position[row];
        }
        let index = self.matrix.len();
        let own = self.kernel.raw(&self.trees[row], &self.trees[row]);
        let rows: Vec<usize> = (0..self.position.len())
            .filter(|&other| self.position[other] != usize::MAX)
            .collect();
        let mut new_row = vec![0.0; index + 1];
        for other in rows {
            let j = self.position[other];
            let value = normalized(
                self.kernel.raw(&self.trees[row], &self.trees[other]),
                own,
                self.self_kernels[j],
            );
            new_row[j] = value;
            self.matrix[j].push(value);
        }
        new_row[index] = normalized(own, own, own);
        self.matrix.push(new_row);
        self.self_kernels.push(own);
        self.position[row] = index;
        index
    }
}

impl Learner for SvmLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        vec![1.0, 10.0]
    }

    fn fit(&mut self, rows: &[usize], c: f64, _clock: &Clock) -> Result<ClassicModel> {
        let positions: Vec<usize> = rows.iter().map(|&row| self.ensure(row)).collect();
        let sub: Vec<Vec<f64>> = positions
            .iter()
            .map(|&i| positions.iter().map(|&j| self.matrix[i][j]).collect())
            .collect();
        let coefficients: Vec<Vec<f64>> = (0..self.n_classes)
            .map(|class| {
                let binary: Vec<f64> = rows
                    .iter()
                    .map(|&row| if self.labels[row] == class { 1.0 } else { -1.0 })
                    .collect();
                solve_binary(&sub, &binary, c, 200)
            })
            .collect();
        // Keep only the support trees.
        let used: Vec<usize> = (0..rows.len())
            .filter(|&i| coefficients.iter().any(|class| class[i] != 0.0))
            .collect();
        Ok(ClassicModel::TreeKernelSvm(TreeKernelSvm {
            kernel: self.kernel,
            support: used.iter().map(|&i| self.trees[rows[i]].clone()).collect(),
            self_kernels: used
                .iter()
                .map(|&i| self.self_kernels[positions[i]])
                .collect(),
            coefficients: coefficients
                .iter()
                .map(|class| used.iter().map(|&i| class[i]).collect())
                .collect(),
        }))
    }
}
