//! Sub-epoch units (MOP runs) and gang ranks: queueing a run's sub-epochs, committing one into the
//! run's visit log, the gang's endpoints, and closing or failing the run.

use super::*;

pub(super) const SUB_EPOCH_COLUMNS: &str = "id, epoch, part, state, attempt, lease_owner, target_worker, input_sha256, result_sha256, seconds, seq, gang, endpoint, lease_expires_ms";

pub(super) fn sub_epoch_from_row(row: &Row) -> DbResult<SubEpochRecord> {
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

/// Inserts sub-epoch units of `run`.
pub(super) fn insert_sub_epochs(
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

impl Store {
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
}
