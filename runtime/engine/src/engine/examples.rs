//! Loading an app's enabled examples from the store as the trainer's examples.

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
        for record in page
            .items
            .iter()
            .filter(|record| record.enabled && keep(record.id.0 as u64))
        {
            let decode_error = |source| Error::Decode {
                app: name.clone(),
                id: record.id.0,
                source,
            };
            let input = codec::decode(&model.schema.input, &store.blob(&record.input)?)
                .map_err(decode_error)?;
            let target = match &record.output {
                StoredOutput::Label { index, .. } => StoredTarget::Class(*index),
                StoredOutput::Blob(hash) => StoredTarget::Object(
                    codec::decode(&model.schema.output, &store.blob(hash)?)
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
