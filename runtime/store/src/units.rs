//! Work units, their leases, and the workers that hold them: the protocol between a coordinator
//! (the engine) and workers (in its process, in other processes, on other hosts).
//!
//! A **unit** is a piece of work a worker can do alone: a whole training run (`kind = 'run'`, one
//! unit per run: task parallelism), or one sub-epoch of a run trained by Cerebro's model hopper
//! parallelism (`kind = 'sub_epoch'`, one unit per (run, epoch, partition); see "Sub-epoch units"
//! below). Its life:
//! 1. The coordinator queues it with its run ([`Store::queue_unit`]) and a `spec`: JSON text the
//!    store keeps and never reads (the engine's `UnitSpec`).
//! 2. A worker leases it ([`Store::lease_unit`]): the oldest queued unit, or a leased one whose lease
//!    expired (its worker died or hangs). A lease bumps `attempt`; `(unit, attempt, owner)` is the
//!    unit's **fencing token** ([`Lease`]). The run becomes `running`.
//! 3. The worker renews the lease while it works ([`Store::renew_lease`]); a renewal that finds the
//!    token gone says the lease was lost.
//! 4. The worker commits the result ([`Store::commit_unit`]): the run's outcome and the unit's
//!    `committed` state in one transaction, refused ([`Error::StaleLease`]) unless the unit still
//!    holds the worker's token. A worker that lost its lease (an orphaned process keeps running on
//!    real clusters) can therefore never overwrite the newer attempt's result, and a unit is
//!    committed at most once.
//!
//! A unit lost with its worker is leased again, never recorded as a failed run: only after
//! [`MAX_LOSSES`] expired leases is its run failed (a unit that kills every worker it reaches).
//! A worker that stops in an orderly way gives its lease back ([`Store::release_lease`]); a run
//! that the training session's end cut before it had a model is dropped ([`Store::abandon_unit`]).
//! Every state change is one `IMMEDIATE` transaction, so any number of processes may share the store.
//!
//! # Sub-epoch units
//! A MOP run ([`Store::queue_sub_epoch_run`]) is trained by many units, each one sub-epoch: one
//! epoch's pass over one data partition, starting from the training state the run's previous
//! sub-epoch ended with. The store keeps the run's **visit log**: each committed sub-epoch unit
//! records the state it started from (`input`, set when it is leased: the result of the run's last
//! committed sub-epoch, or the run's initial state for the first), the state it ended with (`result`, a blob hash), its
//! worker's seconds and its place in the log (`seq`). The coordinator keeps nothing else, so it
//! can restart at any time. Leasing follows Cerebro's randomized scheduler (Algorithm 1): a worker
//! gets a queued sub-epoch unit
//! - addressed to it (`target_worker`: the worker holding the partition), to nobody, or to a
//!   worker that is gone (stopped, or silent for a lease's time to live; any worker can load any
//!   partition from the store, so the work moves instead of waiting);
//! - whose run has no other unit under a live lease (a model trains on one worker at a time);
//! - whose run has every unit of the earlier epochs committed (an epoch visits each partition
//!   once before the next begins, so the coordinator may queue every epoch at once);
//! - whose run is still open (not failed or done);
//!
//! the lowest `lease_rank` first (the coordinator ranks a run's units by epoch, then at random:
//! Cerebro's shuffle of the unit queue behind a most-epochs-left-first priority). Two PostgreSQL transactions may still lease two units of one run at once
//! (`SKIP LOCKED` reads no row locks); the commit catches it: [`Store::commit_sub_epoch`] locks
//! the run, and refuses (and queues the unit again) a sub-epoch whose input is no longer the run's
//! last result, so the log is always one chain. The fencing rules are the run units' rules.
//!
//! # Gang ranks
//! A data-parallel run (Cerebro's section 6.2: one model on many workers at once) is a run of
//! sub-epoch units with a `gang` size g: epoch e's units are its g **ranks** (`part` = the rank,
//! each addressed to the worker holding that partition), trained together: every rank starts from
//! the same state (the run's last committed result, the lease's `input`), the ranks exchange
//! gradients over TCP (each writes its listener's `host:port` on its unit,
//! [`Store::set_gang_endpoint`], and reads the others', [`Store::gang`]), and rank 0 alone commits
//! the epoch's state, which closes the epoch's other ranks in the same transaction
//! ([`Store::commit_sub_epoch`]; a commit from another rank is refused). Their lease rule is the
//! hops' without "one unit of the run at a time": the ranks of an epoch are held at once. A rank
//! whose gang did not form gives its lease back ([`Store::release_lease`]); one whose ring broke
//! after every rank joined gives it back as lost ([`Store::release_lease_as_lost`]), so a gang
//! that keeps breaking fails its run after [`MAX_LOSSES`]. A rank is leased only while at least
//! g workers are live (workers, not the embedded engine's in-process one, that have not stopped
//! and have heartbeaten within the leasing worker's time to live): fewer could never form the
//! gang. A run whose gang cannot form trains its remaining epochs by hopping instead
//! ([`Store::hop_instead_of_gang`]: the state is the same).

use crate::blobs::BlobHash;
use crate::db::{DbResult, OptionalExt, Row};
use crate::params;
use crate::store::{AppId, RunId, RunValidation, locked_run_state};
use crate::time::now_ms;
use crate::{Error, Result, Store, db};

/// The role of the embedded engine's own worker (ids `in-process:<host>:<pid>:<random>`): it
/// trains whole runs only, so it never holds a gang's rank and does not count toward one.
pub const IN_PROCESS_ROLE: &str = "in-process";

/// Whether a worker id is an embedded engine's in-process worker's ([`IN_PROCESS_ROLE`]).
pub fn is_in_process(worker: &str) -> bool {
    worker
        .strip_prefix(IN_PROCESS_ROLE)
        .is_some_and(|rest| rest.starts_with(':'))
}

/// Expired leases after which a unit's run is failed instead of leased again.
pub const MAX_LOSSES: u32 = 3;

/// The id of a work unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitId(pub i64);

/// A unit's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitState {
    /// Waiting for a worker.
    Queued,
    /// Held by a worker (whose lease may have expired).
    Leased,
    /// Its result is in its run.
    Committed,
}

impl UnitState {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitState::Queued => "queued",
            UnitState::Leased => "leased",
            UnitState::Committed => "committed",
        }
    }

    fn parse(text: &str) -> UnitState {
        match text {
            "queued" => UnitState::Queued,
            "leased" => UnitState::Leased,
            _ => UnitState::Committed,
        }
    }
}

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// A whole training run (task parallelism).
    Run,
    /// One sub-epoch of a MOP run (see the module docs).
    SubEpoch,
}

impl UnitKind {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Run => "run",
            UnitKind::SubEpoch => "sub_epoch",
        }
    }

    fn parse(text: &str) -> UnitKind {
        match text {
            "sub_epoch" => UnitKind::SubEpoch,
            _ => UnitKind::Run,
        }
    }
}

/// A sub-epoch unit to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSubEpoch<'a> {
    /// The epoch (from 0).
    pub epoch: u64,
    /// The data partition.
    pub partition: u64,
    /// The worker holding the partition, if any.
    pub target_worker: Option<&'a str>,
    /// Lower ranks are leased first (the coordinator's: epoch, then a random shuffle).
    pub rank: i64,
    /// The coordinator's spec, JSON text.
    pub spec: &'a str,
    /// A gang rank's gang size: the unit is rank `partition` of a data-parallel epoch trained
    /// by that many workers at once (see "Gang ranks" in the module docs); `None` for a hop.
    pub gang: Option<u64>,
}

/// What a sub-epoch lease carries beyond a run lease.
#[derive(Debug, Clone, PartialEq)]
pub struct SubEpochLease {
    /// The epoch.
    pub epoch: u64,
    /// The partition.
    pub partition: u64,
    /// The training state to start from: the result of the run's last committed sub-epoch, or
    /// the run's initial state for its first.
    pub input: Option<BlobHash>,
    /// A gang rank's gang size (`partition` is its rank); `None` for a hop.
    pub gang: Option<u64>,
}

/// A sub-epoch unit as stored: one entry of a run's visit log once committed.
#[derive(Debug, Clone, PartialEq)]
pub struct SubEpochRecord {
    /// The unit.
    pub unit: UnitId,
    /// Its epoch.
    pub epoch: u64,
    /// Its partition.
    pub partition: u64,
    /// Its state.
    pub state: UnitState,
    /// Leases so far.
    pub attempt: u32,
    /// Who holds (or last held) it.
    pub lease_owner: Option<String>,
    /// The worker it is addressed to.
    pub target_worker: Option<String>,
    /// The state it started from (see [`SubEpochLease::input`]).
    pub input: Option<BlobHash>,
    /// The state it ended with (committed units).
    pub result: Option<BlobHash>,
    /// Its worker's seconds (committed units).
    pub seconds: Option<f64>,
    /// Its place in the run's visit log, from 1 (committed units).
    pub seq: Option<u64>,
    /// A gang rank's gang size; `None` for a hop.
    pub gang: Option<u64>,
    /// A gang rank's gradient listener, `host:port`, written by its holder.
    pub endpoint: Option<String>,
    /// When its current lease expires, ms since the epoch.
    pub lease_expires_ms: Option<i64>,
}

/// A unit as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitRecord {
    /// Its id.
    pub id: UnitId,
    /// Its run.
    pub run: RunId,
    /// The run's app.
    pub app: AppId,
    /// The run's candidate.
    pub candidate: String,
    /// Its state.
    pub state: UnitState,
    /// Leases so far (the fencing token's counter).
    pub attempt: u32,
    /// Leases that expired with their worker.
    pub losses: u32,
    /// Who holds (or last held) it.
    pub lease_owner: Option<String>,
    /// When the current lease expires, ms since the epoch.
    pub lease_expires_ms: Option<i64>,
    /// The coordinator's spec, JSON text.
    pub spec: String,
    /// What it is.
    pub kind: UnitKind,
    /// When it was queued.
    pub created_ms: i64,
    /// When it was committed.
    pub committed_ms: Option<i64>,
    /// A sub-epoch's epoch and partition (`None` for a whole run).
    pub sub_epoch: Option<(u64, u64)>,
}

/// A worker's hold on a unit: the fencing token `(unit, attempt, owner)` and what it needs to work.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// The unit.
    pub unit: UnitId,
    /// Its run.
    pub run: RunId,
    /// The run's app.
    pub app: AppId,
    /// The run's candidate.
    pub candidate: String,
    /// The data version the run trains on.
    pub data_version: u64,
    /// This lease's attempt number (1 for the first lease).
    pub attempt: u32,
    /// The worker holding it.
    pub owner: String,
    /// The coordinator's spec, JSON text.
    pub spec: String,
    /// A sub-epoch unit's epoch, partition and input; `None` for a run unit.
    pub sub_epoch: Option<SubEpochLease>,
}

/// What a worker commits for a unit.
#[derive(Debug, Clone, PartialEq)]
pub enum UnitResult<'a> {
    /// The run finished with a model.
    Finished {
        /// Its validation quality in [0, 1].
        quality: f64,
        /// Its cost in seconds.
        cost_seconds: f64,
        /// The checkpoint blob (put in the store before the commit).
        checkpoint: &'a BlobHash,
        /// How the quality was measured.
        validation: &'a RunValidation,
        /// The model's measured inference latency, seconds per example.
        infer_latency_seconds: f64,
        /// The trainer's trials, JSON text (at most [`crate::MAX_TRIALS_BYTES`]).
        trials: Option<&'a str>,
    },
    /// The run failed.
    Failed {
        /// Why.
        reason: &'a str,
        /// Its cost in seconds, when known.
        cost_seconds: Option<f64>,
        /// A latency measured before it failed (an untrained network over the limit).
        infer_latency_seconds: Option<f64>,
    },
}

/// A worker as it registers itself.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorker {
    /// Its id, unique in the store (see [`worker_id`]).
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// The device it trains on, e.g. `cpu` or `cuda:0`.
    pub device: String,
    /// Its intra-op threads.
    pub threads: u32,
    /// Its Slurm job (`<job>` or `<array job>_<task>`), when Slurm started it.
    pub slurm_job: Option<String>,
}

/// A worker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    /// Waiting for a unit.
    Idle,
    /// Working on a unit.
    Busy,
    /// Stopped in an orderly way.
    Stopped,
}

impl WorkerState {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Idle => "idle",
            WorkerState::Busy => "busy",
            WorkerState::Stopped => "stopped",
        }
    }

    fn parse(text: &str) -> WorkerState {
        match text {
            "idle" => WorkerState::Idle,
            "busy" => WorkerState::Busy,
            _ => WorkerState::Stopped,
        }
    }
}

/// A worker the store knows.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// Its id.
    pub id: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its device.
    pub device: String,
    /// Its intra-op threads.
    pub threads: u32,
    /// When it registered.
    pub started_ms: i64,
    /// Its last heartbeat.
    pub heartbeat_ms: i64,
    /// The unit it holds.
    pub unit: Option<UnitId>,
    /// Its state.
    pub state: WorkerState,
    /// Its Slurm job, when Slurm started it.
    pub slurm_job: Option<String>,
}

impl WorkerRecord {
    /// Whether it is working or waiting and heartbeat within `max_silence_ms` of `now`.
    pub fn is_live(&self, now: i64, max_silence_ms: i64) -> bool {
        self.state != WorkerState::Stopped && now - self.heartbeat_ms <= max_silence_ms
    }
}

/// A worker id: `<role>:<host>:<pid>:<8 random hex digits>` (the random part tells apart two
/// processes that reuse a pid).
pub fn worker_id(role: &str, host: &str, pid: u32) -> String {
    let mut bytes = [0u8; 4];
    let random = getrandom::fill(&mut bytes)
        .map(|()| u32::from_le_bytes(bytes))
        .unwrap_or_else(|_| now_ms() as u32);
    format!("{role}:{host}:{pid}:{random:08x}")
}

const UNIT_COLUMNS: &str = "u.id, u.run, r.app, r.candidate, u.state, u.attempt, u.losses, u.lease_owner, u.lease_expires_ms, u.spec, u.created_ms, u.committed_ms, u.kind, u.epoch, u.part";

fn unit_from_row(row: &Row) -> DbResult<UnitRecord> {
    Ok(UnitRecord {
        id: UnitId(row.get(0)?),
        run: RunId(row.get(1)?),
        app: AppId(row.get(2)?),
        candidate: row.get(3)?,
        state: UnitState::parse(&row.get::<String>(4)?),
        attempt: row.get(5)?,
        losses: row.get(6)?,
        lease_owner: row.get(7)?,
        lease_expires_ms: row.get(8)?,
        spec: row.get(9)?,
        created_ms: row.get(10)?,
        committed_ms: row.get(11)?,
        kind: UnitKind::parse(&row.get::<String>(12)?),
        sub_epoch: match (row.get::<Option<i64>>(13)?, row.get::<Option<i64>>(14)?) {
            (Some(epoch), Some(part)) => Some((epoch.max(0) as u64, part.max(0) as u64)),
            _ => None,
        },
    })
}

/// A unit the lease query found: id, run, state, attempt, losses, last owner, kind, gang size.
type Leasable = (
    i64,
    i64,
    String,
    u32,
    u32,
    Option<String>,
    String,
    Option<i64>,
);

const SUB_EPOCH_COLUMNS: &str = "id, epoch, part, state, attempt, lease_owner, target_worker, input_sha256, result_sha256, seconds, seq, gang, endpoint, lease_expires_ms";

/// A stored hash; a malformed one (a store edited by hand) reads as none.
fn hash(text: Option<String>) -> Option<BlobHash> {
    text.and_then(|text| BlobHash::parse(&text).ok())
}

fn sub_epoch_from_row(row: &Row) -> DbResult<SubEpochRecord> {
    Ok(SubEpochRecord {
        unit: UnitId(row.get(0)?),
        epoch: row.get::<i64>(1)?.max(0) as u64,
        partition: row.get::<i64>(2)?.max(0) as u64,
        state: UnitState::parse(&row.get::<String>(3)?),
        attempt: row.get(4)?,
        lease_owner: row.get(5)?,
        target_worker: row.get(6)?,
        input: hash(row.get(7)?),
        result: hash(row.get(8)?),
        seconds: row.get(9)?,
        seq: row.get::<Option<i64>>(10)?.map(|seq| seq.max(0) as u64),
        gang: row.get::<Option<i64>>(11)?.map(|gang| gang.max(0) as u64),
        endpoint: row.get(12)?,
        lease_expires_ms: row.get(13)?,
    })
}

const WORKER_COLUMNS: &str =
    "id, host, pid, device, threads, started_ms, heartbeat_ms, unit, state, slurm_job";

fn worker_from_row(row: &Row) -> DbResult<WorkerRecord> {
    Ok(WorkerRecord {
        id: row.get(0)?,
        host: row.get(1)?,
        pid: row.get(2)?,
        device: row.get(3)?,
        threads: row.get(4)?,
        started_ms: row.get(5)?,
        heartbeat_ms: row.get(6)?,
        unit: row.get::<Option<i64>>(7)?.map(UnitId),
        state: WorkerState::parse(&row.get::<String>(8)?),
        slurm_job: row.get(9)?,
    })
}

/// The key of the coordinator's advisory lock on PostgreSQL (any fixed number: "easemlco").
const COORDINATOR_LOCK: i64 = 0x6561_7365_6d6c_636f;

fn ttl_ms(ttl: std::time::Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2)
}

impl Store {
    /// Queues a run of `candidate` on the app's current data version and its unit, in one
    /// transaction.
    pub fn queue_unit(
        &mut self,
        app: AppId,
        candidate: &str,
        spec: &str,
    ) -> Result<(RunId, UnitId)> {
        let context = format!("queueing a unit of `{candidate}`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let now = now_ms();
        let run = insert_queued_run(&transaction, app, candidate, now, &context)?;
        let unit = UnitId(
            transaction
                .query_row(
                    "INSERT INTO units (run, kind, spec, state, created_ms) VALUES (?1, 'run', ?2, 'queued', ?3) RETURNING id",
                    params![run.0, spec, now],
                    |row| row.get(0),
                )
                .map_err(db(context.clone()))?,
        );
        transaction.commit().map_err(db(context))?;
        Ok((run, unit))
    }

    /// Gives a queued run without a unit (queued before units existed, or by a store client) its
    /// unit; `None` when the run is not queued or already has one.
    pub fn queue_unit_for_run(&mut self, run: RunId, spec: &str) -> Result<Option<UnitId>> {
        let context = format!("queueing a unit for run {}", run.0);
        let inserted = self.connection.query_map(
            "INSERT INTO units (run, kind, spec, state, created_ms)
             SELECT id, 'run', ?2, 'queued', ?3 FROM runs
             WHERE id = ?1 AND state = 'queued' AND NOT EXISTS (SELECT 1 FROM units WHERE run = ?1)
             RETURNING id",
            params![run.0, spec, now_ms()],
            |row| row.get(0),
        );
        match inserted {
            Ok(ids) => Ok(ids.first().copied().map(UnitId)),
            // Another process gave it its unit meanwhile (`units.run` is unique).
            Err(error) if error.is_unique_violation() => Ok(None),
            Err(error) => Err(db(context)(error)),
        }
    }

    /// The queued runs that have no unit (queued by a store client, or before units existed), by id.
    pub fn queued_runs_without_unit(&self) -> Result<Vec<RunId>> {
        let context = "listing queued runs without a unit";
        self.connection
            .query_map("SELECT id FROM runs WHERE state = 'queued' AND NOT EXISTS (SELECT 1 FROM units WHERE units.run = runs.id) ORDER BY id", (), |row| Ok(RunId(row.get(0)?)))
            .map_err(db(context))
    }

    /// Leases the oldest unit that is queued or whose lease expired, to `owner` for `ttl`; `None`
    /// when there is none. A unit whose leases expired [`MAX_LOSSES`] times is not leased again:
    /// its run is failed (and the next unit looked at).
    pub fn lease_unit(&mut self, owner: &str, ttl: std::time::Duration) -> Result<Option<Lease>> {
        self.lease_where(owner, ttl, None, false)
    }

    /// [`Store::lease_unit`] among whole-run units only (the embedded engine's in-process worker,
    /// which reports each unit it trains as a run; MOP sub-epochs are for workers).
    pub fn lease_run_unit(
        &mut self,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<Lease>> {
        self.lease_where(owner, ttl, None, true)
    }

    /// Leases one given unit, if it is queued or its lease expired (the in-process worker takes
    /// the unit its coordinator just queued).
    pub fn lease_unit_by_id(
        &mut self,
        unit: UnitId,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<Lease>> {
        self.lease_where(owner, ttl, Some(unit), false)
    }

    fn lease_where(
        &mut self,
        owner: &str,
        ttl: std::time::Duration,
        only: Option<UnitId>,
        runs_only: bool,
    ) -> Result<Option<Lease>> {
        let context = format!("leasing a unit for worker `{owner}`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let now = now_ms();
        loop {
            // Open units only, through the partial index `units_open_by_rank` in ORDER BY's order,
            // so a lease reads a handful of rows however many units the store has done: a unit
            // that is not committed is queued or leased, and only a leased one has an expiry
            // (every change to `queued` clears it), so `queued OR expired` is written without a
            // second `state` term (which would make SQLite gather every open unit through
            // `units_by_state` and sort them: 1.3 ms against 8 us with 5,000 open units).
            let found: Option<Leasable> = transaction
                .query_row(
                    &format!(
                        "SELECT u.id, u.run, u.state, u.attempt, u.losses, u.lease_owner, u.kind, u.gang FROM units u
                         WHERE u.state <> 'committed'
                           AND (u.state = 'queued' OR u.lease_expires_ms < ?1)
                           AND (CAST(?2 AS BIGINT) IS NULL OR u.id = ?2)
                           AND (u.kind = 'run' OR (CAST(?5 AS BIGINT) = 0 AND
                             (u.target_worker IS NULL OR u.target_worker = ?3 OR NOT EXISTS (
                                SELECT 1 FROM workers w WHERE w.id = u.target_worker AND w.state <> 'stopped' AND w.heartbeat_ms >= ?4))
                             AND (u.gang IS NOT NULL OR NOT EXISTS (SELECT 1 FROM units o WHERE o.run = u.run AND o.id <> u.id AND o.state = 'leased' AND o.lease_expires_ms >= ?1))
                             AND (u.gang IS NULL OR u.gang <= (SELECT COUNT(*) FROM workers w WHERE w.state <> 'stopped' AND w.heartbeat_ms >= ?4 AND w.id NOT LIKE '{IN_PROCESS_ROLE}:%'))
                             AND NOT EXISTS (SELECT 1 FROM units o WHERE o.run = u.run AND o.kind = 'sub_epoch' AND o.epoch < u.epoch AND o.state <> 'committed')
                             AND EXISTS (SELECT 1 FROM runs r WHERE r.id = u.run AND r.state IN ('queued', 'running'))))
                         ORDER BY u.lease_rank, u.id LIMIT 1{}",
                        transaction.dialect().for_update_skip_locked()
                    ),
                    params![
                        now,
                        only.map(|unit| unit.0),
                        owner,
                        now - ttl_ms(ttl),
                        i64::from(runs_only)
                    ],
                    |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                            row.get(5)?,
                            row.get(6)?,
                            row.get(7)?,
                        ))
                    },
                )
                .optional()
                .map_err(db(context.clone()))?;
            let Some((unit, run, state, attempt, losses, previous_owner, kind, gang)) = found
            else {
                transaction.commit().map_err(db(context))?;
                return Ok(None);
            };
            let kind = UnitKind::parse(&kind);
            let losses = losses + u32::from(state == "leased");
            if losses >= MAX_LOSSES {
                let reason = format!(
                    "lost with its worker {losses} times (last held by `{}`): each worker that took it stopped heartbeating (or, for a gang rank, its gang's gradient ring broke) before it finished, so it is not tried again",
                    previous_owner.unwrap_or_default()
                );
                transaction
                    .execute(
                        "UPDATE runs SET state = 'failed', error = ?1, finished_ms = ?2 WHERE id = ?3",
                        params![reason, now, run],
                    )
                    .map_err(db(context.clone()))?;
                transaction
                    .execute(
                        "UPDATE units SET state = 'committed', losses = ?1, committed_ms = ?2, lease_expires_ms = NULL WHERE id = ?3",
                        params![losses, now, unit],
                    )
                    .map_err(db(context.clone()))?;
                // A failed MOP run's other sub-epochs are closed with it.
                transaction
                    .execute(
                        "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE run = ?2 AND state <> 'committed'",
                        params![now, run],
                    )
                    .map_err(db(context.clone()))?;
                continue;
            }
            if kind == UnitKind::SubEpoch && gang.is_none() {
                // "The model is not training elsewhere" once more, under the run's row lock:
                // PostgreSQL's SKIP LOCKED lets two transactions pick two units of one run at
                // once (neither sees the other's lease before it commits); the second waits here
                // for the first, then sees its lease and looks for another unit. (SQLite
                // serializes writers: the check holds already.)
                locked_run_state(&transaction, RunId(run), &context)?;
                let busy: Option<i64> = transaction
                    .query_row(
                        "SELECT id FROM units WHERE run = ?1 AND id <> ?2 AND state = 'leased' AND lease_expires_ms >= ?3 LIMIT 1",
                        params![run, unit, now],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(db(context.clone()))?;
                if busy.is_some() {
                    continue;
                }
            }
            // A sub-epoch starts from its run's last committed result, or (none yet) from the
            // run's initial state, queued as its first units' input.
            let input: Option<String> = match kind {
                UnitKind::Run => None,
                UnitKind::SubEpoch => {
                    last_result(&transaction, run).map_err(db(context.clone()))?
                }
            };
            transaction
                .execute(
                    "UPDATE units SET state = 'leased', attempt = ?1, losses = ?2, lease_owner = ?3, lease_expires_ms = ?4, input_sha256 = COALESCE(?5, input_sha256), endpoint = NULL WHERE id = ?6",
                    params![attempt + 1, losses, owner, now + ttl_ms(ttl), input, unit],
                )
                .map_err(db(context.clone()))?;
            let started = match kind {
                // A run's start is its first lease; a MOP run's units keep it.
                UnitKind::Run => "UPDATE runs SET state = 'running', started_ms = ?1 WHERE id = ?2",
                UnitKind::SubEpoch => {
                    "UPDATE runs SET state = 'running', started_ms = COALESCE(started_ms, ?1) WHERE id = ?2"
                }
            };
            transaction
                .execute(started, params![now, run])
                .map_err(db(context.clone()))?;
            let lease = transaction
                .query_row(
                    "SELECT u.id, u.run, r.app, r.candidate, r.data_version, u.attempt, u.lease_owner, u.spec, u.epoch, u.part, u.input_sha256
                     FROM units u JOIN runs r ON r.id = u.run WHERE u.id = ?1",
                    [unit],
                    |row| {
                        let sub_epoch = match kind {
                            UnitKind::Run => None,
                            UnitKind::SubEpoch => Some(SubEpochLease {
                                epoch: row.get::<Option<i64>>(8)?.unwrap_or(0).max(0) as u64,
                                partition: row.get::<Option<i64>>(9)?.unwrap_or(0).max(0) as u64,
                                input: hash(row.get(10)?),
                                gang: gang.map(|gang| gang.max(0) as u64),
                            }),
                        };
                        Ok(Lease {
                            unit: UnitId(row.get(0)?),
                            run: RunId(row.get(1)?),
                            app: AppId(row.get(2)?),
                            candidate: row.get(3)?,
                            data_version: row.get::<i64>(4)? as u64,
                            attempt: row.get(5)?,
                            owner: row.get(6)?,
                            spec: row.get(7)?,
                            sub_epoch,
                        })
                    },
                )
                .map_err(db(context.clone()))?;
            transaction.commit().map_err(db(context))?;
            return Ok(Some(lease));
        }
    }

    /// Extends a lease by `ttl` from now; `false` when the lease is no longer the worker's (it
    /// expired and another worker took the unit, or the unit was committed).
    pub fn renew_lease(&mut self, lease: &Lease, ttl: std::time::Duration) -> Result<bool> {
        let changed = self
            .connection
            .execute(
                "UPDATE units SET lease_expires_ms = ?1 WHERE id = ?2 AND attempt = ?3 AND lease_owner = ?4 AND state = 'leased'",
                params![now_ms() + ttl_ms(ttl), lease.unit.0, lease.attempt, lease.owner],
            )
            .map_err(db(format!("renewing the lease of unit {}", lease.unit.0)))?;
        Ok(changed == 1)
    }

    /// Gives a lease back (a worker stopping in an orderly way): the unit and its run are queued
    /// again, without counting a loss. `false` when the lease was no longer the worker's.
    pub fn release_lease(&mut self, lease: &Lease) -> Result<bool> {
        self.give_back(lease, false)
    }

    /// Gives a lease back after a failure that may be the unit's own (a gang rank whose ring broke
    /// once every rank had joined): the unit is queued again with one more loss, so a gang that
    /// keeps breaking fails its run after [`MAX_LOSSES`] as a unit that kills its workers does.
    /// `false` when the lease was no longer the worker's.
    pub fn release_lease_as_lost(&mut self, lease: &Lease) -> Result<bool> {
        self.give_back(lease, true)
    }

    /// [`Store::release_lease`] and [`Store::release_lease_as_lost`]: the fenced update, `lost`
    /// counting a loss.
    fn give_back(&mut self, lease: &Lease, lost: bool) -> Result<bool> {
        let context = format!(
            "giving back the lease of unit {}{}",
            lease.unit.0,
            if lost { " as lost" } else { "" }
        );
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let changed = transaction
            .execute(
                "UPDATE units SET state = 'queued', lease_expires_ms = NULL, losses = losses + ?4 WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND state = 'leased'",
                params![lease.unit.0, lease.attempt, lease.owner, i64::from(lost)],
            )
            .map_err(db(context.clone()))?;
        // A MOP run stays running: its other sub-epochs may be committed.
        if changed == 1 && lease.sub_epoch.is_none() {
            transaction
                .execute(
                    "UPDATE runs SET state = 'queued', started_ms = NULL WHERE id = ?1",
                    [lease.run.0],
                )
                .map_err(db(context.clone()))?;
        }
        transaction.commit().map_err(db(context))?;
        Ok(changed == 1)
    }

    /// Writes a gang rank's gradient listener (`host:port`) on its unit, under the lease's
    /// fencing token; `false` when the lease is no longer the worker's.
    pub fn set_gang_endpoint(&mut self, lease: &Lease, endpoint: &str) -> Result<bool> {
        if lease.sub_epoch.as_ref().is_none_or(|at| at.gang.is_none()) {
            return Err(Error::InvalidInput(format!(
                "unit {} is not a gang rank: it has no gradient listener",
                lease.unit.0
            )));
        }
        let changed = self
            .connection
            .execute(
                "UPDATE units SET endpoint = ?1 WHERE id = ?2 AND attempt = ?3 AND lease_owner = ?4 AND state = 'leased'",
                params![endpoint, lease.unit.0, lease.attempt, lease.owner],
            )
            .map_err(db(format!(
                "writing the gradient listener of unit {}",
                lease.unit.0
            )))?;
        Ok(changed == 1)
    }

    /// Turns a data-parallel run's queued gang ranks into hops (the coordinator's answer to fewer
    /// live workers than the gang needs: the ranks would never be leased), in one transaction,
    /// unless a unit of the run is under a live lease (a gang may be forming: try again later).
    /// Committed epochs keep their gang. Returns the units changed.
    pub fn hop_instead_of_gang(&mut self, run: RunId) -> Result<usize> {
        let context = format!("turning run {}'s gangs into hops", run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        locked_run_state(&transaction, run, &context)?;
        let now = now_ms();
        let leased: Option<i64> = transaction
            .query_row(
                "SELECT id FROM units WHERE run = ?1 AND state = 'leased' AND lease_expires_ms >= ?2 LIMIT 1",
                params![run.0, now],
                |row| row.get(0),
            )
            .optional()
            .map_err(db(context.clone()))?;
        if leased.is_some() {
            transaction.commit().map_err(db(context))?;
            return Ok(0);
        }
        let changed = transaction
            .execute(
                "UPDATE units SET gang = NULL, endpoint = NULL WHERE run = ?1 AND kind = 'sub_epoch' AND gang IS NOT NULL AND state <> 'committed'",
                [run.0],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(changed)
    }

    /// The ranks of a data-parallel epoch (the run's sub-epoch units of `epoch`), by rank.
    pub fn gang(&self, run: RunId, epoch: u64) -> Result<Vec<SubEpochRecord>> {
        self.connection
            .query_map(
                &format!(
                    "SELECT {SUB_EPOCH_COLUMNS} FROM units WHERE run = ?1 AND kind = 'sub_epoch' AND epoch = ?2 ORDER BY part"
                ),
                params![run.0, epoch as i64],
                sub_epoch_from_row,
            )
            .map_err(db(format!(
                "reading epoch {epoch}'s gang of run {}",
                run.0
            )))
    }

    /// Drops a leased unit with its run, as if it had never started: a run that the training
    /// session's end cut before it had a model (a fitted model that is not a network has nothing
    /// to show before its fit ends). Neither a failure (the candidate is not bad) nor a loss (no
    /// worker died): the run is gone, so a later session's scheduler finds the candidate untried.
    /// Fenced like a commit: `false`, and nothing changed, when the unit no longer holds this
    /// lease's token. A MOP sub-epoch's lease is refused (its run goes on).
    pub fn abandon_unit(&mut self, lease: &Lease) -> Result<bool> {
        if lease.sub_epoch.is_some() {
            return Err(Error::InvalidInput(format!(
                "unit {} is a sub-epoch of MOP run {}: it is not dropped with its run (give it back with release_lease)",
                lease.unit.0, lease.run.0
            )));
        }
        let context = format!("dropping unit {} (run {})", lease.unit.0, lease.run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let held: Option<i64> = transaction
            .query_row(
                &format!(
                    "SELECT run FROM units WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND state = 'leased'{}",
                    transaction.dialect().for_update()
                ),
                params![lease.unit.0, lease.attempt, lease.owner],
                |row| row.get(0),
            )
            .optional()
            .map_err(db(context.clone()))?;
        if let Some(run) = held {
            // The unit goes with its run (ON DELETE CASCADE).
            transaction
                .execute("DELETE FROM runs WHERE id = ?1", [run])
                .map_err(db(context.clone()))?;
        }
        transaction.commit().map_err(db(context))?;
        Ok(held.is_some())
    }

    /// Commits a unit's result with the lease's fencing token: the run's outcome and the unit's
    /// `committed` state in one transaction. [`Error::StaleLease`] (and nothing written) when the
    /// unit no longer holds this token: another worker leased it after this lease expired, or it
    /// was committed already. A sub-epoch unit is committed with [`Store::commit_sub_epoch`].
    pub fn commit_unit(&mut self, lease: &Lease, result: &UnitResult<'_>) -> Result<()> {
        let run = lease.run;
        if lease.sub_epoch.is_some() {
            return Err(Error::InvalidInput(format!(
                "unit {} is a sub-epoch of run {}: commit it with its training state (commit_sub_epoch), not a run's result",
                lease.unit.0, run.0
            )));
        }
        check_result(run, result)?;
        let context = format!("committing unit {} (run {})", lease.unit.0, run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        check_token(&transaction, lease, &context)?;
        let now = now_ms();
        write_run_result(&transaction, run, result, now).map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE id = ?2",
                params![now, lease.unit.0],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))
    }

    /// Queues a MOP run of `candidate` on the app's current data version with its first sub-epoch
    /// units starting from the training state `initial` (a blob put before), in one transaction (so the run is never without units: no coordinator gives it a
    /// whole-run unit meanwhile).
    pub fn queue_sub_epoch_run(
        &mut self,
        app: AppId,
        candidate: &str,
        initial: &BlobHash,
        units: &[NewSubEpoch<'_>],
    ) -> Result<(RunId, Vec<UnitId>)> {
        if units.is_empty() {
            return Err(Error::InvalidInput(format!(
                "a MOP run of `{candidate}` needs at least one sub-epoch unit"
            )));
        }
        let context = format!("queueing a MOP run of `{candidate}`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let now = now_ms();
        let run = insert_queued_run(&transaction, app, candidate, now, &context)?;
        let ids = insert_sub_epochs(&transaction, run, units, now).map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE units SET input_sha256 = ?1 WHERE run = ?2",
                params![initial.as_str(), run.0],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok((run, ids))
    }

    /// Queues more sub-epoch units of a MOP run (the next epoch's); a (run, epoch, partition)
    /// already queued is left as it is. Returns the new units.
    pub fn queue_sub_epochs(
        &mut self,
        run: RunId,
        units: &[NewSubEpoch<'_>],
    ) -> Result<Vec<UnitId>> {
        let context = format!("queueing sub-epochs of run {}", run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        match locked_run_state(&transaction, run, &context)?.as_str() {
            "queued" | "running" => {}
            state => {
                return Err(Error::InvalidInput(format!(
                    "run {} is {state}: it takes no more sub-epochs",
                    run.0
                )));
            }
        }
        let mut missing = Vec::new();
        for unit in units {
            let exists: Option<i64> = transaction
                .query_row(
                    "SELECT id FROM units WHERE run = ?1 AND kind = 'sub_epoch' AND epoch = ?2 AND part = ?3",
                    params![run.0, unit.epoch as i64, unit.partition as i64],
                    |row| row.get(0),
                )
                .optional()
                .map_err(db(context.clone()))?;
            if exists.is_none() {
                missing.push(unit.clone());
            }
        }
        let ids = insert_sub_epochs(&transaction, run, &missing, now_ms())
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(ids)
    }

    /// Commits a sub-epoch unit: the training state it ended with (`result`, a blob put in the
    /// store before) and its worker's `seconds` become the next entry of its run's visit log; the
    /// run stays open. Refused ([`Error::StaleLease`], nothing written) when the unit no longer
    /// holds the lease's token, exactly as [`Store::commit_unit`]; and refused, with the unit
    /// queued again, when another sub-epoch of the run was committed since this one was leased
    /// (its input is no longer the run's last result: see the module docs).
    pub fn commit_sub_epoch(
        &mut self,
        lease: &Lease,
        result: &BlobHash,
        seconds: f64,
    ) -> Result<()> {
        let run = lease.run;
        let Some(sub_epoch) = &lease.sub_epoch else {
            return Err(Error::InvalidInput(format!(
                "unit {} is a whole run (run {}): commit it with its run's result (commit_unit)",
                lease.unit.0, run.0
            )));
        };
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(Error::InvalidInput(format!(
                "unit {}: a sub-epoch's seconds must be a non-negative number, not {seconds}",
                lease.unit.0
            )));
        }
        if sub_epoch.gang.is_some() && sub_epoch.partition != 0 {
            return Err(Error::InvalidInput(format!(
                "unit {} is rank {} of a gang: only rank 0 commits its epoch's state",
                lease.unit.0, sub_epoch.partition
            )));
        }
        let context = format!("committing sub-epoch unit {} (run {})", lease.unit.0, run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        // One commit per run at a time (PostgreSQL; SQLite's IMMEDIATE serializes all).
        transaction
            .query_row(
                &format!(
                    "SELECT id FROM runs WHERE id = ?1{}",
                    transaction.dialect().for_update()
                ),
                [run.0],
                |row| row.get::<i64>(0),
            )
            .optional()
            .map_err(db(context.clone()))?;
        check_token(&transaction, lease, &context)?;
        // Nothing committed yet: the lease started from the initial state, still the head.
        let head = last_result(&transaction, run.0).map_err(db(context.clone()))?;
        let input = sub_epoch
            .input
            .as_ref()
            .map(|hash| hash.as_str().to_owned());
        if head.is_some() && head != input {
            transaction
                .execute(
                    "UPDATE units SET state = 'queued', lease_expires_ms = NULL WHERE id = ?1",
                    [lease.unit.0],
                )
                .map_err(db(context.clone()))?;
            transaction.commit().map_err(db(context))?;
            return Err(Error::StaleLease {
                unit: lease.unit.0,
                attempt: lease.attempt,
                owner: lease.owner.clone(),
                now: "queued again: another sub-epoch of its run was committed since it was leased, so it must start from that one's state".to_owned(),
            });
        }
        let seq: i64 = transaction
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM units WHERE run = ?1",
                [run.0],
                |row| row.get(0),
            )
            .map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL, result_sha256 = ?2, seconds = ?3, seq = ?4 WHERE id = ?5",
                params![now_ms(), result.as_str(), seconds, seq, lease.unit.0],
            )
            .map_err(db(context.clone()))?;
        if sub_epoch.gang.is_some() {
            // The gang's state is rank 0's: the epoch's other ranks are done with it (a rank
            // still waiting for a re-formed gang finds its lease gone).
            transaction
                .execute(
                    "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE run = ?2 AND kind = 'sub_epoch' AND epoch = ?3 AND state <> 'committed'",
                    params![now_ms(), run.0, sub_epoch.epoch as i64],
                )
                .map_err(db(context.clone()))?;
        }
        transaction.commit().map_err(db(context))
    }

    /// Fails a MOP run from one of its sub-epochs (its training diverged, or its data is gone),
    /// with the lease's fencing token: the unit is committed without a result and the run failed
    /// with `reason`, in one transaction; its other units are never leased again. Refused
    /// ([`Error::StaleLease`], nothing written) as [`Store::commit_sub_epoch`] is.
    pub fn fail_sub_epoch_run(
        &mut self,
        lease: &Lease,
        reason: &str,
        cost_seconds: Option<f64>,
    ) -> Result<()> {
        if lease.sub_epoch.is_none() {
            return Err(Error::InvalidInput(format!(
                "unit {} is a whole run (run {}): commit its failure with commit_unit",
                lease.unit.0, lease.run.0
            )));
        }
        let context = format!("failing MOP run {} from unit {}", lease.run.0, lease.unit.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        check_token(&transaction, lease, &context)?;
        let now = now_ms();
        write_run_result(
            &transaction,
            lease.run,
            &UnitResult::Failed {
                reason,
                cost_seconds,
                infer_latency_seconds: None,
            },
            now,
        )
        .map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE run = ?2 AND state <> 'committed'",
                params![now, lease.run.0],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))
    }

    /// A MOP run's sub-epoch units: the committed ones in visit-log order (`seq`), then the
    /// others by epoch and partition.
    pub fn sub_epochs(&self, run: RunId) -> Result<Vec<SubEpochRecord>> {
        self.connection
            .query_map(
                &format!(
                    "SELECT {SUB_EPOCH_COLUMNS} FROM units WHERE run = ?1 AND kind = 'sub_epoch'
                     ORDER BY CASE WHEN seq IS NULL THEN 1 ELSE 0 END, seq, epoch, part"
                ),
                [run.0],
                sub_epoch_from_row,
            )
            .map_err(db(format!("reading the sub-epochs of run {}", run.0)))
    }

    /// Addresses the queued sub-epochs of a MOP run's `partition` to `worker` (the worker that took
    /// the partition over from a gone one and now holds its rows: replica-aware placement).
    /// Returns how many units changed; units leased or committed keep their address.
    pub fn retarget_sub_epochs(
        &mut self,
        run: RunId,
        partition: u64,
        worker: &str,
    ) -> Result<usize> {
        self.connection
            .execute(
                "UPDATE units SET target_worker = ?1 WHERE run = ?2 AND kind = 'sub_epoch' AND part = ?3 AND state = 'queued' AND (target_worker IS NULL OR target_worker <> ?1)",
                params![worker, run.0, partition as i64],
            )
            .map_err(db(format!(
                "addressing partition {partition} of run {} to `{worker}`",
                run.0
            )))
    }

    /// Stops a MOP run's training early (its coordinator's early stopping): every unit of the run
    /// not committed yet is closed (committed without a result: never leased again; a worker
    /// holding one finds its lease gone when it commits, and nothing of its sub-epoch is
    /// recorded). The run stays open for [`Store::finish_sub_epoch_run`]. Returns how many units
    /// were closed; refused when the run is not open.
    pub fn close_sub_epochs(&mut self, run: RunId) -> Result<usize> {
        let context = format!("stopping MOP run {} early", run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        match locked_run_state(&transaction, run, &context)?.as_str() {
            "queued" | "running" => {}
            state => {
                return Err(Error::InvalidInput(format!(
                    "run {} is {state}: there is no training to stop",
                    run.0
                )));
            }
        }
        let closed = transaction
            .execute(
                "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE run = ?2 AND kind = 'sub_epoch' AND state <> 'committed'",
                params![now_ms(), run.0],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(closed)
    }

    /// Records a MOP run's outcome (its coordinator's last step, once every sub-epoch is
    /// committed): the same values as [`Store::commit_unit`]. Refused when the run is not open or
    /// has a sub-epoch that is not committed.
    pub fn finish_sub_epoch_run(&mut self, run: RunId, result: &UnitResult<'_>) -> Result<()> {
        check_result(run, result)?;
        let context = format!("finishing MOP run {}", run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        match locked_run_state(&transaction, run, &context)?.as_str() {
            "queued" | "running" => {}
            state => {
                return Err(Error::InvalidInput(format!(
                    "run {} is {state} already: its outcome is not recorded again",
                    run.0
                )));
            }
        }
        let open: i64 = transaction
            .query_row(
                "SELECT COUNT(*) FROM units WHERE run = ?1 AND state <> 'committed'",
                [run.0],
                |row| row.get(0),
            )
            .map_err(db(context.clone()))?;
        if open > 0 {
            return Err(Error::InvalidInput(format!(
                "run {} has {open} sub-epoch unit(s) not committed yet: finish it after them",
                run.0
            )));
        }
        write_run_result(&transaction, run, result, now_ms()).map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))
    }

    /// Removes a unit that no worker has leased yet, with its run (nothing ran); `false` when it
    /// was leased (or committed) meanwhile.
    pub fn cancel_queued_unit(&mut self, unit: UnitId) -> Result<bool> {
        let context = format!("cancelling unit {}", unit.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let run: Option<i64> = transaction
            .query_row(
                &format!(
                    "SELECT run FROM units WHERE id = ?1 AND state = 'queued'{}",
                    transaction.dialect().for_update()
                ),
                [unit.0],
                |row| row.get(0),
            )
            .optional()
            .map_err(db(context.clone()))?;
        if let Some(run) = run {
            // The unit goes with its run (ON DELETE CASCADE).
            transaction
                .execute("DELETE FROM runs WHERE id = ?1", [run])
                .map_err(db(context.clone()))?;
        }
        transaction.commit().map_err(db(context))?;
        Ok(run.is_some())
    }

    /// Gives back every lease held by an owner whose id starts with `prefix` (a coordinator that
    /// holds the store's train lock gives back the leases of its dead predecessor's in-process
    /// worker); returns how many.
    pub fn release_leases_of(&mut self, prefix: &str) -> Result<usize> {
        let context = format!("giving back the leases of `{prefix}*`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE runs SET state = 'queued', started_ms = NULL WHERE id IN
                 (SELECT run FROM units WHERE kind = 'run' AND state = 'leased' AND substr(lease_owner, 1, ?2) = ?1)",
                params![prefix, prefix.chars().count()],
            )
            .map_err(db(context.clone()))?;
        let released = transaction
            .execute(
                "UPDATE units SET state = 'queued', lease_expires_ms = NULL WHERE state = 'leased' AND substr(lease_owner, 1, ?2) = ?1",
                params![prefix, prefix.chars().count()],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(released)
    }

    /// One unit.
    pub fn unit(&self, unit: UnitId) -> Result<UnitRecord> {
        self.connection
            .query_row(
                &format!(
                    "SELECT {UNIT_COLUMNS} FROM units u JOIN runs r ON r.id = u.run WHERE u.id = ?1"
                ),
                [unit.0],
                unit_from_row,
            )
            .optional()
            .map_err(db(format!("reading unit {}", unit.0)))?
            .ok_or(Error::NoSuchUnit(unit.0))
    }

    /// The unit of a run (task parallelism), if it has one; a MOP run's units are its
    /// [`Store::sub_epochs`].
    pub fn unit_of_run(&self, run: RunId) -> Result<Option<UnitRecord>> {
        self.connection
            .query_row(
                &format!("SELECT {UNIT_COLUMNS} FROM units u JOIN runs r ON r.id = u.run WHERE u.run = ?1 AND u.kind = 'run'"),
                [run.0],
                unit_from_row,
            )
            .optional()
            .map_err(db(format!("reading the unit of run {}", run.0)))
    }

    /// Every unit that is not committed, oldest first.
    pub fn open_units(&self) -> Result<Vec<UnitRecord>> {
        let context = "listing open units";
        self.connection
            .query_map(&format!(
                "SELECT {UNIT_COLUMNS} FROM units u JOIN runs r ON r.id = u.run WHERE u.state <> 'committed' ORDER BY u.id"
            ), (), unit_from_row)
            .map_err(db(context))
    }

    /// Takes the store's coordinator lock, held until this connection closes (its process ends):
    /// `false` when another coordinator holds it. On PostgreSQL an advisory lock (a store shared
    /// by hosts); on SQLite always `true`: there the coordinator's file lock (`train.lock` in the
    /// store's folder) is the lock.
    pub fn try_lock_coordinator(&self) -> Result<bool> {
        match self.dialect() {
            crate::db::Dialect::Sqlite => Ok(true),
            crate::db::Dialect::Postgres => self
                .connection
                .query_row(
                    "SELECT pg_try_advisory_lock(?1)",
                    [COORDINATOR_LOCK],
                    |row| row.get(0),
                )
                .map_err(db("taking the coordinator lock")),
        }
    }

    // ----- workers -----

    /// Registers a worker (idle, heartbeat now).
    pub fn register_worker(&mut self, worker: &NewWorker) -> Result<()> {
        let now = now_ms();
        self.connection
            .execute(
                "INSERT INTO workers (id, host, pid, device, threads, started_ms, heartbeat_ms, unit, state, slurm_job) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, NULL, 'idle', ?7)",
                params![
                    worker.id,
                    worker.host,
                    worker.pid,
                    worker.device,
                    worker.threads,
                    now,
                    worker.slurm_job
                ],
            )
            .map_err(db(format!("registering worker `{}`", worker.id)))?;
        Ok(())
    }

    /// A worker's heartbeat: its state and the unit it holds.
    pub fn worker_heartbeat(
        &mut self,
        id: &str,
        state: WorkerState,
        unit: Option<UnitId>,
    ) -> Result<()> {
        self.connection
            .execute(
                "UPDATE workers SET heartbeat_ms = ?1, state = ?2, unit = ?3 WHERE id = ?4",
                params![now_ms(), state.as_str(), unit.map(|unit| unit.0), id],
            )
            .map_err(db(format!("recording a heartbeat of worker `{id}`")))?;
        Ok(())
    }

    /// Every worker the store knows, by start time.
    pub fn workers(&self) -> Result<Vec<WorkerRecord>> {
        let context = "listing workers";
        self.connection
            .query_map(
                &format!("SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_ms, id"),
                (),
                worker_from_row,
            )
            .map_err(db(context))
    }
}

/// Checks a run result's values before any transaction.
fn check_result(run: RunId, result: &UnitResult<'_>) -> Result<()> {
    if let UnitResult::Finished {
        quality,
        cost_seconds,
        validation,
        infer_latency_seconds,
        trials,
        ..
    } = result
    {
        crate::store::check_finished_values(run, *quality, *cost_seconds, validation)?;
        crate::store::non_negative(run, *infer_latency_seconds, || {
            format!("inference latency {infer_latency_seconds} s")
        })?;
        crate::store::check_trials_size(run, trials.map_or(0, str::len))?;
    }
    Ok(())
}

/// [`Error::StaleLease`] unless the unit still holds the lease's fencing token (its row locked on
/// PostgreSQL until the transaction ends).
fn check_token(transaction: &db::Transaction<'_>, lease: &Lease, context: &str) -> Result<()> {
    let current: Option<(String, u32, Option<String>)> = transaction
        .query_row(
            &format!(
                "SELECT state, attempt, lease_owner FROM units WHERE id = ?1{}",
                transaction.dialect().for_update()
            ),
            [lease.unit.0],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()
        .map_err(db(context.to_owned()))?;
    let Some((state, attempt, owner)) = current else {
        return Err(Error::StaleLease {
            unit: lease.unit.0,
            attempt: lease.attempt,
            owner: lease.owner.clone(),
            now: "gone (its app was removed)".to_owned(),
        });
    };
    if state != "leased" || attempt != lease.attempt || owner.as_deref() != Some(&lease.owner) {
        return Err(Error::StaleLease {
            unit: lease.unit.0,
            attempt: lease.attempt,
            owner: lease.owner.clone(),
            now: format!(
                "{state} at attempt {attempt} by `{}`",
                owner.unwrap_or_default()
            ),
        });
    }
    Ok(())
}

/// Writes a run's outcome.
fn write_run_result(
    transaction: &db::Transaction<'_>,
    run: RunId,
    result: &UnitResult<'_>,
    now: i64,
) -> DbResult<usize> {
    match result {
        UnitResult::Finished {
            quality,
            cost_seconds,
            checkpoint,
            validation,
            infer_latency_seconds,
            trials,
        } => transaction.execute(
            "UPDATE runs SET state = 'done', quality = ?1, cost_seconds = ?2, checkpoint_sha256 = ?3, finished_ms = ?4, protocol = ?5, quality_std = ?6, validated_examples = ?7, infer_latency_seconds = ?8, trials = ?9, confusion = ?10, oof_sha256 = ?11, error = NULL WHERE id = ?12",
            params![
                quality,
                cost_seconds,
                checkpoint.as_str(),
                now,
                validation.protocol,
                validation.quality_std,
                validation.validated_examples.map(|count| count as i64),
                infer_latency_seconds,
                trials,
                validation.confusion,
                validation.oof.as_ref().map(|hash| hash.as_str()),
                run.0
            ],
        ),
        UnitResult::Failed {
            reason,
            cost_seconds,
            infer_latency_seconds,
        } => transaction.execute(
            "UPDATE runs SET state = 'failed', error = ?1, cost_seconds = ?2, finished_ms = ?3, infer_latency_seconds = COALESCE(?4, infer_latency_seconds) WHERE id = ?5",
            params![reason, cost_seconds, now, infer_latency_seconds, run.0],
        ),
    }
}

/// The result of a run's last committed sub-epoch (the head of its visit log), if any.
/// Inserts a queued run of `candidate` on the app's current data version (the first step of
/// queueing a whole-run unit and a MOP run alike); [`Error::NoSuchAppId`] for an unknown app.
fn insert_queued_run(
    transaction: &db::Transaction<'_>,
    app: AppId,
    candidate: &str,
    now: i64,
    context: &str,
) -> Result<RunId> {
    let data_version: i64 = transaction
        .query_row(
            "SELECT data_version FROM apps WHERE id = ?1",
            [app.0],
            |row| row.get(0),
        )
        .optional()
        .map_err(db(context.to_owned()))?
        .ok_or(Error::NoSuchAppId(app.0))?;
    let run = transaction
        .query_row(
            "INSERT INTO runs (app, candidate, state, data_version, queued_ms) VALUES (?1, ?2, 'queued', ?3, ?4) RETURNING id",
            params![app.0, candidate, data_version, now],
            |row| row.get(0),
        )
        .map_err(db(context.to_owned()))?;
    Ok(RunId(run))
}

fn last_result(connection: &db::Db, run: i64) -> DbResult<Option<String>> {
    Ok(connection
        .query_row(
            "SELECT result_sha256 FROM units WHERE run = ?1 AND kind = 'sub_epoch' AND seq IS NOT NULL ORDER BY seq DESC LIMIT 1",
            [run],
            |row| row.get::<Option<String>>(0),
        )
        .optional()?
        .flatten())
}

/// Inserts sub-epoch units of `run`.
fn insert_sub_epochs(
    connection: &db::Db,
    run: RunId,
    units: &[NewSubEpoch<'_>],
    now: i64,
) -> DbResult<Vec<UnitId>> {
    units
        .iter()
        .map(|unit| {
            connection
                .query_row(
                    "INSERT INTO units (run, kind, spec, state, created_ms, epoch, part, target_worker, lease_rank, gang) VALUES (?1, 'sub_epoch', ?2, 'queued', ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
                    params![
                        run.0,
                        unit.spec,
                        now,
                        unit.epoch as i64,
                        unit.partition as i64,
                        unit.target_worker,
                        unit.rank,
                        unit.gang.map(|gang| gang as i64)
                    ],
                    |row| row.get(0),
                )
                .map(UnitId)
        })
        .collect()
}
