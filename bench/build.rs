//! The lab's tests, examples and benches link libtorch (through the harnesses' engine): rpath and
//! `libtorch_cuda` (see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
