//! Makes every binary, test, example and bench of this crate find libtorch without
//! `LD_LIBRARY_PATH` and keep `libtorch_cuda` linked, and re-exports the libtorch lib dir to direct
//! dependents as `DEP_EASEML_TORCH_LIBTORCH_LIB` (`links = "easeml_torch"`). See easeml-torch-link.

fn main() {
    easeml_torch_link::link_from_env();
}
