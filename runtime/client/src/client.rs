//! The `Client`: one app's handle on its data, in the local store (embedded, `local.rs`) or on an
//! `easeml serve` server (remote, `remote.rs`), both behind the `Backend` trait (`backend.rs`).
//! Both share everything that does not touch the data: the checks of inputs against the schema (so
//! a bad line is named by its line before anything is stored or sent), the label checks against a
//! snapshot of the label map (`backend::Batch`), and scoring.

use std::io::BufRead;
use std::path::Path;

use easeml_object::{Inference, Object};
use easeml_schema::{Manifest, Schema};
use easeml_store::{App, ExampleId, ExampleRecord, NewApp, Page, PageRequest, RunId, Store};
use serde::Serialize;

use crate::backend::{Backend, Drive};
use crate::feed::{
    CheckedOutput, CsvOptions, FeedOptions, IgnoredFiles, ImageFolder, LineChecker, LineError,
    LineErrors, Table,
};
use crate::local::Local;
use crate::remote::{Remote, RemoteSettings, TokenOrigin};
use crate::{Connection, Error, Result, Status};

/// What an app is: its schema and the manifest stored with it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSpec {
    schema: Schema,
    manifest: String,
}

impl AppSpec {
    /// An app described by its manifest (checked: [`Manifest::check`]); the text stored with the
    /// app is the manifest's JSON.
    pub fn from_manifest(manifest: &Manifest) -> Result<AppSpec> {
        manifest
            .check()
            .map_err(|error| Error::Manifest(error.to_string()))?;
        Ok(AppSpec {
            schema: manifest.schema.clone(),
            manifest: manifest.to_json(),
        })
    }

    /// An app described by the generated crate's `easeml.json` ([`Manifest::from_json`]: every key
    /// checked against the schema, the schema against the rules of `easeml_schema::rules`). The
    /// text is stored as it is.
    pub fn from_manifest_json(text: &str) -> Result<AppSpec> {
        let manifest =
            Manifest::from_json(text).map_err(|error| Error::Manifest(error.to_string()))?;
        Ok(AppSpec {
            schema: manifest.schema,
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
            label_capacity: schema.label_capacity(),
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
    /// Bad lines left out (only with [`FeedOptions::skip_bad`]): the first ones in full, all
    /// counted.
    pub skipped: LineErrors,
    /// What an image-folder feed passed over without reading (not images, not regular files);
    /// all zero for other feeds.
    pub ignored_files: IgnoredFiles,
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

/// One app's client: feed, list, toggle, infer, status; the same calls over the local store or a
/// server.
#[derive(Debug)]
pub struct Client {
    schema: Schema,
    backend: Box<dyn Backend>,
}

/// What `infer` answered for a batch of inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct InferReport {
    /// One answer per input, in order, with the input's 1-based line (or position).
    pub answers: Vec<(usize, Inference)>,
    /// The run whose model answered.
    pub run: RunId,
    /// That run's number within the app (what people see; 0 from a server that predates run
    /// numbers).
    pub run_number: u64,
    /// The model's candidate id.
    pub candidate: String,
    /// The data version the model was trained on (it may be older than the app's current one while
    /// the app retrains: `easeml_store::best_run`).
    pub data_version: u64,
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

impl Client {
    /// Opens `app` through `connection`, registering it on first use. An app of the same name with a
    /// different canonical type or declared labels is an error (its data would not fit).
    ///
    /// Remote: the app's token is the connection's `token` (`EASEML_TOKEN`), else the one saved in
    /// the token file for this server and app, else the app is registered on the server and its new
    /// token saved there (see [`TokenOrigin`]); a server that cannot be reached, or that refuses the
    /// token, is an error that says what to do.
    pub fn open(connection: &Connection, spec: AppSpec) -> Result<Client> {
        match connection {
            Connection::Embedded { home } => {
                let mut store = Store::open(home)?;
                let app = match store.app_by_name(&spec.schema.app)? {
                    Some(app) => app,
                    None => match spec.register(&mut store) {
                        Ok((app, _token)) => app,
                        // Registered by another process meanwhile.
                        Err(Error::Store(easeml_store::Error::AppExists(_))) => {
                            store.app_by_name(&spec.schema.app)?.ok_or_else(|| {
                                easeml_store::Error::NoSuchApp(spec.schema.app.clone())
                            })?
                        }
                        Err(error) => return Err(error),
                    },
                };
                spec.check_registered(&store, &app)?;
                Ok(Client::local(store, app, spec.schema))
            }
            Connection::Remote {
                url,
                token,
                admin_token,
                token_dir,
            } => {
                let settings = RemoteSettings {
                    url,
                    token: token.as_deref(),
                    admin_token: admin_token.as_deref(),
                    token_dir: token_dir.as_deref(),
                };
                let remote = Remote::open(&settings, &spec)?;
                Ok(Client {
                    schema: spec.schema,
                    backend: Box::new(remote),
                })
            }
        }
    }

    fn local(store: Store, app: App, schema: Schema) -> Client {
        Client {
            schema,
            backend: Box::new(Local::new(store, app)),
        }
    }

    /// A client of the app named `name` that is already registered in `store`, described by its
    /// stored manifest (the server's way in: it never opens an app it does not hold).
    pub fn attach(store: Store, name: &str) -> Result<Client> {
        let app = store
            .app_by_name(name)?
            .ok_or_else(|| easeml_store::Error::NoSuchApp(name.to_owned()))?;
        let spec = AppSpec::from_manifest_json(&app.manifest)?;
        Ok(Client::local(store, app, spec.schema))
    }

    /// Gives the store back (for a pool of store connections); `None` for a remote client.
    pub fn into_store(self) -> Option<Store> {
        self.backend.into_store()
    }

    /// The app's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The app's name.
    pub fn app_name(&self) -> &str {
        self.backend.app_name()
    }

    /// The server's URL, for a remote client.
    pub fn server_url(&self) -> Option<&str> {
        self.backend.remote().map(Remote::url)
    }

    /// Where a remote client's token came from (and whether the app was registered just now).
    pub fn token_origin(&self) -> Option<&TokenOrigin> {
        self.backend.token_origin()
    }

    /// A remote client's token for the app (to show once when it could not be saved).
    pub fn token(&self) -> Option<&str> {
        self.backend.remote().map(Remote::token)
    }

    /// The app's current data version (bumped by every feed and every toggle).
    pub fn data_version(&self) -> Result<u64> {
        self.backend.data_version()
    }

    /// The app's labels in index order (empty when none seen yet), or `None` when its output takes no
    /// labels.
    pub fn labels(&self) -> Result<Option<Vec<String>>> {
        self.backend.labels()
    }

    /// Whether the app's labels were declared by its program.
    pub fn labels_declared(&self) -> bool {
        self.backend.labels_declared()
    }

    /// Feeds the text formats of the `feed` command (see [`crate::feed`]). Every line is checked
    /// first; then the good examples are stored in one transaction. With a bad line, nothing is stored
    /// and the error lists every bad line, unless `options.skip_bad` is set.
    ///
    /// Remote: files named in the feed are read here; the checked examples are sent inline, in
    /// requests of at most a few MiB when the feed is larger (all lines are checked before the first
    /// is sent, so a bad line still stores nothing).
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
            self.schema.label_capacity().is_some(),
        );
        let drive: Drive<'_> = Box::new(|each| {
            let mut buffer = Vec::new();
            let mut line_number = 0;
            loop {
                buffer.clear();
                let read = reader.read_until(b'\n', &mut buffer).map_err(Error::Read)?;
                if read == 0 {
                    return Ok(());
                }
                line_number += 1;
                let checked = match std::str::from_utf8(&buffer) {
                    Ok(line) => checker.check_line(line),
                    Err(error) => Err(format!("not UTF-8 text: {error}")),
                };
                match checked {
                    Ok(None) => {}
                    Ok(Some(example)) => each(line_number, Ok(example))?,
                    Err(message) => each(line_number, Err(message))?,
                }
                progress(line_number);
            }
        });
        self.backend.feed(&self.schema, "line", options, drive)
    }

    /// Feeds a table: a CSV / TSV file with a header row and the output in the column
    /// `csv.label_column`, or scikit-learn's layout (see [`crate::feed`]'s `table` rules: input
    /// columns by the schema's field names or in file order, missing values refused with their
    /// line and column). The header is checked first (a problem there is [`Error::Read`], nothing
    /// read further); then every row is checked as a feed line is, and stored as
    /// [`Client::feed_lines`] stores: all or nothing, or the good rows with `options.skip_bad`.
    /// `progress` gets the number of rows read so far.
    ///
    /// Relative paths in cells (images, `.npy` files) are read from the table's folder
    /// (`options.base_dir` is not used). Remote: the rows are checked here and sent as feed lines
    /// through the same path as [`Client::feed_lines`], so the server sees no difference.
    pub fn feed_csv(
        &mut self,
        path: impl AsRef<Path>,
        csv: &CsvOptions,
        options: &FeedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<FeedReport> {
        let path = path.as_ref();
        let table = Table::open(path, csv, &self.schema)?;
        let options = FeedOptions {
            base_dir: Some(crate::feed::table_folder(path)),
            ..options.clone()
        };
        let checker = LineChecker::new(
            &self.schema,
            &options,
            self.schema.label_capacity().is_some(),
        );
        let drive: Drive<'_> = Box::new(|each| table.read_rows(&checker, each, progress));
        self.backend.feed(&self.schema, "line", &options, drive)
    }

    /// Feeds a table read from `text` instead of a file, by the rules of [`Client::feed_csv`]:
    /// the server's table feed (`POST .../examples?format=csv&label_column=NAME`, the web
    /// console's upload), whose request body is the table. `shown` names the table in messages
    /// (`the uploaded table`); the separator is `csv.delimiter`, else guessed from the header
    /// line. A cell that names a file is read only when `options.allow_paths` is set (relative to
    /// `options.base_dir`); the server sets it off, so a table sent to it never reads its disk.
    pub fn feed_csv_text(
        &mut self,
        text: impl BufRead + 'static,
        shown: &str,
        csv: &CsvOptions,
        options: &FeedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<FeedReport> {
        let table = Table::from_reader(
            Box::new(text),
            shown.to_owned(),
            csv.delimiter,
            csv,
            &self.schema,
        )?;
        let checker = LineChecker::new(
            &self.schema,
            options,
            self.schema.label_capacity().is_some(),
        );
        let drive: Drive<'_> = Box::new(|each| table.read_rows(&checker, each, progress));
        self.backend.feed(&self.schema, "line", options, drive)
    }

    /// Feeds an image folder laid out by class, `dir/LABEL/*.png` (see [`crate::feed`]'s
    /// `folder` rules): every image of a sub-folder is an example labelled by the sub-folder's
    /// name. The app's input must be one image tensor and its output take labels (else an error
    /// before anything is read). An unreadable image is a bad line (unit `image`), as with
    /// [`Client::feed_lines`]: all or nothing, or the good ones with `options.skip_bad`; files that
    /// are not images, and symbolic links (never followed), are passed over and counted in
    /// [`FeedReport::ignored_files`]. `progress` gets the number of images read so far.
    ///
    /// Remote: the images are read and checked here and sent inline through the same path as
    /// [`Client::feed_lines`].
    pub fn feed_image_folder(
        &mut self,
        dir: impl AsRef<Path>,
        options: &FeedOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<FeedReport> {
        let dir = dir.as_ref();
        if !options.allow_paths {
            return Err(Error::Read(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{}: this feed may not read files (FeedOptions::allow_paths is off)",
                    dir.display()
                ),
            )));
        }
        let folder = ImageFolder::open(dir, &self.schema)?;
        let mut ignored = IgnoredFiles::default();
        let schema = &self.schema;
        let drive: Drive<'_> = Box::new(|each| {
            ignored = folder.read_images(schema, each, progress)?;
            Ok(())
        });
        let mut report = self.backend.feed(&self.schema, "image", options, drive)?;
        report.ignored_files = ignored;
        Ok(report)
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
            self.schema.label_capacity().is_some(),
        );
        let drive: Drive<'_> = Box::new(|each| {
            for (index, (input, output)) in examples.into_iter().enumerate() {
                let record = serde_json::to_value(&input).and_then(|input| {
                    Ok(serde_json::json!({"input": input, "output": serde_json::to_value(&output)?}))
                });
                let checked = match record {
                    Ok(record) => checker.check_json(&record),
                    Err(error) => Err(format!("cannot serialize: {error}")),
                };
                each(index + 1, checked)?;
            }
            Ok(())
        });
        self.backend.feed(&self.schema, "example", &options, drive)
    }

    /// One page of the app's examples, in id order.
    pub fn examples(&self, page: PageRequest) -> Result<Page<ExampleRecord>> {
        self.examples_filtered(page, &easeml_store::ExampleFilter::default())
    }

    /// One page of the app's examples that pass `filter` (enabled or not, a label), in id order.
    pub fn examples_filtered(
        &self,
        page: PageRequest,
        filter: &easeml_store::ExampleFilter,
    ) -> Result<Page<ExampleRecord>> {
        self.backend.examples(page, filter)
    }

    /// One example with its input and output decoded.
    pub fn example(&self, id: ExampleId) -> Result<LoadedExample> {
        self.backend.example(&self.schema, id)
    }

    /// Turns an example on or off for training; returns the app's data version (bumped when the flag
    /// changed).
    pub fn set_enabled(&mut self, id: ExampleId, enabled: bool) -> Result<u64> {
        self.backend.set_enabled(id, enabled)
    }

    /// The figure-5 report: every run, the best so far, what runs now.
    pub fn status(&self) -> Result<Status> {
        self.backend.status(&self.schema)
    }

    /// Answers inputs given in the `feed` line formats (DESIGN.md section 2), each line `INPUT` or
    /// `INPUT OUTPUT`, with the best model so far. When every line also gives its expected output,
    /// the report scores the answers. A bad line fails the whole batch, naming every bad line.
    ///
    /// Remote: the inputs are checked here, answered by the server's best model, and scored here.
    /// Embedded in a process without a model loader (the engine, libtorch): [`Error::NoEngine`].
    pub fn infer_lines(
        &mut self,
        reader: impl BufRead,
        options: &FeedOptions,
    ) -> Result<InferReport> {
        let checker = LineChecker::new(
            &self.schema,
            options,
            self.schema.label_capacity().is_some(),
        );
        let mut inputs = Vec::new();
        let mut expected = Vec::new();
        let mut errors = LineErrors::new();
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
            return Err(Error::BadInput {
                errors,
                total,
                batch: crate::Batch::Infer,
            });
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
    pub fn infer<I: Serialize>(
        &mut self,
        inputs: impl IntoIterator<Item = I>,
    ) -> Result<InferReport> {
        let options = FeedOptions::default();
        let checker = LineChecker::new(&self.schema, &options, false);
        let mut objects = Vec::new();
        let mut errors = LineErrors::new();
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
            return Err(Error::BadInput {
                errors,
                total,
                batch: crate::Batch::Infer,
            });
        }
        self.infer_objects(&objects)
    }

    /// One answer of a value output as the type `O` the app's output deserializes into (the
    /// generated crate's `Output`): the answer's JSON form read back as an object of the schema's
    /// output, then written in the field-by-field form of the generated types
    /// ([`easeml_object::object_to_record_json`]). An answer that is not such an output is
    /// [`Error::Model`], in words.
    pub fn typed_output<O: serde::de::DeserializeOwned>(&self, answer: Inference) -> Result<O> {
        let output = &self.schema.output;
        let object =
            easeml_object::object_from_json(output, &answer.output, "output").map_err(|error| {
                Error::Model(easeml_serving::ModelError::Answer(format!(
                    "`{}`, which is not an output of the app: {error}",
                    answer.output
                )))
            })?;
        let record = easeml_object::object_to_record_json(output, &object);
        easeml_object::deep_json::with_stack_for_max_depth(|| serde_json::from_value(record))
            .map_err(|error| {
                Error::Model(easeml_serving::ModelError::Answer(format!(
                    "an answer that does not fit the app's Output type: {error}"
                )))
            })
    }

    /// Answers checked input objects with the best model so far (embedded: loaded once, and again
    /// when a better run has finished since; remote: the server's, which does the same).
    /// Embedded in a process without a model loader (the engine, libtorch): [`Error::NoEngine`].
    pub fn infer_objects(&mut self, inputs: &[Object]) -> Result<InferReport> {
        self.backend.infer(&self.schema, inputs)
    }

    /// How `answers` score against the `expected` outputs, one each in order (what
    /// [`Client::infer_lines`] reports when every line gives its output): accuracy for labelled
    /// outputs, else the mean squared error over every output value. A server that answers a
    /// batch in chunks (`easeml serve`) scores the whole batch with it.
    pub fn score_answers(
        &self,
        answers: &[(usize, Inference)],
        expected: &[CheckedOutput],
    ) -> Option<Score> {
        self.score(answers, expected)
    }

    fn score(&self, answers: &[(usize, Inference)], expected: &[CheckedOutput]) -> Option<Score> {
        let total = answers.len();
        if self.schema.label_capacity().is_some() {
            let correct = answers
                .iter()
                .zip(expected)
                .filter(|((_, answer), expected)| match expected {
                    CheckedOutput::Label(label) => answer.output.as_str() == Some(label.as_str()),
                    CheckedOutput::Object(object) => {
                        let values: Vec<f32> = object.tensors.iter().flatten().copied().collect();
                        answer.class == Some(argmax(&values))
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
                easeml_object::object_from_json(&self.schema.output, &answer.output, "output")
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

    /// The underlying store, read-only; `None` for a remote client.
    pub fn store(&self) -> Option<&Store> {
        self.backend.store()
    }

    /// The underlying store (for the engine and tests in this workspace); `None` for a remote
    /// client.
    pub fn store_mut(&mut self) -> Option<&mut Store> {
        self.backend.store_mut()
    }

    /// The app's id in the local store; `None` for a remote client.
    pub fn app_id(&self) -> Option<easeml_store::AppId> {
        self.backend.app_id()
    }
}

/// The index of the largest value, the first on ties (the engine's rule for a class vector).
fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (index, value) in values.iter().enumerate() {
        if *value > values[best] {
            best = index;
        }
    }
    best as u32
}
