//! The networks whose path depends on the data, exported as TorchScript compiled from source:
//! the recurrent series classifiers, seq2seq, the Tree-RNN and the bit-level models of general
//! apps. Each app is trained, exported, and its `model.pt` asked, in the form its README gives
//! (general apps' bytes made here from the README's words), inputs of other sizes and lengths
//! than the trace of any other export; the answers equal `infer`'s.

use super::*;

use by_readme::{TREE_APP, chain_of, series_steps, tree_input};
use tch::{CModule, IValue, Tensor};

/// An app trained on `examples` with the one candidate `family`, exported; the export folder.
fn exported(
    source: &str,
    family: &str,
    examples: &[Value],
) -> (tempfile::TempDir, PathBuf, Client) {
    let (temp, home, client) = trained(source, |id| id == family, examples);
    let out = home.parent().unwrap().join("export");
    let report = export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(report.model.format, "torchscript", "{family}");
    assert_eq!(report.candidate, family);
    (temp, out, client)
}

pub(super) fn rows(tensor: &Tensor) -> Vec<Vec<f32>> {
    (0..tensor.size()[0])
        .map(|row| Vec::<f32>::try_from(tensor.get(row)).unwrap())
        .collect()
}

/// Series zero-padded to the longest `[B, T, channels]`, and their lengths.
pub(super) fn padded(series: &[Vec<[f32; 2]>]) -> (Tensor, Tensor) {
    let longest = series.iter().map(Vec::len).max().unwrap();
    let mut values = vec![0f32; series.len() * longest * 2];
    for (row, steps) in series.iter().enumerate() {
        for (t, step) in steps.iter().enumerate() {
            values[(row * longest + t) * 2..(row * longest + t) * 2 + 2].copy_from_slice(step);
        }
    }
    let lengths: Vec<i64> = series.iter().map(|steps| steps.len() as i64).collect();
    (
        Tensor::from_slice(&values).view([series.len() as i64, longest as i64, 2]),
        Tensor::from_slice(&lengths),
    )
}

#[test]
fn the_recurrent_series_classifiers_export_as_torchscript_that_answers_as_infer() {
    let examples: Vec<Value> = (0..24)
        .map(|i| {
            json!({"input": chain_of(&series_steps(i, 6 + i % 5)), "output": (["down", "up"][i % 2])})
        })
        .collect();
    let queries: Vec<Vec<[f32; 2]>> = (100..106).map(|i| series_steps(i, 2 + i % 9)).collect();
    let (x, lengths) = padded(&queries);
    // The bi-LSTM's backward direction reads the padding of the batch: the export padded as
    // `infer` pads one batch answers the same.
    for family in ["gru", "bilstm"] {
        let (_temp, out, mut client) = exported(SERIES_APP, family, &examples);
        assert_eq!(
            metadata(&out)["call"]["how"],
            "torch.jit.load(file)(x, lengths)"
        );
        let module = CModule::load(out.join("model.pt")).unwrap();
        let y = tch::no_grad(|| module.forward_ts(&[x.shallow_clone(), lengths.shallow_clone()]))
            .unwrap();
        let answers = client
            .infer(queries.iter().map(|steps| chain_of(steps)))
            .unwrap();
        assert_same_answers(&answers, &rows(&y), &format!("{family} in libtorch"));
        if family == "gru" {
            // An ensemble of series networks: its README adds the members up, called as one.
            let home = out.parent().unwrap().join("home");
            let run = store(&home)
                .runs(store(&home).app_by_name("app").unwrap().unwrap().id)
                .unwrap()[0]
                .id;
            record_ensemble(&home, &[(run, 0.5), (run, 0.5)]);
            let ensemble = out.parent().unwrap().join("ensemble");
            let report = export_app(&store(&home), "app", &ensemble, false).unwrap();
            assert_eq!(report.members.len(), 2);
            let readme = std::fs::read_to_string(ensemble.join(README_FILE)).unwrap();
            assert!(
                readme
                    .contains("out = sum(weight * model(x, lengths) for model, weight in members)"),
                "{readme}"
            );
            let mut total = Tensor::zeros_like(&y);
            for member in &report.members {
                let module = CModule::load(ensemble.join(&member.dir).join("model.pt")).unwrap();
                let out = tch::no_grad(|| {
                    module.forward_ts(&[x.shallow_clone(), lengths.shallow_clone()])
                })
                .unwrap();
                total += out * member.weight;
            }
            let answers = client
                .infer(queries.iter().map(|steps| chain_of(steps)))
                .unwrap();
            assert_same_answers(&answers, &rows(&total), "an ensemble of gru members");
        }
    }
}

/// A translation app: chains of two values to chains of three.
const TRANSLATION_APP: &str = "type Input\n  x :: Tensor[2]\n  next :: Nullable{Input}\nend\ntype Output\n  y :: Tensor[3]\n  next :: Nullable{Output}\nend\n";

#[test]
fn seq2seq_exports_as_torchscript_that_translates_as_infer() {
    let examples: Vec<Value> = (0..16)
        .map(|i| {
            let steps = series_steps(i, 2 + i % 4);
            let output: Vec<Value> = steps
                .iter()
                .take(1 + i % 3)
                .map(|[a, b]| json!({"y": [a + b, a - b, 0.5]}))
                .collect();
            json!({"input": chain_of(&steps), "output": output})
        })
        .collect();
    let (_temp, out, mut client) = exported(TRANSLATION_APP, "seq2seq", &examples);
    let meta = metadata(&out);
    assert_eq!(meta["model"]["input_shape"], json!([-1, 2]));
    assert_eq!(meta["model"]["output_shape"], json!([-1, 3]));
    assert!(
        meta["call"]["output"]
            .as_str()
            .unwrap()
            .starts_with("a list of B float32 tensors [steps, output step values]"),
        "{meta}"
    );
    let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
    assert!(
        readme.contains("outs = model(x, lengths)  # a list: one tensor [steps, 3] per sequence"),
        "{readme}"
    );
    let queries: Vec<Vec<[f32; 2]>> = (50..55).map(|i| series_steps(i, 1 + i % 6)).collect();
    let (x, lengths) = padded(&queries);
    let module = CModule::load(out.join("model.pt")).unwrap();
    let IValue::TensorList(translations) =
        tch::no_grad(|| module.forward_is(&[IValue::Tensor(x), IValue::Tensor(lengths)])).unwrap()
    else {
        panic!("a translation export answers a list of tensors");
    };
    let answers = client
        .infer(queries.iter().map(|steps| chain_of(steps)))
        .unwrap();
    assert_eq!(translations.len(), answers.answers.len());
    for (translation, (_, answer)) in translations.iter().zip(&answers.answers) {
        let records = answer.output.as_array().expect("a chain answers a list");
        let expected: Vec<Vec<f32>> = records
            .iter()
            .map(|record| {
                record["y"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect();
        let here = rows(translation);
        assert_eq!(here.len(), expected.len(), "{here:?} vs {expected:?}");
        for (a, b) in here.iter().flatten().zip(expected.iter().flatten()) {
            assert!((a - b).abs() <= 1e-5, "{here:?} vs {expected:?}");
        }
    }
}

/// Tree `tree` of the tree app (`v`, `left`, `right`) in pre-order, children in field order:
/// its nodes' values and each node's parent row (-1 for the root), as the README says.
fn nodes_and_parents(tree: &Value, parent: i64, values: &mut Vec<f32>, parents: &mut Vec<i64>) {
    let row = parents.len() as i64;
    values.extend(
        tree["v"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32),
    );
    parents.push(parent);
    for field in ["left", "right"] {
        if !tree[field].is_null() {
            nodes_and_parents(&tree[field], row, values, parents);
        }
    }
}

#[test]
fn the_tree_rnn_exports_as_torchscript_over_nodes_and_parents_that_answers_as_infer() {
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": tree_input(i), "output": (["even", "odd"][i % 2])}))
        .collect();
    let (_temp, out, mut client) = exported(TREE_APP, "tree_rnn", &examples);
    assert_eq!(
        metadata(&out)["call"]["how"],
        "torch.jit.load(file)(values, parents)"
    );
    let queries: Vec<Value> = (30..37).map(tree_input).collect();
    let (mut values, mut parents) = (Vec::new(), Vec::new());
    for tree in &queries {
        nodes_and_parents(tree, -1, &mut values, &mut parents);
    }
    let answers = client.infer(queries.iter()).unwrap();
    let n = parents.len() as i64;
    let module = CModule::load(out.join("model.pt")).unwrap();
    let y = tch::no_grad(|| {
        module.forward_ts(&[
            Tensor::from_slice(&values).view([n, 3]),
            Tensor::from_slice(&parents),
        ])
    })
    .unwrap();
    assert_same_answers(&answers, &rows(&y), "tree_rnn in libtorch");
    // And in plain Python, as the README loads it.
    if let Some(outputs) = python_call(
        &out,
        &json!([
            {"values": values, "shape": [n, 3], "dtype": "float32"},
            {"values": parents, "shape": [n], "dtype": "int64"},
        ]),
    ) {
        let outputs: Vec<Vec<f32>> = serde_json::from_value(outputs).unwrap();
        assert_same_answers(&answers, &outputs, "tree_rnn in Python");
    }
}

/// `model.pt` in `dir` called in Python with `arguments` (each `{values, shape, dtype}`), its
/// output as JSON (a list of tensors as a list); `None` (after `missing_part`) without torch.
fn python_call(dir: &Path, arguments: &Value) -> Option<Value> {
    let script = "import json, sys, torch\n\
                  request = json.load(sys.stdin)\n\
                  model = torch.jit.load(request['model'])\n\
                  args = [torch.tensor(a['values'], dtype=getattr(torch, a['dtype'])).reshape(a['shape']) for a in request['arguments']]\n\
                  with torch.no_grad():\n    y = model(*args)\n\
                  print(json.dumps([t.tolist() for t in y] if isinstance(y, list) else y.tolist()))\n";
    let request = json!({"model": dir.join("model.pt"), "arguments": arguments});
    python_json(
        "the_tree_rnn_exports_as_torchscript_over_nodes_and_parents_that_answers_as_infer",
        script,
        &request,
    )
}

/// The bytes of a record of tensors, by the README's words (`call.bytes`): `EMX1`, then each
/// tensor field's values as little-endian float32, row-major, in the declared order.
fn encoded(tensors: &[&[f32]]) -> Vec<u8> {
    let mut bytes = b"EMX1".to_vec();
    for values in tensors {
        for value in *values {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    bytes
}

/// A general classification app: a record of two tensors.
const GENERAL_APP: &str = "type Input\n  image :: Tensor[2, 2, 2]\n  meta :: Tensor[3]\nend\nOutput = [2]\nlabels = [a, b]\n";

#[test]
fn the_bit_level_rnn_exports_as_torchscript_over_encoded_bytes_that_answers_as_infer() {
    let input = |i: usize| -> (Vec<f32>, Vec<f32>) {
        let image = (0..8).map(|j| noise(i, j) - 0.5).collect();
        let meta = vec![(i % 2) as f32, noise(i, 9), 0.25];
        (image, meta)
    };
    let as_json = |(image, meta): &(Vec<f32>, Vec<f32>)| json!({"image": nested(image, &[2, 2, 2]), "meta": meta});
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": as_json(&input(i)), "output": (["a", "b"][i % 2])}))
        .collect();
    let (_temp, out, mut client) = exported(GENERAL_APP, "bit_rnn", &examples);
    let meta = metadata(&out);
    assert_eq!(meta["call"]["how"], "torch.jit.load(file)(data, lengths)");
    assert!(
        meta["call"]["bytes"]
            .as_str()
            .unwrap()
            .starts_with("the input as easeml encodes it: the 4 bytes `EMX1`"),
        "{meta}"
    );
    let queries: Vec<(Vec<f32>, Vec<f32>)> = (40..45).map(input).collect();
    // Each input's bytes, zero-padded past the longest (which the lengths make no matter).
    let strings: Vec<Vec<u8>> = queries
        .iter()
        .map(|(image, meta)| encoded(&[image, meta]))
        .collect();
    let width = strings.iter().map(Vec::len).max().unwrap() + 5;
    let mut data = vec![0u8; strings.len() * width];
    for (row, string) in strings.iter().enumerate() {
        data[row * width..row * width + string.len()].copy_from_slice(string);
    }
    let lengths: Vec<i64> = strings.iter().map(|s| s.len() as i64).collect();
    let module = CModule::load(out.join("model.pt")).unwrap();
    let y = tch::no_grad(|| {
        module.forward_ts(&[
            Tensor::from_slice(&data).view([strings.len() as i64, width as i64]),
            Tensor::from_slice(&lengths),
        ])
    })
    .unwrap();
    let answers = client.infer(queries.iter().map(as_json)).unwrap();
    assert_same_answers(&answers, &rows(&y), "bit_rnn in libtorch");
}

/// A general auto-encoder app: a `[2,2,2]` grid to a `[3,3]` map.
const AUTOENCODER_APP: &str = "Input = [2, 2, 2]\nOutput = [3, 3]\n";

#[test]
fn the_bit_level_autoencoder_exports_as_torchscript_with_bytes_that_answers_as_infer() {
    let grid = |i: usize| -> Vec<f32> { (0..8).map(|j| noise(i, j)).collect() };
    let examples: Vec<Value> = (0..16)
        .map(|i| {
            let map: Vec<f32> = (0..9).map(|j| noise(i, j % 8)).collect();
            json!({"input": nested(&grid(i), &[2, 2, 2]), "output": nested(&map, &[3, 3])})
        })
        .collect();
    let (_temp, out, mut client) = exported(AUTOENCODER_APP, "bit_autoencoder", &examples);
    let meta = metadata(&out);
    assert_eq!(meta["call"]["how"], "torch.jit.load(file)(data)");
    // The inputs' encoding: 4 + 8 * 4 bytes; the outputs': 4 + 9 * 4.
    assert_eq!(meta["model"]["input_shape"], json!([36]));
    assert_eq!(meta["model"]["output_shape"], json!([40]));
    let queries: Vec<Vec<f32>> = (60..64).map(grid).collect();
    let data: Vec<u8> = queries.iter().flat_map(|grid| encoded(&[grid])).collect();
    let module = CModule::load(out.join("model.pt")).unwrap();
    let y = tch::no_grad(|| {
        module.forward_ts(&[Tensor::from_slice(&data).view([queries.len() as i64, 36])])
    })
    .unwrap();
    let answers = client
        .infer(queries.iter().map(|grid| nested(grid, &[2, 2, 2])))
        .unwrap();
    for (row, (_, answer)) in answers.answers.iter().enumerate() {
        // Read back by the README's words: the values after the 4 magic bytes, little-endian
        // float32; one that is not finite reads as 0.
        let bytes = Vec::<u8>::try_from(y.get(row as i64)).unwrap();
        let here: Vec<f32> = bytes[4..]
            .chunks(4)
            .map(|chunk| f32::from_le_bytes(chunk.try_into().unwrap()))
            .map(|value| if value.is_finite() { value } else { 0.0 })
            .collect();
        let expected: Vec<f32> = answer
            .output
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap().iter())
            .map(|value| value.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(here, expected, "row {row}");
    }
}
