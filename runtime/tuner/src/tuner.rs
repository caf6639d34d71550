//! The policies and the tuning loop's API: TrimTuner (Algorithm 1) with either model, and the
//! baselines of the paper's evaluation.
//!
//! A [`Tuner`] proposes points `(x, s)` of a [`Space`], is told what each test measured (accuracy
//! and cost) and names its incumbent configuration. The loop is: [`Tuner::initial_design`], then
//! repeatedly [`Tuner::recommend`] and [`Tuner::observe`]; [`Tuner::incumbent`] at any time.
//!
//! - TrimTuner (`trimtuner_dt`, `trimtuner_gp`): initial design = one random configuration at
//!   every sub-sampled level (TrimTuner's code: the table's levels below 1, `[1/60, 1/10, 1/4,
//!   1/2]`, each charged as its own test; the paper says the four snapshots cost one run at
//!   s = 1/2). Each step keeps the `filter_share` (beta = 10%) untested points of largest CEA and
//!   takes the argmax of `alpha_T = IG(x, s) / C(x, s) * P(incumbent after the test is
//!   feasible)`: IG by [`EntropySearch`], `C` the predicted cost, and the incumbent after the test
//!   found by refitting both models with the point's predicted loss and cost added (the paper's
//!   single-root Gauss-Hermite simulation; the code's `Constrained_EntropySearch.compute`).
//! - FABOLAS (`fabolas`): the same models (GP) and `IG / C` without constraints, over a random
//!   `filter_share` of the untested points (FABOLAS maximises its acquisition with DIRECT /
//!   CMA-ES over a continuous box; Table IV's "Random (10%)" filter is the discrete analogue);
//!   its incumbent is the most accurate predicted configuration, feasible or not.
//! - EIc (`eic`, CherryPick) and EIc/USD (`eic_usd`, Lynceus): full data only; initial design = 4
//!   configurations by Latin hypercube sampling (each snapped to the nearest untested
//!   configuration); GPs with the Matern part of the kernel alone; EIc = expected improvement of
//!   the loss below the best feasible observed loss x P(feasible), divided by the predicted cost
//!   for EIc/USD; evaluated on every untested configuration.
//! - Random search (`random`): uniformly random untested configurations on the full data set;
//!   the incumbent is the best feasible one observed (model free).
//!
//! The incumbent of a model-based policy is, as in TrimTuner's code (`incumbent_estimation_cea`),
//! the tested configuration (projected to `s = 1`) of largest predicted accuracy x P(feasible);
//! the paper's text says "feasible with probability 90%, maximal accuracy".

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::acquisition::{
    EntropySearch, Models, constrained_expected_improvement, expected_improvement, incumbent,
    probability_feasible, sample_without_replacement, top_share,
};
use crate::gp::Basis;
use crate::model::Model;
use crate::space::Space;

/// A tuning policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// TrimTuner with the ensemble of extra-trees.
    TrimTunerDt,
    /// TrimTuner with FABOLAS-kernel GPs.
    TrimTunerGp,
    /// Constrained expected improvement on the full data set (CherryPick).
    Eic,
    /// EIc per predicted USD on the full data set (Lynceus).
    EicUsd,
    /// FABOLAS: information gain per unit cost with sub-sampling, no constraints.
    Fabolas,
    /// Random search on the full data set.
    Random,
}

impl Policy {
    /// Every policy, in the order of reports.
    pub const ALL: [Policy; 6] = [
        Policy::TrimTunerDt,
        Policy::TrimTunerGp,
        Policy::Eic,
        Policy::EicUsd,
        Policy::Fabolas,
        Policy::Random,
    ];

    /// The policy's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::TrimTunerDt => "trimtuner_dt",
            Policy::TrimTunerGp => "trimtuner_gp",
            Policy::Eic => "eic",
            Policy::EicUsd => "eic_usd",
            Policy::Fabolas => "fabolas",
            Policy::Random => "random",
        }
    }

    /// The policy of a name (as [`Policy::name`] writes it).
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the policy tests sub-sampled points.
    pub fn sub_samples(self) -> bool {
        matches!(
            self,
            Policy::TrimTunerDt | Policy::TrimTunerGp | Policy::Fabolas
        )
    }
}

/// The settings of a [`Tuner`].
#[derive(Debug, Clone)]
pub struct TunerConfig {
    /// The policy.
    pub policy: Policy,
    /// The QoS constraint: the cost at `s = 1` must not exceed it.
    pub max_cost: f64,
    /// CEA's beta: the share of untested points on which `alpha_T` is evaluated (the paper: 10%).
    pub filter_share: f64,
    /// Trees of the ensemble (the code: 10).
    pub n_trees: usize,
    /// Representer points of entropy search (the code: 50).
    pub n_representers: usize,
    /// Joint samples of the representers' losses per step.
    pub n_samples: usize,
    /// Fantasised observations per candidate (quantiles of its predictive distribution).
    pub n_fantasies: usize,
    /// Full-data configurations of the EIc initial design (the paper: 4).
    pub n_initial_full: usize,
    /// Seed of every random choice of this tuner.
    pub seed: u64,
    /// Which of `trimtuner_dt`'s tree models carry a linear trend in the level feature
    /// ([`Model::trees_with_level_trend`]): the cost model's by default (see [`LevelTrend`]);
    /// TrimTuner's code: neither.
    pub level_trend: LevelTrend,
}

/// The tree models (of `trimtuner_dt`) that carry a linear trend in the level feature.
///
/// Trees are piecewise constant: with plain trees (TrimTuner's code) a configuration tested only
/// on small shares is predicted to cost at `s = 1` about what it cost there, so the CEA
/// incumbent is often infeasible until tested on the full data, and full-data tests look cheap.
/// The trend (the within-configuration slope of log cost in the level feature, refit at every
/// fit) carries what the tested configurations show of how cost grows with the share. On
/// cnn.csv (40 seeds) it takes trimtuner_dt to 90 / 95 / 98% of the feasible optimum at 0.81 /
/// 0.77 / 0.81 of the plain trees' cost; a trend in the loss model too is no better (README of
/// the crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelTrend {
    /// Plain trees for both (TrimTuner's code).
    Neither,
    /// The log-cost model only (the default).
    Cost,
    /// Both the loss and the log-cost models.
    Both,
}

impl LevelTrend {
    /// Every choice, in the order of reports.
    pub const ALL: [LevelTrend; 3] = [LevelTrend::Neither, LevelTrend::Cost, LevelTrend::Both];

    /// The choice's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LevelTrend::Neither => "neither",
            LevelTrend::Cost => "cost",
            LevelTrend::Both => "both",
        }
    }

    /// The choice of a name (as [`LevelTrend::name`] writes it).
    pub fn from_name(name: &str) -> Option<LevelTrend> {
        LevelTrend::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl TunerConfig {
    /// The paper's settings for `policy` under `max_cost`.
    pub fn new(policy: Policy, max_cost: f64, seed: u64) -> Self {
        TunerConfig {
            policy,
            max_cost,
            filter_share: 0.1,
            n_trees: 10,
            n_representers: 50,
            n_samples: 128,
            n_fantasies: 7,
            n_initial_full: 4,
            seed,
            level_trend: LevelTrend::Cost,
        }
    }
}

/// One test: a point and what it measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// The point `(x, s)` tested.
    pub point: usize,
    /// Measured accuracy in [0, 1].
    pub accuracy: f64,
    /// Measured cost (e.g. USD).
    pub cost: f64,
}

/// A tuner: one policy over one space.
#[derive(Debug, Clone)]
pub struct Tuner {
    config: TunerConfig,
    space: Space,
    rng: ChaCha8Rng,
    observations: Vec<Observation>,
    tested: Vec<bool>,
    models: Option<Models>,
    models_stale: bool,
}

/// The modelled loss of an accuracy: `log(1 - accuracy)` (1 - accuracy floored at 1e-6).
pub fn loss_of(accuracy: f64) -> f64 {
    (1.0 - accuracy).max(1e-6).ln()
}

impl Tuner {
    /// A tuner for `config.policy` over `space`.
    pub fn new(space: Space, config: TunerConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        let tested = vec![false; space.n_points()];
        Tuner {
            config,
            space,
            rng,
            observations: Vec::new(),
            tested,
            models: None,
            models_stale: true,
        }
    }

    /// The space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// The settings.
    pub fn config(&self) -> &TunerConfig {
        &self.config
    }

    /// Every observation so far, in order.
    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    /// The points to test before the first recommendation (the policy's initial design).
    pub fn initial_design(&mut self) -> Vec<usize> {
        let space = self.space.clone();
        match self.config.policy {
            Policy::TrimTunerDt | Policy::TrimTunerGp | Policy::Fabolas => {
                let configuration = self.rng.gen_range(0..space.n_configurations());
                (0..space.full_level())
                    .map(|level| space.point(configuration, level))
                    .collect()
            }
            Policy::Eic | Policy::EicUsd => self.latin_hypercube(self.config.n_initial_full),
            Policy::Random => {
                let mut configurations: Vec<usize> = (0..space.n_configurations()).collect();
                configurations.shuffle(&mut self.rng);
                configurations
                    .into_iter()
                    .take(self.config.n_initial_full)
                    .map(|c| space.full_point(c))
                    .collect()
            }
        }
    }

    /// `count` full-data configurations by Latin hypercube sampling over the scaled features,
    /// each snapped to the nearest configuration not yet chosen.
    fn latin_hypercube(&mut self, count: usize) -> Vec<usize> {
        let dimension = self.space.features(0).len();
        let count = count.min(self.space.n_configurations());
        let strata: Vec<Vec<usize>> = (0..dimension)
            .map(|_| {
                let mut order: Vec<usize> = (0..count).collect();
                order.shuffle(&mut self.rng);
                order
            })
            .collect();
        let mut chosen: Vec<usize> = Vec::new();
        for sample in 0..count {
            let target: Vec<f64> = strata
                .iter()
                .map(|order| (order[sample] as f64 + self.rng.r#gen::<f64>()) / count as f64)
                .collect();
            let nearest = (0..self.space.n_configurations())
                .filter(|c| !chosen.contains(c) && !self.tested[self.space.full_point(*c)])
                .min_by(|a, b| {
                    let distance = |c: usize| -> f64 {
                        self.space
                            .features(c)
                            .iter()
                            .zip(&target)
                            .map(|(f, t)| (f - t).powi(2))
                            .sum()
                    };
                    distance(*a).total_cmp(&distance(*b))
                });
            if let Some(configuration) = nearest {
                chosen.push(configuration);
            }
        }
        chosen
            .into_iter()
            .map(|c| self.space.full_point(c))
            .collect()
    }

    /// Records a test of `point` (accuracy in [0, 1], cost > 0).
    pub fn observe(&mut self, point: usize, accuracy: f64, cost: f64) {
        self.observations.push(Observation {
            point,
            accuracy,
            cost,
        });
        if let Some(tested) = self.tested.get_mut(point) {
            *tested = true;
        }
        self.models_stale = true;
    }

    /// Whether `point` has been tested.
    pub fn is_tested(&self, point: usize) -> bool {
        self.tested.get(point).copied().unwrap_or(false)
    }

    fn new_models(&self) -> Option<Models> {
        let seed = self.config.seed ^ 0x7472_6565;
        match self.config.policy {
            Policy::TrimTunerDt => {
                let trees = |trend: bool, seed: u64| {
                    if trend {
                        Model::trees_with_level_trend(self.config.n_trees, seed)
                    } else {
                        Model::trees(self.config.n_trees, seed)
                    }
                };
                let trend = self.config.level_trend;
                Some(Models {
                    loss: trees(trend == LevelTrend::Both, seed),
                    log_cost: trees(trend != LevelTrend::Neither, seed.wrapping_add(1)),
                })
            }
            Policy::TrimTunerGp | Policy::Fabolas => Some(Models {
                loss: Model::gp(Basis::Loss),
                log_cost: Model::gp(Basis::Cost),
            }),
            Policy::Eic | Policy::EicUsd => Some(Models {
                loss: Model::gp(Basis::Constant),
                log_cost: Model::gp(Basis::Constant),
            }),
            Policy::Random => None,
        }
    }

    /// Refits the models if an observation came since the last fit (GPs warm-start their
    /// hyperparameters from the previous fit).
    fn fit_models(&mut self) {
        if !self.models_stale {
            return;
        }
        self.models_stale = false;
        if self.observations.is_empty() {
            self.models = None;
            return;
        }
        let mut models = match self.models.take() {
            Some(models) => models,
            None => match self.new_models() {
                Some(models) => models,
                None => return,
            },
        };
        let inputs: Vec<Vec<f64>> = self
            .observations
            .iter()
            .map(|o| self.space.input(o.point))
            .collect();
        let losses: Vec<f64> = self
            .observations
            .iter()
            .map(|o| loss_of(o.accuracy))
            .collect();
        let log_costs: Vec<f64> = self
            .observations
            .iter()
            .map(|o| o.cost.max(1e-12).ln())
            .collect();
        models.loss.fit(&inputs, &losses);
        models.log_cost.fit(&inputs, &log_costs);
        self.models = Some(models);
    }

    /// The distinct configurations tested so far, in first-test order.
    fn tested_configurations(&self) -> Vec<usize> {
        let mut configurations = Vec::new();
        for observation in &self.observations {
            let configuration = self.space.configuration_of(observation.point);
            if !configurations.contains(&configuration) {
                configurations.push(configuration);
            }
        }
        configurations
    }

    fn constraint(&self) -> Option<f64> {
        (self.config.policy != Policy::Fabolas).then_some(self.config.max_cost)
    }

    /// The current incumbent configuration (`None` before any observation; for random search,
    /// before any full-data observation).
    pub fn incumbent(&mut self) -> Option<usize> {
        if self.config.policy == Policy::Random {
            return self.best_observed_full();
        }
        self.fit_models();
        let models = self.models.as_ref()?;
        let configurations = self.tested_configurations();
        let inputs: Vec<Vec<f64>> = configurations
            .iter()
            .map(|&c| self.space.input(self.space.full_point(c)))
            .collect();
        incumbent(models, &inputs, self.constraint()).map(|index| configurations[index])
    }

    /// Random search's incumbent: the most accurate feasible full-data observation, else the
    /// observation of largest constrained accuracy (Eq. 7).
    fn best_observed_full(&self) -> Option<usize> {
        let max_cost = self.config.max_cost;
        let score = |o: &Observation| {
            if o.cost <= max_cost {
                1.0 + o.accuracy
            } else {
                o.accuracy * max_cost / o.cost
            }
        };
        self.observations
            .iter()
            .filter(|o| self.space.is_full(o.point))
            .max_by(|a, b| score(a).total_cmp(&score(b)))
            .map(|o| self.space.configuration_of(o.point))
    }

    /// The next point to test (`None` when every eligible point has been tested).
    pub fn recommend(&mut self) -> Option<usize> {
        let full_only = !self.config.policy.sub_samples();
        let untested: Vec<usize> = (0..self.space.n_points())
            .filter(|&p| !self.tested[p] && (!full_only || self.space.is_full(p)))
            .collect();
        if untested.is_empty() {
            return None;
        }
        if self.config.policy == Policy::Random || self.observations.is_empty() {
            return untested.choose(&mut self.rng).copied();
        }
        self.fit_models();
        let models = self.models.clone()?;
        match self.config.policy {
            Policy::TrimTunerDt | Policy::TrimTunerGp => {
                Some(self.trimtuner_step(&models, &untested))
            }
            Policy::Fabolas => Some(self.fabolas_step(&models, &untested)),
            Policy::Eic | Policy::EicUsd => Some(self.eic_step(&models, &untested)),
            Policy::Random => untested.choose(&mut self.rng).copied(),
        }
    }

    /// Representer points: configurations at `s = 1` drawn with probability proportional to the
    /// expected improvement of their loss over the incumbent's predicted loss (RoBO samples its
    /// representers from (log) EI with MCMC in the continuous box).
    fn entropy_search(&mut self, models: &Models) -> (EntropySearch, Vec<Vec<f64>>) {
        let full_inputs: Vec<Vec<f64>> = (0..self.space.n_configurations())
            .map(|c| self.space.input(self.space.full_point(c)))
            .collect();
        let predictions: Vec<(f64, f64)> = full_inputs
            .iter()
            .map(|input| models.loss.predict(input))
            .collect();
        let best = self
            .tested_configurations()
            .iter()
            .map(|&c| predictions[c].0)
            .fold(f64::INFINITY, f64::min);
        let improvements: Vec<f64> = predictions
            .iter()
            .map(|(m, s)| expected_improvement(*m, *s, best))
            .collect();
        let floor = 1e-3 * improvements.iter().sum::<f64>() / improvements.len() as f64 + 1e-12;
        let weights: Vec<f64> = improvements.iter().map(|e| e + floor).collect();
        let chosen =
            sample_without_replacement(&weights, self.config.n_representers, &mut self.rng);
        let representers: Vec<Vec<f64>> = chosen.iter().map(|&c| full_inputs[c].clone()).collect();
        let search = EntropySearch::new(
            &models.loss,
            &representers,
            self.config.n_samples,
            self.config.n_fantasies,
            &mut self.rng,
        );
        (search, representers)
    }

    fn trimtuner_step(&mut self, models: &Models, untested: &[usize]) -> usize {
        let max_cost = self.config.max_cost;
        let inputs: Vec<Vec<f64>> = untested.iter().map(|&p| self.space.input(p)).collect();
        let cea: Vec<f64> = inputs
            .iter()
            .map(|input| models.cea(input, max_cost))
            .collect();
        let filtered = top_share(&cea, self.config.filter_share);
        let (search, _) = self.entropy_search(models);
        let tested = self.tested_configurations();
        let mut best: Option<(f64, usize)> = None;
        for index in filtered {
            let point = untested[index];
            let input = &inputs[index];
            let gain = search.information_gain(&models.loss, input);
            let (loss, _) = models.loss.predict(input);
            let (log_cost, _) = models.log_cost.predict(input);
            let fantasy = models.with_observation(input, loss, log_cost);
            let mut configurations = tested.clone();
            let configuration = self.space.configuration_of(point);
            if !configurations.contains(&configuration) {
                configurations.push(configuration);
            }
            let candidates: Vec<Vec<f64>> = configurations
                .iter()
                .map(|&c| self.space.input(self.space.full_point(c)))
                .collect();
            let feasible = incumbent(&fantasy, &candidates, Some(max_cost)).map_or(0.0, |i| {
                let (mean, deviation) = fantasy.log_cost.predict(&candidates[i]);
                probability_feasible(mean, deviation, max_cost)
            });
            let value = gain / log_cost.exp() * feasible;
            if value.is_finite() && best.is_none_or(|(b, _)| value > b) {
                best = Some((value, point));
            }
        }
        best.map_or(untested[0], |(_, point)| point)
    }

    fn fabolas_step(&mut self, models: &Models, untested: &[usize]) -> usize {
        let keep =
            ((untested.len() as f64 * self.config.filter_share) as usize).clamp(1, untested.len());
        let mut subset = untested.to_vec();
        subset.shuffle(&mut self.rng);
        subset.truncate(keep);
        let (search, _) = self.entropy_search(models);
        let mut best: Option<(f64, usize)> = None;
        for point in subset {
            let input = self.space.input(point);
            let gain = search.information_gain(&models.loss, &input);
            let (log_cost, _) = models.log_cost.predict(&input);
            let value = gain / log_cost.exp();
            if value.is_finite() && best.is_none_or(|(b, _)| value > b) {
                best = Some((value, point));
            }
        }
        best.map_or(untested[0], |(_, point)| point)
    }

    fn eic_step(&mut self, models: &Models, untested: &[usize]) -> usize {
        let max_cost = self.config.max_cost;
        let best_feasible = self
            .observations
            .iter()
            .filter(|o| self.space.is_full(o.point) && o.cost <= max_cost)
            .map(|o| loss_of(o.accuracy))
            .fold(None, |best: Option<f64>, loss| {
                Some(best.map_or(loss, |b| b.min(loss)))
            });
        let per_usd = self.config.policy == Policy::EicUsd;
        let scores: Vec<f64> = untested
            .iter()
            .map(|&point| {
                let input = self.space.input(point);
                let value =
                    constrained_expected_improvement(models, &input, best_feasible, max_cost);
                if per_usd {
                    value / models.log_cost.predict(&input).0.exp()
                } else {
                    value
                }
            })
            .collect();
        untested[top_share(&scores, 0.0)[0]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy space: 3 features x 4 levels; accuracy grows with feature 0 and with s, cost grows
    /// with feature 1 and s; configurations with feature 1 above 0.6 break the constraint.
    fn toy() -> (Space, impl Fn(&Space, usize) -> (f64, f64)) {
        let mut configurations = Vec::new();
        for a in 0..5 {
            for b in 0..5 {
                for c in 0..2 {
                    configurations.push(vec![a as f64, b as f64, c as f64]);
                }
            }
        }
        let space = Space::new(&configurations, &[0.1, 0.25, 0.5]);
        let truth = |space: &Space, point: usize| {
            let f = space.features(space.configuration_of(point));
            let s = space.rate_of(point);
            let accuracy = 0.5 + 0.4 * f[0] * s.sqrt() - 0.05 * f[2];
            let cost = (0.2 + f[1]) * s;
            (accuracy, cost)
        };
        (space, truth)
    }

    #[test]
    fn initial_designs_follow_each_policy() {
        let (space, _) = toy();
        let mut trimtuner =
            Tuner::new(space.clone(), TunerConfig::new(Policy::TrimTunerDt, 0.7, 1));
        let design = trimtuner.initial_design();
        assert_eq!(design.len(), 3);
        let configuration = space.configuration_of(design[0]);
        assert!(
            design
                .iter()
                .all(|&p| space.configuration_of(p) == configuration && !space.is_full(p))
        );
        let mut eic = Tuner::new(space.clone(), TunerConfig::new(Policy::Eic, 0.7, 1));
        let design = eic.initial_design();
        assert_eq!(design.len(), 4);
        assert!(design.iter().all(|&p| space.is_full(p)));
        let mut distinct = design.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn every_policy_runs_the_loop_and_never_repeats_a_point() {
        let (space, truth) = toy();
        for policy in Policy::ALL {
            let mut config = TunerConfig::new(policy, 0.7, 3);
            config.n_samples = 32;
            config.filter_share = 0.2;
            let mut tuner = Tuner::new(space.clone(), config);
            for point in tuner.initial_design() {
                let (accuracy, cost) = truth(&space, point);
                tuner.observe(point, accuracy, cost);
            }
            for _ in 0..6 {
                let point = tuner.recommend().expect("untested points remain");
                assert!(!tuner.is_tested(point), "{policy:?} repeated {point}");
                if !policy.sub_samples() {
                    assert!(space.is_full(point));
                }
                let (accuracy, cost) = truth(&space, point);
                tuner.observe(point, accuracy, cost);
                assert!(tuner.incumbent().is_some(), "{policy:?}");
            }
        }
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in Policy::ALL {
            assert_eq!(Policy::from_name(policy.name()), Some(policy));
        }
        assert_eq!(Policy::from_name("nope"), None);
    }
}
