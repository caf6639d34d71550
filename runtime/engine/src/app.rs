//! What the engine needs to know about an app, read from its stored manifest: the schema, the
//! workload, the candidate ids and the constraints.
//!
//! A manifest written by `easemlc` (`easeml.json`) carries the workload and candidates; one made from
//! a schema alone (a typed client opened without a manifest) does not, and then the built-in template
//! registry chooses them, exactly as `easemlc` would have.

use easeml_compiler::schema::{Metric, Schema};
use easeml_compiler::{Registry, candidates};
use serde_json::Value;

use crate::error::{Error, Result};

/// The workloads of LANGUAGE.md section 4 (the registry's `workload` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// `image_classification`: `[A,B,C]` or `[A,B]` in, a class out.
    ImageClassification,
    /// `image_recovery`: an image in, an image out.
    ImageRecovery,
    /// `timeseries_classification`: a chain of records in, a class out.
    TimeseriesClassification,
    /// `timeseries_translation`: a chain in, a chain out.
    TimeseriesTranslation,
    /// `tree_classification`: a binary tree of records in, a class out.
    TreeClassification,
    /// `tabular_regression`: `[A]` in, `[1]` out.
    TabularRegression,
    /// `tabular_classification`: `[A]` in, a class out.
    TabularClassification,
    /// `general_classification`: anything in, a class out.
    GeneralClassification,
    /// `general_autoencoder`: anything in, reconstructed.
    GeneralAutoencoder,
}

impl Workload {
    /// Parses a registry workload name.
    pub fn from_name(name: &str) -> Option<Workload> {
        Some(match name {
            "image_classification" => Workload::ImageClassification,
            "image_recovery" => Workload::ImageRecovery,
            "timeseries_classification" => Workload::TimeseriesClassification,
            "timeseries_translation" => Workload::TimeseriesTranslation,
            "tree_classification" => Workload::TreeClassification,
            "tabular_regression" => Workload::TabularRegression,
            "tabular_classification" => Workload::TabularClassification,
            "general_classification" => Workload::GeneralClassification,
            "general_autoencoder" => Workload::GeneralAutoencoder,
            _ => return None,
        })
    }

    /// True when the output is a class (quality is accuracy).
    pub fn is_classification(self) -> bool {
        matches!(
            self,
            Workload::ImageClassification
                | Workload::TimeseriesClassification
                | Workload::TreeClassification
                | Workload::TabularClassification
                | Workload::GeneralClassification
        )
    }
}

/// An app as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppModel {
    /// The checked schema.
    pub schema: Schema,
    /// The workload.
    pub workload: Workload,
    /// The candidate ids, e.g. `resnet18+norm_k2`, in the manifest's order.
    pub candidates: Vec<String>,
    /// The `train_time` constraint in seconds, if any.
    pub train_time_limit: Option<f64>,
}

impl AppModel {
    /// Reads a stored manifest (JSON text with a `schema` key, and `workload` + `candidates` when
    /// `easemlc` wrote it).
    pub fn from_manifest(app: &str, manifest: &str) -> Result<AppModel> {
        let bad = |message: String| Error::Manifest {
            app: app.to_owned(),
            message,
        };
        let value: Value = serde_json::from_str(manifest)
            .map_err(|error| bad(format!("the manifest is not JSON: {error}")))?;
        let schema: Schema = serde_json::from_value(
            value
                .get("schema")
                .cloned()
                .ok_or_else(|| bad("the manifest has no `schema`".to_owned()))?,
        )
        .map_err(|error| bad(format!("the manifest's `schema`: {error}")))?;
        let listed: Option<Vec<String>> =
            value
                .get("candidates")
                .and_then(Value::as_array)
                .map(|candidates| {
                    candidates
                        .iter()
                        .filter_map(|candidate| candidate.get("id").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                });
        let workload_name = value.get("workload").and_then(Value::as_str);
        let (workload_name, candidate_ids) = match (workload_name, listed) {
            (Some(workload), Some(candidates)) if !candidates.is_empty() => {
                (workload.to_owned(), candidates)
            }
            _ => {
                let registry = Registry::builtin();
                let template = registry
                    .matching(&schema)
                    .into_iter()
                    .next()
                    .ok_or_else(|| {
                        bad(format!(
                            "no model template accepts `{}`",
                            schema.system_type()
                        ))
                    })?;
                let ids = candidates::candidates(template, &registry.normalization_ks)
                    .into_iter()
                    .map(|candidate| candidate.id)
                    .collect();
                (template.workload.clone(), ids)
            }
        };
        let workload = Workload::from_name(&workload_name)
            .ok_or_else(|| bad(format!("unknown workload `{workload_name}`")))?;
        let train_time_limit = schema
            .constraints
            .iter()
            .find(|constraint| constraint.metric == Metric::TrainTime)
            .map(|constraint| constraint.seconds);
        Ok(AppModel {
            schema,
            workload,
            candidates: candidate_ids,
            train_time_limit,
        })
    }

    /// D, the number of classes, for classification workloads.
    pub fn n_classes(&self) -> Option<u64> {
        if !self.workload.is_classification() {
            return None;
        }
        match &self.schema.labels {
            Some(labels) => Some(labels.len() as u64),
            None => self
                .schema
                .output
                .tensors()
                .next()
                .map(|tensor| tensor.dims.iter().product::<u64>()),
        }
    }
}
