//! The shared half of every generated app's Python extension (`easemlc --python`).
//!
//! A generated extension (`<app>/python/src/lib.rs`) describes its app with [`PyApp`] (the
//! manifest, the tensor fields of each side, the typed `Input` / `Output` constructors, the label
//! names) and wraps a [`Session`] in its own `#[pyclass]`, whose methods only delegate: everything
//! else lives here, once, for every app.
//!
//! Whole numpy arrays cross the boundary once (the buffer protocol, `float32`, C order); the
//! examples are cut from them here, with the GIL released while they are checked and stored. Every
//! example goes through the app's typed constructors (which check each field's shape) and the
//! runtime's client with the app's manifest, so Python and the app's Rust binaries share one
//! client. The Python API (`connect`, `App`, the exception classes) is the pure-Python package
//! beside the extension; errors are raised as its classes ([`PyApp::ERRORS_MODULE`]), one per kind
//! of the client's `Error` ([`error_class`]). No libtorch here: training and embedded inference
//! run the app's engine binaries, which the package starts.
//!
//! Tested from Python: every covered example's package round-trips through its pytest suite
//! (`tests/tests/python_package.rs`).

use std::io::Write as _;
use std::marker::PhantomData;
use std::path::PathBuf;

use easeml_runtime::{
    AppSpec, Client, Connection, Error, ExampleId, PageRequest, StoredOutput, Tensor,
};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One side's fields: name, declared shape.
pub type Fields = &'static [(&'static str, &'static [u64])];

/// What the shared extension code needs to know of one app (implemented by the generated crate).
pub trait PyApp: 'static {
    /// The app's typed input.
    type Input: Serialize + DeserializeOwned;
    /// The app's typed output.
    type Output: Serialize + DeserializeOwned;
    /// The Python module that holds the exception classes (`<app>._errors`).
    const ERRORS_MODULE: &'static str;
    /// The app's manifest (`easeml.json`).
    const MANIFEST: &'static str;
    /// The server URL given to `easemlc --server`, if any.
    const SERVER: Option<&'static str>;
    /// The input's tensor fields (none when it has recursive fields: JSON only).
    const INPUT_FIELDS: Fields;
    /// The output's tensor fields.
    const OUTPUT_FIELDS: Fields;
    /// Whether the app declares labels (outputs may then be given as label names).
    const HAS_LABELS: bool;
    /// The input of one example's tensors, field by field, checked by the typed constructor.
    fn input_from_tensors(tensors: Vec<Tensor>) -> Result<Self::Input, String>;
    /// The output of one example's tensors, field by field, checked by the typed constructor.
    fn output_from_tensors(tensors: Vec<Tensor>) -> Result<Self::Output, String>;
    /// The declared label of a name (only called when [`PyApp::HAS_LABELS`]).
    fn label_name(name: &str) -> Result<&'static str, String>;
}

/// A value handed to a closure that runs while the GIL is released. `easeml_runtime::Client` is not
/// `Send` (an embedded client may hold a model that is not); `Python::allow_threads` runs its closure
/// on the calling thread, and the generated class is `unsendable` (pyo3 checks that it is only used
/// on the thread that made it), so the client never changes threads.
struct OnThisThread<T>(T);

// SAFETY: see the type's documentation: the value is only used on the thread that owns it.
#[allow(unsafe_code)]
unsafe impl<T> Send for OnThisThread<T> {}

/// Raises the exception class `class` of the Python module `module` with `message`.
pub fn raise(py: Python<'_>, module: &str, class: &str, message: String) -> PyErr {
    match py.import(module).and_then(|module| module.getattr(class)) {
        Ok(class) => match class.call1((message,)) {
            Ok(value) => PyErr::from_value(value),
            Err(error) => error,
        },
        Err(error) => error,
    }
}

/// The exception class for each kind of the client's error.
pub fn error_class(error: &Error) -> &'static str {
    match error {
        Error::Store(_) => "StoreError",
        Error::BadServerUrl { .. } => "ServerUrlError",
        Error::Unreachable { .. } => "UnreachableError",
        Error::Unauthorized { .. } => "UnauthorizedError",
        Error::Server { .. } => "ServerError",
        Error::Protocol { .. } => "ProtocolError",
        Error::PartlyStored { .. } => "PartlyStoredError",
        Error::TokenFile { .. } => "TokenFileError",
        Error::Manifest(_) => "ManifestError",
        Error::SchemaMismatch { .. } => "SchemaMismatchError",
        Error::BadInput { .. } => "BadInputError",
        Error::Read(_) => "ReadError",
        Error::NoModel { .. } => "NoModelError",
        Error::NoEngine => "NoEngineError",
        Error::Model(_) => "ModelError",
        Error::Decode { .. } => "DecodeError",
    }
}

/// `shape` as the schema writes it: `[30]`, `[28,28,1]`.
fn shape_text(dims: &[u64]) -> String {
    let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The typed values of one side: JSON text (a list of values in the feed's JSON form), or a list
/// of arrays, one per tensor field (each with a leading batch axis; `batched: false` when it was
/// added for one example, so that a message shows the shape that was given).
struct Side<'a> {
    errors: &'static str,
    name: &'static str,
    fields: Fields,
    given: &'a Bound<'a, PyAny>,
    batched: bool,
}

impl Side<'_> {
    fn raise(&self, py: Python<'_>, class: &str, message: String) -> PyErr {
        raise(py, self.errors, class, message)
    }

    fn values<T: DeserializeOwned>(
        &self,
        py: Python<'_>,
        from_tensors: fn(Vec<Tensor>) -> Result<T, String>,
    ) -> PyResult<Vec<T>> {
        if let Ok(text) = self.given.downcast::<PyString>() {
            let text = text.to_cow()?;
            return serde_json::from_str::<Vec<T>>(&text).map_err(|error| {
                self.raise(
                    py,
                    "BadInputError",
                    format!(
                        "the {} values are not in this app's JSON form: {error}",
                        self.name
                    ),
                )
            });
        }
        let arrays = self.given.downcast::<PyList>()?;
        let rows = self.tensors(py, arrays)?;
        rows.into_iter()
            .enumerate()
            .map(|(index, tensors)| {
                from_tensors(tensors).map_err(|error| {
                    self.raise(py, "ShapeError", format!("example {}: {error}", index + 1))
                })
            })
            .collect()
    }

    /// The tensors of every example, field by field, after the shapes are checked.
    fn tensors(&self, py: Python<'_>, arrays: &Bound<'_, PyList>) -> PyResult<Vec<Vec<Tensor>>> {
        let (side, fields) = (self.name, self.fields);
        if arrays.len() != fields.len() {
            let names: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
            return Err(self.raise(
                py,
                "ShapeError",
                format!(
                    "the {side} has {} tensor field(s) ({}); {} array(s) given",
                    fields.len(),
                    names.join(", "),
                    arrays.len()
                ),
            ));
        }
        let mut count: Option<(usize, &str)> = None;
        let mut columns = Vec::with_capacity(fields.len());
        for ((name, dims), array) in fields.iter().zip(arrays.iter()) {
            let buffer = PyBuffer::<f32>::get(&array)?;
            let shape: Vec<u64> = buffer.shape().iter().map(|&side| side as u64).collect();
            let per_example = shape.get(1..).unwrap_or(&[]);
            if shape.is_empty() || per_example != *dims {
                let found = if self.batched {
                    &shape[..]
                } else {
                    per_example
                };
                return Err(self.raise(
                    py,
                    "ShapeError",
                    format!(
                        "field `{side}.{name}`: expected shape {} (one example) or {} (a batch of N), found {}",
                        shape_text(dims),
                        shape_text(dims).replacen('[', "[N,", 1),
                        shape_text(found)
                    ),
                ));
            }
            let examples = shape[0] as usize;
            if let Some((first, first_name)) = count {
                if first != examples {
                    return Err(self.raise(
                        py,
                        "ShapeError",
                        format!(
                            "field `{side}.{name}` has {examples} example(s), but field `{side}.{first_name}` has {first}"
                        ),
                    ));
                }
            } else {
                count = Some((examples, name));
            }
            let values = buffer.to_vec(py)?;
            columns.push((dims, values));
        }
        let examples = count.map_or(0, |(examples, _)| examples);
        // A value that is not finite (a missing value, NaN, in a scientist's data) is refused here,
        // naming the example and the element, before anything is stored or run: the engine and the
        // JSON forms have no NaN (it would reach them as `null`).
        let bad = columns
            .iter()
            .enumerate()
            .find_map(|(field, (dims, values))| {
                let position = values.iter().position(|value| !value.is_finite())?;
                let size = dims.iter().product::<u64>().max(1) as usize;
                Some((field, position, size))
            });
        if let Some((field, position, size)) = bad {
            let (name, dims) = fields[field];
            let value = columns[field].1[position];
            return Err(self.raise(
                py,
                "BadInputError",
                not_finite_message(
                    side,
                    name,
                    dims,
                    self.batched.then_some(position / size),
                    position % size,
                    value,
                ),
            ));
        }
        let columns = OnThisThread(columns);
        let rows = py.allow_threads(move || {
            let columns = columns;
            let mut rows: Vec<Vec<Tensor>> = (0..examples)
                .map(|_| Vec::with_capacity(fields.len()))
                .collect();
            for (dims, values) in columns.0 {
                let size: usize = dims.iter().product::<u64>() as usize;
                if size == 0 {
                    continue;
                }
                for (row, chunk) in rows.iter_mut().zip(values.chunks_exact(size)) {
                    if let Ok(tensor) = Tensor::new(dims.to_vec(), chunk.to_vec()) {
                        row.push(tensor);
                    }
                }
            }
            OnThisThread(rows)
        });
        Ok(rows.0)
    }
}

/// The message for a value that is not finite: where it is (the example, counting from 0 as
/// numpy does, the field, the element) and what to do. NaN is how numpy and pandas write a
/// missing value.
fn not_finite_message(
    side: &str,
    field: &str,
    dims: &[u64],
    example: Option<usize>,
    element: usize,
    value: f32,
) -> String {
    let place = match example {
        Some(example) => format!("example {example} (counting from 0), field `{side}.{field}`"),
        None => format!("field `{side}.{field}`"),
    };
    let at = if dims.iter().product::<u64>() > 1 {
        format!(
            " at {}",
            easeml_runtime::object::format_index(dims, element)
        )
    } else {
        String::new()
    };
    if value.is_nan() {
        format!(
            "{place}: the value{at} is missing (NaN); fill it in or drop the {}",
            if example.is_some() {
                "example"
            } else {
                "value"
            }
        )
    } else {
        format!("{place}: the value{at} is {value}; every value must be a finite number")
    }
}

/// Why a feed failed: the client's error, or a label name the app does not declare.
enum Fed {
    Client(Error),
    Label(String),
}

/// The label names given as outputs (a list of strings), if that is what `outputs` is.
fn labels_given(outputs: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    let Ok(list) = outputs.downcast::<PyList>() else {
        return Ok(None);
    };
    if list.is_empty() || !list.get_item(0)?.is_instance_of::<PyString>() {
        return Ok(None);
    }
    list.iter()
        .map(|item| item.extract::<String>())
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// An app's client as its Python package holds it: what the generated `#[pyclass]` wraps.
pub struct Session<A: PyApp> {
    client: Client,
    home: Option<PathBuf>,
    server: Option<String>,
    app: PhantomData<A>,
}

impl<A: PyApp> Session<A> {
    fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
        raise(py, A::ERRORS_MODULE, class, message)
    }

    fn client_error(py: Python<'_>, error: Error) -> PyErr {
        Self::raise(py, error_class(&error), error.to_string())
    }

    fn side<'a>(
        name: &'static str,
        fields: Fields,
        given: &'a Bound<'a, PyAny>,
        batched: bool,
    ) -> Side<'a> {
        Side {
            errors: A::ERRORS_MODULE,
            name,
            fields,
            given,
            batched,
        }
    }

    fn inputs(py: Python<'_>, inputs: &Bound<'_, PyAny>, batched: bool) -> PyResult<Vec<A::Input>> {
        Self::side("input", A::INPUT_FIELDS, inputs, batched).values(py, A::input_from_tensors)
    }

    /// Opens the app: on `server` (else `EASEML_SERVER`, else the URL baked in by `easemlc
    /// --server`) with `token` (else `EASEML_TOKEN` or the token file), else in the local store
    /// `home` (else `EASEML_HOME`, else the platform data dir), as the app's binaries do.
    pub fn open(
        py: Python<'_>,
        server: Option<String>,
        token: Option<String>,
        home: Option<PathBuf>,
    ) -> PyResult<Self> {
        let server = server
            .filter(|url| !url.trim().is_empty())
            .or_else(|| {
                std::env::var("EASEML_SERVER")
                    .ok()
                    .filter(|url| !url.trim().is_empty())
            })
            .or(A::SERVER.map(str::to_owned));
        let connection = match &server {
            Some(url) => {
                let mut connection = Connection::remote(url.as_str());
                if let (Connection::Remote { token: slot, .. }, Some(token)) =
                    (&mut connection, token)
                {
                    *slot = Some(token);
                }
                connection
            }
            None => Connection::from_settings(None, home)
                .map_err(|error| Self::client_error(py, error))?,
        };
        let home = match &connection {
            Connection::Embedded { home } => Some(home.clone()),
            _ => None,
        };
        easeml_runtime::__private::install_engine();
        let client = AppSpec::from_manifest_json(A::MANIFEST)
            .and_then(|spec| Client::open(&connection, spec))
            .map_err(|error| Self::client_error(py, error))?;
        Ok(Session {
            client,
            home,
            server,
            app: PhantomData,
        })
    }

    /// The local store's directory (`None` on a server).
    pub fn home(&self) -> Option<PathBuf> {
        self.home.clone()
    }

    /// The server's URL (`None` for the local store).
    pub fn server(&self) -> Option<String> {
        self.server.clone()
    }

    /// Stores labelled examples, all or none. `inputs`: a list of arrays (one per tensor field,
    /// each with the batch axis) or JSON text; `outputs`: the same, or a list of label names.
    /// Returns `(added, ids, data_version)`.
    pub fn feed(
        &mut self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        outputs: &Bound<'_, PyAny>,
        batched: bool,
    ) -> PyResult<(usize, Vec<i64>, u64)> {
        let inputs = Self::inputs(py, inputs, batched)?;
        let labels = labels_given(outputs)?;
        let outputs = match labels {
            Some(_) => Vec::new(),
            None => Self::side("output", A::OUTPUT_FIELDS, outputs, batched)
                .values(py, A::output_from_tensors)?,
        };
        let given = labels.as_ref().map_or(outputs.len(), Vec::len);
        if given != inputs.len() {
            return Err(Self::raise(
                py,
                "ShapeError",
                format!("{} input(s) but {given} output(s) given", inputs.len()),
            ));
        }
        let client = OnThisThread(&mut self.client);
        let work = OnThisThread((inputs, outputs, labels));
        let fed = py.allow_threads(move || {
            let (client, work) = (client, work);
            let (inputs, outputs, labels) = work.0;
            OnThisThread(feed_typed::<A>(client.0, inputs, outputs, labels))
        });
        let report = fed.0.map_err(|error| match error {
            Fed::Client(error) => Self::client_error(py, error),
            Fed::Label(message) => Self::raise(py, "BadInputError", message),
        })?;
        Ok((
            report.added,
            report.ids.iter().map(|id| id.0).collect(),
            report.data_version,
        ))
    }

    /// Checks inputs and writes them to `path` as JSON Lines (`{"input": ...}`), the form the app's
    /// `infer` command reads; returns how many.
    pub fn write_inputs(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        path: PathBuf,
        batched: bool,
    ) -> PyResult<usize> {
        let inputs = Self::inputs(py, inputs, batched)?;
        let count = inputs.len();
        let work = OnThisThread((inputs, path));
        let written = py.allow_threads(move || {
            let work = work;
            let (inputs, path) = work.0;
            let result = (|| -> std::io::Result<()> {
                let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
                for input in &inputs {
                    serde_json::to_writer(&mut file, &serde_json::json!({ "input": input }))?;
                    file.write_all(b"\n")?;
                }
                file.flush()
            })();
            OnThisThread(result.map_err(|error| format!("{}: {error}", path.display())))
        });
        written
            .0
            .map_err(|message| Self::raise(py, "ReadError", message))?;
        Ok(count)
    }

    /// Answers inputs with the server's best model (remote apps); a list of JSON texts, one
    /// `{"output", "class", "confidence", "probabilities"}` per input.
    pub fn infer(
        &mut self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        batched: bool,
    ) -> PyResult<Vec<String>> {
        let inputs = Self::inputs(py, inputs, batched)?;
        let client = OnThisThread(&mut self.client);
        let work = OnThisThread(inputs);
        let answered = py.allow_threads(move || {
            let (client, work) = (client, work);
            OnThisThread(client.0.infer(work.0))
        });
        let report = answered.0.map_err(|error| Self::client_error(py, error))?;
        Ok(report
            .answers
            .iter()
            .map(|(_, answer)| serde_json::to_string(answer).unwrap_or_default())
            .collect())
    }

    /// The values a file gives for the input (a `.npy` file or a PNG / JPEG image), read as the
    /// `feed` command reads a path: float32 bytes in row-major order.
    pub fn read_input_file<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let shown = path.display().to_string();
        // The schema the client parsed from the manifest when it opened.
        let input = &self.client.schema().input;
        let values = easeml_runtime::feed::read_input_file(input, &path, &shown)
            .map_err(|message| Self::raise(py, "BadInputError", message))?;
        let bytes: Vec<u8> = values
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect();
        Ok(PyBytes::new(py, &bytes))
    }

    /// One page of the stored examples, in id order: dicts with `id`, `enabled`, `label` (or
    /// `None`), `data_version`, `created_ms`; and the id to pass as `after` for the next page.
    pub fn examples<'py>(
        &self,
        py: Python<'py>,
        after: Option<i64>,
        limit: u32,
    ) -> PyResult<(Vec<Bound<'py, PyDict>>, Option<i64>, u64)> {
        let page = self
            .client
            .examples(PageRequest {
                after: after.map(ExampleId),
                limit,
            })
            .map_err(|error| Self::client_error(py, error))?;
        let mut items = Vec::with_capacity(page.items.len());
        for record in &page.items {
            let item = PyDict::new(py);
            item.set_item("id", record.id.0)?;
            item.set_item("enabled", record.enabled)?;
            match &record.output {
                StoredOutput::Label { name, .. } => item.set_item("label", name)?,
                StoredOutput::Blob(_) => item.set_item("label", py.None())?,
            }
            item.set_item("data_version", record.data_version)?;
            item.set_item("created_ms", record.created_ms)?;
            items.push(item);
        }
        let next = page.next.and_then(|next| next.after).map(|id| id.0);
        Ok((items, next, page.total))
    }

    /// Turns an example on or off for training; returns the app's data version.
    pub fn set_enabled(&mut self, py: Python<'_>, id: i64, enabled: bool) -> PyResult<u64> {
        self.client
            .set_enabled(ExampleId(id), enabled)
            .map_err(|error| Self::client_error(py, error))
    }

    /// The status report (every run, the best) as JSON text.
    pub fn status(&self, py: Python<'_>) -> PyResult<String> {
        let status = self
            .client
            .status()
            .map_err(|error| Self::client_error(py, error))?;
        serde_json::to_string(&status)
            .map_err(|error| Self::raise(py, "EasemlError", error.to_string()))
    }
}

/// Feeds the examples, their outputs given as arrays or as label names (checked against the
/// app's declared labels; refused when it declares none).
fn feed_typed<A: PyApp>(
    client: &mut Client,
    inputs: Vec<A::Input>,
    outputs: Vec<A::Output>,
    labels: Option<Vec<String>>,
) -> Result<easeml_runtime::FeedReport, Fed> {
    let Some(names) = labels else {
        return client
            .feed(inputs.into_iter().zip(outputs))
            .map_err(Fed::Client);
    };
    if !A::HAS_LABELS {
        return Err(Fed::Label(
            "this app declares no labels: give each output as an array (or in its JSON form)"
                .to_owned(),
        ));
    }
    let mut labels = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let label = A::label_name(name)
            .map_err(|error| Fed::Label(format!("example {}: {error}", index + 1)))?;
        labels.push(label);
    }
    client
        .feed(inputs.into_iter().zip(labels))
        .map_err(Fed::Client)
}
