//! The `Client`: one app's handle on its store.

use std::io::BufRead;

use easeml_compiler::schema::{Metric, Schema};
use easeml_example::{Object, codec};
use easeml_store::{
    App, Blob, ExampleId, ExampleRecord, NewApp, NewExample, NewOutput, Page, PageRequest, Store,
    StoredOutput,
};
use serde::Serialize;

#[cfg(feature = "engine")]
use easeml_engine::ServedModel;
use easeml_example::Inference;
use easeml_store::RunId;
#[cfg(feature = "engine")]
use easeml_store::RunState;

use crate::feed::{CheckedExample, CheckedOutput, FeedOptions, LineChecker, LineError};
use crate::{Connection, Error, Result, Status};

/// What an app is: its schema and the manifest stored with it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSpec {
    schema: Schema,
    manifest: String,
}

impl AppSpec {
    /// An app described by its schema alone (the manifest stored is `{app, system_type, schema}`).
    pub fn from_schema(schema: Schema) -> AppSpec {
        let manifest = serde_json::json!({
            "app": schema.app,
            "system_type": schema.system_type(),
            "schema": schema,
        })
        .to_string();
        AppSpec { schema, manifest }
    }

    /// An app described by the generated crate's `easeml.json`: a JSON object whose `schema` key is the
    /// [`Schema`]; a `system_type` key, when present, must be the schema's. Other keys are kept as they
    /// are.
    pub fn from_manifest_json(text: &str) -> Result<AppSpec> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| Error::Manifest(error.to_string()))?;
        let schema_value = value
            .get("schema")
            .ok_or_else(|| Error::Manifest("no `schema` key".to_owned()))?;
        let schema: Schema = serde_json::from_value(schema_value.clone())
            .map_err(|error| Error::Manifest(format!("`schema`: {error}")))?;
        validate_schema(&schema)
            .map_err(|message| Error::Manifest(format!("`schema`: {message}")))?;
        if let Some(system_type) = value.get("system_type").and_then(|value| value.as_str())
            && system_type != schema.system_type()
        {
            return Err(Error::Manifest(format!(
                "`system_type` is {system_type}, but the schema's is {}",
                schema.system_type()
            )));
        }
        Ok(AppSpec {
            schema,
            manifest: text.to_owned(),
        })
    }

    /// The app's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The manifest text stored with the app.
    pub fn manifest(&self) -> &str {
        &self.manifest
    }

    /// Registers the app in `store`; returns it with its token (shown once; the store keeps only its
    /// sha256). An app of that name already registered is `Error::Store(AppExists)`. Shared by
    /// [`Client::open`], `easeml apps register` and the server's `POST /api/v1/apps`.
    pub fn register(&self, store: &mut Store) -> Result<(App, String)> {
        let schema = &self.schema;
        let new_app = NewApp {
            name: schema.app.clone(),
            manifest: self.manifest.clone(),
            system_type: schema.system_type(),
            label_capacity: label_capacity(schema),
            declared_labels: schema.labels.clone(),
        };
        Ok(store.register_app(&new_app)?)
    }

    /// Checks that `app`, registered in `store`, has this spec's canonical type and declared labels
    /// (else its stored data would not fit this program).
    pub fn check_registered(&self, store: &Store, app: &App) -> Result<()> {
        let schema = &self.schema;
        let stored_labels = if app.labels_declared {
            store.label_map(app.id)?.map(|map| map.labels)
        } else {
            None
        };
        if app.system_type != schema.system_type() || stored_labels != schema.labels {
            let describe = |system_type: &str, labels: &Option<Vec<String>>| match labels {
                Some(labels) => format!("{system_type} with labels [{}]", labels.join(", ")),
                None => system_type.to_owned(),
            };
            return Err(Error::SchemaMismatch {
                app: app.name.clone(),
                stored: describe(&app.system_type, &stored_labels),
                given: describe(&schema.system_type(), &schema.labels),
            });
        }
        Ok(())
    }
}

impl From<Schema> for AppSpec {
    fn from(schema: Schema) -> AppSpec {
        AppSpec::from_schema(schema)
    }
}

/// What a feed stored.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedReport {
    /// How many examples were stored.
    pub added: usize,
    /// Their ids, in feed order.
    pub ids: Vec<ExampleId>,
    /// The app's data version after the feed.
    pub data_version: u64,
    /// Labels first seen in this feed, with their indices.
    pub new_labels: Vec<(String, u32)>,
    /// Bad lines left out (only with [`FeedOptions::skip_bad`]).
    pub skipped: Vec<LineError>,
}

/// A stored example, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedExample {
    /// Its record.
    pub record: ExampleRecord,
    /// The input object.
    pub input: Object,
    /// The output.
    pub output: CheckedOutput,
}

/// One app's client: feed, list, toggle, infer, status.
#[derive(Debug)]
pub struct Client {
    store: Store,
    app: App,
    schema: Schema,
    /// The best model, loaded on the first inference and reloaded when a better run finishes.
    #[cfg(feature = "engine")]
    served: Option<ServedModel>,
}

/// What `infer` answered for a batch of inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct InferReport {
    /// One answer per input, in order, with the input's 1-based line (or position).
    pub answers: Vec<(usize, Inference)>,
    /// The run whose model answered.
    pub run: RunId,
    /// The model's candidate id.
    pub candidate: String,
    /// When every input came with its expected output: how the answers scored.
    pub score: Option<Score>,
}

/// How answers compare with expected outputs given alongside the inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    /// Classification: the share of right labels.
    Accuracy {
        /// Right answers.
        correct: usize,
        /// Inputs scored.
        total: usize,
    },
    /// Other outputs: the mean squared error over every output value.
    MeanSquaredError {
        /// The error.
        value: f64,
        /// Inputs scored.
        total: usize,
    },
}

/// The largest tensor a schema may declare (LANGUAGE.md: the product of the dimensions is at most
/// 2^31 - 1).
const MAX_ELEMENTS: u64 = (1 << 31) - 1;

/// The checks of the compiler that a manifest read from outside (a file, an HTTP request) must still
/// pass, since its schema did not necessarily come from `easemlc`: a valid app name, non-empty unique
/// field names, dimensions of at least 1 with a product of at most 2^31 - 1, and declared labels that
/// fit a `[D]` output.
fn validate_schema(schema: &Schema) -> std::result::Result<(), String> {
    let name_ok = schema.app.len() <= 64
        && schema.app.starts_with(|c: char| c.is_ascii_lowercase())
        && schema
            .app
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !name_ok {
        return Err(format!(
            "app name {:?} is not a name: at most 64 of [a-z0-9_], starting with a letter",
            schema.app
        ));
    }
    for (side, data_type) in [("input", &schema.input), ("output", &schema.output)] {
        if data_type.tensors().next().is_none() {
            return Err(format!("the {side} has no tensor field"));
        }
        let mut names = std::collections::HashSet::new();
        for field in &data_type.fields {
            if field.name.is_empty() || !names.insert(field.name.as_str()) {
                return Err(format!(
                    "the {side} has an empty or repeated field name {:?}",
                    field.name
                ));
            }
        }
        for tensor in data_type.tensors() {
            let count = tensor.dims.iter().try_fold(1u64, |count, &dim| {
                (dim >= 1).then(|| count.checked_mul(dim)).flatten()
            });
            if tensor.dims.is_empty() || count.is_none_or(|count| count > MAX_ELEMENTS) {
                return Err(format!(
                    "the {side} tensor {:?} is not a shape: dimensions of at least 1, at most 2^31 - 1 elements",
                    tensor.dims
                ));
            }
        }
    }
    if let Some(labels) = &schema.labels {
        let distinct: std::collections::HashSet<&String> = labels.iter().collect();
        if schema.output.single_vector() != Some(labels.len() as u64)
            || distinct.len() != labels.len()
            || labels.iter().any(String::is_empty)
        {
            return Err(
                "declared labels must be distinct, not empty, and D of an output [D]".to_owned(),
            );
        }
    }
    Ok(())
}

/// D when an app's output can be a label: the declared labels' count, or D of an output `[D]` with
/// D >= 2 (D = 1 is regression).
fn label_capacity(schema: &Schema) -> Option<u64> {
    match (&schema.labels, schema.output.single_vector()) {
        (Some(labels), _) => Some(labels.len() as u64),
        (None, Some(dimension)) if dimension >= 2 => Some(dimension),
        _ => None,
    }
}

impl Client {
    /// Opens `app` through `connection`, registering it on first use. An app of the same name with a
    /// different canonical type or declared labels is an error (its data would not fit).
    pub fn open(connection: &Connection, app: impl Into<AppSpec>) -> Result<Client> {
        let spec = app.into();
        let mut store = match connection {
            Connection::Embedded { home } => Store::open(home)?,
            Connection::Remote { url } => {
                return Err(Error::RemoteUnavailable { url: url.clone() });
            }
        };
        let app = match store.app_by_name(&spec.schema.app)? {
            Some(app) => app,
            None => match spec.register(&mut store) {
                Ok((app, _token)) => app,
                // Registered by another process meanwhile.
                Err(Error::Store(easeml_store::Error::AppExists(_))) => store
                    .app_by_name(&spec.schema.app)?
                    .ok_or_else(|| easeml_store::Error::NoSuchApp(spec.schema.app.clone()))?,
                Err(error) => return Err(error),
            },
        };
        spec.check_registered(&store, &app)?;
        Ok(Client::new(store, app, spec.schema))
    }

    fn new(store: Store, app: App, schema: Schema) -> Client {
        Client {
            store,
            app,
            schema,
            #[cfg(feature = "engine")]
            served: None,
        }
    }

    /// A client of the app named `name` that is already registered in `store`, described by its
    /// stored manifest (the server's way in: it never opens an app it does not hold).
    pub fn attach(store: Store, name: &str) -> Result<Client> {
        let app = store
            .app_by_name(name)?
            .ok_or_else(|| easeml_store::Error::NoSuchApp(name.to_owned()))?;
        let spec = AppSpec::from_manifest_json(&app.manifest)?;
        Ok(Client::new(store, app, spec.schema))
    }

    /// Gives the store back (for a pool of store connections).
    pub fn into_store(self) -> Store {
        self.store
    }

    /// The app's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The app's name.
    pub fn app_name(&self) -> &str {
        &self.app.name
    }

    /// The app's current data version (bumped by every feed and every toggle).
    pub fn data_version(&self) -> Result<u64> {
        Ok(self.store.app(self.app.id)?.data_version)
    }

    /// The app's labels in index order (empty when none seen yet), or `None` when its output takes no
    /// labels.
    pub fn labels(&self) -> Result<Option<Vec<String>>> {
        Ok(self.store.label_map(self.app.id)?.map(|map| map.labels))
    }

    /// Feeds the text formats of the `feed` command (see [`crate::feed`]). Every line is checked
    /// first; then the good examples are stored in one transaction. With a bad line, nothing is stored
    /// and the error lists every bad line, unless `options.skip_bad` is set.
    pub fn feed_lines(
        &mut self,
        reader: impl BufRead,
        options: &FeedOptions,
    ) -> Result<FeedReport> {
        self.feed_lines_with_progress(reader, options, &mut |_| {})
    }

    /// [`Client::feed_lines`], calling `progress` with the number of lines read so far after each
    /// line (for a progress bar on large feeds; storing happens after the last call).
    pub fn feed_lines_with_progress(
        &mut self,
        mut reader: impl BufRead,
        options: &FeedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<FeedReport> {
        let checker = LineChecker::new(
            &self.schema,
            options,
            label_capacity(&self.schema).is_some(),
        );
        let mut batch = Batch::new(
            self.store.label_map(self.app.id)?,
            "line",
            options.max_batch_memory,
        );
        let mut buffer = Vec::new();
        let mut line_number = 0;
        loop {
            buffer.clear();
            let read = reader.read_until(b'\n', &mut buffer).map_err(Error::Read)?;
            if read == 0 {
                break;
            }
            line_number += 1;
            let checked = match std::str::from_utf8(&buffer) {
                Ok(line) => checker.check_line(line),
                Err(error) => Err(format!("not UTF-8 text: {error}")),
            };
            match checked {
                Ok(None) => {}
                Ok(Some(example)) => batch.push(&self.store, line_number, example)?,
                Err(message) => batch.reject(line_number, message),
            }
            progress(line_number);
        }
        self.store_batch(batch, options.skip_bad)
    }

    /// Feeds typed values (the generated crate's `Input` / `Output`, or anything that serializes to
    /// the JSON Lines form's `input` / `output`). All or nothing.
    pub fn feed<I: Serialize, O: Serialize>(
        &mut self,
        examples: impl IntoIterator<Item = (I, O)>,
    ) -> Result<FeedReport> {
        let options = FeedOptions::default();
        let checker = LineChecker::new(
            &self.schema,
            &options,
            label_capacity(&self.schema).is_some(),
        );
        let mut batch = Batch::new(
            self.store.label_map(self.app.id)?,
            "example",
            options.max_batch_memory,
        );
        for (index, (input, output)) in examples.into_iter().enumerate() {
            let record = serde_json::to_value(&input).and_then(|input| {
                Ok(serde_json::json!({"input": input, "output": serde_json::to_value(&output)?}))
            });
            let checked = match record {
                Ok(record) => checker.check_json(&record),
                Err(error) => Err(format!("cannot serialize: {error}")),
            };
            match checked {
                Ok(example) => batch.push(&self.store, index + 1, example)?,
                Err(message) => batch.reject(index + 1, message),
            }
        }
        self.store_batch(batch, false)
    }

    fn store_batch(&mut self, batch: Batch, skip_bad: bool) -> Result<FeedReport> {
        if !batch.errors.is_empty() && !skip_bad {
            return Err(Error::BadInput {
                errors: batch.errors,
                total: batch.total,
            });
        }
        let report = self.store.insert_examples(self.app.id, &batch.examples)?;
        Ok(FeedReport {
            added: report.ids.len(),
            ids: report.ids,
            data_version: report.data_version,
            new_labels: report.new_labels,
            skipped: batch.errors,
        })
    }

    /// One page of the app's examples, in id order.
    pub fn examples(&self, page: PageRequest) -> Result<Page<ExampleRecord>> {
        Ok(self.store.examples(self.app.id, page)?)
    }

    /// One page of the app's examples that pass `filter` (enabled or not, a label), in id order.
    pub fn examples_filtered(
        &self,
        page: PageRequest,
        filter: &easeml_store::ExampleFilter,
    ) -> Result<Page<ExampleRecord>> {
        Ok(self.store.examples_filtered(self.app.id, page, filter)?)
    }

    /// One example with its input and output decoded.
    pub fn example(&self, id: ExampleId) -> Result<LoadedExample> {
        let record = self.store.example(self.app.id, id)?;
        let decode_error = |source| Error::Decode { id: id.0, source };
        let input = codec::decode(&self.schema.input, &self.store.blob(&record.input)?)
            .map_err(decode_error)?;
        let output = match &record.output {
            StoredOutput::Blob(hash) => CheckedOutput::Object(
                codec::decode(&self.schema.output, &self.store.blob(hash)?)
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

    /// Turns an example on or off for training; returns the app's data version (bumped when the flag
    /// changed).
    pub fn set_enabled(&mut self, id: ExampleId, enabled: bool) -> Result<u64> {
        Ok(self.store.set_enabled(self.app.id, id, enabled)?)
    }

    /// The figure-5 report: every run, the best so far, what runs now.
    pub fn status(&self) -> Result<Status> {
        let app = self.store.app(self.app.id)?;
        let runs = self.store.runs(self.app.id)?;
        let train_time_limit = self.train_time_limit();
        Ok(Status::from_runs(
            app.name,
            app.system_type,
            app.data_version,
            self.store.example_counts(self.app.id)?,
            &runs,
            train_time_limit,
        ))
    }

    /// Answers inputs given in the `feed` line formats (DESIGN.md section 2), each line `INPUT` or
    /// `INPUT OUTPUT`, with the best model so far. When every line also gives its expected output,
    /// the report scores the answers. A bad line fails the whole batch, naming every bad line.
    #[cfg(feature = "engine")]
    pub fn infer_lines(
        &mut self,
        reader: impl BufRead,
        options: &FeedOptions,
    ) -> Result<InferReport> {
        let checker = LineChecker::new(
            &self.schema,
            options,
            label_capacity(&self.schema).is_some(),
        );
        let mut inputs = Vec::new();
        let mut expected = Vec::new();
        let mut errors = Vec::new();
        let mut total = 0;
        for (index, line) in reader.lines().enumerate() {
            let line = line.map_err(Error::Read)?;
            match checker.check_infer_line(&line) {
                Ok(None) => {}
                Ok(Some((input, output))) => {
                    total += 1;
                    inputs.push((index + 1, input));
                    expected.push(output);
                }
                Err(message) => {
                    total += 1;
                    errors.push(LineError {
                        unit: "line",
                        line: index + 1,
                        message,
                    });
                }
            }
        }
        if !errors.is_empty() {
            return Err(Error::BadInput { errors, total });
        }
        let (lines, objects): (Vec<usize>, Vec<Object>) = inputs.into_iter().unzip();
        let mut report = self.infer_objects(&objects)?;
        for (line, answer) in lines.iter().zip(report.answers.iter_mut()) {
            answer.0 = *line;
        }
        if !expected.is_empty() && expected.iter().all(Option::is_some) {
            let expected: Vec<CheckedOutput> = expected.into_iter().flatten().collect();
            report.score = self.score(&report.answers, &expected);
        }
        Ok(report)
    }

    /// Answers typed inputs (the generated crate's `Input`, or anything that serializes to the JSON
    /// Lines form's `input`) with the best model so far.
    #[cfg(feature = "engine")]
    pub fn infer<I: Serialize>(
        &mut self,
        inputs: impl IntoIterator<Item = I>,
    ) -> Result<InferReport> {
        let options = FeedOptions::default();
        let checker = LineChecker::new(&self.schema, &options, false);
        let mut objects = Vec::new();
        let mut errors = Vec::new();
        let mut total = 0;
        for (index, input) in inputs.into_iter().enumerate() {
            total += 1;
            let checked = serde_json::to_value(&input)
                .map_err(|error| format!("cannot serialize: {error}"))
                .and_then(|input| {
                    checker.check_infer_line(&serde_json::json!({ "input": input }).to_string())
                });
            match checked {
                Ok(Some((object, _))) => objects.push(object),
                Ok(None) => {}
                Err(message) => errors.push(LineError {
                    unit: "input",
                    line: index + 1,
                    message,
                }),
            }
        }
        if !errors.is_empty() {
            return Err(Error::BadInput { errors, total });
        }
        self.infer_objects(&objects)
    }

    /// Answers checked input objects with the best model so far (loaded once, and again when a
    /// better run has finished since).
    #[cfg(feature = "engine")]
    pub fn infer_objects(&mut self, inputs: &[Object]) -> Result<InferReport> {
        let runs = self.store.runs(self.app.id)?;
        let best = easeml_store::best_run(&runs, self.train_time_limit()).map(|run| run.id);
        let Some(best) = best else {
            let running = runs
                .iter()
                .any(|run| matches!(run.state, RunState::Queued | RunState::Running));
            return Err(Error::NoModel {
                app: self.app.name.clone(),
                training: running,
            });
        };
        if self
            .served
            .as_ref()
            .is_none_or(|served| served.run().id != best)
        {
            let device = easeml_engine::choose_device()
                .map_err(|error| Error::Engine(easeml_engine::Error::from(error)))?;
            self.served = ServedModel::load(&self.store, self.app.id, device)?;
        }
        let served = self.served.as_ref().ok_or_else(|| Error::NoModel {
            app: self.app.name.clone(),
            training: false,
        })?;
        let answers = served.predict(inputs)?;
        Ok(InferReport {
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, a)| (i + 1, a))
                .collect(),
            run: served.run().id,
            candidate: served.run().candidate.clone(),
            score: None,
        })
    }

    /// Without the `engine` feature: [`Error::NoEngine`] (the inputs are not read).
    #[cfg(not(feature = "engine"))]
    pub fn infer_lines(
        &mut self,
        _reader: impl BufRead,
        _options: &FeedOptions,
    ) -> Result<InferReport> {
        Err(Error::NoEngine)
    }

    /// Without the `engine` feature: [`Error::NoEngine`] (the inputs are not read).
    #[cfg(not(feature = "engine"))]
    pub fn infer<I: Serialize>(
        &mut self,
        _inputs: impl IntoIterator<Item = I>,
    ) -> Result<InferReport> {
        Err(Error::NoEngine)
    }

    /// Without the `engine` feature: [`Error::NoEngine`].
    #[cfg(not(feature = "engine"))]
    pub fn infer_objects(&mut self, _inputs: &[Object]) -> Result<InferReport> {
        Err(Error::NoEngine)
    }

    #[cfg(feature = "engine")]
    fn score(&self, answers: &[(usize, Inference)], expected: &[CheckedOutput]) -> Option<Score> {
        let total = answers.len();
        if label_capacity(&self.schema).is_some() {
            let correct = answers
                .iter()
                .zip(expected)
                .filter(|((_, answer), expected)| match expected {
                    CheckedOutput::Label(label) => answer.output.as_str() == Some(label.as_str()),
                    CheckedOutput::Object(object) => {
                        let values: Vec<f32> = object.tensors.iter().flatten().copied().collect();
                        answer.class == Some(easeml_engine::dataset::argmax(&values))
                    }
                })
                .count();
            return Some(Score::Accuracy { correct, total });
        }
        let mut sum = 0.0;
        let mut count = 0usize;
        for ((_, answer), expected) in answers.iter().zip(expected) {
            let CheckedOutput::Object(object) = expected else {
                return None;
            };
            let answered =
                easeml_example::object_from_json(&self.schema.output, &answer.output, "output")
                    .ok()?;
            for (a, b) in answered
                .tensors
                .iter()
                .flatten()
                .zip(object.tensors.iter().flatten())
            {
                sum += f64::from(a - b).powi(2);
                count += 1;
            }
        }
        Some(Score::MeanSquaredError {
            value: sum / count.max(1) as f64,
            total,
        })
    }

    fn train_time_limit(&self) -> Option<f64> {
        self.schema
            .constraints
            .iter()
            .find(|constraint| constraint.metric == Metric::TrainTime)
            .map(|constraint| constraint.seconds)
    }

    /// The underlying store, read-only.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The underlying store (for the engine and tests in this workspace).
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// The app's store id.
    pub fn app_id(&self) -> easeml_store::AppId {
        self.app.id
    }
}

/// A batch being checked: the encoded good examples, the bad lines, and a snapshot of the label map
/// so that labels beyond D are found before anything is stored.
struct Batch {
    examples: Vec<NewExample>,
    errors: Vec<LineError>,
    total: usize,
    label_map: Option<easeml_store::LabelMap>,
    unit: &'static str,
    held_bytes: usize,
    memory_limit: usize,
}

impl Batch {
    fn new(
        label_map: Option<easeml_store::LabelMap>,
        unit: &'static str,
        memory_limit: usize,
    ) -> Batch {
        Batch {
            examples: Vec::new(),
            errors: Vec::new(),
            total: 0,
            label_map,
            unit,
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

    fn push(&mut self, store: &Store, line: usize, example: CheckedExample) -> Result<()> {
        self.total += 1;
        let output = match example.output {
            CheckedOutput::Object(object) => {
                NewOutput::Blob(self.hold(store, codec::encode(&object))?)
            }
            CheckedOutput::Label(label) => {
                let resolved = match self.label_map.as_mut() {
                    Some(map) => map.resolve(&label).map_err(|error| error.to_string()),
                    None => Err("this app's output takes no labels".to_owned()),
                };
                if let Err(message) = resolved {
                    self.errors.push(LineError {
                        unit: self.unit,
                        line,
                        message: format!("field `output`: {message}"),
                    });
                    return Ok(());
                }
                NewOutput::Label(label)
            }
        };
        let input = self.hold(store, codec::encode(&example.input))?;
        self.examples.push(NewExample { input, output });
        Ok(())
    }

    fn reject(&mut self, line: usize, message: String) {
        self.total += 1;
        self.errors.push(LineError {
            unit: self.unit,
            line,
            message,
        });
    }
}
