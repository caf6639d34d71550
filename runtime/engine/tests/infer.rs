//! Train and infer through the client library for every workload: small data made here is fed in the
//! JSON Lines form, the engine trains until the app has a model, and `infer` answers in the app's own
//! terms (label names, nested arrays of the output shape, chains of output records).

use std::io::Cursor;

use easeml_client::{CheckedOutput, Client, Connection, Error, FeedOptions, Score};
use easeml_compiler::{Registry, compile, schema::Schema};
use easeml_engine::{Engine, EngineConfig};
use serde_json::{Value, json};

fn schema(source: &str) -> Schema {
    compile(source, "app", &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
        .schema
}

/// The app of a schema, described by the manifest easemlc writes for it.
fn spec(schema: &Schema) -> easeml_client::AppSpec {
    let compiled = easeml_compiler::Compiled::from_schema(schema.clone(), &Registry::builtin())
        .expect("a template");
    easeml_client::AppSpec::from_manifest(&easeml_compiler::codegen::manifest(&compiled)).unwrap()
}

/// The app of a small `.eml` program.
fn app(source: &str) -> easeml_client::AppSpec {
    spec(&schema(source))
}

/// A deterministic value in [0, 1).
fn noise(i: usize, j: usize) -> f64 {
    (((i * 7919 + j * 104_729) % 1000) as f64) / 1000.0
}

fn image(i: usize, side: usize, bright: bool) -> Value {
    let base = if bright { 0.6 } else { 0.0 };
    json!(
        (0..side)
            .map(|r| (0..side)
                .map(|c| json!([base + 0.4 * noise(i, r * side + c)]))
                .collect::<Vec<_>>())
            .collect::<Vec<_>>()
    )
}

fn chain(i: usize, length: usize, positive: bool) -> Value {
    let sign = if positive { 1.0 } else { -1.0 };
    json!(
        (0..length)
            .map(|t| json!({"x": [sign * (0.5 + noise(i, t)), noise(i, t + 9)]}))
            .collect::<Vec<_>>()
    )
}

fn tree(i: usize, depth: usize) -> Value {
    let node = |depth: usize| json!([noise(i, depth), 0.5, 1.0]);
    let mut current = json!({"v": node(0), "left": null, "right": null});
    for level in 1..=depth {
        current = json!({"v": node(level), "left": current, "right": null});
    }
    current
}

struct Case {
    name: &'static str,
    source: &'static str,
    /// The JSON Lines record of example `i`.
    example: fn(usize) -> Value,
    /// Checks one answer's output.
    check: fn(&Value) -> bool,
}

const CASES: &[Case] = &[
    Case {
        name: "image classification",
        source: "Input = [6, 6, 1]\nOutput = [2]\nlabels = [dark, bright]\n",
        example: |i| json!({"input": image(i, 6, i % 2 == 0), "output": if i % 2 == 0 { "bright" } else { "dark" }}),
        check: |output| matches!(output.as_str(), Some("dark" | "bright")),
    },
    Case {
        name: "image recovery",
        source: "Input = [6, 6, 1]\nOutput = [6, 6, 1]\n",
        example: |i| json!({"input": image(i, 6, i % 2 == 0), "output": image(i, 6, i % 2 == 0)}),
        check: |output| {
            output.as_array().is_some_and(|rows| rows.len() == 6)
                && output[0].as_array().is_some_and(|row| row.len() == 6)
                && output[0][0]
                    .as_array()
                    .is_some_and(|pixel| pixel.len() == 1)
        },
    },
    Case {
        name: "time-series classification",
        source: "type Input\n  x :: Tensor[2]\n  next :: Nullable{Input}\nend\nOutput = [2]\nlabels = [down, up]\n",
        example: |i| json!({"input": chain(i, 3 + i % 4, i % 2 == 0), "output": if i % 2 == 0 { "up" } else { "down" }}),
        check: |output| matches!(output.as_str(), Some("down" | "up")),
    },
    Case {
        name: "time-series translation",
        source: "type Input\n  x :: Tensor[2]\n  next :: Nullable{Input}\nend\ntype Output\n  x :: Tensor[2]\n  next :: Nullable{Output}\nend\n",
        example: |i| json!({"input": chain(i, 3, true), "output": chain(i + 1, 3, false)}),
        // A chain answers as a list of records, the form a stored example takes too.
        check: |output| {
            output.as_array().is_some_and(|records| {
                !records.is_empty()
                    && records.iter().all(|record| {
                        record
                            .get("x")
                            .is_some_and(|x| x.as_array().is_some_and(|x| x.len() == 2))
                    })
            })
        },
    },
    Case {
        name: "tree classification",
        source: "type Input\n  v :: Tensor[3]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [2]\nlabels = [even, odd]\n",
        example: |i| json!({"input": tree(i, i % 4), "output": if i % 2 == 0 { "even" } else { "odd" }}),
        check: |output| matches!(output.as_str(), Some("even" | "odd")),
    },
    Case {
        name: "tabular regression",
        source: "Input = [3]\nOutput = [1]\n",
        example: |i| json!({"input": [noise(i, 0), noise(i, 1), noise(i, 2)], "output": [noise(i, 0) - noise(i, 1)]}),
        check: |output| {
            output
                .as_array()
                .is_some_and(|values| values.len() == 1 && values[0].is_f64())
        },
    },
    Case {
        name: "general classification",
        source: "type Input\n  image :: Tensor[3, 3, 3]\n  meta :: Tensor[2]\nend\nOutput = [2]\n",
        example: |i| json!({"input": {"image": vec![vec![vec![noise(i, 0); 3]; 3]; 3], "meta": [(i % 2) as f64, 0.5]}, "output": if i % 2 == 0 { "a" } else { "b" }}),
        check: |output| matches!(output.as_str(), Some("a" | "b")),
    },
    Case {
        // Input and output of different types: the answer is an output, never `null`.
        name: "general auto-encoder",
        source: "Input = [2, 2, 2, 2]\nOutput = [3, 3]\n",
        example: |i| json!({"input": vec![vec![vec![vec![noise(i, 0); 2]; 2]; 2]; 2], "output": vec![vec![noise(i, 0); 3]; 3]}),
        check: |output| {
            output.as_array().is_some_and(|rows| {
                rows.len() == 3
                    && rows.iter().all(|row| {
                        row.as_array().is_some_and(|values| {
                            values.len() == 3 && values.iter().all(Value::is_f64)
                        })
                    })
            })
        },
    },
];

#[test]
fn every_workload_trains_and_answers_in_its_own_terms() {
    easeml_engine::install_local_models();
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let mut client = Client::open(&Connection::embedded(&home), app(case.source)).unwrap();
        let feed: String = (0..24)
            .map(|i| format!("{}\n", (case.example)(i)))
            .collect();
        client
            .feed_lines(Cursor::new(feed), &FeedOptions::default())
            .unwrap_or_else(|error| panic!("{}: {error}", case.name));

        let queries: String = (100..104)
            .map(|i| format!("{}\n", (case.example)(i)))
            .collect();
        match client.infer_lines(Cursor::new(queries.clone()), &FeedOptions::default()) {
            Err(Error::NoModel {
                training: false, ..
            }) => {}
            other => panic!("{}: expected `no model yet`, got {other:?}", case.name),
        }

        let mut config = EngineConfig::for_device(tch_cpu());
        config.max_run_seconds = 4.0;
        config.max_epochs = 2;
        config.min_steps = 0; // the epochs as set: a quick test, not a good model
        let mut engine = Engine::open(&home, config).unwrap();
        let mut trained = false;
        for _ in 0..4 {
            match engine.step(None, &mut |_| {}).unwrap() {
                Some(easeml_engine::Step::Run(run)) if run.quality.is_some() => {
                    trained = true;
                    break;
                }
                Some(_) => continue,
                None => break,
            }
        }
        assert!(
            trained,
            "{}: no run finished: {:?}",
            case.name,
            client.status().unwrap()
        );
        drop(engine);

        let report = client
            .infer_lines(Cursor::new(queries), &FeedOptions::default())
            .unwrap_or_else(|error| panic!("{}: {error}", case.name));
        assert_eq!(report.answers.len(), 4, "{}", case.name);
        for (line, answer) in &report.answers {
            assert!(
                (case.check)(&answer.output),
                "{} line {line}: {}",
                case.name,
                answer.output
            );
        }
        // Every query carried its expected output, so the answers are scored.
        match report.score {
            Some(Score::Accuracy { total, .. }) | Some(Score::MeanSquaredError { total, .. }) => {
                assert_eq!(total, 4, "{}", case.name)
            }
            None => panic!("{}: no score", case.name),
        }
        // A value answer in the serde form of the generated `Output`: a record of every field by
        // name, a chain as nested records (`next`), as long as the answer's list.
        if let (Some((_, answer)), CheckedOutputKind::Object) =
            (report.answers.first(), output_kind(client.schema()))
        {
            let typed: Value = client
                .typed_output(answer.clone())
                .unwrap_or_else(|error| panic!("{}: {error}", case.name));
            let names: Vec<&str> = client
                .schema()
                .output
                .fields
                .iter()
                .map(|field| field.name.as_str())
                .collect();
            let keys: Vec<&str> = typed
                .as_object()
                .unwrap_or_else(|| panic!("{}: {typed}", case.name))
                .keys()
                .map(String::as_str)
                .collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            assert_eq!(keys, sorted, "{}: {typed}", case.name);
            if let Some(records) = answer.output.as_array().filter(|_| names.contains(&"next")) {
                let mut length = 0;
                let mut at = &typed;
                while !at.is_null() {
                    assert_eq!(at["x"], records[length]["x"], "{}", case.name);
                    length += 1;
                    at = &at["next"];
                }
                assert_eq!(length, records.len(), "{}: {typed}", case.name);
            }
            if case.name == "tabular regression" {
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Output {
                    field1: easeml_client::tensor::Tensor,
                }
                let output: Output = client.typed_output(answer.clone()).unwrap();
                assert_eq!(output.field1.dims(), [1]);
                assert_eq!(
                    f64::from(output.field1.values()[0]),
                    answer.output[0].as_f64().unwrap()
                );
            }
            // An answer that is not an output of the app is refused in words.
            let mut wrong = answer.clone();
            wrong.output = json!("nonsense");
            let error = client.typed_output::<Value>(wrong).unwrap_err();
            assert!(
                matches!(error, Error::Model(easeml_serving::ModelError::Answer(_))),
                "{error:?}"
            );
            let error = error.to_string();
            assert!(
                error.starts_with("the served model answered what the app cannot take: `\"nonsense\"`, which is not an output of the app"),
                "{error}"
            );
        }
        // An answer and a stored example of the same object are the same JSON: fed back as an
        // example's output, the answer is stored and renders exactly as it was answered.
        if let (Some((_, answer)), CheckedOutputKind::Object) =
            (report.answers.first(), output_kind(client.schema()))
        {
            let line = format!(
                "{}\n",
                json!({"input": (case.example)(0)["input"], "output": answer.output})
            );
            let fed = client
                .feed_lines(Cursor::new(line), &FeedOptions::default())
                .unwrap_or_else(|error| panic!("{}: {error}", case.name));
            let id = *fed.ids.last().expect("one example stored");
            let stored = client.example(id).unwrap();
            let CheckedOutput::Object(object) = &stored.output else {
                panic!("{}: stored as a label", case.name)
            };
            assert_eq!(
                easeml_client::object::object_to_json(&client.schema().output, object),
                answer.output,
                "{}",
                case.name
            );
        }
    }
}

/// Whether an app's outputs are labels or objects.
enum CheckedOutputKind {
    Label,
    Object,
}

fn output_kind(schema: &Schema) -> CheckedOutputKind {
    if schema.label_capacity().is_some() {
        CheckedOutputKind::Label
    } else {
        CheckedOutputKind::Object
    }
}

fn tch_cpu() -> tch::Device {
    tch::Device::Cpu
}

#[test]
fn typed_inputs_are_checked_before_any_model_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::open(
        &Connection::embedded(dir.path().join("home")),
        app("Input = [3]\nOutput = [2]\n"),
    )
    .unwrap();
    let error = client.infer([vec![1.0, 2.0]]).unwrap_err();
    assert!(matches!(error, Error::BadInput { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("1 of 1 input(s) are bad; nothing was answered:")
            && message.contains("input 1")
            && message.contains("expected shape [3]"),
        "{message}"
    );
    let error = client.infer([vec![1.0, 2.0, 3.0]]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no model of app `app` is trained yet"),
        "{error}"
    );
    assert!(error.to_string().contains("train"), "{error}");
}
