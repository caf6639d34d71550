//! Cerebro's model hopper parallelism (MOP) over work units: a run of one model (a candidate with
//! fixed hyper-parameters) trained for a fixed number of epochs, each epoch one sub-epoch on each
//! of the data's partitions, the training state hopping between the workers that hold them.
//!
//! - [`start_run`] (the coordinator): splits the app's examples into training and validation rows
//!   by id (the trainer's rule), builds the run's initial state
//!   ([`easeml_trainer::mop::initial_state`]), puts it in the store and queues the run with every
//!   epoch's sub-epoch units ([`easeml_store::Store::queue_sub_epoch_run`]; the store leases an
//!   epoch's units only once the earlier epochs are committed, so no worker waits for the
//!   coordinator between epochs): partition `j` addressed to the `j`-th of the given workers
//!   (round robin), each unit a rank of its epoch first, then a random shuffle (Cerebro's, seeded by
//!   the run's seed, the epoch and the partition), so a run with the most epochs left goes first.
//! - [`execute_sub_epoch`] (any worker, from [`crate::worker::Worker::work`]): trains one leased
//!   sub-epoch from the state its lease names on the partition's training rows (which the
//!   worker loads from the store once and keeps, and nothing else of the app: [`PartitionCache`])
//!   and commits the next state with the lease's fencing token.
//! - [`advance`] (the coordinator, polled): reads the run's visit log from the store (and queues
//!   the next epoch's units if a run was queued with fewer); after the last epoch it
//!   evaluates the state each epoch ended with on the validation rows, serves the best (the
//!   trainer keeps its best epoch the same way), measures its latency and records the run like a
//!   task-parallel run (quality, checkpoint blob, cost = the sum of its sub-epochs' seconds).
//!   It keeps nothing between calls: a restarted coordinator resumes where the store is.
//! - [`replay`]: the run's visit log trained again, in order, in this thread: the check that a
//!   run trained by hopping equals sequential training.
//!
//! The store's lease rule is Algorithm 1 of the paper (see `easeml_store::units`): an idle worker
//! gets a queued unit of its partition whose model is not in flight elsewhere, the lowest rank
//! first: the earliest epoch, then at random (the paper draws uniformly; the epoch first is the
//! critical-path priority `easeml bench mop --simulate` measures as `mop_epoch_first`).
//!
//! Which runs hop (or gang) is the coordinator's choice per decision ([`choose_training`], under
//! [`Parallelism`]): the engine's coordinator ([`crate::Engine::coordinate`]) starts a decided
//! network's run here when the app's data copied to every worker would be large (hopping while
//! enough of the app's models are left to keep the workers busy, in gangs below that), advances
//! it, and reports it to the scheduler when it is done. A partition taken over from a gone worker stays with its new
//! holder ([`advance_with`] re-addresses its later sub-epochs). Below `p / 2` models the paper
//! trains one model on all workers at once: a run planned with [`MopPlan::gang`] is the same run
//! (the same state, partitions, coordinator and replay) whose every epoch is one gang of ranks
//! trained together ([`crate::gang`]), and [`choose_training`] picks it. A worker loads a partition from the store with its first unit of
//! it, not ahead (no idle time precedes that unit), and keeps it: [`PartitionCache`], which
//! holds only the training rows of the partitions the worker has trained.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use easeml_store::{
    AppId, BlobHash, Lease, NewSubEpoch, RunId, RunState, RunValidation, Store, SubEpochLease,
    SubEpochRecord, UnitResult, UnitState, format_seconds,
};
use easeml_trainer::data::{hashed_to_validation, split_by_id};
use easeml_trainer::hop::{SubEpoch, sub_epoch_seed};
use easeml_trainer::models::ModelConfig;
use easeml_trainer::mop::{
    MopSetup, SubEpochOutcome, checkpoint_of_state, evaluate_state, initial_state, partition_rows,
    train_sub_epoch,
};
use easeml_trainer::{EarlyStopping, Evaluation, Examples, Predictor, Task, measure_latency};
use serde::{Deserialize, Serialize};
use tch::Device;

mod finish;

use finish::finish;
pub use finish::{MopShape, fail_run, mop_shape, replay};

use crate::app::AppModel;
use crate::checkpoint_blob;
use crate::engine::{load_examples, load_examples_where};
use crate::error::{Error, Result};
use crate::unit::{Executed, LATENCY, executed};

/// Salt of the ranks' seeds (so they are not the sub-epochs' own seeds).
const RANK_SALT: u64 = 0x7261_6e6b;

/// How a coordinator shares an app's runs among its workers ([`crate::EngineConfig::parallelism`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// Task parallelism: every run is a whole-run unit, trained by one worker on all the app's
    /// data.
    Task,
    /// Model hopper parallelism for every network that can hop ([`can_hop`]) when two or more
    /// workers are live: its run is a MOP run over them. Other candidates train as whole runs.
    Mop,
    /// Data parallelism for every network that can hop when two or more workers are live: its
    /// run trains on all of them at once, each epoch a gang ([`crate::gang`]). Other candidates
    /// train as whole runs.
    Data,
    /// Per decision, by [`choose_training`]'s rule (the default).
    Auto,
}

impl Parallelism {
    /// The names `--parallelism` takes.
    pub const NAMES: &'static str = "auto, task, mop, data";

    /// The parallelism of a name in [`Parallelism::NAMES`].
    pub fn from_name(name: &str) -> Option<Parallelism> {
        match name {
            "auto" => Some(Parallelism::Auto),
            "task" => Some(Parallelism::Task),
            "mop" => Some(Parallelism::Mop),
            "data" => Some(Parallelism::Data),
            _ => None,
        }
    }
}

/// The most epochs a MOP run plans: it queues every epoch's sub-epochs (one per partition) when
/// it starts, so the count bounds the units one run writes.
pub const MAX_MOP_EPOCHS: u64 = 1000;

/// The default [`crate::EngineConfig::mop_above_bytes`]: 1 GiB.
pub const DEFAULT_MOP_ABOVE_BYTES: u64 = 1 << 30;

/// Whether a candidate can train by hopping (a network without an adversary:
/// [`easeml_trainer::mop::can_hop`]).
pub fn can_hop(candidate: &str) -> bool {
    easeml_trainer::Candidate::parse(candidate)
        .is_ok_and(|candidate| easeml_trainer::mop::can_hop(candidate.model))
}

/// What the coordinator knows about one decision when it chooses how to train it.
#[derive(Debug, Clone, PartialEq)]
pub struct MopChoice<'a> {
    /// The decided candidate.
    pub candidate: &'a str,
    /// The live workers (the partitions a MOP run would have).
    pub workers: usize,
    /// The bytes of the app's enabled examples ([`Examples::bytes`]).
    pub data_bytes: usize,
    /// The models the app has left to train by hopping: its candidates that can hop and have no
    /// finished run on its current data (this one included), times the learning rates each
    /// decision tries (one MOP run each).
    pub open_models: usize,
}

/// How the coordinator trains one decision ([`choose_training`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Training {
    /// Whole runs, each on one worker with all the app's data (task parallelism).
    Whole,
    /// MOP runs, each hopping between the workers holding the partitions.
    Hop,
    /// Data-parallel runs, each on every worker at once ([`crate::gang`]).
    Gang,
}

/// How the decided candidate trains. Whole runs with fewer than two live workers or for a
/// candidate that cannot hop; otherwise [`Parallelism::Mop`] hops, [`Parallelism::Data`] gangs,
/// [`Parallelism::Task`] trains whole, and [`Parallelism::Auto`] follows Cerebro:
/// - while copying the app's data to every worker (task parallelism's price) would hold at most
///   `mop_above_bytes` in all (`data_bytes x workers`), whole runs;
/// - above that, the data stays cut into partitions, one per worker, and the run hops while at
///   least half as many of the app's models are left to train as there are workers;
/// - below `p / 2` models MOP would leave workers idle, and the paper's section 6.2 trains the
///   last models by data parallelism (Horovod there; a gang here).
pub fn choose_training(
    parallelism: Parallelism,
    choice: &MopChoice<'_>,
    mop_above_bytes: u64,
) -> Training {
    if choice.workers < 2 || !can_hop(choice.candidate) {
        return Training::Whole;
    }
    match parallelism {
        Parallelism::Task => Training::Whole,
        Parallelism::Mop => Training::Hop,
        Parallelism::Data => Training::Gang,
        Parallelism::Auto => {
            let replicated = (choice.data_bytes as u64).saturating_mul(choice.workers as u64);
            if replicated <= mop_above_bytes {
                Training::Whole
            } else if choice.open_models.saturating_mul(2) >= choice.workers {
                Training::Hop
            } else {
                Training::Gang
            }
        }
    }
}

/// The seed of an app's MOP run of a candidate: the engine's seed mixed with both names
/// (FNV-1a), so the run is the same in every session and on every host.
pub fn run_seed(seed: u64, app: &str, candidate: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for byte in app.bytes().chain([0]).chain(candidate.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// How a MOP run trains.
#[derive(Debug, Clone, PartialEq)]
pub struct MopPlan {
    /// Data partitions (at least 1, at most the training examples).
    pub partitions: u64,
    /// Epochs (at least 1).
    pub epochs: u64,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// The run's seed.
    pub seed: u64,
    /// Examples per batch.
    pub batch_size: usize,
    /// The share of examples held out for validation, by id hash.
    pub validation_fraction: f64,
    /// The models' widths.
    pub config: ModelConfig,
    /// Early stopping: the run ends once this many complete epochs have passed without a better
    /// validation quality than its best epoch's (0: all its epochs train).
    pub patience: u64,
    /// The seconds its sub-epochs may take in all (a whole run's time limit, spent across the
    /// workers): it stops after the epoch past which another would not fit (`None`: no limit).
    pub max_seconds: Option<f64>,
    /// Data parallelism instead of hops: every epoch one gang of `partitions` ranks, rank `r`
    /// training partition `r` on the `r`-th worker, all at once ([`crate::gang`]).
    pub gang: bool,
}

impl MopPlan {
    /// `partitions` partitions, `epochs` epochs, the trainer's defaults otherwise (learning rate
    /// 0.001, the first of its grid; batches of 32; 20% validation; the CPU's widths).
    pub fn new(partitions: u64, epochs: u64) -> MopPlan {
        MopPlan {
            partitions,
            epochs,
            learning_rate: 0.001,
            seed: 0,
            batch_size: 32,
            validation_fraction: 0.2,
            config: ModelConfig::for_device(Device::Cpu),
            patience: 0,
            max_seconds: None,
            gang: false,
        }
    }
}

/// A sub-epoch unit's spec: what every sub-epoch of the run shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubEpochSpec {
    /// The training setup.
    pub setup: MopSetup,
    /// The number of partitions.
    pub partitions: u64,
    /// The number of epochs.
    pub epochs: u64,
    /// The validation share (the rows that are not trained on).
    pub validation_fraction: f64,
    /// The run's initial state, a blob hash.
    pub initial: String,
    /// [`MopPlan::patience`] (absent from the specs of runs queued before it: 0).
    #[serde(default)]
    pub patience: u64,
    /// [`MopPlan::max_seconds`] (absent before it: no limit).
    #[serde(default)]
    pub max_seconds: Option<f64>,
    /// A data-parallel run's steps per epoch on every rank (the smallest partition's batches);
    /// `None` for a run that hops ([`MopPlan::gang`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_steps: Option<u64>,
}

impl SubEpochSpec {
    pub(crate) fn from_json(text: &str) -> Result<SubEpochSpec> {
        serde_json::from_str(text).map_err(|error| {
            Error::Input(format!("a sub-epoch unit's spec is unreadable: {error}"))
        })
    }
}

/// Where a MOP run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum MopStatus {
    /// Still training: sub-epochs committed of all its epochs'.
    Training {
        /// Committed sub-epochs.
        committed: usize,
        /// Sub-epochs in all (epochs x partitions).
        total: usize,
        /// The workers it trains on at once: its gang's size, or 1 while it hops (a data-parallel
        /// run whose gang could not form hops on).
        workers: usize,
    },
    /// Done, with its validation quality.
    Done(f64),
    /// Failed, with why.
    Failed(String),
}

/// The app's model and examples, and the training / validation rows.
fn load(store: &Store, app: AppId, fraction: f64) -> Result<(Examples, Vec<usize>, Vec<usize>)> {
    let record = store.app(app)?;
    let model = AppModel::from_manifest(&record.name, &record.manifest)?;
    let examples = load_examples(store, app, &model)?.ok_or_else(|| {
        Error::Input(format!(
            "app `{}` has fewer than {} enabled examples: feed more before training",
            record.name,
            crate::MIN_EXAMPLES
        ))
    })?;
    let (train, validation) = split_by_id(&examples.ids, fraction);
    Ok((examples, train, validation))
}

/// Bits of a lease rank below its epoch: Cerebro's random shuffle.
const RANK_SHUFFLE_BITS: u32 = 40;

/// A sub-epoch unit's lease rank (lower ranks are leased first): its epoch in the high bits, then
/// a random shuffle seeded by the run's seed, the epoch and the partition. Among the units a worker
/// may take, one of a run in the earliest epoch (the most epochs left) goes first, at random
/// among those: Algorithm 1 with a critical-path priority. In `easeml bench mop --simulate` that
/// order (`mop_epoch_first`) keeps every chain moving where uniform choice lets the longest fall
/// behind (16 models on 8 workers: 1.08 of the open-shop bound against 1.14).
fn rank(seed: u64, epoch: u64, partition: u64) -> i64 {
    let shuffle = sub_epoch_seed(seed ^ RANK_SALT, epoch, partition) >> (64 - RANK_SHUFFLE_BITS);
    let epoch = epoch.min((1 << (63 - RANK_SHUFFLE_BITS)) - 1);
    ((epoch << RANK_SHUFFLE_BITS) | shuffle) as i64
}

/// Queues a MOP run of `candidate` for `app` (see the module docs); `workers` are the ids of the
/// workers holding the partitions (partition `j` goes to `workers[j % len]`; none: any worker).
pub fn start_run(
    store: &mut Store,
    app: AppId,
    candidate: &str,
    plan: &MopPlan,
    workers: &[String],
) -> Result<RunId> {
    let runs = start_runs(store, app, candidate, std::slice::from_ref(plan), workers)?;
    runs.into_iter()
        .next()
        .ok_or_else(|| Error::Input("no MOP run was queued".into()))
}

/// Queues one MOP run of `candidate` for `app` per plan (a decision's learning rates), reading
/// the app's examples once; every plan is checked and its initial state built before any run is
/// queued, so an error that is not the store's queues nothing. See [`start_run`].
pub fn start_runs(
    store: &mut Store,
    app: AppId,
    candidate: &str,
    plans: &[MopPlan],
    workers: &[String],
) -> Result<Vec<RunId>> {
    let Some(first) = plans.first() else {
        return Ok(Vec::new());
    };
    let (examples, _, _) = load(store, app, first.validation_fraction)?;
    let task = Task::of(&examples)?;
    let mut checked = Vec::with_capacity(plans.len());
    for plan in plans {
        if plan.partitions == 0 || plan.epochs == 0 {
            return Err(Error::Input(format!(
                "a MOP run needs at least one partition and one epoch, not {} and {}",
                plan.partitions, plan.epochs
            )));
        }
        if plan.epochs > MAX_MOP_EPOCHS {
            return Err(Error::Input(format!(
                "a MOP run plans at most {MAX_MOP_EPOCHS} epochs, not {}",
                plan.epochs
            )));
        }
        let (train, _) = split_by_id(&examples.ids, plan.validation_fraction);
        // Workers load only their partition's training rows, by the split's hash rule alone:
        // the split must not have moved an example to keep a part non-empty.
        let by_rule: Vec<usize> = (0..examples.len())
            .filter(|&row| !hashed_to_validation(examples.ids[row], plan.validation_fraction))
            .collect();
        if by_rule != train {
            return Err(Error::Input(format!(
                "a {:.0}% validation split of {} examples leaves one part empty: feed more examples before training by model hopping",
                plan.validation_fraction * 100.0,
                examples.len()
            )));
        }
        if let Some(empty) = (0..plan.partitions).find(|&partition| {
            partition_rows(&examples, &train, plan.partitions, partition).is_empty()
        }) {
            return Err(Error::Input(format!(
                "partition {empty} of {} has no training example ({} in all): use fewer partitions",
                plan.partitions,
                train.len()
            )));
        }
        let setup = MopSetup {
            candidate: candidate.to_owned(),
            task: task.clone(),
            config: plan.config,
            learning_rate: plan.learning_rate,
            seed: plan.seed,
            batch_size: plan.batch_size,
        };
        let initial = initial_state(&setup, &examples, &train, Device::Cpu)?;
        // Every rank runs the smallest partition's batches, so the ranks step together.
        let gang_steps = plan.gang.then(|| {
            (0..plan.partitions)
                .map(|partition| {
                    partition_rows(&examples, &train, plan.partitions, partition).len()
                })
                .min()
                .unwrap_or(1)
                .div_ceil(plan.batch_size.max(1))
                .max(1) as u64
        });
        checked.push((plan, setup, initial, gang_steps));
    }
    // Only the store can fail from here on.
    let mut runs = Vec::with_capacity(plans.len());
    for (plan, setup, initial, gang_steps) in checked {
        let initial = store.put_blob(&initial)?;
        let spec = SubEpochSpec {
            setup,
            partitions: plan.partitions,
            epochs: plan.epochs,
            validation_fraction: plan.validation_fraction,
            initial: initial.as_str().to_owned(),
            patience: plan.patience,
            max_seconds: plan.max_seconds,
            gang_steps,
        };
        let spec = serde_json::to_string(&spec)
            .map_err(|error| Error::Input(format!("cannot write a sub-epoch spec: {error}")))?;
        let targets: Vec<Option<&str>> = (0..plan.partitions)
            .map(|partition| {
                (!workers.is_empty()).then(|| workers[partition as usize % workers.len()].as_str())
            })
            .collect();
        // Every epoch at once: the store leases an epoch's units only once the earlier epochs
        // are committed, so no worker waits for the coordinator between epochs.
        let gang = gang_steps.map(|_| plan.partitions);
        let units: Vec<NewSubEpoch<'_>> = (0..plan.epochs)
            .flat_map(|epoch| epoch_units(epoch, plan.seed, &targets, &spec, gang))
            .collect();
        let (run, _) = store.queue_sub_epoch_run(app, candidate, &initial, &units)?;
        runs.push(run);
    }
    Ok(runs)
}

/// An epoch's units: one hop per partition, or (`gang`: its size) one rank per partition, every
/// rank of the epoch with one lease rank so that idle workers take the same gang's ranks.
fn epoch_units<'a>(
    epoch: u64,
    seed: u64,
    targets: &[Option<&'a str>],
    spec: &'a str,
    gang: Option<u64>,
) -> Vec<NewSubEpoch<'a>> {
    targets
        .iter()
        .enumerate()
        .map(|(partition, &target_worker)| NewSubEpoch {
            epoch,
            partition: partition as u64,
            target_worker,
            rank: rank(
                seed,
                epoch,
                if gang.is_some() { 0 } else { partition as u64 },
            ),
            spec,
            gang,
        })
        .collect()
}

/// The partitions a worker holds: for one app at one data version, the training rows of each
/// partition it has trained (its own, and any it took over from a gone worker), loaded from the
/// store with nothing else of the app (see [`load_examples_where`]).
#[derive(Debug, Default)]
pub struct PartitionCache {
    app: Option<(AppId, u64)>,
    held: BTreeMap<(u64, u64, u64), Arc<Examples>>,
}

impl PartitionCache {
    /// Partition `partition` of `partitions` of the app's training rows (validation share
    /// `fraction`) at data `version`; `None` when the app's data is no longer at `version`.
    pub fn get(
        &mut self,
        store: &Store,
        app: AppId,
        version: u64,
        partitions: u64,
        partition: u64,
        fraction: f64,
    ) -> Result<Option<Arc<Examples>>> {
        if self.app != Some((app, version)) {
            self.held.clear();
            self.app = None;
        }
        let key = (partitions, partition, fraction.to_bits());
        if let Some(examples) = self.held.get(&key) {
            return Ok(Some(Arc::clone(examples)));
        }
        let record = store.app(app)?;
        if record.data_version != version {
            return Ok(None);
        }
        let model = AppModel::from_manifest(&record.name, &record.manifest)?;
        let keep = |id: u64| {
            !hashed_to_validation(id, fraction)
                && easeml_trainer::mop::partition_of(id, partitions) == partition
        };
        let Some(examples) = load_examples_where(store, app, &model, &keep, 1)? else {
            return Err(Error::Input(format!(
                "partition {partition} of {partitions} has no training example: the app's data changed, or the run was queued with too many partitions"
            )));
        };
        let examples = Arc::new(examples);
        self.app = Some((app, version));
        self.held.insert(key, Arc::clone(&examples));
        Ok(Some(examples))
    }

    /// The training rows it holds, over all its partitions.
    pub fn rows_held(&self) -> usize {
        self.held.values().map(|examples| examples.len()).sum()
    }
}

/// Trains a leased sub-epoch unit on `device` and commits the next state (see the module docs).
/// A diverged sub-epoch, or data changed since the run was queued, fails the run.
pub fn execute_sub_epoch(
    store: &mut Store,
    lease: &Lease,
    device: Device,
    cache: &mut PartitionCache,
) -> Result<Executed> {
    let started = Instant::now();
    let Some(at) = lease.sub_epoch.clone() else {
        return Err(Error::Input(format!(
            "unit {} is not a sub-epoch",
            lease.unit.0
        )));
    };
    if at.gang.is_some() {
        return crate::gang::execute_gang_rank(store, lease, &at, device, cache);
    }
    let outcome = (|| -> Result<std::result::Result<BlobHash, String>> {
        let (spec, examples, state) = match leased_work(store, lease, &at, cache)? {
            Ok(work) => work,
            Err(reason) => return Ok(Err(reason)),
        };
        // The worker holds the partition's training rows only: all of them are trained.
        let rows: Vec<usize> = (0..examples.len()).collect();
        let sub_epoch = SubEpoch {
            epoch: at.epoch,
            partition: at.partition,
        };
        match train_sub_epoch(&spec.setup, &state, &examples, &rows, sub_epoch, device)? {
            SubEpochOutcome::Trained { state, .. } => Ok(Ok(store.put_blob(&state)?)),
            SubEpochOutcome::Diverged(reason) => Ok(Err(reason)),
        }
    })();
    let seconds = started.elapsed().as_secs_f64();
    let committed = match outcome {
        Ok(Ok(result)) => store.commit_sub_epoch(lease, &result, seconds),
        Ok(Err(reason)) => store.fail_sub_epoch_run(lease, &reason, Some(seconds)),
        Err(error) => store.fail_sub_epoch_run(lease, &error.to_string(), Some(seconds)),
    };
    executed(committed)
}

/// What a leased sub-epoch or gang rank trains: its run's spec, its partition's training rows
/// (from the worker's cache) and the state it starts from.
pub(crate) type LeasedWork = (SubEpochSpec, Arc<Examples>, Vec<u8>);

/// A lease's [`LeasedWork`]; `Err(reason)` (the run fails) when the app's data changed since the
/// run was queued.
pub(crate) fn leased_work(
    store: &Store,
    lease: &Lease,
    at: &SubEpochLease,
    cache: &mut PartitionCache,
) -> Result<std::result::Result<LeasedWork, String>> {
    let spec = SubEpochSpec::from_json(&lease.spec)?;
    let Some(examples) = cache.get(
        store,
        lease.app,
        lease.data_version,
        spec.partitions,
        at.partition,
        spec.validation_fraction,
    )?
    else {
        return Ok(Err(
            "the app's data changed while the run trained: its partitions are gone".to_owned(),
        ));
    };
    let input = match &at.input {
        Some(hash) => hash.clone(),
        None => BlobHash::parse(&spec.initial)?,
    };
    let state = store.blob(&input)?;
    Ok(Ok((spec, examples, state)))
}

/// The spec of a run's units.
fn run_spec(store: &Store, log: &[SubEpochRecord]) -> Result<SubEpochSpec> {
    let first = log.first().ok_or_else(|| {
        Error::Input("the run has no sub-epoch units: it is not a MOP run".into())
    })?;
    SubEpochSpec::from_json(&store.unit(first.unit)?.spec)
}

/// What a coordinator keeps of a MOP run between its steps: the validation rows (read once) and
/// the validation quality and loss of each complete epoch evaluated so far. Only a cache: a coordinator
/// that starts afresh evaluates the same states again and gets the same numbers.
#[derive(Debug, Default)]
pub struct MopProgress {
    validation: Option<Examples>,
    qualities: BTreeMap<u64, Option<Evaluation>>,
    worker_silence: Option<Duration>,
}

/// How long a worker may be silent and still count as live for a gang, unless a coordinator
/// says otherwise ([`MopProgress::with_worker_silence`]): twice the default lease time to live.
pub const DEFAULT_WORKER_SILENCE: Duration = Duration::from_secs(60);

impl MopProgress {
    /// A coordinator's cache whose gangs count a worker as live while it heartbeats within
    /// `silence` (the coordinator's own rule for live workers).
    pub fn with_worker_silence(silence: Duration) -> MopProgress {
        MopProgress {
            worker_silence: Some(silence),
            ..MopProgress::default()
        }
    }

    /// The validation rows of the app (only those are read: the examples whose ids the split's
    /// hash rule holds out, which `start_run` checked is the run's split).
    fn validation(&mut self, store: &Store, app: AppId, fraction: f64) -> Result<&Examples> {
        let rows = match self.validation.take() {
            Some(rows) => rows,
            None => {
                let record = store.app(app)?;
                let model = AppModel::from_manifest(&record.name, &record.manifest)?;
                load_examples_where(
                    store,
                    app,
                    &model,
                    &|id| hashed_to_validation(id, fraction),
                    1,
                )?
                .ok_or_else(|| {
                    Error::Input(format!(
                        "app `{}` has no enabled example left to validate on",
                        record.name
                    ))
                })?
            }
        };
        Ok(self.validation.insert(rows))
    }

    /// Evaluates the complete epochs not evaluated yet.
    fn evaluate(
        &mut self,
        store: &Store,
        app: AppId,
        spec: &SubEpochSpec,
        complete: &[(u64, BlobHash)],
    ) -> Result<()> {
        for (epoch, hash) in complete {
            if self.qualities.contains_key(epoch) {
                continue;
            }
            let state = store.blob(hash)?;
            let validation = self.validation(store, app, spec.validation_fraction)?;
            let rows: Vec<usize> = (0..validation.len()).collect();
            let quality = evaluate_state(&spec.setup, &state, validation, &rows, Device::Cpu)?;
            self.qualities.insert(*epoch, quality);
        }
        Ok(())
    }

    /// The best epoch evaluated (the first of the highest finite quality) and its quality.
    fn best(&self) -> Option<(u64, f64)> {
        self.qualities
            .iter()
            .filter_map(|(&epoch, evaluation)| {
                evaluation.map(|evaluation| (epoch, evaluation.quality))
            })
            .fold(None, |best, (epoch, quality)| match best {
                Some((_, top)) if quality <= top => best,
                _ => Some((epoch, quality)),
            })
    }

    /// Whether `patience` complete epochs have passed without progress, by the trainer's rule
    /// ([`EarlyStopping`]; epochs without a finite quality make none).
    fn stops(&self, patience: u64, classification: bool) -> bool {
        let mut stopping = EarlyStopping::new(classification);
        for evaluation in self.qualities.values() {
            stopping.record(evaluation.as_ref());
        }
        patience > 0 && stopping.epochs_without_progress() as u64 >= patience
    }
}

/// Replica-aware placement: a partition's queued sub-epochs go to the worker that trained its
/// last committed one (it holds the partition's rows). In a run without faults that is the
/// partition's own worker and nothing changes; once another worker took the partition over from
/// a gone one, the later epochs follow it instead of going to whichever worker asks first (which
/// would load the partition once more).
fn follow_holders(store: &mut Store, run: RunId, log: &[SubEpochRecord]) -> Result<()> {
    // A gang's ranks are addressed per epoch; a rank taken over moves with its gang.
    if log.iter().any(|unit| unit.gang.is_some()) {
        return Ok(());
    }
    let mut holders: BTreeMap<u64, (u64, &str)> = BTreeMap::new();
    for unit in log {
        if let (Some(seq), Some(owner), Some(_)) = (unit.seq, &unit.lease_owner, &unit.result) {
            let holder = holders.entry(unit.partition).or_insert((seq, owner));
            if seq >= holder.0 {
                *holder = (seq, owner);
            }
        }
    }
    for (partition, (_, holder)) in holders {
        let moved = log.iter().any(|unit| {
            unit.partition == partition
                && unit.state == UnitState::Queued
                && unit.target_worker.as_deref() != Some(holder)
        });
        if moved {
            store.retarget_sub_epochs(run, partition, holder)?;
        }
    }
    Ok(())
}

/// The epochs of the log whose every partition was trained and committed (a gang's epoch: its
/// rank 0, which commits for all), in order, each with its end state (the result of its last
/// sub-epoch in the visit log).
fn complete_epochs(log: &[SubEpochRecord], partitions: u64) -> Vec<(u64, BlobHash)> {
    let mut by_epoch: BTreeMap<u64, (u64, u64, Option<BlobHash>)> = BTreeMap::new();
    for unit in log {
        let (Some(result), Some(seq)) = (&unit.result, unit.seq) else {
            continue;
        };
        let entry = by_epoch.entry(unit.epoch).or_insert((0, 0, None));
        // A gang's one result stands for all its ranks.
        entry.0 += if unit.gang.is_some() { partitions } else { 1 };
        if seq >= entry.1 {
            entry.1 = seq;
            entry.2 = Some(result.clone());
        }
    }
    by_epoch
        .into_iter()
        .filter(|(_, (count, _, _))| *count == partitions)
        .filter_map(|(epoch, (_, _, end))| end.map(|end| (epoch, end)))
        .collect()
}

/// One step of a MOP run's coordinator (see the module docs) with nothing kept from earlier
/// steps: [`advance_with`] and a fresh [`MopProgress`].
pub fn advance(store: &mut Store, run: RunId) -> Result<MopStatus> {
    advance_with(store, run, &mut MopProgress::default())
}

/// One step of a MOP run's coordinator (see the module docs); call it until the run is done or
/// failed, with the same `progress` (a coordinator that restarts starts a new one). With a
/// patience, each epoch is evaluated once it is complete, and the run stops early (its other
/// units closed: [`Store::close_sub_epochs`]) once `patience` epochs have passed without a
/// better one.
pub fn advance_with(
    store: &mut Store,
    run: RunId,
    progress: &mut MopProgress,
) -> Result<MopStatus> {
    let record = store.run(run)?;
    match record.state {
        RunState::Done => return Ok(MopStatus::Done(record.quality.unwrap_or(0.0))),
        RunState::Failed => return Ok(MopStatus::Failed(record.error.unwrap_or_default())),
        _ => {}
    }
    let mut log = store.sub_epochs(run)?;
    let spec = run_spec(store, &log)?;
    // A gang that cannot form (fewer live workers than ranks: the store leases none of them)
    // trains the run's remaining epochs by hopping instead.
    if let Some(size) = open_gang(&log) {
        let silence = progress.worker_silence.unwrap_or(DEFAULT_WORKER_SILENCE);
        if (live_workers(store, silence)? as u64) < size && store.hop_instead_of_gang(run)? > 0 {
            log = store.sub_epochs(run)?;
        }
    }
    let total = (spec.epochs * spec.partitions) as usize;
    let committed = log
        .iter()
        .filter(|unit| unit.state == UnitState::Committed)
        .count();
    follow_holders(store, run, &log)?;
    let complete = complete_epochs(&log, spec.partitions);
    if (complete.len() as u64) < spec.epochs {
        let mut stop = None;
        if spec.patience > 0 {
            progress.evaluate(store, record.app, &spec, &complete)?;
            if progress.stops(spec.patience, spec.setup.task.is_classification()) {
                stop = Some(format!("no better epoch in {}", spec.patience));
            }
        }
        if let Some(limit) = spec.max_seconds
            && out_of_time(&log, &complete, limit)
        {
            stop = Some(format!("its time limit, {}", format_seconds(limit)));
        }
        if let Some(why) = stop {
            store.close_sub_epochs(run)?;
            let log = store.sub_epochs(run)?;
            return finish(store, run, &spec, &log, progress, Some(&why));
        }
    }
    let current = log.iter().map(|unit| unit.epoch).max().unwrap_or(0);
    let open = log
        .iter()
        .any(|unit| unit.epoch == current && unit.state != UnitState::Committed);
    let workers = open_gang(&log).map_or(1, |gang| gang as usize);
    if open {
        return Ok(MopStatus::Training {
            committed,
            total,
            workers,
        });
    }
    if current + 1 < spec.epochs {
        // The next epoch's partitions go to the workers that held them in this one.
        let mut targets = vec![None; spec.partitions as usize];
        for unit in log.iter().filter(|unit| unit.epoch == current) {
            if let Some(slot) = targets.get_mut(unit.partition as usize) {
                *slot = unit.target_worker.as_deref();
            }
        }
        let text = store.unit(log[0].unit)?.spec;
        // A gang run gangs on unless its gangs turned into hops.
        let gang = log
            .iter()
            .filter(|unit| unit.epoch == current)
            .find_map(|unit| unit.gang);
        let units = epoch_units(current + 1, spec.setup.seed, &targets, &text, gang);
        store.queue_sub_epochs(run, &units)?;
        return Ok(MopStatus::Training {
            committed,
            total,
            workers: gang.map_or(1, |gang| gang as usize),
        });
    }
    finish(store, run, &spec, &log, progress, None)
}

/// The gang size of a run's units not committed yet; `None` when they hop.
fn open_gang(log: &[SubEpochRecord]) -> Option<u64> {
    log.iter()
        .filter(|unit| unit.state != UnitState::Committed)
        .find_map(|unit| unit.gang)
}

/// How many workers could hold a gang's rank ([`crate::worker::live_worker_ids`]).
pub(crate) fn live_workers(store: &Store, silence: Duration) -> Result<usize> {
    Ok(crate::worker::live_worker_ids(store, silence)?.len())
}

/// Whether another epoch would not fit a run's time limit: the seconds its sub-epochs took so far
/// and one more epoch at the mean of its complete ones would pass `limit`. Never before the first
/// epoch is complete (a run serves a complete epoch's model; one whose first epoch alone passes
/// the limit breaks a `train_time` constraint and is never served).
fn out_of_time(log: &[SubEpochRecord], complete: &[(u64, BlobHash)], limit: f64) -> bool {
    if complete.is_empty() {
        return false;
    }
    let spent: f64 = log.iter().filter_map(|unit| unit.seconds).sum();
    let in_complete: f64 = log
        .iter()
        .filter(|unit| complete.iter().any(|(epoch, _)| *epoch == unit.epoch))
        .filter_map(|unit| unit.seconds)
        .sum();
    spent + in_complete / complete.len() as f64 > limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ranks_order_by_epoch_then_shuffle() {
        for seed in [0, 7, u64::MAX] {
            for epoch in 0..5 {
                let this: Vec<i64> = (0..8).map(|p| rank(seed, epoch, p)).collect();
                let next: Vec<i64> = (0..8).map(|p| rank(seed, epoch + 1, p)).collect();
                assert!(this.iter().all(|&r| r >= 0));
                // Every unit of an epoch before every unit of the next.
                assert!(this.iter().max() < next.iter().min(), "{this:?} {next:?}");
                // Within an epoch, a shuffle: not the partitions' order, and no ties.
                let mut sorted = this.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), 8);
            }
            let order: Vec<i64> = (0..8).map(|p| rank(seed, 3, p)).collect();
            assert!(order.windows(2).any(|w| w[0] > w[1]), "{order:?}");
        }
        // Absurd epochs stay positive and ordered at the cap.
        assert!(rank(1, u64::MAX, 0) > rank(1, 1_000, 0));
    }

    fn choice(candidate: &str, workers: usize, data_bytes: usize, open_models: usize) -> Training {
        let choice = MopChoice {
            candidate,
            workers,
            data_bytes,
            open_models,
        };
        choose_training(Parallelism::Auto, &choice, 1000)
    }

    #[test]
    fn auto_hops_when_the_copies_are_large_and_enough_models_are_left_else_gangs() {
        // 2 workers x 600 bytes > 1000, 1 model of 2 workers is half.
        assert_eq!(choice("mlp_small", 2, 600, 1), Training::Hop);
        // The copies fit under the limit.
        assert_eq!(choice("mlp_small", 2, 500, 3), Training::Whole);
        assert_eq!(choice("mlp_small", 8, 100, 1), Training::Whole);
        // Fewer models than half the workers: data parallelism (section 6.2's switch).
        assert_eq!(choice("mlp_small", 8, 600, 3), Training::Gang);
        assert_eq!(choice("mlp_small", 8, 600, 4), Training::Hop);
        // One worker has nothing to share; classic models cannot hop.
        assert_eq!(choice("mlp_small", 1, 1 << 20, 9), Training::Whole);
        assert_eq!(choice("gbdt", 4, 1 << 20, 9), Training::Whole);
        assert_eq!(choice("gbdt", 8, 1 << 20, 1), Training::Whole);
        assert_eq!(choice("not_a_model", 4, 1 << 20, 9), Training::Whole);
        // The most models there could be (the coordinator asks so before reading the store) and
        // the most bytes: no overflow, only the copies decide whether it trains whole.
        assert_eq!(choice("mlp_small", 2, 600, usize::MAX), Training::Hop);
        assert_eq!(choice("mlp_small", 2, 500, usize::MAX), Training::Whole);
        assert_eq!(
            choice("mlp_small", usize::MAX, usize::MAX, usize::MAX),
            Training::Hop
        );
    }

    #[test]
    fn task_mop_and_data_are_what_they_say() {
        let large = MopChoice {
            candidate: "mlp_small",
            workers: 8,
            data_bytes: 1 << 20,
            open_models: 1,
        };
        assert_eq!(
            choose_training(Parallelism::Task, &large, 0),
            Training::Whole
        );
        assert_eq!(
            choose_training(Parallelism::Mop, &large, u64::MAX),
            Training::Hop
        );
        assert_eq!(
            choose_training(Parallelism::Data, &large, u64::MAX),
            Training::Gang
        );
        let classic = MopChoice {
            candidate: "random_forest",
            ..large
        };
        for parallelism in [Parallelism::Mop, Parallelism::Data, Parallelism::Auto] {
            assert_eq!(choose_training(parallelism, &classic, 0), Training::Whole);
        }
        for name in Parallelism::NAMES.split(", ") {
            assert!(Parallelism::from_name(name).is_some(), "{name}");
        }
        assert_eq!(Parallelism::from_name("hop"), None);
    }

    fn progress(qualities: &[Option<f64>]) -> MopProgress {
        progress_with_losses(
            &qualities
                .iter()
                .map(|quality| quality.map(|quality| (quality, None)))
                .collect::<Vec<_>>(),
        )
    }

    fn progress_with_losses(epochs: &[Option<(f64, Option<f64>)>]) -> MopProgress {
        MopProgress {
            qualities: epochs
                .iter()
                .enumerate()
                .map(|(epoch, evaluation)| {
                    let evaluation = evaluation.map(|(quality, loss)| Evaluation { quality, loss });
                    (epoch as u64, evaluation)
                })
                .collect(),
            ..MopProgress::default()
        }
    }

    #[test]
    fn a_run_stops_after_patience_epochs_without_a_better_one() {
        for classification in [true, false] {
            assert!(!progress(&[]).stops(2, classification));
            assert!(!progress(&[Some(0.5), Some(0.6), Some(0.6)]).stops(2, classification));
            assert!(
                progress(&[Some(0.5), Some(0.6), Some(0.6), Some(0.55)]).stops(2, classification)
            );
            // Equal is not better; no patience never stops.
            assert!(progress(&[Some(0.5), Some(0.5), Some(0.5)]).stops(2, classification));
            assert!(!progress(&[Some(0.5), Some(0.5), Some(0.5)]).stops(0, classification));
            // Epochs without a finite quality count as no better.
            assert!(progress(&[None, None]).stops(2, classification));
            assert!(!progress(&[None, Some(0.1)]).stops(2, classification));
        }
        // Value outputs: a falling validation loss is progress while the (clipped) quality is
        // stuck; classification watches accuracy only.
        let stuck = [
            Some((0.0, Some(4.0))),
            Some((0.0, Some(3.0))),
            Some((0.0, Some(2.0))),
        ];
        assert!(!progress_with_losses(&stuck).stops(2, false));
        assert!(progress_with_losses(&stuck).stops(2, true));
        let flat = [
            Some((0.3, Some(2.0))),
            Some((0.2, Some(1.9999))),
            Some((0.2, Some(2.5))),
        ];
        assert!(progress_with_losses(&flat).stops(2, false));
        assert_eq!(
            progress(&[Some(0.2), None, Some(0.7), Some(0.7)]).best(),
            Some((2, 0.7))
        );
    }

    #[test]
    fn a_runs_seed_depends_on_its_app_and_candidate_only() {
        assert_eq!(run_seed(0, "a", "mlp"), run_seed(0, "a", "mlp"));
        assert_ne!(run_seed(0, "a", "mlp"), run_seed(1, "a", "mlp"));
        assert_ne!(run_seed(0, "ab", "c"), run_seed(0, "a", "bc"));
    }
}
