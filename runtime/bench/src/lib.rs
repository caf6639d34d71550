//! easeml's benchmark harnesses, kept out of the libraries the service runs.
//!
//! - [`dataset`]: the result tables of the ease.ml paper's benchmarks (delgado179, the deep-learning
//!   table, synthetic families) as users x models quality (and cost) matrices.
//! - [`replay`]: the paper's replay benchmark: every policy run over a table, repetitions seeded
//!   from `(seed, repetition)` alone, loss-over-cost traces and the cost to reach each loss level.
//!   `easeml bench scheduler` (easeml-cli) and `examples/replay.rs` drive it.
//!
//! The scheduler itself is `easeml-scheduler`; this crate only calls its public API.

pub mod dataset;
pub mod replay;
