//! Training runs as a whole: odd shapes, checkpoints, divergence, the learning-rate grid, the cost
//! estimate, inference, and the linking of the built binaries.

mod common;

use easeml_trainer::infer::Prediction;
use easeml_trainer::models::ModelConfig;
use easeml_trainer::{
    Budget, Candidate, Checkpoint, Examples, Inputs, Predictor, RunOutcome, Targets, TrainedRun,
    Validation, estimate_cost, synthetic, train,
};
use tch::Device;

fn budget(epochs: usize) -> Budget {
    common::small_budget(epochs)
}

const IMAGE_MODELS: [&str; 9] = [
    "alexnet",
    "bn_alexnet",
    "resnet18",
    "resnet50",
    "googlenet",
    "squeezenet",
    "vgg16",
    "nin",
    "small_cnn",
];

/// The tests here take turns: several bound or measure time (time limits, latency) and would
/// measure each other. (Reproducibility does not need it: a run's random draws come from its own
/// generator, `a_run_is_reproducible_while_other_runs_train_in_the_same_process`.)
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn odd_shapes_train_and_predict() {
    let _serial = serial();
    for shape in [[17, 23, 3], [1, 1, 1], [5, 5, 3]] {
        let examples = synthetic::quadrant_images(12, shape, 11);
        for model in IMAGE_MODELS {
            let run = train(&Candidate::parse(model).unwrap(), &examples, &budget(1)).unwrap();
            let checkpoint = run
                .checkpoint()
                .unwrap_or_else(|| panic!("{model} on {shape:?}: {:?}", run.outcome));
            let predictor = Predictor::new(checkpoint, Device::Cpu).unwrap();
            let predictions = predictor.predict(&examples.inputs).unwrap();
            assert_eq!(predictions.len(), 12, "{model} on {shape:?}");
            let Prediction::Class { probabilities, .. } = &predictions[0] else {
                panic!("{model}: not a class");
            };
            assert_eq!(probabilities.len(), 4, "{model} on {shape:?}");
        }
    }
    // Tabular [5] and a one-channel image [A,B] read as [A,B,1].
    let tabular = synthetic::tabular_sign(20, 5, 12);
    for model in ["mlp_small", "mlp_large", "logistic"] {
        let run = train(&Candidate::parse(model).unwrap(), &tabular, &budget(1)).unwrap();
        assert!(run.quality().is_some(), "{model}");
    }
    let mut gray = synthetic::quadrant_images(12, [6, 7, 1], 13);
    if let Inputs::Dense { shape, .. } = &mut gray.inputs {
        *shape = vec![6, 7];
    }
    let run = train(
        &Candidate::parse("resnet18+norm_k1").unwrap(),
        &gray,
        &budget(1),
    )
    .unwrap();
    assert!(run.quality().is_some());
    // Recovery to a different output shape.
    let mut recovery = synthetic::recovery_images(10, [9, 7, 3], 14);
    recovery.targets = Targets::Dense {
        shape: vec![4, 5, 2],
        values: vec![0.5; 10 * 4 * 5 * 2],
    };
    for model in ["autoencoder", "gan", "pix2pix"] {
        let run = train(&Candidate::parse(model).unwrap(), &recovery, &budget(1)).unwrap();
        let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
        let Prediction::Values { shape, .. } = &predictor.predict(&recovery.inputs).unwrap()[0]
        else {
            panic!("{model}: not values");
        };
        assert_eq!(shape, &vec![4, 5, 2], "{model}");
    }
}

#[test]
fn a_reloaded_checkpoint_gives_identical_outputs() {
    let _serial = serial();
    let examples = synthetic::quadrant_images(120, [8, 8, 3], 15);
    // The split, so that the kept weights are the ones validated.
    let mut budget = budget(3);
    budget.k_fold_below = 0;
    let run = train(
        &Candidate::parse("resnet18+norm_k2").unwrap(),
        &examples,
        &budget,
    )
    .unwrap();
    let RunOutcome::Succeeded {
        checkpoint,
        quality,
    } = &run.outcome
    else {
        panic!("{:?}", run.outcome);
    };
    let dir = std::env::temp_dir().join(format!("easeml-trainer-test-{}", std::process::id()));
    checkpoint.save(&dir).unwrap();
    let reloaded = Checkpoint::load(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(&reloaded, checkpoint);
    let first = Predictor::new(checkpoint, Device::Cpu).unwrap();
    let second = Predictor::new(&reloaded, Device::Cpu).unwrap();
    let a = first.raw_outputs(&examples.inputs, 1).unwrap();
    let b = second.raw_outputs(&examples.inputs, 1).unwrap();
    assert_eq!(a.size(), vec![120, 4]);
    assert!(a.equal(&b), "outputs differ after reload");
    // The kept weights are the ones that scored the reported validation quality.
    let (_, validation) = easeml_trainer::data::split_by_id(&examples.ids, 0.2);
    let predictions = first.predict(&examples.inputs).unwrap();
    let Targets::Classes { labels, .. } = &examples.targets else {
        unreachable!()
    };
    let correct = validation
        .iter()
        .filter(|&&row| matches!(predictions[row], Prediction::Class { index, .. } if index == labels[row]))
        .count();
    let recomputed = correct as f64 / validation.len() as f64;
    assert!(
        (recomputed - quality).abs() < 1e-9,
        "{recomputed} vs {quality}"
    );
}

#[test]
fn convolutional_sequence_models_ignore_padding_and_reload_identically() {
    let _serial = serial();
    // Lengths 3 to 8: a batch pads most sequences.
    let examples = synthetic::sequence_sign(60, 3, 22);
    let mut budget = budget(2);
    // The CPU default width (1/4), above the 8-channel minimum of the tests' 1/16.
    budget.model.width = 0.25;
    for model in ["fcn", "resnet1d", "inception_time"] {
        let candidate = Candidate::parse(model).unwrap();
        let estimate = estimate_cost(&candidate, &examples, &budget).unwrap();
        assert!(
            estimate.seconds.is_finite()
                && estimate.seconds > 0.0
                && estimate.forward_flops_per_example.is_finite()
                && estimate.forward_flops_per_example > 0.0,
            "{model}: {estimate:?}"
        );
        let run = train(&candidate, &examples, &budget).unwrap();
        let checkpoint = run
            .checkpoint()
            .unwrap_or_else(|| panic!("{model}: {:?}", run.outcome));
        let dir = std::env::temp_dir().join(format!(
            "easeml-trainer-test-{model}-{}",
            std::process::id()
        ));
        checkpoint.save(&dir).unwrap();
        let reloaded = Checkpoint::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(&reloaded, checkpoint, "{model}");
        let first = Predictor::new(checkpoint, Device::Cpu).unwrap();
        let mut second = Predictor::new(&reloaded, Device::Cpu).unwrap();
        // One batch of all 60 (padded to the longest) against one sequence at a time (no padding).
        let batched = first.raw_outputs(&examples.inputs, 1).unwrap();
        let reloaded_batched = second.raw_outputs(&examples.inputs, 1).unwrap();
        assert_eq!(batched.size(), vec![60, 2], "{model}");
        assert!(
            batched.equal(&reloaded_batched),
            "{model}: outputs differ after reload"
        );
        second.batch_size = 1;
        let alone = second.raw_outputs(&examples.inputs, 1).unwrap();
        let difference = (&batched - &alone).abs().max().double_value(&[]);
        let scale = batched.abs().max().double_value(&[]).max(1.0);
        assert!(
            difference <= 1e-4 * scale,
            "{model}: padding changed an output by {difference} (outputs up to {scale})"
        );
        let predictions = first.predict(&examples.inputs).unwrap();
        assert_eq!(predictions.len(), 60);
    }
}

#[test]
fn a_diverging_learning_rate_is_a_failed_run() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(64, 4, 16);
    let mut budget = budget(3);
    budget.learning_rates = vec![1e30];
    let run = train(&Candidate::parse("mlp_large").unwrap(), &examples, &budget).unwrap();
    let RunOutcome::Failed { reason } = &run.outcome else {
        panic!("expected a failed run, got quality {:?}", run.quality());
    };
    assert!(
        reason.contains("not finite") || reason.contains("NaN") || reason.contains("inf"),
        "{reason}"
    );
    assert!(run.trials[0].failure.is_some());
    // Rates that libtorch itself rejects, or that are not rates at all, fail the same way.
    for rate in [1e38, f64::NAN, -1.0] {
        budget.learning_rates = vec![rate];
        let run = train(&Candidate::parse("mlp_large").unwrap(), &examples, &budget).unwrap();
        assert!(run.quality().is_none(), "{rate}");
    }
    // A diverging rate in the grid does not hide the good ones.
    budget.learning_rates = vec![1e38, 0.01];
    let run = train(&Candidate::parse("mlp_large").unwrap(), &examples, &budget).unwrap();
    assert!(run.quality().is_some());
    assert!(run.trials[0].failure.is_some() && run.trials[1].failure.is_none());
}

#[test]
fn the_grid_is_tried_with_recorded_seeds_and_a_learning_curve() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(200, 4, 17);
    let mut budget = budget(5);
    budget.learning_rates = vec![0.1, 0.01, 0.001];
    // A table's limit at other inputs' (200): this test is about the split.
    budget.k_fold_below_tables = budget.k_fold_below;
    let run = train(&Candidate::parse("mlp_small").unwrap(), &examples, &budget).unwrap();
    assert_eq!(run.trials.len(), 3);
    let rates: Vec<f64> = run.trials.iter().map(|trial| trial.learning_rate).collect();
    assert_eq!(rates, vec![0.1, 0.01, 0.001]);
    assert!(run.trials.iter().all(|trial| trial.epochs >= 1));
    assert!(run.curve.len() >= 3);
    assert!(run.cost_seconds > 0.0);
    assert_eq!(run.n_train + run.n_validation, 200);
    // 200 examples are not below the limit: the split, no spread, no refit.
    assert_eq!(run.validation, Validation::Split { fraction: 0.2 });
    assert_eq!(run.validation.describe(), "split 20%");
    assert!(run.quality_std.is_none() && run.refit.is_none());
    assert!(run.trials.iter().all(|trial| trial.fold.is_none()));
    // The same budget and data give the same run.
    let again = train(&Candidate::parse("mlp_small").unwrap(), &examples, &budget).unwrap();
    assert_eq!(again.trials, run.trials);
    let best_trial = run
        .trials
        .iter()
        .filter_map(|trial| trial.best_quality)
        .fold(0.0, f64::max);
    assert_eq!(run.quality(), Some(best_trial));
}

#[test]
fn cost_estimates_grow_with_the_model_and_the_data() {
    let _serial = serial();
    let mut budget = budget(5);
    let small = synthetic::quadrant_images(100, [16, 16, 3], 18);
    // Under k-fold the same data cost more: every fold trains, then the refit.
    let cross_validated = estimate_cost(&Candidate::parse("resnet18").unwrap(), &small, &budget)
        .unwrap()
        .total_flops;
    // The rest compares runs under one protocol, the split.
    budget.k_fold_below = 0;
    let large = synthetic::quadrant_images(400, [16, 16, 3], 18);
    let resnet18 = Candidate::parse("resnet18").unwrap();
    let resnet50 = Candidate::parse("resnet50").unwrap();
    let a = estimate_cost(&resnet18, &small, &budget).unwrap();
    let b = estimate_cost(&resnet50, &small, &budget).unwrap();
    let c = estimate_cost(&resnet18, &large, &budget).unwrap();
    assert!(a.forward_flops_per_example > 0.0 && a.forward_seconds_per_example > 0.0);
    assert!(a.seconds > 0.0);
    assert!(b.forward_flops_per_example > a.forward_flops_per_example);
    assert!(c.total_flops > 3.0 * a.total_flops);
    assert!(
        cross_validated > 4.0 * a.total_flops,
        "{cross_validated} vs {}",
        a.total_flops
    );
    for (examples, model) in [
        (synthetic::sequence_sign(20, 2, 1), "lstm"),
        (synthetic::sequence_sign(20, 2, 1), "fcn"),
        (synthetic::sequence_sign(20, 2, 1), "resnet1d"),
        (synthetic::sequence_sign(20, 2, 1), "inception_time"),
        (synthetic::tree_depth(20, 2, 1), "tree_rnn"),
        (synthetic::tree_depth(20, 2, 1), "tree_kernel_svm"),
        (synthetic::bytes_letters_or_digits(20, 1), "bit_rnn"),
    ] {
        let estimate =
            estimate_cost(&Candidate::parse(model).unwrap(), &examples, &budget).unwrap();
        assert!(estimate.seconds > 0.0, "{model}");
    }
}

#[test]
fn candidates_that_do_not_fit_and_bad_examples_are_errors() {
    let _serial = serial();
    let sequences = synthetic::sequence_sign(10, 2, 19);
    let error = train(
        &Candidate::parse("resnet18").unwrap(),
        &sequences,
        &budget(1),
    )
    .unwrap_err();
    assert!(error.to_string().contains("does not fit"), "{error}");
    let error = train(
        &Candidate::parse("lstm+norm_k2").unwrap(),
        &sequences,
        &budget(1),
    )
    .unwrap_err();
    assert!(error.to_string().contains("does not fit"), "{error}");
    let mut bad = synthetic::tabular_sign(10, 3, 20);
    bad.targets = Targets::Classes {
        n_classes: 2,
        labels: vec![5; 10],
    };
    assert!(train(&Candidate::parse("logistic").unwrap(), &bad, &budget(1)).is_err());
    let empty = Examples {
        ids: Vec::new(),
        inputs: Inputs::Dense {
            shape: vec![3],
            values: Vec::new(),
        },
        targets: Targets::Classes {
            n_classes: 2,
            labels: Vec::new(),
        },
    };
    assert!(train(&Candidate::parse("logistic").unwrap(), &empty, &budget(1)).is_err());
}

#[test]
fn predictions_of_every_kind() {
    let _serial = serial();
    let sequences = synthetic::sequence_running_mean(60, 2, 21);
    let run = train(
        &Candidate::parse("seq2seq").unwrap(),
        &sequences,
        &budget(2),
    )
    .unwrap();
    let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
    for prediction in predictor.predict(&sequences.inputs).unwrap() {
        let Prediction::Sequence(steps) = prediction else {
            panic!("not a sequence")
        };
        assert!(!steps.is_empty() && steps.iter().all(|step| step.len() == 1));
    }
    // The bit-level auto-encoder's first answer on its own training inputs.
    let first_bytes = |examples: &Examples| {
        let run = train(
            &Candidate::parse("bit_autoencoder").unwrap(),
            examples,
            &budget(2),
        )
        .unwrap();
        let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
        let Prediction::Bytes(out) = predictor.predict(&examples.inputs).unwrap().remove(0) else {
            panic!("not bytes")
        };
        out
    };
    // As many bytes as the longest target (4), not the config's cap of 8.
    assert_eq!(
        first_bytes(&synthetic::bytes_to_reconstruct(40, 22)).len(),
        4
    );
    assert_eq!(
        first_bytes(&synthetic::bytes_to_translate(40, 24)).len(),
        2,
        "the output's length, not the input's"
    );
    let trees = synthetic::tree_depth(40, 2, 23);
    for model in ["tree_rnn", "tree_kernel_svm"] {
        let run = train(&Candidate::parse(model).unwrap(), &trees, &budget(2)).unwrap();
        let dir =
            std::env::temp_dir().join(format!("easeml-trainer-{model}-{}", std::process::id()));
        run.checkpoint().unwrap().save(&dir).unwrap();
        let checkpoint = Checkpoint::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let predictor = Predictor::new(&checkpoint, Device::Cpu).unwrap();
        let predictions = predictor.predict(&trees.inputs).unwrap();
        assert!(
            matches!(&predictions[0], Prediction::Class { probabilities, .. } if probabilities.len() == 2)
        );
    }
    // Inputs of the wrong shape are an error, not a panic.
    let tabular = synthetic::tabular_sign(20, 4, 24);
    let run = train(&Candidate::parse("logistic").unwrap(), &tabular, &budget(1)).unwrap();
    let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
    let wrong = synthetic::tabular_sign(3, 5, 25);
    assert!(predictor.predict(&wrong.inputs).is_err());
    // So are malformed trees and sequences.
    let run = train(&Candidate::parse("tree_rnn").unwrap(), &trees, &budget(1)).unwrap();
    let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
    let malformed = Inputs::Trees {
        node: 2,
        trees: vec![easeml_trainer::Tree::node(
            vec![0.0, 1.0],
            vec![easeml_trainer::Tree::leaf(vec![0.5])],
        )],
    };
    assert!(predictor.predict(&malformed).is_err());
    let run = train(
        &Candidate::parse("gru").unwrap(),
        &synthetic::sequence_sign(20, 2, 26),
        &budget(1),
    )
    .unwrap();
    let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
    let malformed = Inputs::Sequences(easeml_trainer::data::Sequences {
        step: 2,
        values: vec![0.0; 3],
        offsets: vec![0, 2],
    });
    assert!(predictor.predict(&malformed).is_err());
}

/// The run's curve (train loss, validation quality per epoch) and weights (safetensors bytes).
fn run_fingerprint(
    candidate: &str,
    examples: &Examples,
    budget: &Budget,
) -> (Vec<(f64, f64)>, Vec<u8>) {
    let run = train(&Candidate::parse(candidate).unwrap(), examples, budget).unwrap();
    let RunOutcome::Succeeded { checkpoint, .. } = run.outcome else {
        panic!("{candidate} failed: {:?}", run.outcome);
    };
    let curve = run
        .curve
        .iter()
        .map(|point| (point.train_loss, point.validation_quality))
        .collect();
    (curve, checkpoint.weights)
}

#[test]
fn a_run_is_reproducible_while_other_runs_train_in_the_same_process() {
    // alexnet and mlp_large draw dropout masks every batch. Each run alone, then the same runs
    // on four threads at once (their initializations reseed libtorch's process-wide generator,
    // their batches draw masks): every run must give the same curve and weights, bit for bit
    // (on the CPU; to float rounding on CUDA, below).
    let images = synthetic::quadrant_images(96, [12, 12, 3], 5);
    let table = synthetic::tabular_sign(160, 5, 6);
    let mut budget = budget(3);
    // One partition: whether a network repeats its folds depends on how long its first partition
    // took (`Budget::k_fold_repeats_max_seconds`), which other runs training meanwhile change.
    budget.k_fold_repeats = 1;
    let cases = [
        ("alexnet", &images),
        ("mlp_large", &table),
        ("alexnet", &images),
        ("mlp_large", &table),
    ];
    let alone: Vec<_> = {
        let _serial = serial();
        cases
            .iter()
            .map(|(candidate, examples)| run_fingerprint(candidate, examples, &budget))
            .collect()
    };
    let concurrent: Vec<_> = std::thread::scope(|scope| {
        let runs: Vec<_> = cases
            .iter()
            .map(|(candidate, examples)| {
                let budget = &budget;
                scope.spawn(move || run_fingerprint(candidate, examples, budget))
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    // On CUDA, cuDNN and cuBLAS pick kernels by the workspace free at the time and some backward
    // kernels add with atomics, so a run that shares the GPU with others agrees with its run
    // alone to float rounding, not bit for bit (bit-identical replay is the CPU's promise), and
    // the rounding grows over the epochs (an H100 once drifted 1.7e-4 by the 15th). A dropout
    // mask drawn from another run's generator moves the first epoch's loss already, far more
    // than rounding (1.6e-8 there).
    let exact = !common::test_device().is_cuda();
    for (index, (candidate, _)) in cases.iter().enumerate() {
        let (curve, weights) = &concurrent[index];
        let (curve_alone, weights_alone) = &alone[index];
        if exact {
            assert_eq!(
                curve, curve_alone,
                "{candidate}: the curve changed when other runs trained meanwhile"
            );
            assert!(
                weights == weights_alone,
                "{candidate}: the weights changed when other runs trained meanwhile"
            );
        } else {
            assert_eq!(curve.len(), curve_alone.len(), "{candidate}: epochs differ");
            for (epoch, (&(loss, quality), &(loss_alone, quality_alone))) in
                curve.iter().zip(curve_alone).enumerate()
            {
                let tolerance = if epoch == 0 { 1e-5 } else { 1e-2 };
                assert!(
                    (loss - loss_alone).abs() <= tolerance * loss_alone.abs().max(1.0)
                        // One validation example (of about 20) may flip at a rounding edge.
                        && (quality - quality_alone).abs() <= 0.06,
                    "{candidate}: the curve changed when other runs trained meanwhile (epoch \
                     {}): {curve:?} against {curve_alone:?}",
                    epoch + 1
                );
            }
        }
    }
}

#[test]
fn latency_is_the_median_batch_one_prediction_time_before_and_after_training() {
    let _serial = serial();
    let protocol = easeml_trainer::LatencyProtocol {
        warmups: 1,
        min_repeats: 3,
        max_repeats: 5,
        max_seconds: 0.2,
    };
    let images = synthetic::quadrant_images(12, [16, 16, 3], 31);
    let config = ModelConfig {
        width: 1.0 / 16.0,
        max_bytes: 8,
        input_bytes: 0,
        output_bytes: 0,
        bytes_per_step: 1,
    };
    let probe = |model: &str, examples: &Examples| {
        easeml_trainer::probe_latency(
            &Candidate::parse(model).unwrap(),
            examples,
            config,
            Device::Cpu,
            &protocol,
        )
    };
    // The untrained network is timed; more work per example takes longer.
    let small = probe("small_cnn", &images).unwrap().unwrap();
    assert!(small > 0.0 && small < 1.0, "{small}");
    let large_images = synthetic::quadrant_images(12, [96, 96, 3], 32);
    let large = probe("vgg16", &large_images).unwrap().unwrap();
    assert!(
        large > small,
        "vgg16 on 96x96 {large} <= small_cnn on 16x16 {small}"
    );
    // A classic model is only measured once trained; a candidate that does not fit is an error.
    let tabular = synthetic::tabular_sign(30, 4, 33);
    assert_eq!(probe("knn", &tabular).unwrap(), None);
    let error = probe("small_cnn", &tabular).unwrap_err().to_string();
    assert!(error.contains("small_cnn"), "{error}");
    // A trained model, classic or not, is measured through its predictor.
    for model in ["knn", "mlp_small"] {
        let run = train(&Candidate::parse(model).unwrap(), &tabular, &budget(1)).unwrap();
        let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
        let latency =
            easeml_trainer::measure_latency(&predictor, &tabular.inputs, &protocol).unwrap();
        assert!(latency > 0.0 && latency < 1.0, "{model}: {latency}");
        // Batch 1 predicts the rows asked for, in their order, and nothing else.
        let both = predictor.predict(&tabular.inputs).unwrap();
        let picked = predictor.predict_rows(&tabular.inputs, &[3, 0]).unwrap();
        // (The same up to float rounding: a batch of two sums in another order than one of 30.)
        for (picked, expected) in picked.iter().zip([&both[3], &both[0]]) {
            let (
                Prediction::Class {
                    index,
                    probabilities,
                },
                Prediction::Class {
                    index: expected_index,
                    probabilities: expected_probabilities,
                },
            ) = (picked, expected)
            else {
                panic!("{model}: not a class")
            };
            assert_eq!(index, expected_index, "{model}");
            for (p, q) in probabilities.iter().zip(expected_probabilities) {
                assert!(
                    (p - q).abs() < 1e-5,
                    "{model}: {probabilities:?} vs {expected_probabilities:?}"
                );
            }
        }
        assert_eq!(picked.len(), 2);
        assert!(
            predictor
                .predict_rows(&tabular.inputs, &[])
                .unwrap()
                .is_empty()
        );
        let error = predictor
            .predict_rows(&tabular.inputs, &[30])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("row 30 is out of range: there are 30 inputs"),
            "{error}"
        );
        // Nothing to time is an error, not a division by zero.
        let none = synthetic::tabular_sign(0, 4, 34);
        assert!(easeml_trainer::measure_latency(&predictor, &none.inputs, &protocol).is_err());
    }
}

/// The test binary itself links the trainer: it must carry an rpath to libtorch and, when the install
/// has `libtorch_cuda.so`, list it as NEEDED.
#[test]
fn built_binaries_find_libtorch_and_keep_libtorch_cuda() {
    let _serial = serial();
    let Some(lib_dir) = option_env!("EASEML_LIBTORCH_LIB") else {
        panic!("build.rs did not see torch-sys's lib dir");
    };
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .expect("readelf (binutils) is needed for this test");
    assert!(output.status.success());
    let dynamic = String::from_utf8_lossy(&output.stdout);
    let rpath_line = dynamic
        .lines()
        .find(|line| line.contains("(RUNPATH)") || line.contains("(RPATH)"))
        .unwrap_or_else(|| panic!("no rpath in {}:\n{dynamic}", exe.display()));
    assert!(rpath_line.contains(lib_dir), "{rpath_line} lacks {lib_dir}");
    let needed = |name: &str| {
        dynamic
            .lines()
            .any(|line| line.contains("(NEEDED)") && line.contains(&format!("[{name}]")))
    };
    assert!(needed("libtorch_cpu.so"), "{dynamic}");
    if std::path::Path::new(lib_dir)
        .join("libtorch_cuda.so")
        .exists()
    {
        assert!(
            needed("libtorch_cuda.so"),
            "libtorch_cuda.so is not NEEDED:\n{dynamic}"
        );
    }
}

#[test]
fn a_grid_too_slow_for_the_time_limit_gives_the_first_rate_all_of_it() {
    let _serial = serial();
    let examples = synthetic::quadrant_images(2000, [16, 16, 3], 18);
    let mut budget = budget(20);
    budget.learning_rates = vec![0.001, 0.01, 0.1];
    // Far less than three epochs per rate: the first epoch shows the grid cannot fit.
    budget.max_seconds = 0.05;
    let run = train(&Candidate::parse("resnet18").unwrap(), &examples, &budget).unwrap();
    let rates: Vec<f64> = run.trials.iter().map(|trial| trial.learning_rate).collect();
    assert_eq!(rates, vec![0.001, 0.01, 0.1], "every rate is recorded");
    assert!(run.trials[0].epochs >= 1 && run.trials[0].best_quality.is_some());
    for skipped in &run.trials[1..] {
        assert_eq!(skipped.epochs, 0);
        let reason = skipped.failure.as_deref().unwrap();
        assert!(reason.starts_with("not tried: an epoch took"), "{reason}");
    }
    assert_eq!(run.quality(), run.trials[0].best_quality);
}

#[test]
fn small_data_is_cross_validated_by_stratified_folds_and_refit() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(60, 4, 27);
    let mut budget = budget(6);
    budget.learning_rates = vec![0.01, 0.1];
    // One partition (the repeats of a cheap network: the next test).
    budget.k_fold_repeats = 1;
    let candidate = Candidate::parse("mlp_small").unwrap();
    let run = train(&candidate, &examples, &budget).unwrap();
    assert_eq!(
        run.validation,
        Validation::KFold {
            folds: 5,
            stratified: true,
            repeats: 1,
        }
    );
    assert_eq!(run.validation.describe(), "5-fold stratified");
    assert_eq!(
        (run.protocol(), run.folds_trained),
        ("5-fold stratified".into(), None)
    );
    assert_eq!((run.n_train, run.n_validation), (60, 60));
    // One training per rate and fold, in order.
    let trainings: Vec<(f64, Option<usize>)> = run
        .trials
        .iter()
        .map(|trial| (trial.learning_rate, trial.fold))
        .collect();
    let expected: Vec<(f64, Option<usize>)> = [0.01, 0.1]
        .into_iter()
        .flat_map(|rate| (0..5).map(move |fold| (rate, Some(fold))))
        .collect();
    assert_eq!(trainings, expected);
    // The quality is the mean of the chosen rate's folds at its one scored epoch, its spread
    // their sample deviation; the other rate's best epoch had the lower mean.
    let refit = run.refit.as_ref().expect("a k-fold run records its refit");
    let (epoch, qualities) = scored_at_one_epoch(&run, refit.learning_rate);
    let mean = qualities.iter().sum::<f64>() / 5.0;
    let std = (qualities.iter().map(|q| (q - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
    assert!((run.quality().unwrap() - mean).abs() < 1e-12);
    assert!((run.quality_std.unwrap() - std).abs() < 1e-12);
    let other = if refit.learning_rate == 0.01 {
        0.1
    } else {
        0.01
    };
    let (_, others) = scored_at_one_epoch(&run, other);
    let other_mean = others.iter().sum::<f64>() / 5.0;
    assert!(mean >= other_mean, "{mean} < {other_mean}");
    // Never above the mean of the folds' own best epochs (the lucky number it replaces).
    let fold_bests = run
        .trials
        .iter()
        .filter(|trial| trial.learning_rate == refit.learning_rate)
        .map(|trial| trial.best_quality.unwrap())
        .sum::<f64>()
        / 5.0;
    assert!(mean <= fold_bests + 1e-12, "{mean} > {fold_bests}");
    // The refit: that epoch's count, trained in full (the limit is 600 s), and it is the
    // checkpoint.
    assert_eq!(refit.planned_epochs, epoch);
    assert_eq!(refit.fallback, None);
    assert_eq!(refit.epochs, refit.planned_epochs);
    let checkpoint = run.checkpoint().unwrap();
    assert_eq!(checkpoint.meta.learning_rate, refit.learning_rate);
    assert_eq!(checkpoint.meta.seed, refit.seed);
    // Deterministic: the same data and budget give the same run.
    let again = train(&candidate, &examples, &budget).unwrap();
    assert_eq!(again.trials, run.trials);
    assert_eq!(again.refit, run.refit);
    // Regression folds are by id alone.
    let regression = synthetic::tabular_linear(30, 3, 28);
    let run = train(&Candidate::parse("linear").unwrap(), &regression, &budget).unwrap();
    assert_eq!(run.validation.describe(), "5-fold");
    assert!(run.quality_std.is_some());
}

/// `Inputs::is_table` (what `Validation::choose` reads) and `Task::is_tabular` (what `Task::of`
/// makes of the examples) are one definition of a table, on every kind of examples.
#[test]
fn a_table_is_what_the_tabular_tasks_take() {
    use easeml_trainer::task::Task;
    for examples in [
        synthetic::tabular_sign(20, 4, 1),
        synthetic::tabular_linear(20, 3, 1),
        synthetic::quadrant_images(20, [4, 4, 1], 1),
        synthetic::recovery_images(20, [4, 4, 1], 1),
        synthetic::sequence_sign(20, 2, 1),
        synthetic::sequence_running_mean(20, 2, 1),
        synthetic::tree_depth(20, 3, 1),
        synthetic::bytes_letters_or_digits(20, 1),
        synthetic::bytes_to_reconstruct(20, 1),
    ] {
        let task = Task::of(&examples).unwrap();
        assert_eq!(
            task.is_tabular(),
            examples.inputs.is_table(),
            "{}",
            task.name()
        );
    }
}

/// The protocol depends on the examples alone: a table (one row of features per example) is
/// cross-validated below `K_FOLD_BELOW_TABLES` rows, images, series and the rest below
/// `K_FOLD_BELOW` examples; at and above, the split. Stratified for classes only.
#[test]
fn tables_are_cross_validated_below_a_thousand_rows_other_inputs_below_two_hundred() {
    use easeml_trainer::train::{K_FOLD_BELOW, K_FOLD_BELOW_TABLES};
    let budget = Budget::new(Device::Cpu);
    assert_eq!((K_FOLD_BELOW, K_FOLD_BELOW_TABLES), (200, 1000));
    let split = Validation::Split { fraction: 0.2 };
    let k_fold = |stratified| Validation::KFold {
        folds: 5,
        stratified,
        repeats: 1,
    };
    let choose = |examples: &Examples| Validation::choose(examples, &budget);
    assert!(synthetic::tabular_sign(300, 4, 1).inputs.is_table());
    assert_eq!(choose(&synthetic::tabular_sign(300, 4, 1)), k_fold(true));
    assert_eq!(choose(&synthetic::tabular_linear(999, 4, 1)), k_fold(false));
    assert_eq!(choose(&synthetic::tabular_sign(1000, 4, 1)), split);
    for other in [
        synthetic::quadrant_images(300, [4, 4, 1], 1),
        synthetic::sequence_sign(300, 2, 1),
    ] {
        assert!(!other.inputs.is_table());
        assert_eq!(choose(&other), split);
    }
    assert_eq!(
        choose(&synthetic::quadrant_images(199, [4, 4, 1], 1)),
        k_fold(true)
    );
    // 0 never cross-validates.
    let mut never = budget.clone();
    never.k_fold_below_tables = 0;
    assert_eq!(
        Validation::choose(&synthetic::tabular_sign(300, 4, 1), &never),
        split
    );
}

/// The run's validation is 5-fold stratified cross-validation repeated `repeats` times, and
/// its protocol says so.
fn assert_repeated_protocol(run: &TrainedRun, repeats: usize) {
    assert_eq!(
        run.validation,
        Validation::KFold {
            folds: 5,
            stratified: true,
            repeats,
        }
    );
    assert_eq!(run.protocol(), format!("5-fold stratified x{repeats}"));
}

/// A classic model's k-fold runs `k_fold_repeats` times over other partitions: its quality and
/// spread are over every fold of every repeat, its confusion counts the first repeat (every
/// example once), its out-of-fold answers are each example's mean over the repeats, and the
/// protocol says so. A network's k-fold on the same data runs once.
#[test]
fn small_data_repeats_a_classic_models_folds() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(60, 4, 31);
    let budget = budget(6);
    assert_eq!(budget.k_fold_repeats, easeml_trainer::K_FOLD_REPEATS);
    let candidate = Candidate::parse("knn").unwrap();
    let run = train(&candidate, &examples, &budget).unwrap();
    let repeats = easeml_trainer::K_FOLD_REPEATS;
    assert!(repeats > 1);
    assert_repeated_protocol(&run, repeats);
    assert_eq!(
        run.validation.sets(&examples).len(),
        5 * repeats,
        "one set per fold per repeat"
    );
    // Per setting, one record per fold of every repeat, numbered on.
    let chosen = run.checkpoint().unwrap().meta.learning_rate;
    let folds: Vec<usize> = run
        .trials
        .iter()
        .filter(|trial| trial.learning_rate == chosen)
        .map(|trial| trial.fold.unwrap())
        .collect();
    assert_eq!(folds, (0..5 * repeats).collect::<Vec<_>>());
    let qualities: Vec<f64> = run
        .trials
        .iter()
        .filter(|trial| trial.learning_rate == chosen)
        .map(|trial| trial.best_quality.unwrap())
        .collect();
    let mean = qualities.iter().sum::<f64>() / qualities.len() as f64;
    assert!((run.quality().unwrap() - mean).abs() < 1e-12);
    assert!(run.quality_std.is_some());
    // Every example once in the confusion and in the out-of-fold answers.
    let counted: u64 = run
        .confusion
        .as_ref()
        .unwrap()
        .cells()
        .map(|(_, _, count)| count)
        .sum();
    assert_eq!(counted, 60);
    let oof = run.oof.as_ref().unwrap();
    let mut rows = oof.rows.clone();
    rows.sort_unstable();
    assert_eq!(rows, (0..60).collect::<Vec<_>>());
    for index in 0..oof.rows.len() {
        let sum: f32 = oof.row(index).iter().sum();
        assert!(
            (sum - 1.0).abs() < 1e-4,
            "probabilities: {:?}",
            oof.row(index)
        );
    }
    // Once, as before: the same run's first partition and the trials of one repeat.
    let mut once = budget.clone();
    once.k_fold_repeats = 1;
    let single = train(&candidate, &examples, &once).unwrap();
    assert_eq!(single.protocol(), "5-fold stratified");
    assert_eq!(
        single.trials.len() * repeats,
        run.trials.len(),
        "{:?}",
        single.trials
    );
    // Repeats predicted to cost more than the bound (here any time at all) are cut after the
    // first setting's first repeat: the run keeps one, says so, and scores what it ran.
    let mut bounded = budget.clone();
    bounded.k_fold_repeats_max_seconds = 0.0;
    let cut = train(&candidate, &examples, &bounded).unwrap();
    assert_eq!(cut.protocol(), "5-fold stratified");
    assert_eq!(cut.validation.repeats(), 1);
    assert_eq!(cut.trials.len(), single.trials.len(), "{:?}", cut.trials);
    assert!(cut.trials.iter().all(|trial| trial.fold.unwrap() < 5));
    assert_eq!(
        cut.quality(),
        single.quality(),
        "the first repeat is the one run"
    );
    // A network's protocol starts with one partition (its chosen rate may repeat after the
    // grid: the next test).
    let network =
        Validation::for_candidate(&Candidate::parse("mlp_small").unwrap(), &examples, &budget);
    assert_eq!(network.repeats(), 1);
    // The cost estimate counts the repeats' fits.
    let repeated_cost = estimate_cost(&candidate, &examples, &budget).unwrap();
    let single_cost = estimate_cost(&candidate, &examples, &once).unwrap();
    assert!(repeated_cost.total_flops > single_cost.total_flops);
}

/// A k-fold rate's one scored epoch and each of its folds' quality there, recomputed from the
/// run's curve (each trial's evaluated epochs in order): the epoch whose mean over the rate's
/// folds is highest (the earliest of equals), a fold that stopped before it counting its last.
fn scored_at_one_epoch(run: &TrainedRun, rate: f64) -> (usize, Vec<f64>) {
    let mut points = run.curve.iter();
    let mut folds: Vec<Vec<f64>> = Vec::new();
    for trial in &run.trials {
        let curve: Vec<f64> = points
            .by_ref()
            .take(trial.epochs)
            .map(|point| point.validation_quality)
            .collect();
        if trial.learning_rate == rate && trial.best_quality.is_some() {
            folds.push(curve);
        }
    }
    assert!(
        points.next().is_none(),
        "one curve point per evaluated epoch"
    );
    let at = |fold: &Vec<f64>, epoch: usize| fold[epoch.min(fold.len() - 1)];
    let longest = folds.iter().map(Vec::len).max().unwrap();
    let mut chosen = (0, f64::NEG_INFINITY);
    for epoch in 0..longest {
        let mean = folds.iter().map(|fold| at(fold, epoch)).sum::<f64>() / folds.len() as f64;
        if mean > chosen.1 {
            chosen = (epoch, mean);
        }
    }
    let qualities = folds.iter().map(|fold| at(fold, chosen.0)).collect();
    (chosen.0 + 1, qualities)
}

/// A cheap network's k-fold repeats its chosen rate over the other partitions (`train_k_fold`'s
/// repeats): the grid's rates train the first partition's folds, the chosen one the others'
/// (numbered on); its quality and spread are over every fold at one epoch chosen over all of
/// them, its answers each example's mean, its refit's epochs that epoch, and the protocol says
/// `x3`. Under a bound of
/// nothing the run is the unrepeated one, trial for trial.
#[test]
fn a_cheap_network_repeats_its_chosen_rate_over_other_partitions() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(60, 4, 27);
    let mut budget = budget(6);
    budget.learning_rates = vec![0.01, 0.1];
    let repeats = easeml_trainer::K_FOLD_REPEATS;
    assert_eq!(budget.k_fold_repeats, repeats);
    let candidate = Candidate::parse("mlp_small").unwrap();
    let run = train(&candidate, &examples, &budget).unwrap();
    assert_repeated_protocol(&run, repeats);
    let refit = run.refit.clone().expect("a refit");
    assert_eq!(refit.fallback, None, "{refit:?}");
    // The grid on the first partition, then the chosen rate's other partitions.
    let trainings: Vec<(f64, Option<usize>)> = run
        .trials
        .iter()
        .map(|trial| (trial.learning_rate, trial.fold))
        .collect();
    let mut expected: Vec<(f64, Option<usize>)> = [0.01, 0.1]
        .into_iter()
        .flat_map(|rate| (0..5).map(move |fold| (rate, Some(fold))))
        .collect();
    expected.extend((5..5 * repeats).map(|fold| (refit.learning_rate, Some(fold))));
    assert_eq!(trainings, expected);
    // Every fold of every partition scored at one epoch, chosen over all of them.
    let (epoch, qualities) = scored_at_one_epoch(&run, refit.learning_rate);
    assert_eq!(qualities.len(), 5 * repeats);
    let mean = qualities.iter().sum::<f64>() / qualities.len() as f64;
    assert!((run.quality().unwrap() - mean).abs() < 1e-12);
    let n = qualities.len() as f64;
    let std = (qualities.iter().map(|q| (q - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    assert!((run.quality_std.unwrap() - std).abs() < 1e-12);
    assert_eq!(refit.planned_epochs, epoch);
    // Every example once in the answers (its mean over the partitions) and in the confusion
    // (the first partition's).
    let oof = run.oof.as_ref().expect("out-of-fold answers");
    let mut rows = oof.rows.clone();
    rows.sort_unstable();
    assert_eq!(rows, (0..60).collect::<Vec<_>>());
    let counted: u64 = run
        .confusion
        .as_ref()
        .unwrap()
        .cells()
        .map(|(_, _, count)| count)
        .sum();
    assert_eq!(counted, 60);
    // Deterministic.
    let again = train(&candidate, &examples, &budget).unwrap();
    assert_eq!(again.trials, run.trials);
    // A bound of nothing: the first partition only, the unrepeated run trial for trial.
    let mut bounded = budget.clone();
    bounded.k_fold_repeats_max_seconds = 0.0;
    let cut = train(&candidate, &examples, &bounded).unwrap();
    let mut once = budget.clone();
    once.k_fold_repeats = 1;
    let single = train(&candidate, &examples, &once).unwrap();
    assert_eq!(cut.protocol(), "5-fold stratified");
    assert_eq!(cut.trials, single.trials);
    assert_eq!(cut.trials[..], run.trials[..10]);
    assert_eq!(cut.quality(), single.quality());
    // The cost estimate counts the repeats it predicts.
    let repeated_cost = estimate_cost(&candidate, &examples, &budget).unwrap();
    let bounded_cost = estimate_cost(&candidate, &examples, &bounded).unwrap();
    assert!(repeated_cost.total_flops > bounded_cost.total_flops);
}

#[test]
fn a_perfect_score_on_a_small_fold_does_not_stop_its_epochs() {
    let _serial = serial();
    // Twenty easy examples: folds of four, which an MLP gets right early.
    let examples = synthetic::tabular_sign(20, 2, 29);
    let mut budget = budget(12);
    budget.learning_rates = vec![0.1];
    let run = train(&Candidate::parse("mlp_small").unwrap(), &examples, &budget).unwrap();
    assert_eq!(run.trials.len(), 5 * run.validation.repeats());
    for trial in &run.trials {
        let best_epoch = trial.best_epoch.unwrap();
        // Patience (3 epochs without a gain) or the epoch limit ends a fold, never a 1.0.
        assert!(
            trial.epochs == budget.max_epochs || trial.epochs >= best_epoch + budget.patience,
            "{trial:?}"
        );
    }
}

/// The fold cut (`train_k_fold`): a fold trains at least one epoch, so under a limit shorter than
/// an epoch the folds after the first are not started (they would overrun the limit k times over),
/// the rates after it are not tried, and the first fold's model is served with its quality.
#[test]
fn the_time_limit_cuts_the_folds_it_has_no_room_for() {
    let _serial = serial();
    let examples = synthetic::quadrant_images(150, [16, 16, 3], 30);
    let mut budget = budget(20);
    budget.learning_rates = vec![0.001, 0.01, 0.1];
    // A millisecond: shorter than any epoch of a ResNet-18 over 120 images, on any machine.
    budget.max_seconds = 0.001;
    let run = train(&Candidate::parse("resnet18").unwrap(), &examples, &budget).unwrap();
    assert!(matches!(run.validation, Validation::KFold { folds: 5, .. }));
    let first = &run.trials[0];
    assert_eq!((first.learning_rate, first.fold), (0.001, Some(0)));
    assert!(
        first.epochs >= 1 && first.best_quality.is_some(),
        "{first:?}"
    );
    assert_eq!(run.trials.len(), 3, "{:?}", run.trials);
    for skipped in &run.trials[1..] {
        assert_eq!((skipped.epochs, skipped.fold), (0, None));
        let reason = skipped.failure.as_deref().unwrap();
        assert!(reason.starts_with("not tried: an epoch took"), "{reason}");
    }
    // One fold's quality, validated on that fold's examples, with no spread of its own.
    assert_eq!(run.folds_trained, Some(1));
    assert_eq!(run.protocol(), "5-fold stratified, 1 fold trained");
    assert_eq!(run.quality(), first.best_quality);
    assert_eq!(run.quality_std, None);
    let fold_size = Validation::KFold {
        folds: 5,
        stratified: true,
        repeats: 1,
    }
    .sets(&examples)[0]
        .1
        .len();
    assert_eq!(run.n_validation, fold_size);
    // No time for the refit: the fold model is served, and the record says why.
    let refit = run.refit.as_ref().unwrap();
    assert!(refit.fallback.is_some(), "{refit:?}");
    assert!(run.checkpoint().is_some());
}

/// The race (`easeml_trainer::race`): a network's k-fold on a classification task stops a rate's
/// folds once even their upper bound is below `Budget::race_floor`; the run keeps the folds it
/// trained, says so, and serves the best fold model without a refit. No floor, a floor no run can
/// fall below, and a regression task leave every fold trained.
#[test]
fn a_network_k_fold_stops_the_folds_that_cannot_reach_the_race_floor() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(20, 2, 29);
    let mut budget = budget(4);
    budget.learning_rates = vec![0.01, 0.1];
    budget.k_fold_repeats = 1;
    let candidate = Candidate::parse("mlp_small").unwrap();
    let free = train(&candidate, &examples, &budget).unwrap();
    assert_eq!(free.trials.len(), 10);
    assert!(!free.raced);
    // A floor above any accuracy's upper bound: each rate stops after its first fold (4 answers,
    // a margin of 0.68), and the later rate still runs.
    budget.race_floor = Some(5.0);
    let raced = train(&candidate, &examples, &budget).unwrap();
    let folds: Vec<_> = raced
        .trials
        .iter()
        .map(|trial| (trial.learning_rate, trial.fold))
        .collect();
    assert_eq!(folds, vec![(0.01, Some(0)), (0.1, Some(0))]);
    assert!(raced.raced);
    assert_eq!(raced.folds_trained, Some(1));
    assert_eq!(raced.protocol(), "5-fold stratified, 1 fold trained, raced");
    let best_fold = raced
        .trials
        .iter()
        .filter_map(|trial| trial.best_quality)
        .fold(f64::MIN, f64::max);
    assert_eq!(raced.quality(), Some(best_fold));
    let refit = raced.refit.as_ref().unwrap();
    assert_eq!(refit.epochs, 0);
    let fallback = refit.fallback.as_deref().unwrap();
    assert!(
        fallback.starts_with("no refit: its folds stopped after 1 of 5"),
        "{fallback}"
    );
    assert!(raced.checkpoint().is_some());
    // The same folds, rate for rate, as without the race.
    assert_eq!(raced.trials[0], free.trials[0]);
    // A floor nothing falls below: the run as without one.
    budget.race_floor = Some(-1.0);
    let unraced = train(&candidate, &examples, &budget).unwrap();
    assert_eq!(unraced.trials, free.trials);
    assert_eq!(
        (unraced.raced, unraced.protocol()),
        (false, free.protocol())
    );
    // R^2 is no mean of bounded scores: a regression is never raced.
    budget.race_floor = Some(5.0);
    let regression = synthetic::tabular_linear(30, 3, 28);
    let run = train(
        &Candidate::parse("mlp_small").unwrap(),
        &regression,
        &budget,
    )
    .unwrap();
    assert!(!run.raced);
    assert_eq!(run.trials.len(), 10);
}

/// `min_steps` raises the epochs and the patience on small data only, and never lowers them.
#[test]
fn min_steps_raise_epochs_and_patience_on_small_data_only() {
    let mut budget = Budget::new(tch::Device::Cpu);
    assert_eq!(budget.scaled_to(40), budget, "no floor by default");
    budget.min_steps = 400;
    // 40 rows in batches of 32: two steps an epoch.
    let small = budget.scaled_to(40);
    assert_eq!((small.max_epochs, small.patience), (200, 20));
    // 1,000 rows: 32 steps an epoch, so the defaults already give 640 steps and a patience of 96.
    let large = budget.scaled_to(1_000);
    assert_eq!((large.max_epochs, large.patience), (20, 3));
    // No rows at all still gives a finite budget.
    let empty = budget.scaled_to(0);
    assert_eq!((empty.max_epochs, empty.patience), (400, 40));
}

/// A model that is not a network is refit on every example under the split too (when one more fit
/// fits in the time left): k-NN then keeps all 250 rows, not the 200 of the training part.
#[test]
fn a_classic_model_under_the_split_is_refit_on_every_example() {
    let examples = synthetic::tabular_sign(250, 4, 21);
    let mut budget = budget(1);
    budget.k_fold_below_tables = budget.k_fold_below;
    let run = train(&Candidate::parse("knn").unwrap(), &examples, &budget).unwrap();
    assert_eq!(run.validation, Validation::Split { fraction: 0.2 });
    let refit = run.refit.as_ref().expect("the split's refit is recorded");
    assert_eq!(refit.fallback, None);
    let state = run.checkpoint().unwrap().meta.extra.as_ref().unwrap();
    let points = easeml_trainer::classic::packed::unpack(state["points"].as_str().unwrap());
    assert_eq!(points.unwrap().len(), 250 * 4);
}

#[test]
fn trimtuner_searches_settings_and_data_shares_then_trains_the_incumbent_on_all_data() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(600, 4, 41);
    let mut budget = budget(40);
    budget.tuning = easeml_trainer::Tuning::TrimTuner;
    // TrimTuner tunes runs under the split: 600 rows of a table would be cross-validated.
    budget.k_fold_below_tables = budget.k_fold_below;
    // Enough for the initial design's four trials and a full-data one in a debug build on a
    // loaded machine (the search takes 60% of it).
    budget.max_seconds = 8.0;
    let run = train(&Candidate::parse("mlp_small").unwrap(), &examples, &budget).unwrap();
    let quality = run.quality().expect("a model");
    assert!(quality > 0.8, "{quality}: {:#?}", run.trials);
    assert!(matches!(run.validation, Validation::Split { .. }));
    // The time limit holds (a margin for a debug build on a loaded machine).
    assert!(
        run.cost_seconds < budget.max_seconds + 2.0,
        "{}",
        run.cost_seconds
    );
    let tuned: Vec<_> = run
        .trials
        .iter()
        .map(|trial| trial.tuned.clone().expect("every trial is a tuner trial"))
        .collect();
    // The initial design: one configuration at every share below 1, smallest first.
    assert!(tuned.len() >= 4, "{tuned:#?}");
    for (trial, fraction) in tuned.iter().zip(&easeml_trainer::tune::DATA_FRACTIONS[..4]) {
        assert_eq!(trial.data_fraction, *fraction);
    }
    assert_eq!(
        (
            tuned[0].batch_size,
            tuned[0].max_epochs,
            run.trials[0].learning_rate
        ),
        (
            tuned[3].batch_size,
            tuned[3].max_epochs,
            run.trials[3].learning_rate
        )
    );
    let n_train = 600 - run.n_validation;
    for trial in &tuned {
        assert!(easeml_trainer::tune::DATA_FRACTIONS.contains(&trial.data_fraction));
        assert_eq!(
            trial.train_rows,
            easeml_trainer::tune::rows_at(trial.data_fraction, n_train)
        );
        assert!(trial.cost_seconds > 0.0 && trial.cost_seconds < budget.max_seconds);
    }
    assert!(tuned.iter().filter(|trial| trial.final_training).count() <= 1);
    if let Some(last) = tuned.iter().position(|trial| trial.final_training) {
        assert_eq!(last, tuned.len() - 1);
        assert_eq!(tuned[last].data_fraction, 1.0);
    }
    // The served model is a full-data model whose quality a trial measured.
    assert!(tuned.len() <= easeml_trainer::tune::MAX_TRIALS + 1);
    assert!(
        run.trials.iter().zip(&tuned).any(|(trial, tuned)| {
            tuned.data_fraction == 1.0 && trial.best_quality == Some(quality)
        }),
        "{:#?}",
        run.trials
    );
    let predictor = Predictor::new(run.checkpoint().unwrap(), Device::Cpu).unwrap();
    assert_eq!(predictor.predict(&examples.inputs).unwrap().len(), 600);
    // Under k-fold (small data) and for classic models the grid stays.
    let small = synthetic::tabular_sign(60, 4, 42);
    let run = train(&Candidate::parse("mlp_small").unwrap(), &small, &budget).unwrap();
    assert!(run.trials.iter().all(|trial| trial.tuned.is_none()));
    let run = train(&Candidate::parse("knn").unwrap(), &examples, &budget).unwrap();
    assert!(run.trials.iter().all(|trial| trial.tuned.is_none()));
}

/// A regression network's checkpoint from before the output scale (no `output_scale.*`
/// tensors) still loads, as the identity it was trained with: its answers are the network's raw
/// outputs, which the scaled checkpoint maps by the targets' mean and deviation.
#[test]
fn regression_checkpoints_from_before_the_output_scale_still_load() {
    let _serial = serial();
    let mut examples = synthetic::tabular_linear(80, 3, 5);
    if let Targets::Dense { values, .. } = &mut examples.targets {
        for value in values.iter_mut() {
            *value = 50.0 + 10.0 * *value;
        }
    }
    let mut budget = budget(3);
    budget.learning_rates = vec![0.01];
    let run = train(&Candidate::parse("linear").unwrap(), &examples, &budget).unwrap();
    let checkpoint = run.checkpoint().expect("a trained linear model").clone();
    let path = std::env::temp_dir().join(format!(
        "easeml-output-scale-{}.safetensors",
        std::process::id()
    ));
    std::fs::write(&path, &checkpoint.weights).unwrap();
    let named = tch::Tensor::read_safetensors(&path).unwrap();
    let (scale, rest): (Vec<_>, Vec<_>) = named
        .into_iter()
        .partition(|(name, _)| name.starts_with("output_scale."));
    let value = |name: &str| {
        let (_, tensor) = scale.iter().find(|(n, _)| n == name).unwrap();
        tensor.double_value(&[0])
    };
    let (mean, std) = (value("output_scale.mean"), value("output_scale.std"));
    assert!((40.0..60.0).contains(&mean) && std > 1.0, "{mean} {std}");
    let rest: Vec<(&str, tch::Tensor)> = rest
        .iter()
        .map(|(name, tensor)| (name.as_str(), tensor.shallow_clone()))
        .collect();
    tch::Tensor::write_safetensors(&rest, &path).unwrap();
    let old = Checkpoint {
        meta: checkpoint.meta.clone(),
        weights: std::fs::read(&path).unwrap(),
    };
    let _ = std::fs::remove_file(&path);
    let answers = |checkpoint: &Checkpoint| -> Vec<f64> {
        Predictor::new(checkpoint, Device::Cpu)
            .unwrap()
            .predict(&examples.inputs)
            .unwrap()
            .into_iter()
            .map(|prediction| match prediction {
                Prediction::Values { values, .. } => f64::from(values[0]),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    for (scaled, raw) in answers(&checkpoint).into_iter().zip(answers(&old)) {
        assert!((scaled - (raw * std + mean)).abs() < 1e-3 * scaled.abs().max(1.0));
    }
}
