//! A run's validation answers, kept for ensembles: for every validated example (under k-fold
//! every example, answered by the model of the fold that did not train on it: out-of-fold; under
//! the split the held-out rows), the class probabilities (classification) or the output values
//! (regression) of the model behind the reported quality (the best epoch of the chosen setting
//! under the split; under k-fold each fold's model at the epoch the folds were scored at).
//! The engine stores them with the run, bounded, and selects ensembles over them.

use tch::{Kind, Tensor};

/// Validation answers by example row (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutOfFold {
    /// The example rows answered (indices into the run's `Examples`), in the order answered.
    pub rows: Vec<usize>,
    /// Values per row: the class count (probabilities) or the output's element count.
    pub width: usize,
    /// `rows.len() * width` values, row-major.
    pub values: Vec<f32>,
}

impl OutOfFold {
    /// Adds one row's answer; ignored when its width differs from the rows' before it.
    pub(crate) fn push(&mut self, row: usize, values: &[f32]) {
        if self.rows.is_empty() {
            self.width = values.len();
        }
        if values.len() != self.width || self.width == 0 {
            return;
        }
        self.rows.push(row);
        self.values.extend_from_slice(values);
    }

    /// Adds a batch of network outputs for `rows` (`[rows, ...]`): softmax probabilities over the
    /// last dimension for classification, the values flattened otherwise.
    pub(crate) fn push_outputs(&mut self, rows: &[usize], outputs: &Tensor, classification: bool) {
        let outputs = if classification {
            outputs.to_kind(Kind::Float).softmax(-1, Kind::Float)
        } else {
            outputs.to_kind(Kind::Float)
        };
        let outputs = outputs
            .to_device(tch::Device::Cpu)
            .reshape([rows.len() as i64, -1]);
        let Ok(flat) = Vec::<f32>::try_from(outputs.reshape([-1])) else {
            return;
        };
        let width = flat.len() / rows.len().max(1);
        for (index, &row) in rows.iter().enumerate() {
            self.push(row, &flat[index * width..(index + 1) * width]);
        }
    }

    /// Adds every row of `other` (another fold's answers).
    pub fn merge(&mut self, other: &OutOfFold) {
        for (index, &row) in other.rows.iter().enumerate() {
            self.push(
                row,
                &other.values[index * other.width..(index + 1) * other.width],
            );
        }
    }

    /// One answer per row: the mean of a row's answers where it was answered more than once (a
    /// repeated k-fold answers every example once per repeat), rows in the order first answered.
    /// Answers of rows answered once are kept as they are.
    pub fn averaged_by_row(self) -> OutOfFold {
        let mut first: std::collections::HashMap<usize, usize> = Default::default();
        let mut counts: Vec<u32> = Vec::new();
        let mut averaged = OutOfFold {
            width: self.width,
            ..OutOfFold::default()
        };
        for (index, &row) in self.rows.iter().enumerate() {
            let values = self.row(index);
            match first.get(&row) {
                Some(&slot) => {
                    counts[slot] += 1;
                    let sums = &mut averaged.values[slot * self.width..(slot + 1) * self.width];
                    for (sum, value) in sums.iter_mut().zip(values) {
                        *sum += value;
                    }
                }
                None => {
                    first.insert(row, averaged.rows.len());
                    counts.push(1);
                    averaged.rows.push(row);
                    averaged.values.extend_from_slice(values);
                }
            }
        }
        for (slot, &count) in counts.iter().enumerate() {
            if count > 1 {
                for value in &mut averaged.values[slot * self.width..(slot + 1) * self.width] {
                    *value /= count as f32;
                }
            }
        }
        averaged
    }

    /// Whether nothing was answered.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// One row's answer.
    pub fn row(&self, index: usize) -> &[f32] {
        &self.values[index * self.width..(index + 1) * self.width]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_merge_and_a_row_of_another_width_is_ignored() {
        let mut first = OutOfFold::default();
        first.push(3, &[0.25, 0.75]);
        let mut second = OutOfFold::default();
        second.push(1, &[1.0, 0.0]);
        second.push(2, &[0.5]);
        first.merge(&second);
        assert_eq!(first.rows, vec![3, 1]);
        assert_eq!(first.row(1), &[1.0, 0.0]);
    }

    #[test]
    fn repeated_answers_are_averaged_per_row_in_first_answered_order() {
        let mut answers = OutOfFold::default();
        answers.push(4, &[1.0, 0.0]);
        answers.push(2, &[0.5, 0.5]);
        answers.push(2, &[0.0, 1.0]);
        answers.push(4, &[0.0, 1.0]);
        answers.push(4, &[0.5, 0.5]);
        let averaged = answers.averaged_by_row();
        assert_eq!(averaged.rows, vec![4, 2]);
        assert_eq!(averaged.width, 2);
        assert_eq!(averaged.row(0), &[0.5, 0.5]);
        assert_eq!(averaged.row(1), &[0.25, 0.75]);
        // Rows answered once stay bit for bit; nothing answered stays empty.
        let mut once = OutOfFold::default();
        once.push(1, &[0.1, 0.9]);
        once.push(0, &[0.3, 0.7]);
        assert_eq!(once.clone().averaged_by_row(), once);
        assert!(OutOfFold::default().averaged_by_row().is_empty());
    }

    #[test]
    fn network_outputs_become_probabilities() {
        let mut answers = OutOfFold::default();
        let logits = Tensor::from_slice(&[0.0f32, 0.0, 10.0, -10.0]).reshape([2, 2]);
        answers.push_outputs(&[7, 8], &logits, true);
        assert_eq!(answers.rows, vec![7, 8]);
        assert!((answers.row(0)[0] - 0.5).abs() < 1e-6);
        assert!(answers.row(1)[0] > 0.999);
    }
}
