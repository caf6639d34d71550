//! The candidate models as tch modules, and what they share: the batch input, the network trait, the
//! layer helpers (which count FLOPs for the cost estimate) and the builder from a candidate.
//! Families: `image` (classifiers), `recovery`, `sequence` (recurrent classifiers and seq2seq),
//! `temporal` (1-D convolutional time-series classifiers), `tabular`, `tree`.
//!
//! Every model adapts to the declared shapes: image models take any `[H,W,C]` (convolutions are
//! padded by `k/2` and pooling falls back to adaptive pooling on small maps, so `[1,1,1]` works) and
//! end in adaptive pooling; sequence models take any step size and length. Widths (channels and hidden
//! sizes) are multiplied by [`ModelConfig::width`], which defaults to 1 on CUDA and 1/4 on CPU; the
//! architectures (depth, block structure) are always the named ones.

pub mod image;
pub mod recovery;
pub mod sequence;
pub mod tabular;
pub mod temporal;
pub mod tree;

use std::cell::Cell;

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use crate::candidate::{Candidate, ModelKind};
use crate::data::{Examples, Inputs, Targets};
use crate::error::{Error, Result};
use crate::normalize::{Normalizer, OutputScale};
use crate::task::Task;

/// Settings that shape a model beyond its task; stored in the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Channel and hidden-size multiplier (1 = the published widths).
    pub width: f64,
    /// The most bytes the bit-level auto-encoder reads of an input or writes of an output (longer
    /// ones are cut, shorter ones zero-padded). Checkpoints from before
    /// [`ModelConfig::input_bytes`] read and wrote exactly this many.
    pub max_bytes: i64,
    /// Bytes the bit-level auto-encoder reads of each input: the longest input's, at most
    /// [`ModelConfig::max_bytes`], set by [`ModelConfig::fitted_to`]; 0 (older checkpoints) means
    /// `max_bytes`.
    #[serde(default)]
    pub input_bytes: i64,
    /// Bytes the bit-level auto-encoder writes for each output (the encoding of the output type):
    /// the longest target's, at most [`ModelConfig::max_bytes`]; 0 (older checkpoints, which
    /// reconstructed their input) means `max_bytes`.
    #[serde(default)]
    pub output_bytes: i64,
    /// Bytes the bit-level classifier reads per recurrent step (`8 x` this many bits; the last step
    /// zero-padded). 1 is the paper's model, one byte per step; [`ModelConfig::fitted_to`] raises
    /// it for long inputs so that no input takes more than [`MAX_BYTE_STEPS`] steps, which bounds
    /// the cost of one batch (a 12 kB input was 12,000 sequential steps, longer than a run's time
    /// limit). Checkpoints from before it read as 1, the model they were trained as.
    #[serde(default = "one_byte_per_step")]
    pub bytes_per_step: i64,
}

/// The most recurrent steps the bit-level classifier takes over one input (see
/// [`ModelConfig::bytes_per_step`]).
pub const MAX_BYTE_STEPS: usize = 256;

/// The default [`ModelConfig::max_bytes`]: 32 KiB, a `[16,16,16]` grid of values (16 kB) with
/// room to spare; the auto-encoder's first layer then takes 262,144 bits.
pub const MAX_AUTOENCODER_BYTES: i64 = 32 * 1024;

fn one_byte_per_step() -> i64 {
    1
}

impl ModelConfig {
    /// The default for a device: full width on CUDA, a quarter on CPU.
    pub fn for_device(device: Device) -> Self {
        Self {
            width: if device.is_cuda() { 1.0 } else { 0.25 },
            max_bytes: MAX_AUTOENCODER_BYTES,
            input_bytes: 0,
            output_bytes: 0,
            bytes_per_step: 1,
        }
    }

    /// This config with the settings that depend on the data set of `examples`: the bit-level
    /// classifier's [`ModelConfig::bytes_per_step`], the fewest bytes per step that keep the
    /// longest input within [`MAX_BYTE_STEPS`] steps (1 for inputs of at most that many bytes),
    /// and the bit-level auto-encoder's [`ModelConfig::input_bytes`] and
    /// [`ModelConfig::output_bytes`], the longest input's and target's within `max_bytes`.
    pub fn fitted_to(mut self, examples: &crate::data::Examples) -> Self {
        let longest = |strings: &[Vec<u8>]| strings.iter().map(Vec::len).max().unwrap_or(0);
        let cap = self.max_bytes.max(1);
        if let crate::data::Inputs::Bytes(bytes) = &examples.inputs {
            let longest = longest(bytes);
            self.bytes_per_step = longest.div_ceil(MAX_BYTE_STEPS).max(1) as i64;
            self.input_bytes = (longest as i64).clamp(1, cap);
        }
        if let crate::data::Targets::Bytes(bytes) = &examples.targets {
            self.output_bytes = (longest(bytes) as i64).clamp(1, cap);
        }
        self
    }

    /// The bytes the bit-level auto-encoder reads of each input (see [`ModelConfig::input_bytes`]).
    pub fn autoencoder_input_bytes(&self) -> i64 {
        self.fitted_or_max(self.input_bytes)
    }

    /// The bytes the bit-level auto-encoder writes for each output (see
    /// [`ModelConfig::output_bytes`]).
    pub fn autoencoder_output_bytes(&self) -> i64 {
        self.fitted_or_max(self.output_bytes)
    }

    /// A fitted byte count, or `max_bytes` where it is 0 (a checkpoint from before the fitting).
    fn fitted_or_max(&self, fitted: i64) -> i64 {
        if fitted > 0 { fitted } else { self.max_bytes }.max(1)
    }

    /// `channels * width`, at least 8.
    pub fn scale(&self, channels: i64) -> i64 {
        ((channels as f64 * self.width).round() as i64).max(8)
    }
}

/// One batch of inputs, already on the model's device.
#[derive(Debug)]
pub enum BatchInput {
    /// `[B, dims...]` for dense inputs (images as `[B,H,W,C]`).
    Dense(Tensor),
    /// Zero-padded sequences `[B, T, A]`, their lengths and, for translation, the number of output
    /// steps to produce.
    Sequences {
        /// `[B, T, A]`.
        values: Tensor,
        /// The true length of each sequence.
        lengths: Vec<i64>,
        /// Output steps to produce (translation only).
        output_steps: i64,
    },
    /// A batch of trees, flattened level by level.
    Trees(tree::FlatTrees),
    /// Zero-padded sequences `[B, T, A]` with their lengths as a tensor `[B]` (int64): what an
    /// exported 1-D convolutional classifier is traced with, so that the trace follows any batch
    /// size and length (`crate::export`); only the `temporal` models read it.
    PaddedSequences {
        /// `[B, T, A]`.
        values: Tensor,
        /// `[B]`, the true length of each sequence.
        lengths: Tensor,
    },
}

/// A network: a batch in, the raw outputs out (logits `[B,D]` for classification, values for
/// regression and recovery, `[B,T,B'+1]` for translation).
pub trait Network: std::fmt::Debug {
    /// The forward pass.
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor;

    /// The network as TorchScript source, for the networks whose path through the layers depends
    /// on the data (recurrent networks, trees) and so cannot be traced; `None` for the others
    /// (traced instead, `crate::export`).
    fn scripted(&self) -> Option<Scripted> {
        None
    }
}

/// A network written as TorchScript: the methods of a module (among them `network`, whose
/// arguments and result each network documents: what [`Network::forward`] takes and returns, as
/// tensors) and the tensors they read as `self.NAME`. Invariant: `network` computes what `forward`
/// computes in evaluation mode, with the same libtorch operators (checked by the export tests
/// against `infer`).
#[derive(Debug, Default)]
pub struct Scripted {
    /// TorchScript methods, each indented by four spaces (`    def network(self, ...)`).
    pub source: String,
    /// `(NAME, tensor)` for every `self.NAME` the methods read.
    pub parameters: Vec<(String, Tensor)>,
}

impl Scripted {
    /// A dense layer's tensors as parameters `{name}_weight` and `{name}_bias`.
    fn linear(&mut self, name: &str, layer: &Linear) {
        self.parameters
            .push((format!("{name}_weight"), layer.linear.ws.shallow_clone()));
        if let Some(bias) = &layer.linear.bs {
            self.parameters
                .push((format!("{name}_bias"), bias.shallow_clone()));
        }
    }
}

/// TorchScript of a dense layer `name` (registered by [`Scripted::linear`]) applied to `x`.
fn linear_script(name: &str, x: &str) -> String {
    format!("torch.linear({x}, self.{name}_weight, self.{name}_bias)")
}

/// A candidate's network with its optional input normalization.
#[derive(Debug)]
pub struct Model {
    /// The network.
    pub network: Box<dyn Network>,
    /// The input transform (f_k, or standardization for tabular models), applied to dense inputs
    /// first.
    pub normalizer: Option<Normalizer>,
    /// The output transform of a tabular regression (the targets' scale), applied last.
    pub output_scale: Option<OutputScale>,
}

impl Model {
    /// Normalizes (when the candidate asks for it), runs the network, and scales its outputs to
    /// the targets' (a regression's).
    pub fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let outputs = match (&self.normalizer, input) {
            (Some(normalizer), BatchInput::Dense(xs)) => self
                .network
                .forward(&BatchInput::Dense(normalizer.apply(xs)), train),
            _ => self.network.forward(input, train),
        };
        match &self.output_scale {
            Some(scale) => scale.apply(&outputs),
            None => outputs,
        }
    }

    /// Fits the model's transforms on the training `rows` of `examples`: the input normalizer
    /// on their dense inputs, the output scale on their dense targets (the one place a run, a
    /// MOP run and every other trainer fits them).
    pub fn fit_transforms(&mut self, task: &Task, examples: &Examples, rows: &[usize]) {
        if let (Some(normalizer), Inputs::Dense { shape, values }) =
            (self.normalizer.as_mut(), &examples.inputs)
        {
            normalizer.fit(values, &crate::batch::dense_input_shape(task, shape), rows);
        }
        if let (Some(scale), Targets::Dense { shape, values }) =
            (self.output_scale.as_mut(), &examples.targets)
        {
            scale.fit(values, crate::data::numel(shape), rows);
        }
    }
}

/// Builds the candidate's model under `path` for the task.
pub fn build(
    path: &nn::Path<'_>,
    candidate: &Candidate,
    task: &Task,
    config: &ModelConfig,
) -> Result<Model> {
    candidate.check_fits(task)?;
    let network: Box<dyn Network> = match (candidate.model, task) {
        (model, Task::ImageClassification { input, n_classes }) => {
            image::build(path, model, input[2], *n_classes, config)
        }
        (model, Task::ImageRecovery { input, output }) => {
            recovery::build(path, model, input, output, config)
        }
        (
            model,
            Task::TabularClassification {
                features,
                n_classes,
            },
        ) => tabular::build(path, model, *features, *n_classes),
        (model, Task::TabularRegression { features, outputs }) => {
            tabular::build(path, model, *features, *outputs)
        }
        (
            model @ (ModelKind::Fcn | ModelKind::ResNet1d | ModelKind::InceptionTime),
            Task::SequenceClassification { step, n_classes },
        ) => temporal::build_classifier(path, model, *step, *n_classes, config),
        (model, Task::SequenceClassification { step, n_classes }) => {
            sequence::build_classifier(path, model, *step, *n_classes, config)
        }
        (ModelKind::BitRnn, Task::BytesClassification { n_classes }) => {
            let step = 8 * config.bytes_per_step.max(1);
            sequence::build_classifier(path, ModelKind::Gru, step, *n_classes, config)
        }
        (
            _,
            Task::SequenceTranslation {
                input_step,
                output_step,
            },
        ) => Box::new(sequence::Seq2Seq::new(
            path,
            *input_step,
            *output_step,
            config,
        )),
        (ModelKind::TreeRnn, Task::TreeClassification { node, n_classes }) => {
            Box::new(tree::TreeRnn::new(path, *node, *n_classes, config))
        }
        (ModelKind::BitAutoencoder, Task::BytesAutoencoder) => tabular::build_autoencoder(
            path,
            8 * config.autoencoder_input_bytes(),
            8 * config.autoencoder_output_bytes(),
            config,
        ),
        _ => {
            return Err(Error::CandidateDoesNotFit {
                candidate: candidate.id(),
                task: format!("{} (not a tch model)", task.name()),
            });
        }
    };
    let normalizer = match (candidate.norm_k, task) {
        (Some(k), Task::ImageClassification { input, .. } | Task::ImageRecovery { input, .. }) => {
            Some(Normalizer::new(path, k, input[2]))
        }
        (Some(k), Task::TabularClassification { features, .. })
        | (Some(k), Task::TabularRegression { features, .. }) => {
            Some(Normalizer::new(path, k, *features))
        }
        (None, Task::TabularClassification { features, .. })
        | (None, Task::TabularRegression { features, .. }) => {
            Some(Normalizer::standardize(path, *features))
        }
        _ => None,
    };
    let output_scale = match task {
        Task::TabularRegression { outputs, .. } => Some(OutputScale::new(path, *outputs)),
        _ => None,
    };
    Ok(Model {
        network,
        normalizer,
        output_scale,
    })
}

thread_local! {
    static FLOP_COUNTER: Cell<Option<u64>> = const { Cell::new(None) };
    static ACTIVATION_COUNTER: Cell<Option<u64>> = const { Cell::new(None) };
}

fn add_to(counter: &'static std::thread::LocalKey<Cell<Option<u64>>>, amount: u64) {
    counter.with(|counter| {
        if let Some(total) = counter.get() {
            counter.set(Some(total.saturating_add(amount)));
        }
    });
}

/// Adds to the FLOP counter when counting is on (see [`count_flops`]).
pub(crate) fn add_flops(flops: u64) {
    add_to(&FLOP_COUNTER, flops);
}

/// Adds the bytes of a layer output to the activation counter when counting is on.
pub(crate) fn add_activation(tensor: &Tensor) {
    add_to(&ACTIVATION_COUNTER, 4 * tensor.numel() as u64);
}

/// Runs `f` with counting on and returns the FLOPs the layers reported.
pub(crate) fn count_flops(f: impl FnOnce()) -> u64 {
    forward_footprint(f).0
}

/// Runs `f` (a forward pass) with counting on; returns its FLOPs and the bytes of the outputs of its
/// convolution and dense layers (a lower bound of the activations a backward pass keeps).
pub fn forward_footprint(f: impl FnOnce()) -> (u64, u64) {
    FLOP_COUNTER.with(|counter| counter.set(Some(0)));
    ACTIVATION_COUNTER.with(|counter| counter.set(Some(0)));
    f();
    (
        FLOP_COUNTER.with(|counter| counter.replace(None).unwrap_or(0)),
        ACTIVATION_COUNTER.with(|counter| counter.replace(None).unwrap_or(0)),
    )
}

/// A 2-D convolution that reports its FLOPs.
#[derive(Debug)]
pub(crate) struct Conv {
    conv: nn::Conv2D,
    in_channels: i64,
    kernel: i64,
    groups: i64,
}

impl nn::Module for Conv {
    fn forward(&self, xs: &Tensor) -> Tensor {
        let ys = xs.apply(&self.conv);
        add_activation(&ys);
        let out = ys.numel() as u64;
        add_flops(2 * out * (self.in_channels / self.groups * self.kernel * self.kernel) as u64);
        ys
    }
}

/// A convolution with `k/2` padding (so any input of at least 1x1 gives an output of at least 1x1).
pub(crate) fn conv(
    path: nn::Path<'_>,
    in_channels: i64,
    out_channels: i64,
    kernel: i64,
    stride: i64,
) -> Conv {
    conv_with(
        path,
        in_channels,
        out_channels,
        kernel,
        stride,
        kernel / 2,
        true,
    )
}

/// A convolution with explicit padding and bias.
pub(crate) fn conv_with(
    path: nn::Path<'_>,
    in_channels: i64,
    out_channels: i64,
    kernel: i64,
    stride: i64,
    padding: i64,
    bias: bool,
) -> Conv {
    let config = nn::ConvConfig {
        stride,
        padding,
        bias,
        ..Default::default()
    };
    let mut conv = nn::conv2d(path, in_channels, out_channels, kernel, config);
    tch::no_grad(|| {
        let weights = channels_last(&conv.ws);
        conv.ws.set_data(&weights);
    });
    Conv {
        conv,
        in_channels,
        kernel,
        groups: 1,
    }
}

/// A 4-D tensor `[N, C, H, W]` with the same values, laid out channels-last in memory (NHWC: the
/// channels of one position side by side), as `tensor.contiguous(memory_format=channels_last)`.
///
/// Every 2-D convolution of the trainer runs channels-last: its weights are stored so from
/// construction (`conv_with`; loading and copying keep a variable's layout) and images enter as
/// the `[B,H,W,C]` batch they are, permuted, not copied (`to_nchw`); libtorch then chooses its
/// channels-last kernels (cuDNN's on CUDA, oneDNN's on the CPU) and keeps the layout from layer
/// to layer. Measured against the same models in NCHW (PyTorch 2.13, this CPU, 2 threads, batch
/// 32, `bench/results/trainer/channels-last/`): the small CNN 1.3x training / 2.0x inference,
/// ResNet-18 at the CPU width (1/4) 1.14-1.15x / 1.34-1.58x at 32x32 and 64x64; on CUDA it is
/// what PyTorch's own mixed-precision recipe uses (issue 47). Writers of raw bytes
/// (`crate::checkpoint::safetensors_bytes`) make tensors contiguous first.
pub fn channels_last(tensor: &Tensor) -> Tensor {
    if tensor.dim() != 4 {
        return tensor.shallow_clone();
    }
    tensor
        .permute([0, 2, 3, 1])
        .contiguous()
        .permute([0, 3, 1, 2])
}

/// A 1-D convolution over `[B, C, T]` with 'same' padding (the output has the input's length; an even
/// kernel has one more step of padding on the left than on the right), stride 1; it reports its
/// FLOPs.
#[derive(Debug)]
pub(crate) struct Conv1d {
    conv: nn::Conv1D,
    in_channels: i64,
    kernel: i64,
}

impl nn::Module for Conv1d {
    fn forward(&self, xs: &Tensor) -> Tensor {
        let mut ys = xs.apply(&self.conv);
        if self.kernel % 2 == 0 {
            // Padded by k/2 on both sides, the output has one step too many: drop the last (by a
            // slice to -1, not a length, so that a trace follows any length: `crate::export`).
            ys = ys.slice(2, 0, -1, 1);
        }
        add_activation(&ys);
        let out = ys.numel() as u64;
        add_flops(2 * out * (self.in_channels * self.kernel) as u64);
        ys
    }
}

/// A 1-D 'same' convolution (see [`Conv1d`]).
pub(crate) fn conv1d(
    path: nn::Path<'_>,
    in_channels: i64,
    out_channels: i64,
    kernel: i64,
    bias: bool,
) -> Conv1d {
    let config = nn::ConvConfig {
        padding: kernel / 2,
        bias,
        ..Default::default()
    };
    Conv1d {
        conv: nn::conv1d(path, in_channels, out_channels, kernel, config),
        in_channels,
        kernel,
    }
}

/// The momentum of the running batch-norm estimates at the `batches`-th training batch: the plain
/// average of the first ten batches' statistics, then an exponential average with momentum 0.1.
/// Small data sets train for only a few dozen steps, after which momentum 0.1 from the initial
/// (0, 1) would leave the inference statistics far from the training ones.
pub(crate) fn warm_momentum(batches: u64) -> f64 {
    (1.0 / batches.max(1) as f64).max(0.1)
}

/// The number of training batches a warm batch norm has seen, saturating at [`WARM_BATCHES`]
/// (from there on [`warm_momentum`] is constant), kept as a non-trainable scalar variable
/// `warm_batches` in the `VarStore` so that checkpoints and hop states
/// ([`crate::hop::TrainingState`]) carry it: a run continued elsewhere goes on with the momentum it
/// had. A cache spares reading the variable at every batch (a device sync on CUDA): it is trusted
/// only while the variable's version counter is the one it saw, so a restore or a checkpoint load
/// (an in-place copy) is read on the next batch.
#[derive(Debug)]
pub(crate) struct WarmBatches {
    stored: Tensor,
    /// `(count, version of `stored`)`.
    cache: Cell<Option<(u64, i64)>>,
}

/// The count at which [`WarmBatches`] saturates: `warm_momentum` is 0.1 from here on.
pub(crate) const WARM_BATCHES: u64 = 10;

/// The name of [`WarmBatches`]' variable; checkpoints written before it existed lack it, and
/// loading them keeps the model's (see `train::load_into`).
pub(crate) const WARM_BATCHES_NAME: &str = "warm_batches";

impl WarmBatches {
    pub(crate) fn new(path: &nn::Path<'_>) -> Self {
        Self {
            stored: path.zeros_no_train(WARM_BATCHES_NAME, &[]),
            cache: Cell::new(None),
        }
    }

    /// Counts one more training batch and returns its momentum.
    pub(crate) fn next_momentum(&self) -> f64 {
        let version = self.stored.f_internal_version().ok();
        let count = match (self.cache.get(), version) {
            (Some((count, seen)), Some(version)) if seen == version => count,
            _ => {
                let value = self.stored.f_double_value(&[]).unwrap_or(0.0);
                if value.is_finite() && value > 0.0 {
                    (value as u64).min(WARM_BATCHES)
                } else {
                    0
                }
            }
        };
        let next = (count + 1).min(WARM_BATCHES);
        if next != count {
            let mut stored = self.stored.shallow_clone();
            // A failed fill leaves the variable behind; the version check below then re-reads it.
            let _ = tch::no_grad(|| stored.f_fill_(next as f64));
        }
        self.cache.set(
            self.stored
                .f_internal_version()
                .ok()
                .map(|version| (next, version)),
        );
        warm_momentum(count + 1)
    }
}

/// 2-D batch normalization whose running estimates follow [`warm_momentum`] (PyTorch's
/// `BatchNorm2d` otherwise: weights 1, biases 0, eps 1e-5; `nn::BatchNorm`'s variable names).
#[derive(Debug)]
pub(crate) struct WarmBatchNorm2d {
    bn: nn::BatchNorm,
    /// Training batches seen.
    batches: WarmBatches,
}

impl WarmBatchNorm2d {
    pub(crate) fn new(path: nn::Path<'_>, channels: i64) -> Self {
        let config = nn::BatchNormConfig {
            ws_init: nn::Init::Const(1.0),
            ..Default::default()
        };
        Self {
            batches: WarmBatches::new(&path),
            bn: nn::batch_norm2d(path, channels, config),
        }
    }

    pub(crate) fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let momentum = if train {
            self.batches.next_momentum()
        } else {
            0.0
        };
        xs.batch_norm(
            self.bn.ws.as_ref(),
            self.bn.bs.as_ref(),
            Some(&self.bn.running_mean),
            Some(&self.bn.running_var),
            train,
            momentum,
            1e-5,
            true,
        )
    }
}

/// A dense layer that reports its FLOPs.
#[derive(Debug)]
pub(crate) struct Linear {
    linear: nn::Linear,
    in_features: i64,
    out_features: i64,
}

impl nn::Module for Linear {
    fn forward(&self, xs: &Tensor) -> Tensor {
        let rows = (xs.numel() as i64 / self.in_features.max(1)) as u64;
        add_flops(2 * rows * (self.in_features * self.out_features) as u64);
        let ys = xs.apply(&self.linear);
        add_activation(&ys);
        ys
    }
}

/// A dense layer.
pub(crate) fn linear(path: nn::Path<'_>, in_features: i64, out_features: i64) -> Linear {
    Linear {
        linear: nn::linear(path, in_features, out_features, Default::default()),
        in_features,
        out_features,
    }
}

/// Max pooling that never fails on small maps: a regular (ceil-mode) pool when the map is at least
/// the kernel, else an adaptive pool to `ceil(size / stride)`.
pub(crate) fn max_pool(xs: &Tensor, kernel: i64, stride: i64) -> Tensor {
    let size = xs.size();
    let (height, width) = (size[2], size[3]);
    if height >= kernel && width >= kernel {
        xs.max_pool2d([kernel, kernel], [stride, stride], [0, 0], [1, 1], true)
    } else if height == 1 && width == 1 {
        xs.shallow_clone()
    } else {
        let target = [
            (height + stride - 1) / stride,
            (width + stride - 1) / stride,
        ];
        xs.adaptive_max_pool2d(target).0
    }
}

/// Average pooling with the same fallback as [`max_pool`].
pub(crate) fn avg_pool(xs: &Tensor, kernel: i64, stride: i64) -> Tensor {
    let size = xs.size();
    let (height, width) = (size[2], size[3]);
    if height >= kernel && width >= kernel {
        xs.avg_pool2d(
            [kernel, kernel],
            [stride, stride],
            [0, 0],
            true,
            true,
            None::<i64>,
        )
    } else {
        let target = [
            (height + stride - 1) / stride,
            (width + stride - 1) / stride,
        ];
        xs.adaptive_avg_pool2d(target)
    }
}

/// `[B,H,W,C]` to `[B,C,H,W]` (inputs are declared channel-last): a permuted view, which is the
/// channels-last layout the convolutions run in ([`channels_last`]).
pub(crate) fn to_nchw(xs: &Tensor) -> Tensor {
    match xs.dim() {
        3 => xs.unsqueeze(1),
        _ => xs.permute([0, 3, 1, 2]),
    }
}

/// The dense batch of an input, or a panic message for a programming error (the builder matches
/// models to tasks, so a dense model only ever gets dense batches).
pub(crate) fn dense(input: &BatchInput) -> &Tensor {
    match input {
        BatchInput::Dense(xs) => xs,
        other => panic!("a dense model got a non-dense batch: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;
    use tch::nn::Module;

    #[test]
    fn channels_last_keeps_values_and_puts_channels_side_by_side() {
        let weights = Tensor::arange(2 * 3 * 4 * 5, (Kind::Float, Device::Cpu)).view([2, 3, 4, 5]);
        let laid_out = channels_last(&weights);
        assert!(
            laid_out.equal(&weights),
            "the same values at the same indices"
        );
        assert_eq!(laid_out.stride(), vec![60, 1, 15, 3], "NHWC in memory");
        let vector = Tensor::ones([3], (Kind::Float, Device::Cpu));
        assert_eq!(
            channels_last(&vector).stride(),
            vec![1],
            "only 4-D tensors change"
        );
    }

    #[test]
    fn a_convolution_is_built_channels_last_and_keeps_it_through_a_pass() {
        let store = nn::VarStore::new(Device::Cpu);
        let layer = conv(store.root() / "c", 3, 8, 3, 1);
        assert_eq!(layer.conv.ws.stride()[1], 1, "weights channels-last");
        let images = (Tensor::arange(150, (Kind::Float, Device::Cpu)) / 150.0).view([2, 5, 5, 3]);
        let out = layer.forward(&to_nchw(&images));
        assert_eq!(out.size(), vec![2, 8, 5, 5]);
        assert_eq!(out.stride()[1], 1, "the output stays channels-last");
        let reference = images.permute([0, 3, 1, 2]).contiguous().conv2d(
            &layer.conv.ws.contiguous(),
            layer.conv.bs.as_ref(),
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        );
        let difference = (out - reference).abs().max().double_value(&[]);
        assert!(difference < 1e-5, "{difference}");
    }
}
