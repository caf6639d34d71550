//! Diagnostic: how well do per-user estimates of "remaining loss" rank the users by their true
//! remaining loss? Plays RoundRobin GP-UCB on delgado179 and, at every step after the first round,
//! scores each estimator by the true loss of the user it would serve, relative to serving a random
//! user (0) and the user with the largest true loss (1).
//!
//! `cargo run --release -p easeml-scheduler --example user_signal -- [REPEATS] [SEED] [AMPLITUDE]`

use std::path::PathBuf;
use std::sync::Arc;

use easeml_bench::dataset::load_delgado179;
use easeml_scheduler::acquisition::{BetaForm, CandidatePolicy, beta, expected_improvement};
use easeml_scheduler::picker::Line8Rule;
use easeml_scheduler::{
    AmplitudeRule, CandidateSpec, HyperparameterChoice, KernelKind, KernelModel, QualityHistory,
    Scheduler, SchedulerConfig, UserPickerKind,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let repeats: usize = arguments.first().map_or(Ok(5), |a| a.parse())?;
    let seed: u64 = arguments.get(1).map_or(Ok(1), |a| a.parse())?;
    let amplitude: f64 = arguments.get(2).map_or(Ok(0.0), |a| a.parse())?;
    let data_dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data"));
    let data = load_delgado179(&data_dir)?;
    let names = [
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
    let mut captured = vec![0.0; names.len()];
    let mut best_total = 0.0;
    let mut random_total = 0.0;
    for repetition in 0..repeats {
        let mut rng = ChaCha8Rng::seed_from_u64(seed * 1000 + repetition as u64);
        let mut users: Vec<usize> = (0..data.quality.len()).collect();
        users.shuffle(&mut rng);
        let test: Vec<usize> = users[..10].to_vec();
        let history = QualityHistory {
            model_ids: data.model_ids.clone(),
            rows: users[10..]
                .iter()
                .map(|&u| data.quality[u].clone())
                .collect(),
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
        let mut best = [0.0f64; 10];
        let mut latest = [0.0f64; 10];
        let mut trained: Vec<Vec<bool>> = candidates.iter().map(|c| vec![false; c.len()]).collect();
        let mut empirical_bound = [f64::INFINITY; 10];
        let mut gap = [0.0f64; 10];
        let mut observed: Vec<Vec<f64>> = vec![Vec::new(); 10];
        let budget: usize = candidates.iter().map(Vec::len).sum::<usize>() / 2;
        for step in 0..budget {
            // Score the estimators (after the first round).
            if step >= 10 {
                let mut rows = Vec::new();
                for t in 0..10 {
                    if trained[t].iter().all(|&x| x) {
                        continue;
                    }
                    let posterior = scheduler.posterior(&format!("u{t}"))?;
                    let n_obs = trained[t].iter().filter(|&&x| x).count();
                    let beta_t = beta(
                        BetaForm::Practical,
                        candidates[t].len(),
                        n_obs + 1,
                        0.1,
                        1.0,
                    );
                    let eligible = posterior
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| !trained[t][*k])
                        .map(|(_, p)| (p.1, p.2));
                    let fold_max = |f: &dyn Fn(f64, f64) -> f64| {
                        eligible
                            .clone()
                            .map(|(m, s)| f(m, s))
                            .fold(f64::NEG_INFINITY, f64::max)
                    };
                    let ucb = fold_max(&|m, s| m + beta_t.sqrt() * s);
                    let scores = vec![
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
                            (ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / ys.len() as f64)
                                .sqrt()
                        },
                        best[t] - observed[t].iter().sum::<f64>() / observed[t].len() as f64,
                        (1.0 - best[t]) * (ucb - best[t]),
                        ucb.min(1.0) - best[t],
                        fold_max(&|m, s| {
                            expected_improvement(m, s, best[t]) - expected_improvement(m, s, 1.0)
                        }),
                        fold_max(&|m, s| m + 2.0 * s).min(1.0) - best[t],
                        eligible
                            .clone()
                            .map(|(m, s)| {
                                expected_improvement(m, s, best[t])
                                    - expected_improvement(m, s, 1.0)
                            })
                            .sum(),
                    ];
                    rows.push((best_possible[t] - best[t], scores));
                }
                if rows.len() > 1 {
                    let max_loss = rows.iter().map(|r| r.0).fold(0.0, f64::max);
                    let mean_loss = rows.iter().map(|r| r.0).sum::<f64>() / rows.len() as f64;
                    best_total += max_loss;
                    random_total += mean_loss;
                    for (e, total) in captured.iter_mut().enumerate() {
                        let pick = rows
                            .iter()
                            .max_by(|a, b| a.1[e].total_cmp(&b.1[e]))
                            .map(|r| r.0)
                            .unwrap_or(0.0);
                        *total += pick;
                    }
                }
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
            let k = candidates[t].iter().position(|&c| c == m).unwrap();
            // The UCB at pick (before the report), for the Algorithm-2 gap.
            let posterior = scheduler.posterior(&decision.user_id)?;
            let n_obs = trained[t].iter().filter(|&&x| x).count();
            let beta_t = beta(
                BetaForm::Practical,
                candidates[t].len(),
                n_obs + 1,
                0.1,
                1.0,
            );
            let bound = posterior[k].1 + beta_t.sqrt() * posterior[k].2;
            let quality = data.quality[test[t]][m].unwrap();
            scheduler.report(&decision, quality, 1.0)?;
            trained[t][k] = true;
            empirical_bound[t] = empirical_bound[t].min(bound);
            gap[t] = (empirical_bound[t] - quality).max(0.0);
            latest[t] = quality;
            observed[t].push(quality);
            best[t] = best[t].max(quality);
        }
    }
    println!("oracle-normalised capture (0 = random user, 1 = largest true loss):");
    for (name, total) in names.iter().zip(&captured) {
        println!(
            "{name:<18} {:.3}",
            (total - random_total) / (best_total - random_total)
        );
    }
    Ok(())
}
