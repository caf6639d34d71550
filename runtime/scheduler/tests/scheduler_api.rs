//! The online scheduler through its public API: the paper's FCFS example, invariants under joins,
//! leaves and data changes, determinism under a seed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use easeml_scheduler::acquisition::CandidatePolicy;
use easeml_scheduler::picker::Line8Rule;
use easeml_scheduler::{
    AmplitudeRule, CandidateSpec, KernelHyperparameters, KernelKind, KernelModel, PriorObservation,
    Scheduler, SchedulerConfig, UserPickerKind,
};

fn no_history_kernel() -> Arc<KernelModel> {
    Arc::new(KernelModel::without_history(
        KernelKind::Rbf,
        KernelHyperparameters::default(),
    ))
}

fn scheduler(picker: UserPickerKind, seed: u64) -> Scheduler {
    Scheduler::new(
        no_history_kernel(),
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ucb(false),
            user_picker: picker,
            seed,
            amplitude_prior_strength: None,
            amplitude_rule: AmplitudeRule::AllResiduals,
            calibrate_costs: false,
            quality_ceiling: Some(1.0),
            line8_rule: Some(Line8Rule::UcbGap),
            hallucinate_in_flight: true,
            set_aside_margin: None,
        },
    )
}

/// Section 4.1: U1 = {M1: 90, M2: 95, M3: 100}, U2 = {M1: 70, M2: 95, M3: 100}. With no history
/// every candidate looks alike and ties go to M1, as the paper assumes. FCFS serves U1 twice
/// (regret 110 + 105 = 215 after two rounds); RoundRobin and Greedy serve U2 second (110 + 40 = 150).
#[test]
fn the_papers_fcfs_example() {
    let quality: HashMap<(&str, &str), f64> = [
        (("u1", "m1"), 90.0),
        (("u1", "m2"), 95.0),
        (("u1", "m3"), 100.0),
        (("u2", "m1"), 70.0),
        (("u2", "m2"), 95.0),
        (("u2", "m3"), 100.0),
    ]
    .into_iter()
    .collect();
    let cumulative_regret_after_two_rounds = |picker: UserPickerKind| {
        let mut scheduler = scheduler(picker, 0);
        for user in ["u1", "u2"] {
            let candidates = ["m1", "m2", "m3"].map(CandidateSpec::new).to_vec();
            scheduler.register_user(user, candidates, &[]).unwrap();
        }
        let mut best: HashMap<&str, f64> = HashMap::new();
        let mut regret = 0.0;
        let mut served = Vec::new();
        for _ in 0..2 {
            let decision = scheduler.next_decision().unwrap();
            let user = if decision.user_id == "u1" { "u1" } else { "u2" };
            let q = quality[&(user, decision.model_id.as_str())];
            scheduler.report(&decision, q / 100.0, 1.0).unwrap();
            let entry = best.entry(user).or_insert(0.0);
            *entry = entry.max(q);
            regret += ["u1", "u2"]
                .iter()
                .map(|u| 100.0 - best.get(u).copied().unwrap_or(0.0))
                .sum::<f64>();
            served.push((decision.user_id, decision.model_id));
        }
        (regret, served)
    };
    let (fcfs_regret, fcfs_served) = cumulative_regret_after_two_rounds(UserPickerKind::Fcfs);
    assert_eq!(fcfs_served[0], ("u1".to_owned(), "m1".to_owned()));
    assert_eq!(fcfs_served[1].0, "u1");
    assert_eq!(fcfs_regret, 215.0);
    for picker in [
        UserPickerKind::RoundRobin,
        UserPickerKind::Greedy,
        UserPickerKind::Hybrid { patience: 10 },
    ] {
        let (regret, served) = cumulative_regret_after_two_rounds(picker);
        assert_eq!(served[1], ("u2".to_owned(), "m1".to_owned()), "{picker:?}");
        assert_eq!(regret, 150.0, "{picker:?}");
    }
}

fn all_pickers() -> Vec<UserPickerKind> {
    vec![
        UserPickerKind::Fcfs,
        UserPickerKind::RoundRobin,
        UserPickerKind::Random,
        UserPickerKind::Greedy,
        UserPickerKind::Hybrid { patience: 3 },
    ]
}

fn all_candidate_policies() -> Vec<CandidatePolicy> {
    vec![
        CandidatePolicy::ucb(false),
        CandidatePolicy::ucb(true),
        CandidatePolicy::ExpectedImprovement { per_cost: true },
        CandidatePolicy::FixedOrder {
            model_order: vec!["m3".into(), "m0".into()],
        },
    ]
}

/// A deterministic pseudo-quality for (user, model).
fn quality_of(user: &str, model: &str) -> f64 {
    let hash = user
        .bytes()
        .chain(model.bytes())
        .fold(17u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    0.3 + (hash % 700) as f64 / 1000.0
}

#[test]
fn never_picks_a_finished_user_or_a_trained_candidate() {
    let rules = [
        Some(Line8Rule::UcbGap),
        Some(Line8Rule::ExpectedImprovement),
        None,
    ];
    for (picker, line8_rule) in all_pickers()
        .into_iter()
        .flat_map(|p| rules.map(|r| (p, r)))
    {
        for policy in all_candidate_policies() {
            let mut scheduler = Scheduler::new(
                no_history_kernel(),
                SchedulerConfig {
                    candidate_policy: policy.clone(),
                    user_picker: picker,
                    seed: 11,
                    amplitude_prior_strength: Some(2.0),
                    amplitude_rule: AmplitudeRule::ByLevelTest,
                    calibrate_costs: false,
                    quality_ceiling: Some(1.0),
                    line8_rule,
                    hallucinate_in_flight: true,
                    set_aside_margin: None,
                },
            );
            let mut remaining: HashMap<String, HashSet<String>> = HashMap::new();
            for (user, n_models) in [("a", 4usize), ("b", 2), ("c", 5)] {
                let models: Vec<String> = (0..n_models).map(|m| format!("m{m}")).collect();
                let specs = models
                    .iter()
                    .enumerate()
                    .map(|(m, id)| CandidateSpec {
                        model_id: id.clone(),
                        expected_cost: 1.0 + m as f64,
                    })
                    .collect();
                scheduler.register_user(user, specs, &[]).unwrap();
                remaining.insert(user.to_owned(), models.into_iter().collect());
            }
            let mut steps = 0;
            while let Some(decision) = scheduler.next_decision() {
                steps += 1;
                let left = remaining.get_mut(&decision.user_id).unwrap();
                assert!(
                    left.remove(&decision.model_id),
                    "{picker:?}/{policy:?} picked {decision:?} twice or after it was removed"
                );
                let quality = quality_of(&decision.user_id, &decision.model_id);
                scheduler.report(&decision, quality, 1.0).unwrap();
                // Joins and leaves mid-run.
                if steps == 3 {
                    scheduler
                        .register_user("d", vec![CandidateSpec::new("m9")], &[])
                        .unwrap();
                    remaining.insert("d".into(), ["m9".to_owned()].into_iter().collect());
                    scheduler
                        .add_candidate("a", CandidateSpec::new("m7"))
                        .unwrap();
                    remaining.get_mut("a").unwrap().insert("m7".into());
                }
                if steps == 4 {
                    scheduler.remove_candidate("c", "m4").ok();
                    remaining.get_mut("c").unwrap().remove("m4");
                }
                for (user, left) in &remaining {
                    assert_eq!(scheduler.is_finished(user).unwrap(), left.is_empty());
                }
                assert!(steps < 100);
            }
            assert!(
                remaining.values().all(HashSet::is_empty),
                "{picker:?}/{policy:?} stopped early: {remaining:?}"
            );
        }
    }
}

#[test]
fn in_flight_candidates_are_not_handed_out_twice() {
    let mut scheduler = scheduler(UserPickerKind::RoundRobin, 0);
    scheduler
        .register_user("a", ["m0", "m1"].map(CandidateSpec::new).to_vec(), &[])
        .unwrap();
    let first = scheduler.next_decision().unwrap();
    let second = scheduler.next_decision().unwrap();
    assert_ne!(first.model_id, second.model_id);
    assert!(scheduler.next_decision().is_none());
    scheduler.cancel(&first).unwrap();
    assert_eq!(scheduler.next_decision().unwrap(), first);
}

#[test]
fn new_data_makes_candidates_eligible_again_and_keeps_serving_the_old_best() {
    let mut scheduler = scheduler(UserPickerKind::Hybrid { patience: 10 }, 0);
    let prior = [PriorObservation {
        model_id: "m0".into(),
        quality: 0.8,
        cost: 2.0,
    }];
    scheduler
        .register_user("a", ["m0", "m1"].map(CandidateSpec::new).to_vec(), &prior)
        .unwrap();
    assert_eq!(scheduler.best_so_far("a").unwrap().unwrap().quality, 0.8);
    let decision = scheduler.next_decision().unwrap();
    assert_eq!(decision.model_id, "m1");
    scheduler.report(&decision, 0.6, 1.0).unwrap();
    assert!(scheduler.is_finished("a").unwrap());
    scheduler.data_changed("a").unwrap();
    assert!(!scheduler.is_finished("a").unwrap());
    let best = scheduler.best_so_far("a").unwrap().unwrap();
    assert_eq!((best.model_id.as_str(), best.data_version), ("m0", 0));
    let mut seen = Vec::new();
    while let Some(decision) = scheduler.next_decision() {
        assert_eq!(decision.data_version, 1);
        seen.push(decision.model_id.clone());
        scheduler.report(&decision, 0.5, 1.0).unwrap();
    }
    seen.sort();
    assert_eq!(seen, vec!["m0", "m1"]);
    // The new version's best replaces the old one even when lower.
    let best = scheduler.best_so_far("a").unwrap().unwrap();
    assert_eq!((best.quality, best.data_version), (0.5, 1));
}

#[test]
fn bad_reports_are_refused_and_nothing_becomes_nan() {
    let mut scheduler = scheduler(UserPickerKind::Greedy, 0);
    scheduler
        .register_user(
            "a",
            ["m0", "m1", "m2"].map(CandidateSpec::new).to_vec(),
            &[],
        )
        .unwrap();
    let decision = scheduler.next_decision().unwrap();
    assert!(scheduler.report(&decision, f64::NAN, 1.0).is_err());
    assert!(scheduler.report(&decision, 0.5, 0.0).is_err());
    assert!(scheduler.report(&decision, 0.5, f64::INFINITY).is_err());
    assert!(
        scheduler
            .register_user("a", vec![CandidateSpec::new("x")], &[])
            .is_err()
    );
    assert!(
        scheduler
            .register_user(
                "b",
                vec![CandidateSpec::new("x"), CandidateSpec::new("x")],
                &[]
            )
            .is_err()
    );
    scheduler.report(&decision, 0.5, 1.0).unwrap();
    for (_, mean, sd) in scheduler.posterior("a").unwrap() {
        assert!(mean.is_finite() && sd.is_finite());
    }
}

#[test]
fn the_same_seed_gives_the_same_decisions() {
    let run = |seed: u64| {
        let mut scheduler = scheduler(UserPickerKind::Random, seed);
        for user in ["a", "b", "c", "d"] {
            let specs = (0..5)
                .map(|m| CandidateSpec::new(format!("m{m}")))
                .collect();
            scheduler.register_user(user, specs, &[]).unwrap();
        }
        let mut decisions = Vec::new();
        while let Some(decision) = scheduler.next_decision() {
            let quality = quality_of(&decision.user_id, &decision.model_id);
            scheduler.report(&decision, quality, 1.0).unwrap();
            decisions.push(decision);
        }
        decisions
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn calibration_scales_the_untrained_candidates_by_the_observed_cost_ratio() {
    let mut scheduler = Scheduler::new(
        no_history_kernel(),
        SchedulerConfig {
            calibrate_costs: true,
            quality_ceiling: Some(1.0),
            ..SchedulerConfig::default()
        },
    );
    let spec = |id: &str, cost: f64| CandidateSpec {
        model_id: id.to_owned(),
        expected_cost: cost,
    };
    scheduler
        .register_user("u", vec![spec("cheap", 1.0), spec("dear", 2.0)], &[])
        .unwrap();
    let decision = scheduler.next_decision().unwrap();
    assert_eq!(decision.model_id, "cheap", "cost-aware: the cheaper first");
    // It took 4x its estimate: the other estimate is scaled by 4 too, so it stays the dearer one.
    scheduler.report(&decision, 0.5, 4.0).unwrap();
    let (_, costs) = scheduler.expected_costs("u").unwrap();
    assert_eq!(costs, vec![4.0, 8.0]);
    // A run cut by its session's end took a tenth of its estimate: its own cost is what it took,
    // and the others' estimates stay as they were.
    scheduler.add_candidate("u", spec("third", 3.0)).unwrap();
    let decision = scheduler.next_decision_for_user("u").unwrap().unwrap();
    assert_eq!(decision.model_id, "third");
    scheduler.report_cut(&decision, 0.1, 0.3).unwrap();
    let (ids, costs) = scheduler.expected_costs("u").unwrap();
    assert_eq!(ids, vec!["cheap", "dear", "third"]);
    assert_eq!(costs, vec![4.0, 8.0, 0.3]);
}

/// Gives the user's next decision back and reports `model` instead (a chosen observation).
fn observe(scheduler: &mut Scheduler, user: &str, model: &str, quality: f64, cost: f64) {
    let decision = scheduler.next_decision_for_user(user).unwrap().unwrap();
    scheduler.cancel(&decision).unwrap();
    let decision = easeml_scheduler::Decision {
        model_id: model.to_owned(),
        ..decision
    };
    scheduler.report(&decision, quality, cost).unwrap();
}

fn greedy_scheduler(cost_aware: bool, quality_ceiling: Option<f64>) -> Scheduler {
    Scheduler::new(
        no_history_kernel(),
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ucb(cost_aware),
            user_picker: UserPickerKind::Greedy,
            seed: 0,
            amplitude_prior_strength: None,
            amplitude_rule: AmplitudeRule::AllResiduals,
            calibrate_costs: false,
            quality_ceiling,
            line8_rule: Some(Line8Rule::UcbGap),
            hallucinate_in_flight: true,
            set_aside_margin: None,
        },
    )
}

/// Qualities are at most 1, so are the regret estimates' bounds: a user whose best is already 1
/// has nothing left to gain (line 8's estimate 0, line 6's empirical gap 0), however wide its
/// posterior. Without the ceiling its bounds exceed 1 and it looks promising.
#[test]
fn regret_estimates_are_clipped_to_the_quality_ceiling() {
    for ceiling in [Some(1.0), None] {
        let mut scheduler = greedy_scheduler(false, ceiling);
        let candidates = || {
            (0..5)
                .map(|m| CandidateSpec::new(format!("m{m}")))
                .collect()
        };
        scheduler
            .register_user("perfect", candidates(), &[])
            .unwrap();
        scheduler.register_user("weak", candidates(), &[]).unwrap();
        let first = scheduler.next_decision().unwrap();
        assert_eq!(first.user_id, "perfect");
        scheduler.report(&first, 1.0, 1.0).unwrap();
        let second = scheduler.next_decision().unwrap();
        scheduler.report(&second, 0.9, 1.0).unwrap();
        let summaries = scheduler.user_summaries();
        let perfect = &summaries[0].1;
        let weak = &summaries[1].1;
        match ceiling {
            Some(ceiling) => {
                assert_eq!(perfect.largest_upper_confidence_bound, ceiling);
                assert_eq!(perfect.empirical_gap, Some(0.0));
                assert!(weak.largest_upper_confidence_bound <= ceiling);
                assert!(weak.empirical_gap.unwrap() <= 0.1 + 1e-12);
                // Greedy serves "weak" until it is done (1 - 0.9 left to gain there, 0 here).
                for _ in 0..4 {
                    let next = scheduler.next_decision().unwrap();
                    assert_eq!(next.user_id, "weak");
                    scheduler.report(&next, 0.9, 1.0).unwrap();
                }
            }
            None => {
                assert!(perfect.largest_upper_confidence_bound > 1.0);
            }
        }
    }
}

/// Cost-aware Greedy compares users by estimated improvement per unit cost of the candidate each
/// would train next, and the bounds of lines 6 and 8 bound quality (not the cost-weighted score,
/// which for a cheap candidate is far above any quality).
#[test]
fn cost_aware_greedy_prefers_cheaper_improvement() {
    let mut scheduler = greedy_scheduler(true, Some(1.0));
    let with_cost = |cost: f64| {
        (0..4)
            .map(|m| CandidateSpec {
                model_id: format!("m{m}"),
                expected_cost: cost,
            })
            .collect::<Vec<_>>()
    };
    scheduler
        .register_user("expensive", with_cost(1.0), &[])
        .unwrap();
    scheduler
        .register_user("cheap", with_cost(0.01), &[])
        .unwrap();
    observe(&mut scheduler, "expensive", "m0", 0.5, 1.0);
    observe(&mut scheduler, "cheap", "m0", 0.5, 0.01);
    let summaries = scheduler.user_summaries();
    let (expensive, cheap) = (&summaries[0].1, &summaries[1].1);
    assert_eq!(expensive.next_cost, 1.0);
    assert!((cheap.next_cost - 0.01).abs() < 1e-12);
    // Same observations and prior: the same quality bounds and gaps, below the ceiling.
    assert_eq!(
        expensive.largest_upper_confidence_bound,
        cheap.largest_upper_confidence_bound
    );
    assert_eq!(expensive.empirical_gap, cheap.empirical_gap);
    assert!(cheap.largest_upper_confidence_bound <= 1.0);
    // Equal gaps, so both are in V_t; per unit cost "cheap" is 100x better although "expensive"
    // registered first (a tie would go to it).
    assert_eq!(scheduler.next_decision().unwrap().user_id, "cheap");
}

/// With no history, a poor result of one recurrent network makes its kin (the other recurrent
/// networks) less promising than a model of a kind not tried yet, so that kind is explored next.
#[test]
fn a_poor_model_sends_the_search_to_a_new_kin_before_its_siblings() {
    use easeml_scheduler::{CandidateSpec, KernelHyperparameters, KernelKind, KernelModel};
    let kin = [
        ("gru", "recurrent"),
        ("lstm", "recurrent"),
        ("rnn", "recurrent"),
        ("fcn", "conv1d"),
    ];
    let choose_after_poor_gru = |kernel: KernelModel| {
        let mut scheduler = easeml_scheduler::Scheduler::new(
            std::sync::Arc::new(kernel),
            easeml_scheduler::SchedulerConfig::default(),
        );
        // The recurrent networks come first in the list: without kin, ties go to them.
        let specs = ["gru", "lstm", "rnn", "fcn"]
            .map(CandidateSpec::new)
            .to_vec();
        scheduler.register_user("a", specs, &[]).unwrap();
        let first = scheduler.next_decision_for_user("a").unwrap().unwrap();
        assert_eq!(first.model_id, "gru");
        scheduler.report(&first, 0.3, 1.0).unwrap();
        scheduler
            .next_decision_for_user("a")
            .unwrap()
            .unwrap()
            .model_id
    };
    let plain =
        KernelModel::without_history(KernelKind::Matern52, KernelHyperparameters::default());
    assert_eq!(choose_after_poor_gru(plain.clone()), "lstm");
    let with_kin = plain.with_kin(kin.map(|(model, kin)| (model.to_owned(), kin.to_owned())));
    assert_eq!(choose_after_poor_gru(with_kin), "fcn");
}

/// The amplitude rule by the level test: users whose first qualities sit far from the prior's
/// level (squared first residuals above 1 on average) get the level-free amplitude (the same
/// posterior as `LevelFree`), users at the prior's level keep every residual.
#[test]
fn the_amplitude_rule_by_level_test_follows_the_users_levels() {
    let models = ["m1", "m2", "m3", "m4"];
    let run = |rule: AmplitudeRule, first_quality: f64| {
        let mut scheduler = Scheduler::new(
            no_history_kernel(),
            SchedulerConfig {
                amplitude_prior_strength: Some(1.0),
                amplitude_rule: rule,
                ..SchedulerConfig::default()
            },
        );
        for user in ["u1", "u2"] {
            let candidates = models.map(CandidateSpec::new).to_vec();
            scheduler.register_user(user, candidates, &[]).unwrap();
        }
        for user in ["u1", "u2"] {
            observe(&mut scheduler, user, "m1", first_quality, 1.0);
            observe(&mut scheduler, user, "m2", first_quality + 0.2, 1.0);
        }
        scheduler.posterior("u1").unwrap()[3].2
    };
    // The prior: mean 0.5, standard deviation about 0.14 (no history).
    for (first_quality, far) in [(0.05, true), (0.55, false)] {
        let all = run(AmplitudeRule::AllResiduals, first_quality);
        let level_free = run(AmplitudeRule::LevelFree, first_quality);
        let by_test = run(AmplitudeRule::ByLevelTest, first_quality);
        assert_ne!(all, level_free);
        let expected = if far { level_free } else { all };
        assert_eq!(by_test, expected, "first quality {first_quality}");
    }
}

/// On the log-odds scale ([`QualityScale::Logit`]) the GP observes log-odds, but everything a
/// caller or a user picker sees is in quality: the best so far is the reported quality, bounds
/// lie in (0, 1], and a near-chance user, whose models can differ only a little in quality, has
/// a smaller gap than a user in the middle with the same log-odds spread.
#[test]
fn on_the_log_odds_scale_the_pickers_see_qualities() {
    use easeml_scheduler::{HyperparameterChoice, QualityHistory, QualityScale};
    let models: Vec<String> = (0..6).map(|m| format!("m{m}")).collect();
    let offsets = [-0.6, -0.2, 0.0, 0.3, 0.5, 0.8];
    let history = QualityHistory {
        model_ids: models.clone(),
        rows: (0..30)
            .map(|row| {
                let level = -3.0 + 6.0 * row as f64 / 29.0;
                offsets
                    .iter()
                    .enumerate()
                    .map(|(m, offset)| {
                        let wobble = 0.05 * ((row * 7 + m * 3) % 5) as f64;
                        Some(QualityScale::Logit.to_quality(level + offset + wobble))
                    })
                    .collect()
            })
            .collect(),
    };
    let kernel = KernelModel::from_history_in_scale(
        &history,
        KernelKind::Rbf,
        HyperparameterChoice::FitMarginalLikelihood,
        QualityScale::Logit,
    )
    .unwrap();
    let mut scheduler = Scheduler::new(
        Arc::new(kernel),
        SchedulerConfig {
            user_picker: UserPickerKind::Greedy,
            ..SchedulerConfig::default()
        },
    );
    let candidates = || models.iter().map(CandidateSpec::new).collect::<Vec<_>>();
    for user in ["chance", "middle"] {
        scheduler.register_user(user, candidates(), &[]).unwrap();
    }
    observe(&mut scheduler, "chance", "m2", 0.03, 1.0);
    observe(&mut scheduler, "middle", "m2", 0.5, 1.0);
    observe(&mut scheduler, "chance", "m0", 0.025, 1.0);
    observe(&mut scheduler, "middle", "m0", 0.4, 1.0);
    assert_eq!(
        scheduler.best_so_far("middle").unwrap().unwrap().quality,
        0.5
    );
    assert_eq!(
        scheduler.best_so_far("chance").unwrap().unwrap().quality,
        0.03
    );
    let summaries: HashMap<String, _> = scheduler.user_summaries().into_iter().collect();
    let gap = |user: &str| {
        let summary = &summaries[user];
        assert!(summary.largest_upper_confidence_bound > 0.0);
        assert!(summary.largest_upper_confidence_bound <= 1.0);
        summary.largest_upper_confidence_bound - summary.best_quality.unwrap()
    };
    assert!(gap("chance") > 0.0);
    assert!(
        gap("middle") > 3.0 * gap("chance"),
        "{} vs {}",
        gap("middle"),
        gap("chance")
    );
}

#[test]
fn a_users_first_run_is_the_model_of_highest_mean_quality_on_any_scale() {
    use easeml_scheduler::{HyperparameterChoice, QualityHistory, QualityScale};
    // "steady" scores 0.8 on every history data set; "risky" 0.99 on three of four and 0.2 on
    // the fourth: the higher mean log-odds (3.10 against 1.39) but the lower mean quality
    // (0.7925 against 0.8). A user's first run is the one with the higher expected quality.
    let models = vec!["risky".to_owned(), "steady".to_owned()];
    let history = QualityHistory {
        model_ids: models.clone(),
        rows: [0.99, 0.99, 0.99, 0.2]
            .iter()
            .map(|&risky| vec![Some(risky), Some(0.8)])
            .collect(),
    };
    for scale in [QualityScale::Identity, QualityScale::Logit] {
        let kernel = KernelModel::from_history_in_scale(
            &history,
            KernelKind::Rbf,
            HyperparameterChoice::Fixed(KernelHyperparameters::default()),
            scale,
        )
        .unwrap();
        assert!((kernel.mean_quality("steady") - 0.8).abs() < 1e-12);
        assert!((kernel.mean_quality("risky") - 0.7925).abs() < 1e-12);
        if scale == QualityScale::Logit {
            assert!(kernel.prior_mean("risky") > kernel.prior_mean("steady") + 1.0);
        }
        let mut scheduler = Scheduler::new(Arc::new(kernel), SchedulerConfig::default());
        let candidates = models.iter().map(CandidateSpec::new).collect();
        scheduler.register_user("u", candidates, &[]).unwrap();
        let first = scheduler.next_decision().unwrap();
        assert_eq!(first.model_id, "steady", "{scale:?}");
        // Once the user has an observation its posterior ranks: the second run is the other.
        scheduler.report(&first, 0.8, 1.0).unwrap();
        assert_eq!(scheduler.next_decision().unwrap().model_id, "risky");
    }
}
