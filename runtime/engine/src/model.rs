//! Serving an app's best model: load the checkpoint of the best run once, then predict batches of
//! checked input objects, answering in the app's terms (label names, output objects).

use easeml_object::Object;
use easeml_store::{AppId, RunRecord, Store, best_run};
use easeml_trainer::Predictor;
use tch::Device;

use crate::app::AppModel;
use crate::checkpoint_blob;
use crate::dataset::{Inference, inference_of, inputs_of};
use crate::error::{Error, Result};

/// An app's best model, loaded.
#[derive(Debug)]
pub struct ServedModel {
    app: AppModel,
    labels: Vec<String>,
    run: RunRecord,
    predictor: Predictor,
}

impl ServedModel {
    /// Loads the best model of the app on `device`; `Ok(None)` when no run has finished yet.
    pub fn load(store: &Store, app: AppId, device: Device) -> Result<Option<ServedModel>> {
        let stored = store.app(app)?;
        let model = AppModel::from_manifest(&stored.name, &stored.manifest)?;
        let runs = store.runs(app)?;
        let Some(run) = best_run(&runs, &model.constraint_limits()).cloned() else {
            return Ok(None);
        };
        let hash = run.checkpoint.clone().ok_or_else(|| {
            Error::Checkpoint(format!("run {} finished without a checkpoint", run.id.0))
        })?;
        let checkpoint = checkpoint_blob::decode(&store.blob(&hash)?)?;
        let predictor = Predictor::new(&checkpoint, device)?;
        let labels = match store.label_map(app)? {
            Some(map) => map.labels,
            None => Vec::new(),
        };
        Ok(Some(ServedModel {
            app: model,
            labels,
            run,
            predictor,
        }))
    }

    /// The run whose model this is.
    pub fn run(&self) -> &RunRecord {
        &self.run
    }

    /// The app it serves.
    pub fn app(&self) -> &AppModel {
        &self.app
    }

    /// The label names in class order (empty for an app whose outputs are not labels).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The loaded model (what an export writes out).
    pub(crate) fn predictor_mut(&mut self) -> &mut Predictor {
        &mut self.predictor
    }

    /// One inference per input object (checked against the app's input type by the caller).
    pub fn predict(&self, inputs: &[Object]) -> Result<Vec<Inference>> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let predictions = self.predictor.predict(&inputs_of(&self.app, inputs))?;
        if predictions.len() != inputs.len() {
            return Err(Error::Input(format!(
                "the model answered {} of {} inputs",
                predictions.len(),
                inputs.len()
            )));
        }
        Ok(predictions
            .into_iter()
            .map(|prediction| inference_of(&self.app, &self.labels, prediction))
            .collect())
    }
}
