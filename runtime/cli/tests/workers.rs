//! Work units and workers with the real `easeml` binary and real processes: `easeml train
//! --workers 2` trains every candidate once over two worker processes, the networks by model
//! hopping when asked or when `auto` finds the data large (a killed MOP coordinator's runs are
//! resumed by the next session); a worker killed with SIGKILL
//! mid-unit loses the unit to another worker when its lease expires (the run is done, not failed);
//! a second coordinator on the same store is refused; a coordinator killed with SIGKILL is
//! replaced by one that takes over the open units; SIGTERM stops a worker; bad device lists are
//! clear errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use easeml_runtime::RunState;
use easeml_runtime::store::{Store, UnitState};

const EASEML: &str = env!("CARGO_BIN_EXE_easeml");

mod common;

use common::{SIDES, feed_shapes, feed_sides, is_network, wait_until};

fn easeml(args: &[&str]) -> Command {
    let mut command = Command::new(EASEML);
    command.args(args).env("EASEML_DEVICE", "cpu");
    command
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A run's state, its unit's attempt and its error.
type RunSummary = (RunState, Option<u32>, Option<String>);

/// Every run of the store's apps by candidate, with the attempt of its unit.
fn runs_by_candidate(data: &Path) -> BTreeMap<String, Vec<RunSummary>> {
    let store = Store::open(data).unwrap();
    let mut runs: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for app in store.apps().unwrap() {
        for run in store.runs(app.id).unwrap() {
            let attempt = store.unit_of_run(run.id).unwrap().map(|unit| unit.attempt);
            runs.entry(format!("{}/{}", app.name, run.candidate))
                .or_default()
                .push((run.state, attempt, run.error));
        }
    }
    runs
}

/// Kills the processes it was given when dropped, so that a failing test leaves no worker behind.
struct Reaper(Vec<u32>);

impl Reaper {
    fn watch(&mut self, child: Child) -> Child {
        self.0.push(child.id());
        child
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn two_local_workers_train_every_candidate_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let output = easeml(&["train", "--workers", "2", "--max-run", "10s", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let log = text(&output);
    assert!(output.status.success(), "{log}");
    assert!(log.contains("started 2 local worker(s)"), "{log}");
    assert!(log.contains("2 workers live"), "{log}");
    assert!(log.contains("nothing is left to train"), "{log}");

    let runs = runs_by_candidate(&data);
    assert!(runs.len() >= 3, "{runs:?}");
    for (candidate, runs) in &runs {
        // One run per candidate, leased once: no unit was trained twice.
        assert_eq!(runs.len(), 1, "{candidate}: {runs:?}");
        let (state, attempt, error) = &runs[0];
        assert_eq!(*attempt, Some(1), "{candidate}");
        assert!(
            matches!(state, RunState::Done | RunState::Failed),
            "{candidate}: {state:?} {error:?}"
        );
    }
    let store = Store::open(&data).unwrap();
    let workers = store.workers().unwrap();
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert!(workers.iter().all(|worker| worker.threads >= 1));
    assert!(
        workers
            .iter()
            .all(|worker| worker.pid != std::process::id())
    );
    // Both workers took units (the coordinator hands out two at a time).
    let owners: std::collections::BTreeSet<String> = store
        .apps()
        .unwrap()
        .iter()
        .flat_map(|app| store.runs(app.id).unwrap())
        .filter_map(|run| store.unit_of_run(run.id).unwrap())
        .filter_map(|unit| unit.lease_owner)
        .collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    // The local workers stopped with their coordinator.
    wait_until("the workers to stop", Duration::from_secs(15), || {
        let workers = store.workers().unwrap();
        workers
            .iter()
            .all(|worker| worker.state == easeml_runtime::store::WorkerState::Stopped)
            .then_some(())
    });

    // `workers list` shows them.
    let listed = easeml(&["workers", "list", "--store"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let table = text(&listed);
    assert!(
        table.contains("stopped") && table.contains("cpu"),
        "{table}"
    );
    let json = easeml(&["workers", "list", "--json", "--store"])
        .arg(&data)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(2), "{rows}");
}

/// The networks of the sides app: the candidates that can hop.
const SIDES_NETWORKS: [&str; 3] = ["logistic", "mlp_large", "mlp_small"];

/// Each run of the store's app by candidate with its sub-epoch log: each sub-epoch's epoch,
/// partition, state and lease owner.
type MopLogs = BTreeMap<String, Vec<(RunState, Vec<(u64, u64, UnitState, Option<String>)>)>>;

fn mop_logs(store: &Store) -> MopLogs {
    let app = store.apps().unwrap().remove(0);
    let mut logs: MopLogs = BTreeMap::new();
    for run in store.runs(app.id).unwrap() {
        let log = store
            .sub_epochs(run.id)
            .unwrap()
            .into_iter()
            .map(|unit| (unit.epoch, unit.partition, unit.state, unit.lease_owner))
            .collect();
        logs.entry(run.candidate)
            .or_default()
            .push((run.state, log));
    }
    logs
}

/// The learning rates a decision trained by hopping tries (one MOP run each).
const MOP_RATES: usize = 3;

/// Every candidate was decided once and is done: each network by hopping (one run per learning
/// rate, `epochs` x 2 sub-epochs each trained once), the others as one whole run. Returns the
/// workers that trained sub-epochs.
fn check_hopped_once(logs: &MopLogs, epochs: u64) -> std::collections::BTreeSet<String> {
    let mut owners = std::collections::BTreeSet::new();
    for (candidate, runs) in logs {
        let network = SIDES_NETWORKS.contains(&candidate.as_str());
        let expected = if network { MOP_RATES } else { 1 };
        assert_eq!(runs.len(), expected, "{candidate}: {runs:?}");
        for (state, log) in runs {
            assert_eq!(*state, RunState::Done, "{candidate}: {runs:?}");
            if !network {
                assert!(log.is_empty(), "{candidate} cannot hop: {log:?}");
                continue;
            }
            assert!(
                log.iter()
                    .all(|(_, _, state, _)| *state == UnitState::Committed),
                "{candidate}: {log:?}"
            );
            let visits: std::collections::BTreeSet<_> = log
                .iter()
                .map(|(epoch, partition, _, _)| (*epoch, *partition))
                .collect();
            assert_eq!(
                (visits.len(), log.len()),
                (2 * epochs as usize, 2 * epochs as usize),
                "{candidate}: {log:?}"
            );
            owners.extend(log.iter().filter_map(|(_, _, _, owner)| owner.clone()));
        }
    }
    for network in SIDES_NETWORKS {
        assert!(logs.contains_key(network), "{network} never ran: {logs:?}");
    }
    owners
}

#[test]
fn two_local_workers_train_the_networks_by_model_hopping() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    // One worker cannot hop: a clear error, nothing trained.
    let refused = easeml(&["train", "--parallelism", "mop", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("needs --workers N with N >= 2"),
        "{}",
        text(&refused)
    );
    for (args, error) in [
        (&["--parallelism", "hops"][..], "unknown parallelism `hops`"),
        (&["--mop-above", "12Q"][..], "`12Q` is not a size"),
        (&["--mop-above", "99999999999G"][..], "too large a size"),
        (&["--epochs", "0"][..], "0 is not in 1..=1000"),
        (&["--epochs", "99999999999"][..], "is not in 1..=1000"),
    ] {
        let output = easeml(&["train", "--workers", "2"])
            .args(args)
            .arg("--data")
            .arg(&data)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        assert!(text(&output).contains(error), "{args:?}: {}", text(&output));
    }
    assert!(mop_logs(&Store::open(&data).unwrap()).is_empty());

    // Every decision of the scheduler is trained: the networks by hopping, the rest whole.
    let output = easeml(&[
        "train",
        "--workers",
        "2",
        "--parallelism",
        "mop",
        "--epochs",
        "2",
        "--data",
    ])
    .arg(&data)
    .output()
    .unwrap();
    let log = text(&output);
    assert!(output.status.success(), "{log}");
    assert_eq!(
        log.matches("training by model hopping").count(),
        SIDES_NETWORKS.len() * MOP_RATES,
        "{log}"
    );
    for rate in ["0.001", "0.01", "0.1"] {
        assert!(log.contains(&format!("learning rate {rate})")), "{log}");
    }
    assert!(log.contains("nothing is left to train"), "{log}");
    let owners = check_hopped_once(&mop_logs(&Store::open(&data).unwrap()), 2);
    assert_eq!(owners.len(), 2, "{owners:?}");
}

#[test]
fn two_local_workers_train_the_networks_by_data_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let refused = easeml(&["train", "--parallelism", "data", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("--parallelism data needs --workers N with N >= 2"),
        "{}",
        text(&refused)
    );
    let output = easeml(&[
        "train",
        "--workers",
        "2",
        "--parallelism",
        "data",
        "--epochs",
        "2",
        "--data",
    ])
    .arg(&data)
    .output()
    .unwrap();
    let log = text(&output);
    assert!(output.status.success(), "{log}");
    assert_eq!(
        log.matches("training by data parallelism").count(),
        SIDES_NETWORKS.len() * MOP_RATES,
        "{log}"
    );
    assert!(log.contains("nothing is left to train"), "{log}");
    // Each network's runs: every epoch's two ranks committed, trained at once by both workers,
    // one state per epoch (rank 0's).
    let store = Store::open(&data).unwrap();
    let app = store.apps().unwrap().remove(0);
    let mut gangs = 0;
    for run in store.runs(app.id).unwrap() {
        assert_eq!(run.state, RunState::Done, "{run:?}");
        let log = store.sub_epochs(run.id).unwrap();
        if !SIDES_NETWORKS.contains(&run.candidate.as_str()) {
            assert!(log.is_empty(), "{} cannot hop: {log:?}", run.candidate);
            continue;
        }
        gangs += 1;
        assert_eq!(log.len(), 4, "{log:?}");
        assert!(
            log.iter()
                .all(|unit| unit.gang == Some(2) && unit.state == UnitState::Committed)
        );
        for epoch in 0..2 {
            let ranks: Vec<_> = log.iter().filter(|unit| unit.epoch == epoch).collect();
            let owners: std::collections::BTreeSet<_> =
                ranks.iter().map(|unit| unit.lease_owner.clone()).collect();
            assert_eq!(owners.len(), 2, "{ranks:?}");
            assert_eq!(
                ranks.iter().filter(|unit| unit.result.is_some()).count(),
                1,
                "{ranks:?}"
            );
        }
    }
    assert_eq!(gangs, SIDES_NETWORKS.len() * MOP_RATES);
}

#[test]
fn auto_parallelism_hops_when_copying_the_data_to_every_worker_costs_more_than_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let train = |data: &Path, above: &str| {
        let output = easeml(&["train", "--workers", "2", "--epochs", "1", "--mop-above"])
            .arg(above)
            .arg("--data")
            .arg(data)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        mop_logs(&Store::open(data).unwrap())
    };
    // 80 examples of 2 values: about 3 KB held by each of two workers.
    let small = dir.path().join("small");
    feed_sides(&small, 80);
    let logs = train(&small, "1G");
    assert!(
        logs.values()
            .all(|runs| runs.iter().all(|(_, log)| log.is_empty())),
        "nothing hops below the limit: {logs:?}"
    );
    let large = dir.path().join("large");
    feed_sides(&large, 80);
    let logs = train(&large, "1K");
    // Three networks on two workers: at least half as many models as workers, so all three hop.
    check_hopped_once(&logs, 1);
    for network in SIDES_NETWORKS {
        assert!(
            logs[network].iter().all(|(_, log)| !log.is_empty()),
            "{network}: {logs:?}"
        );
    }
}

#[test]
fn a_killed_mop_coordinator_is_resumed_by_the_next_session() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 200);
    let epochs = "10";
    let mop = || {
        easeml(&[
            "train",
            "--workers",
            "2",
            "--parallelism",
            "mop",
            "--epochs",
            epochs,
            "--data",
        ])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let mut reaper = Reaper(Vec::new());
    // The first coordinator is killed with SIGKILL as soon as it has started a decision's MOP
    // runs (its workers stop when their stdin pipe closes with it).
    let mut first = reaper.watch(mop());
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut started = 0;
    // A decision's runs (one per learning rate) are queued one after the other: the kill comes
    // once the first decision has all of them (then no worker's place is free for another
    // decision until one of its 10-epoch runs ends).
    while started < MOP_RATES {
        let line = lines
            .next()
            .expect("the first session ended early")
            .unwrap();
        started += usize::from(line.contains("training by model hopping"));
        seen.push(line);
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let store = Store::open(&data).unwrap();
    // The open MOP runs, by candidate.
    let open: BTreeMap<String, usize> = mop_logs(&store)
        .into_iter()
        .map(|(candidate, runs)| {
            let open = runs
                .iter()
                .filter(|(state, log)| *state != RunState::Done && !log.is_empty())
                .count();
            (candidate, open)
        })
        .filter(|(_, open)| *open > 0)
        .collect();
    assert!(!open.is_empty(), "{seen:?}");
    // The app's status says how far each open run's hops are.
    let status = easeml_runtime::Client::open(
        &easeml_runtime::Connection::embedded(&data),
        common::spec_of(SIDES),
    )
    .unwrap()
    .status()
    .unwrap();
    let hops: Vec<_> = status.runs.iter().filter_map(|run| run.hops).collect();
    assert_eq!(hops.len(), open.values().sum::<usize>(), "{status}");
    assert!(
        hops.iter()
            .all(|hops| hops.committed < hops.total && hops.total == 2 * 10),
        "{status}"
    );
    assert!(status.to_string().contains("(model hopping: "), "{status}");

    // The next session takes the open runs over (its workers the killed session's partitions),
    // finishes them, and decides the rest; nothing runs twice.
    let second = mop().wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{log}");
    for (candidate, runs) in &open {
        assert_eq!(
            log.matches(&format!("{candidate:<22} resumed by model hopping"))
                .count(),
            *runs,
            "{candidate}: {log}"
        );
    }
    assert_eq!(
        log.matches("resumed by model hopping").count(),
        open.values().sum::<usize>(),
        "{log}"
    );
    check_hopped_once(&mop_logs(&store), 10);
    assert!(store.open_units().unwrap().is_empty());
}

#[test]
fn serve_coordinates_local_workers_by_model_hopping_and_stops_them_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let compiled =
        easeml_compiler::compile(SIDES, "app", &easeml_compiler::Registry::builtin()).unwrap();
    let candidates = easeml_compiler::codegen::manifest(&compiled)
        .candidate_ids()
        .count();
    let mut reaper = Reaper(Vec::new());
    let mut server = reaper.watch(
        easeml(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--max-run",
            "10s",
            "--parallelism",
            "mop",
            "--epochs",
            "1",
            "--data",
        ])
        .arg(&data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains("serving http://"), "{line}");
    wait_until("every candidate trained", Duration::from_secs(180), || {
        let runs = runs_by_candidate(&data);
        let finished = runs
            .values()
            .flatten()
            .filter(|(state, _, _)| matches!(state, RunState::Done | RunState::Failed))
            .count();
        // A network's decision is one run per learning rate.
        let runs = candidates + SIDES_NETWORKS.len() * (MOP_RATES - 1);
        (finished == runs).then_some(())
    });
    signal(&server, "-TERM");
    let status = server.wait().unwrap();
    assert!(status.success(), "{status}");
    let store = Store::open(&data).unwrap();
    // The networks trained by hopping over both workers, the rest as whole runs.
    assert_eq!(check_hopped_once(&mop_logs(&store), 1).len(), 2);
    let workers = store.workers().unwrap();
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert!(
        workers
            .iter()
            .all(|worker| worker.state == easeml_runtime::store::WorkerState::Stopped),
        "{workers:?}"
    );
}

#[test]
fn killed_workers_and_coordinators_lose_nothing_and_run_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_shapes(&data);
    let ttl = "2s";
    let coordinator = |data: &Path, budget: Option<&str>| {
        let mut command = easeml(&[
            "train",
            "--workers",
            "0",
            "--lease-ttl",
            ttl,
            "--max-run",
            "3s",
            "--data",
        ]);
        command.arg(data);
        if let Some(budget) = budget {
            command.args(["--budget", budget]);
        }
        command.stdout(Stdio::null()).spawn().unwrap()
    };
    let worker = |data: &Path| {
        easeml(&[
            "worker",
            "--threads",
            "1",
            "--lease-ttl",
            ttl,
            "--quiet",
            "--store",
        ])
        .arg(data)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
    };
    let mut reaper = Reaper(Vec::new());
    // The first coordinator runs until it is killed.
    let mut first = reaper.watch(coordinator(&data, None));
    let mut doomed = reaper.watch(worker(&data));
    let store = Store::open(&data).unwrap();
    // The doomed worker holds a network's unit (seconds long): SIGKILL it mid-unit.
    let doomed_id = wait_until("the first worker", Duration::from_secs(60), || {
        store
            .workers()
            .unwrap()
            .into_iter()
            .find(|worker| worker.pid == doomed.id())
            .map(|worker| worker.id)
    });
    let unit = wait_until("a network's unit leased", Duration::from_secs(120), || {
        store.open_units().unwrap().into_iter().find(|unit| {
            unit.state == UnitState::Leased
                && unit.lease_owner.as_ref() == Some(&doomed_id)
                && is_network(&unit.candidate)
        })
    });
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    let killed = Instant::now();

    // A second coordinator on the same store is refused.
    let second = easeml(&["train", "--workers", "0", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert!(
        text(&second).contains("another process already trains the store"),
        "{}",
        text(&second)
    );

    // Another worker takes the unit over once the lease expires.
    let survivor = reaper.watch(worker(&data));
    let taken_over = wait_until("the unit taken over", Duration::from_secs(60), || {
        let record = store.unit(unit.id).unwrap();
        (record.attempt >= 2).then_some(record)
    });
    let recovery = killed.elapsed();
    assert_ne!(taken_over.lease_owner.as_deref(), Some(doomed_id.as_str()));
    assert_eq!(taken_over.losses, 1);
    eprintln!("recovery after SIGKILL: {recovery:?} (lease time to live {ttl})");

    // The coordinator dies too (SIGKILL); its replacement takes over the open units.
    first.kill().unwrap();
    first.wait().unwrap();
    let mut replacement = reaper.watch(coordinator(&data, Some("20s")));
    let status = wait_until(
        "the replacement coordinator",
        Duration::from_secs(120),
        || replacement.try_wait().unwrap(),
    );
    assert!(status.success(), "{status}");

    let run = store.run(unit.run).unwrap();
    assert_eq!(run.state, RunState::Done, "{run:?}");
    let runs = runs_by_candidate(&data);
    for (candidate, runs) in &runs {
        assert_eq!(runs.len(), 1, "{candidate} ran more than once: {runs:?}");
        let (state, attempt, error) = &runs[0];
        assert!(
            attempt.is_some_and(|attempt| attempt <= 2),
            "{candidate}: {runs:?}"
        );
        assert!(
            *state == RunState::Done
                || error
                    .as_deref()
                    .is_some_and(|error| !error.contains("lost")),
            "{candidate}: {runs:?}"
        );
    }
    assert!(store.open_units().unwrap().is_empty());

    // SIGTERM stops the idle survivor cleanly.
    signal(&survivor, "-TERM");
    let status = survivor.wait_with_output().unwrap().status;
    assert!(status.success(), "{status}");
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
}

#[test]
fn sigterm_gives_a_busy_workers_unit_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_shapes(&data);
    let mut store = Store::open(&data).unwrap();
    let app = store.app_by_name("shapes").unwrap().unwrap();
    let spec = r#"{"max_seconds":30.0,"deadline_ms":null,"max_epochs":200,"min_steps":0,"seed":0,"tuning":"grid"}"#;
    let (run, unit) = store.queue_unit(app.id, "resnet50", spec).unwrap();
    let mut reaper = Reaper(Vec::new());
    let worker = reaper.watch(
        easeml(&["worker", "--threads", "1", "--store"])
            .arg(&data)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_until("the unit leased", Duration::from_secs(60), || {
        (store.unit(unit).unwrap().state == UnitState::Leased).then_some(())
    });
    signal(&worker, "-TERM");
    let output = worker.wait_with_output().unwrap();
    let log = text(&output);
    assert!(log.contains(&format!("gave unit {} back", unit.0)), "{log}");
    let record = store.unit(unit).unwrap();
    assert_eq!(record.state, UnitState::Queued);
    assert_eq!(record.losses, 0);
    assert_eq!(store.run(run).unwrap().state, RunState::Queued);
}

#[test]
fn bad_worker_and_device_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let cases: &[(&[&str], &str)] = &[
        (&["train", "--workers", "2", "--devices", "tpu"], "`tpu`"),
        (
            &["train", "--workers", "2", "--devices", "cpu,cuda:x"],
            "not a number",
        ),
        (
            &["train", "--workers", "1", "--devices", "cpu,cpu"],
            "one worker trains on one device",
        ),
        (&["train", "--workers", "many"], "invalid value"),
        (
            &["train", "--workers", "100000"],
            "local worker processes on",
        ),
        (
            &["serve", "--workers", "100000"],
            "local worker processes on",
        ),
        (&["worker", "--device", "gpu"], "`gpu`"),
        (&["worker", "--threads", "0"], "--threads"),
        (&["worker", "--lease-ttl", "soon"], "not a duration"),
    ];
    for (args, expected) in cases {
        let output = easeml(args).arg("--data").arg(&data).output().unwrap();
        let message = text(&output);
        assert!(!output.status.success(), "{args:?}: {message}");
        assert!(message.contains(expected), "{args:?}: {message}");
    }
    if !tch::Cuda::is_available() {
        let output = easeml(&["train", "--workers", "2", "--devices", "cuda:7", "--data"])
            .arg(&data)
            .output()
            .unwrap();
        let message = text(&output);
        assert!(message.contains("CUDA is not available"), "{message}");
    }
    // A worker on a folder without a store creates nothing.
    let missing = dir.path().join("missing");
    let output = easeml(&["worker", "--store"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(
        text(&output).contains("no easeml store"),
        "{}",
        text(&output)
    );
    assert!(!missing.exists());
    // Nothing was trained or registered by the refused commands.
    assert!(Store::open(&data).unwrap().workers().unwrap().is_empty());
}

/// Runs finished per minute with one in-process worker (libtorch's threads: one per core) against
/// one worker process per core (1 thread each), on the same app, one after the other. Ignored: run
/// it with `cargo test -p easeml-cli --test workers -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_runs_per_minute_by_worker_count() {
    let minutes = 1.0;
    let dir = tempfile::tempdir().unwrap();
    for (workers, label) in [
        ("1", "--workers 1 (in process)"),
        ("2", "--workers 2 (processes)"),
    ] {
        let data = dir.path().join(format!("home-{workers}"));
        feed_shapes(&data);
        let started = Instant::now();
        let output = easeml(&[
            "train",
            "--workers",
            workers,
            "--max-run",
            "5s",
            "--budget",
            "60s",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        let seconds = started.elapsed().as_secs_f64();
        let runs = runs_by_candidate(&data);
        let finished = runs
            .values()
            .flatten()
            .filter(|(state, _, _)| matches!(state, RunState::Done | RunState::Failed))
            .count();
        println!(
            "{label}: {finished} runs in {seconds:.1} s = {:.1} runs per minute (budget {minutes} min)",
            finished as f64 / seconds * 60.0
        );
    }
}

#[test]
fn workers_submit_writes_a_slurm_job_array_and_workers_record_their_job() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let home = std::fs::canonicalize(&data).unwrap();
    let output = easeml(&[
        "workers",
        "submit",
        "--slurm",
        "--count",
        "3",
        "--gres",
        "gpu:1",
        "--partition",
        "gpu-short",
        "--time",
        "1-02:00:00",
        "--lease-ttl",
        "20s",
        "--dry-run",
        "--store",
    ])
    .arg(&data)
    .output()
    .unwrap();
    let script = text(&output);
    assert!(output.status.success(), "{script}");
    for line in [
        "#!/bin/bash",
        "#SBATCH --array=0-2",
        "#SBATCH --requeue",
        "#SBATCH --signal=B:TERM@120",
        "#SBATCH --time=1-02:00:00",
        "#SBATCH --partition=gpu-short",
        "#SBATCH --gres=gpu:1",
    ] {
        assert!(
            script.lines().any(|l| l == line),
            "{line} missing:\n{script}"
        );
    }
    let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    assert!(
        exec.contains(&format!("worker --store '{}'", home.display())),
        "{exec}"
    );
    assert!(exec.contains("--device cuda:0"), "{exec}");
    assert!(exec.contains("--lease-ttl 20000ms"), "{exec}");
    assert!(exec.contains("${SLURM_CPUS_PER_TASK:-1}"), "{exec}");
    // The script is valid shell.
    let checked = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .spawn()
        .and_then(|mut bash| {
            use std::io::Write;
            bash.stdin.take().unwrap().write_all(script.as_bytes())?;
            bash.wait()
        })
        .unwrap();
    assert!(checked.success());

    // Bad values never reach an #SBATCH line; --slurm is required.
    let cases: &[(&[&str], &str)] = &[
        (&["--count", "2", "--dry-run"], "--slurm"),
        (&["--slurm", "--count", "0", "--dry-run"], "--count"),
        (
            &[
                "--slurm",
                "--count",
                "2",
                "--partition",
                "a\n#SBATCH --x",
                "--dry-run",
            ],
            "--partition",
        ),
        (
            &["--slurm", "--count", "2", "--time", "4 hours", "--dry-run"],
            "--time",
        ),
    ];
    for (args, expected) in cases {
        let output = easeml(&["workers", "submit"])
            .args(*args)
            .arg("--store")
            .arg(&data)
            .output()
            .unwrap();
        let message = text(&output);
        assert!(!output.status.success(), "{args:?}: {message}");
        assert!(message.contains(expected), "{args:?}: {message}");
    }

    // Without Slurm here, submitting says so (the script is kept for a look).
    let has_sbatch = Command::new("sbatch").arg("--version").output().is_ok();
    if !has_sbatch {
        let output = easeml(&["workers", "submit", "--slurm", "--count", "1", "--store"])
            .arg(&data)
            .output()
            .unwrap();
        let message = text(&output);
        assert!(message.contains("cannot run sbatch"), "{message}");
        assert!(message.contains("--dry-run"), "{message}");
    }

    // A worker started by Slurm records its job; `workers list` shows it.
    let worker = easeml(&["worker", "--idle-exit", "200ms", "--quiet", "--store"])
        .arg(&data)
        .env("SLURM_ARRAY_JOB_ID", "77")
        .env("SLURM_ARRAY_TASK_ID", "3")
        .output()
        .unwrap();
    assert!(worker.status.success(), "{}", text(&worker));
    let listed = easeml(&["workers", "list", "--store"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(text(&listed).contains("77_3"), "{}", text(&listed));
    let json = easeml(&["workers", "list", "--json", "--store"])
        .arg(&data)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows[0]["slurm_job"], "77_3", "{rows}");
    assert_eq!(rows[0]["state"], "stopped", "{rows}");
}

#[test]
fn a_run_in_flight_when_its_apps_data_changes_leaves_its_candidate_to_be_trained_again() {
    use easeml_runtime::engine::worker::{Worker, WorkerConfig};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("home");
    feed_sides(&data, 80);
    let mut reaper = Reaper(Vec::new());
    // A coordinator of workers started elsewhere; this test is its first worker.
    let coordinator = reaper.watch(
        easeml(&["train", "--workers", "0", "--parallelism", "task", "--data"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut store = Store::open(&data).unwrap();
    let mut config = WorkerConfig::for_device(tch::Device::Cpu);
    config.threads = Some(1);
    let mut worker = Worker::register(&mut store, "test", config).unwrap();
    let ttl = Duration::from_secs(30);
    let lease = wait_until(
        "the coordinator's first unit",
        Duration::from_secs(60),
        || store.lease_unit(worker.id(), ttl).unwrap(),
    );
    let app = store.apps().unwrap().remove(0);
    // New examples while the unit trains: the coordinator re-registers the app before it sees
    // the unit committed (it syncs first in every step).
    common::feed(&data, SIDES, common::sides_lines(100));
    let changed = store.app(app.id).unwrap().data_version;
    assert!(changed > app.data_version);
    worker.work(&mut store, &lease).unwrap();
    worker.stop(&mut store).unwrap();
    // A worker process trains the rest, until the coordinator has decided everything.
    let mut finisher = reaper.watch(
        easeml(&["worker", "--threads", "1", "--quiet", "--store"])
            .arg(&data)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut coordinator = coordinator;
    let status = wait_until(
        "the coordinator to finish",
        Duration::from_secs(300),
        || coordinator.try_wait().unwrap(),
    );
    assert!(status.success(), "{status}");
    signal(&finisher, "-TERM");
    finisher.wait().unwrap();
    // The candidate of the unit in flight ran on the old data (its worker found that data gone:
    // failed, or done when it read it first) and again on the new.
    let runs: Vec<_> = store
        .runs(app.id)
        .unwrap()
        .into_iter()
        .filter(|run| run.candidate == lease.candidate)
        .map(|run| (run.data_version, run.state))
        .collect();
    assert_eq!(runs.len(), 2, "{}: {runs:?}", lease.candidate);
    assert_eq!(runs[0].0, app.data_version, "{runs:?}");
    assert_eq!(runs[1], (changed, RunState::Done), "{runs:?}");
}
