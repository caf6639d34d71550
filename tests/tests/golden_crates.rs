//! Every golden app crate builds (with one shared target dir, so the runtime is built once) and its
//! binaries answer `--help`; one app then runs end to end in embedded mode through its real binaries:
//! feed (good and bad lines), refine (the flags, and the web page's server), status.
//!
//! The crates are generated into the test's temporary folder with an absolute runtime path (the
//! committed golden crates, byte-compared in `golden_files.rs`, differ only in that path), and use
//! the workspace's Cargo.lock so they build the same dependency versions.

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use easeml_tests::{examples, generate_crate};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn write_crate(stem: &str, source: &str, root: &Path) -> PathBuf {
    let runtime = std::fs::canonicalize(workspace_root().join("runtime/core")).unwrap();
    let folder = root.join(stem);
    for (relative, text) in generate_crate(stem, source, &runtime.display().to_string()) {
        let path = folder.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    easeml_test_support::use_the_workspace_lock(&folder);
    folder
}

/// The dynamic section of a binary (`readelf -d`): its NEEDED libraries and RUNPATH.
fn dynamic_section(binary: &Path) -> String {
    let output = Command::new("readelf")
        .arg("-d")
        .arg(binary)
        .output()
        .expect("readelf (binutils) runs");
    assert!(output.status.success(), "readelf -d {}", binary.display());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn run(binary: &Path, arguments: &[&str], home: &Path, stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(binary)
        .args(arguments)
        .env("EASEML_HOME", home)
        .env_remove("EASEML_SERVER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{}: {error}", binary.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_golden_crate_builds_and_its_binaries_run() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden-crates");
    let target = easeml_test_support::nested_build_target(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let home = root.join("home");
    let _ = std::fs::remove_dir_all(&home);
    for (stem, source) in examples() {
        let folder = write_crate(&stem, &source, &root);
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--offline", "--manifest-path"])
            .arg(folder.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "{stem}: the generated crate does not build"
        );
        for binary in [
            stem.clone(),
            format!("{stem}-feed"),
            format!("{stem}-refine"),
            format!("{stem}-infer"),
            format!("{stem}-train"),
        ] {
            let (code, stdout, stderr) =
                run(&target.join("debug").join(&binary), &["--help"], &home, "");
            assert_eq!(code, 0, "{binary} --help: {stderr}");
            assert!(stdout.contains("Usage:"), "{binary}: {stdout}");
        }
        // libtorch only where a command needs it: the engine binaries link it (and find it by
        // their rpath), the others never load it.
        for (binary, engine) in [
            (stem.clone(), false),
            (format!("{stem}-feed"), false),
            (format!("{stem}-refine"), false),
            (format!("{stem}-infer"), true),
            (format!("{stem}-train"), true),
        ] {
            let dynamic = dynamic_section(&target.join("debug").join(&binary));
            let links_torch = dynamic.contains("libtorch_cpu.so") || dynamic.contains("libc10.so");
            assert_eq!(links_torch, engine, "{binary}:\n{dynamic}");
            if engine {
                assert!(
                    dynamic.contains("RUNPATH") || dynamic.contains("RPATH"),
                    "{binary} finds libtorch without LD_LIBRARY_PATH:\n{dynamic}"
                );
            }
        }
        let (_, feed_help, _) = run(
            &target.join("debug").join(&stem),
            &["feed", "--help"],
            &home,
            "",
        );
        assert!(feed_help.contains("Line formats:"), "{stem}: {feed_help}");
    }

    // The paper's walkthrough, in embedded mode, through the real binaries of one app.
    let app = target.join("debug/breast_cancer");
    let feed = target.join("debug/breast_cancer-feed");
    let row = |value: f32| format!("[{}]", vec![value.to_string(); 30].join(", "));
    let lines = format!(
        "{} malignant\n{} benign\n{} benign\n",
        row(0.1),
        row(0.9),
        row(0.8)
    );
    let (code, stdout, stderr) = run(&feed, &[], &home, &lines);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "breast_cancer: 3 examples added\n");
    let (code, _, stderr) = run(
        &app,
        &["feed"],
        &home,
        &format!("{} malignant\n[1, 2] benign\n", row(0.2)),
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("line 2") && stderr.contains("expected shape [30]"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was stored"), "{stderr}");
    let (code, stdout, _) = run(&app, &["refine", "--list"], &home, "");
    assert_eq!(code, 0);
    assert_eq!(
        stdout.lines().count(),
        3,
        "the bad batch stored nothing: {stdout}"
    );
    let (code, stdout, stderr) = run(&app, &["refine", "--disable", "2"], &home, "");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("example 2 disabled"), "{stdout}");
    let (code, _, stderr) = run(&app, &["refine", "--disable", "999"], &home, "");
    assert_eq!(code, 1, "an unknown example is an error");
    assert!(!stderr.is_empty());
    let (code, stdout, _) = run(&app, &[], &home, "");
    assert_eq!(code, 0);
    assert!(stdout.contains("3 examples (2 enabled)"), "{stdout}");

    // `refine` with no option serves the web page, with a per-process token in it.
    let mut server = Command::new(&app)
        .args(["refine", "--listen", "127.0.0.1:0"])
        .env("EASEML_HOME", &home)
        .env_remove("EASEML_SERVER")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    assert!(url.ends_with("/apps/breast_cancer/refine"), "{url}");
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let get = |path: &str, host: &str, token: Option<&str>| -> String {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let authorization = token.map_or(String::new(), |token| {
            format!("Authorization: Bearer {token}\r\n")
        });
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let page = get("/apps/breast_cancer/refine", &address, None);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let token = page
        .split(r#""token":""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no token in the page"))
        .to_owned();
    assert_eq!(token.len(), 64);
    let listing = get(
        "/api/v1/apps/breast_cancer/examples",
        &address,
        Some(&token),
    );
    assert!(listing.starts_with("HTTP/1.1 200"), "{listing}");
    assert!(listing.contains(r#""total":3"#), "{listing}");
    let without = get("/api/v1/apps/breast_cancer/examples", &address, None);
    assert!(without.starts_with("HTTP/1.1 401"), "{without}");
    // Another website's name for 127.0.0.1 (DNS rebinding) gets nothing.
    let rebound = get("/apps/breast_cancer/refine", "evil.example", None);
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let _ = server.kill();
    let _ = server.wait();
    let (code, _, stderr) = run(
        &app,
        &["refine", "--list", "--listen", "127.0.0.1:0"],
        &home,
        "",
    );
    assert_eq!(code, 2, "--listen goes with the page only: {stderr}");

    // Inference before any training says so.
    let infer = target.join("debug/breast_cancer-infer");
    let (code, _, stderr) = run(&infer, &[], &home, &format!("{}\n", row(0.1)));
    assert_eq!(code, 1);
    assert!(stderr.contains("no model"), "{stderr}");

    // Enough data to learn from: low values are malignant, high ones benign.
    let mut lines = String::new();
    for i in 0..60 {
        let value = (i % 30) as f32 / 30.0;
        let label = if value < 0.5 { "malignant" } else { "benign" };
        lines.push_str(&format!("{} {label}\n", row(value)));
    }
    let (code, stdout, stderr) = run(&feed, &[], &home, &lines);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "breast_cancer: 60 examples added\n");
    let (code, stdout, stderr) = run(
        &app,
        &["train", "--budget", "5m", "--max-run", "20s"],
        &home,
        "",
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("nothing is left to train on the current data"),
        "seven candidates, each well within the budget: {stderr}"
    );
    assert!(stdout.contains("* best so far"), "{stdout}");
    assert_eq!(
        stdout.matches(" done").count(),
        7,
        "one run per candidate: {stdout}"
    );

    // `infer` answers with labels, one per input; with expected labels it scores itself.
    let queries = format!("{} malignant\n{} benign\n", row(0.05), row(0.95));
    let (code, stdout, stderr) = run(&infer, &[], &home, &queries);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "malignant\nbenign\n", "{stderr}");
    assert!(stderr.contains("accuracy 1.000 (2 of 2"), "{stderr}");
    let (code, stdout, stderr) = run(
        &app,
        &["infer", "--json"],
        &home,
        &format!("{}\n", row(0.9)),
    );
    assert_eq!(code, 0, "{stderr}");
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["output"], "benign");
    assert_eq!(answer["line"], 1);
    assert!(answer["confidence"].as_f64().unwrap() > 0.5, "{answer}");
    // A bad input line is named, and nothing is answered.
    let (code, stdout, stderr) = run(&infer, &[], &home, &format!("{}\n[1, 2]\n", row(0.9)));
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("line 2") && stderr.contains("expected shape [30]"),
        "{stderr}"
    );

    // `export` starts `breast_cancer-train export`: the served model is written out (every model
    // of the catalogue exports).
    let out = home.join("exported");
    let (code, stdout, stderr) = run(&app, &["export", "--out", out.to_str().unwrap()], &home, "");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("exported "), "{stdout}");
    assert!(out.join("easeml-export.json").is_file());
}
