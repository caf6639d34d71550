//! 1-D convolutional time-series classifiers in the form of Fawaz et al. 2019 ("Deep learning for
//! time series classification: a review"): the fully convolutional network (`fcn`, Wang et al.
//! 2017), the residual network (`resnet1d`, Wang et al. 2017 as in the review) and InceptionTime
//! (`inception_time`, Ismail Fawaz et al. 2020; one network, not the ensemble of five).
//!
//! They read the zero-padded `[B, T, A]` batches of the recurrent models as `[B, A, T]`. Sequences
//! have their own lengths, and padding never changes a prediction: every convolution is 'same'
//! (output length = input length, zeros beyond the ends, so a step past a sequence's end is a zero
//! whether it is the batch's padding or the convolution's), every layer's output is zeroed past each
//! sequence's end before the next layer reads it, max pooling treats those steps as `-inf` (as its
//! own padding), batch normalization takes its statistics over real steps only, and the global
//! average pool divides by each sequence's length. A sequence of length 0 is read as one zero step.
//!
//! Widths are multiplied by [`ModelConfig::width`] (at least 8 channels), like the other families.

use tch::{Kind, Tensor, nn, nn::Module};

use super::{BatchInput, Conv1d, Linear, ModelConfig, Network, conv1d, linear};
use crate::candidate::ModelKind;

/// Builds the `fcn`, `resnet1d` or `inception_time` classifier for steps of `step` values.
pub fn build_classifier(
    path: &nn::Path<'_>,
    model: ModelKind,
    step: i64,
    n_classes: i64,
    config: &ModelConfig,
) -> Box<dyn Network> {
    let path = path / model.id();
    match model {
        ModelKind::Fcn => Box::new(Fcn::new(&path, step, n_classes, config)),
        ModelKind::ResNet1d => Box::new(ResNet1d::new(&path, step, n_classes, config)),
        _ => Box::new(InceptionTime::new(&path, step, n_classes, config)),
    }
}

/// A padded batch as `[B, C, T]` with its mask of real steps.
struct Masked {
    /// `[B, 1, T]`, 1 on real steps, 0 on padding (in the values' kind).
    mask: Tensor,
    /// `[B, 1, T]`, true on padding.
    padding: Tensor,
    /// `[B, 1]`, each sequence's length (at least 1), in the values' kind.
    lengths: Tensor,
    /// The number of real steps of the batch.
    real_steps: f64,
}

impl Masked {
    /// The values `[B, T, A]` as `[B, A, T]` and the mask of `lengths`.
    fn new(values: &Tensor, lengths: &[i64]) -> (Tensor, Self) {
        let device = values.device();
        let steps = values.size()[1];
        let clamped: Vec<i64> = lengths
            .iter()
            .map(|&length| length.clamp(1, steps.max(1)))
            .collect();
        let lengths = Tensor::from_slice(&clamped).to_device(device);
        let positions = Tensor::arange(steps, (Kind::Int64, device)).view([1, 1, steps]);
        let real = positions.lt_tensor(&lengths.view([-1, 1, 1]));
        Self::of_real_steps(values, &real, &lengths, clamped.iter().sum::<i64>() as f64)
    }

    /// [`Masked::new`] with the lengths a tensor `[B]` and every size taken from the tensors by
    /// tensor operations (no Rust number of the batch's shape), so that a trace of it follows any
    /// batch size and length. For evaluation only (`real_steps` is 0: batch statistics are the
    /// running ones).
    fn of_tensors(values: &Tensor, lengths: &Tensor) -> (Tensor, Self) {
        // `[B, T]` of ones, its running sum the positions 1..=T; a row's sum its step count.
        let ones = values.select(2, 0).ones_like().to_kind(Kind::Int64);
        let positions = ones.cumsum(1, Kind::Int64) - 1;
        let steps = ones.sum_dim_intlist(1, false, Kind::Int64);
        let lengths = lengths
            .to_kind(Kind::Int64)
            .clamp_min(1)
            .minimum(&steps.clamp_min(1));
        let real = positions.lt_tensor(&lengths.view([-1, 1])).unsqueeze(1);
        Self::of_real_steps(values, &real, &lengths, 0.0)
    }

    /// The values `[B, T, A]` as `[B, A, T]`, and the mask of `real` (`[B, 1, T]`, true on a
    /// sequence's steps) with the clamped `lengths` (`[B]`, int64): [`Masked::new`]'s and
    /// [`Masked::of_tensors`]' one layout.
    fn of_real_steps(
        values: &Tensor,
        real: &Tensor,
        lengths: &Tensor,
        real_steps: f64,
    ) -> (Tensor, Self) {
        let kind = values.kind();
        (
            values.transpose(1, 2).contiguous(),
            Self {
                mask: real.to_kind(kind),
                padding: real.logical_not(),
                lengths: lengths.to_kind(kind).view([-1, 1]),
                real_steps,
            },
        )
    }

    /// `xs` with the steps past each sequence's end set to 0.
    fn zero_padding(&self, xs: &Tensor) -> Tensor {
        xs * &self.mask
    }

    /// The mean over each sequence's real steps: `[B, C, T]` (zero on padding) to `[B, C]`.
    fn average(&self, xs: &Tensor) -> Tensor {
        xs.sum_dim_intlist(2, false, xs.kind()) / &self.lengths
    }

    /// Max pooling over 3 steps, stride 1, 'same': padding counts as `-inf`, and the output is
    /// zeroed on padding again.
    fn max_pool3(&self, xs: &Tensor) -> Tensor {
        xs.masked_fill(&self.padding, f64::NEG_INFINITY)
            .max_pool1d([3], [1], [1], [1], false)
            .masked_fill(&self.padding, 0.0)
    }
}

/// Batch normalization over channels of `[B, C, T]` whose statistics are taken over real steps only
/// (PyTorch's `BatchNorm1d` otherwise: eps 1e-5, the unbiased variance in the running estimate; its
/// variables have `nn::BatchNorm`'s names). The running estimates follow [`super::warm_momentum`] (the
/// plain average of the first ten batches, then momentum 0.1).
#[derive(Debug)]
struct MaskedBatchNorm {
    weight: Tensor,
    bias: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    /// Training batches seen.
    batches: super::WarmBatches,
}

impl MaskedBatchNorm {
    const EPS: f64 = 1e-5;

    fn new(path: nn::Path<'_>, channels: i64) -> Self {
        Self {
            weight: path.var("weight", &[channels], nn::Init::Const(1.0)),
            bias: path.var("bias", &[channels], nn::Init::Const(0.0)),
            running_mean: path.zeros_no_train("running_mean", &[channels]),
            running_var: path.ones_no_train("running_var", &[channels]),
            batches: super::WarmBatches::new(&path),
        }
    }

    fn forward(&self, xs: &Tensor, masked: &Masked, train: bool) -> Tensor {
        let (mean, var) = if train {
            let count = masked.real_steps.max(1.0);
            let kind = xs.kind();
            let mean = (xs * &masked.mask).sum_dim_intlist([0, 2].as_slice(), false, kind) / count;
            let centered = (xs - mean.view([1, -1, 1])) * &masked.mask;
            let var = centered
                .square()
                .sum_dim_intlist([0, 2].as_slice(), false, kind)
                / count;
            let momentum = self.batches.next_momentum();
            tch::no_grad(|| {
                let unbiased = &var * (count / (count - 1.0).max(1.0));
                let mut running_mean = self.running_mean.shallow_clone();
                let mut running_var = self.running_var.shallow_clone();
                let new_mean = &running_mean * (1.0 - momentum)
                    + mean.detach().to_kind(running_mean.kind()) * momentum;
                let new_var = &running_var * (1.0 - momentum)
                    + unbiased.detach().to_kind(running_var.kind()) * momentum;
                running_mean.copy_(&new_mean);
                running_var.copy_(&new_var);
            });
            (mean, var)
        } else {
            (
                self.running_mean.to_kind(xs.kind()),
                self.running_var.to_kind(xs.kind()),
            )
        };
        let scale = &self.weight / (var + Self::EPS).sqrt();
        (xs - mean.view([1, -1, 1])) * scale.view([1, -1, 1]) + self.bias.view([1, -1, 1])
    }
}

/// A 'same' convolution without bias followed by masked batch normalization (no activation).
#[derive(Debug)]
struct ConvBn {
    conv: Conv1d,
    bn: MaskedBatchNorm,
}

impl ConvBn {
    fn new(path: nn::Path<'_>, input: i64, output: i64, kernel: i64) -> Self {
        Self {
            conv: conv1d(&path / "conv", input, output, kernel, false),
            bn: MaskedBatchNorm::new(&path / "bn", output),
        }
    }

    fn forward(&self, xs: &Tensor, masked: &Masked, train: bool) -> Tensor {
        self.bn.forward(&self.conv.forward(xs), masked, train)
    }

    /// Convolution, batch norm, ReLU, padding zeroed.
    fn forward_relu(&self, xs: &Tensor, masked: &Masked, train: bool) -> Tensor {
        masked.zero_padding(&self.forward(xs, masked, train).relu())
    }
}

/// The values and mask of a sequence batch.
fn sequences(input: &BatchInput) -> (Tensor, Masked) {
    match input {
        BatchInput::Sequences {
            values, lengths, ..
        } => Masked::new(values, lengths),
        BatchInput::PaddedSequences { values, lengths } => Masked::of_tensors(values, lengths),
        _ => panic!("a sequence model got a non-sequence batch: {input:?}"),
    }
}

/// FCN (Wang et al. 2017): three convolution blocks (128, 256, 128 filters; kernels 8, 5, 3; batch
/// norm and ReLU), global average pooling, a dense layer to the logits.
#[derive(Debug)]
struct Fcn {
    blocks: Vec<ConvBn>,
    head: Linear,
}

impl Fcn {
    fn new(path: &nn::Path<'_>, step: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let mut input = step;
        let mut blocks = Vec::new();
        for (index, (filters, kernel)) in [(128, 8), (256, 5), (128, 3)].into_iter().enumerate() {
            let output = config.scale(filters);
            blocks.push(ConvBn::new(
                path / format!("block{index}"),
                input,
                output,
                kernel,
            ));
            input = output;
        }
        Self {
            blocks,
            head: linear(path / "head", input, n_classes),
        }
    }
}

impl Network for Fcn {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let (mut xs, masked) = sequences(input);
        for block in &self.blocks {
            xs = block.forward_relu(&xs, &masked, train);
        }
        masked.average(&xs).apply(&self.head)
    }
}

/// A residual block of the 1-D ResNet: three convolutions (kernels 8, 5, 3; batch norm, ReLU after
/// the first two), a shortcut (1x1 convolution + batch norm when the widths differ, batch norm
/// alone otherwise), the sum, ReLU.
#[derive(Debug)]
struct ResBlock1d {
    convs: [ConvBn; 3],
    shortcut_conv: Option<Conv1d>,
    shortcut_bn: MaskedBatchNorm,
}

impl ResBlock1d {
    fn new(path: nn::Path<'_>, input: i64, output: i64) -> Self {
        Self {
            convs: [
                ConvBn::new(&path / "conv0", input, output, 8),
                ConvBn::new(&path / "conv1", output, output, 5),
                ConvBn::new(&path / "conv2", output, output, 3),
            ],
            shortcut_conv: (input != output)
                .then(|| conv1d(&path / "shortcut_conv", input, output, 1, false)),
            shortcut_bn: MaskedBatchNorm::new(&path / "shortcut_bn", output),
        }
    }

    fn forward(&self, xs: &Tensor, masked: &Masked, train: bool) -> Tensor {
        let ys = self.convs[0].forward_relu(xs, masked, train);
        let ys = self.convs[1].forward_relu(&ys, masked, train);
        let ys = self.convs[2].forward(&ys, masked, train);
        let shortcut = match &self.shortcut_conv {
            Some(conv) => conv.forward(xs),
            None => xs.shallow_clone(),
        };
        let shortcut = self.shortcut_bn.forward(&shortcut, masked, train);
        masked.zero_padding(&(ys + shortcut).relu())
    }
}

/// The 1-D ResNet of the review: three residual blocks (64, 128, 128 filters), global average
/// pooling, a dense layer to the logits.
#[derive(Debug)]
struct ResNet1d {
    blocks: Vec<ResBlock1d>,
    head: Linear,
}

impl ResNet1d {
    fn new(path: &nn::Path<'_>, step: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let mut input = step;
        let mut blocks = Vec::new();
        for (index, filters) in [64, 128, 128].into_iter().enumerate() {
            let output = config.scale(filters);
            blocks.push(ResBlock1d::new(
                path / format!("block{index}"),
                input,
                output,
            ));
            input = output;
        }
        Self {
            blocks,
            head: linear(path / "head", input, n_classes),
        }
    }
}

impl Network for ResNet1d {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let (mut xs, masked) = sequences(input);
        for block in &self.blocks {
            xs = block.forward(&xs, &masked, train);
        }
        masked.average(&xs).apply(&self.head)
    }
}

/// An InceptionTime module: a 1x1 bottleneck (when the input has more than one channel), three
/// convolutions of it (kernels 40, 20, 10), a max pool of the input followed by a 1x1 convolution,
/// concatenated, batch norm, ReLU. Convolutions have no bias, as in the reference code.
#[derive(Debug)]
struct InceptionModule {
    bottleneck: Option<Conv1d>,
    convs: [Conv1d; 3],
    pool_conv: Conv1d,
    bn: MaskedBatchNorm,
}

impl InceptionModule {
    fn new(path: nn::Path<'_>, input: i64, bottleneck: i64, filters: i64) -> (Self, i64) {
        let (bottleneck, branch_input) = if input > 1 {
            (
                Some(conv1d(&path / "bottleneck", input, bottleneck, 1, false)),
                bottleneck,
            )
        } else {
            (None, input)
        };
        let output = 4 * filters;
        (
            Self {
                bottleneck,
                convs: [40, 20, 10].map(|kernel| {
                    conv1d(
                        &path / format!("conv{kernel}"),
                        branch_input,
                        filters,
                        kernel,
                        false,
                    )
                }),
                pool_conv: conv1d(&path / "pool_conv", input, filters, 1, false),
                bn: MaskedBatchNorm::new(&path / "bn", output),
            },
            output,
        )
    }

    fn forward(&self, xs: &Tensor, masked: &Masked, train: bool) -> Tensor {
        // A bias-free 1x1 convolution keeps zero padding zero.
        let reduced = match &self.bottleneck {
            Some(conv) => conv.forward(xs),
            None => xs.shallow_clone(),
        };
        let mut branches: Vec<Tensor> = self
            .convs
            .iter()
            .map(|conv| conv.forward(&reduced))
            .collect();
        branches.push(self.pool_conv.forward(&masked.max_pool3(xs)));
        let ys = self
            .bn
            .forward(&Tensor::cat(&branches, 1), masked, train)
            .relu();
        masked.zero_padding(&ys)
    }
}

/// InceptionTime: six inception modules (32 filters per branch, bottleneck 32), a residual
/// connection around every three (1x1 convolution + batch norm on the shortcut), global average
/// pooling, a dense layer to the logits.
#[derive(Debug)]
struct InceptionTime {
    modules: Vec<InceptionModule>,
    shortcuts: Vec<(Conv1d, MaskedBatchNorm)>,
    head: Linear,
}

impl InceptionTime {
    const DEPTH: usize = 6;

    fn new(path: &nn::Path<'_>, step: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let filters = config.scale(32);
        let bottleneck = config.scale(32);
        let mut modules = Vec::new();
        let mut shortcuts = Vec::new();
        let mut input = step;
        let mut residual_input = step;
        for index in 0..Self::DEPTH {
            let (module, output) =
                InceptionModule::new(path / format!("module{index}"), input, bottleneck, filters);
            modules.push(module);
            input = output;
            if index % 3 == 2 {
                let shortcut = path / format!("shortcut{}", shortcuts.len());
                shortcuts.push((
                    conv1d(&shortcut / "conv", residual_input, output, 1, false),
                    MaskedBatchNorm::new(&shortcut / "bn", output),
                ));
                residual_input = output;
            }
        }
        Self {
            modules,
            shortcuts,
            head: linear(path / "head", input, n_classes),
        }
    }
}

impl Network for InceptionTime {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let (mut xs, masked) = sequences(input);
        let mut residual = xs.shallow_clone();
        for (index, module) in self.modules.iter().enumerate() {
            xs = module.forward(&xs, &masked, train);
            if index % 3 == 2 {
                let (conv, bn) = &self.shortcuts[index / 3];
                let shortcut = bn.forward(&conv.forward(&residual), &masked, train);
                xs = masked.zero_padding(&(xs + shortcut).relu());
                residual = xs.shallow_clone();
            }
        }
        masked.average(&xs).apply(&self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_norm_statistics_are_over_real_steps_and_warm_up() {
        let store = nn::VarStore::new(tch::Device::Cpu);
        let bn = MaskedBatchNorm::new(store.root() / "bn", 2);
        // Two sequences of lengths 3 and 1, padded to 3 steps; the padding holds garbage that the
        // statistics must not see (layers zero it, but the statistics must not depend on that).
        let values = Tensor::from_slice(&[
            1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0, // sequence 0: steps of 2 values
            5.0, 50.0, 99.0, 99.0, 99.0, 99.0, // sequence 1: one real step
        ])
        .view([2, 3, 2]);
        let (xs, masked) = Masked::new(&values, &[3, 1]);
        let ys = bn.forward(&xs, &masked, true);
        // Real steps of channel 0: 1, 2, 3, 5 (mean 2.75); of channel 1: 10, 20, 30, 50 (27.5).
        let mean = Vec::<f32>::try_from(&bn.running_mean).unwrap();
        assert!(
            (mean[0] - 2.75).abs() < 1e-5 && (mean[1] - 27.5).abs() < 1e-4,
            "{mean:?}"
        );
        // The first batch sets the estimates (no pull towards the initial 0 and 1).
        let var = Vec::<f32>::try_from(&bn.running_var).unwrap();
        let unbiased = [1.0f32, 2.0, 3.0, 5.0]
            .iter()
            .map(|x| (x - 2.75).powi(2))
            .sum::<f32>()
            / 3.0;
        assert!((var[0] - unbiased).abs() < 1e-4, "{var:?} vs {unbiased}");
        // Normalized real steps have mean 0 per channel.
        let real = (&ys * &masked.mask).sum_dim_intlist([0, 2].as_slice(), false, Kind::Float);
        assert!(real.abs().max().double_value(&[]) < 1e-4);
        // Inference with the estimates of that one batch gives the training output on real steps,
        // but for the running variance being the unbiased one (4 real steps: 4/3 the biased one).
        let inferred = bn.forward(&xs, &masked, false);
        let difference = ((&inferred - &ys * 0.75f64.sqrt()) * &masked.mask)
            .abs()
            .max();
        assert!(difference.double_value(&[]) < 1e-2, "{difference:?}");
    }
}
