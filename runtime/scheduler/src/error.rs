//! The one error type of the scheduler crate.

use thiserror::Error;

/// Everything that can go wrong in model selection, the online scheduler and the replay benchmark.
#[derive(Debug, Error)]
pub enum SchedulerError {
    /// A user id that the scheduler does not know (never registered, or already removed).
    #[error("unknown user `{0}`")]
    UnknownUser(String),
    /// A user id registered twice.
    #[error("user `{0}` is already registered")]
    DuplicateUser(String),
    /// A candidate id that the given user does not have.
    #[error("user `{user}` has no candidate `{candidate}`")]
    UnknownCandidate {
        /// The user.
        user: String,
        /// The candidate asked for.
        candidate: String,
    },
    /// A candidate id given twice for the same user.
    #[error("user `{user}` already has a candidate `{candidate}`")]
    DuplicateCandidate {
        /// The user.
        user: String,
        /// The repeated candidate.
        candidate: String,
    },
    /// A reported quality or cost that is not a finite number (or a cost that is not positive).
    #[error("invalid observation for user `{user}`, candidate `{candidate}`: {reason}")]
    InvalidObservation {
        /// The user.
        user: String,
        /// The candidate.
        candidate: String,
        /// What was wrong.
        reason: String,
    },
    /// Hyperparameter fitting or kernel construction got data it cannot use.
    #[error("kernel: {0}")]
    Kernel(String),
    /// A data set file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A data set could not be parsed or does not fit the benchmark.
    #[error("data set: {0}")]
    Dataset(String),
    /// A benchmark configuration that cannot run (unknown policy name, bad dataset spec, ...).
    #[error("configuration: {0}")]
    Config(String),
}

/// The result type of the scheduler crate.
pub type Result<T> = std::result::Result<T, SchedulerError>;
