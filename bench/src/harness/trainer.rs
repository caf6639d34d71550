//! `easeml bench trainer`: the trainer against PyTorch in Python on the same torch install (images/s
//! of training and inference steps, alternating rounds, each side keeping its best), the peak memory
//! of a training run (in a child process of this binary, so that the peak is the run's own), and on
//! CUDA with `--mixed-precision` whole training runs with and without autocast. The measuring code
//! is `trainer/measure.rs`; this file parses, reports and writes `summary.json` and
//! `throughput.svg`.

mod measure;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use easeml_trainer::device::{choose_device, device_name, parse_device};
use easeml_trainer::models::ModelConfig;
use easeml_trainer::precision::Precision;
use indicatif::{ProgressBar, ProgressStyle};
use measure::{BenchModel, MemoryReport, Peer, PythonSide, RunReport, StepConfig, Throughput};
use serde_json::json;

/// Arguments of `easeml bench trainer`.
#[derive(Debug, Args)]
pub struct TrainerBenchArgs {
    /// `cpu`, `cuda` or `cuda:N` (default: $EASEML_DEVICE, else CUDA when available, else CPU).
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Comma-separated models: resnet18, small_cnn.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "a,b",
        default_value = "resnet18,small_cnn"
    )]
    models: Vec<String>,
    /// Images per batch (default: 32; --quick: 8).
    #[arg(long, value_name = "N")]
    batch: Option<i64>,
    /// Images are [SIZE, SIZE, 3]; several sizes (`--size 32,224` or `--size 32 --size 224`) are
    /// measured one after another.
    #[arg(long, value_delimiter = ',', default_value = "32", value_name = "SIZE")]
    size: Vec<i64>,
    /// How the PyTorch side runs (several: `--peer eager,amp,compile`): `eager` (float32), `amp`
    /// (bfloat16 autocast, channels-last), `compile` (torch.compile reduce-overhead; its compile
    /// time reported apart); each with cuDNN's autotuner (CUDA) and fused Adam. The first is the
    /// table's Python column.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "eager",
        value_name = "PEER"
    )]
    peer: Vec<Peer>,
    /// Threads of both sides (default: available cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Rounds: Rust and Python alternate, each keeps its best (default: 3; --quick: 1).
    #[arg(long, value_name = "N")]
    rounds: Option<usize>,
    /// Timed steps per measurement, after 3 untimed ones (default: 20, or 100 on CUDA; --quick: 2).
    #[arg(long, value_name = "N")]
    iterations: Option<usize>,
    /// ResNet-18's width multiplier, both sides (default: the trainer's on the device, 1 = the
    /// published widths on CUDA and 1/4 on the CPU; --quick: 0.25).
    #[arg(long, value_name = "F")]
    width: Option<f64>,
    /// The Python with torch (default: $VIRTUAL_ENV/bin/python, else the easeml torch venv, else
    /// python3). It should use the same torch install as this binary; the report says whether it does.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Skip the Python side.
    #[arg(long)]
    no_python: bool,
    /// Examples of the memory check's run (default: 10000; --quick: 500).
    #[arg(long, value_name = "N")]
    memory_examples: Option<usize>,
    /// Skip the memory check.
    #[arg(long)]
    no_memory: bool,
    /// Also measure mixed-precision steps on both sides (autocast to the trainer's type for the
    /// device: bfloat16 where it has it, float16 on older GPUs; CUDA, or a CPU with bfloat16), and
    /// whole training runs of ResNet-18 with and without `Budget::mixed_precision`.
    #[arg(long)]
    mixed_precision: bool,
    /// Examples of the mixed-precision training runs (default: 10000; --quick: 500).
    #[arg(long, value_name = "N")]
    run_examples: Option<usize>,
    /// Epochs of the mixed-precision training runs.
    #[arg(long, default_value_t = 3, value_name = "N")]
    run_epochs: usize,
    /// A short smoke run (small batch and width, few steps, one round, a small memory check).
    #[arg(long)]
    quick: bool,
    /// Output folder for summary.json and throughput.svg (created if missing).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Internal: run only the memory check and print its JSON (the parent reads it).
    #[arg(long, hide = true)]
    memory_child: bool,
}

/// One row of the throughput table.
struct Row {
    model: BenchModel,
    size: i64,
    mixed_precision: bool,
    rust: Throughput,
    /// The first peer's best (the table's Python column; with `--amp` on mixed-precision rows).
    python: Option<Throughput>,
    /// Every peer's best, with the seconds of its untimed first steps (float32 rows only).
    peers: Vec<(Peer, Throughput, f64)>,
}

/// Runs the benchmark.
pub fn run(args: &TrainerBenchArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    tch::set_num_threads(i32::try_from(threads).unwrap_or(1));
    let quick = args.quick;
    let memory_examples = args
        .memory_examples
        .unwrap_or(if quick { 500 } else { 10_000 });
    if args.memory_child {
        let report = measure::memory_check(memory_examples)?;
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let started = Instant::now();
    let device = match &args.device {
        Some(value) => parse_device(value)?,
        None => choose_device()?,
    };
    let models = parse_models(&args.models)?;
    // The reduced precision `--mixed-precision` measures on this device.
    let mixed = args.mixed_precision.then(|| Precision::on(device, true));
    if mixed == Some(Precision::Float32) {
        bail!(
            "--mixed-precision needs a device with reduced-precision arithmetic: a CUDA GPU, or a \
             CPU with bfloat16 (avx512_bf16 or amx_bf16), which this one lacks; drop \
             --mixed-precision or pass --device cuda"
        );
    }
    let config = step_config(args, device)?;
    let sizes = distinct(&args.size);
    let peers = distinct(&args.peer);
    let rounds = args.rounds.unwrap_or(if quick { 1 } else { 3 }).max(1);
    let python =
        (!args.no_python).then(|| args.python.clone().unwrap_or_else(measure::default_python));
    let precisions: Vec<bool> = if args.mixed_precision {
        vec![false, true]
    } else {
        vec![false]
    };
    let python_runs = python
        .as_ref()
        .map_or(0, |_| peers.len() + precisions.len() - 1);
    let steps = sizes.len() * rounds * (precisions.len() * models.len() + python_runs)
        + usize::from(!args.no_memory)
        + if args.mixed_precision { 2 } else { 0 };
    let progress = progress_bar(steps, device);

    let mut rows = Vec::new();
    let mut python_side = None;
    for &size in &sizes {
        let (mut measured, side) = measure_throughput(
            &models,
            &StepConfig { size, ..config },
            (&precisions, &peers),
            (rounds, threads),
            python.as_deref(),
            &progress,
        )?;
        rows.append(&mut measured);
        python_side = side.or(python_side);
    }

    let memory = if args.no_memory {
        None
    } else {
        progress.set_message(format!("memory check ({memory_examples} examples, CPU)"));
        let report = memory_in_child(memory_examples, threads)?;
        progress.inc(1);
        Some(report)
    };

    let run_config = StepConfig {
        size: sizes[0],
        ..config
    };
    let runs = training_runs(args, &run_config, &progress)?;
    progress.finish_and_clear();

    let rust_lib_dir = measure::loaded_libtorch_dir();
    let same_install = match (&rust_lib_dir, &python_side) {
        (Some(rust), Some(side)) => Some(same_dir(rust, Path::new(&side.lib_dir))),
        _ => None,
    };
    let summary = json!({
        "device": device_name(device),
        "threads": threads,
        "batch": config.batch,
        "size": sizes[0],
        "sizes": sizes,
        "peer_names": peers.iter().map(|peer| peer.name()).collect::<Vec<_>>(),
        "width": config.width,
        "mixed_precision_type": mixed.map(Precision::name),
        "warmup": config.warmup,
        "iterations": config.iterations,
        "rounds": rounds,
        "quick": quick,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "torch": {
            "rust_lib_dir": rust_lib_dir.as_ref().map(|dir| dir.display().to_string()),
            "python": python.as_ref().map(|python| python.display().to_string()),
            "python_torch": python_side.as_ref().map(|side| side.torch.clone()),
            "python_lib_dir": python_side.as_ref().map(|side| side.lib_dir.clone()),
            "same_install": same_install,
        },
        "throughput": rows.iter().map(|row| json!({
            "model": row.model.name(),
            "size": row.size,
            "mixed_precision": row.mixed_precision,
            "rust": row.rust,
            "python": row.python,
            "ratio": row.python.map(|python| row.rust.ratio(python)),
        })).collect::<Vec<_>>(),
        "rust": by_model(&rows, sizes[0]),
        "peers": by_peer(&rows, sizes[0]),
        "by_size": sizes.iter().map(|&size| (size.to_string(), json!({
            "rust": by_model(&rows, size),
            "peers": by_peer(&rows, size),
        }))).collect::<serde_json::Map<_, _>>(),
        "memory": memory,
        "training_runs": runs,
        "wall_seconds": started.elapsed().as_secs_f64(),
    });
    print_report(
        &summary,
        &rows,
        memory.as_ref(),
        &runs,
        python_side.as_ref(),
        same_install,
    );
    if let Some(out) = &args.out {
        write_outputs(out, &summary, &rows)?;
    }
    Ok(())
}

/// The models of `--models`, checked (an unknown or empty list is an error).
fn parse_models(names: &[String]) -> anyhow::Result<Vec<BenchModel>> {
    let models = names
        .iter()
        .filter(|name| !name.trim().is_empty())
        .map(|name| {
            BenchModel::parse(name)
                .with_context(|| format!("unknown model `{name}` (expected resnet18 or small_cnn)"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if models.is_empty() {
        bail!("--models needs at least one of resnet18, small_cnn");
    }
    Ok(models)
}

/// The progress bar of a run of `steps` steps on `device`.
fn progress_bar(steps: usize, device: tch::Device) -> ProgressBar {
    let progress = ProgressBar::new(steps as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("bench trainer on {}", device_name(device)));
    progress
}

/// The measured step's shape from the arguments (`--quick`'s smaller defaults), checked.
fn step_config(args: &TrainerBenchArgs, device: tch::Device) -> anyhow::Result<StepConfig> {
    let quick = args.quick;
    let config = StepConfig {
        device,
        batch: args.batch.unwrap_or(if quick { 8 } else { 32 }),
        size: args.size.first().copied().unwrap_or(32),
        warmup: if quick { 1 } else { 3 },
        iterations: args.iterations.unwrap_or(match (quick, device.is_cuda()) {
            (true, _) => 2,
            (false, true) => 100,
            (false, false) => 20,
        }),
        width: args.width.unwrap_or(if quick {
            0.25
        } else {
            ModelConfig::for_device(device).width
        }),
        mixed_precision: false,
    };
    if config.batch < 1 {
        bail!("--batch must be positive (got {})", config.batch);
    }
    if let Some(size) = args.size.iter().find(|&&size| size < 1) {
        bail!("--size must be positive (got {size})");
    }
    if config.width.is_nan() || config.width <= 0.0 {
        bail!("--width must be positive (got {})", config.width);
    }
    Ok(config)
}

/// The best of `rounds` rounds of every model's training steps at `config.size`, in Rust and
/// (with `python`) in PyTorch as every peer, at each precision (mixed precision: the first peer
/// with `--amp`); with the Python side's last report.
fn measure_throughput(
    models: &[BenchModel],
    config: &StepConfig,
    (precisions, peers): (&[bool], &[Peer]),
    (rounds, threads): (usize, usize),
    python: Option<&Path>,
    progress: &ProgressBar,
) -> anyhow::Result<(Vec<Row>, Option<PythonSide>)> {
    let mut rows = Vec::new();
    let mut python_side: Option<PythonSide> = None;
    for &mixed_precision in precisions {
        let config = StepConfig {
            mixed_precision,
            ..*config
        };
        let peers = if mixed_precision { &peers[..1] } else { peers };
        let mut rust_best = vec![Throughput::default(); models.len()];
        // Per peer, per model: the best throughput and the first steps' seconds.
        let mut peer_best = vec![vec![(Throughput::default(), 0.0_f64); models.len()]; peers.len()];
        for round in 1..=rounds {
            for (index, &model) in models.iter().enumerate() {
                progress.set_message(format!(
                    "[{size},{size},3] round {round}: {} (Rust)",
                    model.name(),
                    size = config.size
                ));
                rust_best[index] = rust_best[index].best(measure::measure_steps(model, &config)?);
                progress.inc(1);
            }
            let Some(python) = python else { continue };
            for (best, &peer) in peer_best.iter_mut().zip(peers) {
                progress.set_message(format!(
                    "[{size},{size},3] round {round}: Python, {}",
                    peer.name(),
                    size = config.size
                ));
                let side = measure::run_python(python, models, &config, threads, peer)?;
                for (index, model) in models.iter().enumerate() {
                    let measured = side.results.get(model.name()).copied().with_context(|| {
                        format!(
                            "the Python side ({}) did not report {}",
                            peer.name(),
                            model.name()
                        )
                    })?;
                    let warmup = side
                        .warmup_seconds
                        .get(model.name())
                        .copied()
                        .unwrap_or(0.0);
                    best[index] = (best[index].0.best(measured), best[index].1.max(warmup));
                }
                python_side = Some(side);
                progress.inc(1);
            }
        }
        for (index, &model) in models.iter().enumerate() {
            rows.push(Row {
                model,
                size: config.size,
                mixed_precision,
                rust: rust_best[index],
                python: python.map(|_| peer_best[0][index].0),
                peers: if python.is_some() && !mixed_precision {
                    peers
                        .iter()
                        .zip(&peer_best)
                        .map(|(&peer, best)| (peer, best[index].0, best[index].1))
                        .collect()
                } else {
                    Vec::new()
                },
            });
        }
    }
    Ok((rows, python_side))
}

/// `values` without repeats, in their first order.
fn distinct<T: PartialEq + Copy>(values: &[T]) -> Vec<T> {
    let mut seen = Vec::new();
    for &value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// `{model: {train, infer}}` of the Rust side's float32 rows at `size` (`summary.json`'s `rust`).
fn by_model(rows: &[Row], size: i64) -> serde_json::Value {
    rows.iter()
        .filter(|row| row.size == size && !row.mixed_precision)
        .map(|row| (row.model.name().to_owned(), json!(row.rust)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// `{peer: {model: {train, infer, warmup_seconds}}}` of the float32 rows at `size`
/// (`summary.json`'s `peers`).
fn by_peer(rows: &[Row], size: i64) -> serde_json::Value {
    let mut peers = serde_json::Map::new();
    for row in rows
        .iter()
        .filter(|row| row.size == size && !row.mixed_precision)
    {
        for (peer, throughput, warmup) in &row.peers {
            if let serde_json::Value::Object(models) =
                peers.entry(peer.name()).or_insert_with(|| json!({}))
            {
                models.insert(
                    row.model.name().to_owned(),
                    json!({
                        "train": throughput.train,
                        "infer": throughput.infer,
                        "warmup_seconds": warmup,
                    }),
                );
            }
        }
    }
    peers.into()
}

/// Writes summary.json and throughput.svg to `out`.
fn write_outputs(out: &Path, summary: &serde_json::Value, rows: &[Row]) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create `{}`", out.display()))?;
    write(
        &out.join("summary.json"),
        &(serde_json::to_string_pretty(summary)? + "\n"),
    )?;
    write(&out.join("throughput.svg"), &throughput_svg(rows, summary))?;
    println!("wrote {}/{{summary.json, throughput.svg}}", out.display());
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Runs the memory check in a child process of this binary and reads its JSON line.
fn memory_in_child(examples: usize, threads: usize) -> anyhow::Result<MemoryReport> {
    let exe = std::env::current_exe().context("cannot find this binary to run the memory check")?;
    let output = Command::new(&exe)
        .args(["bench", "trainer", "--memory-child"])
        .args(["--memory-examples", &examples.to_string()])
        .args(["--threads", &threads.to_string()])
        .output()
        .with_context(|| format!("cannot run `{}`", exe.display()))?;
    if !output.status.success() {
        bail!(
            "the memory check failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .with_context(|| format!("the memory check printed no JSON: {stdout}"))?;
    Ok(serde_json::from_str(line)?)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

/// With `--mixed-precision`, whole ResNet-18 training runs at `config`'s size, batch and width,
/// mixed precision off then on (`--run-examples`, `--run-epochs`); none without it.
fn training_runs(
    args: &TrainerBenchArgs,
    config: &StepConfig,
    progress: &ProgressBar,
) -> anyhow::Result<Vec<RunReport>> {
    let mut runs = Vec::new();
    if !args.mixed_precision {
        return Ok(runs);
    }
    let examples = args
        .run_examples
        .unwrap_or(if args.quick { 500 } else { 10_000 });
    let epochs = args.run_epochs;
    for mixed_precision in [false, true] {
        progress.set_message(format!(
            "training run, mixed precision {}",
            if mixed_precision { "on" } else { "off" }
        ));
        runs.push(measure::training_run(
            "resnet18",
            config.device,
            (config.size, config.batch, config.width),
            examples,
            epochs,
            mixed_precision,
        )?);
        progress.inc(1);
    }
    Ok(runs)
}

/// A row's name in the table and the plot: `resnet18 224` (`mixed` added for mixed precision,
/// whose type `summary.json`'s `mixed_precision_type` names).
fn row_name(row: &Row) -> String {
    format!(
        "{} {}{}",
        row.model.name(),
        row.size,
        if row.mixed_precision { " mixed" } else { "" }
    )
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn print_report(
    summary: &serde_json::Value,
    rows: &[Row],
    memory: Option<&MemoryReport>,
    runs: &[RunReport],
    python: Option<&PythonSide>,
    same_install: Option<bool>,
) {
    println!(
        "{}, {} threads, batch {}, images [{sizes},{sizes},3], {} timed steps x {} rounds, ResNet-18 width x{}{}",
        summary["device"].as_str().unwrap_or("?"),
        summary["threads"],
        summary["batch"],
        summary["iterations"],
        summary["rounds"],
        summary["width"],
        match python {
            Some(side) => format!(", Python torch {}", side.torch),
            None => String::new(),
        },
        sizes = summary["sizes"]
            .as_array()
            .map(|sizes| sizes.iter().map(ToString::to_string).collect::<Vec<_>>())
            .unwrap_or_default()
            .join("|"),
    );
    if same_install == Some(false) {
        println!(
            "warning: the Python side uses another torch install ({}) than this binary ({})",
            python.map_or("?", |side| side.lib_dir.as_str()),
            summary["torch"]["rust_lib_dir"].as_str().unwrap_or("?")
        );
    }
    println!(
        "{:<16} {:>13} {:>13} {:>7} {:>13} {:>13} {:>7}   (images/s)",
        "model", "train rust", "train python", "ratio", "infer rust", "infer python", "ratio"
    );
    let cell = |value: Option<f64>| value.map_or("-".to_owned(), |value| format!("{value:.1}"));
    let ratio = |value: Option<f64>| value.map_or("-".to_owned(), |value| format!("{value:.3}"));
    for row in rows {
        let name = row_name(row);
        let ratios = row.python.map(|python| row.rust.ratio(python));
        println!(
            "{name:<16} {:>13} {:>13} {:>7} {:>13} {:>13} {:>7}",
            cell(Some(row.rust.train)),
            cell(row.python.map(|python| python.train)),
            ratio(ratios.map(|r| r.train)),
            cell(Some(row.rust.infer)),
            cell(row.python.map(|python| python.infer)),
            ratio(ratios.map(|r| r.infer)),
        );
    }
    for row in rows.iter().filter(|row| row.peers.len() > 1) {
        for (peer, throughput, warmup) in &row.peers {
            let ratio = row.rust.ratio(*throughput);
            println!(
                "{:<16} peer {:<8} train {:>10.1} (ratio {:.3})  infer {:>10.1} (ratio {:.3})  first steps {:.2} s",
                row_name(row),
                peer.name(),
                throughput.train,
                ratio.train,
                throughput.infer,
                ratio.infer,
                warmup
            );
        }
    }
    if let Some(memory) = memory {
        println!(
            "memory ({} width x{}, batch {}, {} examples, CPU): peak RSS grew by {:.1} MB (baseline \
             {:.1} MB); bound = model {:.1} MB x5 + activations {:.1} MB = {:.1} MB; ratio {:.2} \
             (target <= 2){}",
            memory.candidate,
            memory.width,
            memory.batch,
            memory.examples,
            mb(memory
                .peak_rss_bytes
                .saturating_sub(memory.baseline_rss_bytes)),
            mb(memory.baseline_rss_bytes),
            mb(memory.parameter_bytes),
            mb(memory.activation_bytes),
            mb(memory.bound_bytes),
            memory.ratio,
            if memory.ratio <= 2.0 { "" } else { "  OVER" }
        );
    }
    for run in runs {
        println!(
            "training run {} (mixed precision {}): {} train examples x {} epochs in {:.1}s = {:.1} \
             images/s, quality {}{}",
            run.candidate,
            if run.mixed_precision { "on" } else { "off" },
            run.n_train,
            run.epochs,
            run.seconds,
            run.images_per_second,
            run.quality.map_or("-".to_owned(), |q| format!("{q:.3}")),
            run.failure
                .as_ref()
                .map_or(String::new(), |reason| format!(", FAILED: {reason}"))
        );
    }
}

/// A grouped bar chart of images/s (train and infer, Rust and Python, per model) as plain SVG (the
/// viewer draws the text, so no font file is needed).
fn throughput_svg(rows: &[Row], summary: &serde_json::Value) -> String {
    let bars: Vec<(String, f64, &str)> = rows
        .iter()
        .flat_map(|row| {
            let name = row_name(row);
            let mut bars = vec![
                (format!("{name} train rust"), row.rust.train, "#d95f02"),
                (format!("{name} infer rust"), row.rust.infer, "#fdae6b"),
            ];
            if let Some(python) = row.python {
                bars.insert(1, (format!("{name} train python"), python.train, "#1b9e77"));
                bars.push((format!("{name} infer python"), python.infer, "#a1d99b"));
            }
            bars
        })
        .collect();
    let max = bars.iter().map(|bar| bar.1).fold(0.0, f64::max).max(1e-9);
    let (left, bar_height, gap, chart_width) = (220.0, 22.0, 6.0, 560.0);
    let height = 60.0 + bars.len() as f64 * (bar_height + gap) + 20.0;
    let width = left + chart_width + 120.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"10\" y=\"24\" font-size=\"15\">easeml bench trainer: images/s \
         on {}, batch {}, {} threads</text>\n",
        summary["device"].as_str().unwrap_or("?"),
        summary["batch"],
        summary["threads"]
    );
    for (index, (label, value, color)) in bars.iter().enumerate() {
        let y = 45.0 + index as f64 * (bar_height + gap);
        let length = value / max * chart_width;
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\n<rect x=\"{left}\" \
             y=\"{y:.1}\" width=\"{length:.1}\" height=\"{bar_height}\" fill=\"{color}\"/>\n<text \
             x=\"{:.1}\" y=\"{:.1}\">{value:.1}</text>\n",
            left - 8.0,
            y + 16.0,
            left + length + 6.0,
            y + 16.0
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
