//! The `.eml` schema language front end: the pest grammar, a typed AST with byte spans, and the
//! diagnostics of the whole front end.
//!
//! Entry points: [`parse`] turns source text into an [`ast::File`] plus E001 diagnostics (it never
//! fails and never stops at the first error), and [`parse_pattern`] reads the template patterns of
//! the model registry. pest's own types never leave this crate.

mod parser;
mod syntax_error;

pub mod ast;
pub mod diagnostic;
pub mod pattern;

pub use diagnostic::{Code, Diagnostic, Span};
pub use parser::parse;
pub use pattern::parse_pattern;
