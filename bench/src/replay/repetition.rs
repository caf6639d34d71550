//! One repetition of the replay: its draw (test users, their costs and candidates, the budget),
//! the priors fitted on the other users' rows, each policy's scheduler configured, and the
//! event-driven simulation of the policy over the repetition's workers.

use super::*;

/// What one repetition gives the replay's report.
pub(super) struct Repetition {
    pub(super) split: ReplaySplit,
    pub(super) traces: Vec<Trace>,
    pub(super) seconds: Vec<f64>,
    pub(super) budget: f64,
    pub(super) kernel_fit_seconds: f64,
    pub(super) hyperparameters: KernelHyperparameters,
    pub(super) history_covariance_weight: Option<f64>,
    pub(super) default_quality_scale: Option<QualityScale>,
}

pub(super) fn repetition_rng(seed: u64, repetition: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ (repetition as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

pub(super) fn policy_config(
    policy: PolicyName,
    config: &ReplayConfig,
    cited_order: &[String],
    recent_order: &[String],
    seed: u64,
) -> SchedulerConfig {
    let cost_aware = config.cost_aware;
    let patience = config.hybrid_patience;
    let ucb_with = |cost_aware: bool| CandidatePolicy::Ucb {
        cost_aware,
        beta_form: config.beta_form,
        delta: config.ucb_delta,
        beta_scale: config.beta_scale,
    };
    let ucb = ucb_with(cost_aware);
    let (candidate_policy, user_picker) = match policy {
        PolicyName::Fcfs => (ucb, UserPickerKind::Fcfs),
        PolicyName::RoundRobin => (ucb, UserPickerKind::RoundRobin),
        PolicyName::Random => (ucb, UserPickerKind::Random),
        PolicyName::Greedy => (ucb, UserPickerKind::Greedy),
        PolicyName::Hybrid => (ucb, UserPickerKind::Hybrid { patience }),
        // The peers never reach here (run_replay refuses them); the oracle picks users itself.
        PolicyName::OracleUser | PolicyName::OptunaGp | PolicyName::OptunaTpe => {
            (ucb, UserPickerKind::RoundRobin)
        }
        PolicyName::HybridCostOblivious => (
            CandidatePolicy::ucb(false),
            UserPickerKind::Hybrid { patience },
        ),
        PolicyName::MostCited => (
            CandidatePolicy::FixedOrder {
                model_order: cited_order.to_vec(),
            },
            UserPickerKind::RoundRobin,
        ),
        PolicyName::MostRecent => (
            CandidatePolicy::FixedOrder {
                model_order: recent_order.to_vec(),
            },
            UserPickerKind::RoundRobin,
        ),
        PolicyName::Spearmint => (
            CandidatePolicy::ExpectedImprovement {
                per_cost: cost_aware,
            },
            UserPickerKind::RoundRobin,
        ),
        PolicyName::HybridEi => (
            CandidatePolicy::ExpectedImprovement {
                per_cost: cost_aware,
            },
            UserPickerKind::Hybrid { patience },
        ),
        PolicyName::Default
        | PolicyName::DefaultRbf
        | PolicyName::DefaultNoFloor
        | PolicyName::DefaultRegret
        | PolicyName::DefaultMlKernel
        | PolicyName::DefaultLevelAmplitude
        | PolicyName::DefaultAllResiduals
        | PolicyName::DefaultHistoryCovariance
        | PolicyName::DefaultIdentityScale => (
            CandidatePolicy::ExpectedImprovement {
                per_cost: cost_aware,
            },
            UserPickerKind::Default {
                patience,
                starvation_rounds: if policy == PolicyName::DefaultNoFloor {
                    0
                } else {
                    DEFAULT_STARVATION_ROUNDS
                },
            },
        ),
        PolicyName::DefaultUcb => (
            ucb,
            UserPickerKind::Default {
                patience,
                starvation_rounds: DEFAULT_STARVATION_ROUNDS,
            },
        ),
    };
    SchedulerConfig {
        candidate_policy,
        user_picker,
        seed,
        amplitude_prior_strength: config.amplitude_prior_strength,
        // The default's amplitude rule is the default's and its ablations' (but the two that
        // change it); the peers keep the estimate as it always was.
        amplitude_rule: match policy {
            PolicyName::DefaultLevelAmplitude => AmplitudeRule::LevelFree,
            PolicyName::Default
            | PolicyName::DefaultUcb
            | PolicyName::DefaultRbf
            | PolicyName::DefaultNoFloor
            | PolicyName::DefaultRegret
            | PolicyName::DefaultMlKernel
            | PolicyName::DefaultHistoryCovariance
            | PolicyName::DefaultIdentityScale => SchedulerConfig::default().amplitude_rule,
            _ => AmplitudeRule::AllResiduals,
        },
        calibrate_costs: false,
        quality_ceiling: config.quality_ceiling,
        line8_rule: if policy == PolicyName::DefaultRegret {
            Some(Line8Rule::ExpectedRegret)
        } else if policy == PolicyName::Default || policy.is_ablation() {
            // None: the scheduler follows its candidate policy's cost mode, as the engine does.
            config.line8_rule
        } else {
            Some(config.line8_rule.unwrap_or(Line8Rule::UcbGap))
        },
        hallucinate_in_flight: config.hallucinate_in_flight,
        // As the engine runs; the replay's priors name no kin, so it sets nothing aside.
        set_aside_margin: Some(easeml_scheduler::DEFAULT_SET_ASIDE_MARGIN),
    }
}

/// A run on a simulated worker: its finish time, the decision, `(test user index, model index)`.
pub(super) struct RunningJob {
    finish: f64,
    decision: Decision,
    user: usize,
    model: usize,
}

/// What one repetition draws before its policies run: the test users (and the users whose rows
/// fit the kernel), the test users' costs and candidates, the best quality each can reach, and the
/// budget.
pub(super) struct Draw {
    test_users: Vec<usize>,
    user_ids: Vec<String>,
    kernel_users: Vec<usize>,
    /// Costs of the test users: real, else U(0, 1) (cost-aware), or 1 per run (cost-oblivious).
    cost: Vec<Vec<f64>>,
    candidates_of: Vec<Vec<usize>>,
    best_possible: Vec<f64>,
    budget: f64,
}

impl Draw {
    fn new(dataset: &Dataset, config: &ReplayConfig, rng: &mut ChaCha8Rng) -> Draw {
        let n_test = effective_test_users(dataset, config);
        let mut pool = test_pool(dataset, config.cost_aware);
        pool.shuffle(rng);
        let test_users: Vec<usize> = pool.into_iter().take(n_test).collect();
        let mut kernel_users: Vec<usize> = (0..dataset.quality.len())
            .filter(|u| !test_users.contains(u))
            .collect();
        kernel_users.shuffle(rng);
        let n_kernel = ((kernel_users.len() as f64 * config.kernel_user_fraction.clamp(0.0, 1.0))
            .ceil() as usize)
            .clamp(1.min(kernel_users.len()), kernel_users.len());
        kernel_users.truncate(n_kernel);
        kernel_users.sort_unstable();
        let n_models = dataset.model_ids.len();
        let mut cost = vec![vec![1.0; n_models]; test_users.len()];
        for (test_index, &user) in test_users.iter().enumerate() {
            for model in 0..n_models {
                let drawn: f64 = rng.r#gen::<f64>().max(1e-6);
                if config.cost_aware {
                    cost[test_index][model] = match &dataset.cost[user] {
                        Some(row) => row[model].filter(|c| *c > 0.0).unwrap_or(drawn),
                        None if dataset.has_real_costs() => 1.0,
                        None => drawn,
                    };
                }
            }
        }
        let candidates_of: Vec<Vec<usize>> = test_users
            .iter()
            .map(|&u| {
                (0..n_models)
                    .filter(|&m| dataset.quality[u][m].is_some())
                    .collect()
            })
            .collect();
        let best_possible: Vec<f64> = test_users
            .iter()
            .map(|&u| {
                dataset.quality[u]
                    .iter()
                    .flatten()
                    .copied()
                    .fold(0.0, f64::max)
            })
            .collect();
        let budget = if config.cost_aware {
            0.1 * candidates_of
                .iter()
                .enumerate()
                .map(|(t, models)| models.iter().map(|&m| cost[t][m]).sum::<f64>())
                .sum::<f64>()
        } else {
            (0.5 * candidates_of.iter().map(Vec::len).sum::<usize>() as f64).ceil()
        };
        let user_ids = test_users
            .iter()
            .map(|&u| dataset.user_ids[u].clone())
            .collect();
        Draw {
            test_users,
            user_ids,
            kernel_users,
            cost,
            candidates_of,
            best_possible,
            budget,
        }
    }

    /// The split as the peers replay it.
    fn split(&self, dataset: &Dataset, repetition: usize, seed: u64) -> ReplaySplit {
        ReplaySplit {
            repetition,
            seed,
            budget: self.budget,
            users: self
                .candidates_of
                .iter()
                .enumerate()
                .map(|(t, models)| SplitUser {
                    user_id: dataset.user_ids[self.test_users[t]].clone(),
                    best_possible: self.best_possible[t],
                    candidates: models
                        .iter()
                        .map(|&m| SplitCandidate {
                            model_id: dataset.model_ids[m].clone(),
                            quality: dataset.quality[self.test_users[t]][m].unwrap_or(0.0),
                            cost: self.cost[t][m],
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// The priors of one repetition, fitted on its kernel users' rows once for every policy.
pub(super) struct Kernels {
    /// The configured kernel (the GP-UCB policies').
    kernel: Arc<KernelModel>,
    /// The RBF kernel (the configured one when it is RBF already).
    rbf: Arc<KernelModel>,
    /// The default's: the configured kernel on the quality scale the history's likelihood chooses.
    default: Option<Arc<KernelModel>>,
    /// `default_rbf`'s: the RBF kernel on the scale its own fit chooses.
    default_rbf: Option<Arc<KernelModel>>,
    /// `default_history_covariance`'s: blended with the history's sample covariance.
    blended: Option<Arc<KernelModel>>,
    fit_seconds: f64,
}

impl Kernels {
    fn fit(dataset: &Dataset, config: &ReplayConfig, kernel_users: &[usize]) -> Result<Kernels> {
        let history = QualityHistory {
            model_ids: dataset.model_ids.clone(),
            rows: kernel_users
                .iter()
                .map(|&u| dataset.quality[u].clone())
                .collect(),
        };
        let fit_start = Instant::now();
        let kernel = Arc::new(KernelModel::from_history(
            &history,
            config.kernel,
            HyperparameterChoice::FitMarginalLikelihood,
        )?);
        let rbf = if config
            .policies
            .iter()
            .any(|&p| p.uses_rbf_kernel() || p == PolicyName::DefaultMlKernel)
            && config.kernel != KernelKind::Rbf
        {
            Arc::new(KernelModel::from_history(
                &history,
                KernelKind::Rbf,
                HyperparameterChoice::FitMarginalLikelihood,
            )?)
        } else {
            Arc::clone(&kernel)
        };
        let on_chosen_scale = |identity: &Arc<KernelModel>| -> Result<Arc<KernelModel>> {
            Ok(
                match choose_quality_scale(
                    &history,
                    identity,
                    HyperparameterChoice::FitMarginalLikelihood,
                )? {
                    Some(logit) => Arc::new(logit),
                    None => Arc::clone(identity),
                },
            )
        };
        let default = if config
            .policies
            .iter()
            .any(|&p| p.on_chosen_scale() && p != PolicyName::DefaultRbf)
        {
            Some(on_chosen_scale(&kernel)?)
        } else {
            None
        };
        let default_rbf = if config.policies.contains(&PolicyName::DefaultRbf) {
            Some(on_chosen_scale(&rbf)?)
        } else {
            None
        };
        let blended = if config
            .policies
            .contains(&PolicyName::DefaultHistoryCovariance)
        {
            let blended = KernelModel::clone(&kernel)
                .with_history_covariance(&history, config.history_covariance)?;
            Some(Arc::new(blended))
        } else {
            None
        };
        Ok(Kernels {
            kernel,
            rbf,
            default,
            default_rbf,
            blended,
            fit_seconds: fit_start.elapsed().as_secs_f64(),
        })
    }

    /// The prior `policy` schedules with.
    fn of(&self, policy: PolicyName) -> Arc<KernelModel> {
        if policy == PolicyName::DefaultMlKernel {
            // Both shapes are fitted already (the GP-UCB policies' and the RBF): the better fit.
            if self.kernel.fits_better_than(&self.rbf) {
                Arc::clone(&self.kernel)
            } else {
                Arc::clone(&self.rbf)
            }
        } else if let (PolicyName::DefaultRbf, Some(chosen)) = (policy, &self.default_rbf) {
            Arc::clone(chosen)
        } else if let (true, Some(chosen)) = (policy.on_chosen_scale(), &self.default) {
            Arc::clone(chosen)
        } else if let (PolicyName::DefaultHistoryCovariance, Some(blended)) =
            (policy, &self.blended)
        {
            Arc::clone(blended)
        } else if policy.uses_rbf_kernel() {
            Arc::clone(&self.rbf)
        } else {
            Arc::clone(&self.kernel)
        }
    }
}

pub(super) fn run_repetition(
    dataset: &Dataset,
    config: &ReplayConfig,
    repetition: usize,
) -> Result<Repetition> {
    let mut rng = repetition_rng(config.seed, repetition);
    let draw = Draw::new(dataset, config, &mut rng);
    let kernels = Kernels::fit(dataset, config, &draw.kernel_users)?;
    // Fixed orders: "most cited" proxy = descending mean quality over the kernel users (the
    // tables name no citations); "most recent" proxy = the table's columns from last to first.
    let mut cited_order: Vec<String> = dataset.model_ids.clone();
    cited_order.sort_by(|a, b| {
        kernels
            .kernel
            .prior_mean(b)
            .total_cmp(&kernels.kernel.prior_mean(a))
    });
    let recent_order: Vec<String> = dataset.model_ids.iter().rev().cloned().collect();
    let mut traces = Vec::new();
    let mut seconds = Vec::new();
    for &policy in &config.policies {
        let scheduler_seed = rng.r#gen::<u64>();
        let started = Instant::now();
        let mut scheduler = Scheduler::new(
            kernels.of(policy),
            policy_config(policy, config, &cited_order, &recent_order, scheduler_seed),
        );
        for (t, models) in draw.candidates_of.iter().enumerate() {
            let specs = models
                .iter()
                .map(|&m| CandidateSpec {
                    model_id: dataset.model_ids[m].clone(),
                    expected_cost: draw.cost[t][m],
                })
                .collect();
            scheduler.register_user(&draw.user_ids[t], specs, &[])?;
        }
        traces.push(simulate(
            &mut scheduler,
            policy,
            dataset,
            &draw,
            config.parallel.max(1),
        )?);
        seconds.push(started.elapsed().as_secs_f64());
    }
    Ok(Repetition {
        split: draw.split(dataset, repetition, rng.r#gen::<u64>()),
        traces,
        seconds,
        budget: draw.budget,
        kernel_fit_seconds: kernels.fit_seconds,
        hyperparameters: kernels.kernel.hyperparameters(),
        history_covariance_weight: kernels
            .blended
            .as_ref()
            .map(|blended| blended.history_covariance_weight()),
        default_quality_scale: kernels
            .default
            .as_ref()
            .map(|chosen| chosen.quality_scale()),
    })
}

/// One policy's trace over the draw: the event-driven simulation over `workers` (see the module
/// header); with one worker it is the sequential replay: `now` sums the same costs in the same
/// order as its summed cost.
pub(super) fn simulate(
    scheduler: &mut Scheduler,
    policy: PolicyName,
    dataset: &Dataset,
    draw: &Draw,
    workers: usize,
) -> Result<Trace> {
    let Draw {
        test_users,
        user_ids,
        cost,
        best_possible,
        budget,
        ..
    } = draw;
    let budget = *budget;
    let model_index: std::collections::HashMap<&str, usize> = dataset
        .model_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let mut best_so_far = vec![0.0f64; test_users.len()];
    let mut loss: f64 = best_possible.iter().sum::<f64>() / test_users.len() as f64;
    let mut points = vec![(0.0, loss)];
    let mut decisions = Vec::new();
    let mut running: Vec<Option<RunningJob>> = (0..workers).map(|_| None).collect();
    let mut now = 0.0;
    let mut started_cost = 0.0;
    let mut exhausted = false;
    loop {
        for slot in running.iter_mut() {
            if slot.is_some() || exhausted || started_cost >= budget - 1e-12 {
                continue;
            }
            let next = if policy == PolicyName::OracleUser {
                let mut order: Vec<usize> = (0..test_users.len()).collect();
                order.sort_by(|&a, &b| {
                    (best_possible[b] - best_so_far[b])
                        .total_cmp(&(best_possible[a] - best_so_far[a]))
                });
                let mut found = None;
                for t in order {
                    if let Some(decision) = scheduler.next_decision_for_user(&user_ids[t])? {
                        found = Some(decision);
                        break;
                    }
                }
                found
            } else {
                scheduler.next_decision()
            };
            let Some(decision) = next else {
                exhausted = true;
                continue;
            };
            let t = user_ids
                .iter()
                .position(|id| *id == decision.user_id)
                .unwrap_or(0);
            let m = model_index[decision.model_id.as_str()];
            started_cost += cost[t][m];
            decisions.push((t, m));
            *slot = Some(RunningJob {
                finish: now + cost[t][m],
                decision,
                user: t,
                model: m,
            });
        }
        let Some(next_finish) = running
            .iter()
            .flatten()
            .map(|job| job.finish)
            .min_by(f64::total_cmp)
        else {
            break;
        };
        now = next_finish;
        for slot in running.iter_mut() {
            if slot.as_ref().is_none_or(|job| job.finish != now) {
                continue;
            }
            let Some(RunningJob {
                decision,
                user: t,
                model: m,
                ..
            }) = slot.take()
            else {
                continue;
            };
            let quality = dataset.quality[test_users[t]][m].unwrap_or(0.0);
            scheduler.report(&decision, quality, cost[t][m])?;
            if quality > best_so_far[t] {
                best_so_far[t] = quality;
            }
            loss = best_possible
                .iter()
                .zip(&best_so_far)
                .map(|(best, so_far)| (best - so_far).max(0.0))
                .sum::<f64>()
                / test_users.len() as f64;
            points.push((now, loss));
        }
    }
    Ok(Trace { points, decisions })
}
