//! The easeml engine: what turns stored examples into served models, across every app of a store.
//!
//! - [`Engine`]: the multi-tenant loop. One scheduler (easeml-scheduler; its default policy: EI per
//!   unit cost inside each app, Hybrid with a round-robin floor over apps) over every app, each run trained by easeml-trainer and recorded in
//!   easeml-store (queued, running, done with quality, cost and checkpoint, or failed with a reason).
//! - [`ServedModel`]: an app's served model (its best run, or an ensemble of runs), loaded for
//!   inference; [`ensemble`]: greedy ensemble selection over the runs' stored validation answers.
//! - [`best_run`]: the one rule for "the best model" (shared with the status report).
//! - [`export`]: the served model written to a folder (TorchScript or JSON, with its metadata).
//! - [`dataset`]: between stored objects and the trainer's tensors, both ways.
//! - [`mop`]: Cerebro's model hopper parallelism: a run trained by sub-epoch units that hop
//!   between the workers holding the data's partitions; [`gang`]: the same runs trained by
//!   data parallelism, every epoch a gang of ranks on all the workers at once.
//!
//! The engine knows nothing of HTTP; it sees the schema only through the app's stored manifest.

pub mod app;
pub mod checkpoint_blob;
pub mod dataset;
mod engine;
pub mod ensemble;
mod error;
pub mod export;
mod framed;
pub mod gang;
mod local;
pub mod local_workers;
mod model;
pub mod mop;
pub mod progress;
pub mod unit;
pub mod worker;

pub use app::{AppModel, Workload};
pub use dataset::Inference;
pub use easeml_store::{ConstraintLimits, Served, best_run, broken_constraints, served};
pub use easeml_trainer::Tuning;
pub use easeml_trainer::device::{choose_device, device_name};
pub use engine::{
    DEFAULT_MOP_EPOCHS, DEFAULT_MOP_PATIENCE, Engine, EngineConfig, Event, MIN_EXAMPLES, Step,
    TrainSummary, load_examples, load_examples_where, scheduler_quality,
};
pub use error::{Error, Result};
pub use local::{EngineModels, install_local_models};
pub use model::ServedModel;
