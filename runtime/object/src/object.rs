//! The checked object model and the finiteness / range checks shared by every loader.

use easeml_schema::{DataType, FieldKind};

use crate::{Error, Result};

/// The deepest chain or tree accepted (records from the root to the deepest leaf). It bounds the
/// recursion of checking, encoding, decoding and dropping objects.
pub const MAX_DEPTH: usize = 4096;

/// One object of a schema's input or output type, checked against that type.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    /// One entry per tensor field, in declaration order: its values in row-major order, exactly
    /// the field's element count, all finite.
    pub tensors: Vec<Vec<f32>>,
    /// One entry per recursive field, in declaration order: the next object, or `None` for null.
    pub children: Vec<Option<Box<Object>>>,
}

/// Dropped without recursion: a chain or tree of [`MAX_DEPTH`] levels would otherwise be dropped
/// by as many nested calls, on whatever thread lets go of it.
impl Drop for Object {
    fn drop(&mut self) {
        let mut stack: Vec<Box<Object>> = self.children.drain(..).flatten().collect();
        while let Some(mut record) = stack.pop() {
            stack.extend(record.children.drain(..).flatten());
        }
    }
}

impl Object {
    /// An object of a type with exactly one tensor field and no recursive field.
    pub fn single(values: Vec<f32>) -> Object {
        Object {
            tensors: vec![values],
            children: Vec::new(),
        }
    }

    /// The number of records in the object (1 plus every descendant).
    pub fn record_count(&self) -> usize {
        self.records().count()
    }

    /// The object and every descendant, depth first, without recursion (objects nest up to
    /// [`MAX_DEPTH`] levels, deeper than a small thread stack takes recursive calls).
    pub fn records(&self) -> impl Iterator<Item = &Object> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let record = stack.pop()?;
            stack.extend(record.children.iter().rev().flatten().map(|child| &**child));
            Some(record)
        })
    }

    /// Checks that the object has the shape of `data_type`: tensor counts and lengths, finite values,
    /// and depth at most [`MAX_DEPTH`]. `path` names the object in errors (e.g. `input`).
    pub fn check(&self, data_type: &DataType, path: &str) -> Result<()> {
        self.check_at(data_type, path, 1)
    }

    fn check_at(&self, data_type: &DataType, path: &str, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep {
                field: path.to_owned(),
                limit: MAX_DEPTH,
            });
        }
        let n_tensors = data_type.tensors().count();
        let n_children = data_type.recursive_names().count();
        if self.tensors.len() != n_tensors || self.children.len() != n_children {
            return Err(Error::Kind {
                field: path.to_owned(),
                expected: format!(
                    "{n_tensors} tensor field(s) and {n_children} recursive field(s)"
                ),
                found: format!(
                    "{} tensor(s) and {} child slot(s)",
                    self.tensors.len(),
                    self.children.len()
                ),
            });
        }
        let mut tensor_index = 0;
        let mut child_index = 0;
        for field in &data_type.fields {
            let field_path = format!("{path}.{}", field.name);
            match &field.kind {
                FieldKind::Tensor(tensor) => {
                    let values = &self.tensors[tensor_index];
                    tensor_index += 1;
                    if values.len() as u64 != tensor.element_count() {
                        return Err(Error::Shape {
                            field: field_path,
                            expected: format_dims(&tensor.dims),
                            found: format!("{} values", values.len()),
                        });
                    }
                    check_tensor_values(&field_path, &tensor.dims, values)?;
                }
                FieldKind::Recursive => {
                    if let Some(child) = &self.children[child_index] {
                        crate::deep_json::with_deep_stack(|| {
                            child.check_at(data_type, &field_path, depth + 1)
                        })?;
                    }
                    child_index += 1;
                }
            }
        }
        Ok(())
    }
}

/// Rejects NaN and infinite values, naming the field and the element's index in `dims`.
pub fn check_tensor_values(field: &str, dims: &[u64], values: &[f32]) -> Result<()> {
    match values.iter().position(|value| !value.is_finite()) {
        None => Ok(()),
        Some(position) => Err(Error::NotFinite {
            field: field.to_owned(),
            index: format_index(dims, position),
            value: values[position].to_string(),
        }),
    }
}

/// `[32,32,3]`: a shape as LANGUAGE.md writes it (no spaces).
pub fn format_dims<T: std::fmt::Display>(dims: &[T]) -> String {
    let inner: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("[{}]", inner.join(","))
}

/// The multi-dimensional index `[i,j,k]` of the row-major `position` in a tensor of shape `dims`.
pub fn format_index(dims: &[u64], position: usize) -> String {
    let mut remaining = position as u64;
    let mut index = vec![0u64; dims.len()];
    for (slot, dim) in index.iter_mut().zip(dims).rev() {
        let dim = (*dim).max(1);
        *slot = remaining % dim;
        remaining /= dim;
    }
    format_dims(&index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_row_major() {
        assert_eq!(format_index(&[2, 3], 0), "[0,0]");
        assert_eq!(format_index(&[2, 3], 4), "[1,1]");
        assert_eq!(format_index(&[32, 32, 3], 3 * 32 + 5), "[1,1,2]");
    }

    #[test]
    fn nan_is_named() {
        let error = check_tensor_values("input.x", &[2], &[1.0, f32::NAN]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "field `input.x`: the value at [1] is NaN; NaN and infinity are not allowed"
        );
    }
}
