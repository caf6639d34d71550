//! `easeml bench quality`: easeml's test accuracy on real tasks against peers, in one command.
//!
//! Each `--task DIR` holds one `.eml` program, `train.txt` and `test.txt` in the feed's line
//! formats (`task.rs`). The command compiles every program with the `easemlc` binary (the compiler
//! a user runs, with its own checks and messages), registers and feeds each app into a fresh store
//! (`--out/store`, removed first; never `$EASEML_HOME`) through the client library (the
//! `<app>-feed` binary's checks), runs ONE engine over all apps for `--budget` (a run may take at
//! most the budget's share per task, capped at the engine's default), and answers `test.txt` with
//! each app's best model (the client's `infer_lines`, as `<app>-infer` does). The peers run on the
//! same splits: `knn1` (`knn.rs`) and `flaml` (`flaml.rs`, FLAML with the same total budget split
//! evenly across tasks). Every method is scored by `knn::score` (accuracy, or R^2 for apps whose
//! output is not a class). Writes `summary.json`, `summary.md` (the table, also printed),
//! `scores.svg` / `scores.png` and `quality.svg` / `quality.png` (every app's best validation
//! quality over the first repeat's session) to `--out`. Beside each test score, what the app's
//! `status` reported for its served model (`served.rs`): its validation quality, its 95% interval,
//! and whether the test accuracy fell inside it; and every model family's own test score
//! (`families.rs`: the run the choice rule would serve within each family, asked test.txt), with
//! the served model's distance below the best of them. `--no-ensembles` and `--no-set-aside` turn
//! off the engine's ensembles and its budget rule, for before/after comparisons in one binary.
//!
//! `--repeat N` runs the whole comparison N times (a fresh store and another engine seed each time;
//! the tasks' train/test splits are fixed files, so the seed is what varies), and reports each
//! method's mean score per task with its spread over the repeats. Beside the per-task table, every
//! method's **mean rank** across tasks (1 = best on a task, ties share the mean of their ranks, a
//! method without a score ranks last), averaged over the repeats with its spread: one number that
//! says who wins across tasks, without averaging accuracies of unlike tasks.

mod families;
mod flaml;
mod knn;
mod served;
mod task;

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use easeml_runtime::app_cli::{format_seconds, parse_duration};
use easeml_runtime::engine::progress::{quality_curves, train_with_progress};
use easeml_runtime::engine::{Engine, EngineConfig, choose_device, device_name};
use easeml_runtime::{AppSpec, Client, Connection, Inference, Schema};
use serde_json::{Value, json};

use crate::harness::plot::{BarPlot, QualityCurve, write_bar_plots, write_quality_plots};
use families::{
    FamilyCount, FamilyScore, below_best_family, best_family, best_family_cell, families_json,
    family_scores,
};
use knn::{Flattener, knn1, score};
use served::{IntervalCount, ensemble_label, expected_cell, within_interval};
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
    /// Output folder (created if missing): summary.json, summary.md, scores.svg / .png,
    /// quality.svg / .png (best validation quality over time), the fresh store (store/), the
    /// compiled apps (apps/) and the FLAML files (flaml/).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Run the whole comparison this many times (another engine seed and a fresh store each
    /// time): scores are then means with their spread, and the mean rank has a spread too.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Serve no ensembles: every app's best run alone answers (issue 48's "without ensembles").
    #[arg(long)]
    no_ensembles: bool,
    /// Set no kin aside: the scheduler may train every candidate of a kin that is far below the
    /// app's best (issue 48's "without the budget rule"; `SchedulerConfig::set_aside_margin`).
    #[arg(long)]
    no_set_aside: bool,
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

    /// The test score of `answers`, one per line of test.txt in order (accuracy or R^2 against
    /// the test examples' targets; `None` when the counts differ): the one rule every model asked
    /// the test set is scored by.
    fn score_answers<'a>(&self, answers: impl IntoIterator<Item = &'a Inference>) -> Option<f64> {
        let answers: Vec<Target> = answers
            .into_iter()
            .map(|answer| answer_target(self.schema(), answer))
            .collect();
        let truth: Vec<Target> = self.test.iter().map(|e| e.target.clone()).collect();
        score(&answers, &truth)
    }
}

/// One task's results.
#[derive(Default)]
struct Outcome {
    easeml: Option<f64>,
    easeml_model: Option<String>,
    easeml_note: Option<String>,
    /// The served model's validation quality as `status` reports it (the ensemble's when one is
    /// served); its expected quality on new examples (`best.expected`, its choice among the runs
    /// accounted for); and the 95% interval of the expected quality, or where the engine gave
    /// none, for accuracy the validation quality's: what the app told its user to expect.
    easeml_validation: Option<f64>,
    easeml_expected: Option<f64>,
    easeml_interval: Option<[f64; 2]>,
    /// Every model family's own test score (`families.rs`): the served model held against the
    /// best of them.
    families: Vec<FamilyScore>,
    peers: BTreeMap<&'static str, f64>,
    /// Why a peer has no score for this task.
    peer_errors: BTreeMap<&'static str, String>,
    flaml_model: Option<String>,
}

/// One method's scores on one task over the repeats (`None`: no score that time).
fn mean_and_std(values: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    if known.is_empty() {
        return (None, None);
    }
    let mean = known.iter().sum::<f64>() / known.len() as f64;
    let std = (known.len() > 1).then(|| {
        (known
            .iter()
            .map(|value| (value - mean).powi(2))
            .sum::<f64>()
            / (known.len() - 1) as f64)
            .sqrt()
    });
    (Some(mean), std)
}

/// Each method's rank on one task (1 = the highest score; ties share the mean of their ranks; a
/// method without a score ranks after every scored one, tied with the other unscored ones).
fn ranks(scores: &[Option<f64>]) -> Vec<f64> {
    scores
        .iter()
        .map(|score| {
            let key = |value: &Option<f64>| value.unwrap_or(f64::NEG_INFINITY);
            let mine = key(score);
            let better = scores.iter().filter(|other| key(other) > mine).count();
            let tied = scores.iter().filter(|other| key(other) == mine).count();
            // Ranks better+1 ..= better+tied, averaged.
            better as f64 + (tied as f64 + 1.0) / 2.0
        })
        .collect()
}

/// Every method's mean rank across tasks, for one repeat: `scores[task][method]`.
fn mean_ranks(scores: &[Vec<Option<f64>>], methods: usize) -> Vec<f64> {
    let mut sums = vec![0.0; methods];
    for task in scores {
        for (sum, rank) in sums.iter_mut().zip(ranks(task)) {
            *sum += rank;
        }
    }
    sums.iter()
        .map(|sum| sum / scores.len().max(1) as f64)
        .collect()
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

    let mut runs: Vec<Vec<Outcome>> = Vec::new();
    let mut device_used = String::new();
    for repeat in 0..args.repeat {
        if args.repeat > 1 {
            say(format!("repeat {} of {}", repeat + 1, args.repeat));
        }
        let (outcomes, device) = run_once(
            args,
            &tasks,
            &peers,
            flaml_python.as_deref(),
            u64::from(repeat),
        )?;
        device_used = device;
        runs.push(outcomes);
    }
    let outcomes = mean_outcomes(&runs);
    let ranking = Ranking::of(&runs, &peers);
    let summary = summary_json(
        &tasks,
        &runs,
        &outcomes,
        &ranking,
        &peers,
        budget,
        &device_used,
    );
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )
    .context("cannot write summary.json")?;
    let mut table = table_markdown(&tasks, &outcomes, &peers, budget);
    table.push_str(&ranking.markdown(args.repeat));
    table.push_str(&IntervalCount::of(&runs).markdown());
    table.push_str(&FamilyCount::of(&apps(&tasks), &runs).markdown());
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
        "done in {}: wrote summary.json, summary.md, scores.svg / .png and quality.svg / .png to {}",
        format_seconds(started.elapsed().as_secs_f64()),
        args.out.display()
    ));
    Ok(())
}

/// easeml's answers to one task's test.txt, scored (or why there are none).
fn answer_test_set(task: &Task, connection: &Connection) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut client = Client::open(connection, task.spec.clone())?;
    let file = std::fs::File::open(&task.files.test)?;
    match client.infer_lines(BufReader::new(file), &task.files.feed_options()) {
        Ok(report) => {
            outcome.easeml = task.score_answers(report.answers.iter().map(|(_, answer)| answer));
            outcome.easeml_model = Some(report.candidate.clone());
            let best = match client.status() {
                Ok(status) => status.best,
                Err(error) => {
                    eprintln!(
                        "warning: task `{}`: reading the status for the served model's quality: {}",
                        task.files.dir.display(),
                        easeml_runtime::error_chain(&error)
                    );
                    None
                }
            };
            if let Some(best) = best {
                (outcome.easeml_validation, outcome.easeml_interval) = match &best.ensemble {
                    Some(ensemble) => {
                        // `infer` names the best single run; the ensemble answered.
                        outcome.easeml_model = Some(ensemble_label(&ensemble.members));
                        (Some(ensemble.quality), ensemble.interval)
                    }
                    None => (best.quality, best.interval),
                };
                // The interval the served model is expected within, its choice accounted for,
                // replaces the validation quality's own when the engine estimated it.
                if let Some(expected) = &best.expected {
                    outcome.easeml_expected = Some(expected.quality);
                    outcome.easeml_interval = Some(expected.interval);
                }
            }
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
                easeml_runtime::error_chain(&error)
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
    Ok(outcome)
}

/// The peers on one task, flattened to feature vectors: their scores (or errors) into `outcome`.
fn run_peers(
    (args, flaml_python): (&QualityBenchArgs, Option<&std::path::Path>),
    task: &Task,
    outcome: &mut Outcome,
    peers: &[Peer],
    flaml_budget: f64,
) -> anyhow::Result<()> {
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
    for peer in peers {
        let predictions = match peer {
            Peer::Knn1 => knn1(&train_x, &train_y, &test_x),
            Peer::Flaml => {
                say(format!(
                    "{}: FLAML for {} on {} features",
                    task.app,
                    format_seconds(flaml_budget),
                    train_x.first().map_or(0, Vec::len)
                ));
                let python = flaml_python.context("no peer Python")?;
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
                        let message = easeml_runtime::error_chain(error.as_ref());
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
    Ok(())
}

/// One repeat of the comparison: a fresh store, one engine over every app, the answers scored, the
/// peers run; each task's outcome, and the device's name.
fn run_once(
    args: &QualityBenchArgs,
    tasks: &[Task],
    peers: &[Peer],
    flaml_python: Option<&std::path::Path>,
    repeat: u64,
) -> anyhow::Result<(Vec<Outcome>, String)> {
    let budget = args.budget.as_secs_f64();
    let home = args.out.join("store");
    if home.exists() {
        std::fs::remove_dir_all(&home)
            .with_context(|| format!("cannot remove the old store `{}`", home.display()))?;
    }
    let connection = Connection::Embedded { home: home.clone() };
    let mut families: Vec<Vec<FamilyScore>> = Vec::with_capacity(tasks.len());
    for task in tasks {
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
    config.ensembles = !args.no_ensembles;
    if args.no_set_aside {
        config.scheduler.set_aside_margin = None;
    }
    // Each repeat its own seed (the first the engine's default, as a single run has).
    config.seed ^= repeat.wrapping_mul(0x9E37_79B9_7F4A_7C15);
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
        train_with_progress(&mut engine, Some(args.budget))?;
        for task in tasks {
            let scores = family_scores(engine.store(), task, device).with_context(|| {
                format!("task `{}`: scoring every family", task.files.dir.display())
            })?;
            let cells: Vec<String> = scores
                .iter()
                .map(|family| format!("{} {}", family.family, format_score(family.score)))
                .collect();
            say(format!(
                "{}: every family on test.txt: {}",
                task.app,
                cells.join(", ")
            ));
            families.push(scores);
        }
        // Every app's best validation quality over the session: the first repeat's.
        if repeat == 0 {
            let curves: Vec<QualityCurve> = quality_curves(engine.store())?
                .into_iter()
                .map(|(app, points)| QualityCurve { app, points })
                .collect();
            for note in write_quality_plots(&curves, &args.out)? {
                eprintln!("note: {note}");
            }
        }
    }

    easeml_runtime::install_engine();
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (task, families) in tasks.iter().zip(families) {
        let mut outcome = answer_test_set(task, &connection)?;
        outcome.families = families;
        outcomes.push(outcome);
    }

    let flaml_budget = budget / tasks.len() as f64;
    for (task, outcome) in tasks.iter().zip(&mut outcomes) {
        if peers.is_empty() {
            break;
        }
        run_peers((args, flaml_python), task, outcome, peers, flaml_budget)?;
    }

    Ok((outcomes, device_name(device)))
}

/// Each task's outcome averaged over the repeats (scores as means; the first repeat's model and
/// notes), with every repeat's scores kept for the spread.
fn mean_outcomes(runs: &[Vec<Outcome>]) -> Vec<Outcome> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|task| {
            let of_task: Vec<&Outcome> = runs.iter().map(|run| &run[task]).collect();
            let easeml: Vec<Option<f64>> = of_task.iter().map(|outcome| outcome.easeml).collect();
            let mut mean = Outcome {
                easeml: mean_and_std(&easeml).0,
                easeml_model: of_task[0].easeml_model.clone(),
                easeml_note: of_task[0].easeml_note.clone(),
                easeml_validation: of_task[0].easeml_validation,
                easeml_expected: of_task[0].easeml_expected,
                easeml_interval: of_task[0].easeml_interval,
                families: of_task[0].families.clone(),
                peers: BTreeMap::new(),
                peer_errors: of_task[0].peer_errors.clone(),
                flaml_model: of_task[0].flaml_model.clone(),
            };
            let names: std::collections::BTreeSet<&'static str> = of_task
                .iter()
                .flat_map(|outcome| outcome.peers.keys().copied())
                .collect();
            for name in names {
                let values: Vec<Option<f64>> = of_task
                    .iter()
                    .map(|outcome| outcome.peers.get(name).copied())
                    .collect();
                if let Some(value) = mean_and_std(&values).0 {
                    mean.peers.insert(name, value);
                }
            }
            mean
        })
        .collect()
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

/// Every method's mean rank across tasks, over the repeats (`easeml` first, then the peers).
struct Ranking {
    methods: Vec<&'static str>,
    /// Per method: the mean over the repeats of its mean rank across tasks.
    mean: Vec<f64>,
    /// Per method: the standard deviation of that over the repeats (0 for one repeat).
    std: Vec<f64>,
}

impl Ranking {
    fn of(runs: &[Vec<Outcome>], peers: &[Peer]) -> Ranking {
        let methods: Vec<&'static str> = std::iter::once("easeml")
            .chain(peers.iter().map(|peer| peer.name()))
            .collect();
        let per_repeat: Vec<Vec<f64>> = runs
            .iter()
            .map(|outcomes| {
                let scores: Vec<Vec<Option<f64>>> = outcomes
                    .iter()
                    .map(|outcome| {
                        std::iter::once(outcome.easeml)
                            .chain(
                                peers
                                    .iter()
                                    .map(|peer| outcome.peers.get(peer.name()).copied()),
                            )
                            .collect()
                    })
                    .collect();
                mean_ranks(&scores, methods.len())
            })
            .collect();
        let (mean, std) = (0..methods.len())
            .map(|method| {
                let values: Vec<Option<f64>> =
                    per_repeat.iter().map(|ranks| Some(ranks[method])).collect();
                let (mean, std) = mean_and_std(&values);
                (mean.unwrap_or(f64::NAN), std.unwrap_or(0.0))
            })
            .unzip();
        Ranking { methods, mean, std }
    }

    fn json(&self, values: &[f64]) -> Value {
        Value::Object(
            self.methods
                .iter()
                .zip(values)
                .map(|(method, value)| ((*method).to_owned(), json!(value)))
                .collect(),
        )
    }

    fn markdown(&self, repeats: u32) -> String {
        let cells: Vec<String> = self
            .methods
            .iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(method, (mean, std))| {
                if repeats > 1 {
                    format!("{method} {mean:.2} ± {std:.2}")
                } else {
                    format!("{method} {mean:.2}")
                }
            })
            .collect();
        format!(
            "\nMean rank across tasks (1 = best; {} repeat{}): {}\n",
            repeats,
            if repeats == 1 { "" } else { "s" },
            cells.join(", ")
        )
    }
}

fn summary_json(
    tasks: &[Task],
    runs: &[Vec<Outcome>],
    outcomes: &[Outcome],
    ranking: &Ranking,
    peers: &[Peer],
    budget: f64,
    device: &str,
) -> Value {
    let mut entries = serde_json::Map::new();
    for (index, (task, outcome)) in tasks.iter().zip(outcomes).enumerate() {
        let mut entry = json!({
            "metric": if is_classification(task.schema()) { "accuracy" } else { "r2" },
            "dir": task.files.dir.display().to_string(),
            "train_examples": task.train.len(),
            "test_examples": task.test.len(),
            "easeml": outcome.easeml,
            "easeml_model": outcome.easeml_model,
            "easeml_validation": outcome.easeml_validation,
            "easeml_expected": outcome.easeml_expected,
            "easeml_interval": outcome.easeml_interval,
            // One repeat's test score against its own interval (the mean over repeats belongs to
            // no single interval): the first's.
            "easeml_within_interval": runs.first().and_then(|run| run.get(index)).and_then(within_interval),
            // Every family's own model on the test set (the first repeat's), the best of them and
            // how far the served model fell below it.
            "easeml_families": families_json(&outcome.families),
            "easeml_best_family": best_family(&outcome.families).map(|family| family.family.clone()),
            "easeml_below_best_family": runs.first().and_then(|run| run.get(index)).and_then(below_best_family),
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
        if runs.len() > 1 {
            // Every repeat's score, and the spread, per method.
            let of_method = |score: &dyn Fn(&Outcome) -> Option<f64>| {
                let values: Vec<Option<f64>> = runs.iter().map(|run| score(&run[index])).collect();
                (json!(values), json!(mean_and_std(&values).1))
            };
            let (values, std) = of_method(&|outcome| outcome.easeml);
            entry["easeml_repeats"] = values;
            entry["easeml_std"] = std;
            entry["easeml_models"] = json!(
                runs.iter()
                    .map(|run| run[index].easeml_model.clone())
                    .collect::<Vec<_>>()
            );
            for peer in peers {
                let (values, std) = of_method(&|outcome| outcome.peers.get(peer.name()).copied());
                entry[format!("{}_repeats", peer.name())] = values;
                entry[format!("{}_std", peer.name())] = std;
            }
        }
        entries.insert(task.app.clone(), entry);
    }
    json!({
        "budget_seconds": budget,
        "repeat": runs.len(),
        "peers": peers.iter().map(|peer| peer.name()).collect::<Vec<_>>(),
        "device": device,
        "tasks": entries,
        "mean_rank": ranking.json(&ranking.mean),
        "mean_rank_std": ranking.json(&ranking.std),
        "within_interval": IntervalCount::of(runs).json(),
        "best_family": FamilyCount::of(&apps(tasks), runs).json(),
    })
}

fn table_markdown(tasks: &[Task], outcomes: &[Outcome], peers: &[Peer], budget: f64) -> String {
    let mut header = vec![
        "task",
        "metric",
        "train",
        "test",
        "easeml",
        "expected [95%]",
        "easeml model",
        "best family",
    ];
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
            expected_cell(outcome),
            // Why there is no model is in summary.json (`easeml_note`), too long for a cell.
            outcome
                .easeml_model
                .clone()
                .unwrap_or_else(|| "none (see easeml_note)".to_owned()),
            best_family_cell(outcome),
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

/// The tasks' app names, in order.
fn apps(tasks: &[Task]) -> Vec<&str> {
    tasks.iter().map(|task| task.app.as_str()).collect()
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
    fn ranks_share_ties_and_put_missing_scores_last() {
        assert_eq!(
            ranks(&[Some(0.9), Some(0.8), Some(0.95)]),
            vec![2.0, 3.0, 1.0]
        );
        assert_eq!(
            ranks(&[Some(0.9), Some(0.9), Some(0.5)]),
            vec![1.5, 1.5, 3.0]
        );
        assert_eq!(ranks(&[None, Some(0.1), None]), vec![2.5, 1.0, 2.5]);
        // Two tasks: easeml best on one, tied first on the other.
        let scores = vec![
            vec![Some(0.9), Some(0.7), Some(0.8)],
            vec![Some(0.6), Some(0.6), Some(0.5)],
        ];
        assert_eq!(mean_ranks(&scores, 3), vec![1.25, 2.25, 2.5]);
        assert_eq!(
            mean_and_std(&[Some(1.0), None, Some(3.0)]),
            (Some(2.0), Some(2f64.sqrt()))
        );
        assert_eq!(mean_and_std(&[None]), (None, None));
        assert_eq!(mean_and_std(&[Some(0.5)]), (Some(0.5), None));
    }

    #[test]
    fn repeats_average_each_method_and_rank_with_a_spread() {
        let outcome = |easeml: Option<f64>, knn1: f64| Outcome {
            easeml,
            easeml_model: Some("gbdt".to_owned()),
            peers: BTreeMap::from([("knn1", knn1)]),
            ..Outcome::default()
        };
        // Two repeats of one task: easeml wins the first, loses the second.
        let runs = vec![vec![outcome(Some(0.9), 0.8)], vec![outcome(Some(0.7), 0.8)]];
        let means = mean_outcomes(&runs);
        assert!((means[0].easeml.unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(means[0].peers["knn1"], 0.8);
        let ranking = Ranking::of(&runs, &[Peer::Knn1]);
        assert_eq!(ranking.methods, vec!["easeml", "knn1"]);
        assert_eq!(ranking.mean, vec![1.5, 1.5]);
        assert!((ranking.std[0] - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(
            ranking.markdown(2),
            "\nMean rank across tasks (1 = best; 2 repeats): easeml 1.50 ± 0.71, knn1 1.50 ± 0.71\n"
        );
        let json = ranking.json(&ranking.mean);
        assert_eq!(json["easeml"], 1.5);
    }

    #[test]
    fn scores_are_formatted_for_the_table() {
        assert_eq!(format_score(None), "-");
        assert_eq!(format_score(Some(0.98765)), "0.988");
    }
}
