//! The `easemlc explain` report: canonical system type, matching templates, workload, candidates,
//! labels and constraints, and the fields the generated Rust types rename (`self` is `field_self`),
//! as text for people and as JSON (DESIGN.md section 2) for tools.

use std::fmt::Write as _;

use serde::Serialize;

use easeml_schema::{Constraint, TemplateSummary};

use crate::codegen::renamed_fields;
use crate::{Candidate, Compiled, Registry};

/// The JSON of `easemlc explain --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The app name.
    pub app: String,
    /// The canonical system data type.
    pub system_type: String,
    /// The chosen workload.
    pub workload: String,
    /// The chosen template (the first that matches).
    pub template: TemplateSummary,
    /// Every template that matches, in registry order.
    pub matching_templates: Vec<TemplateSummary>,
    /// The candidate models.
    pub candidates: Vec<Candidate>,
    /// The candidates' models that go beyond the paper's list of figure 6, each with its source;
    /// left out of the JSON when there is none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub beyond_paper: std::collections::BTreeMap<String, String>,
    /// The class names, or `null` when the runtime assigns them in first-seen order.
    pub labels: Option<Vec<String>>,
    /// The constraints.
    pub constraints: Vec<Constraint>,
    /// The fields whose Rust name in the generated types is not their name (`self` is
    /// `field_self`); left out of the JSON when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub renamed_fields: Vec<RenamedField>,
}

/// A field that the generated Rust types name differently (serde still reads and writes the
/// field's own name).
#[derive(Debug, Clone, Serialize)]
pub struct RenamedField {
    /// `Input` or `Output`.
    pub side: &'static str,
    /// The field's name in the program.
    pub field: String,
    /// Its Rust identifier.
    pub rust: String,
}

impl RenamedField {
    /// The note `easemlc` prints about the renaming.
    pub fn note(&self) -> String {
        format!(
            "field `{field}` of `{side}` is `{rust}` in the generated Rust types (`{field}` cannot name a Rust field there); its JSON name stays `{field}`",
            field = self.field,
            side = self.side,
            rust = self.rust,
        )
    }
}

impl Explanation {
    /// The explanation of a compiled program.
    pub fn new(compiled: &Compiled) -> Explanation {
        Explanation {
            app: compiled.schema.app.clone(),
            system_type: compiled.schema.system_type(),
            workload: compiled.workload().to_owned(),
            template: compiled.template().into(),
            matching_templates: compiled.matching_templates.iter().map(Into::into).collect(),
            candidates: compiled.candidates.clone(),
            beyond_paper: compiled.beyond_paper.clone(),
            labels: compiled.schema.labels.clone(),
            constraints: compiled.schema.constraints.clone(),
            renamed_fields: renamed_fields(&compiled.schema)
                .into_iter()
                .map(|(side, field)| RenamedField {
                    side,
                    field: field.field,
                    rust: field.rust,
                })
                .collect(),
        }
    }

    /// The human-readable report.
    pub fn to_text(&self, registry: &Registry) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "app:          {}", self.app);
        let _ = writeln!(out, "system type:  {}", self.system_type);
        let _ = writeln!(out, "workload:     {}", self.workload);
        let _ = writeln!(out, "templates that match (the first is chosen):");
        for (index, template) in self.matching_templates.iter().enumerate() {
            let marker = if index == 0 { "*" } else { " " };
            let conditions = if template.conditions.is_empty() {
                String::new()
            } else {
                format!(" where {}", template.conditions.join(", "))
            };
            let _ = writeln!(
                out,
                "  {marker} row {:<3} {} -> {}{}  ({})",
                template.row, template.input, template.output, conditions, template.workload
            );
        }
        let _ = writeln!(out, "candidates ({}):", self.candidates.len());
        for candidate in &self.candidates {
            let name = registry
                .model_names
                .get(&candidate.model)
                .map_or(candidate.model.as_str(), String::as_str);
            let normalization = match candidate.normalization {
                Some(normalization) => format!(", inputs normalized by f_{}", normalization.k),
                None => String::new(),
            };
            let source = match self.beyond_paper.get(&candidate.model) {
                Some(source) => format!("  [beyond the paper: {source}]"),
                None => String::new(),
            };
            let _ = writeln!(out, "  {:<28} {name}{normalization}{source}", candidate.id);
        }
        match &self.labels {
            Some(labels) => {
                let quoted: Vec<String> = labels.iter().map(|label| format!("{label:?}")).collect();
                let _ = writeln!(out, "labels:       {}", quoted.join(", "));
            }
            None => {
                let _ = writeln!(
                    out,
                    "labels:       none declared (classes are numbered in first-seen order)"
                );
            }
        }
        if self.constraints.is_empty() {
            let _ = writeln!(out, "constraints:  none");
        } else {
            let _ = writeln!(out, "constraints:");
            for constraint in &self.constraints {
                let _ = writeln!(
                    out,
                    "  {} <= {} ({} s)",
                    constraint.metric.name(),
                    constraint.limit,
                    constraint.seconds
                );
            }
        }
        if !self.renamed_fields.is_empty() {
            let _ = writeln!(out, "renamed in Rust:");
            for renamed in &self.renamed_fields {
                let _ = writeln!(out, "  {}", renamed.note());
            }
        }
        out
    }
}
