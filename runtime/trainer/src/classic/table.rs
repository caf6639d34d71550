//! The tabular examples as the table models (`gbdt`, `random_forest`, `knn`, `kernel_ridge`) see them: a row of
//! `features` values per example and its target (a class, or `outputs` values), and the share of
//! the run's time limit one fit may use.

use super::Clock;
use crate::data::{Examples, Inputs, Targets, numel};

/// The target column of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Class indices in `0..n_classes`.
    Classes { n_classes: usize, labels: &'a [i64] },
    /// `outputs` real values per example.
    Values { outputs: usize, values: &'a [f32] },
}

/// Dense rows with their targets, borrowed from the run's examples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table<'a> {
    /// Values per row.
    pub features: usize,
    /// Every row, row-major.
    pub values: &'a [f32],
    /// The targets.
    pub target: Target<'a>,
}

impl<'a> Table<'a> {
    /// The table of dense examples with class or real-valued targets, `None` for other examples.
    pub(crate) fn of(examples: &'a Examples) -> Option<Self> {
        let Inputs::Dense { shape, values } = &examples.inputs else {
            return None;
        };
        let features = numel(shape);
        if features == 0 {
            return None;
        }
        let target = match &examples.targets {
            Targets::Classes { n_classes, labels } => Target::Classes {
                n_classes: usize::try_from(*n_classes).ok().filter(|&n| n >= 1)?,
                labels,
            },
            Targets::Dense { shape, values } => Target::Values {
                outputs: numel(shape).max(1),
                values,
            },
            _ => return None,
        };
        Some(Self {
            features,
            values,
            target,
        })
    }

    /// The values of `row`.
    pub(crate) fn row(&self, row: usize) -> &'a [f32] {
        &self.values[row * self.features..(row + 1) * self.features]
    }

    /// The width of a prediction: classes, or output values.
    pub(crate) fn outputs(&self) -> usize {
        match self.target {
            Target::Classes { n_classes, .. } => n_classes,
            Target::Values { outputs, .. } => outputs,
        }
    }

    /// True for class targets.
    pub(crate) fn is_classification(&self) -> bool {
        matches!(self.target, Target::Classes { .. })
    }

    /// The targets of `rows` as `outputs()` values each: one-hot classes, or the values.
    pub(crate) fn target_matrix(&self, rows: &[usize]) -> Vec<f64> {
        let width = self.outputs();
        let mut matrix = vec![0.0; rows.len() * width];
        for (position, &row) in rows.iter().enumerate() {
            let slot = &mut matrix[position * width..(position + 1) * width];
            match self.target {
                Target::Classes { labels, .. } => {
                    if let Some(value) = usize::try_from(labels[row])
                        .ok()
                        .and_then(|label| slot.get_mut(label))
                    {
                        *value = 1.0;
                    }
                }
                Target::Values { values, .. } => {
                    for (value, &target) in
                        slot.iter_mut().zip(&values[row * width..(row + 1) * width])
                    {
                        *value = f64::from(target);
                    }
                }
            }
        }
        matrix
    }
}

/// At most `limit` of `rows`, evenly spaced, in their order.
pub(crate) fn evenly_spaced(rows: &[usize], limit: usize) -> Vec<usize> {
    if rows.len() <= limit {
        return rows.to_vec();
    }
    (0..limit).map(|i| rows[i * rows.len() / limit]).collect()
}

/// The standardization of `rows` of `table`: per feature, its mean and its standard deviation
/// over those rows (a constant feature 1; values that are not finite are left out). Not
/// `standardized`: means 0 and scales 1 (the raw features).
pub(crate) fn standardization(
    table: &Table<'_>,
    rows: &[usize],
    standardized: bool,
) -> (Vec<f32>, Vec<f32>) {
    let features = table.features;
    let mut mean = vec![0.0f32; features];
    let mut scale = vec![1.0f32; features];
    for feature in (0..features).filter(|_| standardized) {
        let (mut count, mut sum, mut squares) = (0.0f64, 0.0f64, 0.0f64);
        for &row in rows {
            let value = f64::from(table.row(row)[feature]);
            if value.is_finite() {
                count += 1.0;
                sum += value;
                squares += value * value;
            }
        }
        if count > 0.0 {
            let m = sum / count;
            let variance = (squares / count - m * m).max(0.0);
            mean[feature] = m as f32;
            let std = variance.sqrt() as f32;
            scale[feature] = if std.is_finite() && std > 1e-12 {
                std
            } else {
                1.0
            };
        }
    }
    (mean, scale)
}

/// `row` standardized into `out` (`(value - mean) / scale`; a missing or non-finite result is 0,
/// the mean).
pub(crate) fn standardize_into(mean: &[f32], scale: &[f32], row: &[f32], out: &mut [f32]) {
    for (index, slot) in out.iter_mut().enumerate() {
        let value = row.get(index).copied().unwrap_or(f32::NAN);
        let z = (value - mean[index]) / scale[index];
        *slot = if z.is_finite() { z } else { 0.0 };
    }
}

/// Hands each fit of a run an equal share of the time left: a fit that can stop early (adding
/// trees) stops at its share's end, so the later settings and folds still get their turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeShares {
    fits_left: usize,
}

impl TimeShares {
    /// Shares for `fits` fits (settings times validation sets).
    pub(crate) fn new(fits: usize) -> Self {
        Self { fits_left: fits }
    }

    /// The elapsed seconds (on `clock`) at which the next fit should stop; infinite for a clock
    /// without limit (the refit under k-fold).
    pub(crate) fn next_deadline(&mut self, clock: &Clock) -> f64 {
        if !clock.limit.is_finite() {
            return f64::INFINITY;
        }
        let elapsed = clock.elapsed();
        let left = (clock.limit - elapsed).max(0.0);
        let share = left / self.fits_left.max(1) as f64;
        self.fits_left = self.fits_left.saturating_sub(1);
        elapsed + share
    }
}
