//! The embedded backend: one app of the local store (a `Store` connection, the app's row, and the
//! model loaded for inference through the process's [`LocalModels`](crate::LocalModels)).

use easeml_object::{Object, codec};
use easeml_schema::Schema;
use easeml_store::{
    App, AppId, Blob, EnsembleRecord, ExampleFilter, ExampleId, ExampleRecord, NewExample,
    NewOutput, Page, PageRequest, RunRecord, RunState, Store, StoredOutput,
};

use crate::backend::{Backend, Batch, Drive};
use crate::client::{FeedReport, InferReport, LoadedExample};
use crate::feed::{CheckedExample, CheckedOutput, FeedOptions};
use crate::{Error, HopProgress, QualityMetric, Result, Status, constraint_limits};
use easeml_serving::{LoadedModel, local_models};

/// The embedded backend: a store connection and the app's row.
#[derive(Debug)]
pub(crate) struct Local {
    store: Store,
    app: App,
    /// The best model, loaded on the first inference and reloaded when a better run finishes.
    served: Option<Box<dyn LoadedModel>>,
}

impl Local {
    /// The app `app` of `store`.
    pub(crate) fn new(store: Store, app: App) -> Local {
        Local {
            store,
            app,
            served: None,
        }
    }
}

impl Backend for Local {
    fn app_name(&self) -> &str {
        &self.app.name
    }

    fn data_version(&self) -> Result<u64> {
        Ok(self.store.app(self.app.id)?.data_version)
    }

    fn labels(&self) -> Result<Option<Vec<String>>> {
        Ok(self.store.label_map(self.app.id)?.map(|map| map.labels))
    }

    fn labels_declared(&self) -> bool {
        self.app.labels_declared
    }

    fn feed(
        &mut self,
        _schema: &Schema,
        unit: &'static str,
        options: &FeedOptions,
        drive: Drive<'_>,
    ) -> Result<FeedReport> {
        let mut batch = Batch::new(self.store.label_map(self.app.id)?, unit);
        let mut sink = LocalSink::new(options.max_batch_memory);
        let store = &self.store;
        drive(&mut |line, checked| {
            match checked {
                Ok(example) => {
                    if batch.accept(line, &example.output) {
                        sink.push(store, example)?;
                    }
                }
                Err(message) => batch.reject(line, message),
            }
            Ok(())
        })?;
        let skipped = batch.finish(options.skip_bad)?;
        let report = self.store.insert_examples(self.app.id, &sink.examples)?;
        Ok(FeedReport {
            added: report.ids.len(),
            ids: report.ids,
            data_version: report.data_version,
            new_labels: report.new_labels,
            skipped,
            ignored_files: crate::feed::IgnoredFiles::default(),
        })
    }

    fn examples(&self, page: PageRequest, filter: &ExampleFilter) -> Result<Page<ExampleRecord>> {
        Ok(self.store.examples_filtered(self.app.id, page, filter)?)
    }

    fn example(&self, schema: &Schema, id: ExampleId) -> Result<LoadedExample> {
        let record = self.store.example(self.app.id, id)?;
        let decode_error = |source| Error::Decode { id: id.0, source };
        let bytes = self
            .store
            .example_bytes(&[&record])?
            .pop()
            .unwrap_or_else(|| easeml_store::ExampleBytes {
                input: Vec::new(),
                output: None,
            });
        let input = codec::decode(&schema.input, &bytes.input).map_err(decode_error)?;
        let output = match &record.output {
            StoredOutput::Blob(_) => CheckedOutput::Object(
                codec::decode(&schema.output, bytes.output.as_deref().unwrap_or_default())
                    .map_err(decode_error)?,
            ),
            StoredOutput::Label { name, .. } => CheckedOutput::Label(name.clone()),
        };
        Ok(LoadedExample {
            record,
            input,
            output,
        })
    }

    fn set_enabled(&mut self, id: ExampleId, enabled: bool) -> Result<u64> {
        Ok(self.store.set_enabled(self.app.id, id, enabled)?)
    }

    fn status(&self, schema: &Schema) -> Result<Status> {
        let app = self.store.app(self.app.id)?;
        let runs = self.store.runs(self.app.id)?;
        let labels = match self.store.label_map(self.app.id)? {
            Some(map) => map.labels,
            None => Vec::new(),
        };
        let mut status = Status::from_runs(
            app.name,
            app.system_type,
            app.data_version,
            self.store.example_counts(self.app.id)?,
            &runs,
            &constraint_limits(schema),
            (QualityMetric::of(schema), &labels),
        );
        status.add_ensemble(
            &runs,
            &self.store.ensembles(self.app.id)?,
            &constraint_limits(schema),
        );
        status.add_estimate(&self.store.estimates(self.app.id)?);
        for report in &mut status.runs {
            if matches!(report.state, RunState::Queued | RunState::Running) {
                report.hops = HopProgress::of(&self.store.sub_epochs(report.id)?);
            }
        }
        Ok(status)
    }

    /// Answers with the app's best model, through the process's model loader (none: `NoEngine`).
    fn infer(&mut self, schema: &Schema, inputs: &[Object]) -> Result<InferReport> {
        // Without a model loader nothing can answer, trained or not: say that first.
        let models = local_models().ok_or(Error::NoEngine)?;
        let runs = self.store.runs(self.app.id)?;
        let ensembles = self.store.ensembles(self.app.id)?;
        let served = easeml_store::served(&runs, &ensembles, &constraint_limits(schema));
        // What is served: the best run, with the ensemble's members and weights when one is.
        let key = |run: &RunRecord, ensemble: Option<&EnsembleRecord>| {
            (run.id, ensemble.map(|e| (e.members.clone(), e.created_ms)))
        };
        let Some(best) = served.map(|served| key(served.run(), served.ensemble())) else {
            let running = runs
                .iter()
                .any(|run| matches!(run.state, RunState::Queued | RunState::Running));
            return Err(Error::NoModel {
                app: self.app.name.clone(),
                training: running,
                server: None,
            });
        };
        if self
            .served
            .as_ref()
            .is_none_or(|served| key(served.run(), served.ensemble()) != best)
        {
            self.served = models.load_best(&self.store, self.app.id)?;
        }
        let served = self.served.as_ref().ok_or_else(|| Error::NoModel {
            app: self.app.name.clone(),
            training: false,
            server: None,
        })?;
        let answers = served.predict(inputs)?;
        Ok(InferReport {
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, a)| (i + 1, a))
                .collect(),
            run: served.run().id,
            run_number: served.run().number,
            candidate: served.run().candidate.clone(),
            data_version: served.run().data_version,
            score: None,
        })
    }

    fn store(&self) -> Option<&Store> {
        Some(&self.store)
    }

    fn store_mut(&mut self) -> Option<&mut Store> {
        Some(&mut self.store)
    }

    fn into_store(self: Box<Self>) -> Option<Store> {
        Some(self.store)
    }

    fn app_id(&self) -> Option<AppId> {
        Some(self.app.id)
    }
}

/// The encoded examples of an embedded feed: in memory up to a limit, in blob files beyond it.
struct LocalSink {
    examples: Vec<NewExample>,
    held_bytes: usize,
    memory_limit: usize,
}

impl LocalSink {
    fn new(memory_limit: usize) -> LocalSink {
        LocalSink {
            examples: Vec::new(),
            held_bytes: 0,
            memory_limit,
        }
    }

    /// Keeps encoded bytes in memory up to the limit, and writes them to the store beyond it.
    fn hold(&mut self, store: &Store, bytes: Vec<u8>) -> Result<Blob> {
        if self.held_bytes + bytes.len() > self.memory_limit {
            Ok(Blob::Stored(store.put_blob(&bytes)?))
        } else {
            self.held_bytes += bytes.len();
            Ok(Blob::Bytes(bytes))
        }
    }

    fn push(&mut self, store: &Store, example: CheckedExample) -> Result<()> {
        let output = match example.output {
            CheckedOutput::Object(object) => {
                NewOutput::Blob(self.hold(store, codec::encode(&object))?)
            }
            CheckedOutput::Label(label) => NewOutput::Label(label),
        };
        let input = self.hold(store, codec::encode(&example.input))?;
        self.examples.push(NewExample { input, output });
        Ok(())
    }
}
