//! The replay benchmark without the CLI (no libtorch to link): for fast iteration on policies.
//!
//! `cargo run --release -p easeml-scheduler --example replay -- DATASET [OPTIONS]` with DATASET
//! `delgado179`, `easeml-dl`, `synthetic:SIGMA_M,ALPHA` or `matrix:QUALITY_FILE[,COST_FILE]` (tables from `$EASEML_SHARED_DATA`, else
//! `../shared/data`). Options: `--cost-aware`, `--repeats N` (10), `--test-users N` (10),
//! `--seed S` (0), `--policies a,b,...`, `--kernel-fraction F`, `--hybrid-patience S`, `--line8 ucb_gap|expected_improvement`,
//! `--threads N` (1), `--amplitude-prior C` (1; 0 = off), `--history-covariance cv|off|W` (the weight
//! of the history's covariance in `default_history_covariance`'s kernel; cross-validated by default), `--beta-scale F`, `--delta D`,
//! `--no-ceiling` (regret estimates not clipped to quality 1), `--parallel K` (1; K concurrent
//! runs, x = wall-clock), `--no-hallucination` (GP-BUCB off), `--out FILE` (writes summary.json). Prints the cost to reach each loss level
//! and the default policy's speed-up against every other policy (Hybrid's when `default` is not run). `easeml bench scheduler` is the interface of
//! record (plots, curves.csv); this example prints the same numbers.

use std::path::PathBuf;

use easeml_bench::dataset::{self, SyntheticSpec};
use easeml_bench::replay::{LOSS_LEVELS, PolicyName, ReplayConfig, run_replay};
use easeml_scheduler::kernel::HistoryCovariance;
use easeml_scheduler::picker::Line8Rule;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let Some(spec) = arguments.first().cloned() else {
        return Err("usage: replay DATASET [--cost-aware] [--repeats N] ...".into());
    };
    let mut config = ReplayConfig {
        repeats: 10,
        policies: vec![
            PolicyName::Default,
            PolicyName::Hybrid,
            PolicyName::Greedy,
            PolicyName::RoundRobin,
            PolicyName::Random,
        ],
        ..ReplayConfig::default()
    };
    let mut out: Option<PathBuf> = None;
    let mut index = 1;
    while index < arguments.len() {
        let flag = arguments[index].as_str();
        let value = || {
            arguments
                .get(index + 1)
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--cost-aware" => {
                config.cost_aware = true;
                index += 1;
                continue;
            }
            "--no-ceiling" => {
                config.quality_ceiling = None;
                index += 1;
                continue;
            }
            "--no-hallucination" => {
                config.hallucinate_in_flight = false;
                index += 1;
                continue;
            }
            "--repeats" => config.repeats = value()?.parse()?,
            "--test-users" => config.test_users = value()?.parse()?,
            "--seed" => config.seed = value()?.parse()?,
            "--kernel-fraction" => config.kernel_user_fraction = value()?.parse()?,
            "--hybrid-patience" => config.hybrid_patience = value()?.parse()?,
            "--line8" => {
                config.line8_rule = Some(
                    Line8Rule::from_name(&value()?)
                        .ok_or("--line8 takes ucb_gap or expected_improvement")?,
                )
            }
            "--history-covariance" => {
                config.history_covariance = HistoryCovariance::parse(&value()?)?
            }
            "--threads" => config.threads = value()?.parse()?,
            "--parallel" => config.parallel = value()?.parse()?,
            "--amplitude-prior" => {
                let strength: f64 = value()?.parse()?;
                config.amplitude_prior_strength = (strength > 0.0).then_some(strength);
            }
            "--beta-scale" => config.beta_scale = value()?.parse()?,
            "--delta" => config.ucb_delta = value()?.parse()?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--policies" => {
                config.policies = value()?
                    .split(',')
                    .map(PolicyName::parse)
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown option `{other}`").into()),
        }
        index += 2;
    }
    let data_dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data"));
    let data = if let Some(parameters) = spec.strip_prefix("synthetic:") {
        let (sigma_m, alpha) = parameters
            .split_once(',')
            .ok_or("synthetic:SIGMA_M,ALPHA")?;
        dataset::generate_synthetic(
            SyntheticSpec::paper(sigma_m.parse()?, alpha.parse()?),
            config.seed,
        )?
    } else if spec == "delgado179" {
        dataset::load_delgado179(&data_dir)?
    } else if spec == "easeml-dl" {
        dataset::load_easeml_deeplearning(&data_dir)?
    } else if let Some(files) = spec.strip_prefix("matrix:") {
        dataset::load_matrix_spec(files)?
    } else {
        return Err(format!("unknown dataset `{spec}`").into());
    };
    let outcome = run_replay(&data, &config, &|| {})?;
    let summary = outcome.summary();
    println!(
        "{} ({}), {} repetitions x {} test users, mean budget {:.2}, {:.1}s",
        outcome.dataset,
        summary["mode"].as_str().unwrap_or(""),
        config.repeats,
        outcome.config.test_users,
        summary["mean_budget"].as_f64().unwrap_or(0.0),
        outcome.wall_seconds
    );
    print!("{:<22}", "policy");
    for level in LOSS_LEVELS {
        print!(" {:>9}", level);
    }
    let reference = if summary["policies"]["default"].is_object() {
        "default"
    } else {
        "hybrid"
    };
    println!(" {:>10}  {reference}'s speed-up per level", "final");
    for (name, entry) in summary["policies"].as_object().into_iter().flatten() {
        print!("{name:<22}");
        for level in LOSS_LEVELS {
            match entry["cost_to_mean_loss"][format!("{level}")].as_f64() {
                Some(cost) => print!(" {cost:>9.2}"),
                None => print!(" {:>9}", "-"),
            }
        }
        print!(
            " {:>10.4} ",
            entry["final_mean_loss"].as_f64().unwrap_or(f64::NAN)
        );
        if name != reference {
            let speedups = &summary["policies"][reference]["speedup_vs"][name.as_str()];
            for level in LOSS_LEVELS {
                match speedups[format!("{level}")].as_f64() {
                    Some(ratio) => print!(" {ratio:.2}"),
                    None => print!(" -"),
                }
            }
        }
        println!();
    }
    if let Some(out) = out {
        std::fs::write(out, serde_json::to_string_pretty(&summary)? + "\n")?;
    }
    Ok(())
}
