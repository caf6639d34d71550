//! Each model family learns an easy task clearly above chance, in seconds, on the CPU (or on the
//! device `EASEML_DEVICE` names).

use easeml_trainer::models::ModelConfig;
use easeml_trainer::{Budget, Candidate, Examples, RunOutcome, synthetic, train};
use tch::Device;

/// The device of the training runs: the CPU, unless `EASEML_DEVICE` names one (`cuda`, `cuda:N`) to
/// run the same tests on a GPU. Predictions stay on the CPU (checkpoints move across devices).
fn test_device() -> Device {
    match std::env::var(easeml_trainer::device::DEVICE_ENV) {
        Ok(value) if !value.trim().is_empty() => {
            easeml_trainer::device::parse_device(&value).unwrap()
        }
        _ => Device::Cpu,
    }
}

fn budget(epochs: usize) -> Budget {
    tch::set_num_threads(1);
    let mut budget = Budget::new(test_device());
    budget.learning_rates = vec![0.01];
    budget.max_epochs = epochs;
    budget.max_seconds = 60.0;
    budget.batch_size = 16;
    budget.patience = 4;
    budget.model = ModelConfig {
        width: 1.0 / 16.0,
        max_bytes: 8,
    };
    budget
}

fn assert_learns(candidate: &str, examples: &Examples, budget: &Budget, threshold: f64) {
    let candidate = Candidate::parse(candidate).unwrap();
    let run = train(&candidate, examples, budget).unwrap();
    let quality = match &run.outcome {
        RunOutcome::Succeeded { quality, .. } => *quality,
        RunOutcome::Failed { reason } => panic!("{candidate} failed: {reason}"),
    };
    eprintln!(
        "{candidate}: quality {quality:.3} in {:.2}s ({} epochs)",
        run.cost_seconds,
        run.curve.len()
    );
    assert!(
        quality > threshold,
        "{candidate}: quality {quality:.3} <= {threshold} (curve {:?})",
        run.curve
    );
}

#[test]
fn image_classifiers_find_the_bright_quadrant() {
    let examples = synthetic::quadrant_images(240, [12, 12, 3], 1);
    let mut budget = budget(10);
    // Two rates of the paper's grid: the narrow nets differ in which one trains.
    budget.learning_rates = vec![0.01, 0.001];
    for model in [
        "alexnet",
        "bn_alexnet",
        "resnet18",
        "resnet50",
        "googlenet",
        "squeezenet",
        "vgg16",
        "nin",
    ] {
        let mut budget = budget.clone();
        if model == "squeezenet" {
            // Fire modules squeeze to 1/8 of the width: at 1/16 they are too narrow to train.
            budget.model.width = 0.25;
        }
        // Chance is 0.25.
        assert_learns(model, &examples, &budget, 0.6);
    }
}

#[test]
fn normalized_candidates_learn_too() {
    let examples = synthetic::quadrant_images(240, [12, 12, 3], 2);
    assert_learns("resnet18+norm_k2", &examples, &budget(10), 0.6);
}

#[test]
fn tabular_models_learn_signs_and_lines() {
    let classification = synthetic::tabular_sign(400, 5, 3);
    for model in ["mlp_small", "mlp_large", "logistic"] {
        assert_learns(model, &classification, &budget(15), 0.85);
    }
    let regression = synthetic::tabular_linear(400, 5, 4);
    for model in ["linear", "mlp_small", "mlp_large"] {
        assert_learns(model, &regression, &budget(15), 0.8);
    }
}

#[test]
fn table_models_learn_signs_and_lines() {
    let classification = synthetic::tabular_sign(400, 5, 3);
    let regression = synthetic::tabular_linear(400, 5, 4);
    for model in ["gbdt", "random_forest", "knn"] {
        assert_learns(model, &classification, &budget(1), 0.85);
        assert_learns(model, &regression, &budget(1), 0.8);
    }
}

#[test]
fn recurrent_models_learn_the_sign_of_a_sum() {
    let examples = synthetic::sequence_sign(400, 2, 5);
    for model in ["rnn", "lstm", "bilstm", "gru"] {
        assert_learns(model, &examples, &budget(15), 0.75);
    }
}

#[test]
fn seq2seq_learns_a_running_mean() {
    let examples = synthetic::sequence_running_mean(400, 2, 6);
    assert_learns("seq2seq", &examples, &budget(15), 0.5);
}

#[test]
fn recovery_models_learn_to_brighten() {
    let examples = synthetic::recovery_images(160, [8, 8, 1], 7);
    for model in ["autoencoder", "gan", "pix2pix"] {
        assert_learns(model, &examples, &budget(10), 0.5);
    }
}

#[test]
fn tree_models_learn_depth() {
    let examples = synthetic::tree_depth(240, 2, 8);
    assert_learns("tree_rnn", &examples, &budget(15), 0.75);
    assert_learns("tree_kernel_svm", &examples, &budget(1), 0.75);
}

#[test]
fn bit_models_read_bytes() {
    let classification = synthetic::bytes_letters_or_digits(240, 9);
    assert_learns("bit_rnn", &classification, &budget(10), 0.8);
    let reconstruction = synthetic::bytes_to_reconstruct(240, 10);
    assert_learns("bit_autoencoder", &reconstruction, &budget(15), 0.3);
}
