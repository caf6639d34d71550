//! The replay benchmark on small synthetic tables, and on the shared tables when present.

use std::path::PathBuf;

use easeml_bench::dataset::{
    SyntheticSpec, generate_synthetic, load_delgado179, load_easeml_deeplearning,
};
use easeml_bench::replay::{PolicyName, ReplayConfig, replay_traces, run_replay};

fn small_config(cost_aware: bool) -> ReplayConfig {
    ReplayConfig {
        cost_aware,
        repeats: 3,
        test_users: 4,
        seed: 9,
        policies: PolicyName::ALL.to_vec(),
        threads: 1,
        ..ReplayConfig::default()
    }
}

fn small_synthetic() -> easeml_bench::dataset::Dataset {
    let spec = SyntheticSpec {
        n_users: 16,
        n_models: 12,
        ..SyntheticSpec::paper(0.5, 0.1)
    };
    generate_synthetic(spec, 1).unwrap()
}

#[test]
fn replay_is_deterministic_and_independent_of_threads() {
    let data = small_synthetic();
    for cost_aware in [false, true] {
        let one = run_replay(&data, &small_config(cost_aware), &|| {}).unwrap();
        let two = run_replay(
            &data,
            &ReplayConfig {
                threads: 2,
                ..small_config(cost_aware)
            },
            &|| {},
        )
        .unwrap();
        assert_eq!(one.grid, two.grid);
        for (a, b) in one.curves.iter().zip(&two.curves) {
            assert_eq!(a.mean_loss, b.mean_loss, "{:?}", a.policy);
            assert_eq!(a.worst_loss, b.worst_loss);
        }
    }
}

#[test]
fn every_policy_respects_the_budget_and_never_repeats_a_run() {
    let data = small_synthetic();
    for cost_aware in [false, true] {
        let config = small_config(cost_aware);
        let traces = replay_traces(&data, &config, 0).unwrap();
        for (policy, trace) in config.policies.iter().zip(&traces) {
            let mut seen = std::collections::HashSet::new();
            for decision in &trace.decisions {
                assert!(seen.insert(*decision), "{policy:?} repeated {decision:?}");
            }
            // Loss never increases and starts at the mean best possible quality.
            for pair in trace.points.windows(2) {
                assert!(pair[1].1 <= pair[0].1 + 1e-12);
                assert!(pair[1].0 >= pair[0].0);
            }
            if !cost_aware {
                // 4 test users x 12 models: budget 24 runs.
                assert_eq!(trace.decisions.len(), 24, "{policy:?}");
            }
        }
    }
}

#[test]
fn summary_has_the_documented_keys() {
    let data = small_synthetic();
    let outcome = run_replay(&data, &small_config(false), &|| {}).unwrap();
    let summary = outcome.summary();
    assert_eq!(summary["mode"], "cost_oblivious");
    assert_eq!(summary["repeats"], 3);
    for policy in PolicyName::ALL {
        let entry = &summary["policies"][policy.as_str()];
        for level in ["0.1", "0.05", "0.02", "0.01"] {
            assert!(
                entry["cost_to_mean_loss"].get(level).is_some(),
                "{policy:?} {level}"
            );
        }
        assert!(entry["final_mean_loss"].is_number());
        assert!(entry["final_worst_loss"].is_number());
    }
    assert!(
        outcome
            .curves_csv()
            .starts_with("policy,cost,mean_loss,worst_loss\n")
    );
}

fn shared_data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("EASEML_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: shared data tables not found at {} (set EASEML_SHARED_DATA)",
            dir.display()
        );
        None
    }
}

#[test]
fn shared_tables_parse_as_provenance_describes() {
    let Some(dir) = shared_data_dir() else {
        return;
    };
    let delgado = load_delgado179(&dir).unwrap();
    assert_eq!(delgado.quality.len(), 121);
    assert_eq!(delgado.model_ids.len(), 179);
    let missing = delgado
        .quality
        .iter()
        .flatten()
        .filter(|q| q.is_none())
        .count();
    assert_eq!(missing, 449);
    assert!(
        delgado
            .quality
            .iter()
            .flatten()
            .flatten()
            .all(|q| (0.0..=1.0).contains(q))
    );
    assert_eq!(delgado.user_ids[0], "abalone");
    let deep = load_easeml_deeplearning(&dir).unwrap();
    assert_eq!(deep.quality.len(), 18);
    assert_eq!(deep.model_ids.len(), 9);
    assert_eq!(deep.cost.iter().filter(|c| c.is_some()).count(), 8);
}

#[test]
fn shared_tables_replay_quickly() {
    let Some(dir) = shared_data_dir() else {
        return;
    };
    let deep = load_easeml_deeplearning(&dir).unwrap();
    let config = ReplayConfig {
        cost_aware: true,
        repeats: 2,
        ..small_config(true)
    };
    let outcome = run_replay(&deep, &config, &|| {}).unwrap();
    assert_eq!(outcome.config.test_users, 4);
    // The first 30 classifiers only: the full 179 x 179 fit is a benchmark, not a debug-build test.
    let mut delgado = load_delgado179(&dir).unwrap();
    delgado.model_ids.truncate(30);
    for row in &mut delgado.quality {
        row.truncate(30);
    }
    let config = ReplayConfig {
        repeats: 1,
        test_users: 3,
        policies: vec![PolicyName::Hybrid, PolicyName::RoundRobin],
        ..small_config(false)
    };
    let outcome = run_replay(&delgado, &config, &|| {}).unwrap();
    for curves in &outcome.curves {
        assert!(curves.mean_loss.last().unwrap() < &0.1);
    }
}

#[test]
fn the_default_policy_serves_every_user_within_its_floor() {
    // The floor: a user goes unserved for more than 2 rounds only once, then it is served, whatever
    // Greedy's estimates say (no user runs out of its 12 candidates in 24 runs). A round is every
    // user's next run in expected cost: 4 test users' decisions when costs are equal (cost-
    // oblivious), and on this table's costs it still bounds the wait at 2 x 4 + 1 other decisions
    // between two of a user's runs.
    let data = small_synthetic();
    for cost_aware in [false, true] {
        let config = ReplayConfig {
            policies: vec![PolicyName::Default],
            ..small_config(cost_aware)
        };
        for repetition in 0..3 {
            let trace = &replay_traces(&data, &config, repetition).unwrap()[0];
            let mut last_served = [None::<usize>; 4];
            for (step, &(user, _)) in trace.decisions.iter().enumerate() {
                if let Some(last) = last_served[user] {
                    assert!(
                        step - last - 1 <= 2 * 4 + 1,
                        "user {user} at {step} after {last}"
                    );
                }
                last_served[user] = Some(step);
            }
            assert!(last_served.iter().all(Option::is_some));
        }
    }
}

#[test]
fn the_history_covariance_ablation_is_its_base_at_weight_zero_and_differs_otherwise() {
    // `default_history_covariance` is `default_identity_scale` over a blended kernel: with the
    // blend off it takes exactly that policy's decisions; with most of the prior from the
    // history's covariance it takes others somewhere (the two kernels differ), and `summary.json`
    // records the weights.
    use easeml_scheduler::kernel::HistoryCovariance;
    let data = small_synthetic();
    let policies = vec![
        PolicyName::DefaultIdentityScale,
        PolicyName::DefaultHistoryCovariance,
    ];
    let config = |history_covariance| ReplayConfig {
        policies: policies.clone(),
        history_covariance,
        ..small_config(false)
    };
    let mut differed = false;
    for repetition in 0..3 {
        let off = replay_traces(&data, &config(HistoryCovariance::Off), repetition).unwrap();
        assert_eq!(
            off[0].decisions, off[1].decisions,
            "repetition {repetition}"
        );
        let heavy =
            replay_traces(&data, &config(HistoryCovariance::Fixed(0.9)), repetition).unwrap();
        differed |= heavy[0].decisions != heavy[1].decisions;
    }
    assert!(differed, "a weight of 0.9 never changed a decision");
    let outcome = run_replay(&data, &config(HistoryCovariance::CrossValidated), &|| {}).unwrap();
    let summary = outcome.summary();
    assert_eq!(summary["history_covariance"], "cross_validated");
    let weights = summary["history_covariance_weights"].as_array().unwrap();
    assert_eq!(weights.len(), 3);
    assert!(weights.iter().all(|w| {
        let w = w.as_f64().unwrap();
        easeml_scheduler::kernel::HISTORY_COVARIANCE_WEIGHTS.contains(&w)
    }));
}

#[test]
fn the_default_records_its_quality_scale_and_is_its_identity_ablation_where_that_is_chosen() {
    // The small synthetic table's rows are Gaussian draws (clipped to [0, 1]): the history's
    // likelihood keeps the identity scale, and then `default` and `default_identity_scale` are
    // the same policy, decision for decision.
    let data = small_synthetic();
    let config = ReplayConfig {
        policies: vec![PolicyName::Default, PolicyName::DefaultIdentityScale],
        ..small_config(false)
    };
    let outcome = run_replay(&data, &config, &|| {}).unwrap();
    let summary = outcome.summary();
    let scales = &summary["default_quality_scales"];
    assert_eq!(
        scales["identity"].as_u64().unwrap() + scales["logit"].as_u64().unwrap(),
        3
    );
    for repetition in 0..3 {
        let traces = replay_traces(&data, &config, repetition).unwrap();
        if outcome.default_quality_scales[repetition]
            == easeml_scheduler::kernel::QualityScale::Identity
        {
            assert_eq!(traces[0].decisions, traces[1].decisions);
        }
    }
    assert!(
        outcome
            .default_quality_scales
            .contains(&easeml_scheduler::kernel::QualityScale::Identity)
    );
}

#[test]
fn the_default_ranks_users_by_expected_improvement_per_cost_only_when_costs_differ() {
    use easeml_scheduler::picker::Line8Rule;
    let decisions =
        |data: &easeml_bench::dataset::Dataset, cost_aware: bool, line8_rule: Option<Line8Rule>| {
            let config = ReplayConfig {
                policies: vec![PolicyName::Default],
                line8_rule,
                ..small_config(cost_aware)
            };
            replay_traces(data, &config, 0).unwrap().remove(0).decisions
        };
    // Cost-oblivious: the paper's UCB gap.
    let data = small_synthetic();
    assert_eq!(
        decisions(&data, false, None),
        decisions(&data, false, Some(Line8Rule::UcbGap))
    );
    let summary = |cost_aware: bool, line8_rule: Option<Line8Rule>| {
        let config = ReplayConfig {
            policies: vec![PolicyName::Default, PolicyName::Hybrid],
            line8_rule,
            repeats: 1,
            ..small_config(cost_aware)
        };
        run_replay(&data, &config, &|| {}).unwrap().summary()
    };
    let oblivious = summary(false, None);
    assert_eq!(oblivious["line8_rule"], "per_policy");
    assert_eq!(oblivious["default_line8_rule"], "ucb_gap");
    assert_eq!(
        summary(true, None)["default_line8_rule"],
        "expected_improvement"
    );
    let forced = summary(true, Some(Line8Rule::UcbGap));
    assert_eq!(forced["line8_rule"], "ucb_gap");
    assert_eq!(forced["default_line8_rule"], "ucb_gap");
    // Cost-aware: expected improvement per unit cost, which on easeml-dl's real runtimes takes
    // other decisions than the UCB gap per unit cost (a near-chance user's cheap runs).
    let Some(dir) = shared_data_dir() else {
        return;
    };
    let deep = load_easeml_deeplearning(&dir).unwrap();
    let chosen = decisions(&deep, true, None);
    assert_eq!(
        chosen,
        decisions(&deep, true, Some(Line8Rule::ExpectedImprovement))
    );
    assert_ne!(chosen, decisions(&deep, true, Some(Line8Rule::UcbGap)));
}

#[test]
fn the_cost_aware_grid_resolves_costs_that_span_orders_of_magnitude() {
    // Runtimes from 1 ms to 100 s (a model family's factor, as measured runtimes are): the largest
    // budget's equal steps are coarser than most runs, so the grid adds geometric steps from the
    // cheapest candidate's cost.
    let mut data = small_synthetic();
    data.cost = (0..data.quality.len())
        .map(|_| {
            Some(
                (0..data.model_ids.len())
                    .map(|m| Some(10f64.powi(m as i32 % 6 - 3)))
                    .collect(),
            )
        })
        .collect();
    let config = ReplayConfig {
        policies: vec![PolicyName::Default, PolicyName::RoundRobin],
        ..small_config(true)
    };
    let outcome = run_replay(&data, &config, &|| {}).unwrap();
    let grid = &outcome.grid;
    let max_budget = outcome.budgets.iter().copied().fold(0.0, f64::max);
    assert_eq!(grid[0], 0.0);
    assert!((grid.last().unwrap() - max_budget).abs() <= 1e-9 * max_budget);
    assert!(
        grid.windows(2).all(|pair| pair[0] < pair[1]),
        "sorted, no repeats"
    );
    let equal_step = max_budget / easeml_bench::replay::COST_GRID_STEPS as f64;
    assert!(
        (grid[1] - 1e-3).abs() < 1e-12,
        "the cheapest run's cost: {}",
        grid[1]
    );
    assert!(
        grid.iter()
            .filter(|&&cost| cost > 0.0 && cost < equal_step)
            .count()
            > 100
    );
    // Every equal step is still there (the coarse grid's answers can only get earlier).
    for i in 0..=easeml_bench::replay::COST_GRID_STEPS {
        let step = max_budget * i as f64 / easeml_bench::replay::COST_GRID_STEPS as f64;
        assert!(grid.contains(&step), "step {i}");
    }
    // Without a positive cheaper cost the grid is the equal steps alone.
    let equal = easeml_bench::replay::cost_grid(10.0, f64::INFINITY);
    assert_eq!(equal.len(), easeml_bench::replay::COST_GRID_STEPS + 1);
    assert_eq!(easeml_bench::replay::cost_grid(10.0, 20.0), equal);
    assert_eq!(easeml_bench::replay::cost_grid(f64::NAN, 1.0), vec![0.0]);
}
