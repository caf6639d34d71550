//! Export: the model an app serves (the one `infer` answers with, [`ServedModel::load`]) written to
//! a folder, to run without easeml. One function, [`export_app`], behind the three entry points
//! (`<app> export --out DIR`, `easeml export APP --store DIR --out DIR`, Python's
//! `app.export(path)`). The folder holds:
//!
//! - the model: `model.pt` (TorchScript, a network) or `model.json` (a classic model), written by
//!   the trainer (`easeml_trainer::export`, which says what is supported and how each is called);
//!   or, when the app serves an ensemble, one folder per member, `members/1`, `members/2`, ...
//!   ([`MEMBERS_DIR`]), each with its model file and its own README, whose answers (class
//!   probabilities or values) are averaged with the members' weights as `infer` averages them;
//! - `easeml-export.json`, the metadata ([`METADATA_FILE`]): the app, its schema, the label names
//!   in class order, the run (id, candidate, data version, quality and its metric; for an
//!   ensemble the best single run, and `ensemble` with its quality, the rule that combines the
//!   members and each member's folder, weight, run and model), the model (`model.format` is
//!   [`ENSEMBLE_FORMAT`] for an ensemble), input and output shapes, dtype and layout, and the
//!   format version (1: an ensemble export is told apart by its `model.format`, which a reader of
//!   single models refuses as unknown rather than misreads);
//! - `README.md`: how to load it in Python.
//!
//! The folder must be new or empty unless `force` is given (then the export's files in it are
//! written over, and the other forms' model files are removed). An ensemble's members are written
//! to a staging folder first and moved into place once all of them are written, so a refused
//! member (a model the export does not support, named in the error) leaves no partial ensemble.

use std::path::{Path, PathBuf};

use easeml_serving::QualityMetric;
use easeml_store::{RunId, Store};
use easeml_trainer::export::{
    ANY_LENGTH, ANY_TREE, CLASSIC_FILE, CLASSIC_README, FORMAT_VERSION, TORCHSCRIPT_FILE,
};
use easeml_trainer::{Call, ExportedModel};
use serde_json::json;
use tch::Device;

use crate::error::{Error, Result};
use crate::model::ServedModel;

/// The metadata file of an export.
pub const METADATA_FILE: &str = "easeml-export.json";

/// The README of an export.
pub const README_FILE: &str = "README.md";

/// The folder of an exported ensemble's members (`members/1`, `members/2`, ... in the order of
/// the metadata's `ensemble.members`); also the ensemble's `model.file`.
pub const MEMBERS_DIR: &str = "members";

/// The `model.format` (and `model.family`) of an exported ensemble.
pub const ENSEMBLE_FORMAT: &str = "ensemble";

/// Where an ensemble's members are written before they are moved to [`MEMBERS_DIR`].
const STAGING_DIR: &str = ".members.partial";

/// One exported member of an ensemble.
#[derive(Debug, Clone)]
pub struct ExportedMember {
    /// Its folder, relative to the export's (`members/1`).
    pub dir: String,
    /// Its weight in the average (the weights sum to 1).
    pub weight: f64,
    /// Its run.
    pub run: RunId,
    /// That run's number within the app.
    pub run_number: u64,
    /// That run's candidate.
    pub candidate: String,
    /// Its model's file and how to call it.
    pub model: ExportedModel,
}

/// What [`export_app`] wrote.
#[derive(Debug, Clone)]
pub struct ExportReport {
    /// The folder.
    pub dir: PathBuf,
    /// The run whose model it is (for an ensemble: the best single run, reported beside it).
    pub run: RunId,
    /// That run's number within the app (what people see).
    pub run_number: u64,
    /// That run's candidate.
    pub candidate: String,
    /// The model's file and how to call it; for an ensemble, `format` and `family` are
    /// [`ENSEMBLE_FORMAT`], `file` is [`MEMBERS_DIR`] and the shapes are the members' (one form).
    pub model: ExportedModel,
    /// The ensemble's members; empty for a single run's model.
    pub members: Vec<ExportedMember>,
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.members.is_empty() {
            return write!(
                f,
                "exported {} (run {}) as {} to {}: {}, {}, {}",
                self.candidate,
                self.run_number,
                self.model.format,
                self.dir.display(),
                self.model.file,
                METADATA_FILE,
                README_FILE
            );
        }
        let members: Vec<String> = self
            .members
            .iter()
            .map(|member| {
                format!(
                    "{} (run {}, weight {:.3}) as {} in {}",
                    member.candidate,
                    member.run_number,
                    member.weight,
                    member.model.format,
                    member.dir
                )
            })
            .collect();
        write!(
            f,
            "exported an ensemble of {} models to {}: {}; {}, {}",
            self.members.len(),
            self.dir.display(),
            members.join(", "),
            METADATA_FILE,
            README_FILE
        )
    }
}

/// Writes the served model of the app named `app` in `store` to the folder `out` (created if
/// missing). Errors, in words: no such app, no trained model yet, `out` not a folder or not empty
/// (unless `force`), a model (or an ensemble member) the export does not support.
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
    let made = !out.exists();
    std::fs::create_dir_all(out).map_err(|error| io_error(out, error))?;
    let (model, members) = match write_models(store, &mut served, out) {
        Ok(written) => written,
        Err(error) => {
            // Best effort: a refused export leaves no folder (nor staging folder) behind.
            let _ = std::fs::remove_dir_all(if made {
                out.to_owned()
            } else {
                out.join(STAGING_DIR)
            });
            return Err(error);
        }
    };
    remove_other_forms(out, &model)?;
    let run = served.run().clone();
    let schema = &served.app().schema;
    let labels = served.labels();
    let metric = QualityMetric::of(schema);
    let ensemble = served.ensemble().map(|ensemble| {
        json!({
            "quality": ensemble.quality,
            "metric": metric.name(),
            "single_quality": ensemble.single_quality,
            "validated_examples": ensemble.validated_examples,
            "data_version": ensemble.data_version,
            "combine": COMBINE,
            "members": members.iter().map(|member| json!({
                "dir": member.dir,
                "weight": member.weight,
                "run": { "id": member.run.0, "number": member.run_number, "candidate": member.candidate },
                "model": member.model,
            })).collect::<Vec<_>>(),
        })
    });
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
        "ensemble": ensemble,
        "model": model,
        "call": call_description(&model, &members),
    });
    let text = serde_json::to_string_pretty(&metadata)
        .map_err(|error| Error::Export(format!("cannot write the metadata: {error}")))?;
    write(&out.join(METADATA_FILE), &(text + "\n"))?;
    let readme = if members.is_empty() {
        readme(
            &schema.app,
            &format!(
                "The model of run {} ({}), the one easeml served when it was exported.",
                run.number, run.candidate
            ),
            &model,
        )
    } else {
        ensemble_readme(&schema.app, &members, &model)
    };
    write(&out.join(README_FILE), &readme)?;
    Ok(ExportReport {
        dir: out.to_owned(),
        run: run.id,
        run_number: run.number,
        candidate: run.candidate,
        model,
        members,
    })
}

/// How an ensemble's members' answers are combined (the metadata's `ensemble.combine`), as
/// `infer` combines them (`crate::model::average`).
const COMBINE: &str = "the weighted sum of the members' outputs, sum over members of weight * output (the weights sum to 1); for probabilities the answer is the most probable class of that sum (the first on ties)";

/// Writes the served model's file into `out`, or each ensemble member's into its folder under
/// [`MEMBERS_DIR`] (staged, then moved into place); returns the model and the members.
fn write_models(
    store: &Store,
    served: &mut ServedModel,
    out: &Path,
) -> Result<(ExportedModel, Vec<ExportedMember>)> {
    let Some(ensemble) = served.ensemble().cloned() else {
        let (predictor, _) = served
            .predictors_mut()
            .first_mut()
            .ok_or_else(|| Error::Export("no model is loaded".into()))?;
        return Ok((predictor.export(out)?, Vec::new()));
    };
    let app = served.app().schema.app.clone();
    let staging = out.join(STAGING_DIR);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|error| io_error(&staging, error))?;
    }
    let count = ensemble.members.len();
    let mut members = Vec::with_capacity(count);
    for (index, (member, (predictor, _))) in ensemble
        .members
        .iter()
        .zip(served.predictors_mut().iter_mut())
        .enumerate()
    {
        let name = (index + 1).to_string();
        let dir = staging.join(&name);
        std::fs::create_dir_all(&dir).map_err(|error| io_error(&dir, error))?;
        let run = store.run(member.run)?;
        let model = predictor.export(&dir).map_err(|error| {
            Error::Export(format!(
                "the app serves an ensemble of {count} models, and member {name} (run {}, {}) \
                 cannot be exported: {error}",
                run.number, run.candidate
            ))
        })?;
        let intro = format!(
            "Member {name} of the ensemble easeml served when it was exported (see `../../{README_FILE}`): \
             the model of run {} ({}), weight {}.",
            run.number, run.candidate, member.weight
        );
        write(&dir.join(README_FILE), &readme(&app, &intro, &model))?;
        members.push(ExportedMember {
            dir: format!("{MEMBERS_DIR}/{name}"),
            weight: member.weight,
            run: run.id,
            run_number: run.number,
            candidate: run.candidate,
            model,
        });
    }
    let first = members
        .first()
        .ok_or_else(|| Error::Export("the served ensemble has no members".into()))?
        .model
        .clone();
    if let Some(odd) = members.iter().find(|member| {
        member.model.output != first.output || member.model.output_shape != first.output_shape
    }) {
        return Err(Error::Export(format!(
            "the ensemble's members answer in different forms ({} {:?} and {} {:?}), so their \
             answers cannot be averaged",
            first.output, first.output_shape, odd.model.output, odd.model.output_shape
        )));
    }
    let target = out.join(MEMBERS_DIR);
    if target.exists() {
        std::fs::remove_dir_all(&target).map_err(|error| io_error(&target, error))?;
    }
    std::fs::rename(&staging, &target).map_err(|error| io_error(&target, error))?;
    Ok((
        ExportedModel {
            format: ENSEMBLE_FORMAT,
            file: MEMBERS_DIR,
            family: ENSEMBLE_FORMAT.to_owned(),
            input_shape: first.input_shape,
            output: first.output,
            output_shape: first.output_shape,
            // (the members' call: the same for every TorchScript member of one app)
            call: first.call,
        },
        members,
    ))
}

/// `--force` over an export of another form: only this export's model files stay in the folder.
fn remove_other_forms(out: &Path, model: &ExportedModel) -> Result<()> {
    for other in [TORCHSCRIPT_FILE, CLASSIC_FILE] {
        let path = out.join(other);
        if model.file != other && path.is_file() {
            std::fs::remove_file(&path).map_err(|error| io_error(&path, error))?;
        }
    }
    let members = out.join(MEMBERS_DIR);
    if model.file != MEMBERS_DIR && members.is_dir() {
        std::fs::remove_dir_all(&members).map_err(|error| io_error(&members, error))?;
    }
    Ok(())
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

/// How to call the model, in the metadata; for an ensemble, how to combine its members.
fn call_description(model: &ExportedModel, members: &[ExportedMember]) -> serde_json::Value {
    if !members.is_empty() {
        return json!({
            "how": "ask every member in `ensemble.members` (each folder's README.md and the member's `model` say how) and add up their outputs times their weights",
            "input": "the same input for every member, as each member's `model` takes it",
            "dtype": "float32",
            "output": format!("{COMBINE}: the output of an `output_shape` member"),
        });
    }
    let output = match model.output {
        "probabilities" => {
            "one probability per class, in the order of `labels` (null: the classes are their indices); the answer is the most probable"
        }
        "bytes" => "the output's bytes",
        _ => "the output values, row-major in `output_shape`",
    };
    if let Some(call) = torch_call(model) {
        let mut description = json!({
            "how": call.how,
            "input": call.input,
            "dtype": call.dtype,
            "output": format!("{}: {output}", call.output),
        });
        if matches!(model.call, Call::Bytes | Call::BytesToBytes) {
            description["bytes"] = json!(BYTES_ENCODING);
        }
        description
    } else {
        let input = if is_tree(model) {
            "a tree: each node its record's values in the app's declared order (input_shape [-2, values per node]) and its present recursive fields as children, in field order; raw values as fed to easeml"
        } else if is_series(model) {
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

/// How to call an exported TorchScript model, in words (`None` for a classic model's JSON).
struct TorchCall {
    /// The call (`torch.jit.load(file)(x)`).
    how: &'static str,
    /// What each argument holds.
    input: &'static str,
    /// The inputs' dtype.
    dtype: &'static str,
    /// What it answers.
    output: &'static str,
}

/// How a general app's input is encoded into the bytes its models read (the store's encoding,
/// `easeml_object::codec`).
const BYTES_ENCODING: &str = "the input as easeml encodes it: the 4 bytes `EMX1`, then the record: each tensor field's values as little-endian float32, row-major, in the declared order, then for each Nullable field in order a byte 0 (null) or a byte 1 followed by that record, encoded the same way";

fn torch_call(model: &ExportedModel) -> Option<TorchCall> {
    Some(match model.call {
        Call::Dense => TorchCall {
            how: "torch.jit.load(file)(x)",
            input: "x: a float32 tensor [B, ...input_shape], the batch first; images channel-last [B,H,W,C] as declared; raw values as fed to easeml (the normalization is inside the model)",
            dtype: "float32",
            output: "a float32 tensor [B, ...output_shape]",
        },
        Call::Series => TorchCall {
            how: "torch.jit.load(file)(x, lengths)",
            input: "x: a float32 tensor [B, T, channels], each series' steps in order, zero-padded to the longest (T >= 1; a series of no steps is one step of zeros); lengths: an int64 tensor [B], each series' number of steps; raw values as fed to easeml",
            dtype: "float32",
            output: "a float32 tensor [B, ...output_shape]",
        },
        Call::Translation => TorchCall {
            how: "torch.jit.load(file)(x, lengths)",
            input: "x: a float32 tensor [B, T, input step values], each input sequence's steps in order, zero-padded to the longest (T >= 1); lengths: an int64 tensor [B], each sequence's number of steps; raw values as fed to easeml",
            dtype: "float32",
            output: "a list of B float32 tensors [steps, output step values], one per input: the translated sequence (at most 2 * the longest input + 4 steps; each ends after its first step whose continue score is negative, as easeml ends it)",
        },
        Call::Bytes => TorchCall {
            how: "torch.jit.load(file)(data, lengths)",
            input: "data: a uint8 tensor [B, N], each row the bytes of one input (see `bytes`), zero-padded to N; lengths: an int64 tensor [B], each input's number of bytes",
            dtype: "uint8",
            output: "a float32 tensor [B, ...output_shape]",
        },
        Call::BytesToBytes => TorchCall {
            how: "torch.jit.load(file)(data)",
            input: "data: a uint8 tensor [B, input_shape[0]], each row the bytes of one input (see `bytes`), cut or zero-padded to input_shape[0]",
            dtype: "uint8",
            output: "a uint8 tensor [B, output_shape[0]], each row the bytes of one output, encoded as the inputs are (see `bytes`; easeml reads them back leniently, and so may you)",
        },
        Call::Tree => TorchCall {
            how: "torch.jit.load(file)(values, parents)",
            input: "values: a float32 tensor [N, values per node], the nodes of a batch of trees, each tree in pre-order (a node before its children, children in field order), tree after tree, each node its record's values in the declared order; parents: an int64 tensor [N], each node's parent row, -1 for a root (a tree's answer row is its root's rank among the roots); raw values as fed to easeml",
            dtype: "float32",
            output: "a float32 tensor [trees, ...output_shape]",
        },
        Call::Formulas => return None,
    })
}

/// Whether the model reads a series of any length (its first input dimension is
/// [`ANY_LENGTH`]).
fn is_series(model: &ExportedModel) -> bool {
    model.input_shape.first() == Some(&ANY_LENGTH)
}

/// Whether the model reads a tree (its first input dimension is [`ANY_TREE`]).
fn is_tree(model: &ExportedModel) -> bool {
    model.input_shape.first() == Some(&ANY_TREE)
}

/// The README.md of one model's export (or of an ensemble member's folder), `intro` its first
/// sentence.
fn readme(app: &str, intro: &str, model: &ExportedModel) -> String {
    let mut text = format!(
        "# {app}: an easeml export\n\n{intro} `{METADATA_FILE}` says what it was trained on, how \
         good it was, its label names in class order and its input and output shapes.\n\n"
    );
    let shape = dims(&model.input_shape);
    if model.format == "torchscript" {
        text.push_str(&torch_readme(model));
    } else {
        text.push_str(&format!(
            "## Load it in Python\n\n```python\nimport json\nmodel = json.load(open(\"{CLASSIC_FILE}\"))\n\
             parameters = model[\"parameters\"]  # family: model[\"family\"] ({})\n```\n\n\
             An input is {}, raw as fed to easeml. To predict:\n\n{CLASSIC_README}",
            model.family,
            if is_tree(model) {
                format!(
                    "a tree of any shape, each node of {} values",
                    model.input_shape[1]
                )
            } else if is_series(model) {
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

/// The "Load it in Python" part of a TorchScript model's README: a call of it on example inputs,
/// and what its inputs and outputs hold.
fn torch_readme(model: &ExportedModel) -> String {
    let load = format!("import json, torch\nmodel = torch.jit.load(\"{TORCHSCRIPT_FILE}\")\n");
    let labels = if model.output == "probabilities" {
        format!(
            "labels = json.load(open(\"{METADATA_FILE}\"))[\"labels\"]  # class names in output order\n"
        )
    } else {
        String::new()
    };
    let classes =
        "class probabilities in the order of `labels` in the metadata (null: class indices)";
    let bytes =
        format!("An input's bytes are {BYTES_ENCODING} (also in the metadata, `call.bytes`).");
    let (example, words) = match model.call {
        Call::Series => (
            format!(
                "{}out = model(x, lengths)\n",
                series_inputs(model.input_shape[1])
            ),
            format!(
                "A series is its steps in order (each step the values of one element of the input \
                 sequence, in the declared order), raw as fed to easeml. The output is `[B, {}]`: \
                 {classes}.",
                model.output_shape[0]
            ),
        ),
        Call::Translation => (
            format!(
                "x = torch.zeros(2, 7, {channels})  # two sequences zero-padded to 7 steps of {channels} values\n\
                 lengths = torch.tensor([7, 4])  # their steps (int64)\n\
                 outs = model(x, lengths)  # a list: one tensor [steps, {out}] per sequence\n",
                channels = model.input_shape[1],
                out = model.output_shape[1]
            ),
            "A sequence is its steps in order (each step the values of one element, in the declared \
             order), raw as fed to easeml. Each answer is the translated sequence, a step per row; \
             easeml's model produces up to 2 * the longest input + 4 steps and ends each sequence \
             after its first step whose continue score is negative."
                .to_owned(),
        ),
        Call::Bytes => (
            "data = torch.zeros(2, 64, dtype=torch.uint8)  # two inputs' bytes, zero-padded to 64\n\
             lengths = torch.tensor([64, 40])  # their byte counts (int64)\nout = model(data, lengths)\n"
                .to_owned(),
            format!(
                "{bytes} The output is `[B, {}]`: {classes}.",
                model.output_shape[0]
            ),
        ),
        Call::BytesToBytes => (
            format!(
                "data = torch.zeros(2, {n}, dtype=torch.uint8)  # two inputs' bytes, cut or zero-padded to {n}\n\
                 out = model(data)  # uint8 [2, {m}]\n",
                n = model.input_shape[0],
                m = model.output_shape[0]
            ),
            format!(
                "{bytes} The output is `[B, {}]` bytes per input, the output encoded the same way \
                 (a model's bytes may be imperfect: read them leniently).",
                model.output_shape[0]
            ),
        ),
        Call::Tree => (
            format!(
                "values = torch.zeros(3, {node})  # the nodes of two trees, {node} values each\n\
                 parents = torch.tensor([-1, 0, -1])  # a root with one child, then a lone root\n\
                 out = model(values, parents)  # one row per tree\n",
                node = model.input_shape[1]
            ),
            format!(
                "A batch of trees is their nodes, each tree in pre-order (a node before its children, \
                 children in field order), tree after tree; a node's values are its record's values \
                 in the declared order, raw as fed to easeml; `parents` gives each node's parent \
                 row, -1 for a root. The output is `[trees, {}]`: {classes}.",
                model.output_shape[0]
            ),
        ),
        Call::Dense | Call::Formulas => {
            let shape = dims(&model.input_shape);
            (
                format!("out = model(torch.zeros(1, {shape}))  # a float32 batch [B, {shape}]\n"),
                format!(
                    "The input is what was fed to easeml (raw values; any normalization is inside \
                     the model), batch first{}. The output is `[B, {}]`: {}.",
                    if model.input_shape.len() == 3 {
                        ", images channel-last `[B,H,W,C]`"
                    } else {
                        ""
                    },
                    dims(&model.output_shape),
                    if model.output == "probabilities" {
                        classes
                    } else {
                        "the output values"
                    }
                ),
            )
        }
    };
    format!("## Load it in Python\n\n```python\n{load}{labels}{example}```\n\n{words}\n")
}

/// The README.md of an ensemble's export: its members, the rule that combines them, and for
/// members that are all TorchScript, the Python that does it.
fn ensemble_readme(app: &str, members: &[ExportedMember], model: &ExportedModel) -> String {
    let mut text = format!(
        "# {app}: an easeml export\n\nThe ensemble easeml served when it was exported: {} models, \
         each in its own folder with its README.md, whose answers are added up with their weights \
         (the weights sum to 1). `{METADATA_FILE}` says what they were trained on, how good the \
         ensemble was (`ensemble.quality`), the label names in class order, and each member's \
         folder, weight, run and model (`ensemble.members`).\n\n\
         | member | folder | model | run | weight |\n|---|---|---|---|---|\n",
        members.len()
    );
    for (index, member) in members.iter().enumerate() {
        text.push_str(&format!(
            "| {} | `{}` | {} (`{}`) | {} | {} |\n",
            index + 1,
            member.dir,
            member.candidate,
            member.model.file,
            member.run_number,
            member.weight
        ));
    }
    let answer = if model.output == "probabilities" {
        "Each member answers class probabilities (in the order of `labels` in the metadata; null: \
         class indices); the ensemble's probabilities are their weighted sum and its answer the most \
         probable class (the first on ties)."
    } else {
        "Each member answers the output values; the ensemble's are their weighted sum."
    };
    text.push_str(&format!(
        "\n## Predict\n\nAsk every member the same input as its README says, then add up the \
         answers: `out = sum over members of weight * out_member`. {answer}\n"
    ));
    // The Python that adds them up, when every member is TorchScript called the same way (the
    // members of one app share their call) with an output that adds up.
    let inputs = match model.call {
        Call::Dense => {
            let shape = dims(&model.input_shape);
            Some((
                format!("x = torch.zeros(1, {shape})  # a float32 batch [B, {shape}]\n"),
                "x",
            ))
        }
        Call::Series => Some((series_inputs(model.input_shape[1]), "x, lengths")),
        _ => None,
    };
    if let Some((inputs, arguments)) = inputs
        && members
            .iter()
            .all(|member| member.model.file == TORCHSCRIPT_FILE)
    {
        text.push_str(&format!(
            "\n```python\nimport json, torch\nmeta = json.load(open(\"{METADATA_FILE}\"))\n\
             members = [(torch.jit.load(m[\"dir\"] + \"/{TORCHSCRIPT_FILE}\"), m[\"weight\"])\n           \
             for m in meta[\"ensemble\"][\"members\"]]\n{inputs}\
             out = sum(weight * model({arguments}) for model, weight in members)\n```\n"
        ));
    }
    text
}

/// The README's Python lines that make a batch of two series of `channels` values per step
/// (`x`, `lengths`), for a model called `model(x, lengths)`.
fn series_inputs(channels: i64) -> String {
    format!(
        "x = torch.zeros(2, 7, {channels})  # two series zero-padded to 7 steps of {channels} values\n\
         lengths = torch.tensor([7, 4])  # their steps (int64)\n"
    )
}

/// A shape's dimensions as the README writes them: `3, 32, 32`.
fn dims(shape: &[i64]) -> String {
    shape
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|error| io_error(path, error))
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::Export(format!("cannot write {}: {error}", path.display()))
}
