//! Image recovery (`[A,B,C]` to `[D,E,F]`): the convolutional auto-encoder, the GAN generator and the
//! pix2pix U-Net generator, plus the discriminators the training loop pits against the last two (a
//! global image discriminator for the GAN, a conditional patch discriminator for pix2pix). Outputs are
//! `[B,D,E,F]`, resized to the declared output shape with bilinear interpolation.

use tch::{Tensor, nn, nn::Module};

use super::{BatchInput, Conv, ModelConfig, Network, conv, dense, to_nchw};
use crate::candidate::ModelKind;

/// Builds the recovery generator for `model`.
pub fn build(
    path: &nn::Path<'_>,
    model: ModelKind,
    input: &[i64],
    output: &[i64],
    config: &ModelConfig,
) -> Box<dyn Network> {
    let path = path / model.id();
    let unet = model == ModelKind::Pix2Pix;
    Box::new(EncoderDecoder::new(&path, input[2], output, config, unet))
}

/// `[B,C,H,W]` to `[B,H',W',C]` at the given spatial size.
fn resize_nhwc(xs: &Tensor, height: i64, width: i64) -> Tensor {
    let size = xs.size();
    let resized = if size[2] == height && size[3] == width {
        xs.shallow_clone()
    } else {
        xs.upsample_bilinear2d([height, width], false, None, None)
    };
    resized.permute([0, 2, 3, 1])
}

/// Two stride-2 encoder stages and two decoder stages (bilinear upsampling + convolution); with
/// `unet`, each decoder stage also sees the encoder map of the same resolution (skip connections).
#[derive(Debug)]
struct EncoderDecoder {
    encoder: [Conv; 3],
    decoder: [Conv; 3],
    output: Vec<i64>,
    unet: bool,
}

impl EncoderDecoder {
    fn new(
        path: &nn::Path<'_>,
        channels: i64,
        output: &[i64],
        config: &ModelConfig,
        unet: bool,
    ) -> Self {
        let (c1, c2, c3) = (config.scale(32), config.scale(64), config.scale(128));
        let skip = |width: i64| if unet { width } else { 0 };
        Self {
            encoder: [
                conv(path / "enc1", channels, c1, 3, 1),
                conv(path / "enc2", c1, c2, 3, 2),
                conv(path / "enc3", c2, c3, 3, 2),
            ],
            decoder: [
                conv(path / "dec3", c3, c2, 3, 1),
                conv(path / "dec2", c2 + skip(c2), c1, 3, 1),
                conv(path / "dec1", c1 + skip(c1), output[2], 3, 1),
            ],
            output: output.to_vec(),
            unet,
        }
    }
}

impl Network for EncoderDecoder {
    fn forward(&self, input: &BatchInput, _train: bool) -> Tensor {
        let xs = to_nchw(dense(input));
        let e1 = self.encoder[0].forward(&xs).leaky_relu();
        let e2 = self.encoder[1].forward(&e1).leaky_relu();
        let e3 = self.encoder[2].forward(&e2).leaky_relu();
        let up = |ys: &Tensor, like: &Tensor| {
            let size = like.size();
            ys.upsample_bilinear2d([size[2], size[3]], false, None, None)
        };
        let d3 = up(&self.decoder[0].forward(&e3).relu(), &e2);
        let d3 = if self.unet {
            Tensor::cat(&[d3, e2], 1)
        } else {
            d3
        };
        let d2 = up(&self.decoder[1].forward(&d3).relu(), &e1);
        let d2 = if self.unet {
            Tensor::cat(&[d2, e1], 1)
        } else {
            d2
        };
        let d1 = self.decoder[2].forward(&d2);
        resize_nhwc(&d1, self.output[0], self.output[1])
    }
}

/// The adversary of the GAN and pix2pix generators.
#[derive(Debug)]
pub struct Discriminator {
    convs: [Conv; 3],
    batch_norm: nn::BatchNorm,
    conditional: bool,
}

impl Discriminator {
    /// For `gan`: a discriminator over the output image, pooled to one logit. For `pix2pix`: a patch
    /// discriminator over the (resized) input and the output, one logit per patch.
    pub fn new(
        path: &nn::Path<'_>,
        model: ModelKind,
        input: &[i64],
        output: &[i64],
        config: &ModelConfig,
    ) -> Self {
        let conditional = model == ModelKind::Pix2Pix;
        let channels = output[2] + if conditional { input[2] } else { 0 };
        let (c1, c2) = (config.scale(32), config.scale(64));
        Self {
            convs: [
                conv(path / "d1", channels, c1, 3, 2),
                conv(path / "d2", c1, c2, 3, 2),
                conv(path / "d3", c2, 1, 3, 1),
            ],
            batch_norm: nn::batch_norm2d(path / "bn", c2, Default::default()),
            conditional,
        }
    }

    /// Logits for `images` (`[B,D,E,F]`) given the inputs (`[B,A,B,C]`).
    pub fn forward(&self, inputs: &Tensor, images: &Tensor, train: bool) -> Tensor {
        let images = to_nchw(images);
        let xs = if self.conditional {
            let size = images.size();
            let inputs = to_nchw(inputs).upsample_bilinear2d([size[2], size[3]], false, None, None);
            Tensor::cat(&[inputs, images], 1)
        } else {
            images
        };
        let ys = self.convs[0].forward(&xs).leaky_relu();
        let ys = self.convs[1]
            .forward(&ys)
            .apply_t(&self.batch_norm, train)
            .leaky_relu();
        let logits = self.convs[2].forward(&ys);
        if self.conditional {
            logits.flatten(1, -1)
        } else {
            logits.mean_dim(&[2i64, 3][..], false, tch::Kind::Float)
        }
    }
}
