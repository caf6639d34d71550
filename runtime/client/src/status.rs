//! The status report of paper figure 5: every run of an app with its date, candidate, quality (with
//! its spread over folds under k-fold cross-validation) and cost, how the quality was measured, the
//! best so far marked, which constraints each run broke, and what is queued or running now.
//!
//! The report says in words what a scientist asks first: which model answers now, which data it
//! saw (its data version, and whether that is the current one: `easeml_store::best_run`'s rule makes
//! the served model follow the data), how its quality was measured (the metric and protocol, "accuracy,
//! 5-fold stratified cross-validation on 142 examples"), and whether the search is still going on
//! ([`Phase`]).

use std::collections::BTreeMap;
use std::fmt;

use easeml_object::Confusion;
use easeml_serving::QualityMetric;
use easeml_stats::protocol::Protocol;
use easeml_store::{
    ConstraintLimits, MIN_TRAINING_EXAMPLES, RunId, RunRecord, RunState, SubEpochRecord,
    format_seconds, format_utc,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod ensemble;
mod expected;
pub use ensemble::{EnsembleMemberReport, EnsembleReport};
pub use expected::{EXPECTED_METHOD, ExpectedQuality};

/// An app's status (the JSON of `GET /api/v1/apps/{name}/status`, both ways).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The app's name.
    pub app: String,
    /// Its canonical system data type.
    pub system_type: String,
    /// Its data version.
    pub data_version: u64,
    /// How many examples are stored.
    pub examples: u64,
    /// How many of them are enabled.
    pub enabled_examples: u64,
    /// Every run, oldest first.
    pub runs: Vec<RunReport>,
    /// The model that answers `infer` (`easeml_store::best_run`): the best finished run of the
    /// newest data version that has one, breaking none of the app's constraints; `None` before any.
    pub best: Option<BestModel>,
    /// Where the search stands.
    pub phase: Phase,
    /// The same in one line of words for people, shown by `status` and every page:
    /// `finished: serving kernel_ridge (run 12, data version 3)`.
    pub summary: String,
}

/// The served model, as the report and `status --json` (`best.*`) describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestModel {
    /// Its run.
    #[serde(serialize_with = "run_id", deserialize_with = "deserialize_run_id")]
    pub run: RunId,
    /// That run's number within the app (1, 2, ...), as the report shows it; 0 from a server that
    /// predates run numbers.
    #[serde(default)]
    pub number: u64,
    /// The candidate id, e.g. `kernel_ridge`.
    pub candidate: String,
    /// The data version it was trained on.
    pub data_version: u64,
    /// Whether that is the app's current data version; `false` while the app retrains after a feed
    /// or a toggle (the older model serves until a run on the new data finishes).
    pub current: bool,
    /// Its validation quality in [0, 1] (under k-fold the mean over the folds).
    pub quality: Option<f64>,
    /// The standard deviation of the quality over the folds (k-fold), else `None`.
    pub quality_std: Option<f64>,
    /// What the quality is: `accuracy` or `R²` ([`QualityMetric`]).
    pub metric: String,
    /// How it was measured (`5-fold stratified`, `split 20%`), when recorded.
    pub protocol: Option<String>,
    /// How many examples measured it, when recorded.
    pub validated_examples: Option<u64>,
    /// One sentence: metric, protocol and examples, e.g. `accuracy, 5-fold stratified
    /// cross-validation on 142 examples`.
    pub measured: String,
    /// For accuracy, its 95% interval from the validation answers (Wilson's, on
    /// `validated_examples`): where the model's accuracy on new examples like these is likely to
    /// be, honest near 0 and 1. The served model is the best of several measured on the same
    /// answers, so its accuracy on new data tends to fall in the lower part. `None` for R² or
    /// when the examples were not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// For a classifier, each class's accuracy on its validation examples (label -> share
    /// answered right, in [0, 1]; classes without validation examples are absent); empty when the
    /// run kept no confusion counts (value outputs, MOP runs, runs recorded before they were kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_class: BTreeMap<String, f64>,
    /// For a classifier, the confusion matrix of its validation answers, when kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confusion: Option<ConfusionMatrix>,
    /// The ensemble that answers `infer` instead of this run alone, when one is served
    /// (`easeml_store::served`): its members with weights and its quality; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ensemble: Option<EnsembleReport>,
    /// What the served model (this run, or the ensemble) is expected to score on new examples,
    /// its choice among the candidates accounted for, with a 95% interval; absent until the
    /// engine has estimated it ([`ExpectedQuality`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<ExpectedQuality>,
}

/// A confusion matrix as people read it: rows are the true labels, columns the answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfusionMatrix {
    /// The labels, by class index.
    pub labels: Vec<String>,
    /// `counts[true][answered]`: how many validation examples of a label got each answer.
    pub counts: Vec<Vec<u64>>,
}

impl ConfusionMatrix {
    /// The matrix of a run's stored counts over the app's labels; `None` when the counts do not
    /// read or no label is known.
    fn of(stored: &str, labels: &[String]) -> Option<ConfusionMatrix> {
        let confusion = Confusion::from_json(stored)?;
        (!labels.is_empty()).then(|| ConfusionMatrix {
            labels: labels.to_vec(),
            counts: confusion.matrix(labels.len()),
        })
    }

    /// Each label's accuracy (labels with validation examples only).
    fn per_class(&self) -> BTreeMap<String, f64> {
        self.labels
            .iter()
            .zip(&self.counts)
            .enumerate()
            .filter_map(|(index, (label, row))| {
                let examples: u64 = row.iter().sum();
                (examples > 0).then(|| (label.clone(), row[index] as f64 / examples as f64))
            })
            .collect()
    }
}

/// Where an app's search stands (`phase` in the JSON, one line in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Fewer enabled examples than training needs.
    WaitingForData,
    /// Enough data, no run yet: nothing trains until `train` (or a server's workers) runs.
    NotTrained,
    /// A run is queued or running.
    Searching,
    /// Nothing queued or running, and a model serves.
    Finished,
}

/// A protocol as the trainer records it ([`Protocol`]), in words: `5-fold stratified` ->
/// `5-fold stratified cross-validation`, `5-fold stratified, 2 folds trained` -> `5-fold stratified
/// cross-validation (2 folds trained in the time limit)`, `..., 2 folds trained, raced` -> `...
/// (2 folds trained, then stopped below the app's best run)` (`easeml_trainer::race`),
/// `5-fold stratified x3` -> `5-fold stratified cross-validation, repeated 3 times`, `split 20%` ->
/// `a held-out 20% split`; a string of another grammar as it is.
fn protocol_words(protocol: &str) -> String {
    match Protocol::parse(protocol) {
        None => protocol.to_owned(),
        Some(Protocol::Split { percent }) => format!("a held-out {percent}% split"),
        Some(Protocol::KFold(k_fold)) => {
            let stratified = if k_fold.stratified { " stratified" } else { "" };
            let mut words = format!("{}-fold{stratified} cross-validation", k_fold.folds);
            if k_fold.repeats > 1 {
                words.push_str(&format!(", repeated {} times", k_fold.repeats));
            }
            if let Some(trained) = k_fold.trained {
                let noun = if trained == 1 { "fold" } else { "folds" };
                let (comma, why) = if k_fold.raced {
                    (",", "then stopped below the app's best run")
                } else {
                    ("", "in the time limit")
                };
                words.push_str(&format!(" ({trained} {noun} trained{comma} {why})"));
            }
            words
        }
    }
}

impl BestModel {
    fn of(
        run: &RunRecord,
        current_version: u64,
        metric: QualityMetric,
        labels: &[String],
    ) -> BestModel {
        let confusion = run
            .validation
            .confusion
            .as_deref()
            .and_then(|stored| ConfusionMatrix::of(stored, labels));
        let mut measured = metric.name().to_owned();
        if let Some(protocol) = &run.validation.protocol {
            measured.push_str(&format!(", {}", protocol_words(protocol)));
        }
        if let Some(examples) = run.validation.validated_examples {
            measured.push_str(&format!(
                " on {examples} example{}",
                if examples == 1 { "" } else { "s" }
            ));
        }
        let interval = match (metric, run.quality, run.validation.validated_examples) {
            (QualityMetric::Accuracy, Some(quality), Some(examples)) => {
                let examples = examples as f64;
                easeml_stats::wilson_interval(quality * examples, examples, easeml_stats::Z_95)
                    .map(|(low, high)| [low, high])
            }
            _ => None,
        };
        if let Some([low, high]) = interval {
            measured.push_str(&format!("; 95% interval {low:.3}-{high:.3}"));
        }
        BestModel {
            run: run.id,
            number: run.number,
            candidate: run.candidate.clone(),
            data_version: run.data_version,
            current: run.data_version == current_version,
            quality: run.quality,
            quality_std: run.validation.quality_std,
            metric: metric.name().to_owned(),
            protocol: run.validation.protocol.clone(),
            validated_examples: run.validation.validated_examples,
            measured,
            interval,
            per_class: confusion
                .as_ref()
                .map(ConfusionMatrix::per_class)
                .unwrap_or_default(),
            confusion,
            ensemble: None,
            expected: None,
        }
    }
}

impl RunReport {
    /// The number people see: the run's number within its app, or its id in a report from a
    /// server that predates run numbers.
    pub fn shown_number(&self) -> u64 {
        if self.number > 0 {
            self.number
        } else {
            self.id.0.max(0) as u64
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run.
    #[serde(serialize_with = "run_id", deserialize_with = "deserialize_run_id")]
    pub id: RunId,
    /// Its number within the app (1, 2, ...: what the report shows); 0 from a server that predates
    /// run numbers.
    #[serde(default)]
    pub number: u64,
    /// The candidate id.
    pub candidate: String,
    /// Its state.
    #[serde(
        serialize_with = "run_state",
        deserialize_with = "deserialize_run_state"
    )]
    pub state: RunState,
    /// When it finished, else started, else was queued (ms since the epoch).
    pub date_ms: i64,
    /// Its quality in [0, 1], when done (under k-fold the mean over the folds).
    pub quality: Option<f64>,
    /// The standard deviation of the quality over the folds (k-fold), else `None`.
    #[serde(default)]
    pub quality_std: Option<f64>,
    /// How the quality was measured (`5-fold stratified`, `split 20%`), when done; `None` for runs
    /// recorded before the store kept it.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Its cost in seconds, when known.
    pub cost_seconds: Option<f64>,
    /// Whether it is the best so far.
    pub best: bool,
    /// Whether its cost broke the app's `train_time` constraint (it is then never the best).
    pub over_train_time: bool,
    /// Its measured inference latency in seconds per example (batch 1, on the serving device), when
    /// measured.
    #[serde(default)]
    pub infer_latency_seconds: Option<f64>,
    /// Each constraint it broke, e.g. `infer_latency 12.30 ms > 5.00 ms` (it is then never the
    /// best).
    #[serde(default)]
    pub broken_constraints: Vec<String>,
    /// The run's trials (learning rates of the grid, or TrimTuner's settings and data shares),
    /// when recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<TrialReport>,
    /// For a TrimTuner run, one line on its trials (`status::tuner_summary`), so that every page shows
    /// the same words as `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<String>,
    /// For a run trained by model hopping that is still open: how far its sub-epochs are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<HopProgress>,
    /// Why it failed.
    pub error: Option<String>,
}

/// How far a run trained by model hopping is: its sub-epochs trained, of all it plans (epochs x
/// partitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopProgress {
    /// Sub-epochs trained and committed.
    pub committed: u64,
    /// Sub-epochs in all.
    pub total: u64,
}

impl HopProgress {
    /// The progress of a run's sub-epoch log (`easeml_store::Store::sub_epochs`); `None` for a
    /// run without sub-epochs (a whole run).
    pub fn of(log: &[SubEpochRecord]) -> Option<HopProgress> {
        (!log.is_empty()).then(|| HopProgress {
            committed: log.iter().filter(|unit| unit.result.is_some()).count() as u64,
            total: log.len() as u64,
        })
    }
}

/// One trial of a run, as the trainer records it (`easeml_trainer::LearningRateTrial`; read
/// leniently: a field this build does not know is ignored, a missing one is `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialReport {
    /// The learning rate.
    pub learning_rate: f64,
    /// The fold it validated on (k-fold).
    #[serde(default)]
    pub fold: Option<usize>,
    /// Epochs run.
    #[serde(default)]
    pub epochs: usize,
    /// Its best validation quality, unless it failed.
    #[serde(default)]
    pub best_quality: Option<f64>,
    /// Why it failed.
    #[serde(default)]
    pub failure: Option<String>,
    /// TrimTuner's settings, share and cost, for a tuner trial.
    #[serde(default)]
    pub tuned: Option<TunedTrialReport>,
}

/// A TrimTuner trial's settings and cost (`easeml_trainer::tune::TunedTrial`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedTrialReport {
    /// Examples per batch.
    pub batch_size: usize,
    /// The epoch cap.
    pub max_epochs: usize,
    /// The share of the training data.
    pub data_fraction: f64,
    /// Its training rows.
    #[serde(default)]
    pub train_rows: usize,
    /// Its seconds.
    pub cost_seconds: f64,
    /// Whether it is the incumbent's final training on all the data.
    #[serde(default)]
    pub final_training: bool,
}

/// The trials of a stored run's JSON, none when it is absent or unreadable.
fn trials_of(run: &RunRecord) -> Vec<TrialReport> {
    run.trials
        .as_deref()
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// One line on a TrimTuner run's trials: how many at each data share and the incumbent's final
/// training; `None` when no trial was the tuner's.
pub fn tuner_summary(trials: &[TrialReport]) -> Option<String> {
    let tuned: Vec<(&TrialReport, &TunedTrialReport)> = trials
        .iter()
        .filter_map(|trial| Some((trial, trial.tuned.as_ref()?)))
        .collect();
    if tuned.is_empty() {
        return None;
    }
    let searched: Vec<&TunedTrialReport> = tuned
        .iter()
        .map(|(_, tuned)| *tuned)
        .filter(|tuned| !tuned.final_training)
        .collect();
    let mut shares: Vec<(f64, usize)> = Vec::new();
    for trial in &searched {
        match shares
            .iter_mut()
            .find(|(share, _)| *share == trial.data_fraction)
        {
            Some((_, count)) => *count += 1,
            None => shares.push((trial.data_fraction, 1)),
        }
    }
    shares.sort_by(|a, b| a.0.total_cmp(&b.0));
    let shares: Vec<String> = shares
        .iter()
        .map(|(share, count)| format!("{count} at {}", share_name(*share)))
        .collect();
    let seconds: f64 = searched.iter().map(|trial| trial.cost_seconds).sum();
    let mut line = format!(
        "trimtuner: {} trials in {} ({})",
        searched.len(),
        format_seconds(seconds),
        shares.join(", ")
    );
    if let Some((trial, tuned)) = tuned.iter().find(|(_, tuned)| tuned.final_training) {
        line.push_str(&format!(
            "; the incumbent (lr {}, batch {}, at most {} epochs) trained on all the data",
            trial.learning_rate, tuned.batch_size, tuned.max_epochs
        ));
    }
    Some(line)
}

/// A data share as people read it: `1/60`, `1/10`, `1/4`, `1/2`, `all`.
fn share_name(share: f64) -> String {
    if share >= 1.0 {
        return "all".to_owned();
    }
    let inverse = 1.0 / share;
    if (inverse - inverse.round()).abs() < 1e-6 {
        format!("1/{}", inverse.round())
    } else {
        format!("{:.0}%", share * 100.0)
    }
}

fn run_id<S: Serializer>(id: &RunId, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_i64(id.0)
}

fn run_state<S: Serializer>(state: &RunState, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.as_str())
}

fn deserialize_run_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunId, D::Error> {
    i64::deserialize(deserializer).map(RunId)
}

fn deserialize_run_state<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunState, D::Error> {
    let name = String::deserialize(deserializer)?;
    [
        RunState::Queued,
        RunState::Running,
        RunState::Done,
        RunState::Failed,
    ]
    .into_iter()
    .find(|state| state.as_str() == name)
    .ok_or_else(|| serde::de::Error::custom(format!("unknown run state `{name}`")))
}

impl Status {
    /// Builds the report from an app's runs under the app's constraint `limits`
    /// ([`constraint_limits`](crate::constraint_limits)). The best run is chosen by [`easeml_store::best_run`], the rule
    /// inference uses too.
    pub fn from_runs(
        app: String,
        system_type: String,
        data_version: u64,
        (examples, enabled_examples): (u64, u64),
        runs: &[RunRecord],
        limits: &ConstraintLimits,
        (metric, labels): (QualityMetric, &[String]),
    ) -> Status {
        let best_record = easeml_store::best_run(runs, limits);
        let best = best_record.map(|run| run.id);
        let phase = if runs
            .iter()
            .any(|run| matches!(run.state, RunState::Queued | RunState::Running))
        {
            Phase::Searching
        } else if best.is_some() {
            Phase::Finished
        } else if enabled_examples < MIN_TRAINING_EXAMPLES as u64 {
            Phase::WaitingForData
        } else {
            Phase::NotTrained
        };
        let reports = runs
            .iter()
            .map(|run| {
                let broken = easeml_store::broken_constraints(run, limits);
                let trials = trials_of(run);
                RunReport {
                    id: run.id,
                    number: run.number,
                    candidate: run.candidate.clone(),
                    state: run.state,
                    date_ms: run.finished_ms.or(run.started_ms).unwrap_or(run.queued_ms),
                    quality: run.quality,
                    quality_std: run.validation.quality_std,
                    protocol: run.validation.protocol.clone(),
                    cost_seconds: run.cost_seconds,
                    best: Some(run.id) == best,
                    over_train_time: broken.iter().any(|broken| broken.metric == "train_time"),
                    infer_latency_seconds: run.infer_latency_seconds,
                    broken_constraints: broken.iter().map(ToString::to_string).collect(),
                    tuning: tuner_summary(&trials),
                    trials,
                    hops: None,
                    error: run.error.clone(),
                }
            })
            .collect();
        Status {
            app,
            system_type,
            data_version,
            examples,
            enabled_examples,
            summary: summary(phase, best_record, data_version, enabled_examples),
            best: best_record.map(|run| BestModel::of(run, data_version, metric, labels)),
            runs: reports,
            phase,
        }
    }
}

/// A quality as the report prints it: `0.912 ± 0.031` under k-fold, `-` when unknown.
fn quality_text(quality: Option<f64>, std: Option<f64>) -> String {
    match (quality, std) {
        (Some(quality), Some(std)) => format!("{quality:.3} ± {std:.3}"),
        (Some(quality), None) => format!("{quality:.3}"),
        (None, _) => "-".to_owned(),
    }
}

/// [`Status::summary`]'s words.
fn summary(
    phase: Phase,
    best: Option<&RunRecord>,
    data_version: u64,
    enabled_examples: u64,
) -> String {
    let serving = best.map(|run| {
        format!(
            "serving {} (run {}, data version {})",
            run.candidate, run.number, run.data_version
        )
    });
    let stale = best.is_some_and(|run| run.data_version != data_version);
    match (phase, serving) {
        (Phase::WaitingForData, _) => format!(
            "waiting for data: {enabled_examples} enabled example(s); training starts at {MIN_TRAINING_EXAMPLES}"
        ),
        (Phase::NotTrained, _) => "not trained yet: run `train` to start the search".to_owned(),
        (Phase::Searching, Some(serving)) if stale => {
            format!("searching on data version {data_version}; {serving} meanwhile")
        }
        (Phase::Searching, Some(serving)) => format!("searching; {serving} meanwhile"),
        (Phase::Searching, None) => "searching; the first run is under way".to_owned(),
        (Phase::Finished, Some(serving)) if stale => format!(
            "{serving}; no run on the current data (version {data_version}) has finished: run `train`"
        ),
        (Phase::Finished, Some(serving)) => format!("finished: {serving}"),
        (Phase::Finished, None) => "finished".to_owned(),
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "app {}: {}", self.app, self.system_type)?;
        writeln!(
            f,
            "{} examples ({} enabled), data version {}",
            self.examples, self.enabled_examples, self.data_version
        )?;
        if self.runs.is_empty() {
            let needed = easeml_store::MIN_TRAINING_EXAMPLES as u64;
            if self.enabled_examples < needed {
                return writeln!(
                    f,
                    "no model trained yet: training starts at {needed} enabled examples (feed more)"
                );
            }
            return writeln!(f, "no model trained yet");
        }
        writeln!(f, "{}", self.summary)?;
        if let Some(best) = &self.best {
            let quality = quality_text(best.quality, best.quality_std);
            writeln!(f, "its quality: {quality} ({})", best.measured)?;
            if let Some(ensemble) = &best.ensemble {
                let interval = ensemble
                    .interval
                    .map(|[low, high]| format!("; 95% interval {low:.3}-{high:.3}"))
                    .unwrap_or_default();
                writeln!(
                    f,
                    "served as an ensemble: {} ({} {:.3} on {} validation answers{interval}; best single run {:.3})",
                    ensemble.members_text(),
                    best.metric,
                    ensemble.quality,
                    ensemble.validated_examples,
                    ensemble.single_quality
                )?;
            }
            if let Some(expected) = &best.expected {
                writeln!(f, "expected on new examples: {}", expected.text())?;
            }
            if let Some(matrix) = &best.confusion {
                writeln!(f, "per class, on its validation answers:")?;
                let width = matrix
                    .labels
                    .iter()
                    .map(|label| label.chars().count())
                    .max()
                    .unwrap_or(0)
                    .clamp(5, 30);
                writeln!(f, "  {:<width$} {:>8}  answered as", "label", "accuracy")?;
                for (index, (label, row)) in matrix.labels.iter().zip(&matrix.counts).enumerate() {
                    let examples: u64 = row.iter().sum();
                    if examples == 0 {
                        continue;
                    }
                    let answers: Vec<String> = matrix
                        .labels
                        .iter()
                        .zip(row)
                        .filter(|(_, count)| **count > 0)
                        .map(|(answer, count)| format!("{answer} {count}"))
                        .collect();
                    writeln!(
                        f,
                        "  {label:<width$} {:>8.3}  {} of {examples} right ({})",
                        row[index] as f64 / examples as f64,
                        row[index],
                        answers.join(", ")
                    )?;
                }
            }
        }
        writeln!(
            f,
            "  {:<5} {:<21} {:<24} {:>13} {:>10} {:>10}  {:<18} state",
            "run", "date", "candidate", "quality", "cost", "latency", "validation"
        )?;
        for run in &self.runs {
            let marker = if run.best { '*' } else { ' ' };
            let quality = quality_text(run.quality, run.quality_std);
            let protocol = run.protocol.as_deref().unwrap_or("-");
            let cost = run
                .cost_seconds
                .map_or_else(|| "-".to_owned(), |cost| format!("{cost:.1} s"));
            let latency = run
                .infer_latency_seconds
                .map_or_else(|| "-".to_owned(), format_seconds);
            let mut state = run.state.as_str().to_owned();
            if let Some(hops) = run.hops {
                state.push_str(&format!(
                    " (model hopping: {}/{} sub-epochs)",
                    hops.committed, hops.total
                ));
            }
            if !run.broken_constraints.is_empty() {
                state.push_str(&format!(" (broke {})", run.broken_constraints.join(", ")));
            } else if run.over_train_time {
                // A report from a server that predates `broken_constraints`.
                state.push_str(" (over train_time)");
            }
            if let Some(error) = &run.error {
                state.push_str(&format!(": {error}"));
            }
            writeln!(
                f,
                "{marker} {:<5} {:<21} {:<24} {quality:>13} {cost:>10} {latency:>10}  {protocol:<18} {state}",
                run.shown_number(),
                format_utc(run.date_ms),
                run.candidate
            )?;
            if let Some(summary) = &run.tuning {
                writeln!(f, "          {summary}")?;
            }
        }
        if self.best.is_some() {
            writeln!(f, "* best so far")?;
        }
        if self
            .runs
            .iter()
            .any(|run| run.infer_latency_seconds.is_some())
        {
            writeln!(
                f,
                "latency: one example's inference (batch 1) on the device that trained it"
            )?;
        }

        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_store::{AppId, RunValidation};

    #[test]
    fn protocols_read_as_words() {
        assert_eq!(
            protocol_words("5-fold stratified"),
            "5-fold stratified cross-validation"
        );
        assert_eq!(
            protocol_words("5-fold stratified, 2 folds trained"),
            "5-fold stratified cross-validation (2 folds trained in the time limit)"
        );
        assert_eq!(
            protocol_words("5-fold stratified, 1 fold trained, raced"),
            "5-fold stratified cross-validation (1 fold trained, then stopped below the app's best \
             run)"
        );
        assert_eq!(
            protocol_words("5-fold stratified x3"),
            "5-fold stratified cross-validation, repeated 3 times"
        );
        assert_eq!(
            protocol_words("5-fold x3, 2 folds trained"),
            "5-fold cross-validation, repeated 3 times (2 folds trained in the time limit)"
        );
        assert_eq!(protocol_words("split 20%"), "a held-out 20% split");
        assert_eq!(protocol_words("something else"), "something else");
    }

    /// A done run on `data_version` with quality 0.875 ± 0.05 under 5-fold on 60 examples.
    pub(super) fn record(id: i64, data_version: u64, quality: f64, state: RunState) -> RunRecord {
        RunRecord {
            id: RunId(id),
            number: id as u64,
            app: AppId(1),
            candidate: format!("model_{id}"),
            state,
            data_version,
            quality: (state == RunState::Done).then_some(quality),
            cost_seconds: Some(1.5),
            checkpoint: None,
            queued_ms: 1_700_000_000_000,
            started_ms: None,
            finished_ms: None,
            error: None,
            validation: RunValidation {
                protocol: Some("5-fold stratified".to_owned()),
                quality_std: Some(0.05),
                validated_examples: Some(60),
                confusion: None,
                oof: None,
            },
            infer_latency_seconds: None,
            trials: None,
        }
    }

    fn best_model(id: i64, data_version: u64) -> BestModel {
        let mut run = record(id, data_version, 0.875, RunState::Done);
        run.candidate = "mlp_small".to_owned();
        BestModel::of(&run, data_version, QualityMetric::Accuracy, &[])
    }

    #[test]
    fn the_served_model_says_which_data_it_saw_and_how_it_was_measured() {
        let limits = ConstraintLimits::default();
        let status = |runs: &[RunRecord], enabled: u64| {
            Status::from_runs(
                "pics".to_owned(),
                String::new(),
                3,
                (enabled, enabled),
                runs,
                &limits,
                (QualityMetric::Accuracy, &[]),
            )
        };
        assert_eq!(status(&[], 2).phase, Phase::WaitingForData);
        assert_eq!(
            status(&[], 2).summary,
            "waiting for data: 2 enabled example(s); training starts at 4"
        );
        assert_eq!(status(&[], 60).phase, Phase::NotTrained);

        // The best of version 2 serves while the app retrains on version 3...
        let old = record(1, 2, 0.95, RunState::Done);
        let running = record(2, 3, 0.0, RunState::Running);
        let report = status(&[old.clone(), running], 60);
        assert_eq!(report.phase, Phase::Searching);
        let best = report.best.as_ref().unwrap();
        assert_eq!(
            (best.run, best.data_version, best.current),
            (RunId(1), 2, false)
        );
        assert_eq!(
            report.summary,
            "searching on data version 3; serving model_1 (run 1, data version 2) meanwhile"
        );
        assert_eq!(
            best.measured,
            "accuracy, 5-fold stratified cross-validation on 60 examples; 95% interval 0.863-0.983"
        );
        let [low, high] = best.interval.expect("an interval for accuracy");
        assert!(low < 0.95 && 0.95 < high && high <= 1.0, "{low} {high}");
        // ...and the best run on version 3 serves once one finishes, though it scored lower.
        let new = record(2, 3, 0.7, RunState::Done);
        let report = status(&[old, new], 60);
        assert_eq!(report.phase, Phase::Finished);
        let best = report.best.as_ref().unwrap();
        assert_eq!(
            (best.run, best.data_version, best.current),
            (RunId(2), 3, true)
        );
        assert_eq!(
            report.summary,
            "finished: serving model_2 (run 2, data version 3)"
        );
        assert!(report.runs[1].best && !report.runs[0].best);
        let text = report.to_string();
        assert!(
            text.contains("its quality: 0.700 ± 0.050 (accuracy, 5-fold stratified cross-validation on 60 examples; 95% interval 0.575-0.801)"),
            "{text}"
        );
        // A classifier's stored confusion counts give the per-class view, by label.
        let mut counted = record(4, 3, 0.8, RunState::Done);
        counted.validation.confusion =
            Some(r#"{"cells":[[0,0,6],[0,1,2],[1,1,2],[7,7,1]]}"#.to_owned());
        let labels = ["cat".to_owned(), "dog".to_owned()];
        let best = BestModel::of(&counted, 3, QualityMetric::Accuracy, &labels);
        assert_eq!(
            best.per_class,
            BTreeMap::from([("cat".to_owned(), 0.75), ("dog".to_owned(), 1.0)])
        );
        let matrix = best.confusion.as_ref().unwrap();
        assert_eq!(matrix.counts, vec![vec![6, 2], vec![0, 2]]);
        let text = status(&[counted.clone()], 60).to_string();
        assert!(!text.contains("per class"), "no labels, no table: {text}");
        let mut report = status(&[counted.clone()], 60);
        report.best = Some(best.clone());
        let text = report.to_string();
        assert!(
            text.contains("per class, on its validation answers:\n  label accuracy  answered as\n  cat      0.750  6 of 8 right (cat 6, dog 2)\n  dog      1.000  2 of 2 right (dog 2)\n"),
            "{text}"
        );
        let value = serde_json::to_value(&best).unwrap();
        assert_eq!(value["per_class"]["cat"], 0.75);
        // Counts that do not read, or no labels, give no per-class view (and no error).
        counted.validation.confusion = Some("garbage".to_owned());
        assert!(
            BestModel::of(&counted, 3, QualityMetric::Accuracy, &labels)
                .per_class
                .is_empty()
        );
        assert!(
            BestModel::of(&counted, 3, QualityMetric::Accuracy, &[])
                .confusion
                .is_none()
        );

        // Regression apps name R²; a split reads as a held-out share.
        let mut split = record(3, 3, 0.5, RunState::Done);
        split.validation.protocol = Some("split 20%".to_owned());
        split.validation.validated_examples = Some(1);
        let best = BestModel::of(&split, 3, QualityMetric::RSquared, &[]);
        assert_eq!(best.measured, "R², a held-out 20% split on 1 example");
        assert_eq!(best.interval, None, "no binomial interval for R²");
    }

    #[test]
    fn the_json_reads_back() {
        let status = Status {
            app: "pics".to_owned(),
            system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[2]], []}}".to_owned(),
            data_version: 3,
            examples: 10,
            enabled_examples: 9,
            runs: [
                RunState::Done,
                RunState::Running,
                RunState::Failed,
                RunState::Queued,
            ]
            .into_iter()
            .enumerate()
            .map(|(index, state)| RunReport {
                id: RunId(index as i64 + 1),
                number: index as u64 + 1,
                candidate: "mlp_small".to_owned(),
                state,
                date_ms: 1_700_000_000_000,
                quality: (state == RunState::Done).then_some(0.75),
                quality_std: (state == RunState::Done).then_some(0.05),
                protocol: (state == RunState::Done).then(|| "5-fold stratified".to_owned()),
                cost_seconds: Some(1.5),
                best: index == 0,
                over_train_time: false,
                infer_latency_seconds: None,
                broken_constraints: Vec::new(),
                trials: Vec::new(),
                tuning: None,
                hops: (state == RunState::Running).then_some(HopProgress {
                    committed: 3,
                    total: 40,
                }),
                error: (state == RunState::Failed).then(|| "diverged".to_owned()),
            })
            .collect(),
            best: Some(best_model(1, 3)),
            phase: Phase::Searching,
            summary: "searching; serving mlp_small (run 1, data version 3) meanwhile".to_owned(),
        };
        let json = serde_json::to_string(&status).unwrap();
        // `status --json`'s interface of record: `best.data_version`.
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["best"]["data_version"], 3);
        assert_eq!(value["best"]["run"], 1);
        assert_eq!(value["phase"], "searching");
        assert_eq!(serde_json::from_str::<Status>(&json).unwrap(), status);
        let error = serde_json::from_str::<Status>(&json.replace("\"queued\"", "\"paused\""))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown run state `paused`"), "{error}");
        // A status from a server before runs kept their protocol still reads.
        let old = json
            .replace(",\"quality_std\":0.05", "")
            .replace(",\"quality_std\":null", "")
            .replace(",\"protocol\":\"5-fold stratified\"", "")
            .replace(",\"protocol\":null", "");
        assert!(!old.contains("protocol"), "{old}");
        let read = serde_json::from_str::<Status>(&old).unwrap();
        assert_eq!(read.runs[0].quality, Some(0.75));
        assert_eq!(read.runs[0].protocol, None);
    }

    #[test]
    fn the_report_shows_the_protocol_the_spread_the_latency_and_broken_constraints() {
        let run = |id: i64, quality_std: Option<f64>, protocol: Option<&str>| RunReport {
            id: RunId(id),
            number: id as u64,
            candidate: "mlp_small".to_owned(),
            state: RunState::Done,
            date_ms: 1_700_000_000_000,
            quality: Some(0.875),
            quality_std,
            protocol: protocol.map(str::to_owned),
            cost_seconds: Some(1.5),
            best: id == 1,
            over_train_time: false,
            infer_latency_seconds: Some(0.00042),
            broken_constraints: Vec::new(),
            trials: Vec::new(),
            tuning: None,
            hops: None,
            error: None,
        };
        let mut slow = run(4, None, Some("split 20%"));
        slow.infer_latency_seconds = Some(0.0123);
        slow.broken_constraints = vec!["infer_latency 12.30 ms > 5.00 ms".to_owned()];
        let mut old = run(3, None, None);
        old.infer_latency_seconds = None;
        let mut hopping = run(5, None, None);
        hopping.state = RunState::Running;
        hopping.quality = None;
        hopping.cost_seconds = None;
        hopping.infer_latency_seconds = None;
        hopping.hops = Some(HopProgress {
            committed: 12,
            total: 40,
        });
        let status = Status {
            app: "pics".to_owned(),
            system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[2]], []}}".to_owned(),
            data_version: 3,
            examples: 60,
            enabled_examples: 60,
            runs: vec![
                run(1, Some(0.05), Some("5-fold stratified")),
                run(2, None, Some("split 20%")),
                old,
                slow,
                hopping,
            ],
            best: Some(best_model(1, 3)),
            phase: Phase::Searching,
            summary: "searching; serving mlp_small (run 1, data version 3) meanwhile".to_owned(),
        };
        let text = status.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[2..4],
            [
                "searching; serving mlp_small (run 1, data version 3) meanwhile",
                "its quality: 0.875 ± 0.050 (accuracy, 5-fold stratified cross-validation on 60 examples; 95% interval 0.768-0.937)",
            ]
        );
        assert_eq!(
            lines[4..],
            [
                "  run   date                  candidate                      quality       cost    latency  validation         state",
                "* 1     2023-11-14 22:13:20Z  mlp_small                0.875 ± 0.050      1.5 s   420.0 µs  5-fold stratified  done",
                "  2     2023-11-14 22:13:20Z  mlp_small                        0.875      1.5 s   420.0 µs  split 20%          done",
                "  3     2023-11-14 22:13:20Z  mlp_small                        0.875      1.5 s          -  -                  done",
                "  4     2023-11-14 22:13:20Z  mlp_small                        0.875      1.5 s   12.30 ms  split 20%          done (broke infer_latency 12.30 ms > 5.00 ms)",
                "  5     2023-11-14 22:13:20Z  mlp_small                            -          -          -  -                  running (model hopping: 12/40 sub-epochs)",
                "* best so far",
                "latency: one example's inference (batch 1) on the device that trained it",
            ]
        );
        // A report from a server before latencies were kept still reads, and says nothing of them.
        let json = serde_json::to_string(&status).unwrap();
        let old = json
            .replace(",\"infer_latency_seconds\":0.00042", "")
            .replace(",\"infer_latency_seconds\":0.0123", "")
            .replace(",\"infer_latency_seconds\":null", "")
            .replace(",\"broken_constraints\":[]", "")
            .replace(
                ",\"broken_constraints\":[\"infer_latency 12.30 ms > 5.00 ms\"]",
                "",
            );
        assert!(!old.contains("latency"), "{old}");
        let read = serde_json::from_str::<Status>(&old).unwrap();
        assert!(!read.to_string().contains("latency:"));
    }

    #[test]
    fn a_tuner_run_summarises_its_trials_by_share() {
        let trial = |share: f64, final_training: bool| TrialReport {
            learning_rate: 0.003,
            fold: None,
            epochs: 5,
            best_quality: Some(0.9),
            failure: None,
            tuned: Some(TunedTrialReport {
                batch_size: 32,
                max_epochs: 20,
                data_fraction: share,
                train_rows: 100,
                cost_seconds: 0.5,
                final_training,
            }),
        };
        let trials = vec![
            trial(1.0 / 60.0, false),
            trial(0.1, false),
            trial(0.1, false),
            trial(1.0, false),
            trial(1.0, true),
        ];
        assert_eq!(
            tuner_summary(&trials).unwrap(),
            "trimtuner: 4 trials in 2.0 s (1 at 1/60, 2 at 1/10, 1 at all); the incumbent (lr 0.003, batch 32, at most 20 epochs) trained on all the data"
        );
        // Grid trials have no summary; stored JSON that does not read gives no trials.
        let mut grid = trial(1.0, false);
        grid.tuned = None;
        assert_eq!(tuner_summary(&[grid]), None);
        assert_eq!(share_name(0.3), "30%");
        let json = serde_json::to_string(&trials).unwrap();
        let read: Vec<TrialReport> = serde_json::from_str(&json).unwrap();
        assert_eq!(read, trials);
        // What the trainer writes reads (fields this build does not know are ignored).
        let written = r#"[{"learning_rate":0.01,"fold":null,"seed":7,"epochs":3,"best_quality":0.8,"best_epoch":2,"failure":null,"tuned":{"batch_size":16,"max_epochs":10,"data_fraction":0.25,"train_rows":40,"cost_seconds":0.2,"final_training":false}}]"#;
        let read: Vec<TrialReport> = serde_json::from_str(written).unwrap();
        assert_eq!(read[0].tuned.as_ref().unwrap().data_fraction, 0.25);
    }

    #[test]
    fn an_app_without_runs_says_whether_it_has_enough_examples_to_train() {
        let status = |enabled_examples| Status {
            app: "pics".to_owned(),
            system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[2]], []}}".to_owned(),
            data_version: 1,
            examples: 5,
            enabled_examples,
            runs: Vec::new(),
            best: None,
            phase: Phase::WaitingForData,
            summary: String::new(),
        };
        let waiting = status(2).to_string();
        assert!(
            waiting.ends_with(
                "no model trained yet: training starts at 4 enabled examples (feed more)\n"
            ),
            "{waiting}"
        );
        let ready = status(5).to_string();
        assert!(ready.ends_with("\nno model trained yet\n"), "{ready}");
    }
}
