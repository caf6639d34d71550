//! Taking a trained model out of easeml, in a form that runs without it ([`Predictor::export`]):
//!
//! - **networks of dense inputs** (image and tabular apps: classification, regression, recovery)
//!   as TorchScript, `model.pt`, traced from the loaded model in evaluation mode with its fitted
//!   input transform inside (standardization or f_k), and for classification the softmax too:
//!   `torch.jit.load("model.pt")(x)` with `x` a float32 `[B, ...input_shape]` batch (images
//!   channel-last, `[B,H,W,C]`, as declared) answers what `infer` answers: class probabilities, or
//!   the output values. The 1-D convolutional series classifiers (`fcn`, `resnet1d`,
//!   `inception_time`) are traced with two inputs, a zero-padded float32 batch `[B, T, channels]`
//!   and the series' lengths, int64 `[B]` (their masks are tensor operations, so the trace follows
//!   any batch size and length); the bit-level auto-encoder with bytes in and bytes out.
//! - **networks whose path depends on the data** (the recurrent series classifiers `rnn`, `lstm`,
//!   `bilstm`, `gru`; the translator `seq2seq`, whose number of output steps depends on the
//!   input; the bit-level RNN of general apps; the Tree-RNN, one step per node) as TorchScript
//!   compiled from source ([`Network::scripted`](crate::models::Network::scripted), each
//!   network's source beside its Rust forward pass; [`crate::native::save_script_module`]),
//!   with a `forward` per task that takes the task's inputs as tensors ([`Call`]).
//! - **classic models** whose prediction is a few lines of arithmetic (`kernel_ridge`, `knn`,
//!   `gbdt`, `random_forest`), or an algorithm stated in a paragraph (the series models, the
//!   tree-kernel SVM over trees, `input_shape` `[ANY_TREE, node values]`) as JSON, `model.json`:
//!   `{"format", "format_version", "family", "parameters"}`, the parameters being the model's own
//!   state (the fields of [`crate::classic::kernel_ridge::KernelRidge`],
//!   [`crate::classic::knn::Knn`], [`crate::classic::gbdt::Gbdt`],
//!   [`crate::classic::forest::RandomForest`] over [`crate::classic::trees::Tree`],
//!   [`crate::classic::tree_kernel::TreeKernelSvm`], ...); how to predict with them is
//!   [`CLASSIC_README`].
//!
//! Every network and classic model of the catalogue exports; [`Error::ExportUnsupported`] (naming
//! what is supported) stays for a model a future catalogue adds without an export. The metadata beside
//! the model (app, labels, run) is the engine's (`easeml_engine::export`).

use std::path::Path;

use serde::Serialize;
use tch::{CModule, Device, Kind, Tensor};

use crate::candidate::ModelKind;
use crate::classic::ClassicModel;
use crate::error::{Error, Result};
use crate::infer::{Loaded, Predictor};
use crate::models::{BatchInput, Model, ModelConfig, Scripted};
use crate::task::Task;

/// The version of the exported form (files, their layout and the metadata); raised on any change
/// that a reader of an older export would misread.
pub const FORMAT_VERSION: u32 = 1;

/// The file of an exported network.
pub const TORCHSCRIPT_FILE: &str = "model.pt";

/// The file of an exported classic model.
pub const CLASSIC_FILE: &str = "model.json";

/// The `format` of an exported classic model's JSON.
pub const CLASSIC_FORMAT: &str = "easeml-classic-json";

/// What is exported, in words (the error for anything else names it).
pub const SUPPORTED: &str = "the networks of every workload (TorchScript), kernel_ridge, knn, gbdt, random_forest, minirocket, multirocket, dtw_knn and tree_kernel_svm (JSON)";

/// The first dimension of a series model's `input_shape`: any number of steps.
pub const ANY_LENGTH: i64 = -1;

/// The first dimension of a tree model's `input_shape` (`[ANY_TREE, node values]`): a tree of any
/// shape, each node the same number of values.
pub const ANY_TREE: i64 = -2;

/// Examples in the batch a network is traced with (any batch size runs the traced module: the
/// networks' shapes depend on the batch only through its first dimension).
const TRACE_BATCH: i64 = 2;

/// How to predict with an exported classic model (the README of an export of one).
pub const CLASSIC_README: &str = "\
An input row x is the input's values in the app's declared order (a tensor flattened row-major).

kernel_ridge and knn first standardize it: z[i] = (x[i] - mean[i]) / scale[i], and 0 where that
is not finite. `points` holds the kept training rows, already standardized, `features` values each.

kernel_ridge: k[j] = exp(-gamma * |z - points[j]|^2) for each kept row j;
decision[o] = sum_j k[j] * coefficients[j * outputs + o] + intercepts[o].
If classes > 0 the answer is the class argmax(decision) with probabilities softmax(decision),
else the `outputs` values decision.

knn: the k kept rows nearest to z (squared distance, ties by row), each weighted 1 / (distance + 1e-6).
If classes > 0, targets[j] is row j's class: a class's probability is its rows' weight over the
total, the answer the most probable class; else targets holds `outputs` values per row and the
answer is the unweighted mean of the k rows' values.

gbdt and random_forest read x as it is. A tree (`feature`, `threshold`, `next`: one entry per
node; `leaves`, `width` values per leaf) is walked from node 0: at a node whose feature is
4294967295 (a leaf) the values are leaves[next * width .. (next + 1) * width]; else the walk goes
to node next[node] if x[feature] > threshold, else (also for a value that is not a number) to the
node after it.
gbdt: score[o] = base[o] + the sum of the leaf value (width 1) of trees[r * outputs + o] over the
rounds r. If classification, the probabilities are softmax(score), else the values are score.
random_forest: the mean over the trees of their leaf values (width = outputs). If classification,
those are the class probabilities (the answer the first most probable), else the values.

minirocket, multirocket and dtw_knn read a series: its steps in order (any number), each step `channels`
values (one element of the input sequence, its values in the declared order); x[c][t] is
channel c at step t, a value that is not a number reads as 0.

minirocket (classes only): the k-th kernel (k = 0..83) is the k-th triple a < b < c of 0..8 in
lexicographic order, its weights w[j] = 2 for j in {a, b, c}, else -1. For each dilation index i
(d = dilations[i]) and each kernel k in order: out[t] = the sum over the channels c listed in
combination_channels[i * 84 + k] of the sum over j = 0..8 of w[j] * x[c][t + (j - 4) * d] (x is 0
outside the series), for t = 0..length-1. The pooled values are out[4d .. length - 4d] when i + k
is odd and length > 8d, else all of out. The next features_per_dilation[i] entries b of `biases`
(in order) each give one feature: the fraction of the pooled values > b (0 when none are pooled).
The features, in that order (dilation, kernel, bias), are standardized: z = (f - mean) / scale;
decision[class] = intercepts[class] + sum_i weights[class][i] * z[i]; the answer is
argmax(decision) (the first on ties) with probabilities softmax(decision).

multirocket (classes only): `transform` is a minirocket transform of x and `difference` one of the
first differences dx[c][t] = x[c][t + 1] - x[c][t], t = 0..length-2 (length - 1 steps; none for a
series of fewer than 2 steps), each read as above (its own dilations, channels and biases; `length`
its own). For each of the two in that order, each dilation index i, kernel k and bias b, with y the
pooled values (n of them) and P the positions t of y with y[t] > b, four features in order: |P| / n;
the mean of y[t] - b over P; the mean of t over P, divided by n; the longest run of consecutive
positions in P, divided by n (0, 0, -1, 0 when P is empty, and when nothing is pooled). The
features are standardized and weighed as minirocket's (mean, scale, weights, intercepts).

tree_kernel_svm (classes only) reads a tree: each node's `value` is its record's values (its
tensor fields in the declared order), its children the node's recursive fields that are present,
in field order; the support trees are `support`, each node an object of `value` and `children`.
For nodes a and b: s(a, b) = exp(-gamma * sum_i (a.value[i] - b.value[i])^2) (gamma and lambda
are `kernel`'s); C(a, b) = lambda * s(a, b), multiplied, when a and b have the same number of
children, by the product over i of (1 + C(a's i-th child, b's i-th child)). K(T, U) is the sum
of C(a, b) over every node a of T and b of U, and k(T, U) = K(T, U) / max(sqrt(K(T, T) *
K(U, U)), 1e-12) + 1, with K(support[j], support[j]) = self_kernels[j]. decision[class] = the
sum over j of coefficients[class][j] * k(x, support[j]); the answer is argmax(decision) (the
last on ties) with probabilities softmax(decision).

dtw_knn (classes only): a series of no steps reads as one step of zeros. Training series j is
values[offsets[j] * channels .. offsets[j + 1] * channels] (step-major), of class labels[j]. The
distance between series a (n steps) and b (m steps): with w = max(round(window * max(n, m)),
|n - m|) (round: halves away from zero), D[0][0] = cost(0, 0) and D[i][j] = cost(i, j) +
min(D[i-1][j], D[i][j-1], D[i-1][j-1]) for |i - j| <= w (cells outside the band and before the
series are infinite), cost(i, j) the squared Euclidean distance between step i of a and step j
of b; the distance is D[n-1][m-1]. With d[c] the least distance to a training series of class c
(infinite when it has none) and d1 the least of all: the answer is the class of d1 (the lowest
class on ties), its probabilities proportional to exp(-(d[c] - d1) / max(d1, 1e-12)).
";

/// What [`Predictor::export`] wrote: the model's file and how to call it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportedModel {
    /// `torchscript` or [`CLASSIC_FORMAT`].
    pub format: &'static str,
    /// The file in the export folder ([`TORCHSCRIPT_FILE`] or [`CLASSIC_FILE`]).
    pub file: &'static str,
    /// The model's family (its id in the catalogue, e.g. `mlp`, `resnet18`, `kernel_ridge`).
    pub family: String,
    /// The shape of one input, as the model takes it (a batch adds a first dimension).
    pub input_shape: Vec<i64>,
    /// `probabilities` (one per class, in class order) or `values`.
    pub output: &'static str,
    /// The shape of one output.
    pub output_shape: Vec<i64>,
    /// How the model is called (the engine says it in the metadata and the README).
    #[serde(skip)]
    pub call: Call,
}

/// How an exported model is called: its inputs and what it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `model(x)`: `x` float32 `[B, ...input_shape]`; `[B, ...output_shape]` out.
    Dense,
    /// `model(x, lengths)`: `x` float32 `[B, T, channels]` zero-padded, `lengths` int64 `[B]`;
    /// class probabilities `[B, classes]` out.
    Series,
    /// `model(x, lengths)` as [`Call::Series`]; a list of `B` float32 tensors out, each
    /// `[steps, output step]`: the translated sequences.
    Translation,
    /// `model(data, lengths)`: `data` uint8 `[B, N]`, each input's encoded bytes (the store's
    /// `EMX1` encoding) zero-padded, `lengths` int64 `[B]` their byte counts; class
    /// probabilities `[B, classes]` out.
    Bytes,
    /// `model(data)`: `data` uint8 `[B, input_shape[0]]`, each input's encoded bytes cut or
    /// zero-padded to that many; uint8 `[B, output_shape[0]]` out, the output's encoded bytes.
    BytesToBytes,
    /// `model(values, parents)`: the nodes of a batch of trees, `values` float32 `[N, node
    /// values]` with every node after its parent (pre-order, tree after tree), `parents` int64
    /// `[N]` each node's parent row, -1 for a root; class probabilities `[roots, classes]` out.
    Tree,
    /// No call: the README's formulas over the JSON parameters (the classic models).
    Formulas,
}

impl Predictor {
    /// Writes the model into `dir` (an existing folder) in its portable form; see the module
    /// documentation. The model's variables stop requiring gradients (a predictor never trains).
    pub fn export(&mut self, dir: &Path) -> Result<ExportedModel> {
        let family = self.kind.id().to_owned();
        let task = self.task.clone();
        match &mut self.loaded {
            Loaded::Classic(model) => {
                // (one input's shape: a row, or a series of any length; classes; outputs)
                let row = |features: usize| vec![features as i64];
                let series = |channels: usize| vec![ANY_LENGTH, channels as i64];
                let (input_shape, classes, outputs) = match &*model {
                    ClassicModel::KernelRidge(model) => {
                        (row(model.features), model.classes, model.outputs)
                    }
                    ClassicModel::Knn(model) => (row(model.features), model.classes, model.outputs),
                    ClassicModel::Gbdt(model) => (
                        row(model.features),
                        if model.classification {
                            model.outputs
                        } else {
                            0
                        },
                        model.outputs,
                    ),
                    ClassicModel::RandomForest(model) => (
                        row(model.features),
                        if model.classification {
                            model.outputs
                        } else {
                            0
                        },
                        model.outputs,
                    ),
                    ClassicModel::MiniRocket(model) => (
                        series(model.transform.channels),
                        model.ridge.n_classes(),
                        model.ridge.n_classes(),
                    ),
                    ClassicModel::DtwKnn(model) => {
                        (series(model.channels), model.n_classes, model.n_classes)
                    }
                    ClassicModel::MultiRocket(model) => (
                        series(model.transform.channels),
                        model.ridge.n_classes(),
                        model.ridge.n_classes(),
                    ),
                    ClassicModel::TreeKernelSvm(model) => (
                        vec![
                            ANY_TREE,
                            model.support.first().map_or(0, |tree| tree.value.len()) as i64,
                        ],
                        model.coefficients.len(),
                        model.coefficients.len(),
                    ),
                };
                let document = serde_json::json!({
                    "format": CLASSIC_FORMAT,
                    "format_version": FORMAT_VERSION,
                    "family": family,
                    "parameters": crate::classic::packed::unpacked(model.to_extra()?),
                });
                std::fs::write(
                    dir.join(CLASSIC_FILE),
                    serde_json::to_string(&document)? + "\n",
                )?;
                let classification = classes > 0;
                Ok(ExportedModel {
                    format: CLASSIC_FORMAT,
                    file: CLASSIC_FILE,
                    family,
                    input_shape,
                    output: output_kind(classification),
                    output_shape: vec![if classification { classes } else { outputs } as i64],
                    call: Call::Formulas,
                })
            }
            Loaded::Torch { store, model } => {
                if self.device != Device::Cpu {
                    return Err(Error::BadCheckpoint(
                        "a model is exported from a predictor on the CPU".into(),
                    ));
                }
                // Constants of a trace or a script must not require gradients.
                store.freeze();
                let _guard = tch::no_grad_guard();
                match model.network.scripted() {
                    Some(scripted) => export_scripted(&task, &self.config, scripted, dir, family),
                    None => export_network(self.kind, &task, &self.config, model, dir, family),
                }
            }
        }
    }
}

/// [`Predictor::export`] of a network: traced to TorchScript (see the module documentation).
fn export_network(
    kind: ModelKind,
    task: &Task,
    config: &ModelConfig,
    model: &Model,
    dir: &Path,
    family: String,
) -> Result<ExportedModel> {
    let unsupported = |family: &str| Error::ExportUnsupported {
        family: family.to_owned(),
        supported: SUPPORTED,
    };
    // The 1-D convolutional series classifiers read a padded batch and its lengths.
    let series = matches!(
        kind,
        ModelKind::Fcn | ModelKind::ResNet1d | ModelKind::InceptionTime
    );
    let (input_shape, output_shape) = match &task {
        Task::SequenceClassification { step, n_classes } if series => {
            (vec![ANY_LENGTH, *step], vec![*n_classes])
        }
        Task::ImageClassification { input, n_classes } => (input.clone(), vec![*n_classes]),
        Task::ImageRecovery { input, output } => (input.clone(), output.clone()),
        Task::TabularClassification {
            features,
            n_classes,
        } => (vec![*features], vec![*n_classes]),
        Task::TabularRegression { features, outputs } => (vec![*features], vec![*outputs]),
        Task::BytesAutoencoder => {
            return export_bytes_autoencoder(config, model, dir, family);
        }
        _ => {
            return Err(unsupported(&format!(
                "{family} (a network of a {} app)",
                task.name()
            )));
        }
    };
    let device = Device::Cpu;
    let classification = task.is_classification();
    let examples = if series {
        // Two series of 5 and 3 steps (the second padded): the trace follows any
        // batch size and length (`models::temporal`'s masks are tensor operations).
        let values = Tensor::rand([TRACE_BATCH, 5, input_shape[1]], (Kind::Float, device));
        vec![values, Tensor::from_slice(&[5i64, 3]).to_device(device)]
    } else {
        let mut example_shape = vec![TRACE_BATCH];
        example_shape.extend_from_slice(&input_shape);
        vec![Tensor::rand(&example_shape, (Kind::Float, device))]
    };
    let module = CModule::create_by_tracing(
        "EasemlModel",
        "forward",
        &examples,
        &mut |inputs: &[Tensor]| {
            let batch = if series {
                BatchInput::PaddedSequences {
                    values: inputs[0].shallow_clone(),
                    lengths: inputs[1].shallow_clone(),
                }
            } else {
                BatchInput::Dense(inputs[0].shallow_clone())
            };
            let outputs = model.forward(&batch, false).to_kind(Kind::Float);
            vec![if classification {
                outputs.softmax(-1, Kind::Float)
            } else {
                outputs
            }]
        },
    )?;
    module.save(dir.join(TORCHSCRIPT_FILE))?;
    Ok(ExportedModel {
        format: "torchscript",
        file: TORCHSCRIPT_FILE,
        family,
        input_shape,
        output: output_kind(classification),
        output_shape,
        call: if series { Call::Series } else { Call::Dense },
    })
}

/// The bit-level auto-encoder traced with bytes in and out ([`Call::BytesToBytes`]): each byte's
/// bits (least significant first) are its inputs, and an output bit is set where its logit is
/// positive, as `infer` reads them.
fn export_bytes_autoencoder(
    config: &ModelConfig,
    model: &Model,
    dir: &Path,
    family: String,
) -> Result<ExportedModel> {
    let (input_bytes, output_bytes) = (
        config.autoencoder_input_bytes(),
        config.autoencoder_output_bytes(),
    );
    let example = Tensor::randint(256, [TRACE_BATCH, input_bytes], (Kind::Uint8, Device::Cpu));
    let module = CModule::create_by_tracing(
        "EasemlModel",
        "forward",
        &[example],
        &mut |inputs: &[Tensor]| {
            let shifts = Tensor::arange(8, (Kind::Int64, Device::Cpu));
            let bits = inputs[0]
                .to_kind(Kind::Int64)
                .unsqueeze(-1)
                .bitwise_right_shift(&shifts)
                .bitwise_and(1)
                .to_kind(Kind::Float)
                .view([-1, 8 * input_bytes]);
            let logits = model.forward(&BatchInput::Dense(bits), false);
            // (by operators: a tensor made from Rust values is recorded as zeros)
            let powers = shifts.ones_like().bitwise_left_shift(&shifts);
            let bits = logits
                .gt(0.0)
                .to_kind(Kind::Int64)
                .view([-1, output_bytes, 8]);
            vec![
                (bits * powers)
                    .sum_dim_intlist(-1, false, Kind::Int64)
                    .to_kind(Kind::Uint8),
            ]
        },
    )?;
    module.save(dir.join(TORCHSCRIPT_FILE))?;
    Ok(ExportedModel {
        format: "torchscript",
        file: TORCHSCRIPT_FILE,
        family,
        input_shape: vec![input_bytes],
        output: "bytes",
        output_shape: vec![output_bytes],
        call: Call::BytesToBytes,
    })
}

/// A network written as TorchScript ([`Network::scripted`](crate::models::Network::scripted)),
/// with a `forward` that takes the task's inputs ([`Call`]) and answers what `infer` answers.
fn export_scripted(
    task: &Task,
    config: &ModelConfig,
    scripted: Scripted,
    dir: &Path,
    family: String,
) -> Result<ExportedModel> {
    let probabilities = |network: &str| format!("torch.softmax({network}.float(), -1)");
    let (forward, call, input_shape, output, output_shape) = match task {
        Task::SequenceClassification { step, n_classes } => (
            format!(
                "    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:\n\
                 \x20       return {}\n",
                probabilities("self.network(x, lengths)")
            ),
            Call::Series,
            vec![ANY_LENGTH, *step],
            output_kind(true),
            vec![*n_classes],
        ),
        Task::BytesClassification { n_classes } => {
            // `batch::bits_sequences`: steps of `bytes_per_step` bytes, 8 bits each (least
            // significant first), the last step zero-padded, at least one step.
            let per_step = config.bytes_per_step.max(1);
            (
                format!(
                    "    def forward(self, data: Tensor, lengths: Tensor) -> Tensor:\n\
                     \x20       lengths = lengths.long()\n\
                     \x20       real = torch.arange(data.size(1), device=data.device).unsqueeze(0) < lengths.unsqueeze(1)\n\
                     \x20       data = data.long() * real.long()\n\
                     \x20       width = max(1, (data.size(1) + {last}) // {per_step}) * {per_step}\n\
                     \x20       data = torch.constant_pad_nd(data, [0, width - data.size(1)], 0)\n\
                     \x20       bits = torch.bitwise_and(torch.bitwise_right_shift(data.unsqueeze(-1), torch.arange(8, device=data.device)), 1)\n\
                     \x20       x = bits.float().view(data.size(0), -1, {step})\n\
                     \x20       steps = torch.clamp(torch.div(lengths + {last}, {per_step}, rounding_mode=\"floor\"), min=1)\n\
                     \x20       return {}\n",
                    probabilities("self.network(x, steps)"),
                    last = per_step - 1,
                    step = 8 * per_step,
                ),
                Call::Bytes,
                vec![ANY_LENGTH],
                output_kind(true),
                vec![*n_classes],
            )
        }
        Task::SequenceTranslation {
            input_step,
            output_step,
        } => (
            // `Predictor::predict`: 2 * the longest input + 4 steps, each sequence cut after its
            // first step whose continue logit is not >= 0.
            format!(
                "    def forward(self, x: Tensor, lengths: Tensor) -> List[Tensor]:\n\
                 \x20       raw = self.network(x, lengths, 2 * int(lengths.max()) + 4).float()\n\
                 \x20       answers: List[Tensor] = []\n\
                 \x20       for row in range(raw.size(0)):\n\
                 \x20           stops = torch.nonzero(torch.logical_not(raw[row, :, {output_step}] >= 0))\n\
                 \x20           steps = raw.size(1)\n\
                 \x20           if stops.size(0) > 0:\n\
                 \x20               steps = int(stops[0, 0]) + 1\n\
                 \x20           answers.append(raw[row, :steps, :{output_step}])\n\
                 \x20       return answers\n"
            ),
            Call::Translation,
            vec![ANY_LENGTH, *input_step],
            output_kind(false),
            vec![ANY_LENGTH, *output_step],
        ),
        Task::TreeClassification { node, n_classes } => (
            format!(
                "    def forward(self, values: Tensor, parents: Tensor) -> Tensor:\n\
                 \x20       return {}\n",
                probabilities("self.network(values.float(), parents.long())")
            ),
            Call::Tree,
            vec![ANY_TREE, *node],
            output_kind(true),
            vec![*n_classes],
        ),
        _ => {
            return Err(Error::ExportUnsupported {
                family: format!("{family} (a network of a {} app)", task.name()),
                supported: SUPPORTED,
            });
        }
    };
    let source = format!("{}{forward}", scripted.source);
    crate::native::save_script_module(&source, &scripted.parameters, &dir.join(TORCHSCRIPT_FILE))?;
    Ok(ExportedModel {
        format: "torchscript",
        file: TORCHSCRIPT_FILE,
        family,
        input_shape,
        output,
        output_shape,
        call,
    })
}

/// An exported model's `output`: `probabilities` for a classifier, else `values`.
fn output_kind(classification: bool) -> &'static str {
    if classification {
        "probabilities"
    } else {
        "values"
    }
}
