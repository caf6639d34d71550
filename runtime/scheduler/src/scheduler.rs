//! The online scheduler the runtime drives: which (user, candidate) to train next.
//!
//! Users register with their candidates (model ids with an expected cost) and optionally their
//! prior history; [`Scheduler::next_decision`] returns the next [`Decision`] (the user picker chooses the
//! user, the candidate policy chooses the candidate); [`Scheduler::report`] feeds back the observed
//! quality and cost. Users and candidates may join and leave at any time, and
//! [`Scheduler::data_changed`] starts a new data version for a user: its GP forgets the old
//! observations and all its candidates become eligible again.
//!
//! Invariants: `next_decision` never returns a user without an eligible candidate ("finished"), a candidate
//! already trained in the current data version, one in flight, or one removed. Costs are
//! normalised over all registered users (the most expensive candidate has cost 1). All randomness
//! comes from one generator seeded at construction, so a run is reproducible.
//!
//! What the user pickers see ([`Scheduler::user_summaries`]): per user, the largest upper
//! confidence bound on quality `mean + sqrt(beta_t) sd` over its eligible candidates and Algorithm
//! 2's empirical gap, both from bounds on quality (never the cost-weighted scores) clipped to the
//! quality ceiling (1 by default), and the normalised cost of the candidate it would train next.
//!
//! Several decisions may be outstanding at once (one per free device). With
//! [`SchedulerConfig::hallucinate_in_flight`] (the default) the scheduler is GP-BUCB (Desautels,
//! Krause and Burdick, JMLR 2014): every candidate in flight is a hallucinated observation of the
//! user's GP at its posterior mean, so the bounds of it and its correlated neighbours shrink, the
//! next decisions (of the same user and, through the user pickers, which see the same bounds,
//! across users) spread out; the hallucination is dropped when the run is reported (the real
//! observation takes its place) or cancelled. `beta_t` is the sequential one (the configured form,
//! the practical one by default, `t` = real observations + 1): neither GP-BUCB's inflated batch
//! `beta` (its constant `exp(2C)` is vacuous in practice; Desautels et al. also run with the
//! sequential `beta`) nor `t` counting the runs in flight (a larger `beta_t` would raise the very
//! bounds the hallucination lowers). Greedy's and Hybrid's line 6 sees the hallucination too: a
//! user's empirical gap is computed as if its latest run in flight had been observed at its
//! hallucinated value, with the bounds at pick of its runs in flight in the running minimum
//! (otherwise a user keeps its stale gap while its runs are out, and gets served again and again
//! on it). Whether hallucinating or not, the pickers see each user's
//! runs in flight ([`UserSummary::n_in_flight`]): Greedy's and Hybrid's first round (lines 1-4 of
//! Algorithm 2) serves every user without observations once, not once per device. With nothing
//! in flight, decisions are exactly those of the sequential scheduler.

use std::collections::HashMap;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::acquisition::{
    BetaForm, CandidatePolicy, argmax_eligible, beta, expected_improvement,
    expected_remaining_regret, upper_confidence_bound,
};
use crate::error::{Result, SchedulerError};
use crate::gp::UserGp;
use crate::kernel::KernelModel;
use crate::picker::{Line8Rule, UserPicker, UserPickerKind, UserSummary};

mod pick;
mod set_aside;

pub use set_aside::SetAside;

/// How a scheduler decides.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// The single-user policy.
    pub candidate_policy: CandidatePolicy,
    /// The multi-user policy.
    pub user_picker: UserPickerKind,
    /// Seed of the scheduler's random generator (used by the Random picker).
    pub seed: u64,
    /// Per-user amplitude estimate with this many pseudo-observations (see
    /// [`UserGp::with_amplitude_estimate`]); `None` keeps the shared amplitude.
    pub amplitude_prior_strength: Option<f64>,
    /// Which residuals the per-user amplitude estimate reads ([`AmplitudeRule`]; the default's is
    /// [`AmplitudeRule::ByLevelTest`]). No effect without the estimate
    /// (`amplitude_prior_strength: None`).
    pub amplitude_rule: AmplitudeRule,
    /// Calibrate expected costs from observed ones: when a run's observed cost differs from the
    /// cost expected for it, the expected costs of the user's untrained candidates are scaled by the
    /// same ratio (clamped to [0.1, 10] per observation). For the runtime, whose expected costs are
    /// estimates (FLOPs over an assumed device speed) that are off by a common factor; off for the
    /// replay, whose expected costs are the true ones.
    pub calibrate_costs: bool,
    /// The largest quality there is (qualities are accuracies or clipped R^2, so 1): the user
    /// pickers' regret estimates clip upper confidence bounds to it, since no model can do better.
    /// `None`: unbounded qualities.
    pub quality_ceiling: Option<f64>,
    /// Algorithm 2's line-8 rule (Greedy, Hybrid and the default picker): which user of the
    /// candidate set to serve. `None`: easeml's rule for the candidate policy's cost mode
    /// ([`Line8Rule::for_cost_mode`]).
    pub line8_rule: Option<Line8Rule>,
    /// GP-BUCB: condition each user's GP on a hallucinated observation (at the posterior mean) of
    /// every candidate in flight, until it is reported or cancelled; the candidate and user
    /// policies then see the shrunk bounds. `false`: in-flight runs are only excluded from the
    /// choice (the posterior ignores them). No effect while nothing is in flight.
    pub hallucinate_in_flight: bool,
    /// Sets a kin aside when it is far below the user's best ([`Scheduler::set_aside`]): an
    /// untrained candidate whose kin's best observed quality on the user's current data (two of
    /// its models tried) is at least this much below the user's best (a model of another kin), and
    /// that is expected to cost more than that best cost, is not trained on this data version.
    /// `None`: never. Acts only where the prior names kin ([`KernelModel::with_kin`]: the
    /// engine's; the replay's priors name none).
    pub set_aside_margin: Option<f64>,
}

/// The default [`SchedulerConfig::set_aside_margin`]: a kin 0.3 (accuracy, or clipped R^2) below the
/// best after its first runs (DECISIONS.md).
pub const DEFAULT_SET_ASIDE_MARGIN: f64 = 0.3;

/// The default's per-user amplitude estimate: this many pseudo-observations at the history's
/// amplitude ([`UserGp::with_amplitude_estimate`]; 1: a user's amplitude is soon its own
/// maximum-likelihood value). The replay's `--amplitude-prior` defaults to it.
pub const DEFAULT_AMPLITUDE_PRIOR_STRENGTH: f64 = 1.0;

/// The level test's one-sided 5% significance: the standard normal 95% quantile.
const LEVEL_TEST_NORMAL_QUANTILE: f64 = 1.644_853_6;

/// The quantile of the chi-squared distribution with `degrees` degrees of freedom at the standard
/// normal quantile `z` (Wilson and Hilferty's cube-root approximation: within 3% for 1 degree,
/// 0.2% for 8, closer for more).
fn chi_squared_quantile(degrees: usize, z: f64) -> f64 {
    let n = degrees.max(1) as f64;
    let spread = 2.0 / (9.0 * n);
    n * (1.0 - spread + z * spread.sqrt()).powi(3)
}

/// Which of a user's whitened residuals the per-user amplitude estimate reads (see
/// [`UserGp::with_amplitude_estimate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmplitudeRule {
    /// Every residual (the estimate as it always was).
    AllResiduals,
    /// All but the first, which measures the user's level against the history rather than the
    /// spread of its candidates ([`UserGp::with_level_free_amplitude`]).
    LevelFree,
    /// Level-free while the users' first residuals are too large for the kernel, else every
    /// residual: under the kernel each squared first residual has expectation 1, so their sum over
    /// `n` users is chi-squared with `n` degrees of freedom, and the test is its one-sided 5% level.
    /// Residuals that large say that the users' levels are not the history's (data sets much harder or easier than the history users'): a user's
    /// distance from the history's level then says little about how widely its candidates
    /// spread, and inflating its bounds by it sends the search to the users farthest from the
    /// history instead of those with the most to gain. Users drawn from the history's population
    /// keep the estimate as it always was. Decided over every first observation so far (each
    /// user's first in each data version); every user's GP follows the decision.
    ByLevelTest,
}

impl SchedulerConfig {
    /// The paper's ease.ml: Hybrid (s = 10) over cost-aware GP-UCB (the default before
    /// [`UserPickerKind::Default`]; the lesions of the paper run it).
    pub fn paper_hybrid() -> Self {
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ucb(true),
            user_picker: UserPickerKind::Hybrid { patience: 10 },
            amplitude_rule: AmplitudeRule::AllResiduals,
            line8_rule: Some(Line8Rule::UcbGap),
            ..SchedulerConfig::default()
        }
    }
}

impl Default for SchedulerConfig {
    /// easeml's default: GP-EI per unit cost inside each user (Spearmint's rule), Hybrid (s = 10)
    /// with a round-robin floor over users ([`UserPickerKind::default`]), and a per-user kernel
    /// amplitude ([`DEFAULT_AMPLITUDE_PRIOR_STRENGTH`] pseudo-observation at the history's) with its
    /// level test ([`AmplitudeRule::ByLevelTest`]); see DECISIONS.md. The engine and the replay's
    /// `default` policy both start from this value, over a prior on the quality scale the history
    /// chooses ([`crate::kernel::choose_quality_scale`]; the scale travels with the kernel).
    fn default() -> Self {
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ExpectedImprovement { per_cost: true },
            user_picker: UserPickerKind::default(),
            seed: 0,
            amplitude_prior_strength: Some(DEFAULT_AMPLITUDE_PRIOR_STRENGTH),
            amplitude_rule: AmplitudeRule::ByLevelTest,
            calibrate_costs: false,
            quality_ceiling: Some(1.0),
            line8_rule: None,
            hallucinate_in_flight: true,
            set_aside_margin: Some(DEFAULT_SET_ASIDE_MARGIN),
        }
    }
}

/// A candidate model offered to a user.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateSpec {
    /// The model id (the kernel model knows its history by this id).
    pub model_id: String,
    /// The expected cost of training it (any positive unit; 1.0 when unknown).
    pub expected_cost: f64,
}

impl CandidateSpec {
    /// A candidate with cost 1.
    pub fn new(model_id: impl Into<String>) -> Self {
        CandidateSpec {
            model_id: model_id.into(),
            expected_cost: 1.0,
        }
    }
}

/// One past observation of a user (prior history at registration).
#[derive(Debug, Clone, PartialEq)]
pub struct PriorObservation {
    /// The model id.
    pub model_id: String,
    /// The observed quality.
    pub quality: f64,
    /// The observed cost.
    pub cost: f64,
}

/// What to train next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The user.
    pub user_id: String,
    /// The candidate model.
    pub model_id: String,
    /// The user's data version the decision was made for.
    pub data_version: u64,
}

/// A user's best model so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestModel {
    /// The model id.
    pub model_id: String,
    /// Its observed quality.
    pub quality: f64,
    /// Its observed cost.
    pub cost: f64,
    /// The data version it was trained on.
    pub data_version: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CandidateStatus {
    Eligible,
    InFlight,
    Trained,
    Removed,
}

#[derive(Debug, Clone)]
struct CandidateState {
    model_id: String,
    expected_cost: f64,
    status: CandidateStatus,
    upper_confidence_bound_at_pick: Option<f64>,
    /// The quality reported for it on the user's current data version (`None` before, and after
    /// [`Scheduler::data_changed`]).
    observed_quality: Option<f64>,
}

#[derive(Debug, Clone)]
struct UserState {
    user_id: String,
    registration_sequence: u64,
    data_version: u64,
    candidates: Vec<CandidateState>,
    candidate_index_by_model: HashMap<String, usize>,
    gp: UserGp,
    best_current: Option<BestModel>,
    best_previous: Option<BestModel>,
    /// Algorithm 2's line-6 running minimum of the bounds at pick, in quality units.
    empirical_bound: Option<f64>,
    empirical_gap: Option<f64>,
    /// What [`Scheduler::next_decision`] last computed for this user (its summary and candidate
    /// scores, `None` inside when it had no eligible candidate) at the given cost scale; dropped by
    /// every change to the user, so a decision recomputes only the users that changed.
    summary_cache: Option<CachedSummary>,
}

/// One user's cached summary (see [`UserState::summary_cache`]).
#[derive(Debug, Clone)]
struct CachedSummary {
    cost_scale: f64,
    entry: Option<(UserSummary, Vec<(usize, f64)>)>,
}

/// The multi-tenant scheduler.
#[derive(Debug)]
pub struct Scheduler {
    kernel: Arc<KernelModel>,
    candidate_policy: CandidatePolicy,
    fixed_rank_by_model: HashMap<String, usize>,
    picker: Box<dyn UserPicker>,
    rng: ChaCha8Rng,
    users: Vec<UserState>,
    next_registration_sequence: u64,
    amplitude_prior_strength: Option<f64>,
    amplitude_rule: AmplitudeRule,
    /// The sum of the squared first residuals of the users, and their number
    /// ([`AmplitudeRule::ByLevelTest`]).
    first_residuals: (f64, usize),
    calibrate_costs: bool,
    quality_ceiling: f64,
    line8_rule: Line8Rule,
    hallucinate_in_flight: bool,
    set_aside_margin: Option<f64>,
    /// [`Scheduler::cost_scale`], cached between changes to any expected cost or to the users.
    cost_scale_cache: Option<f64>,
}

fn validate_cost(user: &str, model: &str, cost: f64) -> Result<()> {
    if cost.is_finite() && cost > 0.0 {
        Ok(())
    } else {
        Err(SchedulerError::InvalidObservation {
            user: user.to_owned(),
            candidate: model.to_owned(),
            reason: format!("cost must be a positive finite number, got {cost}"),
        })
    }
}

impl Scheduler {
    /// A scheduler with no users, over the given prior.
    pub fn new(kernel: Arc<KernelModel>, config: SchedulerConfig) -> Self {
        let fixed_rank_by_model = match &config.candidate_policy {
            CandidatePolicy::FixedOrder { model_order } => model_order
                .iter()
                .enumerate()
                .map(|(rank, id)| (id.clone(), rank))
                .collect(),
            _ => HashMap::new(),
        };
        let line8_rule = config
            .line8_rule
            .unwrap_or_else(|| Line8Rule::for_cost_mode(config.candidate_policy.is_cost_aware()));
        Scheduler {
            kernel,
            candidate_policy: config.candidate_policy,
            fixed_rank_by_model,
            picker: config.user_picker.build(line8_rule),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            users: Vec::new(),
            next_registration_sequence: 0,
            amplitude_prior_strength: config.amplitude_prior_strength,
            amplitude_rule: config.amplitude_rule,
            first_residuals: (0.0, 0),
            calibrate_costs: config.calibrate_costs,
            quality_ceiling: config
                .quality_ceiling
                .filter(|c| c.is_finite())
                .unwrap_or(f64::INFINITY),
            line8_rule,
            hallucinate_in_flight: config.hallucinate_in_flight,
            set_aside_margin: config
                .set_aside_margin
                .filter(|margin| margin.is_finite() && *margin >= 0.0),
            cost_scale_cache: None,
        }
    }

    /// The name of the user picker.
    pub fn picker_name(&self) -> &'static str {
        self.picker.name()
    }

    fn user_index(&self, user_id: &str) -> Result<usize> {
        self.users
            .iter()
            .position(|user| user.user_id == user_id)
            .ok_or_else(|| SchedulerError::UnknownUser(user_id.to_owned()))
    }

    fn fresh_gp(&self, model_ids: &[String]) -> UserGp {
        let (mean, covariance) = self.kernel.prior_over(model_ids);
        let gp = UserGp::new(
            mean,
            covariance,
            self.kernel.hyperparameters().noise_variance,
        );
        match self.amplitude_prior_strength {
            Some(strength) if self.level_free_amplitude() => gp
                .with_amplitude_estimate(strength)
                .with_level_free_amplitude(),
            Some(strength) => gp.with_amplitude_estimate(strength),
            None => gp,
        }
    }

    /// Whether the users' amplitude estimates currently leave out their first residual.
    fn level_free_amplitude(&self) -> bool {
        match self.amplitude_rule {
            AmplitudeRule::AllResiduals => false,
            AmplitudeRule::LevelFree => true,
            AmplitudeRule::ByLevelTest => {
                let (sum, count) = self.first_residuals;
                count > 0 && sum > chi_squared_quantile(count, LEVEL_TEST_NORMAL_QUANTILE)
            }
        }
    }

    /// [`AmplitudeRule::ByLevelTest`]: counts the user's first residual after its first
    /// observation and, when the decision changes, switches every user's GP to it.
    fn test_level(&mut self, index: usize) {
        let gp = &self.users[index].gp;
        if self.amplitude_rule != AmplitudeRule::ByLevelTest || gp.n_observations() != 1 {
            return;
        }
        let Some(residual) = gp.first_whitened_residual().filter(|z| z.is_finite()) else {
            return;
        };
        let before = self.level_free_amplitude();
        self.first_residuals.0 += residual * residual;
        self.first_residuals.1 += 1;
        let after = self.level_free_amplitude();
        if after != before {
            for user in &mut self.users {
                user.gp.set_level_free_amplitude(after);
                user.summary_cache = None;
            }
        }
    }

    /// Registers a user with its candidates and optional prior history (observations of some of
    /// those candidates on the user's current data; they count as trained).
    pub fn register_user(
        &mut self,
        user_id: &str,
        candidates: Vec<CandidateSpec>,
        prior_history: &[PriorObservation],
    ) -> Result<()> {
        if self.users.iter().any(|user| user.user_id == user_id) {
            return Err(SchedulerError::DuplicateUser(user_id.to_owned()));
        }
        let mut candidate_index_by_model = HashMap::new();
        let mut states = Vec::with_capacity(candidates.len());
        for spec in candidates {
            validate_cost(user_id, &spec.model_id, spec.expected_cost)?;
            if candidate_index_by_model
                .insert(spec.model_id.clone(), states.len())
                .is_some()
            {
                return Err(SchedulerError::DuplicateCandidate {
                    user: user_id.to_owned(),
                    candidate: spec.model_id,
                });
            }
            states.push(CandidateState {
                model_id: spec.model_id,
                expected_cost: spec.expected_cost,
                status: CandidateStatus::Eligible,
                upper_confidence_bound_at_pick: None,
                observed_quality: None,
            });
        }
        let model_ids: Vec<String> = states.iter().map(|c| c.model_id.clone()).collect();
        let gp = self.fresh_gp(&model_ids);
        self.users.push(UserState {
            user_id: user_id.to_owned(),
            registration_sequence: self.next_registration_sequence,
            data_version: 0,
            candidates: states,
            candidate_index_by_model,
            gp,
            best_current: None,
            best_previous: None,
            empirical_bound: None,
            empirical_gap: None,
            summary_cache: None,
        });
        self.cost_scale_cache = None;
        self.next_registration_sequence += 1;
        for observation in prior_history {
            let decision = Decision {
                user_id: user_id.to_owned(),
                model_id: observation.model_id.clone(),
                data_version: 0,
            };
            if let Err(error) = self.report(&decision, observation.quality, observation.cost) {
                self.users.pop();
                return Err(error);
            }
        }
        Ok(())
    }

    /// Removes a user and everything the scheduler knows about it.
    pub fn remove_user(&mut self, user_id: &str) -> Result<()> {
        let index = self.user_index(user_id)?;
        self.users.remove(index);
        self.cost_scale_cache = None;
        Ok(())
    }

    /// Offers a new candidate to a registered user.
    pub fn add_candidate(&mut self, user_id: &str, spec: CandidateSpec) -> Result<()> {
        validate_cost(user_id, &spec.model_id, spec.expected_cost)?;
        let index = self.user_index(user_id)?;
        let kernel = Arc::clone(&self.kernel);
        self.cost_scale_cache = None;
        let user = &mut self.users[index];
        user.summary_cache = None;
        if let Some(&existing) = user.candidate_index_by_model.get(&spec.model_id) {
            let candidate = &mut user.candidates[existing];
            if candidate.status != CandidateStatus::Removed {
                return Err(SchedulerError::DuplicateCandidate {
                    user: user_id.to_owned(),
                    candidate: spec.model_id,
                });
            }
            candidate.status = CandidateStatus::Eligible;
            candidate.expected_cost = spec.expected_cost;
            return Ok(());
        }
        let covariances: Vec<f64> = user
            .candidates
            .iter()
            .map(|other| kernel.covariance(&spec.model_id, &other.model_id))
            .collect();
        user.gp.add_candidate(
            kernel.prior_mean(&spec.model_id),
            kernel.covariance(&spec.model_id, &spec.model_id),
            &covariances,
        );
        user.candidate_index_by_model
            .insert(spec.model_id.clone(), user.candidates.len());
        user.candidates.push(CandidateState {
            model_id: spec.model_id,
            expected_cost: spec.expected_cost,
            status: CandidateStatus::Eligible,
            upper_confidence_bound_at_pick: None,
            observed_quality: None,
        });
        Ok(())
    }

    /// Withdraws a candidate: it is never picked again (its past observations still inform the GP).
    pub fn remove_candidate(&mut self, user_id: &str, model_id: &str) -> Result<()> {
        let index = self.user_index(user_id)?;
        let user = &mut self.users[index];
        user.summary_cache = None;
        let candidate = *user.candidate_index_by_model.get(model_id).ok_or_else(|| {
            SchedulerError::UnknownCandidate {
                user: user_id.to_owned(),
                candidate: model_id.to_owned(),
            }
        })?;
        user.candidates[candidate].status = CandidateStatus::Removed;
        Ok(())
    }

    /// The user's data changed (feed, refine): a new data version starts, the GP forgets the old
    /// observations and every candidate that was not removed is eligible again. The best model of
    /// the old version is still reported by [`Scheduler::best_so_far`] until the new version has one.
    pub fn data_changed(&mut self, user_id: &str) -> Result<()> {
        let index = self.user_index(user_id)?;
        let model_ids: Vec<String> = self.users[index]
            .candidates
            .iter()
            .map(|c| c.model_id.clone())
            .collect();
        let gp = self.fresh_gp(&model_ids);
        let user = &mut self.users[index];
        user.summary_cache = None;
        user.gp = gp;
        user.data_version += 1;
        if let Some(best) = user.best_current.take() {
            user.best_previous = Some(best);
        }
        user.empirical_bound = None;
        user.empirical_gap = None;
        for candidate in &mut user.candidates {
            if candidate.status != CandidateStatus::Removed {
                candidate.status = CandidateStatus::Eligible;
                candidate.upper_confidence_bound_at_pick = None;
            }
            candidate.observed_quality = None;
        }
        Ok(())
    }

    /// Whether a user has nothing left to train (no eligible candidate that is not set aside).
    pub fn is_finished(&self, user_id: &str) -> Result<bool> {
        let index = self.user_index(user_id)?;
        Ok(self.eligible(&self.users[index]).next().is_none())
    }

    /// The registered user ids, in registration order.
    pub fn user_ids(&self) -> Vec<String> {
        self.users.iter().map(|u| u.user_id.clone()).collect()
    }

    /// The user's best model so far (current data version first, else the previous version's).
    pub fn best_so_far(&self, user_id: &str) -> Result<Option<BestModel>> {
        let index = self.user_index(user_id)?;
        let user = &self.users[index];
        Ok(user
            .best_current
            .clone()
            .or_else(|| user.best_previous.clone()))
    }

    /// The posterior mean and standard deviation of every candidate of a user (model id order of
    /// registration), on the kernel's quality scale ([`KernelModel::quality_scale`]; qualities on
    /// the identity scale): what the scheduler currently believes (the standard deviation includes the
    /// hallucinated observations of the runs in flight, as decisions do).
    pub fn posterior(&self, user_id: &str) -> Result<Vec<(String, f64, f64)>> {
        let index = self.user_index(user_id)?;
        let user = &self.users[index];
        Ok(user
            .candidates
            .iter()
            .enumerate()
            .map(|(k, c)| {
                (
                    c.model_id.clone(),
                    user.gp.mean()[k],
                    user.gp.standard_deviation(k),
                )
            })
            .collect())
    }

    /// The expected cost of every candidate of a user (model id order of registration), as the
    /// cost-aware policies currently see them (observed costs for trained candidates).
    pub fn expected_costs(&self, user_id: &str) -> Result<(Vec<String>, Vec<f64>)> {
        let user = &self.users[self.user_index(user_id)?];
        Ok(user
            .candidates
            .iter()
            .map(|c| (c.model_id.clone(), c.expected_cost))
            .unzip())
    }

    /// What the user picker currently sees of every user that can still be served (registration
    /// order): best quality, largest upper confidence bound on quality (clipped to the ceiling),
    /// Algorithm 2's empirical gap, the normalised cost of the next candidate. For operators and
    /// diagnostics.
    pub fn user_summaries(&self) -> Vec<(String, UserSummary)> {
        let cost_scale = self.cost_scale();
        self.users
            .iter()
            .filter_map(|user| {
                self.summarize(user, cost_scale)
                    .map(|(summary, _)| (user.user_id.clone(), summary))
            })
            .collect()
    }

    /// The next (user, candidate) to train, or `None` when no user has an eligible candidate.
    /// The candidate is marked in flight until [`Scheduler::report`] is called for it.
    pub fn next_decision(&mut self) -> Option<Decision> {
        let cost_scale = match self.cost_scale_cache {
            Some(scale) => scale,
            None => {
                let scale = self.cost_scale();
                self.cost_scale_cache = Some(scale);
                scale
            }
        };
        // Only the users that changed since the last decision (or all, when the cost scale
        // changed) are summarised again: the others' summaries depend on nothing else.
        for index in 0..self.users.len() {
            let fresh = self.users[index]
                .summary_cache
                .as_ref()
                .is_some_and(|cached| cached.cost_scale == cost_scale);
            if !fresh {
                let entry = self.summarize(&self.users[index], cost_scale);
                self.users[index].summary_cache = Some(CachedSummary { cost_scale, entry });
            } else if cfg!(debug_assertions) {
                // A stale cache would change decisions silently: debug builds (every test) check
                // that the cached summary is the one computed afresh.
                let cached = self.users[index].summary_cache.as_ref().map(|c| &c.entry);
                let recomputed = self.summarize(&self.users[index], cost_scale);
                debug_assert_eq!(
                    format!("{cached:?}"),
                    format!("{:?}", Some(&recomputed)),
                    "stale summary of user {}",
                    self.users[index].user_id
                );
            }
        }
        let mut summaries = Vec::new();
        let mut user_indices = Vec::new();
        for (index, user) in self.users.iter().enumerate() {
            if let Some((summary, _)) = user.summary_cache.as_ref().and_then(|c| c.entry.as_ref()) {
                summaries.push(summary.clone());
                user_indices.push(index);
            }
        }
        if summaries.is_empty() {
            return None;
        }
        let picked = self
            .picker
            .pick_user(&summaries, &mut self.rng)
            .filter(|&picked| picked < summaries.len())
            .unwrap_or(0);
        let user_index = user_indices[picked];
        let bounds = self.users[user_index]
            .summary_cache
            .as_ref()
            .and_then(|c| c.entry.as_ref())
            .map(|(_, bounds)| bounds.clone())
            .unwrap_or_default();
        Some(self.decide_for(user_index, &bounds, cost_scale))
    }

    /// The next candidate of one given user (bypassing the user picker: for an operator's
    /// priority, or for oracle experiments); `None` when that user has nothing left to train.
    pub fn next_decision_for_user(&mut self, user_id: &str) -> Result<Option<Decision>> {
        let index = self.user_index(user_id)?;
        let cost_scale = self.cost_scale();
        let bounds = self.upper_confidence_bounds(&self.users[index], cost_scale);
        if bounds.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.decide_for(index, &bounds, cost_scale)))
    }

    fn decide_for(
        &mut self,
        user_index: usize,
        bounds: &[(usize, f64)],
        cost_scale: f64,
    ) -> Decision {
        let user = &self.users[user_index];
        let candidate = self
            .pick_candidate(user, bounds, cost_scale)
            .unwrap_or(bounds[0].0);
        // Line 6's B(a_t): the bound on the picked candidate's quality (not cost-weighted).
        let bound_at_pick = Some(Self::quality_bound(
            user,
            candidate,
            self.exploration(user).0,
        ));
        let hallucinate = self.hallucinate_in_flight;
        let user = &mut self.users[user_index];
        user.summary_cache = None;
        if hallucinate {
            user.gp.hallucinate(candidate);
        }
        let state = &mut user.candidates[candidate];
        state.status = CandidateStatus::InFlight;
        state.upper_confidence_bound_at_pick = bound_at_pick;
        Decision {
            user_id: user.user_id.clone(),
            model_id: state.model_id.clone(),
            data_version: user.data_version,
        }
    }

    /// Marks a decision made elsewhere (a run a previous coordinator queued, taken over after a
    /// restart) as in flight, as [`Scheduler::next_decision`] marks its own: the candidate is not
    /// decided again until [`Scheduler::report`] or [`Scheduler::cancel`]. A decision of an older
    /// data version, or a candidate already trained, is left as it is.
    pub fn mark_in_flight(&mut self, decision: &Decision) -> Result<()> {
        let (index, k) = self.locate(decision)?;
        let user = &mut self.users[index];
        if decision.data_version != user.data_version {
            return Ok(());
        }
        user.summary_cache = None;
        if user.candidates[k].status == CandidateStatus::Eligible {
            if self.hallucinate_in_flight {
                user.gp.hallucinate(k);
            }
            user.candidates[k].status = CandidateStatus::InFlight;
        }
        Ok(())
    }

    /// Gives a decision back without a result (the run failed or was cancelled): the candidate is
    /// eligible again and its hallucinated observation (if any) is dropped. A decision for an
    /// older data version changes nothing (the new version's GP never saw it); one for a candidate
    /// the user does not have is [`SchedulerError::UnknownCandidate`], as in every other call.
    pub fn cancel(&mut self, decision: &Decision) -> Result<()> {
        let (index, k) = self.locate(decision)?;
        let user = &mut self.users[index];
        if decision.data_version != user.data_version {
            return Ok(());
        }
        user.summary_cache = None;
        user.gp.forget_hallucination(k);
        if user.candidates[k].status == CandidateStatus::InFlight {
            user.candidates[k].status = CandidateStatus::Eligible;
        }
        Ok(())
    }

    /// The user's index and the candidate's index within that user of a decision: the one lookup
    /// of [`Scheduler::mark_in_flight`], [`Scheduler::cancel`] and [`Scheduler::report`].
    fn locate(&self, decision: &Decision) -> Result<(usize, usize)> {
        let index = self.user_index(&decision.user_id)?;
        let candidate = *self.users[index]
            .candidate_index_by_model
            .get(&decision.model_id)
            .ok_or_else(|| SchedulerError::UnknownCandidate {
                user: decision.user_id.clone(),
                candidate: decision.model_id.clone(),
            })?;
        Ok((index, candidate))
    }

    /// Reports the observed quality and cost of a decided (or prior) run. A report for an older
    /// data version only updates the old version's best model.
    pub fn report(&mut self, decision: &Decision, quality: f64, cost: f64) -> Result<()> {
        self.report_observation(decision, quality, cost, self.calibrate_costs)
    }

    /// [`Scheduler::report`] for a run that something outside it stopped (its training session
    /// ended, or the engine's race against the user's best run): its cost says nothing of its
    /// model's, so the user's other candidates' expected
    /// costs are not calibrated by it (a run cut after 2 s of its expected 60 would make every
    /// sibling ten times cheaper).
    pub fn report_cut(&mut self, decision: &Decision, quality: f64, cost: f64) -> Result<()> {
        self.report_observation(decision, quality, cost, false)
    }

    /// [`Scheduler::report`], calibrating the other candidates' expected costs by this one's when
    /// `calibrate_costs`.
    fn report_observation(
        &mut self,
        decision: &Decision,
        quality: f64,
        cost: f64,
        calibrate_costs: bool,
    ) -> Result<()> {
        let (index, candidate) = self.locate(decision)?;
        let cached_scale = self.cost_scale_cache;
        let user = &mut self.users[index];
        user.summary_cache = None;
        if !quality.is_finite() {
            return Err(SchedulerError::InvalidObservation {
                user: decision.user_id.clone(),
                candidate: decision.model_id.clone(),
                reason: format!("quality must be finite, got {quality}"),
            });
        }
        validate_cost(&decision.user_id, &decision.model_id, cost)?;
        let observed = BestModel {
            model_id: decision.model_id.clone(),
            quality,
            cost,
            data_version: decision.data_version,
        };
        if decision.data_version != user.data_version {
            if user
                .best_previous
                .as_ref()
                .is_none_or(|best| quality > best.quality)
            {
                user.best_previous = Some(observed);
            }
            return Ok(());
        }
        let state = &mut user.candidates[candidate];
        if state.status != CandidateStatus::Removed {
            state.status = CandidateStatus::Trained;
        }
        state.observed_quality = Some(
            state
                .observed_quality
                .map_or(quality, |earlier| earlier.max(quality)),
        );
        let ratio = (cost / state.expected_cost).clamp(0.1, 10.0);
        // The cost scale (the largest expected cost) changes only if this cost was the largest,
        // the new one is larger, or the others are rescaled.
        let scale_changes = calibrate_costs
            || cached_scale.is_none_or(|scale| state.expected_cost >= scale || cost > scale);
        state.expected_cost = cost;
        let bound_at_pick = state.upper_confidence_bound_at_pick.take();
        if calibrate_costs && ratio.is_finite() {
            for other in &mut user.candidates {
                if matches!(
                    other.status,
                    CandidateStatus::Eligible | CandidateStatus::InFlight
                ) {
                    other.expected_cost *= ratio;
                }
            }
        }
        if scale_changes {
            self.cost_scale_cache = None;
        }
        let user = &mut self.users[index];
        // The real observation replaces the run's hallucinated one (a no-op without one).
        let on_model_scale = self.kernel.quality_scale().to_model(quality);
        user.gp
            .observe_in_place_of_hallucination(candidate, on_model_scale);
        self.test_level(index);
        let user = &mut self.users[index];
        // Algorithm 2, line 6: the empirical confidence bound is the running minimum of the UCBs
        // of the picked arms; the gap is that bound minus the latest observation.
        if let Some(bound) = bound_at_pick.filter(|b| b.is_finite()) {
            let bound = self
                .kernel
                .quality_scale()
                .to_quality(bound)
                .min(self.quality_ceiling);
            let empirical_bound = user.empirical_bound.map_or(bound, |e| e.min(bound));
            user.empirical_bound = Some(empirical_bound);
            user.empirical_gap = Some((empirical_bound - quality).max(0.0));
        }
        if user
            .best_current
            .as_ref()
            .is_none_or(|best| quality > best.quality)
        {
            user.best_current = Some(observed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi_squared_quantiles_match_the_tables() {
        // 95% quantiles: 3.841 (1 degree), 15.507 (8), 124.342 (100).
        for (degrees, expected, tolerance) in
            [(1, 3.841, 0.03), (8, 15.507, 0.002), (100, 124.342, 0.001)]
        {
            let value = chi_squared_quantile(degrees, LEVEL_TEST_NORMAL_QUANTILE);
            assert!(
                (value - expected).abs() < tolerance * expected,
                "{degrees}: {value}"
            );
        }
    }
}
