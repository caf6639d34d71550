//! Diagnostic: how well do per-user estimates of "remaining loss" rank the users by their true
//! remaining loss? Plays RoundRobin GP-UCB on delgado179 and, at every step after the first round,
//! scores each estimator by the true loss of the user it would serve, relative to serving a random
//! user (0) and the user with the largest true loss (1).
//!
//! `cargo run --release -p easeml-scheduler --example user_signal -- [REPEATS] [SEED] [AMPLITUDE]`

use std::path::PathBuf;
use std::sync::Arc;

use easeml_bench::dataset::{Dataset, load_delgado179};
use easeml_scheduler::acquisition::{BetaForm, CandidatePolicy, beta, expected_improvement};
use easeml_scheduler::picker::Line8Rule;
use easeml_scheduler::{
    AmplitudeRule, CandidateSpec, HyperparameterChoice, KernelKind, KernelModel, QualityHistory,
    Scheduler, SchedulerConfig, UserPickerKind,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

/// The estimators scored, in the order of [`Users::scores`].
const NAMES: [&str; 15] = [
    "ucb_beta_t",
    "ucb_2sd",
    "max_ei",
    "sum_ei",
    "max_mean",
    "alg2_gap",
    "ucb_minus_latest",
    "headroom_1_minus_best",
    "observed_spread",
    "best_minus_mean_obs",
    "last_regret_est",
    "ucb_clip1",
    "ei_clip1",
    "ucb2sd_clip1",
    "sum_ei_clip1",
];

/// The test users of one repetition: their candidates and what their runs gave so far.
struct Users {
    candidates: Vec<Vec<usize>>,
    best: [f64; 10],
    latest: [f64; 10],
    trained: Vec<Vec<bool>>,
    empirical_bound: [f64; 10],
    gap: [f64; 10],
    observed: Vec<Vec<f64>>,
}

impl Users {
    fn new(candidates: Vec<Vec<usize>>) -> Users {
        let trained = candidates.iter().map(|c| vec![false; c.len()]).collect();
        Users {
            candidates,
            best: [0.0f64; 10],
            latest: [0.0f64; 10],
            trained,
            empirical_bound: [f64::INFINITY; 10],
            gap: [0.0f64; 10],
            observed: vec![Vec::new(); 10],
        }
    }

    fn done(&self, t: usize) -> bool {
        self.trained[t].iter().all(|&x| x)
    }

    /// GP-UCB's practical beta for user `t`'s next run.
    fn beta(&self, t: usize) -> f64 {
        let n_obs = self.trained[t].iter().filter(|&&x| x).count();
        beta(
            BetaForm::Practical,
            self.candidates[t].len(),
            n_obs + 1,
            0.1,
            1.0,
        )
    }

    /// Every estimator's score of user `t`'s remaining loss, in the order of [`NAMES`].
    fn scores(&self, t: usize, posterior: &[(String, f64, f64)]) -> Vec<f64> {
        let (best, latest, gap, observed) = (&self.best, &self.latest, &self.gap, &self.observed);
        let beta_t = self.beta(t);
        let eligible = posterior
            .iter()
            .enumerate()
            .filter(|(k, _)| !self.trained[t][*k])
            .map(|(_, p)| (p.1, p.2));
        let fold_max = |f: &dyn Fn(f64, f64) -> f64| {
            eligible
                .clone()
                .map(|(m, s)| f(m, s))
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let ucb = fold_max(&|m, s| m + beta_t.sqrt() * s);
        vec![
            ucb - best[t],
            fold_max(&|m, s| m + 2.0 * s) - best[t],
            fold_max(&|m, s| expected_improvement(m, s, best[t])),
            eligible
                .clone()
                .map(|(m, s)| expected_improvement(m, s, best[t]))
                .sum(),
            fold_max(&|m, _| m) - best[t],
            gap[t],
            ucb - latest[t],
            1.0 - best[t],
            {
                let ys = &observed[t];
                let mean = ys.iter().sum::<f64>() / ys.len() as f64;
                (ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / ys.len() as f64).sqrt()
            },
            best[t] - observed[t].iter().sum::<f64>() / observed[t].len() as f64,
            (1.0 - best[t]) * (ucb - best[t]),
            ucb.min(1.0) - best[t],
            fold_max(&|m, s| expected_improvement(m, s, best[t]) - expected_improvement(m, s, 1.0)),
            fold_max(&|m, s| m + 2.0 * s).min(1.0) - best[t],
            eligible
                .clone()
                .map(|(m, s)| expected_improvement(m, s, best[t]) - expected_improvement(m, s, 1.0))
                .sum(),
        ]
    }

    /// Records user `t`'s run of candidate `k`: its quality, and the UCB it was picked at.
    fn record(&mut self, t: usize, k: usize, bound: f64, quality: f64) {
        self.trained[t][k] = true;
        self.empirical_bound[t] = self.empirical_bound[t].min(bound);
        self.gap[t] = (self.empirical_bound[t] - quality).max(0.0);
        self.latest[t] = quality;
        self.observed[t].push(quality);
        self.best[t] = self.best[t].max(quality);
    }
}

/// The true loss each estimator's pick captures, summed over the scored steps, with the largest
/// true loss's and a random user's.
struct Tally {
    captured: Vec<f64>,
    best_total: f64,
    random_total: f64,
}

impl Tally {
    /// Scores the estimators at one step: `rows` holds each open user's true remaining loss and
    /// its estimates.
    fn add(&mut self, rows: &[(f64, Vec<f64>)]) {
        if rows.len() <= 1 {
            return;
        }
        let max_loss = rows.iter().map(|r| r.0).fold(0.0, f64::max);
        let mean_loss = rows.iter().map(|r| r.0).sum::<f64>() / rows.len() as f64;
        self.best_total += max_loss;
        self.random_total += mean_loss;
        for (e, total) in self.captured.iter_mut().enumerate() {
            let pick = rows
                .iter()
                .max_by(|a, b| a.1[e].total_cmp(&b.1[e]))
                .map(|r| r.0)
                .unwrap_or(0.0);
            *total += pick;
        }
    }
}

/// RoundRobin GP-UCB over the `test` users, its prior fitted on the `history` users' rows; with
/// each test user's candidates (the models its row has).
fn scheduler_for(
    data: &Dataset,
    test: &[usize],
    history: &[usize],
    amplitude: f64,
) -> Fallible<(Scheduler, Vec<Vec<usize>>)> {
    let history = QualityHistory {
        model_ids: data.model_ids.clone(),
        rows: history.iter().map(|&u| data.quality[u].clone()).collect(),
    };
    let kernel = Arc::new(KernelModel::from_history(
        &history,
        KernelKind::Matern52,
        HyperparameterChoice::FitMarginalLikelihood,
    )?);
    let mut scheduler = Scheduler::new(
        kernel,
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ucb(false),
            user_picker: UserPickerKind::RoundRobin,
            seed: 0,
            amplitude_prior_strength: (amplitude > 0.0).then_some(amplitude),
            amplitude_rule: AmplitudeRule::AllResiduals,
            calibrate_costs: false,
            quality_ceiling: Some(1.0),
            line8_rule: Some(Line8Rule::UcbGap),
            hallucinate_in_flight: true,
            set_aside_margin: None,
        },
    );
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    for (t, &u) in test.iter().enumerate() {
        let models: Vec<usize> = (0..data.model_ids.len())
            .filter(|&m| data.quality[u][m].is_some())
            .collect();
        scheduler.register_user(
            &format!("u{t}"),
            models
                .iter()
                .map(|&m| CandidateSpec::new(data.model_ids[m].clone()))
                .collect(),
            &[],
        )?;
        candidates.push(models);
    }
    Ok((scheduler, candidates))
}

fn main() -> Fallible<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let repeats: usize = arguments.first().map_or(Ok(5), |a| a.parse())?;
    let seed: u64 = arguments.get(1).map_or(Ok(1), |a| a.parse())?;
    let amplitude: f64 = arguments.get(2).map_or(Ok(0.0), |a| a.parse())?;
    let data_dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data"));
    let data = load_delgado179(&data_dir)?;
    let mut tally = Tally {
        captured: vec![0.0; NAMES.len()],
        best_total: 0.0,
        random_total: 0.0,
    };
    for repetition in 0..repeats {
        let mut rng = ChaCha8Rng::seed_from_u64(seed * 1000 + repetition as u64);
        let mut users: Vec<usize> = (0..data.quality.len()).collect();
        users.shuffle(&mut rng);
        let test: Vec<usize> = users[..10].to_vec();
        let (mut scheduler, candidates) = scheduler_for(&data, &test, &users[10..], amplitude)?;
        let best_possible: Vec<f64> = test
            .iter()
            .map(|&u| {
                data.quality[u]
                    .iter()
                    .flatten()
                    .copied()
                    .fold(0.0, f64::max)
            })
            .collect();
        let budget: usize = candidates.iter().map(Vec::len).sum::<usize>() / 2;
        let mut state = Users::new(candidates);
        for step in 0..budget {
            // Score the estimators (after the first round).
            if step >= 10 {
                let mut rows = Vec::new();
                for (t, possible) in best_possible.iter().enumerate() {
                    if state.done(t) {
                        continue;
                    }
                    let posterior = scheduler.posterior(&format!("u{t}"))?;
                    rows.push((possible - state.best[t], state.scores(t, &posterior)));
                }
                tally.add(&rows);
            }
            let Some(decision) = scheduler.next_decision() else {
                break;
            };
            let t: usize = decision.user_id[1..].parse()?;
            let m = data
                .model_ids
                .iter()
                .position(|id| *id == decision.model_id)
                .unwrap();
            let k = state.candidates[t].iter().position(|&c| c == m).unwrap();
            // The UCB at pick (before the report), for the Algorithm-2 gap.
            let posterior = scheduler.posterior(&decision.user_id)?;
            let bound = posterior[k].1 + state.beta(t).sqrt() * posterior[k].2;
            let quality = data.quality[test[t]][m].unwrap();
            scheduler.report(&decision, quality, 1.0)?;
            state.record(t, k, bound, quality);
        }
    }
    println!("oracle-normalised capture (0 = random user, 1 = largest true loss):");
    for (name, total) in NAMES.iter().zip(&tally.captured) {
        println!(
            "{name:<18} {:.3}",
            (total - tally.random_total) / (tally.best_total - tally.random_total)
        );
    }
    Ok(())
}
