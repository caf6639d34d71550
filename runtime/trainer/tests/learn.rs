//! Each model family learns an easy task clearly above chance, in seconds, on the CPU (or on the
//! device `EASEML_DEVICE` names).

mod common;

use easeml_trainer::data::{Inputs, Sequences, Targets};
use easeml_trainer::loss_scale::LossScaler;
use easeml_trainer::precision::{MIXED_PRECISION_ENV, Precision};
use easeml_trainer::{
    Budget, Candidate, Checkpoint, Examples, Prediction, Predictor, RunOutcome, estimate_cost,
    synthetic, train,
};
use tch::Device;

fn budget(epochs: usize) -> Budget {
    let mut budget = common::small_budget(epochs);
    budget.max_seconds = 60.0;
    budget.patience = 4;
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
        "small_cnn",
        "knn",
        "kernel_ridge",
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
    // The same line far from 0 and 300 times as wide (a price, a count): the networks' outputs
    // are on the targets' scale (`OutputScale`), so they learn it as fast (without, the linear
    // model's 15 epochs end at R^2 0).
    let mut shifted = regression.clone();
    if let Targets::Dense { values, .. } = &mut shifted.targets {
        for value in values.iter_mut() {
            *value = 1000.0 + 300.0 * *value;
        }
    }
    for model in ["linear", "mlp_small"] {
        assert_learns(model, &shifted, &budget(15), 0.8);
    }
}

/// float16 mixed precision, the older GPUs' path (autocast to float16, the loss scaled:
/// `loss_scale.rs`), learns too: the tabular networks' test and a ResNet's run again in a child
/// process of this binary with `EASEML_MIXED_PRECISION=float16`, which forces float16 on the CPU
/// as on any GPU (the variable is read once per process, hence the child). On a GPU
/// (`EASEML_DEVICE=cuda`, inherited) the child trains there.
#[test]
fn float16_with_loss_scaling_learns() {
    let children = [
        "float16_is_what_the_child_trains_in",
        "tabular_models_learn_signs_and_lines",
        "normalized_candidates_learn_too",
        "float16_recurrent_models_learn_or_fail_in_words",
    ];
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(MIXED_PRECISION_ENV, "float16")
        .args(children)
        .args([
            "--exact",
            "--include-ignored",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{log}");
    assert!(log.contains("test result: ok. 4 passed"), "{log}");
    eprint!("{log}");
}

#[test]
#[ignore = "run by float16_with_loss_scaling_learns in a child with EASEML_MIXED_PRECISION=float16"]
fn float16_is_what_the_child_trains_in() {
    let device = common::test_device();
    assert_eq!(
        Precision::on(device, Budget::new(device).mixed_precision),
        Precision::Float16
    );
    assert!(LossScaler::for_precision(Precision::Float16).is_some());
}

/// In float16 the recurrent networks learn where libtorch has float16 kernels for them (cuDNN);
/// where it has none (oneDNN's LSTM on the CPU: tch panics inside `seq_init`) the run fails with
/// the reason, and the process goes on.
#[test]
#[ignore = "run by float16_with_loss_scaling_learns in a child with EASEML_MIXED_PRECISION=float16"]
fn float16_recurrent_models_learn_or_fail_in_words() {
    let examples = synthetic::sequence_sign(400, 2, 5);
    for model in ["rnn", "lstm"] {
        let candidate = Candidate::parse(model).unwrap();
        let run = train(&candidate, &examples, &budget(15)).unwrap();
        match &run.outcome {
            RunOutcome::Succeeded { quality, .. } => {
                eprintln!("{model} in float16: quality {quality:.3}");
                assert!(*quality > 0.75, "{model}: {quality}");
            }
            RunOutcome::Failed { reason } => {
                eprintln!("{model} in float16: failed: {reason}");
                assert!(
                    reason.contains("libtorch failed in the forward pass at epoch"),
                    "{reason}"
                );
            }
        }
    }
}

#[test]
fn table_models_learn_signs_and_lines() {
    let classification = synthetic::tabular_sign(400, 5, 3);
    let regression = synthetic::tabular_linear(400, 5, 4);
    for model in ["gbdt", "random_forest", "knn", "kernel_ridge"] {
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
fn convolutional_sequence_models_learn_the_sign_of_a_sum() {
    let examples = synthetic::sequence_sign(400, 2, 5);
    for model in ["fcn", "resnet1d", "inception_time"] {
        assert_learns(model, &examples, &budget(15), 0.75);
    }
}

#[test]
fn classic_time_series_models_learn_shapes() {
    // Chance is 1/3; k-fold (below 200 examples) and the split (from 200).
    for n in [90, 210] {
        let examples = synthetic::sequence_shapes(n, 1, 11);
        for model in ["minirocket", "multirocket", "dtw_knn"] {
            assert_learns(model, &examples, &budget(1), 0.85);
        }
    }
}

#[test]
fn classic_time_series_checkpoints_predict_the_same_after_a_reload() {
    let examples = synthetic::sequence_shapes(60, 3, 12);
    let fresh = synthetic::sequence_shapes(30, 3, 13);
    for model in ["minirocket", "multirocket", "dtw_knn"] {
        let run = train(&Candidate::parse(model).unwrap(), &examples, &budget(1)).unwrap();
        let checkpoint = run.checkpoint().unwrap();
        let before = Predictor::new(checkpoint, Device::Cpu)
            .unwrap()
            .predict(&fresh.inputs)
            .unwrap();
        let dir = std::env::temp_dir().join(format!("easeml-learn-{model}-{}", std::process::id()));
        checkpoint.save(&dir).unwrap();
        let loaded = Checkpoint::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let after = Predictor::new(&loaded, Device::Cpu)
            .unwrap()
            .predict(&fresh.inputs)
            .unwrap();
        assert_eq!(before, after, "{model}");
        let Prediction::Class { probabilities, .. } = &after[0] else {
            panic!("{model}: not a class")
        };
        assert_eq!(probabilities.len(), 3);
        assert!((probabilities.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        // The same seed gives the same model.
        let again = train(&Candidate::parse(model).unwrap(), &examples, &budget(1)).unwrap();
        assert_eq!(
            again.checkpoint().unwrap().meta.extra,
            checkpoint.meta.extra,
            "{model} is not deterministic"
        );
        let estimate =
            estimate_cost(&Candidate::parse(model).unwrap(), &examples, &budget(1)).unwrap();
        assert!(
            estimate.seconds.is_finite()
                && estimate.seconds > 0.0
                && estimate.total_flops.is_finite()
                && estimate.total_flops > 0.0,
            "{model}: {estimate:?}"
        );
    }
}

/// A random-kernel model's state read back from a checkpoint is checked: parts that disagree (a
/// bias missing, a feature's weight missing, a channel out of range) are a malformed checkpoint,
/// not a panic at the first prediction.
#[test]
fn random_kernel_checkpoints_that_disagree_are_refused() {
    use easeml_trainer::ModelKind;
    use easeml_trainer::classic::ClassicModel;
    let examples = synthetic::sequence_shapes(30, 2, 15);
    for (kind, id) in [
        (ModelKind::MiniRocket, "minirocket"),
        (ModelKind::MultiRocket, "multirocket"),
    ] {
        let run = train(&Candidate::parse(id).unwrap(), &examples, &budget(1)).unwrap();
        let extra = run.checkpoint().unwrap().meta.extra.clone().unwrap();
        assert!(ClassicModel::from_extra(kind, Some(&extra)).is_ok(), "{id}");
        let broken = |path: &[&str], change: &dyn Fn(&mut serde_json::Value)| {
            let mut state = extra.clone();
            let mut part = &mut state;
            for key in path {
                part = &mut part[*key];
            }
            change(part);
            ClassicModel::from_extra(kind, Some(&state))
                .expect_err("a state whose parts disagree")
                .to_string()
        };
        // A buffer one float long (the state's buffers are packed; a plain array reads too).
        let pop = |part: &mut serde_json::Value| {
            *part = serde_json::json!([0.0]);
        };
        for (path, change) in [
            (
                &["transform", "biases"][..],
                &pop as &dyn Fn(&mut serde_json::Value),
            ),
            (&["mean"][..], &pop),
            (&["weights"][..], &|weights: &mut serde_json::Value| {
                weights[0] = serde_json::json!([0.0]);
            }),
            (
                &["transform", "combination_channels"][..],
                &|subsets: &mut serde_json::Value| {
                    subsets[0][0] = serde_json::json!(7);
                },
            ),
        ] {
            let message = broken(path, change);
            assert!(message.contains("malformed"), "{id} {path:?}: {message}");
        }
    }
}

#[test]
fn classic_time_series_models_stop_at_the_time_limit() {
    // 400 series of 200 to 300 steps: the split; a limit the first fit alone exceeds.
    let examples = long_series(400, 200, 100, 14);
    for model in ["minirocket", "multirocket", "dtw_knn"] {
        let mut budget = budget(1);
        budget.max_seconds = 0.05;
        let started = std::time::Instant::now();
        let run = match train(&Candidate::parse(model).unwrap(), &examples, &budget) {
            Ok(run) => run,
            // No model at all by the limit: the typed error, saying so (the engine tells it
            // apart from a model that fails).
            Err(error @ easeml_trainer::Error::OutOfTime { .. }) => {
                let seconds = started.elapsed().as_secs_f64();
                assert!(error.to_string().contains("time limit"), "{model}: {error}");
                assert!(seconds < 30.0, "{model}: {seconds}s");
                continue;
            }
            Err(error) => panic!("{model}: {error}"),
        };
        let seconds = started.elapsed().as_secs_f64();
        eprintln!("{model}: {seconds:.2}s, {:?}", failure(&run));
        // One setting at most (later ones only start with time left).
        let settings: std::collections::BTreeSet<u64> = run
            .trials
            .iter()
            .map(|trial| trial.learning_rate.to_bits())
            .collect();
        assert!(settings.len() <= 1, "{model}: {settings:?}");
        assert!(seconds < 30.0, "{model}: {seconds}s");
    }
}

#[test]
fn classic_time_series_models_take_degenerate_series() {
    let shapes = |lengths: &[usize], labels: Vec<i64>, n_classes: i64| {
        let sequences: Vec<Vec<Vec<f32>>> = lengths
            .iter()
            .enumerate()
            .map(|(i, &length)| vec![vec![(i % 3) as f32, 1.0]; length])
            .collect();
        Examples {
            ids: Examples::sequential_ids(lengths.len()),
            inputs: Inputs::Sequences(Sequences::from_nested(2, &sequences).unwrap()),
            targets: Targets::Classes { n_classes, labels },
        }
    };
    let n = 12;
    let cases = [
        // Every series one step long.
        shapes(&[1; 12], (0..n).map(|i| i % 2).collect(), 2),
        // One class only (of two).
        shapes(&[5; 12], vec![0; 12], 2),
        // Constant series of lengths 0 to 11 (shorter than the kernels).
        shapes(
            &(0..12).collect::<Vec<_>>(),
            (0..n).map(|i| i % 3).collect(),
            3,
        ),
    ];
    for examples in &cases {
        for model in ["minirocket", "multirocket", "dtw_knn"] {
            let run = train(&Candidate::parse(model).unwrap(), examples, &budget(1)).unwrap();
            let checkpoint = run
                .checkpoint()
                .unwrap_or_else(|| panic!("{model} failed: {:?}", failure(&run)));
            let predictions = Predictor::new(checkpoint, Device::Cpu)
                .unwrap()
                .predict(&examples.inputs)
                .unwrap();
            assert_eq!(predictions.len(), examples.len());
        }
    }
    // Values that are not finite are read as 0, not a panic.
    let mut odd = cases[2].clone();
    if let Inputs::Sequences(sequences) = &mut odd.inputs {
        sequences.values[3] = f32::NAN;
        sequences.values[8] = f32::INFINITY;
    }
    for model in ["minirocket", "multirocket", "dtw_knn"] {
        let run = train(&Candidate::parse(model).unwrap(), &odd, &budget(1)).unwrap();
        assert!(run.checkpoint().is_some(), "{model}");
    }
}

fn failure(run: &easeml_trainer::TrainedRun) -> Option<&str> {
    match &run.outcome {
        RunOutcome::Failed { reason } => Some(reason),
        RunOutcome::Succeeded { .. } => None,
    }
}

/// `n` series of `length` to `length + spread` steps, one channel, a noisy sine whose frequency is
/// the class (2 classes).
fn long_series(n: usize, length: usize, spread: usize, seed: u64) -> Examples {
    let mut rng = synthetic::Rng::new(seed);
    let mut labels = Vec::new();
    let sequences: Vec<Vec<Vec<f32>>> = (0..n)
        .map(|_| {
            let class = rng.below(2) as i64;
            labels.push(class);
            let steps = length + rng.below(spread as u64 + 1) as usize;
            (0..steps)
                .map(|t| vec![(t as f32 * 0.1 * (class + 1) as f32).sin() + rng.uniform() - 0.5])
                .collect()
        })
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Sequences(Sequences::from_nested(1, &sequences).unwrap()),
        targets: Targets::Classes {
            n_classes: 2,
            labels,
        },
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
    // Input and output of different forms (the general auto-encoder's outputs are not its inputs).
    let translation = synthetic::bytes_to_translate(240, 11);
    assert_learns("bit_autoencoder", &translation, &budget(15), 0.3);
}

#[test]
fn the_bit_rnn_reads_long_inputs_in_few_steps_within_its_time_limit() {
    // 3-4 kB per input: one byte per recurrent step was 4,000 sequential steps per batch (a 12 kB
    // input once ran a 15 s run for 8 minutes). The run reads 16 bytes per step (the fewest that
    // keep 4,000 bytes within 256 steps), records it in the checkpoint, and serves the same way.
    let examples = synthetic::bytes_letters_or_digits_of(96, 3000..4000, 21);
    let fresh = synthetic::bytes_letters_or_digits_of(40, 100..5000, 22);
    let mut budget = budget(6);
    budget.max_seconds = 20.0;
    let run = train(&Candidate::parse("bit_rnn").unwrap(), &examples, &budget).unwrap();
    assert!(
        run.cost_seconds < budget.max_seconds * 1.5,
        "a {:.0} s limit took {:.1} s",
        budget.max_seconds,
        run.cost_seconds
    );
    let checkpoint = run.checkpoint().expect("a trained bit_rnn");
    assert_eq!(checkpoint.meta.config.bytes_per_step, 16);
    let predictions = Predictor::new(checkpoint, Device::Cpu)
        .unwrap()
        .predict(&fresh.inputs)
        .unwrap();
    let Targets::Classes { labels, .. } = &fresh.targets else {
        panic!("classes")
    };
    let right = Prediction::count_correct(&predictions, labels.iter().copied());
    assert!(right >= 32, "{right} of 40 right");
}

/// Run by hand (`gpu-check/run.sh` does, on CUDA): the seq2seq test's run under six seeds on the
/// test device, printing each quality and curve. On CUDA the test's run once stopped at its sixth
/// epoch at quality 0.20 (its second epoch peaked by luck; cuDNN on or off alike) where the CPU's
/// went on to 0.69: early stopping now also watches the validation loss ([`EarlyStopping`]).
/// `cargo test -p easeml-trainer --test learn seq2seq_diagnosis -- --ignored --nocapture`.
///
/// [`EarlyStopping`]: easeml_trainer::EarlyStopping
#[test]
#[ignore = "a diagnosis printed for a person, not a check"]
fn seq2seq_diagnosis() {
    let examples = synthetic::sequence_running_mean(400, 2, 6);
    let candidate = Candidate::parse("seq2seq").unwrap();
    for seed in 0..6 {
        let mut budget = budget(15);
        budget.seed = seed;
        match train(&candidate, &examples, &budget) {
            Ok(run) => {
                let curve: Vec<_> = run
                    .curve
                    .iter()
                    .map(|point| (point.train_loss, point.validation_quality))
                    .collect();
                eprintln!(
                    "seq2seq diagnosis {:?} seed {seed}: quality {:?} in {:.2}s, curve {curve:.3?}",
                    budget.device,
                    run.quality(),
                    run.cost_seconds
                );
            }
            Err(error) => eprintln!("seq2seq diagnosis seed {seed}: error {error:#}"),
        }
    }
}
