//! The tree-kernel SVM: a real kernel method over trees, not a tch module.
//!
//! The kernel is a subtree kernel in the style of Collins and Duffy, with a Gaussian similarity of
//! node values: for nodes `a`, `b`, `C(a,b) = lambda * s(a,b) * prod_i (1 + C(a_i, b_i))` when they
//! have the same number of children, else `lambda * s(a,b)`, with `s(a,b) = exp(-gamma |x_a - x_b|^2)`;
//! `K(T,U) = sum over node pairs of C`, normalized to `K(T,U) / sqrt(K(T,T) K(U,U))`, plus 1 (a bias).
//! Training is one-vs-rest dual coordinate descent for the hinge-loss SVM (Hsieh et al. 2008) over
//! the precomputed kernel matrix; the regularization `C` is chosen on validation from {1, 10}. The
//! checkpoint keeps the support trees and their coefficients (in the metadata's `extra`).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::checkpoint::{Checkpoint, CheckpointMeta};
use crate::data::{Examples, Inputs, Targets, Tree};
use crate::error::{Error, Result};
use crate::infer::Prediction;
use crate::task::Task;
use crate::train::{Budget, CurvePoint, LearningRateTrial, RunOutcome, TrainedRun};

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

/// The training run of the tree-kernel SVM (called by [`crate::train`]).
pub(crate) fn train_run(
    candidate: &Candidate,
    examples: &Examples,
    task: &Task,
    budget: &Budget,
    train_rows: &[usize],
    validation_rows: &[usize],
    started: Instant,
) -> Result<TrainedRun> {
    let (Inputs::Trees { trees, .. }, Targets::Classes { n_classes, labels }) =
        (&examples.inputs, &examples.targets)
    else {
        return Err(Error::CandidateDoesNotFit {
            candidate: candidate.id(),
            task: task.name().to_owned(),
        });
    };
    let kernel = TreeKernel {
        lambda: 0.5,
        gamma: 1.0,
    };
    let train_trees: Vec<&Tree> = train_rows.iter().map(|&row| &trees[row]).collect();
    let self_kernels: Vec<f64> = train_trees
        .iter()
        .map(|tree| kernel.raw(tree, tree))
        .collect();
    let n = train_trees.len();
    let mut matrix = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in i..n {
            let value = normalized(
                kernel.raw(train_trees[i], train_trees[j]),
                self_kernels[i],
                self_kernels[j],
            );
            matrix[i][j] = value;
            matrix[j][i] = value;
        }
    }
    let mut trials = Vec::new();
    let mut curve = Vec::new();
    let mut best: Option<(f64, f64, TreeKernelSvm)> = None;
    for (trial_index, c) in [1.0, 10.0].into_iter().enumerate() {
        let coefficients: Vec<Vec<f64>> = (0..*n_classes)
            .map(|class| {
                let binary: Vec<f64> = train_rows
                    .iter()
                    .map(|&row| if labels[row] == class { 1.0 } else { -1.0 })
                    .collect();
                solve_binary(&matrix, &binary, c, 200)
            })
            .collect();
        // Keep only the support trees.
        let used: Vec<usize> = (0..n)
            .filter(|&i| coefficients.iter().any(|class| class[i] != 0.0))
            .collect();
        let svm = TreeKernelSvm {
            kernel,
            support: used.iter().map(|&i| train_trees[i].clone()).collect(),
            self_kernels: used.iter().map(|&i| self_kernels[i]).collect(),
            coefficients: coefficients
                .iter()
                .map(|class| used.iter().map(|&i| class[i]).collect())
                .collect(),
        };
        let correct = validation_rows
            .iter()
            .filter(|&&row| {
                matches!(svm.predict(&trees[row]), Prediction::Class { index, .. } if index == labels[row])
            })
            .count();
        let quality = correct as f64 / validation_rows.len().max(1) as f64;
        curve.push(CurvePoint {
            learning_rate: c,
            epoch: 1,
            train_loss: 0.0,
            validation_quality: quality,
            seconds: started.elapsed().as_secs_f64(),
        });
        trials.push(LearningRateTrial {
            learning_rate: c,
            seed: budget.seed ^ trial_index as u64,
            epochs: 1,
            best_quality: Some(quality),
            failure: None,
        });
        if best
            .as_ref()
            .is_none_or(|(best_quality, ..)| quality > *best_quality)
        {
            best = Some((quality, c, svm));
        }
    }
    let outcome = match best {
        Some((quality, c, svm)) => RunOutcome::Succeeded {
            checkpoint: Checkpoint {
                meta: CheckpointMeta {
                    candidate: candidate.id(),
                    task: task.clone(),
                    config: budget.model,
                    learning_rate: c,
                    seed: budget.seed,
                    extra: Some(serde_json::to_value(&svm)?),
                },
                weights: Vec::new(),
            },
            quality,
        },
        None => RunOutcome::Failed {
            reason: "no SVM trained".into(),
        },
    };
    Ok(TrainedRun {
        candidate: candidate.id(),
        outcome,
        cost_seconds: started.elapsed().as_secs_f64(),
        curve,
        trials,
        n_train: train_rows.len(),
        n_validation: validation_rows.len(),
    })
}
