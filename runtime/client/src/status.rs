//! The status report of paper figure 5: every run of an app with its date, candidate, quality (with
//! its spread over folds under k-fold cross-validation) and cost, how the quality was measured, the
//! best so far marked, which constraints each run broke, and what is queued or running now.

use std::fmt;

use easeml_schema::Schema;
use easeml_store::{
    ConstraintLimits, RunId, RunRecord, RunState, SubEpochRecord, format_seconds, format_utc,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    /// The best finished run that breaks none of the app's constraints, if any.
    #[serde(
        serialize_with = "optional_run_id",
        deserialize_with = "deserialize_optional_run_id"
    )]
    pub best: Option<RunId>,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run.
    #[serde(serialize_with = "run_id", deserialize_with = "deserialize_run_id")]
    pub id: RunId,
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

fn optional_run_id<S: Serializer>(id: &Option<RunId>, serializer: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => serializer.serialize_some(&id.0),
        None => serializer.serialize_none(),
    }
}

fn run_state<S: Serializer>(state: &RunState, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.as_str())
}

fn deserialize_run_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunId, D::Error> {
    i64::deserialize(deserializer).map(RunId)
}

fn deserialize_optional_run_id<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<RunId>, D::Error> {
    Ok(Option::<i64>::deserialize(deserializer)?.map(RunId))
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

/// An app's constraint limits as the store's rules take them: the one reading of a schema's
/// `constraint` lines that the status report, inference and the engine share.
pub fn constraint_limits(schema: &Schema) -> ConstraintLimits {
    ConstraintLimits {
        train_time: schema.train_time_limit(),
        infer_latency: schema.infer_latency_limit(),
    }
}

impl Status {
    /// Builds the report from an app's runs under the app's constraint `limits`
    /// ([`constraint_limits`]). The best run is chosen by [`easeml_store::best_run`], the rule
    /// inference uses too.
    pub fn from_runs(
        app: String,
        system_type: String,
        data_version: u64,
        (examples, enabled_examples): (u64, u64),
        runs: &[RunRecord],
        limits: &ConstraintLimits,
    ) -> Status {
        let best = easeml_store::best_run(runs, limits).map(|run| run.id);
        let reports = runs
            .iter()
            .map(|run| {
                let broken = easeml_store::broken_constraints(run, limits);
                let trials = trials_of(run);
                RunReport {
                    id: run.id,
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
            best,
            runs: reports,
        }
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
        writeln!(
            f,
            "  {:<5} {:<21} {:<24} {:>13} {:>10} {:>10}  {:<18} state",
            "run", "date", "candidate", "quality", "cost", "latency", "validation"
        )?;
        for run in &self.runs {
            let marker = if run.best { '*' } else { ' ' };
            let quality = match (run.quality, run.quality_std) {
                (Some(quality), Some(std)) => format!("{quality:.3} ± {std:.3}"),
                (Some(quality), None) => format!("{quality:.3}"),
                (None, _) => "-".to_owned(),
            };
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
                run.id.0,
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
            best: Some(RunId(1)),
        };
        let json = serde_json::to_string(&status).unwrap();
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
            best: Some(RunId(1)),
        };
        let text = status.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[2..],
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
