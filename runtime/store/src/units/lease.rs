//! Leasing units: the lease query and its rules (see the module above), renewing a lease and giving
//! it back.

use super::*;

/// A unit the lease query found: id, run, state, attempt, losses, last owner, kind, gang size.
pub(super) type Leasable = (
    i64,
    i64,
    String,
    u32,
    u32,
    Option<String>,
    String,
    Option<i64>,
);

/// What a worker asks to lease (see [`Store::lease_unit`]), and when.
pub(super) struct Wanted<'a> {
    owner: &'a str,
    ttl: std::time::Duration,
    only: Option<UnitId>,
    runs_only: bool,
    now: i64,
}

/// The next unit the lease rules allow `want` to take, if any.
pub(super) fn next_leasable(
    transaction: &db::Transaction<'_>,
    want: &Wanted<'_>,
) -> DbResult<Option<Leasable>> {
    let Wanted {
        owner,
        ttl,
        only,
        runs_only,
        now,
    } = *want;
    // Open units only, through the partial index `units_open_by_rank` in ORDER BY's order,
    // so a lease reads a handful of rows however many units the store has done: a unit
    // that is not committed is queued or leased, and only a leased one has an expiry
    // (every change to `queued` clears it), so `queued OR expired` is written without a
    // second `state` term (which would make SQLite gather every open unit through
    // `units_by_state` and sort them: 1.3 ms against 8 us with 5,000 open units).
    transaction
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
}

/// Fails the run of a unit lost with its workers [`MAX_LOSSES`] times, and closes its units.
pub(super) fn fail_lost_unit(
    transaction: &db::Transaction<'_>,
    (unit, run): (i64, i64),
    losses: u32,
    previous_owner: Option<String>,
    now: i64,
    context: &str,
) -> Result<()> {
    let reason = format!(
        "lost with its worker {losses} times (last held by `{}`): each worker that took it stopped heartbeating (or, for a gang rank, its gang's gradient ring broke) before it finished, so it is not tried again",
        previous_owner.unwrap_or_default()
    );
    transaction
        .execute(
            "UPDATE runs SET state = 'failed', error = ?1, finished_ms = ?2 WHERE id = ?3",
            params![reason, now, run],
        )
        .map_err(db(context))?;
    transaction
        .execute(
            "UPDATE units SET state = 'committed', losses = ?1, committed_ms = ?2, lease_expires_ms = NULL WHERE id = ?3",
            params![losses, now, unit],
        )
        .map_err(db(context))?;
    // A failed MOP run's other sub-epochs are closed with it.
    transaction
        .execute(
            "UPDATE units SET state = 'committed', committed_ms = ?1, lease_expires_ms = NULL WHERE run = ?2 AND state <> 'committed'",
            params![now, run],
        )
        .map_err(db(context))?;
    Ok(())
}

/// Whether another unit of a (hopping) MOP run holds a live lease, checked again under the run's
/// row lock.
pub(super) fn run_trains_elsewhere(
    transaction: &db::Transaction<'_>,
    (unit, run): (i64, i64),
    now: i64,
    context: &str,
) -> Result<bool> {
    // "The model is not training elsewhere" once more, under the run's row lock:
    // PostgreSQL's SKIP LOCKED lets two transactions pick two units of one run at
    // once (neither sees the other's lease before it commits); the second waits here
    // for the first, then sees its lease and looks for another unit. (SQLite
    // serializes writers: the check holds already.)
    locked_run_state(transaction, RunId(run), context)?;
    let busy: Option<i64> = transaction
        .query_row(
            "SELECT id FROM units WHERE run = ?1 AND id <> ?2 AND state = 'leased' AND lease_expires_ms >= ?3 LIMIT 1",
            params![run, unit, now],
            |row| row.get(0),
        )
        .optional()
        .map_err(db(context))?;
    Ok(busy.is_some())
}

/// Leases the unit found: its new attempt, its run started, and the lease read back.
pub(super) fn take_lease(
    transaction: &db::Transaction<'_>,
    (unit, run): (i64, i64),
    (attempt, losses): (u32, u32),
    kind: UnitKind,
    gang: Option<i64>,
    want: &Wanted<'_>,
    context: &str,
) -> Result<Lease> {
    let (owner, ttl, now) = (want.owner, want.ttl, want.now);
    // A sub-epoch starts from its run's last committed result, or (none yet) from the
    // run's initial state, queued as its first units' input.
    let input: Option<String> = match kind {
        UnitKind::Run => None,
        UnitKind::SubEpoch => last_result(transaction, run).map_err(db(context))?,
    };
    transaction
        .execute(
            "UPDATE units SET state = 'leased', attempt = ?1, losses = ?2, lease_owner = ?3, lease_expires_ms = ?4, input_sha256 = COALESCE(?5, input_sha256), endpoint = NULL WHERE id = ?6",
            params![attempt + 1, losses, owner, now + ttl_ms(ttl), input, unit],
        )
        .map_err(db(context))?;
    let started = match kind {
        // A run's start is its first lease; a MOP run's units keep it.
        UnitKind::Run => "UPDATE runs SET state = 'running', started_ms = ?1 WHERE id = ?2",
        UnitKind::SubEpoch => {
            "UPDATE runs SET state = 'running', started_ms = COALESCE(started_ms, ?1) WHERE id = ?2"
        }
    };
    transaction
        .execute(started, params![now, run])
        .map_err(db(context))?;
    transaction
        .query_row(
            "SELECT u.id, u.run, r.app, r.candidate, r.data_version, u.attempt, u.lease_owner, u.spec, u.epoch, u.part, u.input_sha256, r.number
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
                    run_number: row.get::<Option<i64>>(11)?.map_or(0, |n| n.max(0) as u64),
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
        .map_err(db(context))
}

impl Store {
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

    pub(super) fn lease_where(
        &mut self,
        owner: &str,
        ttl: std::time::Duration,
        only: Option<UnitId>,
        runs_only: bool,
    ) -> Result<Option<Lease>> {
        let context = format!("leasing a unit for worker `{owner}`");
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let now = now_ms();
        let want = Wanted {
            owner,
            ttl,
            only,
            runs_only,
            now,
        };
        loop {
            let found = next_leasable(&transaction, &want).map_err(db(context.clone()))?;
            let Some((unit, run, state, attempt, losses, previous_owner, kind, gang)) = found
            else {
                transaction.commit().map_err(db(context))?;
                return Ok(None);
            };
            let kind = UnitKind::parse(&kind);
            let losses = losses + u32::from(state == "leased");
            if losses >= MAX_LOSSES {
                fail_lost_unit(
                    &transaction,
                    (unit, run),
                    losses,
                    previous_owner,
                    now,
                    &context,
                )?;
                continue;
            }
            if kind == UnitKind::SubEpoch
                && gang.is_none()
                && run_trains_elsewhere(&transaction, (unit, run), now, &context)?
            {
                continue;
            }
            let lease = take_lease(
                &transaction,
                (unit, run),
                (attempt, losses),
                kind,
                gang,
                &want,
                &context,
            )?;
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
    pub(super) fn give_back(&mut self, lease: &Lease, lost: bool) -> Result<bool> {
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
}
