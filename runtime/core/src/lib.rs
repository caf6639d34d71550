//! The easeml runtime: what generated app crates and `#[easeml_schema]` crates depend on.
//!
//! This crate is a facade over the runtime's parts plus the generated binaries' command line:
//! - the client library ([`Client`], [`Connection`], [`AppSpec`], the feed loaders, [`Tensor`]):
//!   the `easeml-client` crate, re-exported item by item, so generated code names
//!   `::easeml_runtime::Client` and so on;
//! - [`server`]: the HTTP side (`easeml serve`, the refine page), the `easeml-server` crate;
//! - [`app_cli`]: the behaviour of every generated binary (`<app>`, `<app>-feed`, `<app>-refine`,
//!   `<app>-infer`, `<app>-train`), each generated `main.rs` being one call into it (the engine
//!   binaries through the `easeml-app-engine` crate, which adds the engine).
//!
//! The default feature `engine` adds embedded inference for code that uses the typed client
//! (libtorch through `easeml-engine`; the typed client's `open` calls [`install_engine`]); without
//! it nothing links libtorch, and a remote client still does everything. Generated app crates use
//! this crate without it, and `easeml-app-engine` for their engine binaries.

pub mod app_cli;

pub use easeml_client::*;
/// The engine (libtorch): training across every app of a store, and serving the best models.
#[cfg(feature = "engine")]
pub use easeml_engine as engine;

/// Makes this process's embedded clients answer `infer` with the engine's models (with the
/// `engine` feature; without it this does nothing and an embedded `infer` says there is no
/// engine). The generated typed client calls it when it opens; call it before
/// [`Client::open`] in code that uses the untyped client.
pub fn install_engine() {
    #[cfg(feature = "engine")]
    easeml_engine::install_local_models();
}
/// An error as easeml's binaries print it, `what: why: ...`: the error and its causes, leaving out
/// a cause whose text the message already holds (the crates' errors name their cause in their own
/// message). For an `anyhow::Error`, pass `error.as_ref()`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = next.source();
    }
    message
}

/// The HTTP server: `easeml serve` and the generated binaries' `refine` page.
pub use easeml_server as server;

/// What generated code names; not a stable API for hand-written code.
#[doc(hidden)]
pub mod __private {
    pub use crate::install_engine;
    pub use easeml_client::tensor::{ShapeError, Tensor, UnknownLabel};
    pub use serde;
}
