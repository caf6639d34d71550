//! The inference-latency estimate before anything is trained: what `easemlc explain` says an
//! `infer_latency` constraint is expected to rule out (LANGUAGE.md). The runtime never relies on
//! it: the engine measures every model's latency (the trainer's `latency` module) and serves none
//! over the limit. This crate links no libtorch, so the estimate is data:
//!
//! - [`FORWARD_FLOPS`]: per network, the forward FLOPs of one example as a linear function of the
//!   declared shapes ([`ForwardFlops`]), at the CPU widths (a quarter of the published channels,
//!   the trainer's `ModelConfig::for_device(Cpu)`). `tests/tests/latency_estimates.rs` counts the
//!   trainer's FLOPs on a grid of shapes and checks every entry within 25% (it prints the least
//!   squares fit to paste when a model changes).
//! - The assumed speed: [`INFERENCE_FLOPS_PER_THREAD`] plus [`CALL_OVERHEAD_SECONDS`] a call
//!   (batch building and per-layer dispatch, which dominate small models on the CPU). Calibrated on
//!   the development machine (2 cores, libtorch 2.x, the trainer's `probe_latency`, one thread,
//!   2026-11-24): batch-1 forward passes ran at 36 (VGG-16), 38 (small CNN) and 52 (NIN) GFLOP/s
//!   on 64x64x3 images, while deep nets on small inputs are dominated by per-layer overhead
//!   (ResNet-18 on 28x28x1: 0.58 ms for 3.6 MFLOP). The estimate is within about 3x of the
//!   measured latency for the networks here, lower for deep nets on small inputs: it names what a
//!   limit is expected to rule out, while the engine's measurement decides.
//!
//! Covered: networks with one fixed-size dense input (image classification, tabular). Not
//! estimated ([`LatencyEstimate::Measured`]): classic models (k-NN and kernel ridge keep the
//! training set, so their cost depends on the data) and networks over sequences, trees or bytes
//! (their cost depends on each example's length).

use crate::types::Schema;
use crate::workload::Workload;

/// Assumed sustained FLOP/s of one CPU thread in a batch-1 forward pass (inference runs faster than
/// training's 5 GFLOP/s prior: no backward pass, no optimizer).
pub const INFERENCE_FLOPS_PER_THREAD: f64 = 30e9;
/// Assumed fixed cost of one prediction call on the CPU, seconds.
pub const CALL_OVERHEAD_SECONDS: f64 = 100e-6;

/// Forward FLOPs of one example: `per_input * P + per_input_channel * P * C + per_output * D +
/// per_input_output * P * D + fixed`, where `P` is the input's positions (`H * W` of an image
/// `[H, W, C]`, `F` of a vector `[F]`), `C` its channels (1 for a vector) and `D` the output size
/// (classes or values).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardFlops {
    /// FLOPs per input position.
    pub per_input: f64,
    /// FLOPs per input value (position x channel): the first layer's share.
    pub per_input_channel: f64,
    /// FLOPs per output.
    pub per_output: f64,
    /// FLOPs per input position per output (a linear model's one layer).
    pub per_input_output: f64,
    /// FLOPs that depend on no shape.
    pub fixed: f64,
}

impl ForwardFlops {
    /// The FLOPs for `positions`, `channels` and `outputs`.
    pub fn at(&self, positions: f64, channels: f64, outputs: f64) -> f64 {
        self.per_input * positions
            + self.per_input_channel * positions * channels
            + self.per_output * outputs
            + self.per_input_output * positions * outputs
            + self.fixed
    }
}

const fn flops(
    per_input: f64,
    per_input_channel: f64,
    per_output: f64,
    per_input_output: f64,
    fixed: f64,
) -> ForwardFlops {
    ForwardFlops {
        per_input,
        per_input_channel,
        per_output,
        per_input_output,
        fixed,
    }
}

/// The networks the estimate covers, with their FLOPs at the CPU widths (see the module docs).
pub const FORWARD_FLOPS: [(&str, ForwardFlops); 13] = [
    ("alexnet", flops(1644.0, 242.0, 2048.0, 0.0, 6815744.0)),
    ("bn_alexnet", flops(1644.0, 242.0, 2048.0, 0.0, 6815744.0)),
    ("resnet18", flops(4224.0, 392.0, 256.0, 0.0, 0.0)),
    ("resnet50", flops(9888.0, 392.0, 1024.0, 0.0, 0.0)),
    ("googlenet", flops(3466.9, 392.0, 512.0, 0.0, 0.0)),
    ("squeezenet", flops(851.0, 72.0, 2560.0, 0.0, -15360.0)),
    ("vgg16", flops(38016.0, 288.0, 2048.0, 0.0, 14942208.0)),
    ("nin", flops(25380.0, 2400.0, 15360.0, 0.0, -92160.0)),
    ("small_cnn", flops(18432.0, 576.0, 1024.0, 0.0, 0.0)),
    ("mlp_small", flops(128.0, 0.0, 128.0, 0.0, 0.0)),
    ("mlp_large", flops(512.0, 0.0, 512.0, 0.0, 262144.0)),
    ("logistic", flops(0.0, 0.0, 0.0, 2.0, 0.0)),
    ("linear", flops(0.0, 0.0, 0.0, 2.0, 0.0)),
];

/// The latency estimate of one candidate model.
#[derive(Debug, Clone, PartialEq)]
pub enum LatencyEstimate {
    /// Estimated seconds per example, batch 1, on one CPU thread, with the FLOPs it assumes.
    Seconds {
        /// The estimate.
        seconds: f64,
        /// The forward FLOPs of one example.
        flops: f64,
    },
    /// Not estimated: measured once trained (or probed untrained); the reason in words.
    Measured(&'static str),
}

/// The latency estimate of `model` for an app of `workload` and `schema` (see the module docs).
pub fn estimate_latency(model: &str, workload: Workload, schema: &Schema) -> LatencyEstimate {
    let Some((_, forward)) = FORWARD_FLOPS.iter().find(|(id, _)| *id == model) else {
        return LatencyEstimate::Measured(if crate::models::is_classic(model) {
            "its cost depends on the training data"
        } else {
            "its cost depends on each example's length"
        });
    };
    let input = schema
        .input
        .tensors()
        .next()
        .map(|tensor| tensor.dims.as_slice());
    let outputs = schema
        .output
        .tensors()
        .map(|tensor| tensor.element_count())
        .sum::<u64>()
        .max(1) as f64;
    let (positions, channels) = match (workload, input) {
        (Workload::ImageClassification, Some([height, width, channels])) => {
            ((height * width) as f64, *channels as f64)
        }
        (Workload::TabularClassification | Workload::TabularRegression, Some([features])) => {
            (*features as f64, 1.0)
        }
        _ => return LatencyEstimate::Measured("its input is not one image or vector"),
    };
    let flops = forward.at(positions, channels, outputs);
    LatencyEstimate::Seconds {
        seconds: flops / INFERENCE_FLOPS_PER_THREAD + CALL_OVERHEAD_SECONDS,
        flops,
    }
}
