// Sub-epoch units of model hopper parallelism (included by tests/conformance.rs once per
// backend): targeted leases, one unit of a run in flight, the visit log, stale commits refused.

/// A worker registered now (its heartbeat fresh), idle.
fn registered(store: &mut Store, id: &str) {
    store
        .register_worker(&NewWorker {
            id: id.to_owned(),
            host: "test".to_owned(),
            pid: 1,
            device: "cpu".to_owned(),
            threads: 1,
            slurm_job: None,
        })
        .unwrap();
}

/// A run's initial training state, as a blob.
fn initial(store: &Store) -> BlobHash {
    store.put_blob(b"initial state").unwrap()
}

/// Queues a MOP run of `mlp_small` for `app` over `units`, from [`initial`]'s state.
fn queue(store: &mut Store, app: AppId, units: &[NewSubEpoch<'_>]) -> (RunId, Vec<UnitId>) {
    let initial = initial(store);
    store
        .queue_sub_epoch_run(app, "mlp_small", &initial, units)
        .unwrap()
}

fn sub_epoch<'a>(epoch: u64, partition: u64, target: Option<&'a str>, rank: i64) -> NewSubEpoch<'a> {
    NewSubEpoch {
        epoch,
        partition,
        target_worker: target,
        rank,
        spec: "{}",
        gang: None,
    }
}

/// Rank `rank` of a gang of `size` in `epoch`, addressed to `target`.
fn gang_rank<'a>(epoch: u64, rank: u64, size: u64, target: &'a str) -> NewSubEpoch<'a> {
    NewSubEpoch {
        gang: Some(size),
        ..sub_epoch(epoch, rank, Some(target), (epoch * 10) as i64)
    }
}

#[test]
fn a_gangs_ranks_are_held_at_once_and_rank_zero_commits_the_epoch_for_all() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:a");
    registered(&mut store, "worker:b");
    let units: Vec<NewSubEpoch<'_>> = (0..2)
        .flat_map(|epoch| [gang_rank(epoch, 0, 2, "worker:a"), gang_rank(epoch, 1, 2, "worker:b")])
        .collect();
    let (run, ids) = queue(&mut store, app, &units);
    let start = initial(&store);
    // Both ranks of epoch 0 at once (a hop would wait), each from the initial state.
    let zero = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    let one = store.lease_unit("worker:b", LONG).unwrap().unwrap();
    assert_eq!((zero.unit, one.unit), (ids[0], ids[1]));
    for (lease, rank) in [(&zero, 0), (&one, 1)] {
        let at = lease.sub_epoch.as_ref().unwrap();
        assert_eq!((at.epoch, at.partition, at.gang), (0, rank, Some(2)));
        assert_eq!(at.input.as_ref(), Some(&start));
    }
    // Epoch 1 waits for epoch 0.
    registered(&mut store, "worker:c");
    assert_eq!(store.lease_unit("worker:c", LONG).unwrap(), None);
    // Endpoints under the lease; a stale lease writes none; a hop has none.
    assert!(store.set_gang_endpoint(&zero, "host-a:4000").unwrap());
    let mut stale = one.clone();
    stale.attempt += 1;
    assert!(!store.set_gang_endpoint(&stale, "host-x:1").unwrap());
    assert!(store.set_gang_endpoint(&one, "host-b:4001").unwrap());
    let gang = store.gang(run, 0).unwrap();
    let endpoints: Vec<_> = gang.iter().map(|rank| rank.endpoint.as_deref()).collect();
    assert_eq!(endpoints, [Some("host-a:4000"), Some("host-b:4001")]);
    assert!(gang.iter().all(|rank| rank.gang == Some(2) && rank.lease_expires_ms.is_some()));
    // Only rank 0 commits; its commit closes rank 1 and makes the state the next input.
    let state = store.put_blob(b"after epoch 0").unwrap();
    assert!(matches!(
        store.commit_sub_epoch(&one, &state, 1.0),
        Err(Error::InvalidInput(_))
    ));
    store.commit_sub_epoch(&zero, &state, 2.0).unwrap();
    let gang = store.gang(run, 0).unwrap();
    assert!(gang.iter().all(|rank| rank.state == UnitState::Committed));
    assert_eq!(gang[0].result.as_ref(), Some(&state));
    assert_eq!((gang[1].result.as_ref(), gang[1].seq), (None, None));
    // Rank 1 finds its lease gone.
    assert!(!store.renew_lease(&one, LONG).unwrap());
    assert!(!store.release_lease(&one).unwrap());
    // Epoch 1: a rank whose ring broke gives its lease back as lost, and is leased again.
    let zero = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(zero.sub_epoch.as_ref().unwrap().input.as_ref(), Some(&state));
    assert!(store.release_lease_as_lost(&zero).unwrap());
    assert!(!store.release_lease_as_lost(&zero).unwrap());
    let again = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!((again.unit, again.attempt), (zero.unit, zero.attempt + 1));
    assert_eq!(store.unit(again.unit).unwrap().losses, 1);
    // A hop's lease has no listener to write.
    queue(&mut store, app, &[sub_epoch(0, 0, Some("worker:c"), 0)]);
    let hop = store.lease_unit("worker:c", LONG).unwrap().unwrap();
    assert!(matches!(
        store.set_gang_endpoint(&hop, "x:1"),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn a_gang_that_keeps_breaking_fails_its_run() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:a");
    registered(&mut store, "worker:b");
    let (run, _) = queue(&mut store, app, &[gang_rank(0, 0, 2, "worker:a")]);
    for _ in 0..MAX_LOSSES {
        let lease = store.lease_unit("worker:a", LONG).unwrap().unwrap();
        assert!(store.release_lease_as_lost(&lease).unwrap());
    }
    assert_eq!(store.lease_unit("worker:a", LONG).unwrap(), None);
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert!(record.error.unwrap().contains("lost"), "the reason says why");
}

#[test]
fn sub_epochs_go_to_their_partitions_worker_one_at_a_time_and_form_a_log() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:a");
    registered(&mut store, "worker:b");
    let (run, units) = queue(&mut store, app, &[sub_epoch(0, 0, Some("worker:a"), 2), sub_epoch(0, 1, Some("worker:b"), 1)]);
    assert_eq!(units.len(), 2);
    // A MOP run has no whole-run unit, and no coordinator gives it one.
    assert_eq!(store.unit_of_run(run).unwrap(), None);
    assert!(store.queued_runs_without_unit().unwrap().is_empty());
    assert_eq!(store.unit(units[0]).unwrap().kind, UnitKind::SubEpoch);

    // A worker gets only its partition's unit; an unknown worker gets none while both live; the
    // embedded engine's worker (whole runs only) gets none.
    assert_eq!(store.lease_unit("worker:c", LONG).unwrap(), None);
    assert_eq!(store.lease_run_unit("worker:a", LONG).unwrap(), None);
    let first = store.lease_unit("worker:b", LONG).unwrap().unwrap();
    let at = first.sub_epoch.clone().unwrap();
    let start = initial(&store);
    assert_eq!(
        (first.unit, at.epoch, at.partition, at.input),
        (units[1], 0, 1, Some(start.clone()))
    );
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    // The model is in flight on b: a's unit of the same run waits.
    assert_eq!(store.lease_unit("worker:a", LONG).unwrap(), None);
    // A sub-epoch is not committed as a whole run.
    let checkpoint = store.put_blob(b"model").unwrap();
    let validation = RunValidation::default();
    assert!(matches!(
        store.commit_unit(&first, &finished_at(&checkpoint, &validation, 0.5)),
        Err(Error::InvalidInput(_))
    ));
    let state_1 = store.put_blob(b"state after (0, 1)").unwrap();
    store.commit_sub_epoch(&first, &state_1, 0.25).unwrap();
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    // Committed once.
    assert!(matches!(
        store.commit_sub_epoch(&first, &state_1, 0.25),
        Err(Error::StaleLease { .. })
    ));

    // The next sub-epoch starts from the last one's state.
    let second = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(second.sub_epoch.as_ref().unwrap().input.as_ref(), Some(&state_1));
    let state_2 = store.put_blob(b"state after (0, 0)").unwrap();
    store.commit_sub_epoch(&second, &state_2, 0.5).unwrap();

    // The log: in visit order, each input the previous result.
    let log = store.sub_epochs(run).unwrap();
    let visits: Vec<_> = log
        .iter()
        .map(|entry| (entry.epoch, entry.partition, entry.seq, entry.state))
        .collect();
    assert_eq!(
        visits,
        [
            (0, 1, Some(1), UnitState::Committed),
            (0, 0, Some(2), UnitState::Committed)
        ]
    );
    assert_eq!(log[0].input.as_ref(), Some(&start));
    assert_eq!(log[1].input.as_ref(), Some(&state_1));
    // The states of an open run are kept by garbage collection.
    assert_eq!(store.collect_garbage(Duration::ZERO).unwrap().0, 1); // `model`, unreferenced
    for state in [&start, &state_1, &state_2] {
        assert!(store.blob(state).is_ok());
    }
    assert_eq!(log[1].result.as_ref(), Some(&state_2));
    assert_eq!(log[1].seconds, Some(0.5));

    // The next epoch; a unit queued twice is queued once.
    let next = store
        .queue_sub_epochs(run, &[sub_epoch(1, 0, None, 0), sub_epoch(0, 0, None, 0)])
        .unwrap();
    assert_eq!(next.len(), 1);
    // Finishing waits for every sub-epoch.
    let finished = finished_at(&checkpoint, &validation, 0.75);
    assert!(matches!(
        store.finish_sub_epoch_run(run, &finished),
        Err(Error::InvalidInput(_))
    ));
    let third = store.lease_unit("worker:c", LONG).unwrap().unwrap();
    assert_eq!(third.sub_epoch.as_ref().unwrap().input.as_ref(), Some(&state_2));
    store.commit_sub_epoch(&third, &state_1, 0.5).unwrap();
    store.finish_sub_epoch_run(run, &finished).unwrap();
    let record = store.run(run).unwrap();
    assert_eq!((record.state, record.quality), (RunState::Done, Some(0.75)));
    // Done: no more sub-epochs, no second outcome.
    assert!(store.queue_sub_epochs(run, &[sub_epoch(2, 0, None, 0)]).is_err());
    assert!(store.finish_sub_epoch_run(run, &finished).is_err());
}

#[test]
fn a_sub_epoch_of_a_gone_worker_moves_and_its_stale_commit_is_refused() {
    let Some((fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:a");
    let (run, units) = queue(&mut store, app, &[sub_epoch(0, 0, Some("worker:a"), 0)]);
    // a leases it, and dies: its lease expires.
    let stale = store.lease_unit("worker:a", EXPIRED).unwrap().unwrap();
    assert_eq!(stale.unit, units[0]);
    std::thread::sleep(Duration::from_millis(5));
    // a's heartbeat is older than the lease's time to live: it is gone, and b takes the unit
    // (over its own connection, as another process).
    let mut other = fixture.open();
    let fresh = other
        .lease_unit("worker:b", Duration::from_millis(1))
        .unwrap()
        .unwrap();
    assert_eq!((fresh.unit, fresh.attempt), (units[0], 2));
    let late = store.put_blob(b"late").unwrap();
    let error = store.commit_sub_epoch(&stale, &late, 1.0).unwrap_err();
    assert!(matches!(error, Error::StaleLease { .. }), "{error}");
    assert!(error.to_string().contains("worker:b"), "{error}");
    assert_eq!(store.unit(units[0]).unwrap().state, UnitState::Leased);
    let good = other.put_blob(b"good").unwrap();
    other.commit_sub_epoch(&fresh, &good, 1.0).unwrap();
    let log = store.sub_epochs(run).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].result.as_ref(), Some(&good));
    assert_eq!(log[0].lease_owner.as_deref(), Some("worker:b"));
}

#[test]
fn two_leases_of_one_run_cannot_fork_its_log() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, units) = queue(&mut store, app, &[sub_epoch(0, 0, None, 0), sub_epoch(0, 1, None, 1)]);
    // The first lease expires (its worker hangs), so the run's other unit is leased meanwhile
    // (the lower rank first).
    let hung = store
        .lease_unit_by_id(units[1], "worker:a", EXPIRED)
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let other = store.lease_unit("worker:b", LONG).unwrap().unwrap();
    assert_eq!(other.unit, units[0]);
    let after_b = store.put_blob(b"b").unwrap();
    store.commit_sub_epoch(&other, &after_b, 1.0).unwrap();
    // The hung worker's unit was not taken over, so its token still holds; but the run moved on:
    // its commit is refused and the unit queued again, to start from b's state.
    let after_a = store.put_blob(b"a").unwrap();
    let error = store.commit_sub_epoch(&hung, &after_a, 1.0).unwrap_err();
    assert!(error.to_string().contains("queued again"), "{error}");
    let again = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(again.unit, hung.unit);
    assert_eq!(again.sub_epoch.unwrap().input.as_ref(), Some(&after_b));
    assert_eq!(store.sub_epochs(run).unwrap()[0].result.as_ref(), Some(&after_b));
}

#[test]
fn a_failed_sub_epoch_fails_its_run_and_closes_its_units() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, _) = queue(&mut store, app, &[sub_epoch(0, 0, None, 0), sub_epoch(0, 1, None, 1)]);
    let lease = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    // A whole run's failure is not a sub-epoch's.
    let failed = UnitResult::Failed {
        reason: "x",
        cost_seconds: None,
        infer_latency_seconds: None,
    };
    assert!(matches!(store.commit_unit(&lease, &failed), Err(Error::InvalidInput(_))));
    store
        .fail_sub_epoch_run(&lease, "the loss is NaN in epoch 0 on partition 0", Some(0.5))
        .unwrap();
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert!(record.error.unwrap().contains("NaN"));
    // Its other unit is never leased; a second failure is stale.
    assert!(store.open_units().unwrap().is_empty());
    assert_eq!(store.lease_unit("worker:b", LONG).unwrap(), None);
    assert!(matches!(
        store.fail_sub_epoch_run(&lease, "again", None),
        Err(Error::StaleLease { .. })
    ));
}

#[test]
fn a_partition_taken_over_goes_on_with_its_new_holder() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:b");
    // Partition 0 is addressed to a worker that never registered (gone), partition 1 to b.
    let (run, units) = queue(&mut store, app, &[
                sub_epoch(0, 0, Some("worker:gone"), 0),
                sub_epoch(1, 0, Some("worker:gone"), 0),
                sub_epoch(1, 1, Some("worker:b"), 1),
            ]);
    let lease = store.lease_unit("worker:b", LONG).unwrap().unwrap();
    assert_eq!(lease.unit, units[0], "b takes the gone worker's partition");
    // While it trains, the later epoch's unit of the partition moves to b (the leased one and
    // other partitions keep their address).
    assert_eq!(store.retarget_sub_epochs(run, 0, "worker:b").unwrap(), 1);
    assert_eq!(store.retarget_sub_epochs(run, 0, "worker:b").unwrap(), 0);
    let log = store.sub_epochs(run).unwrap();
    let target = |epoch: u64, partition: u64| {
        log.iter()
            .find(|unit| unit.epoch == epoch && unit.partition == partition)
            .and_then(|unit| unit.target_worker.clone())
    };
    assert_eq!(target(0, 0).as_deref(), Some("worker:gone"));
    assert_eq!(target(1, 0).as_deref(), Some("worker:b"));
    assert_eq!(target(1, 1).as_deref(), Some("worker:b"));
}

#[test]
fn a_run_stopped_early_closes_its_open_units_and_a_late_commit_is_refused() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, units) = queue(&mut store, app, &[
                sub_epoch(0, 0, None, 0),
                sub_epoch(1, 0, None, 0),
                sub_epoch(2, 0, None, 0),
            ]);
    let first = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    let after = store.put_blob(b"epoch 0").unwrap();
    store.commit_sub_epoch(&first, &after, 1.0).unwrap();
    // A worker trains epoch 1 when the coordinator stops the run.
    let busy = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(busy.unit, units[1]);
    assert_eq!(store.close_sub_epochs(run).unwrap(), 2);
    assert!(store.open_units().unwrap().is_empty());
    assert_eq!(store.lease_unit("worker:b", LONG).unwrap(), None);
    // The busy worker's commit is refused; the log holds epoch 0's result only.
    let late = store.put_blob(b"epoch 1").unwrap();
    assert!(matches!(
        store.commit_sub_epoch(&busy, &late, 1.0),
        Err(Error::StaleLease { .. })
    ));
    let log = store.sub_epochs(run).unwrap();
    assert_eq!(log.iter().filter(|unit| unit.result.is_some()).count(), 1);
    assert!(log.iter().all(|unit| unit.state == UnitState::Committed));
    // The run is still open for its outcome; a stopped run cannot be stopped again.
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    store
        .finish_sub_epoch_run(
            run,
            &UnitResult::Failed {
                reason: "stopped",
                cost_seconds: Some(1.0),
                infer_latency_seconds: None,
            },
        )
        .unwrap();
    assert!(matches!(
        store.close_sub_epochs(run),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        store.close_sub_epochs(RunId(run.0 + 100)),
        Err(Error::NoSuchRun(_))
    ));
}

#[test]
fn a_sub_epoch_lost_too_often_fails_its_run_and_closes_its_units() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, units) = queue(&mut store, app, &[sub_epoch(0, 0, None, 0), sub_epoch(0, 1, None, 1)]);
    // The first unit kills every worker that takes it.
    for _ in 0..MAX_LOSSES {
        let lease = store.lease_unit("worker:doomed", EXPIRED).unwrap().unwrap();
        assert_eq!(lease.unit, units[0]);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(store.lease_unit("worker:next", LONG).unwrap(), None);
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert!(record.error.unwrap().contains("lost with its worker"));
    assert!(store.open_units().unwrap().is_empty());
}

#[test]
fn an_epoch_is_leased_only_after_the_earlier_ones_are_committed() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    // Epoch 1's unit has the lowest rank, yet waits for both of epoch 0's.
    let (run, _) = queue(&mut store, app, &[
                sub_epoch(0, 0, None, 5),
                sub_epoch(0, 1, None, 6),
                sub_epoch(1, 0, None, 0),
            ]);
    let mut visits = Vec::new();
    while let Some(lease) = store.lease_unit("worker:a", LONG).unwrap() {
        let at = lease.sub_epoch.clone().unwrap();
        visits.push((at.epoch, at.partition));
        let state = store
            .put_blob(format!("{visits:?}").as_bytes())
            .unwrap();
        store.commit_sub_epoch(&lease, &state, 0.1).unwrap();
    }
    assert_eq!(visits, [(0, 0), (0, 1), (1, 0)]);
    assert_eq!(store.sub_epochs(run).unwrap().len(), 3);
}

#[test]
fn a_gang_is_not_leased_without_enough_live_workers_and_can_hop_instead() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    registered(&mut store, "worker:a");
    registered(&mut store, "in-process:host:1:0");
    let units: Vec<NewSubEpoch<'_>> = (0..2)
        .flat_map(|epoch| [gang_rank(epoch, 0, 2, "worker:a"), gang_rank(epoch, 1, 2, "worker:b")])
        .collect();
    let (run, ids) = queue(&mut store, app, &units);
    // One live worker (the embedded engine's does not count) cannot form a gang of two, and a
    // stopped worker is not live.
    assert_eq!(store.lease_unit("worker:a", LONG).unwrap(), None);
    registered(&mut store, "worker:b");
    store
        .worker_heartbeat("worker:b", WorkerState::Stopped, None)
        .unwrap();
    assert_eq!(store.lease_unit("worker:a", LONG).unwrap(), None);
    // A leased rank (a gang forming) holds the change back.
    registered(&mut store, "worker:c");
    let held = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(store.hop_instead_of_gang(run).unwrap(), 0);
    assert!(store.release_lease(&held).unwrap());
    store
        .worker_heartbeat("worker:c", WorkerState::Stopped, None)
        .unwrap();
    // The run's epochs hop instead: every unit, one at a time, the gone worker's too.
    assert_eq!(store.hop_instead_of_gang(run).unwrap(), 4);
    assert!(store.sub_epochs(run).unwrap().iter().all(|unit| unit.gang.is_none()));
    let first = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!(first.sub_epoch.as_ref().unwrap().gang, None);
    assert!(ids[..2].contains(&first.unit));
    assert_eq!(store.lease_unit("worker:a", LONG).unwrap(), None);
}
