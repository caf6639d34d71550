//! `Tensor`: a dense `f32` tensor with its shape, the value type of every tensor field of the
//! generated `Input` / `Output` structs.
//!
//! It serializes as nested JSON arrays (`[[1, 2], [3, 4]]` for shape `[2, 2]`), the same form the
//! `feed` command reads inline, so a typed value and a line of a feed file are the same data.

use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// A dense tensor of `f32` values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    dims: Vec<u64>,
    values: Vec<f32>,
}

/// A tensor whose shape or values do not fit where it is used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The number of values does not match the shape.
    #[error("a tensor of shape {dims:?} needs {expected} values, found {found}")]
    ValueCount {
        /// The shape.
        dims: Vec<u64>,
        /// How many values the shape needs.
        expected: u64,
        /// How many were given.
        found: usize,
    },
    /// A field's tensor has another shape than declared.
    #[error("field `{field}`: expected shape {expected:?}, found {found:?}")]
    Mismatch {
        /// The field.
        field: String,
        /// The declared shape.
        expected: Vec<u64>,
        /// The tensor's shape.
        found: Vec<u64>,
    },
}

impl Tensor {
    /// A tensor of the given shape from row-major values.
    pub fn new(dims: Vec<u64>, values: Vec<f32>) -> Result<Tensor, ShapeError> {
        let expected = dims.iter().product::<u64>();
        if expected != values.len() as u64 {
            return Err(ShapeError::ValueCount {
                dims,
                expected,
                found: values.len(),
            });
        }
        Ok(Tensor { dims, values })
    }

    /// A tensor of zeros.
    pub fn zeros(dims: Vec<u64>) -> Tensor {
        let count = dims.iter().product::<u64>() as usize;
        Tensor {
            dims,
            values: vec![0.0; count],
        }
    }

    /// The shape.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The values in row-major order.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Fails with a message naming `field` unless the shape is `expected`.
    pub fn check_shape(&self, field: &str, expected: &[u64]) -> Result<(), ShapeError> {
        if self.dims == expected {
            Ok(())
        } else {
            Err(ShapeError::Mismatch {
                field: field.to_owned(),
                expected: expected.to_vec(),
                found: self.dims.clone(),
            })
        }
    }
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Nested {
            dims: &self.dims,
            values: &self.values,
        }
        .serialize(serializer)
    }
}

/// One level of the nested-array view of a tensor.
struct Nested<'a> {
    dims: &'a [u64],
    values: &'a [f32],
}

impl Serialize for Nested<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some((&outer, inner)) = self.dims.split_first() else {
            return serializer.serialize_f32(self.values.first().copied().unwrap_or_default());
        };
        let stride = inner.iter().product::<u64>() as usize;
        let mut sequence = serializer.serialize_seq(Some(outer as usize))?;
        for index in 0..outer as usize {
            let values = &self.values[index * stride..(index + 1) * stride];
            if inner.is_empty() {
                sequence.serialize_element(&values[0])?;
            } else {
                sequence.serialize_element(&Nested {
                    dims: inner,
                    values,
                })?;
            }
        }
        sequence.end()
    }
}

/// A JSON number or nested array, read before its shape is known.
#[derive(Deserialize)]
#[serde(untagged)]
enum NestedValue {
    Number(f32),
    List(Vec<NestedValue>),
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tensor, D::Error> {
        let nested = NestedValue::deserialize(deserializer)?;
        let mut dims = Vec::new();
        let mut level = &nested;
        while let NestedValue::List(items) = level {
            dims.push(items.len() as u64);
            match items.first() {
                Some(first) => level = first,
                None => break,
            }
        }
        if dims.is_empty() {
            return Err(de::Error::custom(
                "a tensor is a (nested) array of numbers, not a single number",
            ));
        }
        // The shape is read off the first element of each level, so a ragged value can claim far
        // more elements than it holds: reserve by what the value holds at most, grow as it is read.
        let declared = dims.iter().try_fold(1usize, |product, dim| {
            usize::try_from(*dim)
                .ok()
                .and_then(|dim| product.checked_mul(dim))
        });
        let mut values = Vec::with_capacity(declared.unwrap_or(0).min(1 << 16));
        flatten(&nested, &dims, &mut values).map_err(de::Error::custom)?;
        Tensor::new(dims, values).map_err(de::Error::custom)
    }
}

fn flatten(value: &NestedValue, dims: &[u64], out: &mut Vec<f32>) -> Result<(), String> {
    match (value, dims.split_first()) {
        (NestedValue::Number(number), None) => {
            out.push(*number);
            Ok(())
        }
        (NestedValue::List(items), Some((&length, inner))) if items.len() as u64 == length => {
            items.iter().try_for_each(|item| flatten(item, inner, out))
        }
        _ => Err("a ragged array: every row of a tensor must have the same length".to_owned()),
    }
}

/// A label name that the app does not declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLabel {
    name: String,
    known: Vec<String>,
}

impl UnknownLabel {
    /// The error for `name`, listing the declared labels.
    pub fn new(name: &str, known: &[&str]) -> UnknownLabel {
        UnknownLabel {
            name: name.to_owned(),
            known: known.iter().map(|label| (*label).to_owned()).collect(),
        }
    }
}

impl fmt::Display for UnknownLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown label `{}`; the labels are {}",
            self.name,
            self.known.join(", ")
        )
    }
}

impl std::error::Error for UnknownLabel {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_round_trip_through_nested_json() {
        let tensor = Tensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
        let json = serde_json::to_string(&tensor).unwrap();
        assert_eq!(json, "[[1.0,2.0,3.0],[4.0,5.0,6.5]]");
        assert_eq!(serde_json::from_str::<Tensor>(&json).unwrap(), tensor);
    }

    #[test]
    fn bad_tensors_are_refused_with_a_reason() {
        let ragged = serde_json::from_str::<Tensor>("[[1, 2], [3]]")
            .unwrap_err()
            .to_string();
        assert!(ragged.contains("ragged"), "{ragged}");
        let scalar = serde_json::from_str::<Tensor>("3").unwrap_err().to_string();
        assert!(scalar.contains("not a single number"), "{scalar}");
        let count = Tensor::new(vec![2, 2], vec![1.0]).unwrap_err().to_string();
        assert_eq!(count, "a tensor of shape [2, 2] needs 4 values, found 1");
        let mismatch = Tensor::zeros(vec![3])
            .check_shape("image", &[2])
            .unwrap_err()
            .to_string();
        assert_eq!(mismatch, "field `image`: expected shape [2], found [3]");
    }
}
