//! The task a set of examples poses (the workload of LANGUAGE.md section 4), with its shapes.

use serde::{Deserialize, Serialize};

use crate::data::{Examples, Inputs, Targets};
use crate::error::{Error, Result};

/// A workload and the shapes its models adapt to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Task {
    /// Inputs `[A,B,C]` (or `[A,B]`, read as `[A,B,1]`), a class out of `D`.
    ImageClassification {
        /// `[height, width, channels]`.
        input: Vec<i64>,
        /// `D`.
        n_classes: i64,
    },
    /// Inputs `[A,B,C]`, outputs `[D,E,F]`.
    ImageRecovery {
        /// `[height, width, channels]` of the input.
        input: Vec<i64>,
        /// `[height, width, channels]` of the output.
        output: Vec<i64>,
    },
    /// Inputs `[A]`, a class out of `D >= 2`.
    TabularClassification {
        /// `A`.
        features: i64,
        /// `D`.
        n_classes: i64,
    },
    /// Inputs `[A]`, outputs `[D]` real values.
    TabularRegression {
        /// `A`.
        features: i64,
        /// `D`.
        outputs: i64,
    },
    /// Sequences of `[A]`, a class out of `D`.
    SequenceClassification {
        /// `A`.
        step: i64,
        /// `D`.
        n_classes: i64,
    },
    /// Sequences of `[A]` to sequences of `[B]`.
    SequenceTranslation {
        /// `A`.
        input_step: i64,
        /// `B`.
        output_step: i64,
    },
    /// Trees with `[A]` nodes, a class out of `D`.
    TreeClassification {
        /// `A`.
        node: i64,
        /// `D`.
        n_classes: i64,
    },
    /// Any serialized input, a class out of `D` (general classification).
    BytesClassification {
        /// `D`.
        n_classes: i64,
    },
    /// Any serialized input to any serialized output, bit by bit (general auto-encoder).
    BytesAutoencoder,
}

impl Task {
    /// The task posed by a set of examples (validated first).
    pub fn of(examples: &Examples) -> Result<Self> {
        examples.validate()?;
        let unsupported = |what: &str| Err(Error::BadExamples(format!("no task takes {what}")));
        Ok(match (&examples.inputs, &examples.targets) {
            (Inputs::Dense { shape, .. }, Targets::Classes { n_classes, .. }) => {
                match shape.len() {
                    1 if *n_classes >= 2 => Task::TabularClassification {
                        features: shape[0],
                        n_classes: *n_classes,
                    },
                    1 => return unsupported("one-class tabular classification (use regression)"),
                    2 => Task::ImageClassification {
                        input: vec![shape[0], shape[1], 1],
                        n_classes: *n_classes,
                    },
                    3 => Task::ImageClassification {
                        input: shape.clone(),
                        n_classes: *n_classes,
                    },
                    _ => return unsupported("inputs of rank above 3"),
                }
            }
            (Inputs::Dense { shape, .. }, Targets::Dense { shape: output, .. }) => {
                match (shape.len(), output.len()) {
                    (1, 1) => Task::TabularRegression {
                        features: shape[0],
                        outputs: output[0],
                    },
                    (2 | 3, 2 | 3) => Task::ImageRecovery {
                        input: image_shape(shape),
                        output: image_shape(output),
                    },
                    _ => return unsupported("these dense input and output ranks"),
                }
            }
            (Inputs::Sequences(sequences), Targets::Classes { n_classes, .. }) => {
                Task::SequenceClassification {
                    step: sequences.step,
                    n_classes: *n_classes,
                }
            }
            (Inputs::Sequences(inputs), Targets::Sequences(outputs)) => Task::SequenceTranslation {
                input_step: inputs.step,
                output_step: outputs.step,
            },
            (Inputs::Trees { node, .. }, Targets::Classes { n_classes, .. }) => {
                Task::TreeClassification {
                    node: *node,
                    n_classes: *n_classes,
                }
            }
            (Inputs::Bytes(_), Targets::Classes { n_classes, .. }) => Task::BytesClassification {
                n_classes: *n_classes,
            },
            (Inputs::Bytes(_), Targets::Bytes(_)) => Task::BytesAutoencoder,
            _ => return unsupported("this combination of inputs and targets"),
        })
    }

    /// True when quality is accuracy (else clipped R^2).
    pub fn is_classification(&self) -> bool {
        matches!(
            self,
            Task::ImageClassification { .. }
                | Task::TabularClassification { .. }
                | Task::SequenceClassification { .. }
                | Task::TreeClassification { .. }
                | Task::BytesClassification { .. }
        )
    }

    /// True for the tasks of a table (`TabularClassification`, `TabularRegression`): exactly the
    /// examples whose inputs [`Inputs::is_table`] reads as one, the one definition of a table
    /// (checked by the test `a_table_is_what_the_tabular_tasks_take` in `tests/run.rs`).
    pub fn is_tabular(&self) -> bool {
        matches!(
            self,
            Task::TabularClassification { .. } | Task::TabularRegression { .. }
        )
    }

    /// The workload in words.
    pub fn name(&self) -> &'static str {
        match self {
            Task::ImageClassification { .. } => "image classification",
            Task::ImageRecovery { .. } => "image recovery",
            Task::TabularClassification { .. } => "tabular classification",
            Task::TabularRegression { .. } => "tabular regression",
            Task::SequenceClassification { .. } => "time-series classification",
            Task::SequenceTranslation { .. } => "time-series translation",
            Task::TreeClassification { .. } => "tree classification",
            Task::BytesClassification { .. } => "general classification",
            Task::BytesAutoencoder => "general auto-encoder",
        }
    }
}

fn image_shape(shape: &[i64]) -> Vec<i64> {
    match shape {
        [height, width] => vec![*height, *width, 1],
        other => other.to_vec(),
    }
}
