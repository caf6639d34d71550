//! The client library links libtorch (through the engine): its tests and examples get the rpath and
//! `libtorch_cuda`, and the lib dir is re-exported to the generated app crates, whose own build.rs
//! calls the same helper (see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
