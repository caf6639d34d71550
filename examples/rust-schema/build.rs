//! The example links libtorch (through easeml-runtime's engine): an rpath to the install the
//! runtime was built with, and `libtorch_cuda` kept linked (see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
