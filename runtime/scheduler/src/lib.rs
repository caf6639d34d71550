//! easeml-scheduler: multi-tenant, cost-aware model selection after the ease.ml paper.
//!
//! Layers, bottom up: [`kernel`] (the prior over models from their quality vectors on other users'
//! data, hyperparameters by maximum marginal likelihood), [`gp`] (one user's posterior with
//! rank-one Cholesky updates), [`acquisition`] (single-user policies: GP-UCB, cost-aware GP-UCB,
//! GP-EI, EI per second, fixed orders), [`picker`] (multi-user policies: FCFS, RoundRobin, Random,
//! Greedy, Hybrid) and [`scheduler`] (the online API the runtime drives): only what the service
//! runs. The paper's replay benchmark over result tables is the `easeml-bench` crate. Pure Rust +
//! nalgebra: no tch, HTTP or SQL here.

pub mod acquisition;
pub mod error;
pub mod gp;
pub mod kernel;
pub mod picker;
pub mod scheduler;

pub use error::{Result, SchedulerError};
pub use kernel::{
    HistoryCovariance, HyperparameterChoice, KernelHyperparameters, KernelKind, KernelModel,
    QualityHistory, QualityScale, choose_quality_scale, family,
};
pub use picker::{Line8Rule, UserPicker, UserPickerKind, UserSummary};
pub use scheduler::{
    AmplitudeRule, BestModel, CandidateSpec, DEFAULT_AMPLITUDE_PRIOR_STRENGTH,
    DEFAULT_SET_ASIDE_MARGIN, Decision, PriorObservation, Scheduler, SchedulerConfig, SetAside,
};
