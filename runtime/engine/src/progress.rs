//! The training session's progress, in words: each [`Event`] as the line a person reads
//! (`Display`), the session's first line ([`session_line`]) and its last ([`TrainSummary`]'s
//! `Display`), and [`train_with_progress`], the printer of `easeml train` and of the apps' `train`
//! (a spinner on a terminal, plain lines in a log); and every app's best quality over time
//! ([`quality_curves`]: `easeml train --plot`, `easeml bench quality`).
//!
//! One place for these words, so the service binary (easeml-cli) prints its sessions without
//! linking easeml-app-engine, the generated apps' engine binaries' crate.

use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

use easeml_store::format_seconds;
use indicatif::{ProgressBar, ProgressStyle};

use crate::{Engine, Event, TrainSummary};

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::AppRegistered { app, candidates } => {
                write!(f, "{app}: {candidates} candidate models")
            }
            Event::DataChanged { app, data_version } => write!(
                f,
                "{app}: data changed (version {data_version}); every candidate is eligible again"
            ),
            Event::AppSkipped { app, reason } => write!(f, "{app}: left out: {reason}"),
            Event::CandidateLeftOut {
                app,
                candidate,
                reason,
            } => write!(f, "{app}: {candidate} left out: {reason}"),
            Event::CandidatesSetAside {
                app,
                candidates,
                kin,
                kin_quality,
                best,
                best_quality,
            } => write!(
                f,
                "{app}: set aside on this data: {} ({kin} models reached {kin_quality:.3}, \
                 {:.3} below {best}'s {best_quality:.3}, and would cost more than it)",
                candidates.join(", "),
                best_quality - kin_quality
            ),
            Event::RunStarted {
                app,
                candidate,
                number,
                max_seconds,
                ..
            } => write!(
                f,
                "{app}: training {candidate} (run {number}, at most {})",
                format_seconds(*max_seconds)
            ),
            Event::RunFinished {
                app,
                candidate,
                quality,
                quality_std,
                protocol,
                cost_seconds,
                infer_latency_seconds,
                broken_constraints,
                best,
                ..
            } => write!(
                f,
                "{app}: {candidate:<22} quality {quality:.3}{} ({protocol})  cost {:>7}  latency {}{}{}",
                quality_std.map_or_else(String::new, |std| format!(" ± {std:.3}")),
                format_seconds(*cost_seconds),
                format_seconds(*infer_latency_seconds),
                if broken_constraints.is_empty() {
                    String::new()
                } else {
                    format!("  broke {} (never served)", broken_constraints.join(", "))
                },
                if *best { "  * best so far" } else { "" }
            ),
            Event::RunFailed {
                app,
                candidate,
                reason,
                ..
            } => write!(f, "{app}: {candidate:<22} failed: {reason}"),
            Event::RunDropped {
                app,
                candidate,
                reason,
                ..
            } => write!(
                f,
                "{app}: {candidate:<22} dropped: the session ended before it had a model ({reason}); a later session tries it again"
            ),
            Event::MopRunStarted {
                app,
                candidate,
                number,
                learning_rate,
                partitions,
                epochs,
                resumed,
                data_parallel,
                ..
            } => write!(
                f,
                "{app}: {candidate:<22} {} by {} (run {}, learning rate {learning_rate}): {epochs} epoch(s) over {partitions} partition(s), one per worker{}",
                if *resumed { "resumed" } else { "training" },
                if *data_parallel {
                    "data parallelism"
                } else {
                    "model hopping"
                },
                number,
                if *data_parallel { ", all at once" } else { "" }
            ),
            Event::RunProgress {
                app,
                candidate,
                done,
                total,
                ..
            } => write!(
                f,
                "{app}: {candidate} by model hopping, {done}/{total} sub-epochs"
            ),
            Event::WorkersChanged { live } => write!(
                f,
                "{live} worker{} live{}",
                if *live == 1 { "" } else { "s" },
                if *live == 0 {
                    " (waiting for workers: start them with `easeml worker`)"
                } else {
                    ""
                }
            ),
        }
    }
}

/// The session's last line: how many runs finished, failed and were dropped, and whether anything
/// is left to train.
impl fmt::Display for TrainSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} run{} finished, {} failed{}{}",
            self.finished,
            if self.finished == 1 { "" } else { "s" },
            self.failed,
            if self.dropped > 0 {
                format!(", {} dropped at the session's end", self.dropped)
            } else {
                String::new()
            },
            if self.unfinished > 0 {
                format!(
                    "; {} model-hopping run{} go on in the next session",
                    self.unfinished,
                    if self.unfinished == 1 { "" } else { "s" }
                )
            } else if self.exhausted {
                "; nothing is left to train on the current data".to_owned()
            } else {
                "; the budget is spent (run `train` again to go on)".to_owned()
            }
        )
    }
}

/// The session's first line: where it trains, on what, and for how long at most.
pub fn session_line(engine: &Engine, budget: Option<Duration>) -> String {
    format!(
        "training every app in {} {}{}",
        engine.store().home().display(),
        if engine.config().coordinate {
            "by coordinating its workers".to_owned()
        } else {
            format!("on {}", crate::device_name(engine.config().device))
        },
        budget.map_or_else(String::new, |budget| format!(
            " for at most {}",
            format_seconds(budget.as_secs_f64())
        ))
    )
}

/// Runs the engine's loop as a training session: a line saying where, on what and for how long,
/// a spinner (on a terminal) and one line per finished run, then how many runs finished and
/// whether anything is left to train. Shared by the apps' `train` and `easeml train`.
pub fn train_with_progress(
    engine: &mut Engine,
    budget: Option<Duration>,
) -> crate::Result<TrainSummary> {
    eprintln!("{}", session_line(engine, budget));
    // On a terminal: a spinner that says what trains now, finished runs printed above it. Elsewhere
    // (a log, CI, a pipe): plain lines, a start line per run included, so the log still shows what
    // happened and when.
    let terminal = std::io::stderr().is_terminal();
    let progress = if terminal {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut on_event = |event: Event| {
        let line = event.to_string();
        match event {
            // What trains now: the spinner's message, or a line in a log.
            Event::RunStarted { .. } if terminal => progress.set_message(line),
            Event::RunProgress { .. } if terminal => progress.set_message(line),
            Event::RunProgress { done, total, .. } => {
                // Logs get a line per tenth.
                if total > 0 && done * 10 / total != (done - 1) * 10 / total {
                    eprintln!("{line}");
                }
            }
            _ if terminal => progress.println(line),
            _ => eprintln!("{line}"),
        }
    };
    let summary = engine.train(budget, &mut on_event);
    progress.finish_and_clear();
    let summary = summary?;
    eprintln!("{summary}");
    Ok(summary)
}

/// An app's `(minutes, best quality so far)` points, in time order.
pub type QualityPoints = Vec<(f64, f64)>;

/// Every app's best quality over time, from the store's finished runs: per app its name and
/// `(minutes, best quality so far)` points; time starts when the first run of the store started.
pub fn quality_curves(store: &easeml_store::Store) -> crate::Result<Vec<(String, QualityPoints)>> {
    let mut per_app = Vec::new();
    let mut origin = i64::MAX;
    for app in store.apps()? {
        let mut runs: Vec<_> = store
            .runs(app.id)?
            .into_iter()
            .filter(|run| run.quality.is_some() && run.finished_ms.is_some())
            .collect();
        runs.sort_by_key(|run| run.finished_ms);
        if let Some(first) = runs.iter().filter_map(|run| run.started_ms).min() {
            origin = origin.min(first);
        }
        per_app.push((app.name, runs));
    }
    Ok(per_app
        .into_iter()
        .map(|(app, runs)| {
            let mut best = f64::NEG_INFINITY;
            let points = runs
                .iter()
                .map(|run| {
                    best = best.max(run.quality.unwrap_or(0.0));
                    let minutes = (run.finished_ms.unwrap_or(origin) - origin) as f64 / 60_000.0;
                    (minutes, best)
                })
                .collect();
            (app, points)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_store::RunId;

    #[test]
    fn events_read_as_lines() {
        let started = Event::RunStarted {
            app: "digits".into(),
            candidate: "mlp".into(),
            run: RunId(19),
            number: 7,
            max_seconds: 30.0,
        };
        assert_eq!(
            started.to_string(),
            format!(
                "digits: training mlp (run 7, at most {})",
                format_seconds(30.0)
            )
        );
        assert_eq!(
            Event::WorkersChanged { live: 0 }.to_string(),
            "0 workers live (waiting for workers: start them with `easeml worker`)"
        );
        assert_eq!(
            Event::WorkersChanged { live: 1 }.to_string(),
            "1 worker live"
        );
    }

    #[test]
    fn a_summary_says_what_is_left() {
        let summary = TrainSummary {
            finished: 1,
            failed: 0,
            dropped: 2,
            unfinished: 0,
            exhausted: true,
        };
        assert_eq!(
            summary.to_string(),
            "1 run finished, 0 failed, 2 dropped at the session's end; nothing is left to train on the current data"
        );
    }
}
