//! Assembling batches from example indices: inputs (for training and inference) and targets, and the
//! losses and validation quality over them.

use tch::{Device, Kind, Reduction, Tensor};

use crate::data::{Examples, Inputs, Sequences, Targets, dense_batch, label_batch};
use crate::infer::Prediction;
use crate::models::tree::FlatTrees;
use crate::models::{BatchInput, ModelConfig};
use crate::task::Task;
use crate::train::Evaluation;

/// The targets of one batch.
#[derive(Debug)]
pub(crate) enum TargetBatch {
    /// Class indices `[B]`.
    Classes(Tensor),
    /// Real values `[B, dims...]` (recovery: `[B,D,E,F]`).
    Dense(Tensor),
    /// Bits `[B, 8 * output bytes]` (the bit-level auto-encoder; outputs are logits).
    Bits(Tensor),
    /// Translation: padded values `[B,T,B']`, a mask `[B,T]` of real steps, and the continue flags.
    Sequences {
        values: Tensor,
        mask: Tensor,
        continues: Tensor,
    },
}

/// The bits of each byte string, cut or zero-padded to `n_bytes` bytes: `[B, 8 * n_bytes]`.
fn bits_dense(bytes: &[Vec<u8>], indices: &[usize], n_bytes: i64, device: Device) -> Tensor {
    let width = n_bytes.max(1) as usize * 8;
    let mut buffer = vec![0f32; indices.len() * width];
    for (row, &index) in indices.iter().enumerate() {
        for (position, byte) in bytes[index].iter().take(width / 8).enumerate() {
            for bit in 0..8 {
                buffer[row * width + position * 8 + bit] = f32::from((byte >> bit) & 1);
            }
        }
    }
    Tensor::from_slice(&buffer)
        .view([indices.len() as i64, width as i64])
        .to_device(device)
}

/// The bits of each byte string as a sequence of steps of `bytes_per_step` bytes (`8 x` that many
/// values, the last step zero-padded; at least one step).
fn bits_sequences(bytes: &[Vec<u8>], indices: &[usize], bytes_per_step: i64) -> Sequences {
    let width = bytes_per_step.max(1) as usize;
    let step = 8 * width;
    let mut values = Vec::new();
    let mut offsets = vec![0];
    for &index in indices {
        let string = &bytes[index];
        let steps = string.len().div_ceil(width).max(1);
        for position in 0..steps * width {
            let byte = string.get(position).copied().unwrap_or(0);
            for bit in 0..8 {
                values.push(f32::from((byte >> bit) & 1));
            }
        }
        offsets.push(values.len() / step);
    }
    Sequences {
        step: step as i64,
        values,
        offsets,
    }
}

/// The shape of one dense input as the model takes it: an image task's declared image shape (the
/// stored values may be a flat row of the same size), else the stored shape.
pub(crate) fn dense_input_shape(task: &Task, stored: &[i64]) -> Vec<i64> {
    match task {
        Task::ImageClassification { input, .. } | Task::ImageRecovery { input, .. } => {
            input.clone()
        }
        _ => stored.to_vec(),
    }
}

/// The model input and the targets of the examples at `indices`: one batch of a training or an
/// evaluation pass.
pub(crate) fn example_batch(
    examples: &Examples,
    task: &Task,
    config: &ModelConfig,
    indices: &[usize],
    device: Device,
) -> (BatchInput, TargetBatch) {
    let steps = target_steps(examples, indices);
    let input = input_batch(&examples.inputs, task, config, indices, steps, device);
    let targets = target_batch(examples, task, config, indices, device);
    (input, targets)
}

/// The model input for the examples at `indices`; `output_steps` is the number of translation steps
/// to produce.
pub(crate) fn input_batch(
    inputs: &Inputs,
    task: &Task,
    config: &ModelConfig,
    indices: &[usize],
    output_steps: i64,
    device: Device,
) -> BatchInput {
    match inputs {
        Inputs::Dense { shape, values } => BatchInput::Dense(dense_batch(
            values,
            &dense_input_shape(task, shape),
            indices,
            device,
        )),
        Inputs::Sequences(sequences) => {
            let (values, lengths) = sequences.padded_batch(indices, device);
            BatchInput::Sequences {
                values,
                lengths,
                output_steps,
            }
        }
        Inputs::Trees { node, trees } => {
            let batch: Vec<_> = indices.iter().map(|&index| &trees[index]).collect();
            BatchInput::Trees(FlatTrees::new(&batch, *node, device))
        }
        Inputs::Bytes(bytes) => match task {
            Task::BytesAutoencoder => {
                let n_bytes = config.autoencoder_input_bytes();
                BatchInput::Dense(bits_dense(bytes, indices, n_bytes, device))
            }
            _ => {
                let sequences = bits_sequences(bytes, indices, config.bytes_per_step);
                let all: Vec<usize> = (0..indices.len()).collect();
                let (values, lengths) = sequences.padded_batch(&all, device);
                BatchInput::Sequences {
                    values,
                    lengths,
                    output_steps,
                }
            }
        },
    }
}

/// The number of output steps a translation batch must produce (its longest target).
pub(crate) fn target_steps(examples: &Examples, indices: &[usize]) -> i64 {
    match &examples.targets {
        Targets::Sequences(sequences) => indices
            .iter()
            .map(|&index| sequences.length(index) as i64)
            .max()
            .unwrap_or(1)
            .max(1),
        _ => 1,
    }
}

/// The targets of the examples at `indices`.
pub(crate) fn target_batch(
    examples: &Examples,
    task: &Task,
    config: &ModelConfig,
    indices: &[usize],
    device: Device,
) -> TargetBatch {
    match &examples.targets {
        Targets::Classes { labels, .. } => {
            TargetBatch::Classes(label_batch(labels, indices, device))
        }
        Targets::Dense { shape, values } => {
            let shape = match task {
                Task::ImageRecovery { output, .. } => output.clone(),
                _ => shape.clone(),
            };
            TargetBatch::Dense(dense_batch(values, &shape, indices, device))
        }
        Targets::Sequences(sequences) => {
            let (values, lengths) = sequences.padded_batch(indices, device);
            let steps = values.size()[1];
            let positions = Tensor::arange(steps, (Kind::Int64, device)).unsqueeze(0);
            let lengths = Tensor::from_slice(&lengths).to_device(device).unsqueeze(1);
            let mask = positions.lt_tensor(&lengths).to_kind(Kind::Float);
            let continues = positions.lt_tensor(&(lengths - 1)).to_kind(Kind::Float);
            TargetBatch::Sequences {
                values,
                mask,
                continues,
            }
        }
        Targets::Bytes(bytes) => TargetBatch::Bits(bits_dense(
            bytes,
            indices,
            config.autoencoder_output_bytes(),
            device,
        )),
    }
}

/// The training loss of raw outputs against targets (also the validation loss: [`Evaluation`]).
pub(crate) fn loss(outputs: &Tensor, targets: &TargetBatch) -> Tensor {
    let outputs = outputs.to_kind(Kind::Float);
    match targets {
        TargetBatch::Classes(labels) => outputs.cross_entropy_for_logits(labels),
        TargetBatch::Dense(values) => outputs.mse_loss(values, Reduction::Mean),
        TargetBatch::Bits(bits) => {
            outputs.binary_cross_entropy_with_logits::<Tensor>(bits, None, None, Reduction::Mean)
        }
        TargetBatch::Sequences {
            values,
            mask,
            continues,
        } => {
            let width = values.size()[2];
            let predicted = outputs.narrow(2, 0, width);
            let squared = (predicted - values)
                .square()
                .sum_dim_intlist(2, false, Kind::Float);
            let value_loss =
                (squared * mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0);
            let stop_loss = outputs
                .select(2, width)
                .binary_cross_entropy_with_logits::<Tensor>(continues, None, None, Reduction::Mean);
            value_loss + stop_loss
        }
    }
}

/// One example's expected output, as the models that are not tch modules are scored on it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expected<'a> {
    /// A class index.
    Class(i64),
    /// The output values, row-major.
    Values(&'a [f32]),
}

/// How a classifier's validation answers fell: the count of each (true class, predicted class)
/// pair, by class index. The trainer keeps the one of the quality it reports (the best epoch's;
/// under k-fold the sum over the chosen setting's folds, so every example is counted once, by the
/// model that did not train on it); the engine stores it with the run for the per-class view.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Confusion {
    counts: std::collections::BTreeMap<(i64, i64), u64>,
}

impl Confusion {
    /// Counts `count` answers `predicted` for examples of class `actual`.
    pub fn add(&mut self, actual: i64, predicted: i64, count: u64) {
        *self.counts.entry((actual, predicted)).or_default() += count;
    }

    /// Adds every count of `other` (another fold's).
    pub fn merge(&mut self, other: &Confusion) {
        for (&(actual, predicted), &count) in &other.counts {
            self.add(actual, predicted, count);
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Every `(true class, predicted class, count)`, sorted, counts > 0.
    pub fn cells(&self) -> impl Iterator<Item = (i64, i64, u64)> + '_ {
        self.counts
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(&(actual, predicted), &count)| (actual, predicted, count))
    }
}

/// Running sums for the validation quality (accuracy or clipped R^2) and, for networks, the
/// validation loss (the training loss on the validation rows, averaged over them).
#[derive(Debug, Default, Clone)]
pub(crate) struct QualityAccumulator {
    /// For classification: how the answers fell, by (true class, predicted class).
    confusion: Confusion,
    correct: f64,
    count: f64,
    squared_error: f64,
    sum: f64,
    sum_squares: f64,
    non_finite: bool,
    loss_sum: f64,
    loss_rows: f64,
}

impl QualityAccumulator {
    /// Adds one batch.
    pub(crate) fn add(&mut self, outputs: &Tensor, targets: &TargetBatch) {
        let outputs = outputs.to_kind(Kind::Float);
        if outputs
            .isfinite()
            .logical_not()
            .any()
            .to_kind(Kind::Int64)
            .int64_value(&[])
            != 0
        {
            self.non_finite = true;
            return;
        }
        let rows = outputs.size().first().copied().unwrap_or(0) as f64;
        self.loss_sum += loss(&outputs, targets).double_value(&[]) * rows;
        self.loss_rows += rows;
        let (predicted, actual, mask) = match targets {
            TargetBatch::Classes(labels) => {
                let predicted = outputs.argmax(-1, false);
                let hits = predicted.eq_tensor(labels);
                self.correct += hits.sum(Kind::Float).double_value(&[]);
                self.count += labels.size()[0] as f64;
                let as_vec = |tensor: &Tensor| {
                    Vec::<i64>::try_from(tensor.to_device(tch::Device::Cpu).to_kind(Kind::Int64))
                        .unwrap_or_default()
                };
                for (actual, predicted) in as_vec(labels).into_iter().zip(as_vec(&predicted)) {
                    self.confusion.add(actual, predicted, 1);
                }
                return;
            }
            TargetBatch::Dense(values) => (outputs, values.shallow_clone(), None),
            TargetBatch::Bits(bits) => (outputs.sigmoid(), bits.shallow_clone(), None),
            TargetBatch::Sequences { values, mask, .. } => {
                let width = values.size()[2];
                let mask = mask.unsqueeze(2).expand_as(values);
                (
                    outputs.narrow(2, 0, width),
                    values.shallow_clone(),
                    Some(mask),
                )
            }
        };
        let mask = mask.unwrap_or_else(|| actual.ones_like());
        let error = (&predicted - &actual).square() * &mask;
        self.squared_error += error.sum(Kind::Double).double_value(&[]);
        self.sum += (&actual * &mask).sum(Kind::Double).double_value(&[]);
        self.sum_squares += (actual.square() * &mask)
            .sum(Kind::Double)
            .double_value(&[]);
        self.count += mask.sum(Kind::Double).double_value(&[]);
    }

    /// Adds one prediction of a model that is not a tch module (`crate::classic`) against its
    /// target; false, adding nothing, when the prediction is not of the target's kind.
    pub(crate) fn add_prediction(
        &mut self,
        prediction: &Prediction,
        expected: Expected<'_>,
    ) -> bool {
        match (prediction, expected) {
            (Prediction::Class { index, .. }, Expected::Class(actual)) => {
                self.add_class(*index, actual);
            }
            (Prediction::Values { values, .. }, Expected::Values(actual)) => {
                self.add_values(values, actual);
            }
            _ => return false,
        }
        true
    }

    fn add_class(&mut self, predicted: i64, actual: i64) {
        self.correct += f64::from(u8::from(predicted == actual));
        self.count += 1.0;
        self.confusion.add(actual, predicted, 1);
    }

    /// For classification, how the answers added so far fell (`None` before any, and for
    /// value outputs).
    pub(crate) fn confusion(&self) -> Option<Confusion> {
        (!self.confusion.is_empty()).then(|| self.confusion.clone())
    }

    fn add_values(&mut self, predicted: &[f32], actual: &[f32]) {
        for (&p, &a) in predicted.iter().zip(actual) {
            if !p.is_finite() {
                self.non_finite = true;
                return;
            }
            let (p, a) = (f64::from(p), f64::from(a));
            self.squared_error += (p - a).powi(2);
            self.sum += a;
            self.sum_squares += a * a;
            self.count += 1.0;
        }
    }

    /// The quality ([`Self::quality`]), or `None` when some output was NaN or infinite: the
    /// trainer's one rule for a model that diverged.
    pub(crate) fn finite_quality(&self, classification: bool) -> Option<f64> {
        (!self.non_finite).then(|| self.quality(classification))
    }

    /// The quality and the mean validation loss (`None` when no network batch was added), or
    /// `None` when some output was not finite.
    pub(crate) fn finite_evaluation(&self, classification: bool) -> Option<Evaluation> {
        let quality = self.finite_quality(classification)?;
        let loss = (self.loss_rows > 0.0).then(|| self.loss_sum / self.loss_rows);
        Some(Evaluation {
            quality,
            loss: loss.filter(|loss| loss.is_finite()),
        })
    }

    /// Accuracy (classification) or `clamp(1 - SSE/SST, 0, 1)`.
    fn quality(&self, classification: bool) -> f64 {
        if self.count == 0.0 {
            return 0.0;
        }
        if classification {
            return self.correct / self.count;
        }
        let mean = self.sum / self.count;
        let total = (self.sum_squares - self.count * mean * mean).max(0.0);
        if total <= 1e-12 {
            return if self.squared_error <= 1e-9 { 1.0 } else { 0.0 };
        }
        (1.0 - self.squared_error / total).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Inputs;
    use crate::models::{MAX_AUTOENCODER_BYTES, MAX_BYTE_STEPS, ModelConfig};

    #[test]
    fn one_byte_per_step_is_eight_bits_per_step_and_an_empty_string_one_zero_step() {
        let bytes = vec![vec![0b0000_0101, 0xff], vec![]];
        let sequences = bits_sequences(&bytes, &[0, 1], 1);
        assert_eq!(sequences.step, 8);
        assert_eq!(sequences.offsets, vec![0, 2, 3]);
        assert_eq!(
            &sequences.values[..8],
            &[1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(&sequences.values[8..16], &[1.0; 8]);
        assert_eq!(&sequences.values[16..], &[0.0; 8]);
    }

    #[test]
    fn several_bytes_per_step_pad_the_last_step_with_zero_bytes() {
        let bytes = vec![vec![1, 2, 3, 4, 5], vec![7]];
        let sequences = bits_sequences(&bytes, &[1, 0], 3);
        assert_eq!(sequences.step, 24);
        // [7, 0, 0] then [1, 2, 3], [4, 5, 0].
        assert_eq!(sequences.offsets, vec![0, 1, 3]);
        assert_eq!(sequences.values.len(), 3 * 24);
        assert_eq!(sequences.values[0], 1.0);
        assert!(sequences.values[3..24].iter().all(|&bit| bit == 0.0));
        // The second step's second byte is 2.
        assert_eq!(&sequences.values[24 + 8..24 + 10], &[0.0, 1.0]);
        assert!(sequences.values[3 * 24 - 8..].iter().all(|&bit| bit == 0.0));
    }

    #[test]
    fn the_fitted_config_keeps_every_input_within_the_step_cap() {
        let config = ModelConfig::for_device(Device::Cpu);
        for (longest, expected) in [(0, 1), (1, 1), (256, 1), (257, 2), (4000, 16), (12_345, 49)] {
            let examples = classified(Inputs::Bytes(vec![vec![0; 3], vec![0; longest]]));
            let inputs = &examples.inputs;
            let fitted = config.fitted_to(&examples);
            assert_eq!(fitted.bytes_per_step, expected, "{longest} bytes");
            let sequences = bits_sequences(
                match inputs {
                    Inputs::Bytes(bytes) => bytes,
                    _ => unreachable!(),
                },
                &[0, 1],
                fitted.bytes_per_step,
            );
            let steps = sequences.offsets[2] - sequences.offsets[1];
            assert!(steps <= MAX_BYTE_STEPS, "{longest} bytes: {steps} steps");
        }
        let tensors = classified(Inputs::Dense {
            shape: vec![2],
            values: vec![0.0; 4],
        });
        assert_eq!(config.fitted_to(&tensors), config);
    }

    fn classified(inputs: Inputs) -> Examples {
        Examples {
            ids: vec![0, 1],
            inputs,
            targets: Targets::Classes {
                n_classes: 2,
                labels: vec![0, 1],
            },
        }
    }

    #[test]
    fn the_auto_encoder_reads_the_longest_input_and_writes_the_longest_output_within_the_cap() {
        let config = ModelConfig::for_device(Device::Cpu);
        let examples = Examples {
            ids: vec![0, 1],
            inputs: Inputs::Bytes(vec![vec![1; 10], vec![2; 16_388]]),
            targets: Targets::Bytes(vec![vec![3; 4_100], vec![4; 7]]),
        };
        let fitted = config.fitted_to(&examples);
        assert_eq!(fitted.autoencoder_input_bytes(), 16_388);
        assert_eq!(fitted.autoencoder_output_bytes(), 4_100);
        let input = input_batch(
            &examples.inputs,
            &Task::BytesAutoencoder,
            &fitted,
            &[0, 1],
            1,
            Device::Cpu,
        );
        let BatchInput::Dense(bits) = input else {
            panic!("not dense")
        };
        assert_eq!(bits.size(), vec![2, 8 * 16_388]);
        let TargetBatch::Bits(targets) = target_batch(
            &examples,
            &Task::BytesAutoencoder,
            &fitted,
            &[1],
            Device::Cpu,
        ) else {
            panic!("not bits")
        };
        assert_eq!(targets.size(), vec![1, 8 * 4_100]);
        // 4 = 0b100: the third bit of the first byte; the padding is zero.
        assert_eq!(targets.get(0).get(2).double_value(&[]), 1.0);
        assert_eq!(targets.sum(Kind::Float).double_value(&[]), 7.0);
        let huge = Examples {
            ids: vec![0],
            inputs: Inputs::Bytes(vec![vec![0; 100_000]]),
            targets: Targets::Bytes(vec![vec![0; 100_000]]),
        };
        let capped = config.fitted_to(&huge);
        assert_eq!(capped.autoencoder_input_bytes(), MAX_AUTOENCODER_BYTES);
        assert_eq!(capped.autoencoder_output_bytes(), MAX_AUTOENCODER_BYTES);
    }

    #[test]
    fn a_checkpoint_config_from_before_the_byte_steps_reads_as_one_byte_per_step() {
        let old: ModelConfig = serde_json::from_str(r#"{"width":0.25,"max_bytes":64}"#).unwrap();
        assert_eq!(old.bytes_per_step, 1);
        assert_eq!(old.autoencoder_input_bytes(), 64);
        assert_eq!(old.autoencoder_output_bytes(), 64);
    }
}
