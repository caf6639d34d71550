//! The test binaries link the runtime, and through its engine libtorch: rpath and `libtorch_cuda`
//! (see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
