//! Workers on a real Slurm cluster (munge, slurmctld and two slurmd nodes started by the test on
//! loopback: `support/slurm_cluster.rs`): `easeml workers submit --slurm` starts the workers as a
//! job array, a coordinator (`easeml train --workers 0`) trains the candidates of two apps (fed
//! through the client, as their generated `<app>-feed` binaries feed) over them, and
//! the faults of a real cluster lose nothing and run nothing twice:
//! - a worker stopped mid-unit (SIGSTOP: an orphaned job step that keeps running but stops
//!   heartbeating) loses its lease; the unit is re-leased and done by the other worker; when the
//!   orphan resumes, its late commit is refused by the fencing token;
//! - a node's slurmd and its worker killed with SIGKILL mid-unit: the unit is re-leased once its
//!   lease expires and finishes;
//! - every fed example is stored once, every candidate has exactly one run, `easeml workers list`
//!   shows the Slurm job of each worker, and `easeml serve` on the same store lists the apps with
//!   their runs, an app's examples (the refine page's list) and answers with its best model.
//!
//! The store is a PostgreSQL one (rows on a server the test starts), its blobs in a bucket of a
//! real S3-compatible server the test starts when built with the `s3` feature (bound as a user
//! binds it, `--store postgres://... --blobs s3://...`; the store's folder then holds only its
//! pointers and the Slurm files), else in the shared folder; or an SQLite one when no PostgreSQL
//! server can run here.
//!
//! The test skips with a loud banner when the daemons are not installed (`cargo xtask setup`
//! installs them).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use easeml_runtime::RunState;
use easeml_runtime::store::{PageRequest, Store, UnitState, WorkerRecord};

#[path = "support/slurm_cluster.rs"]
mod slurm_cluster;

#[path = "../../store/tests/support/postgres_server.rs"]
mod postgres_server;
#[cfg(feature = "s3")]
#[path = "../../store/tests/support/s3_server.rs"]
mod s3_server;
#[path = "../../store/tests/support/watchdog.rs"]
mod watchdog;

mod common;

use common::{SHAPES, SIDES, is_network, shapes_lines, sides_lines, wait_until};
use slurm_cluster::SlurmCluster;

const EASEML: &str = env!("CARGO_BIN_EXE_easeml");

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {name} {pid}");
}

/// Kills what is left of the test's processes when dropped, even when the test fails: the
/// coordinator, and every worker the store knows (a worker whose slurmd was killed is out of
/// Slurm's reach).
struct Reaper<'a> {
    data: &'a Path,
    children: Vec<Child>,
}

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Ok(store) = Store::open(self.data) {
            for worker in store.workers().unwrap_or_default() {
                let _ = Command::new("kill")
                    .args(["-KILL", &worker.pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// The store's workers that Slurm started, by their array task.
fn slurm_workers(store: &Store) -> Vec<WorkerRecord> {
    let mut workers: Vec<WorkerRecord> = store
        .workers()
        .unwrap()
        .into_iter()
        .filter(|worker| worker.slurm_job.is_some())
        .collect();
    workers.sort_by(|a, b| a.slurm_job.cmp(&b.slurm_job));
    workers
}

/// A network's unit of the image app leased by `worker` (seconds long), once there is one.
fn unit_held_by(store: &Store, worker: &str) -> Option<easeml_runtime::store::UnitRecord> {
    let shapes = store.app_by_name("shapes").unwrap().unwrap().id;
    store.open_units().unwrap().into_iter().find(|unit| {
        unit.state == UnitState::Leased
            && unit.lease_owner.as_deref() == Some(worker)
            && unit.app == shapes
            && is_network(&unit.candidate)
    })
}

#[test]
fn workers_submitted_to_slurm_train_every_candidate_once_through_node_and_worker_faults() {
    if !slurm_cluster::available() {
        return;
    }
    let mut cluster = SlurmCluster::start();
    let dir = tempfile::tempdir().unwrap();
    // The store: its rows in PostgreSQL (a server the test starts), its blobs in a folder every
    // node sees; the folder records the database, so every command and worker given it opens
    // the same store. Without a PostgreSQL server here, an SQLite store in the folder.
    let (data, in_bucket) = match postgres_server::database() {
        Some(url) => bind(&url, dir.path()),
        None => (dir.path().join("home"), false),
    };
    // Both apps are fed through the client, the code a generated `<app>-feed` runs (building
    // easemlc's crates here, without libtorch and with S3, cost over two minutes of a cold CI
    // run and checked nothing the golden crates do not), opening the folder's store as every
    // command does. The tabular app is registered here, before its feed, to keep its token
    // (shown once) for the server below.
    common::feed(&data, SHAPES, shapes_lines());
    let (_, sides_token) = common::spec_of(SIDES)
        .register(&mut Store::open(&data).unwrap())
        .unwrap();
    common::feed(&data, SIDES, sides_lines(60));
    let store = Store::open(&data).unwrap();
    let fed: Vec<u64> = store
        .apps()
        .unwrap()
        .iter()
        .map(|app| {
            store
                .examples(app.id, PageRequest::default())
                .unwrap()
                .total
        })
        .collect();
    assert_eq!(fed, [120, 60]);
    let mut reaper = Reaper {
        data: &data,
        children: Vec::new(),
    };

    // The coordinator, then two workers as a Slurm job array (one per one-CPU node).
    let ttl = "2s";
    let coordinator = Command::new(EASEML)
        .args(["train", "--workers", "0", "--lease-ttl", ttl])
        .args(["--max-run", "3s", "--budget", "40s", "--data"])
        .arg(&data)
        .env("EASEML_DEVICE", "cpu")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    reaper.children.push(coordinator);
    let submitted = cluster
        .command(EASEML)
        .args([
            "workers", "submit", "--slurm", "--count", "2", "--time", "10",
        ])
        .args(["--lease-ttl", ttl, "--threads", "1", "--store"])
        .arg(&data)
        .env("EASEML_DEVICE", "cpu")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&submitted.stderr).into_owned()
        + &String::from_utf8_lossy(&submitted.stdout);
    assert!(submitted.status.success(), "{said}\n{}", cluster.logs());
    let job: String = said
        .split("submitted Slurm job ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no job id in: {said}"))
        .to_owned();
    let workers = wait_until(
        "both workers started by Slurm",
        Duration::from_secs(60),
        || {
            let workers = slurm_workers(&store);
            (workers.len() == 2).then_some(workers)
        },
    );
    assert_eq!(
        workers
            .iter()
            .map(|worker| worker.slurm_job.clone().unwrap())
            .collect::<Vec<_>>(),
        [format!("{job}_0"), format!("{job}_1")]
    );
    let (orphan, other) = (&workers[0], &workers[1]);

    // 1. An orphaned step: the first worker stops mid-unit (no heartbeat) and its lease expires;
    // the other worker re-leases the unit and commits it; the orphan's late commit is refused.
    let stolen = wait_until(
        "a unit on the first worker",
        Duration::from_secs(120),
        || unit_held_by(&store, &orphan.id),
    );
    signal(orphan.pid, "-STOP");
    let retaken = wait_until("the unit re-leased", Duration::from_secs(60), || {
        let unit = store.unit(stolen.id).unwrap();
        (unit.attempt >= 2 && unit.lease_owner.as_deref() == Some(other.id.as_str())
            || unit.state == UnitState::Committed)
            .then_some(unit)
    });
    assert_eq!(retaken.losses, 1, "{retaken:?}");
    wait_until(
        "the re-leased unit committed",
        Duration::from_secs(60),
        || (store.unit(stolen.id).unwrap().state == UnitState::Committed).then_some(()),
    );
    signal(orphan.pid, "-CONT");
    let log = std::fs::canonicalize(&data)
        .unwrap()
        .join("slurm")
        .join(format!("worker-{job}_0.log"));
    let refused = format!("unit {}: result dropped", stolen.id.0);
    wait_until(
        "the orphan's late commit refused",
        Duration::from_secs(60),
        || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|text| text.contains(&refused))
        },
    );
    let run = store.run(stolen.run).unwrap();
    assert_eq!(run.state, RunState::Done, "{run:?}");

    // 2. A node lost mid-unit: its slurmd and its worker die with SIGKILL; the unit is re-leased
    // by the orphan (now a live worker again) once the lease expires, and finishes.
    let lost = wait_until(
        "a unit on the second worker",
        Duration::from_secs(120),
        || unit_held_by(&store, &other.id),
    );
    let node = cluster
        .node_of(&format!("{job}_1"))
        .unwrap_or_else(|| panic!("task {job}_1 is not running:\n{}", cluster.logs()));
    cluster.kill_slurmd(&node);
    signal(other.pid, "-KILL");
    let killed = Instant::now();
    wait_until("the lost unit re-leased", Duration::from_secs(60), || {
        let unit = store.unit(lost.id).unwrap();
        (unit.attempt >= 2).then_some(())
    });
    eprintln!(
        "unit {} re-leased {:?} after its worker and slurmd were killed (lease TTL {ttl})",
        lost.id.0,
        killed.elapsed()
    );

    // The coordinator ends at its budget, once the units leased by then are committed.
    let coordinator = &mut reaper.children[0];
    let status = wait_until("the coordinator", Duration::from_secs(240), || {
        coordinator.try_wait().unwrap()
    });
    assert!(status.success(), "{status}");
    assert_eq!(store.run(lost.run).unwrap().state, RunState::Done);

    // Nothing acknowledged is lost, nothing ran twice.
    for app in store.apps().unwrap() {
        let runs = store.runs(app.id).unwrap();
        assert!(!runs.is_empty(), "{}: no runs", app.name);
        let mut candidates: Vec<&str> = runs.iter().map(|run| run.candidate.as_str()).collect();
        candidates.sort_unstable();
        let before = candidates.len();
        candidates.dedup();
        assert_eq!(
            candidates.len(),
            before,
            "{}: a candidate ran twice",
            app.name
        );
        for run in &runs {
            assert!(
                run.state == RunState::Done
                    || run
                        .error
                        .as_deref()
                        .is_some_and(|error| !error.contains("lost")),
                "{}: {run:?}",
                app.name
            );
        }
    }
    let stored: Vec<u64> = store
        .apps()
        .unwrap()
        .iter()
        .map(|app| {
            store
                .examples(app.id, PageRequest::default())
                .unwrap()
                .total
        })
        .collect();
    assert_eq!(stored, fed);
    assert!(store.open_units().unwrap().is_empty());
    assert_eq!(store.integrity_check().unwrap(), Ok(()));
    eprintln!("the store's rows were in {:?}", store.dialect());

    // `easeml workers list` shows the Slurm jobs.
    let listed = Command::new(EASEML)
        .args(["workers", "list", "--json", "--store"])
        .arg(&data)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let jobs: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["slurm_job"].as_str())
        .collect();
    assert!(jobs.contains(&format!("{job}_0").as_str()), "{rows}");
    assert!(jobs.contains(&format!("{job}_1").as_str()), "{rows}");

    // The server answers from the same store (its handlers reach the store from blocking
    // threads, where the PostgreSQL client may run): the operator's overview lists both apps with
    // their runs, and the workers.
    let admin = dir.path().join("admin.token");
    std::fs::write(&admin, "an-admin-token-for-the-slurm-test").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap()
        .port();
    let server = Command::new(EASEML)
        .args([
            "serve",
            "--no-train",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--admin-token-file")
        .arg(&admin)
        .arg("--store")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    reaper.children.push(server);
    let http = reqwest::blocking::Client::new();
    let overview: serde_json::Value = wait_until("the server", Duration::from_secs(60), || {
        http.get(format!("http://127.0.0.1:{port}/api/v1/admin/overview"))
            .bearer_auth("an-admin-token-for-the-slurm-test")
            .send()
            .ok()
            .filter(|response| response.status().is_success())
            .and_then(|response| response.json().ok())
    });
    let apps = overview["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 2, "{overview}");
    for app in apps {
        assert!(
            !app["status"]["runs"].as_array().unwrap().is_empty(),
            "{overview}"
        );
    }
    assert!(
        overview["workers"].as_array().unwrap().len() >= 2,
        "{overview}"
    );
    // An app's examples (what the refine page lists) and its best model's answers.
    let api = |path: &str| format!("http://127.0.0.1:{port}/api/v1/apps/sides{path}");
    let examples: serde_json::Value = http
        .get(api("/examples?limit=100"))
        .bearer_auth(&sides_token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(examples["total"], 60, "{examples}");
    let refine = http
        .get(format!("http://127.0.0.1:{port}/apps/sides/refine"))
        .send()
        .unwrap();
    assert!(refine.status().is_success(), "{}", refine.status());
    let answered = http
        .post(api("/infer"))
        .bearer_auth(&sides_token)
        .body("[0.1, 0.9] left\n[0.9, 0.1] right\n")
        .send()
        .unwrap();
    assert!(answered.status().is_success(), "{}", answered.status());
    let report: serde_json::Value = answered.json().unwrap();
    assert_eq!(report["answers"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(report["score"]["total"], 2, "{report}");
    if in_bucket {
        // Every example and checkpoint went to the bucket: the folder holds no blob.
        assert!(!data.join("blobs").exists());
    }
    drop(reaper);
}

/// The folder of the PostgreSQL store at `url`, bound as a user binds it, and whether its blobs
/// are in a bucket: with the `s3` feature and an S3 server here, by `easeml apps --store URL
/// --blobs s3://...` (the folder is then under `$EASEML_HOME/s3-stores/`); else with a shared
/// blob folder.
fn bind(url: &str, dir: &Path) -> (std::path::PathBuf, bool) {
    #[cfg(feature = "s3")]
    if let Some(bucket) = s3_server::bucket("easeml") {
        let easeml_home = dir.join("easeml-home");
        // A bucket that does not answer binds nothing, and the error says which and why.
        let missing = bucket.replacen("s3://easeml-test-", "s3://no-such-bucket-", 1);
        let refused = Command::new(EASEML)
            .args(["apps", "--store", url, "--blobs", &missing, "list"])
            .env("EASEML_HOME", &easeml_home)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success());
        assert!(said.contains("blob storage s3://no-such-bucket-"), "{said}");
        assert!(said.contains("does the bucket exist"), "{said}");
        assert!(!easeml_home.join("s3-stores").exists());
        let bound = Command::new(EASEML)
            .args(["apps", "--store", url, "--blobs", &bucket, "list"])
            .env("EASEML_HOME", &easeml_home)
            .output()
            .unwrap();
        assert!(
            bound.status.success(),
            "{}",
            String::from_utf8_lossy(&bound.stderr)
        );
        let homes: Vec<_> = std::fs::read_dir(easeml_home.join("s3-stores"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(homes.len(), 1, "{homes:?}");
        let recorded =
            std::fs::read_to_string(homes[0].join(easeml_runtime::store::BLOBS_URL_FILE)).unwrap();
        assert_eq!(recorded, bucket);
        return (homes[0].clone(), true);
    }
    let home = easeml_runtime::store::store_home(url, Some(&dir.join("home")));
    (home.unwrap(), false)
}
