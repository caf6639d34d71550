//! Work units, their leases, and the workers that hold them: the protocol between a coordinator
//! (the engine) and workers (in its process, in other processes, on other hosts).
//!
//! A **unit** is a piece of work a worker can do alone; today a whole training run (`kind = 'run'`,
//! one unit per run). Its life:
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

use crate::blobs::BlobHash;
use crate::db::{DbResult, OptionalExt, Row};
use crate::params;
use crate::store::{AppId, RunId, RunValidation};
use crate::time::now_ms;
use crate::{Error, Result, Store, db};

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
    /// When it was queued.
    pub created_ms: i64,
    /// When it was committed.
    pub committed_ms: Option<i64>,
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

const UNIT_COLUMNS: &str = "u.id, u.run, r.app, r.candidate, u.state, u.attempt, u.losses, u.lease_owner, u.lease_expires_ms, u.spec, u.created_ms, u.committed_ms";

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
        let data_version: i64 = transaction
            .query_row(
                "SELECT data_version FROM apps WHERE id = ?1",
                [app.0],
                |row| row.get(0),
            )
            .optional()
            .map_err(db(context.clone()))?
            .ok_or(Error::NoSuchAppId(app.0))?;
        let now = now_ms();
        let run = RunId(
            transaction
                .query_row(
                    "INSERT INTO runs (app, candidate, state, data_version, queued_ms) VALUES (?1, ?2, 'queued', ?3, ?4) RETURNING id",
                    params![app.0, candidate, data_version, now],
                    |row| row.get(0),
                )
                .map_err(db(context.clone()))?,
        );
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
        self.lease_where(owner, ttl, None)
    }

    /// Leases one given unit, if it is queued or its lease expired (the in-process worker takes
    /// the unit its coordinator just queued).
    pub fn lease_unit_by_id(
        &mut self,
        unit: UnitId,
        owner: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<Lease>> {
        self.lease_where(owner, ttl, Some(unit))
    }

    fn lease_where(
        &mut self,
        owner: &str,
        ttl: std::time::Duration,
        only: Option<UnitId>,
    ) -> Result<Option<Lease>> {
        let context = format!("leasing a unit for worker `{owner}`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let now = now_ms();
        loop {
            let found: Option<(i64, i64, String, u32, u32, Option<String>)> = transaction
                .query_row(
                    &format!(
                        "SELECT u.id, u.run, u.state, u.attempt, u.losses, u.lease_owner FROM units u
                         WHERE (u.state = 'queued' OR (u.state = 'leased' AND u.lease_expires_ms < ?1))
                           AND (CAST(?2 AS BIGINT) IS NULL OR u.id = ?2)
                         ORDER BY u.id LIMIT 1{}",
                        transaction.dialect().for_update_skip_locked()
                    ),
                    params![now, only.map(|unit| unit.0)],
                    |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                            row.get(5)?,
                        ))
                    },
                )
                .optional()
                .map_err(db(context.clone()))?;
            let Some((unit, run, state, attempt, losses, previous_owner)) = found else {
                transaction.commit().map_err(db(context))?;
                return Ok(None);
            };
            let losses = losses + u32::from(state == "leased");
            if losses >= MAX_LOSSES {
                let reason = format!(
                    "lost with its worker {losses} times (last held by `{}`): each worker that took it stopped heartbeating before it finished, so it is not tried again",
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
                continue;
            }
            transaction
                .execute(
                    "UPDATE units SET state = 'leased', attempt = ?1, losses = ?2, lease_owner = ?3, lease_expires_ms = ?4 WHERE id = ?5",
                    params![attempt + 1, losses, owner, now + ttl_ms(ttl), unit],
                )
                .map_err(db(context.clone()))?;
            transaction
                .execute(
                    "UPDATE runs SET state = 'running', started_ms = ?1 WHERE id = ?2",
                    params![now, run],
                )
                .map_err(db(context.clone()))?;
            let lease = transaction
                .query_row(
                    "SELECT u.id, u.run, r.app, r.candidate, r.data_version, u.attempt, u.lease_owner, u.spec
                     FROM units u JOIN runs r ON r.id = u.run WHERE u.id = ?1",
                    [unit],
                    |row| {
                        Ok(Lease {
                            unit: UnitId(row.get(0)?),
                            run: RunId(row.get(1)?),
                            app: AppId(row.get(2)?),
                            candidate: row.get(3)?,
                            data_version: row.get::<i64>(4)? as u64,
                            attempt: row.get(5)?,
                            owner: row.get(6)?,
                            spec: row.get(7)?,
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
        let context = format!("giving back the lease of unit {}", lease.unit.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let changed = transaction
            .execute(
                "UPDATE units SET state = 'queued', lease_expires_ms = NULL WHERE id = ?1 AND attempt = ?2 AND lease_owner = ?3 AND state = 'leased'",
                params![lease.unit.0, lease.attempt, lease.owner],
            )
            .map_err(db(context.clone()))?;
        if changed == 1 {
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

    /// Drops a leased unit with its run, as if it had never started: a run that the training
    /// session's end cut before it had a model (a fitted model that is not a network has nothing
    /// to show before its fit ends). Neither a failure (the candidate is not bad) nor a loss (no
    /// worker died): the run is gone, so a later session's scheduler finds the candidate untried.
    /// Fenced like a commit: `false`, and nothing changed, when the unit no longer holds this
    /// lease's token.
    pub fn abandon_unit(&mut self, lease: &Lease) -> Result<bool> {
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
    /// was committed already.
    pub fn commit_unit(&mut self, lease: &Lease, result: &UnitResult<'_>) -> Result<()> {
        let run = lease.run;
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
        let context = format!("committing unit {} (run {})", lease.unit.0, run.0);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
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
            .map_err(db(context.clone()))?;
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
        let now = now_ms();
        match result {
            UnitResult::Finished {
                quality,
                cost_seconds,
                checkpoint,
                validation,
                infer_latency_seconds,
                trials,
            } => transaction.execute(
                "UPDATE runs SET state = 'done', quality = ?1, cost_seconds = ?2, checkpoint_sha256 = ?3, finished_ms = ?4, protocol = ?5, quality_std = ?6, validated_examples = ?7, infer_latency_seconds = ?8, trials = ?9, error = NULL WHERE id = ?10",
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
        .map_err(db(context.clone()))?;
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
                 (SELECT run FROM units WHERE state = 'leased' AND substr(lease_owner, 1, ?2) = ?1)",
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

    /// The unit of a run, if it has one.
    pub fn unit_of_run(&self, run: RunId) -> Result<Option<UnitRecord>> {
        self.connection
            .query_row(
                &format!("SELECT {UNIT_COLUMNS} FROM units u JOIN runs r ON r.id = u.run WHERE u.run = ?1"),
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
