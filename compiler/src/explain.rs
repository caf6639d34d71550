//! The `easemlc explain` report: canonical system type, matching templates, workload, candidates,
//! labels and constraints (with, for `infer_latency`, each model's estimated latency and the
//! candidates the limit is expected to rule out, from [`easeml_schema::latency`]), and the fields
//! the generated Rust types rename (`self` is `field_self`), as text for people and as JSON
//! (DESIGN.md section 2) for tools.

use std::fmt::Write as _;

use serde::Serialize;

use easeml_schema::latency::{
    CALL_OVERHEAD_SECONDS, INFERENCE_FLOPS_PER_THREAD, LatencyEstimate, estimate_latency,
};
use easeml_schema::models::is_classic;
use easeml_schema::{Constraint, Metric, TemplateSummary, Workload};

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
    /// What the `infer_latency` constraint is expected to rule out; left out of the JSON when the
    /// program has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infer_latency: Option<LatencyCheck>,
    /// The fields whose Rust name in the generated types is not their name (`self` is
    /// `field_self`); left out of the JSON when there is none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub renamed_fields: Vec<RenamedField>,
}

/// The `infer_latency` constraint against each candidate model's estimated latency.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyCheck {
    /// The limit, seconds per example.
    pub limit_seconds: f64,
    /// What the estimates assume, in words.
    pub assumption: String,
    /// The candidate ids whose model's estimate is over the limit, in candidate order.
    pub ruled_out: Vec<String>,
    /// One entry per model of the candidates, in candidate order.
    pub models: Vec<ModelLatency>,
}

/// One model's estimated latency.
#[derive(Debug, Clone, Serialize)]
pub struct ModelLatency {
    /// The model id.
    pub model: String,
    /// Estimated seconds per example, or `null` when it is only measured.
    pub estimate_seconds: Option<f64>,
    /// The forward FLOPs of one example the estimate counts, or `null`.
    pub forward_flops: Option<f64>,
    /// Whether the estimate is over the limit.
    pub expected_over_limit: bool,
    /// Why there is no estimate, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_because: Option<&'static str>,
}

impl LatencyCheck {
    fn new(compiled: &Compiled, limit_seconds: f64) -> LatencyCheck {
        let workload = Workload::from_name(compiled.workload());
        let mut models: Vec<ModelLatency> = Vec::new();
        for candidate in &compiled.candidates {
            if models.iter().any(|model| model.model == candidate.model) {
                continue;
            }
            let estimate = match workload {
                Some(workload) => estimate_latency(&candidate.model, workload, &compiled.schema),
                None => LatencyEstimate::Measured("its workload is not one the runtime knows"),
            };
            models.push(match estimate {
                LatencyEstimate::Seconds { seconds, flops } => ModelLatency {
                    model: candidate.model.clone(),
                    estimate_seconds: Some(seconds),
                    forward_flops: Some(flops),
                    expected_over_limit: seconds > limit_seconds,
                    measured_because: None,
                },
                LatencyEstimate::Measured(because) => ModelLatency {
                    model: candidate.model.clone(),
                    estimate_seconds: None,
                    forward_flops: None,
                    expected_over_limit: false,
                    measured_because: Some(because),
                },
            });
        }
        let ruled_out = compiled
            .candidates
            .iter()
            .filter(|candidate| {
                models
                    .iter()
                    .any(|model| model.model == candidate.model && model.expected_over_limit)
            })
            .map(|candidate| candidate.id.clone())
            .collect();
        LatencyCheck {
            limit_seconds,
            assumption: format!(
                "batch 1 on one CPU thread at {:.0} GFLOP/s, the CPU widths (a quarter of the published channels), plus {:.0} µs a call",
                INFERENCE_FLOPS_PER_THREAD / 1e9,
                CALL_OVERHEAD_SECONDS * 1e6
            ),
            ruled_out,
            models,
        }
    }

    fn write_text(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "    estimated latency per example ({}):",
            self.assumption
        );
        for model in &self.models {
            match model.estimate_seconds {
                Some(seconds) => {
                    let verdict = if model.expected_over_limit {
                        "  over the limit: expected to be ruled out"
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        out,
                        "      {:<16} {:>10.2} ms{verdict}",
                        model.model,
                        seconds * 1e3
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "      {:<16} {:>10}     {} ({})",
                        model.model,
                        "-",
                        if is_classic(&model.model) {
                            "measured after training"
                        } else {
                            "measured before training (untrained) and after"
                        },
                        model.measured_because.unwrap_or("not estimated")
                    );
                }
            }
        }
        if self.ruled_out.is_empty() {
            let _ = writeln!(out, "    expected to rule out: no candidate");
        } else {
            let _ = writeln!(
                out,
                "    expected to rule out {} candidate{}: {}",
                self.ruled_out.len(),
                if self.ruled_out.len() == 1 { "" } else { "s" },
                self.ruled_out.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "    every trained model's latency is measured on the serving device; one over the limit is never served, and a network already over it untrained is not trained"
        );
    }
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
            infer_latency: compiled
                .schema
                .limit(Metric::InferLatency)
                .map(|limit| LatencyCheck::new(compiled, limit)),
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
                match constraint.metric {
                    Metric::TrainTime => {
                        let _ = writeln!(
                            out,
                            "    every training run stops within 0.9 x the limit; a run that costs more is never served"
                        );
                    }
                    Metric::InferLatency => {
                        if let Some(check) = &self.infer_latency {
                            check.write_text(&mut out);
                        }
                    }
                }
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
