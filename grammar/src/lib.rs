//! The `.eml` schema language: pest grammar, typed AST with spans, syntax diagnostics.
