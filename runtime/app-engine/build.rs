//! Re-exports the libtorch lib dir to the generated app crates (their build.rs gives their engine
//! binaries an rpath to it; see easeml-torch-link).

fn main() {
    easeml_torch_link::link_from_env();
}
