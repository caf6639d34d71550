// What the conformance tests share (included by tests/conformance.rs once per backend).

pub(crate) fn new_app(name: &str, label_capacity: Option<u64>, declared: Option<&[&str]>) -> NewApp {
    NewApp {
        name: name.to_owned(),
        manifest: format!("{{\"app\": \"{name}\"}}"),
        system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[3]], []}}".to_owned(),
        label_capacity,
        declared_labels: declared.map(|labels| labels.iter().map(|l| l.to_string()).collect()),
    }
}

pub(crate) fn labelled(input: u8, label: &str) -> NewExample {
    NewExample {
        input: Blob::Bytes(vec![b'E', b'M', b'X', b'1', input]),
        output: NewOutput::Label(label.to_owned()),
    }
}

/// The app of the unit tests.
pub(crate) fn app(store: &mut Store) -> AppId {
    let (app, _) = store
        .register_app(&NewApp {
            name: "units".to_owned(),
            manifest: "{\"app\": \"units\"}".to_owned(),
            system_type: "{input: {[Tensor[2]], []}, output: {[Tensor[3]], []}}".to_owned(),
            label_capacity: Some(3),
            declared_labels: None,
        })
        .unwrap();
    app.id
}

pub(crate) const LONG: Duration = Duration::from_secs(60);
/// A lease that has already expired when it is taken (expiry is `expires < now`).
pub(crate) const EXPIRED: Duration = Duration::from_millis(0);

/// A finished result with quality `quality` (cost 2 s, latency 1 ms, empty trials).
pub(crate) fn finished_at<'a>(
    checkpoint: &'a BlobHash,
    validation: &'a RunValidation,
    quality: f64,
) -> UnitResult<'a> {
    UnitResult::Finished {
        quality,
        cost_seconds: 2.0,
        checkpoint,
        validation,
        infer_latency_seconds: 0.001,
        trials: Some("[]"),
    }
}

/// A run of `candidate`, queued as a unit and leased: running, as a worker has it.
pub(crate) fn leased_run(store: &mut Store, app: AppId, candidate: &str) -> Lease {
    let (_, unit) = store.queue_unit(app, candidate, "{}").unwrap();
    store
        .lease_unit_by_id(unit, "worker:test", Duration::from_secs(60))
        .unwrap()
        .unwrap()
}

/// A run of `candidate` taken through the unit protocol to a finished commit.
pub(crate) fn finished_run(
    store: &mut Store,
    app: AppId,
    candidate: &str,
    (quality, cost_seconds, latency): (f64, f64, f64),
    validation: &RunValidation,
) -> RunId {
    let lease = leased_run(store, app, candidate);
    let checkpoint = store.put_blob(candidate.as_bytes()).unwrap();
    store
        .commit_unit(
            &lease,
            &finished(&checkpoint, validation, quality, cost_seconds, latency),
        )
        .unwrap();
    lease.run
}

pub(crate) fn finished<'a>(
    checkpoint: &'a BlobHash,
    validation: &'a RunValidation,
    quality: f64,
    cost_seconds: f64,
    infer_latency_seconds: f64,
) -> UnitResult<'a> {
    UnitResult::Finished {
        quality,
        cost_seconds,
        checkpoint,
        validation,
        infer_latency_seconds,
        trials: None,
    }
}

pub(crate) fn total(store: &Store, app: AppId) -> u64 {
    store.examples(app, PageRequest::default()).unwrap().total
}


