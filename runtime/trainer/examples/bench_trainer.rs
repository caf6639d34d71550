//! `easeml bench trainer` until the CLI exists: images/second of training (forward, backward, Adam
//! step) and of inference for ResNet-18 and a small CNN on one device, side by side with PyTorch in
//! Python on the same torch install (`benches/trainer_bench.py`, run with the venv's python), the same
//! architecture, batch, input layout and thread count, in the same run. The ratio Rust/Python should
//! be about 1: the trainer adds no work over libtorch.
//!
//! `eval "$(cargo xtask env)"; cargo run -p easeml-trainer --example bench_trainer -- [threads] [batch]
//! [size] [iterations] [width] [rounds]` (defaults: all cores, 32, 32, 20, 1.0, 2).

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use easeml_trainer::models::{self, BatchInput, Model, ModelConfig};
use easeml_trainer::{Candidate, Task};
use tch::nn::{Module, OptimizerConfig};
use tch::{Device, Kind, Tensor, nn};

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
            conv1: nn::conv2d(path / "conv1", 3, 32, 3, config),
            conv2: nn::conv2d(path / "conv2", 32, 64, 3, config),
            fc: nn::linear(path / "fc", 64, 10, Default::default()),
        }
    }

    fn forward(&self, xs: &Tensor) -> Tensor {
        let xs = xs.permute([0, 3, 1, 2]).contiguous();
        let xs = xs.apply(&self.conv1).relu().max_pool2d_default(2);
        let xs = xs.apply(&self.conv2).relu().max_pool2d_default(2);
        self.fc
            .forward(&xs.adaptive_avg_pool2d([1, 1]).flatten(1, -1))
    }
}

enum Net {
    Easeml(Model),
    Small(Box<SmallCnn>),
}

impl Net {
    fn forward(&self, xs: &Tensor, train: bool) -> Tensor {
        match self {
            Net::Easeml(model) => model.forward(&BatchInput::Dense(xs.shallow_clone()), train),
            Net::Small(cnn) => cnn.forward(xs),
        }
    }
}

fn measure(
    net: &Net,
    store: &nn::VarStore,
    batch: i64,
    size: i64,
    iterations: usize,
) -> Result<(f64, f64)> {
    let warmup = 3;
    let xs = Tensor::rand([batch, size, size, 3], (Kind::Float, Device::Cpu));
    let ys = Tensor::randint(10, [batch], (Kind::Int64, Device::Cpu));
    let mut optimizer = nn::Adam::default().build(store, 1e-3)?;
    let mut started = Instant::now();
    for step in 0..warmup + iterations {
        if step == warmup {
            started = Instant::now();
        }
        let loss = net.forward(&xs, true).cross_entropy_for_logits(&ys);
        optimizer.backward_step(&loss);
    }
    let train = (batch as usize * iterations) as f64 / started.elapsed().as_secs_f64();
    let _guard = tch::no_grad_guard();
    for step in 0..warmup + iterations {
        if step == warmup {
            started = Instant::now();
        }
        let _ = net.forward(&xs, false);
    }
    let infer = (batch as usize * iterations) as f64 / started.elapsed().as_secs_f64();
    Ok((train, infer))
}

fn best(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0.max(b.0), a.1.max(b.1))
}

/// Runs the Python side once; its JSON line.
fn run_python(
    threads: i32,
    batch: i64,
    size: i64,
    iterations: usize,
    width: f64,
) -> Result<serde_json::Value> {
    let python = match std::env::var_os("VIRTUAL_ENV") {
        Some(venv) => std::path::PathBuf::from(venv).join("bin/python"),
        None => "python3".into(),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/trainer_bench.py");
    let output = Command::new(&python)
        .arg(script)
        .args([
            threads.to_string(),
            batch.to_string(),
            size.to_string(),
            iterations.to_string(),
            "3".into(),
            width.to_string(),
        ])
        .output()
        .with_context(|| format!("could not run {}", python.display()))?;
    if !output.status.success() {
        bail!(
            "the Python side failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |index: usize, default: &str| args.get(index).cloned().unwrap_or(default.to_owned());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: i32 = arg(0, &cores.to_string()).parse()?;
    let batch: i64 = arg(1, "32").parse()?;
    let size: i64 = arg(2, "32").parse()?;
    let iterations: usize = arg(3, "20").parse()?;
    let width: f64 = arg(4, "1.0").parse()?;
    tch::set_num_threads(threads);
    tch::manual_seed(0);

    // Rust and Python alternate for `rounds` rounds and each keeps its best, so that load from other
    // processes hits both sides alike.
    let rounds: usize = arg(5, "2").parse()?;
    let mut rust = [("resnet18", (0.0f64, 0.0f64)), ("small_cnn", (0.0, 0.0))];
    let mut python_best = [(0.0f64, 0.0f64); 2];
    let mut torch_version = String::new();
    for _ in 0..rounds {
        let store = nn::VarStore::new(Device::Cpu);
        let task = Task::ImageClassification {
            input: vec![size, size, 3],
            n_classes: 10,
        };
        let config = ModelConfig {
            width,
            max_bytes: 64,
        };
        let resnet = models::build(
            &store.root(),
            &Candidate::parse("resnet18")?,
            &task,
            &config,
        )?;
        let measured = measure(&Net::Easeml(resnet), &store, batch, size, iterations)?;
        rust[0].1 = best(rust[0].1, measured);
        let store = nn::VarStore::new(Device::Cpu);
        let small = SmallCnn::new(&store.root());
        let measured = measure(
            &Net::Small(Box::new(small)),
            &store,
            batch,
            size,
            iterations,
        )?;
        rust[1].1 = best(rust[1].1, measured);
        let json = run_python(threads, batch, size, iterations, width)?;
        torch_version = json["torch"].as_str().unwrap_or("?").to_owned();
        for (index, name) in ["resnet18", "small_cnn"].into_iter().enumerate() {
            let measured = (
                json["results"][name][0].as_f64().unwrap_or(f64::NAN),
                json["results"][name][1].as_f64().unwrap_or(f64::NAN),
            );
            python_best[index] = best(python_best[index], measured);
        }
    }
    println!(
        "CPU, {threads} threads, batch {batch}, [{size},{size},3] images, {iterations} timed steps, ResNet-18 width x{width}, torch {}",
        torch_version
    );
    println!(
        "{:<10} {:>14} {:>14} {:>7} {:>14} {:>14} {:>7}",
        "model", "train rust", "train python", "ratio", "infer rust", "infer python", "ratio"
    );
    for ((name, (train, infer)), (python_train, python_infer)) in rust.into_iter().zip(python_best)
    {
        println!(
            "{name:<10} {train:>12.1}/s {python_train:>12.1}/s {:>7.3} {infer:>12.1}/s {python_infer:>12.1}/s {:>7.3}",
            train / python_train,
            infer / python_infer
        );
    }
    Ok(())
}
