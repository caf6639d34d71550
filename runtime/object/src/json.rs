//! Checking JSON values against a data type (DESIGN.md section 2, the JSON Lines feed form).
//!
//! Accepted forms for an object of type `T`:
//! - an object `{"field": ..., "next": {...} | null}` with every tensor field present and recursive
//!   fields optional (missing means null);
//! - when `T` is exactly one tensor field: the nested array itself (`[[1,2],[3,4]]`), or a bare number
//!   when that tensor has one element;
//! - when `T` has exactly one recursive field (a chain): a non-empty list of records, each an object
//!   of the form above without the recursive field; the list is linked through that field.
//!
//! Tensors are nested arrays matching the declared shape exactly.

use easeml_schema::{DataType, FieldKind, Tensor};
use serde_json::Value;

use crate::deep_json::with_deep_stack;
use crate::object::{MAX_DEPTH, Object, format_dims, format_index};
use crate::{Error, Result};

/// Checks `value` against `data_type` and builds the object. `path` names the object in errors
/// (`input` or `output`).
pub fn object_from_json(data_type: &DataType, value: &Value, path: &str) -> Result<Object> {
    object_at(data_type, value, path, 1)
}

fn object_at(data_type: &DataType, value: &Value, path: &str, depth: usize) -> Result<Object> {
    if depth > MAX_DEPTH {
        return Err(Error::TooDeep {
            field: path.to_owned(),
            limit: MAX_DEPTH,
        });
    }
    let recursive: Vec<&str> = data_type.recursive_names().collect();
    match value {
        Value::Object(map) => {
            for key in map.keys() {
                if !data_type.fields.iter().any(|field| &field.name == key) {
                    return Err(Error::UnknownField {
                        field: format!("{path}.{key}"),
                        known: field_names(data_type),
                    });
                }
            }
            let mut object = Object::default();
            for field in &data_type.fields {
                let field_path = format!("{path}.{}", field.name);
                let field_value = map.get(&field.name);
                match &field.kind {
                    FieldKind::Tensor(tensor) => {
                        let Some(field_value) = field_value else {
                            return Err(Error::MissingField { field: field_path });
                        };
                        object
                            .tensors
                            .push(tensor_from_json(tensor, field_value, &field_path)?);
                    }
                    FieldKind::Recursive => {
                        let child = match field_value {
                            None | Some(Value::Null) => None,
                            Some(child) => Some(Box::new(with_deep_stack(|| {
                                object_at(data_type, child, &field_path, depth + 1)
                            })?)),
                        };
                        object.children.push(child);
                    }
                }
            }
            Ok(object)
        }
        Value::Array(records)
            if recursive.len() == 1 && records.first().is_some_and(Value::is_object) =>
        {
            chain_from_json(data_type, records, path, depth)
        }
        _ => match single_tensor(data_type) {
            Some(tensor) => Ok(Object::single(tensor_from_json(tensor, value, path)?)),
            None => Err(Error::Kind {
                field: path.to_owned(),
                expected: expected_object(data_type),
                found: describe(value),
            }),
        },
    }
}

/// A chain given as a list of records: record `i` links to record `i + 1` through the one recursive
/// field. Built from the end so that no recursion is needed.
fn chain_from_json(
    data_type: &DataType,
    records: &[Value],
    path: &str,
    depth: usize,
) -> Result<Object> {
    if depth + records.len() - 1 > MAX_DEPTH {
        return Err(Error::TooDeep {
            field: path.to_owned(),
            limit: MAX_DEPTH,
        });
    }
    let link = data_type
        .recursive_names()
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut next: Option<Box<Object>> = None;
    for (position, record) in records.iter().enumerate().rev() {
        let record_path = format!("{path}[{position}]");
        let Value::Object(map) = record else {
            return Err(Error::Kind {
                field: record_path,
                expected: expected_object(data_type),
                found: describe(record),
            });
        };
        if map.get(&link).is_some_and(|value| !value.is_null()) {
            return Err(Error::Kind {
                field: format!("{record_path}.{link}"),
                expected: format!(
                    "null or nothing (in a list of records, `{link}` is the next record)"
                ),
                found: describe(&map[&link]),
            });
        }
        let mut object = object_at(data_type, record, &record_path, depth)?;
        object.children[0] = next.take();
        next = Some(Box::new(object));
    }
    // `records` is non-empty (checked by the caller), so `next` is set.
    next.map(|object| *object).ok_or_else(|| Error::Kind {
        field: path.to_owned(),
        expected: "a non-empty list of records".to_owned(),
        found: "an empty list".to_owned(),
    })
}

fn tensor_from_json(tensor: &Tensor, value: &Value, path: &str) -> Result<Vec<f32>> {
    let expected = format_dims(&tensor.dims);
    // A bare number for a one-element tensor, e.g. a regression output `[1]`.
    if let Value::Number(_) = value
        && tensor.element_count() == 1
    {
        return flatten(tensor, &Value::Array(vec![value.clone()]), path);
    }
    match json_shape(value) {
        Ok(shape)
            if shape.len() == tensor.dims.len()
                && shape.iter().zip(&tensor.dims).all(|(a, b)| *a as u64 == *b) =>
        {
            flatten(tensor, value, path)
        }
        Ok(shape) => Err(Error::Shape {
            field: path.to_owned(),
            expected,
            found: if shape.is_empty() {
                "a single number".to_owned()
            } else {
                format_dims(&shape)
            },
        }),
        Err(found) => Err(Error::Shape {
            field: path.to_owned(),
            expected,
            found,
        }),
    }
}

fn flatten(tensor: &Tensor, value: &Value, path: &str) -> Result<Vec<f32>> {
    let mut values = Vec::with_capacity(tensor.element_count() as usize);
    let mut stack = vec![value];
    // Depth-first, left to right: push children in reverse.
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Number(number) => {
                let wide = number.as_f64().unwrap_or(f64::NAN);
                let narrow = wide as f32;
                if !wide.is_finite() || !narrow.is_finite() {
                    return Err(Error::OutOfRange {
                        field: path.to_owned(),
                        index: format_index(&tensor.dims, values.len()),
                        value: number.to_string(),
                    });
                }
                values.push(narrow);
            }
            // `json_shape` accepted the value, so only arrays and numbers remain.
            other => {
                return Err(Error::Kind {
                    field: path.to_owned(),
                    expected: "a number".to_owned(),
                    found: describe(other),
                });
            }
        }
    }
    Ok(values)
}

/// The shape of a nested JSON array of numbers (`[]` for a number), or a description of why it has
/// none (a ragged array, a string inside, ...).
fn json_shape(value: &Value) -> std::result::Result<Vec<usize>, String> {
    match value {
        Value::Number(_) => Ok(Vec::new()),
        Value::Array(items) => {
            let Some(first) = items.first() else {
                return Ok(vec![0]);
            };
            let inner = json_shape(first)?;
            for (position, item) in items.iter().enumerate().skip(1) {
                let other = json_shape(item)?;
                if other != inner {
                    return Err(format!(
                        "a ragged array (element 0 has shape {}, element {position} has shape {})",
                        format_dims(&inner),
                        format_dims(&other)
                    ));
                }
            }
            let mut shape = vec![items.len()];
            shape.extend(inner);
            Ok(shape)
        }
        other => Err(describe(other)),
    }
}

/// How a JSON value is named in errors: its shape for arrays of numbers, its kind otherwise.
pub fn json_shape_description(value: &Value) -> String {
    match json_shape(value) {
        Ok(shape) if shape.is_empty() => "a single number".to_owned(),
        Ok(shape) => format_dims(&shape),
        Err(description) => description,
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null (NaN and infinity serialize as null)".to_owned(),
        Value::Bool(flag) => format!("the boolean {flag}"),
        Value::Number(number) => format!("the number {number}"),
        Value::String(text) => {
            let shown: String = text.chars().take(40).collect();
            format!("the string {shown:?}")
        }
        Value::Array(items) => format!("an array of {} element(s)", items.len()),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn single_tensor(data_type: &DataType) -> Option<&Tensor> {
    match data_type.fields.as_slice() {
        [field] => match &field.kind {
            FieldKind::Tensor(tensor) => Some(tensor),
            FieldKind::Recursive => None,
        },
        _ => None,
    }
}

fn field_names(data_type: &DataType) -> String {
    let names: Vec<&str> = data_type
        .fields
        .iter()
        .map(|field| field.name.as_str())
        .collect();
    names.join(", ")
}

fn expected_object(data_type: &DataType) -> String {
    let recursive = data_type.recursive_names().count();
    let mut text = format!("an object with fields {}", field_names(data_type));
    if recursive == 1 {
        text.push_str(", or a list of such records (a chain)");
    }
    text
}

#[cfg(test)]
mod tests {
    use easeml_schema::Field;
    use serde_json::json;

    use super::*;

    fn tensor_field(name: &str, dims: &[u64]) -> Field {
        Field {
            name: name.to_owned(),
            kind: FieldKind::Tensor(Tensor {
                dims: dims.to_vec(),
            }),
        }
    }

    fn recursive_field(name: &str) -> Field {
        Field {
            name: name.to_owned(),
            kind: FieldKind::Recursive,
        }
    }

    fn image() -> DataType {
        DataType {
            fields: vec![tensor_field("field1", &[2, 2, 1])],
        }
    }

    fn chain() -> DataType {
        DataType {
            fields: vec![tensor_field("reading", &[2]), recursive_field("next")],
        }
    }

    fn tree() -> DataType {
        DataType {
            fields: vec![
                tensor_field("value", &[1]),
                recursive_field("left"),
                recursive_field("right"),
            ],
        }
    }

    fn error(data_type: &DataType, value: Value) -> String {
        object_from_json(data_type, &value, "input")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn nested_array_and_named_object_agree() {
        let bare = object_from_json(&image(), &json!([[[1], [2]], [[3], [4]]]), "input").unwrap();
        let named = object_from_json(
            &image(),
            &json!({"field1": [[[1], [2]], [[3], [4]]]}),
            "input",
        )
        .unwrap();
        assert_eq!(bare, named);
        assert_eq!(bare.tensors[0], vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn shape_errors_name_expected_and_found() {
        assert_eq!(
            error(&image(), json!([[1, 2], [3, 4]])),
            "field `input`: expected shape [2,2,1], found [2,2]"
        );
        assert_eq!(
            error(&image(), json!([[[1], [2]], [[3]]])),
            "field `input`: expected shape [2,2,1], found a ragged array (element 0 has shape [2,1], element 1 has shape [1,1])"
        );
        assert_eq!(
            error(&image(), json!({"field1": [[[1], ["a"]], [[3], [4]]]})),
            "field `input.field1`: expected shape [2,2,1], found the string \"a\""
        );
        assert_eq!(
            error(&image(), json!(1e300)),
            "field `input`: expected shape [2,2,1], found a single number"
        );
        assert_eq!(
            error(&image(), json!([[[1e300], [2]], [[3], [4]]])),
            "field `input`: the value 1e+300 at [0,0,0] does not fit in a 32-bit float"
        );
    }

    #[test]
    fn chain_as_list_and_as_nesting_agree() {
        let list = object_from_json(
            &chain(),
            &json!([{"reading": [1, 2]}, {"reading": [3, 4]}, {"reading": [5, 6], "next": null}]),
            "input",
        )
        .unwrap();
        let nested = object_from_json(
            &chain(),
            &json!({"reading": [1, 2], "next": {"reading": [3, 4], "next": {"reading": [5, 6]}}}),
            "input",
        )
        .unwrap();
        assert_eq!(list, nested);
        assert_eq!(list.record_count(), 3);
    }

    #[test]
    fn chain_errors_name_the_record() {
        assert_eq!(
            error(
                &chain(),
                json!([{"reading": [1, 2]}, {"reading": [3, 4, 5]}])
            ),
            "field `input[1].reading`: expected shape [2], found [3]"
        );
        assert_eq!(
            error(&chain(), json!([{"reading": [1, 2]}, {"readin": [3, 4]}])),
            "field `input[1].readin` is not in the schema; the fields are: reading, next"
        );
        assert_eq!(
            error(&chain(), json!([{"reading": [1, 2]}, {}])),
            "field `input[1].reading` is missing"
        );
        assert_eq!(
            error(&chain(), json!("hello")),
            "field `input`: expected an object with fields reading, next, or a list of such records (a chain), found the string \"hello\""
        );
    }

    #[test]
    fn tree_nests_left_and_right() {
        let object = object_from_json(
            &tree(),
            &json!({"value": [1], "left": {"value": 2, "left": null, "right": {"value": [3]}}, "right": null}),
            "input",
        )
        .unwrap();
        assert_eq!(object.record_count(), 3);
        assert_eq!(
            error(
                &tree(),
                json!({"value": [1], "left": {"value": [2, 3]}, "right": null})
            ),
            "field `input.left.value`: expected shape [1], found [2]"
        );
    }

    #[test]
    fn depth_is_bounded() {
        let mut value = json!({"reading": [1, 2]});
        let records: Vec<Value> = (0..MAX_DEPTH + 1).map(|_| value.take()).collect();
        let records: Vec<Value> = records
            .into_iter()
            .map(|_| json!({"reading": [1, 2]}))
            .collect();
        assert_eq!(
            error(&chain(), Value::Array(records)),
            format!("field `input`: the object nests more than {MAX_DEPTH} levels deep")
        );
    }
}

/// The JSON form of a checked object, the inverse of [`object_from_json`] and the one function that
/// writes an object as JSON (stored examples over HTTP, inference answers, the refine page): the
/// nested array itself when the type is exactly one tensor field; else a record of the tensor
/// fields, a chain (exactly one recursive field) as a list of records in chain order, a tree (two or
/// more recursive fields) as nested records with `null` for an absent child.
pub fn object_to_json(data_type: &DataType, object: &Object) -> Value {
    let recursive: Vec<&str> = data_type.recursive_names().collect();
    if recursive.is_empty()
        && let ([field], [values]) = (data_type.fields.as_slice(), object.tensors.as_slice())
        && let FieldKind::Tensor(tensor) = &field.kind
    {
        return tensor_to_json(&tensor.dims, values);
    }
    if recursive.len() == 1 {
        // A chain: walk it instead of recursing, so a long chain needs no deep stack.
        let mut records = Vec::new();
        let mut next = Some(object);
        while let Some(record) = next {
            records.push(Value::Object(record_fields(data_type, record)));
            next = record.children.first().and_then(|child| child.as_deref());
        }
        return Value::Array(records);
    }
    let mut map = record_fields(data_type, object);
    for (name, child) in recursive.iter().zip(&object.children) {
        let value = match child {
            Some(child) => with_deep_stack(|| object_to_json(data_type, child)),
            None => Value::Null,
        };
        map.insert((*name).to_owned(), value);
    }
    Value::Object(map)
}

/// The serde form of the generated types (a generated crate's `Input` and `Output`), for a checked
/// object: every level a record of all its fields by name, a tensor as its nested array (a bare
/// list for one dimension), a recursive field the child's record or `null`. [`object_to_json`]'s
/// shorter forms (a lone tensor, a chain as a list) are for people and lines; this one is for
/// `serde` (`easeml_client::Client::typed_output`).
pub fn object_to_record_json(data_type: &DataType, object: &Object) -> Value {
    let mut map = record_fields(data_type, object);
    for (name, child) in data_type.recursive_names().zip(&object.children) {
        let value = match child {
            Some(child) => with_deep_stack(|| object_to_record_json(data_type, child)),
            None => Value::Null,
        };
        map.insert(name.to_owned(), value);
    }
    Value::Object(map)
}

/// The tensor fields of one record, by name.
fn record_fields(data_type: &DataType, object: &Object) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    let tensors = data_type
        .fields
        .iter()
        .filter_map(|field| match &field.kind {
            FieldKind::Tensor(tensor) => Some((field.name.as_str(), tensor)),
            FieldKind::Recursive => None,
        });
    for ((name, tensor), values) in tensors.zip(&object.tensors) {
        map.insert(name.to_owned(), tensor_to_json(&tensor.dims, values));
    }
    map
}

/// Row-major `values` as nested arrays of shape `dims` (a bare list for one dimension).
pub fn tensor_to_json(dims: &[u64], values: &[f32]) -> Value {
    fn nest(dims: &[u64], values: &[f32]) -> Value {
        match dims {
            [] | [_] => Value::Array(values.iter().map(|&value| number(value)).collect()),
            [outer, inner @ ..] => {
                let chunk = (values.len() / (*outer).max(1) as usize).max(1);
                Value::Array(values.chunks(chunk).map(|part| nest(inner, part)).collect())
            }
        }
    }
    fn number(value: f32) -> Value {
        serde_json::Number::from_f64(f64::from(value)).map_or(Value::Null, Value::Number)
    }
    nest(dims, values)
}

#[cfg(test)]
mod to_json_tests {
    use super::*;
    use easeml_schema::Field;

    fn tensor(name: &str, dims: &[u64]) -> Field {
        Field {
            name: name.to_owned(),
            kind: FieldKind::Tensor(Tensor {
                dims: dims.to_vec(),
            }),
        }
    }

    #[test]
    fn objects_round_trip_through_their_json_form() {
        let single = DataType {
            fields: vec![tensor("x", &[2, 3])],
        };
        let object = Object::single(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
        let json = object_to_json(&single, &object);
        assert_eq!(json.to_string(), "[[1.0,2.0,3.0],[4.0,5.0,6.5]]");
        assert_eq!(object_from_json(&single, &json, "x").unwrap(), object);

        let chain = DataType {
            fields: vec![
                tensor("reading", &[2]),
                Field {
                    name: "next".to_owned(),
                    kind: FieldKind::Recursive,
                },
            ],
        };
        let object = Object {
            tensors: vec![vec![1.0, 2.0]],
            children: vec![Some(Box::new(Object {
                tensors: vec![vec![3.0, 4.0]],
                children: vec![None],
            }))],
        };
        let json = object_to_json(&chain, &object);
        assert_eq!(
            json,
            serde_json::json!([{"reading": [1.0, 2.0]}, {"reading": [3.0, 4.0]}])
        );
        assert_eq!(object_from_json(&chain, &json, "input").unwrap(), object);
    }
}
