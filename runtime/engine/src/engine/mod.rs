//! The engine: one scheduler over every app of a store, training through the trainer, every run
//! recorded in the store.
//!
//! A loop step ([`Engine::step`]):
//! 1. [`Engine::sync`] reads the store's apps: a new app with enough enabled examples is registered
//!    with the scheduler (its candidates with their estimated costs, and its finished runs on the
//!    current data as prior history); an app whose data version moved on is re-opened
//!    (`data_changed`: every candidate eligible again); a removed app is dropped.
//! 2. A run left `queued` by an interrupted engine is run first; otherwise the scheduler picks the
//!    next (app, candidate).
//! 3. The run is queued, started, trained, and finished (quality, cost, checkpoint blob, and how the
//!    quality was measured: protocol and spread) or failed (reason, cost) in the store; the
//!    scheduler gets the observation (a failed run counts as quality 0, so it is not retried on the
//!    same data; a quality is reported to it as [`scheduler_quality`] says, so that a perfect score
//!    on a few examples does not look like a finished app).
//! 4. Constraints (LANGUAGE.md): the run's time limit is at most 0.9 x `train_time`; with an
//!    `infer_latency` limit the untrained network's batch-1 latency is probed first and a candidate
//!    already over the limit fails without training; every trained model's latency is measured
//!    before the run is marked done. A done run that breaks a constraint is never served
//!    ([`best_run`]) and counts as quality 0 for the scheduler.
//!
//! One engine trains a store at a time: [`Engine::open`] takes an exclusive lock on
//! `<home>/train.lock` (released when the engine is dropped, or by the OS when the process dies), and
//! re-queues the runs a crashed engine left `running`.
//!
//! A coordinator ([`Engine::coordinate`]) turns each decision into a whole-run unit, or, by
//! [`crate::mop::choose_training`]'s rule, into MOP runs over the live workers, one per learning
//! rate ([`crate::mop`]), hopping or data-parallel ([`crate::gang`]): it keeps the live workers'
//! places filled (a unit or hopping run holds one, as it trains on one worker at a time; a
//! data-parallel run holds one per rank), advances its MOP runs, and reports the decision to the scheduler when
//! its last run ends (the best quality, the summed cost), like a whole run. A MOP run the session's end leaves open stays in the store and is resumed by the next
//! coordinating session. The in-process loop ([`Engine::step`]) trains whole runs only.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use easeml_object::codec;
use easeml_scheduler::{
    CandidateSpec, Decision, KernelHyperparameters, KernelKind, KernelModel, PriorObservation,
    Scheduler, SchedulerConfig, SetAside,
};
use easeml_stats::protocol::Protocol;
use easeml_store::{
    AppId, Lease, PageRequest, RunId, RunRecord, RunState, Store, StoredOutput, UnitId, UnitKind,
    UnitState, best_run, broken_constraints, now_ms,
};
use easeml_trainer::{
    Budget, Candidate, Examples, ModelKind, Task, Tuning, Validation, estimate_cost, race,
};
use tch::Device;

use crate::app::AppModel;
use crate::dataset::{StoredTarget, examples_of};
use crate::error::{Error, Result};
use crate::mop::{self, MopChoice, MopPlan, MopStatus, Parallelism, Training};
use crate::unit::{Executed, UnitSpec};
use crate::worker::{DEFAULT_LEASE_TTL, Worker, WorkerConfig};

mod coordinator;
mod examples;
mod mop_runs;
mod step;
mod sync;

pub use examples::{load_examples, load_examples_where};
use sync::kernel_from_history;

/// An app needs at least this many enabled examples before it is trained (so that the split by id
/// leaves examples on both sides).
pub const MIN_EXAMPLES: usize = easeml_store::MIN_TRAINING_EXAMPLES;

/// The quality the scheduler is told of a run measured on `validated` examples: the measured one,
/// but at most `(m + 1) / (m + 2)` with `m = validated` (Laplace's rule of succession: after `m`
/// right answers out of `m`, the expected rate is that). The scheduler clips its bounds to a
/// quality of 1, so an app whose best run scored 1.0 has no gap left and Greedy never serves it
/// again while another app has one; a perfect score on 13 examples is no such proof. The cap keeps
/// a gap of `1 / (m + 2)`: 0.067 on 13 examples, 0.019 on 50, 0.001 on 1000. The store keeps the
/// measured quality; the best model is chosen on it.
pub fn scheduler_quality(quality: f64, validated: usize) -> f64 {
    let m = validated as f64;
    quality.min((m + 1.0) / (m + 2.0))
}

/// How the engine trains.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The device runs train on.
    pub device: Device,
    /// Wall-clock seconds one run may take at most (the learning-rate grid shares it).
    pub max_run_seconds: f64,
    /// Epochs per learning rate at most (raised on small data by `min_steps`).
    pub max_epochs: usize,
    /// The fewest optimizer steps a trial may take before it must stop (`Budget::min_steps`; 0: no
    /// floor, `max_epochs` and the trainer's patience as they are).
    pub min_steps: usize,
    /// The seed of every run (recorded with the run's trials).
    pub seed: u64,
    /// The scheduler's policies (easeml's default, [`SchedulerConfig::default`]: EI per unit cost
    /// inside each app, Hybrid with a round-robin floor over apps, GP-BUCB with several workers;
    /// expected costs calibrated by observed ones: they start as FLOP estimates).
    pub scheduler: SchedulerConfig,
    /// How a network's run chooses its settings: the learning-rate grid (the default) or a
    /// TrimTuner search over settings and data shares (`easeml_trainer::tune`).
    pub tuning: Tuning,
    /// The time to live of a work unit's lease (a worker silent this long loses its unit).
    pub lease_ttl: Duration,
    /// `false` (the embedded default): [`Engine::train`] trains on the engine's in-process worker,
    /// one run at a time. `true`: it coordinates the store's workers ([`Engine::coordinate`]).
    pub coordinate: bool,
    /// Coordinating: how a decision is trained, as a whole run or by model hopping
    /// ([`crate::mop::choose_training`]; [`Parallelism::Auto`] by default).
    pub parallelism: Parallelism,
    /// The epochs of a MOP run at most.
    pub mop_epochs: u64,
    /// A MOP run stops once this many epochs have passed without a better validation quality
    /// (0: it trains all its epochs); [`DEFAULT_MOP_PATIENCE`].
    pub mop_patience: u64,
    /// The learning rates a decision trained by hopping tries: one MOP run each, hopping
    /// independently (Cerebro's configurations; the whole-run grid's rates by default).
    pub mop_learning_rates: Vec<f64>,
    /// [`Parallelism::Auto`]: an app's data copied to every live worker must exceed this many
    /// bytes in all before its networks train by hopping
    /// ([`crate::mop::DEFAULT_MOP_ABOVE_BYTES`]).
    pub mop_above_bytes: u64,
    /// Whether the engine recomputes an app's ensemble after each committed run (`true` by
    /// default; `false` records none, so the best run alone serves: `easeml bench quality
    /// --no-ensembles` measures the difference).
    pub ensembles: bool,
}

/// The default [`EngineConfig::mop_epochs`]: at most 20 epochs, as a whole run's default; early
/// stopping ([`DEFAULT_MOP_PATIENCE`]) ends most runs sooner.
pub const DEFAULT_MOP_EPOCHS: u64 = 20;

/// The default [`EngineConfig::mop_patience`]: 3 epochs without a better validation quality, the
/// trainer's patience for whole runs.
pub const DEFAULT_MOP_PATIENCE: u64 = 3;

/// The default [`EngineConfig::min_steps`]: 400 optimizer steps (20 epochs of 20 batches), and a
/// patience of 40 steps. On GunPoint (50 training series), 200 epochs with a patience of 20 took a
/// ResNet-1D from 0.83 to 0.96 held-out accuracy where the default 20 epochs stopped it early.
pub const MIN_STEPS: usize = 400;

impl EngineConfig {
    /// Defaults for `device`: runs of at most 2 minutes on the CPU (10 on CUDA), 20 epochs.
    pub fn for_device(device: Device) -> EngineConfig {
        EngineConfig {
            device,
            max_run_seconds: if device.is_cuda() { 600.0 } else { 120.0 },
            max_epochs: 20,
            min_steps: MIN_STEPS,
            seed: 0,
            scheduler: SchedulerConfig {
                calibrate_costs: true,
                ..SchedulerConfig::default()
            },
            tuning: Tuning::Grid,
            lease_ttl: DEFAULT_LEASE_TTL,
            coordinate: false,
            parallelism: Parallelism::Auto,
            mop_epochs: DEFAULT_MOP_EPOCHS,
            mop_patience: DEFAULT_MOP_PATIENCE,
            mop_learning_rates: Budget::new(device).learning_rates,
            mop_above_bytes: mop::DEFAULT_MOP_ABOVE_BYTES,
            ensembles: true,
        }
    }
}

/// What happened in a step, for progress displays and logs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An app joined the scheduler.
    AppRegistered {
        /// The app.
        app: String,
        /// Its candidate count.
        candidates: usize,
    },
    /// An app's data changed; its candidates are eligible again.
    DataChanged {
        /// The app.
        app: String,
        /// The new data version.
        data_version: u64,
    },
    /// An app cannot be trained (broken manifest, unreadable examples); it is left out.
    AppSkipped {
        /// The app.
        app: String,
        /// Why.
        reason: String,
    },
    /// A candidate of an app cannot be trained on its data (its cost cannot be estimated for it);
    /// the app goes on with the others.
    CandidateLeftOut {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// Why.
        reason: String,
    },
    /// Candidates of an app are set aside on its current data: two models of their kin tried, all
    /// far below the app's best, and they would cost more than it (the scheduler's rule,
    /// [`easeml_scheduler::SetAside`]). Sent when a report sets candidates aside that were not set
    /// aside before it (one event per kin): again when the reason changes (a better best, say).
    CandidatesSetAside {
        /// The app.
        app: String,
        /// The candidates set aside.
        candidates: Vec<String>,
        /// Their kin.
        kin: String,
        /// The best quality a model of that kin reached.
        kin_quality: f64,
        /// The app's best candidate.
        best: String,
        /// Its quality.
        best_quality: f64,
    },
    /// A run started.
    RunStarted {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Seconds the run may take at most.
        max_seconds: f64,
    },
    /// A run finished with a quality.
    RunFinished {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Its validation quality in [0, 1] (under k-fold the mean over the folds).
        quality: f64,
        /// The standard deviation of the fold qualities (k-fold), else `None`.
        quality_std: Option<f64>,
        /// How the quality was measured, e.g. `5-fold stratified` or `split 20%`.
        protocol: String,
        /// Its cost in seconds.
        cost_seconds: f64,
        /// Its measured inference latency, seconds per example (batch 1, on the engine's device).
        infer_latency_seconds: f64,
        /// Each constraint it broke (`infer_latency 12.30 ms > 5.00 ms`): it is then never served.
        broken_constraints: Vec<String>,
        /// Whether it is now the app's best model.
        best: bool,
    },
    /// The number of live workers a coordinator sees changed (coordinating only).
    WorkersChanged {
        /// Workers heard from within two lease lifetimes.
        live: usize,
    },
    /// A coordinator queued a MOP run ([`crate::mop`]), or took over one a previous session left
    /// open (`resumed`).
    MopRunStarted {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Its learning rate (one MOP run per rate of the decision).
        learning_rate: f64,
        /// Its partitions (the live workers when it was queued).
        partitions: u64,
        /// Its epochs.
        epochs: u64,
        /// Whether a previous session queued it.
        resumed: bool,
        /// Whether it trains by data parallelism (each epoch on all its partitions' workers at
        /// once) rather than by hopping.
        data_parallel: bool,
    },
    /// More sub-epochs of a MOP run are committed.
    RunProgress {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Sub-epochs committed.
        done: usize,
        /// Sub-epochs in all (epochs x partitions).
        total: usize,
    },
    /// A run failed.
    RunFailed {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Why.
        reason: String,
    },
    /// The training session's end cut a run before it had a model (a model that is not a
    /// network has nothing before its fit ends): the run is dropped, not failed, and the candidate
    /// is left untried for a later session ([`easeml_store::Store::abandon_unit`]).
    RunDropped {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run (no longer in the store).
        run: RunId,
        /// The run's number within its app (what people see: `RunRecord::number`).
        number: u64,
        /// Why it had no model.
        reason: String,
    },
}

/// What one [`Engine::step`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A run was committed, finished or failed.
    Run(Box<RunRecord>),
    /// The session's end cut a run before it had a model; it was dropped ([`Event::RunDropped`]).
    /// Its candidate is not decided again by this engine.
    Dropped(RunId),
}

impl Step {
    /// The committed run, `None` for a dropped one.
    pub fn into_run(self) -> Option<RunRecord> {
        match self {
            Step::Run(record) => Some(*record),
            Step::Dropped(_) => None,
        }
    }
}

/// What a training session did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainSummary {
    /// Runs finished with a quality.
    pub finished: usize,
    /// Runs failed.
    pub failed: usize,
    /// Runs the session's end cut before they had a model ([`Event::RunDropped`]).
    pub dropped: usize,
    /// MOP runs the session's end left open: the next coordinating session resumes them.
    pub unfinished: usize,
    /// True when every candidate of every app is trained on its current data.
    pub exhausted: bool,
}

/// How a run ended, as the scheduler is told it ([`Engine::report`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunEnd {
    /// It finished (or failed) by itself, or its own time limit stopped it: its cost is its
    /// model's, and calibrates its siblings' expected costs.
    OnItsOwn,
    /// Its session's end cut it short: its cost says nothing of its model's.
    CutBySessionEnd,
    /// The race stopped its folds below the app's best run ([`Protocol::is_raced`]): its cost is a
    /// part of its model's, and calibrates nothing either.
    Raced,
}

#[derive(Debug)]
struct AppState {
    id: AppId,
    /// Shared with the in-process worker's cache (never copied per run).
    model: Arc<AppModel>,
    data_version: u64,
    /// The enabled examples of `data_version`, loaded once per version.
    examples: Arc<Examples>,
}

/// The multi-tenant training loop over one store.
#[derive(Debug)]
pub struct Engine {
    store: Store,
    config: EngineConfig,
    scheduler: Scheduler,
    apps: BTreeMap<String, AppState>,
    /// Apps left out, by name, with the data version they were skipped at.
    skipped: BTreeMap<String, u64>,
    /// The in-process worker, registered by the first [`Engine::step`].
    worker: Option<Worker>,
    /// Units queued or leased that the engine reports when they commit.
    in_flight: BTreeMap<UnitId, InFlight>,
    /// Decisions trained by model hopping: the coordinator advances their runs and reports each
    /// decision when its last run ends.
    mop_flights: Vec<MopFlight>,
    _lock: File,
}

impl Engine {
    /// Opens the engine over the store at `home`: takes the train lock, re-queues interrupted runs,
    /// and builds the scheduler's prior from every app's finished runs.
    pub fn open(home: impl AsRef<std::path::Path>, config: EngineConfig) -> Result<Engine> {
        let mut store = Store::open(home.as_ref())?;
        let lock_path = store.home().join("train.lock");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| easeml_store::Error::Io {
                path: lock_path.clone(),
                context: "opening the train lock".to_owned(),
                source: error,
            })?;
        if lock.try_lock().is_err() {
            return Err(Error::Busy {
                home: store.home().display().to_string(),
                lock: format!("the lock file {}", lock_path.display()),
            });
        }
        // A PostgreSQL store is shared by hosts whose file locks need not see each other: its
        // coordinator also holds the database's advisory lock, for as long as its connection.
        if !store.try_lock_coordinator()? {
            return Err(Error::Busy {
                home: store.home().display().to_string(),
                lock: "the PostgreSQL database's coordinator lock (an advisory lock)".to_owned(),
            });
        }
        // Holding the lock, any in-process worker's lease is a dead predecessor's.
        store.release_leases_of(&format!("{}:", easeml_store::IN_PROCESS_ROLE))?;
        store.requeue_interrupted()?;
        let kernel =
            Arc::new(kernel_from_history(&store)?.with_kin(easeml_trainer::kin_by_model()));
        let scheduler = Scheduler::new(kernel, config.scheduler.clone());
        Ok(Engine {
            store,
            config,
            scheduler,
            apps: BTreeMap::new(),
            skipped: BTreeMap::new(),
            worker: None,
            in_flight: BTreeMap::new(),
            mop_flights: Vec::new(),
            _lock: lock,
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Times one scheduling decision over every app the store holds (synced first), then cancels
    /// it: nothing is queued and the scheduler is as before. `Ok(None)` when nothing is left to
    /// decide. What `easeml bench service` reports as the cost of a decision at N apps.
    pub fn time_decision(&mut self, events: &mut dyn FnMut(Event)) -> Result<Option<Duration>> {
        self.sync(events)?;
        let started = Instant::now();
        let decision = self.scheduler.next_decision();
        let elapsed = started.elapsed();
        match decision {
            None => Ok(None),
            Some(decision) => {
                self.scheduler.cancel(&decision)?;
                Ok(Some(elapsed))
            }
        }
    }

    /// The spec of a unit of the app, ending by `deadline` at the latest: the run's time limit is
    /// at most 0.9 x `train_time`, so it never breaks that constraint.
    fn unit_spec(&self, state: &AppState, deadline: Option<Instant>) -> UnitSpec {
        let mut seconds = self.config.max_run_seconds;
        if let Some(limit) = state.model.train_time_limit() {
            seconds = seconds.min(0.9 * limit);
        }
        let deadline_ms = deadline.map(|deadline| {
            let left = deadline.saturating_duration_since(Instant::now());
            now_ms() + i64::try_from(left.as_millis()).unwrap_or(i64::MAX / 4)
        });
        UnitSpec {
            max_seconds: seconds.max(0.0),
            deadline_ms,
            max_epochs: self.config.max_epochs,
            min_steps: self.config.min_steps,
            seed: self.config.seed,
            tuning: self.config.tuning.name().to_owned(),
            race_floor: self.race_floor(state),
        }
    }

    /// The floor a network's k-fold on the app's current data races ([`easeml_trainer::race`]):
    /// the highest lower bound of the accuracy of its runs on that data that break no constraint;
    /// `None` for a workload that is not a classification, before the first such run, and when the
    /// runs cannot be read (then nothing is raced).
    fn race_floor(&self, state: &AppState) -> Option<f64> {
        if !state.model.workload.is_classification() {
            return None;
        }
        let limits = state.model.constraint_limits();
        let runs = self.store.runs(state.id).ok()?;
        runs.iter()
            .filter(|run| {
                run.state == RunState::Done
                    && run.data_version == state.data_version
                    && broken_constraints(run, &limits).is_empty()
            })
            .filter_map(|run| {
                let answers = usize::try_from(run.validation.validated_examples?).ok()?;
                Some(race::floor(run.quality?, answers))
            })
            .filter(|floor| floor.is_finite())
            .reduce(f64::max)
    }

    /// The budget of one run of the app (its unit's, on the engine's device).
    fn budget(&self, state: &AppState, deadline: Option<Instant>) -> Budget {
        self.unit_spec(state, deadline).budget(self.config.device)
    }

    /// The seconds a unit's run may take, for its `RunStarted` event: 0 for a spec that cannot be
    /// read (the worker commits such a unit as failed, saying why; the engine never stops on it).
    fn max_seconds(&self, spec: &str) -> f64 {
        UnitSpec::from_json(spec)
            .map(|spec| spec.budget(self.config.device).max_seconds)
            .unwrap_or(0.0)
    }

    /// The scheduler's decision a leased unit answers: its app's current data version and a
    /// candidate it knows; `None` for a unit of data that changed since (its result goes to the
    /// store only).
    fn decision_for(&self, lease: &Lease) -> Option<Decision> {
        self.decision_for_run(lease.app, lease.data_version, &lease.candidate)
    }

    /// The scheduler's decision a run of `candidate` on `app`'s data version `data_version`
    /// answers, as [`Engine::decision_for`] says.
    fn decision_for_run(&self, app: AppId, data_version: u64, candidate: &str) -> Option<Decision> {
        let (name, state) = self.apps.iter().find(|(_, state)| state.id == app)?;
        (state.data_version == data_version
            && state.model.candidates.iter().any(|id| id == candidate))
        .then(|| Decision {
            user_id: name.clone(),
            model_id: candidate.to_owned(),
            // An app is registered afresh for each of its store data versions, so its scheduler
            // data version is always the first, 0.
            data_version: 0,
        })
    }

    /// The name of an app (its id when the engine no longer knows it).
    fn app_name(&self, app: AppId) -> String {
        self.apps
            .iter()
            .find(|(_, state)| state.id == app)
            .map(|(name, _)| name.clone())
            .or_else(|| self.store.app(app).ok().map(|app| app.name))
            .unwrap_or_else(|| format!("app {}", app.0))
    }

    /// A committed run: its event, and its observation for the scheduler (a failed run, or one
    /// that breaks a constraint, counts as quality 0; a quality as [`scheduler_quality`] says).
    fn observe(
        &mut self,
        run: RunId,
        decision: Option<&Decision>,
        events: &mut dyn FnMut(Event),
    ) -> Result<RunRecord> {
        let (record, reported) = self.announce(run, events)?;
        if let Some(decision) = decision {
            let cost = record.cost_seconds.unwrap_or(0.0);
            let ended = self.how_the_run_ended(&record)?;
            self.report(decision, reported, cost, ended, events)?;
        }
        Ok(record)
    }

    /// How the run ended: [`RunEnd::Raced`] when the race stopped its folds,
    /// [`RunEnd::CutBySessionEnd`] when it ran into its session's end
    /// ([`UnitSpec::cut_by_deadline`] of its unit's spec), so that its cost is not its model's.
    fn how_the_run_ended(&self, record: &RunRecord) -> Result<RunEnd> {
        if record
            .validation
            .protocol
            .as_deref()
            .and_then(Protocol::parse)
            .is_some_and(|protocol| protocol.is_raced())
        {
            return Ok(RunEnd::Raced);
        }
        let (Some(started), Some(finished)) = (record.started_ms, record.finished_ms) else {
            return Ok(RunEnd::OnItsOwn);
        };
        let Some(unit) = self.store.unit_of_run(record.id)? else {
            return Ok(RunEnd::OnItsOwn);
        };
        let cut = UnitSpec::from_json(&unit.spec)
            .is_ok_and(|spec| spec.cut_by_deadline(started, finished));
        Ok(if cut {
            RunEnd::CutBySessionEnd
        } else {
            RunEnd::OnItsOwn
        })
    }

    /// Tells the scheduler a decision's quality and cost (seconds; a run cut by its session's end
    /// or stopped by the race calibrates nothing: [`Scheduler::report_cut`]), and announces the
    /// candidates that sets
    /// aside ([`Event::CandidatesSetAside`]).
    pub(super) fn report(
        &mut self,
        decision: &Decision,
        quality: f64,
        cost: f64,
        ended: RunEnd,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let before = self.scheduler.set_aside(&decision.user_id)?;
        match ended {
            RunEnd::CutBySessionEnd | RunEnd::Raced => {
                self.scheduler
                    .report_cut(decision, quality, cost.max(1e-3))?;
            }
            RunEnd::OnItsOwn => self.scheduler.report(decision, quality, cost.max(1e-3))?,
        }
        let after = self.scheduler.set_aside(&decision.user_id)?;
        announce_set_aside(&decision.user_id, &before, after, events);
        Ok(())
    }

    /// A committed run's event, and the quality the scheduler is told for it (see
    /// [`Engine::observe`]).
    fn announce(&mut self, run: RunId, events: &mut dyn FnMut(Event)) -> Result<(RunRecord, f64)> {
        let record = self.store.run(run)?;
        let app = self.app_name(record.app);
        let state = self.apps.get(&app);
        let limits = state
            .map(|state| state.model.constraint_limits())
            .unwrap_or_default();
        let cost = record.cost_seconds.unwrap_or(0.0);
        let reported = match (record.state, record.quality) {
            (RunState::Done, Some(quality)) => {
                // The ensemble of the runs so far, recomputed from their stored answers (no
                // training: DECISIONS.md), and the served model's expected quality; one that
                // cannot be computed is not served or reported.
                let _ = crate::ensemble::refresh(
                    &mut self.store,
                    record.app,
                    &limits,
                    self.config.ensembles,
                );
                let runs = self.store.runs(record.app)?;
                let best = best_run(&runs, &limits).is_some_and(|best| best.id == run);
                let broken: Vec<String> = broken_constraints(&record, &limits)
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                events(Event::RunFinished {
                    app: app.clone(),
                    candidate: record.candidate.clone(),
                    run,
                    number: record.number,
                    quality,
                    quality_std: record.validation.quality_std,
                    protocol: record.validation.protocol.clone().unwrap_or_default(),
                    cost_seconds: cost,
                    infer_latency_seconds: record.infer_latency_seconds.unwrap_or(0.0),
                    broken_constraints: broken.clone(),
                    best,
                });
                let validated = match (record.validation.validated_examples, state) {
                    (Some(count), _) => count as usize,
                    (None, Some(state)) => self.validated_examples(state),
                    (None, None) => 0,
                };
                // A model that breaks a constraint is worth nothing to its user: it is never
                // served.
                if broken.is_empty() {
                    scheduler_quality(quality, validated)
                } else {
                    0.0
                }
            }
            _ => {
                events(Event::RunFailed {
                    app: app.clone(),
                    candidate: record.candidate.clone(),
                    run,
                    number: record.number,
                    reason: record.error.clone().unwrap_or_default(),
                });
                0.0
            }
        };
        Ok((record, reported))
    }

    /// How many examples validate a run of the app on its current data.
    fn validated_examples(&self, state: &AppState) -> usize {
        let budget = self.budget(state, None);
        Validation::choose(&state.examples, &budget).validated(&state.examples)
    }
}

/// How often a coordinator looks at the store for commits and workers.
const COORDINATOR_POLL: Duration = Duration::from_millis(100);

/// A unit the engine waits for.
#[derive(Debug)]
struct InFlight {
    /// The scheduler's decision it answers (`None`: a unit of data that changed since).
    decision: Option<Decision>,
    /// The last attempt a start was reported for.
    seen_attempt: u32,
    /// Its run.
    run: RunId,
    /// The run's number within its app (for the events of a run that is gone).
    number: u64,
}

/// A decision trained by model hopping: its MOP runs, one per learning rate.
#[derive(Debug)]
struct MopFlight {
    /// The scheduler's decision it answers (`None`: runs of data that changed since).
    decision: Option<Decision>,
    /// Its app's name.
    app: String,
    /// Its candidate.
    candidate: String,
    /// Its runs still training.
    open: BTreeMap<RunId, OpenMopRun>,
    /// The best quality for the scheduler among its ended runs.
    best: f64,
    /// The summed cost of its ended runs, in seconds.
    cost: f64,
}

/// A MOP run still training, as its coordinator follows it.
#[derive(Debug)]
struct OpenMopRun {
    /// The workers' places it holds: 1 when it hops, its gang size when data-parallel.
    places: usize,
    /// The sub-epochs committed when progress was last reported.
    committed: usize,
    /// Its validation rows and evaluated epochs (early stopping).
    progress: mop::MopProgress,
}

impl OpenMopRun {
    /// A run over `partitions` partitions, data-parallel (`gang`) or hopping, its gangs counting
    /// workers heard from within `silence` as live.
    fn holding(partitions: u64, gang: bool, silence: Duration) -> OpenMopRun {
        OpenMopRun {
            places: if gang { partitions as usize } else { 1 },
            committed: 0,
            progress: mop::MopProgress::with_worker_silence(silence),
        }
    }
}

/// [`Event::CandidatesSetAside`] for the candidates of `app` set aside by a report (in `after`, not
/// in `before`), one event per kin.
fn announce_set_aside(
    app: &str,
    before: &[SetAside],
    after: Vec<SetAside>,
    events: &mut dyn FnMut(Event),
) {
    let mut by_kin: BTreeMap<String, Event> = BTreeMap::new();
    for new in after.into_iter().filter(|s| !before.contains(s)) {
        let entry = by_kin
            .entry(new.kin.clone())
            .or_insert_with(|| Event::CandidatesSetAside {
                app: app.to_owned(),
                candidates: Vec::new(),
                kin: new.kin.clone(),
                kin_quality: new.kin_quality,
                best: new.best_model_id.clone(),
                best_quality: new.best_quality,
            });
        if let Event::CandidatesSetAside { candidates, .. } = entry {
            candidates.push(new.model_id);
        }
    }
    by_kin.into_values().for_each(events);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20: the engine decides with the replay's `default` policy (one definition,
    /// `SchedulerConfig::default`), its costs calibrated since they start as estimates.
    #[test]
    fn the_engine_decides_with_the_schedulers_default() {
        let engine = EngineConfig::for_device(Device::Cpu).scheduler;
        assert_eq!(
            engine,
            SchedulerConfig {
                calibrate_costs: true,
                ..SchedulerConfig::default()
            }
        );
        assert!(engine.amplitude_prior_strength.is_some());
        assert_eq!(
            engine.amplitude_rule,
            easeml_scheduler::AmplitudeRule::ByLevelTest
        );
    }

    /// The engine's scheduler over the trainer's kin sets aside the recurrent networks of a series
    /// app whose first two are at chance while MiniRocket is far ahead, and says so once, in words.
    #[test]
    fn candidates_set_aside_are_announced_once_per_kin() {
        let kernel =
            KernelModel::without_history(KernelKind::Matern52, KernelHyperparameters::default())
                .with_kin(easeml_trainer::kin_by_model());
        let mut scheduler = Scheduler::new(
            Arc::new(kernel),
            EngineConfig::for_device(Device::Cpu).scheduler,
        );
        let specs = [
            ("minirocket", 13.0),
            ("lstm", 56.0),
            ("gru", 50.0),
            ("rnn", 40.0),
        ]
        .map(|(model, cost)| CandidateSpec {
            model_id: model.to_owned(),
            expected_cost: cost,
        })
        .to_vec();
        scheduler.register_user("ecg", specs, &[]).unwrap();
        let decision = |model: &str| Decision {
            user_id: "ecg".to_owned(),
            model_id: model.to_owned(),
            data_version: 0,
        };
        scheduler
            .report(&decision("minirocket"), 0.74, 13.0)
            .unwrap();
        scheduler.report(&decision("lstm"), 0.04, 56.0).unwrap();
        let mut events = Vec::new();
        let before = scheduler.set_aside("ecg").unwrap();
        assert!(before.is_empty(), "{before:?}");
        scheduler.report(&decision("gru"), 0.06, 50.0).unwrap();
        let after = scheduler.set_aside("ecg").unwrap();
        announce_set_aside("ecg", &before, after.clone(), &mut |e| events.push(e));
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(
            events[0].to_string(),
            "ecg: set aside on this data: rnn (recurrent models reached 0.060, 0.680 below \
             minirocket's 0.740, and would cost more than it)"
        );
        // Asked again with nothing new, it says nothing.
        events.clear();
        announce_set_aside("ecg", &after, after.clone(), &mut |e| events.push(e));
        assert!(events.is_empty());
        assert!(scheduler.is_finished("ecg").unwrap());
    }

    #[test]
    fn a_perfect_score_on_few_examples_is_capped_by_the_rule_of_succession() {
        assert_eq!(scheduler_quality(1.0, 13), 14.0 / 15.0);
        assert_eq!(scheduler_quality(0.5, 13), 0.5);
        assert!((scheduler_quality(1.0, 1000) - 1001.0 / 1002.0).abs() < 1e-15);
        assert_eq!(scheduler_quality(0.0, 0), 0.0);
    }

    /// Two apps, each with one run: `tiny` scored 1.0 on 13 examples, `big` 0.7. Told 1.0, the
    /// scheduler sees nothing left to gain for `tiny` (line 8's potential, the largest upper bound
    /// clipped to 1 minus the best quality, is 0), so Greedy serves it only when no other app has
    /// anything to gain; told the capped quality, `tiny` keeps a potential.
    #[test]
    fn an_app_with_a_perfect_score_on_few_examples_keeps_something_to_gain() {
        let potential_of_tiny = |reported: f64| {
            let kernel = Arc::new(KernelModel::without_history(
                KernelKind::Matern52,
                KernelHyperparameters::default(),
            ));
            let mut scheduler =
                Scheduler::new(kernel, EngineConfig::for_device(Device::Cpu).scheduler);
            let candidates = || {
                ["mlp_small", "mlp_large", "logistic"]
                    .into_iter()
                    .map(CandidateSpec::new)
                    .collect::<Vec<_>>()
            };
            scheduler.register_user("tiny", candidates(), &[]).unwrap();
            scheduler.register_user("big", candidates(), &[]).unwrap();
            for _ in 0..2 {
                let decision = scheduler.next_decision().unwrap();
                let quality = if decision.user_id == "tiny" {
                    reported
                } else {
                    0.7
                };
                scheduler.report(&decision, quality, 1.0).unwrap();
            }
            let summaries = scheduler.user_summaries();
            let (_, tiny) = summaries.iter().find(|(user, _)| user == "tiny").unwrap();
            tiny.largest_upper_confidence_bound - tiny.best_quality.unwrap()
        };
        assert_eq!(potential_of_tiny(1.0), 0.0);
        let capped = potential_of_tiny(scheduler_quality(1.0, 13));
        assert!(capped > 0.01, "{capped}");
    }
}
