//! Embedded inference without linking libtorch: the client asks an installed [`LocalModels`] for
//! an app's best model. The engine (`easeml-engine`, libtorch) provides one and a process that
//! links it installs it once ([`install_local_models`]; `easeml_runtime::install_engine` does it);
//! a process that never installs one (`<app> feed`, `<app> refine`, `<app> status`) never loads
//! libtorch, and an embedded `infer` there is [`Error::NoEngine`](crate::Error::NoEngine).
//!
//! This is the seam that keeps the client library free of libtorch (ARCHITECTURE.md, "libtorch only
//! where a command needs it").

use std::fmt::Debug;
use std::sync::OnceLock;

use easeml_object::{Inference, Object};
use easeml_store::{AppId, EnsembleRecord, RunRecord, Store};

/// What loads an app's best model from a store.
pub trait LocalModels: Send + Sync {
    /// The model `store` serves for `app` (what [`easeml_store::served`] picks: the best run, or
    /// an ensemble of runs), or
    /// `None` when no run has a model; an error says why loading failed.
    fn load_best(
        &self,
        store: &Store,
        app: AppId,
    ) -> std::result::Result<Option<Box<dyn LoadedModel>>, String>;
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
    fn predict(&self, inputs: &[Object]) -> std::result::Result<Vec<Inference>, String>;
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
