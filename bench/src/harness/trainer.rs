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
use indicatif::{ProgressBar, ProgressStyle};
use measure::{BenchModel, MemoryReport, PythonSide, RunReport, StepConfig, Throughput};
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
    /// Images are [SIZE, SIZE, 3].
    #[arg(long, default_value_t = 32, value_name = "SIZE")]
    size: i64,
    /// Threads of both sides (default: available cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Rounds: Rust and Python alternate, each keeps its best (default: 3; --quick: 1).
    #[arg(long, value_name = "N")]
    rounds: Option<usize>,
    /// Timed steps per measurement, after 3 untimed ones (default: 20, or 100 on CUDA; --quick: 2).
    #[arg(long, value_name = "N")]
    iterations: Option<usize>,
    /// ResNet-18's width multiplier, both sides (default: 1 = the published widths; --quick: 0.25).
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
    /// CUDA only: also measure autocast (float16) steps on both sides, and whole training runs of
    /// ResNet-18 with and without `Budget::mixed_precision`.
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
    mixed_precision: bool,
    rust: Throughput,
    python: Option<Throughput>,
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
    let models = args
        .models
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
    if args.mixed_precision && !device.is_cuda() {
        bail!("--mixed-precision needs a CUDA device (autocast only acts on CUDA)");
    }
    let config = step_config(args, device)?;
    let rounds = args.rounds.unwrap_or(if quick { 1 } else { 3 }).max(1);
    let python =
        (!args.no_python).then(|| args.python.clone().unwrap_or_else(measure::default_python));
    let precisions: Vec<bool> = if args.mixed_precision {
        vec![false, true]
    } else {
        vec![false]
    };
    let run_examples = args
        .run_examples
        .unwrap_or(if quick { 500 } else { 10_000 });

    let steps = rounds * precisions.len() * (models.len() + usize::from(python.is_some()))
        + usize::from(!args.no_memory)
        + if args.mixed_precision { 2 } else { 0 };
    let progress = ProgressBar::new(steps as u64);
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("bench trainer on {}", device_name(device)));

    let (rows, python_side) = measure_throughput(
        &models,
        &config,
        &precisions,
        (rounds, threads),
        python.as_deref(),
        &progress,
    )?;

    let memory = if args.no_memory {
        None
    } else {
        progress.set_message(format!("memory check ({memory_examples} examples, CPU)"));
        let report = memory_in_child(memory_examples, threads)?;
        progress.inc(1);
        Some(report)
    };

    let mut runs = Vec::new();
    if args.mixed_precision {
        for mixed_precision in [false, true] {
            progress.set_message(format!(
                "training run, mixed precision {}",
                if mixed_precision { "on" } else { "off" }
            ));
            runs.push(measure::training_run(
                "resnet18",
                device,
                run_examples,
                args.run_epochs,
                mixed_precision,
            )?);
            progress.inc(1);
        }
    }
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
        "size": config.size,
        "width": config.width,
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
            "mixed_precision": row.mixed_precision,
            "rust": row.rust,
            "python": row.python,
            "ratio": row.python.map(|python| row.rust.ratio(python)),
        })).collect::<Vec<_>>(),
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

/// The measured step's shape from the arguments (`--quick`'s smaller defaults), checked.
fn step_config(args: &TrainerBenchArgs, device: tch::Device) -> anyhow::Result<StepConfig> {
    let quick = args.quick;
    let config = StepConfig {
        device,
        batch: args.batch.unwrap_or(if quick { 8 } else { 32 }),
        size: args.size,
        warmup: if quick { 1 } else { 3 },
        iterations: args.iterations.unwrap_or(match (quick, device.is_cuda()) {
            (true, _) => 2,
            (false, true) => 100,
            (false, false) => 20,
        }),
        width: args.width.unwrap_or(if quick { 0.25 } else { 1.0 }),
        mixed_precision: false,
    };
    if config.batch < 1 || config.size < 1 || config.width.is_nan() || config.width <= 0.0 {
        bail!("--batch, --size and --width must be positive");
    }
    Ok(config)
}

/// The best of `rounds` rounds of every model's training steps, in Rust and (with `python`) in
/// PyTorch, at each precision; with the Python side's last report.
fn measure_throughput(
    models: &[BenchModel],
    config: &StepConfig,
    precisions: &[bool],
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
        let mut rust_best = vec![Throughput::default(); models.len()];
        let mut python_best = vec![Throughput::default(); models.len()];
        for round in 1..=rounds {
            for (index, &model) in models.iter().enumerate() {
                progress.set_message(format!("round {round}: {} (Rust)", model.name()));
                rust_best[index] = rust_best[index].best(measure::measure_steps(model, &config)?);
                progress.inc(1);
            }
            if let Some(python) = python {
                progress.set_message(format!("round {round}: Python"));
                let side = measure::run_python(python, models, &config, threads)?;
                for (index, model) in models.iter().enumerate() {
                    let measured = side.results.get(model.name()).copied().with_context(|| {
                        format!("the Python side did not report {}", model.name())
                    })?;
                    python_best[index] = python_best[index].best(measured);
                }
                python_side = Some(side);
                progress.inc(1);
            }
        }
        for (index, &model) in models.iter().enumerate() {
            rows.push(Row {
                model,
                mixed_precision,
                rust: rust_best[index],
                python: python.as_ref().map(|_| python_best[index]),
            });
        }
    }
    Ok((rows, python_side))
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
        "{}, {} threads, batch {}, [{size},{size},3] images, {} timed steps x {} rounds, ResNet-18 width x{}{}",
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
        size = summary["size"],
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
        let name = format!(
            "{}{}",
            row.model.name(),
            if row.mixed_precision { " amp" } else { "" }
        );
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
            let name = format!(
                "{}{}",
                row.model.name(),
                if row.mixed_precision { " amp" } else { "" }
            );
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
