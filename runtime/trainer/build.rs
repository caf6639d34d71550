//! Makes every binary, test, example and bench of this crate find libtorch without
//! `LD_LIBRARY_PATH` (an rpath to the install torch-sys built against), and keeps `libtorch_cuda`
//! linked: tch links it, but under `--as-needed` the linker drops it because no symbol of it is used
//! directly, and CUDA then silently disappears at run time.
//!
//! Downstream crates with binaries (the CLI, generated apps) copy the same three lines into their own
//! build.rs, reading `DEP_EASEML_TORCH_LIBTORCH_LIB` (this crate's `links = "easeml_torch"`).

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        // torch-sys without a lib dir (e.g. its doc-only feature): nothing to link.
        return;
    };
    println!("cargo:libtorch_lib={lib_dir}");
    println!("cargo:rustc-env=EASEML_LIBTORCH_LIB={lib_dir}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    if Path::new(&lib_dir).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
