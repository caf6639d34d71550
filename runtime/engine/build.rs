//! The engine's tests link libtorch: rpath and `libtorch_cuda` (see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
