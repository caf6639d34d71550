//! Inference latency, as the `infer_latency` constraint means it (LANGUAGE.md): the wall-clock time of
//! one prediction of one example (batch 1) on the serving device, through [`Predictor::predict_rows`]
//! (batch building, the forward pass and reading the answer back: what serving one request costs,
//! less decoding the request).
//!
//! The protocol ([`LatencyProtocol`]): a few warm-up predictions (the first pass allocates and, on
//! CUDA, picks kernels), then timed predictions, each of one example, cycling over the first examples
//! (sequences differ in length), until [`LatencyProtocol::max_repeats`] are timed or
//! [`LatencyProtocol::max_seconds`] have passed, but never fewer than
//! [`LatencyProtocol::min_repeats`]; the latency is their median (one slow outlier, a page fault or
//! a scheduler hiccup, does not decide it). On CUDA every timed prediction ends by copying its answer
//! to the host, which synchronises the device, so the time is the device's, not the launch's.
//!
//! Two uses: [`measure_latency`] of a trained model (the engine records it on every finished run,
//! and a run over the limit is never served), and [`probe_latency`] of the untrained network
//! before training (a network's forward cost does not depend on its weights, so a candidate whose
//! probe already breaks the limit is not trained). Classic models are only measured after training:
//! their cost depends on what they keep (k-NN and DTW keep the training set).

use std::time::Instant;

use crate::candidate::Candidate;
use crate::data::{Examples, Inputs};
use crate::error::{Error, Result};
use crate::infer::Predictor;
use crate::models::ModelConfig;
use crate::task::Task;

/// How many predictions are timed, and for how long at most.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyProtocol {
    /// Untimed predictions first.
    pub warmups: usize,
    /// Timed predictions at least, however long they take.
    pub min_repeats: usize,
    /// Timed predictions at most.
    pub max_repeats: usize,
    /// Once this many seconds of timed predictions have passed, no more are started (beyond
    /// `min_repeats`).
    pub max_seconds: f64,
}

impl LatencyProtocol {
    /// 2 warm-ups, then 5 to 25 timed predictions within half a second: what the engine uses.
    pub const DEFAULT: LatencyProtocol = LatencyProtocol {
        warmups: 2,
        min_repeats: 5,
        max_repeats: 25,
        max_seconds: 0.5,
    };
}

impl Default for LatencyProtocol {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The median batch-1 prediction time of `predictor` in seconds over `inputs` (see the module
/// documentation). Errors when there are no inputs or a prediction fails.
pub fn measure_latency(
    predictor: &Predictor,
    inputs: &Inputs,
    protocol: &LatencyProtocol,
) -> Result<f64> {
    let n = inputs.checked_len()?;
    if n == 0 {
        return Err(Error::BadExamples(
            "the inference latency needs at least one example to time".into(),
        ));
    }
    let row = |index: usize| index % n.min(protocol.max_repeats.max(1));
    for index in 0..protocol.warmups {
        predictor.predict_rows(inputs, &[row(index)])?;
    }
    let started = Instant::now();
    let mut times = Vec::with_capacity(protocol.max_repeats.max(protocol.min_repeats));
    while times.len() < protocol.min_repeats.max(1)
        || (times.len() < protocol.max_repeats
            && started.elapsed().as_secs_f64() < protocol.max_seconds)
    {
        let one = Instant::now();
        predictor.predict_rows(inputs, &[row(times.len())])?;
        times.push(one.elapsed().as_secs_f64());
    }
    Ok(median(&mut times))
}

/// The latency of the candidate's untrained network on `budget`'s device and widths, timed on
/// `examples`' inputs; `Ok(None)` for a classic model (measured after training only).
pub fn probe_latency(
    candidate: &Candidate,
    examples: &Examples,
    config: ModelConfig,
    device: tch::Device,
    protocol: &LatencyProtocol,
) -> Result<Option<f64>> {
    let task = Task::of(examples)?;
    candidate.check_fits(&task)?;
    let config = config.fitted_to(examples);
    let Some(predictor) = Predictor::untrained(candidate, &task, config, device)? else {
        return Ok(None);
    };
    measure_latency(&predictor, &examples.inputs, protocol).map(Some)
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let middle = times.len() / 2;
    if times.len() % 2 == 1 {
        times[middle]
    } else {
        (times[middle - 1] + times[middle]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_ignores_one_outlier() {
        assert_eq!(median(&mut [0.003, 0.001, 9.0, 0.002, 0.002]), 0.002);
        assert_eq!(median(&mut [0.004, 0.002]), 0.003);
    }
}
