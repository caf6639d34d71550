//! Makes every binary, test, example and bench of this crate find libtorch without
//! `LD_LIBRARY_PATH` and keep `libtorch_cuda` linked, and re-exports the libtorch lib dir to direct
//! dependents as `DEP_EASEML_TORCH_LIBTORCH_LIB` (`links = "easeml_torch"`). See easeml-torch-link.
//!
//! Also compiles `csrc/ops.cpp` (the operators tch does not bind: PyTorch's fused Adam step, and
//! random generators owned by one run, `src/native.rs`) and `csrc/script.cpp` (TorchScript
//! modules compiled from source, for the export of recurrent and tree networks) against the headers of the libtorch tch
//! links: `LIBTORCH_INCLUDE` when set (as torch-sys reads it), else the `include` folder beside
//! the lib dir torch-sys reports, with torch-sys's flags (C++17, `LIBTORCH_CXX11_ABI`, default 1:
//! every PyTorch wheel since 2.7 and the libtorch archives use the new ABI).

use std::path::PathBuf;

fn main() {
    easeml_torch_link::link_from_env();
    for file in ["csrc/ops.cpp", "csrc/script.cpp", "csrc/catching.h"] {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-env-changed=LIBTORCH_INCLUDE");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let include = match std::env::var_os("LIBTORCH_INCLUDE") {
        Some(dir) => PathBuf::from(dir).join("include"),
        None => {
            let lib_dir = std::env::var_os("DEP_TCH_LIBTORCH_LIB")
                .expect("torch-sys reports its libtorch lib dir as DEP_TCH_LIBTORCH_LIB");
            PathBuf::from(lib_dir)
                .parent()
                .expect("the libtorch lib dir has a parent folder")
                .join("include")
        }
    };
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .file("csrc/ops.cpp")
        .file("csrc/script.cpp")
        .compile("easeml_trainer_ops");
}
