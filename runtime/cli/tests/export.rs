//! `easeml export APP --store DIR --out DIR`: the real binary over a store whose app was trained by
//! `easeml train` (with `--plot`: its quality-over-time files), and its refusals in words.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use easeml_runtime::{AppSpec, Client, Connection};

fn easeml(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(arguments)
        .env_remove("EASEML_STORE")
        .env_remove("EASEML_HOME")
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The app of `source` with one candidate, the logistic regression (a network: TorchScript).
fn logistic(source: &str) -> AppSpec {
    let compiled =
        easeml_compiler::compile(source, "app", &easeml_compiler::Registry::builtin()).unwrap();
    let mut manifest = easeml_compiler::codegen::manifest(&compiled);
    manifest
        .candidates
        .retain(|candidate| candidate.id == "logistic");
    assert_eq!(manifest.candidates.len(), 1);
    AppSpec::from_manifest(&manifest).unwrap()
}

fn feed(data: &Path, spec: AppSpec, lines: &str) {
    let mut client = Client::open(&Connection::embedded(data), spec).unwrap();
    client
        .feed_lines(std::io::Cursor::new(lines.to_owned()), &Default::default())
        .unwrap();
}

#[test]
fn export_writes_the_served_model_and_refuses_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    let store = data.to_str().unwrap();
    let lines: String = (0..24)
        .map(|i| {
            let x = i as f32 / 24.0;
            let label = if i % 2 == 0 { "left" } else { "right" };
            format!("[{x}, {}] {label}\n", 1.0 - x)
        })
        .collect();
    feed(&data, logistic(common::SIDES), &lines);
    let out = dir.path().join("model");
    let out = out.to_str().unwrap();

    let no_model = easeml(&["export", "sides", "--store", store, "--out", out]);
    assert!(!no_model.status.success());
    assert!(
        stderr(&no_model)
            .contains("error: app sides has no trained model yet; feed examples and train first"),
        "{}",
        stderr(&no_model)
    );

    let plot = dir.path().join("plot");
    let train = easeml(&[
        "train",
        "--store",
        store,
        "--budget",
        "60s",
        "--max-run",
        "5s",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(train.status.success(), "{}", stderr(&train));
    let csv = std::fs::read_to_string(plot.join("quality.csv")).unwrap();
    assert!(csv.starts_with("app,minutes,best_quality\nsides,"), "{csv}");
    // The figures come from the lab's plots (easeml-cli's default feature `lab`).
    assert_eq!(
        plot.join("quality.svg").is_file(),
        cfg!(feature = "lab"),
        "{}",
        stderr(&train)
    );
    let export = easeml(&["export", "sides", "--store", store, "--out", out]);
    assert!(export.status.success(), "{}", stderr(&export));
    let said = String::from_utf8_lossy(&export.stdout);
    assert!(said.starts_with("exported logistic (run "), "{said}");
    let model = Path::new(out);
    assert!(model.join("model.pt").is_file());
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("easeml-export.json")).unwrap())
            .unwrap();
    assert_eq!(metadata["app"], "sides");
    assert_eq!(metadata["run"]["candidate"], "logistic");
    assert_eq!(metadata["labels"], serde_json::json!(["left", "right"]));

    let again = easeml(&["export", "sides", "--store", store, "--out", out]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("is not empty"),
        "{}",
        stderr(&again)
    );
    let forced = easeml(&["export", "sides", "--store", store, "--out", out, "--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));

    let unknown = easeml(&["export", "nope", "--store", store, "--out", out]);
    assert!(
        stderr(&unknown).contains("error: no app named `nope` in the store at"),
        "{}",
        stderr(&unknown)
    );
    let empty = dir.path().join("empty");
    let no_store = easeml(&[
        "export",
        "sides",
        "--store",
        empty.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(
        stderr(&no_store).contains("error: no easeml store in"),
        "{}",
        stderr(&no_store)
    );
}
