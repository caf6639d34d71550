//! trybuild: every error code that can arise in either form of `#[easeml_schema]` is a compile
//! error on the right tokens (`.stderr` snapshots; refresh with
//! `TRYBUILD=overwrite cargo test -p easeml-macros --test compiletest`, then review the diff). The
//! cases that compile are ordinary tests (`tests/pass/`): with compile errors only, trybuild
//! type-checks its project (`cargo check`) instead of building every dependency under its own
//! rustflags (`--cfg trybuild`, which no other build shares) to run them.
//!
//! Codes: the inline form can raise E001-E012 and E014 (one `fail/eNNN_*.rs` each, plus
//! `fail/macro_syntax_errors.rs` for every E001 the Rust syntax adds); the file form the same codes
//! from its `.eml` file (`fail/file_form_errors.rs`, one module per code), and E015 (a type of more
//! than 1024 fields: only there, as an inline case would be 1025 fields long). E013 (no template accepts
//! the program) cannot arise: the macro always uses the built-in registry, whose general templates
//! (rows 8 and 9) accept every program.
//!
//! The project uses `easeml-runtime` without its `engine` feature (no libtorch bindings to check).
//! `file = "..."` is relative to the compiled crate's manifest dir, which for trybuild is its
//! project dir under the target dir (`<target>/tests/trybuild/easeml-macros/`). The cases name
//! `examples/*.eml` and `fixtures/*.eml`: the repository's `examples/` and `tests/fixtures/`,
//! copied there first. trybuild's project builds easeml's crates with the generated crates' profile
//! (`build_as_a_generated_crate`).

use std::path::{Path, PathBuf};

/// Copies every `.eml` file of `from` into `to` (created).
fn copy_programs(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|error| panic!("{}: {error}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|error| panic!("{}: {error}", from.display()));
    for path in entries.filter_map(|entry| entry.ok().map(|entry| entry.path())) {
        if path.extension().is_some_and(|extension| extension == "eml") {
            let target = to.join(path.file_name().unwrap_or_default());
            std::fs::copy(&path, &target).unwrap_or_else(|error| {
                panic!("{} -> {}: {error}", path.display(), target.display())
            });
        }
    }
}

/// trybuild's project is a crate outside the workspace that builds easeml's crates by path, as a
/// generated app's crate does: without a profile it would build every dependency with full debug
/// info (a 120 MB binary per pass case, 8 GB of target dir). Cargo reads `.cargo/config.toml` from
/// the directories above the project, and profiles there mean what they mean in a manifest: the
/// generated crates' profile (`templates/crate/profile.toml`, which tidy checks against the
/// workspace's) goes into `<target>/tests/trybuild/.cargo/config.toml`.
fn build_as_a_generated_crate(repository: &Path, project: &Path) {
    let profile = repository.join("templates/crate/profile.toml");
    let config = project
        .parent()
        .expect("trybuild's project is in a folder")
        .join(".cargo");
    std::fs::create_dir_all(&config)
        .unwrap_or_else(|error| panic!("{}: {error}", config.display()));
    let text = std::fs::read_to_string(&profile)
        .unwrap_or_else(|error| panic!("{}: {error}", profile.display()));
    assert!(
        text.contains("[profile.dev.package.\"*\"]"),
        "{} no longer sets the dependencies' profile",
        profile.display()
    );
    let target = config.join("config.toml");
    std::fs::write(&target, text).unwrap_or_else(|error| panic!("{}: {error}", target.display()));
}

#[test]
fn ui() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // CARGO_TARGET_TMPDIR is `<target>/tmp`; trybuild's project sits in `<target>/tests/trybuild/`.
    let project: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("../tests/trybuild")
        .join(env!("CARGO_PKG_NAME"));
    copy_programs(&repository.join("examples"), &project.join("examples"));
    build_as_a_generated_crate(&repository, &project);
    copy_programs(
        &repository.join("tests/fixtures"),
        &project.join("fixtures"),
    );

    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
}
