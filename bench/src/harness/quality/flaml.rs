//! The `flaml` peer of `easeml bench quality`: FLAML AutoML (`bench/peers/flaml_peer.py`) run by
//! the peer Python (`$EASEML_PEER_PYTHON`, else `bench/peers/.venv`, as for the Optuna peers) on the
//! flattened features of `knn.rs`, one process per task with `time_budget` = the command's budget
//! divided by the number of tasks. This module writes each task's input file and reads the
//! predictions back; the scoring is `knn::score`, as for every method.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::task::Target;
use crate::harness::peers::{peer_python, repository_file};

/// The peer script, in the repository.
pub const SCRIPT: &str = "bench/peers/flaml_peer.py";

/// The first words of every error that stops the command for want of FLAML.
const LEAVE_OUT: &str = "the FLAML peer cannot run (leave it out with --peers knn1)";

/// The peer Python, checked to import FLAML (before any training, so that a missing venv costs
/// nothing).
pub fn check_python() -> anyhow::Result<PathBuf> {
    let python = peer_python(
        "the FLAML peer",
        "FLAML (flaml[automl])",
        "requirements-flaml.txt",
    )
    .map_err(|error| error.context(LEAVE_OUT))?;
    let output = Command::new(&python)
        .args(["-c", "import flaml, numpy"])
        .output()
        .with_context(|| {
            format!(
                "cannot run the peer Python `{}` (set {} to a Python with FLAML, or create \
                 bench/peers/.venv: see bench/peers/requirements-flaml.txt)",
                python.display(),
                crate::harness::peers::PEER_PYTHON_ENV
            )
        })?;
    if !output.status.success() {
        bail!(
            "{LEAVE_OUT}: the peer Python `{}` cannot import FLAML ({}): install it with\n  {} -m pip install -r {}",
            python.display(),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("no message"),
            python.display(),
            repository_file("bench/peers/requirements-flaml.txt").display()
        );
    }
    Ok(python)
}

/// The input file of one task (the format is documented in `bench/peers/flaml_peer.py`).
pub fn input_json(
    classification: bool,
    time_budget: f64,
    train_x: &[Vec<f32>],
    train_y: &[Target],
    test_x: &[Vec<f32>],
) -> Value {
    let train_y: Vec<Value> = train_y
        .iter()
        .map(|target| match target {
            Target::Class(label) => json!(label),
            Target::Values(values) => json!(values),
        })
        .collect();
    json!({
        "task": if classification { "classification" } else { "regression" },
        "time_budget": time_budget,
        "seed": 0,
        "train_x": train_x,
        "train_y": train_y,
        "test_x": test_x,
    })
}

/// What FLAML answered for one task.
#[derive(Debug, Clone, PartialEq)]
pub struct FlamlAnswer {
    /// One prediction per test row, in order.
    pub predictions: Vec<Target>,
    /// FLAML's best estimator (e.g. `lgbm`).
    pub best_estimator: String,
}

/// Reads the peer's output file: exactly `expected` predictions, labels for classification,
/// lists of numbers otherwise.
pub fn parse_predictions(
    text: &str,
    classification: bool,
    expected: usize,
) -> anyhow::Result<FlamlAnswer> {
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let predictions = value["predictions"]
        .as_array()
        .context("no `predictions` list")?;
    if predictions.len() != expected {
        bail!(
            "{} predictions for {expected} test examples",
            predictions.len()
        );
    }
    let predictions = predictions
        .iter()
        .enumerate()
        .map(|(index, prediction)| {
            let target = if classification {
                match prediction {
                    Value::String(label) => Some(Target::Class(label.clone())),
                    Value::Number(number) => Some(Target::Class(number.to_string())),
                    _ => None,
                }
            } else {
                prediction.as_array().and_then(|values| {
                    values
                        .iter()
                        .map(|v| v.as_f64().map(|v| v as f32))
                        .collect::<Option<Vec<f32>>>()
                        .map(Target::Values)
                })
            };
            target.with_context(|| format!("prediction {}: unexpected `{prediction}`", index + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(FlamlAnswer {
        predictions,
        best_estimator: value["best_estimator"].as_str().unwrap_or("").to_owned(),
    })
}

/// Runs FLAML on one task: writes `work/APP.input.json`, runs the script (its output passed
/// through), reads `work/APP.predictions.json`.
pub fn run(
    python: &Path,
    work: &Path,
    app: &str,
    input: &Value,
    expected: usize,
) -> anyhow::Result<FlamlAnswer> {
    std::fs::create_dir_all(work).with_context(|| format!("cannot create `{}`", work.display()))?;
    let input_path = work.join(format!("{app}.input.json"));
    let output_path = work.join(format!("{app}.predictions.json"));
    let _ = std::fs::remove_file(&output_path);
    std::fs::write(&input_path, serde_json::to_vec(input)?)
        .with_context(|| format!("cannot write `{}`", input_path.display()))?;
    let script = repository_file(SCRIPT);
    let status = Command::new(python)
        .arg(&script)
        .arg(&input_path)
        .arg(&output_path)
        .status()
        .with_context(|| format!("cannot run `{}`", python.display()))?;
    if !status.success() {
        bail!(
            "{app}: the FLAML peer `{} {}` failed ({status})",
            python.display(),
            script.display()
        );
    }
    let text = std::fs::read_to_string(&output_path)
        .with_context(|| format!("cannot read `{}`", output_path.display()))?;
    let classification = input["task"] == "classification";
    parse_predictions(&text, classification, expected)
        .with_context(|| format!("{app}: `{}`", output_path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_input_file_holds_the_features_labels_and_budget() {
        let input = input_json(
            true,
            7.5,
            &[vec![1.0, 2.5], vec![0.0, -1.0]],
            &[Target::Class("a".into()), Target::Class("b".into())],
            &[vec![3.0, 4.0]],
        );
        assert_eq!(
            input,
            json!({
                "task": "classification", "time_budget": 7.5, "seed": 0,
                "train_x": [[1.0, 2.5], [0.0, -1.0]], "train_y": ["a", "b"],
                "test_x": [[3.0, 4.0]],
            })
        );
        let regression = input_json(
            false,
            1.0,
            &[vec![1.0]],
            &[Target::Values(vec![0.5, 2.0])],
            &[],
        );
        assert_eq!(regression["task"], "regression");
        assert_eq!(regression["train_y"], json!([[0.5, 2.0]]));
    }

    #[test]
    fn predictions_are_read_back_and_checked() {
        let answer = parse_predictions(
            r#"{"predictions": ["a", "b", 3], "best_estimator": "lgbm", "seconds": 1.0}"#,
            true,
            3,
        )
        .unwrap();
        assert_eq!(
            answer.predictions,
            vec![
                Target::Class("a".into()),
                Target::Class("b".into()),
                Target::Class("3".into())
            ]
        );
        assert_eq!(answer.best_estimator, "lgbm");
        let values = parse_predictions(r#"{"predictions": [[1.5], [2]]}"#, false, 2).unwrap();
        assert_eq!(
            values.predictions,
            vec![Target::Values(vec![1.5]), Target::Values(vec![2.0])]
        );
        let short = parse_predictions(r#"{"predictions": ["a"]}"#, true, 2).unwrap_err();
        assert!(
            short
                .to_string()
                .contains("1 predictions for 2 test examples")
        );
        let bad = parse_predictions(r#"{"predictions": [["x"]]}"#, false, 1).unwrap_err();
        assert!(bad.to_string().contains("prediction 1"), "{bad}");
        assert!(parse_predictions("not json", true, 1).is_err());
    }
}
