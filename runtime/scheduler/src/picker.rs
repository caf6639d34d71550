//! Multi-user policies: which user to serve next (section 4 of the ease.ml paper).
//!
//! Every policy is a [`UserPicker`]: it sees one [`UserSummary`] per user that still has an
//! eligible candidate (finished users are never shown, so never picked) and returns an index into
//! that slice. FCFS serves the earliest user until it has nothing left to train; RoundRobin cycles
//! in registration order; Random draws uniformly (from the scheduler's seeded generator); Greedy
//! is Algorithm 2; Hybrid is Greedy that switches to round robin once frozen (section 4.4). In
//! cost-aware mode Greedy's line 8 compares estimated improvement per unit cost of each user's next
//! run (see [`UserSummary::next_cost`]).

use std::collections::HashMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What a user picker knows about one user that can still be served.
#[derive(Debug, Clone, PartialEq)]
pub struct UserSummary {
    /// Order of registration (smaller joined earlier); unique and stable.
    pub registration_sequence: u64,
    /// Observations in the user's current data version.
    pub n_observations: usize,
    /// Runs of the user in flight (decided, not yet reported or cancelled).
    pub n_in_flight: usize,
    /// Best quality observed so far in the current data version.
    pub best_quality: Option<f64>,
    /// Whether `best_quality` reaches the quality ceiling: no run of the user can lower its
    /// regret, so only a picker that serves users blindly (round robin, random) serves it again.
    pub at_quality_ceiling: bool,
    /// The largest upper confidence bound on quality (`mean + sqrt(beta_t) sd`, never cost-weighted)
    /// over eligible candidates, clipped to the quality ceiling (no model can beat a quality of 1).
    pub largest_upper_confidence_bound: f64,
    /// Algorithm 2, line 6: `sigma~ = min(B(a_t), min_{t'<t} y_t' + sigma~_t') - y_t`, the empirical
    /// confidence gap after the user's latest observation (`None` before the first one).
    pub empirical_gap: Option<f64>,
    /// Normalised cost of the candidate the user would train next (1 when cost-oblivious): Greedy
    /// divides the user's estimated regret by it, so it picks the largest improvement per unit cost.
    pub next_cost: f64,
    /// The expected improvement over `best_quality` of the candidate the user would train next
    /// (GP posterior; quality capped at the ceiling): what [`Line8Rule::ExpectedImprovement`] ranks.
    /// The scheduler computes it only under that rule (0 otherwise).
    pub next_expected_improvement: f64,
    /// The user's expected remaining regret (GP posterior over its eligible candidates; see
    /// [`crate::acquisition::expected_remaining_regret`]): what [`Line8Rule::ExpectedRegret`] ranks.
    /// The scheduler computes it only under that rule (0 otherwise).
    pub expected_remaining_regret: f64,
}

/// The rule of Algorithm 2's line 8: which user of the candidate set `V_t` to serve. The paper
/// leaves it open ("any rule"; the regret bound holds for every rule) and uses the UCB gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Line8Rule {
    /// The paper's rule: the largest gap between the user's highest upper confidence bound and its
    /// best quality so far (per unit cost of its next run in cost-aware mode).
    #[default]
    UcbGap,
    /// The largest expected improvement of the run the user would train next over its best quality
    /// so far (per unit cost in cost-aware mode): the posterior's own estimate of how much the next
    /// run of that user lowers the total regret, instead of an upper bound on it.
    ExpectedImprovement,
    /// The largest expected remaining regret (per unit cost of the user's next run in cost-aware
    /// mode): the posterior's estimate of how far the user's best so far is from its best
    /// candidate, which the oracle user picker ranks by with the true values.
    ExpectedRegret,
}

impl Line8Rule {
    /// The rule's name as the benchmark spells it (`ucb_gap`, `expected_improvement`).
    pub fn name(self) -> &'static str {
        match self {
            Line8Rule::UcbGap => "ucb_gap",
            Line8Rule::ExpectedImprovement => "expected_improvement",
            Line8Rule::ExpectedRegret => "expected_regret",
        }
    }

    /// The rule named `name` (see [`Line8Rule::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ucb_gap" => Some(Line8Rule::UcbGap),
            "expected_improvement" | "ei" => Some(Line8Rule::ExpectedImprovement),
            "expected_regret" => Some(Line8Rule::ExpectedRegret),
            _ => None,
        }
    }

    /// easeml's rule for a cost mode: the paper's UCB gap when every run costs the same, expected
    /// improvement per unit cost when runs cost differently. An upper bound divided by a cost
    /// rewards a cheap run for its optimism: a near-chance user's cheap run, whose bound is wide on
    /// any scale but whose expected gain is tiny, outranks an expensive run that is likely to
    /// close a real gap (easeml-dl: the UCB gap per cost reaches mean loss 0.02 at 1826 s of
    /// runtime, EI per cost at 1457 s; delgado179 with U(0, 1) costs is within the seeds' spread
    /// either way; cost-oblivious, the UCB gap is the better rule on delgado179: 50 / 91 runs to
    /// 0.02 / 0.01 against 55 / 99; DECISIONS.md).
    pub fn for_cost_mode(cost_aware: bool) -> Self {
        if cost_aware {
            Line8Rule::ExpectedImprovement
        } else {
            Line8Rule::UcbGap
        }
    }

    /// What the rule ranks a user by (larger is served first).
    pub fn potential(self, user: &UserSummary) -> f64 {
        let gain = match self {
            Line8Rule::UcbGap => {
                user.largest_upper_confidence_bound - user.best_quality.unwrap_or(0.0)
            }
            Line8Rule::ExpectedImprovement => user.next_expected_improvement,
            Line8Rule::ExpectedRegret => user.expected_remaining_regret,
        };
        finite_or_zero(gain / user.next_cost)
    }
}

/// The default picker's round-robin floor: a user waits at most this many rounds.
pub const DEFAULT_STARVATION_ROUNDS: usize = 2;

/// A multi-user policy.
pub trait UserPicker: Send + std::fmt::Debug {
    /// The policy's name as the benchmark spells it.
    fn name(&self) -> &'static str;
    /// Chooses one of `users` (never empty when called); returns its index in the slice.
    fn pick_user(&mut self, users: &[UserSummary], rng: &mut ChaCha8Rng) -> Option<usize>;
}

/// The user-picking policies by name, with their parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserPickerKind {
    /// First come, first served: the earliest user until it has no candidate left.
    Fcfs,
    /// Cycle over users in registration order.
    RoundRobin,
    /// A uniformly random user.
    Random,
    /// Algorithm 2 with the "Strategy for Line 8" pick rule.
    Greedy,
    /// Greedy, switching to round robin once frozen for `patience` steps (the paper's s = 10).
    Hybrid {
        /// Steps with an unchanged candidate set and no drop of the estimated regret.
        patience: usize,
    },
    /// easeml's default: Hybrid with a round-robin floor (see [`DefaultPicker`]).
    Default {
        /// Hybrid's `s`.
        patience: usize,
        /// A user not served for more than `starvation_rounds` rounds of every user's next run
        /// (counted in expected cost; [`DefaultPicker`]) is served next (0: no floor).
        starvation_rounds: usize,
    },
}

impl UserPickerKind {
    /// A fresh picker of this kind; Greedy and Hybrid rank the users of `V_t` by `line8_rule`.
    pub fn build(self, line8_rule: Line8Rule) -> Box<dyn UserPicker> {
        match self {
            UserPickerKind::Fcfs => Box::new(FcfsPicker),
            UserPickerKind::RoundRobin => Box::new(RoundRobinPicker::default()),
            UserPickerKind::Random => Box::new(RandomPicker),
            UserPickerKind::Greedy => Box::new(GreedyPicker { rule: line8_rule }),
            UserPickerKind::Hybrid { patience } => {
                Box::new(HybridPicker::new(patience).with_line8_rule(line8_rule))
            }
            UserPickerKind::Default {
                patience,
                starvation_rounds,
            } => Box::new(
                DefaultPicker::new(patience, starvation_rounds).with_line8_rule(line8_rule),
            ),
        }
    }
}

impl Default for UserPickerKind {
    /// easeml's default: Hybrid with s = 10 (the paper's) and a round-robin floor of
    /// [`DEFAULT_STARVATION_ROUNDS`].
    fn default() -> Self {
        UserPickerKind::Default {
            patience: 10,
            starvation_rounds: DEFAULT_STARVATION_ROUNDS,
        }
    }
}

/// First come, first served.
#[derive(Debug, Clone, Copy, Default)]
pub struct FcfsPicker;

impl UserPicker for FcfsPicker {
    fn name(&self) -> &'static str {
        "fcfs"
    }

    fn pick_user(&mut self, users: &[UserSummary], _rng: &mut ChaCha8Rng) -> Option<usize> {
        users
            .iter()
            .enumerate()
            .min_by_key(|(_, user)| user.registration_sequence)
            .map(|(index, _)| index)
    }
}

/// Round robin in registration order; users that join later take their place in the cycle.
#[derive(Debug, Clone, Default)]
pub struct RoundRobinPicker {
    last_served_sequence: Option<u64>,
}

impl UserPicker for RoundRobinPicker {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn pick_user(&mut self, users: &[UserSummary], _rng: &mut ChaCha8Rng) -> Option<usize> {
        let after_last = |user: &&UserSummary| {
            self.last_served_sequence
                .is_none_or(|last| user.registration_sequence > last)
        };
        let next = users
            .iter()
            .filter(after_last)
            .min_by_key(|user| user.registration_sequence)
            .or_else(|| users.iter().min_by_key(|user| user.registration_sequence))?;
        self.last_served_sequence = Some(next.registration_sequence);
        users
            .iter()
            .position(|user| user.registration_sequence == next.registration_sequence)
    }
}

/// A uniformly random user.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomPicker;

impl UserPicker for RandomPicker {
    fn name(&self) -> &'static str {
        "random"
    }

    fn pick_user(&mut self, users: &[UserSummary], rng: &mut ChaCha8Rng) -> Option<usize> {
        if users.is_empty() {
            None
        } else {
            Some(rng.gen_range(0..users.len()))
        }
    }
}

/// One greedy decision with what Hybrid needs to detect freezing.
#[derive(Debug, Clone, PartialEq)]
pub struct GreedyDecision {
    /// Index of the picked user in the slice.
    pub picked: usize,
    /// Registration sequences of the candidate set `V_t` (sorted); empty in the initial phase.
    pub candidate_set: Vec<u64>,
    /// The estimated total regret: the sum of every user's empirical gap.
    pub estimated_regret: f64,
    /// True while some user has no observation yet (lines 1-4 of Algorithm 2).
    pub initial_phase: bool,
}

/// Algorithm 2: users without an observation first (lines 1-4, in registration order; a user whose
/// first run is in flight counts as served, so concurrent decisions go to different users); then the
/// candidate set `V_t` of users whose empirical gap is at least the mean gap (line 7), and from it
/// the user with the largest gap between its highest upper confidence bound and its best quality
/// so far (line 8, "Strategy for Line 8"), per unit of the normalised cost of the candidate it
/// would train next (cost-aware mode; the cost is 1 otherwise). Ties go to the earlier user.
pub fn greedy_decision(users: &[UserSummary], rule: Line8Rule) -> Option<GreedyDecision> {
    if users.is_empty() {
        return None;
    }
    if let Some((picked, _)) = users
        .iter()
        .enumerate()
        .filter(|(_, user)| {
            (user.n_observations == 0 || user.empirical_gap.is_none()) && user.n_in_flight == 0
        })
        .min_by_key(|(_, user)| user.registration_sequence)
    {
        return Some(GreedyDecision {
            picked,
            candidate_set: Vec::new(),
            estimated_regret: f64::INFINITY,
            initial_phase: true,
        });
    }
    let gaps: Vec<f64> = users
        .iter()
        .map(|user| finite_or_zero(user.empirical_gap.unwrap_or(0.0)))
        .collect();
    let estimated_regret: f64 = gaps.iter().sum();
    let mean_gap = estimated_regret / users.len() as f64;
    let mut candidate_indices: Vec<usize> = (0..users.len())
        .filter(|&index| gaps[index] >= mean_gap - 1e-12 * mean_gap.abs())
        .collect();
    if candidate_indices.is_empty() {
        candidate_indices = (0..users.len()).collect();
    }
    let potential = |index: usize| rule.potential(&users[index]);
    let picked = candidate_indices
        .iter()
        .copied()
        .fold(None, |best, index| match best {
            None => Some(index),
            Some(best_index) => {
                let better = potential(index) > potential(best_index)
                    || (potential(index) == potential(best_index)
                        && users[index].registration_sequence
                            < users[best_index].registration_sequence);
                Some(if better { index } else { best_index })
            }
        })?;
    let mut candidate_set: Vec<u64> = candidate_indices
        .iter()
        .map(|&index| users[index].registration_sequence)
        .collect();
    candidate_set.sort_unstable();
    Some(GreedyDecision {
        picked,
        candidate_set,
        estimated_regret,
        initial_phase: false,
    })
}

fn finite_or_zero(value: f64) -> f64 {
    if value.is_finite() { value } else { 0.0 }
}

/// Algorithm 2 (Greedy).
#[derive(Debug, Clone, Copy, Default)]
pub struct GreedyPicker {
    /// Line 8's rule.
    pub rule: Line8Rule,
}

impl UserPicker for GreedyPicker {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn pick_user(&mut self, users: &[UserSummary], _rng: &mut ChaCha8Rng) -> Option<usize> {
        greedy_decision(users, self.rule).map(|decision| decision.picked)
    }
}

/// Greedy until frozen, then round robin (section 4.4). Frozen: the candidate set `V_t` stayed
/// the same and the estimated regret did not drop below its lowest value since the set last
/// changed, for `patience` consecutive steps. A user without observations (one that joined, or
/// whose data changed) ends the round-robin phase: the picker starts over as Greedy.
#[derive(Debug, Clone)]
pub struct HybridPicker {
    patience: usize,
    rule: Line8Rule,
    round_robin: RoundRobinPicker,
    previous_candidate_set: Option<Vec<u64>>,
    lowest_estimated_regret: f64,
    stale_steps: usize,
    switched_to_round_robin: bool,
}

impl HybridPicker {
    /// A hybrid picker that switches after `patience` frozen steps.
    pub fn new(patience: usize) -> Self {
        HybridPicker {
            patience,
            rule: Line8Rule::default(),
            round_robin: RoundRobinPicker::default(),
            previous_candidate_set: None,
            lowest_estimated_regret: f64::INFINITY,
            stale_steps: 0,
            switched_to_round_robin: false,
        }
    }

    /// The same picker with another line-8 rule for its Greedy phase.
    pub fn with_line8_rule(mut self, rule: Line8Rule) -> Self {
        self.rule = rule;
        self
    }

    /// Whether the picker has switched to round robin.
    pub fn is_round_robin(&self) -> bool {
        self.switched_to_round_robin
    }
}

impl UserPicker for HybridPicker {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    fn pick_user(&mut self, users: &[UserSummary], rng: &mut ChaCha8Rng) -> Option<usize> {
        let decision = greedy_decision(users, self.rule)?;
        if decision.initial_phase {
            self.switched_to_round_robin = false;
            self.previous_candidate_set = None;
            self.lowest_estimated_regret = f64::INFINITY;
            self.stale_steps = 0;
            return Some(decision.picked);
        }
        if self.switched_to_round_robin {
            return self.round_robin.pick_user(users, rng);
        }
        let same_set = self.previous_candidate_set.as_ref() == Some(&decision.candidate_set);
        if same_set && decision.estimated_regret >= self.lowest_estimated_regret {
            self.stale_steps += 1;
        } else {
            self.stale_steps = 0;
        }
        if same_set {
            self.lowest_estimated_regret =
                self.lowest_estimated_regret.min(decision.estimated_regret);
        } else {
            self.lowest_estimated_regret = decision.estimated_regret;
        }
        self.previous_candidate_set = Some(decision.candidate_set);
        if self.stale_steps >= self.patience {
            self.switched_to_round_robin = true;
            return self.round_robin.pick_user(users, rng);
        }
        Some(decision.picked)
    }
}

/// easeml's default user picker: Hybrid (Greedy, Algorithm 2, until frozen, then round robin)
/// with a round-robin floor. The floor counts time, not decisions: each decision advances the
/// picker's clock by the picked user's [`UserSummary::next_cost`] (the expected cost of the run it
/// gets), and a user that has waited longer than `starvation_rounds` rounds, a round being every
/// shown user's next run (the sum of their `next_cost`), or longer than `starvation_rounds` x
/// (number of users) of its own next runs, whichever is shorter, is served next (the
/// longest-waiting first, then the earliest registered), whatever Greedy's estimate says;
/// otherwise the decision is Hybrid's. With equal costs (the cost-oblivious mode's 1) both limits
/// are `starvation_rounds` x (number of users) decisions; with unequal ones a user's expensive runs
/// (networks of a minute beside other users' runs of seconds) no longer buy it several rounds'
/// worth of the workers' time before the others are served, and the second limit is a share of
/// time: every user gets at least about `1 / (starvation_rounds x users + 1)` of the clock, so a
/// user whose runs take milliseconds is not held for rounds of minute-long runs (its runs cost the
/// others next to nothing). The floor bounds how long Greedy may starve a user whose regret the GP
/// underestimates (with EI per cost inside each user, the user's next run is often its cheapest
/// candidate, and a user the posterior believes done may still have loss left). A user in its
/// first round (no observation yet) is Hybrid's to serve, and so is one whose best quality reaches
/// the ceiling: it has no loss left, whatever the posterior says (on the synthetic family with
/// ALPHA = 1, where most users reach quality 1 within a few runs, the floor spent up to a fifth of
/// the runs on such users; bench/results/scheduler/README.md).
#[derive(Debug, Clone)]
pub struct DefaultPicker {
    starvation_rounds: usize,
    /// The expected cost of every run decided so far (the sum of the picked users' `next_cost`).
    clock: f64,
    /// Each user's clock when it was last served (by registration sequence; 0 before).
    last_served: HashMap<u64, f64>,
    hybrid: HybridPicker,
}

impl DefaultPicker {
    /// A default picker: Hybrid with `patience` (the paper's s), and the floor (0: off, which is
    /// Hybrid exactly).
    pub fn new(patience: usize, starvation_rounds: usize) -> Self {
        DefaultPicker {
            starvation_rounds,
            clock: 0.0,
            last_served: HashMap::new(),
            hybrid: HybridPicker::new(patience),
        }
    }

    /// The same picker with another line-8 rule for its Greedy phase.
    pub fn with_line8_rule(mut self, rule: Line8Rule) -> Self {
        self.hybrid = self.hybrid.with_line8_rule(rule);
        self
    }

    /// The user the floor forces (waited longer than its limit), if any.
    fn starved(&self, users: &[UserSummary]) -> Option<usize> {
        if self.starvation_rounds == 0 {
            return None;
        }
        let round: f64 = users.iter().map(run_cost).sum();
        let limit = |user: &UserSummary| {
            let own_share = users.len() as f64 * run_cost(user);
            self.starvation_rounds as f64 * round.min(own_share)
        };
        let waited = |user: &UserSummary| {
            let last = self
                .last_served
                .get(&user.registration_sequence)
                .copied()
                .unwrap_or(0.0);
            self.clock - last
        };
        users
            .iter()
            .enumerate()
            .filter(|(_, user)| {
                user.n_observations > 0
                    && user.n_in_flight == 0
                    && waited(user) > limit(user)
                    && !user.at_quality_ceiling
            })
            .max_by(|(_, a), (_, b)| {
                waited(a)
                    .total_cmp(&waited(b))
                    .then(b.registration_sequence.cmp(&a.registration_sequence))
            })
            .map(|(index, _)| index)
    }
}

/// What a user's next run adds to the default picker's clock: its `next_cost`, or 1 where that is
/// not a positive number (a summary without costs counts decisions).
fn run_cost(user: &UserSummary) -> f64 {
    if user.next_cost.is_finite() && user.next_cost > 0.0 {
        user.next_cost
    } else {
        1.0
    }
}

impl UserPicker for DefaultPicker {
    fn name(&self) -> &'static str {
        "default"
    }

    fn pick_user(&mut self, users: &[UserSummary], rng: &mut ChaCha8Rng) -> Option<usize> {
        let picked = match self.starved(users) {
            Some(index) => index,
            None => self.hybrid.pick_user(users, rng)?,
        };
        let user = users.get(picked)?;
        self.clock += run_cost(user);
        self.last_served
            .insert(user.registration_sequence, self.clock);
        Some(picked)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn user(sequence: u64, observations: usize, best: f64, ucb: f64, gap: f64) -> UserSummary {
        UserSummary {
            registration_sequence: sequence,
            n_observations: observations,
            n_in_flight: 0,
            best_quality: (observations > 0).then_some(best),
            at_quality_ceiling: observations > 0 && best >= 1.0,
            largest_upper_confidence_bound: ucb,
            empirical_gap: (observations > 0).then_some(gap),
            next_cost: 1.0,
            next_expected_improvement: 0.0,
            expected_remaining_regret: 0.0,
        }
    }

    #[test]
    fn round_robin_cycles_and_skips_absent_users() {
        let mut picker = RoundRobinPicker::default();
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let users = vec![
            user(0, 1, 0.5, 1.0, 0.1),
            user(3, 1, 0.5, 1.0, 0.1),
            user(5, 1, 0.5, 1.0, 0.1),
        ];
        let picks: Vec<usize> = (0..4)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0]);
        // User 3 finished (not shown any more): the cycle goes on with 5.
        let remaining = vec![users[0].clone(), users[2].clone()];
        assert_eq!(picker.pick_user(&remaining, &mut rng), Some(1));
    }

    #[test]
    fn greedy_serves_unobserved_users_first_then_the_largest_potential_above_the_mean() {
        let users = vec![user(0, 2, 0.9, 0.95, 0.05), user(1, 0, 0.0, 1.0, 0.0)];
        assert_eq!(
            greedy_decision(&users, Line8Rule::UcbGap).unwrap().picked,
            1
        );
        // Gaps 0.05, 0.3, 0.25: mean 0.2, V = {1, 2}; potentials 0.2 and 0.35 -> user 2.
        let users = vec![
            user(0, 2, 0.9, 0.95, 0.05),
            user(1, 2, 0.6, 0.8, 0.3),
            user(2, 2, 0.5, 0.85, 0.25),
        ];
        let decision = greedy_decision(&users, Line8Rule::UcbGap).unwrap();
        assert_eq!(decision.picked, 2);
        assert_eq!(decision.candidate_set, vec![1, 2]);
        assert!((decision.estimated_regret - 0.6).abs() < 1e-12);
    }

    #[test]
    fn greedy_divides_the_estimated_regret_by_the_next_candidates_cost() {
        // Same gaps (both in V_t), potentials 0.3 and 0.2; the second user's next run costs a
        // quarter: 0.2 / 0.25 = 0.8 > 0.3 / 1.
        let mut users = vec![user(0, 2, 0.6, 0.9, 0.2), user(1, 2, 0.6, 0.8, 0.2)];
        assert_eq!(
            greedy_decision(&users, Line8Rule::UcbGap).unwrap().picked,
            0
        );
        users[1].next_cost = 0.25;
        assert_eq!(
            greedy_decision(&users, Line8Rule::UcbGap).unwrap().picked,
            1
        );
    }

    #[test]
    fn line8_rules_rank_the_candidate_set_by_their_own_estimate() {
        // Both users are in V_t (equal gaps). User 0 has the wider upper bound (0.95 - 0.6 = 0.35
        // against 0.3) but its next run is expected to gain less (0.02 against 0.05).
        let mut users = vec![user(0, 2, 0.6, 0.95, 0.2), user(1, 2, 0.6, 0.9, 0.2)];
        users[0].next_expected_improvement = 0.02;
        users[1].next_expected_improvement = 0.05;
        assert_eq!(
            greedy_decision(&users, Line8Rule::UcbGap).unwrap().picked,
            0
        );
        let by_gain = Line8Rule::ExpectedImprovement;
        assert_eq!(greedy_decision(&users, by_gain).unwrap().picked, 1);
        // Per unit cost: user 0's next run is five times cheaper (0.02 / 0.2 = 0.1 > 0.05).
        users[0].next_cost = 0.2;
        assert_eq!(greedy_decision(&users, by_gain).unwrap().picked, 0);
        // A NaN estimate never wins.
        users[0].next_expected_improvement = f64::NAN;
        assert_eq!(greedy_decision(&users, by_gain).unwrap().picked, 1);
        // By expected remaining regret: user 1's (0.08 against 0.03), per unit cost as well.
        users[0].next_cost = 1.0;
        users[0].expected_remaining_regret = 0.03;
        users[1].expected_remaining_regret = 0.08;
        let by_regret = Line8Rule::ExpectedRegret;
        assert_eq!(greedy_decision(&users, by_regret).unwrap().picked, 1);
        users[0].next_cost = 0.3;
        assert_eq!(greedy_decision(&users, by_regret).unwrap().picked, 0);
        for rule in [
            Line8Rule::UcbGap,
            Line8Rule::ExpectedImprovement,
            Line8Rule::ExpectedRegret,
        ] {
            assert_eq!(Line8Rule::from_name(rule.name()), Some(rule));
        }
        assert_eq!(Line8Rule::from_name("largest"), None);
    }

    #[test]
    fn hybrid_switches_to_round_robin_after_patience_frozen_steps() {
        let mut picker = HybridPicker::new(3);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let users = vec![user(0, 1, 0.9, 0.95, 0.01), user(1, 1, 0.5, 0.9, 0.4)];
        let mut picks = Vec::new();
        for _ in 0..7 {
            picks.push(picker.pick_user(&users, &mut rng).unwrap());
        }
        // Greedy keeps picking user 1; after 3 frozen steps (the 4th decision) round robin takes over.
        assert_eq!(picks, vec![1, 1, 1, 0, 1, 0, 1]);
        assert!(picker.is_round_robin());
        // A user with new data (no observations) brings Greedy back.
        let users = vec![user(0, 0, 0.0, 0.95, 0.0), user(1, 1, 0.5, 0.9, 0.4)];
        assert_eq!(picker.pick_user(&users, &mut rng), Some(0));
        assert!(!picker.is_round_robin());
    }

    #[test]
    fn default_picker_serves_a_starved_user_within_its_floor() {
        // Greedy (Hybrid with a patience it never reaches) always prefers user 1 (the only one in
        // V_t); with a floor of 1 round, user 0 waits no more than 2 (users) decisions.
        let users = vec![user(0, 1, 0.9, 0.95, 0.01), user(1, 1, 0.5, 0.9, 0.4)];
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut hybrid = HybridPicker::new(100);
        let greedy_picks: Vec<usize> = (0..6)
            .map(|_| hybrid.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(greedy_picks, vec![1; 6]);
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..8)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 1, 1, 0, 1, 1, 1, 0]);
        // Floor 0 is Hybrid exactly.
        let mut unfloored = DefaultPicker::new(100, 0);
        let picks: Vec<usize> = (0..6)
            .map(|_| unfloored.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, greedy_picks);
    }

    #[test]
    fn default_picker_floor_counts_the_time_of_the_runs_not_their_number() {
        // User 1 is Greedy's only choice (the only gap above the mean) and its runs cost ten times
        // the others'. A round (every user's next run) costs 1.2, but users 0 and 2 wait at most
        // 3 users x their own run (0.3 of the clock): after each of user 1's runs (1.0) both are
        // served, the longest-waiting (then the earliest registered) first. Counting decisions,
        // they would wait for four of user 1's runs (more than 3 users x 1 round).
        let mut users = vec![
            user(0, 1, 0.9, 0.95, 0.01),
            user(1, 1, 0.5, 0.9, 0.4),
            user(2, 1, 0.9, 0.95, 0.01),
        ];
        for (user, cost) in users.iter_mut().zip([0.1, 1.0, 0.1]) {
            user.next_cost = cost;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..8)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 0, 2, 1, 0, 2, 1, 0]);
        // Costs closer together: users 0 and 2 cost 0.5 and a round 2.0; their own limit is 1.5
        // of the clock, so they wait two of user 1's runs (2.0 > 1.5) where the round alone would
        // hold them for three (more than 2.0).
        for (user, cost) in users.iter_mut().zip([0.5, 1.0, 0.5]) {
            user.next_cost = cost;
        }
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..6)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 1, 0, 2, 1, 1]);
        // With equal costs the same floor counts decisions: a user is served once it has waited
        // more than 3 users x 1 round.
        for user in &mut users {
            user.next_cost = 1.0;
        }
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..6)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 1, 1, 1, 0, 2]);
    }

    #[test]
    fn default_picker_never_forces_a_user_at_the_quality_ceiling() {
        // User 0 has reached quality 1 (nothing left to gain); Greedy prefers user 1 forever.
        let users = vec![user(0, 1, 1.0, 1.0, 0.0), user(1, 1, 0.5, 0.9, 0.4)];
        assert!(users[0].at_quality_ceiling && !users[1].at_quality_ceiling);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..8)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1; 8]);
        // Just below the ceiling, the floor serves it within its limit as before.
        let users = vec![user(0, 1, 0.999, 1.0, 0.0), user(1, 1, 0.5, 0.9, 0.4)];
        let mut picker = DefaultPicker::new(100, 1);
        let picks: Vec<usize> = (0..4)
            .map(|_| picker.pick_user(&users, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 1, 1, 0]);
    }

    #[test]
    fn default_picker_serves_first_rounds_in_order_and_skips_users_in_flight() {
        let mut picker = DefaultPicker::new(100, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        // Users without observations first, in registration order (lines 1-4).
        let fresh = vec![user(4, 0, 0.0, 1.0, 0.0), user(2, 0, 0.0, 1.0, 0.0)];
        assert_eq!(picker.pick_user(&fresh, &mut rng), Some(1));
        // User 0 has waited past the floor, but its run is in flight: Greedy decides (user 1).
        let mut users = vec![user(0, 1, 0.9, 0.95, 0.01), user(1, 1, 0.5, 0.9, 0.4)];
        for _ in 0..3 {
            picker.pick_user(&users[1..], &mut rng);
        }
        users[0].n_in_flight = 1;
        assert_eq!(picker.pick_user(&users, &mut rng), Some(1));
        users[0].n_in_flight = 0;
        assert_eq!(picker.pick_user(&users, &mut rng), Some(0));
        assert_eq!(
            UserPickerKind::default().build(Line8Rule::UcbGap).name(),
            "default"
        );
    }
}
