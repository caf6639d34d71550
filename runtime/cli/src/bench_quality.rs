//! `easeml bench quality`: easeml's test accuracy on real tasks against peers, in one command.
//!
//! Each `--task DIR` holds one `.eml` program, `train.txt` and `test.txt` in the feed's line
//! formats (`task.rs`). The command compiles every program with the `easemlc` binary (so this crate
//! does not depend on the compiler), registers and feeds each app into a fresh store
//! (`--out/store`, removed first; never `$EASEML_HOME`) through the client library (the
//! `<app>-feed` binary's checks), runs ONE engine over all apps for `--budget` (a run may take at
//! most the budget's share per task, capped at the engine's default), and answers `test.txt` with
//! each app's best model (the client's `infer_lines`, as `<app>-infer` does). The peers run on the
//! same splits: `knn1` (`knn.rs`) and `flaml` (`flaml.rs`, FLAML with the same total budget split
//! evenly across tasks). Every method is scored by `knn::score` (accuracy, or R^2 for apps whose
//! output is not a class). Writes `summary.json`, `summary.md` (the table, also printed) and
//! `scores.svg` / `scores.png` to `--out`.

mod flaml;
mod knn;
mod task;

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use easeml_app_engine::train_with_progress;
use easeml_runtime::app_cli::{format_seconds, parse_duration};
use easeml_runtime::engine::{Engine, EngineConfig, choose_device, device_name};
use easeml_runtime::{AppSpec, Client, Connection, Inference, Schema};
use serde_json::{Value, json};

use crate::plot::{BarPlot, write_bar_plots};
use knn::{Flattener, knn1, score};
use task::{Example, Target, TaskFiles, class_name, is_classification};

/// The shortest time limit a run gets, however small the budget's share per task.
const MIN_RUN_SECONDS: f64 = 5.0;

/// Arguments of `easeml bench quality`.
#[derive(Debug, Args)]
pub struct QualityBenchArgs {
    /// A task folder: one `.eml` program, `train.txt` and `test.txt` (feed lines; paths in them are
    /// relative to the folder). Repeat for several tasks.
    #[arg(long = "task", value_name = "DIR", required = true)]
    tasks: Vec<PathBuf>,
    /// The training budget shared by all tasks, e.g. 90s, 8m (easeml's one engine trains every app
    /// within it; FLAML gets the same total, split evenly across tasks).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    budget: Duration,
    /// Comma-separated peers: knn1 (1-nearest neighbour, Euclidean, on flattened inputs), flaml
    /// (FLAML AutoML; needs bench/peers/.venv with bench/peers/requirements-flaml.txt, or
    /// $EASEML_PEER_PYTHON). `--peers ''` runs none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "knn1,flaml",
        value_name = "a,b"
    )]
    peers: Vec<String>,
    /// Output folder (created if missing): summary.json, summary.md, scores.svg, scores.png, the
    /// fresh store (store/), the compiled apps (apps/) and the FLAML files (flaml/).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// A peer method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Knn1,
    Flaml,
}

impl Peer {
    const ALL: [Peer; 2] = [Peer::Knn1, Peer::Flaml];

    fn name(self) -> &'static str {
        match self {
            Peer::Knn1 => "knn1",
            Peer::Flaml => "flaml",
        }
    }
}

fn parse_peers(names: &[String]) -> anyhow::Result<Vec<Peer>> {
    let mut peers = Vec::new();
    for name in names
        .iter()
        .map(|name| name.trim())
        .filter(|n| !n.is_empty())
    {
        let Some(peer) = Peer::ALL.into_iter().find(|peer| peer.name() == name) else {
            bail!(
                "unknown peer `{name}` (known: {})",
                Peer::ALL.map(Peer::name).join(", ")
            );
        };
        if !peers.contains(&peer) {
            peers.push(peer);
        }
    }
    Ok(peers)
}

/// One task, compiled and read.
struct Task {
    files: TaskFiles,
    app: String,
    spec: AppSpec,
    train: Vec<Example>,
    test: Vec<Example>,
}

impl Task {
    fn schema(&self) -> &Schema {
        self.spec.schema()
    }
}

/// One task's results.
#[derive(Default)]
struct Outcome {
    easeml: Option<f64>,
    easeml_model: Option<String>,
    easeml_note: Option<String>,
    peers: BTreeMap<&'static str, f64>,
    /// Why a peer has no score for this task.
    peer_errors: BTreeMap<&'static str, String>,
    flaml_model: Option<String>,
}

fn say(line: impl AsRef<str>) {
    eprintln!("==> {}", line.as_ref());
}

/// Runs `easeml bench quality`.
pub fn run(args: &QualityBenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let peers = parse_peers(&args.peers)?;
    let budget = args.budget.as_secs_f64();
    // Everything that can be wrong is found before the budget is spent.
    let flaml_python = if peers.contains(&Peer::Flaml) {
        Some(flaml::check_python()?)
    } else {
        None
    };
    let files = args
        .tasks
        .iter()
        .map(|dir| TaskFiles::find(dir))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let easemlc = task::find_easemlc()?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create `{}`", args.out.display()))?;
    let mut tasks: Vec<Task> = Vec::new();
    for (index, files) in files.into_iter().enumerate() {
        say(format!(
            "[{}/{}] {}: compiling {}",
            index + 1,
            args.tasks.len(),
            files.dir.display(),
            files.eml.display()
        ));
        let stem = files
            .eml
            .file_stem()
            .map_or_else(String::new, |stem| stem.to_string_lossy().into_owned());
        let spec = task::compile(&easemlc, &files, &args.out.join("apps").join(&stem))?;
        let app = spec.schema().app.clone();
        if let Some(other) = tasks.iter().find(|task| task.app == app) {
            bail!(
                "tasks `{}` and `{}` both define the app `{app}`; each task needs its own app name \
                 (the `.eml` file's name)",
                other.files.dir.display(),
                files.dir.display()
            );
        }
        let train = task::read_examples(&files, &files.train, spec.schema())?;
        let test = task::read_examples(&files, &files.test, spec.schema())?;
        say(format!(
            "{app}: {} ({}), {} training and {} test examples",
            spec.schema().system_type(),
            if is_classification(spec.schema()) {
                "accuracy"
            } else {
                "R^2"
            },
            train.len(),
            test.len()
        ));
        tasks.push(Task {
            files,
            app,
            spec,
            train,
            test,
        });
    }

    let home = args.out.join("store");
    if home.exists() {
        std::fs::remove_dir_all(&home)
            .with_context(|| format!("cannot remove the old store `{}`", home.display()))?;
    }
    let connection = Connection::Embedded { home: home.clone() };
    for task in &tasks {
        let mut client = Client::open(&connection, task.spec.clone())
            .with_context(|| format!("task `{}`: registering the app", task.files.dir.display()))?;
        let file = std::fs::File::open(&task.files.train)?;
        let report = client
            .feed_lines(BufReader::new(file), &task.files.feed_options())
            .with_context(|| format!("task `{}`: feeding train.txt", task.files.dir.display()))?;
        say(format!(
            "{}: fed {} examples into {}",
            task.app,
            report.added,
            home.display()
        ));
    }

    let device = choose_device().map_err(anyhow::Error::msg)?;
    let mut config = EngineConfig::for_device(device);
    config.max_run_seconds = config
        .max_run_seconds
        .min((budget / tasks.len() as f64).max(MIN_RUN_SECONDS));
    say(format!(
        "easeml: one engine over {} apps for {} on {} (runs of at most {:.0} s)",
        tasks.len(),
        format_seconds(budget),
        device_name(device),
        config.max_run_seconds
    ));
    {
        let mut engine = Engine::open(&home, config)
            .with_context(|| format!("opening the store at {}", home.display()))?;
        train_with_progress(&mut engine, Some(args.budget)).map_err(anyhow::Error::msg)?;
    }

    easeml_runtime::install_engine();
    let mut outcomes: Vec<Outcome> = Vec::new();
    for task in &tasks {
        let mut outcome = Outcome::default();
        let mut client = Client::open(&connection, task.spec.clone())?;
        let file = std::fs::File::open(&task.files.test)?;
        match client.infer_lines(BufReader::new(file), &task.files.feed_options()) {
            Ok(report) => {
                let answers: Vec<Target> = report
                    .answers
                    .iter()
                    .map(|(_, answer)| answer_target(task.schema(), answer))
                    .collect();
                let truth: Vec<Target> = task.test.iter().map(|e| e.target.clone()).collect();
                outcome.easeml = score(&answers, &truth);
                outcome.easeml_model = Some(report.candidate.clone());
            }
            Err(easeml_runtime::Error::NoModel { .. }) => {
                outcome.easeml_note = Some("no model finished within the budget".to_owned());
            }
            // Any other failure (e.g. a checkpoint that cannot be loaded) is this app's result,
            // not the end of the command: the other apps' results are kept.
            Err(error) => {
                let message = format!(
                    "task `{}`: answering test.txt: {}",
                    task.files.dir.display(),
                    crate::error_chain(&anyhow::Error::new(error))
                );
                eprintln!("warning: {message}");
                outcome.easeml_note = Some(message);
            }
        }
        say(format!(
            "{}: easeml {} ({})",
            task.app,
            format_score(outcome.easeml),
            outcome
                .easeml_model
                .as_deref()
                .or(outcome.easeml_note.as_deref())
                .unwrap_or("-")
        ));
        outcomes.push(outcome);
    }

    let flaml_budget = budget / tasks.len() as f64;
    for (task, outcome) in tasks.iter().zip(&mut outcomes) {
        if peers.is_empty() {
            break;
        }
        let flattener = Flattener::fit(task.train.iter().map(|example| &example.input));
        let train_x: Vec<Vec<f32>> = task
            .train
            .iter()
            .map(|e| flattener.flatten(&e.input))
            .collect();
        let train_y: Vec<Target> = task.train.iter().map(|e| e.target.clone()).collect();
        let test_x: Vec<Vec<f32>> = task
            .test
            .iter()
            .map(|e| flattener.flatten(&e.input))
            .collect();
        let truth: Vec<Target> = task.test.iter().map(|e| e.target.clone()).collect();
        for peer in &peers {
            let predictions = match peer {
                Peer::Knn1 => knn1(&train_x, &train_y, &test_x),
                Peer::Flaml => {
                    say(format!(
                        "{}: FLAML for {} on {} features",
                        task.app,
                        format_seconds(flaml_budget),
                        train_x.first().map_or(0, Vec::len)
                    ));
                    let python = flaml_python.as_deref().context("no peer Python")?;
                    let input = flaml::input_json(
                        is_classification(task.schema()),
                        flaml_budget,
                        &train_x,
                        &train_y,
                        &test_x,
                    );
                    // A failure on one task (FLAML's own error) is reported and recorded; the
                    // other tasks' results are not thrown away.
                    match flaml::run(
                        python,
                        &args.out.join("flaml"),
                        &task.app,
                        &input,
                        truth.len(),
                    ) {
                        Ok(answer) => {
                            outcome.flaml_model = Some(answer.best_estimator);
                            answer.predictions
                        }
                        Err(error) => {
                            let message = crate::error_chain(&error);
                            eprintln!("warning: {message}");
                            outcome.peer_errors.insert(peer.name(), message);
                            continue;
                        }
                    }
                }
            };
            let value = score(&predictions, &truth).with_context(|| {
                format!("{}: the {} answers cannot be scored", task.app, peer.name())
            })?;
            say(format!(
                "{}: {} {}",
                task.app,
                peer.name(),
                format_score(Some(value))
            ));
            outcome.peers.insert(peer.name(), value);
        }
    }

    let summary = summary_json(&tasks, &outcomes, &peers, budget, &device_name(device));
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )
    .context("cannot write summary.json")?;
    let table = table_markdown(&tasks, &outcomes, &peers, budget);
    std::fs::write(args.out.join("summary.md"), &table).context("cannot write summary.md")?;
    let plot = BarPlot {
        title: format!(
            "test accuracy (R^2 for regression), budget {}",
            format_seconds(budget)
        ),
        y_label: "test score".to_owned(),
        series: std::iter::once("easeml")
            .chain(peers.iter().map(|peer| peer.name()))
            .map(str::to_owned)
            .collect(),
        groups: tasks
            .iter()
            .zip(&outcomes)
            .map(|(task, outcome)| {
                let mut values = vec![outcome.easeml];
                values.extend(
                    peers
                        .iter()
                        .map(|peer| outcome.peers.get(peer.name()).copied()),
                );
                (task.app.clone(), values)
            })
            .collect(),
    };
    for note in write_bar_plots(&plot, &args.out, "scores")? {
        eprintln!("note: {note}");
    }
    print!("{table}");
    say(format!(
        "done in {}: wrote summary.json, summary.md, scores.svg and scores.png to {}",
        format_seconds(started.elapsed().as_secs_f64()),
        args.out.display()
    ));
    Ok(())
}

/// An answer of the served model as a target: its label (classification), else its values.
fn answer_target(schema: &Schema, answer: &Inference) -> Target {
    if is_classification(schema) {
        return match (&answer.output, answer.class) {
            (Value::String(label), _) => Target::Class(label.clone()),
            (_, Some(class)) => Target::Class(class_name(schema, class as usize)),
            (other, None) => Target::Class(other.to_string()),
        };
    }
    let values = easeml_runtime::object::object_from_json(&schema.output, &answer.output, "output")
        .map(|object| object.tensors.iter().flatten().copied().collect())
        .unwrap_or_default();
    Target::Values(values)
}

fn summary_json(
    tasks: &[Task],
    outcomes: &[Outcome],
    peers: &[Peer],
    budget: f64,
    device: &str,
) -> Value {
    let mut entries = serde_json::Map::new();
    for (task, outcome) in tasks.iter().zip(outcomes) {
        let mut entry = json!({
            "metric": if is_classification(task.schema()) { "accuracy" } else { "r2" },
            "dir": task.files.dir.display().to_string(),
            "train_examples": task.train.len(),
            "test_examples": task.test.len(),
            "easeml": outcome.easeml,
            "easeml_model": outcome.easeml_model,
        });
        if let Some(note) = &outcome.easeml_note {
            entry["easeml_note"] = json!(note);
        }
        for (name, value) in &outcome.peers {
            entry[*name] = json!(value);
        }
        for (name, error) in &outcome.peer_errors {
            entry[*name] = Value::Null;
            entry[format!("{name}_error")] = json!(error);
        }
        if let Some(model) = &outcome.flaml_model {
            entry["flaml_model"] = json!(model);
        }
        entries.insert(task.app.clone(), entry);
    }
    json!({
        "budget_seconds": budget,
        "peers": peers.iter().map(|peer| peer.name()).collect::<Vec<_>>(),
        "device": device,
        "tasks": entries,
    })
}

fn table_markdown(tasks: &[Task], outcomes: &[Outcome], peers: &[Peer], budget: f64) -> String {
    let mut header = vec!["task", "metric", "train", "test", "easeml", "easeml model"];
    header.extend(peers.iter().map(|peer| peer.name()));
    if peers.contains(&Peer::Flaml) {
        header.push("flaml model");
    }
    let mut table = format!(
        "Test scores, budget {} (accuracy; R^2 for regression apps)\n\n| {} |\n|{}|\n",
        format_seconds(budget),
        header.join(" | "),
        header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for (task, outcome) in tasks.iter().zip(outcomes) {
        let mut row = vec![
            task.app.clone(),
            if is_classification(task.schema()) {
                "accuracy"
            } else {
                "R^2"
            }
            .to_owned(),
            task.train.len().to_string(),
            task.test.len().to_string(),
            format_score(outcome.easeml),
            // Why there is no model is in summary.json (`easeml_note`), too long for a cell.
            outcome
                .easeml_model
                .clone()
                .unwrap_or_else(|| "none (see easeml_note)".to_owned()),
        ];
        row.extend(
            peers
                .iter()
                .map(|peer| format_score(outcome.peers.get(peer.name()).copied())),
        );
        if peers.contains(&Peer::Flaml) {
            row.push(outcome.flaml_model.clone().unwrap_or_default());
        }
        table.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    table
}

fn format_score(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| format!("{value:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_parsed_and_unknown_ones_named() {
        assert_eq!(
            parse_peers(&["knn1".into(), " flaml".into(), "knn1".into()]).unwrap(),
            vec![Peer::Knn1, Peer::Flaml]
        );
        assert!(parse_peers(&[String::new()]).unwrap().is_empty());
        let error = parse_peers(&["knn1".into(), "svm".into()]).unwrap_err();
        assert_eq!(error.to_string(), "unknown peer `svm` (known: knn1, flaml)");
    }

    #[test]
    fn scores_are_formatted_for_the_table() {
        assert_eq!(format_score(None), "-");
        assert_eq!(format_score(Some(0.98765)), "0.988");
    }
}
