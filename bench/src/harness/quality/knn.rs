//! The `knn1` peer of `easeml bench quality` and what every method shares: the flattened features
//! of an input object and the one scoring rule.
//!
//! Flattening: an object is read as a sequence of records (a chain in order, a tree in pre-order;
//! an object without recursive fields is one record), each record the concatenation of its tensor
//! fields' values. Series of different lengths are resampled linearly (per value, between
//! neighbouring records) to the longest training length `L`, so every input becomes `L x d`
//! numbers; longer test series are resampled down to `L`. An object without recursive fields is
//! its values as they are. `knn1` is the 1-nearest neighbour by Euclidean distance on these raw
//! features (no scaling), the first training example winning ties; for a regression app it
//! answers its neighbour's output values. FLAML gets the same features.
//!
//! Scoring ([`score`]): accuracy for classification apps; for other outputs R^2, averaged over
//! the output values (scikit-learn's `uniform_average`; a value constant on the test set counts 1
//! when predicted exactly, else 0).

use easeml_runtime::Object;

use super::task::Target;

/// The records of an object in order: a chain from its head, a tree in pre-order (iterative:
/// chains can be thousands of records long), each record's tensor values concatenated.
pub fn records(object: &Object) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    let mut stack = vec![object];
    while let Some(record) = stack.pop() {
        out.push(record.tensors.iter().flatten().copied().collect());
        for child in record.children.iter().rev().flatten() {
            stack.push(child);
        }
    }
    out
}

/// Turns input objects into fixed-length feature vectors (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Flattener {
    /// The number of records every input is resampled to.
    pub length: usize,
}

impl Flattener {
    /// Fitted on the training inputs: their longest record sequence.
    pub fn fit<'a>(train: impl IntoIterator<Item = &'a Object>) -> Flattener {
        let length = train
            .into_iter()
            .map(Object::record_count)
            .max()
            .unwrap_or(1)
            .max(1);
        Flattener { length }
    }

    /// The features of one input.
    pub fn flatten(&self, object: &Object) -> Vec<f32> {
        resample(&records(object), self.length)
    }
}

/// `frames` (each of the same width) resampled linearly to `length` frames, concatenated.
pub fn resample(frames: &[Vec<f32>], length: usize) -> Vec<f32> {
    let Some(first) = frames.first() else {
        return Vec::new();
    };
    let width = first.len();
    let n = frames.len();
    if n == length {
        return frames.concat();
    }
    let mut out = Vec::with_capacity(length * width);
    for i in 0..length {
        let position = if length <= 1 || n <= 1 {
            0.0
        } else {
            i as f64 * (n - 1) as f64 / (length - 1) as f64
        };
        let low = (position.floor() as usize).min(n - 1);
        let high = (low + 1).min(n - 1);
        let weight = (position - low as f64) as f32;
        for j in 0..width {
            let a = frames[low].get(j).copied().unwrap_or(0.0);
            let b = frames[high].get(j).copied().unwrap_or(0.0);
            out.push(a + (b - a) * weight);
        }
    }
    out
}

/// The index of the training row nearest to `query` (squared Euclidean distance; the first on
/// ties). `None` when there is no training row.
pub fn nearest(train: &[Vec<f32>], query: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (index, row) in train.iter().enumerate() {
        let distance: f64 = row
            .iter()
            .zip(query)
            .map(|(a, b)| f64::from(a - b).powi(2))
            .sum();
        if best.is_none_or(|(_, d)| distance < d) {
            best = Some((index, distance));
        }
    }
    best.map(|(index, _)| index)
}

/// 1-nearest-neighbour answers for `test` given `train` and its targets.
pub fn knn1(train: &[Vec<f32>], targets: &[Target], test: &[Vec<f32>]) -> Vec<Target> {
    test.iter()
        .filter_map(|query| nearest(train, query).map(|index| targets[index].clone()))
        .collect()
}

/// The test score of `predicted` against `truth`: accuracy when the targets are classes, else R^2
/// averaged over the output values. `None` when nothing can be scored (no examples, or lengths
/// that differ).
pub fn score(predicted: &[Target], truth: &[Target]) -> Option<f64> {
    if predicted.len() != truth.len() || truth.is_empty() {
        return None;
    }
    if matches!(truth[0], Target::Class(_)) {
        let correct = predicted.iter().zip(truth).filter(|(p, t)| p == t).count();
        return Some(correct as f64 / truth.len() as f64);
    }
    let values = |target: &Target| match target {
        Target::Values(values) => Some(values.clone()),
        Target::Class(_) => None,
    };
    let truth: Vec<Vec<f32>> = truth.iter().map(values).collect::<Option<_>>()?;
    let predicted: Vec<Vec<f32>> = predicted.iter().map(values).collect::<Option<_>>()?;
    let width = truth[0].len();
    if width == 0
        || truth
            .iter()
            .chain(&predicted)
            .any(|values| values.len() != width)
    {
        return None;
    }
    let n = truth.len() as f64;
    let mut total = 0.0;
    for j in 0..width {
        let mean = truth.iter().map(|t| f64::from(t[j])).sum::<f64>() / n;
        let ss_tot: f64 = truth.iter().map(|t| (f64::from(t[j]) - mean).powi(2)).sum();
        let ss_res: f64 = truth
            .iter()
            .zip(&predicted)
            .map(|(t, p)| (f64::from(t[j]) - f64::from(p[j])).powi(2))
            .sum();
        total += if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else if ss_res == 0.0 {
            1.0
        } else {
            0.0
        };
    }
    Some(total / width as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(values: &[f32]) -> Object {
        let mut next: Option<Box<Object>> = None;
        for value in values.iter().rev() {
            next = Some(Box::new(Object {
                tensors: vec![vec![*value]],
                children: vec![next],
            }));
        }
        *next.expect("at least one record")
    }

    #[test]
    fn a_chain_is_resampled_linearly_to_the_longest_training_length() {
        let flattener = Flattener::fit([&chain(&[0.0, 1.0, 2.0, 3.0, 4.0]), &chain(&[1.0])]);
        assert_eq!(flattener.length, 5);
        assert_eq!(
            flattener.flatten(&chain(&[0.0, 4.0])),
            vec![0.0, 1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(flattener.flatten(&chain(&[7.0])), vec![7.0; 5]);
        // Longer than any training series: resampled down.
        assert_eq!(
            flattener.flatten(&chain(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])),
            vec![0.0, 2.0, 4.0, 6.0, 8.0]
        );
    }

    #[test]
    fn records_of_several_fields_are_concatenated_and_flat_objects_kept() {
        let object = Object {
            tensors: vec![vec![1.0, 2.0], vec![3.0]],
            children: Vec::new(),
        };
        let flattener = Flattener::fit([&object]);
        assert_eq!(flattener.flatten(&object), vec![1.0, 2.0, 3.0]);
        // Two records of width 2 resampled to 3.
        assert_eq!(
            resample(&[vec![0.0, 10.0], vec![2.0, 30.0]], 3),
            vec![0.0, 10.0, 1.0, 20.0, 2.0, 30.0]
        );
    }

    #[test]
    fn nearest_neighbour_and_scores() {
        let train = vec![vec![0.0, 0.0], vec![5.0, 5.0], vec![0.0, 0.0]];
        let targets = vec![
            Target::Class("a".into()),
            Target::Class("b".into()),
            Target::Class("c".into()),
        ];
        let answers = knn1(&train, &targets, &[vec![0.1, 0.0], vec![4.0, 4.0]]);
        // Ties go to the first training row.
        assert_eq!(
            answers,
            vec![Target::Class("a".into()), Target::Class("b".into())]
        );
        assert_eq!(
            score(
                &answers,
                &[Target::Class("a".into()), Target::Class("c".into())]
            ),
            Some(0.5)
        );
        let truth = [Target::Values(vec![1.0]), Target::Values(vec![3.0])];
        assert_eq!(score(&truth, &truth), Some(1.0));
        let mean = [Target::Values(vec![2.0]), Target::Values(vec![2.0])];
        assert_eq!(score(&mean, &truth), Some(0.0));
        assert_eq!(score(&[], &[]), None);
    }
}
