//! What the client library (`easeml-client`) and the engine (`easeml-engine`) share about an app's
//! served model, below both so that neither depends on the other:
//! - [`LocalModels`] and [`LoadedModel`]: embedded inference without linking libtorch. The client
//!   asks an installed [`LocalModels`] for an app's best model; the engine (libtorch) provides one
//!   and a process that links it installs it once ([`install_local_models`];
//!   `easeml_runtime::install_engine` does it). A process that never installs one (`<app> feed`,
//!   `<app> refine`, `<app> status`) never loads libtorch, and an embedded `infer` there is
//!   `easeml_client::Error::NoEngine`. This is the seam that keeps the client library free of
//!   libtorch (ARCHITECTURE.md, "libtorch only where a command needs it").
//! - [`QualityMetric`]: what an app's quality numbers are.
//! - [`constraint_limits`]: an app's constraints as the store's best-run rule reads them.

use std::fmt::Debug;
use std::sync::OnceLock;

use easeml_object::{Inference, Object};
use easeml_schema::Schema;
use easeml_store::{AppId, ConstraintLimits, EnsembleRecord, RunRecord, Store};

/// Why the served model could not be loaded, could not answer, or answered what the app's types
/// cannot hold; the loader's and the model's own errors are kept as sources.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// It could not be loaded: no device to run it on, a checkpoint that does not read.
    #[error("the served model did not load: {0}")]
    Load(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// It failed while answering.
    #[error("the served model failed to answer: {0}")]
    Predict(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// It answered something the app's output cannot be (a class outside the labels, a value of
    /// another shape), in words.
    #[error("the served model answered what the app cannot take: {0}")]
    Answer(String),
}

/// What loads an app's best model from a store.
pub trait LocalModels: Send + Sync {
    /// The model `store` serves for `app` (what [`easeml_store::served`] picks: the best run, or
    /// an ensemble of runs), or
    /// `None` when no run has a model; an error says why loading failed.
    fn load_best(
        &self,
        store: &Store,
        app: AppId,
    ) -> std::result::Result<Option<Box<dyn LoadedModel>>, ModelError>;
}

/// A loaded model that answers inputs (not `Send`: libtorch modules stay on the thread that loaded
/// them).
pub trait LoadedModel: Debug {
    /// The run it was trained in (for an ensemble: the best single run, reported beside it).
    fn run(&self) -> &RunRecord;
    /// The ensemble it averages, when it is one (`easeml_store::served`).
    fn ensemble(&self) -> Option<&EnsembleRecord> {
        None
    }
    /// One answer per input, in order; an error says why the model failed.
    fn predict(&self, inputs: &[Object]) -> std::result::Result<Vec<Inference>, ModelError>;
}

static LOCAL_MODELS: OnceLock<&'static dyn LocalModels> = OnceLock::new();

/// Installs the process's model loader; the first one installed stays (later calls are no-ops).
pub fn install_local_models(models: &'static dyn LocalModels) {
    let _ = LOCAL_MODELS.set(models);
}

/// The installed model loader, if any.
pub fn local_models() -> Option<&'static dyn LocalModels> {
    LOCAL_MODELS.get().copied()
}

/// What an app's quality numbers are: the trainer's validation quality is accuracy for outputs that
/// are labels, else R² (1 - squared error / variance, clipped to [0, 1]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QualityMetric {
    /// The share of validation examples whose label was predicted.
    Accuracy,
    /// The coefficient of determination, clipped to [0, 1].
    RSquared,
}

impl QualityMetric {
    /// The metric of an app with `schema`: accuracy where the output can be a label.
    pub fn of(schema: &Schema) -> QualityMetric {
        if schema.label_capacity().is_some() {
            QualityMetric::Accuracy
        } else {
            QualityMetric::RSquared
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            QualityMetric::Accuracy => "accuracy",
            QualityMetric::RSquared => "R²",
        }
    }
}

/// An app's constraint limits as the store's rules take them: the one reading of a schema's
/// `constraint` lines that the status report, inference and the engine share.
pub fn constraint_limits(schema: &Schema) -> ConstraintLimits {
    ConstraintLimits {
        train_time: schema.train_time_limit(),
        infer_latency: schema.infer_latency_limit(),
    }
}
