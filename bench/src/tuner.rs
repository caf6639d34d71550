//! The replay of TrimTuner's evaluation (section IV of the paper) over its published tables.
//!
//! A table (`dataset_NN_Tensorflow/*.csv` of pedrogbmendes/TrimTuner, see PROVENANCE.md) measures
//! every configuration (VM flavour, workers, learning rate, batch size, synchronism) at every
//! training-set size. The cost of a row is TrimTuner's own formula,
//! `((workers + ps) * P / 60 + 0.3712 / 60) * (time / 60)` USD with `P` the flavour's hourly price.
//! A replay runs each policy of [`easeml_tuner`] for `seeds` seeds (seed `k` = run `k`, as the
//! code's seeds 1..10; every policy sees the same seeds), `iterations` tests each (the initial
//! design included), answering every test from the table. After each test it records the
//! cumulative cost, the incumbent and its TRUE full-data accuracy and cost (read from the table),
//! and Eq. 7's constrained accuracy `Accuracy_C`. Seeds run on threads but each run depends only
//! on its seed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use easeml_tuner::{LevelTrend, Policy, Space, Tuner, TunerConfig};
use serde_json::{Value, json};

/// The fractions of the best feasible full-data accuracy of `summary.json`'s `cost_to_optimum`.
pub const OPTIMUM_FRACTIONS: [f64; 3] = [0.9, 0.95, 0.98];

/// Hourly price (USD) of the VM flavours of TrimTuner's tables.
pub fn flavour_price(flavour: &str) -> Option<f64> {
    match flavour {
        "t2.small" => Some(0.023),
        "t2.medium" => Some(0.0464),
        "t2.xlarge" => Some(0.1856),
        "t2.2xlarge" => Some(0.3712),
        _ => None,
    }
}

/// The flavours in order of size (their index is the configuration feature, as in the code).
const FLAVOURS: [&str; 4] = ["t2.small", "t2.medium", "t2.xlarge", "t2.2xlarge"];

/// One row of a table: a configuration at one training-set size.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    /// Worker VMs.
    pub n_workers: u32,
    /// Parameter servers.
    pub n_ps: u32,
    /// Learning rate.
    pub learning_rate: f64,
    /// Batch size.
    pub batch_size: u32,
    /// Synchronous training (else asynchronous).
    pub synchronous: bool,
    /// VM flavour (e.g. `t2.small`).
    pub flavour: String,
    /// Training-set size.
    pub training_set_size: u32,
    /// Training time in seconds.
    pub training_time: f64,
    /// Accuracy in [0, 1].
    pub accuracy: f64,
    /// Cost in USD (TrimTuner's formula).
    pub cost: f64,
}

impl TableRow {
    /// The configuration features (without the size): workers, learning rate, batch size,
    /// synchronism, flavour index (the code's encoding).
    fn features(&self) -> Vec<f64> {
        let flavour = FLAVOURS
            .iter()
            .position(|f| *f == self.flavour)
            .unwrap_or(0);
        vec![
            f64::from(self.n_workers),
            self.learning_rate,
            f64::from(self.batch_size),
            if self.synchronous { 1.0 } else { 0.0 },
            flavour as f64,
        ]
    }
}

/// A TrimTuner table as a [`Space`] with the measured accuracy and cost of every point.
#[derive(Debug, Clone)]
pub struct TunerTable {
    /// The rows as read.
    pub rows: Vec<TableRow>,
    /// Configurations x sizes.
    pub space: Space,
    /// Training-set sizes, ascending (the last is the full set).
    pub sizes: Vec<u32>,
    /// Per point of `space`: (accuracy, cost).
    pub measurements: Vec<(f64, f64)>,
}

/// Reads a TrimTuner CSV (header names as in the published tables).
pub fn load_table(path: &Path) -> Result<TunerTable, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_table(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a TrimTuner CSV.
pub fn parse_table(text: &str) -> Result<TunerTable, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("empty table")?.split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| format!("no column `{name}`"))
    };
    let [
        workers,
        ps,
        rate,
        batch,
        sync,
        time,
        accuracy,
        flavour,
        size,
    ] = [
        column("n_workers")?,
        column("n_ps")?,
        column("learning_rate")?,
        column("batch_size")?,
        column("synchronism")?,
        column("training_time")?,
        column("acc")?,
        column("vm_flavor")?,
        column("training_set_size")?,
    ];
    let mut rows = Vec::new();
    for (number, line) in lines.enumerate() {
        let fields: Vec<&str> = line.split(',').collect();
        let field = |index: usize| {
            fields
                .get(index)
                .map(|f| f.trim())
                .ok_or_else(|| format!("line {}: too few fields", number + 2))
        };
        let number_of = |index: usize| -> Result<f64, String> {
            field(index)?
                .parse::<f64>()
                .map_err(|e| format!("line {}: {e}", number + 2))
        };
        let flavour_name = field(flavour)?.to_string();
        let price = flavour_price(&flavour_name)
            .ok_or_else(|| format!("line {}: unknown VM flavour `{flavour_name}`", number + 2))?;
        let n_workers = number_of(workers)? as u32;
        let n_ps = number_of(ps)? as u32;
        let training_time = number_of(time)?;
        let cost =
            (f64::from(n_workers + n_ps) * price / 60.0 + 0.3712 / 60.0) * (training_time / 60.0);
        rows.push(TableRow {
            n_workers,
            n_ps,
            learning_rate: number_of(rate)?,
            batch_size: number_of(batch)? as u32,
            synchronous: field(sync)? == "sync",
            flavour: flavour_name,
            training_set_size: number_of(size)? as u32,
            training_time,
            accuracy: number_of(accuracy)?,
            cost,
        });
    }
    table_of_rows(rows)
}

fn table_of_rows(rows: Vec<TableRow>) -> Result<TunerTable, String> {
    let mut sizes: Vec<u32> = rows.iter().map(|r| r.training_set_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let full = *sizes.last().ok_or("a table needs rows")?;
    let key = |features: &[f64]| features.iter().map(|f| f.to_bits()).collect::<Vec<u64>>();
    let mut configurations: BTreeMap<Vec<u64>, Vec<f64>> = BTreeMap::new();
    for row in &rows {
        let features = row.features();
        configurations.insert(key(&features), features);
    }
    let index: BTreeMap<Vec<u64>, usize> = configurations
        .keys()
        .enumerate()
        .map(|(i, k)| (k.clone(), i))
        .collect();
    let features: Vec<Vec<f64>> = configurations.into_values().collect();
    let levels: Vec<f64> = sizes
        .iter()
        .map(|s| f64::from(*s) / f64::from(full))
        .collect();
    let space = Space::new(&features, &levels);
    if space.levels().len() != sizes.len() {
        return Err("training-set sizes must give distinct rates".into());
    }
    let mut measurements = vec![(f64::NAN, f64::NAN); space.n_points()];
    for row in &rows {
        let configuration = index[&key(&row.features())];
        let level = sizes
            .iter()
            .position(|s| *s == row.training_set_size)
            .unwrap_or(0);
        measurements[space.point(configuration, level)] = (row.accuracy, row.cost);
    }
    if let Some(missing) = measurements.iter().position(|(a, _)| a.is_nan()) {
        return Err(format!(
            "the table is not a full grid: configuration {} lacks size {}",
            space.configuration_of(missing),
            sizes[space.level_of(missing)]
        ));
    }
    Ok(TunerTable {
        rows,
        space,
        sizes,
        measurements,
    })
}

/// Table II of the paper for one table and constraint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableTwo {
    /// Configurations at the full training set.
    pub full_configurations: usize,
    /// Of them, those whose cost meets the constraint.
    pub feasible: usize,
    /// Of the feasible, those within 5% of the best feasible accuracy.
    pub within_five_percent: usize,
    /// The best feasible full-data accuracy.
    pub best_feasible_accuracy: f64,
}

impl TunerTable {
    /// The measured (accuracy, cost) of a configuration on the full training set.
    pub fn full(&self, configuration: usize) -> (f64, f64) {
        self.measurements[self.space.full_point(configuration)]
    }

    /// Table II: feasible full-data configurations and those within 5% of the best.
    pub fn table_two(&self, max_cost: f64) -> TableTwo {
        let feasible: Vec<f64> = (0..self.space.n_configurations())
            .map(|c| self.full(c))
            .filter(|(_, cost)| *cost <= max_cost)
            .map(|(accuracy, _)| accuracy)
            .collect();
        let best = feasible.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        TableTwo {
            full_configurations: self.space.n_configurations(),
            feasible: feasible.len(),
            within_five_percent: feasible.iter().filter(|a| **a >= 0.95 * best).count(),
            best_feasible_accuracy: best,
        }
    }

    /// Eq. 7: the accuracy of a configuration at s = 1, scaled by `max / cost` when infeasible.
    pub fn constrained_accuracy(&self, configuration: usize, max_cost: f64) -> f64 {
        let (accuracy, cost) = self.full(configuration);
        if cost <= max_cost {
            accuracy
        } else {
            accuracy * max_cost / cost
        }
    }
}

/// The settings of a replay.
#[derive(Debug, Clone)]
pub struct TunerReplayConfig {
    /// Policies to run.
    pub policies: Vec<Policy>,
    /// Seeds per policy (runs `1..=seeds`).
    pub seeds: usize,
    /// Tests per run, the initial design included (the paper: 44).
    pub iterations: usize,
    /// The constraint: full-data cost at most this many USD.
    pub max_cost: f64,
    /// Worker threads.
    pub threads: usize,
    /// The level trend of `trimtuner_dt`'s trees (`LevelTrend::Cost` by default; `Neither` is
    /// TrimTuner's code).
    pub level_trend: LevelTrend,
}

/// One test of a run and the incumbent after it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStep {
    /// The point tested.
    pub point: usize,
    /// Its sub-sampling rate.
    pub rate: f64,
    /// Whether it belonged to the initial design.
    pub initial: bool,
    /// USD spent so far (this test included).
    pub cumulative_cost: f64,
    /// The incumbent configuration after the test.
    pub incumbent: Option<usize>,
    /// The incumbent's true full-data accuracy (0 without an incumbent).
    pub incumbent_accuracy: f64,
    /// Whether the incumbent's true full-data cost meets the constraint.
    pub incumbent_feasible: bool,
    /// Eq. 7 for the incumbent (0 without an incumbent).
    pub accuracy_c: f64,
    /// Seconds to recommend this test (model fits + incumbent + acquisition; 0 in the initial
    /// design).
    pub recommend_seconds: f64,
}

/// One run: a policy and a seed.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// The policy.
    pub policy: Policy,
    /// The seed.
    pub seed: u64,
    /// Every test in order.
    pub steps: Vec<ReplayStep>,
}

impl ReplayRun {
    /// USD spent until the incumbent is feasible with true accuracy >= `target` (None if never).
    pub fn cost_to_reach(&self, target: f64) -> Option<f64> {
        self.steps
            .iter()
            .find(|s| s.incumbent_feasible && s.incumbent_accuracy >= target)
            .map(|s| s.cumulative_cost)
    }
}

/// Runs one policy for one seed over a table, with the replay's iterations, constraint and level
/// trend.
pub fn run_one(
    table: &TunerTable,
    replay: &TunerReplayConfig,
    policy: Policy,
    seed: u64,
) -> ReplayRun {
    let (iterations, max_cost) = (replay.iterations, replay.max_cost);
    let mut config = TunerConfig::new(policy, max_cost, seed);
    config.level_trend = replay.level_trend;
    let mut tuner = Tuner::new(table.space.clone(), config);
    let mut steps = Vec::new();
    let mut cumulative_cost = 0.0;
    let mut record =
        |tuner: &mut Tuner, point: usize, initial: bool, seconds: f64, cumulative: f64| {
            let incumbent = tuner.incumbent();
            let (incumbent_accuracy, incumbent_feasible, accuracy_c) = match incumbent {
                Some(c) => {
                    let (accuracy, cost) = table.full(c);
                    (
                        accuracy,
                        cost <= max_cost,
                        table.constrained_accuracy(c, max_cost),
                    )
                }
                None => (0.0, false, 0.0),
            };
            steps.push(ReplayStep {
                point,
                rate: table.space.rate_of(point),
                initial,
                cumulative_cost: cumulative,
                incumbent,
                incumbent_accuracy,
                incumbent_feasible,
                accuracy_c,
                recommend_seconds: seconds,
            });
        };
    let design = tuner.initial_design();
    for &point in design.iter().take(iterations) {
        let (accuracy, cost) = table.measurements[point];
        tuner.observe(point, accuracy, cost);
        cumulative_cost += cost;
        record(&mut tuner, point, true, 0.0, cumulative_cost);
    }
    while tuner.observations().len() < iterations {
        // The models are refit lazily: time the fit (stale since the last observation), the
        // incumbent and the acquisition together, as the code's per-iteration overhead.
        let started = Instant::now();
        let Some(point) = tuner.recommend() else {
            break;
        };
        let seconds = started.elapsed().as_secs_f64();
        let (accuracy, cost) = table.measurements[point];
        tuner.observe(point, accuracy, cost);
        cumulative_cost += cost;
        let started = Instant::now();
        let _ = tuner.incumbent();
        let incumbent_seconds = started.elapsed().as_secs_f64();
        record(
            &mut tuner,
            point,
            false,
            seconds + incumbent_seconds,
            cumulative_cost,
        );
    }
    ReplayRun {
        policy,
        seed,
        steps,
    }
}

/// One policy's mean constrained-accuracy curve: `(cost, mean, sd)` per grid point.
pub type AccuracyCurve = Vec<(f64, f64, f64)>;

/// Every run of a replay.
#[derive(Debug, Clone)]
pub struct TunerReplayOutcome {
    /// The settings.
    pub config: TunerReplayConfig,
    /// Table II of the table under the constraint.
    pub table_two: TableTwo,
    /// Runs per policy, by seed.
    pub runs: BTreeMap<Policy, Vec<ReplayRun>>,
}

/// Runs every policy for every seed; `progress` is called after each finished run.
pub fn run_replay(
    table: &TunerTable,
    config: &TunerReplayConfig,
    progress: &(dyn Fn() + Sync),
) -> TunerReplayOutcome {
    let jobs: Vec<(Policy, u64)> = config
        .policies
        .iter()
        .flat_map(|&p| (1..=config.seeds as u64).map(move |s| (p, s)))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let job = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&(policy, seed)) = jobs.get(job) else {
                        break;
                    };
                    let run = run_one(table, config, policy, seed);
                    results
                        .lock()
                        .expect("no panics while holding the lock")
                        .push(run);
                    progress();
                }
            });
        }
    });
    let mut runs: BTreeMap<Policy, Vec<ReplayRun>> = BTreeMap::new();
    for run in results.into_inner().expect("threads joined") {
        runs.entry(run.policy).or_default().push(run);
    }
    for list in runs.values_mut() {
        list.sort_by_key(|r| r.seed);
    }
    TunerReplayOutcome {
        config: config.clone(),
        table_two: table.table_two(config.max_cost),
        runs,
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn standard_deviation(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    Some((values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / values.len() as f64).sqrt())
}

fn level_key(fraction: f64) -> String {
    format!("{fraction}")
}

impl TunerReplayOutcome {
    /// The mean `Accuracy_C` over seeds of each policy on a common grid of `points` costs from 0
    /// to the largest cost any run spent: `(policy, [(cost, mean, sd)])`.
    pub fn curves(&self, points: usize) -> Vec<(Policy, AccuracyCurve)> {
        let largest = self
            .runs
            .values()
            .flatten()
            .filter_map(|r| r.steps.last().map(|s| s.cumulative_cost))
            .fold(0.0, f64::max);
        let grid: Vec<f64> = (0..points)
            .map(|i| largest * i as f64 / (points.max(2) - 1) as f64)
            .collect();
        self.runs
            .iter()
            .map(|(&policy, runs)| {
                let curve = grid
                    .iter()
                    .map(|&cost| {
                        let values: Vec<f64> = runs
                            .iter()
                            .map(|r| {
                                r.steps
                                    .iter()
                                    .take_while(|s| s.cumulative_cost <= cost)
                                    .last()
                                    .map_or(0.0, |s| s.accuracy_c)
                            })
                            .collect();
                        (
                            cost,
                            mean(&values).unwrap_or(0.0),
                            standard_deviation(&values).unwrap_or(0.0),
                        )
                    })
                    .collect();
                (policy, curve)
            })
            .collect()
    }

    /// `curves.csv`: `policy,cost,accuracy_c_mean,accuracy_c_sd`.
    pub fn curves_csv(&self, points: usize) -> String {
        let mut text = String::from("policy,cost,accuracy_c_mean,accuracy_c_sd\n");
        for (policy, curve) in self.curves(points) {
            for (cost, mean, sd) in curve {
                text.push_str(&format!("{},{cost},{mean},{sd}\n", policy.name()));
            }
        }
        text
    }

    /// `summary.json`: settings, Table II, and per policy the cost to each fraction of the
    /// optimum (mean over the seeds that reach it, null if none does; per-seed values, spread),
    /// the final constrained accuracy as a fraction of the optimum, the mean sub-sampling rate of
    /// the tests after the initial design, and the recommendation time.
    pub fn summary(&self) -> Value {
        let best = self.table_two.best_feasible_accuracy;
        let mut policies = serde_json::Map::new();
        for (policy, runs) in &self.runs {
            let mut cost_to_optimum = serde_json::Map::new();
            let mut per_seed = serde_json::Map::new();
            let mut spread = serde_json::Map::new();
            let mut reached = serde_json::Map::new();
            for fraction in OPTIMUM_FRACTIONS {
                let costs: Vec<Option<f64>> = runs
                    .iter()
                    .map(|r| r.cost_to_reach(fraction * best))
                    .collect();
                let hits: Vec<f64> = costs.iter().flatten().copied().collect();
                let key = level_key(fraction);
                cost_to_optimum.insert(key.clone(), json!(mean(&hits)));
                per_seed.insert(key.clone(), json!(costs));
                reached.insert(key.clone(), json!(hits.len()));
                spread.insert(
                    key,
                    json!({
                        "sd": standard_deviation(&hits),
                        "min": hits.iter().copied().reduce(f64::min),
                        "max": hits.iter().copied().reduce(f64::max),
                    }),
                );
            }
            let finals: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.steps.last().map(|s| s.accuracy_c / best))
                .collect();
            let rates: Vec<f64> = runs
                .iter()
                .flat_map(|r| r.steps.iter().filter(|s| !s.initial).map(|s| s.rate))
                .collect();
            let seconds: Vec<f64> = runs
                .iter()
                .flat_map(|r| {
                    r.steps
                        .iter()
                        .filter(|s| !s.initial)
                        .map(|s| s.recommend_seconds)
                })
                .collect();
            let total_costs: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.steps.last().map(|s| s.cumulative_cost))
                .collect();
            policies.insert(
                policy.name().to_string(),
                json!({
                    "cost_to_optimum": cost_to_optimum,
                    "cost_to_optimum_reached": reached,
                    "cost_to_optimum_per_seed": per_seed,
                    "cost_to_optimum_spread": spread,
                    "final_accuracy_fraction": mean(&finals),
                    "final_accuracy_fraction_sd": standard_deviation(&finals),
                    "mean_s": mean(&rates),
                    "recommend_seconds_mean": mean(&seconds),
                    "recommend_seconds_sd": standard_deviation(&seconds),
                    "recommend_seconds_max": seconds.iter().copied().reduce(f64::max),
                    "total_cost_mean": mean(&total_costs),
                    "runs": runs.len(),
                }),
            );
        }
        json!({
            "seeds": self.config.seeds,
            "iterations": self.config.iterations,
            "max_cost": self.config.max_cost,
            "level_trend": self.config.level_trend.name(),
            "optimum_fractions": OPTIMUM_FRACTIONS,
            "table_two": {
                "full_configurations": self.table_two.full_configurations,
                "feasible": self.table_two.feasible,
                "within_five_percent": self.table_two.within_five_percent,
                "best_feasible_accuracy": self.table_two.best_feasible_accuracy,
            },
            "policies": policies,
        })
    }

    /// Table II as printed text.
    pub fn table_two_text(&self) -> String {
        table_two_text(&self.table_two)
    }
}

/// Table II as the paper prints it (one line).
pub fn table_two_text(table_two: &TableTwo) -> String {
    let full = table_two.full_configurations.max(1) as f64;
    format!(
        "Table II: {} full-data configurations, {} feasible ({:.1}%), {} within 5% of the best feasible accuracy {:.4} ({:.2}%)",
        table_two.full_configurations,
        table_two.feasible,
        100.0 * table_two.feasible as f64 / full,
        table_two.within_five_percent,
        table_two.best_feasible_accuracy,
        100.0 * table_two.within_five_percent as f64 / full,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small table: 2 flavours x 2 worker counts x 2 rates, sizes 1000 and 4000.
    pub(crate) fn small_table() -> String {
        let mut text = String::from(
            "_id/$oid,n_workers,timestamp,learning_rate,batch_size,iterations_counted,synchronism,training_time,standard deviation time,intermediate_acc_values,n_ps,acc,standard deviation accuarcy,vm_flavor,intermediate_test_durations,training_set_size\n",
        );
        for flavour in ["t2.small", "t2.medium"] {
            for workers in [2, 4] {
                for rate in ["0.001", "0.0001"] {
                    for size in [1000, 4000] {
                        let time = f64::from(size) / f64::from(workers) * 0.2;
                        let accuracy =
                            0.5 + 0.1 * f64::from(workers) / 4.0 + f64::from(size) / 20000.0
                                - if rate == "0.0001" { 0.05 } else { 0.0 };
                        text.push_str(&format!(
                            "id,{workers},t,{rate},16,1,sync,{time},0,0.1 0.2,1,{accuracy},0,{flavour},1 2,{size}\n"
                        ));
                    }
                }
            }
        }
        text
    }

    #[test]
    fn a_table_parses_into_a_grid_with_trimtuners_costs() {
        let table = parse_table(&small_table()).unwrap();
        assert_eq!(table.sizes, vec![1000, 4000]);
        assert_eq!(table.space.n_configurations(), 8);
        let row = &table.rows[0];
        let expected = (3.0 * 0.023 / 60.0 + 0.3712 / 60.0) * (row.training_time / 60.0);
        assert!((row.cost - expected).abs() < 1e-15);
        let table_two = table.table_two(0.02);
        assert_eq!(table_two.full_configurations, 8);
        assert!(table_two.feasible <= 8 && table_two.within_five_percent <= table_two.feasible);
        assert!(parse_table("n_workers,acc\n1,0.5\n").is_err());
    }

    #[test]
    fn a_replay_records_every_test_and_a_summary() {
        let table = parse_table(&small_table()).unwrap();
        let config = TunerReplayConfig {
            policies: vec![Policy::TrimTunerDt, Policy::Eic, Policy::Random],
            seeds: 2,
            iterations: 6,
            max_cost: 0.05,
            threads: 2,
            level_trend: LevelTrend::Cost,
        };
        let outcome = run_replay(&table, &config, &|| {});
        for runs in outcome.runs.values() {
            assert_eq!(runs.len(), 2);
            for run in runs {
                assert_eq!(run.steps.len(), 6);
                assert!(
                    run.steps
                        .windows(2)
                        .all(|w| w[0].cumulative_cost < w[1].cumulative_cost)
                );
            }
        }
        let summary = outcome.summary();
        for name in ["trimtuner_dt", "eic", "random"] {
            let policy = &summary["policies"][name];
            for level in ["0.9", "0.95", "0.98"] {
                assert!(
                    policy["cost_to_optimum"].get(level).is_some(),
                    "{name} {level}"
                );
            }
            assert!(policy["mean_s"].is_number());
        }
        assert!(
            outcome
                .curves_csv(5)
                .starts_with("policy,cost,accuracy_c_mean,accuracy_c_sd\n")
        );
        // Same seed, same run.
        let again = run_one(&table, &config, Policy::TrimTunerDt, 1);
        let points: Vec<usize> = again.steps.iter().map(|s| s.point).collect();
        let first: Vec<usize> = outcome.runs[&Policy::TrimTunerDt][0]
            .steps
            .iter()
            .map(|s| s.point)
            .collect();
        assert_eq!(points, first);
    }
}
