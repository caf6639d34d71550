//! The easeml runtime: what the generated app crates and `easeml serve` link against.
//!
//! Today it holds the value types of the generated `Input` / `Output` structs ([`Tensor`]) and the
//! schema model every runtime component consumes; the store, engine, server and client library are
//! added by their own issues (see ARCHITECTURE.md).

pub mod tensor;

pub use easeml_compiler::schema::Schema;
pub use tensor::{ShapeError, Tensor, UnknownLabel};

/// What generated code names; not a stable API for hand-written code.
#[doc(hidden)]
pub mod __private {
    pub use crate::tensor::{ShapeError, Tensor, UnknownLabel};
    pub use serde;
}
