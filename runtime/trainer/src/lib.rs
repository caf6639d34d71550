//! The easeml trainer: turns a candidate model into a trained model with a measured quality and cost.
//!
//! Built on tch (libtorch); it knows nothing of HTTP, SQL or the scheduler. The entry points:
//! - [`Examples`]: the training data (dense tensors, sequences, trees or bytes, each stored in one
//!   contiguous buffer and batched on the fly);
//! - [`Candidate`]: a candidate model id such as `resnet18` or `resnet18+norm_k2` (LANGUAGE.md
//!   sections 4-5);
//! - [`train()`]: one training run (Adam over the learning-rate grid, early stopping; a deterministic
//!   split, or stratified k-fold cross-validation and a refit on small data, [`Validation`]) returning a [`TrainedRun`] with the [`Checkpoint`], the validation quality in `[0,1]`, the
//!   measured cost and the learning curve; [`estimate_cost`] predicts that cost beforehand;
//! - [`tune`]: a network's run as a TrimTuner search over its settings and data shares
//!   ([`Tuning::TrimTuner`]; the learning-rate grid is [`Tuning::Grid`]);
//! - [`optim::Adam`]: Adam with explicit, serializable state, and [`hop::TrainingState`]: the whole
//!   state of a run (weights, buffers, Adam) as bytes, to continue it on another worker;
//! - [`mop`]: model hopper parallelism's steps over those bytes (partitions by id hash, one
//!   sub-epoch from a state to the next, a state's quality and checkpoint);
//! - [`Predictor`]: inference from a checkpoint, and [`export`]: its model written out as
//!   TorchScript (networks) or JSON (some classic models) to run without easeml;
//! - [`latency`]: the batch-1 inference latency the `infer_latency` constraint bounds, of a trained
//!   model or, before training, of the untrained network;
//! - [`device::choose_device`]: CUDA when available, else CPU, `EASEML_DEVICE` overrides.

mod batch;
pub mod candidate;
pub mod checkpoint;
pub mod classic;
pub mod cost;
pub mod data;
pub mod data_parallel;
pub mod device;
pub mod error;
pub mod export;
pub mod hop;
pub mod infer;
pub mod latency;
pub mod loss_scale;
pub mod models;
pub mod mop;
pub mod native;
pub mod normalize;
pub mod oof;
pub mod optim;
pub mod precision;
mod prefetch;
pub mod race;
pub mod synthetic;
pub mod task;
pub mod train;
pub mod tune;

pub use batch::Confusion;
pub use candidate::{ALL_MODELS, Candidate, ModelKind, kin_by_model};
pub use checkpoint::Checkpoint;
pub use cost::{CostEstimate, estimate_cost};
pub use data::{Examples, Inputs, Targets, Tree};
pub use error::{Error, Result};
pub use export::{Call, ExportedModel};
pub use infer::{Prediction, Predictor};
pub use latency::{LatencyProtocol, measure_latency, probe_latency};
pub use oof::OutOfFold;
pub use task::Task;
pub use train::{
    Budget, CurvePoint, EarlyStopping, Evaluation, K_FOLD_REPEATS, LearningRateTrial, Refit,
    RunOutcome, TrainedRun, Validation, train,
};
pub use tune::Tuning;
