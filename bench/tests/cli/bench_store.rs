//! `easeml bench store` end to end with small numbers: SQLite and PostgreSQL (a real server the
//! test starts) side by side, the summary's keys and checks, the plots; and its refusals of bad
//! arguments.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../../runtime/store/tests/support/postgres_server.rs"]
mod postgres_server;
#[path = "../../../runtime/store/tests/support/watchdog.rs"]
mod watchdog;

fn bench(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_easeml"))
        .args(["bench", "store"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    (dir, out)
}

#[test]
fn both_backends_are_measured_side_by_side_and_every_unit_is_committed_once() {
    let (_dir, out) = out_dir();
    // The bench makes its own databases on the server: give it the server, not a database.
    let server = postgres_server::database().map(|url| {
        url.rsplit_once('/')
            .map(|(server, _)| server.to_owned())
            .unwrap()
    });
    let mut args = vec!["--workers", "1,3", "--units", "60", "--examples", "250"];
    if let Some(server) = &server {
        args.extend(["--postgres", server.as_str()]);
    }
    let output = bench(&args, &out);
    assert!(output.status.success(), "{}", text(&output));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let backends: &[&str] = if server.is_some() {
        &["sqlite", "postgres"]
    } else {
        &["sqlite"]
    };
    for backend in backends {
        let rows = summary[backend]["lease_commit"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{summary}");
        for row in rows {
            assert_eq!(row["committed"], 60, "{summary}");
            assert_eq!(row["duplicated"], 0, "{summary}");
            assert_eq!(row["lost"], 0, "{summary}");
            assert!(row["cycles_per_second"].as_f64().unwrap() > 0.0);
        }
        assert!(
            summary[backend]["feed_examples_per_second"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    if server.is_some() {
        assert_eq!(
            summary["cycles_postgres_over_sqlite"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
    for plot in ["cycles.svg", "cycles.png"] {
        assert!(out.join(plot).metadata().unwrap().len() > 1000, "{plot}");
    }
    // The scratch stores are gone.
    assert!(!out.join("scratch").exists());
}

#[test]
fn bad_arguments_are_refused_saying_what_to_give() {
    let (_dir, out) = out_dir();
    let cases: &[(&[&str], &str)] = &[
        (&["--workers", "0"], "--workers takes counts from 1 to 256"),
        (
            &["--workers", "1,999"],
            "--workers takes counts from 1 to 256",
        ),
        (&["--units", "0"], "--units takes 1 to 1000000"),
        (
            &["--postgres", "mysql://x@host"],
            "--postgres takes a server as postgres://",
        ),
        (
            &["--postgres", "postgres://me:secret@host:5432/db"],
            "without a database",
        ),
    ];
    for (args, expected) in cases {
        let output = bench(args, &out);
        let message = text(&output);
        assert!(!output.status.success(), "{args:?}: {message}");
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(!message.contains("secret"), "{args:?}: {message}");
    }
}
