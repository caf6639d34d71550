//! Tabular models over `[B, A]` rows: the two MLP sizes, the linear/logistic model, and the dense
//! auto-encoder that the bit-level auto-encoder uses over the bits of the serialized input.

use tch::{Tensor, nn, nn::Module};

use super::{BatchInput, Linear, ModelConfig, Network, dense, linear};
use crate::candidate::ModelKind;
use crate::native::RunDropout;

/// Builds `mlp_small` (one hidden layer of 64), `mlp_large` (three of 256) or `logistic`/`linear`
/// (no hidden layer) from `features` inputs to `outputs` logits or values.
pub fn build(
    path: &nn::Path<'_>,
    model: ModelKind,
    features: i64,
    outputs: i64,
) -> Box<dyn Network> {
    let hidden: &[i64] = match model {
        ModelKind::MlpSmall => &[64],
        ModelKind::MlpLarge => &[256, 256, 256],
        _ => &[],
    };
    Box::new(Mlp::new(
        &(path / model.id()),
        features,
        hidden,
        outputs,
        false,
    ))
}

/// The bit-level auto-encoder: `input_bits` in, a bottleneck, `output_bits` logits out (one per
/// bit of the output's encoding).
pub fn build_autoencoder(
    path: &nn::Path<'_>,
    input_bits: i64,
    output_bits: i64,
    config: &ModelConfig,
) -> Box<dyn Network> {
    let hidden = config.scale(256);
    let code = config.scale(64);
    Box::new(Mlp::new(
        &(path / "bit_autoencoder"),
        input_bits,
        &[hidden, code, hidden],
        output_bits,
        false,
    ))
}

/// A multi-layer perceptron with ReLU between layers.
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    dropout: bool,
}

impl Mlp {
    /// `input -> hidden... -> output`.
    pub fn new(
        path: &nn::Path<'_>,
        input: i64,
        hidden: &[i64],
        output: i64,
        dropout: bool,
    ) -> Self {
        let mut sizes = vec![input];
        sizes.extend_from_slice(hidden);
        sizes.push(output);
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(index, pair)| linear(path / format!("layer{index}"), pair[0], pair[1]))
            .collect();
        Self { layers, dropout }
    }

    /// Runs the layers on `[B, input]`.
    pub fn run(&self, xs: &Tensor, train: bool) -> Tensor {
        let mut ys = xs.shallow_clone();
        let last = self.layers.len() - 1;
        for (index, layer) in self.layers.iter().enumerate() {
            ys = layer.forward(&ys);
            if index != last {
                ys = ys.relu();
                if self.dropout {
                    ys = ys.run_dropout(0.1, train);
                }
            }
        }
        ys
    }
}

impl Network for Mlp {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let xs = dense(input);
        self.run(&xs.flatten(1, -1), train)
    }
}
