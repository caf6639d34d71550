//! The replay with K concurrent runs (`ReplayConfig::parallel`): K = 1 is the sequential replay
//! bit for bit, K > 1 is a deterministic event-driven simulation over wall-clock time.

use std::collections::HashSet;

use easeml_bench::dataset::{Dataset, SyntheticSpec, generate_synthetic};
use easeml_bench::replay::{PolicyName, ReplayConfig, Trace, replay_traces, run_replay};

fn small_synthetic() -> Dataset {
    let spec = SyntheticSpec {
        n_users: 16,
        n_models: 12,
        ..SyntheticSpec::paper(0.5, 0.1)
    };
    generate_synthetic(spec, 1).unwrap()
}

fn small_config(cost_aware: bool, parallel: usize) -> ReplayConfig {
    ReplayConfig {
        cost_aware,
        repeats: 3,
        test_users: 4,
        seed: 9,
        policies: PolicyName::ALL.to_vec(),
        threads: 1,
        parallel,
        ..ReplayConfig::default()
    }
}

/// FNV-1a over every trace's points (bits) and decisions.
fn fingerprint(traces: &[Trace], hash: &mut u64) {
    let mut feed = |value: u64| {
        for byte in value.to_le_bytes() {
            *hash ^= u64::from(byte);
            *hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for trace in traces {
        for (x, y) in &trace.points {
            feed(x.to_bits());
            feed(y.to_bits());
        }
        for (t, m) in &trace.decisions {
            feed(*t as u64);
            feed(*m as u64);
        }
    }
}

#[test]
fn one_worker_is_the_sequential_replay_bit_for_bit() {
    // The fingerprint of the same traces from the sequential replay before `parallel` existed
    // (commit 9bb5827, same configuration, every policy, both modes, repetitions 0-2).
    const SEQUENTIAL: u64 = 0x0c00_3014_46fa_1771;
    // The policies of that commit (the default and its ablations came later).
    let data = small_synthetic();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for cost_aware in [false, true] {
        for repetition in 0..3 {
            let mut config = small_config(cost_aware, 1);
            config
                .policies
                .retain(|&p| p != PolicyName::Default && !p.is_ablation());
            let traces = replay_traces(&data, &config, repetition).unwrap();
            fingerprint(&traces, &mut hash);
        }
    }
    assert_eq!(hash, SEQUENTIAL, "{hash:#018x}");
}

#[test]
fn zero_workers_is_a_clear_error() {
    let error = run_replay(&small_synthetic(), &small_config(false, 0), &|| {}).unwrap_err();
    assert!(error.to_string().contains("--parallel"), "{error}");
}

#[test]
fn concurrent_runs_respect_the_budget_and_the_clock() {
    let data = small_synthetic();
    for cost_aware in [false, true] {
        let sequential = replay_traces(&data, &small_config(cost_aware, 1), 0).unwrap();
        let config = small_config(cost_aware, 4);
        let traces = replay_traces(&data, &config, 0).unwrap();
        assert_eq!(
            traces,
            replay_traces(&data, &config, 0).unwrap(),
            "deterministic"
        );
        for ((policy, trace), alone) in config.policies.iter().zip(&traces).zip(&sequential) {
            let unique: HashSet<_> = trace.decisions.iter().collect();
            assert_eq!(unique.len(), trace.decisions.len(), "{policy:?}");
            for pair in trace.points.windows(2) {
                assert!(pair[1].0 >= pair[0].0, "{policy:?}: time runs forward");
                assert!(pair[1].1 <= pair[0].1 + 1e-12);
            }
            let makespan = trace.points.last().unwrap().0;
            let summed = alone.points.last().unwrap().0;
            assert!(makespan < summed, "{policy:?}: {makespan} vs {summed}");
            if !cost_aware {
                // Unit runs on 4 workers: the same 24 runs, in 6 rounds of 4.
                assert_eq!(trace.decisions.len(), 24, "{policy:?}");
                assert_eq!(makespan, 6.0, "{policy:?}");
                for time in 1..=6 {
                    let finished = trace.points.iter().filter(|p| p.0 == time as f64).count();
                    assert_eq!(finished, 4, "{policy:?} at {time}");
                }
            }
        }
    }
}

#[test]
fn hallucination_changes_concurrent_decisions_only() {
    let data = small_synthetic();
    let without = |parallel: usize| ReplayConfig {
        hallucinate_in_flight: false,
        policies: vec![PolicyName::Hybrid, PolicyName::Greedy],
        ..small_config(false, parallel)
    };
    let with = |parallel: usize| ReplayConfig {
        hallucinate_in_flight: true,
        ..without(parallel)
    };
    assert_eq!(
        replay_traces(&data, &with(1), 0).unwrap(),
        replay_traces(&data, &without(1), 0).unwrap()
    );
    let differ = (0..3).any(|repetition| {
        replay_traces(&data, &with(4), repetition).unwrap()
            != replay_traces(&data, &without(4), repetition).unwrap()
    });
    assert!(differ);
}

#[test]
fn the_summary_records_the_workers_and_spans_the_makespan() {
    let data = small_synthetic();
    let outcome = run_replay(&data, &small_config(false, 4), &|| {}).unwrap();
    let summary = outcome.summary();
    assert_eq!(summary["parallel"], 4);
    // 24 unit runs of budget on 4 workers: a makespan of 6, a wall-clock grid 0..=6.
    assert_eq!(outcome.grid.last(), Some(&6.0));
    assert_eq!(summary["mean_budget"], 24.0);
    let sequential = run_replay(&data, &small_config(false, 1), &|| {}).unwrap();
    assert_eq!(sequential.summary()["parallel"], 1);
    let keys = |value: &serde_json::Value| {
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&summary), keys(&sequential.summary()));
}
