//! `easeml` links libtorch (through the runtime's engine): rpath and `libtorch_cuda` (see
//! easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
