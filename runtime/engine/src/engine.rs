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
    Scheduler, SchedulerConfig,
};
use easeml_store::{
    AppId, Lease, PageRequest, RunId, RunRecord, RunState, Store, StoredOutput, UnitId, UnitKind,
    UnitState, best_run, broken_constraints, now_ms,
};
use easeml_trainer::{
    Budget, Candidate, Examples, ModelKind, Task, Tuning, Validation, estimate_cost,
};
use tch::Device;

use crate::app::AppModel;
use crate::dataset::{StoredTarget, examples_of};
use crate::error::{Error, Result};
use crate::mop::{self, MopChoice, MopPlan, MopStatus, Parallelism, Training};
use crate::unit::{Executed, UnitSpec};
use crate::worker::{DEFAULT_LEASE_TTL, Worker, WorkerConfig};

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
    /// A run started.
    RunStarted {
        /// The app.
        app: String,
        /// The candidate id.
        candidate: String,
        /// The run.
        run: RunId,
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

    /// Brings the scheduler up to date with the store's apps (see the module documentation).
    pub fn sync(&mut self, events: &mut dyn FnMut(Event)) -> Result<()> {
        let apps = self.store.apps()?;
        let names: Vec<String> = apps.iter().map(|app| app.name.clone()).collect();
        let gone: Vec<String> = self
            .apps
            .keys()
            .filter(|name| !names.contains(name))
            .cloned()
            .collect();
        for name in gone {
            self.apps.remove(&name);
            self.forget_user(&name)?;
        }
        for app in apps {
            let known_version = self.apps.get(&app.name).map(|state| state.data_version);
            if known_version == Some(app.data_version)
                || self.skipped.get(&app.name) == Some(&app.data_version)
            {
                continue;
            }
            match self.prepare(&app) {
                Ok(Some(state)) => {
                    let candidates = self.candidate_specs(&app.name, &state, events);
                    let history = self.prior_history(&state)?;
                    if known_version.is_some() {
                        self.forget_user(&app.name)?;
                        events(Event::DataChanged {
                            app: app.name.clone(),
                            data_version: app.data_version,
                        });
                    } else {
                        events(Event::AppRegistered {
                            app: app.name.clone(),
                            candidates: candidates.len(),
                        });
                    }
                    self.scheduler
                        .register_user(&app.name, candidates, &history)?;
                    self.skipped.remove(&app.name);
                    self.apps.insert(app.name.clone(), state);
                }
                Ok(None) => {
                    // Too few examples for now: say so once, look again when the data changes.
                    if self.apps.remove(&app.name).is_some() {
                        self.forget_user(&app.name)?;
                    }
                    self.skipped.insert(app.name.clone(), app.data_version);
                    let (_, enabled) = self.store.example_counts(app.id)?;
                    events(Event::AppSkipped {
                        app: app.name.clone(),
                        reason: format!(
                            "{enabled} enabled example(s); training starts at {MIN_EXAMPLES} (feed more, or enable some with `refine`)"
                        ),
                    });
                }
                Err(error) => {
                    if self.apps.remove(&app.name).is_some() {
                        self.forget_user(&app.name)?;
                    }
                    self.skipped.insert(app.name.clone(), app.data_version);
                    events(Event::AppSkipped {
                        app: app.name.clone(),
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Takes an app out of the scheduler (removed, its data changed, or left out), with the
    /// decisions in flight for it: a unit or MOP run decided for its old registration still
    /// commits to the store, but it is not reported to the new one (it trained on other data; the
    /// candidate is eligible again on the new data, as a feed promises).
    fn forget_user(&mut self, name: &str) -> Result<()> {
        self.scheduler.remove_user(name)?;
        let of_app = |decision: &Option<Decision>| {
            decision
                .as_ref()
                .is_some_and(|decision| decision.user_id == name)
        };
        for entry in self.in_flight.values_mut() {
            if of_app(&entry.decision) {
                entry.decision = None;
            }
        }
        for flight in &mut self.mop_flights {
            if of_app(&flight.decision) {
                flight.decision = None;
            }
        }
        Ok(())
    }

    /// Reads an app's manifest and enabled examples; `None` when it has too few examples.
    fn prepare(&self, app: &easeml_store::App) -> Result<Option<AppState>> {
        let model = AppModel::from_manifest(&app.name, &app.manifest)?;
        let Some(examples) = load_examples(&self.store, app.id, &model)? else {
            return Ok(None);
        };
        Ok(Some(AppState {
            id: app.id,
            model: Arc::new(model),
            data_version: app.data_version,
            examples: Arc::new(examples),
        }))
    }

    /// The app's candidates that fit its data, with their estimated costs; each one left out is
    /// reported with its reason.
    fn candidate_specs(
        &self,
        app: &str,
        state: &AppState,
        events: &mut dyn FnMut(Event),
    ) -> Vec<CandidateSpec> {
        let budget = self.budget(state, None);
        // One estimate per model: a candidate's `+norm_kK` rescales its inputs and costs the
        // same (an estimate runs the network on a sample: seconds for 38 candidates of 256x256
        // images, which came out of the first run's time).
        let mut by_model: HashMap<ModelKind, std::result::Result<f64, String>> = HashMap::new();
        state
            .model
            .candidates
            .iter()
            .filter_map(|id| {
                let estimate = Candidate::parse(id)
                    .and_then(|candidate| {
                        candidate.check_fits(&Task::of(&state.examples)?)?;
                        Ok(candidate)
                    })
                    .map_err(|error| error.to_string())
                    .and_then(|candidate| {
                        by_model
                            .entry(candidate.model)
                            .or_insert_with(|| {
                                estimate_cost(
                                    &Candidate::new(candidate.model),
                                    &state.examples,
                                    &budget,
                                )
                                .map(|estimate| estimate.seconds)
                                .map_err(|error| error.to_string())
                            })
                            .clone()
                    });
                match estimate {
                    Ok(seconds) => Some(CandidateSpec {
                        model_id: id.clone(),
                        expected_cost: seconds.max(1e-3),
                    }),
                    Err(reason) => {
                        events(Event::CandidateLeftOut {
                            app: app.to_owned(),
                            candidate: id.clone(),
                            reason,
                        });
                        None
                    }
                }
            })
            .collect()
    }

    /// The app's finished runs on its current data, as the scheduler's prior history, one
    /// observation per candidate as the scheduler was told it: the best quality of its runs (a
    /// decision trained by hopping has one run per learning rate), as [`scheduler_quality`]
    /// reports it (the current data's protocol says how many examples validated them), and their
    /// summed cost.
    fn prior_history(&self, state: &AppState) -> Result<Vec<PriorObservation>> {
        let budget = self.budget(state, None);
        let validated = Validation::choose(&state.examples, &budget).validated(&state.examples);
        let mut by_candidate: BTreeMap<String, PriorObservation> = BTreeMap::new();
        for run in self.store.runs(state.id)? {
            if run.data_version != state.data_version
                || !matches!(run.state, RunState::Done | RunState::Failed)
                || !state.model.candidates.contains(&run.candidate)
            {
                continue;
            }
            let quality = scheduler_quality(run.quality.unwrap_or(0.0), validated);
            let cost = run.cost_seconds.unwrap_or(1.0).max(1e-3);
            by_candidate
                .entry(run.candidate.clone())
                .and_modify(|seen| {
                    seen.quality = seen.quality.max(quality);
                    seen.cost += cost;
                })
                .or_insert(PriorObservation {
                    model_id: run.candidate,
                    quality,
                    cost,
                });
        }
        Ok(by_candidate.into_values().collect())
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
        }
    }

    /// The budget of one run of the app (its unit's, on the engine's device).
    fn budget(&self, state: &AppState, deadline: Option<Instant>) -> Budget {
        self.unit_spec(state, deadline).budget(self.config.device)
    }

    /// Runs one training run on the engine's in-process worker: a unit left queued (or whose
    /// lease expired) first, else the scheduler's choice. `Ok(None)` when nothing is left to train.
    pub fn step(
        &mut self,
        deadline: Option<Instant>,
        events: &mut dyn FnMut(Event),
    ) -> Result<Option<Step>> {
        self.sync(events)?;
        self.give_queued_runs_units()?;
        if self.worker.is_none() {
            let mut worker_config = WorkerConfig::for_device(self.config.device);
            worker_config.lease_ttl = self.config.lease_ttl;
            self.worker = Some(Worker::register(
                &mut self.store,
                easeml_store::IN_PROCESS_ROLE,
                worker_config,
            )?);
        }
        let Some(worker) = self.worker.as_mut() else {
            return Ok(None);
        };
        let owner = worker.id().to_owned();
        let lease = match self.store.lease_run_unit(&owner, self.config.lease_ttl)? {
            Some(lease) => Some(lease),
            None => match self.scheduler.next_decision() {
                None => None,
                Some(decision) => {
                    let state = &self.apps[&decision.user_id];
                    let spec = self.unit_spec(state, deadline).to_json();
                    let (run, unit) = self.store.queue_unit(state.id, &decision.model_id, &spec)?;
                    let lease = self
                        .store
                        .lease_unit_by_id(unit, &owner, self.config.lease_ttl)?;
                    if lease.is_none() {
                        // A worker of another process took it first: it is reported when it
                        // commits, as the coordinator reports its workers' units.
                        self.in_flight.insert(
                            unit,
                            InFlight {
                                decision: Some(decision),
                                seen_attempt: 0,
                                run,
                            },
                        );
                    }
                    lease
                }
            },
        };
        let Some(lease) = lease else {
            // Nothing to lease or decide: only units held elsewhere may be left.
            return self.wait_for_in_flight(events);
        };
        let decision = self.decision_for(&lease);
        events(Event::RunStarted {
            app: self.app_name(lease.app),
            candidate: lease.candidate.clone(),
            run: lease.run,
            max_seconds: self.max_seconds(&lease.spec),
        });
        if let Some(state) = self.apps.values().find(|state| state.id == lease.app)
            && let Some(worker) = self.worker.as_mut()
        {
            worker.cache().insert(
                state.id,
                state.data_version,
                Arc::clone(&state.model),
                Arc::clone(&state.examples),
            );
        }
        let Some(worker) = self.worker.as_mut() else {
            return Ok(None);
        };
        if let Executed::Dropped(reason) = worker.work(&mut self.store, &lease)? {
            // The candidate stays in flight for the scheduler: this session has no time for it.
            events(Event::RunDropped {
                app: self.app_name(lease.app),
                candidate: lease.candidate,
                run: lease.run,
                reason,
            });
            return Ok(Some(Step::Dropped(lease.run)));
        }
        self.observe(lease.run, decision.as_ref(), events)
            .map(|record| Some(Step::Run(Box::new(record))))
    }

    /// The seconds a unit's run may take, for its `RunStarted` event: 0 for a spec that cannot be
    /// read (the worker commits such a unit as failed, saying why; the engine never stops on it).
    fn max_seconds(&self, spec: &str) -> f64 {
        UnitSpec::from_json(spec)
            .map(|spec| spec.budget(self.config.device).max_seconds)
            .unwrap_or(0.0)
    }

    /// Waits for a unit held by another process's worker and reports it; `Ok(None)` when there is
    /// none.
    fn wait_for_in_flight(&mut self, events: &mut dyn FnMut(Event)) -> Result<Option<Step>> {
        loop {
            let Some((&unit, _)) = self.in_flight.iter().next() else {
                return Ok(None);
            };
            let record = self.store.unit(unit);
            match record {
                Ok(record) if record.state == UnitState::Committed => {
                    let decision = self
                        .in_flight
                        .remove(&unit)
                        .and_then(|entry| entry.decision);
                    return self
                        .observe(record.run, decision.as_ref(), events)
                        .map(|record| Some(Step::Run(Box::new(record))));
                }
                Ok(_) => std::thread::sleep(COORDINATOR_POLL),
                Err(_) => {
                    // Gone with its app.
                    self.in_flight.remove(&unit);
                }
            }
        }
    }

    /// Gives each queued run that has no work unit (one queued by a store client, or before units
    /// existed) its unit, so that a worker runs it. A queued run of data that changed since is
    /// failed (its data is gone); one of an app left out for now waits.
    fn give_queued_runs_units(&mut self) -> Result<()> {
        for run in self.store.queued_runs_without_unit()? {
            let record = self.store.run(run)?;
            let state = self.apps.values().find(|state| state.id == record.app);
            let Some(state) = state else {
                // An app left out (too few examples, a broken manifest): its run waits.
                continue;
            };
            if record.data_version != state.data_version
                || !state.model.candidates.contains(&record.candidate)
            {
                self.store.fail_run(
                    run,
                    "interrupted, and the app's data changed before it could be re-run",
                    None,
                )?;
                continue;
            }
            let spec = self.unit_spec(state, None).to_json();
            self.store.queue_unit_for_run(run, &spec)?;
        }
        Ok(())
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
            self.scheduler.report(decision, reported, cost.max(1e-3))?;
        }
        Ok(record)
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

    /// Trains until `budget` has passed (a run never starts with less than a second left) or nothing
    /// is left to train: on the in-process worker, or, with [`EngineConfig::coordinate`], by
    /// coordinating the store's workers ([`Engine::coordinate`]). The budget is training time: it
    /// starts once the store's apps are loaded (their examples read, their candidates' costs
    /// estimated), so a first run never finds it spent on loading.
    pub fn train(
        &mut self,
        budget: Option<Duration>,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        if self.config.coordinate {
            return self.coordinate(budget, events);
        }
        self.sync(events)?;
        let deadline = budget.map(|budget| Instant::now() + budget);
        let mut summary = TrainSummary::default();
        loop {
            if deadline.is_some_and(|deadline| {
                deadline.saturating_duration_since(Instant::now()) < Duration::from_secs(1)
            }) {
                return Ok(summary);
            }
            match self.step(deadline, events)? {
                Some(Step::Run(run)) if run.state == RunState::Done => summary.finished += 1,
                Some(Step::Run(_)) => summary.failed += 1,
                Some(Step::Dropped(_)) => summary.dropped += 1,
                None => {
                    summary.exhausted = true;
                    return Ok(summary);
                }
            }
        }
    }

    /// Coordinates the workers of the store (in other processes, on other hosts) until `budget`
    /// has passed or nothing is left to train: each decision becomes a queued unit while live
    /// workers outnumber the units in flight; committed units are reported to the scheduler as
    /// they come. Units that no worker took by the deadline are cancelled; leased ones are waited
    /// for (their time limit ends by the deadline). A unit lost with its worker is leased again by
    /// another and reported when it commits.
    pub fn coordinate(
        &mut self,
        budget: Option<Duration>,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        self.coordinate_until(budget, &AtomicBool::new(false), events)
    }

    /// [`Engine::coordinate`] that also ends, as at its deadline, once `stop` is set (a server
    /// shutting down): nothing new starts, units no worker took are cancelled, leased ones are
    /// waited for.
    pub fn coordinate_until(
        &mut self,
        budget: Option<Duration>,
        stop: &AtomicBool,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        // As in `train`, the budget starts once the apps are loaded.
        self.sync(events)?;
        self.adopt_mop_runs(events)?;
        let deadline = budget.map(|budget| Instant::now() + budget);
        let mut summary = TrainSummary::default();
        let mut live_before = usize::MAX;
        let mut decided_everything = false;
        loop {
            self.sync(events)?;
            self.give_queued_runs_units()?;
            self.adopt_open_units()?;
            if self.advance_mop_runs(&mut summary, events)? {
                decided_everything = false;
            }
            // Commits and starts since the last look.
            let units: Vec<UnitId> = self.in_flight.keys().copied().collect();
            for unit in units {
                let record = match self.store.unit(unit) {
                    Ok(record) => record,
                    Err(easeml_store::Error::NoSuchUnit(_)) => {
                        // Gone with its app, or dropped by its worker because the session's end
                        // cut it before it had a model (its candidate stays in flight: this
                        // session has no time for it).
                        if let Some(InFlight {
                            decision: Some(decision),
                            run,
                            ..
                        }) = self.in_flight.remove(&unit)
                            && self.apps.contains_key(&decision.user_id)
                        {
                            events(Event::RunDropped {
                                app: decision.user_id,
                                candidate: decision.model_id,
                                run,
                                reason: "the session ended before it had a model".to_owned(),
                            });
                            summary.dropped += 1;
                        }
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                };
                if record.state == UnitState::Committed {
                    let decision = self
                        .in_flight
                        .remove(&unit)
                        .and_then(|entry| entry.decision);
                    let run = self.observe(record.run, decision.as_ref(), events)?;
                    if run.state == RunState::Done {
                        summary.finished += 1;
                    } else {
                        summary.failed += 1;
                    }
                    decided_everything = false;
                    continue;
                }
                let Some(entry) = self.in_flight.get_mut(&unit) else {
                    continue;
                };
                if record.state == UnitState::Leased && record.attempt > entry.seen_attempt {
                    entry.seen_attempt = record.attempt;
                    events(Event::RunStarted {
                        app: self.app_name(record.app),
                        candidate: record.candidate.clone(),
                        run: record.run,
                        max_seconds: self.max_seconds(&record.spec),
                    });
                }
            }
            let ending = stop.load(Ordering::SeqCst)
                || deadline.is_some_and(|deadline| {
                    deadline.saturating_duration_since(Instant::now()) < Duration::from_secs(1)
                });
            if ending {
                // Nothing new starts: units no worker took are cancelled, leased ones waited for.
                let queued: Vec<UnitId> = self.in_flight.keys().copied().collect();
                for unit in queued {
                    if self.store.cancel_queued_unit(unit)?
                        && let Some(decision) = self
                            .in_flight
                            .remove(&unit)
                            .and_then(|entry| entry.decision)
                    {
                        self.scheduler.cancel(&decision)?;
                    }
                }
                summary.unfinished += self.leave_mop_runs_open()?;
                if self.in_flight.is_empty() {
                    return Ok(summary);
                }
                std::thread::sleep(COORDINATOR_POLL);
                continue;
            }
            let live_ids = self.live_worker_ids()?;
            let live = live_ids.len();
            if live != live_before {
                events(Event::WorkersChanged { live });
                live_before = live;
            }
            // A unit or a hopping run trains on one worker at a time: each holds one worker's
            // place; a data-parallel run holds one per rank.
            while live > self.in_flight.len() + self.mop_places() {
                let Some(decision) = self.scheduler.next_decision() else {
                    decided_everything = true;
                    break;
                };
                if self.start_mop_run(&decision, &live_ids, events)? {
                    continue;
                }
                let state = &self.apps[&decision.user_id];
                let spec = self.unit_spec(state, deadline).to_json();
                let (run, unit) = self.store.queue_unit(state.id, &decision.model_id, &spec)?;
                self.in_flight.insert(
                    unit,
                    InFlight {
                        decision: Some(decision),
                        seen_attempt: 0,
                        run,
                    },
                );
            }
            if decided_everything && self.in_flight.is_empty() && self.mop_flights.is_empty() {
                summary.exhausted = true;
                return Ok(summary);
            }
            std::thread::sleep(COORDINATOR_POLL);
        }
    }

    /// Takes over the open units this engine did not queue (a previous coordinator's, or runs
    /// queued by store clients): their candidates are in flight for the scheduler, and they are
    /// reported when they commit.
    fn adopt_open_units(&mut self) -> Result<()> {
        for unit in self.store.open_units()? {
            // A MOP run's sub-epochs are its MOP coordinator's (`crate::mop`).
            if self.in_flight.contains_key(&unit.id) || unit.kind != UnitKind::Run {
                continue;
            }
            let lease_like = Lease {
                unit: unit.id,
                run: unit.run,
                app: unit.app,
                candidate: unit.candidate.clone(),
                data_version: self.store.run(unit.run)?.data_version,
                attempt: unit.attempt,
                owner: String::new(),
                spec: unit.spec.clone(),
                sub_epoch: None,
            };
            let decision = self.decision_for(&lease_like);
            if let Some(decision) = &decision {
                self.scheduler.mark_in_flight(decision)?;
            }
            self.in_flight.insert(
                unit.id,
                InFlight {
                    decision,
                    seen_attempt: 0,
                    run: unit.run,
                },
            );
        }
        Ok(())
    }

    /// The store's live workers: registered, not stopped, heard from within two lease lifetimes
    /// (the engine's own in-process worker is not counted: it does not lease while the engine
    /// coordinates).
    pub fn live_workers(&self) -> Result<usize> {
        Ok(self.live_worker_ids()?.len())
    }

    /// How long a worker may be silent and still count as live: twice a lease's time to live.
    fn worker_silence(&self) -> Duration {
        self.config.lease_ttl.saturating_mul(2)
    }

    /// The ids of [`Engine::live_workers`], in the store's order (a MOP run's partition `j` goes
    /// to the `j`-th).
    fn live_worker_ids(&self) -> Result<Vec<String>> {
        crate::worker::live_worker_ids(&self.store, self.worker_silence())
    }

    /// Starts the decision as MOP runs over `workers`, one per learning rate of
    /// [`EngineConfig::mop_learning_rates`] (Cerebro's configurations, hopping independently, or
    /// each data-parallel over all the workers), when [`mop::choose_training`] says so. `false` when it is not one, or when the app's data cannot be
    /// cut into that many partitions with training rows in each (it then trains as a whole run,
    /// which needs no cut).
    fn start_mop_run(
        &mut self,
        decision: &Decision,
        workers: &[String],
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let Some(state) = self.apps.get(&decision.user_id) else {
            return Ok(false);
        };
        let (app, data_version) = (state.id, state.data_version);
        let data_bytes = state.examples.bytes();
        let rates = self.config.mop_learning_rates.len().max(1);
        let mut choice = MopChoice {
            candidate: &decision.model_id,
            workers: workers.len(),
            data_bytes,
            // The most the app could have open: whether a decision trains whole does not depend
            // on it, so a decision that trains whole even so needs no read of the app's runs.
            open_models: usize::MAX,
        };
        let training = |choice: &MopChoice<'_>| {
            mop::choose_training(self.config.parallelism, choice, self.config.mop_above_bytes)
        };
        if training(&choice) == Training::Whole {
            return Ok(false);
        }
        let hoppable: Vec<String> = state
            .model
            .candidates
            .iter()
            .filter(|candidate| mop::can_hop(candidate))
            .cloned()
            .collect();
        let finished: std::collections::HashSet<String> = self
            .store
            .runs(app)?
            .into_iter()
            .filter(|run| run.data_version == data_version)
            .filter(|run| matches!(run.state, RunState::Done | RunState::Failed))
            .map(|run| run.candidate)
            .collect();
        choice.open_models = rates
            * hoppable
                .iter()
                .filter(|candidate| !finished.contains(*candidate))
                .count();
        let gang = match training(&choice) {
            Training::Whole => return Ok(false),
            Training::Hop => false,
            Training::Gang => true,
        };
        // A whole run's time limit (at most 0.9 x `train_time`), spent across the workers.
        let max_seconds = self.unit_spec(state, None).max_seconds;
        let seed = mop::run_seed(self.config.seed, &decision.user_id, &decision.model_id);
        let mut flight = MopFlight {
            decision: Some(decision.clone()),
            app: decision.user_id.clone(),
            candidate: decision.model_id.clone(),
            open: BTreeMap::new(),
            best: 0.0,
            cost: 0.0,
        };
        let plans: Vec<MopPlan> = self
            .config
            .mop_learning_rates
            .iter()
            .enumerate()
            .map(|(index, &rate)| {
                let mut plan = MopPlan::new(workers.len() as u64, self.config.mop_epochs);
                plan.learning_rate = rate;
                plan.seed = seed.wrapping_add(index as u64);
                plan.patience = self.config.mop_patience;
                plan.max_seconds = Some(max_seconds);
                plan.gang = gang;
                plan
            })
            .collect();
        let runs = match mop::start_runs(&mut self.store, app, &decision.model_id, &plans, workers)
        {
            Ok(runs) => runs,
            Err(Error::Store(error)) => return Err(error.into()),
            // Every plan is checked before any run is queued: none was.
            Err(_) => return Ok(false),
        };
        for (run, plan) in runs.into_iter().zip(&plans) {
            events(Event::MopRunStarted {
                app: decision.user_id.clone(),
                candidate: decision.model_id.clone(),
                run,
                learning_rate: plan.learning_rate,
                partitions: plan.partitions,
                epochs: plan.epochs,
                resumed: false,
                data_parallel: gang,
            });
            let silence = self.worker_silence();
            flight
                .open
                .insert(run, OpenMopRun::holding(plan.partitions, gang, silence));
        }
        if flight.open.is_empty() {
            return Ok(false);
        }
        self.mop_flights.push(flight);
        Ok(true)
    }

    /// The workers' places the MOP runs in flight hold: one per hopping run, one per rank of a
    /// data-parallel run.
    fn mop_places(&self) -> usize {
        self.mop_flights
            .iter()
            .flat_map(|flight| flight.open.values())
            .map(|run| run.places)
            .sum()
    }

    /// Takes over the MOP runs a previous session left open (queued or running, with sub-epoch
    /// units): the open runs of one candidate on one data version are one decision in flight
    /// for the scheduler, advanced and reported like the ones this session starts.
    fn adopt_mop_runs(&mut self, events: &mut dyn FnMut(Event)) -> Result<()> {
        let known: std::collections::HashSet<RunId> = self
            .mop_flights
            .iter()
            .flat_map(|flight| flight.open.keys().copied())
            .collect();
        for app in self.store.apps()? {
            let mut groups: BTreeMap<(String, u64), Vec<RunId>> = BTreeMap::new();
            let mut places: BTreeMap<RunId, OpenMopRun> = BTreeMap::new();
            for run in self.store.runs(app.id)? {
                if !matches!(run.state, RunState::Queued | RunState::Running)
                    || known.contains(&run.id)
                {
                    continue;
                }
                let Some(shape) = mop::mop_shape(&self.store, run.id)? else {
                    continue;
                };
                places.insert(
                    run.id,
                    OpenMopRun::holding(shape.partitions, shape.gang, self.worker_silence()),
                );
                events(Event::MopRunStarted {
                    app: app.name.clone(),
                    candidate: run.candidate.clone(),
                    run: run.id,
                    learning_rate: shape.learning_rate,
                    partitions: shape.partitions,
                    epochs: shape.epochs,
                    resumed: true,
                    data_parallel: shape.gang,
                });
                groups
                    .entry((run.candidate, run.data_version))
                    .or_default()
                    .push(run.id);
            }
            for ((candidate, data_version), runs) in groups {
                let decision = self.decision_for_run(app.id, data_version, &candidate);
                if let Some(decision) = &decision {
                    self.scheduler.mark_in_flight(decision)?;
                }
                self.mop_flights.push(MopFlight {
                    decision,
                    app: app.name.clone(),
                    candidate,
                    open: runs
                        .into_iter()
                        .filter_map(|run| places.remove(&run).map(|open| (run, open)))
                        .collect(),
                    best: 0.0,
                    cost: 0.0,
                });
            }
        }
        Ok(())
    }

    /// One step of each open MOP run ([`mop::advance`]): progress events; a done or failed run's
    /// event; and a decision whose last run ended reported to the scheduler with the best of its
    /// runs' qualities and the sum of their costs. A run whose coordinator step fails for a
    /// reason of its own (not the store's) fails, saying why. True when a decision ended.
    fn advance_mop_runs(
        &mut self,
        summary: &mut TrainSummary,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let mut ended = false;
        let mut flights = std::mem::take(&mut self.mop_flights);
        let outcome = (|| -> Result<()> {
            for flight in &mut flights {
                let runs: Vec<RunId> = flight.open.keys().copied().collect();
                for run in runs {
                    let Some(entry) = flight.open.get_mut(&run) else {
                        continue;
                    };
                    let status = match mop::advance_with(&mut self.store, run, &mut entry.progress)
                    {
                        Ok(status) => status,
                        Err(Error::Store(easeml_store::Error::NoSuchRun(_))) => {
                            // Gone with its app.
                            flight.open.remove(&run);
                            continue;
                        }
                        Err(Error::Store(error)) => return Err(error.into()),
                        Err(error) => {
                            let reason = error.to_string();
                            mop::fail_run(&mut self.store, run, &reason)?;
                            MopStatus::Failed(reason)
                        }
                    };
                    match status {
                        MopStatus::Training {
                            committed,
                            total,
                            workers,
                        } => {
                            if let Some(entry) = flight.open.get_mut(&run) {
                                // A gang that turned into hops gives its other places back.
                                entry.places = workers;
                                if committed > entry.committed {
                                    entry.committed = committed;
                                    events(Event::RunProgress {
                                        app: flight.app.clone(),
                                        candidate: flight.candidate.clone(),
                                        run,
                                        done: committed,
                                        total,
                                    });
                                }
                            }
                        }
                        MopStatus::Done(_) | MopStatus::Failed(_) => {
                            flight.open.remove(&run);
                            let (record, reported) = self.announce(run, events)?;
                            if record.state == RunState::Done {
                                summary.finished += 1;
                            } else {
                                summary.failed += 1;
                            }
                            flight.best = flight.best.max(reported);
                            flight.cost += record.cost_seconds.unwrap_or(0.0);
                        }
                    }
                }
            }
            Ok(())
        })();
        let mut reported = Ok(());
        for flight in flights {
            if !flight.open.is_empty() {
                self.mop_flights.push(flight);
                continue;
            }
            ended = true;
            if let Some(decision) = &flight.decision
                && let Err(error) =
                    self.scheduler
                        .report(decision, flight.best, flight.cost.max(1e-3))
            {
                reported = Err(error.into());
            }
        }
        outcome.and(reported).map(|()| ended)
    }

    /// At the session's end: the MOP runs stay open in the store (their units are leased by
    /// whichever workers are live, and the next coordinating session resumes them); their
    /// decisions are no longer in flight for this session's scheduler. Returns how many runs.
    fn leave_mop_runs_open(&mut self) -> Result<usize> {
        let flights = std::mem::take(&mut self.mop_flights);
        for flight in &flights {
            if let Some(decision) = &flight.decision {
                self.scheduler.cancel(decision)?;
            }
        }
        Ok(flights.iter().map(|flight| flight.open.len()).sum())
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

/// The scheduler's prior over models, fitted on the store's own history (appendix A): one row per app
/// (each candidate's best quality), over the candidates that at least two apps have finished, when at
/// least two apps have two or more of them, on the quality scale under which those rows are more
/// likely (`easeml_scheduler::choose_quality_scale`: log-odds or as they are). Otherwise (a fresh store, or apps whose workloads share no
/// model) the documented no-history prior: Matern-5/2 with [`KernelHyperparameters::default`] and
/// variants of one model correlated (`easeml_scheduler::kernel::FAMILY_CORRELATION`). Either way
/// [`Engine::open`] adds the models' kin (`ModelKind::kin`) for the models the history does not
/// relate.
fn kernel_from_history(store: &Store) -> Result<KernelModel> {
    let mut rows: Vec<BTreeMap<String, f64>> = Vec::new();
    for app in store.apps()? {
        let mut row = BTreeMap::new();
        for run in store.runs(app.id)? {
            if let (RunState::Done, Some(quality)) = (run.state, run.quality) {
                let entry = row.entry(run.candidate).or_insert(quality);
                *entry = f64::max(*entry, quality);
            }
        }
        rows.push(row);
    }
    let mut shared: BTreeMap<&str, usize> = BTreeMap::new();
    for row in &rows {
        for id in row.keys() {
            *shared.entry(id.as_str()).or_default() += 1;
        }
    }
    let model_ids: Vec<String> = shared
        .iter()
        .filter(|&(_, &count)| count >= 2)
        .map(|(id, _)| (*id).to_owned())
        .collect();
    let history_rows: Vec<Vec<Option<f64>>> = rows
        .iter()
        .map(|row| {
            model_ids
                .iter()
                .map(|id| row.get(id).copied())
                .collect::<Vec<_>>()
        })
        .filter(|row: &Vec<Option<f64>>| row.iter().flatten().count() >= 2)
        .collect();
    if history_rows.len() >= 2 {
        let history = easeml_scheduler::QualityHistory {
            model_ids,
            rows: history_rows,
        };
        let choice = easeml_scheduler::HyperparameterChoice::FitMarginalLikelihood;
        if let Ok(identity) = KernelModel::from_history(&history, KernelKind::Matern52, choice) {
            return Ok(
                match easeml_scheduler::choose_quality_scale(&history, &identity, choice) {
                    Ok(Some(logit)) => logit,
                    // No better scale, or the log-odds fit failed: the qualities as they are.
                    Ok(None) | Err(_) => identity,
                },
            );
        }
    }
    Ok(KernelModel::without_history(
        KernelKind::Matern52,
        KernelHyperparameters::default(),
    ))
}

/// An app's enabled examples as trainer examples; `None` when fewer than [`MIN_EXAMPLES`].
pub fn load_examples(store: &Store, app: AppId, model: &AppModel) -> Result<Option<Examples>> {
    load_examples_where(store, app, model, &|_| true, MIN_EXAMPLES)
}

/// The app's enabled examples whose ids `keep` accepts (the others are not read), in id order;
/// `None` when fewer than `min` (a MOP worker loads only its partition's training rows).
pub fn load_examples_where(
    store: &Store,
    app: AppId,
    model: &AppModel,
    keep: &dyn Fn(u64) -> bool,
    min: usize,
) -> Result<Option<Examples>> {
    let name = &model.schema.app;
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    let mut targets = Vec::new();
    let mut request = PageRequest {
        after: None,
        limit: 10_000,
    };
    loop {
        let page = store.examples(app, request)?;
        for record in page
            .items
            .iter()
            .filter(|record| record.enabled && keep(record.id.0 as u64))
        {
            let decode_error = |source| Error::Decode {
                app: name.clone(),
                id: record.id.0,
                source,
            };
            let input = codec::decode(&model.schema.input, &store.blob(&record.input)?)
                .map_err(decode_error)?;
            let target = match &record.output {
                StoredOutput::Label { index, .. } => StoredTarget::Class(*index),
                StoredOutput::Blob(hash) => StoredTarget::Object(
                    codec::decode(&model.schema.output, &store.blob(hash)?)
                        .map_err(decode_error)?,
                ),
            };
            ids.push(record.id.0 as u64);
            inputs.push(input);
            targets.push(target);
        }
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    if ids.len() < min.max(1) {
        return Ok(None);
    }
    Ok(Some(examples_of(model, ids, &inputs, &targets)?))
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
