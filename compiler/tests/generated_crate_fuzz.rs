//! Fuzzing code generation against rustc: every program easemlc accepts must generate Rust that
//! compiles; the others must be refused with a diagnostic (never a panic).
//!
//! proptest (deterministic runner: a fixed seed, [`CASES`] programs per run) writes `.eml` programs
//! whose parts are drawn from pools of hard names:
//! - field names: every Rust keyword of edition 2024 (`rules::RUST_KEYWORDS`: `gen`, `async`, `try`,
//!   `self`, `Self`, ...), weak keywords (`union`, `raw`, `macro_rules`), `_`, `__`, names that
//!   start with a digit, collisions (`self` + `field_self`, `3d` + `field_3d`, `field2_self`),
//!   names of what generated code uses (`easeml`, `core`, `std`, `new`), and invalid ones;
//! - labels: unicode, a carriage return, a line feed, tabs, bidi controls (U+202E, U+2066, U+200E),
//!   quotes, backslashes, `*/`, `"#`, backticks, `Self`, `3`;
//! - app names (the `app` item, or the file stem when there is none): keywords, built-in and
//!   dependency crate names, weak keywords, 64 characters, `main`, `build`, invalid names;
//! - recursive fields (chains and trees), output blocks, constraints.
//!
//! Two fixed programs are added: one with every keyword as a field, one with every collision.
//! All accepted programs are checked in ONE `cargo check` of one temporary workspace (a shared
//! target dir under the test's tmp dir, the workspace's `Cargo.lock`, `--offline`):
//! - `batch`: each program's `codegen::inline_items` (`rust_types` and `client_items`: what both
//!   `easemlc` and `#[easeml_schema]` emit) in a module of its own;
//! - one crate per distinct accepted app name: the crate `easemlc` generates (its Cargo.toml, lib.rs,
//!   types.rs, manifest and the binaries `<app>`, `<app>-feed`, `<app>-refine`, which name the app
//!   crate as an identifier), less the engine binaries and their build script (libtorch).
//!
//! Everything depends on `easeml-runtime` without its `engine` feature, so no libtorch is needed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use easeml_compiler::codegen::{CrateOptions, crate_files, format_items, inline_items};
use easeml_compiler::schema::rules::RUST_KEYWORDS;
use easeml_compiler::{Compiled, Registry, compile};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// Programs generated per run.
const CASES: usize = 60;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Field names: keywords, collisions, odd names, and a few invalid ones (refused with E005).
fn field_names() -> Vec<String> {
    let mut names: Vec<String> = RUST_KEYWORDS.iter().map(|name| name.to_string()).collect();
    names.extend(
        [
            "union",
            "raw",
            "macro_rules",
            "safe",
            "default",
            "_",
            "__",
            "3d",
            "field_3d",
            "self",
            "field_self",
            "field2_self",
            "field_",
            "field__",
            "0",
            "x",
            "field1",
            "new",
            "easeml",
            "core",
            "std",
            "input",
            "value",
            "Bad",
            "a-b",
        ]
        .map(str::to_owned),
    );
    names
}

/// Labels as they are meant (the `.eml` text escapes `"` and `\`).
const LABELS: &[&str] = &[
    "cat",
    "sea lion",
    "Möwe",
    "鯨",
    "👩\u{200D}🔬",
    "a\rb",
    "new\nline",
    "tab\tx",
    "\u{202E}evil",
    "x\u{2066}y\u{2069}",
    "\u{200E}mark",
    "quote\"d",
    "back\\slash",
    "*/",
    "/*",
    "\"#",
    "#[doc]",
    "`tick`",
    "Self",
    "self",
    "3",
    "_",
    "r#type",
    "{{app}}",
    "}",
];

/// App names: keywords, crate names, weak keywords, and valid names that look risky.
fn app_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "fn", "gen", "async", "self", "type", "try", "yield", "crate",
    ]
    .map(str::to_owned)
    .to_vec();
    names.extend(
        [
            "std",
            "core",
            "alloc",
            "test",
            "proc_macro",
            "easeml_runtime",
            "union",
            "raw",
            "macro_rules",
            "main",
            "build",
            "easeml",
            "client",
            "types",
            "fn_app",
            "gen_app",
            "input",
            "tests",
            "Bad",
            "3d",
        ]
        .map(str::to_owned),
    );
    names.push(format!("a{}", "b".repeat(63)));
    names
}

/// File stems (the app name when the program has none).
const STEMS: &[&str] = &["fn", "gen", "std", "My-App", "3d", "self", "core", "plain"];

/// One generated program: its `.eml` text and file stem.
#[derive(Debug, Clone)]
struct Program {
    source: String,
    stem: String,
}

fn quoted(label: &str) -> String {
    let mut text = String::from("\"");
    for c in label.chars() {
        match c {
            '"' => text.push_str("\\\""),
            '\\' => text.push_str("\\\\"),
            // An escaped newline keeps its character (a newline cannot appear bare in a string).
            '\n' => text.push_str("\\\n"),
            c => text.push(c),
        }
    }
    text.push('"');
    text
}

fn tensor() -> impl Strategy<Value = String> {
    prop::collection::vec(1u64..5, 1..4).prop_map(|dims| {
        format!(
            "Tensor[{}]",
            dims.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// A type block with 1-4 tensor fields and 0-2 recursive fields, names from the pool.
fn block(side: &'static str, names: Vec<String>) -> impl Strategy<Value = String> {
    let field = (prop::sample::select(names.clone()), tensor());
    (
        prop::collection::vec(field, 1..5),
        prop::collection::vec(prop::sample::select(names), 0..3),
    )
        .prop_map(move |(tensors, recursive)| {
            let mut text = format!("type {side}\n");
            for (name, tensor) in tensors {
                let _ = writeln!(text, "  {name} :: {tensor}");
            }
            for name in recursive {
                let _ = writeln!(text, "  {name} :: Nullable{{{side}}}");
            }
            text.push_str("end\n");
            text
        })
}

fn program() -> impl Strategy<Value = Program> {
    let names = field_names();
    let output = prop_oneof![
        3 => (2usize..5, prop::sample::subsequence(LABELS.to_vec(), 4), any::<bool>()).prop_map(
            |(classes, labels, declared)| {
                let mut text = format!("Output = [{classes}]\n");
                if declared {
                    let labels: Vec<String> =
                        labels.iter().cycle().take(classes).map(|label| quoted(label)).collect();
                    let _ = writeln!(text, "labels = [{}]", labels.join(", "));
                }
                text
            }
        ),
        1 => block("Output", names.clone()),
    ];
    (
        block("Input", names),
        output,
        prop::option::of(prop::sample::select(app_names())),
        prop::sample::select(STEMS),
        any::<bool>(),
    )
        .prop_map(|(input, output, app, stem, constraint)| {
            let mut source = String::new();
            if let Some(app) = app {
                let _ = writeln!(source, "app {app}");
            }
            source.push_str(&input);
            source.push_str(&output);
            if constraint {
                source.push_str("constraint train_time <= 5m\n");
            }
            Program {
                source,
                stem: stem.to_owned(),
            }
        })
}

/// The fixed programs: every keyword as a field name, and every collision.
fn fixed_programs() -> Vec<Program> {
    // The formal syntax: a type block cannot have fields named `type` or `end`.
    let keywords: Vec<String> = RUST_KEYWORDS
        .iter()
        .filter(|keyword| easeml_compiler::schema::rules::is_field_name(keyword))
        .filter(|keyword| !matches!(**keyword, "gen" | "self"))
        .map(|keyword| format!("{keyword} :: Tensor[1]"))
        .collect();
    vec![
        Program {
            source: format!(
                "app every_keyword\n{{input: {{[{}], [gen, self]}}, output: {{[Tensor[2]], []}}}}\n",
                keywords.join(", ")
            ),
            stem: "fixed".into(),
        },
        Program {
            source: "type Input\n  self :: Tensor[1]\n  field_self :: Tensor[2]\n  field2_self :: Tensor[3]\n  3d :: Tensor[1]\n  field_3d :: Tensor[2]\n  _ :: Tensor[1]\n  field__ :: Tensor[1]\n  super :: Nullable{Input}\n  field_super :: Nullable{Input}\nend\ntype Output\n  crate :: Tensor[2]\n  field_crate :: Tensor[2]\nend\n".into(),
            stem: "gen".into(),
        },
    ]
}

/// The generated items of one program as text (prettyplease), without the header line.
fn module_text(compiled: &Compiled) -> String {
    format_items("case", inline_items(compiled))
        .unwrap_or_else(|error| panic!("generated Rust does not parse: {error}"))
}

/// The generated crate of a program, less what links libtorch: the engine binaries, their build
/// script and `easeml-app-engine`. Also drops `[workspace]` and the profiles (it is a member here).
fn app_crate(compiled: &Compiled, runtime: &str) -> BTreeMap<String, String> {
    let mut files = crate_files(
        compiled,
        &CrateOptions {
            runtime: easeml_compiler::codegen::RuntimeSource::Path(runtime.to_owned()),
            server: None,
            python: false,
        },
    )
    .unwrap_or_else(|error| panic!("{}: {error}", compiled.schema.app));
    let mut cargo: toml::Table = toml::from_str(&files["Cargo.toml"])
        .unwrap_or_else(|error| panic!("the generated Cargo.toml is no TOML: {error}"));
    cargo.remove("workspace");
    cargo.remove("profile");
    cargo.remove("build-dependencies");
    cargo.remove("features");
    if let Some(toml::Value::Table(dependencies)) = cargo.get_mut("dependencies") {
        assert!(dependencies.remove("easeml-app-engine").is_some());
    }
    if let Some(toml::Value::Array(bins)) = cargo.get_mut("bin") {
        bins.retain(|bin| {
            let path = bin["path"].as_str().unwrap_or("");
            !(path.ends_with("infer.rs") || path.ends_with("train.rs"))
        });
        assert_eq!(bins.len(), 3);
    }
    files.insert("Cargo.toml".into(), toml::to_string(&cargo).unwrap());
    for engine_only in ["build.rs", "src/bin/infer.rs", "src/bin/train.rs"] {
        assert!(files.remove(engine_only).is_some(), "{engine_only}");
    }
    files
}

fn write_files(folder: &Path, files: &BTreeMap<String, String>) {
    for (relative, content) in files {
        let path = folder.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
    }
}

#[test]
fn accepted_programs_generate_code_that_compiles() {
    let mut runner = TestRunner::deterministic();
    let strategy = program();
    let mut programs: Vec<Program> = (0..CASES)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect();
    programs.extend(fixed_programs());

    let registry = Registry::builtin();
    let runtime = root().join("runtime/core").display().to_string();
    let mut modules = String::new();
    let mut apps: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut accepted = 0;
    let fixed = programs.len() - 2;
    let mut index_text = String::new();
    for (index, program) in programs.iter().enumerate() {
        let _ = writeln!(
            index_text,
            "case_{index} (stem {:?}):\n{}",
            program.stem, program.source
        );
        let compiled = match compile(&program.source, &program.stem, &registry) {
            Ok(compiled) => compiled,
            Err(diagnostics) => {
                assert!(!diagnostics.is_empty(), "{program:?}");
                assert!(
                    index < fixed,
                    "a fixed program is refused: {diagnostics:#?}"
                );
                continue;
            }
        };
        accepted += 1;
        let _ = writeln!(
            modules,
            "/// {}\npub mod case_{index} {{\n{}\n}}\n",
            compiled.schema.app,
            module_text(&compiled)
        );
        if !apps.contains_key(&compiled.schema.app) {
            apps.insert(compiled.schema.app.clone(), app_crate(&compiled, &runtime));
        }
    }
    assert!(
        accepted >= CASES / 4,
        "only {accepted} of {} programs were accepted: the generator needs tuning",
        programs.len()
    );

    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let workspace = tmp.join("generated-crate-fuzz");
    let _ = std::fs::remove_dir_all(&workspace);
    let mut members = vec!["\"batch\"".to_owned()];
    for (app, files) in &apps {
        write_files(&workspace.join("apps").join(app), files);
        members.push(format!("\"apps/{app}\""));
    }
    let mut batch = BTreeMap::new();
    batch.insert(
        "Cargo.toml".to_owned(),
        format!(
            "[package]\nname = \"fuzz_batch\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\neaseml-runtime = {{ path = {}, default-features = false }}\n",
            toml::Value::String(runtime.clone())
        ),
    );
    batch.insert(
        "src/lib.rs".to_owned(),
        format!(
            "//! The generated items of every accepted program.\n#![allow(dead_code)]\n\n{modules}"
        ),
    );
    batch.insert("programs.txt".to_owned(), index_text);
    write_files(&workspace.join("batch"), &batch);
    std::fs::write(
        workspace.join("Cargo.toml"),
        format!(
            "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
            members.join(", ")
        ),
    )
    .unwrap();
    std::fs::copy(root().join("Cargo.lock"), workspace.join("Cargo.lock")).unwrap();

    let output = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--workspace", "--lib", "--bins"])
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args(["--message-format", "short"])
        .env("CARGO_TARGET_DIR", tmp.join("generated-crate-fuzz-target"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "generated code of accepted programs does not compile (the workspace is {}; the programs \
         are in batch/programs.txt):\n{stderr}",
        workspace.display()
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            (line.starts_with("batch/") || line.starts_with("apps/")) && line.contains("warning")
        })
        .collect();
    assert!(
        warnings.is_empty(),
        "generated code warns:\n{}",
        warnings.join("\n")
    );
}
