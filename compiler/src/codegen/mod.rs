//! Code generation (DESIGN.md section 2, the paper's section 2.1): from a compiled program to the
//! files of the app's client crate.
//!
//! The core does no IO (the prost-build pattern): [`rust_types`] turns a [`Schema`](crate::Schema) into Rust items
//! and [`client_items`] into the typed `Client` (the functions that both `easemlc` and
//! `#[easeml_schema]` call, so they can never disagree), and [`manifest()`] is the `easeml.json`
//! ([`easeml_schema::Manifest`]) the runtime registers the app from. Generated code names only the runtime's public API
//! (`::easeml_runtime::...`) and `::easeml_runtime::__private::...` paths.
//!
//! [`crate_files`] adds the scaffolding of the whole client crate (handlebars templates in
//! `templates/crate/`); only `easemlc build` writes files, and only those that changed.

mod client;
mod crate_files;
mod labels;
mod manifest;
mod types;

pub(crate) use client::{Answers, client_tokens};
pub use client::{ManifestSource, client_items};
pub use crate_files::{CrateOptions, GenerateError, RUNTIME_VERSION, RuntimeSource, crate_files};
pub use labels::label_variants;
pub use manifest::manifest;
pub use types::{RustField, format_items, renamed_fields, rust_fields, rust_types};

/// Every item of one compiled program as one module holds them with its manifest inline: the
/// types ([`rust_types`]) and the typed client ([`client_items`]) with `MANIFEST` as a string
/// literal. This is what `#[easeml_schema]` expands to (and what the generated-crate fuzz test
/// compiles).
pub fn inline_items(compiled: &crate::Compiled) -> proc_macro2::TokenStream {
    let manifest = manifest(compiled).to_json();
    let mut items = rust_types(&compiled.schema);
    items.extend(client_items(
        compiled,
        ManifestSource::Literal(&manifest),
        None,
    ));
    items
}

/// The first line of every generated file (the manifest's `_generated` note too).
pub const GENERATED_HEADER: &str = easeml_schema::manifest::GENERATED_NOTE;

/// Formats generated Rust with the toolchain's `rustfmt` (edition 2024), so generated crates pass
/// `cargo fmt --check`; returns the text unchanged (prettyplease's layout) when rustfmt is not
/// installed or fails. This is the one place code generation runs a process: callers that write
/// files (`easemlc build`, the golden tests) call it, the generator itself does no IO.
pub fn rustfmt(text: &str) -> String {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let child = Command::new(std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into()))
        .args(["--edition", "2024", "--emit", "stdout", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return text.to_owned();
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(text.as_bytes()).is_ok());
    match child.wait_with_output() {
        Ok(output) if wrote && output.status.success() && !output.stdout.is_empty() => {
            String::from_utf8(output.stdout).unwrap_or_else(|_| text.to_owned())
        }
        _ => text.to_owned(),
    }
}

/// Runs [`rustfmt`] over every `.rs` file of a generated crate.
pub fn rustfmt_files(files: &mut std::collections::BTreeMap<String, String>) {
    for (path, text) in files.iter_mut() {
        if path.ends_with(".rs") {
            *text = rustfmt(text);
        }
    }
}
