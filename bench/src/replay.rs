//! The paper's replay benchmark (section 5 and appendix A): policies replayed over a quality table.
//!
//! Each repetition splits the users at random into test users and the rest; the rest (optionally a
//! fraction of them, the lesion of figure 14) only build the kernel. Every policy then drives an
//! online [`Scheduler`] over the test users until the budget is spent (50% of the test users'
//! candidates when cost-oblivious, 10% of their total cost when cost-aware) and after each run the
//! mean accuracy loss `l = mean_i (best possible_i - best so far_i)` is recorded (a user without a
//! model has loss = its best possible quality). Curves are averaged over repetitions (mean) and
//! maximised over them (worst case) on a common cost grid (every run when cost-oblivious; equal
//! and geometric steps when cost-aware, [`cost_grid`]). Repetitions are independent and seeded
//! from `(seed, repetition)`, so results do not depend on the number of threads.
//!
//! Concurrent runs ([`ReplayConfig::parallel`] = K workers): an event-driven simulation. At time 0
//! and whenever workers are free, the policy's next decision is started on each free worker in
//! worker order (while the summed cost of the runs started is below the budget: the same summed
//! cost as the sequential replay, split over K workers); a run takes its cost (1 per run when
//! cost-oblivious) and is reported to the scheduler at its finish time. Finishes are processed in
//! time order, simultaneous ones in worker order, all of them before the freed workers get new
//! decisions; so the simulation is deterministic. While runs are in flight the scheduler sees them
//! as GP-BUCB hallucinations (unless [`ReplayConfig::hallucinate_in_flight`] is off). The x-axis is
//! then wall-clock time (the makespan so far), and the grid ends at the largest makespan (every run
//! started within the budget finishes; the sequential replay's last run overshoots the budget
//! too). K = 1 is the sequential replay, exactly (the same traces, point for point, and the same
//! grid, which ends at the budget).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::dataset::Dataset;
use easeml_scheduler::acquisition::{BetaForm, CandidatePolicy};
use easeml_scheduler::kernel::{
    HistoryCovariance, HyperparameterChoice, KernelHyperparameters, KernelKind, KernelModel,
    QualityHistory, QualityScale, choose_quality_scale,
};
use easeml_scheduler::picker::{Line8Rule, UserPickerKind};
use easeml_scheduler::scheduler::{
    AmplitudeRule, CandidateSpec, Decision, Scheduler, SchedulerConfig,
};
use easeml_scheduler::{Result, SchedulerError};

mod repetition;

use repetition::{Repetition, run_repetition};

/// The loss levels of `summary.json`'s `cost_to_mean_loss`.
pub const LOSS_LEVELS: [f64; 4] = [0.1, 0.05, 0.02, 0.01];

/// The default policy's round-robin floor, in rounds (see [`UserPickerKind::Default`]).
pub const DEFAULT_STARVATION_ROUNDS: usize = easeml_scheduler::picker::DEFAULT_STARVATION_ROUNDS;

/// A policy of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyName {
    /// easeml's default ([`SchedulerConfig::default`]): GP-EI (per unit cost when cost-aware)
    /// inside each user, Hybrid's user picker with a round-robin floor of 2 rounds, over the
    /// configured kernel (`--kernel`, Matern 5/2 by default: the engine's) on the quality scale the
    /// history chooses.
    Default,
    /// Ablation of `default`: cost-aware GP-UCB inside each user instead of EI per cost.
    DefaultUcb,
    /// Ablation of `default`: the RBF kernel (Spearmint*'s; the default's before it took the
    /// configured kernel) instead of the configured one, on the scale its own fit chooses.
    DefaultRbf,
    /// Ablation of `default`: no round-robin floor (Hybrid's picker as it is: `hybrid_ei`'s
    /// policy with the default's settings).
    DefaultNoFloor,
    /// Ablation of `default`: Algorithm 2's line 8 ranks the users of `V_t` by their expected
    /// remaining regret (per unit cost of the next run when cost-aware;
    /// [`Line8Rule::ExpectedRegret`]) instead of the UCB gap.
    DefaultRegret,
    /// Ablation of `default_identity_scale`: the kernel shape, RBF or `--kernel`'s (Matern 5/2 by
    /// default), whose fit gives the kernel users' history the larger marginal likelihood, chosen
    /// per repetition, on the identity scale.
    DefaultMlKernel,
    /// Ablation of `default`: the per-user amplitude leaves out each user's first residual (its
    /// level; [`AmplitudeRule::LevelFree`]).
    DefaultLevelAmplitude,
    /// Ablation of `default`: the per-user amplitude reads every residual
    /// ([`AmplitudeRule::AllResiduals`]; the default before the level test).
    DefaultAllResiduals,
    /// Ablation of `default`: qualities modelled as they are ([`QualityScale::Identity`]) instead
    /// of on the scale the history's likelihood chooses ([`choose_quality_scale`]). The ablations
    /// that change the picker, the candidate policy, the amplitude rule or the kernel shape run on
    /// the chosen scale, as the default does ([`PolicyName::on_chosen_scale`]); `default_ml_kernel`
    /// and `default_history_covariance` run on the identity scale (each differs from this policy
    /// in one thing).
    DefaultIdentityScale,
    /// Ablation of `default_identity_scale`: its kernel blended with the history's own sample
    /// covariance ([`KernelModel::with_history_covariance`]; the weight by
    /// [`ReplayConfig::history_covariance`], cross-validated on the history by default).
    DefaultHistoryCovariance,
    /// FCFS over (cost-aware) GP-UCB.
    Fcfs,
    /// RoundRobin over (cost-aware) GP-UCB.
    RoundRobin,
    /// Random over (cost-aware) GP-UCB.
    Random,
    /// Greedy (Algorithm 2) over (cost-aware) GP-UCB.
    Greedy,
    /// Hybrid over (cost-aware) GP-UCB: ease.ml.
    Hybrid,
    /// Hybrid over cost-oblivious GP-UCB even in cost-aware mode (the lesion of figure 13).
    HybridCostOblivious,
    /// Fixed "most cited" order + round robin.
    MostCited,
    /// Fixed "most recent" order + round robin.
    MostRecent,
    /// Spearmint*: GP-EI (per second when cost-aware) with an RBF kernel + round robin.
    Spearmint,
    /// Diagnostic: Spearmint*'s single-user policy (GP-EI per second, RBF) under Hybrid's user
    /// picker instead of round robin; isolates what the user picker adds over Spearmint*.
    HybridEi,
    /// Optuna's GP sampler, one study per test user, round robin (run by `bench/peers/`).
    OptunaGp,
    /// Optuna's TPE sampler, one study per test user, round robin (run by `bench/peers/`).
    OptunaTpe,
    /// Diagnostic, not a policy: (cost-aware) GP-UCB inside each user, and the user with the
    /// largest *true* remaining loss served next (it reads the answers). An upper bound on what
    /// any user picker can gain over round robin with the same single-user policy.
    OracleUser,
}

impl PolicyName {
    /// Every policy implemented in Rust, in report order.
    pub const ALL: [PolicyName; 21] = [
        PolicyName::Default,
        PolicyName::Hybrid,
        PolicyName::Greedy,
        PolicyName::RoundRobin,
        PolicyName::Random,
        PolicyName::Fcfs,
        PolicyName::MostCited,
        PolicyName::MostRecent,
        PolicyName::Spearmint,
        PolicyName::HybridCostOblivious,
        PolicyName::OracleUser,
        PolicyName::HybridEi,
        PolicyName::DefaultUcb,
        PolicyName::DefaultRbf,
        PolicyName::DefaultNoFloor,
        PolicyName::DefaultRegret,
        PolicyName::DefaultMlKernel,
        PolicyName::DefaultLevelAmplitude,
        PolicyName::DefaultAllResiduals,
        PolicyName::DefaultHistoryCovariance,
        PolicyName::DefaultIdentityScale,
    ];

    /// The peers run outside this crate (by the Python harness under `bench/peers/`).
    pub const EXTERNAL: [PolicyName; 2] = [PolicyName::OptunaGp, PolicyName::OptunaTpe];

    /// Whether the policy runs over the RBF kernel whatever `--kernel` says (Spearmint*'s, and
    /// the ablation `default_rbf`).
    pub fn uses_rbf_kernel(self) -> bool {
        matches!(
            self,
            PolicyName::Spearmint | PolicyName::HybridEi | PolicyName::DefaultRbf
        )
    }

    /// Whether the policy's prior is on the quality scale the history chooses
    /// ([`choose_quality_scale`]): the default and its ablations but those of the scale itself
    /// (`default_identity_scale`, and `default_ml_kernel` and `default_history_covariance`, which
    /// change the identity-scale prior).
    pub fn on_chosen_scale(self) -> bool {
        matches!(
            self,
            PolicyName::Default
                | PolicyName::DefaultUcb
                | PolicyName::DefaultRbf
                | PolicyName::DefaultNoFloor
                | PolicyName::DefaultRegret
                | PolicyName::DefaultLevelAmplitude
                | PolicyName::DefaultAllResiduals
        )
    }

    /// Whether the policy is an ablation of `default` (run only when named).
    pub fn is_ablation(self) -> bool {
        matches!(
            self,
            PolicyName::DefaultUcb
                | PolicyName::DefaultRbf
                | PolicyName::DefaultNoFloor
                | PolicyName::DefaultRegret
                | PolicyName::DefaultMlKernel
                | PolicyName::DefaultLevelAmplitude
                | PolicyName::DefaultAllResiduals
                | PolicyName::DefaultHistoryCovariance
                | PolicyName::DefaultIdentityScale
        )
    }

    /// Whether the policy is run by the external peer harness.
    pub fn is_external(self) -> bool {
        PolicyName::EXTERNAL.contains(&self)
    }

    /// The name used on the command line and in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Default => "default",
            PolicyName::DefaultUcb => "default_ucb",
            PolicyName::DefaultRbf => "default_rbf",
            PolicyName::DefaultNoFloor => "default_no_floor",
            PolicyName::DefaultRegret => "default_regret",
            PolicyName::DefaultMlKernel => "default_ml_kernel",
            PolicyName::DefaultLevelAmplitude => "default_level_amplitude",
            PolicyName::DefaultAllResiduals => "default_all_residuals",
            PolicyName::DefaultHistoryCovariance => "default_history_covariance",
            PolicyName::DefaultIdentityScale => "default_identity_scale",
            PolicyName::Fcfs => "fcfs",
            PolicyName::RoundRobin => "round_robin",
            PolicyName::Random => "random",
            PolicyName::Greedy => "greedy",
            PolicyName::Hybrid => "hybrid",
            PolicyName::HybridCostOblivious => "hybrid_cost_oblivious",
            PolicyName::MostCited => "most_cited",
            PolicyName::MostRecent => "most_recent",
            PolicyName::Spearmint => "spearmint",
            PolicyName::HybridEi => "hybrid_ei",
            PolicyName::OracleUser => "oracle_user",
            PolicyName::OptunaGp => "optuna_gp",
            PolicyName::OptunaTpe => "optuna_tpe",
        }
    }

    /// Parses a policy name.
    pub fn parse(name: &str) -> Result<Self> {
        PolicyName::ALL
            .into_iter()
            .chain(PolicyName::EXTERNAL)
            .find(|policy| policy.as_str() == name.trim())
            .ok_or_else(|| {
                let known: Vec<&str> = PolicyName::ALL
                    .iter()
                    .chain(&PolicyName::EXTERNAL)
                    .map(|p| p.as_str())
                    .collect();
                SchedulerError::Config(format!(
                    "unknown policy `{name}`; known: {}",
                    known.join(", ")
                ))
            })
    }
}

/// The benchmark's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Cost-aware mode (budget and x-axis in cost; cost-aware GP-UCB) or cost-oblivious (runs).
    pub cost_aware: bool,
    /// Repetitions (random splits).
    pub repeats: usize,
    /// Test users per repetition (clamped to what the table allows).
    pub test_users: usize,
    /// Seed of everything random.
    pub seed: u64,
    /// The policies to compare.
    pub policies: Vec<PolicyName>,
    /// Kernel shape of the GP-UCB policies and of the default and its ablations (Spearmint* and
    /// `default_rbf` always use RBF).
    pub kernel: KernelKind,
    /// Fraction of the non-test users that build the kernel (figure 14's lesion; 1.0 = all).
    pub kernel_user_fraction: f64,
    /// Hybrid's `s`.
    pub hybrid_patience: usize,
    /// Worker threads (repetitions run in parallel; results do not depend on it).
    pub threads: usize,
    /// `delta` of GP-UCB's `beta_t`.
    pub ucb_delta: f64,
    /// Multiplier of GP-UCB's `beta_t` (1 = the paper).
    pub beta_scale: f64,
    /// The form of GP-UCB's `beta_t`.
    pub beta_form: BetaForm,
    /// Per-user amplitude estimate of the GP policies, in pseudo-observations at the history's
    /// amplitude (`None`: off). Default 1: each user's kernel amplitude is (nearly) its own
    /// maximum-likelihood value, as scikit-learn's per-user fit in the paper's protocol would give.
    pub amplitude_prior_strength: Option<f64>,
    /// The largest possible quality, to which the user pickers clip their regret estimates
    /// (`None`: unclipped; the tables' qualities are accuracies, so 1).
    pub quality_ceiling: Option<f64>,
    /// Algorithm 2's line-8 rule of every policy with one (Greedy, Hybrid, the default and its
    /// ablations). `None`: each policy's own: the paper's UCB gap for Greedy and Hybrid, easeml's
    /// rule for the cost mode ([`Line8Rule::for_cost_mode`]) for the default and its ablations
    /// (`default_regret`'s is always the expected remaining regret).
    pub line8_rule: Option<Line8Rule>,
    /// Concurrent runs (simulated workers, at least 1; 1 = the sequential replay). With K > 1 the
    /// curves are over wall-clock time.
    pub parallel: usize,
    /// GP-BUCB: the scheduler hallucinates the runs in flight (see
    /// [`SchedulerConfig::hallucinate_in_flight`]); only matters when `parallel` > 1.
    pub hallucinate_in_flight: bool,
    /// The weight of the history's own covariance in `default_history_covariance`'s kernel.
    pub history_covariance: HistoryCovariance,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            cost_aware: false,
            repeats: 50,
            test_users: 10,
            seed: 0,
            policies: vec![
                PolicyName::Default,
                PolicyName::Hybrid,
                PolicyName::Greedy,
                PolicyName::RoundRobin,
                PolicyName::Random,
            ],
            kernel: KernelKind::Matern52,
            kernel_user_fraction: 1.0,
            hybrid_patience: 10,
            threads: 1,
            ucb_delta: 0.1,
            beta_scale: 1.0,
            beta_form: BetaForm::Practical,
            amplitude_prior_strength: SchedulerConfig::default().amplitude_prior_strength,
            quality_ceiling: Some(1.0),
            line8_rule: None,
            parallel: 1,
            hallucinate_in_flight: true,
            history_covariance: HistoryCovariance::CrossValidated,
        }
    }
}

/// One repetition's trace of one policy: `(cumulative cost, mean loss)` after each run, from 0
/// (`(wall-clock time, mean loss)` after each finished run when runs are concurrent).
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Points in cost (time) order, the first at 0.
    pub points: Vec<(f64, f64)>,
    /// The decisions taken, `(test user index, model index)`, in the order they were started.
    pub decisions: Vec<(usize, usize)>,
}

impl Trace {
    /// The loss after everything that finished at or before `cost`.
    pub fn loss_at(&self, cost: f64) -> f64 {
        let position = self.points.partition_point(|&(c, _)| c <= cost + 1e-12);
        self.points[position.saturating_sub(1)].1
    }
}

/// The aggregated curves of one policy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCurves {
    /// The policy.
    pub policy: PolicyName,
    /// Mean loss over repetitions at every grid point.
    pub mean_loss: Vec<f64>,
    /// Worst (largest) loss over repetitions at every grid point.
    pub worst_loss: Vec<f64>,
    /// Wall-clock seconds spent in this policy's scheduling (all repetitions, all threads).
    pub scheduling_seconds: f64,
    /// Decisions taken (all repetitions).
    pub n_decisions: usize,
}

/// Everything a benchmark run produced.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    /// The data set name.
    pub dataset: String,
    /// The configuration used (after clamping).
    pub config: ReplayConfig,
    /// Cost grid (runs when cost-oblivious).
    pub grid: Vec<f64>,
    /// One entry per policy, in the configured order.
    pub curves: Vec<PolicyCurves>,
    /// The per-repetition budgets.
    pub budgets: Vec<f64>,
    /// Seconds spent fitting kernels (all repetitions).
    pub kernel_fit_seconds: f64,
    /// The fitted hyperparameters of every repetition (GP-UCB kernel).
    pub hyperparameters: Vec<KernelHyperparameters>,
    /// The weight of the history's covariance in `default_history_covariance`'s kernel, per
    /// repetition (empty when that policy is not run).
    pub history_covariance_weights: Vec<f64>,
    /// The quality scale of `default`'s kernel, per repetition (empty when it is not run).
    pub default_quality_scales: Vec<QualityScale>,
    /// What every repetition replayed (for the peers).
    pub splits: Vec<ReplaySplit>,
    /// Total wall-clock seconds.
    pub wall_seconds: f64,
}

/// One candidate of a test user in a split.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SplitCandidate {
    /// The model id.
    pub model_id: String,
    /// Its quality for this user.
    pub quality: f64,
    /// Its cost for this user in this repetition (1 when cost-oblivious).
    pub cost: f64,
}

/// One test user of a split.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SplitUser {
    /// The user id.
    pub user_id: String,
    /// The best quality among its candidates.
    pub best_possible: f64,
    /// Its candidates (models with a known quality).
    pub candidates: Vec<SplitCandidate>,
}

/// What one repetition replays: the test users with their candidates, and the budget. Exported
/// (`splits.json`) so that peers run over exactly the same splits.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReplaySplit {
    /// The repetition index.
    pub repetition: usize,
    /// A seed derived from the run's seed for this repetition (for the peers' samplers).
    pub seed: u64,
    /// The budget (runs or summed cost).
    pub budget: f64,
    /// The test users, in registration (round-robin) order.
    pub users: Vec<SplitUser>,
}

/// Steps of the cost-aware grid: this many equal ones up to the largest budget, and as many
/// geometric ones from the cheapest candidate's cost up to it ([`cost_grid`]).
pub const COST_GRID_STEPS: usize = 1000;

/// The cost-aware grid: `COST_GRID_STEPS` equal steps from 0 to `max_budget`, and as many geometric
/// ones from `cheapest` (the cheapest candidate's cost) to it, sorted and without repeats. The
/// equal steps alone are too coarse where costs span orders of magnitude (measured runtimes: one
/// repetition with a large data set sets the budget, and every policy reaches the first loss
/// levels within the first step); the geometric ones resolve the cheap start. Never empty; starts
/// at 0 and ends at `max_budget`.
pub fn cost_grid(max_budget: f64, cheapest: f64) -> Vec<f64> {
    let max_budget = if max_budget.is_finite() {
        max_budget.max(0.0)
    } else {
        0.0
    };
    let mut grid: Vec<f64> = (0..=COST_GRID_STEPS)
        .map(|i| max_budget * i as f64 / COST_GRID_STEPS as f64)
        .collect();
    if cheapest.is_finite() && cheapest > 0.0 && cheapest < max_budget {
        let span = (max_budget / cheapest).ln();
        grid.extend(
            (0..COST_GRID_STEPS)
                .map(|i| cheapest * (span * i as f64 / COST_GRID_STEPS as f64).exp()),
        );
    }
    grid.sort_by(f64::total_cmp);
    grid.dedup();
    grid
}

/// The first grid cost at which `curve` is at or below `level`.
pub fn cost_to_reach(grid: &[f64], curve: &[f64], level: f64) -> Option<f64> {
    grid.iter()
        .zip(curve)
        .find(|&(_, &loss)| loss <= level + 1e-12)
        .map(|(&cost, _)| cost)
}

fn test_pool(dataset: &Dataset, cost_aware: bool) -> Vec<usize> {
    if cost_aware && dataset.has_real_costs() {
        (0..dataset.quality.len())
            .filter(|&u| dataset.cost[u].is_some())
            .collect()
    } else {
        (0..dataset.quality.len()).collect()
    }
}

/// Clamps the number of test users to what the table allows (at least two users left for the kernel
/// when test users come from the whole table).
pub fn effective_test_users(dataset: &Dataset, config: &ReplayConfig) -> usize {
    let pool = test_pool(dataset, config.cost_aware).len();
    let n_users = dataset.quality.len();
    let limit = if pool == n_users {
        n_users.saturating_sub(2)
    } else {
        pool
    };
    config.test_users.min(limit).max(1)
}

/// The benchmark's checks: what [`run_replay`] refuses, said before any work starts.
pub fn check_replay(dataset: &Dataset, config: &ReplayConfig) -> Result<()> {
    if config.policies.is_empty() {
        return Err(SchedulerError::Config("no policy to run".into()));
    }
    if let Some(peer) = config.policies.iter().find(|p| p.is_external()) {
        return Err(SchedulerError::Config(format!(
            "`{}` is run by the peer harness (bench/peers/), not by run_replay",
            peer.as_str()
        )));
    }
    if config.repeats == 0 {
        return Err(SchedulerError::Config(
            "--repeats must be at least 1".into(),
        ));
    }
    if config.parallel == 0 {
        return Err(SchedulerError::Config(
            "--parallel must be at least 1 (the number of concurrent runs)".into(),
        ));
    }
    if dataset.quality.len() < 3 {
        return Err(SchedulerError::Dataset(format!(
            "`{}` has {} users; the replay needs at least 3",
            dataset.name,
            dataset.quality.len()
        )));
    }
    Ok(())
}

/// Runs the benchmark; `on_repetition_done` is called once per finished repetition (any thread).
pub fn run_replay(
    dataset: &Dataset,
    config: &ReplayConfig,
    on_repetition_done: &(dyn Fn() + Sync),
) -> Result<ReplayOutcome> {
    check_replay(dataset, config)?;
    let started = Instant::now();
    let mut config = config.clone();
    config.test_users = effective_test_users(dataset, &config);
    let next_repetition = AtomicUsize::new(0);
    let threads = config.threads.clamp(1, config.repeats);
    let mut results: Vec<Option<Result<Repetition>>> = (0..config.repeats).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut finished = Vec::new();
                    loop {
                        let repetition = next_repetition.fetch_add(1, Ordering::Relaxed);
                        if repetition >= config.repeats {
                            break;
                        }
                        finished.push((repetition, run_repetition(dataset, &config, repetition)));
                        on_repetition_done();
                    }
                    finished
                })
            })
            .collect();
        for handle in handles {
            if let Ok(finished) = handle.join() {
                for (repetition, result) in finished {
                    results[repetition] = Some(result);
                }
            }
        }
    });
    let mut repetitions = Vec::with_capacity(config.repeats);
    for result in results {
        match result {
            Some(Ok(repetition)) => repetitions.push(repetition),
            Some(Err(error)) => return Err(error),
            None => return Err(SchedulerError::Config("a replay worker panicked".into())),
        }
    }
    // The grid spans the budget (one worker: as the sequential replay always did), else the
    // largest makespan: every run started within the summed-cost budget finishes.
    let max_budget = if config.parallel <= 1 {
        repetitions.iter().map(|r| r.budget).fold(0.0, f64::max)
    } else {
        repetitions
            .iter()
            .flat_map(|r| r.traces.iter())
            .filter_map(|trace| trace.points.last().map(|&(time, _)| time))
            .fold(0.0, f64::max)
    };
    let grid: Vec<f64> = if config.cost_aware {
        let cheapest = repetitions
            .iter()
            .flat_map(|r| r.split.users.iter())
            .flat_map(|user| user.candidates.iter())
            .map(|candidate| candidate.cost)
            .filter(|&cost| cost > 0.0)
            .fold(f64::INFINITY, f64::min);
        cost_grid(max_budget, cheapest)
    } else {
        (0..=(max_budget.ceil() as usize))
            .map(|i| i as f64)
            .collect()
    };
    let curves = config
        .policies
        .iter()
        .enumerate()
        .map(|(p, &policy)| {
            let mut mean_loss = vec![0.0; grid.len()];
            let mut worst_loss = vec![0.0f64; grid.len()];
            for repetition in &repetitions {
                for (g, &cost) in grid.iter().enumerate() {
                    let loss = repetition.traces[p].loss_at(cost);
                    mean_loss[g] += loss / repetitions.len() as f64;
                    worst_loss[g] = worst_loss[g].max(loss);
                }
            }
            PolicyCurves {
                policy,
                mean_loss,
                worst_loss,
                scheduling_seconds: repetitions.iter().map(|r| r.seconds[p]).sum(),
                n_decisions: repetitions
                    .iter()
                    .map(|r| r.traces[p].decisions.len())
                    .sum(),
            }
        })
        .collect();
    Ok(ReplayOutcome {
        dataset: dataset.name.clone(),
        grid,
        curves,
        budgets: repetitions.iter().map(|r| r.budget).collect(),
        kernel_fit_seconds: repetitions.iter().map(|r| r.kernel_fit_seconds).sum(),
        hyperparameters: repetitions.iter().map(|r| r.hyperparameters).collect(),
        history_covariance_weights: repetitions
            .iter()
            .filter_map(|r| r.history_covariance_weight)
            .collect(),
        default_quality_scales: repetitions
            .iter()
            .filter_map(|r| r.default_quality_scale)
            .collect(),
        splits: repetitions.iter().map(|r| r.split.clone()).collect(),
        wall_seconds: started.elapsed().as_secs_f64(),
        config,
    })
}

/// Runs one repetition and returns each policy's trace (for tests and debugging).
pub fn replay_traces(
    dataset: &Dataset,
    config: &ReplayConfig,
    repetition: usize,
) -> Result<Vec<Trace>> {
    let mut config = config.clone();
    config.test_users = effective_test_users(dataset, &config);
    Ok(run_repetition(dataset, &config, repetition)?.traces)
}

fn level_key(level: f64) -> String {
    format!("{level}")
}

impl ReplayOutcome {
    /// Adds a policy run elsewhere (the peers) from one trace per repetition, aggregated on the
    /// same grid as the others.
    pub fn add_external_policy(
        &mut self,
        policy: PolicyName,
        traces: &[Trace],
        scheduling_seconds: f64,
    ) -> Result<()> {
        if traces.len() != self.splits.len() || traces.iter().any(|t| t.points.is_empty()) {
            return Err(SchedulerError::Config(format!(
                "`{}`: expected {} non-empty traces, got {}",
                policy.as_str(),
                self.splits.len(),
                traces.len()
            )));
        }
        let mut mean_loss = vec![0.0; self.grid.len()];
        let mut worst_loss = vec![0.0f64; self.grid.len()];
        for trace in traces {
            for (g, &cost) in self.grid.iter().enumerate() {
                let loss = trace.loss_at(cost);
                mean_loss[g] += loss / traces.len() as f64;
                worst_loss[g] = worst_loss[g].max(loss);
            }
        }
        self.curves.push(PolicyCurves {
            policy,
            mean_loss,
            worst_loss,
            scheduling_seconds,
            n_decisions: traces.iter().map(|t| t.points.len() - 1).sum(),
        });
        self.config.policies.push(policy);
        Ok(())
    }

    /// `summary.json`: dataset, mode, repeats, and per policy the cost to reach each loss level
    /// (mean and worst case; null when never reached), final losses, speed-ups against every other
    /// policy (`other's cost / this policy's cost` per level), and timings.
    pub fn summary(&self) -> Value {
        let mut policies = serde_json::Map::new();
        for curves in &self.curves {
            let mut to_mean = serde_json::Map::new();
            let mut to_worst = serde_json::Map::new();
            for level in LOSS_LEVELS {
                to_mean.insert(
                    level_key(level),
                    json!(cost_to_reach(&self.grid, &curves.mean_loss, level)),
                );
                to_worst.insert(
                    level_key(level),
                    json!(cost_to_reach(&self.grid, &curves.worst_loss, level)),
                );
            }
            let mut speedups = serde_json::Map::new();
            for other in &self.curves {
                if other.policy == curves.policy {
                    continue;
                }
                let mut by_level = serde_json::Map::new();
                for level in LOSS_LEVELS {
                    let mine = cost_to_reach(&self.grid, &curves.mean_loss, level);
                    let theirs = cost_to_reach(&self.grid, &other.mean_loss, level);
                    let ratio = match (mine, theirs) {
                        (Some(mine), Some(theirs)) if mine > 0.0 => Some(theirs / mine),
                        _ => None,
                    };
                    by_level.insert(level_key(level), json!(ratio));
                }
                speedups.insert(other.policy.as_str().to_owned(), Value::Object(by_level));
            }
            policies.insert(
                curves.policy.as_str().to_owned(),
                json!({
                    "cost_to_mean_loss": to_mean,
                    "cost_to_worst_loss": to_worst,
                    "final_mean_loss": curves.mean_loss.last(),
                    "final_worst_loss": curves.worst_loss.last(),
                    "speedup_vs": speedups,
                    "scheduling_seconds": curves.scheduling_seconds,
                    "decisions": curves.n_decisions,
                    "microseconds_per_decision": if curves.n_decisions > 0 {
                        Some(curves.scheduling_seconds * 1e6 / curves.n_decisions as f64)
                    } else {
                        None
                    },
                }),
            );
        }
        let mean_budget = self.budgets.iter().sum::<f64>() / self.budgets.len().max(1) as f64;
        json!({
            "dataset": self.dataset,
            "mode": if self.config.cost_aware { "cost_aware" } else { "cost_oblivious" },
            "cost_unit": if self.config.cost_aware { "summed cost" } else { "runs" },
            "repeats": self.config.repeats,
            "test_users": self.config.test_users,
            "seed": self.config.seed,
            "kernel": self.config.kernel,
            "kernel_user_fraction": self.config.kernel_user_fraction,
            "hybrid_patience": self.config.hybrid_patience,
            "ucb_delta": self.config.ucb_delta,
            "beta_scale": self.config.beta_scale,
            "beta_form": self.config.beta_form,
            "amplitude_prior_strength": self.config.amplitude_prior_strength,
            "quality_ceiling": self.config.quality_ceiling,
            "line8_rule": self.config.line8_rule.map_or("per_policy", Line8Rule::name),
            "default_line8_rule": self
                .config
                .line8_rule
                .unwrap_or(Line8Rule::for_cost_mode(self.config.cost_aware))
                .name(),
            "parallel": self.config.parallel,
            "mean_budget": mean_budget,
            "kernel_fit_seconds": self.kernel_fit_seconds,
            "hyperparameters_first_repetition": self.hyperparameters.first(),
            "history_covariance": self.config.history_covariance.to_string(),
            "history_covariance_weights": self.history_covariance_weights,
            "default_quality_scales": {
                "identity": self.default_quality_scales.iter().filter(|s| **s == QualityScale::Identity).count(),
                "logit": self.default_quality_scales.iter().filter(|s| **s == QualityScale::Logit).count(),
            },
            "wall_seconds": self.wall_seconds,
            "policies": policies,
        })
    }

    /// `curves.csv`: `policy,cost,mean_loss,worst_loss`, one row per policy and grid point.
    pub fn curves_csv(&self) -> String {
        let mut out = String::from("policy,cost,mean_loss,worst_loss\n");
        for curves in &self.curves {
            for (g, cost) in self.grid.iter().enumerate() {
                out.push_str(&format!(
                    "{},{},{},{}\n",
                    curves.policy.as_str(),
                    cost,
                    curves.mean_loss[g],
                    curves.worst_loss[g]
                ));
            }
        }
        out
    }

    /// Per-policy curves keyed by name (for plotting).
    pub fn curves_by_name(&self) -> BTreeMap<&'static str, &PolicyCurves> {
        self.curves.iter().map(|c| (c.policy.as_str(), c)).collect()
    }
}
