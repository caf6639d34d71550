//! 1-nearest-neighbour classification under dynamic time warping (DTW).
//!
//! The benchmark classifier of time-series classification: Bagnall, Lines, Bostrom, Large and
//! Keogh, "The great time series classification bake off", Data Mining and Knowledge Discovery
//! 2017 (1-NN DTW with a Sakoe-Chiba window chosen on training data); the window from Sakoe and
//! Chiba, "Dynamic programming algorithm optimization for spoken word recognition", IEEE TASSP 1978;
//! the multivariate form "DTW-dependent" of Shokoohi-Yekta, Hu, Jin, Wang and Keogh, "Generalizing
//! DTW to the multi-dimensional case requires an adaptive approach", DMKD 2017; the pruning
//! (LB_Keogh, early abandoning) from Keogh and Ratanamahatana, "Exact indexing of dynamic time
//! warping", KAIS 2005, and Rakthanmanon et al., "Searching and mining trillions of time series
//! subsequences under dynamic time warping", KDD 2012.
//!
//! The distance: the cost of matching two steps is their squared Euclidean distance across the
//! channels, DTW the least total cost of a warping path from the first steps to the last ones with
//! `|i - j| <= w`. The window `w` is a fraction of the longer series (rounded), at least the length
//! difference (so the last steps can meet); the fraction is the run's setting, chosen on validation
//! from {0.1, 0.05, 0.2, 0} (in that order of preference). Series of different lengths are compared
//! as they are, no resampling. A series of length 0 is read as one step of zeros, values that are
//! not finite as 0.
//!
//! The search for a query: a lower bound for every training series (the larger of LB_Kim's first
//! and last steps and LB_Keogh over the query's envelope, generalized to unequal lengths), then DTW
//! in increasing order of the bound, abandoned as soon as a whole row of the dynamic programme is
//! above the best distance so far, skipping series whose bound is not below it. The best distance
//! is kept per class (the probabilities need each class's nearest series).
//!
//! The prediction: the class of the nearest training series (the lowest class index on a tie). Its
//! probabilities: a softmax of `-d_c / d_1`, with `d_c` the distance to the nearest series of class
//! `c` and `d_1` the nearest overall (a class twice as far as the nearest gets `e^-1` of its weight;
//! a class with no training series gets 0). The "fit" stores the training series: the checkpoint
//! holds all of them.

use serde::{Deserialize, Serialize};

use super::minirocket::SeriesClasses;
use super::{ClassicModel, Clock, Learner};
use crate::data::{Examples, Sequences};
use crate::error::Result;
use crate::infer::Prediction;

/// The window fractions of the grid, in order of preference.
pub const WINDOWS: [f64; 4] = [0.1, 0.05, 0.2, 0.0];

/// A series, step-major (`values[t * channels + c]`).
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// Steps.
    pub length: usize,
    /// The values.
    pub values: &'a [f32],
}

/// The steps of `row`, non-finite values read as 0, a length-0 series as one step of zeros.
fn sanitized(sequences: &Sequences, row: usize) -> Vec<f32> {
    let step = sequences.step.max(1) as usize;
    let steps = sequences.steps(row);
    if steps.is_empty() {
        return vec![0.0; step];
    }
    steps
        .iter()
        .map(|&value| if value.is_finite() { value } else { 0.0 })
        .collect()
}

/// The window for series of lengths `a` and `b` at `fraction`.
pub fn window(fraction: f64, a: usize, b: usize) -> usize {
    let relative = (fraction * a.max(b) as f64).round().max(0.0) as usize;
    relative.max(a.abs_diff(b))
}

fn cost(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum()
}

/// DTW between `a` and `b` (`channels` values per step) with window `w` (at least the length
/// difference), `f64::INFINITY` once every cell of a row is at or above `cutoff`.
pub fn dtw(a: View<'_>, b: View<'_>, channels: usize, w: usize, cutoff: f64) -> f64 {
    let (la, lb) = (a.length, b.length);
    if la == 0 || lb == 0 {
        return f64::INFINITY;
    }
    let w = w.max(la.abs_diff(lb));
    let mut previous = vec![f64::INFINITY; lb];
    let mut current = vec![f64::INFINITY; lb];
    for i in 0..la {
        let low = i.saturating_sub(w);
        let high = (i + w).min(lb - 1);
        if low > 0 {
            current[low - 1] = f64::INFINITY;
        }
        if high + 1 < lb {
            current[high + 1] = f64::INFINITY;
        }
        let step_a = &a.values[i * channels..(i + 1) * channels];
        let mut row_minimum = f64::INFINITY;
        for j in low..=high {
            let reached = if i == 0 && j == 0 {
                0.0
            } else {
                let mut best = f64::INFINITY;
                if i > 0 {
                    best = best.min(previous[j]);
                    if j > 0 {
                        best = best.min(previous[j - 1]);
                    }
                }
                if j > 0 {
                    best = best.min(current[j - 1]);
                }
                best
            };
            let value = reached + cost(step_a, &b.values[j * channels..(j + 1) * channels]);
            current[j] = value;
            row_minimum = row_minimum.min(value);
        }
        if row_minimum >= cutoff {
            return f64::INFINITY;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[lb - 1]
}

/// Range minima and maxima of each channel of a series (sparse tables), for its envelope at any
/// window.
struct Envelope {
    length: usize,
    channels: usize,
    /// `levels[k][t * channels + c]`: min and max of channel `c` over `t .. t + 2^k`.
    minima: Vec<Vec<f32>>,
    maxima: Vec<Vec<f32>>,
}

impl Envelope {
    fn new(series: View<'_>, channels: usize) -> Self {
        let length = series.length;
        let mut minima = vec![series.values.to_vec()];
        let mut maxima = vec![series.values.to_vec()];
        let mut span = 1;
        while span * 2 <= length {
            let (last_min, last_max) = (&minima[minima.len() - 1], &maxima[maxima.len() - 1]);
            let count = length - span * 2 + 1;
            let mut next_min = vec![0f32; count * channels];
            let mut next_max = vec![0f32; count * channels];
            for t in 0..count {
                for c in 0..channels {
                    let (x, y) = (t * channels + c, (t + span) * channels + c);
                    next_min[x] = last_min[x].min(last_min[y]);
                    next_max[x] = last_max[x].max(last_max[y]);
                }
            }
            minima.push(next_min);
            maxima.push(next_max);
            span *= 2;
        }
        Self {
            length,
            channels,
            minima,
            maxima,
        }
    }

    /// LB_Keogh of `other` against this series' envelope at window `w`: every step `j` of `other`
    /// is matched to some step of this series within `[j - w, j + w]`.
    fn lb_keogh(&self, other: View<'_>, w: usize, cutoff: f64) -> f64 {
        let channels = self.channels;
        let mut total = 0.0;
        for j in 0..other.length {
            let low = j.saturating_sub(w);
            let high = (j + w).min(self.length - 1);
            if low > high {
                return f64::INFINITY; // no step in reach: no warping path
            }
            let level = (usize::BITS - 1 - (high - low + 1).leading_zeros()) as usize;
            let second = high + 1 - (1 << level);
            for c in 0..channels {
                let lower = self.minima[level][low * channels + c]
                    .min(self.minima[level][second * channels + c]);
                let upper = self.maxima[level][low * channels + c]
                    .max(self.maxima[level][second * channels + c]);
                let value = other.values[j * channels + c];
                if value > upper {
                    total += f64::from(value - upper).powi(2);
                } else if value < lower {
                    total += f64::from(lower - value).powi(2);
                }
            }
            if total >= cutoff {
                return total;
            }
        }
        total
    }
}

/// LB_Kim's ends: the first steps and the last steps are on every warping path.
fn lb_ends(a: View<'_>, b: View<'_>, channels: usize) -> f64 {
    let first = cost(&a.values[..channels], &b.values[..channels]);
    if a.length == 1 && b.length == 1 {
        return first;
    }
    first
        + cost(
            &a.values[(a.length - 1) * channels..a.length * channels],
            &b.values[(b.length - 1) * channels..b.length * channels],
        )
}

/// A fitted 1-NN DTW classifier: the training series themselves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DtwKnn {
    /// The window as a fraction of the longer series.
    pub window: f64,
    /// Values per step.
    pub channels: usize,
    /// The number of classes.
    pub n_classes: usize,
    /// The class of each training series.
    pub labels: Vec<i64>,
    /// `offsets[i]..offsets[i + 1]`: the steps of training series `i`.
    pub offsets: Vec<usize>,
    /// Every training series' steps, back to back (step-major).
    #[serde(with = "super::packed")]
    pub values: Vec<f32>,
}

impl DtwKnn {
    /// Whether the state is one a fit makes (checked on a checkpoint's before it predicts): a
    /// finite window, one label in `0..n_classes` per training series, and offsets from 0 that
    /// never decrease and end at the values' steps.
    pub fn is_valid(&self) -> bool {
        let steps = self.offsets.last().copied().unwrap_or(0);
        self.window.is_finite()
            && self.window >= 0.0
            && self.channels > 0
            && self.n_classes > 0
            && self.offsets.first() == Some(&0)
            && self.offsets.len() == self.labels.len() + 1
            && self.offsets.windows(2).all(|pair| pair[0] <= pair[1])
            && steps.checked_mul(self.channels) == Some(self.values.len())
            && self
                .labels
                .iter()
                .all(|&label| label >= 0 && (label as usize) < self.n_classes)
    }

    fn view(&self, index: usize) -> View<'_> {
        let (start, end) = (self.offsets[index], self.offsets[index + 1]);
        View {
            length: end - start,
            values: &self.values[start * self.channels..end * self.channels],
        }
    }

    /// The DTW distance from `query` to the nearest training series of each class (infinite for a
    /// class with none).
    pub fn class_distances(&self, query: View<'_>) -> Vec<f64> {
        let channels = self.channels;
        let n = self.labels.len();
        let envelope = Envelope::new(query, channels);
        let mut bounds: Vec<(f64, usize)> = (0..n)
            .map(|index| {
                let candidate = self.view(index);
                let w = window(self.window, query.length, candidate.length);
                let ends = lb_ends(query, candidate, channels);
                (
                    ends.max(envelope.lb_keogh(candidate, w, f64::INFINITY)),
                    index,
                )
            })
            .collect();
        bounds.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut best = vec![f64::INFINITY; self.n_classes.max(1)];
        let present: Vec<bool> = (0..best.len())
            .map(|class| self.labels.iter().any(|&label| label as usize == class))
            .collect();
        for (bound, index) in bounds {
            let class = self.labels[index] as usize;
            let Some(&class_best) = best.get(class) else {
                continue;
            };
            let worst = best
                .iter()
                .zip(&present)
                .filter(|(_, present)| **present)
                .map(|(distance, _)| *distance)
                .fold(0.0, f64::max);
            if bound >= worst {
                break; // no later series can improve any class
            }
            if bound >= class_best {
                continue;
            }
            let candidate = self.view(index);
            let w = window(self.window, query.length, candidate.length);
            let distance = dtw(query, candidate, channels, w, class_best);
            if distance < class_best {
                best[class] = distance;
            }
        }
        best
    }

    /// The prediction for `row` of `sequences`.
    pub fn predict(&self, sequences: &Sequences, row: usize) -> Prediction {
        let values = sanitized(sequences, row);
        let query = View {
            length: values.len() / self.channels.max(1),
            values: &values,
        };
        probabilities(&self.class_distances(query))
    }
}

/// The nearest class and a softmax of `-d_c / d_1`.
fn probabilities(distances: &[f64]) -> Prediction {
    let mut index = 0;
    for (class, distance) in distances.iter().enumerate() {
        if *distance < distances[index] {
            index = class;
        }
    }
    let nearest = distances[index];
    let scale = if nearest.is_finite() {
        nearest.max(1e-12)
    } else {
        1.0
    };
    let weights: Vec<f64> = distances
        .iter()
        .map(|&distance| {
            if nearest.is_finite() {
                (-(distance - nearest) / scale).exp()
            } else {
                1.0
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    Prediction::Class {
        index: index as i64,
        probabilities: weights.iter().map(|w| (w / total) as f32).collect(),
    }
}

/// The learner: each setting is a window fraction; a fit keeps the rows' series.
pub(crate) struct DtwLearner<'a> {
    data: SeriesClasses<'a>,
}

impl<'a> DtwLearner<'a> {
    /// The learner over sequence inputs with class targets, `None` for other examples.
    pub(crate) fn new(examples: &'a Examples) -> Option<Self> {
        SeriesClasses::of(examples).map(|data| Self { data })
    }
}

impl Learner for DtwLearner<'_> {
    fn settings(&self) -> Vec<f64> {
        WINDOWS.to_vec()
    }

    fn fit(&mut self, rows: &[usize], window: f64, _clock: &Clock) -> Result<ClassicModel> {
        let channels = self.data.sequences.step.max(1) as usize;
        let mut offsets = vec![0];
        let mut values = Vec::new();
        for &row in rows {
            let steps = sanitized(self.data.sequences, row);
            offsets.push(offsets.last().copied().unwrap_or(0) + steps.len() / channels);
            values.extend(steps);
        }
        Ok(ClassicModel::DtwKnn(DtwKnn {
            window,
            channels,
            n_classes: self.data.n_classes,
            labels: rows.iter().map(|&row| self.data.labels[row]).collect(),
            offsets,
            values,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::Rng;

    fn random(rng: &mut Rng, length: usize, channels: usize) -> Vec<f32> {
        (0..length * channels)
            .map(|_| rng.uniform() * 2.0 - 1.0)
            .collect()
    }

    fn view(values: &[f32], channels: usize) -> View<'_> {
        View {
            length: values.len() / channels,
            values,
        }
    }

    /// Full DTW without window or pruning, the textbook recursion.
    fn reference(a: View<'_>, b: View<'_>, channels: usize, w: usize) -> f64 {
        let (la, lb) = (a.length, b.length);
        let mut table = vec![vec![f64::INFINITY; lb + 1]; la + 1];
        table[0][0] = 0.0;
        for i in 1..=la {
            for j in 1..=lb {
                if i.abs_diff(j) > w {
                    continue;
                }
                let c = cost(
                    &a.values[(i - 1) * channels..i * channels],
                    &b.values[(j - 1) * channels..j * channels],
                );
                table[i][j] = c + table[i - 1][j]
                    .min(table[i][j - 1])
                    .min(table[i - 1][j - 1]);
            }
        }
        table[la][lb]
    }

    #[test]
    fn window_zero_on_equal_lengths_is_squared_euclidean() {
        let mut rng = Rng::new(1);
        for channels in [1, 3] {
            let a = random(&mut rng, 17, channels);
            let b = random(&mut rng, 17, channels);
            let euclidean = cost(&a, &b);
            let distance = dtw(
                view(&a, channels),
                view(&b, channels),
                channels,
                0,
                f64::INFINITY,
            );
            assert!(
                (distance - euclidean).abs() < 1e-9,
                "{distance} vs {euclidean}"
            );
        }
    }

    #[test]
    fn dtw_is_symmetric_and_matches_the_textbook_recursion() {
        let mut rng = Rng::new(2);
        for (la, lb, channels, fraction) in [
            (20, 20, 1, 0.1),
            (13, 20, 2, 0.05),
            (1, 7, 1, 0.2),
            (1, 1, 3, 0.0),
            (30, 24, 2, 0.2),
        ] {
            let a = random(&mut rng, la, channels);
            let b = random(&mut rng, lb, channels);
            let w = window(fraction, la, lb);
            let (va, vb) = (view(&a, channels), view(&b, channels));
            let ab = dtw(va, vb, channels, w, f64::INFINITY);
            let ba = dtw(vb, va, channels, w, f64::INFINITY);
            assert!((ab - ba).abs() < 1e-9, "{ab} vs {ba}");
            let expected = reference(va, vb, channels, w);
            assert!((ab - expected).abs() < 1e-9, "{ab} vs {expected}");
            assert!(ab.is_finite());
        }
    }

    #[test]
    fn lower_bounds_never_exceed_dtw() {
        let mut rng = Rng::new(3);
        for trial in 0..200 {
            let channels = 1 + trial % 3;
            let la = 1 + rng.below(30) as usize;
            let lb = if trial % 2 == 0 {
                la
            } else {
                1 + rng.below(30) as usize
            };
            let fraction = WINDOWS[trial % WINDOWS.len()];
            let a = random(&mut rng, la, channels);
            let b = random(&mut rng, lb, channels);
            let (va, vb) = (view(&a, channels), view(&b, channels));
            let w = window(fraction, la, lb);
            let distance = dtw(va, vb, channels, w, f64::INFINITY);
            let keogh = Envelope::new(va, channels).lb_keogh(vb, w, f64::INFINITY);
            let ends = lb_ends(va, vb, channels);
            assert!(keogh <= distance + 1e-9, "keogh {keogh} > dtw {distance}");
            assert!(ends <= distance + 1e-9, "ends {ends} > dtw {distance}");
        }
    }

    #[test]
    fn early_abandoning_only_drops_worse_series() {
        let mut rng = Rng::new(4);
        let a = random(&mut rng, 25, 2);
        let b = random(&mut rng, 25, 2);
        let (va, vb) = (view(&a, 2), view(&b, 2));
        let full = dtw(va, vb, 2, 3, f64::INFINITY);
        assert_eq!(dtw(va, vb, 2, 3, full * 2.0), full);
        assert!(dtw(va, vb, 2, 3, full * 0.5).is_infinite());
    }

    #[test]
    fn the_pruned_search_finds_the_exact_nearest_of_each_class() {
        let mut rng = Rng::new(5);
        let channels = 2;
        let mut offsets = vec![0];
        let mut values = Vec::new();
        let mut labels = Vec::new();
        for i in 0..40 {
            let length = 10 + rng.below(15) as usize;
            values.extend(random(&mut rng, length, channels));
            offsets.push(offsets.last().unwrap() + length);
            labels.push(i % 3);
        }
        let model = DtwKnn {
            window: 0.1,
            channels,
            n_classes: 4,
            labels,
            offsets,
            values,
        };
        let query = random(&mut rng, 18, channels);
        let query = view(&query, channels);
        let distances = model.class_distances(query);
        for (class, &distance) in distances.iter().enumerate().take(3) {
            let exact = (0..40)
                .filter(|&i| model.labels[i] == class as i64)
                .map(|i| {
                    let candidate = model.view(i);
                    let w = window(0.1, query.length, candidate.length);
                    reference(query, candidate, channels, w)
                })
                .fold(f64::INFINITY, f64::min);
            assert!((distance - exact).abs() < 1e-9);
        }
        assert!(distances[3].is_infinite());
        let Prediction::Class { probabilities, .. } = probabilities(&distances) else {
            panic!("not a class")
        };
        assert_eq!(probabilities[3], 0.0);
        assert!((probabilities.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    #[test]
    fn a_checkpoint_state_that_no_fit_makes_is_refused_before_it_predicts() {
        let model = DtwKnn {
            window: 0.1,
            channels: 2,
            n_classes: 2,
            labels: vec![0, 1],
            offsets: vec![0, 3, 5],
            values: vec![0.5; 10],
        };
        assert!(model.is_valid());
        let extra = serde_json::to_value(&model).unwrap();
        let kind = crate::candidate::ModelKind::DtwKnn;
        assert!(ClassicModel::from_extra(kind, Some(&extra)).is_ok());
        // Each of these would slice past the values or index past the classes in `predict`.
        let broken: [fn(&mut DtwKnn); 6] = [
            |model| model.offsets = vec![0, 6, 5],
            |model| model.offsets = vec![0, 3, 6],
            |model| model.offsets = vec![1, 3, 5],
            |model| model.labels = vec![0, 2],
            |model| model.labels = vec![0],
            |model| model.channels = 0,
        ];
        for (case, breaks) in broken.iter().enumerate() {
            let mut bad = model.clone();
            breaks(&mut bad);
            assert!(!bad.is_valid(), "case {case}");
            let extra = serde_json::to_value(&bad).unwrap();
            let error = ClassicModel::from_extra(kind, Some(&extra)).unwrap_err();
            assert!(
                error.to_string().contains("the dtw_knn state is malformed"),
                "case {case}: {error}"
            );
        }
    }
}
