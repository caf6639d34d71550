//! The training steps of model hopper parallelism (`mop.rs`): a chain of sub-epochs over
//! partitions replays bit for bit, its order matters, its state evaluates and serves, and what it
//! cannot train is an error, not a panic. One CPU thread (bit equality; see `tests/hop.rs`).

use easeml_trainer::hop::{SubEpoch, TrainingState};
use easeml_trainer::models::ModelConfig;
use easeml_trainer::mop::{
    MopSetup, SubEpochOutcome, checkpoint_of_state, evaluate_state, initial_state, partition_of,
    partition_rows, train_sub_epoch,
};
use easeml_trainer::{Error, Examples, Predictor, Task, synthetic};
use tch::Device;

fn setup(candidate: &str, examples: &Examples) -> MopSetup {
    MopSetup {
        candidate: candidate.to_owned(),
        task: Task::of(examples).unwrap(),
        config: ModelConfig {
            width: 1.0 / 16.0,
            ..ModelConfig::for_device(Device::Cpu)
        },
        learning_rate: 0.01,
        seed: 11,
        batch_size: 8,
    }
}

/// Trains the visits in order from `state`; the final state's bytes.
fn chain(
    setup: &MopSetup,
    examples: &Examples,
    mut state: Vec<u8>,
    visits: &[SubEpoch],
) -> Vec<u8> {
    let rows: Vec<usize> = (0..examples.len()).collect();
    for &at in visits {
        let part = partition_rows(examples, &rows, 2, at.partition);
        state = match train_sub_epoch(setup, &state, examples, &part, at, Device::Cpu).unwrap() {
            SubEpochOutcome::Trained { state, loss } => {
                assert!(loss.is_finite());
                state
            }
            SubEpochOutcome::Diverged(reason) => panic!("diverged: {reason}"),
        };
    }
    state
}

#[test]
fn sub_epochs_replay_bit_for_bit_and_the_state_serves() {
    tch::set_num_threads(1);
    // small_cnn: batch norms with a warm-up count in the VarStore; mlp_small: the normalizer.
    for (candidate, examples) in [
        ("small_cnn", synthetic::quadrant_images(48, [8, 8, 1], 3)),
        ("mlp_small", synthetic::tabular_sign(48, 4, 5)),
    ] {
        let setup = setup(candidate, &examples);
        let rows: Vec<usize> = (0..examples.len()).collect();
        // Both partitions have rows, and together they are every row once.
        let parts: Vec<Vec<usize>> = (0..2)
            .map(|partition| partition_rows(&examples, &rows, 2, partition))
            .collect();
        assert!(parts.iter().all(|part| !part.is_empty()));
        assert_eq!(parts[0].len() + parts[1].len(), rows.len());
        assert_eq!(partition_of(7, 2), partition_of(7, 2));

        let initial = initial_state(&setup, &examples, &rows, Device::Cpu).unwrap();
        // The initialization is the seed's: the same bytes twice.
        assert_eq!(
            initial,
            initial_state(&setup, &examples, &rows, Device::Cpu).unwrap()
        );
        let visits = [(0, 1), (0, 0), (1, 0), (1, 1)]
            .map(|(epoch, partition)| SubEpoch { epoch, partition });
        let once = chain(&setup, &examples, initial.clone(), &visits);
        let again = chain(&setup, &examples, initial.clone(), &visits);
        assert_eq!(once, again, "{candidate}: a replay must be bit-identical");
        let header = TrainingState::from_bytes(&once).unwrap().header;
        assert_eq!(header.done, Some(visits[3]));
        // The visit order is part of the result (the test is not vacuous).
        let reordered = [(0, 0), (0, 1), (1, 0), (1, 1)]
            .map(|(epoch, partition)| SubEpoch { epoch, partition });
        assert_ne!(once, chain(&setup, &examples, initial.clone(), &reordered));

        let evaluation = evaluate_state(&setup, &once, &examples, &rows, Device::Cpu)
            .unwrap()
            .unwrap();
        let quality = evaluation.quality;
        assert!((0.0..=1.0).contains(&quality));
        assert!(
            evaluation
                .loss
                .is_some_and(|loss| loss.is_finite() && loss >= 0.0)
        );
        // The checkpoint serves, with the quality the state evaluates to.
        let checkpoint = checkpoint_of_state(&setup, &once).unwrap();
        let predicted = Predictor::new(&checkpoint, Device::Cpu)
            .unwrap()
            .predict(&examples.inputs)
            .unwrap();
        assert_eq!(predicted.len(), examples.len());
    }
}

#[test]
fn what_cannot_hop_is_an_error() {
    tch::set_num_threads(1);
    let examples = synthetic::tabular_sign(32, 4, 5);
    let rows: Vec<usize> = (0..examples.len()).collect();
    let at = SubEpoch {
        epoch: 0,
        partition: 0,
    };
    // A classic model.
    let error =
        initial_state(&setup("gbdt", &examples), &examples, &rows, Device::Cpu).unwrap_err();
    assert!(matches!(error, Error::Mop(_)), "{error}");
    assert!(error.to_string().contains("task parallelism"), "{error}");
    let setup = setup("mlp_small", &examples);
    let initial = initial_state(&setup, &examples, &rows, Device::Cpu).unwrap();
    // No rows, a row out of range, bytes that are not a state.
    for (state, rows) in [
        (initial.clone(), vec![]),
        (initial.clone(), vec![0, 999]),
        (b"not a state".to_vec(), vec![0, 1]),
    ] {
        assert!(train_sub_epoch(&setup, &state, &examples, &rows, at, Device::Cpu).is_err());
    }
    assert!(checkpoint_of_state(&setup, b"EMHOP1\n").is_err());
}
