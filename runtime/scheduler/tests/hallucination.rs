//! GP-BUCB through the public API: runs in flight are hallucinated observations (the bounds
//! shrink, so outstanding decisions spread out), reports and cancels restore the right posterior,
//! and with nothing in flight the scheduler decides exactly as without hallucination.

use std::sync::Arc;

use easeml_scheduler::acquisition::CandidatePolicy;
use easeml_scheduler::{
    CandidateSpec, Decision, KernelHyperparameters, KernelKind, KernelModel, Scheduler,
    SchedulerConfig, UserPickerKind,
};

/// No history; `a` and `a2` are kin (strongly correlated), `b` and `c` are only related to them
/// through the user's offset.
fn kin_kernel() -> Arc<KernelModel> {
    Arc::new(
        KernelModel::without_history(KernelKind::Matern52, KernelHyperparameters::default())
            .with_kin([
                ("a".to_owned(), "g".to_owned()),
                ("a2".to_owned(), "g".to_owned()),
            ]),
    )
}

fn scheduler(picker: UserPickerKind, cost_aware: bool, hallucinate: bool) -> Scheduler {
    Scheduler::new(
        kin_kernel(),
        SchedulerConfig {
            candidate_policy: CandidatePolicy::ucb(cost_aware),
            user_picker: picker,
            amplitude_prior_strength: Some(1.0),
            hallucinate_in_flight: hallucinate,
            ..SchedulerConfig::default()
        },
    )
}

fn candidates() -> Vec<CandidateSpec> {
    [("a", 1.0), ("a2", 1.0), ("b", 2.0), ("c", 0.5)]
        .into_iter()
        .map(|(id, cost)| CandidateSpec {
            model_id: id.to_owned(),
            expected_cost: cost,
        })
        .collect()
}

/// A made-up quality per (user, model).
fn quality(decision: &Decision) -> f64 {
    let user = decision.user_id.bytes().map(f64::from).sum::<f64>();
    let model = decision.model_id.bytes().map(f64::from).sum::<f64>();
    0.4 + 0.5 * ((user * 0.37 + model * 0.11).sin() * 0.5 + 0.5)
}

fn with_users(mut scheduler: Scheduler, users: &[&str]) -> Scheduler {
    for user in users {
        scheduler.register_user(user, candidates(), &[]).unwrap();
    }
    scheduler
}

fn posterior_bits(scheduler: &Scheduler, user: &str) -> Vec<(u64, u64)> {
    scheduler
        .posterior(user)
        .unwrap()
        .into_iter()
        .map(|(_, mean, sd)| (mean.to_bits(), sd.to_bits()))
        .collect()
}

#[test]
fn with_nothing_in_flight_decisions_are_those_without_hallucination() {
    let pickers = [
        UserPickerKind::Greedy,
        UserPickerKind::Hybrid { patience: 2 },
        UserPickerKind::RoundRobin,
        UserPickerKind::Random,
    ];
    let users = ["u1", "u2", "u3"];
    for picker in pickers {
        for cost_aware in [false, true] {
            let mut on = with_users(scheduler(picker, cost_aware, true), &users);
            let mut off = with_users(scheduler(picker, cost_aware, false), &users);
            loop {
                let (a, b) = (on.next_decision(), off.next_decision());
                assert_eq!(a, b, "{picker:?}, cost-aware {cost_aware}");
                let Some(decision) = a else { break };
                on.report(&decision, quality(&decision), 1.0).unwrap();
                off.report(&decision, quality(&decision), 1.0).unwrap();
                for user in users {
                    assert_eq!(posterior_bits(&on, user), posterior_bits(&off, user));
                }
            }
        }
    }
}

#[test]
fn an_in_flight_candidate_keeps_its_mean_and_loses_variance() {
    let mut scheduler = with_users(scheduler(UserPickerKind::RoundRobin, false, true), &["u"]);
    let first = scheduler.next_decision().unwrap();
    scheduler.report(&first, 0.7, 1.0).unwrap();
    let before = scheduler.posterior("u").unwrap();
    let decision = scheduler.next_decision().unwrap();
    let during = scheduler.posterior("u").unwrap();
    let k = during
        .iter()
        .position(|(id, _, _)| *id == decision.model_id)
        .unwrap();
    for ((_, mean_before, sd_before), (_, mean_during, sd_during)) in before.iter().zip(&during) {
        assert_eq!(mean_before, mean_during, "the mean never moves");
        assert!(sd_during <= sd_before);
    }
    assert!(
        during[k].2 < 0.5 * before[k].2,
        "{:?} -> {:?}",
        before[k],
        during[k]
    );
}

#[test]
fn outstanding_decisions_spread_out_with_hallucination() {
    // All four candidates have the same prior; `a` is picked first (lowest index among ties).
    // Without hallucination the next is its kin `a2` (the same bound); with it, `a2`'s bound has
    // shrunk with `a`'s, so an unrelated candidate comes next.
    let take = |hallucinate: bool| {
        let mut scheduler = with_users(
            scheduler(UserPickerKind::RoundRobin, false, hallucinate),
            &["u"],
        );
        (0..3)
            .map(|_| scheduler.next_decision().unwrap().model_id)
            .collect::<Vec<_>>()
    };
    let with = take(true);
    let without = take(false);
    assert_eq!(without, ["a", "a2", "b"]);
    assert_eq!(with[0], "a");
    assert_ne!(with[1], "a2", "{with:?}");
    let mut distinct = with.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{with:?}");
}

#[test]
fn the_user_pickers_see_the_hallucinated_bounds() {
    // Greedy, two identical users: after one decision for u1 is in flight, u1's largest bound is
    // lower with hallucination than without.
    let summaries = |hallucinate: bool| {
        let mut scheduler = with_users(
            scheduler(UserPickerKind::Greedy, false, hallucinate),
            &["u1", "u2"],
        );
        let decision = scheduler.next_decision().unwrap();
        assert_eq!(decision.user_id, "u1");
        scheduler.user_summaries()
    };
    let (with, without) = (summaries(true), summaries(false));
    assert!(with[0].1.largest_upper_confidence_bound < without[0].1.largest_upper_confidence_bound);
    assert_eq!(with[1], without[1], "the other user is untouched");
}

#[test]
fn cancel_and_report_restore_the_right_posterior() {
    let users = ["u1", "u2"];
    let mut on = with_users(scheduler(UserPickerKind::RoundRobin, true, true), &users);
    let mut off = with_users(scheduler(UserPickerKind::RoundRobin, true, false), &users);
    let warm_up = on.next_decision_for_user("u1").unwrap().unwrap();
    on.report(&warm_up, 0.6, 1.0).unwrap();
    off.report(&warm_up, 0.6, 1.0).unwrap();
    let settled = posterior_bits(&on, "u1");
    assert_eq!(settled, posterior_bits(&off, "u1"));

    // Cancel: back to the posterior before the decision, bit for bit.
    let decision = on.next_decision_for_user("u1").unwrap().unwrap();
    assert_ne!(posterior_bits(&on, "u1"), settled);
    on.cancel(&decision).unwrap();
    assert_eq!(posterior_bits(&on, "u1"), settled);

    // Two in flight, one reported: the other's hallucination stays.
    let first = on.next_decision_for_user("u1").unwrap().unwrap();
    let second = on.next_decision_for_user("u1").unwrap().unwrap();
    assert_ne!(first.model_id, second.model_id);
    on.report(&first, 0.8, 1.0).unwrap();
    off.report(&first, 0.8, 1.0).unwrap();
    let (with_second, without_second) = (on.posterior("u1").unwrap(), off.posterior("u1").unwrap());
    for ((id, mean_on, sd_on), (_, mean_off, sd_off)) in with_second.iter().zip(&without_second) {
        assert_eq!(mean_on, mean_off);
        if *id == second.model_id {
            assert!(sd_on < sd_off);
        }
    }
    // The second reported: exactly the posterior of the same real observations.
    on.report(&second, 0.5, 2.0).unwrap();
    off.report(&second, 0.5, 2.0).unwrap();
    assert_eq!(posterior_bits(&on, "u1"), posterior_bits(&off, "u1"));

    // A decision of an older data version neither cancels nor hallucinates in the new one.
    let old = on.next_decision_for_user("u2").unwrap().unwrap();
    on.data_changed("u2").unwrap();
    off.data_changed("u2").unwrap();
    let fresh = on.next_decision_for_user("u2").unwrap().unwrap();
    assert_eq!(fresh.model_id, old.model_id);
    let in_flight = posterior_bits(&on, "u2");
    on.cancel(&old).unwrap();
    assert_eq!(posterior_bits(&on, "u2"), in_flight);
    assert_ne!(
        on.next_decision_for_user("u2").unwrap().unwrap().model_id,
        fresh.model_id,
        "the new version's run is still in flight"
    );
}

#[test]
fn concurrent_first_decisions_go_to_different_users() {
    // Greedy's and Hybrid's first round serves each user without observations once, even while
    // the earlier users' first runs are still in flight (with or without hallucination).
    for picker in [
        UserPickerKind::Greedy,
        UserPickerKind::Hybrid { patience: 10 },
    ] {
        for hallucinate in [true, false] {
            let mut scheduler =
                with_users(scheduler(picker, true, hallucinate), &["u1", "u2", "u3"]);
            let users: Vec<String> = (0..3)
                .map(|_| scheduler.next_decision().unwrap().user_id)
                .collect();
            assert_eq!(users, ["u1", "u2", "u3"], "{picker:?}, {hallucinate}");
        }
    }
}

#[test]
fn line_6_sees_the_latest_run_in_flight_at_its_hallucinated_value() {
    let summaries = |hallucinate: bool| {
        let mut scheduler = with_users(
            scheduler(UserPickerKind::Greedy, false, hallucinate),
            &["u1", "u2"],
        );
        for _ in 0..2 {
            let decision = scheduler.next_decision().unwrap();
            scheduler.report(&decision, 0.55, 1.0).unwrap();
        }
        let before = scheduler.user_summaries();
        let decision = scheduler.next_decision().unwrap();
        (before, scheduler.user_summaries(), decision.user_id)
    };
    let (before, with, user) = summaries(true);
    let (_, without, _) = summaries(false);
    let served = usize::from(user == "u2");
    // Without hallucination the gap is the stale one; with it, it moves.
    assert_eq!(
        without[served].1.empirical_gap,
        before[served].1.empirical_gap
    );
    assert_ne!(with[served].1.empirical_gap, before[served].1.empirical_gap);
    assert_eq!(with[1 - served], without[1 - served]);
}
