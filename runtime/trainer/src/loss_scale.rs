//! Dynamic loss scaling for float16 mixed precision (issue 47, item 2: "keep fp16 + loss scaling
//! where bf16 is absent"): PyTorch's `GradScaler` rule, applied by [`crate::optim::Adam`] when a
//! run's forward passes autocast to float16 ([`crate::precision::Precision::Float16`], a CUDA
//! device without bfloat16 arithmetic: V100, T4 and older).
//!
//! float16 has five exponent bits: gradients below about 6e-8 flush to zero, so small gradients
//! of a deep network vanish. The loss is multiplied by the scale before the backward pass, which
//! shifts the gradients into float16's range; they are divided by it again (in float32, the
//! variables' type) before Adam's step. A step whose gradients hold an infinity or a NaN (the
//! scale too large) is skipped, Adam's state untouched, and the scale halved; after
//! [`GROWTH_INTERVAL`] steps in a row with finite gradients it doubles. The scale starts at
//! [`INITIAL_SCALE`].
//!
//! Invariants:
//! - the scale is a power of two (multiplying and dividing by it is exact in floating point, so a
//!   step taken is the step unscaled training would take, up to float16's own rounding);
//! - a skipped step changes no variable and no moment or step count of Adam;
//! - gradients that are not finite at every scale down to [`MIN_SCALE`] (a NaN the scale does not
//!   cause) are an error that fails the trial, never an endless run of skipped steps.
//!
//! Bfloat16 (float32's exponent range) and float32 need no scaling: [`LossScaler::for_precision`]
//! gives none for them, and their steps are exactly as before.

use tch::Tensor;

use crate::precision::Precision;

/// The first scale: 2^16, PyTorch's `GradScaler` default.
pub const INITIAL_SCALE: f64 = 65536.0;

/// Finite steps in a row after which the scale doubles (PyTorch's default).
pub const GROWTH_INTERVAL: u32 = 2000;

/// The smallest scale tried (2^-24, float16's smallest subnormal): below it a non-finite
/// gradient is not an overflow the scale causes.
pub const MIN_SCALE: f64 = 1.0 / 16_777_216.0;

/// The largest scale it grows to (2^24): float16's largest value is 65504, so a larger factor
/// only overflows.
pub const MAX_SCALE: f64 = 16_777_216.0;

/// A dynamic loss scale (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct LossScaler {
    scale: f64,
    finite_steps: u32,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            scale: INITIAL_SCALE,
            finite_steps: 0,
        }
    }
}

impl LossScaler {
    /// The scaler a run in `precision` needs: one for float16, none otherwise.
    pub fn for_precision(precision: Precision) -> Option<LossScaler> {
        (precision == Precision::Float16).then(LossScaler::default)
    }

    /// The current scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The loss to call `backward` on: `loss` times the scale.
    pub fn scaled(&self, loss: &Tensor) -> Tensor {
        loss * self.scale
    }

    /// Records one step: `finite` when its gradients were all finite (it was taken), else it was
    /// skipped. An error when the scale has fallen below [`MIN_SCALE`] (module documentation).
    pub fn update(&mut self, finite: bool) -> Result<(), String> {
        if finite {
            self.finite_steps += 1;
            if self.finite_steps >= GROWTH_INTERVAL {
                self.scale = (self.scale * 2.0).min(MAX_SCALE);
                self.finite_steps = 0;
            }
            return Ok(());
        }
        self.finite_steps = 0;
        self.scale *= 0.5;
        if self.scale < MIN_SCALE {
            return Err(format!(
                "the gradients are infinite or NaN at every loss scale down to {MIN_SCALE:e}: not \
                 float16 overflow (try a smaller learning rate, or turn mixed precision off with \
                 {}=off)",
                crate::precision::MIXED_PRECISION_ENV
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::unscale_gradients;
    use crate::optim::Adam;
    use tch::{Device, Kind, nn};

    /// A store with one variable `w` = [0.5, -1.0, 2.0, 0.25] and Adam over it, scaled or not.
    fn adam(scaler: Option<LossScaler>) -> (nn::VarStore, Tensor, Adam) {
        let store = nn::VarStore::new(Device::Cpu);
        let w = store
            .root()
            .var_copy("w", &Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25]));
        let mut adam = Adam::with_defaults(&store, 0.01).unwrap();
        adam.set_loss_scaler(scaler);
        (store, w, adam)
    }

    fn values(tensor: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(tensor.detach()).unwrap()
    }

    #[test]
    fn gradients_are_unscaled_in_place_and_non_finite_ones_found() {
        let a = Tensor::from_slice(&[2.0f32, 4.0]);
        let b = Tensor::from_slice(&[-8.0f32]);
        assert!(!unscale_gradients(&[&a, &b], 0.5).unwrap());
        assert_eq!(values(&a), vec![1.0, 2.0]);
        assert_eq!(values(&b), vec![-4.0]);
        let c = Tensor::from_slice(&[1.0f32, f32::INFINITY]);
        assert!(unscale_gradients(&[&a, &c], 0.5).unwrap());
        let d = Tensor::from_slice(&[f32::NAN]);
        assert!(unscale_gradients(&[&d], 1.0).unwrap());
        assert!(!unscale_gradients(&[], 1.0).unwrap());
    }

    #[test]
    fn a_scaled_step_is_the_unscaled_step() {
        let (_plain_store, plain_w, mut plain) = adam(None);
        let (_scaled_store, scaled_w, mut scaled) = adam(Some(LossScaler::default()));
        let x = Tensor::from_slice(&[1e-3f32, 2e-4, -3e-3, 5e-5]);
        for _ in 0..5 {
            for (w, adam) in [(&plain_w, &mut plain), (&scaled_w, &mut scaled)] {
                let loss = (w * &x).sum(Kind::Float) + (w * w).sum(Kind::Float) * 1e-3;
                adam.backward_step(&loss).unwrap();
            }
        }
        assert_eq!(values(&plain_w), values(&scaled_w));
        assert_ne!(values(&plain_w), vec![0.5, -1.0, 2.0, 0.25]);
        assert_eq!(
            scaled.loss_scaler().map(LossScaler::scale),
            Some(INITIAL_SCALE)
        );
        assert_eq!(scaled.header().steps, plain.header().steps);
    }

    #[test]
    fn an_overflowing_step_is_skipped_and_the_scale_backs_off() {
        let (_store, w, mut adam) = adam(Some(LossScaler::default()));
        let before = values(&w);
        // The backward pass multiplies the scale by 1e35 before the 1e-30 of the forward: it
        // overflows float32 at every scale above 2^11 (1e35 x 2^12 > 3.4e38), while the
        // gradient itself (1e5) is finite.
        let mut skipped = 0;
        loop {
            let loss = (&w * 1e-30).sum(Kind::Float) * 1e35;
            adam.backward_step(&loss).unwrap();
            if values(&w) != before {
                break;
            }
            skipped += 1;
            // A skipped step leaves Adam's state as it was.
            assert_eq!(adam.header().steps["w"], 0);
            assert!(skipped < 10, "never stepped");
        }
        assert_eq!(skipped, 5);
        assert_eq!(adam.loss_scaler().map(LossScaler::scale), Some(2048.0));
        assert_eq!(adam.header().steps["w"], 1);
        // Adam's first step moves every variable by the learning rate against its gradient's sign.
        for (after, before) in values(&w).iter().zip(&before) {
            assert!(
                (before - after - 0.01).abs() < 1e-6,
                "{after} from {before}"
            );
        }
    }

    #[test]
    fn gradients_that_no_scale_makes_finite_fail_the_step() {
        let (_store, w, mut adam) = adam(Some(LossScaler::default()));
        let before = values(&w);
        let mut steps = 0;
        let error = loop {
            let loss = (&w * f64::NAN).sum(Kind::Float);
            match adam.backward_step(&loss) {
                Ok(()) => steps += 1,
                Err(error) => break error,
            }
            assert!(steps <= 40);
        };
        assert_eq!(steps, 40);
        assert!(matches!(error, crate::Error::MixedPrecision(_)), "{error}");
        assert_eq!(values(&w), before);
    }

    #[test]
    fn only_float16_is_scaled() {
        assert_eq!(
            LossScaler::for_precision(Precision::Float16).map(|s| s.scale()),
            Some(INITIAL_SCALE)
        );
        assert_eq!(LossScaler::for_precision(Precision::BFloat16), None);
        assert_eq!(LossScaler::for_precision(Precision::Float32), None);
    }

    #[test]
    fn the_scale_halves_on_overflow_and_doubles_after_the_interval() {
        let mut scaler = LossScaler::default();
        scaler.update(false).unwrap();
        assert_eq!(scaler.scale(), INITIAL_SCALE / 2.0);
        for _ in 0..GROWTH_INTERVAL - 1 {
            scaler.update(true).unwrap();
        }
        assert_eq!(scaler.scale(), INITIAL_SCALE / 2.0);
        // A skipped step starts the count again.
        scaler.update(false).unwrap();
        for _ in 0..GROWTH_INTERVAL - 1 {
            scaler.update(true).unwrap();
        }
        assert_eq!(scaler.scale(), INITIAL_SCALE / 4.0);
        scaler.update(true).unwrap();
        assert_eq!(scaler.scale(), INITIAL_SCALE / 2.0);
        // It never grows past MAX_SCALE.
        let mut scaler = LossScaler {
            scale: MAX_SCALE,
            finite_steps: GROWTH_INTERVAL - 1,
        };
        scaler.update(true).unwrap();
        assert_eq!(scaler.scale(), MAX_SCALE);
        let scaled = scaler.scaled(&Tensor::from(0.5f32));
        assert_eq!(scaled.double_value(&[]), 0.5 * MAX_SCALE);
    }

    #[test]
    fn gradients_not_finite_at_any_scale_are_an_error() {
        let mut scaler = LossScaler::default();
        let mut halvings = 0;
        let error = loop {
            match scaler.update(false) {
                Ok(()) => halvings += 1,
                Err(error) => break error,
            }
        };
        // From 2^16 down to 2^-24: 40 halvings succeed, the 41st falls below the floor.
        assert_eq!(halvings, 40);
        assert!(
            error.contains("infinite or NaN at every loss scale"),
            "{error}"
        );
        assert!(error.contains("EASEML_MIXED_PRECISION=off"), "{error}");
    }
}
