//! `#[easeml_schema]`: declare an easeml schema in Rust and get the same typed `Input`, `Output`,
//! `Label` and `Client` items that `easemlc` generates for the same program (plus `APP`,
//! `SYSTEM_TYPE`, and `MANIFEST`: the app's `easeml.json`, computed at compile time).
//!
//! ```ignore
//! #[easeml_schema(labels = [normal, arrhythmia], constraint(train_time <= 30m))]
//! mod heartbeat {
//!     pub struct Input {
//!         pub leads: Tensor<12>,
//!         pub next: Option<Box<Input>>,
//!     }
//!     pub struct Output(Tensor<2>);
//! }
//!
//! #[easeml_schema(file = "heartbeat.eml")]
//! mod heartbeat_from_file {}
//!
//! let mut client = heartbeat::Client::open_default()?;
//! client.feed_labelled([(input, heartbeat::Label::Arrhythmia)])?;
//! let answers = client.infer([query])?; // each a `Classified<heartbeat::Label>`: `.label`, `.confidence`, `.probabilities`
//! ```
//! Tensor fields are `Tensor<d1, ..., dn>` or `#[shape(d1, ..., dn)] name: Tensor`; recursive fields
//! `Option<Box<Input>>`; tuple fields are unnamed like the `.eml` shorthand. Errors carry the
//! language's codes (`E006: a tensor dimension of 0`) and point at the offending tokens. The
//! generated code names only `easeml-runtime`'s public API and its `__private` module, so the crate
//! needs `easeml-runtime` (with its default `engine` feature for `Client::infer` to answer).
//!
//! This crate is a thin wrapper: the work is `easeml_compiler::rust_front::expand`.

use proc_macro::TokenStream;

/// Generates an app's typed schema items into the module it annotates; see the crate docs.
#[proc_macro_attribute]
pub fn easeml_schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    easeml_compiler::rust_front::expand(attr.into(), item.into()).into()
}
