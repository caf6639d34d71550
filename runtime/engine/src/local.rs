//! The engine as the client library's local model loader (`easeml_serving::LocalModels`, which `easeml_client` re-exports): embedded
//! `infer` in a process that calls [`install_local_models`] answers with the engine's
//! [`ServedModel`], on the device [`choose_device`] picks.

use easeml_object::{Inference, Object};
use easeml_serving::{LoadedModel, LocalModels, ModelError};
use easeml_store::{AppId, EnsembleRecord, RunRecord, Store};

use crate::{ServedModel, choose_device};

/// The engine's [`LocalModels`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineModels;

impl LocalModels for EngineModels {
    fn load_best(
        &self,
        store: &Store,
        app: AppId,
    ) -> Result<Option<Box<dyn LoadedModel>>, ModelError> {
        let device = choose_device().map_err(|error| ModelError::Load(Box::new(error)))?;
        let served = ServedModel::load(store, app, device)
            .map_err(|error| ModelError::Load(Box::new(error)))?;
        Ok(served.map(|served| Box::new(served) as Box<dyn LoadedModel>))
    }
}

impl LoadedModel for ServedModel {
    fn run(&self) -> &RunRecord {
        ServedModel::run(self)
    }

    fn ensemble(&self) -> Option<&EnsembleRecord> {
        ServedModel::ensemble(self)
    }

    fn predict(&self, inputs: &[Object]) -> Result<Vec<Inference>, ModelError> {
        ServedModel::predict(self, inputs).map_err(|error| ModelError::Predict(Box::new(error)))
    }
}

/// Makes this process's embedded clients answer with the engine's models.
pub fn install_local_models() {
    easeml_serving::install_local_models(&EngineModels);
}
