//! `easeml` links libtorch through easeml-trainer: give the binary (and this crate's tests) an rpath
//! to the install torch-sys built against and keep `libtorch_cuda` linked (under `--as-needed` the
//! linker drops it and CUDA silently disappears). The same lines as `runtime/trainer/build.rs`,
//! reading the lib dir that easeml-trainer re-exports (`links = "easeml_torch"`); cargo's
//! `rustc-link-arg` does not propagate to dependents, so each binary crate prints its own.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_EASEML_TORCH_LIBTORCH_LIB");
    let Ok(lib_dir) = std::env::var("DEP_EASEML_TORCH_LIBTORCH_LIB") else {
        return;
    };
    println!("cargo:rustc-env=EASEML_LIBTORCH_LIB={lib_dir}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    if Path::new(&lib_dir).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
