//! What the engine needs to know about an app, read from its stored manifest
//! ([`easeml_schema::Manifest`], written by `easemlc` or the macro): the schema, the workload and the
//! candidate ids. The limits are the schema's (`Schema::train_time_limit`).

use easeml_schema::{Manifest, Schema};

pub use easeml_schema::Workload;

use crate::error::{Error, Result};

/// An app as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppModel {
    /// The checked schema.
    pub schema: Schema,
    /// The workload.
    pub workload: Workload,
    /// The candidate ids, e.g. `resnet18+norm_k2`, in the manifest's order.
    pub candidates: Vec<String>,
}

impl AppModel {
    /// Reads and checks a stored manifest ([`Manifest::from_json`]).
    pub fn from_manifest(app: &str, manifest: &str) -> Result<AppModel> {
        let bad = |message: String| Error::Manifest {
            app: app.to_owned(),
            message,
        };
        let manifest = Manifest::from_json(manifest).map_err(|error| {
            bad(format!(
                "its manifest cannot be used: {error} (regenerate the app with easemlc and feed it again)"
            ))
        })?;
        let workload = manifest
            .workload()
            .ok_or_else(|| bad(format!("unknown workload `{}`", manifest.workload)))?;
        Ok(AppModel {
            workload,
            candidates: manifest.candidate_ids().map(str::to_owned).collect(),
            schema: manifest.schema,
        })
    }

    /// The `train_time` limit of one run in seconds, if the program has one.
    pub fn train_time_limit(&self) -> Option<f64> {
        self.schema.train_time_limit()
    }

    /// Every constraint limit, as the store's best-run rule takes them.
    pub fn constraint_limits(&self) -> easeml_store::ConstraintLimits {
        easeml_serving::constraint_limits(&self.schema)
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
