//! Export (`easeml_engine::export::export_app`): a trained network written as TorchScript answers
//! what `infer` answers, in libtorch here and in plain Python (`torch.jit.load`), to 1e-5; a
//! kernel ridge model, the tree ensembles, the series models (MiniRocket, MultiRocket, 1-NN DTW)
//! and the tree-kernel SVM written as JSON answer the same by the README's formulas, computed here
//! from its words; the networks that tracing cannot record (recurrent, translation, trees, general
//! apps' bit-level models) answer the same as TorchScript compiled from source; an ensemble's
//! members, each exported in its folder, answer the same added up by their weights; and every
//! refusal is in words.

use std::path::{Path, PathBuf};

use easeml_client::{Client, Connection, FeedOptions, InferReport};
use easeml_compiler::{Registry, compile};
use easeml_engine::export::{METADATA_FILE, README_FILE, export_app};
use easeml_engine::{Engine, EngineConfig};
use serde_json::{Value, json};

/// The series models and the tree-kernel SVM, by their README's words.
#[path = "export/by_readme.rs"]
mod by_readme;

/// The recurrent, translation, tree and general apps' networks (TorchScript from source).
#[path = "export/scripted.rs"]
mod scripted;

/// The app of a small `.eml` program, its candidates cut to those `keep` accepts.
fn app(source: &str, keep: impl Fn(&str) -> bool) -> easeml_client::AppSpec {
    let schema = compile(source, "app", &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
        .schema;
    let compiled =
        easeml_compiler::Compiled::from_schema(schema, &Registry::builtin()).expect("a template");
    let mut manifest = easeml_compiler::codegen::manifest(&compiled);
    manifest.candidates.retain(|candidate| keep(&candidate.id));
    assert!(!manifest.candidates.is_empty(), "no candidate kept");
    easeml_client::AppSpec::from_manifest(&manifest).unwrap()
}

/// A deterministic value in [0, 1).
fn noise(i: usize, j: usize) -> f32 {
    (((i * 7919 + j * 104_729) % 1000) as f32) / 1000.0
}

/// Example `i`'s input: `n` values, of scales that differ (standardization matters).
fn row(i: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|j| noise(i, j) * 10f32.powi(j as i32 % 3))
        .collect()
}

/// Row-major `values` as the nested JSON arrays of `shape`.
fn nested(values: &[f32], shape: &[i64]) -> Value {
    match shape {
        [] | [_] => json!(values),
        [_, inner @ ..] => {
            let size = inner.iter().product::<i64>() as usize;
            Value::Array(
                values
                    .chunks(size)
                    .map(|part| nested(part, inner))
                    .collect(),
            )
        }
    }
}

/// An app in a temporary store, fed `examples` lines and trained until one run finished.
fn trained(
    source: &str,
    keep: impl Fn(&str) -> bool,
    examples: &[Value],
) -> (tempfile::TempDir, PathBuf, Client) {
    trained_runs(source, keep, examples, 1)
}

/// [`trained`] until `runs` runs finished (each on the current data).
fn trained_runs(
    source: &str,
    keep: impl Fn(&str) -> bool,
    examples: &[Value],
    runs: usize,
) -> (tempfile::TempDir, PathBuf, Client) {
    easeml_engine::install_local_models();
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let mut client = Client::open(&Connection::embedded(&home), app(source, keep)).unwrap();
    let feed: String = examples.iter().map(|line| format!("{line}\n")).collect();
    client
        .feed_lines(std::io::Cursor::new(feed), &FeedOptions::default())
        .unwrap();
    let mut config = EngineConfig::for_device(tch::Device::Cpu);
    config.max_run_seconds = 4.0;
    config.max_epochs = 2;
    config.min_steps = 0; // a quick test, not a good model
    let mut engine = Engine::open(&home, config).unwrap();
    let mut finished = 0;
    for _ in 0..4 * runs {
        if let Some(easeml_engine::Step::Run(run)) = engine.step(None, &mut |_| {}).unwrap()
            && run.quality.is_some()
        {
            finished += 1;
            if finished == runs {
                return (temp, home, client);
            }
        }
    }
    panic!(
        "{finished} of {runs} runs finished: {}",
        client.status().unwrap()
    );
}

/// Records an ensemble of `members` (runs of the app named `app` on its current data, with their
/// weights) that the store's rule serves: its quality above the best single run's by far.
fn record_ensemble(home: &Path, members: &[(easeml_store::RunId, f64)]) {
    let mut store = store(home);
    let app = store.app_by_name("app").unwrap().unwrap();
    let data_version = store.run(members[0].0).unwrap().data_version;
    store
        .put_ensemble(&easeml_store::EnsembleRecord {
            app: app.id,
            data_version,
            members: members
                .iter()
                .map(|&(run, weight)| easeml_store::EnsembleMember { run, weight })
                .collect(),
            quality: 1.0,
            single_quality: 0.1,
            loss: None,
            single_loss: None,
            validated_examples: 24,
            confusion: None,
            runs_seen: members.iter().map(|&(run, _)| run).max().unwrap(),
            created_ms: 0,
        })
        .unwrap();
}

fn store(home: &Path) -> easeml_store::Store {
    easeml_store::Store::open(home).unwrap()
}

fn metadata(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(METADATA_FILE)).unwrap()).unwrap()
}

/// Checks that `outputs` (probabilities per input) agree with `infer`'s class and confidence.
fn assert_same_answers(report: &InferReport, outputs: &[Vec<f32>], what: &str) {
    assert_eq!(outputs.len(), report.answers.len(), "{what}");
    for ((_, answer), probabilities) in report.answers.iter().zip(outputs) {
        let class = answer.class.expect("a class") as usize;
        let confidence = answer.confidence.expect("a confidence");
        let best = (0..probabilities.len())
            .max_by(|&a, &b| probabilities[a].total_cmp(&probabilities[b]))
            .unwrap();
        assert_eq!(best, class, "{what}: {probabilities:?} vs {answer:?}");
        assert!(
            (probabilities[class] - confidence).abs() <= 1e-5,
            "{what}: {probabilities:?} vs {answer:?}"
        );
        let total: f32 = probabilities.iter().sum();
        assert!((total - 1.0).abs() <= 1e-5, "{what}: {probabilities:?}");
    }
}

/// The python with torch that `cargo xtask env` sets up (`$VIRTUAL_ENV`), else the default venv.
fn torch_python() -> Option<PathBuf> {
    let from_env = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    let venv = from_env("VIRTUAL_ENV").map(PathBuf::from).or_else(|| {
        from_env("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| from_env("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .map(|cache| cache.join("easeml/torch-venv"))
    })?;
    Some(venv.join("bin/python")).filter(|python| python.is_file())
}

/// `torch.jit.load(model.pt)(inputs)` in Python, as rows of floats; `None` (after
/// `missing_part`) when there is no Python with torch.
fn python_outputs(dir: &Path, shape: &[i64], inputs: &[Vec<f32>]) -> Option<Vec<Vec<f32>>> {
    let script = "import json, sys, torch\n\
                  request = json.load(sys.stdin)\n\
                  model = torch.jit.load(request['model'])\n\
                  x = torch.tensor(request['inputs'], dtype=torch.float32).reshape([-1] + request['shape'])\n\
                  with torch.no_grad():\n    y = model(x)\n\
                  print(json.dumps(y.reshape(y.shape[0], -1).tolist()))\n";
    let request = json!({
        "model": dir.join("model.pt"),
        "shape": shape,
        "inputs": inputs,
    });
    python_json(
        "a_network_exports_as_torchscript_that_answers_as_infer",
        script,
        &request,
    )
    .map(|output| serde_json::from_value(output).unwrap())
}

/// `script` run by the torch venv's Python with `request` as JSON on its standard input; what it
/// printed, as JSON. `None` (after `missing_part` for `test`) when there is no Python with torch.
fn python_json(test: &str, script: &str, request: &Value) -> Option<Value> {
    let Some(python) = torch_python() else {
        easeml_test_support::missing_part(
            test,
            "Python with torch",
            "no $VIRTUAL_ENV/bin/python nor ~/.cache/easeml/torch-venv",
            "run `eval \"$(cargo xtask env)\"` first (it makes the torch venv)",
        );
        return None;
    };
    let mut child = std::process::Command::new(&python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("No module named 'torch'") {
        easeml_test_support::missing_part(
            test,
            "Python with torch",
            &format!("{} cannot import torch", python.display()),
            "run `eval \"$(cargo xtask env)\"` first (it makes the torch venv)",
        );
        return None;
    }
    assert!(output.status.success(), "python failed: {stderr}");
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

/// `model.pt` loaded by libtorch in this process, as rows of floats.
fn libtorch_outputs(dir: &Path, shape: &[i64], inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let module = tch::CModule::load(dir.join("model.pt")).unwrap();
    let mut full = vec![inputs.len() as i64];
    full.extend_from_slice(shape);
    let flat: Vec<f32> = inputs.iter().flatten().copied().collect();
    let x = tch::Tensor::from_slice(&flat).view(full.as_slice());
    let y = tch::no_grad(|| module.forward_ts(&[x])).unwrap();
    let y = y.view([inputs.len() as i64, -1]);
    (0..inputs.len() as i64)
        .map(|row| Vec::<f32>::try_from(y.get(row)).unwrap())
        .collect()
}

#[test]
fn a_network_exports_as_torchscript_that_answers_as_infer() {
    struct Case {
        name: &'static str,
        source: &'static str,
        keep: fn(&str) -> bool,
        shape: Vec<i64>,
    }
    let cases = [
        Case {
            name: "tabular mlp",
            source: "Input = [5]\nOutput = [3]\nlabels = [low, mid, high]\n",
            keep: |id| id == "mlp_small",
            shape: vec![5],
        },
        Case {
            name: "image cnn with f_k",
            source: "Input = [6, 5, 3]\nOutput = [2]\nlabels = [dark, bright]\n",
            keep: |id| id.starts_with("small_cnn+norm_k"),
            shape: vec![6, 5, 3],
        },
    ];
    for case in cases {
        let width: i64 = case.shape.iter().product();
        let examples: Vec<Value> = (0..24)
            .map(|i| {
                let labels = if case.shape.len() == 1 {
                    ["low", "mid", "high"][i % 3]
                } else {
                    ["dark", "bright"][i % 2]
                };
                let input = nested(&row(i, width as usize), &case.shape);
                json!({"input": input, "output": labels})
            })
            .collect();
        let (_temp, home, mut client) = trained(case.source, case.keep, &examples);
        let out = home.parent().unwrap().join("export");
        let report = export_app(&store(&home), "app", &out, false)
            .unwrap_or_else(|error| panic!("{}: {error}", case.name));
        assert_eq!(report.model.format, "torchscript", "{}", case.name);

        // Seven inputs: a batch of another size than the trace's.
        let inputs: Vec<Vec<f32>> = (100..107).map(|i| row(i, width as usize)).collect();
        let nested_inputs: Vec<Value> = inputs.iter().map(|x| nested(x, &case.shape)).collect();
        let answers = client.infer(nested_inputs).unwrap();
        assert_eq!(answers.run, report.run, "{}", case.name);

        let meta = metadata(&out);
        assert_eq!(meta["app"], "app");
        assert_eq!(meta["run"]["id"], answers.run.0, "{}", case.name);
        assert_eq!(meta["run"]["candidate"], answers.candidate, "{}", case.name);
        assert_eq!(meta["run"]["data_version"], answers.data_version);
        assert_eq!(meta["run"]["metric"], "accuracy");
        assert!(meta["run"]["quality"].is_f64(), "{meta}");
        assert_eq!(meta["model"]["input_shape"], json!(case.shape));
        assert_eq!(meta["format_version"], 1);
        let labels: Vec<String> = serde_json::from_value(meta["labels"].clone()).unwrap();
        for (_, answer) in &answers.answers {
            let class = answer.class.unwrap() as usize;
            assert_eq!(
                answer.output,
                json!(labels[class]),
                "{}: class order",
                case.name
            );
        }
        let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
        assert!(readme.contains("torch.jit.load(\"model.pt\")"), "{readme}");

        let here = libtorch_outputs(&out, &case.shape, &inputs);
        assert_same_answers(&answers, &here, &format!("{} in libtorch", case.name));
        if let Some(python) = python_outputs(&out, &case.shape, &inputs) {
            assert_same_answers(&answers, &python, &format!("{} in Python", case.name));
            for (a, b) in here.iter().flatten().zip(python.iter().flatten()) {
                assert!((a - b).abs() <= 1e-5, "{}: {a} vs {b}", case.name);
            }
        }
    }
}

#[test]
fn a_regression_network_exports_its_values() {
    let examples: Vec<Value> = (0..24)
        .map(|i| {
            let x = row(i, 4);
            json!({"input": x, "output": [x[0] - 0.01 * x[1]]})
        })
        .collect();
    let (_temp, home, mut client) = trained(
        "Input = [4]\nOutput = [1]\n",
        |id| id == "linear",
        &examples,
    );
    let out = home.parent().unwrap().join("export");
    export_app(&store(&home), "app", &out, false).unwrap();
    let meta = metadata(&out);
    assert_eq!(meta["labels"], Value::Null);
    assert_eq!(meta["model"]["output"], "values");
    assert_eq!(meta["run"]["metric"], "R²");
    let inputs: Vec<Vec<f32>> = (100..105).map(|i| row(i, 4)).collect();
    let answers = client.infer(inputs.clone()).unwrap();
    let here = libtorch_outputs(&out, &[4], &inputs);
    for ((_, answer), values) in answers.answers.iter().zip(&here) {
        let expected = answer.output[0].as_f64().unwrap() as f32;
        assert!(
            (values[0] - expected).abs() <= 1e-5,
            "{values:?} vs {answer:?}"
        );
    }
}

#[test]
fn an_image_recovery_network_exports_its_images() {
    let shape = [4i64, 4, 2];
    let examples: Vec<Value> = (0..16)
        .map(|i| {
            let x = row(i, 32);
            let y: Vec<f32> = x.iter().map(|v| 1.0 - v / 10.0).collect();
            json!({"input": nested(&x, &shape), "output": nested(&y[..16], &[4, 4, 1])})
        })
        .collect();
    let (_temp, home, mut client) = trained(
        "Input = [4, 4, 2]\nOutput = [4, 4, 1]\n",
        |id| id.starts_with("pix2pix+norm_k"),
        &examples,
    );
    let out = home.parent().unwrap().join("export");
    export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(metadata(&out)["model"]["output_shape"], json!([4, 4, 1]));
    let inputs: Vec<Vec<f32>> = (100..103).map(|i| row(i, 32)).collect();
    let answers = client
        .infer(inputs.iter().map(|x| nested(x, &shape)).collect::<Vec<_>>())
        .unwrap();
    let here = libtorch_outputs(&out, &shape, &inputs);
    for ((_, answer), values) in answers.answers.iter().zip(&here) {
        let expected: Vec<f64> = answer
            .output
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap().iter())
            .flat_map(|pixel| pixel.as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(expected.len(), values.len());
        for (a, b) in expected.iter().zip(values) {
            assert!((*a as f32 - b).abs() <= 1e-5, "{a} vs {b}");
        }
    }
}

/// A kernel ridge classifier's probabilities for `inputs`, by the README's formulas over its
/// exported `parameters`.
fn kernel_ridge_by_readme(p: &Value, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let floats = |name: &str| -> Vec<f64> {
        p[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let (mean, scale, points) = (floats("mean"), floats("scale"), floats("points"));
    let (coefficients, intercepts) = (floats("coefficients"), floats("intercepts"));
    let gamma = p["gamma"].as_f64().unwrap();
    let features = p["features"].as_u64().unwrap() as usize;
    let outputs = p["outputs"].as_u64().unwrap() as usize;
    inputs
        .iter()
        .map(|x| {
            let z: Vec<f64> = (0..features)
                .map(|i| {
                    let z = (f64::from(x[i]) - mean[i]) / scale[i];
                    if z.is_finite() { z } else { 0.0 }
                })
                .collect();
            let mut decision = intercepts.clone();
            for (j, point) in points.chunks(features).enumerate() {
                let squared: f64 = point.iter().zip(&z).map(|(p, z)| (p - z) * (p - z)).sum();
                let k = (-gamma * squared).exp();
                for (o, d) in decision.iter_mut().enumerate() {
                    *d += k * coefficients[j * outputs + o];
                }
            }
            let max = decision.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = decision.iter().map(|d| (d - max).exp()).sum();
            decision
                .iter()
                .map(|d| ((d - max).exp() / total) as f32)
                .collect()
        })
        .collect()
}

#[test]
fn kernel_ridge_exports_as_json_that_answers_as_infer_by_the_readme() {
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": row(i, 3), "output": (["no", "yes"][usize::from(noise(i, 0) > 0.5)])}))
        .collect();
    let (_temp, home, mut client) = trained(
        "Input = [3]\nOutput = [2]\nlabels = [no, yes]\n",
        |id| id == "kernel_ridge",
        &examples,
    );
    let out = home.parent().unwrap().join("export");
    let report = export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(report.model.format, "easeml-classic-json");
    assert!(!out.join("model.pt").exists());
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("model.json")).unwrap()).unwrap();
    assert_eq!(model["family"], "kernel_ridge");
    assert_eq!(model["format_version"], 1);
    let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
    assert!(
        readme.contains("kernel_ridge: k[j] = exp(-gamma"),
        "{readme}"
    );

    // The README's formulas, over the parameters.
    let inputs: Vec<Vec<f32>> = (100..106).map(|i| row(i, 3)).collect();
    let by_readme = kernel_ridge_by_readme(&model["parameters"], &inputs);
    let answers = client.infer(inputs).unwrap();
    assert_same_answers(&answers, &by_readme, "kernel ridge by the README");
}

#[test]
fn an_ensemble_exports_its_members_that_answer_as_infer_when_added_up_by_weight() {
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": row(i, 5), "output": (["low", "mid", "high"][i % 3])}))
        .collect();
    let (_temp, home, mut client) = trained_runs(
        "Input = [5]\nOutput = [3]\nlabels = [low, mid, high]\n",
        |id| id == "mlp_small" || id == "kernel_ridge",
        &examples,
        2,
    );
    let runs = {
        let store = store(&home);
        let app = store.app_by_name("app").unwrap().unwrap();
        store.runs(app.id).unwrap()
    };
    let run_of = |candidate: &str| {
        runs.iter()
            .find(|run| run.candidate.starts_with(candidate) && run.quality.is_some())
            .unwrap_or_else(|| panic!("no {candidate} run: {runs:?}"))
            .id
    };
    record_ensemble(
        &home,
        &[(run_of("mlp_small"), 0.25), (run_of("kernel_ridge"), 0.75)],
    );
    let out = home.parent().unwrap().join("export");
    let report = export_app(&store(&home), "app", &out, false).unwrap();
    assert_eq!(report.model.format, "ensemble");
    assert_eq!(report.model.output, "probabilities");
    assert_eq!(report.members.len(), 2);
    assert!(
        report
            .to_string()
            .starts_with("exported an ensemble of 2 models to "),
        "{report}"
    );
    assert!(!out.join("model.pt").exists() && !out.join("model.json").exists());
    assert!(out.join("members/1/model.pt").is_file());
    assert!(out.join("members/2/model.json").is_file());
    assert!(!out.join(".members.partial").exists());
    let meta = metadata(&out);
    assert_eq!(meta["model"]["format"], "ensemble", "{meta}");
    assert_eq!(meta["format_version"], 1);
    let members = meta["ensemble"]["members"].as_array().expect("members");
    assert_eq!(members.len(), 2, "{meta}");
    assert_eq!(members[0]["dir"], "members/1");
    assert_eq!(members[0]["weight"], 0.25);
    assert_eq!(members[0]["model"]["file"], "model.pt");
    assert_eq!(members[1]["weight"], 0.75);
    assert_eq!(members[1]["model"]["family"], "kernel_ridge");
    assert_eq!(meta["ensemble"]["quality"], 1.0);
    let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
    assert!(
        readme.contains("| 2 | `members/2` | kernel_ridge"),
        "{readme}"
    );
    let member_readme = std::fs::read_to_string(out.join("members/2").join(README_FILE)).unwrap();
    assert!(
        member_readme.contains("kernel_ridge: k[j] = exp(-gamma"),
        "{member_readme}"
    );

    // The members' answers, each as its README says, added up by weight: what `infer` answers.
    let inputs: Vec<Vec<f32>> = (100..107).map(|i| row(i, 5)).collect();
    let network = libtorch_outputs(&out.join("members/1"), &[5], &inputs);
    let model: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("members/2/model.json")).unwrap())
            .unwrap();
    let ridge = kernel_ridge_by_readme(&model["parameters"], &inputs);
    let added: Vec<Vec<f32>> = network
        .iter()
        .zip(&ridge)
        .map(|(a, b)| a.iter().zip(b).map(|(a, b)| 0.25 * a + 0.75 * b).collect())
        .collect();
    let answers = client.infer(inputs).unwrap();
    assert_same_answers(&answers, &added, "the ensemble's members added up");
    for ((_, answer), added) in answers.answers.iter().zip(&added) {
        let probabilities = answer.probabilities.as_ref().expect("probabilities");
        for (got, want) in probabilities.iter().zip(added) {
            assert!((got - want).abs() <= 1e-5, "{probabilities:?} vs {added:?}");
        }
    }

    // Once one run is served again, `--force` writes its model over the ensemble's folder.
    {
        let mut store = store(&home);
        let app = store.app_by_name("app").unwrap().unwrap();
        assert!(store.remove_ensemble(app.id, app.data_version).unwrap());
    }
    let report = export_app(&store(&home), "app", &out, true).unwrap();
    assert!(report.members.is_empty());
    assert!(!out.join("members").exists(), "the members are gone");
    assert!(out.join(report.model.file).is_file());
    assert!(metadata(&out)["ensemble"].is_null());
}

/// The values of the leaf `x` falls into, by the README's walk of a tree.
fn leaf(tree: &Value, x: &[f32]) -> Vec<f64> {
    let ints = |name: &str| -> Vec<u64> {
        tree[name]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let (feature, next) = (ints("feature"), ints("next"));
    let threshold: Vec<f64> = tree["threshold"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let width = tree["width"].as_u64().unwrap() as usize;
    let mut node = 0;
    while feature[node] != 4_294_967_295 {
        node = if f64::from(x[feature[node] as usize]) > threshold[node] {
            next[node] as usize
        } else {
            node + 1
        };
    }
    let leaves = tree["leaves"].as_array().unwrap();
    let start = next[node] as usize * width;
    leaves[start..start + width]
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn tree_ensembles_export_as_json_that_answers_as_infer_by_the_readme() {
    let examples: Vec<Value> = (0..30)
        .map(|i| json!({"input": row(i, 3), "output": (["no", "yes"][usize::from(noise(i, 1) > 0.5)])}))
        .collect();
    for family in ["gbdt", "random_forest"] {
        let (_temp, home, mut client) = trained(
            "Input = [3]\nOutput = [2]\nlabels = [no, yes]\n",
            |id| id == family,
            &examples,
        );
        let out = home.parent().unwrap().join("export");
        export_app(&store(&home), "app", &out, false).unwrap();
        let model: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("model.json")).unwrap())
                .unwrap();
        assert_eq!(model["family"], family);
        let p = &model["parameters"];
        let trees = p["trees"].as_array().unwrap();
        let outputs = p["outputs"].as_u64().unwrap() as usize;
        let inputs: Vec<Vec<f32>> = (100..106).map(|i| row(i, 3)).collect();
        let by_readme: Vec<Vec<f32>> = inputs
            .iter()
            .map(|x| {
                if family == "gbdt" {
                    let mut score: Vec<f64> = p["base"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect();
                    for (index, tree) in trees.iter().enumerate() {
                        score[index % outputs] += leaf(tree, x)[0];
                    }
                    let max = score.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let total: f64 = score.iter().map(|s| (s - max).exp()).sum();
                    score
                        .iter()
                        .map(|s| ((s - max).exp() / total) as f32)
                        .collect()
                } else {
                    let mut mean = vec![0.0; outputs];
                    for tree in trees {
                        for (m, v) in mean.iter_mut().zip(leaf(tree, x)) {
                            *m += v / trees.len() as f64;
                        }
                    }
                    mean.iter().map(|&m| m as f32).collect()
                }
            })
            .collect();
        let answers = client.infer(inputs).unwrap();
        assert_same_answers(&answers, &by_readme, &format!("{family} by the README"));
    }
}

/// The `.eml` of a series app: a chain of steps of two values, two classes.
const SERIES_APP: &str = "type Input\n  x :: Tensor[2]\n  next :: Nullable{Input}\nend\nOutput = [2]\nlabels = [down, up]\n";

#[test]
fn the_convolutional_series_classifiers_export_as_torchscript_that_answers_as_infer() {
    use by_readme::{chain_of, series_steps};
    let examples: Vec<Value> = (0..24)
        .map(|i| {
            json!({"input": chain_of(&series_steps(i, 12 + i % 8)), "output": (["down", "up"][i % 2])})
        })
        .collect();
    // Seven series of 9 to 19 steps in one batch padded to the longest: another batch size and
    // other lengths than the trace's.
    let queries: Vec<Vec<[f32; 2]>> = (100..107).map(|i| series_steps(i, 9 + i % 11)).collect();
    let (x, lengths) = scripted::padded(&queries);
    for family in ["fcn", "resnet1d", "inception_time"] {
        let (_temp, home, mut client) = trained(SERIES_APP, |id| id.starts_with(family), &examples);
        let out = home.parent().unwrap().join("export");
        let report = export_app(&store(&home), "app", &out, false).unwrap();
        assert_eq!(report.model.format, "torchscript", "{family}");
        assert_eq!(report.model.input_shape, vec![-1, 2], "{family}");
        assert_eq!(
            metadata(&out)["call"]["how"],
            "torch.jit.load(file)(x, lengths)"
        );
        let readme = std::fs::read_to_string(out.join(README_FILE)).unwrap();
        assert!(readme.contains("out = model(x, lengths)"), "{readme}");

        let module = tch::CModule::load(out.join("model.pt")).unwrap();
        let y = tch::no_grad(|| module.forward_ts(&[x.shallow_clone(), lengths.shallow_clone()]))
            .unwrap();
        let here = scripted::rows(&y);
        let answers = client
            .infer(queries.iter().map(|steps| chain_of(steps)))
            .unwrap();
        assert_same_answers(&answers, &here, &format!("{family} in libtorch"));
    }
}

#[test]
fn export_refusals_are_in_words() {
    let chain = |i: usize| {
        let sign = if i.is_multiple_of(2) { 1.0 } else { -1.0 };
        json!(
            (0..3)
                .map(|t| json!({"x": [sign * (0.5 + noise(i, t)), noise(i, t + 9)]}))
                .collect::<Vec<_>>()
        )
    };
    let examples: Vec<Value> = (0..24)
        .map(|i| json!({"input": chain(i), "output": (["down", "up"][i % 2])}))
        .collect();
    let (_temp, home, _client) = trained(SERIES_APP, |id| id == "gru", &examples);
    let store = store(&home);
    let dir = home.parent().unwrap();
    let message = |result: easeml_engine::Result<_>| match result {
        Ok(_) => panic!("an export was made"),
        Err(error) => error.to_string(),
    };

    let error = message(export_app(&store, "nope", &dir.join("a"), false));
    assert!(
        error.starts_with("no app named `nope` in the store at"),
        "{error}"
    );

    // An ensemble over a folder (`--force`) where its `members` folder would go is a file of the
    // user's: refused in words, and the folder left as it was (no staging folder either).
    let gru = store
        .runs(store.app_by_name("app").unwrap().unwrap().id)
        .unwrap()[0]
        .id;
    record_ensemble(&home, &[(gru, 0.5), (gru, 0.5)]);
    let ensemble_store = easeml_store::Store::open(&home).unwrap();
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("notes.txt"), "mine").unwrap();
    std::fs::write(kept.join("members"), "also mine").unwrap();
    let error = message(export_app(&ensemble_store, "app", &kept, true));
    assert!(
        error.starts_with("cannot write ") && error.contains("kept/members: "),
        "{error}"
    );
    let mut left: Vec<_> = std::fs::read_dir(&kept)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["members", "notes.txt"],
        "a refused export over a folder leaves it as it was"
    );
    assert_eq!(
        std::fs::read_to_string(kept.join("members")).unwrap(),
        "also mine"
    );
    {
        let mut writer = easeml_store::Store::open(&home).unwrap();
        let app = writer.app_by_name("app").unwrap().unwrap();
        assert!(writer.remove_ensemble(app.id, app.data_version).unwrap());
    }

    // A folder with something in it, and a file.
    let full = dir.join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let error = message(export_app(&store, "app", &full, false));
    assert!(
        error.ends_with("exists and is not empty; give a new or empty folder, or --force to write the export over it"),
        "{error}"
    );
    let error = message(export_app(&store, "app", &full.join("notes.txt"), true));
    assert!(
        error.ends_with("notes.txt exists and is not a folder; give a new or empty folder"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(full.join("notes.txt")).unwrap(),
        "mine"
    );

    // An app without a model yet.
    let mut other = Client::open(
        &Connection::embedded(&home),
        app("app empty\nInput = [2]\nOutput = [2]\n", |_| true),
    )
    .unwrap();
    other
        .feed_lines(
            std::io::Cursor::new("{\"input\": [1, 2], \"output\": \"a\"}\n"),
            &FeedOptions::default(),
        )
        .unwrap();
    let error = message(export_app(&store, "empty", &dir.join("c"), false));
    assert_eq!(
        error,
        "app empty has no trained model yet; feed examples and train first"
    );
    assert!(
        !dir.join("c").exists(),
        "no folder is made for a refused export"
    );
}
