//! The one build-script helper for every crate whose binaries, tests or examples link libtorch
//! (the trainer, the engine, the client library, the `easeml` CLI and every generated app).
//!
//! tch links libtorch dynamically and leaves finding it to `LD_LIBRARY_PATH`; and under the
//! linker's `--as-needed` it drops `libtorch_cuda`, because no symbol of it is used directly, so CUDA
//! silently disappears at run time. [`emit_link_args`] fixes both for the calling crate's own
//! targets: an rpath to the libtorch the build used, and `libtorch_cuda` linked with
//! `--no-as-needed` when the install has it.
//!
//! Cargo's `rustc-link-arg` does not propagate to dependents, so each crate with binaries calls
//! this from its own build.rs. The libtorch lib dir travels down the dependency graph as `links`
//! metadata: torch-sys exports `DEP_TCH_LIBTORCH_LIB`; easeml-trainer (`links = "easeml_torch"`)
//! re-exports it as `DEP_EASEML_TORCH_LIBTORCH_LIB`; easeml-runtime (`links = "easeml_runtime"`)
//! re-exports it again as `DEP_EASEML_RUNTIME_LIBTORCH_LIB` for the generated app crates.
//! [`link_from_env`] reads the first of those that is set, emits the link args and re-exports the
//! dir for the caller's own dependents.

use std::path::Path;

/// The `DEP_*` variables that may carry the libtorch lib dir, in the order they are tried.
pub const LIB_DIR_VARIABLES: [&str; 3] = [
    "DEP_TCH_LIBTORCH_LIB",
    "DEP_EASEML_TORCH_LIBTORCH_LIB",
    "DEP_EASEML_RUNTIME_LIBTORCH_LIB",
];

/// Prints the cargo directives that make this crate's targets find libtorch in `lib_dir` and keep
/// `libtorch_cuda` linked when it is there; also re-exports the dir as `libtorch_lib` metadata (seen
/// by dependents as `DEP_<LINKS>_LIBTORCH_LIB` when the crate declares `links`) and as the
/// compile-time variable `EASEML_LIBTORCH_LIB`.
pub fn emit_link_args(lib_dir: &str) {
    println!("cargo:libtorch_lib={lib_dir}");
    println!("cargo:rustc-env=EASEML_LIBTORCH_LIB={lib_dir}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    if Path::new(lib_dir).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}

/// Reads the libtorch lib dir from the first of [`LIB_DIR_VARIABLES`] that is set and calls
/// [`emit_link_args`]; returns the dir, or `None` when no variable is set (e.g. torch-sys's doc-only
/// build), in which case nothing is printed but the rerun directives.
pub fn link_from_env() -> Option<String> {
    for variable in LIB_DIR_VARIABLES {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    let lib_dir = LIB_DIR_VARIABLES
        .iter()
        .find_map(|variable| std::env::var(variable).ok())?;
    emit_link_args(&lib_dir);
    Some(lib_dir)
}
