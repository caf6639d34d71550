//! The engine's error type.

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A store error (I/O, SQLite, unknown app, ...).
    #[error(transparent)]
    Store(#[from] easeml_store::Error),
    /// A trainer error (bad examples, a candidate that does not fit, libtorch).
    #[error(transparent)]
    Trainer(#[from] easeml_trainer::Error),
    /// A scheduler error.
    #[error(transparent)]
    Scheduler(#[from] easeml_scheduler::SchedulerError),
    /// An app's manifest that cannot be used.
    #[error("app `{app}`: {message}")]
    Manifest {
        /// The app.
        app: String,
        /// What is wrong.
        message: String,
    },
    /// A stored blob that does not decode for the app's schema.
    #[error("app `{app}`, example {id}: {source}")]
    Decode {
        /// The app.
        app: String,
        /// The example.
        id: i64,
        /// What is wrong.
        #[source]
        source: easeml_object::Error,
    },
    /// A checkpoint blob that cannot be read.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// Another process trains on this store.
    #[error(
        "another process already trains the store at {home} (an `easeml serve`, `easeml train` or an \
         app's `train`; it holds {lock}); wait for it to finish or stop it, then try again"
    )]
    Busy {
        /// The store's directory.
        home: String,
        /// The lock it holds, in words: `the lock file PATH` or the database's lock.
        lock: String,
    },
    /// An export that cannot be made (no such app, no model yet, the folder, an unsupported
    /// model), in words.
    #[error("{0}")]
    Export(String),
    /// Inputs that the model cannot take.
    #[error("{0}")]
    Input(String),
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, Error>;
