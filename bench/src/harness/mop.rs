//! `easeml bench mop --simulate` (`--real`: `mop_real.rs`): simulate Cerebro's model hopper parallelism (the randomized
//! scheduler), a lock-step MOP rotation and task parallelism on replicated data over seeded
//! instances ([`crate::mop`]); print a table, write `summary.json` and `makespan.svg` /
//! `makespan.png` (mean and max makespan over the lower bound per strategy), and with `--sweep`
//! the same over several model counts (`sweep.svg` / `sweep.png`).

use std::path::PathBuf;

use crate::mop::{MopConfig, MopOutcome, Strategy, run as simulate, sweep_models};
use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::harness::plot::{BarPlot, write_bar_plots};

/// Arguments of `easeml bench mop`.
#[derive(Debug, Args)]
pub struct MopBenchArgs {
    /// Simulate the schedules (unit times drawn per seed).
    #[arg(long, conflicts_with = "real")]
    simulate: bool,
    /// Train for real instead: K models of one synthetic app in four modes (one worker; task
    /// parallelism over `--workers` worker processes; MOP over them; data parallelism over
    /// them), `summary.json` with each mode's wall time, final qualities and rows held
    /// (`mop_real.rs`).
    #[arg(long)]
    real: bool,
    /// `--real`: the app's examples.
    #[arg(long, default_value_t = 4000, value_name = "N")]
    examples: usize,
    /// `--real`: the workers' devices, in turn, as `easeml train --devices` takes them (default:
    /// the one $EASEML_DEVICE names, else CUDA when available, else the CPU); several workers may
    /// share one GPU (`cuda:0,cuda:0`).
    #[arg(long, value_name = "cpu,cuda:0,...", value_delimiter = ',')]
    devices: Option<Vec<String>>,
    /// Models trained (M).
    #[arg(long, value_name = "M")]
    models: usize,
    /// Workers (P); the data is cut into P partitions, worker i holding partition i.
    #[arg(long, value_name = "P")]
    workers: usize,
    /// Epochs per model.
    #[arg(long, default_value_t = 10, value_name = "E")]
    epochs: usize,
    /// Workers of different speeds (slowness uniform over 1x-3x); else all equal. Model costs
    /// vary over a 10x range (log-uniform) in both cases.
    #[arg(long)]
    heterogeneous: bool,
    /// Instances simulated (seeds 1..=N).
    #[arg(long, default_value_t = 20, value_name = "N")]
    seeds: usize,
    /// Seconds to copy one data partition to a worker: task parallelism first copies the P-1
    /// partitions each worker lacks (reported with and without it).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    copy_seconds_per_partition: f64,
    /// Also simulate P/2, P, 2P, 4P and 8P models on the same workers (summary.json's `sweep`,
    /// sweep.svg / sweep.png).
    #[arg(long)]
    sweep: bool,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The mean and max of every strategy's makespan over the lower bound of one outcome.
fn ratio_values(outcome: &MopOutcome, with_copy: bool) -> Vec<(String, f64, f64)> {
    let mut rows = Vec::new();
    for strategy in Strategy::ALL {
        let ratios = outcome.ratios(strategy);
        rows.push((strategy.name().to_owned(), ratios));
        if strategy == Strategy::TaskParallel && with_copy {
            rows.push((
                "task_parallel + copy".to_owned(),
                outcome.task_parallel_with_copy_ratios(),
            ));
        }
    }
    rows.into_iter()
        .map(|(name, ratios)| {
            let mean = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
            let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (name, mean, max)
        })
        .collect()
}

/// Each sweep point's ratios, for summary.json.
fn sweep_summary(sweep: &[MopOutcome], with_copy: bool) -> Value {
    let points: Vec<Value> = sweep
        .iter()
        .map(|point| {
            let mut strategies = serde_json::Map::new();
            for (name, mean, max) in ratio_values(point, with_copy) {
                strategies.insert(
                    name,
                    json!({ "makespan_over_lower_bound": { "mean": mean, "max": max } }),
                );
            }
            json!({
                "models": point.config.models,
                "seeds_bound_by_a_model": point.seeds_bound_by_a_model(),
                "strategies": strategies,
            })
        })
        .collect();
    Value::Array(points)
}

/// The makespan plot (and with `--sweep` the sweep's), notes printed.
fn write_plots(
    args: &MopBenchArgs,
    rows: &[(String, f64, f64)],
    sweep: &[MopOutcome],
    with_copy: bool,
) -> anyhow::Result<()> {
    let setting = if args.heterogeneous {
        "heterogeneous"
    } else {
        "homogeneous"
    };
    let plot = BarPlot {
        title: format!(
            "makespan / lower bound: M={}, P={}, E={}, {setting}, {} seeds",
            args.models, args.workers, args.epochs, args.seeds
        ),
        y_label: "makespan / open-shop lower bound".to_owned(),
        series: rows.iter().map(|(name, _, _)| name.clone()).collect(),
        groups: vec![
            (
                "mean over seeds".to_owned(),
                rows.iter().map(|&(_, mean, _)| Some(mean)).collect(),
            ),
            (
                "max over seeds".to_owned(),
                rows.iter().map(|&(_, _, max)| Some(max)).collect(),
            ),
        ],
    };
    let mut notes = write_bar_plots(&plot, &args.out, "makespan")?;
    if args.sweep {
        let plot = BarPlot {
            title: format!(
                "mean makespan / lower bound over models: {} workers, {} epochs, {setting}",
                args.workers, args.epochs
            ),
            y_label: "mean makespan / open-shop lower bound".to_owned(),
            series: rows.iter().map(|(name, _, _)| name.clone()).collect(),
            groups: sweep
                .iter()
                .map(|point| {
                    (
                        format!("{} models", point.config.models),
                        ratio_values(point, with_copy)
                            .into_iter()
                            .map(|(_, mean, _)| Some(mean))
                            .collect(),
                    )
                })
                .collect(),
        };
        notes.extend(write_bar_plots(&plot, &args.out, "sweep")?);
    }
    notes.dedup();
    for note in notes {
        eprintln!("note: {note}");
    }
    Ok(())
}

/// The sweep's table: each point's mean ratio per strategy.
fn print_sweep(rows: &[(String, f64, f64)], sweep: &[MopOutcome], with_copy: bool) {
    println!("sweep (mean makespan / lower bound):");
    print!("{:<10}", "models");
    for (name, _, _) in rows {
        print!(" {name:>22}");
    }
    println!(" {:>16}", "bound by a model");
    for point in sweep {
        print!("{:<10}", point.config.models);
        for (_, mean, _) in ratio_values(point, with_copy) {
            print!(" {mean:>22.4}");
        }
        println!(
            " {:>16}",
            format!("{}/{}", point.seeds_bound_by_a_model(), point.seeds.len())
        );
    }
}

/// Runs `easeml bench mop`.
pub fn run(args: &MopBenchArgs) -> anyhow::Result<()> {
    if args.real {
        return crate::harness::mop_real::run(&crate::harness::mop_real::RealArgs {
            models: args.models,
            workers: args.workers,
            epochs: args.epochs,
            examples: args.examples,
            devices: easeml_runtime::engine::local_workers::worker_devices(
                args.workers,
                args.devices.as_deref(),
            )?,
            out: args.out.clone(),
        });
    }
    if args.devices.is_some() {
        bail!("--devices is for `--real` (the simulation has no devices): drop it or add --real");
    }
    if !args.simulate {
        bail!(
            "say how: `easeml bench mop --simulate` (the schedules simulated) or `--real` (models trained)"
        );
    }
    let config = MopConfig {
        models: args.models,
        workers: args.workers,
        epochs: args.epochs,
        heterogeneous: args.heterogeneous,
        seeds: args.seeds,
        copy_seconds_per_partition: args.copy_seconds_per_partition,
    };
    config.validate().map_err(anyhow::Error::msg)?;
    let sweep_counts = if args.sweep {
        sweep_models(args.workers)
    } else {
        Vec::new()
    };
    let sweep_configs: Vec<MopConfig> = sweep_counts
        .iter()
        .map(|&models| MopConfig {
            models,
            ..config.clone()
        })
        .collect();
    for sweep_config in &sweep_configs {
        sweep_config
            .validate()
            .map_err(|e| anyhow::anyhow!("--sweep at {} models: {e}", sweep_config.models))?;
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create `{}`", args.out.display()))?;
    let bar = ProgressBar::new((args.seeds * (1 + sweep_configs.len())) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds ({elapsed})")
            .expect("a valid template"),
    );
    let tick = || bar.inc(1);
    let outcome = simulate(&config, &tick).map_err(anyhow::Error::msg)?;
    let sweep = sweep_configs
        .iter()
        .map(|c| simulate(c, &tick).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    bar.finish_and_clear();

    let mut summary = outcome.summary();
    if args.sweep {
        summary["sweep"] = sweep_summary(&sweep, config.copy_seconds() > 0.0);
    }
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )
    .context("cannot write summary.json")?;

    let with_copy = config.copy_seconds() > 0.0;
    let rows = ratio_values(&outcome, with_copy);
    write_plots(args, &rows, &sweep, with_copy)?;

    print!("{}", outcome.table_text());
    if args.sweep {
        print_sweep(&rows, &sweep, with_copy);
    }
    println!(
        "wrote summary.json, makespan.svg, makespan.png{} to {}",
        if args.sweep {
            ", sweep.svg, sweep.png"
        } else {
            ""
        },
        args.out.display()
    );
    Ok(())
}
