//! MultiRocket: MiniRocket's kernels over the series and its first-order difference, four pooling
//! operators per bias, and the same ridge classifier.
//!
//! Tan, Dempster, Bergmeir and Webb, "MultiRocket: multiple pooling operators and transformations
//! for fast and effective time series classification", Data Mining and Knowledge Discovery 2022
//! (reference code: `github.com/ChangWeiTan/MultiRocket`). Over MiniRocket (`minirocket.rs`, whose
//! transform, alternating padding and ridge this reuses): a second transform, fitted on the first
//! differences `x[c][t + 1] - x[c][t]` (its own dilations, channel subsets and biases from the same
//! seed's next stream), and four features per bias `b` over the pooled output `y` (length `n`)
//! instead of one:
//! - PPV, the proportion of positive values: `|{t : y[t] > b}| / n`;
//! - MPV, the mean of the positive values: the mean of `y[t] - b` over those `t` (0 when none);
//! - MIPV, the mean of the indices of the positive values, over `n` (-1 when none);
//! - LSPV, the longest stretch of consecutive positive values, over `n`.
//!
//! MIPV and LSPV are divided by `n` (the reference leaves them in steps): a series of another
//! length then reads on the same scale, which variable-length apps need; the features are
//! standardized before the ridge anyway. The feature budget is `DEFAULT_BIASES` biases per
//! representation, four features each: 25,000 features, half the paper's default, since the ridge
//! here is solved in the dual and its Gram matrix costs `n^2` per feature.

use serde::{Deserialize, Serialize};

use super::minirocket::{RidgeClassifier, Series, SeriesClasses, Transform, series};
use super::{ClassicModel, Clock, Learner};
use crate::data::{Examples, Sequences};
use crate::error::Result;
use crate::infer::Prediction;

/// Biases per representation (four features each).
pub const DEFAULT_BIASES: usize = 3_125;

/// Features per bias.
pub const POOLING_OPERATORS: usize = 4;

/// The seed of the difference transform: the run's seed moved to another stream.
const DIFFERENCE_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The four pooled features of one bias (see the module documentation).
pub fn pool(pooled: &[f32], bias: f32) -> [f32; 4] {
    let n = pooled.len();
    if n == 0 {
        return [0.0, 0.0, -1.0, 0.0];
    }
    let mut count = 0usize;
    let mut sum = 0f64;
    let mut index_sum = 0f64;
    let mut stretch = 0usize;
    let mut longest = 0usize;
    for (t, &value) in pooled.iter().enumerate() {
        if value > bias {
            count += 1;
            sum += f64::from(value - bias);
            index_sum += t as f64;
            stretch += 1;
            longest = longest.max(stretch);
        } else {
            stretch = 0;
        }
    }
    let n = n as f64;
    if count == 0 {
        return [0.0, 0.0, -1.0, 0.0];
    }
    let count = count as f64;
    [
        (count / n) as f32,
        (sum / count) as f32,
        (index_sum / count / n) as f32,
        (longest as f64 / n) as f32,
    ]
}

/// The features of one series under one transform: four per bias, in the transform's order.
fn pooled_features(transform: &Transform, series: &Series, features: &mut Vec<f32>) {
    transform.for_each_pooled(series, |pooled, biases| {
        for &bias in biases {
            features.extend(pool(pooled, bias));
        }
    });
}

/// The features of one series: four per bias of `transform` over it, then four per bias of
/// `difference` over its first-order differences.
fn features(transform: &Transform, difference: &Transform, series: &Series) -> Vec<f32> {
    let mut features =
        Vec::with_capacity(POOLING_OPERATORS * (transform.n_features() + difference.n_features()));
    pooled_features(transform, series, &mut features);
    pooled_features(
        difference,
        &series.difference(transform.channels),
        &mut features,
    );
    features
}

/// A fitted MultiRocket classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiRocket {
    /// The transform of the series.
    pub transform: Transform,
    /// The transform of their first-order differences.
    pub difference: Transform,
    /// The standardization and the ridge classifier over both transforms' features.
    #[serde(flatten)]
    pub ridge: RidgeClassifier,
}

impl MultiRocket {
    /// The features of one series (see [`features`]).
    fn features(&self, series: &Series) -> Vec<f32> {
        features(&self.transform, &self.difference, series)
    }

    /// Whether both transforms and the classifier agree (one channel count, four features a bias).
    pub fn is_valid(&self) -> bool {
        self.transform.is_valid()
            && self.difference.is_valid()
            && self.transform.channels == self.difference.channels
            && self.ridge.is_valid(
                POOLING_OPERATORS * (self.transform.n_features() + self.difference.n_features()),
            )
    }

    /// The decision value of each class for `row` of `sequences`.
    pub fn decision(&self, sequences: &Sequences, row: usize) -> Vec<f64> {
        self.ridge.decision(&self.features(&series(sequences, row)))
    }

    /// The predicted class of `row`; probabilities are a softmax of the decision values.
    pub fn predict(&self, sequences: &Sequences, row: usize) -> Prediction {
        super::minirocket::softmax_prediction(&self.decision(sequences, row))
    }
}

/// MultiRocket's learner: one setting, the biases per representation (the ridge's alpha is chosen
/// inside each fit by leave-one-out); each fit draws its transforms from the run's seed.
pub(crate) struct MultiRocketLearner<'a> {
    data: SeriesClasses<'a>,
    seed: u64,
}

impl<'a> MultiRocketLearner<'a> {
    /// The learner over sequence inputs with class targets, `None` for other examples.
    pub(crate) fn new(examples: &'a Examples, seed: u64) -> Option<Self> {
        SeriesClasses::of(examples).map(|data| Self { data, seed })
    }
}

impl Learner for MultiRocketLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        vec![DEFAULT_BIASES as f64]
    }

    fn fit(&mut self, rows: &[usize], setting: f64, clock: &Clock) -> Result<ClassicModel> {
        let biases = setting.max(1.0) as usize;
        let sequences = self.data.sequences;
        let channels = sequences.step.max(1) as usize;
        let transform = Transform::fit_on(
            &|row| series(sequences, row),
            channels,
            rows,
            biases,
            self.seed,
        )?;
        let difference = Transform::fit_on(
            &|row| series(sequences, row).difference(channels),
            channels,
            rows,
            biases,
            self.seed ^ DIFFERENCE_SEED,
        )?;
        let ridge = self.data.fit_ridge(rows, clock, "multirocket", |series| {
            features(&transform, &difference, series)
        })?;
        Ok(ClassicModel::MultiRocket(Box::new(MultiRocket {
            transform,
            difference,
            ridge,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_pooling_operators_follow_their_definitions() {
        // Positive (above 1.0) at t = 1, 2, 4: PPV 3/6, MPV ((2-1)+(4-1)+(3-1))/3 = 2, MIPV
        // (1+2+4)/3/6, LSPV 2/6.
        let pooled = [0.5, 2.0, 4.0, 1.0, 3.0, -1.0];
        let [ppv, mpv, mipv, lspv] = pool(&pooled, 1.0);
        assert!((ppv - 0.5).abs() < 1e-6, "{ppv}");
        assert!((mpv - 2.0).abs() < 1e-6, "{mpv}");
        assert!((mipv - 7.0 / 18.0).abs() < 1e-6, "{mipv}");
        assert!((lspv - 2.0 / 6.0).abs() < 1e-6, "{lspv}");
        // Nothing above the bias, and nothing pooled.
        assert_eq!(pool(&pooled, 10.0), [0.0, 0.0, -1.0, 0.0]);
        assert_eq!(pool(&[], 0.0), [0.0, 0.0, -1.0, 0.0]);
    }

    #[test]
    fn the_difference_is_one_step_shorter_per_channel() {
        // Two channels, three steps (step-major in, channel-major out).
        let sequences = Sequences {
            step: 2,
            values: vec![1.0, 10.0, 3.0, 20.0, 6.0, 40.0],
            offsets: vec![0, 3],
        };
        let difference = series(&sequences, 0).difference(2);
        assert_eq!(difference.length, 2);
        assert_eq!(difference.values, vec![2.0, 3.0, 10.0, 20.0]);
        let empty = Sequences {
            step: 1,
            values: vec![],
            offsets: vec![0, 0],
        };
        assert_eq!(series(&empty, 0).difference(1).length, 0);
    }
}
