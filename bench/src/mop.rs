//! A discrete-event simulator of Cerebro's model hopper parallelism (MOP) against task
//! parallelism: `easeml bench mop --simulate` drives it.
//!
//! # The workload
//!
//! `models` models train for `epochs` epochs each over `workers` workers. The data is cut into as
//! many partitions as workers; worker `p` holds partition `p`. A *unit* is one model trained for
//! one sub-epoch on one partition; its time is `c_m * s_p`: the model's cost times the worker's
//! slowness. The costs `c_m` are log-uniform over `[1, 10)` (a 10x range, `10^U[0,1)`) in both
//! settings; the slowness `s_p` is uniform over `[1, 3]` when `heterogeneous`, else 1. An
//! instance depends only on its seed ([`Instance::generate`]).
//!
//! # The strategies
//!
//! - [`Strategy::MopRandomized`]: Algorithm 1 of the Cerebro paper. At time 0 and after every
//!   completion, the idle workers are visited in index order and each picks, uniformly at random,
//!   one eligible model: a model training nowhere whose current epoch has not visited that
//!   worker's partition (a model's epoch ends once it has visited all partitions; its next epoch
//!   starts then, with no barrier across models). A worker with no eligible model waits for the
//!   next completion.
//! - [`Strategy::TaskParallel`]: every worker holds a copy of all the data (`workers` partitions
//!   each) and trains a model whole, all its epochs: on worker `p` an epoch takes
//!   `sum over partitions of c_m * s_p = workers * c_m * s_p`. Models go in
//!   longest-processing-time order (largest `c_m` first) to the worker that would finish them
//!   earliest (LPT with earliest completion time, a strong baseline: Celery in the paper uses a
//!   FIFO queue). Copying the data costs `copy_seconds_per_partition * (workers - 1)` before any
//!   worker starts (each worker receives the partitions it lacks, the workers copying in
//!   parallel): the makespan is reported with and without it.
//! - [`Strategy::RoundRobin`]: the naive MOP schedule in lock-step rounds. With
//!   `n = max(models, workers)` slots, in round `k` worker `p` trains model `(p + k) mod n` when
//!   that slot is a model (`< models`) and idles otherwise; a round ends when its slowest unit
//!   ends. Rounds `e*n .. (e+1)*n` are epoch `e` of every model, so there are `epochs * n` rounds.
//! - [`Strategy::MopEpochFirst`]: Algorithm 1 in the order the service leases units
//!   (`easeml_engine::mop`'s lease ranks: epoch first, then Cerebro's random shuffle): an idle
//!   worker draws uniformly among its eligible models *in the earliest epoch*, so the model with
//!   the most epochs left goes first. Uniform choice lets the longest chains fall behind when the
//!   lower bound's two terms are close (16 models on 8 workers: mean 1.14 against 1.08); the
//!   priority keeps every chain moving, a critical-path rule that needs no cost estimate.
//!
//! With fewer models than half the workers the paper (section 6.2) trains one model on all workers
//! (data parallelism) instead; that hybrid is not simulated.
//!
//! # The lower bound
//!
//! The open-shop bound of the instance: a model's units run one at a time and a worker's units run
//! one at a time, so no MOP schedule ends before
//! `max(max_m epochs * sum_p c_m s_p, max_p epochs * s_p * sum_m c_m)`. Task parallelism is
//! compared with the same bound; it is not bound by it when workers differ (it may keep models off
//! the slowest worker, which MOP must visit), so its own bound,
//! `max(max_m epochs * workers * c_m * min_p s_p, epochs * workers * sum_m c_m / sum_p 1/s_p)`, is
//! reported next to it.

use std::collections::{BTreeSet, BinaryHeap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

/// The largest `models * workers * epochs` a simulation accepts (each unit is recorded, and the
/// randomized scheduler scans the idle models at every completion).
pub const MAX_UNITS: usize = 500_000;

/// The ratio of the makespan to the lower bound the issue targets for `mop_randomized` when there
/// are at least twice as many models as workers.
pub const TARGET_RATIO: f64 = 1.10;

/// A scheduling strategy of the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Cerebro's randomized MOP scheduler (Algorithm 1).
    MopRandomized,
    /// Task parallelism over fully replicated data (LPT, earliest completion).
    TaskParallel,
    /// The naive MOP rotation in lock-step rounds.
    RoundRobin,
    /// Algorithm 1 in the service's lease order (`easeml_engine::mop`): an idle worker takes,
    /// among its eligible models, one in the earliest epoch (the most epochs left), ties at random.
    MopEpochFirst,
}

impl Strategy {
    /// Every strategy, in report order.
    pub const ALL: [Strategy; 4] = [
        Strategy::MopRandomized,
        Strategy::TaskParallel,
        Strategy::RoundRobin,
        Strategy::MopEpochFirst,
    ];

    /// The name in `summary.json` and tables.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::MopRandomized => "mop_randomized",
            Strategy::TaskParallel => "task_parallel",
            Strategy::RoundRobin => "round_robin",
            Strategy::MopEpochFirst => "mop_epoch_first",
        }
    }

    /// Its place in [`Strategy::ALL`] (and in a seed's makespans).
    pub fn index(self) -> usize {
        Strategy::ALL.iter().position(|&s| s == self).unwrap_or(0)
    }

    /// Partitions each worker stores under the strategy.
    pub fn partitions_per_worker(self, workers: usize) -> usize {
        match self {
            Strategy::TaskParallel => workers,
            Strategy::MopRandomized | Strategy::RoundRobin | Strategy::MopEpochFirst => 1,
        }
    }
}

/// One simulated workload: costs, slowness factors and epochs.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// `c_m`, one per model.
    pub model_cost: Vec<f64>,
    /// `s_p`, one per worker (1 on a homogeneous cluster).
    pub worker_slowness: Vec<f64>,
    /// Epochs per model.
    pub epochs: usize,
}

impl Instance {
    /// The instance of `seed`: costs `10^U[0,1)`, slowness `U[1,3]` when `heterogeneous` else 1.
    pub fn generate(
        models: usize,
        workers: usize,
        epochs: usize,
        heterogeneous: bool,
        seed: u64,
    ) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let model_cost = (0..models)
            .map(|_| 10f64.powf(rng.gen_range(0.0..1.0)))
            .collect();
        let worker_slowness = (0..workers)
            .map(|_| {
                if heterogeneous {
                    rng.gen_range(1.0..=3.0)
                } else {
                    1.0
                }
            })
            .collect();
        Instance {
            model_cost,
            worker_slowness,
            epochs,
        }
    }

    /// Models.
    pub fn models(&self) -> usize {
        self.model_cost.len()
    }

    /// Workers (and partitions).
    pub fn workers(&self) -> usize {
        self.worker_slowness.len()
    }

    /// Time of one unit of `model` on `worker` (one partition).
    pub fn unit_time(&self, model: usize, worker: usize) -> f64 {
        self.model_cost[model] * self.worker_slowness[worker]
    }

    /// The open-shop lower bound of any MOP schedule (see the module's documentation).
    pub fn lower_bound(&self) -> f64 {
        let (by_model, by_worker) = self.lower_bound_parts();
        by_model.max(by_worker)
    }

    /// The two terms of [`Instance::lower_bound`]: the busiest model's work and the busiest
    /// worker's work.
    pub fn lower_bound_parts(&self) -> (f64, f64) {
        let epochs = self.epochs as f64;
        let slowness: f64 = self.worker_slowness.iter().sum();
        let cost: f64 = self.model_cost.iter().sum();
        let by_model = self
            .model_cost
            .iter()
            .map(|c| epochs * c * slowness)
            .fold(0.0, f64::max);
        let by_worker = self
            .worker_slowness
            .iter()
            .map(|s| epochs * s * cost)
            .fold(0.0, f64::max);
        (by_model, by_worker)
    }

    /// The lower bound of task parallelism on replicated data (copying left out): a model runs
    /// whole on one worker, at best the fastest, and all work spread over the workers' speeds.
    pub fn task_parallel_lower_bound(&self) -> f64 {
        let whole = (self.epochs * self.workers()) as f64;
        let fastest = self
            .worker_slowness
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let by_model = self
            .model_cost
            .iter()
            .map(|c| whole * c * fastest)
            .fold(0.0, f64::max);
        let speed: f64 = self.worker_slowness.iter().map(|s| 1.0 / s).sum();
        let cost: f64 = self.model_cost.iter().sum();
        by_model.max(whole * cost / speed)
    }
}

/// One unit as run: `model`'s sub-epoch of `epoch` on `partition`, on `worker` over
/// `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitRun {
    /// The model.
    pub model: usize,
    /// The model's epoch (0-based).
    pub epoch: usize,
    /// The data partition.
    pub partition: usize,
    /// The worker that trained it.
    pub worker: usize,
    /// Start time.
    pub start: f64,
    /// End time.
    pub end: f64,
}

/// A simulated schedule: every unit and the makespan (copying left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The units, in start order per strategy's own loop.
    pub runs: Vec<UnitRun>,
    /// When the last unit ends.
    pub makespan: f64,
}

/// Simulates `strategy` on `instance`; `seed` drives the randomized scheduler's choices only.
pub fn simulate(instance: &Instance, strategy: Strategy, seed: u64) -> Schedule {
    match strategy {
        Strategy::MopRandomized => mop_randomized(instance, seed, false),
        Strategy::MopEpochFirst => mop_randomized(instance, seed, true),
        Strategy::TaskParallel => task_parallel(instance),
        Strategy::RoundRobin => round_robin(instance),
    }
}

fn makespan_of(runs: &[UnitRun]) -> f64 {
    runs.iter().map(|r| r.end).fold(0.0, f64::max)
}

/// A unit's completion: its end time and worker, the earliest first out of a max-heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Completion(f64, usize);

impl Eq for Completion {}

impl Ord for Completion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Completion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Algorithm 1 (randomized scheduling) as a discrete-event simulation. The idle workers and the
/// idle models with units left are kept in index order, so each idle worker draws uniformly from
/// its eligible models listed by index; with `epoch_first`, from those of its eligible models in
/// the earliest epoch.
fn mop_randomized(instance: &Instance, seed: u64, epoch_first: bool) -> Schedule {
    let (models, workers, epochs) = (instance.models(), instance.workers(), instance.epochs);
    // A stream of its own, so the choices never reuse the instance's draws.
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(1);
    let mut running: Vec<Option<usize>> = vec![None; workers];
    let mut idle_workers: BTreeSet<usize> = (0..workers).collect();
    let mut idle_models: BTreeSet<usize> = (0..models).collect();
    let mut completions = BinaryHeap::with_capacity(workers);
    let mut epoch = vec![0usize; models];
    let mut visited = vec![vec![false; workers]; models];
    let mut visited_count = vec![0usize; models];
    let mut runs = Vec::with_capacity(models * workers * epochs);
    let mut eligible = Vec::with_capacity(models);
    let mut started = Vec::with_capacity(workers);
    let mut now = 0.0;
    loop {
        started.clear();
        for &worker in &idle_workers {
            eligible.clear();
            eligible.extend(idle_models.iter().copied().filter(|&m| !visited[m][worker]));
            if epoch_first && let Some(earliest) = eligible.iter().map(|&m| epoch[m]).min() {
                eligible.retain(|&m| epoch[m] == earliest);
            }
            if eligible.is_empty() {
                continue;
            }
            let model = eligible[rng.gen_range(0..eligible.len())];
            let end = now + instance.unit_time(model, worker);
            idle_models.remove(&model);
            running[worker] = Some(model);
            completions.push(Completion(end, worker));
            started.push(worker);
            runs.push(UnitRun {
                model,
                epoch: epoch[model],
                partition: worker,
                worker,
                start: now,
                end,
            });
        }
        for worker in &started {
            idle_workers.remove(worker);
        }
        // Nothing runs and nothing could start: every unit is done (an idle model with units
        // left always has an idle worker holding one of its unvisited partitions).
        let Some(&Completion(next, _)) = completions.peek() else {
            break;
        };
        now = next;
        while let Some(&Completion(end, worker)) = completions.peek() {
            if end > now {
                break;
            }
            completions.pop();
            let Some(model) = running[worker].take() else {
                continue;
            };
            idle_workers.insert(worker);
            visited[model][worker] = true;
            visited_count[model] += 1;
            if visited_count[model] == workers {
                epoch[model] += 1;
                visited_count[model] = 0;
                visited[model].iter_mut().for_each(|v| *v = false);
            }
            if epoch[model] < epochs {
                idle_models.insert(model);
            }
        }
    }
    let makespan = makespan_of(&runs);
    Schedule { runs, makespan }
}

/// Task parallelism: LPT order, each model whole on the worker that finishes it earliest.
fn task_parallel(instance: &Instance) -> Schedule {
    let (models, workers, epochs) = (instance.models(), instance.workers(), instance.epochs);
    let mut order: Vec<usize> = (0..models).collect();
    // Largest cost first; ties by index (a stable sort keeps the index order).
    order.sort_by(|&a, &b| instance.model_cost[b].total_cmp(&instance.model_cost[a]));
    let mut free_at = vec![0.0f64; workers];
    let mut runs = Vec::with_capacity(models * workers * epochs);
    for model in order {
        let whole = |worker: usize| (epochs * workers) as f64 * instance.unit_time(model, worker);
        let worker = (0..workers)
            .min_by(|&a, &b| (free_at[a] + whole(a)).total_cmp(&(free_at[b] + whole(b))))
            .unwrap_or(0);
        let mut now = free_at[worker];
        for epoch in 0..epochs {
            for partition in 0..workers {
                let end = now + instance.unit_time(model, worker);
                runs.push(UnitRun {
                    model,
                    epoch,
                    partition,
                    worker,
                    start: now,
                    end,
                });
                now = end;
            }
        }
        free_at[worker] = now;
    }
    let makespan = makespan_of(&runs);
    Schedule { runs, makespan }
}

/// The naive rotation in lock-step rounds.
fn round_robin(instance: &Instance) -> Schedule {
    let (models, workers, epochs) = (instance.models(), instance.workers(), instance.epochs);
    let slots = models.max(workers);
    let mut runs = Vec::with_capacity(models * workers * epochs);
    let mut now = 0.0;
    for round in 0..epochs * slots {
        let epoch = round / slots;
        let mut round_end = now;
        for worker in 0..workers {
            let model = (worker + round) % slots;
            if model >= models {
                continue;
            }
            let end = now + instance.unit_time(model, worker);
            round_end = f64::max(round_end, end);
            runs.push(UnitRun {
                model,
                epoch,
                partition: worker,
                worker,
                start: now,
                end,
            });
        }
        now = round_end;
    }
    let makespan = makespan_of(&runs);
    Schedule { runs, makespan }
}

/// Checks a schedule's invariants: every unit `(model, epoch, partition)` run exactly once for its
/// unit time, a model never on two workers at once, a worker never running two units at once, a
/// model's epoch `e + 1` after all of its epoch `e`, and MOP's units on the partition's own
/// worker. Returns the first violation.
pub fn check_schedule(
    instance: &Instance,
    strategy: Strategy,
    schedule: &Schedule,
) -> Result<(), String> {
    let (models, workers, epochs) = (instance.models(), instance.workers(), instance.epochs);
    let tolerance = 1e-9 * schedule.makespan.max(1.0);
    let mut seen = vec![false; models * epochs * workers];
    for run in &schedule.runs {
        if run.model >= models || run.epoch >= epochs || run.partition >= workers {
            return Err(format!("unit out of range: {run:?}"));
        }
        let index = (run.model * epochs + run.epoch) * workers + run.partition;
        if std::mem::replace(&mut seen[index], true) {
            return Err(format!("unit run twice: {run:?}"));
        }
        if strategy != Strategy::TaskParallel && run.worker != run.partition {
            return Err(format!("unit away from its partition's worker: {run:?}"));
        }
        let expected = instance.unit_time(run.model, run.worker);
        if ((run.end - run.start) - expected).abs() > tolerance || run.start < 0.0 {
            return Err(format!("unit of the wrong length: {run:?}"));
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return Err(format!("unit {missing} never run"));
    }
    let disjoint = |mut spans: Vec<(f64, f64)>, what: String| -> Result<(), String> {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in spans.windows(2) {
            if pair[1].0 < pair[0].1 - tolerance {
                return Err(format!("{what} runs two units at once: {pair:?}"));
            }
        }
        Ok(())
    };
    for model in 0..models {
        let mine: Vec<&UnitRun> = schedule.runs.iter().filter(|r| r.model == model).collect();
        disjoint(
            mine.iter().map(|r| (r.start, r.end)).collect(),
            format!("model {model}"),
        )?;
        for epoch in 1..epochs {
            let previous_end = mine
                .iter()
                .filter(|r| r.epoch == epoch - 1)
                .map(|r| r.end)
                .fold(0.0, f64::max);
            if mine
                .iter()
                .any(|r| r.epoch == epoch && r.start < previous_end - tolerance)
            {
                return Err(format!(
                    "model {model} starts epoch {epoch} before its epoch {} ends",
                    epoch - 1
                ));
            }
        }
    }
    for worker in 0..workers {
        disjoint(
            schedule
                .runs
                .iter()
                .filter(|r| r.worker == worker)
                .map(|r| (r.start, r.end))
                .collect(),
            format!("worker {worker}"),
        )?;
    }
    Ok(())
}

/// The parameters of `easeml bench mop --simulate`.
#[derive(Debug, Clone, PartialEq)]
pub struct MopConfig {
    /// Models (`M`).
    pub models: usize,
    /// Workers and partitions (`P`).
    pub workers: usize,
    /// Epochs per model (`E`).
    pub epochs: usize,
    /// Workers of different speeds (`s_p ~ U[1,3]`), else all 1.
    pub heterogeneous: bool,
    /// Instances simulated, seeds `1..=seeds`.
    pub seeds: usize,
    /// Seconds to copy one partition to a worker (task parallelism's replication).
    pub copy_seconds_per_partition: f64,
}

impl MopConfig {
    /// Refuses parameters the simulation cannot run, with a message naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, value) in [
            ("--models", self.models),
            ("--workers", self.workers),
            ("--epochs", self.epochs),
            ("--seeds", self.seeds),
        ] {
            if value == 0 {
                return Err(format!("{flag} must be at least 1"));
            }
        }
        let units = self
            .models
            .checked_mul(self.workers)
            .and_then(|n| n.checked_mul(self.epochs));
        if units.is_none_or(|n| n > MAX_UNITS) {
            return Err(format!(
                "--models x --workers x --epochs must be at most {MAX_UNITS} units"
            ));
        }
        if !(self.copy_seconds_per_partition.is_finite() && self.copy_seconds_per_partition >= 0.0)
        {
            return Err("--copy-seconds-per-partition must be a non-negative number".to_owned());
        }
        Ok(())
    }

    /// Seconds every worker spends copying the partitions it lacks before task parallelism starts.
    pub fn copy_seconds(&self) -> f64 {
        self.copy_seconds_per_partition * self.workers.saturating_sub(1) as f64
    }
}

/// One seed's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedOutcome {
    /// The seed of the instance and of the randomized scheduler.
    pub seed: u64,
    /// The open-shop lower bound.
    pub lower_bound: f64,
    /// Whether the busiest model's work sets the bound (else the busiest worker's).
    pub model_bound_binds: bool,
    /// Task parallelism's own lower bound.
    pub task_parallel_lower_bound: f64,
    /// Makespan per strategy, in [`Strategy::ALL`] order (copying left out).
    pub makespan: [f64; 4],
}

/// The outcome of a simulation over seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct MopOutcome {
    /// The parameters.
    pub config: MopConfig,
    /// One entry per seed.
    pub seeds: Vec<SeedOutcome>,
}

/// Mean, max and min of a non-empty list.
fn stats(values: &[f64]) -> Value {
    let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    json!({ "mean": mean, "max": max, "min": min })
}

/// Runs every strategy on seeds `1..=config.seeds`, calling `progress` after each seed.
pub fn run(config: &MopConfig, progress: &dyn Fn()) -> Result<MopOutcome, String> {
    config.validate()?;
    let seeds = (1..=config.seeds as u64)
        .map(|seed| {
            let instance = Instance::generate(
                config.models,
                config.workers,
                config.epochs,
                config.heterogeneous,
                seed,
            );
            let makespan = Strategy::ALL.map(|s| simulate(&instance, s, seed).makespan);
            progress();
            let (by_model, by_worker) = instance.lower_bound_parts();
            SeedOutcome {
                seed,
                lower_bound: by_model.max(by_worker),
                model_bound_binds: by_model >= by_worker,
                task_parallel_lower_bound: instance.task_parallel_lower_bound(),
                makespan,
            }
        })
        .collect();
    Ok(MopOutcome {
        config: config.clone(),
        seeds,
    })
}

impl MopOutcome {
    /// Makespan over the lower bound of `strategy`, per seed (copying left out).
    pub fn ratios(&self, strategy: Strategy) -> Vec<f64> {
        let index = strategy.index();
        self.seeds
            .iter()
            .map(|s| s.makespan[index] / s.lower_bound)
            .collect()
    }

    /// Task parallelism's makespan with the copy time, over the lower bound, per seed.
    pub fn task_parallel_with_copy_ratios(&self) -> Vec<f64> {
        let copy = self.config.copy_seconds();
        self.seeds
            .iter()
            .map(|s| (s.makespan[1] + copy) / s.lower_bound)
            .collect()
    }

    /// Seeds whose lower bound is the busiest model's work (not the busiest worker's).
    pub fn seeds_bound_by_a_model(&self) -> usize {
        self.seeds.iter().filter(|s| s.model_bound_binds).count()
    }

    /// Per seed, the copy time per partition at which task parallelism (with its copying) takes
    /// as long as `mop` (a MOP strategy): `(MOP's makespan - task parallelism's) / (workers - 1)`
    /// (negative: MOP is faster even with free copies). `None` with one worker (nothing to copy).
    pub fn break_even_copy_seconds(&self, mop: Strategy) -> Option<Vec<f64>> {
        let lacking = self.config.workers.checked_sub(1).filter(|&n| n > 0)? as f64;
        let (mop, task) = (mop.index(), Strategy::TaskParallel.index());
        Some(
            self.seeds
                .iter()
                .map(|s| (s.makespan[mop] - s.makespan[task]) / lacking)
                .collect(),
        )
    }

    /// The mean of [`MopOutcome::ratios`].
    pub fn mean_ratio(&self, strategy: Strategy) -> f64 {
        let ratios = self.ratios(strategy);
        ratios.iter().sum::<f64>() / ratios.len().max(1) as f64
    }

    /// `summary.json`: the parameters, the distributions, per strategy the makespan over the lower
    /// bound (mean, max, min over seeds) and the data each stores, and every seed's numbers.
    pub fn summary(&self) -> Value {
        let config = &self.config;
        let workers = config.workers;
        let copy = config.copy_seconds();
        let mut strategies = serde_json::Map::new();
        for (index, strategy) in Strategy::ALL.into_iter().enumerate() {
            let makespans: Vec<f64> = self.seeds.iter().map(|s| s.makespan[index]).collect();
            let per_worker = strategy.partitions_per_worker(workers);
            let mut entry = json!({
                "makespan_over_lower_bound": stats(&self.ratios(strategy)),
                "makespan": stats(&makespans),
                "partitions_per_worker": per_worker,
                "partitions_stored": per_worker * workers,
                "data_stored_over_dataset": per_worker,
            });
            if strategy == Strategy::TaskParallel {
                let with_copy: Vec<f64> = makespans.iter().map(|m| m + copy).collect();
                let own: Vec<f64> = self
                    .seeds
                    .iter()
                    .map(|s| s.makespan[index] / s.task_parallel_lower_bound)
                    .collect();
                let extra = json!({
                    "makespan_with_copy_over_lower_bound":
                        stats(&self.task_parallel_with_copy_ratios()),
                    "makespan_with_copy": stats(&with_copy),
                    "makespan_over_own_lower_bound": stats(&own),
                    "copy_seconds": copy,
                    "break_even_copy_seconds_per_partition": self.break_even_copy_seconds(Strategy::MopEpochFirst).map(|v| stats(&v)),
                    "break_even_copy_seconds_per_partition_vs_mop_randomized": self.break_even_copy_seconds(Strategy::MopRandomized).map(|v| stats(&v)),
                    "partition_copies": workers * workers.saturating_sub(1),
                    "assignment": "longest processing time first, to the worker that finishes the model earliest",
                });
                if let (Value::Object(entry), Value::Object(extra)) = (&mut entry, extra) {
                    entry.extend(extra);
                }
            }
            strategies.insert(strategy.name().to_owned(), entry);
        }
        let mop: Vec<f64> = self.seeds.iter().map(|s| s.makespan[0]).collect();
        let speedup_over = |mop: Strategy| -> Vec<f64> {
            self.seeds
                .iter()
                .map(|s| (s.makespan[1] + copy) / s.makespan[mop.index()])
                .collect()
        };
        let speedup = speedup_over(Strategy::MopRandomized);
        let service_speedup = speedup_over(Strategy::MopEpochFirst);
        let lower_bounds: Vec<f64> = self.seeds.iter().map(|s| s.lower_bound).collect();
        let model_bound = self.seeds_bound_by_a_model();
        let applies = config.models >= 2 * config.workers;
        let mop_mean = self.mean_ratio(Strategy::MopRandomized);
        let service_mean = self.mean_ratio(Strategy::MopEpochFirst);
        json!({
            "benchmark": "mop",
            "mode": "simulate",
            "parameters": {
                "models": config.models,
                "workers": config.workers,
                "partitions": config.workers,
                "epochs": config.epochs,
                "heterogeneous": config.heterogeneous,
                "seeds": config.seeds,
                "copy_seconds_per_partition": config.copy_seconds_per_partition,
            },
            "distributions": {
                "unit_time": "c_m * s_p",
                "model_cost": "c_m = 10^U[0,1): log-uniform over [1, 10)",
                "worker_slowness": if config.heterogeneous { "s_p ~ U[1, 3]" } else { "s_p = 1" },
            },
            "lower_bound": {
                "formula": "max(max_m E * sum_p c_m s_p, max_p E * s_p * sum_m c_m) (open shop)",
                "value": stats(&lower_bounds),
                "seeds_bound_by_a_model": model_bound,
                "seeds_bound_by_a_worker": self.seeds.len() - model_bound,
            },
            "strategies": strategies,
            "task_parallel_with_copy_over_mop_randomized": stats(&speedup),
            "task_parallel_with_copy_over_mop_epoch_first": stats(&service_speedup),
            "mop_randomized_makespan": stats(&mop),
            "target": {
                "mean_makespan_over_lower_bound_at_most": TARGET_RATIO,
                "applies": applies,
                "strategy": Strategy::MopEpochFirst.name(),
                "mean": service_mean,
                "met": if applies { Some(service_mean <= TARGET_RATIO) } else { None },
                "mop_randomized_mean": mop_mean,
                "mop_randomized_met": if applies { Some(mop_mean <= TARGET_RATIO) } else { None },
            },
            "per_seed": self.seeds.iter().map(|s| json!({
                "seed": s.seed,
                "lower_bound": s.lower_bound,
                "bound_by": if s.model_bound_binds { "model" } else { "worker" },
                "task_parallel_lower_bound": s.task_parallel_lower_bound,
                "makespan": Strategy::ALL.iter().zip(s.makespan).map(|(st, m)| (st.name().to_owned(), json!(m))).collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// A readable table: per strategy the makespan over the lower bound (mean, max), the data
    /// stored per worker, and task parallelism with its copy time.
    pub fn table_text(&self) -> String {
        let config = &self.config;
        let mut out = format!(
            "{} models, {} workers, {} epochs, {} cluster, {} seeds\n",
            config.models,
            config.workers,
            config.epochs,
            if config.heterogeneous {
                "heterogeneous"
            } else {
                "homogeneous"
            },
            config.seeds
        );
        out.push_str(&format!(
            "{:<26} {:>12} {:>12} {:>22}\n",
            "strategy", "mean MS/LB", "max MS/LB", "partitions per worker"
        ));
        let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        for strategy in Strategy::ALL {
            let ratios = self.ratios(strategy);
            out.push_str(&format!(
                "{:<26} {:>12.4} {:>12.4} {:>22}\n",
                strategy.name(),
                mean(&ratios),
                max(&ratios),
                strategy.partitions_per_worker(config.workers)
            ));
            if strategy == Strategy::TaskParallel && config.copy_seconds() > 0.0 {
                let ratios = self.task_parallel_with_copy_ratios();
                out.push_str(&format!(
                    "{:<26} {:>12.4} {:>12.4} {:>22}\n",
                    "task_parallel + copy",
                    mean(&ratios),
                    max(&ratios),
                    config.workers
                ));
            }
        }
        out.push_str(&format!(
            "MS/LB: makespan over the open-shop lower bound; task parallelism copies {} partitions ({:.1} s per worker)\n",
            config.workers * config.workers.saturating_sub(1),
            config.copy_seconds()
        ));
        let own: Vec<f64> = self
            .seeds
            .iter()
            .map(|s| s.makespan[1] / s.task_parallel_lower_bound)
            .collect();
        out.push_str(&format!(
            "task_parallel over its own lower bound: mean {:.4}\n",
            mean(&own)
        ));
        for mop in [Strategy::MopEpochFirst, Strategy::MopRandomized] {
            let versus: Vec<f64> = self
                .seeds
                .iter()
                .map(|s| (s.makespan[1] + config.copy_seconds()) / s.makespan[mop.index()])
                .collect();
            out.push_str(&format!(
                "task_parallel (with copy) / {} makespan: mean {:.4}",
                mop.name(),
                mean(&versus)
            ));
            if let Some(break_even) = self.break_even_copy_seconds(mop) {
                out.push_str(&format!(
                    "; as slow as it at a copy time per partition of {:.2} s (mean)",
                    mean(&break_even)
                ));
            }
            out.push('\n');
        }
        let model_bound = self.seeds_bound_by_a_model();
        out.push_str(&format!(
            "lower bound set by the busiest model in {model_bound} of {} seeds (else by the busiest worker)\n",
            self.seeds.len()
        ));
        if config.models >= 2 * config.workers {
            for strategy in [Strategy::MopEpochFirst, Strategy::MopRandomized] {
                let mop = mean(&self.ratios(strategy));
                out.push_str(&format!(
                    "target (models >= 2 x workers): {} mean MS/LB <= {TARGET_RATIO:.2}: {} ({mop:.4})\n",
                    strategy.name(),
                    if mop <= TARGET_RATIO { "met" } else { "NOT met" }
                ));
            }
        }
        out
    }
}

/// The model counts of a sweep at `workers` workers: half, 1, 2, 4 and 8 times the workers.
pub fn sweep_models(workers: usize) -> Vec<usize> {
    let mut counts = vec![
        (workers / 2).max(1),
        workers,
        2 * workers,
        4 * workers,
        8 * workers,
    ];
    counts.dedup();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(models: usize, workers: usize, heterogeneous: bool, seeds: usize) -> MopConfig {
        MopConfig {
            models,
            workers,
            epochs: 3,
            heterogeneous,
            seeds,
            copy_seconds_per_partition: 0.0,
        }
    }

    /// Random shapes, both settings: every schedule is valid and no MOP schedule beats the bound.
    #[test]
    fn schedules_are_valid_and_never_beat_the_lower_bound() {
        let mut shapes = ChaCha8Rng::seed_from_u64(99);
        for seed in 1..=60u64 {
            let models = shapes.gen_range(1..=12);
            let workers = shapes.gen_range(1..=6);
            let epochs = shapes.gen_range(1..=4);
            let heterogeneous = seed % 2 == 0;
            let instance = Instance::generate(models, workers, epochs, heterogeneous, seed);
            let bound = instance.lower_bound();
            for strategy in Strategy::ALL {
                let schedule = simulate(&instance, strategy, seed);
                check_schedule(&instance, strategy, &schedule)
                    .unwrap_or_else(|e| panic!("{strategy:?} seed {seed}: {e}"));
                assert_eq!(
                    schedule.runs.len(),
                    models * workers * epochs,
                    "{strategy:?}"
                );
                if strategy == Strategy::TaskParallel {
                    assert!(
                        schedule.makespan >= instance.task_parallel_lower_bound() * (1.0 - 1e-9)
                    );
                    if !heterogeneous {
                        assert!(schedule.makespan >= bound * (1.0 - 1e-9));
                    }
                } else {
                    assert!(
                        schedule.makespan >= bound * (1.0 - 1e-9),
                        "{strategy:?} seed {seed}: {} < {bound}",
                        schedule.makespan
                    );
                }
            }
        }
    }

    #[test]
    fn the_checker_catches_broken_schedules() {
        let instance = Instance::generate(3, 2, 2, true, 5);
        let good = simulate(&instance, Strategy::MopRandomized, 5);
        check_schedule(&instance, Strategy::MopRandomized, &good).unwrap();
        // A unit dropped.
        let mut dropped = good.clone();
        dropped.runs.pop();
        assert!(check_schedule(&instance, Strategy::MopRandomized, &dropped).is_err());
        // Two units of the first model made simultaneous.
        let mut overlapping = good.clone();
        let first = overlapping.runs.iter().position(|r| r.model == 0).unwrap();
        let second = overlapping.runs.iter().rposition(|r| r.model == 0).unwrap();
        let (start, worker) = (
            overlapping.runs[first].start,
            overlapping.runs[second].worker,
        );
        let length = instance.unit_time(0, worker);
        overlapping.runs[second].start = start;
        overlapping.runs[second].end = start + length;
        assert!(check_schedule(&instance, Strategy::MopRandomized, &overlapping).is_err());
        // A unit moved to another worker.
        let mut moved = good;
        moved.runs[0].worker = (moved.runs[0].worker + 1) % 2;
        assert!(check_schedule(&instance, Strategy::MopRandomized, &moved).is_err());
    }

    #[test]
    fn a_seed_determines_the_outcome() {
        let a = run(&config(9, 4, true, 5), &|| {}).unwrap();
        let b = run(&config(9, 4, true, 5), &|| {}).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.summary(), b.summary());
        let instance = Instance::generate(9, 4, 3, true, 3);
        assert_eq!(
            simulate(&instance, Strategy::MopRandomized, 3),
            simulate(&instance, Strategy::MopRandomized, 3)
        );
        assert_ne!(
            simulate(&instance, Strategy::MopRandomized, 3).runs,
            simulate(&instance, Strategy::MopRandomized, 4).runs
        );
    }

    #[test]
    fn homogeneous_workers_are_all_equal_and_costs_span_ten_times() {
        let instance = Instance::generate(200, 5, 1, false, 1);
        assert!(instance.worker_slowness.iter().all(|&s| s == 1.0));
        assert!(
            instance
                .model_cost
                .iter()
                .all(|&c| (1.0..10.0).contains(&c))
        );
        let spread = instance.model_cost.iter().copied().fold(0.0, f64::max)
            / instance
                .model_cost
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min);
        assert!(spread > 5.0, "{spread}");
        let heterogeneous = Instance::generate(200, 50, 1, true, 1);
        assert!(
            heterogeneous
                .worker_slowness
                .iter()
                .all(|&s| (1.0..=3.0).contains(&s))
        );
    }

    #[test]
    fn round_robin_of_equal_models_meets_the_bound() {
        // Equal costs on equal workers, as many models as workers: every round is full and even.
        let instance = Instance {
            model_cost: vec![2.0; 4],
            worker_slowness: vec![1.0; 4],
            epochs: 3,
        };
        let schedule = simulate(&instance, Strategy::RoundRobin, 0);
        assert!((schedule.makespan - instance.lower_bound()).abs() < 1e-9);
        assert!((instance.lower_bound() - 24.0).abs() < 1e-9);
        // Task parallelism: one model per worker, 3 epochs x 4 partitions x 2.
        let tasks = simulate(&instance, Strategy::TaskParallel, 0);
        assert!((tasks.makespan - 24.0).abs() < 1e-9);
    }

    #[test]
    fn many_models_bring_randomized_mop_near_the_bound() {
        let outcome = run(&config(16, 4, false, 10), &|| {}).unwrap();
        let mean = outcome.mean_ratio(Strategy::MopRandomized);
        assert!(mean <= TARGET_RATIO, "{mean}");
        let summary = outcome.summary();
        for strategy in Strategy::ALL {
            let entry = &summary["strategies"][strategy.name()]["makespan_over_lower_bound"];
            assert!(entry["mean"].as_f64().unwrap() >= 1.0 - 1e-9);
            assert!(entry["max"].as_f64().unwrap() >= entry["mean"].as_f64().unwrap());
        }
        assert_eq!(
            summary["strategies"]["task_parallel"]["partitions_per_worker"],
            4
        );
        assert_eq!(
            summary["strategies"]["mop_randomized"]["partitions_per_worker"],
            1
        );
        assert_eq!(summary["target"]["met"], true);
    }

    #[test]
    fn the_services_epoch_first_order_meets_the_target_where_uniform_choice_does_not() {
        // 2P models on P = 8 equal workers: the lower bound's two terms are close, and uniform
        // choice lets the longest chains fall behind (bench/results/mop/README.md's table: 1.143).
        let outcome = run(
            &MopConfig {
                epochs: 10,
                ..config(16, 8, false, 10)
            },
            &|| {},
        )
        .unwrap();
        let uniform = outcome.mean_ratio(Strategy::MopRandomized);
        let epoch_first = outcome.mean_ratio(Strategy::MopEpochFirst);
        assert!(uniform > TARGET_RATIO, "{uniform}");
        assert!(epoch_first <= TARGET_RATIO, "{epoch_first}");
        let summary = outcome.summary();
        assert_eq!(summary["target"]["strategy"], "mop_epoch_first");
        assert_eq!(summary["target"]["met"], true);
        assert_eq!(summary["target"]["mop_randomized_met"], false);
    }

    #[test]
    fn copy_time_is_added_to_task_parallelism_only() {
        let mut with_copy = config(8, 4, false, 3);
        with_copy.copy_seconds_per_partition = 2.0;
        assert!((with_copy.copy_seconds() - 6.0).abs() < 1e-12);
        let outcome = run(&with_copy, &|| {}).unwrap();
        let summary = outcome.summary();
        let tp = &summary["strategies"]["task_parallel"];
        assert!(
            tp["makespan_with_copy"]["mean"].as_f64().unwrap()
                > tp["makespan"]["mean"].as_f64().unwrap() + 5.9
        );
        assert_eq!(tp["partition_copies"], 12);
        for mop in [Strategy::MopRandomized, Strategy::MopEpochFirst] {
            let break_even = outcome.break_even_copy_seconds(mop).unwrap();
            for (seed, value) in outcome.seeds.iter().zip(break_even) {
                let copied = seed.makespan[1] + 3.0 * value;
                let target = seed.makespan[mop.index()];
                assert!((copied - target).abs() < 1e-9 * target);
            }
        }
        assert!(
            run(&config(3, 1, false, 1), &|| {})
                .unwrap()
                .break_even_copy_seconds(Strategy::MopEpochFirst)
                .is_none()
        );
    }

    #[test]
    fn bad_parameters_are_refused() {
        for (bad, flag) in [
            (config(0, 4, false, 1), "--models"),
            (config(4, 0, false, 1), "--workers"),
            (config(4, 4, false, 0), "--seeds"),
        ] {
            let error = run(&bad, &|| {}).unwrap_err();
            assert!(error.contains(flag), "{error}");
        }
        let mut huge = config(usize::MAX, 4, false, 1);
        assert!(huge.validate().unwrap_err().contains("at most"));
        huge = config(4, 4, false, 1);
        huge.copy_seconds_per_partition = f64::NAN;
        assert!(huge.validate().is_err());
        huge.copy_seconds_per_partition = -1.0;
        assert!(huge.validate().is_err());
    }

    #[test]
    fn sweep_counts_start_at_half_the_workers() {
        assert_eq!(sweep_models(8), vec![4, 8, 16, 32, 64]);
        assert_eq!(sweep_models(1), vec![1, 2, 4, 8]);
    }
}
