//! The third front door as a new user walks through it: a crate outside the workspace, written as
//! docs/macro.md says (path dependencies on easeml-macros and
//! easeml-runtime, the macro, the typed client), with no build script and no `LD_LIBRARY_PATH`,
//! built and run with `cargo run`, with and without the runtime's `engine` feature.
//!
//! With the engine the binary links libtorch and finds it because cargo puts the link-search path
//! that easeml-torch-link leaves inside the target dir on the library path of `cargo run`; without
//! it the binary links no libtorch at all and an embedded `infer` says there is no engine.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_owned()
}

/// The module of docs/macro.md, and a main that feeds, lists and asks for an answer.
const MAIN: &str = r#"use easeml_macros::easeml_schema;

#[easeml_schema(labels = [normal, arrhythmia], constraint(train_time <= 30m))]
mod heartbeat {
    pub struct Input {
        pub leads: Tensor<12>,
        pub next: Option<Box<Input>>,
    }
    pub struct Output(Tensor<2>);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = std::env::args().nth(1).expect("a store folder");
    let mut client = heartbeat::Client::open(&easeml_runtime::Connection::embedded(&home))?;
    let beat = |level: f32| heartbeat::Input {
        leads: easeml_runtime::Tensor::new(vec![12], vec![level; 12]).unwrap(),
        next: None,
    };
    let report = client.feed_labelled([
        (beat(0.1), heartbeat::Label::Normal),
        (beat(0.9), heartbeat::Label::Arrhythmia),
    ])?;
    println!("fed {}", report.added);
    match client.infer([beat(0.5)]) {
        Ok(answers) => println!("answered {}", answers.len()),
        Err(error) => println!("infer: {error}"),
    }
    Ok(())
}
"#;

/// The generated app crates' profile (docs/macro.md suggests it to a user crate: the dependencies
/// optimized a little, the trainer's scalar loops more), so that this crate reuses what the other
/// nested builds compiled in their shared target dir instead of building the runtime again at
/// other optimization levels. Without the engine, the entries naming crates that are not in the
/// graph (the engine's) match nothing, which cargo notes only without `--quiet`.
const GENERATED_CRATE_PROFILE: &str = include_str!("../../templates/crate/profile.toml");

/// Writes the crate (`engine`: the runtime's default features, else none) and runs it.
fn build_and_run(folder: &Path, target: &Path, engine: bool) -> String {
    let root = workspace_root();
    let runtime = if engine {
        format!("{{ path = {:?} }}", root.join("runtime/core"))
    } else {
        format!(
            "{{ path = {:?}, default-features = false }}",
            root.join("runtime/core")
        )
    };
    let manifest = format!(
        r#"[package]
name = "heartbeat_user"
version = "0.1.0"
edition = "2024"

[dependencies]
easeml-macros = {{ path = {macros:?} }}
easeml-runtime = {runtime}

[workspace]

{profile}"#,
        macros = root.join("macros"),
        profile = GENERATED_CRATE_PROFILE,
    );
    std::fs::create_dir_all(folder.join("src")).unwrap();
    std::fs::write(folder.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(folder.join("src/main.rs"), MAIN).unwrap();
    // The workspace's versions of the dependencies, as the other nested builds use.
    easeml_test_support::use_the_workspace_lock(folder);
    let home = folder.join("home");
    let _ = std::fs::remove_dir_all(&home);
    let output = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(folder.join("Cargo.toml"))
        .arg("--")
        .arg(&home)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "engine={engine}: the user crate does not build or run:\n{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("warning"),
        "engine={engine}: docs/macro.md's code warns:\n{stderr}"
    );
    stdout
}

#[test]
fn a_user_crate_written_as_the_readme_says_builds_and_runs_with_and_without_the_engine() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    // The nested builds' target dir: the runtime is built there once for all of them.
    let target = easeml_test_support::nested_build_target(tmp);
    let with_engine = build_and_run(&tmp.join("user-crate-engine"), &target, true);
    assert!(with_engine.contains("fed 2"), "{with_engine}");
    assert!(
        with_engine.contains("no model of app `heartbeat` is trained yet"),
        "the engine is there and says what is missing: {with_engine}"
    );
    let without = build_and_run(&tmp.join("user-crate-plain"), &target, false);
    assert!(without.contains("fed 2"), "{without}");
    assert!(
        without.contains("this process has no engine"),
        "without the engine, infer says so: {without}"
    );
}
