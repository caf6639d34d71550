//! The JSON bodies of the `/api/v1` routes, one type per body: the server's handlers serialize them
//! and the remote client (`remote.rs`) deserializes them, so the two sides cannot drift apart.
//! Examples themselves travel in the feed's JSON forms (`easeml_object::object_to_json`, and
//! [`crate::feed::write_feed_line`] for what a client sends).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `GET /api/v1/health` -> 200: the server is up, and what a client must know before sending.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// Always `true`.
    pub ok: bool,
    /// The largest request body the server reads (`--max-body-bytes`).
    pub max_body_bytes: usize,
}

/// `POST /api/v1/apps` -> 201: the registered app and its token (shown this once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registered {
    /// The app's id in the store.
    pub id: i64,
    /// The app's name.
    pub name: String,
    /// The app's token: shown this once; the server keeps only its sha256.
    pub token: String,
}

/// A label first seen in a feed, with its index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewLabel {
    /// The label as fed.
    pub label: String,
    /// Its index (the class number models are trained on).
    pub index: u32,
}

/// `POST .../examples` -> 200: what the feed stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fed {
    /// Examples stored.
    pub added: usize,
    /// Their ids, in feed order.
    pub ids: Vec<i64>,
    /// The app's data version after the feed.
    pub data_version: u64,
    /// Labels this feed saw first.
    pub new_labels: Vec<NewLabel>,
}

/// One example of a listing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Listed {
    /// The example's id.
    pub id: i64,
    /// Whether training uses it.
    pub enabled: bool,
    /// The label, when the output is one.
    pub label: Option<String>,
    /// The label's index, when the output is one.
    pub label_index: Option<u32>,
    /// The sha256 of the encoded input (the store's blob name).
    pub input_hash: String,
    /// The sha256 of the encoded output, when it is not a label.
    pub output_hash: Option<String>,
    /// The data version that stored it.
    pub data_version: u64,
    /// When it was stored (milliseconds since the Unix epoch).
    pub created_ms: i64,
    /// A bounded look at the input, when the listing asked for one (`?preview=N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Preview>,
}

/// A bounded look at an example's input for the refine page: never the whole input, at most the
/// `preview=N` of the listing's query (capped by the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preview {
    /// `values`: the first numbers of the input's tensor fields, in field order (row-major);
    /// `series`: for a recursive input (a chain, a tree), the first number of each step, steps in
    /// depth-first order.
    pub kind: String,
    /// At most N of them.
    pub values: Vec<f32>,
    /// How many there are in all (numbers for `values`, steps for `series`).
    pub count: u64,
}

/// `GET .../examples` -> 200: one page of examples, and what the refine page and the remote
/// client need to know about the app.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExamplesPage {
    /// The app's name.
    pub app: String,
    /// Examples that pass the filter, on every page.
    pub total: u64,
    /// The `after` of the next page, when there may be one.
    pub next_after: Option<i64>,
    /// The app's labels in index order, `None` when its output takes no labels.
    pub labels: Option<Vec<String>>,
    /// Whether the labels were declared by the program (then no other label is accepted).
    pub labels_declared: bool,
    /// Whether `.../thumbnail.png` answers (image inputs).
    pub thumbnails: bool,
    /// The app's canonical system type.
    pub system_type: String,
    /// The examples of this page, by id.
    pub items: Vec<Listed>,
}

/// `GET .../examples/{id}` -> 200: one example with its input and output in the feed's JSON forms
/// (`output` is the label's name for a label).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FullExample {
    /// What the listing shows of it.
    #[serde(flatten)]
    pub listed: Listed,
    /// The input in the feed's JSON form (`easeml_object::object_to_json`).
    pub input: Value,
    /// The output in the feed's JSON form, or the label's name.
    pub output: Value,
}

/// The body of `PATCH .../examples/{id}`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toggle {
    /// Whether training should use the example.
    pub enabled: bool,
}

/// `PATCH .../examples/{id}` -> 200.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Toggled {
    /// The example's id.
    pub id: i64,
    /// Its flag now.
    pub enabled: bool,
    /// The app's data version now.
    pub data_version: u64,
}

/// One answer of `POST .../infer`: the input's line in the request and the answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// The 1-based line of the input in the request body.
    pub line: usize,
    /// The answer.
    #[serde(flatten)]
    pub inference: easeml_object::Inference,
}

/// How the answers of `POST .../infer` scored, when every line gave its expected output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WireScore {
    /// Classification.
    Accuracy {
        /// The share of right labels.
        accuracy: f64,
        /// Right answers.
        correct: usize,
        /// Answers scored.
        total: usize,
    },
    /// Other outputs.
    MeanSquaredError {
        /// The mean squared error over every output value.
        mean_squared_error: f64,
        /// Answers scored.
        total: usize,
    },
}

/// `POST .../infer` -> 200.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answered {
    /// One answer per input line, in order.
    pub answers: Vec<Answer>,
    /// The run whose model answered.
    pub run: i64,
    /// That run's number within the app (absent from a server that predates run numbers).
    #[serde(default)]
    pub run_number: u64,
    /// That run's candidate id.
    pub candidate: String,
    /// The data version that run trained on.
    #[serde(default)]
    pub data_version: u64,
    /// How the answers scored, when every line gave its expected output.
    pub score: Option<WireScore>,
}

/// What a client needs to tell errors apart, besides the status.
pub mod code {
    /// 400: bad lines in a feed or an inference (`errors` lists them).
    pub const BAD_INPUT: &str = "bad_input";
    /// 409 on inference: no model is trained yet (`training` says whether a run is under way).
    pub const NO_MODEL: &str = "no_model";
    /// 409 on registration: an app of that name is registered.
    pub const APP_EXISTS: &str = "app_exists";
}

/// One bad line of a failed feed or inference (its 1-based line in the request body).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BadLine {
    /// Its 1-based line in the request body.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Every error answer (4xx, 5xx): `{"error": "..."}` and, for some, the fields below.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The message, for people.
    pub error: String,
    /// A machine-readable kind (see [`code`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The bad lines of a feed or an inference: the first
    /// [`MAX_KEPT_LINE_ERRORS`](crate::MAX_KEPT_LINE_ERRORS) of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<BadLine>>,
    /// How many lines were bad in all (`errors` lists at most the first
    /// [`MAX_KEPT_LINE_ERRORS`](crate::MAX_KEPT_LINE_ERRORS)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad: Option<usize>,
    /// How many lines the failed request had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
    /// For `no_model`: whether a run is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<bool>,
}
