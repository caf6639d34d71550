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
use crate::train::{
    Budget, CurvePoint, LearningRateTrial, Refit, RunOutcome, TrainedRun, Validation,
};

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

/// The training run of the tree-kernel SVM (called by [`crate::train`]): `C` is chosen on the
/// validation `sets` of the run's protocol (the split's one pair, or the folds: the best mean), and
/// under k-fold the SVM served is refit on every example with that `C`.
pub(crate) fn train_run(
    candidate: &Candidate,
    examples: &Examples,
    task: &Task,
    budget: &Budget,
    validation: Validation,
    sets: &[(Vec<usize>, Vec<usize>)],
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
    let k_fold = matches!(validation, Validation::KFold { .. });
    // The kernel matrix over every row some SVM trains on (under the split its training part;
    // under k-fold every row, each being in the training part of every fold but its own).
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
    // One SVM on `rows` (rows of the examples) with regularization `c`.
    let fit = |rows: &[usize], c: f64| -> TreeKernelSvm {
        let positions: Vec<usize> = rows.iter().map(|&row| position[row]).collect();
        let sub: Vec<Vec<f64>> = positions
            .iter()
            .map(|&i| positions.iter().map(|&j| matrix[i][j]).collect())
            .collect();
        let coefficients: Vec<Vec<f64>> = (0..*n_classes)
            .map(|class| {
                let binary: Vec<f64> = rows
                    .iter()
                    .map(|&row| if labels[row] == class { 1.0 } else { -1.0 })
                    .collect();
                solve_binary(&sub, &binary, c, 200)
            })
            .collect();
        // Keep only the support trees.
        let used: Vec<usize> = (0..rows.len())
            .filter(|&i| coefficients.iter().any(|class| class[i] != 0.0))
            .collect();
        TreeKernelSvm {
            kernel,
            support: used.iter().map(|&i| trees[rows[i]].clone()).collect(),
            self_kernels: used.iter().map(|&i| self_kernels[positions[i]]).collect(),
            coefficients: coefficients
                .iter()
                .map(|class| used.iter().map(|&i| class[i]).collect())
                .collect(),
        }
    };
    let mut trials = Vec::new();
    let mut curve = Vec::new();
    // (mean quality, sample std, C, the SVM of the best fold)
    let mut best: Option<(f64, f64, f64, TreeKernelSvm)> = None;
    for (trial_index, c) in [1.0, 10.0].into_iter().enumerate() {
        let mut qualities = Vec::new();
        let mut best_fold: Option<(f64, TreeKernelSvm)> = None;
        for (fold, (train_rows, validation_rows)) in sets.iter().enumerate() {
            let svm = fit(train_rows, c);
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
                fold: k_fold.then_some(fold),
                seed: budget.seed ^ trial_index as u64,
                epochs: 1,
                best_quality: Some(quality),
                best_epoch: Some(1),
                failure: None,
            });
            qualities.push(quality);
            if best_fold.as_ref().is_none_or(|(best, _)| quality > *best) {
                best_fold = Some((quality, svm));
            }
        }
        let Some((_, svm)) = best_fold else { continue };
        let mean = qualities.iter().sum::<f64>() / qualities.len() as f64;
        let std = if qualities.len() < 2 {
            0.0
        } else {
            (qualities.iter().map(|q| (q - mean).powi(2)).sum::<f64>()
                / (qualities.len() - 1) as f64)
                .sqrt()
        };
        if best
            .as_ref()
            .is_none_or(|(best_mean, ..)| mean > *best_mean)
        {
            best = Some((mean, std, c, svm));
        }
    }
    let mut quality_std = None;
    let mut refit = None;
    let outcome = match best {
        Some((quality, std, c, svm)) => {
            let svm = if k_fold {
                quality_std = Some(std);
                let all_rows: Vec<usize> = (0..trees.len()).collect();
                refit = Some(Refit {
                    learning_rate: c,
                    seed: budget.seed,
                    planned_epochs: 1,
                    epochs: 1,
                    fallback: None,
                });
                fit(&all_rows, c)
            } else {
                svm
            };
            RunOutcome::Succeeded {
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
            }
        }
        None => RunOutcome::Failed {
            reason: "no SVM trained".into(),
        },
    };
    let (n_train, n_validation) = match (k_fold, sets.first()) {
        (false, Some((train_rows, validation_rows))) => (train_rows.len(), validation_rows.len()),
        _ => (trees.len(), trees.len()),
    };
    Ok(TrainedRun {
        candidate: candidate.id(),
        outcome,
        cost_seconds: started.elapsed().as_secs_f64(),
        curve,
        trials,
        n_train,
        n_validation,
        validation,
        quality_std,
        refit,
    })
}
