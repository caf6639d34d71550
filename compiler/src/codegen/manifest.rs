//! `easeml.json`: the manifest of a generated app crate, from which the runtime registers the app.
//!
//! It carries the whole compiled program: the schema (the runtime validates every example against
//! it), the canonical system type, the workload, the chosen template, the candidates, the labels and
//! the constraints, the app's name and a stable app id.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::schema::{Constraint, Schema};
use crate::templates::TemplateSummary;
use crate::{Candidate, Compiled};

/// The content of `easeml.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// The app's name.
    pub app: String,
    /// A stable id: the same app name and system type always give the same id.
    pub app_id: String,
    /// The easemlc version that wrote it.
    pub easemlc_version: String,
    /// The canonical system data type.
    pub system_type: String,
    /// The workload.
    pub workload: String,
    /// The chosen template.
    pub template: TemplateSummary,
    /// The candidate models.
    pub candidates: Vec<Candidate>,
    /// The class names, if declared.
    pub labels: Option<Vec<String>>,
    /// The constraints.
    pub constraints: Vec<Constraint>,
    /// The schema with field names.
    pub schema: Schema,
}

impl Manifest {
    /// The manifest of a compiled program.
    pub fn new(compiled: &Compiled) -> Manifest {
        let schema = compiled.schema.clone();
        Manifest {
            app: schema.app.clone(),
            app_id: app_id(&schema),
            easemlc_version: env!("CARGO_PKG_VERSION").to_owned(),
            system_type: schema.system_type(),
            workload: compiled.workload().to_owned(),
            template: compiled.template().into(),
            candidates: compiled.candidates.clone(),
            labels: schema.labels.clone(),
            constraints: schema.constraints.clone(),
            schema,
        }
    }

    /// The manifest as pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A stable app id: the first 16 hex digits of sha256 of `app` and the canonical system type.
pub fn app_id(schema: &Schema) -> String {
    let mut hasher = Sha256::new();
    hasher.update(schema.app.as_bytes());
    hasher.update([0]);
    hasher.update(schema.system_type().as_bytes());
    let digest = hasher.finalize();
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
