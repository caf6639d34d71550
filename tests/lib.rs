//! Shared helpers of the end-to-end tests (the tests themselves live in `tests/tests/*.rs`).
//!
//! A fixture is a `.eml` file under `tests/fixtures/` whose first line says what it must produce:
//! `# expect: ok WORKLOAD` for a valid program, or `# expect: E003, E004` for the exact set of error
//! codes. Fixtures named `e013_*` are compiled with `fixtures/images_only.registry.toml`.

use std::path::{Path, PathBuf};

use easeml_compiler::diagnostic;
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Compiled, Diagnostic, Registry, compile};

/// The folder of `.eml` fixtures.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The folder of golden generated files: `golden/<example>/src/types.rs` and
/// `golden/<example>/easeml.json`, refreshed by `cargo xtask bless`.
pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Every example program, as (file stem, source), sorted by name.
pub fn examples() -> Vec<(String, String)> {
    let mut examples: Vec<(String, String)> = std::fs::read_dir(examples_dir())
        .unwrap_or_else(|error| panic!("examples/: {error}"))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "eml"))
        .map(|path| {
            let stem = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            (stem, source)
        })
        .collect();
    examples.sort();
    examples
}

/// The files easemlc generates for an example (formatted with rustfmt, as `easemlc build` writes
/// them), with `runtime_path` in the crate's Cargo.toml.
pub fn generate_crate(
    stem: &str,
    source: &str,
    runtime_path: &str,
) -> std::collections::BTreeMap<String, String> {
    generate_crate_with(stem, source, runtime_path, false)
}

/// [`generate_crate`], with the Python package under `python/` when `python` is set (`easemlc
/// --python`).
pub fn generate_crate_with(
    stem: &str,
    source: &str,
    runtime_path: &str,
    python: bool,
) -> std::collections::BTreeMap<String, String> {
    use easeml_compiler::codegen::{CrateOptions, crate_files, rustfmt_files};
    let compiled = compile(source, stem, &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{stem}: {diagnostics:#?}"));
    let options = CrateOptions {
        runtime: easeml_compiler::codegen::RuntimeSource::Path(runtime_path.to_owned()),
        server: None,
        python,
    };
    let mut files =
        crate_files(&compiled, &options).unwrap_or_else(|error| panic!("{stem}: {error}"));
    rustfmt_files(&mut files);
    files
}

/// What a fixture says it must produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// A valid program with this workload.
    Valid {
        /// The workload name.
        workload: String,
    },
    /// An invalid program with exactly these error codes (sorted, unique).
    Invalid {
        /// The codes, e.g. `["E003", "E004"]`.
        codes: Vec<String>,
    },
}

/// A fixture read from disk.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The file name, e.g. `e004_duplicate_field.eml`.
    pub name: String,
    /// The file stem, used as the default app name.
    pub stem: String,
    /// The text (UTF-8; a byte-order mark is kept, as a user's file would have it).
    pub source: String,
    /// What it must produce.
    pub expectation: Expectation,
}

impl Fixture {
    /// Reads a fixture and its `# expect:` line; panics with the file name when the line is missing.
    pub fn read(path: &Path) -> Fixture {
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let first_line = source
            .trim_start_matches('\u{feff}')
            .lines()
            .next()
            .unwrap_or("")
            .trim();
        let expect = first_line
            .strip_prefix("# expect:")
            .unwrap_or_else(|| panic!("{}: the first line must be `# expect: ...`", path.display()))
            .trim();
        let expectation = match expect.strip_prefix("ok ") {
            Some(workload) => Expectation::Valid {
                workload: workload.trim().to_owned(),
            },
            None => {
                let mut codes: Vec<String> = expect
                    .split(',')
                    .map(|code| code.trim().to_owned())
                    .collect();
                codes.sort();
                codes.dedup();
                Expectation::Invalid { codes }
            }
        };
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        Fixture {
            name,
            stem,
            source,
            expectation,
        }
    }

    /// The registry this fixture is compiled with.
    pub fn registry(&self) -> Registry {
        if self.name.starts_with("e013") {
            let path = fixtures_dir().join("images_only.registry.toml");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            Registry::from_toml(&text, "images_only.registry.toml")
                .unwrap_or_else(|error| panic!("{error}"))
        } else {
            Registry::builtin()
        }
    }

    /// Compiles the fixture.
    pub fn compile(&self) -> Result<Compiled, Vec<Diagnostic>> {
        compile(&self.source, &self.stem, &self.registry())
    }

    /// The text stored in the fixture's snapshot: the canonical type and the explain JSON of a valid
    /// program, or the rendered diagnostics and their JSON for an invalid one.
    pub fn snapshot_text(&self) -> String {
        match self.compile() {
            Ok(compiled) => {
                let explanation = Explanation::new(&compiled);
                format!(
                    "system type: {}\n\nexplain --json:\n{}\n",
                    compiled.schema.system_type(),
                    serde_json::to_string_pretty(&explanation).unwrap_or_default()
                )
            }
            Err(diagnostics) => {
                let json: Vec<_> = diagnostics
                    .iter()
                    .map(|diagnostic| diagnostic::to_json(diagnostic, &self.source, &self.name))
                    .collect();
                format!(
                    "{}check --json:\n{}\n",
                    diagnostic::render(&diagnostics, &self.source, &self.name, false),
                    serde_json::to_string_pretty(&json).unwrap_or_default()
                )
            }
        }
    }
}
