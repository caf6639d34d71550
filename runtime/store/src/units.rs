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

mod lease;
mod sub_epochs;
mod workers;

pub use workers::{NewWorker, WorkerRecord, WorkerState, worker_id};

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
    /// The run's number within its app (`RunRecord::number`).
    pub run_number: u64,
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
    /// The run's number within its app (`RunRecord::number`).
    pub run_number: u64,
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

const UNIT_COLUMNS: &str = "u.id, u.run, r.app, r.candidate, u.state, u.attempt, u.losses, u.lease_owner, u.lease_expires_ms, u.spec, u.created_ms, u.committed_ms, u.kind, u.epoch, u.part, r.number";

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
        run_number: row
            .get::<Option<i64>>(15)?
            .map_or(0, |number| number.max(0) as u64),
    })
}

/// A stored hash; a malformed one (a store edited by hand) reads as none.
fn hash(text: Option<String>) -> Option<BlobHash> {
    text.and_then(|text| BlobHash::parse(&text).ok())
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
    // The app's next run number, counted on its row (never reused, even for a run deleted later;
    // the row's update also orders two transactions making runs of one app).
    let number: i64 = transaction
        .query_row(
            "UPDATE apps SET runs_made = runs_made + 1 WHERE id = ?1 RETURNING runs_made",
            [app.0],
            |row| row.get(0),
        )
        .map_err(db(context.to_owned()))?;
    let run = transaction
        .query_row(
            "INSERT INTO runs (app, candidate, state, data_version, queued_ms, number) VALUES (?1, ?2, 'queued', ?3, ?4, ?5) RETURNING id",
            params![app.0, candidate, data_version, now, number],
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
