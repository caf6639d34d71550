//! easeml-stats: the numeric pieces that the multi-tenant scheduler (`easeml-scheduler`) and
//! TrimTuner (`easeml-tuner`) share, so that the tuner, and the libtorch trainer above it, need not
//! link the scheduler: the standard normal density and distribution function (one implementation
//! for GP-EI, the expected regret and TrimTuner's entropy search) and the shapes of the stationary
//! kernels (RBF, Matern 5/2); and the Wilson interval of a measured accuracy, for the client's
//! status report; and the validation protocol a run's quality was measured by ([`protocol`]), one
//! grammar for the trainer that records it and the store, engine and client that read it. Pure
//! Rust, no dependencies but serde.

pub mod protocol;

/// The shape of the stationary part of the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// Squared exponential: `exp(-r^2 / 2)`.
    Rbf,
    /// Matern with smoothness 5/2: `(1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r)`.
    Matern52,
}

impl KernelKind {
    /// The kernel shape at scaled distance `r = distance / length_scale`.
    pub fn shape(self, scaled_distance: f64) -> f64 {
        match self {
            KernelKind::Rbf => (-0.5 * scaled_distance * scaled_distance).exp(),
            KernelKind::Matern52 => {
                let sqrt5_r = 5f64.sqrt() * scaled_distance;
                (1.0 + sqrt5_r + 5.0 / 3.0 * scaled_distance * scaled_distance) * (-sqrt5_r).exp()
            }
        }
    }

    /// The derivative of [`KernelKind::shape`] with respect to `log(length_scale)`.
    pub fn shape_derivative_log_length_scale(self, scaled_distance: f64) -> f64 {
        let r = scaled_distance;
        match self {
            KernelKind::Rbf => r * r * (-0.5 * r * r).exp(),
            KernelKind::Matern52 => {
                let sqrt5_r = 5f64.sqrt() * r;
                5.0 / 3.0 * r * r * (1.0 + sqrt5_r) * (-sqrt5_r).exp()
            }
        }
    }
}

/// The standard normal density.
pub fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal distribution function (via a Chebyshev-fitted `erfc`, |error| < 1.2e-7).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * complementary_error_function(-z / std::f64::consts::SQRT_2)
}

/// `erfc(x)` (Numerical Recipes' `erfcc`), relative error below 1.2e-7 everywhere.
fn complementary_error_function(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let polynomial = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * polynomial.exp();
    if x >= 0.0 { value } else { 2.0 - value }
}

/// The Wilson score interval of a proportion: `successes` of `trials` at the two-sided normal
/// quantile `z` (1.96 for 95%). Unlike the mean plus or minus `z` standard errors it stays inside
/// [0, 1] and is honest near 0 and 1 (a perfect score on 20 examples is [0.84, 1], not [1, 1]).
/// `None` for no trials.
pub fn wilson_interval(successes: f64, trials: f64, z: f64) -> Option<(f64, f64)> {
    if trials.is_nan() || trials <= 0.0 || !successes.is_finite() {
        return None;
    }
    let p = (successes / trials).clamp(0.0, 1.0);
    let z2 = z * z;
    let denominator = 1.0 + z2 / trials;
    let centre = (p + z2 / (2.0 * trials)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / trials + z2 / (4.0 * trials * trials)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// The two-sided 95% quantile of the standard normal distribution.
pub const Z_95: f64 = 1.959_963_984_540_054;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_distribution_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_254).abs() < 1e-6);
        assert!((normal_pdf(0.0) - 0.398_942_280).abs() < 1e-9);
    }

    #[test]
    fn the_wilson_interval_matches_known_values_and_stays_in_range() {
        // 0.952 on 142 examples: the textbook interval.
        let (low, high) = wilson_interval(135.0, 142.0, Z_95).unwrap();
        assert!(
            (low - 0.9018).abs() < 1e-3 && (high - 0.9759).abs() < 1e-3,
            "{low} {high}"
        );
        let (low, high) = wilson_interval(20.0, 20.0, Z_95).unwrap();
        assert!((low - 0.8389).abs() < 1e-3 && high == 1.0, "{low} {high}");
        let (low, high) = wilson_interval(0.0, 10.0, Z_95).unwrap();
        assert!(low == 0.0 && (high - 0.2775).abs() < 1e-3, "{low} {high}");
        assert_eq!(wilson_interval(1.0, 0.0, Z_95), None);
    }

    #[test]
    fn kernel_shapes_start_at_one_and_fall() {
        for kind in [KernelKind::Rbf, KernelKind::Matern52] {
            assert!((kind.shape(0.0) - 1.0).abs() < 1e-12);
            assert!(kind.shape(1.0) < 1.0 && kind.shape(2.0) < kind.shape(1.0));
            assert_eq!(kind.shape_derivative_log_length_scale(0.0), 0.0);
        }
    }
}
