//! Times easeml's incremental GP on delgado179 and writes the same inputs for scikit-learn.
//!
//! `cargo run --release -p easeml-scheduler --example gp_timing -- DATA_DIR OUT.json`: history =
//! the first 110 data sets, test user = data set 115, its candidates observed one by one in column
//! order; after each observation the posterior of all candidates is updated (rank-one) and a UCB
//! decision is taken. OUT.json gets the features, prior means, hyperparameters, observations, our
//! per-step times and posterior means, for `bench/peers/sklearn_gp_update.py` to replay with
//! `GaussianProcessRegressor` and compare.

use std::path::Path;
use std::time::Instant;

use easeml_bench::dataset::load_delgado179;
use easeml_scheduler::gp::UserGp;
use easeml_scheduler::{HyperparameterChoice, KernelKind, KernelModel, QualityHistory};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().collect();
    let [_, data_dir, out] = arguments.as_slice() else {
        return Err("usage: gp_timing DATA_DIR OUT.json".into());
    };
    let data = load_delgado179(Path::new(data_dir))?;
    let history_rows: Vec<Vec<Option<f64>>> = data.quality[..110].to_vec();
    let test_user = 115;
    let candidates: Vec<usize> = (0..data.model_ids.len())
        .filter(|&m| {
            data.quality[test_user][m].is_some() && history_rows.iter().any(|r| r[m].is_some())
        })
        .collect();
    let candidate_ids: Vec<String> = candidates
        .iter()
        .map(|&m| data.model_ids[m].clone())
        .collect();
    let history = QualityHistory {
        model_ids: data.model_ids.clone(),
        rows: history_rows.clone(),
    };
    let kernel = KernelModel::from_history(
        &history,
        KernelKind::Matern52,
        HyperparameterChoice::FitMarginalLikelihood,
    )?;
    // The same features the kernel uses: quality vectors, a missing cell = that user's mean.
    let features: Vec<Vec<f64>> = candidates
        .iter()
        .map(|&m| {
            history_rows
                .iter()
                .map(|row| {
                    let known: Vec<f64> = row.iter().flatten().copied().collect();
                    row[m].unwrap_or(known.iter().sum::<f64>() / known.len() as f64)
                })
                .collect()
        })
        .collect();
    let (prior_mean, covariance) = kernel.prior_over(&candidate_ids);
    let hyper = kernel.hyperparameters();
    let observations: Vec<f64> = candidates
        .iter()
        .map(|&m| data.quality[test_user][m].unwrap_or(0.0))
        .collect();
    let repeats = 20;
    let mut step_seconds = vec![0.0; candidates.len()];
    let mut final_means = Vec::new();
    for _ in 0..repeats {
        let mut gp = UserGp::new(prior_mean.clone(), covariance.clone(), hyper.noise_variance);
        final_means.clear();
        for (step, &quality) in observations.iter().enumerate() {
            let started = Instant::now();
            gp.add_observation(step, quality);
            let best = (0..gp.n_candidates())
                .map(|k| gp.mean()[k] + 3.0 * gp.standard_deviation(k))
                .fold(f64::NEG_INFINITY, f64::max);
            std::hint::black_box(best);
            step_seconds[step] += started.elapsed().as_secs_f64() / repeats as f64;
            if step == 49 {
                final_means = gp.mean().to_vec();
            }
        }
    }
    let report = serde_json::json!({
        "features": features,
        "prior_mean": prior_mean.iter().collect::<Vec<_>>(),
        "hyperparameters": hyper,
        "observations": observations,
        "rust_step_seconds": step_seconds,
        "rust_mean_after_50": final_means,
    });
    std::fs::write(out, serde_json::to_string(&report)?)?;
    println!(
        "K = {}, rust: {:.1} us per update+decision on average, {:.3} ms for the whole sequence",
        candidates.len(),
        step_seconds.iter().sum::<f64>() / candidates.len() as f64 * 1e6,
        step_seconds.iter().sum::<f64>() * 1e3
    );
    Ok(())
}
