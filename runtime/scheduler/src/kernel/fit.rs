//! Fitting the kernel to the quality history: the history prepared (column means, the known
//! entries), the log marginal likelihood and its gradient, the hyperparameters' fit within their
//! bounds, and the history covariance's weight chosen by cross-validation.

use super::*;

/// Squared Euclidean distances between quality vectors, the residual rows, and the prior means.
pub(super) struct PreparedHistory {
    pub(super) model_ids: Vec<String>,
    pub(super) prior_mean_by_model: Vec<f64>,
    pub(super) squared_distances: DMatrix<f64>,
    /// models x users residuals (quality - prior mean), imputed entries are 0.
    pub(super) residuals: DMatrix<f64>,
}

/// Each model (column of `history`) with at least one known entry, in column order, and the mean
/// of its known entries: the one definition of a model's mean over the history, on whatever scale
/// the history is.
pub(super) fn known_column_means(history: &QualityHistory) -> Vec<(usize, f64)> {
    (0..history.model_ids.len())
        .filter_map(|model| {
            let (sum, count) = history
                .rows
                .iter()
                .filter_map(|row| row[model])
                .fold((0.0, 0usize), |(sum, count), q| (sum + q, count + 1));
            (count > 0).then(|| (model, sum / count as f64))
        })
        .collect()
}

pub(super) fn prepare_history(history: &QualityHistory) -> Result<PreparedHistory> {
    let n_models = history.model_ids.len();
    for (row_index, row) in history.rows.iter().enumerate() {
        if row.len() != n_models {
            return Err(SchedulerError::Kernel(format!(
                "history row {row_index} has {} entries, expected {n_models}",
                row.len()
            )));
        }
        if row.iter().flatten().any(|quality| !quality.is_finite()) {
            return Err(SchedulerError::Kernel(format!(
                "history row {row_index} has a non-finite quality"
            )));
        }
    }
    // Only models with at least one known quality count as "with history".
    let (known_models, prior_mean_by_model): (Vec<usize>, Vec<f64>) =
        known_column_means(history).into_iter().unzip();
    let model_ids = known_models
        .iter()
        .map(|&model| history.model_ids[model].clone())
        .collect::<Vec<_>>();
    let n_known = known_models.len();
    let n_users = history.rows.len();
    // Features: quality vectors, a missing cell imputed with that user's mean quality.
    let mut features = DMatrix::<f64>::zeros(n_known, n_users);
    let mut residuals = DMatrix::<f64>::zeros(n_known, n_users);
    for (user, row) in history.rows.iter().enumerate() {
        let known: Vec<f64> = row.iter().flatten().copied().collect();
        let user_mean = if known.is_empty() {
            0.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        for (known_index, &model) in known_models.iter().enumerate() {
            features[(known_index, user)] = row[model].unwrap_or(user_mean);
            residuals[(known_index, user)] = row[model]
                .map(|quality| quality - prior_mean_by_model[known_index])
                .unwrap_or(0.0);
        }
    }
    let mut squared_distances = DMatrix::<f64>::zeros(n_known, n_known);
    for a in 0..n_known {
        for b in (a + 1)..n_known {
            let mut sum = 0.0;
            for user in 0..n_users {
                let difference = features[(a, user)] - features[(b, user)];
                sum += difference * difference;
            }
            squared_distances[(a, b)] = sum;
            squared_distances[(b, a)] = sum;
        }
    }
    Ok(PreparedHistory {
        model_ids,
        prior_mean_by_model,
        squared_distances,
        residuals,
    })
}

/// The latent covariance matrix (no noise) for the given squared distances.
pub(super) fn latent_covariance(
    kind: KernelKind,
    hyperparameters: &KernelHyperparameters,
    squared_distances: &DMatrix<f64>,
) -> DMatrix<f64> {
    let n = squared_distances.nrows();
    DMatrix::from_fn(n, n, |a, b| {
        let scaled = squared_distances[(a, b)].sqrt() / hyperparameters.length_scale;
        hyperparameters.offset_variance + hyperparameters.signal_variance * kind.shape(scaled)
    })
}

/// Log marginal likelihood per history row (the value of
/// [`log_marginal_likelihood_with_gradient`] without the O(n^3) inverse the gradient needs).
pub fn log_marginal_likelihood(
    kind: KernelKind,
    hyperparameters: &KernelHyperparameters,
    squared_distances: &DMatrix<f64>,
    residuals: &DMatrix<f64>,
) -> Result<f64> {
    let n = squared_distances.nrows();
    let n_rows = residuals.ncols().max(1) as f64;
    let mut kernel = latent_covariance(kind, hyperparameters, squared_distances);
    for i in 0..n {
        kernel[(i, i)] += hyperparameters.noise_variance;
    }
    let cholesky = kernel
        .cholesky()
        .ok_or_else(|| SchedulerError::Kernel("kernel matrix is not positive definite".into()))?;
    let alpha = cholesky.solve(residuals);
    let data_fit: f64 = residuals.component_mul(&alpha).sum() / n_rows;
    let log_determinant: f64 = 2.0 * cholesky.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    Ok(
        -0.5 * data_fit
            - 0.5 * log_determinant
            - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln(),
    )
}

/// Log marginal likelihood per history row, and its gradient with respect to the log parameters
/// `[log signal_variance, log length_scale, log noise_variance, log offset_variance]`.
///
/// With `R` rows `y_r` (columns of `residuals`) and `K` the kernel matrix plus noise:
/// `L = -1/(2R) sum_r y_r' K^-1 y_r - 1/2 log|K| - n/2 log(2 pi)` and
/// `dL/dtheta = 1/2 tr((A A'/R - K^-1) dK/dtheta)` with `A = K^-1 Y`.
pub fn log_marginal_likelihood_with_gradient(
    kind: KernelKind,
    hyperparameters: &KernelHyperparameters,
    squared_distances: &DMatrix<f64>,
    residuals: &DMatrix<f64>,
) -> Result<(f64, [f64; 4])> {
    let n = squared_distances.nrows();
    let n_rows = residuals.ncols().max(1) as f64;
    let mut kernel = latent_covariance(kind, hyperparameters, squared_distances);
    for i in 0..n {
        kernel[(i, i)] += hyperparameters.noise_variance;
    }
    let cholesky = kernel
        .cholesky()
        .ok_or_else(|| SchedulerError::Kernel("kernel matrix is not positive definite".into()))?;
    let alpha = cholesky.solve(residuals);
    let data_fit: f64 = residuals.component_mul(&alpha).sum() / n_rows;
    let log_determinant: f64 = 2.0 * cholesky.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    let value = -0.5 * data_fit
        - 0.5 * log_determinant
        - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
    let inverse = cholesky.inverse();
    let weight = &alpha * alpha.transpose() / n_rows - inverse;
    let mut gradient = [0.0; 4];
    for a in 0..n {
        for b in 0..n {
            let w = weight[(a, b)];
            let scaled = squared_distances[(a, b)].sqrt() / hyperparameters.length_scale;
            gradient[0] += w * hyperparameters.signal_variance * kind.shape(scaled);
            gradient[1] += w
                * hyperparameters.signal_variance
                * kind.shape_derivative_log_length_scale(scaled);
            gradient[3] += w * hyperparameters.offset_variance;
        }
        gradient[2] += weight[(a, a)] * hyperparameters.noise_variance;
    }
    for component in &mut gradient {
        *component *= 0.5;
    }
    Ok((value, gradient))
}

/// Bounds in log space, relative to the data: keeps the optimiser away from degenerate kernels.
pub(super) struct LogBounds {
    lower: [f64; 4],
    upper: [f64; 4],
}

impl LogBounds {
    fn clamp(&self, mut log_parameters: [f64; 4]) -> [f64; 4] {
        for (index, value) in log_parameters.iter_mut().enumerate() {
            *value = value.clamp(self.lower[index], self.upper[index]);
        }
        log_parameters
    }
}

pub(super) fn fit_hyperparameters(
    kind: KernelKind,
    prepared: &PreparedHistory,
) -> KernelHyperparameters {
    let n_models = prepared.squared_distances.nrows();
    if n_models < 2 || prepared.residuals.ncols() < 2 {
        return KernelHyperparameters::default();
    }
    let residual_variance =
        (prepared.residuals.norm_squared() / (prepared.residuals.len() as f64)).max(1e-6);
    let mut distances: Vec<f64> = Vec::new();
    for a in 0..n_models {
        for b in (a + 1)..n_models {
            let distance = prepared.squared_distances[(a, b)].sqrt();
            if distance > 0.0 {
                distances.push(distance);
            }
        }
    }
    distances.sort_by(f64::total_cmp);
    let median_distance = distances.get(distances.len() / 2).copied().unwrap_or(1.0);
    let min_distance = distances.first().copied().unwrap_or(1.0).max(1e-6);
    let max_distance = distances.last().copied().unwrap_or(1.0).max(1e-6);
    let bounds = LogBounds {
        lower: [
            (residual_variance * 1e-3).ln(),
            (min_distance * 0.1).ln(),
            (residual_variance * 1e-4).max(1e-8).ln(),
            (residual_variance * 1e-4).ln(),
        ],
        upper: [
            (residual_variance * 10.0).ln(),
            (max_distance * 10.0).ln(),
            (residual_variance * 2.0).ln(),
            (residual_variance * 10.0).ln(),
        ],
    };
    let evaluate = |log_parameters: [f64; 4]| {
        log_marginal_likelihood_with_gradient(
            kind,
            &KernelHyperparameters::from_log(log_parameters),
            &prepared.squared_distances,
            &prepared.residuals,
        )
        .ok()
        .filter(|(value, gradient)| value.is_finite() && gradient.iter().all(|g| g.is_finite()))
    };
    let evaluate_value = |log_parameters: [f64; 4]| {
        log_marginal_likelihood(
            kind,
            &KernelHyperparameters::from_log(log_parameters),
            &prepared.squared_distances,
            &prepared.residuals,
        )
        .ok()
        .filter(|value| value.is_finite())
    };
    // Grid start (values only).
    let mut best: Option<([f64; 4], f64)> = None;
    for length_factor in [0.25, 0.5, 1.0, 2.0] {
        for noise_factor in [0.02, 0.2] {
            let start = bounds.clamp(
                KernelHyperparameters {
                    signal_variance: residual_variance * 0.7,
                    length_scale: median_distance * length_factor,
                    noise_variance: residual_variance * noise_factor,
                    offset_variance: residual_variance * 0.3,
                }
                .to_log(),
            );
            if let Some(value) = evaluate_value(start)
                && best
                    .as_ref()
                    .is_none_or(|(_, best_value)| value > *best_value)
            {
                best = Some((start, value));
            }
        }
    }
    let Some((mut point, _)) = best else {
        return KernelHyperparameters::default();
    };
    let Some((mut value, mut gradient)) = evaluate(point) else {
        return KernelHyperparameters::from_log(point);
    };
    // Gradient ascent in log space with an adaptive step (accept and grow, or halve); a rejected
    // step costs one value, an accepted one value + gradient.
    let mut step = 0.5;
    for _ in 0..30 {
        let gradient_norm = gradient.iter().map(|g| g * g).sum::<f64>().sqrt();
        if gradient_norm < 1e-6 || step < 1e-3 {
            break;
        }
        let mut candidate = point;
        for index in 0..4 {
            candidate[index] += step * gradient[index] / gradient_norm;
        }
        let candidate = bounds.clamp(candidate);
        match evaluate_value(candidate) {
            Some(candidate_value) if candidate_value > value => match evaluate(candidate) {
                Some((candidate_value, candidate_gradient)) => {
                    point = candidate;
                    value = candidate_value;
                    gradient = candidate_gradient;
                    step *= 1.5;
                }
                None => step *= 0.5,
            },
            _ => step *= 0.5,
        }
    }
    KernelHyperparameters::from_log(point)
}

/// The weight of [`HISTORY_COVARIANCE_WEIGHTS`] under which the held-out rows of `residuals`
/// (models x rows) are most likely, with `S` from the other folds' rows (see the module
/// documentation); 0 when no weight can be scored.
pub(super) fn cross_validated_weight(
    parametric: &DMatrix<f64>,
    noise_variance: f64,
    residuals: &DMatrix<f64>,
) -> f64 {
    let n_models = parametric.nrows();
    let n_rows = residuals.ncols();
    let folds = CROSS_VALIDATION_FOLDS.min(n_rows);
    if folds < 2 || n_models == 0 {
        return 0.0;
    }
    let log_two_pi = (2.0 * std::f64::consts::PI).ln();
    let mut scores = [0.0; HISTORY_COVARIANCE_WEIGHTS.len()];
    let mut scored = [true; HISTORY_COVARIANCE_WEIGHTS.len()];
    for fold in 0..folds {
        let held_out: Vec<usize> = (fold..n_rows).step_by(folds).collect();
        let kept: Vec<usize> = (0..n_rows).filter(|row| row % folds != fold).collect();
        let kept_residuals = residuals.select_columns(&kept);
        let sample = &kept_residuals * kept_residuals.transpose() / kept.len() as f64;
        let held_out_residuals = residuals.select_columns(&held_out);
        for (index, &weight) in HISTORY_COVARIANCE_WEIGHTS.iter().enumerate() {
            if !scored[index] {
                continue;
            }
            let mut covariance = parametric * (1.0 - weight) + &sample * weight;
            for i in 0..n_models {
                covariance[(i, i)] += noise_variance;
            }
            let Some(cholesky) = covariance.cholesky() else {
                scored[index] = false;
                continue;
            };
            let log_determinant: f64 =
                2.0 * cholesky.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
            let alpha = cholesky.solve(&held_out_residuals);
            let data_fit = held_out_residuals.component_mul(&alpha).sum();
            scores[index] += -0.5 * data_fit
                - 0.5 * held_out.len() as f64 * (log_determinant + n_models as f64 * log_two_pi);
        }
    }
    HISTORY_COVARIANCE_WEIGHTS
        .iter()
        .zip(scores)
        .zip(scored)
        .filter(|((_, score), scored)| *scored && score.is_finite())
        .max_by(|((_, a), _), ((_, b), _)| a.total_cmp(b))
        .map(|((&weight, _), _)| weight)
        .unwrap_or(0.0)
}
