//! Export: the model an app serves (the one `infer` answers with, [`ServedModel::load`]) written to
//! a folder, to run without easeml. One function, [`export_app`], behind the three entry points
//! (`<app> export --out DIR`, `easeml export APP --store DIR --out DIR`, Python's
//! `app.export(path)`). The folder holds:
//!
//! - the model: `model.pt` (TorchScript, a network) or `model.json` (a classic model), written by
//!   the trainer (`easeml_trainer::export`, which says what is supported and how each is called);
//! - `easeml-export.json`, the metadata ([`METADATA_FILE`]): the app, its schema, the label names
//!   in class order, the run (id, candidate, data version, quality and its metric), the model's
//!   file, input and output shapes, dtype and layout, and the format version;
//! - `README.md`: how to load it in Python.
//!
//! The folder must be new or empty unless `force` is given (then the export's files in it are
//! written over, and the other form's model file is removed).

use std::path::{Path, PathBuf};

use easeml_serving::QualityMetric;
use easeml_store::{RunId, Store};
use easeml_trainer::ExportedModel;
use easeml_trainer::export::{
    ANY_LENGTH, CLASSIC_FILE, CLASSIC_README, FORMAT_VERSION, TORCHSCRIPT_FILE,
};
use serde_json::json;
use tch::Device;

use crate::error::{Error, Result};
use crate::model::ServedModel;

/// The metadata file of an export.
pub const METADATA_FILE: &str = "easeml-export.json";

/// The README of an export.
pub const README_FILE: &str = "README.md";

/// What [`export_app`] wrote.
#[derive(Debug, Clone)]
pub struct ExportReport {
    /// The folder.
    pub dir: PathBuf,
    /// The run whose model it is.
    pub run: RunId,
    /// That run's number within the app (what people see).
    pub run_number: u64,
    /// That run's candidate.
    pub candidate: String,
    /// The model's file and how to call it.
    pub model: ExportedModel,
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exported {} (run {}) as {} to {}: {}, {}, {}",
            self.candidate,
            self.run_number,
            self.model.format,
            self.dir.display(),
            self.model.file,
            METADATA_FILE,
            README_FILE
        )
    }
}

/// Writes the served model of the app named `app` in `store` to the folder `out` (created if
/// missing). Errors, in words: no such app, no trained model yet, `out` not a folder or not empty
/// (unless `force`), a model the export does not support.
pub fn export_app(store: &Store, app: &str, out: &Path, force: bool) -> Result<ExportReport> {
    let Some(stored) = store.app_by_name(app)? else {
        return Err(Error::Export(format!(
            "no app named `{app}` in the store at {}",
            store.home().display()
        )));
    };
    check_out_dir(out, force)?;
    let Some(mut served) = ServedModel::load(store, stored.id, Device::Cpu)? else {
        return Err(Error::Export(format!(
            "app {app} has no trained model yet; feed examples and train first"
        )));
    };
    let predictor = served.predictor_mut()?;
    let made = !out.exists();
    std::fs::create_dir_all(out).map_err(|error| io_error(out, error))?;
    let model = match predictor.export(out) {
        Ok(model) => model,
        Err(error) => {
            if made {
                // Best effort: a refused export leaves no folder behind.
                let _ = std::fs::remove_dir_all(out);
            }
            return Err(error.into());
        }
    };
    // `--force` over an export of the other form: one model file in the folder.
    let other = if model.file == TORCHSCRIPT_FILE {
        CLASSIC_FILE
    } else {
        TORCHSCRIPT_FILE
    };
    let other = out.join(other);
    if other.is_file() {
        std::fs::remove_file(&other).map_err(|error| io_error(&other, error))?;
    }
    let run = served.run().clone();
    let schema = &served.app().schema;
    let labels = served.labels();
    let metric = QualityMetric::of(schema);
    let metadata = json!({
        "format": "easeml-export",
        "format_version": FORMAT_VERSION,
        "easeml_version": env!("CARGO_PKG_VERSION"),
        "app": schema.app,
        "system_type": schema.system_type(),
        "schema": { "input": schema.input, "output": schema.output },
        // Class names in output order; none for values, or for classes known only by index.
        "labels": if metric == QualityMetric::Accuracy && !labels.is_empty() {
            json!(labels)
        } else {
            json!(null)
        },
        "run": {
            "id": run.id.0,
            "number": run.number,
            "candidate": run.candidate,
            "data_version": run.data_version,
            "quality": run.quality,
            "metric": metric.name(),
            "protocol": run.validation.protocol,
            "validated_examples": run.validation.validated_examples,
        },
        "model": model,
        "call": call_description(&model),
    });
    let text = serde_json::to_string_pretty(&metadata)
        .map_err(|error| Error::Export(format!("cannot write the metadata: {error}")))?;
    write(&out.join(METADATA_FILE), &(text + "\n"))?;
    write(
        &out.join(README_FILE),
        &readme(&schema.app, &run.candidate, run.number, &model),
    )?;
    Ok(ExportReport {
        dir: out.to_owned(),
        run: run.id,
        run_number: run.number,
        candidate: run.candidate,
        model,
    })
}

/// Refuses an `out` that is a file, or a folder with anything in it unless `force`.
fn check_out_dir(out: &Path, force: bool) -> Result<()> {
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(Error::Export(format!(
            "{} exists and is not a folder; give a new or empty folder",
            out.display()
        )));
    }
    let mut entries = std::fs::read_dir(out).map_err(|error| io_error(out, error))?;
    if entries.next().is_some() && !force {
        return Err(Error::Export(format!(
            "{} exists and is not empty; give a new or empty folder, or --force to write the export over it",
            out.display()
        )));
    }
    Ok(())
}

/// How to call the model, in the metadata.
fn call_description(model: &ExportedModel) -> serde_json::Value {
    let output = if model.output == "probabilities" {
        "one probability per class, in the order of `labels` (null: the classes are their indices); the answer is the most probable"
    } else {
        "the output values, row-major in `output_shape`"
    };
    if model.format == "torchscript" {
        json!({
            "how": "torch.jit.load(file)(x)",
            "input": "x: a float32 tensor [B, ...input_shape], the batch first; images channel-last [B,H,W,C] as declared; raw values as fed to easeml (the normalization is inside the model)",
            "dtype": "float32",
            "output": format!("a float32 tensor [B, ...output_shape]: {output}"),
        })
    } else {
        let input = if is_series(model) {
            "a series: any number of steps (input_shape [-1, channels]), each step the channels values of one element of the input sequence in the app's declared order; raw values as fed to easeml"
        } else {
            "one row of input_shape values (float), in the app's declared order (a tensor flattened row-major); raw values as fed to easeml (any standardization is in the parameters)"
        };
        json!({
            "how": "the formulas of README.md over `parameters` of the model file",
            "input": input,
            "dtype": "float32",
            "output": output,
        })
    }
}

/// Whether the model reads a series of any length (its first input dimension is
/// [`ANY_LENGTH`]).
fn is_series(model: &ExportedModel) -> bool {
    model.input_shape.first() == Some(&ANY_LENGTH)
}

/// The export's README.md.
fn readme(app: &str, candidate: &str, run: u64, model: &ExportedModel) -> String {
    let mut text = format!(
        "# {app}: an easeml export\n\nThe model of run {} ({candidate}), the one easeml served when it \
         was exported. `{METADATA_FILE}` says what it was trained on, how good it was, its label names \
         in class order and its input and output shapes.\n\n",
        run
    );
    let shape = model
        .input_shape
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if model.format == "torchscript" {
        let labels = if model.output == "probabilities" {
            format!(
                "labels = json.load(open(\"{METADATA_FILE}\"))[\"labels\"]  # class names in output order\n"
            )
        } else {
            String::new()
        };
        text.push_str(&format!(
            "## Load it in Python\n\n```python\nimport json, torch\nmodel = torch.jit.load(\"{TORCHSCRIPT_FILE}\")\n\
             {labels}out = model(torch.zeros(1, {shape}))  # a float32 batch [B, {shape}]\n```\n\n\
             The input is what was fed to easeml (raw values; any normalization is inside the model), \
             batch first{}. The output is `[B, {}]`: {}.\n",
            if model.input_shape.len() == 3 {
                ", images channel-last `[B,H,W,C]`"
            } else {
                ""
            },
            model
                .output_shape
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if model.output == "probabilities" {
                "class probabilities in the order of `labels` in the metadata (null: class indices)"
            } else {
                "the output values"
            }
        ));
    } else {
        text.push_str(&format!(
            "## Load it in Python\n\n```python\nimport json\nmodel = json.load(open(\"{CLASSIC_FILE}\"))\n\
             parameters = model[\"parameters\"]  # family: model[\"family\"] ({})\n```\n\n\
             An input is {}, raw as fed to easeml. To predict:\n\n{CLASSIC_README}",
            model.family,
            if is_series(model) {
                format!(
                    "a series of any number of steps, each of {} values",
                    model.input_shape[1]
                )
            } else {
                format!("one row of {shape} values")
            }
        ));
    }
    text
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|error| io_error(path, error))
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::Export(format!("cannot write {}: {error}", path.display()))
}
