//! Stored examples as JSON: the same forms the feed reads (DESIGN.md section 2), so what the API
//! returns can be fed back.

use easeml_client::object::object_to_json;
use serde_json::Value;

use easeml_client::wire::{FullExample, Listed};
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
