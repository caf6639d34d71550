//! Replays TrimTuner's evaluation over one of its tables without the CLI.
//!
//! `cargo run --release -p easeml-bench --example tuner_replay -- TABLE.csv [MAX_COST] [SEEDS]
//! [ITERATIONS] [POLICIES] [LEVEL_TREND]` (defaults: 0.1, 10, 44, every policy (comma-separated),
//! `cost`; `neither` is TrimTuner's code). Prints Table II and `summary.json`;
//! `EASEML_TUNER_TRACE=1` also prints every test of every run to stderr.

use std::path::PathBuf;

use easeml_bench::tuner::{TunerReplayConfig, load_table, run_replay};
use easeml_tuner::{LevelTrend, Policy};

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = arguments.first().map(PathBuf::from) else {
        eprintln!("usage: tuner_replay TABLE.csv [MAX_COST] [SEEDS] [ITERATIONS] [POLICIES]");
        std::process::exit(2);
    };
    let max_cost = arguments.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.1);
    let seeds = arguments.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let iterations = arguments.get(3).and_then(|a| a.parse().ok()).unwrap_or(44);
    let policies = match arguments.get(4) {
        Some(list) => list
            .split(',')
            .map(|name| Policy::from_name(name).unwrap_or_else(|| panic!("unknown policy {name}")))
            .collect(),
        None => Policy::ALL.to_vec(),
    };
    let level_trend = match arguments.get(5) {
        Some(name) => LevelTrend::from_name(name)
            .unwrap_or_else(|| panic!("unknown level trend {name} (neither, cost, both)")),
        None => LevelTrend::Cost,
    };
    let table = load_table(&path).unwrap_or_else(|error| panic!("{error}"));
    let config = TunerReplayConfig {
        policies,
        seeds,
        iterations,
        max_cost,
        level_trend,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let outcome = run_replay(&table, &config, &|| eprint!("."));
    eprintln!();
    // `EASEML_TUNER_TRACE=1`: every test of every run (policy, seed, point, rate, cumulative USD,
    // the incumbent and its true full-data accuracy and feasibility).
    if std::env::var_os("EASEML_TUNER_TRACE").is_some() {
        for (policy, runs) in &outcome.runs {
            for run in runs {
                for step in &run.steps {
                    eprintln!(
                        "{} seed {} point {} (config {}, s {:.3}) usd {:.3} incumbent {:?} accuracy {:.4} feasible {}",
                        policy.name(),
                        run.seed,
                        step.point,
                        table.space.configuration_of(step.point),
                        step.rate,
                        step.cumulative_cost,
                        step.incumbent,
                        step.incumbent_accuracy,
                        step.incumbent_feasible
                    );
                }
            }
        }
    }
    println!("{}", outcome.table_two_text());
    println!(
        "{}",
        serde_json::to_string_pretty(&outcome.summary()).expect("JSON")
    );
}
