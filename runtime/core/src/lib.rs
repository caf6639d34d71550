//! The easeml runtime: what the generated app binaries and `easeml serve` link against.
//!
//! For now it only re-exports the compiled schema model that every runtime component consumes; the
//! store, engine, server and client library are added by their own issues (see ARCHITECTURE.md).

pub use easeml_compiler::schema::Schema;
