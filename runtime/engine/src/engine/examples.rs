//! Loading an app's enabled examples from the store as the trainer's examples, a page of 10,000
//! records at a time, their bytes read a thousand to a query ([`Store::example_bytes`]).

use super::*;

/// An app's enabled examples as trainer examples; `None` when fewer than [`MIN_EXAMPLES`].
pub fn load_examples(store: &Store, app: AppId, model: &AppModel) -> Result<Option<Examples>> {
    load_examples_where(store, app, model, &|_| true, MIN_EXAMPLES)
}

/// The app's enabled examples whose ids `keep` accepts (the others are not read), in id order;
/// `None` when fewer than `min` (a MOP worker loads only its partition's training rows).
pub fn load_examples_where(
    store: &Store,
    app: AppId,
    model: &AppModel,
    keep: &dyn Fn(u64) -> bool,
    min: usize,
) -> Result<Option<Examples>> {
    let name = &model.schema.app;
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    let mut targets = Vec::new();
    let mut request = PageRequest {
        after: None,
        limit: 10_000,
    };
    loop {
        let page = store.examples(app, request)?;
        let records: Vec<_> = page
            .items
            .iter()
            .filter(|record| record.enabled && keep(record.id.0 as u64))
            .collect();
        // The page's bytes in a few queries (one per example was most of the time of a large
        // app's load), in record order.
        let bytes = store.example_bytes(&records)?;
        for (record, bytes) in records.iter().zip(bytes) {
            let decode_error = |source| Error::Decode {
                app: name.clone(),
                id: record.id.0,
                source,
            };
            let input = codec::decode(&model.schema.input, &bytes.input).map_err(decode_error)?;
            let target = match (&record.output, &bytes.output) {
                (StoredOutput::Label { index, .. }, _) => StoredTarget::Class(*index),
                (StoredOutput::Blob(_), output) => StoredTarget::Object(
                    codec::decode(&model.schema.output, output.as_deref().unwrap_or_default())
                        .map_err(decode_error)?,
                ),
            };
            ids.push(record.id.0 as u64);
            inputs.push(input);
            targets.push(target);
        }
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    if ids.len() < min.max(1) {
        return Ok(None);
    }
    Ok(Some(examples_of(model, ids, &inputs, &targets)?))
}
