//! Stored examples as JSON: the same forms the feed reads (DESIGN.md section 2), so what the API
//! returns can be fed back.

use easeml_client::object::object_to_json;
use serde_json::Value;

use easeml_client::object::Object;
use easeml_client::schema::FieldKind;
use easeml_client::wire::{FullExample, Listed, Preview};
use easeml_client::{CheckedOutput, ExampleRecord, LoadedExample, Schema, StoredOutput};

/// One example of a listing: `{id, enabled, label, label_index, input_hash, output_hash,
/// data_version, created_ms}`.
pub(crate) fn listed(record: &ExampleRecord) -> Listed {
    let (label, label_index, output_hash) = match &record.output {
        StoredOutput::Label { name, index } => (Some(name.clone()), Some(*index), None),
        StoredOutput::Blob(hash) => (None, None, Some(hash.as_str().to_owned())),
    };
    Listed {
        id: record.id.0,
        enabled: record.enabled,
        label,
        label_index,
        input_hash: record.input.as_str().to_owned(),
        output_hash,
        data_version: record.data_version,
        created_ms: record.created_ms,
        preview: None,
    }
}

/// The preview of an input ([`Preview`]): at most `limit` numbers, found without recursion (a
/// chain may be [`easeml_client::object::MAX_DEPTH`] steps long) and without copying the input.
pub(crate) fn preview(schema: &Schema, input: &Object, limit: usize) -> Preview {
    let recursive = schema
        .input
        .fields
        .iter()
        .any(|field| matches!(field.kind, FieldKind::Recursive));
    let mut values = Vec::new();
    let mut count = 0u64;
    if recursive {
        let mut stack = vec![input];
        while let Some(step) = stack.pop() {
            let first = step.tensors.iter().find_map(|tensor| tensor.first());
            if let Some(&value) = first {
                count += 1;
                if values.len() < limit {
                    values.push(value);
                }
            }
            stack.extend(step.children.iter().rev().flatten().map(|child| &**child));
        }
    } else {
        for tensor in &input.tensors {
            count += tensor.len() as u64;
            let room = limit - values.len();
            values.extend(tensor.iter().take(room));
        }
    }
    Preview {
        kind: if recursive { "series" } else { "values" }.to_owned(),
        values,
        count,
    }
}

/// One example in full: the listing's keys plus `input` and `output` in the feed's JSON forms
/// (`output` is the label's name for a label).
pub(crate) fn full(schema: &Schema, example: &LoadedExample) -> FullExample {
    FullExample {
        listed: listed(&example.record),
        input: object_to_json(&schema.input, &example.input),
        output: match &example.output {
            CheckedOutput::Label(label) => Value::String(label.clone()),
            CheckedOutput::Object(object) => object_to_json(&schema.output, object),
        },
    }
}
