//! The easeml runtime: what generated app crates and `#[easeml_schema]` crates depend on.
//!
//! This crate is a facade over the runtime's parts plus the generated binaries' command line:
//! - the client library ([`Client`], [`Connection`], [`AppSpec`], the feed loaders, [`Tensor`]):
//!   the `easeml-client` crate, re-exported item by item, so generated code names
//!   `::easeml_runtime::Client` and so on;
//! - [`server`]: the HTTP side (`easeml serve`, the refine page), the `easeml-server` crate;
//! - [`app_cli`]: the behaviour of every generated binary (`<app>`, `<app>-feed`, `<app>-refine`,
//!   `<app>-infer`), each generated `main.rs` being one call into it.
//!
//! The default feature `engine` adds training and embedded inference (libtorch through
//! `easeml-engine`); without it nothing links libtorch, and a remote client still does everything.

pub mod app_cli;

pub use easeml_client::*;
/// The HTTP server: `easeml serve` and the generated binaries' `refine` page.
pub use easeml_server as server;

/// What generated code names; not a stable API for hand-written code.
#[doc(hidden)]
pub mod __private {
    pub use easeml_client::tensor::{ShapeError, Tensor, UnknownLabel};
    pub use serde;
}
