//! `easeml.json`: the [`Manifest`] (a type of the schema model, `easeml_schema::manifest`) of a
//! compiled program. This is the one function that writes a manifest; the runtime only reads them.

use easeml_schema::Manifest;
use easeml_schema::manifest::{GENERATED_NOTE, MANIFEST_VERSION, app_id};

use crate::Compiled;

/// The manifest of a compiled program.
pub fn manifest(compiled: &Compiled) -> Manifest {
    let schema = compiled.schema.clone();
    Manifest {
        generated: GENERATED_NOTE.to_owned(),
        manifest_version: MANIFEST_VERSION,
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
