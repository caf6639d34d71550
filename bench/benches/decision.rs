//! Criterion: one scheduling decision (and one posterior update) for a user with K = 179
//! candidates after t observations, t up to 179 (the delgado179 shape), with synthetic features;
//! and one decision of the default policy as the service grows: U = 1000 users x K = 200
//! candidates x t = 50 observations each (`service/decision_u1000_k200_t50`), on the identity and
//! on the log-odds quality scale (`service/decision_u1000_k200_t50_logit`), and on the log-odds
//! with line 8's UCB gap instead of the default's expected improvement per unit cost
//! (`service/decision_u1000_k200_t50_logit_ucb_gap`, the default before the rule followed the
//! cost mode). And the density of a history's rows under the prior, which chooses the quality
//! scale once per history (`density/rows_200x100_per_row`, the prior factored for every row, beside
//! `density/rows_200x100_per_pattern`, factored once per pattern of known entries: once here).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use easeml_bench::dataset::{Dataset, SyntheticSpec, generate_synthetic};
use easeml_scheduler::gp::UserGp;
use easeml_scheduler::picker::Line8Rule;
use easeml_scheduler::{
    CandidateSpec, HyperparameterChoice, KernelKind, KernelModel, QualityHistory, QualityScale,
    Scheduler, SchedulerConfig,
};

const N_MODELS: usize = 179;

/// A synthetic table (SIGMA_M 0.5, ALPHA 0.1) of `users` x `models`, and a scheduler with the
/// default policy (EI per unit cost, Hybrid with a round-robin floor, per-user amplitudes: the
/// replay's and the engine's; line 8 by `line8_rule`, `None` the default's) over a `kind` kernel
/// on the `scale` fitted to every user but the first.
fn synthetic_scheduler(
    users: usize,
    models: usize,
    seed: u64,
    kind: KernelKind,
    scale: QualityScale,
    line8_rule: Option<Line8Rule>,
) -> (Dataset, Scheduler) {
    let spec = SyntheticSpec {
        n_users: users,
        n_models: models,
        ..SyntheticSpec::paper(0.5, 0.1)
    };
    let data = generate_synthetic(spec, seed).unwrap();
    let history = QualityHistory {
        model_ids: data.model_ids.clone(),
        rows: data.quality[1..].to_vec(),
    };
    let kernel = KernelModel::from_history_in_scale(
        &history,
        kind,
        HyperparameterChoice::FitMarginalLikelihood,
        scale,
    )
    .unwrap();
    let scheduler = Scheduler::new(
        Arc::new(kernel),
        SchedulerConfig {
            line8_rule,
            ..SchedulerConfig::default()
        },
    );
    (data, scheduler)
}

fn scheduler_after(observations: usize) -> (Scheduler, Vec<Option<f64>>) {
    let (data, mut scheduler) = synthetic_scheduler(
        110,
        N_MODELS,
        7,
        KernelKind::Matern52,
        QualityScale::Identity,
        None,
    );
    let candidates = data
        .model_ids
        .iter()
        .enumerate()
        .map(|(m, id)| CandidateSpec {
            model_id: id.clone(),
            expected_cost: 0.1 + (m % 10) as f64 / 10.0,
        })
        .collect();
    scheduler.register_user("user", candidates, &[]).unwrap();
    for _ in 0..observations {
        let decision = scheduler.next_decision().unwrap();
        let m: usize = decision.model_id[1..].parse().unwrap();
        scheduler
            .report(&decision, data.quality[0][m].unwrap(), 1.0)
            .unwrap();
    }
    (scheduler, data.quality[0].clone())
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("k179");
    for observations in [0usize, 50, 178] {
        let (mut scheduler, _) = scheduler_after(observations);
        // One decision: `next_decision` (both pickers' summaries, UCB over all eligible candidates), then
        // `cancel` so that every iteration sees the same state.
        group.bench_with_input(
            BenchmarkId::new("decision", observations),
            &observations,
            |b, _| {
                b.iter(|| {
                    let decision = scheduler.next_decision().unwrap();
                    scheduler.cancel(&decision).unwrap();
                    black_box(decision)
                })
            },
        );
    }
    // One posterior update (rank-one Cholesky extension) at t = 0, 50, 178.
    let spec = SyntheticSpec {
        n_users: 110,
        n_models: N_MODELS,
        ..SyntheticSpec::paper(0.5, 0.1)
    };
    let data = generate_synthetic(spec, 7).unwrap();
    let history = QualityHistory {
        model_ids: data.model_ids.clone(),
        rows: data.quality[1..].to_vec(),
    };
    let kernel = KernelModel::from_history(
        &history,
        KernelKind::Matern52,
        HyperparameterChoice::FitMarginalLikelihood,
    )
    .unwrap();
    let (mean, covariance) = kernel.prior_over(&data.model_ids);
    for observations in [0usize, 50, 178] {
        let mut gp = UserGp::new(
            mean.clone(),
            covariance.clone(),
            kernel.hyperparameters().noise_variance,
        );
        for m in 0..observations {
            gp.add_observation(m, data.quality[0][m].unwrap());
        }
        group.bench_with_input(
            BenchmarkId::new("gp_update", observations),
            &observations,
            |b, _| {
                b.iter_batched(
                    || gp.clone(),
                    |mut gp| {
                        gp.add_observation(N_MODELS - 1, 0.5);
                        black_box(gp)
                    },
                    criterion::BatchSize::LargeInput,
                )
            },
        );
    }
    group.finish();
}

/// A scheduler with the default policy over `users` users of `models` candidates each (costs
/// 0.1-1.0), every user with `observations` observations (its own decisions, reported at the
/// synthetic table's quality of user 0), on the given quality scale.
fn service_scheduler(
    users: usize,
    models: usize,
    observations: usize,
    scale: QualityScale,
    line8_rule: Option<Line8Rule>,
) -> Scheduler {
    let (data, mut scheduler) =
        synthetic_scheduler(60, models, 11, KernelKind::Rbf, scale, line8_rule);
    for u in 0..users {
        let user = format!("user{u}");
        let candidates = data
            .model_ids
            .iter()
            .enumerate()
            .map(|(m, id)| CandidateSpec {
                model_id: id.clone(),
                expected_cost: 0.1 + ((m + u) % 10) as f64 / 10.0,
            })
            .collect();
        scheduler.register_user(&user, candidates, &[]).unwrap();
        for _ in 0..observations {
            let decision = scheduler.next_decision_for_user(&user).unwrap().unwrap();
            let m: usize = decision.model_id[1..].parse().unwrap();
            let quality = data.quality[0][m].unwrap() - 0.01 * (u % 7) as f64;
            scheduler.report(&decision, quality, 1.0).unwrap();
        }
    }
    scheduler
}

fn service(c: &mut Criterion) {
    let mut group = c.benchmark_group("service");
    group.sample_size(10);
    for (name, scale, line8_rule) in [
        ("decision_u1000_k200_t50", QualityScale::Identity, None),
        ("decision_u1000_k200_t50_logit", QualityScale::Logit, None),
        (
            "decision_u1000_k200_t50_logit_ucb_gap",
            QualityScale::Logit,
            Some(Line8Rule::UcbGap),
        ),
    ] {
        let mut scheduler = service_scheduler(1000, 200, 50, scale, line8_rule);
        group.bench_function(name, |b| {
            b.iter(|| {
                let decision = scheduler.next_decision().unwrap();
                scheduler.cancel(&decision).unwrap();
                black_box(decision)
            })
        });
    }
    group.finish();
}

fn density(c: &mut Criterion) {
    let mut group = c.benchmark_group("density");
    group.sample_size(10);
    let data = generate_synthetic(SyntheticSpec::paper(0.5, 0.1), 0).unwrap();
    let history = QualityHistory {
        model_ids: data.model_ids.clone(),
        rows: data.quality.clone(),
    };
    let kernel = KernelModel::from_history_in_scale(
        &history,
        KernelKind::Matern52,
        HyperparameterChoice::FitMarginalLikelihood,
        QualityScale::Logit,
    )
    .unwrap();
    let rows = || history.rows.iter().map(|row| row.as_slice());
    group.bench_function("rows_200x100_per_row", |b| {
        b.iter(|| {
            black_box(
                rows()
                    .map(|row| kernel.log_density_of_row(&history.model_ids, row))
                    .sum::<Option<f64>>(),
            )
        })
    });
    group.bench_function("rows_200x100_per_pattern", |b| {
        b.iter(|| black_box(kernel.log_density_of_rows(&history.model_ids, rows())))
    });
    group.finish();
}

criterion_group!(benches, decision, service, density);
criterion_main!(benches);
