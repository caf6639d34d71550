//! The tasks of `easeml bench quality`: a task folder (exactly one `.eml`, `train.txt`, `test.txt`),
//! its program compiled by the `easemlc` binary into the app's manifest (`easeml.json`), and its
//! lines read with the client library's line checker: the checks and messages of the app's
//! `<app>-feed` binary, relative paths resolved against the task folder.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use easeml_runtime::feed::{CheckedOutput, FeedOptions, LineChecker};
use easeml_runtime::{AppSpec, Object, Schema};

/// The environment variable naming the `easemlc` binary (else it is looked for beside the running
/// `easeml`, then on `PATH`).
pub const EASEMLC_ENV: &str = "EASEML_EASEMLC";

/// At most this many bad lines of one file are named in an error.
const SHOWN_BAD_LINES: usize = 10;

/// The files of one task folder.
#[derive(Debug, Clone)]
pub struct TaskFiles {
    /// The folder as given.
    pub dir: PathBuf,
    /// Its one `.eml` program.
    pub eml: PathBuf,
    /// The training examples.
    pub train: PathBuf,
    /// The test examples (each with its expected output).
    pub test: PathBuf,
}

impl TaskFiles {
    /// Finds the files of the task folder `dir`, or says what is missing.
    pub fn find(dir: &Path) -> anyhow::Result<TaskFiles> {
        let shown = dir.display();
        if !dir.is_dir() {
            bail!(
                "task `{shown}`: not a folder (a task folder holds one `.eml` program, train.txt and test.txt)"
            );
        }
        let mut programs: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("task `{shown}`: cannot list the folder"))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "eml") && path.is_file())
            .collect();
        programs.sort();
        let eml = match programs.as_slice() {
            [] => bail!(
                "task `{shown}`: no `.eml` file (a task folder holds exactly one program, train.txt and test.txt)"
            ),
            [one] => one.clone(),
            several => bail!(
                "task `{shown}`: {} `.eml` files ({}); a task folder holds exactly one program",
                several.len(),
                several
                    .iter()
                    .map(|path| file_name(path))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let data_file = |name: &str, what: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                bail!(
                    "task `{shown}`: no {name} ({what}, one example per line in the feed's line formats)"
                )
            }
        };
        Ok(TaskFiles {
            dir: dir.to_path_buf(),
            eml,
            train: data_file("train.txt", "the training examples")?,
            test: data_file("test.txt", "the test examples with their outputs")?,
        })
    }

    /// How the feed reads this task's lines: relative paths against the task folder.
    pub fn feed_options(&self) -> FeedOptions {
        FeedOptions {
            base_dir: Some(self.dir.clone()),
            ..FeedOptions::default()
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// The `easemlc` binary: `$EASEML_EASEMLC`, else beside the running `easeml`, else on `PATH`.
pub fn find_easemlc() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(EASEMLC_ENV) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        bail!("{EASEMLC_ENV}=`{}` is not a file", path.display());
    }
    let exe = std::env::current_exe().ok();
    let beside = exe
        .as_ref()
        .and_then(|exe| exe.parent())
        .map(|dir| dir.join(format!("easemlc{}", std::env::consts::EXE_SUFFIX)));
    if let Some(path) = beside.as_ref().filter(|path| path.is_file()) {
        return Ok(path.clone());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let path = dir.join(format!("easemlc{}", std::env::consts::EXE_SUFFIX));
            if path.is_file() {
                return Ok(path);
            }
        }
    }
    bail!(
        "cannot find the compiler `easemlc` (looked beside `{}` and on PATH): build it with \
         `cargo build -p easeml-compiler --bin easemlc`, or set {EASEMLC_ENV}=/path/to/easemlc",
        beside.map_or_else(|| "easeml".to_owned(), |path| path.display().to_string())
    )
}

/// Compiles the task's program with `easemlc build` into `crate_dir` and reads the app's manifest.
pub fn compile(easemlc: &Path, task: &TaskFiles, crate_dir: &Path) -> anyhow::Result<AppSpec> {
    let _ = std::fs::remove_dir_all(crate_dir);
    let output = Command::new(easemlc)
        .arg("build")
        .arg(&task.eml)
        .arg("-o")
        .arg(crate_dir)
        .args(["--color", "never"])
        .output()
        .with_context(|| format!("cannot run `{}`", easemlc.display()))?;
    if !output.status.success() {
        bail!(
            "task `{}`: `{}` does not compile:\n{}",
            task.dir.display(),
            file_name(&task.eml),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    let manifest = crate_dir.join("easeml.json");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read `{}` written by easemlc", manifest.display()))?;
    AppSpec::from_manifest_json(&text)
        .with_context(|| format!("`{}` is not an app manifest", manifest.display()))
}

/// What a model is asked to produce for one example, in terms every method compares alike.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Classification: the label.
    Class(String),
    /// Any other output: its values, flattened in row-major order.
    Values(Vec<f32>),
}

/// One checked example of a task file.
#[derive(Debug)]
pub struct Example {
    /// The input object.
    pub input: Object,
    /// The expected output.
    pub target: Target,
}

/// Whether the app's output is a class (else its values are scored by R^2).
pub fn is_classification(schema: &Schema) -> bool {
    schema.label_capacity().is_some()
}

/// The target of a checked output: a label as it is; for a classification app, an output vector
/// is the class of its largest value (named by the declared labels, else `class N`).
pub fn target_of(schema: &Schema, output: CheckedOutput) -> Target {
    match output {
        CheckedOutput::Label(label) => Target::Class(label),
        CheckedOutput::Object(object) => {
            let values: Vec<f32> = object.tensors.iter().flatten().copied().collect();
            if is_classification(schema) {
                let mut best = 0;
                for (index, value) in values.iter().enumerate() {
                    if *value > values[best] {
                        best = index;
                    }
                }
                Target::Class(class_name(schema, best))
            } else {
                Target::Values(values)
            }
        }
    }
}

/// The name of class `index`: the declared label, else `class N`.
pub fn class_name(schema: &Schema, index: usize) -> String {
    schema
        .labels
        .as_ref()
        .and_then(|labels| labels.get(index).cloned())
        .unwrap_or_else(|| format!("class {index}"))
}

/// Reads every example of `path` (`train.txt` or `test.txt` of `task`), each line with its
/// output. Bad lines are an error naming the task, the file and each bad line's number; a file
/// without examples is an error too.
pub fn read_examples(
    task: &TaskFiles,
    path: &Path,
    schema: &Schema,
) -> anyhow::Result<Vec<Example>> {
    let name = file_name(path);
    let dir = task.dir.display();
    let file =
        std::fs::File::open(path).with_context(|| format!("task `{dir}`: cannot open {name}"))?;
    let mut reader = std::io::BufReader::new(file);
    let options = task.feed_options();
    let checker = LineChecker::new(schema, &options, is_classification(schema));
    let mut examples = Vec::new();
    let mut bad = Vec::new();
    let mut bad_count = 0usize;
    let mut buffer = Vec::new();
    let mut line_number = 0usize;
    loop {
        buffer.clear();
        let read = reader
            .read_until(b'\n', &mut buffer)
            .with_context(|| format!("task `{dir}`: cannot read {name}"))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        let checked = match std::str::from_utf8(&buffer) {
            Ok(line) => checker.check_line(line),
            Err(error) => Err(format!("not UTF-8 text: {error}")),
        };
        match checked {
            Ok(None) => {}
            Ok(Some(example)) => examples.push(Example {
                input: example.input,
                target: target_of(schema, example.output),
            }),
            Err(message) => {
                bad_count += 1;
                if bad.len() < SHOWN_BAD_LINES {
                    bad.push(format!("  {name} line {line_number}: {message}"));
                }
            }
        }
    }
    if bad_count > 0 {
        let more = if bad_count > bad.len() {
            format!("\n  ... and {} more", bad_count - bad.len())
        } else {
            String::new()
        };
        bail!(
            "task `{dir}`: {bad_count} bad line(s) in {name}:\n{}{more}",
            bad.join("\n")
        );
    }
    if examples.is_empty() {
        bail!("task `{dir}`: {name} has no examples");
    }
    Ok(examples)
}
