//! With the `engine` feature the client library links libtorch: its tests get the rpath and
//! `libtorch_cuda` (see easeml-torch-link); without it nothing is printed.

fn main() {
    easeml_torch_link::link_from_env();
}
