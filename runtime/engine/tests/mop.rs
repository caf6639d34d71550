//! Model hopper parallelism end to end over a real SQLite store, and a real PostgreSQL server's
//! (started by the test: `../store/tests/support/postgres_server.rs`), with real workers
//! (threads of this process, and a worker process killed with SIGKILL): every (model, epoch, partition) committed
//! exactly once, the visit log replayed on one thread bit-identical to what the workers trained,
//! a lost sub-epoch re-leased after its lease expires, a stale worker's commit refused, and a
//! coordinator that restarts between any two steps (each step opens the store afresh).
//!
//! Every process trains on one libtorch thread (bit equality). The child worker process is this
//! test binary run again with `EASEML_MOP_CHILD_HOME` set (the test `child_worker`, which does
//! nothing without it).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use easeml_compiler::{Registry, compile};
use easeml_engine::checkpoint_blob;
use easeml_engine::mop::PartitionCache;
use easeml_engine::mop::{self, MopPlan, MopStatus};
use easeml_engine::unit::Executed;
use easeml_engine::worker::{WorkerConfig, run_worker};
use easeml_object::{Object, codec};
use easeml_store::{AppId, Blob, NewApp, NewExample, NewOutput, RunId, RunState, Store, UnitState};
use tch::Device;

#[path = "../../store/tests/support/postgres_server.rs"]
mod postgres_server;
#[path = "../../store/tests/support/watchdog.rs"]
mod watchdog;

const SIDES: &str = "app sides\nInput = [2]\nOutput = [2]\nlabels = [left, right]\n";
const CHILD: &str = "EASEML_MOP_CHILD_HOME";

fn register(store: &mut Store) -> AppId {
    let compiled = compile(SIDES, "sides", &Registry::builtin()).expect("the program compiles");
    let schema = &compiled.schema;
    store
        .register_app(&NewApp {
            name: schema.app.clone(),
            manifest: easeml_compiler::codegen::manifest(&compiled).to_json(),
            system_type: schema.system_type(),
            label_capacity: schema.label_capacity(),
            declared_labels: schema.labels.clone(),
        })
        .expect("registered")
        .0
        .id
}

/// `n` examples of two clusters: `left` when x < y.
fn feed(store: &mut Store, app: AppId, n: usize) {
    let examples: Vec<NewExample> = (0..n)
        .map(|i| {
            let a = ((i * 37) % 100) as f32 / 100.0;
            let b = ((i * 61) % 100) as f32 / 100.0;
            let label = if a < b { "left" } else { "right" };
            NewExample {
                input: Blob::Bytes(codec::encode(&Object::single(vec![a, b]))),
                output: NewOutput::Label(label.to_owned()),
            }
        })
        .collect();
    store.insert_examples(app, &examples).expect("stored");
}

/// The lease time of the workers of the tests that kill one: a killed worker's lease must expire
/// within the test, a live one's never (heartbeats every third of it, on a loaded machine whose
/// store the test also polls every millisecond).
const KILL_TEST_TTL: Duration = Duration::from_secs(2);

fn worker_config(ttl: Duration) -> WorkerConfig {
    let mut config = WorkerConfig::for_device(Device::Cpu);
    config.threads = Some(1);
    config.lease_ttl = ttl;
    config.poll = Duration::from_millis(10);
    config
}

/// A worker thread over the store at `home`, until `stop`.
fn worker_thread(home: &Path, ttl: Duration, stop: &Arc<AtomicBool>) -> JoinHandle<()> {
    let home = home.to_owned();
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        run_worker(&home, worker_config(ttl), &stop, &mut |_| {}).expect("the worker runs");
    })
}

/// Waits until `count` live workers are registered; their ids, oldest first.
fn live_workers(home: &Path, count: usize) -> Vec<String> {
    let started = Instant::now();
    loop {
        let store = Store::open(home).unwrap();
        let ids: Vec<String> = store
            .workers()
            .unwrap()
            .into_iter()
            .filter(|worker| worker.state != easeml_store::WorkerState::Stopped)
            .map(|worker| worker.id)
            .collect();
        if ids.len() >= count {
            return ids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "workers did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Coordinates the runs to the end, each step over a freshly opened store (a coordinator restarted
/// between any two steps resumes from the store alone).
fn coordinate(home: &Path, runs: &[RunId]) {
    let started = Instant::now();
    loop {
        let mut done = 0;
        for &run in runs {
            let mut store = Store::open(home).unwrap();
            match mop::advance(&mut store, run).unwrap() {
                MopStatus::Done(_) => done += 1,
                MopStatus::Failed(reason) => panic!("run {} failed: {reason}", run.0),
                MopStatus::Training { .. } => {}
            }
        }
        if done == runs.len() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the runs did not finish"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every (epoch, partition) committed exactly once, epoch by epoch, each sub-epoch starting from
/// the previous one's result; the replay on this thread equals the last result bit for bit; the
/// run is done and its checkpoint serves.
fn check_run(store: &Store, run: RunId, plan: &MopPlan) {
    let log = store.sub_epochs(run).unwrap();
    assert_eq!(log.len() as u64, plan.epochs * plan.partitions);
    assert!(log.iter().all(|unit| unit.state == UnitState::Committed));
    let visits: BTreeSet<(u64, u64)> = log
        .iter()
        .map(|unit| (unit.epoch, unit.partition))
        .collect();
    assert_eq!(visits.len(), log.len(), "a sub-epoch was trained twice");
    let seqs: Vec<u64> = log.iter().map(|unit| unit.seq.unwrap()).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    let epochs: Vec<u64> = log.iter().map(|unit| unit.epoch).collect();
    assert!(
        epochs.windows(2).all(|pair| pair[0] <= pair[1]),
        "{epochs:?}"
    );
    for pair in log.windows(2) {
        assert_eq!(pair[1].input, pair[0].result);
    }
    let last = store
        .blob(log.last().unwrap().result.as_ref().unwrap())
        .unwrap();
    let replayed = mop::replay(store, run).unwrap();
    assert!(
        replayed == last,
        "run {}: the replay differs from the hops",
        run.0
    );

    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done, "{:?}", record.error);
    let quality = record.quality.unwrap();
    assert!((0.0..=1.0).contains(&quality));
    let summed: f64 = log.iter().map(|unit| unit.seconds.unwrap()).sum();
    assert!((record.cost_seconds.unwrap() - summed).abs() < 1e-9);
    let checkpoint =
        checkpoint_blob::decode(&store.blob(record.checkpoint.as_ref().unwrap()).unwrap()).unwrap();
    assert!(easeml_trainer::Predictor::new(&checkpoint, Device::Cpu).is_ok());
    check_answers(store, &record);
}

/// A MOP run keeps its model's validation answers (one per validated example, for ensembles) and
/// how they fell (the per-class view), as a run of the trainer does.
fn check_answers(store: &Store, record: &easeml_store::RunRecord) {
    let blob = store
        .blob(record.validation.oof.as_ref().expect("answers kept"))
        .unwrap();
    let answers = easeml_engine::ensemble::answers::Answers::decode(&blob).unwrap();
    assert_eq!(
        answers.ids.len() as u64,
        record.validation.validated_examples.unwrap()
    );
    assert_eq!(answers.width, 2);
    for row in answers.values.chunks(2) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{row:?}");
    }
    let confusion = easeml_object::Confusion::from_json(
        record.validation.confusion.as_ref().expect("a confusion"),
    )
    .unwrap();
    let counted: u64 = confusion.cells.iter().map(|cell| cell[2]).sum();
    assert_eq!(counted, answers.ids.len() as u64, "{confusion:?}");
}

fn plan(seed: u64) -> MopPlan {
    let mut plan = MopPlan::new(2, 2);
    plan.batch_size = 8;
    plan.learning_rate = 0.01;
    plan.seed = seed;
    plan
}

#[test]
fn two_workers_train_two_models_by_hopping_and_a_replay_is_bit_identical() {
    let home = tempfile::tempdir().unwrap();
    hop_two_models(home.path());
}

#[test]
fn on_postgres_two_workers_train_two_models_by_hopping_and_a_replay_is_bit_identical() {
    let Some(url) = postgres_server::database() else {
        return;
    };
    let blobs = tempfile::tempdir().unwrap();
    // The folder every worker is given: the blobs, and the database it is bound to.
    let home = easeml_store::store_home(&url, Some(blobs.path())).unwrap();
    hop_two_models(&home);
}

/// Two workers (threads) hop two models over the store at `home`; then a worker's partition
/// cache and a stale worker's refused commit.
fn hop_two_models(home: &Path) {
    tch::set_num_threads(1);
    let mut store = Store::open(home).unwrap();
    let app = register(&mut store);
    feed(&mut store, app, 60);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| worker_thread(home, Duration::from_secs(10), &stop))
        .collect();
    let ids = live_workers(home, 2);
    let plans = [plan(1), plan(2)];
    let runs: Vec<RunId> = ["mlp_small", "mlp_large"]
        .iter()
        .zip(&plans)
        .map(|(candidate, plan)| mop::start_run(&mut store, app, candidate, plan, &ids).unwrap())
        .collect();
    coordinate(home, &runs);
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().unwrap();
    }
    for (&run, plan) in runs.iter().zip(&plans) {
        check_run(&store, run, plan);
        // Each partition was trained by the worker holding it.
        for unit in store.sub_epochs(run).unwrap() {
            assert_eq!(unit.lease_owner, unit.target_worker);
            assert_eq!(unit.attempt, 1);
        }
    }

    // A worker holds a partition's training rows and nothing else of the app.
    let version = store.run(runs[0]).unwrap().data_version;
    let mut cache = PartitionCache::default();
    let mut held = 0;
    for partition in 0..2 {
        let part = cache
            .get(&store, app, version, 2, partition, 0.2)
            .unwrap()
            .unwrap();
        assert!(!part.is_empty() && part.len() < 60);
        let rows: Vec<usize> = (0..part.len()).collect();
        assert_eq!(
            easeml_trainer::mop::partition_rows(&part, &rows, 2, partition).len(),
            part.len()
        );
        held += part.len();
    }
    assert_eq!(cache.rows_held(), held);
    let all: Vec<u64> = (1..=60).collect();
    assert_eq!(held, easeml_trainer::data::split_by_id(&all, 0.2).0.len());
    // Data changed since: the cache says so.
    assert!(
        cache
            .get(&store, app, version + 1, 2, 0, 0.2)
            .unwrap()
            .is_none()
    );

    // A stale worker's sub-epoch: its lease was taken over and the unit committed by another
    // worker; its own commit is refused and the log is unchanged.
    let log_before = store.sub_epochs(runs[0]).unwrap();
    // A lease as a worker held the first unit before another took it over.
    let first = &log_before[0];
    let record = store.unit(first.unit).unwrap();
    let mut stale = easeml_store::Lease {
        unit: first.unit,
        run: runs[0],
        run_number: record.run_number,
        app,
        candidate: record.candidate,
        data_version: store.run(runs[0]).unwrap().data_version,
        attempt: 0,
        owner: "worker:stale".to_owned(),
        spec: record.spec,
        sub_epoch: Some(easeml_store::SubEpochLease {
            epoch: first.epoch,
            partition: first.partition,
            input: None,
            gang: None,
        }),
    };
    let executed = mop::execute_sub_epoch(
        &mut store,
        &stale,
        Device::Cpu,
        &mut PartitionCache::default(),
    )
    .unwrap();
    assert!(matches!(executed, Executed::LeaseLost(_)), "{executed:?}");
    stale.attempt = 1;
    assert!(matches!(
        mop::execute_sub_epoch(
            &mut store,
            &stale,
            Device::Cpu,
            &mut PartitionCache::default()
        )
        .unwrap(),
        Executed::LeaseLost(_)
    ));
    assert_eq!(store.sub_epochs(runs[0]).unwrap(), log_before);
}

/// A worker process for [`a_worker_killed_mid_sub_epoch_loses_its_unit_to_another`]: runs only
/// when `EASEML_MOP_CHILD_HOME` names a store.
#[test]
fn child_worker() {
    let Some(home) = std::env::var_os(CHILD) else {
        return;
    };
    let stop = AtomicBool::new(false);
    run_worker(
        Path::new(&home),
        worker_config(KILL_TEST_TTL),
        &stop,
        &mut |_| {},
    )
    .unwrap();
}

#[test]
fn a_worker_killed_mid_sub_epoch_loses_its_unit_to_another() {
    tch::set_num_threads(1);
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let app = register(&mut store);
    // Enough rows that a sub-epoch takes a while (a few hundred steps of one thread).
    feed(&mut store, app, 1500);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, home.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child_id = live_workers(home.path(), 1).remove(0);
    let stop = Arc::new(AtomicBool::new(false));
    let survivor = worker_thread(home.path(), KILL_TEST_TTL, &stop);
    let ids = live_workers(home.path(), 2);
    assert_eq!(ids[0], child_id);
    // Both partitions are the child's: the other worker takes nothing until the child is gone.
    let mut plan = plan(3);
    plan.batch_size = 4;
    let run = mop::start_run(
        &mut store,
        app,
        "mlp_small",
        &plan,
        std::slice::from_ref(&child_id),
    )
    .unwrap();

    // Kill the child as soon as it holds a sub-epoch.
    let started = Instant::now();
    let held = loop {
        let mut store = Store::open(home.path()).unwrap();
        mop::advance(&mut store, run).unwrap();
        if let Some(unit) = store.sub_epochs(run).unwrap().into_iter().find(|unit| {
            unit.state == UnitState::Leased && unit.lease_owner.as_ref() == Some(&child_id)
        }) {
            break unit;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child leased nothing"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    let after_kill = store.unit(held.unit).unwrap();
    coordinate(home.path(), &[run]);
    stop.store(true, Ordering::SeqCst);
    survivor.join().unwrap();

    check_run(&store, run, &plan);
    let log = store.sub_epochs(run).unwrap();
    let entry = log.iter().find(|unit| unit.unit == held.unit).unwrap();
    // The kill landed mid-sub-epoch (a sub-epoch here is a few hundred steps; the kill follows
    // the lease within milliseconds): the unit was re-leased once its lease expired, by the
    // other worker, and committed once.
    assert_eq!(
        after_kill.state,
        UnitState::Leased,
        "the child finished before the kill"
    );
    assert_eq!(entry.attempt, 2);
    assert_eq!(entry.lease_owner.as_deref(), Some(ids[1].as_str()));
    println!(
        "re-leased and finished; the whole run finished {:.2} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    // Every unit after the kill went to the survivor.
    assert!(log.iter().all(
        |unit| unit.lease_owner.as_deref() != Some(child_id.as_str()) || unit.seq <= entry.seq
    ));
}

/// A fresh store (one thread for tch) with the test app and 60 of its examples; keep the first
/// value alive while the store is used.
fn store_with_app() -> (tempfile::TempDir, Store, AppId) {
    tch::set_num_threads(1);
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let app = register(&mut store);
    feed(&mut store, app, 60);
    (home, store, app)
}

/// Trains `run` with one worker in step with the coordinator (a step after every sub-epoch, each
/// committed) until it is done; returns its quality.
fn train_in_step(store: &mut Store, run: RunId) -> f64 {
    let mut progress = mop::MopProgress::default();
    let mut cache = PartitionCache::default();
    loop {
        match mop::advance_with(store, run, &mut progress).unwrap() {
            MopStatus::Done(quality) => return quality,
            MopStatus::Failed(reason) => panic!("{reason}"),
            MopStatus::Training { .. } => {}
        }
        let lease = store
            .lease_unit("worker:one", Duration::from_secs(60))
            .unwrap()
            .expect("a sub-epoch to train while the run trains");
        let executed = mop::execute_sub_epoch(store, &lease, Device::Cpu, &mut cache).unwrap();
        assert!(matches!(executed, Executed::Committed), "{executed:?}");
    }
}

#[test]
fn a_run_stops_once_its_patience_runs_out_and_serves_its_best_epoch() {
    let (_home, mut store, app) = store_with_app();
    // A rate so small that no epoch is better than the first: the run stops after epoch 0 and
    // `patience` more.
    let mut plan = plan(7);
    plan.epochs = 10;
    plan.patience = 2;
    plan.learning_rate = 1e-12;
    let run = mop::start_run(&mut store, app, "mlp_small", &plan, &[]).unwrap();
    // One worker, in step with the coordinator: a step after every sub-epoch.
    let quality = train_in_step(&mut store, run);
    let log = store.sub_epochs(run).unwrap();
    let trained: Vec<(u64, u64)> = log
        .iter()
        .filter(|unit| unit.result.is_some())
        .map(|unit| (unit.epoch, unit.partition))
        .collect();
    assert_eq!(
        trained.len(),
        3 * 2,
        "epochs 0, 1 and 2 of two partitions: {log:?}"
    );
    assert!(trained.iter().all(|(epoch, _)| *epoch <= 2));
    // The other epochs were closed, never trained; nothing is left to lease.
    assert!(log.iter().all(|unit| unit.state == UnitState::Committed));
    assert!(store.open_units().unwrap().is_empty());
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done);
    assert_eq!(record.quality, Some(quality));
    let protocol = record.validation.protocol.unwrap();
    assert!(
        protocol.contains("stopped after 3 of 10 epochs: no better epoch in 2"),
        "{protocol}"
    );
    let trials: serde_json::Value = serde_json::from_str(&record.trials.unwrap()).unwrap();
    let mop = &trials[0]["mop"];
    assert_eq!(mop["stopped_early"], true, "{trials}");
    assert_eq!(mop["epochs"].as_array().map(Vec::len), Some(3), "{trials}");
    // As `status` reads a trial: the epochs trained and the best quality.
    assert_eq!(trials[0]["epochs"], 3, "{trials}");
    assert_eq!(trials[0]["best_quality"], quality, "{trials}");
    // The replay of what was trained equals it.
    let head = log
        .iter()
        .filter_map(|unit| unit.result.as_ref())
        .next_back();
    let last = store.blob(head.unwrap()).unwrap();
    assert!(mop::replay(&store, run).unwrap() == last);
}

#[test]
fn a_partition_taken_over_from_a_gone_worker_stays_with_its_new_holder() {
    let (_home, mut store, app) = store_with_app();
    for id in ["worker:a", "worker:b"] {
        store
            .register_worker(&easeml_store::NewWorker {
                id: id.to_owned(),
                host: "test".to_owned(),
                pid: 1,
                device: "cpu".to_owned(),
                threads: 1,
                slurm_job: None,
            })
            .unwrap();
    }
    let mut plan = plan(3);
    plan.epochs = 3;
    let workers = ["worker:a".to_owned(), "worker:b".to_owned()];
    let run = mop::start_run(&mut store, app, "mlp_small", &plan, &workers).unwrap();
    let targets = |store: &Store, partition: u64| -> Vec<Option<String>> {
        let mut log = store.sub_epochs(run).unwrap();
        log.sort_by_key(|unit| unit.epoch);
        log.into_iter()
            .filter(|unit| unit.partition == partition)
            .map(|unit| unit.target_worker)
            .collect()
    };
    assert_eq!(targets(&store, 0), vec![Some("worker:a".to_owned()); 3]);
    // a goes silent: b, asking with a lease time to live shorter than a's silence, takes a's
    // partition as well as its own, one sub-epoch at a time, and the coordinator steps between.
    std::thread::sleep(Duration::from_millis(20));
    let mut cache = PartitionCache::default();
    let mut progress = mop::MopProgress::default();
    for _ in 0..2 {
        let lease = store
            .lease_unit("worker:b", Duration::from_millis(10))
            .unwrap()
            .expect("b gets a unit");
        let executed = mop::execute_sub_epoch(&mut store, &lease, Device::Cpu, &mut cache).unwrap();
        assert!(matches!(executed, Executed::Committed), "{executed:?}");
        mop::advance_with(&mut store, run, &mut progress).unwrap();
    }
    // Epoch 0 is done, partition 0 by b: its later epochs are b's now; partition 1 was b's.
    let log = store.sub_epochs(run).unwrap();
    let epoch0: Vec<_> = log.iter().filter(|unit| unit.epoch == 0).collect();
    assert!(
        epoch0
            .iter()
            .all(|unit| unit.lease_owner.as_deref() == Some("worker:b"))
    );
    assert_eq!(
        targets(&store, 0),
        vec![
            Some("worker:a".to_owned()),
            Some("worker:b".to_owned()),
            Some("worker:b".to_owned())
        ]
    );
    assert_eq!(targets(&store, 1), vec![Some("worker:b".to_owned()); 3]);
    // b holds both partitions' rows; nothing else was loaded.
    assert_eq!(
        cache.rows_held(),
        easeml_trainer::data::split_by_id(&(1..=60).collect::<Vec<u64>>(), 0.2)
            .0
            .len()
    );
}

#[test]
fn a_run_stops_after_the_epoch_past_which_another_would_not_fit_its_time_limit() {
    let (_home, mut store, app) = store_with_app();
    // No epoch fits a microsecond: the run serves its first epoch and stops.
    let mut plan = plan(11);
    plan.epochs = 10;
    plan.max_seconds = Some(1e-6);
    let run = mop::start_run(&mut store, app, "mlp_small", &plan, &[]).unwrap();
    train_in_step(&mut store, run);
    let log = store.sub_epochs(run).unwrap();
    let trained: BTreeSet<u64> = log
        .iter()
        .filter(|unit| unit.result.is_some())
        .map(|unit| unit.epoch)
        .collect();
    assert_eq!(trained, BTreeSet::from([0]), "{log:?}");
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done);
    let protocol = record.validation.protocol.unwrap();
    assert!(
        protocol.contains("stopped after 1 of 10 epochs: its time limit"),
        "{protocol}"
    );
}

#[test]
fn a_plan_past_the_epoch_limit_is_refused_before_anything_is_queued() {
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let app = register(&mut store);
    feed(&mut store, app, 60);
    let mut plan = plan(1);
    plan.epochs = mop::MAX_MOP_EPOCHS + 1;
    let error = mop::start_run(&mut store, app, "mlp_small", &plan, &[])
        .unwrap_err()
        .to_string();
    assert!(error.contains("at most 1000 epochs"), "{error}");
    plan.epochs = 0;
    assert!(mop::start_run(&mut store, app, "mlp_small", &plan, &[]).is_err());
    assert!(store.runs(app).unwrap().is_empty());
    assert!(store.open_units().unwrap().is_empty());
}

/// A data-parallel run's log: every epoch's ranks committed, rank 0 with the epoch's state and
/// its place in the log, each epoch starting from the last one's state; the replay (the same
/// gangs as threads of this process) equals the workers' last state bit for bit; the run is done
/// and says how it trained.
fn check_gang_run(store: &Store, run: RunId, plan: &MopPlan) {
    let log = store.sub_epochs(run).unwrap();
    assert_eq!(log.len() as u64, plan.epochs * plan.partitions);
    assert!(log.iter().all(|unit| unit.state == UnitState::Committed));
    assert!(log.iter().all(|unit| unit.gang == Some(plan.partitions)));
    let states: Vec<_> = log.iter().filter(|unit| unit.seq.is_some()).collect();
    assert_eq!(states.len() as u64, plan.epochs, "one state per epoch");
    for (epoch, unit) in states.iter().enumerate() {
        assert_eq!((unit.epoch, unit.partition), (epoch as u64, 0));
        assert!(unit.result.is_some());
    }
    for pair in states.windows(2) {
        assert_eq!(pair[1].input, pair[0].result);
    }
    // Every rank of an epoch started from the same state.
    for unit in &log {
        assert_eq!(unit.input, states[unit.epoch as usize].input, "{unit:?}");
    }
    let last = store
        .blob(states.last().unwrap().result.as_ref().unwrap())
        .unwrap();
    assert!(
        mop::replay(store, run).unwrap() == last,
        "run {}: the replay differs from the gang",
        run.0
    );
    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done, "{:?}", record.error);
    assert!(
        record
            .validation
            .protocol
            .as_deref()
            .unwrap_or_default()
            .contains("data parallelism"),
        "{:?}",
        record.validation.protocol
    );
    let shape = mop::mop_shape(store, run).unwrap().unwrap();
    assert!(shape.gang);
    check_answers(store, &record);
}

fn gang_plan(seed: u64) -> MopPlan {
    let mut plan = plan(seed);
    plan.gang = true;
    plan
}

#[test]
fn two_workers_train_one_model_by_data_parallelism_and_a_replay_is_bit_identical() {
    let home = tempfile::tempdir().unwrap();
    gang_of_two(home.path());
}

#[test]
fn on_postgres_two_workers_train_one_model_by_data_parallelism() {
    let Some(url) = postgres_server::database() else {
        return;
    };
    let blobs = tempfile::tempdir().unwrap();
    let home = easeml_store::store_home(&url, Some(blobs.path())).unwrap();
    gang_of_two(&home);
}

/// Two workers (threads) train one model as gangs over the store at `home`.
fn gang_of_two(home: &Path) {
    tch::set_num_threads(1);
    let mut store = Store::open(home).unwrap();
    let app = register(&mut store);
    feed(&mut store, app, 60);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2)
        .map(|_| worker_thread(home, Duration::from_secs(10), &stop))
        .collect();
    let ids = live_workers(home, 2);
    let plan = gang_plan(5);
    let run = mop::start_run(&mut store, app, "mlp_small", &plan, &ids).unwrap();
    coordinate(home, &[run]);
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().unwrap();
    }
    check_gang_run(&store, run, &plan);
    // Each rank was trained by the worker holding its partition, in one attempt.
    for unit in store.sub_epochs(run).unwrap() {
        assert_eq!(unit.lease_owner, unit.target_worker);
        assert_eq!(unit.attempt, 1);
    }
}

#[test]
fn a_gang_rank_killed_mid_epoch_breaks_the_gang_and_the_epoch_is_trained_again() {
    tch::set_num_threads(1);
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let app = register(&mut store);
    // Enough rows that an epoch takes a while (thousands of steps, each a ring exchange).
    feed(&mut store, app, 10_000);
    let stop = Arc::new(AtomicBool::new(false));
    let ttl = KILL_TEST_TTL;
    let survivor = worker_thread(home.path(), ttl, &stop);
    let survivor_id = live_workers(home.path(), 1).remove(0);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, home.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ids = live_workers(home.path(), 2);
    let child_id = ids.iter().find(|id| **id != survivor_id).unwrap().clone();
    let mut plan = gang_plan(6);
    plan.batch_size = 1;
    let run = mop::start_run(
        &mut store,
        app,
        "mlp_small",
        &plan,
        &[survivor_id.clone(), child_id.clone()],
    )
    .unwrap();
    // Kill the child (rank 1) once the gang has formed (both ranks hold their units and wrote
    // their listeners) and trains.
    let started = Instant::now();
    loop {
        let gang = store.gang(run, 0).unwrap();
        if gang
            .iter()
            .all(|rank| rank.state == UnitState::Leased && rank.endpoint.is_some())
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gang did not form"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The ranks connect their ring within milliseconds of forming; an epoch (4,000 steps, each a
    // ring exchange) takes seconds.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    let after_kill = store.gang(run, 0).unwrap();
    // Another worker takes the gone child's rank over.
    let replacement = worker_thread(home.path(), ttl, &stop);
    coordinate(home.path(), &[run]);
    stop.store(true, Ordering::SeqCst);
    survivor.join().unwrap();
    replacement.join().unwrap();

    assert!(
        after_kill
            .iter()
            .all(|rank| rank.state != UnitState::Committed),
        "the epoch was committed before the kill: {after_kill:?}"
    );
    check_gang_run(&store, run, &plan);
    let log = store.sub_epochs(run).unwrap();
    // Rank 1 of epoch 0 was lost with the child and re-leased by the replacement; rank 0 gave
    // its lease back when the ring broke and trained the epoch again.
    let rank_one = log
        .iter()
        .find(|unit| (unit.epoch, unit.partition) == (0, 1))
        .unwrap();
    assert!(rank_one.attempt >= 2, "{rank_one:?}");
    assert_ne!(rank_one.lease_owner.as_deref(), Some(child_id.as_str()));
    let rank_zero = log
        .iter()
        .find(|unit| (unit.epoch, unit.partition) == (0, 0))
        .unwrap();
    assert!(rank_zero.attempt >= 2, "{rank_zero:?}");
    // It gave its lease back as lost: the ring broke mid-epoch, not while the gang formed.
    assert!(store.unit(rank_zero.unit).unwrap().losses >= 1);
    assert_eq!(rank_zero.lease_owner.as_deref(), Some(survivor_id.as_str()));
    println!(
        "the gang re-formed and the run finished {:.2} s after the kill",
        killed.elapsed().as_secs_f64()
    );
}

#[test]
fn a_gang_that_loses_a_worker_for_good_trains_its_last_epochs_by_hopping() {
    tch::set_num_threads(1);
    let home = tempfile::tempdir().unwrap();
    let mut store = Store::open(home.path()).unwrap();
    let app = register(&mut store);
    feed(&mut store, app, 60);
    let ttl = Duration::from_secs(10);
    let stay = Arc::new(AtomicBool::new(false));
    let leave = Arc::new(AtomicBool::new(false));
    let staying = worker_thread(home.path(), ttl, &stay);
    let first = live_workers(home.path(), 1).remove(0);
    let leaving = worker_thread(home.path(), ttl, &leave);
    let ids = live_workers(home.path(), 2);
    let mut plan = gang_plan(8);
    plan.epochs = 4;
    let run = mop::start_run(&mut store, app, "mlp_small", &plan, &ids).unwrap();
    // Once the first epoch is committed, one worker stops for good (after the unit it holds).
    let started = Instant::now();
    while store
        .gang(run, 0)
        .unwrap()
        .iter()
        .any(|rank| rank.state != UnitState::Committed)
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "epoch 0 did not train"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    leave.store(true, Ordering::SeqCst);
    leaving.join().unwrap();
    coordinate(home.path(), &[run]);
    stay.store(true, Ordering::SeqCst);
    staying.join().unwrap();

    let record = store.run(run).unwrap();
    assert_eq!(record.state, RunState::Done, "{:?}", record.error);
    let log = store.sub_epochs(run).unwrap();
    assert!(log.iter().all(|unit| unit.state == UnitState::Committed));
    // The first epoch trained as a gang; the last ones hopped, on the worker that stayed.
    assert!(
        log.iter()
            .filter(|unit| unit.epoch == 0)
            .all(|unit| unit.gang == Some(2))
    );
    let hops: Vec<_> = log.iter().filter(|unit| unit.gang.is_none()).collect();
    assert!(!hops.is_empty(), "{log:?}");
    assert!(
        hops.iter().all(
            |unit| unit.lease_owner.as_deref() == Some(first.as_str()) && unit.result.is_some()
        )
    );
    assert!(hops.iter().all(|unit| unit.epoch >= 1));
    // The log is one chain, and the replay (gangs and hops) equals it bit for bit.
    let states: Vec<_> = log.iter().filter(|unit| unit.seq.is_some()).collect();
    for pair in states.windows(2) {
        assert_eq!(pair[1].input, pair[0].result);
    }
    let last = store
        .blob(states.last().unwrap().result.as_ref().unwrap())
        .unwrap();
    assert!(mop::replay(&store, run).unwrap() == last);
}
