//! easeml's schema model: what a checked `.eml` program is, and everything about it that more than
//! one stage needs (the uniffi_meta / PRQL-IR pattern: one model crate between front end and back
//! ends).
//!
//! - [`Schema`] and its parts ([`types`]): the paper's system data type plus the optional items
//!   (`app`, `labels`, `constraint`), with the canonical printer [`Schema::system_type`] and the
//!   limits ([`Schema::train_time_limit`], [`Schema::infer_latency_limit`]).
//! - [`rules`]: every validation rule of a schema in one place: the compiler reports a broken rule
//!   as a diagnostic with a span, the runtime refuses a manifest that breaks one
//!   ([`rules::validate`]); both call the same predicates.
//! - [`Manifest`] ([`manifest`]): `easeml.json`, typed and versioned, written by the compiler and
//!   read by the runtime and the engine (serde both ways).
//! - [`Workload`] ([`workload`]): the registry's workload names as a type, and the structure
//!   each takes ([`Workload::schema_problem`]).
//! - [`latency`]: the inference-latency estimate `easemlc explain` gives before training.
//! - [`models`]: the model catalogue (every model id and the workloads it serves) and the
//!   candidate-id grammar ([`models::candidate_problem`]).
//!
//! This crate knows nothing of the `.eml` syntax, templates, SQL, HTTP or libtorch: the generated
//! apps and the runtime depend on it instead of on the compiler.

pub mod latency;
pub mod manifest;
pub mod models;
pub mod rules;
pub mod types;
pub mod workload;

pub use manifest::{Candidate, Manifest, ManifestError, Normalization, TemplateSummary};
pub use rules::SchemaError;
pub use types::{Constraint, DataType, Field, FieldKind, Metric, Schema, Tensor};
pub use workload::Workload;
