//! easeml-tuner: TrimTuner (Mendes et al., "TrimTuner: Efficient Optimization of Machine Learning
//! Jobs in the Cloud via Sub-Sampling", MASCOTS 2020) and its baselines, pure Rust.
//!
//! The problem: over a finite set of configurations `x` (cloud + hyper-parameters), each testable
//! at sub-sampling rates `s` of the training set, find the `x` of maximal accuracy at `s = 1` whose
//! cost at `s = 1` meets a maximum, while spending little on the tests themselves.
//!
//! Layers, bottom up: [`stats`] (the normal distribution), [`space`] (configurations x levels,
//! the model inputs), [`trees`] (bagged extra-trees: mean and spread across trees), [`gp`] (the GP
//! with FABOLAS' kernel: Matern-5/2 over `x` times a basis kernel in `s`, hyperparameters by
//! maximum marginal likelihood), [`model`] (either model behind one interface: predictions, joint
//! beliefs, fantasies), [`acquisition`] (CEA, P(feasible), the incumbent, entropy search over
//! representer points, EIc) and [`tuner`] (the policies: TrimTuner with trees or GPs, EIc,
//! EIc/USD, FABOLAS, random search; initial designs; the loop's API). The replay over
//! TrimTuner's published tables is `easeml-bench`'s `tuner` module.
//!
//! Losses are modelled as `log(1 - accuracy)` and costs as `log(cost)`, as TrimTuner's code does.
//! Where the paper and its code differ, this crate follows the code; the differences (and the
//! few places where it follows neither) are listed in the crate's `README.md`.

pub mod acquisition;
pub mod gp;
pub mod model;
pub mod space;
pub mod stats;
pub mod trees;
pub mod tuner;

pub use space::Space;
pub use tuner::{LevelTrend, Policy, Tuner, TunerConfig};
