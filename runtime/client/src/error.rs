//! The client library's error type: everything a [`Client`](crate::Client) call can fail with,
//! each variant worded for the person who ran the command (what is wrong and what to do).

use crate::feed::LineErrors;
use easeml_store::ExampleId;

/// Everything that can go wrong in the client library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A store error (I/O, SQLite, unknown example, label map full, ...).
    #[error(transparent)]
    Store(#[from] easeml_store::Error),
    /// A server URL this client cannot use (an unknown scheme, no host, `https://` without the
    /// runtime's `tls` feature).
    #[error("`{url}` is not a server URL this client can use: {reason}")]
    BadServerUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server could not be reached (nothing listens there, the host is unknown, the
    /// connection broke or timed out).
    #[error(
        "cannot reach the easeml server at {url} ({reason}); start it with `easeml serve`, or unset EASEML_SERVER (and do not pass --server) to use the local store"
    )]
    Unreachable {
        /// The server's URL.
        url: String,
        /// What went wrong, as the HTTP client says it.
        reason: String,
    },
    /// The server refused this client's token for the app (401 / 403), or registering the app.
    /// The message says which app and how to fix it.
    #[error("{message}")]
    Unauthorized {
        /// The server's URL.
        url: String,
        /// The app.
        app: String,
        /// The HTTP status (401 or 403; 409 for an app registered under a token this client
        /// does not have).
        status: u16,
        /// What happened and what to do.
        message: String,
    },
    /// The server answered a request with an error (its message is kept).
    #[error("the easeml server at {url} answered {status}: {message}")]
    Server {
        /// The server's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's `error` message.
        message: String,
    },
    /// An answer of the server that this client cannot read.
    #[error(
        "the easeml server at {url} sent an answer this client cannot read ({reason}); are the server and this app built from the same easeml version?"
    )]
    Protocol {
        /// The server's URL.
        url: String,
        /// What is wrong with the answer.
        reason: String,
    },
    /// A remote feed sent in several requests failed after some of them were stored.
    #[error("{}", partly_stored_message(.stored, .source))]
    PartlyStored {
        /// The ids stored by the earlier requests.
        stored: Vec<ExampleId>,
        /// Why the next request failed.
        #[source]
        source: Box<Error>,
    },
    /// A token file that cannot be read or written.
    #[error("the token file {}: {source}", .path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
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
    /// Input lines or values that failed their checks; nothing was stored (a feed) or answered
    /// (an inference).
    #[error("{}", bad_input_message(.errors, *.total, *.batch))]
    BadInput {
        /// The bad lines: the first ones in full, all of them counted.
        errors: LineErrors,
        /// How many lines or values the batch had.
        total: usize,
        /// What the batch was for.
        batch: Batch,
    },
    /// Reading the feed itself failed.
    #[error("reading the feed: {0}")]
    Read(#[source] std::io::Error),
    /// Inference before any model finished training.
    #[error("{}", no_model_message(.app, *.training, .server.as_deref()))]
    NoModel {
        /// The app.
        app: String,
        /// Whether a run is queued or running now.
        training: bool,
        /// The server's URL when the app lives on a server (which trains it), `None` for the local
        /// store.
        server: Option<String>,
    },
    /// Inference asked of an embedded client in a process with no model loader installed
    /// ([`LocalModels`](crate::LocalModels): the engine, libtorch). The `infer*` calls exist in every
    /// build, so code written against the client compiles either way, and say so at run time. A
    /// remote client infers in every build (the server's model answers).
    #[error(
        "this process has no engine (libtorch) to answer with a model of the local store: run `<app> infer` (it starts `<app>-infer`, which has it), or build your crate with easeml-runtime's `engine` feature (the default) and open the client through it; or use a server (EASEML_SERVER), which answers in every build"
    )]
    NoEngine,
    /// Loading or running the served model failed, or it answered what the app cannot take.
    #[error(transparent)]
    Model(#[from] easeml_serving::ModelError),
    /// A stored blob that does not decode for the app's schema.
    #[error("example {id}: {source}")]
    Decode {
        /// The example.
        id: i64,
        /// What is wrong.
        #[source]
        source: easeml_object::Error,
    },
}

/// Enabled examples an app needs before it is trained.
const MIN_EXAMPLES: usize = easeml_store::MIN_TRAINING_EXAMPLES;

fn no_model_message(app: &str, training: bool, server: Option<&str>) -> String {
    if training {
        format!(
            "no model of app `{app}` is trained yet; the first run is under way, try again when it finishes (`{app} status` shows it)"
        )
    } else if let Some(url) = server {
        format!(
            "no model of app `{app}` is trained yet; the server at {url} trains it in the background (unless it runs with --no-train) once it has at least {} enabled examples (`{app} status` shows its runs)",
            MIN_EXAMPLES
        )
    } else {
        format!(
            "no model of app `{app}` is trained yet; run `{app} train` first (or feed more examples: training needs at least {} enabled)",
            MIN_EXAMPLES
        )
    }
}

fn partly_stored_message(stored: &[ExampleId], source: &Error) -> String {
    let range = match (stored.first(), stored.last()) {
        (Some(first), Some(last)) => format!(", ids {} to {}", first.0, last.0),
        _ => String::new(),
    };
    format!(
        "{source} (the feed went to the server in several requests: the {} examples of the earlier ones were stored{range}; the rest was not)",
        stored.len()
    )
}

/// What a batch of lines or values was for: it words [`Error::BadInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Examples to store (`feed`): a bad one stores nothing, unless bad ones may be skipped.
    Feed,
    /// Inputs to answer (`infer`): a bad one answers nothing.
    Infer,
}

/// The result type of the client library.
pub type Result<T> = std::result::Result<T, Error>;

/// At most this many bad lines are spelled out in an error message (more are in `errors`).
const SHOWN_ERRORS: usize = 20;

fn bad_input_message(errors: &LineErrors, total: usize, batch: Batch) -> String {
    let unit = errors.kept().first().map_or("line", |error| error.unit);
    let consequence = match batch {
        Batch::Feed => "nothing was stored (use --skip-bad to store the good ones)",
        Batch::Infer => "nothing was answered",
    };
    let mut message = format!(
        "{} of {total} {unit}(s) are bad; {consequence}:",
        errors.count()
    );
    for error in errors.iter().take(SHOWN_ERRORS) {
        message.push_str("\n  ");
        message.push_str(&error.to_string());
    }
    let shown = errors.kept().len().min(SHOWN_ERRORS);
    if errors.count() > shown {
        message.push_str(&format!("\n  ... and {} more", errors.count() - shown));
    }
    message
}
