//! Stored examples as JSON: the same forms the feed reads (DESIGN.md section 2), so what the API
//! returns can be fed back.

use easeml_compiler::schema::{DataType, FieldKind};
use easeml_example::Object;
use serde_json::{Map, Value, json};

use crate::{CheckedOutput, ExampleRecord, LoadedExample, StoredOutput};

/// An object as JSON: a nested array for a type that is one tensor field; else a record of its
/// fields, a chain (one recursive field) as a list of records, a tree as nested records.
pub(crate) fn object_to_json(data_type: &DataType, object: &Object) -> Value {
    let recursive: Vec<&str> = data_type.recursive_names().collect();
    if recursive.is_empty()
        && let ([field], [values]) = (data_type.fields.as_slice(), object.tensors.as_slice())
        && let FieldKind::Tensor(tensor) = &field.kind
    {
        return tensor_to_json(&tensor.dims, values);
    }
    if recursive.len() == 1 {
        // A chain: walk it instead of recursing.
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
            Some(child) => object_to_json(data_type, child),
            None => Value::Null,
        };
        map.insert((*name).to_owned(), value);
    }
    Value::Object(map)
}

/// The tensor fields of one record.
fn record_fields(data_type: &DataType, object: &Object) -> Map<String, Value> {
    let mut map = Map::new();
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

/// Row-major values as arrays nested to `dims`.
fn tensor_to_json(dims: &[u64], values: &[f32]) -> Value {
    match dims {
        [] | [_] => Value::Array(values.iter().map(|value| json!(value)).collect()),
        [_, inner @ ..] => {
            let step = inner.iter().product::<u64>().max(1) as usize;
            Value::Array(
                values
                    .chunks(step)
                    .map(|chunk| tensor_to_json(inner, chunk))
                    .collect(),
            )
        }
    }
}

/// The label of a stored example, if its output is one.
pub(crate) fn label_of(record: &ExampleRecord) -> Option<&str> {
    match &record.output {
        StoredOutput::Label { name, .. } => Some(name),
        StoredOutput::Blob(_) => None,
    }
}

/// One example of a listing: `{id, enabled, label, data_version, created_ms}`.
pub(crate) fn listed(record: &ExampleRecord) -> Value {
    json!({
        "id": record.id.0,
        "enabled": record.enabled,
        "label": label_of(record),
        "data_version": record.data_version,
        "created_ms": record.created_ms,
    })
}

/// One example in full: the listing's keys plus `input` and `output` in the feed's JSON forms
/// (`output` is the label's name for a label).
pub(crate) fn full(schema: &crate::Schema, example: &LoadedExample) -> Value {
    let mut value = listed(&example.record);
    if let Value::Object(map) = &mut value {
        map.insert(
            "input".to_owned(),
            object_to_json(&schema.input, &example.input),
        );
        let output = match &example.output {
            CheckedOutput::Label(label) => Value::String(label.clone()),
            CheckedOutput::Object(object) => object_to_json(&schema.output, object),
        };
        map.insert("output".to_owned(), output);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_compiler::{Registry, compile};
    use easeml_example::object_from_json;

    fn round_trip(source: &str, value: Value) {
        let schema = compile(source, "app", &Registry::builtin()).unwrap().schema;
        let object = object_from_json(&schema.input, &value, "input").unwrap();
        let back = object_to_json(&schema.input, &object);
        let again = object_from_json(&schema.input, &back, "input").unwrap();
        assert_eq!(object, again, "{back}");
    }

    #[test]
    fn every_form_reads_back() {
        round_trip(
            "Input = [2, 2]\nOutput = [1]",
            json!([[1.0, 2.0], [3.0, 4.0]]),
        );
        round_trip(
            "type Input\n  a :: Tensor[2]\n  b :: Tensor[1]\nend\nOutput = [1]",
            json!({"a": [1.0, 2.0], "b": [3.0]}),
        );
        round_trip(
            "type Input\n  x :: Tensor[1]\n  next :: Nullable{Input}\nend\nOutput = [1]",
            json!([{"x": [1.0]}, {"x": [2.0]}, {"x": [3.0]}]),
        );
        round_trip(
            "type Input\n  x :: Tensor[1]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [1]",
            json!({"x": [1.0], "left": {"x": [2.0]}, "right": null}),
        );
    }
}
