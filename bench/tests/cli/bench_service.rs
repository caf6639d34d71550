//! `easeml bench service` end to end with small numbers: a real `easeml serve` on SQLite and on
//! PostgreSQL (a real server the test starts), apps of the three workloads fed and asked over HTTP
//! while training runs; the summary's interface keys, nothing lost, a sweep's growth exponents and
//! plots; and its refusals of bad arguments.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

#[path = "../../../runtime/store/tests/support/postgres_server.rs"]
mod postgres_server;
#[path = "../../../runtime/store/tests/support/watchdog.rs"]
mod watchdog;

/// Each bench starts a server that trains: one at a time, so that two do not share the cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn bench(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "service"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

fn summary(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The interface of record's keys, each a number (`rss_mb.server` too: the server ran here).
fn check_point(point: &Value) {
    for path in [
        "feed.examples_per_s",
        "feed.mb_per_s",
        "infer.p50_ms",
        "infer.p99_ms",
        "decision_ms",
        "status_ms",
        "rss_mb.server",
        "store.bytes_per_example",
    ] {
        let value = path.split('.').fold(point, |value, key| &value[key]);
        let number = value.as_f64().unwrap_or(f64::NAN);
        assert!(number.is_finite() && number > 0.0, "{path}: {point:#}");
    }
    let acknowledged = point["acknowledged"].as_u64().unwrap();
    assert!(acknowledged >= 3 * 300, "{point:#}");
    assert_eq!(point["stored"].as_u64(), Some(acknowledged), "{point:#}");
    assert!(point["infer"]["answers"].as_u64().unwrap() > 0, "{point:#}");
    assert_eq!(point["infer"]["failed"], 0, "{point:#}");
    assert!(point["runs_done"].as_u64().unwrap() > 0, "{point:#}");
    // The budget starts once the asked (tabular) app serves a model.
    assert!(point["first_model_s"].as_f64().unwrap() >= 0.0, "{point:#}");
}

#[test]
fn three_workloads_are_fed_asked_and_trained_and_nothing_is_lost() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let common = [
        "--apps",
        "3",
        "--examples",
        "300",
        "--clients",
        "2",
        "--budget",
        "6s",
        "--max-run",
        "3s",
    ];
    let output = bench(&common, &out);
    assert!(output.status.success(), "{}", text(&output));
    let point = summary(&out);
    check_point(&point);
    assert_eq!(point["config"]["store"], "sqlite");
    assert!(text(&output).contains("acknowledged"), "{}", text(&output));

    // The same on PostgreSQL: the bench makes its own database on the server.
    let Some(server) = postgres_server::database().map(|url| {
        url.rsplit_once('/')
            .map(|(server, _)| server.to_owned())
            .unwrap()
    }) else {
        return;
    };
    let out = dir.path().join("postgres");
    let mut args = common.to_vec();
    args.extend(["--store", "postgres", "--postgres", server.as_str()]);
    let output = bench(&args, &out);
    assert!(output.status.success(), "{}", text(&output));
    let point = summary(&out);
    check_point(&point);
    assert_eq!(point["config"]["store"], "postgres");
}

#[test]
fn a_sweep_fits_each_cost_against_its_work_and_plots_it() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = bench(
        &[
            "--apps",
            "3",
            "--examples",
            "300",
            "--clients",
            "4",
            "--budget",
            "4s",
            "--max-run",
            "2s",
            "--sweep",
            "clients",
        ],
        &out,
    );
    assert!(output.status.success(), "{}", text(&output));
    let summary = summary(&out);
    let points = summary["sweep"]["points"].as_array().unwrap();
    let clients: Vec<u64> = points
        .iter()
        .map(|point| point["config"]["clients"].as_u64().unwrap())
        .collect();
    assert_eq!(clients, [1, 4], "{summary:#}");
    for point in points {
        check_point(point);
    }
    let exponent = summary["growth"]["infer.p99_ms"]["exponent"]
        .as_f64()
        .unwrap();
    assert!(exponent.is_finite(), "{summary:#}");
    for file in ["growth.svg", "growth.png"] {
        let bytes = std::fs::metadata(out.join(file)).unwrap().len();
        assert!(bytes > 1000, "{file}: {bytes} bytes");
    }
    let svg = std::fs::read_to_string(out.join("growth.svg")).unwrap();
    assert!(svg.contains("<polyline"), "a line is drawn");
}

#[test]
fn bad_arguments_are_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (&["--apps", "0"][..], "--apps 0: give a number from 1 to"),
        (
            &["--clients", "100000"][..],
            "--clients 100000: give a number",
        ),
        (
            &["--store", "postgres"][..],
            "--store postgres needs --postgres",
        ),
        (
            &["--workers", "1000"][..],
            "at most 64 local worker processes",
        ),
    ] {
        let out = dir.path().join("refused");
        let output = bench(args, &out);
        assert!(!output.status.success(), "{args:?}");
        assert!(
            text(&output).contains(expected),
            "{args:?}: {}",
            text(&output)
        );
        assert!(!out.join("summary.json").exists(), "{args:?}");
    }
}
