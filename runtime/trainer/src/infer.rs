//! Inference from a checkpoint: the model is built and loaded once, inputs are batched, and outputs
//! come back per example (class index + probabilities for classification).

use tch::{Device, Kind, Tensor, nn};

use crate::batch::input_batch;
use crate::candidate::{Candidate, ModelKind};
use crate::checkpoint::Checkpoint;
use crate::classic::{self, ClassicModel};
use crate::data::{Inputs, numel};
use crate::error::{Error, Result};
use crate::models::{self, Model};
use crate::task::Task;
use crate::train::load_into;

/// The output for one example.
#[derive(Debug, Clone, PartialEq)]
pub enum Prediction {
    /// Classification: the most likely class and every class's probability.
    Class {
        /// The class index.
        index: i64,
        /// Softmax probabilities, one per class.
        probabilities: Vec<f32>,
    },
    /// Regression or recovery: values of the declared output shape.
    Values {
        /// The output shape.
        shape: Vec<i64>,
        /// The values, row-major.
        values: Vec<f32>,
    },
    /// Translation: the output steps.
    Sequence(Vec<Vec<f32>>),
    /// The general auto-encoder: the reconstructed bytes.
    Bytes(Vec<u8>),
}

impl Prediction {
    /// How many of `predictions` name their class in `labels` (paired in order; a prediction
    /// that is not a class is wrong): the count behind every test accuracy of the examples and
    /// the tests.
    pub fn count_correct(
        predictions: &[Prediction],
        labels: impl IntoIterator<Item = i64>,
    ) -> usize {
        predictions
            .iter()
            .zip(labels)
            .filter(|(prediction, label)| {
                matches!(prediction, Prediction::Class { index, .. } if index == label)
            })
            .count()
    }
}

/// A loaded model.
#[derive(Debug)]
pub(crate) enum Loaded {
    Torch { store: nn::VarStore, model: Model },
    Classic(ClassicModel),
}

/// Examples per forward pass of a new predictor.
const DEFAULT_BATCH_SIZE: usize = 256;

/// A model loaded from a checkpoint, ready to predict.
#[derive(Debug)]
pub struct Predictor {
    pub(crate) task: Task,
    /// The candidate's model (what an export names).
    pub(crate) kind: ModelKind,
    pub(crate) config: models::ModelConfig,
    pub(crate) loaded: Loaded,
    pub(crate) device: Device,
    /// Examples per forward pass.
    pub batch_size: usize,
}

impl Predictor {
    /// Builds the model of the checkpoint on `device` and loads its weights.
    pub fn new(checkpoint: &Checkpoint, device: Device) -> Result<Self> {
        let meta = &checkpoint.meta;
        let candidate = Candidate::parse(&meta.candidate)?;
        let loaded = if classic::is_classic(candidate.model) {
            Loaded::Classic(ClassicModel::from_extra(
                candidate.model,
                meta.extra.as_ref(),
            )?)
        } else {
            let mut store = nn::VarStore::new(device);
            let model = crate::train::seeded_init(0, || {
                models::build(&store.root(), &candidate, &meta.task, &meta.config)
            })?;
            load_into(&mut store, checkpoint.tensors()?)?;
            Loaded::Torch { store, model }
        };
        Ok(Self {
            task: meta.task.clone(),
            kind: candidate.model,
            config: meta.config,
            loaded,
            device,
            batch_size: DEFAULT_BATCH_SIZE,
        })
    }

    /// The candidate's model as [`models::build`] initialises it, untrained, on `device`: what the
    /// latency probe times before training ([`crate::latency::probe_latency`]). `Ok(None)` for a
    /// classic model, whose cost depends on what it learns (k-NN keeps its training set).
    pub fn untrained(
        candidate: &Candidate,
        task: &Task,
        config: models::ModelConfig,
        device: Device,
    ) -> Result<Option<Self>> {
        if classic::is_classic(candidate.model) {
            return Ok(None);
        }
        let store = nn::VarStore::new(device);
        let model = crate::train::seeded_init(0, || {
            models::build(&store.root(), candidate, task, &config)
        })?;
        Ok(Some(Self {
            task: task.clone(),
            kind: candidate.model,
            config,
            loaded: Loaded::Torch { store, model },
            device,
            batch_size: DEFAULT_BATCH_SIZE,
        }))
    }

    /// The task the model was trained for.
    pub fn task(&self) -> &Task {
        &self.task
    }

    fn check_inputs(&self, inputs: &Inputs) -> Result<usize> {
        inputs.checked_len()?;
        let mismatch = |what: &str| Err(Error::BadCheckpoint(format!("the inputs {what}")));
        match (inputs, &self.task) {
            (
                Inputs::Dense { shape, values },
                Task::ImageClassification { input, .. } | Task::ImageRecovery { input, .. },
            ) => {
                if numel(shape) != numel(input) || !input.starts_with(&shape[..2.min(shape.len())])
                {
                    return mismatch(&format!("have shape {shape:?}, the model takes {input:?}"));
                }
                Ok(values.len() / numel(shape).max(1))
            }
            (
                Inputs::Dense { shape, values },
                Task::TabularClassification { features, .. }
                | Task::TabularRegression { features, .. },
            ) => {
                if shape.as_slice() != [*features] {
                    return mismatch(&format!(
                        "have shape {shape:?}, the model takes [{features}]"
                    ));
                }
                Ok(values.len() / numel(shape).max(1))
            }
            (Inputs::Sequences(sequences), Task::SequenceClassification { step, .. })
            | (
                Inputs::Sequences(sequences),
                Task::SequenceTranslation {
                    input_step: step, ..
                },
            ) => {
                if sequences.step != *step {
                    return mismatch(&format!(
                        "have steps of {}, the model takes {step}",
                        sequences.step
                    ));
                }
                Ok(sequences.len())
            }
            (Inputs::Trees { node, trees }, Task::TreeClassification { node: expected, .. }) => {
                if node != expected {
                    return mismatch(&format!("have nodes of {node}, the model takes {expected}"));
                }
                Ok(trees.len())
            }
            (Inputs::Bytes(bytes), Task::BytesClassification { .. } | Task::BytesAutoencoder) => {
                Ok(bytes.len())
            }
            _ => mismatch(&format!("do not fit a {} model", self.task.name())),
        }
    }

    /// The raw outputs (logits or values) for every input, concatenated on the first dimension, on
    /// the CPU. For translation, `max_output_steps` steps are produced.
    pub fn raw_outputs(&self, inputs: &Inputs, max_output_steps: i64) -> Result<Tensor> {
        let n = self.check_inputs(inputs)?;
        let rows: Vec<usize> = (0..n).collect();
        self.raw_outputs_of(inputs, &rows, max_output_steps)
    }

    /// [`Predictor::raw_outputs`] of the inputs at `rows` (checked by the caller).
    fn raw_outputs_of(
        &self,
        inputs: &Inputs,
        rows: &[usize],
        max_output_steps: i64,
    ) -> Result<Tensor> {
        let Loaded::Torch { model, .. } = &self.loaded else {
            return Err(Error::BadCheckpoint(
                "a classic model (not a tch module) has no tensor outputs".into(),
            ));
        };
        let _guard = tch::no_grad_guard();
        let mut outputs = Vec::new();
        for chunk in rows.chunks(self.batch_size.max(1)) {
            let batch = input_batch(
                inputs,
                &self.task,
                &self.config,
                chunk,
                max_output_steps,
                self.device,
            );
            outputs.push(
                model
                    .forward(&batch, false)
                    .to_kind(Kind::Float)
                    .to_device(Device::Cpu),
            );
        }
        Ok(Tensor::cat(&outputs, 0))
    }

    /// One prediction per input.
    pub fn predict(&self, inputs: &Inputs) -> Result<Vec<Prediction>> {
        let n = self.check_inputs(inputs)?;
        let rows: Vec<usize> = (0..n).collect();
        self.predict_checked(inputs, &rows)
    }

    /// One prediction per input at `rows`, in their order (a batch of just those inputs: the
    /// latency probe predicts one row at a time). An out-of-range row is an error.
    pub fn predict_rows(&self, inputs: &Inputs, rows: &[usize]) -> Result<Vec<Prediction>> {
        let n = self.check_inputs(inputs)?;
        if let Some(row) = rows.iter().find(|&&row| row >= n) {
            return Err(Error::BadExamples(format!(
                "row {row} is out of range: there are {n} inputs"
            )));
        }
        self.predict_checked(inputs, rows)
    }

    fn predict_checked(&self, inputs: &Inputs, rows: &[usize]) -> Result<Vec<Prediction>> {
        if let Loaded::Classic(model) = &self.loaded {
            return model.predict(inputs, rows);
        }
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let max_steps = match inputs {
            Inputs::Sequences(sequences) => {
                let longest = rows.iter().map(|&row| sequences.length(row)).max();
                2 * longest.unwrap_or(1) as i64 + 4
            }
            _ => 1,
        };
        let outputs = self.raw_outputs_of(inputs, rows, max_steps)?;
        let n = outputs.size()[0];
        let mut predictions = Vec::with_capacity(n as usize);
        match &self.task {
            task if task.is_classification() => {
                let probabilities = outputs.softmax(-1, Kind::Float);
                for row in 0..n {
                    let row_probabilities: Vec<f32> = Vec::try_from(probabilities.get(row))?;
                    let index = probabilities.get(row).argmax(0, false).int64_value(&[]);
                    predictions.push(Prediction::Class {
                        index,
                        probabilities: row_probabilities,
                    });
                }
            }
            Task::SequenceTranslation { output_step, .. } => {
                for row in 0..n {
                    let steps = outputs.get(row);
                    let mut sequence = Vec::new();
                    for step in 0..steps.size()[0] {
                        let values: Vec<f32> = Vec::try_from(steps.get(step))?;
                        let continues = values[*output_step as usize] >= 0.0;
                        sequence.push(values[..*output_step as usize].to_vec());
                        if !continues {
                            break;
                        }
                    }
                    predictions.push(Prediction::Sequence(sequence));
                }
            }
            Task::BytesAutoencoder => {
                for row in 0..n {
                    let bits: Vec<f32> = Vec::try_from(outputs.get(row))?;
                    let bytes = bits
                        .chunks(8)
                        .map(|bits| {
                            bits.iter()
                                .enumerate()
                                .map(|(bit, &logit)| u8::from(logit > 0.0) << bit)
                                .sum()
                        })
                        .collect();
                    predictions.push(Prediction::Bytes(bytes));
                }
            }
            _ => {
                let shape = outputs.size()[1..].to_vec();
                for row in 0..n {
                    predictions.push(Prediction::Values {
                        shape: shape.clone(),
                        values: Vec::try_from(outputs.get(row).flatten(0, -1))?,
                    });
                }
            }
        }
        Ok(predictions)
    }
}
