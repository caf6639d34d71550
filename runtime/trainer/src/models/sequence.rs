//! Sequence models over zero-padded `[B, T, A]` batches: the RNN, LSTM, bi-LSTM and GRU classifiers
//! (also the bit-level RNN, a GRU over 8-bit steps), and the seq2seq translator.

use tch::{Kind, Tensor, nn, nn::RNN};

use super::{BatchInput, Linear, ModelConfig, Network, Scripted, add_flops, linear, linear_script};
use crate::candidate::ModelKind;

/// Which recurrent cell.
#[derive(Debug)]
enum Cell {
    /// Elman RNN with tanh: its weights in PyTorch's flat layout.
    Rnn(Vec<Tensor>),
    Lstm(nn::LSTM),
    Gru(nn::GRU),
}

/// A recurrent layer over padded batches, uni- or bidirectional.
#[derive(Debug)]
struct Recurrent {
    cell: Cell,
    /// The cell's weights in libtorch's flat order (per direction: `w_ih, w_hh, b_ih, b_hh`),
    /// shared with the cell: what its TorchScript reads ([`Recurrent::script`]).
    weights: Vec<Tensor>,
    step: i64,
    hidden: i64,
    bidirectional: bool,
}

impl Recurrent {
    fn new(path: &nn::Path<'_>, model: ModelKind, step: i64, hidden: i64) -> Self {
        let bidirectional = model == ModelKind::BiLstm;
        let config = nn::RNNConfig {
            bidirectional,
            batch_first: true,
            ..Default::default()
        };
        let cell = match model {
            ModelKind::Rnn => {
                let bound = 1.0 / (hidden as f64).sqrt();
                let init = nn::Init::Uniform {
                    lo: -bound,
                    up: bound,
                };
                let weights = vec![
                    path.var("weight_ih_l0", &[hidden, step], init),
                    path.var("weight_hh_l0", &[hidden, hidden], init),
                    path.var("bias_ih_l0", &[hidden], nn::Init::Const(0.0)),
                    path.var("bias_hh_l0", &[hidden], nn::Init::Const(0.0)),
                ];
                if path.device().is_cuda() && tch::Cuda::cudnn_is_available() {
                    // cuDNN's one contiguous weight buffer, as `nn::gru` / `nn::lstm` make theirs
                    // (the variables become views into it): without it every call copies the
                    // weights together again, and libtorch warns each time. Only a layout: a
                    // failure leaves the weights as they are.
                    const CUDNN_RNN_TANH: i64 = 1;
                    let _ = Tensor::f_internal_cudnn_rnn_flatten_weight(
                        &weights,
                        4,
                        step,
                        CUDNN_RNN_TANH,
                        hidden,
                        0,
                        1,
                        true,
                        false,
                    );
                }
                Cell::Rnn(weights)
            }
            ModelKind::Gru | ModelKind::BitRnn => Cell::Gru(nn::gru(path, step, hidden, config)),
            _ => Cell::Lstm(nn::lstm(path, step, hidden, config)),
        };
        let weights = match &cell {
            Cell::Rnn(weights) => weights.iter().map(Tensor::shallow_clone).collect(),
            Cell::Lstm(_) | Cell::Gru(_) => flat_weights(path, bidirectional),
        };
        Self {
            cell,
            weights,
            step,
            hidden,
            bidirectional,
        }
    }

    /// Outputs `[B, T, H * directions]`.
    fn run(&self, xs: &Tensor, train: bool) -> Tensor {
        let size = xs.size();
        let gates = match self.cell {
            Cell::Rnn(_) => 1,
            Cell::Gru(_) => 3,
            Cell::Lstm(_) => 4,
        };
        let directions = if self.bidirectional { 2 } else { 1 };
        add_flops(
            (2 * size[0] * size[1] * gates * directions * self.hidden * (self.step + self.hidden))
                as u64,
        );
        match &self.cell {
            Cell::Rnn(weights) => {
                let hx = Tensor::zeros([1, size[0], self.hidden], (xs.kind(), xs.device()));
                xs.rnn_tanh(&hx, weights, true, 1, 0.0, train, false, true)
                    .0
            }
            Cell::Lstm(lstm) => lstm.seq(xs).0,
            Cell::Gru(gru) => gru.seq(xs).0,
        }
    }
}

/// The names of a one-layer recurrent cell's weights in libtorch's flat order (also PyTorch's).
fn flat_names(bidirectional: bool) -> Vec<String> {
    let suffixes: &[&str] = if bidirectional {
        &["", "_reverse"]
    } else {
        &[""]
    };
    suffixes
        .iter()
        .flat_map(|suffix| {
            ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
                .into_iter()
                .map(move |name| format!("{name}_l0{suffix}"))
        })
        .collect()
}

/// The variables `nn::lstm` / `nn::gru` made under `path`, in their flat order.
fn flat_weights(path: &nn::Path<'_>, bidirectional: bool) -> Vec<Tensor> {
    flat_names(bidirectional)
        .iter()
        .filter_map(|name| path.get(name))
        .collect()
}

impl Recurrent {
    /// Adds the TorchScript method `{name}(self, x: Tensor) -> Tensor` (what [`Recurrent::run`]
    /// returns, from zero initial states) and its weights `{name}_weight_ih_l0`, ... (PyTorch's
    /// names).
    fn script(&self, name: &str, scripted: &mut Scripted) {
        let weights = script_weights(name, &self.weights, self.bidirectional, scripted);
        let directions = if self.bidirectional { 2 } else { 1 };
        let bidirectional = if self.bidirectional { "True" } else { "False" };
        let hidden = self.hidden;
        let call = match self.cell {
            Cell::Rnn(_) => {
                format!("torch.rnn_tanh(x, h0, [{weights}], True, 1, 0.0, False, False, True)[0]")
            }
            Cell::Gru(_) => format!(
                "torch.gru(x, h0, [{weights}], True, 1, 0.0, False, {bidirectional}, True)[0]"
            ),
            Cell::Lstm(_) => format!(
                "torch.lstm(x, [h0, h0], [{weights}], True, 1, 0.0, False, {bidirectional}, True)[0]"
            ),
        };
        scripted.source.push_str(&format!(
            "    def {name}(self, x: Tensor) -> Tensor:\n\
             \x20       h0 = torch.zeros([{directions}, x.size(0), {hidden}], dtype=x.dtype, device=x.device)\n\
             \x20       return {call}\n"
        ));
    }
}

/// Adds `weights` (in flat order) to `scripted` as `{name}_weight_ih_l0`, ...; the TorchScript
/// list of them.
fn script_weights(
    name: &str,
    weights: &[Tensor],
    bidirectional: bool,
    scripted: &mut Scripted,
) -> String {
    let names: Vec<String> = flat_names(bidirectional)
        .iter()
        .zip(weights)
        .map(|(weight_name, weight)| {
            let full = format!("{name}_{weight_name}");
            scripted
                .parameters
                .push((full.clone(), weight.shallow_clone()));
            format!("self.{full}")
        })
        .collect();
    names.join(", ")
}

/// TorchScript of [`last_outputs`]: the expression of `outputs` at each sequence's last step.
fn last_outputs_script(outputs: &str, hidden: i64, bidirectional: bool) -> String {
    let at_last = format!(
        "{outputs}.gather(1, (lengths.to({outputs}.device) - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, {outputs}.size(2))).squeeze(1)"
    );
    if bidirectional {
        format!(
            "torch.cat([{at_last}.narrow(1, 0, {hidden}), {outputs}.select(1, 0).narrow(1, {hidden}, {hidden})], 1)"
        )
    } else {
        at_last
    }
}

/// The output at each sequence's last real step (forward direction) and, when bidirectional, the
/// backward direction's output at step 0.
fn last_outputs(outputs: &Tensor, lengths: &[i64], hidden: i64, bidirectional: bool) -> Tensor {
    let device = outputs.device();
    let last: Vec<i64> = lengths.iter().map(|&length| (length - 1).max(0)).collect();
    let index = Tensor::from_slice(&last)
        .to_device(device)
        .view([-1, 1, 1])
        .expand([lengths.len() as i64, 1, outputs.size()[2]], false);
    let at_last = outputs.gather(1, &index, false).squeeze_dim(1);
    if bidirectional {
        let forward = at_last.narrow(1, 0, hidden);
        let backward = outputs.select(1, 0).narrow(1, hidden, hidden);
        Tensor::cat(&[forward, backward], 1)
    } else {
        at_last
    }
}

/// A recurrent classifier: recurrent layer, last output, dense layer to logits.
#[derive(Debug)]
struct RecurrentClassifier {
    recurrent: Recurrent,
    head: Linear,
}

impl Network for RecurrentClassifier {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let BatchInput::Sequences {
            values, lengths, ..
        } = input
        else {
            panic!("a sequence model got a non-sequence batch: {input:?}");
        };
        let outputs = self.recurrent.run(values, train);
        last_outputs(
            &outputs,
            lengths,
            self.recurrent.hidden,
            self.recurrent.bidirectional,
        )
        .apply(&self.head)
    }

    /// `network(self, x: Tensor, lengths: Tensor) -> Tensor`: `x` zero-padded `[B, T, A]`,
    /// `lengths` int64 `[B]`, the logits `[B, D]`.
    fn scripted(&self) -> Option<Scripted> {
        let mut scripted = Scripted::default();
        self.recurrent.script("recurrent", &mut scripted);
        scripted.linear("head", &self.head);
        let last = last_outputs_script(
            "outputs",
            self.recurrent.hidden,
            self.recurrent.bidirectional,
        );
        scripted.source.push_str(&format!(
            "    def network(self, x: Tensor, lengths: Tensor) -> Tensor:\n\
             \x20       outputs = self.recurrent(x)\n\
             \x20       return {}\n",
            linear_script("head", &last)
        ));
        Some(scripted)
    }
}

/// Builds the `rnn`, `lstm`, `bilstm` or `gru` classifier (hidden size 128, width-scaled).
pub fn build_classifier(
    path: &nn::Path<'_>,
    model: ModelKind,
    step: i64,
    n_classes: i64,
    config: &ModelConfig,
) -> Box<dyn Network> {
    let path = path / model.id();
    let hidden = config.scale(128);
    let recurrent = Recurrent::new(&(&path / "recurrent"), model, step, hidden);
    let directions = if recurrent.bidirectional { 2 } else { 1 };
    Box::new(RecurrentClassifier {
        recurrent,
        head: linear(&path / "head", hidden * directions, n_classes),
    })
}

/// seq2seq: a GRU encoder reads the input sequence; a GRU decoder, started from the encoder's last
/// state, produces one output step at a time from its previous output (free running, also in
/// training). Each step is `B` values and one "continue" logit; inference stops at the first step
/// whose continue logit is negative.
#[derive(Debug)]
pub struct Seq2Seq {
    encoder: Recurrent,
    decoder: nn::GRU,
    /// The decoder's weights in libtorch's flat order (for [`Network::scripted`]).
    decoder_weights: Vec<Tensor>,
    head: Linear,
    hidden: i64,
    output_step: i64,
}

impl Seq2Seq {
    /// A translator from `input_step` to `output_step` values per step (hidden 128, width-scaled).
    pub fn new(
        path: &nn::Path<'_>,
        input_step: i64,
        output_step: i64,
        config: &ModelConfig,
    ) -> Self {
        let path = path / "seq2seq";
        let hidden = config.scale(128);
        let decoder_path = &path / "decoder";
        let decoder = nn::gru(&decoder_path, output_step + 1, hidden, Default::default());
        Self {
            encoder: Recurrent::new(&(&path / "encoder"), ModelKind::Gru, input_step, hidden),
            decoder,
            decoder_weights: flat_weights(&decoder_path, false),
            head: linear(&path / "head", hidden, output_step + 1),
            hidden,
            output_step,
        }
    }
}

impl Network for Seq2Seq {
    fn forward(&self, input: &BatchInput, train: bool) -> Tensor {
        let BatchInput::Sequences {
            values,
            lengths,
            output_steps,
        } = input
        else {
            panic!("seq2seq got a non-sequence batch: {input:?}");
        };
        let encoded = self.encoder.run(values, train);
        let mut state =
            nn::GRUState(last_outputs(&encoded, lengths, self.hidden, false).unsqueeze(0));
        let batch = lengths.len() as i64;
        let mut previous = Tensor::zeros(
            [batch, self.output_step + 1],
            (Kind::Float, values.device()),
        );
        let mut outputs = Vec::new();
        for _ in 0..(*output_steps).max(1) {
            state = self.decoder.step(&previous, &state);
            add_flops((2 * batch * 3 * self.hidden * (self.output_step + 1 + self.hidden)) as u64);
            let output = state.value().squeeze_dim(0).apply(&self.head);
            previous = output.shallow_clone();
            outputs.push(output);
        }
        Tensor::stack(&outputs, 1)
    }

    /// `network(self, x: Tensor, lengths: Tensor, steps: int) -> Tensor`: `x` zero-padded
    /// `[B, T, A]`, `lengths` int64 `[B]`, `steps` output steps to produce (at least 1); the raw
    /// outputs `[B, steps, B'+1]` (each step's values and its continue logit).
    fn scripted(&self) -> Option<Scripted> {
        let mut scripted = Scripted::default();
        self.encoder.script("encoder", &mut scripted);
        let decoder = script_weights("decoder", &self.decoder_weights, false, &mut scripted);
        scripted.linear("head", &self.head);
        let last = last_outputs_script("encoded", self.hidden, false);
        scripted.source.push_str(&format!(
            "    def network(self, x: Tensor, lengths: Tensor, steps: int) -> Tensor:\n\
             \x20       encoded = self.encoder(x)\n\
             \x20       state = {last}.unsqueeze(0)\n\
             \x20       previous = torch.zeros([x.size(0), {width}], dtype=x.dtype, device=x.device)\n\
             \x20       outputs: List[Tensor] = []\n\
             \x20       for _ in range(max(steps, 1)):\n\
             \x20           state = torch.gru(previous.unsqueeze(1), state, [{decoder}], True, 1, 0.0, False, False, True)[1]\n\
             \x20           previous = {head}\n\
             \x20           outputs.append(previous)\n\
             \x20       return torch.stack(outputs, 1)\n",
            width = self.output_step + 1,
            decoder = decoder,
            head = linear_script("head", "state.squeeze(0)"),
        ));
        Some(scripted)
    }
}
