//! `#[easeml_schema]`, the schema as a proc-macro in user crates.
//!
//! This crate will stay a thin wrapper over `easeml-compiler`'s library (the pest/thiserror pattern):
//! the macro lowers Rust items into the same `Schema` that `easemlc` builds from `.eml` files and
//! expands through the same code generator. It exports no macro yet; see ARCHITECTURE.md, "Status".
