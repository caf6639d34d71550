//! The explicit-state Adam (`optim.rs`) and the training state that hops between workers
//! (`hop.rs`): agreement with `tch::nn::Adam`, a hop equal to sequential training bit for bit,
//! errors on malformed bytes, and (ignored; run by hand) the speed against `nn::Adam`.
//!
//! Every test runs libtorch on one CPU thread (`tch::set_num_threads(1)`): multi-threaded
//! reductions may sum in a different order from run to run, and the hop test asserts bit equality.
//! libtorch's generator is process-wide, so the tests take turns ([`serial`]).

use std::time::Instant;

use easeml_trainer::hop::{SubEpoch, TrainingState, begin_sub_epoch, sub_epoch_seed};
use easeml_trainer::models::{self, BatchInput, Model, ModelConfig};
use easeml_trainer::optim::Adam;
use easeml_trainer::{Candidate, Examples, Inputs, Targets, Task, synthetic};
use tch::nn::OptimizerConfig;
use tch::{Device, Kind, Tensor, nn};

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    tch::set_num_threads(1);
    guard
}

/// The examples as one input tensor `[N, dims...]` and one label tensor `[N]`.
fn dense(examples: &Examples) -> (Tensor, Tensor) {
    let (Inputs::Dense { shape, values }, Targets::Classes { labels, .. }) =
        (&examples.inputs, &examples.targets)
    else {
        panic!("dense classification examples expected");
    };
    let mut size = vec![examples.len() as i64];
    size.extend_from_slice(shape);
    (
        Tensor::from_slice(values).view(size.as_slice()),
        Tensor::from_slice(labels),
    )
}

/// A model of `candidate` for `examples`, initialized from `seed`.
fn build(candidate: &str, examples: &Examples, seed: i64, width: f64) -> (nn::VarStore, Model) {
    let store = nn::VarStore::new(Device::Cpu);
    tch::manual_seed(seed);
    let config = ModelConfig {
        width,
        max_bytes: 8,
        input_bytes: 0,
        output_bytes: 0,
        bytes_per_step: 1,
    };
    let task = Task::of(examples).unwrap();
    let model = models::build(
        &store.root(),
        &Candidate::parse(candidate).unwrap(),
        &task,
        &config,
    )
    .unwrap();
    (store, model)
}

fn batch_loss(model: &Model, inputs: &Tensor, labels: &Tensor, rows: &Tensor) -> Tensor {
    let xs = inputs.index_select(0, rows);
    let ys = labels.index_select(0, rows);
    model
        .forward(&BatchInput::Dense(xs), true)
        .cross_entropy_for_logits(&ys)
}

/// The largest difference between the two stores' variables, each relative to the variable's
/// largest magnitude (at least 1e-3): a weight that a step brought near zero has no relative
/// precision left, so elementwise relative differences would measure cancellation.
fn max_relative_difference(a: &nn::VarStore, b: &nn::VarStore) -> f64 {
    let b_variables = b.variables();
    a.variables()
        .iter()
        .map(|(name, x)| {
            let y = &b_variables[name];
            let scale = x.abs().max().double_value(&[]).max(1e-3);
            (x - y).abs().max().double_value(&[]) / scale
        })
        .fold(0.0, f64::max)
}

#[test]
fn adam_matches_tch_adam() {
    let _serial = serial();
    let cases = [
        ("mlp_small", synthetic::tabular_sign(64, 6, 1)),
        ("small_cnn", synthetic::quadrant_images(64, [8, 8, 1], 2)),
    ];
    for (candidate, examples) in cases {
        let (inputs, labels) = dense(&examples);
        let (reference_store, reference_model) = build(candidate, &examples, 7, 0.25);
        let (store, model) = build(candidate, &examples, 7, 0.25);
        assert_eq!(max_relative_difference(&reference_store, &store), 0.0);
        let mut reference = nn::Adam::default().build(&reference_store, 0.01).unwrap();
        let mut adam = Adam::with_defaults(&store, 0.01).unwrap();
        // One update differs by float rounding only (`optim::Adam` is libtorch's fused kernel,
        // `nn::Adam` its per-variable C++ optimizer); training amplifies it slowly: the tolerance
        // is 1e-6 (relative, `max_relative_difference`) after one step, 1e-5 after 10 and 40
        // (measured with the fused kernel: at most 9.7e-8, 2.5e-6 and 2.5e-6).
        let steps = 40;
        for step in 1..=steps {
            let start = ((step - 1) % 4) * 16;
            let rows = Tensor::arange_start(start, start + 16, (Kind::Int64, Device::Cpu));
            reference.backward_step(&batch_loss(&reference_model, &inputs, &labels, &rows));
            adam.backward_step(&batch_loss(&model, &inputs, &labels, &rows))
                .unwrap();
            let tolerance = match step {
                1 => 1e-6,
                10 => 1e-5,
                40 => 1e-5,
                _ => continue,
            };
            let difference = max_relative_difference(&reference_store, &store);
            println!("{candidate}: max relative difference after {step} steps {difference:e}");
            assert!(
                difference < tolerance,
                "{candidate}: the weights differ by {difference} (relative) after {step} steps"
            );
        }
        assert!(adam.header().steps.values().all(|&count| count == steps));
        // `zero_grad` sets the gradients to none, as libtorch's does.
        assert!(
            store
                .trainable_variables()
                .iter()
                .all(|t| t.grad().defined())
        );
        adam.zero_grad().unwrap();
        assert!(
            store
                .trainable_variables()
                .iter()
                .all(|t| !t.grad().defined())
        );
    }
}

/// The partitions' order in `epoch`: by a hash of the seed, the epoch and the partition.
fn partition_order(seed: u64, epoch: u64, partitions: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..partitions).collect();
    order.sort_by_key(|&partition| sub_epoch_seed(seed ^ 0x5eed, epoch, partition));
    order
}

/// One sub-epoch: the partition's rows (every third row) in an order drawn from the sub-epoch's
/// seed, batches of 8, dropout from the same generator.
fn sub_epoch(
    model: &Model,
    adam: &mut Adam,
    inputs: &Tensor,
    labels: &Tensor,
    seed: u64,
    at: SubEpoch,
) {
    let (sub_seed, _randomness) =
        begin_sub_epoch(seed, at.epoch, at.partition, Device::Cpu).unwrap();
    // The batch order from libtorch's generator seeded with the sub-epoch's seed (the dropout
    // masks come from the sub-epoch's own generator).
    tch::manual_seed(sub_seed as i64);
    let rows = Tensor::arange_start(
        at.partition as i64,
        inputs.size()[0],
        (Kind::Int64, Device::Cpu),
    )
    .slice(0, 0, None, 1);
    let rows = rows.masked_select(&rows.remainder(3).eq(at.partition as i64));
    let order = rows.index_select(
        0,
        &Tensor::randperm(rows.size()[0], (Kind::Int64, Device::Cpu)),
    );
    for batch in order.split(8, 0) {
        adam.backward_step(&batch_loss(model, inputs, labels, &batch))
            .unwrap();
    }
}

#[test]
fn a_hop_equals_sequential_training() {
    let _serial = serial();
    // bn_alexnet: batch norms (running statistics: non-trainable variables) and dropout (the
    // generator); small_cnn: warm batch norms (their batch count is a variable too).
    for candidate in ["bn_alexnet", "small_cnn"] {
        hop_equals_sequential(candidate);
    }
}

fn hop_equals_sequential(candidate: &str) {
    let examples = synthetic::quadrant_images(72, [8, 8, 1], 3);
    let (inputs, labels) = dense(&examples);
    let seed = 42;
    let width = 1.0 / 16.0;
    let (store, model) = build(candidate, &examples, 5, width);
    let mut adam = Adam::with_defaults(&store, 0.01).unwrap();
    let initial = TrainingState::capture(&store, &adam, seed, None)
        .unwrap()
        .to_bytes()
        .unwrap();
    let mut visits = Vec::new();
    for epoch in 0..2 {
        for partition in partition_order(seed, epoch, 3) {
            visits.push(SubEpoch { epoch, partition });
        }
    }
    assert_ne!(
        visits[0..3],
        visits[3..6],
        "the seed should reorder the epochs"
    );

    // Sequentially, in one process.
    for &at in &visits {
        sub_epoch(&model, &mut adam, &inputs, &labels, seed, at);
    }

    // Hopping: after every sub-epoch the state goes to bytes and into a freshly built model and
    // optimizer (initialized from another seed, so only the restored state can match).
    let mut bytes = initial;
    let mut hopped = None;
    for (index, &at) in visits.iter().enumerate() {
        let (mut fresh_store, fresh_model) =
            build(candidate, &examples, 1000 + index as i64, width);
        let mut fresh_adam = Adam::with_defaults(&fresh_store, 0.5).unwrap();
        let state = TrainingState::from_bytes(&bytes).unwrap();
        assert_eq!(
            state.header.done,
            index.checked_sub(1).map(|last| visits[last])
        );
        state.restore(&mut fresh_store, &mut fresh_adam).unwrap();
        sub_epoch(&fresh_model, &mut fresh_adam, &inputs, &labels, seed, at);
        bytes = TrainingState::capture(&fresh_store, &fresh_adam, seed, Some(at))
            .unwrap()
            .to_bytes()
            .unwrap();
        hopped = Some((fresh_store, fresh_adam));
    }
    let (hopped_store, hopped_adam) = hopped.unwrap();

    let sequential = store.variables();
    let running_stats = sequential
        .keys()
        .filter(|name| name.ends_with("running_mean") || name.ends_with("running_var"))
        .count();
    assert!(
        running_stats > 0,
        "the model should have batch-norm statistics"
    );
    for (name, tensor) in hopped_store.variables() {
        assert!(
            tensor.equal(&sequential[&name]),
            "{candidate}: `{name}` differs between the hop and sequential training"
        );
    }
    assert_eq!(hopped_adam.header(), adam.header());
    for ((name, m, v), (_, hop_m, hop_v)) in adam.moments().into_iter().zip(hopped_adam.moments()) {
        assert!(
            m.equal(&hop_m) && v.equal(&hop_v),
            "`{name}`'s moments differ"
        );
    }
    // The weights moved: the test is not vacuous.
    let (initial_store, _) = build(candidate, &examples, 5, width);
    let initial_variables = initial_store.variables();
    assert!(
        sequential
            .iter()
            .any(|(name, tensor)| !tensor.equal(&initial_variables[name]))
    );
}

#[test]
fn malformed_state_bytes_are_errors() {
    let _serial = serial();
    let examples = synthetic::tabular_sign(32, 4, 5);
    let (mut store, _model) = build("mlp_small", &examples, 1, 0.25);
    let mut adam = Adam::with_defaults(&store, 0.01).unwrap();
    let bytes = TrainingState::capture(&store, &adam, 9, None)
        .unwrap()
        .to_bytes()
        .unwrap();
    // Round trip.
    TrainingState::from_bytes(&bytes)
        .unwrap()
        .restore(&mut store, &mut adam)
        .unwrap();
    // Truncated anywhere, garbage, a bad magic, a lying header length.
    for cut in [0, 3, 7, 10, 15, 40, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            TrainingState::from_bytes(&bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert!(TrainingState::from_bytes(&garbage).is_err());
    let mut bad_magic = bytes.clone();
    bad_magic[0] = b'X';
    assert!(TrainingState::from_bytes(&bad_magic).is_err());
    let mut long_header = bytes.clone();
    long_header[7..15].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(TrainingState::from_bytes(&long_header).is_err());
    let mut broken_tensors = bytes.clone();
    let last = broken_tensors.len() - 1;
    broken_tensors.truncate(last - 3);
    assert!(TrainingState::from_bytes(&broken_tensors).is_err());
    // A state of another model does not restore.
    let (mut other_store, _) = build("mlp_large", &examples, 1, 0.25);
    let mut other_adam = Adam::with_defaults(&other_store, 0.01).unwrap();
    let error = TrainingState::from_bytes(&bytes)
        .unwrap()
        .restore(&mut other_store, &mut other_adam)
        .unwrap_err();
    assert!(error.to_string().contains("training state"), "{error}");
}

#[test]
fn sub_epoch_seeds_are_stable_and_distinct() {
    let mut seen = std::collections::HashSet::new();
    for seed in 0..4 {
        for epoch in 0..4 {
            for partition in 0..4 {
                assert!(seen.insert(sub_epoch_seed(seed, epoch, partition)));
            }
        }
    }
    assert_eq!(sub_epoch_seed(1, 2, 3), sub_epoch_seed(1, 2, 3));
    assert_ne!(sub_epoch_seed(0, 1, 2), sub_epoch_seed(0, 2, 1));
}

/// Steps per second of `nn::Adam` and of `optim::Adam` training the same model on the same
/// batches, alternating, `repeats` times; prints each pair and the median ratio (ours / tch's).
fn compare_speed(candidate: &str, examples: &Examples, width: f64, steps: i64, repeats: usize) {
    let (inputs, labels) = dense(examples);
    let (reference_store, reference_model) = build(candidate, examples, 7, width);
    let (store, model) = build(candidate, examples, 7, width);
    let mut reference = nn::Adam::default().build(&reference_store, 0.001).unwrap();
    let mut adam = Adam::with_defaults(&store, 0.001).unwrap();
    let n = inputs.size()[0];
    let batch = 32;
    let batches: Vec<Tensor> = (0..steps)
        .map(|step| {
            let start = (step * batch) % (n - batch + 1);
            Tensor::arange_start(start, start + batch, (Kind::Int64, Device::Cpu))
        })
        .collect();
    let parameters: i64 = store
        .trainable_variables()
        .iter()
        .map(|tensor| tensor.numel() as i64)
        .sum();
    let mut ratios = Vec::new();
    for repeat in 0..repeats {
        let mut time_tch = || {
            let started = Instant::now();
            for rows in &batches {
                reference.backward_step(&batch_loss(&reference_model, &inputs, &labels, rows));
            }
            steps as f64 / started.elapsed().as_secs_f64()
        };
        let mut time_ours = || {
            let started = Instant::now();
            for rows in &batches {
                adam.backward_step(&batch_loss(&model, &inputs, &labels, rows))
                    .unwrap();
            }
            steps as f64 / started.elapsed().as_secs_f64()
        };
        let (tch_rate, our_rate) = if repeat % 2 == 0 {
            let tch_rate = time_tch();
            (tch_rate, time_ours())
        } else {
            let our_rate = time_ours();
            (time_tch(), our_rate)
        };
        println!(
            "{candidate} ({parameters} parameters) repeat {repeat}: nn::Adam {tch_rate:.1} steps/s, \
             optim::Adam {our_rate:.1} steps/s, ratio {:.3}",
            our_rate / tch_rate
        );
        ratios.push(our_rate / tch_rate);
    }
    report(&format!("{candidate} training step"), ratios);

    // The optimizer alone: one backward pass fills the gradients, then only `step` is timed.
    reference.zero_grad();
    batch_loss(&reference_model, &inputs, &labels, &batches[0]).backward();
    adam.zero_grad().unwrap();
    batch_loss(&model, &inputs, &labels, &batches[0]).backward();
    let optimizer_steps = 200;
    let mut ratios = Vec::new();
    for repeat in 0..repeats {
        let mut time_tch = || {
            let started = Instant::now();
            for _ in 0..optimizer_steps {
                reference.step();
            }
            optimizer_steps as f64 / started.elapsed().as_secs_f64()
        };
        let mut time_ours = || {
            let started = Instant::now();
            for _ in 0..optimizer_steps {
                adam.step().unwrap();
            }
            optimizer_steps as f64 / started.elapsed().as_secs_f64()
        };
        let (tch_rate, our_rate) = if repeat % 2 == 0 {
            let tch_rate = time_tch();
            (tch_rate, time_ours())
        } else {
            let our_rate = time_ours();
            (time_tch(), our_rate)
        };
        println!(
            "{candidate} optimizer step alone, repeat {repeat}: nn::Adam {tch_rate:.0} steps/s, \
             optim::Adam {our_rate:.0} steps/s, ratio {:.3}",
            our_rate / tch_rate
        );
        ratios.push(our_rate / tch_rate);
    }
    report(&format!("{candidate} optimizer step alone"), ratios);
}

fn report(what: &str, mut ratios: Vec<f64>) {
    ratios.sort_by(f64::total_cmp);
    println!(
        "{what}: median ratio {:.3} (min {:.3}, max {:.3})",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
/// Run by hand: `cargo test -p easeml-trainer --release --test hop adam_speed -- --ignored
/// --nocapture`. Measured with the fused step (one thread, the 2-core machine, the medians of four
/// runs of 7 alternating repeats each): `mlp_large` training steps 1.59-1.66x `nn::Adam`'s rate,
/// the step alone 1.40-1.42x; `small_cnn` 0.99-1.04x and 3.44-3.51x (the per-variable form it
/// replaced: 1.17x, 1.05x, 0.99x and 1.07x).
#[test]
#[ignore = "a measurement, not a check"]
fn adam_speed_against_tch_adam() {
    let _serial = serial();
    compare_speed(
        "mlp_large",
        &synthetic::tabular_sign(512, 64, 1),
        1.0,
        200,
        7,
    );
    compare_speed(
        "small_cnn",
        &synthetic::quadrant_images(256, [32, 32, 3], 2),
        0.25,
        40,
        7,
    );
}

#[test]
fn checkpoints_from_before_warm_batches_still_load() {
    let _serial = serial();
    let examples = synthetic::quadrant_images(16, [8, 8, 1], 4);
    let (store, _model) = build("small_cnn", &examples, 3, 0.25);
    let mut all: Vec<(String, Tensor)> = store.variables().into_iter().collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(all.iter().any(|(name, _)| name.ends_with(".warm_batches")));
    let old: Vec<(String, Tensor)> = all
        .iter()
        .filter(|(name, _)| !name.ends_with(".warm_batches"))
        .map(|(name, tensor)| (name.clone(), tensor.shallow_clone()))
        .collect();
    let checkpoint = |named: &[(String, Tensor)]| {
        let path = std::env::temp_dir().join(format!(
            "easeml-hop-test-{}-{}.safetensors",
            std::process::id(),
            named.len()
        ));
        // Contiguous, as the trainer writes its checkpoints (convolutions are channels-last).
        let contiguous: Vec<(&str, Tensor)> = named
            .iter()
            .map(|(name, tensor)| (name.as_str(), tensor.contiguous()))
            .collect();
        Tensor::write_safetensors(&contiguous, &path).unwrap();
        let weights = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        easeml_trainer::Checkpoint {
            meta: easeml_trainer::checkpoint::CheckpointMeta {
                candidate: "small_cnn".into(),
                task: Task::of(&examples).unwrap(),
                config: ModelConfig {
                    width: 0.25,
                    max_bytes: 8,
                    input_bytes: 0,
                    output_bytes: 0,
                    bytes_per_step: 1,
                },
                learning_rate: 0.01,
                seed: 3,
                extra: None,
            },
            weights,
        }
    };
    let predict = |named: &[(String, Tensor)]| {
        easeml_trainer::Predictor::new(&checkpoint(named), Device::Cpu)
            .unwrap()
            .predict(&examples.inputs)
            .unwrap()
    };
    assert_eq!(predict(&old), predict(&all));
}
