//! The generated Python package (`easemlc --python`), built and used from Python.
//!
//! A venv is made by the test under the target dir (kept between runs, so reruns are cheap) with
//! maturin, pytest, numpy and pillow from PyPI; when PyPI cannot be reached the test prints a loud
//! banner and skips. For each covered example the crate and its `python/` package are generated,
//! the extension is built into the venv (`maturin develop`, with the target dir the golden crates
//! test uses, so the runtime is compiled once for both), and `tests/python/test_app.py` runs:
//! feed -> train briefly -> infer, error classes, wrong numpy shapes, NaN, the `.pyi` stubs. The
//! engine binaries the package starts for training and inference are built by the package itself
//! on first use (in the same target dir). For `breast_cancer`, `tests/python/test_server.py` then
//! drives the same package against a server (`connect(server=...)`: registration and the saved
//! token, feed, examples, enable / disable, a wrong token, `train` while the server's engine trains,
//! infer), served by this process with an engine training beside it as `easeml serve` does. Then
//! one side-by-side measurement: feeding 10,000
//! [32,32,3] examples from one numpy array against the typed Rust client (the same generated client,
//! through `#[easeml_schema]`) on the same data, and `import <app>` time.
//!
//! Covered: one example of every template row: `breast_cancer` (one
//! tensor field, declared labels; numpy batches, lists, label indices, a dict by field name, `.npy`
//! paths, PIL images refused for its shape), `diabetes_progression` (a tensor output: regression),
//! `heartbeat_arrhythmia` (a recursive input: chains in their JSON form), `galaxy_morphology`
//! (256x256 images, no declared labels: answers are class indices), `handwritten_digits` (8x8
//! one-channel images, ten labels), `galaxy_deblur` (an image
//! output), `galaxy_with_metadata` (two tensor fields, the bit-level classifier), `sentiment_tree`
//! (trees in their JSON form), `traffic_forecast` (chains in and out) and `molecule_autoencoder` (the
//! general auto-encoder: a `[16,16,16]` grid in, a `[32,32]` map of another type out, bit by bit).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use easeml_macros::easeml_schema;
use easeml_tests::{examples, generate_crate_with};

const COVERED: [&str; 10] = [
    "breast_cancer",
    "diabetes_progression",
    "heartbeat_arrhythmia",
    "galaxy_morphology",
    "handwritten_digits",
    "galaxy_deblur",
    "galaxy_with_metadata",
    "sentiment_tree",
    "traffic_forecast",
    "molecule_autoencoder",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The shared target dir (the golden crates test's).
fn shared_target() -> PathBuf {
    tmp().join("golden-target")
}

/// The tests share one venv and one target dir, and the measurement wants a quiet machine: they
/// run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A failure (or, with `EASEML_ALLOW_SKIPS=1`, a loud skip): `easeml_test_support::missing_part`.
fn banner(message: &str) {
    easeml_test_support::missing_part(
        "the Python package tests",
        "Python with venv and PyPI",
        message,
        "`cargo xtask setup` installs python3-venv; PyPI must be reachable",
    );
}

/// The test venv with maturin, pytest, numpy and pillow; `None` when PyPI cannot be reached.
fn venv() -> Option<PathBuf> {
    let venv = tmp().join("python-venv");
    let ready = venv.join(".easeml-ready");
    if ready.exists() {
        return Some(venv);
    }
    let python = std::env::var("EASEML_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let made = Command::new(&python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap_or_else(|error| {
            panic!("{python} -m venv: {error} (install python3 and python3-venv)")
        });
    assert!(made.success(), "{python} -m venv {} failed", venv.display());
    let installed = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "maturin>=1.5,<2",
            "pytest",
            "numpy",
            "pillow",
        ])
        .output()
        .expect("pip runs");
    if !installed.status.success() {
        let stderr = String::from_utf8_lossy(&installed.stderr);
        let offline = [
            "Could not find a version",
            "No matching distribution",
            "connection",
            "Temporary failure",
            "Network is unreachable",
        ]
        .iter()
        .any(|sign| stderr.contains(sign));
        assert!(offline, "pip install failed:\n{stderr}");
        banner(&format!(
            "the Python package test: PyPI cannot be reached to make its venv\n{stderr}"
        ));
        return None;
    }
    std::fs::write(&ready, "").unwrap();
    Some(venv)
}

/// Generates the app's crate with `python/` under `root` and installs the package into the venv.
fn install(stem: &str, source: &str, root: &Path, venv: &Path) -> PathBuf {
    let runtime = std::fs::canonicalize(workspace_root().join("runtime/core")).unwrap();
    let folder = root.join(stem);
    let _ = std::fs::remove_dir_all(&folder);
    for (relative, text) in generate_crate_with(stem, source, &runtime.display().to_string(), true)
    {
        let path = folder.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    // The workspace's versions of everything (pyo3 is added by cargo on the first build).
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        folder.join("python/Cargo.lock"),
    )
    .unwrap();
    let started = Instant::now();
    let output = Command::new(venv.join("bin/maturin"))
        .args(["develop", "--quiet", "--manifest-path"])
        .arg(folder.join("python/Cargo.toml"))
        .env("VIRTUAL_ENV", venv)
        .env("CARGO_TARGET_DIR", shared_target())
        .output()
        .expect("maturin runs");
    assert!(
        output.status.success(),
        "{stem}: maturin develop failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "{stem}: package built and installed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The extension loads no libtorch (`import` stays fast; the engine binaries have it).
    let package = folder.join("python/src_py").join(stem);
    let extension = std::fs::read_dir(&package)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("_native") && name.ends_with(".so")
        })
        .unwrap_or_else(|| panic!("no _native*.so in {}", package.display()));
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&extension)
        .output()
        .expect("readelf (binutils) runs");
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(dynamic.contains("NEEDED"), "{dynamic}");
    assert!(
        !dynamic.contains("libtorch") && !dynamic.contains("libc10"),
        "{} links libtorch:\n{dynamic}",
        extension.display()
    );
    folder
}

fn python(venv: &Path, arguments: &[&str], envs: &[(&str, &Path)]) -> (bool, String) {
    let mut command = Command::new(venv.join("bin/python"));
    command
        .args(arguments)
        .env("VIRTUAL_ENV", venv)
        .env_remove("EASEML_SERVER")
        .env_remove("EASEML_ENGINE_BIN_DIR");
    for (name, value) in envs {
        command.env(name, value);
    }
    let output = command.output().expect("python runs");
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// Runs the pytest file `test_file` in the venv, quietly and without a cache folder.
fn pytest(venv: &Path, test_file: &Path, envs: &[(&str, &Path)]) -> (bool, String) {
    let test_file = test_file.display().to_string();
    python(
        venv,
        &["-m", "pytest", "-q", "-p", "no:cacheprovider", &test_file],
        envs,
    )
}

#[test]
fn every_covered_example_round_trips_from_python() {
    let _one = one_at_a_time();
    let Some(venv) = venv() else { return };
    let root = tmp().join("python-crates");
    let sources: std::collections::BTreeMap<String, String> = examples().into_iter().collect();
    let test_file = workspace_root().join("tests/python/test_app.py");
    // `EASEML_PY_EXAMPLES=a,b` (or `all`) runs other examples than the covered ones.
    let chosen: Vec<String> = match std::env::var("EASEML_PY_EXAMPLES") {
        Ok(list) if list == "all" => sources.keys().cloned().collect(),
        Ok(list) => list.split(',').map(str::to_owned).collect(),
        Err(_) => COVERED.iter().map(|stem| stem.to_string()).collect(),
    };
    for stem in chosen.iter().map(String::as_str) {
        let folder = install(stem, &sources[stem], &root, &venv);
        let stubs = folder.join(format!("python/src_py/{stem}/__init__.pyi"));
        let started = Instant::now();
        let (ok, output) = pytest(
            &venv,
            &test_file,
            &[
                ("EASEML_PY_APP", Path::new(stem)),
                ("EASEML_PY_STUBS", &stubs),
                ("EASEML_PY_BUDGET", Path::new("15s")),
            ],
        );
        assert!(ok, "{stem}: pytest failed:\n{output}");
        eprintln!(
            "{stem}: pytest passed in {:.1} s\n{}",
            started.elapsed().as_secs_f64(),
            output.lines().last().unwrap_or_default()
        );
        if stem == SERVER_EXAMPLE {
            round_trip_through_a_server(&venv, stem, &stubs);
        }
    }
}

/// The example whose package is also used against a server (`tests/python/test_server.py`): one
/// with declared labels, cheap to train.
const SERVER_EXAMPLE: &str = "breast_cancer";

/// Runs `tests/python/test_server.py` against a server of this process (`easeml serve`'s
/// [`ServerThread`](easeml_runtime::server::ServerThread) over a fresh store) with an engine
/// training its apps on a thread beside it, as `easeml serve` does.
fn round_trip_through_a_server(venv: &Path, stem: &str, stubs: &Path) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let home = tmp().join("python-server-home");
    let _ = std::fs::remove_dir_all(&home);
    easeml_engine::install_local_models();
    let mut config = easeml_runtime::server::Config::new(&home);
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let mut server =
        easeml_runtime::server::ServerThread::spawn(config).expect("the server starts");
    let stop = Arc::new(AtomicBool::new(false));
    let trainer = {
        let stop = Arc::clone(&stop);
        let home = home.clone();
        std::thread::spawn(move || -> Result<usize, String> {
            let mut config = easeml_engine::EngineConfig::for_device(tch::Device::Cpu);
            config.max_run_seconds = 10.0;
            let mut engine =
                easeml_engine::Engine::open(&home, config).map_err(|error| error.to_string())?;
            let mut runs = 0;
            while !stop.load(Ordering::SeqCst) {
                match engine.step(None, &mut |_| {}) {
                    Ok(Some(_)) => runs += 1,
                    Ok(None) => std::thread::sleep(std::time::Duration::from_millis(200)),
                    Err(error) => return Err(error.to_string()),
                }
            }
            Ok(runs)
        })
    };
    let test_file = workspace_root().join("tests/python/test_server.py");
    let started = Instant::now();
    let url = server.url();
    let (ok, output) = pytest(
        venv,
        &test_file,
        &[
            ("EASEML_PY_APP", Path::new(stem)),
            ("EASEML_PY_STUBS", stubs),
            ("EASEML_PY_SERVER", Path::new(&url)),
        ],
    );
    stop.store(true, Ordering::SeqCst);
    let runs = trainer.join().expect("the engine thread does not panic");
    server.stop().expect("the server stops");
    assert!(ok, "{stem} against a server: pytest failed:\n{output}");
    assert!(
        output.contains("1 passed"),
        "the server test was skipped:\n{output}"
    );
    let runs = runs.expect("the engine trains without an error");
    assert!(runs >= 1, "the engine beside the server trained nothing");
    eprintln!(
        "{stem} against a server: pytest passed in {:.1} s ({runs} run(s) trained)",
        started.elapsed().as_secs_f64()
    );
}

/// The app of the feed measurement, in Rust through the macro: the same typed client `easemlc`
/// generates for `BENCH_EML`.
#[easeml_schema(labels = [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9])]
mod bench32 {
    pub struct Input {
        pub image: Tensor<32, 32, 3>,
    }
    pub struct Output {
        pub digit: Tensor<10>,
    }
}

const BENCH_EML: &str = "app bench32
type Input
  image :: Tensor[32, 32, 3]
end
type Output
  digit :: Tensor[10]
end
labels = [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9]
";

const BENCH_EXAMPLES: usize = 10_000;

/// Examples per second of the typed Rust client feeding `BENCH_EXAMPLES` examples cut from one
/// array into a fresh store (building the typed values included).
fn rust_feed_rate(home: &Path, values: &[f32]) -> f64 {
    let _ = std::fs::remove_dir_all(home);
    let connection = easeml_runtime::Connection::Embedded {
        home: home.to_owned(),
    };
    let mut client = bench32::Client::open(&connection).unwrap();
    let started = Instant::now();
    let examples = values
        .chunks_exact(32 * 32 * 3)
        .enumerate()
        .map(|(index, chunk)| {
            let image =
                easeml_runtime::Tensor::new(vec![32, 32, 3], chunk.to_vec()).expect("the shape");
            (
                bench32::Input::new(image).expect("the shape"),
                bench32::Label::ALL[index % 10],
            )
        });
    let report = client.feed_labelled(examples).unwrap();
    assert_eq!(report.added, BENCH_EXAMPLES);
    BENCH_EXAMPLES as f64 / started.elapsed().as_secs_f64()
}

#[test]
fn feeding_a_numpy_array_keeps_up_with_the_rust_client_and_import_is_fast() {
    let _one = one_at_a_time();
    let Some(venv) = venv() else { return };
    let root = tmp().join("python-bench");
    install("bench32", BENCH_EML, &root, &venv);
    let values: Vec<f32> = (0..BENCH_EXAMPLES * 32 * 32 * 3)
        .map(|index| ((index * 7919) % 1000) as f32 / 1000.0)
        .collect();
    // The same values for Python, as one .npy-free raw file.
    let data = root.join("bench.f32");
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect();
    std::fs::write(&data, bytes).unwrap();
    let script = format!(
        r#"
import sys, time
import bench32
import numpy as np
x = np.fromfile(sys.argv[1], dtype=np.float32).reshape({BENCH_EXAMPLES}, 32, 32, 3)
labels = [bench32.LABELS[i % 10] for i in range({BENCH_EXAMPLES})]
app = bench32.connect()
started = time.perf_counter()
report = app.feed(x, labels)
elapsed = time.perf_counter() - started
assert report["added"] == {BENCH_EXAMPLES}, report
print(f"python rate {{{BENCH_EXAMPLES} / elapsed:.1f}}")
"#
    );
    let rust = rust_feed_rate(&root.join("home-rust"), &values);
    let home = root.join("home-python");
    let _ = std::fs::remove_dir_all(&home);
    let (ok, output) = python(
        &venv,
        &["-c", &script, &data.display().to_string()],
        &[("EASEML_HOME", &home)],
    );
    assert!(ok, "the Python feed failed:\n{output}");
    let line = output
        .lines()
        .find(|line| line.starts_with("python rate "))
        .unwrap_or_else(|| panic!("no measurement in:\n{output}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let python_rate: f64 = words[2].parse().unwrap();
    // `import` in fresh processes, the fastest of three (the machine is shared).
    let import = (0..3)
        .map(|_| {
            let (ok, output) = python(
                &venv,
                &[
                    "-c",
                    "import time; t = time.perf_counter(); import bench32; print(time.perf_counter() - t)",
                ],
                &[],
            );
            assert!(ok, "import bench32 failed:\n{output}");
            output.trim().parse::<f64>().unwrap_or(f64::INFINITY)
        })
        .fold(f64::INFINITY, f64::min);
    eprintln!(
        "feed of {BENCH_EXAMPLES} [32,32,3] examples: Rust typed client {rust:.0}/s, Python from one numpy array {python_rate:.0}/s ({:.2}x); import bench32 {import:.3} s",
        python_rate / rust
    );
    assert!(
        python_rate >= 0.8 * rust,
        "Python feeds at {python_rate:.0}/s, under 0.8x the Rust client's {rust:.0}/s"
    );
    assert!(
        import < 0.5,
        "import bench32 took {import:.3} s (target 0.5 s)"
    );
    for home in ["home-rust", "home-python"] {
        let _ = std::fs::remove_dir_all(root.join(home));
    }
    let _ = std::fs::remove_file(&data);
}
