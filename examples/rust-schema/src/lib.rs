//! `#[easeml_schema]` end to end, in embedded mode: two apps declared in Rust, one in each form of
//! the macro, fed real labelled examples, trained by the engine within a time budget, and asked to
//! answer held-out examples with their typed `Client`s.
//!
//! - [`wine`]: the inline form, `Input` / `Output` written as Rust structs (the UCI wine data: 13
//!   chemical measurements, which of three cultivars);
//! - [`breast_cancer`]: the file form over `breast_cancer.eml` next to this crate's Cargo.toml (the
//!   UCI Wisconsin diagnostic data: 30 measurements of cell nuclei, malignant or benign).
//!
//! The data (`data/`, see `data/PROVENANCE.md`) is embedded in the binary. Every fifth row is held
//! out; the others are fed. [`run`] does the whole job on one store; `src/main.rs` prints it.

use std::path::Path;
use std::time::{Duration, Instant};

use easeml_macros::easeml_schema;
use easeml_runtime::{Classified, Connection, Tensor};

/// Wine cultivars (`data/wine.csv`), declared inline.
#[easeml_schema(labels = [cultivar_1, cultivar_2, cultivar_3], constraint(train_time <= 1m))]
pub mod wine {
    pub struct Input {
        pub chemistry: Tensor<13>,
    }
    pub struct Output {
        pub cultivar: Tensor<3>,
    }
}

/// Breast-cancer diagnoses (`data/breast_cancer.csv`), declared in `breast_cancer.eml`.
#[easeml_schema(file = "breast_cancer.eml")]
pub mod breast_cancer {}

/// The wine data, as scikit-learn ships it.
pub const WINE_CSV: &str = include_str!("../data/wine.csv");
/// The breast-cancer data, as scikit-learn ships it.
pub const BREAST_CANCER_CSV: &str = include_str!("../data/breast_cancer.csv");

/// Errors of this example, as text for the user.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A labelled table: one row of features and a class index per example, and the class names.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Features and class index, in file order.
    pub rows: Vec<(Vec<f32>, usize)>,
    /// The class names of the header line.
    pub classes: Vec<String>,
}

/// Reads scikit-learn's CSV form: a header `n_samples,n_features,class names...`, then rows of
/// `n_features` numbers and a class index. Every count is checked; an error names the line.
pub fn parse_table(text: &str) -> Result<Table, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty());
    let (_, header) = lines.next().ok_or("the table is empty")?;
    let header: Vec<&str> = header.split(',').map(str::trim).collect();
    let count = |index: usize, what: &str| -> Result<usize, String> {
        header
            .get(index)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| format!("line 1: the header does not give {what}"))
    };
    let samples = count(0, "the number of rows")?;
    let features = count(1, "the number of features")?;
    let classes: Vec<String> = header.iter().skip(2).map(|name| name.to_string()).collect();
    let mut rows = Vec::with_capacity(samples);
    for (index, line) in lines {
        let number = index + 1;
        let values: Vec<&str> = line.split(',').map(str::trim).collect();
        if values.len() != features + 1 {
            return Err(format!(
                "line {number}: {} values, expected {features} features and a class",
                values.len()
            ));
        }
        let row = values[..features]
            .iter()
            .map(|value| {
                value
                    .parse::<f32>()
                    .ok()
                    .filter(|value| value.is_finite())
                    .ok_or_else(|| format!("line {number}: `{value}` is not a number"))
            })
            .collect::<Result<Vec<f32>, String>>()?;
        let class = values[features]
            .parse::<usize>()
            .ok()
            .filter(|class| *class < classes.len())
            .ok_or_else(|| {
                format!(
                    "line {number}: the class `{}` is not one of the {} classes",
                    values[features],
                    classes.len()
                )
            })?;
        rows.push((row, class));
    }
    if rows.len() != samples {
        return Err(format!(
            "the header says {samples} rows, the table has {}",
            rows.len()
        ));
    }
    Ok(Table { rows, classes })
}

/// Whether the row at `index` is held out for the accuracy (every fifth; the tables are sorted by
/// class, so each class is held out in proportion).
pub fn held_out(index: usize) -> bool {
    index % 5 == 4
}

/// How one app did.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    /// The app's name.
    pub app: &'static str,
    /// Which form of the macro declared it.
    pub form: &'static str,
    /// Examples fed.
    pub fed: usize,
    /// Held-out examples answered.
    pub held_out: usize,
    /// Held-out examples answered right.
    pub correct: usize,
    /// The best run's candidate model and its validation quality.
    pub best: Option<(String, f64)>,
    /// The app's status report after training (every run, the best marked).
    pub status: easeml_runtime::Status,
}

impl AppReport {
    /// The held-out accuracy.
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.held_out.max(1) as f64
    }
}

/// What [`run`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// One report per app.
    pub apps: Vec<AppReport>,
    /// Training runs finished and failed.
    pub runs: (usize, usize),
    /// Seconds spent training.
    pub train_seconds: f64,
}

/// Feeds both apps in the store at `home` (embedded mode), trains every app of that store for at
/// most `budget` (each run at most `max_run`), and answers the held-out rows.
pub fn run(home: &Path, budget: Duration, max_run: Duration) -> Result<Report, Error> {
    let connection = Connection::embedded(home);
    let wine_table = parse_table(WINE_CSV)?;
    let cancer_table = parse_table(BREAST_CANCER_CSV)?;
    let cancer_names: Vec<&str> = breast_cancer::Label::ALL.iter().map(|l| l.name()).collect();
    if cancer_table.classes != cancer_names {
        return Err(format!(
            "data/breast_cancer.csv names the classes {:?}, breast_cancer.eml {cancer_names:?}",
            cancer_table.classes
        )
        .into());
    }

    let mut wine_client = wine::Client::open(&connection)?;
    let wine_rows = split(&wine_table, |values| {
        wine::Input::new(Tensor::new(vec![13], values)?)
    })?;
    let wine_fed = wine_client
        .feed_labelled(
            wine_rows
                .train
                .iter()
                .map(|(input, class)| (input.clone(), wine::Label::ALL[*class])),
        )?
        .added;

    let mut cancer_client = breast_cancer::Client::open(&connection)?;
    let cancer_rows = split(&cancer_table, |values| {
        breast_cancer::Input::new(Tensor::new(vec![30], values)?)
    })?;
    let cancer_fed = cancer_client
        .feed_labelled(
            cancer_rows
                .train
                .iter()
                .map(|(input, class)| (input.clone(), breast_cancer::Label::ALL[*class])),
        )?
        .added;

    let started = Instant::now();
    let device = easeml_runtime::engine::choose_device()?;
    let mut config = easeml_runtime::engine::EngineConfig::for_device(device);
    config.max_run_seconds = max_run.as_secs_f64();
    let mut engine = easeml_runtime::engine::Engine::open(home, config)?;
    let summary = easeml_app_engine::train_with_progress(&mut engine, Some(budget))?;
    let train_seconds = started.elapsed().as_secs_f64();

    let wine_answers =
        wine_client.infer(wine_rows.held_out.iter().map(|(input, _)| input.clone()))?;
    let cancer_answers =
        cancer_client.infer(cancer_rows.held_out.iter().map(|(input, _)| input.clone()))?;
    well_formed(&wine_answers, wine::Label::ALL.len(), wine::Label::index)?;
    well_formed(
        &cancer_answers,
        breast_cancer::Label::ALL.len(),
        breast_cancer::Label::index,
    )?;
    let wine_status = wine_client.status()?;
    let cancer_status = cancer_client.status()?;
    let apps = vec![
        AppReport {
            app: wine::APP,
            form: "inline",
            fed: wine_fed,
            held_out: wine_rows.held_out.len(),
            correct: correct(&wine_answers, &wine_rows.held_out, wine::Label::index),
            best: best(&wine_status),
            status: wine_status,
        },
        AppReport {
            app: breast_cancer::APP,
            form: "file = \"breast_cancer.eml\"",
            fed: cancer_fed,
            held_out: cancer_rows.held_out.len(),
            correct: correct(
                &cancer_answers,
                &cancer_rows.held_out,
                breast_cancer::Label::index,
            ),
            best: best(&cancer_status),
            status: cancer_status,
        },
    ];
    Ok(Report {
        apps,
        runs: (summary.finished, summary.failed),
        train_seconds,
    })
}

/// Typed inputs with their class, fed or held out.
struct Split<I> {
    train: Vec<(I, usize)>,
    held_out: Vec<(I, usize)>,
}

fn split<I>(
    table: &Table,
    input: impl Fn(Vec<f32>) -> Result<I, easeml_runtime::ShapeError>,
) -> Result<Split<I>, Error> {
    let mut split = Split {
        train: Vec::new(),
        held_out: Vec::new(),
    };
    for (index, (values, class)) in table.rows.iter().enumerate() {
        let row = (input(values.clone())?, *class);
        if held_out(index) {
            split.held_out.push(row);
        } else {
            split.train.push(row);
        }
    }
    Ok(split)
}

/// Checks that every typed answer gives each class a probability and that its `confidence` is its
/// label's (what the typed client promises).
fn well_formed<L: Copy + std::fmt::Debug>(
    answers: &[Classified<L>],
    classes: usize,
    index: fn(L) -> usize,
) -> Result<(), Error> {
    for answer in answers {
        let own = answer.probabilities.get(index(answer.label)).copied();
        if answer.probabilities.len() != classes || own != Some(answer.confidence) {
            return Err(format!("an answer that does not hold together: {answer:?}").into());
        }
    }
    Ok(())
}

/// How many answers name the expected class.
fn correct<L: Copy, I>(
    answers: &[Classified<L>],
    expected: &[(I, usize)],
    index: fn(L) -> usize,
) -> usize {
    answers
        .iter()
        .zip(expected)
        .filter(|(answer, (_, class))| index(answer.label) == *class)
        .count()
}

/// The best run's candidate and quality.
fn best(status: &easeml_runtime::Status) -> Option<(String, f64)> {
    let best = status.best.as_ref()?;
    Some((best.candidate.clone(), best.quality?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_tables_parse_with_their_counts() {
        let wine = parse_table(WINE_CSV).unwrap();
        assert_eq!((wine.rows.len(), wine.classes.len()), (178, 3));
        assert!(wine.rows.iter().all(|(values, _)| values.len() == 13));
        let cancer = parse_table(BREAST_CANCER_CSV).unwrap();
        assert_eq!(cancer.rows.len(), 569);
        assert_eq!(cancer.classes, ["malignant", "benign"]);
        assert_eq!(
            cancer.rows.iter().filter(|(_, class)| *class == 0).count(),
            212
        );
    }

    #[test]
    fn bad_tables_name_the_line() {
        let error = |text: &str| parse_table(text).unwrap_err();
        assert_eq!(error(""), "the table is empty");
        assert_eq!(
            error("x,2,a,b\n"),
            "line 1: the header does not give the number of rows"
        );
        assert_eq!(
            error("1,y,a,b\n"),
            "line 1: the header does not give the number of features"
        );
        assert_eq!(
            error("1,2,a,b\n1,2\n"),
            "line 2: 2 values, expected 2 features and a class"
        );
        assert_eq!(error("1,2,a,b\n1,z,0\n"), "line 2: `z` is not a number");
        assert_eq!(error("1,2,a,b\n1,inf,0\n"), "line 2: `inf` is not a number");
        assert_eq!(
            error("1,2,a,b\n1,2,2\n"),
            "line 2: the class `2` is not one of the 2 classes"
        );
        assert_eq!(
            error("2,2,a,b\n1,2,1\n"),
            "the header says 2 rows, the table has 1"
        );
    }

    #[test]
    fn every_fifth_row_is_held_out() {
        let held: Vec<usize> = (0..12).filter(|index| held_out(*index)).collect();
        assert_eq!(held, [4, 9]);
    }

    #[test]
    fn both_forms_declare_the_apps_the_data_needs() {
        assert_eq!(wine::Input::CHEMISTRY_SHAPE, [13]);
        assert_eq!(wine::Label::ALL.len(), 3);
        assert_eq!(breast_cancer::Input::NUCLEI_SHAPE, [30]);
        assert_eq!(
            breast_cancer::SYSTEM_TYPE,
            "{input: {[Tensor[30]], []}, output: {[Tensor[2]], []}}"
        );
        assert!(breast_cancer::MANIFEST.contains("\"workload\": \"tabular_classification\""));
    }
}
