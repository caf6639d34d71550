//! The trainer's one error type.

/// Everything that can go wrong in the trainer. A diverging run is not an error: it is a
/// [`crate::RunOutcome::Failed`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `EASEML_DEVICE` (or a requested device) is not `cpu`, `cuda` or `cuda:N`, or is not present.
    #[error("bad device `{value}`: {reason} (expected `cpu`, `cuda` or `cuda:N`)")]
    BadDevice {
        /// The value given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A candidate id that is not `model` or `model+norm_kK`.
    #[error("unknown candidate `{0}`")]
    UnknownCandidate(String),
    /// The candidate does not fit the data (e.g. `resnet18` on sequences).
    #[error("candidate `{candidate}` does not fit a {task} task")]
    CandidateDoesNotFit {
        /// The candidate id.
        candidate: String,
        /// The task, in words.
        task: String,
    },
    /// The examples are inconsistent (lengths, shapes, labels out of range, no examples).
    #[error("bad examples: {0}")]
    BadExamples(String),
    /// A model that is not a tch module could not finish fitting and validating within the run's
    /// time limit (the networks stop at the limit with what they have; these have nothing yet).
    #[error(
        "the run's time limit ({limit_seconds:.0} s) ended while {doing}; a longer limit (the app's `train_time` constraint or the engine's run limit), fewer examples or another candidate would fit"
    )]
    OutOfTime {
        /// The run's limit.
        limit_seconds: f64,
        /// What was under way.
        doing: String,
    },
    /// A checkpoint that cannot be read, or that does not fit the inputs given to it.
    #[error("bad checkpoint: {0}")]
    BadCheckpoint(String),
    /// Model hopper parallelism cannot train this (a classic model, an adversarial pair, no
    /// partition rows).
    #[error("model hopper parallelism: {0}")]
    Mop(String),
    /// A model that [`crate::Predictor::export`] does not write yet.
    #[error("export of {family} is not supported yet; supported: {supported}")]
    ExportUnsupported {
        /// The model's family (its id), with the app's kind where that is the reason.
        family: String,
        /// What is supported, in words.
        supported: &'static str,
    },
    /// float16 training whose gradients are not finite at any loss scale
    /// ([`crate::loss_scale`]).
    #[error("mixed precision: {0}")]
    MixedPrecision(String),
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A file could not be read or written.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Checkpoint metadata could not be (de)serialized.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

/// The trainer's result type.
pub type Result<T> = std::result::Result<T, Error>;
