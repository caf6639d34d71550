//! Export of the networks that tracing cannot record (`Predictor::export` through
//! `Network::scripted`): the recurrent series classifiers, the bit-level RNN, seq2seq and the
//! Tree-RNN, written as TorchScript compiled from source, and the bit-level auto-encoder traced
//! with bytes in and out. Each model (untrained: its random weights give answers that differ from
//! input to input) is exported, loaded back by libtorch, asked a batch of inputs of other sizes
//! and lengths than any seen before, and compared with `Predictor::predict` (probabilities to
//! 1e-5; sequences and bytes exactly where they are cut or rounded).

use easeml_trainer::models::ModelConfig;
use easeml_trainer::{Call, Candidate, Inputs, Prediction, Predictor, Tree};
use tch::{CModule, Device, IValue, Kind, Tensor};

/// A deterministic value in [-1, 1).
fn noise(i: usize, j: usize) -> f32 {
    (((i * 7919 + j * 104_729) % 1000) as f32) / 500.0 - 1.0
}

/// An untrained predictor of `model` for `task`.
fn predictor(model: &str, task: easeml_trainer::task::Task, config: ModelConfig) -> Predictor {
    let candidate = Candidate::parse(model).unwrap();
    Predictor::untrained(&candidate, &task, config, Device::Cpu)
        .unwrap()
        .expect("a network")
}

/// Exports `predictor` into a new folder; the loaded module and what the export says of it.
fn exported(predictor: &mut Predictor, name: &str) -> (CModule, easeml_trainer::ExportedModel) {
    let dir = std::env::temp_dir().join(format!(
        "easeml-trainer-export-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = predictor.export(&dir).unwrap();
    let module = CModule::load(dir.join("model.pt")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (module, model)
}

fn classes(predictions: &[Prediction]) -> Vec<Vec<f32>> {
    predictions
        .iter()
        .map(|prediction| match prediction {
            Prediction::Class { probabilities, .. } => probabilities.clone(),
            other => panic!("not a class: {other:?}"),
        })
        .collect()
}

fn rows(tensor: &Tensor) -> Vec<Vec<f32>> {
    (0..tensor.size()[0])
        .map(|row| Vec::<f32>::try_from(tensor.get(row)).unwrap())
        .collect()
}

fn assert_close(here: &[Vec<f32>], infer: &[Vec<f32>], what: &str) {
    assert_eq!(here.len(), infer.len(), "{what}");
    for (a, b) in here.iter().zip(infer) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5, "{what}: {a:?} vs {b:?}");
        }
    }
}

/// Series of `step` values per step, of the given lengths; zero-padded to `padded` steps.
fn series(lengths: &[usize], step: usize, padded: usize) -> (Inputs, Tensor, Tensor) {
    let nested: Vec<Vec<Vec<f32>>> = lengths
        .iter()
        .enumerate()
        .map(|(i, &length)| {
            (0..length)
                .map(|t| (0..step).map(|c| noise(i, t * step + c)).collect())
                .collect()
        })
        .collect();
    let mut padded_values = vec![0f32; lengths.len() * padded * step];
    for (i, steps) in nested.iter().enumerate() {
        for (t, values) in steps.iter().enumerate() {
            let at = (i * padded + t) * step;
            padded_values[at..at + step].copy_from_slice(values);
        }
    }
    let inputs = Inputs::Sequences(
        easeml_trainer::data::Sequences::from_nested(step as i64, &nested).unwrap(),
    );
    let x =
        Tensor::from_slice(&padded_values).view([lengths.len() as i64, padded as i64, step as i64]);
    let lengths: Vec<i64> = lengths.iter().map(|&length| length as i64).collect();
    (inputs, x, Tensor::from_slice(&lengths))
}

#[test]
fn the_recurrent_series_classifiers_export_as_scripts_that_answer_as_infer() {
    let task = easeml_trainer::task::Task::SequenceClassification {
        step: 3,
        n_classes: 4,
    };
    // Padded to the longest, as `infer` pads one batch (the bi-LSTM's backward direction reads
    // the padding).
    let (inputs, x, lengths) = series(&[7, 1, 12, 4, 9, 2, 5], 3, 12);
    for model in ["rnn", "lstm", "bilstm", "gru"] {
        let mut predictor = predictor(model, task.clone(), ModelConfig::for_device(Device::Cpu));
        let infer = classes(&predictor.predict(&inputs).unwrap());
        let (module, exported) = exported(&mut predictor, model);
        assert_eq!(exported.call, Call::Series, "{model}");
        assert_eq!(exported.input_shape, vec![-1, 3], "{model}");
        assert_eq!(exported.output_shape, vec![4], "{model}");
        let y = module
            .forward_ts(&[x.shallow_clone(), lengths.shallow_clone()])
            .unwrap();
        assert_close(&rows(&y), &infer, model);
    }
}

#[test]
fn the_bit_level_rnn_exports_as_a_script_over_bytes_that_answers_as_infer() {
    let task = easeml_trainer::task::Task::BytesClassification { n_classes: 3 };
    let strings: Vec<Vec<u8>> = [5usize, 1, 0, 13, 8]
        .iter()
        .enumerate()
        .map(|(i, &length)| {
            (0..length)
                .map(|j| ((noise(i, j) + 1.0) * 127.0) as u8)
                .collect()
        })
        .collect();
    // More bytes than the longest input, and garbage past each input's length: both ignored.
    let width = 16;
    let mut data = vec![0xA5u8; strings.len() * width];
    for (row, string) in strings.iter().enumerate() {
        data[row * width..row * width + string.len()].copy_from_slice(string);
    }
    let lengths: Vec<i64> = strings.iter().map(|string| string.len() as i64).collect();
    for per_step in [1, 3] {
        let config = ModelConfig {
            bytes_per_step: per_step,
            ..ModelConfig::for_device(Device::Cpu)
        };
        let mut predictor = predictor("bit_rnn", task.clone(), config);
        let infer = classes(&predictor.predict(&Inputs::Bytes(strings.clone())).unwrap());
        let (module, exported) = exported(&mut predictor, &format!("bit_rnn_{per_step}"));
        assert_eq!(exported.call, Call::Bytes);
        let x = Tensor::from_slice(&data).view([strings.len() as i64, width as i64]);
        let y = module
            .forward_ts(&[x, Tensor::from_slice(&lengths)])
            .unwrap();
        assert_close(
            &rows(&y),
            &infer,
            &format!("bit_rnn, {per_step} bytes per step"),
        );
    }
}

#[test]
fn seq2seq_exports_as_a_script_that_translates_as_infer() {
    let task = easeml_trainer::task::Task::SequenceTranslation {
        input_step: 2,
        output_step: 3,
    };
    let (inputs, x, lengths) = series(&[4, 9, 1, 6], 2, 9);
    let mut predictor = predictor("seq2seq", task, ModelConfig::for_device(Device::Cpu));
    let infer: Vec<Vec<Vec<f32>>> = predictor
        .predict(&inputs)
        .unwrap()
        .into_iter()
        .map(|prediction| match prediction {
            Prediction::Sequence(steps) => steps,
            other => panic!("not a sequence: {other:?}"),
        })
        .collect();
    let (module, exported) = exported(&mut predictor, "seq2seq");
    assert_eq!(exported.call, Call::Translation);
    assert_eq!(exported.output_shape, vec![-1, 3]);
    let IValue::TensorList(answers) = module
        .forward_is(&[IValue::Tensor(x), IValue::Tensor(lengths)])
        .unwrap()
    else {
        panic!("seq2seq's export answers a list of tensors");
    };
    assert_eq!(answers.len(), infer.len());
    for (answer, steps) in answers.iter().zip(&infer) {
        assert_eq!(answer.size(), vec![steps.len() as i64, 3], "{steps:?}");
        assert_close(&rows(answer), steps, "seq2seq");
    }
}

/// A tree of `depth` levels below the root, `fanout` children per node, values from `seed`.
fn tree(seed: usize, depth: usize, fanout: usize) -> Tree {
    Tree {
        value: vec![noise(seed, 1), noise(seed, 2)],
        children: if depth == 0 {
            Vec::new()
        } else {
            (0..fanout)
                .map(|k| tree(seed * 3 + k + 1, depth - 1, fanout.saturating_sub(k % 2)))
                .collect()
        },
    }
}

/// The nodes of `tree` in pre-order: values and each node's parent row (-1 for the root).
fn flattened(tree: &Tree, parent: i64, values: &mut Vec<f32>, parents: &mut Vec<i64>) {
    let row = parents.len() as i64;
    values.extend_from_slice(&tree.value);
    parents.push(parent);
    for child in &tree.children {
        flattened(child, row, values, parents);
    }
}

#[test]
fn the_tree_rnn_exports_as_a_script_over_nodes_and_parents_that_answers_as_infer() {
    let task = easeml_trainer::task::Task::TreeClassification {
        node: 2,
        n_classes: 3,
    };
    let trees = vec![tree(1, 2, 2), tree(2, 0, 0), tree(3, 3, 3), tree(4, 1, 1)];
    let mut predictor = predictor("tree_rnn", task, ModelConfig::for_device(Device::Cpu));
    let infer = classes(
        &predictor
            .predict(&Inputs::Trees {
                node: 2,
                trees: trees.clone(),
            })
            .unwrap(),
    );
    let (module, exported) = exported(&mut predictor, "tree_rnn");
    assert_eq!(exported.call, Call::Tree);
    assert_eq!(exported.input_shape, vec![-2, 2]);
    let (mut values, mut parents) = (Vec::new(), Vec::new());
    for tree in &trees {
        flattened(tree, -1, &mut values, &mut parents);
    }
    let n = parents.len() as i64;
    let y = module
        .forward_ts(&[
            Tensor::from_slice(&values).view([n, 2]),
            Tensor::from_slice(&parents),
        ])
        .unwrap();
    assert_close(&rows(&y), &infer, "tree_rnn");

    // A node before its parent is refused in words, not answered wrongly.
    let error = module
        .forward_ts(&[
            Tensor::from_slice(&[0.5f32, 0.5, 0.1, 0.2]).view([2, 2]),
            Tensor::from_slice(&[1i64, -1]),
        ])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("node 0 has the parent 1: give every node after its parent (pre-order)"),
        "{error}"
    );
}

#[test]
fn the_bit_level_autoencoder_exports_with_bytes_in_and_out_as_infer() {
    let config = ModelConfig {
        input_bytes: 6,
        output_bytes: 5,
        ..ModelConfig::for_device(Device::Cpu)
    };
    let mut predictor = predictor(
        "bit_autoencoder",
        easeml_trainer::task::Task::BytesAutoencoder,
        config,
    );
    // Inputs of 6 bytes each (the export takes them cut or padded to `input_shape`).
    let strings: Vec<Vec<u8>> = (0..5)
        .map(|i| {
            (0..6)
                .map(|j| ((noise(i, j) + 1.0) * 127.0) as u8)
                .collect()
        })
        .collect();
    let infer: Vec<Vec<u8>> = predictor
        .predict(&Inputs::Bytes(strings.clone()))
        .unwrap()
        .into_iter()
        .map(|prediction| match prediction {
            Prediction::Bytes(bytes) => bytes,
            other => panic!("not bytes: {other:?}"),
        })
        .collect();
    let (module, exported) = exported(&mut predictor, "bit_autoencoder");
    assert_eq!(exported.call, Call::BytesToBytes);
    assert_eq!(
        (exported.input_shape.clone(), exported.output_shape.clone()),
        (vec![6], vec![5])
    );
    let flat: Vec<u8> = strings.concat();
    let y = module
        .forward_ts(&[Tensor::from_slice(&flat).view([5, 6])])
        .unwrap();
    assert_eq!(y.kind(), Kind::Uint8);
    let here: Vec<Vec<u8>> = (0..5)
        .map(|row| Vec::<u8>::try_from(y.get(row)).unwrap())
        .collect();
    assert_eq!(here, infer);
}
