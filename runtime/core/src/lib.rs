//! The easeml runtime's client library: what the generated app crates and binaries link against.
//!
//! [`Client::open`] opens one app by a [`Connection`]: embedded (the local store under
//! `$EASEML_HOME`, no daemon) or, later, remote (a server URL). A client feeds examples
//! ([`Client::feed_lines`] for the `feed` command's text formats, [`Client::feed`] for typed values),
//! lists them page by page ([`Client::examples`]), turns them on and off ([`Client::set_enabled`]) and
//! reports the app's runs ([`Client::status`]). Every input is checked against the app's schema before
//! anything is stored, and a batch is stored whole or not at all.
//!
//! Generated `Input` / `Output` structs hold [`Tensor`]s; generated code reaches the runtime only
//! through `__private`.
//!
//! [`server`] is the HTTP side: `easeml serve` and the generated binaries' `refine` page.
//!
//! The loaders of the `feed` formats (DESIGN.md section 2) live in [`feed`]; the checked object model
//! and its binary encoding in the `easeml-example` crate; the storage in `easeml-store`.

pub mod app_cli;
mod client;
mod connection;
pub mod feed;
pub mod server;
mod status;
pub mod tensor;

pub use client::{AppSpec, Client, FeedReport, InferReport, LoadedExample, Score};
pub use connection::Connection;
pub use easeml_compiler::schema::Schema;
/// The engine: training across every app of a store, and serving the best models.
#[cfg(feature = "engine")]
pub use easeml_engine as engine;
/// The checked object model and its encoding (re-exported so generated crates need only this crate).
pub use easeml_example as example;
pub use easeml_example::Inference;
pub use easeml_example::Object;
/// The store (re-exported for the engine and server of later slices).
pub use easeml_store as store;
pub use easeml_store::{
    ExampleId, ExampleRecord, Page, PageRequest, RunId, RunState, StoredOutput,
};
pub use feed::{CheckedExample, CheckedOutput, FeedOptions, LineError};
pub use status::{RunReport, Status};

/// Everything that can go wrong in the client library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A store error (I/O, SQLite, unknown example, label map full, ...).
    #[error(transparent)]
    Store(#[from] easeml_store::Error),
    /// A remote connection, which this build cannot use yet.
    #[error(
        "server mode ({url}) is not available yet in this build; unset EASEML_SERVER to use the local store"
    )]
    RemoteUnavailable {
        /// The server URL asked for.
        url: String,
    },
    /// A manifest that cannot be read.
    #[error("app manifest: {0}")]
    Manifest(String),
    /// An app registered under the same name with a different schema.
    #[error(
        "app `{app}` is already registered with type {stored}, but this program has type {given}; rename the app or remove the old one"
    )]
    SchemaMismatch {
        /// The app's name.
        app: String,
        /// The registered canonical system type (and labels).
        stored: String,
        /// This program's.
        given: String,
    },
    /// Input lines or values that failed their checks; nothing was stored.
    #[error("{}", bad_input_message(.errors, *.total))]
    BadInput {
        /// Every bad line, in order.
        errors: Vec<LineError>,
        /// How many lines or values the batch had.
        total: usize,
    },
    /// Reading the feed itself failed.
    #[error("reading the feed: {0}")]
    Read(#[source] std::io::Error),
    /// The server could not start or stop (listening, the async runtime).
    #[error("{what}: {source}")]
    Serve {
        /// What the server was doing, e.g. `cannot listen on 127.0.0.1:9000`.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Inference before any model finished training.
    #[error("{}", no_model_message(.app, *.training))]
    NoModel {
        /// The app.
        app: String,
        /// Whether a run is queued or running now.
        training: bool,
    },
    /// Inference asked of a build without the `engine` feature (libtorch): [`Client::infer`] and the
    /// other `infer*` calls exist in every build, so code written against the client compiles either
    /// way, and say so at run time.
    #[error(
        "this build of easeml-runtime has no `engine` feature (libtorch), so it cannot answer with a model; build easeml-runtime with its default features (or `features = [\"engine\"]`) to infer, and train with `<app> train` or `easeml train`"
    )]
    NoEngine,
    /// The engine (training, loading or running a model) failed.
    #[cfg(feature = "engine")]
    #[error(transparent)]
    Engine(#[from] easeml_engine::Error),
    /// A stored blob that does not decode for the app's schema.
    #[error("example {id}: {source}")]
    Decode {
        /// The example.
        id: i64,
        /// What is wrong.
        #[source]
        source: easeml_example::Error,
    },
}

/// Enabled examples an app needs before it is trained (the engine's `MIN_EXAMPLES`).
const MIN_EXAMPLES: usize = 4;

fn no_model_message(app: &str, training: bool) -> String {
    if training {
        format!(
            "no model of app `{app}` is trained yet; the first run is under way, try again when it finishes (`{app} status` shows it)"
        )
    } else {
        format!(
            "no model of app `{app}` is trained yet; run `{app} train` first (or feed more examples: training needs at least {} enabled)",
            MIN_EXAMPLES
        )
    }
}

/// The result type of the client library.
pub type Result<T> = std::result::Result<T, Error>;

/// At most this many bad lines are spelled out in an error message (all are in `errors`).
const SHOWN_ERRORS: usize = 20;

fn bad_input_message(errors: &[LineError], total: usize) -> String {
    let mut message = format!(
        "{} of {total} line(s) are bad; nothing was stored (use --skip-bad to store the good ones):",
        errors.len()
    );
    for error in errors.iter().take(SHOWN_ERRORS) {
        message.push_str("\n  ");
        message.push_str(&error.to_string());
    }
    if errors.len() > SHOWN_ERRORS {
        message.push_str(&format!("\n  ... and {} more", errors.len() - SHOWN_ERRORS));
    }
    message
}

pub use tensor::{ShapeError, Tensor, UnknownLabel};

/// What generated code names; not a stable API for hand-written code.
#[doc(hidden)]
pub mod __private {
    pub use crate::tensor::{ShapeError, Tensor, UnknownLabel};
    pub use serde;
}
