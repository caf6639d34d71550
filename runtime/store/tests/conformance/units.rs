// The work-unit protocol (included by tests/conformance.rs once per backend): leases, fencing
// tokens, expiry, give-back, cancellation, workers; and that it holds across two connections.

#[test]
fn a_unit_is_leased_once_and_committed_with_its_run() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, unit) = store
        .queue_unit(app, "mlp_small", "{\"max_seconds\": 5}")
        .unwrap();
    assert_eq!(store.run(run).unwrap().state, RunState::Queued);
    let lease = store.lease_unit("worker:a", LONG).unwrap().unwrap();
    assert_eq!((lease.unit, lease.run, lease.attempt), (unit, run, 1));
    assert_eq!(lease.spec, "{\"max_seconds\": 5}");
    assert_eq!(lease.candidate, "mlp_small");
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    // Nobody else gets it while the lease lives.
    assert_eq!(store.lease_unit("worker:b", LONG).unwrap(), None);
    assert!(store.renew_lease(&lease, LONG).unwrap());

    let checkpoint = store.put_blob(b"weights").unwrap();
    let validation = RunValidation {
        protocol: Some("split 20%".into()),
        quality_std: None,
        validated_examples: Some(40),
        confusion: None,
        oof: None,
    };
    store
        .commit_unit(&lease, &finished_at(&checkpoint, &validation, 0.8))
        .unwrap();
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done);
    assert_eq!(record.quality, Some(0.8));
    assert_eq!(record.validation, validation);
    assert_eq!(record.infer_latency_seconds, Some(0.001));
    assert_eq!(record.trials.as_deref(), Some("[]"));
    let unit = store.unit(unit).unwrap();
    assert_eq!(unit.state, UnitState::Committed);
    assert!(unit.committed_ms.is_some());
    // Committed once: a second commit, a renewal and a give-back are all refused.
    assert!(matches!(
        store.commit_unit(&lease, &finished_at(&checkpoint, &validation, 0.9)),
        Err(Error::StaleLease { .. })
    ));
    assert_eq!(store.run(run).unwrap().quality, Some(0.8));
    assert!(!store.renew_lease(&lease, LONG).unwrap());
    assert!(!store.release_lease(&lease).unwrap());
    assert!(store.open_units().unwrap().is_empty());
}

#[test]
fn an_expired_lease_is_taken_over_and_the_stale_worker_cannot_commit() {
    let Some((fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, _) = store.queue_unit(app, "resnet18", "{}").unwrap();
    let stale = store.lease_unit("worker:old", EXPIRED).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    // Another process (its own connection) takes the unit over.
    let mut other = fixture.open();
    let fresh = other.lease_unit("worker:new", LONG).unwrap().unwrap();
    assert_eq!(fresh.attempt, 2);
    assert_eq!(fresh.unit, stale.unit);
    let record = other.unit(fresh.unit).unwrap();
    assert_eq!(record.losses, 1);
    assert_eq!(record.lease_owner.as_deref(), Some("worker:new"));

    // The orphaned worker finishes later: its renewal and its commit are refused, nothing written.
    assert!(!store.renew_lease(&stale, LONG).unwrap());
    let failed = UnitResult::Failed {
        reason: "stale",
        cost_seconds: Some(1.0),
        infer_latency_seconds: None,
    };
    let error = store.commit_unit(&stale, &failed).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("attempt 1"), "{message}");
    assert!(message.contains("worker:new"), "{message}");
    assert_eq!(store.run(run).unwrap().state, RunState::Running);

    other
        .commit_unit(
            &fresh,
            &UnitResult::Failed {
                reason: "diverged",
                cost_seconds: Some(3.0),
                infer_latency_seconds: Some(0.5),
            },
        )
        .unwrap();
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    assert_eq!(record.error.as_deref(), Some("diverged"));
    assert_eq!(record.infer_latency_seconds, Some(0.5));
}

#[test]
fn a_unit_lost_too_often_fails_its_run_instead_of_looping() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, unit) = store.queue_unit(app, "vgg16", "{}").unwrap();
    for attempt in 1..=MAX_LOSSES {
        let lease = store.lease_unit("worker:x", EXPIRED).unwrap().unwrap();
        assert_eq!(lease.attempt, attempt);
        std::thread::sleep(Duration::from_millis(3));
    }
    // The next lease finds the unit lost MAX_LOSSES times: its run fails, nothing is leased.
    assert_eq!(store.lease_unit("worker:y", LONG).unwrap(), None);
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Failed);
    let error = record.error.unwrap();
    assert!(error.contains("lost with its worker 3 times"), "{error}");
    assert!(error.contains("worker:x"), "{error}");
    assert_eq!(store.unit(unit).unwrap().state, UnitState::Committed);
}

#[test]
fn a_lease_given_back_is_queued_again_without_a_loss() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, unit) = store.queue_unit(app, "mlp_large", "{}").unwrap();
    let lease = store.lease_unit("worker:term", LONG).unwrap().unwrap();
    assert!(store.release_lease(&lease).unwrap());
    assert_eq!(store.run(run).unwrap().state, RunState::Queued);
    let again = store.lease_unit("worker:next", LONG).unwrap().unwrap();
    assert_eq!((again.unit, again.attempt), (unit, 2));
    assert_eq!(store.unit(unit).unwrap().losses, 0);
    // The first holder's token is stale now.
    assert!(!store.release_lease(&lease).unwrap());
}

#[test]
fn an_abandoned_unit_goes_with_its_run_and_only_by_its_lease() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, unit) = store.queue_unit(app, "knn", "{}").unwrap();
    let (kept, _) = store.queue_unit(app, "gbdt", "{}").unwrap();
    let stale = store.lease_unit("worker:old", EXPIRED).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let lease = store.lease_unit("worker:new", LONG).unwrap().unwrap();
    assert_eq!(lease.unit, unit);
    // The expired holder cannot drop what the new one holds.
    assert!(!store.abandon_unit(&stale).unwrap());
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    assert!(store.abandon_unit(&lease).unwrap());
    assert!(store.run(run).is_err());
    assert!(matches!(store.unit(unit), Err(Error::NoSuchUnit(_))));
    // Once: the lease is gone with it, and nothing else changed.
    assert!(!store.abandon_unit(&lease).unwrap());
    assert_eq!(store.run(kept).unwrap().state, RunState::Queued);
    assert_eq!(store.open_units().unwrap().len(), 1);
}

#[test]
fn a_coordinator_gives_back_its_dead_predecessors_in_process_leases() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (mine, _) = store.queue_unit(app, "a", "{}").unwrap();
    let (theirs, _) = store.queue_unit(app, "b", "{}").unwrap();
    store
        .lease_unit("in-process:host:1:aa", LONG)
        .unwrap()
        .unwrap();
    store.lease_unit("worker:host:2:bb", LONG).unwrap().unwrap();
    assert_eq!(store.release_leases_of("in-process:").unwrap(), 1);
    assert_eq!(store.run(mine).unwrap().state, RunState::Queued);
    assert_eq!(store.run(theirs).unwrap().state, RunState::Running);
    // Runs with units are the workers': `requeue_interrupted` leaves them alone.
    assert_eq!(store.requeue_interrupted().unwrap(), 0);
    assert_eq!(store.run(theirs).unwrap().state, RunState::Running);
}

#[test]
fn a_queued_unit_is_cancelled_with_its_run_but_a_leased_one_is_not() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, unit) = store.queue_unit(app, "a", "{}").unwrap();
    let (_, leased) = store.queue_unit(app, "b", "{}").unwrap();
    let lease = store.lease_unit_by_id(leased, "w", LONG).unwrap().unwrap();
    assert_eq!(lease.unit, leased);
    assert!(store.cancel_queued_unit(unit).unwrap());
    assert!(matches!(store.run(run), Err(Error::NoSuchRun(_))));
    assert!(matches!(store.unit(unit), Err(Error::NoSuchUnit(_))));
    assert!(!store.cancel_queued_unit(leased).unwrap());
    assert_eq!(store.runs(app).unwrap().len(), 1);
}

#[test]
fn a_commit_with_values_out_of_range_is_refused_before_anything_is_written() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (run, _) = store.queue_unit(app, "a", "{}").unwrap();
    let lease = store.lease_unit("w", LONG).unwrap().unwrap();
    let checkpoint = store.put_blob(b"w").unwrap();
    let validation = RunValidation::default();
    let error = store
        .commit_unit(&lease, &finished_at(&checkpoint, &validation, 1.5))
        .unwrap_err();
    assert!(error.to_string().contains("outside [0, 1]"), "{error}");
    assert_eq!(store.run(run).unwrap().state, RunState::Running);
    store
        .commit_unit(&lease, &finished_at(&checkpoint, &validation, 1.0))
        .unwrap();
}

#[test]
fn workers_register_heartbeat_and_are_listed() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let id = worker_id("worker", "node-1", 42);
    assert!(id.starts_with("worker:node-1:42:"), "{id}");
    assert_ne!(id, worker_id("worker", "node-1", 42));
    store
        .register_worker(&NewWorker {
            id: id.clone(),
            host: "node-1".into(),
            pid: 42,
            device: "cuda:0".into(),
            threads: 4,
            slurm_job: Some("77_3".into()),
        })
        .unwrap();
    let app = app(&mut store);
    let (_, unit) = store.queue_unit(app, "a", "{}").unwrap();
    store
        .worker_heartbeat(&id, WorkerState::Busy, Some(unit))
        .unwrap();
    let workers = store.workers().unwrap();
    assert_eq!(workers.len(), 1);
    let worker = &workers[0];
    assert_eq!(worker.state, WorkerState::Busy);
    assert_eq!(worker.unit, Some(unit));
    assert_eq!(worker.device, "cuda:0");
    assert_eq!(worker.slurm_job.as_deref(), Some("77_3"));
    assert!(worker.is_live(worker.heartbeat_ms + 1000, 5000));
    assert!(!worker.is_live(worker.heartbeat_ms + 6000, 5000));
    store
        .worker_heartbeat(&id, WorkerState::Stopped, None)
        .unwrap();
    assert!(!store.workers().unwrap()[0].is_live(0, i64::MAX / 2));
}

#[test]
fn removing_an_app_removes_its_units() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let app = app(&mut store);
    let (_, unit) = store.queue_unit(app, "a", "{}").unwrap();
    let lease = store.lease_unit("w", LONG).unwrap().unwrap();
    store.remove_app(app).unwrap();
    assert!(store.open_units().unwrap().is_empty());
    assert!(matches!(store.unit(unit), Err(Error::NoSuchUnit(_))));
    let error = store
        .commit_unit(
            &lease,
            &UnitResult::Failed {
                reason: "x",
                cost_seconds: None,
                infer_latency_seconds: None,
            },
        )
        .unwrap_err();
    assert!(error.to_string().contains("app was removed"), "{error}");
}

#[test]
fn an_apps_runs_are_numbered_from_one_and_a_number_is_never_reused() {
    let Some((_fixture, mut store)) = open() else {
        return;
    };
    let first = app(&mut store);
    let (second, _) = store
        .register_app(&new_app("numbered", Some(3), None))
        .unwrap();
    let second = second.id;
    // Interleaved: each app counts its own runs.
    let (a1, _) = store.queue_unit(first, "a", "{}").unwrap();
    let (b1, _) = store.queue_unit(second, "a", "{}").unwrap();
    let (a2, unit) = store.queue_unit(first, "b", "{}").unwrap();
    let (b2, _) = store.queue_unit(second, "b", "{}").unwrap();
    let number = |store: &Store, run| store.run(run).unwrap().number;
    assert_eq!(
        [a1, a2, b1, b2].map(|run| number(&store, run)),
        [1, 2, 1, 2]
    );
    assert_ne!(a2, b2, "ids stay unique in the store");
    // A run cancelled (deleted) leaves its number behind: the next one is 3, not 2 again.
    assert!(store.cancel_queued_unit(unit).unwrap());
    let (a3, _) = store.queue_unit(first, "c", "{}").unwrap();
    assert_eq!(number(&store, a3), 3);
    let numbers: Vec<u64> = store.runs(first).unwrap().iter().map(|run| run.number).collect();
    assert_eq!(numbers, [1, 3]);
}
