//! What the CLI's process tests share: the small apps they feed into a store before running the
//! real `easeml` binary on it.

use std::path::Path;
use std::time::{Duration, Instant};

use easeml_runtime::{AppSpec, Client, Connection};

/// Whether a unit's candidate is a network (trained by steps, seconds long here), not a classic
/// model that may finish within milliseconds of its lease: the tests that stop or kill a worker
/// mid-unit wait for a network's unit.
#[allow(dead_code)]
pub fn is_network(candidate: &str) -> bool {
    easeml_trainer::Candidate::parse(candidate)
        .is_ok_and(|candidate| !easeml_trainer::classic::is_classic(candidate.model))
}

/// An image app whose runs take a few seconds on the CPU.
pub const SHAPES: &str = "app shapes\nInput = [12, 12, 3]\nOutput = [2]\nlabels = [dark, bright]";

/// The app of a program, described by the manifest easemlc writes for it.
pub fn spec_of(source: &str) -> AppSpec {
    let compiled =
        easeml_compiler::compile(source, "app", &easeml_compiler::Registry::builtin()).unwrap();
    AppSpec::from_manifest_json(&easeml_compiler::codegen::manifest(&compiled).to_json()).unwrap()
}

/// Feeds feed lines to the app of `source` in the embedded store at `data` (created if missing).
pub fn feed(data: &Path, source: &str, lines: String) {
    let mut client = Client::open(&Connection::embedded(data), spec_of(source)).unwrap();
    client
        .feed_lines(std::io::Cursor::new(lines), &Default::default())
        .unwrap();
}

/// 120 labelled 12x12x3 images of [`SHAPES`]: bright ones uniform, dark ones striped.
#[allow(dead_code)] // not every process test feeds it
pub fn feed_shapes(data: &Path) {
    feed(data, SHAPES, shapes_lines());
}

/// The feed lines of [`feed_shapes`].
pub fn shapes_lines() -> String {
    let pixel = |i: usize, j: usize| {
        if i.is_multiple_of(2) {
            0.8
        } else {
            (j % 5) as f32 / 20.0
        }
    };
    (0..120)
        .map(|i| {
            let image: Vec<Vec<Vec<f32>>> = (0..12)
                .map(|r| (0..12).map(|c| vec![pixel(i, r * 12 + c); 3]).collect())
                .collect();
            let label = if i.is_multiple_of(2) {
                "bright"
            } else {
                "dark"
            };
            format!("{} {label}\n", serde_json::to_string(&image).unwrap())
        })
        .collect()
}

/// A tabular app whose runs take well under a second.
#[allow(dead_code)] // not every process test feeds it
pub const SIDES: &str = "app sides\nInput = [2]\nOutput = [2]\nlabels = [left, right]";

/// `count` labelled points of [`SIDES`] (left when the first coordinate is the smaller).
#[allow(dead_code)] // not every process test feeds it
pub fn feed_sides(data: &Path, count: usize) {
    feed(data, SIDES, sides_lines(count));
}

/// The feed lines of [`feed_sides`].
#[allow(dead_code)] // not every process test feeds it
pub fn sides_lines(count: usize) -> String {
    (0..count)
        .map(|i| {
            let a = ((i * 37) % 100) as f32 / 100.0;
            let b = ((i * 61) % 100) as f32 / 100.0;
            let label = if a < b { "left" } else { "right" };
            format!("[{a}, {b}] {label}\n")
        })
        .collect()
}

/// Polls `found` until it has a value; fails naming `what` after `limit` (a bound, not a timing
/// assertion).
#[allow(dead_code)] // not every process test waits
pub fn wait_until<T>(what: &str, limit: Duration, mut found: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
