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
//! re-exports it again as `DEP_EASEML_RUNTIME_LIBTORCH_LIB` (for crates that use the runtime's
//! `engine` feature), and easeml-app-engine (`links = "easeml_app_engine"`) as
//! `DEP_EASEML_APP_ENGINE_LIBTORCH_LIB` for the generated app crates, whose build.rs gives only
//! their engine binaries the rpath ([`link_bins_from_env`]).
//! [`link_from_env`] reads the first of those that is set, emits the link args and re-exports the
//! dir for the caller's own dependents.

use std::path::Path;

/// The `DEP_*` variables that may carry the libtorch lib dir, in the order they are tried.
pub const LIB_DIR_VARIABLES: [&str; 4] = [
    "DEP_TCH_LIBTORCH_LIB",
    "DEP_EASEML_TORCH_LIBTORCH_LIB",
    "DEP_EASEML_RUNTIME_LIBTORCH_LIB",
    "DEP_EASEML_APP_ENGINE_LIBTORCH_LIB",
];

/// Prints the cargo directives that make this crate's targets find libtorch in `lib_dir` and keep
/// `libtorch_cuda` linked when it is there; also re-exports the dir as `libtorch_lib` metadata (seen
/// by dependents as `DEP_<LINKS>_LIBTORCH_LIB` when the crate declares `links`) and as the
/// compile-time variable `EASEML_LIBTORCH_LIB`.
pub fn emit_link_args(lib_dir: &str) {
    emit_metadata(lib_dir);
    for arg in link_args(lib_dir) {
        println!("cargo:rustc-link-arg={arg}");
    }
}

/// Where a generated app's engine binaries find libtorch when its Python wheel carries them: they
/// are installed as `site-packages/<app>/bin/<app>-train`, and the `torch` wheel the package
/// depends on puts libtorch in `site-packages/torch/lib`. Tried before the build's own libtorch
/// dir (an absolute path, which on another machine does not exist); in a target dir the relative
/// one finds nothing and the absolute one is used.
pub const WHEEL_RPATH: &str = "$ORIGIN/../../torch/lib";

/// [`emit_link_args`] for the named binaries of the calling crate only (`rustc-link-arg-bin`):
/// a generated app's `<app>-infer` and `<app>-train` link libtorch, its `<app>`, `<app>-feed` and
/// `<app>-refine` must not (they reference no libtorch symbol, so the linker's `--as-needed`
/// leaves libtorch out, and nothing here forces `libtorch_cuda` in). These binaries also get the
/// rpath [`WHEEL_RPATH`], first, so that the copies an app's Python wheel carries find the
/// `torch` wheel's libtorch.
pub fn emit_link_args_for_bins(lib_dir: &str, bins: &[&str]) {
    emit_metadata(lib_dir);
    for bin in bins {
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,-rpath,{WHEEL_RPATH}");
        for arg in link_args(lib_dir) {
            println!("cargo:rustc-link-arg-bin={bin}={arg}");
        }
    }
}

/// The metadata every caller re-exports, and a link-search path inside the target dir.
///
/// Cargo puts the link-search paths of build scripts that lie inside the target dir on the
/// library path of `cargo run` and `cargo test` (those outside it, like the venv's, it leaves
/// out). A symlink to the libtorch lib dir in `OUT_DIR` therefore makes `cargo run` of any crate
/// that depends on this one find libtorch, even a crate whose own binaries have no rpath (a user
/// crate without a build script). Nothing is linked from it that `-L` of torch-sys does not
/// already provide.
fn emit_metadata(lib_dir: &str) {
    println!("cargo:libtorch_lib={lib_dir}");
    println!("cargo:rustc-env=EASEML_LIBTORCH_LIB={lib_dir}");
    if let Some(out_dir) = std::env::var_os("OUT_DIR") {
        let link = Path::new(&out_dir).join("libtorch");
        let linked = std::fs::read_link(&link).is_ok_and(|target| target == Path::new(lib_dir));
        if !linked {
            let _ = std::fs::remove_file(&link);
            #[cfg(unix)]
            let _ = std::os::unix::fs::symlink(lib_dir, &link);
        }
        if link.exists() {
            println!("cargo:rustc-link-search=native={}", link.display());
        }
    }
}

/// The linker arguments that find libtorch at run time (an rpath) and keep `libtorch_cuda`.
fn link_args(lib_dir: &str) -> Vec<String> {
    let mut args = vec![format!("-Wl,-rpath,{lib_dir}")];
    if Path::new(lib_dir).join("libtorch_cuda.so").exists() {
        args.extend([
            "-Wl,--no-as-needed".to_owned(),
            "-ltorch_cuda".to_owned(),
            "-Wl,--as-needed".to_owned(),
        ]);
    }
    args
}

/// Reads the libtorch lib dir from the first of [`LIB_DIR_VARIABLES`] that is set and calls
/// [`emit_link_args`]; returns the dir, or `None` when no variable is set (e.g. torch-sys's doc-only
/// build), in which case nothing is printed but the rerun directives.
pub fn link_from_env() -> Option<String> {
    let lib_dir = lib_dir_from_env()?;
    emit_link_args(&lib_dir);
    Some(lib_dir)
}

/// [`link_from_env`] for the named binaries only ([`emit_link_args_for_bins`]).
pub fn link_bins_from_env(bins: &[&str]) -> Option<String> {
    let lib_dir = lib_dir_from_env()?;
    emit_link_args_for_bins(&lib_dir, bins);
    Some(lib_dir)
}

fn lib_dir_from_env() -> Option<String> {
    for variable in LIB_DIR_VARIABLES {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    LIB_DIR_VARIABLES
        .iter()
        .find_map(|variable| std::env::var(variable).ok())
}
