//! Between the store's objects and the trainer's tensors: an app's examples as trainer
//! [`Examples`], inputs for inference as trainer [`Inputs`], and the trainer's predictions back in
//! the app's output form (label names, nested arrays, chains).
//!
//! The workload decides the form (LANGUAGE.md section 4):
//! - one tensor field (images, feature rows) -> dense inputs / outputs of the declared shape;
//! - a chain (time series; one recursive field) -> a sequence whose step is the record's tensor
//!   fields concatenated in declaration order;
//! - a binary tree (two recursive fields) -> a tree whose node value is the record's tensors;
//! - anything else (the general templates) -> the object's `EMX1` encoding as bytes.
//!
//! Classes come from the stored label index, or from the argmax of a stored output vector.

use easeml_object::{Object, codec, object_to_json, tensor_to_json};
use easeml_schema::DataType;
use easeml_trainer::data::Sequences;
use easeml_trainer::{Examples, Inputs, Prediction, Targets, Tree};
use serde_json::Value;

use crate::app::{AppModel, Workload};
use crate::error::{Error, Result};

/// One inference result in the app's terms (defined in `easeml-object`, so that the client library
/// has it without the engine).
pub use easeml_object::Inference;

/// A stored example's output, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredTarget {
    /// A label index.
    Class(u32),
    /// An output object.
    Object(Object),
}

/// The values of one record's tensor fields, concatenated.
fn record_values(object: &Object) -> Vec<f32> {
    object.tensors.iter().flatten().copied().collect()
}

/// The number of values of one record of `data_type` (its tensor fields together).
fn record_width(data_type: &DataType) -> i64 {
    data_type
        .tensors()
        .map(|tensor| tensor.element_count() as i64)
        .sum()
}

/// The records of a chain, following its first recursive field.
fn chain_steps(object: &Object) -> Vec<Vec<f32>> {
    let mut steps = Vec::new();
    let mut record = Some(object);
    while let Some(current) = record {
        steps.push(record_values(current));
        record = current.children.first().and_then(|child| child.as_deref());
    }
    steps
}

/// A tree of records, children in field order, absent children left out.
fn tree_of(object: &Object) -> Tree {
    let children = object
        .children
        .iter()
        .flatten()
        .map(|child| easeml_object::deep_json::with_deep_stack(|| tree_of(child)))
        .collect();
    Tree::node(record_values(object), children)
}

/// The trainer inputs of `objects` (inputs of `app`).
pub fn inputs_of<'a>(app: &AppModel, objects: impl IntoIterator<Item = &'a Object>) -> Inputs {
    let schema = &app.schema;
    match app.workload {
        Workload::ImageClassification
        | Workload::ImageRecovery
        | Workload::TabularRegression
        | Workload::TabularClassification => {
            let shape = schema
                .input
                .tensors()
                .next()
                .map(|tensor| tensor.dims.iter().map(|&dim| dim as i64).collect())
                .unwrap_or_default();
            let values = objects.into_iter().flat_map(record_values).collect();
            Inputs::Dense { shape, values }
        }
        Workload::TimeseriesClassification | Workload::TimeseriesTranslation => {
            let step = record_width(&schema.input);
            let mut values = Vec::new();
            let mut offsets = vec![0];
            for object in objects {
                let steps = chain_steps(object);
                offsets.push(offsets.last().copied().unwrap_or(0) + steps.len());
                values.extend(steps.into_iter().flatten());
            }
            Inputs::Sequences(Sequences {
                step,
                values,
                offsets,
            })
        }
        Workload::TreeClassification => Inputs::Trees {
            node: record_width(&schema.input),
            trees: objects.into_iter().map(tree_of).collect(),
        },
        Workload::GeneralClassification | Workload::GeneralAutoencoder => {
            Inputs::Bytes(objects.into_iter().map(codec::encode).collect())
        }
    }
}

/// The index of the largest value (the class of a one-hot or score vector); the first on ties.
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (index, value) in values.iter().enumerate() {
        if *value > values[best] {
            best = index;
        }
    }
    best as u32
}

/// The trainer examples of an app: ids, inputs and targets in the same order.
pub fn examples_of(
    app: &AppModel,
    ids: Vec<u64>,
    inputs: &[Object],
    targets: &[StoredTarget],
) -> Result<Examples> {
    let schema = &app.schema;
    let targets = if let Some(n_classes) = app.n_classes() {
        let labels = targets
            .iter()
            .map(|target| match target {
                StoredTarget::Class(index) => i64::from(*index),
                StoredTarget::Object(object) => i64::from(argmax(&record_values(object))),
            })
            .collect();
        Targets::Classes {
            n_classes: n_classes as i64,
            labels,
        }
    } else {
        let objects = || {
            targets.iter().map(|target| match target {
                StoredTarget::Object(object) => Ok(object),
                StoredTarget::Class(_) => Err(Error::Manifest {
                    app: schema.app.clone(),
                    message: "a stored example has a label, but this app's output takes none"
                        .to_owned(),
                }),
            })
        };
        match app.workload {
            Workload::TimeseriesTranslation => {
                let nested = objects()
                    .map(|object| object.map(chain_steps))
                    .collect::<Result<Vec<_>>>()?;
                Targets::Sequences(Sequences::from_nested(
                    record_width(&schema.output),
                    &nested,
                )?)
            }
            Workload::GeneralAutoencoder => Targets::Bytes(
                objects()
                    .map(|object| object.map(codec::encode))
                    .collect::<Result<_>>()?,
            ),
            _ => {
                let shape = schema
                    .output
                    .tensors()
                    .next()
                    .map(|tensor| tensor.dims.iter().map(|&dim| dim as i64).collect())
                    .unwrap_or_default();
                let mut values = Vec::new();
                for object in objects() {
                    values.extend(record_values(object?));
                }
                Targets::Dense { shape, values }
            }
        }
    };
    Ok(Examples {
        ids,
        inputs: inputs_of(app, inputs),
        targets,
    })
}

/// Splits a chain's steps back into records of `data_type`'s tensor fields, linked through its first
/// recursive field.
fn chain_object(data_type: &DataType, steps: &[Vec<f32>]) -> Option<Object> {
    let widths: Vec<usize> = data_type
        .tensors()
        .map(|tensor| tensor.element_count() as usize)
        .collect();
    let n_children = data_type.recursive_names().count();
    let mut next: Option<Box<Object>> = None;
    for step in steps.iter().rev() {
        let mut tensors = Vec::with_capacity(widths.len());
        let mut start = 0;
        for &width in &widths {
            tensors.push(step.get(start..start + width)?.to_vec());
            start += width;
        }
        let mut children = vec![None; n_children];
        if let Some(first) = children.first_mut() {
            *first = next.take();
        }
        next = Some(Box::new(Object { tensors, children }));
    }
    next.map(|object| *object)
}

/// The app's view of one trainer prediction; `labels` names the classes (index order).
pub fn inference_of(app: &AppModel, labels: &[String], prediction: Prediction) -> Inference {
    let schema = &app.schema;
    match prediction {
        Prediction::Class {
            index,
            probabilities,
        } => {
            let class = index.max(0) as u32;
            let output = labels
                .get(class as usize)
                .map_or_else(|| Value::from(class), |label| Value::from(label.clone()));
            Inference {
                output,
                class: Some(class),
                confidence: probabilities.get(class as usize).copied(),
                probabilities: (!probabilities.is_empty()).then_some(probabilities),
            }
        }
        Prediction::Values { values, .. } => {
            let dims = schema
                .output
                .tensors()
                .next()
                .map(|tensor| tensor.dims.clone())
                .unwrap_or_default();
            Inference {
                output: tensor_to_json(&dims, &values),
                class: None,
                confidence: None,
                probabilities: None,
            }
        }
        Prediction::Sequence(steps) => Inference {
            output: chain_object(&schema.output, &steps).map_or(Value::Null, |object| {
                object_to_json(&schema.output, &object)
            }),
            class: None,
            confidence: None,
            probabilities: None,
        },
        Prediction::Bytes(bytes) => Inference {
            output: object_to_json(
                &schema.output,
                &codec::decode_prediction(&schema.output, &bytes),
            ),
            class: None,
            confidence: None,
            probabilities: None,
        },
    }
}
