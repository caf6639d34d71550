//! TrimTuner's replay on its published CNN table (skipped when ../shared/data is absent).

use std::path::PathBuf;

use easeml_bench::tuner::{TunerReplayConfig, load_table, run_replay};
use easeml_tuner::{LevelTrend, Policy};

fn cnn_table() -> Option<PathBuf> {
    let dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    let path = dir.join("trimtuner/cnn.csv");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipping: TrimTuner's table not found at {} (set EASEML_SHARED_DATA)",
            path.display()
        );
        None
    }
}

#[test]
fn table_two_is_reproduced_on_the_cnn_table() {
    let Some(path) = cnn_table() else { return };
    let table = load_table(&path).unwrap();
    assert_eq!(table.rows.len(), 1440);
    assert_eq!(table.sizes, vec![1000, 6000, 15000, 30000, 60000]);
    assert_eq!(table.space.n_configurations(), 288);
    let table_two = table.table_two(0.1);
    assert_eq!(table_two.full_configurations, 288);
    assert_eq!(table_two.feasible, 111);
    assert_eq!(table_two.within_five_percent, 39);
}

#[test]
fn a_short_replay_runs_on_the_cnn_table() {
    let Some(path) = cnn_table() else { return };
    let table = load_table(&path).unwrap();
    let config = TunerReplayConfig {
        policies: vec![Policy::TrimTunerDt, Policy::EicUsd],
        seeds: 1,
        iterations: 7,
        max_cost: 0.1,
        threads: 1,
        level_trend: LevelTrend::Cost,
    };
    let outcome = run_replay(&table, &config, &|| {});
    let trimtuner = &outcome.runs[&Policy::TrimTunerDt][0];
    assert_eq!(trimtuner.steps.len(), 7);
    // The initial design: one configuration at the four sub-sampled sizes.
    assert!(
        trimtuner.steps[..4]
            .iter()
            .all(|s| s.initial && s.rate < 1.0)
    );
    let eic = &outcome.runs[&Policy::EicUsd][0];
    assert!(eic.steps.iter().all(|s| s.rate == 1.0));
}
