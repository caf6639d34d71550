//! Doing one leased work unit: what any worker (the engine's in-process one, an `easeml worker`
//! process, a worker on another host) runs between [`easeml_store::Store::lease_unit`] and
//! [`easeml_store::Store::commit_unit`].
//!
//! - [`UnitSpec`]: what the coordinator decides for a unit beyond its run (time limit, deadline,
//!   epochs, seed, tuning), stored as JSON text with the unit. The device is the worker's.
//! - [`execute`]: loads the app (its manifest and enabled examples, cached by data version), probes
//!   an untrained network's latency under an `infer_latency` limit, trains, measures the trained
//!   model's latency, puts the checkpoint blob, and commits the outcome with the lease's fencing
//!   token. A unit whose app's data changed since it was queued is committed failed (its data is
//!   gone). Nothing is written to the run before the commit, so an orphaned worker whose lease was
//!   taken over writes nothing but an unreferenced blob.
//! - [`Heartbeat`]: a thread that renews the lease (and the worker's heartbeat) over its own store
//!   connection while the unit trains, and says whether the lease was lost.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use easeml_store::{
    AppId, Lease, RunValidation, Store, UnitResult, WorkerState, format_seconds, now_ms,
};
use easeml_trainer::device::device_name;
use easeml_trainer::{
    Budget, Candidate, Examples, LatencyProtocol, Predictor, RunOutcome, Tuning, measure_latency,
    probe_latency,
};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::app::AppModel;
use crate::checkpoint_blob;
use crate::engine::load_examples;
use crate::error::{Error, Result};

/// How the engine measures inference latency ([`easeml_trainer::latency`]): at most about half a
/// second of timed predictions per run.
pub const LATENCY: LatencyProtocol = LatencyProtocol::DEFAULT;

/// What the coordinator decides for a unit beyond its run; the worker adds its device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitSpec {
    /// Wall-clock seconds the run may take at most.
    pub max_seconds: f64,
    /// The training session's end, ms since the epoch: a unit leased late gets only what is left.
    /// A deadline already past when the unit is leased is a session that ended without it (a
    /// coordinator cancels the units no worker took before it ends, so only an interrupted
    /// session leaves one): the re-run gets its own limit, never none.
    pub deadline_ms: Option<i64>,
    /// Epochs per trial at most.
    pub max_epochs: usize,
    /// The fewest optimizer steps of a trial ([`Budget::min_steps`]).
    pub min_steps: usize,
    /// The run's seed.
    pub seed: u64,
    /// `grid` or `trimtuner` ([`Tuning::name`]).
    pub tuning: String,
    /// The floor a network's k-fold races ([`Budget::race_floor`]: the highest lower bound of the
    /// accuracy of the app's runs on this data version when the unit was queued); absent in the
    /// specs written before the race.
    #[serde(default)]
    pub race_floor: Option<f64>,
}

impl UnitSpec {
    /// The spec as stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Reads a stored spec.
    pub fn from_json(text: &str) -> Result<UnitSpec> {
        serde_json::from_str(text)
            .map_err(|error| Error::Input(format!("a work unit's spec is unreadable: {error}")))
    }

    /// The trainer's budget on `device`, with the time left before the deadline (see
    /// [`UnitSpec::deadline_ms`]).
    pub fn budget(&self, device: Device) -> Budget {
        self.budget_at(device, now_ms())
    }

    /// [`UnitSpec::budget`] at the time `now_ms`.
    fn budget_at(&self, device: Device, now_ms: i64) -> Budget {
        let mut budget = Budget::new(device);
        budget.max_epochs = self.max_epochs;
        budget.min_steps = self.min_steps;
        budget.seed = self.seed;
        budget.tuning = Tuning::from_name(&self.tuning).unwrap_or_default();
        budget.race_floor = self.race_floor.filter(|floor| floor.is_finite());
        let mut seconds = self.max_seconds;
        if let Some(deadline) = self.deadline_ms.filter(|&deadline| deadline > now_ms) {
            seconds = seconds.min((deadline - now_ms) as f64 / 1000.0);
        }
        budget.max_seconds = seconds.max(0.0);
        budget
    }

    /// Whether a run of this unit that started at `started_ms` and finished at `finished_ms` was
    /// cut by its training session's end: the deadline left it less than its own limit
    /// ([`UnitSpec::budget`]) and it ran until within a second of the deadline. Its cost is then
    /// the session's, not the model's: the scheduler does not calibrate other candidates' expected
    /// costs by it.
    pub fn cut_by_deadline(&self, started_ms: i64, finished_ms: i64) -> bool {
        self.deadline_ms.is_some_and(|deadline| {
            let left_ms = deadline.saturating_sub(started_ms);
            left_ms > 0
                && (left_ms as f64) < self.max_seconds * 1000.0
                && finished_ms >= deadline.saturating_sub(1000)
        })
    }
}

/// An app's model and its enabled examples (`None`: fewer than the minimum).
type Loaded = (Arc<AppModel>, Option<Arc<Examples>>);

/// An app's model and enabled examples at one data version, kept between units of that app.
#[derive(Debug, Default)]
pub struct AppCache {
    entry: Option<(AppId, u64, Loaded)>,
}

impl AppCache {
    /// Seeds the cache with what the caller already loaded.
    pub fn insert(
        &mut self,
        app: AppId,
        version: u64,
        model: Arc<AppModel>,
        examples: Arc<Examples>,
    ) {
        self.entry = Some((app, version, (model, Some(examples))));
    }

    /// The app's model and examples at `version` (`None` examples: fewer than the minimum), or
    /// `Ok(None)` when the app's data is no longer at `version`.
    fn get(&mut self, store: &Store, app: AppId, version: u64) -> Result<Option<Loaded>> {
        if let Some((cached_app, cached_version, loaded)) = &self.entry
            && (*cached_app, *cached_version) == (app, version)
        {
            return Ok(Some(loaded.clone()));
        }
        let record = store.app(app)?;
        if record.data_version != version {
            return Ok(None);
        }
        let model = Arc::new(AppModel::from_manifest(&record.name, &record.manifest)?);
        let examples = load_examples(store, app, &model)?.map(Arc::new);
        self.entry = Some((app, version, (Arc::clone(&model), examples.clone())));
        Ok(Some((model, examples)))
    }
}

/// How a unit ended for the worker.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// Its result is committed.
    Committed,
    /// Its lease was taken over before the commit: nothing was recorded.
    LeaseLost(String),
    /// The training session's end cut it before it had a model (the time left was shorter than
    /// its own limit, and a model that is not a network has nothing before its fit ends): it is
    /// dropped with its run ([`Store::abandon_unit`]), neither failed (the candidate is not bad)
    /// nor queued again (the session is ending), so a later session finds the candidate untried.
    Dropped(String),
    /// It was given back to the store to be leased again (a gang rank whose gang did not form,
    /// or whose gradient ring broke: [`crate::mop`]).
    GaveBack(String),
}

/// Trains a leased unit on `device` and commits its outcome (see the module documentation).
pub fn execute(
    store: &mut Store,
    lease: &Lease,
    device: Device,
    cache: &mut AppCache,
) -> Result<Executed> {
    let started = Instant::now();
    let mut cut_by_deadline = false;
    let outcome = match prepare(store, lease, cache) {
        Err(error) => Err(Failure::new(error.to_string(), 0.0)),
        Ok(Prepared::Stale) => Err(Failure::new(
            "interrupted, and the app's data changed before it could be re-run".to_owned(),
            0.0,
        )),
        Ok(Prepared::Ready {
            model,
            examples,
            spec,
        }) => {
            let budget = spec.budget(device);
            cut_by_deadline = budget.max_seconds < spec.max_seconds;
            train_and_measure(store, lease, &model, &examples, &budget, started)
        }
    };
    if let Err(failure) = &outcome
        && failure.out_of_time
        && cut_by_deadline
    {
        return Ok(if store.abandon_unit(lease)? {
            Executed::Dropped(failure.reason.clone())
        } else {
            Executed::LeaseLost(format!(
                "unit {}: the lease of attempt {} by `{}` is no longer valid",
                lease.unit.0, lease.attempt, lease.owner
            ))
        });
    }
    let committed = match &outcome {
        Ok(finished) => store.commit_unit(
            lease,
            &UnitResult::Finished {
                quality: finished.quality,
                cost_seconds: finished.cost_seconds,
                checkpoint: &finished.checkpoint,
                validation: &finished.validation,
                infer_latency_seconds: finished.latency,
                trials: finished.trials.as_deref(),
            },
        ),
        Err(failure) => store.commit_unit(
            lease,
            &UnitResult::Failed {
                reason: &failure.reason,
                cost_seconds: Some(failure.cost_seconds),
                infer_latency_seconds: failure.latency,
            },
        ),
    };
    executed(committed)
}

/// How a fenced commit ended for the worker: committed, or (refused as stale) its lease lost;
/// any other store error is an error.
pub(crate) fn executed(committed: easeml_store::Result<()>) -> Result<Executed> {
    match committed {
        Ok(()) => Ok(Executed::Committed),
        Err(error @ easeml_store::Error::StaleLease { .. }) => {
            Ok(Executed::LeaseLost(error.to_string()))
        }
        Err(error) => Err(error.into()),
    }
}

/// Why a run failed, what it cost, a latency measured before it failed, and whether its time
/// limit ended it before it had a model ([`easeml_trainer::Error::OutOfTime`]).
struct Failure {
    reason: String,
    cost_seconds: f64,
    latency: Option<f64>,
    out_of_time: bool,
}

impl Failure {
    fn new(reason: String, cost_seconds: f64) -> Failure {
        Failure {
            reason,
            cost_seconds,
            latency: None,
            out_of_time: false,
        }
    }
}

enum Prepared {
    Ready {
        model: Arc<AppModel>,
        examples: Arc<Examples>,
        spec: UnitSpec,
    },
    Stale,
}

fn prepare(store: &Store, lease: &Lease, cache: &mut AppCache) -> Result<Prepared> {
    let spec = UnitSpec::from_json(&lease.spec)?;
    let Some((model, examples)) = cache.get(store, lease.app, lease.data_version)? else {
        return Ok(Prepared::Stale);
    };
    let Some(examples) = examples else {
        return Err(Error::Input(format!(
            "the app has fewer than {} enabled examples now",
            crate::MIN_EXAMPLES
        )));
    };
    if !model.candidates.contains(&lease.candidate) {
        return Ok(Prepared::Stale);
    }
    Ok(Prepared::Ready {
        model,
        examples,
        spec,
    })
}

struct Finished {
    quality: f64,
    cost_seconds: f64,
    checkpoint: easeml_store::BlobHash,
    validation: RunValidation,
    latency: f64,
    trials: Option<String>,
}

/// Trains the candidate and measures it; a [`Failure`] for a failed run.
fn train_and_measure(
    store: &Store,
    lease: &Lease,
    model: &AppModel,
    examples: &Examples,
    budget: &Budget,
    started: Instant,
) -> std::result::Result<Finished, Failure> {
    let elapsed = || started.elapsed().as_secs_f64();
    let candidate = Candidate::parse(&lease.candidate)
        .map_err(|error| Failure::new(Error::from(error).to_string(), elapsed()))?;
    let limits = model.constraint_limits();
    if let Some(limit) = limits.infer_latency {
        // A network's forward cost does not depend on its weights: one that is already too slow
        // untrained is not trained. (A probe that fails says nothing: training reports why.)
        let probe = probe_latency(&candidate, examples, budget.model, budget.device, &LATENCY);
        if let Ok(Some(latency)) = probe
            && latency > limit
        {
            let reason = format!(
                "not trained: its untrained network takes {} per example (batch 1, on {}), over the `infer_latency` limit of {}; a model this slow is never served (raise the limit, or let the faster candidates serve)",
                format_seconds(latency),
                device_name(budget.device),
                format_seconds(limit),
            );
            return Err(Failure {
                latency: Some(latency),
                ..Failure::new(reason, elapsed())
            });
        }
    }
    let trained = easeml_trainer::train(&candidate, examples, budget).map_err(|error| {
        let out_of_time = matches!(error, easeml_trainer::Error::OutOfTime { .. });
        Failure {
            out_of_time,
            ..Failure::new(Error::from(error).to_string(), elapsed())
        }
    })?;
    let protocol = trained.protocol();
    let (checkpoint, quality) = match trained.outcome {
        RunOutcome::Succeeded {
            checkpoint,
            quality,
        } => (checkpoint, quality),
        RunOutcome::Failed { reason } => {
            return Err(Failure::new(reason, trained.cost_seconds));
        }
    };
    // Every trained model's latency is measured on the device it trained on (the one
    // `choose_device` also serves on) before the run is committed, so no reader sees it done
    // without it.
    let latency = Predictor::new(&checkpoint, budget.device)
        .and_then(|predictor| measure_latency(&predictor, &examples.inputs, &LATENCY))
        .map_err(|error| {
            Failure::new(
                format!("the trained model cannot predict, so it cannot be served: {error}"),
                trained.cost_seconds,
            )
        })?;
    let blob = checkpoint_blob::encode(&checkpoint)
        .and_then(|bytes| Ok(store.put_blob(&bytes)?))
        .map_err(|error| Failure {
            latency: Some(latency),
            ..Failure::new(error.to_string(), trained.cost_seconds)
        })?;
    // The trial history, kept with the run (a history too large to keep, which no run of the
    // trainer's comes near, is left out rather than failing it).
    let trials = serde_json::to_string(&trained.trials)
        .ok()
        .filter(|trials| trials.len() <= easeml_store::MAX_TRIALS_BYTES);
    // How a classifier's validation answers fell, for the per-class view (left out, like the
    // trials, past the store's bound).
    let confusion = trained
        .confusion
        .as_ref()
        .map(|confusion| easeml_object::Confusion::from_cells(confusion.cells()).to_json())
        .filter(|json| json.len() <= easeml_store::MAX_CONFUSION_BYTES);
    // The validation answers, for ensembles (bounded by `Answers::of`; a blob that cannot be put
    // leaves the run out of ensembles, never fails it).
    let oof = trained
        .oof
        .as_ref()
        .and_then(|oof| crate::ensemble::answers::Answers::of(oof, examples))
        .and_then(|answers| store.put_blob(&answers.encode()).ok());
    Ok(Finished {
        quality: quality.clamp(0.0, 1.0),
        cost_seconds: trained.cost_seconds,
        checkpoint: blob,
        validation: RunValidation {
            protocol: Some(protocol),
            quality_std: trained.quality_std,
            validated_examples: Some(trained.n_validation as u64),
            confusion,
            oof,
        },
        latency,
        trials,
    })
}

/// A thread renewing a lease every third of its time to live, over its own store connection,
/// with the worker's heartbeat; stopped (and joined) on drop.
#[derive(Debug)]
pub struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    lost: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts renewing `lease` for `worker` in the store at `home`.
    pub fn start(home: &Path, lease: &Lease, worker: &str, ttl: Duration) -> Result<Heartbeat> {
        let mut store = Store::open(home)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let lease = lease.clone();
        let worker = worker.to_owned();
        let period = (ttl / 3).max(Duration::from_millis(50));
        let thread = std::thread::Builder::new()
            .name("easeml-heartbeat".to_owned())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                    // A store error (a busy database past its timeout) is tried again next
                    // period; only a lease found taken over is lost.
                    if let Ok(false) = store.renew_lease(&lease, ttl) {
                        flag.store(true, Ordering::SeqCst);
                        return;
                    }
                    let _ = store.worker_heartbeat(&worker, WorkerState::Busy, Some(lease.unit));
                }
            })
            .map_err(|error| Error::Input(format!("cannot start a heartbeat thread: {error}")))?;
        Ok(Heartbeat {
            stop: Some(stop),
            lost,
            thread: Some(thread),
        })
    }

    /// Whether a renewal found the lease taken over.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(deadline_ms: Option<i64>) -> UnitSpec {
        UnitSpec {
            max_seconds: 60.0,
            deadline_ms,
            max_epochs: 20,
            min_steps: 0,
            seed: 0,
            tuning: "grid".to_owned(),
            race_floor: None,
        }
    }

    #[test]
    fn a_unit_gets_what_is_left_of_its_session_and_a_past_session_bounds_nothing() {
        let now = 1_000_000;
        let seconds = |deadline| spec(deadline).budget_at(Device::Cpu, now).max_seconds;
        assert_eq!(seconds(None), 60.0);
        assert_eq!(seconds(Some(now + 5_000)), 5.0);
        assert_eq!(seconds(Some(now + 600_000)), 60.0);
        // A session that ended before the unit was leased (it was interrupted, and its unit is
        // re-run by the next session): the run gets its own limit, not zero.
        assert_eq!(seconds(Some(now)), 60.0);
        assert_eq!(seconds(Some(now - 5_000)), 60.0);
    }

    #[test]
    fn a_run_is_cut_by_its_session_only_when_the_deadline_bound_it_and_it_ran_into_it() {
        let start = 1_000_000;
        // 5 s left of the session (below the 60 s limit), and the run took them all.
        assert!(spec(Some(start + 5_000)).cut_by_deadline(start, start + 4_900));
        // It finished well before the deadline: its cost is its own.
        assert!(!spec(Some(start + 5_000)).cut_by_deadline(start, start + 2_000));
        // The deadline left more than the run's own limit: the limit, not the session, stopped it.
        assert!(!spec(Some(start + 600_000)).cut_by_deadline(start, start + 599_500));
        // No session deadline, or one already past when it started (an interrupted session).
        assert!(!spec(None).cut_by_deadline(start, start + 60_000));
        assert!(!spec(Some(start - 1)).cut_by_deadline(start, start + 60_000));
    }
}
