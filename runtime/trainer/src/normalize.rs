//! Input transforms fitted on the training split, per channel (the last dimension of a dense input):
//! - the f_k normalization of LANGUAGE.md section 5 (`+norm_kK` candidates): min-max scaled to `[0,1]`,
//!   then mapped by `f_k(x) = -x^(2k) + x^k`;
//! - standardization (`(x - mean) / std`), which every tabular model without f_k gets, as a
//!   scikit-learn pipeline would: feature rows mix scales (a wine's proline is ~1000, its hue ~1), and
//!   MLPs and logistic regression train badly on raw scales;
//!
//! and one output transform, [`OutputScale`]: a tabular regression network's outputs are
//! standardized values, mapped back to the targets' scale (`raw * std + mean`, fitted on the training rows'
//! targets), so it starts at the targets' mean and learns in units of their spread.
//!
//! The fitted statistics are non-trainable variables of the model's `VarStore`, so a checkpoint
//! carries them.

use tch::{Tensor, nn};

use crate::data::numel;

/// The fitted transform, part of a model.
#[derive(Debug)]
pub struct Normalizer {
    /// `Some(k)`: f_k over min-max scaled inputs (`minimum`, `maximum`); `None`: standardization
    /// (`minimum` holds the mean, `maximum` the standard deviation).
    k: Option<u32>,
    minimum: Tensor,
    maximum: Tensor,
}

impl Normalizer {
    /// Creates the f_k variables (`norm/minimum`, `norm/maximum`, one per channel) under `path`.
    pub fn new(path: &nn::Path<'_>, k: u32, channels: i64) -> Self {
        let path = path / "norm";
        Self {
            k: Some(k),
            minimum: path.zeros_no_train("minimum", &[channels]),
            maximum: path.ones_no_train("maximum", &[channels]),
        }
    }

    /// Creates the standardization variables (`standardize/mean`, `standardize/std`) under `path`.
    pub fn standardize(path: &nn::Path<'_>, channels: i64) -> Self {
        let path = path / "standardize";
        Self {
            k: None,
            minimum: path.zeros_no_train("mean", &[channels]),
            maximum: path.ones_no_train("std", &[channels]),
        }
    }

    /// Fits the per-channel statistics on the training rows of a dense buffer (`shape` of one input,
    /// the channel being its last dimension).
    pub fn fit(&mut self, values: &[f32], shape: &[i64], rows: &[usize]) {
        if self.k.is_none() {
            return self.fit_moments(values, shape, rows);
        }
        let channels = shape.last().copied().unwrap_or(1).max(1) as usize;
        let row_len = numel(shape);
        let mut minimum = vec![f32::INFINITY; channels];
        let mut maximum = vec![f32::NEG_INFINITY; channels];
        for &row in rows {
            let start = row * row_len;
            for (offset, &value) in values[start..start + row_len].iter().enumerate() {
                if value.is_finite() {
                    let channel = offset % channels;
                    minimum[channel] = minimum[channel].min(value);
                    maximum[channel] = maximum[channel].max(value);
                }
            }
        }
        for channel in 0..channels {
            if !minimum[channel].is_finite() || !maximum[channel].is_finite() {
                minimum[channel] = 0.0;
                maximum[channel] = 1.0;
            }
        }
        tch::no_grad(|| {
            let device = self.minimum.device();
            self.minimum
                .copy_(&Tensor::from_slice(&minimum).to_device(device));
            self.maximum
                .copy_(&Tensor::from_slice(&maximum).to_device(device));
        });
    }

    fn fit_moments(&mut self, values: &[f32], shape: &[i64], rows: &[usize]) {
        let channels = shape.last().copied().unwrap_or(1).max(1) as usize;
        let (mean, std) = moments(values, numel(shape), channels, rows);
        tch::no_grad(|| {
            let device = self.minimum.device();
            self.minimum
                .copy_(&Tensor::from_slice(&mean).to_device(device));
            self.maximum
                .copy_(&Tensor::from_slice(&std).to_device(device));
        });
    }

    /// Applies the transform to a batch whose last dimension is the channel.
    pub fn apply(&self, xs: &Tensor) -> Tensor {
        let Some(k) = self.k else {
            return (xs - &self.minimum) / &self.maximum;
        };
        let range = (&self.maximum - &self.minimum).clamp_min(1e-12);
        let scaled = ((xs - &self.minimum) / range).clamp(0.0, 1.0);
        let k = i64::from(k);
        -scaled.pow_tensor_scalar(2 * k) + scaled.pow_tensor_scalar(k)
    }
}

/// The name under a model's path of the [`OutputScale`] variables (`output_scale.mean`,
/// `output_scale.std`); checkpoints from before it lack them and load as the identity.
pub(crate) const OUTPUT_SCALE_NAME: &str = "output_scale";

/// A regression network's output transform (see the module documentation): per output value,
/// `raw * std + mean` of the training rows' targets. With Adam (whose steps do not depend on the
/// gradient's scale) the network then trains as on standardized targets, from their mean: on
/// scikit-learn's diabetes data (targets 25-346, mean 152) a linear model's 20 epochs at rate 0.1
/// had reached R^2 0 from an output of 0.
#[derive(Debug)]
pub struct OutputScale {
    mean: Tensor,
    std: Tensor,
}

impl OutputScale {
    /// Creates the identity transform's variables for `outputs` values under `path`.
    pub fn new(path: &nn::Path<'_>, outputs: i64) -> Self {
        let path = path / OUTPUT_SCALE_NAME;
        Self {
            mean: path.zeros_no_train("mean", &[outputs]),
            std: path.ones_no_train("std", &[outputs]),
        }
    }

    /// Fits each output value's mean and standard deviation on the training `rows` of the
    /// targets' dense buffer (`width` values a row; a constant output keeps scale 1).
    pub fn fit(&mut self, values: &[f32], width: usize, rows: &[usize]) {
        let (mean, std) = moments(values, width, width, rows);
        tch::no_grad(|| {
            let device = self.mean.device();
            self.mean
                .copy_(&Tensor::from_slice(&mean).to_device(device));
            self.std.copy_(&Tensor::from_slice(&std).to_device(device));
        });
    }

    /// The outputs on the targets' scale.
    pub fn apply(&self, raw: &Tensor) -> Tensor {
        raw * &self.std + &self.mean
    }
}

/// Each channel's mean and standard deviation over the finite values of the `rows` of a dense
/// buffer (`row_len` values a row, the channel cycling fastest): 0 and 1 for a channel without
/// values, scale 1 for a constant one (it becomes 0 everywhere).
fn moments(
    values: &[f32],
    row_len: usize,
    channels: usize,
    rows: &[usize],
) -> (Vec<f32>, Vec<f32>) {
    let channels = channels.max(1);
    let mut sum = vec![0f64; channels];
    let mut squares = vec![0f64; channels];
    let mut count = vec![0f64; channels];
    for &row in rows {
        let start = row * row_len;
        for (offset, &value) in values[start..start + row_len].iter().enumerate() {
            if value.is_finite() {
                let channel = offset % channels;
                sum[channel] += f64::from(value);
                squares[channel] += f64::from(value) * f64::from(value);
                count[channel] += 1.0;
            }
        }
    }
    let mut mean = vec![0f32; channels];
    let mut std = vec![1f32; channels];
    for channel in 0..channels {
        if count[channel] > 0.0 {
            let m = sum[channel] / count[channel];
            let variance = (squares[channel] / count[channel] - m * m).max(0.0);
            mean[channel] = m as f32;
            // A constant feature keeps scale 1 (it becomes 0 everywhere).
            std[channel] = if variance > 1e-12 {
                variance.sqrt() as f32
            } else {
                1.0
            };
        }
    }
    (mean, std)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn fits_per_channel_and_maps_with_f_k() {
        let store = nn::VarStore::new(Device::Cpu);
        let mut normalizer = Normalizer::new(&store.root(), 1, 2);
        // Two rows of shape [2, 2]: channel 0 spans 0..4, channel 1 spans 10..30.
        let values = [0.0, 10.0, 4.0, 30.0, 2.0, 20.0, 1.0, 10.0];
        normalizer.fit(&values, &[2, 2], &[0, 1]);
        let out = normalizer.apply(&Tensor::from_slice(&[2.0f32, 20.0, 4.0, 10.0]).view([2, 2]));
        let out: Vec<f32> = Vec::try_from(out.flatten(0, -1)).unwrap();
        // x = 0.5 -> -0.25 + 0.5; x = 1 -> 0; x = 0 -> 0.
        assert_eq!(out, vec![0.25, 0.25, 0.0, 0.0]);
    }

    #[test]
    fn the_output_scale_maps_standard_values_to_the_targets_of_the_training_rows() {
        let store = nn::VarStore::new(Device::Cpu);
        let mut scale = OutputScale::new(&store.root(), 2);
        // Identity before it is fitted (a checkpoint from before it loads so).
        let raw = Tensor::from_slice(&[0.0f32, 1.0, -1.0, 2.0]).view([2, 2]);
        let same: Vec<f32> = Vec::try_from(scale.apply(&raw).flatten(0, -1)).unwrap();
        assert_eq!(same, vec![0.0, 1.0, -1.0, 2.0]);
        // Two outputs a row; rows 0 and 1 train (output 0: 100 +- 10; output 1 constant 5),
        // row 2 is not counted.
        let targets = [90.0, 5.0, 110.0, 5.0, 1e6, 1e6];
        scale.fit(&targets, 2, &[0, 1]);
        let mapped: Vec<f32> = Vec::try_from(scale.apply(&raw).flatten(0, -1)).unwrap();
        // 0 -> the mean; 1 and -1 standard deviations; a constant output keeps scale 1.
        assert_eq!(mapped, vec![100.0, 6.0, 90.0, 7.0]);
    }

    #[test]
    fn standardizes_per_feature_on_the_training_rows_only() {
        let store = nn::VarStore::new(Device::Cpu);
        let mut normalizer = Normalizer::standardize(&store.root(), 2);
        // Rows 0 and 1 are training rows; row 2 (an outlier) is not used for the statistics.
        let values = [1.0, 100.0, 3.0, 300.0, 1000.0, 7.0];
        normalizer.fit(&values, &[2], &[0, 1]);
        let out = normalizer.apply(&Tensor::from_slice(&[1.0f32, 300.0, 2.0, 200.0]).view([2, 2]));
        let out: Vec<f32> = Vec::try_from(out.flatten(0, -1)).unwrap();
        assert_eq!(out, vec![-1.0, 1.0, 0.0, 0.0]);
    }
}
