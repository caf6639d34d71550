//! `easeml train --parallelism mop`: Cerebro's model hopper parallelism over local worker processes
//! (`easeml_runtime::engine::mop`). Each network candidate of each app is one MOP run (Adam at the
//! trainer's first grid rate, a fixed number of epochs), the app's training rows split into one
//! partition per worker; the coordinator here only starts runs and advances them
//! (`mop::advance`), everything else is in the store, so an interrupted session's open MOP runs
//! are resumed by the next one. `easeml bench mop --real` uses the same steps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use easeml_runtime::engine::AppModel;
use easeml_runtime::engine::mop::{self, MopPlan, MopStatus};
use easeml_runtime::store::{RunId, RunState, Store, WorkerState};
use easeml_trainer::{Candidate, ModelKind};

/// One MOP run being coordinated.
#[derive(Debug, Clone, PartialEq)]
pub struct MopRun {
    /// The app's name.
    pub app: String,
    /// The candidate.
    pub candidate: String,
    /// The run.
    pub run: RunId,
}

/// Whether a candidate can train by hopping: the networks, less the adversarial pair.
pub fn hoppable(candidate: &str) -> bool {
    Candidate::parse(candidate).is_ok_and(|candidate| {
        !easeml_trainer::classic::is_classic(candidate.model)
            && !matches!(candidate.model, ModelKind::Gan | ModelKind::Pix2Pix)
    })
}

/// The ids of the live workers among the processes `pids`, waiting up to a minute for them.
pub fn worker_ids(store: &Store, pids: &[u32]) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    loop {
        let ids: Vec<String> = store
            .workers()?
            .into_iter()
            .filter(|worker| pids.contains(&worker.pid) && worker.state != WorkerState::Stopped)
            .map(|worker| worker.id)
            .collect();
        if ids.len() >= pids.len() {
            return Ok(ids);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "only {} of {} local workers registered within a minute",
                ids.len(),
                pids.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The ids of the workers started elsewhere that are live now (heartbeat within `ttl`); at least
/// two.
pub fn live_workers(store: &Store, ttl: Duration) -> anyhow::Result<Vec<String>> {
    let now = easeml_runtime::store::now_ms();
    let silence = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let ids: Vec<String> = store
        .workers()?
        .into_iter()
        .filter(|worker| worker.is_live(now, silence))
        .map(|worker| worker.id)
        .collect();
    if ids.len() < 2 {
        bail!(
            "--parallelism mop --workers 0 found {} live worker(s): start at least two with `easeml worker --store {}` first",
            ids.len(),
            store.home().display()
        );
    }
    Ok(ids)
}

/// The MOP runs to coordinate: every open MOP run of the store (an interrupted session's), and a
/// new one for each hoppable candidate of each app (among `only`, when given) that has none open.
/// Apps that cannot train (too few examples, a partition without rows) are skipped with a note.
pub fn start_runs(
    store: &mut Store,
    epochs: u64,
    workers: &[String],
    only: Option<&[String]>,
) -> anyhow::Result<Vec<MopRun>> {
    let mut runs = Vec::new();
    let mut seed = 0;
    for app in store.apps()? {
        // An open run with sub-epoch units is a MOP run to resume (its units may all be
        // committed: an epoch done whose next one no coordinator queued yet).
        let mut open: BTreeMap<String, RunId> = BTreeMap::new();
        for run in store.runs(app.id)? {
            if matches!(run.state, RunState::Queued | RunState::Running)
                && !store.sub_epochs(run.id)?.is_empty()
            {
                open.insert(run.candidate.clone(), run.id);
            }
        }
        let model = match AppModel::from_manifest(&app.name, &app.manifest) {
            Ok(model) => model,
            Err(error) => {
                eprintln!("{}: skipped ({error})", app.name);
                continue;
            }
        };
        let candidates: BTreeSet<&String> = model
            .candidates
            .iter()
            .filter(|candidate| only.is_none_or(|only| only.contains(candidate)))
            .collect();
        for candidate in candidates {
            seed += 1;
            if let Some(&run) = open.get(candidate) {
                eprintln!("{}/{candidate}: resuming MOP run {}", app.name, run.0);
                runs.push(MopRun {
                    app: app.name.clone(),
                    candidate: candidate.clone(),
                    run,
                });
                continue;
            }
            if !hoppable(candidate) {
                eprintln!(
                    "{}/{candidate}: not a network that can hop (train it with --parallelism task)",
                    app.name
                );
                continue;
            }
            let mut plan = MopPlan::new(workers.len() as u64, epochs);
            plan.seed = seed;
            match mop::start_run(store, app.id, candidate, &plan, workers) {
                Ok(run) => runs.push(MopRun {
                    app: app.name.clone(),
                    candidate: candidate.clone(),
                    run,
                }),
                Err(error) => eprintln!("{}/{candidate}: skipped ({error})", app.name),
            }
        }
    }
    Ok(runs)
}

/// Advances the runs until every one is done or failed, or `deadline` passes (their open units
/// stay in the store for the next session); prints each run's end. Returns the runs' statuses.
pub fn coordinate(
    home: &Path,
    runs: &[MopRun],
    deadline: Option<Instant>,
) -> anyhow::Result<Vec<MopStatus>> {
    let mut store = Store::open(home).with_context(|| format!("opening {}", home.display()))?;
    let mut statuses: Vec<Option<MopStatus>> = vec![None; runs.len()];
    loop {
        let mut open = 0;
        for (run, status) in runs.iter().zip(statuses.iter_mut()) {
            if matches!(status, Some(MopStatus::Done(_) | MopStatus::Failed(_))) {
                continue;
            }
            let now = mop::advance(&mut store, run.run)?;
            match &now {
                MopStatus::Done(quality) => eprintln!(
                    "{}/{}: MOP run {} done, quality {quality:.3}",
                    run.app, run.candidate, run.run.0
                ),
                MopStatus::Failed(reason) => eprintln!(
                    "{}/{}: MOP run {} failed: {reason}",
                    run.app, run.candidate, run.run.0
                ),
                MopStatus::Training { .. } => open += 1,
            }
            *status = Some(now);
        }
        if open == 0 || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Ok(statuses.into_iter().flatten().collect());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
