//! The f_k input normalization of LANGUAGE.md section 5: inputs are min-max scaled to `[0,1]` per
//! channel (the last dimension of a dense input) over the training split, then mapped by
//! `f_k(x) = -x^(2k) + x^k`. The per-channel minimum and maximum are non-trainable variables of the
//! model's `VarStore`, so a checkpoint carries them.

use tch::{Tensor, nn};

use crate::data::numel;

/// The fitted transform, part of a model.
#[derive(Debug)]
pub struct Normalizer {
    k: u32,
    minimum: Tensor,
    maximum: Tensor,
}

impl Normalizer {
    /// Creates the variables (`norm/minimum`, `norm/maximum`, one per channel) under `path`.
    pub fn new(path: &nn::Path<'_>, k: u32, channels: i64) -> Self {
        let path = path / "norm";
        Self {
            k,
            minimum: path.zeros_no_train("minimum", &[channels]),
            maximum: path.ones_no_train("maximum", &[channels]),
        }
    }

    /// Sets the per-channel range from the training rows of a dense buffer (`shape` of one input, the
    /// channel being its last dimension).
    pub fn fit(&mut self, values: &[f32], shape: &[i64], rows: &[usize]) {
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

    /// Applies the transform to a batch whose last dimension is the channel.
    pub fn apply(&self, xs: &Tensor) -> Tensor {
        let range = (&self.maximum - &self.minimum).clamp_min(1e-12);
        let scaled = ((xs - &self.minimum) / range).clamp(0.0, 1.0);
        let k = i64::from(self.k);
        -scaled.pow_tensor_scalar(2 * k) + scaled.pow_tensor_scalar(k)
    }
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
}
