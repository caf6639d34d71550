//! `easeml bench tuner`: replay TrimTuner's evaluation over one of its published tables, print
//! Table II and a per-policy summary, write `summary.json`, `curves.csv` and
//! `accuracy_c.svg` / `accuracy_c.png` (Eq. 7 against the optimization cost).

use std::path::{Path, PathBuf};

use crate::tuner::{OPTIMUM_FRACTIONS, TunerReplayConfig, load_table, run_replay};
use anyhow::{Context, bail};
use clap::Args;
use easeml_tuner::{LevelTrend, Policy};
use indicatif::{ProgressBar, ProgressStyle};

use crate::harness::plot::{AccuracySeries, write_accuracy_plots};
use crate::harness::scheduler::{DATA_DIR_ENV, resolve_data_dir};

/// Arguments of `easeml bench tuner`.
#[derive(Debug, Args)]
pub struct TunerBenchArgs {
    /// The table: `trimtuner:FILE`, FILE a path or a name under the data folder's `trimtuner/`
    /// (e.g. `trimtuner:cnn.csv`).
    #[arg(long, value_name = "trimtuner:FILE")]
    table: String,
    /// The QoS constraint: the full-data training cost must not exceed USD (the paper: 0.1 for
    /// the CNN, 0.06 for the MLP, 0.02 for the RNN).
    #[arg(long, value_name = "USD")]
    max_cost: f64,
    /// Seeds per policy (runs 1..=N; the paper: 10).
    #[arg(long, default_value_t = 10, value_name = "N")]
    seeds: usize,
    /// Tests per run, the initial design included (the paper: 44).
    #[arg(long, default_value_t = 44, value_name = "N")]
    iterations: usize,
    /// Comma-separated policies: trimtuner_dt, trimtuner_gp, eic, eic_usd, fabolas, random.
    /// Default: all.
    #[arg(long, value_delimiter = ',', value_name = "a,b,...")]
    policies: Option<Vec<String>>,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Folder of the shared tables (default: $EASEML_SHARED_DATA, else ../shared/data from the
    /// repository root).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Worker threads (results do not depend on it). Default: available cores.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Which of trimtuner_dt's tree models carry a linear trend in the data share: `cost` (the
    /// default), `neither` (TrimTuner's code) or `both` (loss and cost).
    #[arg(long, default_value = "cost", value_name = "neither|cost|both")]
    level_trend: String,
}

/// The table file a `trimtuner:FILE` spec names.
fn table_path(spec: &str, data_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let Some(file) = spec.strip_prefix("trimtuner:") else {
        bail!("--table `{spec}`: expected `trimtuner:FILE`");
    };
    let direct = PathBuf::from(file);
    if direct.is_file() {
        return Ok(direct);
    }
    let dir = resolve_data_dir(data_dir)?;
    let path = dir.join("trimtuner").join(file);
    if path.is_file() {
        Ok(path)
    } else {
        bail!(
            "--table `{spec}`: neither `{file}` nor `{}` is a file (pass --data-dir DIR or set {DATA_DIR_ENV})",
            path.display()
        )
    }
}

/// Runs `easeml bench tuner`.
pub fn run(args: &TunerBenchArgs) -> anyhow::Result<()> {
    if !(args.max_cost.is_finite() && args.max_cost > 0.0) {
        bail!("--max-cost must be a positive number of USD");
    }
    if args.seeds == 0 || args.iterations == 0 {
        bail!("--seeds and --iterations must be at least 1");
    }
    let policies = match &args.policies {
        None => Policy::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|name| {
                Policy::from_name(name.trim()).with_context(|| {
                    format!(
                        "unknown policy `{name}` (known: {})",
                        Policy::ALL.map(Policy::name).join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let level_trend = LevelTrend::from_name(args.level_trend.trim()).with_context(|| {
        format!(
            "unknown --level-trend `{}` (known: {})",
            args.level_trend,
            LevelTrend::ALL.map(LevelTrend::name).join(", ")
        )
    })?;
    let path = table_path(&args.table, args.data_dir.as_deref())?;
    let table = load_table(&path).map_err(|e| anyhow::anyhow!("cannot read the table: {e}"))?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create `{}`", args.out.display()))?;
    let config = TunerReplayConfig {
        policies: policies.clone(),
        seeds: args.seeds,
        iterations: args.iterations,
        max_cost: args.max_cost,
        level_trend,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    println!(
        "{}",
        crate::tuner::table_two_text(&table.table_two(args.max_cost))
    );
    let bar = ProgressBar::new((policies.len() * args.seeds) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs ({elapsed})")
            .expect("a valid template"),
    );
    let outcome = run_replay(&table, &config, &|| bar.inc(1));
    bar.finish_and_clear();
    let summary = outcome.summary();
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )
    .context("cannot write summary.json")?;
    std::fs::write(args.out.join("curves.csv"), outcome.curves_csv(200))
        .context("cannot write curves.csv")?;
    let series: Vec<AccuracySeries> = outcome
        .curves(200)
        .into_iter()
        .map(|(policy, curve)| AccuracySeries {
            label: policy.name().to_owned(),
            points: curve
                .into_iter()
                .map(|(cost, mean, _)| (cost, mean))
                .collect(),
        })
        .collect();
    let subject = path
        .file_stem()
        .map_or_else(|| "table".to_owned(), |s| s.to_string_lossy().into_owned());
    for note in write_accuracy_plots(&subject, &series, &args.out)? {
        eprintln!("note: {note}");
    }
    println!(
        "{:<14} {:>22} {:>22} {:>22} {:>8} {:>7} {:>12}",
        "policy",
        "USD to 90% (reached)",
        "USD to 95% (reached)",
        "USD to 98% (reached)",
        "final",
        "mean s",
        "recommend s"
    );
    for policy in &policies {
        let entry = &summary["policies"][policy.name()];
        let mut line = format!("{:<14}", policy.name());
        for fraction in OPTIMUM_FRACTIONS {
            let key = format!("{fraction}");
            let cost = entry["cost_to_optimum"][&key].as_f64();
            let reached = entry["cost_to_optimum_reached"][&key].as_u64().unwrap_or(0);
            let text = match cost {
                Some(cost) => format!("{cost:.3} ({reached}/{})", args.seeds),
                None => format!("never (0/{})", args.seeds),
            };
            line.push_str(&format!(" {text:>22}"));
        }
        let number = |key: &str| {
            entry[key]
                .as_f64()
                .map_or("-".to_owned(), |v| format!("{v:.3}"))
        };
        line.push_str(&format!(
            " {:>8} {:>7} {:>12}",
            number("final_accuracy_fraction"),
            number("mean_s"),
            number("recommend_seconds_mean")
        ));
        println!("{line}");
    }
    println!(
        "wrote summary.json, curves.csv, accuracy_c.svg, accuracy_c.png to {}",
        args.out.display()
    );
    Ok(())
}
