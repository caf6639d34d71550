//! easeml's lab: the benchmarks, kept out of the libraries and the binary the service runs (the
//! `easeml` binary embeds them with its default feature `lab`; `bench/results/` beside this crate
//! holds what they measured).
//!
//! - [`harness`]: the `easeml bench ...` commands ([`harness::BenchCommand`]) and their plots.
//! - [`dataset`]: the result tables of the ease.ml paper's benchmarks (delgado179, the deep-learning
//!   table, synthetic families) as users x models quality (and cost) matrices.
//! - [`replay`]: the paper's replay benchmark: every policy run over a table, repetitions seeded
//!   from `(seed, repetition)` alone, loss-over-cost traces and the cost to reach each loss level.
//!   `easeml bench scheduler` ([`harness`]) and `examples/replay.rs` drive it.
//! - [`tuner`]: the replay of TrimTuner's evaluation over its published tables (Table II, cost to
//!   each fraction of the feasible optimum, Eq. 7's curves). `easeml bench tuner` and
//!   `examples/tuner_replay.rs` drive it.
//! - [`mop`]: a discrete-event simulation of Cerebro's model hopper parallelism (the randomized
//!   scheduler of Algorithm 1, a lock-step rotation) against task parallelism on replicated data,
//!   each makespan over the open-shop lower bound. `easeml bench mop --simulate` drives it.
//!
//! The scheduler itself is `easeml-scheduler` and the tuner `easeml-tuner`; this crate only calls
//! their public APIs.

pub mod dataset;
pub mod harness;
pub mod mop;
pub mod replay;
pub mod tuner;
