//! Measuring the trainer (the code behind `easeml bench trainer`, kept here, out of the trainer
//! library, which holds only what the service runs; it uses the trainer's public model API):
//! - [`measure_steps`]: images/second of training steps (forward, backward, Adam) and of inference
//!   for ResNet-18 (the trainer's own model) and a small CNN, on one device; the Adam is the
//!   trainer's own (`easeml_trainer::optim::Adam`, libtorch's fused kernel), what runs use;
//! - [`run_python`]: the same measurement by PyTorch in Python ([`PYTHON_SCRIPT`], piped to
//!   `python -`), for the ratio Rust/Python on the same torch install, architecture, batch, input
//!   layout and thread count;
//! - [`memory_check`]: the peak resident memory of a training run against the bound "2 x (model +
//!   optimizer state + one batch of activations)"; it reads the process's peak RSS, so it belongs in
//!   a fresh process;
//! - [`training_run`]: one whole [`train()`] run (optionally with mixed precision) and its speed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tch::nn::Module;
use tch::{Cuda, Device, Kind, Tensor, nn};

use easeml_trainer::models::{self, BatchInput, Model, ModelConfig};
use easeml_trainer::precision::Precision;
use easeml_trainer::{Budget, Candidate, Error, Result, Targets, Task, synthetic, train};

/// The PyTorch side (`benches/trainer_bench.py`), run as `python - --device ... --threads ...`.
pub const PYTHON_SCRIPT: &str = include_str!("../../../trainer/trainer_bench.py");

/// The models the step benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchModel {
    /// The trainer's ResNet-18 (torchvision's, with `k/2` padding and a ceil-mode stem pool).
    Resnet18,
    /// Two 3x3 convolutions (32 and 64 channels) with ReLU and 2x2 max pooling, global average
    /// pooling, one linear layer.
    SmallCnn,
}

impl BenchModel {
    /// Every model, in report order.
    pub const ALL: [BenchModel; 2] = [BenchModel::Resnet18, BenchModel::SmallCnn];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            BenchModel::Resnet18 => "resnet18",
            BenchModel::SmallCnn => "small_cnn",
        }
    }

    /// `resnet18` or `small_cnn`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|model| model.name() == name.trim())
    }
}

/// What one step measurement runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepConfig {
    /// The device.
    pub device: Device,
    /// Images per batch.
    pub batch: i64,
    /// Images are `[size, size, 3]`.
    pub size: i64,
    /// Untimed steps first.
    pub warmup: usize,
    /// Timed steps (training, then as many for inference).
    pub iterations: usize,
    /// ResNet-18's width multiplier (1 = the published widths; the small CNN has fixed widths).
    pub width: f64,
    /// Mixed-precision forward passes, as `Budget::mixed_precision` does (in the trainer's type for
    /// the device: `easeml_trainer::precision::Precision::on`).
    pub mixed_precision: bool,
}

/// Images per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Training steps (forward, loss, backward, Adam step).
    pub train: f64,
    /// Inference (forward in eval mode, no gradients).
    pub infer: f64,
}

impl Throughput {
    /// The better of two measurements, per field.
    pub fn best(self, other: Throughput) -> Throughput {
        Throughput {
            train: self.train.max(other.train),
            infer: self.infer.max(other.infer),
        }
    }

    /// `self / other`, per field.
    pub fn ratio(self, other: Throughput) -> Throughput {
        Throughput {
            train: self.train / other.train,
            infer: self.infer / other.infer,
        }
    }
}

/// The small CNN of the Python side.
#[derive(Debug)]
struct SmallCnn {
    conv1: nn::Conv2D,
    conv2: nn::Conv2D,
    fc: nn::Linear,
}

impl SmallCnn {
    fn new(path: &nn::Path<'_>) -> Self {
        let config = nn::ConvConfig {
            padding: 1,
            ..Default::default()
        };
        Self {
            conv1: channels_last_conv(nn::conv2d(path / "conv1", 3, 32, 3, config)),
            conv2: channels_last_conv(nn::conv2d(path / "conv2", 32, 64, 3, config)),
            fc: nn::linear(path / "fc", 64, 10, Default::default()),
        }
    }

    /// The `[B,H,W,C]` images permuted, not copied: channels-last, as the trainer's models run.
    fn forward(&self, xs: &Tensor) -> Tensor {
        let xs = xs.permute([0, 3, 1, 2]);
        let xs = xs.apply(&self.conv1).relu().max_pool2d_default(2);
        let xs = xs.apply(&self.conv2).relu().max_pool2d_default(2);
        self.fc
            .forward(&xs.adaptive_avg_pool2d([1, 1]).flatten(1, -1))
    }
}

/// `conv` with its weights channels-last, as the trainer's convolutions
/// (`easeml_trainer::models::channels_last`).
fn channels_last_conv(mut conv: nn::Conv2D) -> nn::Conv2D {
    tch::no_grad(|| {
        let weights = models::channels_last(&conv.ws);
        conv.ws.set_data(&weights);
    });
    conv
}

enum Net {
    Easeml(Model),
    Small(Box<SmallCnn>),
}

impl Net {
    fn forward(&self, xs: &Tensor, train: bool, precision: Precision) -> Tensor {
        precision.forward(xs.device(), || match self {
            Net::Easeml(model) => model.forward(&BatchInput::Dense(xs.shallow_clone()), train),
            Net::Small(cnn) => cnn.forward(xs),
        })
    }
}

fn synchronize(device: Device) {
    if let Device::Cuda(index) = device {
        Cuda::synchronize(index as i64);
    }
}

/// Images/second of training and inference steps of `model` under `config`, in this process (set
/// the thread count with `tch::set_num_threads` first). Inputs are random `[B, size, size, 3]`
/// images with 10 classes, made once on the device.
pub fn measure_steps(model: BenchModel, config: &StepConfig) -> Result<Throughput> {
    let device = config.device;
    easeml_trainer::device::prepare(device);
    let precision = Precision::on(device, config.mixed_precision);
    tch::manual_seed(0);
    let store = nn::VarStore::new(device);
    let net = match model {
        BenchModel::Resnet18 => {
            let task = Task::ImageClassification {
                input: vec![config.size, config.size, 3],
                n_classes: 10,
            };
            let model_config = ModelConfig {
                width: config.width,
                max_bytes: 64,
                input_bytes: 0,
                output_bytes: 0,
                bytes_per_step: 1,
            };
            Net::Easeml(models::build(
                &store.root(),
                &Candidate::parse("resnet18")?,
                &task,
                &model_config,
            )?)
        }
        BenchModel::SmallCnn => Net::Small(Box::new(SmallCnn::new(&store.root()))),
    };
    let xs = Tensor::rand(
        [config.batch, config.size, config.size, 3],
        (Kind::Float, device),
    );
    let ys = Tensor::randint(10, [config.batch], (Kind::Int64, device));
    // The trainer's optimizer (one fused kernel per step), not tch's per-variable C++ Adam.
    let mut optimizer = easeml_trainer::optim::Adam::with_defaults(&store, 1e-3)?;
    // float16 scales the loss, as the trainer's runs do (`easeml_trainer::loss_scale`).
    optimizer.set_loss_scaler(easeml_trainer::loss_scale::LossScaler::for_precision(
        precision,
    ));
    let images = (config.batch as usize * config.iterations.max(1)) as f64;

    let mut started = Instant::now();
    for step in 0..config.warmup + config.iterations.max(1) {
        if step == config.warmup {
            synchronize(device);
            started = Instant::now();
        }
        let loss = net
            .forward(&xs, true, precision)
            .cross_entropy_for_logits(&ys);
        optimizer.backward_step(&loss)?;
    }
    synchronize(device);
    let train = images / started.elapsed().as_secs_f64();

    let _guard = tch::no_grad_guard();
    for step in 0..config.warmup + config.iterations.max(1) {
        if step == config.warmup {
            synchronize(device);
            started = Instant::now();
        }
        let _ = net.forward(&xs, false, precision);
    }
    synchronize(device);
    let infer = images / started.elapsed().as_secs_f64();
    Ok(Throughput { train, infer })
}

/// What the Python side reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PythonSide {
    /// `torch.__version__`.
    pub torch: String,
    /// The lib dir of that torch install.
    pub lib_dir: String,
    /// Images/second per model name.
    pub results: BTreeMap<String, Throughput>,
    /// Seconds of the untimed first steps per model name (a compiling peer's compile time).
    pub warmup_seconds: BTreeMap<String, f64>,
}

#[derive(Deserialize)]
struct PythonOutput {
    torch: String,
    lib_dir: String,
    results: BTreeMap<String, (f64, f64)>,
    #[serde(default)]
    warmup_seconds: BTreeMap<String, f64>,
}

/// How the PyTorch side is set up ([`PYTHON_SCRIPT`]'s `--peer`): each with cuDNN's autotuner on
/// (CUDA) and Adam's fused kernel, as a performance-minded user runs PyTorch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Peer {
    /// Float32, eager.
    Eager,
    /// bfloat16 autocast and channels-last tensors.
    Amp,
    /// `torch.compile(mode="reduce-overhead")` (CUDA graphs on CUDA); its compile time apart.
    Compile,
}

impl Peer {
    /// The name on the command line and in `summary.json`.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Eager => "eager",
            Peer::Amp => "amp",
            Peer::Compile => "compile",
        }
    }
}

/// Runs [`PYTHON_SCRIPT`] with `python` once for `models` under `config` and `threads`, as `peer`.
pub fn run_python(
    python: &Path,
    models: &[BenchModel],
    config: &StepConfig,
    threads: usize,
    peer: Peer,
) -> Result<PythonSide> {
    let names: Vec<&str> = models.iter().map(|model| model.name()).collect();
    let mut command = Command::new(python);
    command
        .arg("-")
        .args([
            "--device",
            &easeml_trainer::device::device_name(config.device),
        ])
        .args(["--threads", &threads.to_string()])
        .args(["--batch", &config.batch.to_string()])
        .args(["--size", &config.size.to_string()])
        .args(["--iterations", &config.iterations.max(1).to_string()])
        .args(["--warmup", &config.warmup.to_string()])
        .args(["--width", &config.width.to_string()])
        .args(["--models", &names.join(",")])
        .args(["--peer", peer.name()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(kind) = Precision::on(config.device, config.mixed_precision).autocast_kind() {
        // The PyTorch side autocasts to the type the trainer does.
        let dtype = if kind == Kind::Half {
            "float16"
        } else {
            "bfloat16"
        };
        command.args(["--amp", dtype]);
    }
    let cannot_run = |error: std::io::Error| {
        std::io::Error::new(
            error.kind(),
            format!("cannot run `{}`: {error}", python.display()),
        )
    };
    let mut child = command.spawn().map_err(cannot_run)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(PYTHON_SCRIPT.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(Error::Io(std::io::Error::other(format!(
            "the Python side (`{}`) failed ({}): {}",
            python.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .ok_or_else(|| {
            Error::Io(std::io::Error::other(format!(
                "the Python side printed no JSON line: {stdout}"
            )))
        })?;
    let parsed: PythonOutput = serde_json::from_str(line)?;
    Ok(PythonSide {
        torch: parsed.torch,
        lib_dir: parsed.lib_dir,
        results: parsed
            .results
            .into_iter()
            .map(|(name, (train, infer))| (name, Throughput { train, infer }))
            .collect(),
        warmup_seconds: parsed.warmup_seconds,
    })
}

/// The python of the torch install this trainer was set up with: `$VIRTUAL_ENV/bin/python` (what
/// `cargo xtask env` sets), else `$EASEML_TORCH_VENV/bin/python`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/easeml/torch-venv/bin/python` when it exists, else `python3`.
pub fn default_python() -> PathBuf {
    let from_env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(venv) = from_env("VIRTUAL_ENV").or_else(|| from_env("EASEML_TORCH_VENV")) {
        return PathBuf::from(venv).join("bin/python");
    }
    let cache = from_env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| from_env("HOME").map(|home| PathBuf::from(home).join(".cache")));
    if let Some(python) = cache
        .map(|cache| cache.join("easeml/torch-venv/bin/python"))
        .filter(|python| python.is_file())
    {
        return python;
    }
    PathBuf::from("python3")
}

/// The folder of the `libtorch_cpu.so` this process has loaded (from `/proc/self/maps`; Linux).
pub fn loaded_libtorch_dir() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libtorch_cpu.so"))
        .and_then(|path| Path::new(path).parent().map(Path::to_path_buf))
}

/// Peak resident memory of this process so far, in bytes (`VmHWM`; Linux).
pub fn peak_rss() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kilobytes = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse::<u64>().ok())
        .ok_or_else(|| Error::Io(std::io::Error::other("no VmHWM in /proc/self/status")))?;
    Ok(kilobytes * 1024)
}

/// The peak memory of one training run against its bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// The candidate (`resnet18`).
    pub candidate: String,
    /// ResNet-18's width multiplier (the trainer's CPU default).
    pub width: f64,
    /// Examples in the run (`[32,32,3]` images, made before the baseline: they are the caller's).
    pub examples: usize,
    /// Examples per batch.
    pub batch: usize,
    /// Bytes of the trainable parameters.
    pub parameter_bytes: u64,
    /// 5 x the parameters: weights, gradients, Adam's two moments, the best-weights snapshot.
    pub model_and_optimizer_bytes: u64,
    /// The outputs of the convolution and dense layers of one training forward pass (a lower
    /// bound of the activations a backward pass keeps).
    pub activation_bytes: u64,
    /// `model_and_optimizer_bytes + activation_bytes`.
    pub bound_bytes: u64,
    /// Peak RSS before the run (after a short warm-up run).
    pub baseline_rss_bytes: u64,
    /// Peak RSS after the run.
    pub peak_rss_bytes: u64,
    /// `(peak - baseline) / bound`; the target is at most 2.
    pub ratio: f64,
    /// The run's validation quality (it must have learned something).
    pub quality: Option<f64>,
    /// The run's wall-clock seconds.
    pub seconds: f64,
}

/// One CPU run of ResNet-18 (the trainer's CPU width, one epoch, one learning rate) on `examples`
/// synthetic `[32,32,3]` images; the growth of the peak RSS over the run against the bound. Run it
/// in a fresh process: the baseline is this process's peak so far.
pub fn memory_check(examples: usize) -> Result<MemoryReport> {
    let data = synthetic::quadrant_images(examples.max(20), [32, 32, 3], 1);
    let mut budget = Budget::new(Device::Cpu);
    budget.learning_rates = vec![0.01];
    budget.max_epochs = 1;
    let candidate = Candidate::parse("resnet18")?;
    let task = Task::of(&data)?;

    // Model size and one batch of activations, on a separate copy of the model; then a short run on
    // a few examples warms libtorch up before the baseline.
    let store = nn::VarStore::new(Device::Cpu);
    let model = models::build(&store.root(), &candidate, &task, &budget.model)?;
    let parameter_bytes: u64 = store
        .trainable_variables()
        .iter()
        .map(|tensor| 4 * tensor.numel() as u64)
        .sum();
    let batch = Tensor::rand(
        [budget.batch_size as i64, 32, 32, 3],
        (Kind::Float, Device::Cpu),
    );
    let (_, activation_bytes) = models::forward_footprint(|| {
        let _ = model.forward(&BatchInput::Dense(batch), true);
    });
    drop(model);
    drop(store);
    let warmup = synthetic::quadrant_images(64, [32, 32, 3], 2);
    train(&candidate, &warmup, &budget)?;
    let baseline_rss_bytes = peak_rss()?;

    let run = train(&candidate, &data, &budget)?;
    let peak_rss_bytes = peak_rss()?;
    let model_and_optimizer_bytes = 5 * parameter_bytes;
    let bound_bytes = model_and_optimizer_bytes + activation_bytes;
    Ok(MemoryReport {
        candidate: candidate.id(),
        width: budget.model.width,
        examples: data.len(),
        batch: budget.batch_size,
        parameter_bytes,
        model_and_optimizer_bytes,
        activation_bytes,
        bound_bytes,
        baseline_rss_bytes,
        peak_rss_bytes,
        ratio: peak_rss_bytes.saturating_sub(baseline_rss_bytes) as f64 / bound_bytes as f64,
        quality: run.quality(),
        seconds: run.cost_seconds,
    })
}

/// One whole training run and its speed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The candidate.
    pub candidate: String,
    /// Whether `Budget::mixed_precision` was on.
    pub mixed_precision: bool,
    /// The model width.
    pub width: f64,
    /// Training examples (after the validation split).
    pub n_train: usize,
    /// Epochs run.
    pub epochs: usize,
    /// The validation quality; `None` when the run failed.
    pub quality: Option<f64>,
    /// Why the run failed (e.g. a NaN loss), if it did.
    pub failure: Option<String>,
    /// Wall-clock seconds of the run (validation included).
    pub seconds: f64,
    /// `n_train * epochs / seconds`.
    pub images_per_second: f64,
}

/// One [`train()`] run of `candidate` on `examples` synthetic `[size,size,3]` images (4 classes, a
/// fifth of the labels replaced by random ones so that the quality stays below 1 and every one of
/// the `epochs` epochs runs), one learning rate (0.001), batches of `batch`, ResNet-style widths
/// times `width`: data loading, validation and all, to set beside the step throughput of the same
/// size, batch and width (issue 47, item 4).
pub fn training_run(
    candidate: &str,
    device: Device,
    (size, batch, width): (i64, i64, f64),
    examples: usize,
    epochs: usize,
    mixed_precision: bool,
) -> Result<RunReport> {
    let mut data = synthetic::quadrant_images(examples.max(20), [size.max(1), size.max(1), 3], 3);
    if let Targets::Classes { n_classes, labels } = &mut data.targets {
        let mut rng = synthetic::Rng::new(4);
        for label in labels.iter_mut() {
            if rng.below(5) == 0 {
                *label = rng.below(*n_classes as u64) as i64;
            }
        }
    }
    let candidate = Candidate::parse(candidate)?;
    let mut budget = Budget::new(device);
    budget.learning_rates = vec![0.001];
    budget.max_epochs = epochs.max(1);
    budget.patience = budget.max_epochs;
    budget.mixed_precision = mixed_precision;
    budget.batch_size = batch.max(1) as usize;
    budget.model.width = width;
    let run = train(&candidate, &data, &budget)?;
    let epochs = run.trials.iter().map(|trial| trial.epochs).sum::<usize>();
    let failure = match &run.outcome {
        easeml_trainer::RunOutcome::Failed { reason } => Some(reason.clone()),
        easeml_trainer::RunOutcome::Succeeded { .. } => None,
    };
    Ok(RunReport {
        candidate: candidate.id(),
        mixed_precision,
        width: budget.model.width,
        n_train: run.n_train,
        epochs,
        quality: run.quality(),
        failure,
        seconds: run.cost_seconds,
        images_per_second: (run.n_train * epochs) as f64 / run.cost_seconds.max(1e-9),
    })
}
