//! Loading an app's enabled examples from the store as the trainer's examples, a page of 10,000
//! records at a time, their blobs read a thousand to a query ([`Store::blobs`]).

use super::*;
use easeml_store::BlobHash;

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
        // The page's blobs in a few queries (one per blob was most of the time of a large app's
        // load): inputs first, then the outputs kept as blobs, in record order.
        let mut hashes: Vec<&BlobHash> = records.iter().map(|record| &record.input).collect();
        hashes.extend(records.iter().filter_map(|record| match &record.output {
            StoredOutput::Blob(hash) => Some(hash),
            StoredOutput::Label { .. } => None,
        }));
        let mut blobs = store.blobs(&hashes)?.into_iter();
        let inputs_of_page: Vec<Vec<u8>> = blobs.by_ref().take(records.len()).collect();
        for (record, input) in records.iter().zip(&inputs_of_page) {
            let decode_error = |source| Error::Decode {
                app: name.clone(),
                id: record.id.0,
                source,
            };
            let input = codec::decode(&model.schema.input, input).map_err(decode_error)?;
            let target = match &record.output {
                StoredOutput::Label { index, .. } => StoredTarget::Class(*index),
                StoredOutput::Blob(_) => {
                    let bytes = blobs.next().unwrap_or_default();
                    StoredTarget::Object(
                        codec::decode(&model.schema.output, &bytes).map_err(decode_error)?,
                    )
                }
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
