//! Image classifiers: AlexNet, BN-AlexNet, ResNet-18, ResNet-50, GoogLeNet, SqueezeNet 1.1, VGG-16 and
//! NIN, after the torchvision definitions, and a small batch-normalized CNN (ours: cheap, first to
//! try), channel-scaled by [`ModelConfig::width`], taking `[B,H,W,C]` of any size and returning
//! logits `[B,D]`.
//!
//! Differences from torchvision, all for small inputs and CPU budgets: convolutions are padded by
//! `k/2`, pooling falls back to adaptive pooling on maps smaller than the kernel, and GoogLeNet has no
//! auxiliary classifiers.

use tch::{Tensor, nn, nn::Module};

use super::{
    BatchInput, Conv, Linear, ModelConfig, Network, WarmBatchNorm2d, avg_pool, conv, conv_with,
    dense, linear, max_pool, to_nchw,
};
use crate::candidate::ModelKind;
use crate::native::RunDropout;

/// Builds the image classifier `model` for `channels` input channels and `n_classes` outputs.
pub fn build(
    path: &nn::Path<'_>,
    model: ModelKind,
    channels: i64,
    n_classes: i64,
    config: &ModelConfig,
) -> Box<dyn Network> {
    let path = path / model.id();
    match model {
        ModelKind::AlexNet => Box::new(AlexNet::new(&path, channels, n_classes, config, false)),
        ModelKind::BnAlexNet => Box::new(AlexNet::new(&path, channels, n_classes, config, true)),
        ModelKind::ResNet18 => Box::new(ResNet::new(&path, channels, n_classes, config, false)),
        ModelKind::ResNet50 => Box::new(ResNet::new(&path, channels, n_classes, config, true)),
        ModelKind::GoogLeNet => Box::new(GoogLeNet::new(&path, channels, n_classes, config)),
        ModelKind::SqueezeNet => Box::new(SqueezeNet::new(&path, channels, n_classes, config)),
        ModelKind::Vgg16 => Box::new(Vgg16::new(&path, channels, n_classes, config)),
        ModelKind::SmallCnn => Box::new(SmallCnn::new(&path, channels, n_classes, config)),
        _ => Box::new(Nin::new(&path, channels, n_classes, config)),
    }
}

/// A convolution, optional batch norm, ReLU.
#[derive(Debug)]
struct ConvBnRelu {
    conv: Conv,
    batch_norm: Option<nn::BatchNorm>,
}

impl ConvBnRelu {
    fn new(
        path: nn::Path<'_>,
        input: i64,
        output: i64,
        kernel: i64,
        stride: i64,
        bn: bool,
    ) -> Self {
        Self {
            conv: conv_with(
                &path / "conv",
                input,
                output,
                kernel,
                stride,
                kernel / 2,
                !bn,
            ),
            batch_norm: bn.then(|| nn::batch_norm2d(&path / "bn", output, Default::default())),
        }
    }

    fn forward(&self, xs: &Tensor, train: bool) -> Tensor {
        let ys = self.conv.forward(xs);
        match &self.batch_norm {
            Some(batch_norm) => ys.apply_t(batch_norm, train).relu(),
            None => ys.relu(),
        }
    }
}

/// AlexNet (and BN-AlexNet: batch norm after every convolution).
#[derive(Debug)]
struct AlexNet {
    convs: Vec<ConvBnRelu>,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl AlexNet {
    fn new(
        path: &nn::Path<'_>,
        channels: i64,
        n_classes: i64,
        config: &ModelConfig,
        bn: bool,
    ) -> Self {
        let widths = [64, 192, 384, 256, 256].map(|c| config.scale(c));
        let kernels = [11, 5, 3, 3, 3];
        let strides = [4, 1, 1, 1, 1];
        let mut input = channels;
        let mut convs = Vec::new();
        for index in 0..5 {
            convs.push(ConvBnRelu::new(
                path / format!("features{index}"),
                input,
                widths[index],
                kernels[index],
                strides[index],
                bn,
            ));
            input = widths[index];
        }
        let hidden = config.scale(4096);
        Self {
            convs,
            fc1: linear(path / "fc1", widths[4] * 36, hidden),
            fc2: linear(path / "fc2", hidden, hidden),
            fc3: linear(path / "fc3", hidden, n_classes),
        }
    }
}

impl Network for AlexNet {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = to_nchw(dense(input));
        for (index, layer) in self.convs.iter().enumerate() {
            xs = layer.forward(&xs, train);
            if matches!(index, 0 | 1 | 4) {
                xs = max_pool(&xs, 3, 2);
            }
        }
        xs.adaptive_avg_pool2d([6, 6])
            .flatten(1, -1)
            .run_dropout(0.5, train)
            .apply(&self.fc1)
            .relu()
            .run_dropout(0.5, train)
            .apply(&self.fc2)
            .relu()
            .apply(&self.fc3)
    }
}

/// A ResNet block: basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 with 4x expansion).
#[derive(Debug)]
struct ResBlock {
    convs: Vec<(Conv, nn::BatchNorm)>,
    downsample: Option<(Conv, nn::BatchNorm)>,
}

impl ResBlock {
    fn new(
        path: nn::Path<'_>,
        input: i64,
        planes: i64,
        stride: i64,
        bottleneck: bool,
    ) -> (Self, i64) {
        let bn = |name: &str, channels: i64| {
            nn::batch_norm2d(&path / name, channels, Default::default())
        };
        let (specs, output): (Vec<(i64, i64, i64, i64)>, i64) = if bottleneck {
            (
                vec![
                    (input, planes, 1, 1),
                    (planes, planes, 3, stride),
                    (planes, planes * 4, 1, 1),
                ],
                planes * 4,
            )
        } else {
            (
                vec![(input, planes, 3, stride), (planes, planes, 3, 1)],
                planes,
            )
        };
        let convs = specs
            .into_iter()
            .enumerate()
            .map(|(index, (cin, cout, kernel, stride))| {
                (
                    conv_with(
                        &path / format!("conv{index}"),
                        cin,
                        cout,
                        kernel,
                        stride,
                        kernel / 2,
                        false,
                    ),
                    bn(&format!("bn{index}"), cout),
                )
            })
            .collect();
        let downsample = (stride != 1 || input != output).then(|| {
            (
                conv_with(&path / "downsample", input, output, 1, stride, 0, false),
                bn("downsample_bn", output),
            )
        });
        (Self { convs, downsample }, output)
    }

    fn forward(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut ys = xs.shallow_clone();
        let last = self.convs.len() - 1;
        for (index, (conv, batch_norm)) in self.convs.iter().enumerate() {
            ys = conv.forward(&ys).apply_t(batch_norm, train);
            if index != last {
                ys = ys.relu();
            }
        }
        let shortcut = match &self.downsample {
            Some((conv, batch_norm)) => conv.forward(xs).apply_t(batch_norm, train),
            None => xs.shallow_clone(),
        };
        (ys + shortcut).relu()
    }
}

/// ResNet-18 (basic blocks `[2,2,2,2]`) and ResNet-50 (bottlenecks [3,4,6,3]).
#[derive(Debug)]
struct ResNet {
    stem: ConvBnRelu,
    blocks: Vec<ResBlock>,
    fc: Linear,
}

impl ResNet {
    fn new(
        path: &nn::Path<'_>,
        channels: i64,
        n_classes: i64,
        config: &ModelConfig,
        bottleneck: bool,
    ) -> Self {
        let stem_width = config.scale(64);
        let stem = ConvBnRelu::new(path / "stem", channels, stem_width, 7, 2, true);
        let depths = if bottleneck {
            [3, 4, 6, 3]
        } else {
            [2, 2, 2, 2]
        };
        let mut blocks = Vec::new();
        let mut input = stem_width;
        for (stage, (&depth, planes)) in depths.iter().zip([64, 128, 256, 512]).enumerate() {
            for index in 0..depth {
                let stride = if stage > 0 && index == 0 { 2 } else { 1 };
                let (block, output) = ResBlock::new(
                    path / format!("layer{}_{index}", stage + 1),
                    input,
                    config.scale(planes),
                    stride,
                    bottleneck,
                );
                blocks.push(block);
                input = output;
            }
        }
        Self {
            stem,
            blocks,
            fc: linear(path / "fc", input, n_classes),
        }
    }
}

impl Network for ResNet {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = max_pool(&self.stem.forward(&to_nchw(dense(input)), train), 3, 2);
        for block in &self.blocks {
            xs = block.forward(&xs, train);
        }
        xs.adaptive_avg_pool2d([1, 1])
            .flatten(1, -1)
            .apply(&self.fc)
    }
}

/// An inception module: 1x1, 1x1->3x3, 1x1->3x3 (torchvision's "5x5" branch), pool->1x1.
#[derive(Debug)]
struct Inception {
    branch1: ConvBnRelu,
    branch2: [ConvBnRelu; 2],
    branch3: [ConvBnRelu; 2],
    branch4: ConvBnRelu,
    output: i64,
}

impl Inception {
    fn new(path: nn::Path<'_>, input: i64, widths: [i64; 6]) -> Self {
        let [c1, c3r, c3, c5r, c5, pool] = widths;
        Self {
            branch1: ConvBnRelu::new(&path / "b1", input, c1, 1, 1, true),
            branch2: [
                ConvBnRelu::new(&path / "b2a", input, c3r, 1, 1, true),
                ConvBnRelu::new(&path / "b2b", c3r, c3, 3, 1, true),
            ],
            branch3: [
                ConvBnRelu::new(&path / "b3a", input, c5r, 1, 1, true),
                ConvBnRelu::new(&path / "b3b", c5r, c5, 3, 1, true),
            ],
            branch4: ConvBnRelu::new(&path / "b4", input, pool, 1, 1, true),
            output: c1 + c3 + c5 + pool,
        }
    }

    fn forward(&self, xs: &Tensor, train: bool) -> Tensor {
        let b1 = self.branch1.forward(xs, train);
        let b2 = self.branch2[1].forward(&self.branch2[0].forward(xs, train), train);
        let b3 = self.branch3[1].forward(&self.branch3[0].forward(xs, train), train);
        let pooled = xs.max_pool2d([3, 3], [1, 1], [1, 1], [1, 1], true);
        let b4 = self.branch4.forward(&pooled, train);
        Tensor::cat(&[b1, b2, b3, b4], 1)
    }
}

/// GoogLeNet (Inception v1 with batch norm, no auxiliary classifiers).
#[derive(Debug)]
struct GoogLeNet {
    stem: [ConvBnRelu; 3],
    inceptions: Vec<Inception>,
    fc: Linear,
}

impl GoogLeNet {
    fn new(path: &nn::Path<'_>, channels: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let s = |c: i64| config.scale(c);
        let stem = [
            ConvBnRelu::new(path / "conv1", channels, s(64), 7, 2, true),
            ConvBnRelu::new(path / "conv2", s(64), s(64), 1, 1, true),
            ConvBnRelu::new(path / "conv3", s(64), s(192), 3, 1, true),
        ];
        let specs: [[i64; 6]; 9] = [
            [64, 96, 128, 16, 32, 32],
            [128, 128, 192, 32, 96, 64],
            [192, 96, 208, 16, 48, 64],
            [160, 112, 224, 24, 64, 64],
            [128, 128, 256, 24, 64, 64],
            [112, 144, 288, 32, 64, 64],
            [256, 160, 320, 32, 128, 128],
            [256, 160, 320, 32, 128, 128],
            [384, 192, 384, 48, 128, 128],
        ];
        let mut input = s(192);
        let mut inceptions = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            let module = Inception::new(path / format!("inception{index}"), input, spec.map(s));
            input = module.output;
            inceptions.push(module);
        }
        Self {
            stem,
            inceptions,
            fc: linear(path / "fc", input, n_classes),
        }
    }
}

impl Network for GoogLeNet {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = max_pool(&self.stem[0].forward(&to_nchw(dense(input)), train), 3, 2);
        xs = self.stem[1].forward(&xs, train);
        xs = max_pool(&self.stem[2].forward(&xs, train), 3, 2);
        for (index, module) in self.inceptions.iter().enumerate() {
            xs = module.forward(&xs, train);
            // Pools after 3b and 4e, as in the paper.
            if index == 1 || index == 6 {
                xs = max_pool(&xs, 3, 2);
            }
        }
        xs.adaptive_avg_pool2d([1, 1])
            .flatten(1, -1)
            .run_dropout(0.2, train)
            .apply(&self.fc)
    }
}

/// A SqueezeNet fire module: squeeze 1x1, expand 1x1 and 3x3, concatenated.
#[derive(Debug)]
struct Fire {
    squeeze: Conv,
    expand1: Conv,
    expand3: Conv,
}

impl Fire {
    fn new(path: nn::Path<'_>, input: i64, squeeze: i64, expand: i64) -> (Self, i64) {
        (
            Self {
                squeeze: conv(&path / "squeeze", input, squeeze, 1, 1),
                expand1: conv(&path / "expand1", squeeze, expand, 1, 1),
                expand3: conv(&path / "expand3", squeeze, expand, 3, 1),
            },
            2 * expand,
        )
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        let squeezed = self.squeeze.forward(xs).relu();
        Tensor::cat(
            &[
                self.expand1.forward(&squeezed).relu(),
                self.expand3.forward(&squeezed).relu(),
            ],
            1,
        )
    }
}

/// SqueezeNet 1.1.
#[derive(Debug)]
struct SqueezeNet {
    stem: Conv,
    fires: Vec<Fire>,
    classifier: Conv,
}

impl SqueezeNet {
    fn new(path: &nn::Path<'_>, channels: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let s = |c: i64| config.scale(c);
        let stem = conv(path / "stem", channels, s(64), 3, 2);
        let specs = [
            (16, 64),
            (16, 64),
            (32, 128),
            (32, 128),
            (48, 192),
            (48, 192),
            (64, 256),
            (64, 256),
        ];
        let mut input = s(64);
        let mut fires = Vec::new();
        for (index, (squeeze, expand)) in specs.into_iter().enumerate() {
            let (fire, output) =
                Fire::new(path / format!("fire{index}"), input, s(squeeze), s(expand));
            fires.push(fire);
            input = output;
        }
        Self {
            stem,
            fires,
            classifier: conv(path / "classifier", input, n_classes, 1, 1),
        }
    }
}

impl Network for SqueezeNet {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = max_pool(&self.stem.forward(&to_nchw(dense(input))).relu(), 3, 2);
        for (index, fire) in self.fires.iter().enumerate() {
            xs = fire.forward(&xs);
            if index == 1 || index == 3 {
                xs = max_pool(&xs, 3, 2);
            }
        }
        // torchvision ends in ReLU before pooling; logits must be able to go negative, so the
        // classifier convolution's output is used directly.
        self.classifier
            .forward(&xs.run_dropout(0.5, train))
            .adaptive_avg_pool2d([1, 1])
            .flatten(1, -1)
    }
}

/// VGG-16 (configuration D).
#[derive(Debug)]
struct Vgg16 {
    convs: Vec<Option<Conv>>,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl Vgg16 {
    fn new(path: &nn::Path<'_>, channels: i64, n_classes: i64, config: &ModelConfig) -> Self {
        const POOL: i64 = 0;
        let plan = [
            64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512,
            POOL,
        ];
        let mut input = channels;
        let mut convs = Vec::new();
        for (index, width) in plan.into_iter().enumerate() {
            if width == POOL {
                convs.push(None);
            } else {
                let output = config.scale(width);
                convs.push(Some(conv(
                    path / format!("features{index}"),
                    input,
                    output,
                    3,
                    1,
                )));
                input = output;
            }
        }
        let hidden = config.scale(4096);
        Self {
            convs,
            fc1: linear(path / "fc1", input * 49, hidden),
            fc2: linear(path / "fc2", hidden, hidden),
            fc3: linear(path / "fc3", hidden, n_classes),
        }
    }
}

impl Network for Vgg16 {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = to_nchw(dense(input));
        for layer in &self.convs {
            xs = match layer {
                Some(conv) => conv.forward(&xs).relu(),
                None => max_pool(&xs, 2, 2),
            };
        }
        xs.adaptive_avg_pool2d([7, 7])
            .flatten(1, -1)
            .apply(&self.fc1)
            .relu()
            .run_dropout(0.5, train)
            .apply(&self.fc2)
            .relu()
            .run_dropout(0.5, train)
            .apply(&self.fc3)
    }
}

/// Network in Network: three mlpconv blocks (a convolution and two 1x1 convolutions), the last one
/// producing one map per class, then global average pooling.
#[derive(Debug)]
struct Nin {
    blocks: Vec<[Conv; 3]>,
}

impl Nin {
    fn new(path: &nn::Path<'_>, channels: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let s = |c: i64| config.scale(c);
        let block = |name: &str, input: i64, widths: [i64; 3], kernel: i64| {
            [
                conv(path / format!("{name}a"), input, widths[0], kernel, 1),
                conv(path / format!("{name}b"), widths[0], widths[1], 1, 1),
                conv(path / format!("{name}c"), widths[1], widths[2], 1, 1),
            ]
        };
        Self {
            blocks: vec![
                block("block1", channels, [s(192), s(160), s(96)], 5),
                block("block2", s(96), [s(192), s(192), s(192)], 5),
                block("block3", s(192), [s(192), s(192), n_classes], 3),
            ],
        }
    }
}

impl Network for Nin {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = to_nchw(dense(input));
        let last = self.blocks.len() - 1;
        for (index, block) in self.blocks.iter().enumerate() {
            xs = block[0].forward(&xs).relu();
            xs = block[1].forward(&xs).relu();
            xs = block[2].forward(&xs);
            if index != last {
                xs = xs.relu();
                xs = if index == 0 {
                    max_pool(&xs, 3, 2)
                } else {
                    avg_pool(&xs, 3, 2)
                };
                xs = xs.run_dropout(0.5, train);
            }
        }
        xs.adaptive_avg_pool2d([1, 1]).flatten(1, -1)
    }
}

/// A small CNN (not from the paper; a cheap, strong first candidate for small images such as
/// digits): three blocks of a 3x3 convolution, batch norm and ReLU (128, 256, 512 filters before
/// the width multiplier, so 32, 64, 128 on the CPU), 2x2 max pooling after the first two, average
/// pooling to a 2x2 map (global pooling would lose where strokes are: on 8x8 digits it cost about a
/// point of accuracy), a dense layer to the logits. Its batch norms use the warm-up momentum of
/// [`WarmBatchNorm2d`], so that runs of a few dozen steps (small data) infer with the statistics
/// they trained with.
#[derive(Debug)]
struct SmallCnn {
    blocks: Vec<(Conv, WarmBatchNorm2d)>,
    fc: Linear,
}

impl SmallCnn {
    fn new(path: &nn::Path<'_>, channels: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let mut input = channels;
        let mut blocks = Vec::new();
        for (index, width) in [128, 256, 512].into_iter().enumerate() {
            let output = config.scale(width);
            let block = path / format!("block{index}");
            blocks.push((
                conv_with(&block / "conv", input, output, 3, 1, 1, false),
                WarmBatchNorm2d::new(&block / "bn", output),
            ));
            input = output;
        }
        Self {
            blocks,
            fc: linear(path / "fc", input * 4, n_classes),
        }
    }
}

impl Network for SmallCnn {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let mut xs = to_nchw(dense(input));
        for (index, (conv, batch_norm)) in self.blocks.iter().enumerate() {
            xs = batch_norm.forward_t(&conv.forward(&xs), train).relu();
            if index < 2 {
                xs = max_pool(&xs, 2, 2);
            }
        }
        xs.adaptive_avg_pool2d([2, 2])
            .flatten(1, -1)
            .apply(&self.fc)
    }
}
