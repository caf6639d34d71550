//! Tests of the real `easemlc` binary: exit codes, text and JSON outputs, `--help`, and every way the
//! command itself can fail (missing file, directory, bad registry, bad UTF-8).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn easemlc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_easemlc"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("easemlc runs")
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("easemlc-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn check_accepts_valid_programs_with_exit_0() {
    let output = easemlc(&[
        "check",
        &repo("examples/galaxy_morphology.eml"),
        &repo("examples/sentiment_tree.eml"),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("{input: {[Tensor[256,256,3]], []}, output: {[Tensor[3]], []}} -> image_classification (38 candidates)"), "{text}");
    assert!(
        text.contains("tree_classification (2 candidates)"),
        "{text}"
    );
}

#[test]
fn check_reports_every_error_rustc_style_with_exit_1() {
    let output = easemlc(&["check", &repo("tests/fixtures/multi_many_errors.eml")]);
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    for code in ["E003", "E004", "E005", "E006", "E011", "E012", "E014"] {
        assert!(
            text.contains(&format!("error[{code}]")),
            "{code} missing in {text}"
        );
    }
    assert!(text.contains("--> "), "{text}");
    assert!(text.contains("= help: "), "{text}");
    assert!(text.contains('^'), "{text}");
    assert!(text.contains("due to 7 previous errors\n"), "{text}");
}

#[test]
fn check_json_lists_diagnostics_with_positions() {
    let path = repo("tests/fixtures/e004_duplicate_field.eml");
    let output = easemlc(&["check", "--json", &path]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let diagnostic = &json[0];
    assert_eq!(diagnostic["code"], "E004");
    assert_eq!(diagnostic["line"], 4);
    assert_eq!(diagnostic["column"], 3);
    assert_eq!(diagnostic["end_line"], 4);
    assert_eq!(diagnostic["end_column"], 4);
    assert_eq!(diagnostic["file"], path);
    assert!(diagnostic["help"].is_string());
    let mut keys: Vec<&String> = diagnostic.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "code",
            "column",
            "end_column",
            "end_line",
            "file",
            "help",
            "line",
            "message"
        ]
    );
    let valid = easemlc(&["check", "--json", &repo("examples/galaxy_morphology.eml")]);
    assert_eq!(valid.status.code(), Some(0));
    assert_eq!(stdout(&valid).trim(), "[]");
}

#[test]
fn explain_json_has_the_documented_keys() {
    let output = easemlc(&["explain", "--json", &repo("examples/plankton_species.eml")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["app"], "plankton_species");
    assert_eq!(
        json["system_type"],
        "{input: {[Tensor[64,64,3]], []}, output: {[Tensor[4]], []}}"
    );
    assert_eq!(json["workload"], "image_classification");
    assert_eq!(json["template"]["row"], "1");
    let rows: Vec<&str> = json["matching_templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|template| template["row"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["1", "8", "9"]);
    assert_eq!(json["candidates"].as_array().unwrap().len(), 38);
    assert_eq!(
        json["candidates"][8],
        serde_json::json!({"id": "alexnet+norm_k2", "model": "alexnet", "normalization": {"k": 2}})
    );
    assert_eq!(
        json["candidates"][0]["normalization"],
        serde_json::Value::Null
    );
    assert_eq!(
        json["labels"],
        serde_json::json!(["copepod", "diatom", "sea lion larva", "dinoflagellate"])
    );
    assert_eq!(
        json["constraints"][0],
        serde_json::json!({"metric": "train_time", "limit": "30m", "seconds": 1800.0})
    );
    let no_labels = easemlc(&["explain", "--json", &repo("examples/traffic_forecast.eml")]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&no_labels)).unwrap();
    assert_eq!(json["labels"], serde_json::Value::Null);
    assert_eq!(json["app"], "traffic_forecast");
}

#[test]
fn explain_text_marks_the_chosen_template() {
    let output = easemlc(&["explain", &repo("examples/handwritten_digits.eml")]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(
        text.contains("workload:     image_classification"),
        "{text}"
    );
    assert!(text.contains("* row 6+"), "{text}");
    assert!(text.contains("resnet18+norm_k4"), "{text}");
}

#[test]
fn explain_says_which_candidates_the_latency_limit_is_expected_to_rule_out() {
    let fixture = repo("tests/fixtures/ok_constraint_latency_rules_out.eml");
    let output = easemlc(&["explain", &fixture]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let (_, estimates) = text.split_once("estimated latency per example").unwrap();
    let line = |model: &str| {
        estimates
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{model} ")))
            .unwrap_or_else(|| panic!("no line for {model}: {text}"))
            .to_owned()
    };
    // 256x256 images: VGG-16 needs 2.6 GFLOP an image, SqueezeNet 70 MFLOP.
    assert!(
        line("vgg16").ends_with("85.53 ms  over the limit: expected to be ruled out"),
        "{text}"
    );
    assert!(line("squeezenet").ends_with("2.43 ms"), "{text}");
    assert!(
        line("knn").contains("measured after training (its cost depends on the training data)"),
        "{text}"
    );
    assert!(
        text.contains("expected to rule out 16 candidates: small_cnn, small_cnn+norm_k1,"),
        "{text}"
    );
    let json = easemlc(&["explain", "--json", &fixture]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    let check = &json["infer_latency"];
    assert_eq!(check["limit_seconds"], 0.02);
    assert_eq!(check["ruled_out"].as_array().unwrap().len(), 16);
    assert!(
        check["ruled_out"]
            .as_array()
            .unwrap()
            .contains(&"nin+norm_k4".into())
    );
    // Without the constraint there is nothing to check, and the key is left out.
    let plain = easemlc(&[
        "explain",
        "--json",
        &repo("examples/handwritten_digits.eml"),
    ]);
    let plain: serde_json::Value = serde_json::from_str(&stdout(&plain)).unwrap();
    assert!(plain.get("infer_latency").is_none(), "{plain}");
    // Networks over sequences are timed, not estimated: untrained before training, then trained.
    let vowels = std::fs::read_to_string(repo("examples/vowel_speakers.eml")).unwrap();
    let program = temp_file(
        "vowels_latency.eml",
        format!("{vowels}\nconstraint infer_latency <= 1ms\n").as_bytes(),
    );
    let output = easemlc(&["explain", program.to_str().unwrap()]);
    let text = stdout(&output);
    assert!(
        text.contains("measured before training (untrained) and after (its cost depends on each example's length)"),
        "{text}"
    );
}

#[test]
fn explain_of_an_invalid_program_prints_diagnostics_and_exits_1() {
    let output = easemlc(&[
        "explain",
        "--json",
        &repo("tests/fixtures/e008_input_points_at_output.eml"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json[0]["code"], "E008");
}

#[test]
fn a_custom_registry_and_normalization_set_are_used() {
    let registry = repo("tests/fixtures/images_only.registry.toml");
    let rejected = easemlc(&[
        "check",
        "--templates",
        &registry,
        &repo("examples/breast_cancer.eml"),
    ]);
    assert_eq!(rejected.status.code(), Some(1));
    assert!(
        stderr(&rejected).contains("error[E013]"),
        "{}",
        stderr(&rejected)
    );
    let accepted = easemlc(&[
        "explain",
        "--json",
        "--templates",
        &registry,
        "--norm-k",
        "3,5",
        &repo("examples/galaxy_morphology.eml"),
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&accepted)).unwrap();
    let ids: Vec<&str> = json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|candidate| candidate["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["resnet18", "resnet18+norm_k3", "resnet18+norm_k5"]);
    let plain = easemlc(&[
        "explain",
        "--json",
        "--norm-k",
        "none",
        &repo("examples/galaxy_morphology.eml"),
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&plain)).unwrap();
    assert_eq!(json["candidates"].as_array().unwrap().len(), 11);
}

#[test]
fn command_failures_exit_2_with_a_clear_message() {
    let missing = easemlc(&["check", "no/such/file.eml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read `no/such/file.eml`"),
        "{}",
        stderr(&missing)
    );
    let directory = easemlc(&["check", &repo("examples")]);
    assert_eq!(directory.status.code(), Some(2));
    assert!(
        stderr(&directory).contains("is a directory"),
        "{}",
        stderr(&directory)
    );
    let bad_registry = temp_file("bad.toml", b"[[template]]\nid = 3\n");
    let output = easemlc(&[
        "check",
        "--templates",
        bad_registry.to_str().unwrap(),
        &repo("examples/breast_cancer.eml"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("not a valid template registry"),
        "{}",
        stderr(&output)
    );
    let missing_registry = easemlc(&[
        "check",
        "--templates",
        "no/such.toml",
        &repo("examples/breast_cancer.eml"),
    ]);
    assert_eq!(missing_registry.status.code(), Some(2));
    assert!(stderr(&missing_registry).contains("cannot read the template registry"));
    let zero_k = easemlc(&[
        "explain",
        "--norm-k",
        "0",
        &repo("examples/breast_cancer.eml"),
    ]);
    assert_eq!(zero_k.status.code(), Some(2));
    assert!(stderr(&zero_k).contains("every k must be at least 1"));
    let no_args = easemlc(&["check"]);
    assert_eq!(no_args.status.code(), Some(2));
}

#[test]
fn a_file_that_is_not_utf8_is_a_syntax_error_not_a_crash() {
    let path = temp_file("latin1.eml", b"Input = [3]\nOutput = [2] # caf\xe9\n");
    let output = easemlc(&["check", "--json", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json[0]["code"], "E001");
    assert_eq!(json[0]["line"], 2);
    assert!(json[0]["message"].as_str().unwrap().contains("UTF-8"));
}

#[test]
fn standard_input_is_read_for_dash() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_easemlc"))
        .args(["check", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Input = [5]\nOutput = [1]\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains("ok: <stdin>"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn help_texts_are_stable() {
    for args in [
        &["--help"][..],
        &["check", "--help"],
        &["explain", "--help"],
    ] {
        let output = easemlc(args);
        assert_eq!(output.status.code(), Some(0));
        insta::assert_snapshot!(format!("easemlc {}", args.join(" ")), stdout(&output));
    }
}

#[test]
fn build_writes_the_crate_then_only_what_changed() {
    let out = std::env::temp_dir().join(format!("easemlc-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let out_text = out.display().to_string();
    let first = easemlc(&[
        &repo("examples/wine_cultivar.eml"),
        "-o",
        &out_text,
        "--server",
        "http://127.0.0.1:9000",
    ]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(stdout(&first).trim(), out_text);
    assert!(
        stderr(&first).contains("11 of 11 files written"),
        "{}",
        stderr(&first)
    );
    for file in [
        "Cargo.toml",
        "easeml.json",
        "README.md",
        "src/lib.rs",
        "src/types.rs",
        "src/main.rs",
        "src/bin/feed.rs",
        "src/bin/refine.rs",
        "src/bin/infer.rs",
        "build.rs",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let lib = std::fs::read_to_string(out.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("Some(\"http://127.0.0.1:9000\")"),
        "the server URL is baked in"
    );
    let second = easemlc(&[
        "build",
        &repo("examples/wine_cultivar.eml"),
        "-o",
        &out_text,
        "--server",
        "http://127.0.0.1:9000",
    ]);
    assert_eq!(second.status.code(), Some(0));
    assert!(
        stderr(&second).contains("0 of 11 files written"),
        "{}",
        stderr(&second)
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn build_shares_one_build_dir_among_apps_unless_told_not_to() {
    let base = std::env::temp_dir().join(format!("easemlc-build-shared-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let program = repo("examples/wine_cultivar.eml");
    let cache = base.join("cache");
    let build = |out: &Path, extra: &[&str]| {
        let mut arguments = vec![program.as_str(), "-o"];
        let out = out.display().to_string();
        arguments.push(&out);
        arguments.extend(extra);
        Command::new(env!("CARGO_BIN_EXE_easemlc"))
            .args(&arguments)
            .env("XDG_CACHE_HOME", &cache)
            .output()
            .expect("easemlc runs")
    };
    let build_dir = cache.join("easeml/app-build");
    let shared = base.join("shared");
    let output = build(&shared, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "share one build dir with every other app's, `{}`",
            build_dir.display()
        )),
        "{}",
        stderr(&output)
    );
    let config = std::fs::read_to_string(shared.join(".cargo/config.toml")).unwrap();
    assert!(config.starts_with("# generated by easemlc"), "{config}");
    let parsed: toml::Table = config.parse().unwrap();
    assert_eq!(
        parsed["build"]["build-dir"].as_str(),
        Some(build_dir.display().to_string().as_str())
    );
    // The checkout's lock, so every app resolves the same versions and shares their builds.
    assert_eq!(
        std::fs::read(shared.join("Cargo.lock")).unwrap(),
        std::fs::read(repo("Cargo.lock")).unwrap()
    );
    // A config of the user's own is theirs: kept, and nothing is said about sharing.
    std::fs::write(shared.join(".cargo/config.toml"), "[build]\njobs = 1\n").unwrap();
    let output = build(&shared, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("share one build dir"));
    assert_eq!(
        std::fs::read_to_string(shared.join(".cargo/config.toml")).unwrap(),
        "[build]\njobs = 1\n"
    );
    // The Python crate is a workspace of its own: it gets the lock too.
    let python = base.join("python");
    let output = build(&python, &["--python"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        std::fs::read(python.join("python/Cargo.lock")).unwrap(),
        std::fs::read(repo("Cargo.lock")).unwrap()
    );
    let alone = base.join("alone");
    let output = build(&alone, &["--no-shared-build"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!alone.join(".cargo").exists());
    assert!(!alone.join("Cargo.lock").exists());
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn build_refuses_bad_output_paths_and_invalid_programs() {
    let base = std::env::temp_dir().join(format!("easemlc-build-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mine")).unwrap();
    std::fs::write(base.join("mine/notes.txt"), "my own files").unwrap();
    let foreign = easemlc(&[
        "build",
        &repo("examples/wine_cultivar.eml"),
        "-o",
        &base.join("mine").display().to_string(),
    ]);
    assert_eq!(foreign.status.code(), Some(2));
    assert!(
        stderr(&foreign).contains("was not generated by easemlc"),
        "{}",
        stderr(&foreign)
    );
    assert_eq!(
        std::fs::read_to_string(base.join("mine/notes.txt")).unwrap(),
        "my own files"
    );
    std::fs::write(base.join("a_file"), "").unwrap();
    let file = easemlc(&[
        "build",
        &repo("examples/wine_cultivar.eml"),
        "-o",
        &base.join("a_file").display().to_string(),
    ]);
    assert_eq!(file.status.code(), Some(2));
    assert!(
        stderr(&file).contains("is not a folder"),
        "{}",
        stderr(&file)
    );
    let unwritable = easemlc(&[
        "build",
        &repo("examples/wine_cultivar.eml"),
        "-o",
        &base.join("a_file/sub").display().to_string(),
    ]);
    assert_eq!(unwritable.status.code(), Some(2));
    assert!(
        stderr(&unwritable).contains("cannot create the folder"),
        "{}",
        stderr(&unwritable)
    );
    let invalid = easemlc(&[
        "build",
        &repo("tests/fixtures/e004_duplicate_field.eml"),
        "-o",
        &base.join("never").display().to_string(),
    ]);
    assert_eq!(invalid.status.code(), Some(1));
    assert!(stderr(&invalid).contains("error[E004]"));
    assert!(
        !base.join("never").exists(),
        "nothing is written for an invalid program"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn renamed_fields_are_noted_and_keyword_stems_get_a_valid_app_name() {
    let program = temp_file(
        "fn.eml",
        b"type Input\n  self :: Tensor[2]\n  field_self :: Tensor[2]\n  gen :: Tensor[1]\nend\nOutput = [2]\n",
    );
    let path = program.display().to_string();
    let note = "field `self` of `Input` is `field2_self` in the generated Rust types";
    let check = easemlc(&["check", &path]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(stdout(&check).contains(note), "{}", stdout(&check));
    let explain = easemlc(&["explain", &path]);
    assert!(
        stdout(&explain).starts_with("app:          fn_app\n"),
        "{}",
        stdout(&explain)
    );
    assert!(stdout(&explain).contains(note), "{}", stdout(&explain));
    let json = easemlc(&["explain", "--json", &path]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        json["renamed_fields"],
        serde_json::json!([{"side": "Input", "field": "self", "rust": "field2_self"}])
    );
    let out = std::env::temp_dir().join(format!("easemlc-renamed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let runtime_path = r#"C:\easeml "quoted"\runtime\core"#;
    let build = easemlc(&[
        &path,
        "-o",
        &out.display().to_string(),
        "--runtime-path",
        runtime_path,
    ]);
    assert_eq!(build.status.code(), Some(0), "{}", stderr(&build));
    assert!(
        stderr(&build).contains(&format!("note: {note}")),
        "{}",
        stderr(&build)
    );
    let types = std::fs::read_to_string(out.join("src/types.rs")).unwrap();
    assert!(types.contains("pub r#gen: easeml::Tensor"), "{types}");
    let cargo = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("name = \"fn_app\""), "{cargo}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Without a clone: `--runtime-git URL --runtime-rev REV` writes a crate whose runtime
/// dependencies are versioned git dependencies (no path anywhere), and cargo resolves them from
/// the repository alone: `cargo metadata` of the crate finds every runtime crate at that commit of
/// this repository (a `file://` URL; the same as a hosted one) with easemlc's version. Two flags
/// that do not go together, and a rev without a repository, are refused.
#[test]
fn build_from_a_git_runtime_resolves_without_a_checkout() {
    let root = std::fs::canonicalize(repo("")).unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .expect("git runs (the tests run in a clone)");
    assert!(head.status.success(), "{}", stderr(&head));
    let rev = stdout(&head).trim().to_owned();
    let url = format!("file://{}", root.display());
    let program = temp_file(
        "git_runtime.eml",
        b"app git_runtime\nInput = [3]\nOutput = [2]\n",
    );
    let out = program.with_file_name("git_runtime");
    let _ = std::fs::remove_dir_all(&out);
    let out_text = out.display().to_string();
    let path = program.display().to_string();
    let build = easemlc(&[
        "build",
        &path,
        "-o",
        &out_text,
        "--python",
        "--no-shared-build",
        "--runtime-git",
        &url,
        "--runtime-rev",
        &rev,
    ]);
    assert_eq!(build.status.code(), Some(0), "{}", stderr(&build));
    for manifest in ["Cargo.toml", "python/Cargo.toml"] {
        let text = std::fs::read_to_string(out.join(manifest)).unwrap();
        assert!(!text.contains("path = \"/"), "{manifest}: {text}");
        assert!(
            text.contains(&format!("git = \"{url}\"")),
            "{manifest}: {text}"
        );
    }

    let metadata = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(out.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(metadata.status.success(), "{}", stderr(&metadata));
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    for name in [
        "easeml-runtime",
        "easeml-app-engine",
        "easeml-torch-link",
        "easeml-engine",
    ] {
        let package = packages
            .iter()
            .find(|package| package["name"] == name)
            .unwrap_or_else(|| panic!("{name} not resolved"));
        assert_eq!(package["version"], env!("CARGO_PKG_VERSION"), "{name}");
        let source = package["source"].as_str().unwrap_or_default();
        assert!(
            source.starts_with(&format!("git+{url}")) && source.ends_with(&format!("#{rev}")),
            "{name}: {source}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);

    let both = easemlc(&[
        "build",
        &path,
        "--runtime-git",
        &url,
        "--runtime-path",
        "/x",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
    let rev_alone = easemlc(&["build", &path, "--runtime-rev", &rev]);
    assert_eq!(rev_alone.status.code(), Some(2), "{}", stderr(&rev_alone));
    assert!(
        stderr(&rev_alone).contains("--runtime-git <URL>"),
        "{}",
        stderr(&rev_alone)
    );
}
