//! Serving an app's model: load what the store's rule serves (`easeml_store::served`: the best
//! run's checkpoint, or every member of a recorded ensemble) once, then predict batches of checked
//! input objects, answering in the app's terms (label names, output objects). An ensemble answers
//! with its members' answers averaged by weight: class probabilities (the class the most likely
//! of the average) or values.

use easeml_object::Object;
use easeml_store::{AppId, EnsembleRecord, RunId, RunRecord, Store, served};
use easeml_trainer::{Prediction, Predictor};
use tch::Device;

use crate::app::AppModel;
use crate::checkpoint_blob;
use crate::dataset::{Inference, inference_of, inputs_of};
use crate::error::{Error, Result};

/// An app's served model, loaded.
#[derive(Debug)]
pub struct ServedModel {
    app: AppModel,
    labels: Vec<String>,
    run: RunRecord,
    ensemble: Option<EnsembleRecord>,
    /// One predictor (a single run) or one per ensemble member, with its weight.
    predictors: Vec<(Predictor, f64)>,
}

fn load_predictor(store: &Store, run: &RunRecord, device: Device) -> Result<Predictor> {
    let hash = run.checkpoint.clone().ok_or_else(|| {
        Error::Checkpoint(format!("run {} finished without a checkpoint", run.id.0))
    })?;
    let checkpoint = checkpoint_blob::decode(&store.blob(&hash)?)?;
    Ok(Predictor::new(&checkpoint, device)?)
}

/// The app's label names in class order (empty for an app whose outputs are not labels).
fn labels_of(store: &Store, app: AppId) -> Result<Vec<String>> {
    Ok(store
        .label_map(app)?
        .map(|map| map.labels)
        .unwrap_or_default())
}

/// The app as stored (its name) and its model, built from the stored manifest.
fn stored_app(store: &Store, app: AppId) -> Result<(easeml_store::App, AppModel)> {
    let stored = store.app(app)?;
    let model = AppModel::from_manifest(&stored.name, &stored.manifest)?;
    Ok((stored, model))
}

impl ServedModel {
    /// Loads the served model of the app on `device`; `Ok(None)` when no run has finished yet.
    pub fn load(store: &Store, app: AppId, device: Device) -> Result<Option<ServedModel>> {
        let (_, model) = stored_app(store, app)?;
        let runs = store.runs(app)?;
        let ensembles = store.ensembles(app)?;
        let Some(chosen) = served(&runs, &ensembles, &model.constraint_limits()) else {
            return Ok(None);
        };
        let run = chosen.run().clone();
        let ensemble = chosen.ensemble().cloned();
        let predictors = match &ensemble {
            None => vec![(load_predictor(store, &run, device)?, 1.0)],
            Some(ensemble) => {
                let mut predictors = Vec::with_capacity(ensemble.members.len());
                for member in &ensemble.members {
                    let member_run = runs
                        .iter()
                        .find(|candidate| candidate.id == member.run)
                        .ok_or(easeml_store::Error::NoSuchRun(member.run.0))?;
                    predictors.push((load_predictor(store, member_run, device)?, member.weight));
                }
                predictors
            }
        };
        Ok(Some(ServedModel {
            app: model,
            labels: labels_of(store, app)?,
            run,
            ensemble,
            predictors,
        }))
    }

    /// Loads one run's model of the app on `device`, whether served or not (what it would answer
    /// were it chosen: `easeml bench quality` scores every model family's own choice this way).
    /// The run must be a run of the app that finished with a checkpoint.
    pub fn of_run(store: &Store, app: AppId, run: RunId, device: Device) -> Result<ServedModel> {
        let (stored, model) = stored_app(store, app)?;
        let run = store.run(run)?;
        if run.app != app {
            return Err(Error::Checkpoint(format!(
                "run {} is not a run of `{}`",
                run.id.0, stored.name
            )));
        }
        let predictor = load_predictor(store, &run, device)?;
        Ok(ServedModel {
            app: model,
            labels: labels_of(store, app)?,
            run,
            ensemble: None,
            predictors: vec![(predictor, 1.0)],
        })
    }

    /// The run whose model this is (for an ensemble: the best single run, reported beside it).
    pub fn run(&self) -> &RunRecord {
        &self.run
    }

    /// The ensemble served, when one is.
    pub fn ensemble(&self) -> Option<&EnsembleRecord> {
        self.ensemble.as_ref()
    }

    /// The app it serves.
    pub fn app(&self) -> &AppModel {
        &self.app
    }

    /// The label names in class order (empty for an app whose outputs are not labels).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The loaded models (what an export writes out): the one run's, or each ensemble member's in
    /// the order of [`EnsembleRecord::members`], with its weight.
    pub(crate) fn predictors_mut(&mut self) -> &mut [(Predictor, f64)] {
        &mut self.predictors
    }

    /// One inference per input object (checked against the app's input type by the caller).
    pub fn predict(&self, inputs: &[Object]) -> Result<Vec<Inference>> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let batch = inputs_of(&self.app, inputs);
        let mut answers: Vec<Vec<Prediction>> = Vec::with_capacity(self.predictors.len());
        for (predictor, _) in &self.predictors {
            let predictions = predictor.predict(&batch)?;
            if predictions.len() != inputs.len() {
                return Err(Error::Input(format!(
                    "the model answered {} of {} inputs",
                    predictions.len(),
                    inputs.len()
                )));
            }
            answers.push(predictions);
        }
        let weights: Vec<f64> = self.predictors.iter().map(|(_, weight)| *weight).collect();
        let predictions = if answers.len() == 1 {
            answers.pop().unwrap_or_default()
        } else {
            (0..inputs.len())
                .map(|row| {
                    let answers: Vec<&Prediction> =
                        answers.iter().map(|member| &member[row]).collect();
                    average(&answers, &weights)
                })
                .collect::<Result<Vec<_>>>()?
        };
        Ok(predictions
            .into_iter()
            .map(|prediction| inference_of(&self.app, &self.labels, prediction))
            .collect())
    }
}

/// The weighted average of the members' answers to one input: probabilities (the class the
/// first most likely) or values; an error in words for answers that do not average.
pub fn average(answers: &[&Prediction], weights: &[f64]) -> Result<Prediction> {
    let mismatch = || {
        Error::Input("the ensemble's members answered in different forms, so their answers cannot be averaged".into())
    };
    let mut sum: Vec<f64> = Vec::new();
    let mut shape = None;
    for (answer, &weight) in answers.iter().zip(weights) {
        let values = match answer {
            Prediction::Class { probabilities, .. } => probabilities,
            Prediction::Values { shape: s, values } => {
                shape = Some(s.clone());
                values
            }
            _ => {
                return Err(Error::Input(
                    "an ensemble averages class probabilities or values only".into(),
                ));
            }
        };
        if sum.is_empty() {
            sum = vec![0.0; values.len()];
        }
        if values.len() != sum.len() {
            return Err(mismatch());
        }
        for (slot, &value) in sum.iter_mut().zip(values) {
            *slot += weight * f64::from(value);
        }
    }
    let values: Vec<f32> = sum.iter().map(|&value| value as f32).collect();
    Ok(match shape {
        Some(shape) => Prediction::Values { shape, values },
        None => Prediction::Class {
            index: crate::ensemble::argmax(&sum) as i64,
            probabilities: values,
        },
    })
}
