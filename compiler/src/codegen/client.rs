//! The typed `Client` of an app, with the `MANIFEST` and `SERVER` constants it opens the app from.
//!
//! One quote function, [`client_items`], that both the generated crate (`src/lib.rs`, rendered in as
//! text by `crate_files`) and the `#[easeml_schema]` macro call, so the two give the same client API
//! for the same schema; they differ only in where the manifest text comes from ([`ManifestSource`]).
//! The client is a thin typed layer over `::easeml_runtime::Client`: every path it names is the
//! runtime's public API (or `::core` / `::std`), and the `Input`, `Output` and `Label` types it takes
//! are the ones [`super::rust_types`] emits beside it.

use proc_macro2::TokenStream;
use quote::quote;

use crate::Compiled;

/// Where the generated `MANIFEST` constant gets the app's `easeml.json` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestSource<'a> {
    /// `include_str!(path)`: the generated crate's `src/lib.rs` includes its `easeml.json`
    /// (`path` is relative to that source file, e.g. `../easeml.json`).
    IncludeStr(&'a str),
    /// The text itself as a string literal: the macro computes the manifest at compile time.
    Literal(&'a str),
}

/// The `MANIFEST` and `SERVER` constants and the typed `Client` of a compiled program.
/// `server` is the URL baked in by `easemlc --server` (the `EASEML_SERVER` variable still wins).
pub fn client_items(
    compiled: &Compiled,
    manifest: ManifestSource<'_>,
    server: Option<&str>,
) -> TokenStream {
    client_tokens(Answers::of(&compiled.schema), manifest, server)
}

/// What a typed `infer` answers, by the app's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answers {
    /// Declared labels: `Classified<Label>`.
    Labels,
    /// Classes known by index (one `[D]` output, D >= 2, no labels): `Classified<usize>`.
    Classes,
    /// Values: the generated `Output`.
    Values,
}

impl Answers {
    /// The answers of an app with `schema` (the rule of [`easeml_schema::Schema::label_capacity`]).
    pub(crate) fn of(schema: &easeml_schema::Schema) -> Answers {
        match (&schema.labels, schema.label_capacity()) {
            (Some(_), _) => Answers::Labels,
            (None, Some(_)) => Answers::Classes,
            (None, None) => Answers::Values,
        }
    }
}

/// [`client_items`] from what it depends on: what `infer` answers, the manifest and the server.
/// The macro also calls it for the stub module it emits next to a schema error, so that code using
/// the client does not add follow-up errors to the real one.
pub(crate) fn client_tokens(
    answers: Answers,
    manifest: ManifestSource<'_>,
    server: Option<&str>,
) -> TokenStream {
    let has_labels = answers == Answers::Labels;
    let manifest = match manifest {
        ManifestSource::IncludeStr(path) => quote!(::core::include_str!(#path)),
        ManifestSource::Literal(text) => quote!(#text),
    };
    let server = match server {
        Some(url) => quote!(::core::option::Option::Some(#url)),
        None => quote!(::core::option::Option::None),
    };
    let feed_labelled = has_labels.then(|| {
        quote! {
            /// Stores examples labelled by class: all of them, or none when one is bad.
            pub fn feed_labelled(
                &mut self,
                examples: impl ::core::iter::IntoIterator<Item = (Input, Label)>,
            ) -> ::easeml_runtime::Result<::easeml_runtime::FeedReport> {
                self.inner.feed(
                    ::core::iter::IntoIterator::into_iter(examples)
                        .map(|(input, label)| (input, label.name())),
                )
            }
        }
    });
    let infer = match answers {
        Answers::Labels => quote! {
            /// Answers inputs with the best model so far: each answer's `Label`, its probability and
            /// every class's (`probabilities[label.index()]`); an error says when no model is
            /// trained yet, or, embedded, when the process has no engine (easeml-runtime built
            /// without its `engine` feature).
            pub fn infer(
                &mut self,
                inputs: impl ::core::iter::IntoIterator<Item = Input>,
            ) -> ::easeml_runtime::Result<::std::vec::Vec<::easeml_runtime::Classified<Label>>> {
                self.inner
                    .infer(inputs)?
                    .answers
                    .into_iter()
                    .map(|(_, answer)| ::easeml_runtime::Classified::from_inference(answer, Label::from_index))
                    .collect()
            }
        },
        Answers::Classes => quote! {
            /// Answers inputs with the best model so far: each answer's class index, its
            /// probability and every class's (`probabilities[class]`); an error says when no model
            /// is trained yet, or, embedded, when the process has no engine (easeml-runtime built
            /// without its `engine` feature).
            pub fn infer(
                &mut self,
                inputs: impl ::core::iter::IntoIterator<Item = Input>,
            ) -> ::easeml_runtime::Result<::std::vec::Vec<::easeml_runtime::Classified<usize>>> {
                self.inner
                    .infer(inputs)?
                    .answers
                    .into_iter()
                    .map(|(_, answer)| ::easeml_runtime::Classified::from_inference(answer, ::core::option::Option::Some))
                    .collect()
            }
        },
        Answers::Values => quote! {
            /// Answers inputs with the best model so far: each answer an `Output`; an error says
            /// when no model is trained yet, or, embedded, when the process has no engine
            /// (easeml-runtime built without its `engine` feature).
            pub fn infer(
                &mut self,
                inputs: impl ::core::iter::IntoIterator<Item = Input>,
            ) -> ::easeml_runtime::Result<::std::vec::Vec<Output>> {
                let report = self.inner.infer(inputs)?;
                report
                    .answers
                    .into_iter()
                    .map(|(_, answer)| self.inner.typed_output(answer))
                    .collect()
            }
        },
    };
    quote! {
        /// The app's manifest (`easeml.json`), from which the runtime registers it.
        pub const MANIFEST: &str = #manifest;

        /// The server URL given to `easemlc --server`, if any (`EASEML_SERVER` overrides it).
        pub const SERVER: ::core::option::Option<&str> = #server;

        /// A typed handle on the app's examples and runs.
        pub struct Client {
            inner: ::easeml_runtime::Client,
        }

        impl Client {
            /// Opens the app where the environment says: `EASEML_SERVER`, else the local store in
            /// `EASEML_HOME` (default: the platform data dir).
            pub fn open_default() -> ::easeml_runtime::Result<Client> {
                let server = ::std::env::var("EASEML_SERVER")
                    .ok()
                    .or(SERVER.map(::std::borrow::ToOwned::to_owned));
                let connection =
                    ::easeml_runtime::Connection::from_settings(server.as_deref(), ::core::option::Option::None)?;
                Client::open(&connection)
            }

            /// Opens the app through a connection (with easeml-runtime's `engine` feature, an embedded
            /// client then answers `infer` with the engine's models).
            pub fn open(connection: &::easeml_runtime::Connection) -> ::easeml_runtime::Result<Client> {
                ::easeml_runtime::__private::install_engine();
                let spec = ::easeml_runtime::AppSpec::from_manifest_json(MANIFEST)?;
                ::core::result::Result::Ok(Client {
                    inner: ::easeml_runtime::Client::open(connection, spec)?,
                })
            }

            /// Stores labelled examples: all of them, or none when one is bad.
            pub fn feed(
                &mut self,
                examples: impl ::core::iter::IntoIterator<Item = (Input, Output)>,
            ) -> ::easeml_runtime::Result<::easeml_runtime::FeedReport> {
                self.inner.feed(examples)
            }

            #feed_labelled

            /// One page of the stored examples.
            pub fn examples(
                &self,
                page: ::easeml_runtime::PageRequest,
            ) -> ::easeml_runtime::Result<::easeml_runtime::Page<::easeml_runtime::ExampleRecord>> {
                self.inner.examples(page)
            }

            /// Turns an example on or off for training; returns the app's new data version.
            pub fn set_enabled(
                &mut self,
                id: ::easeml_runtime::ExampleId,
                enabled: bool,
            ) -> ::easeml_runtime::Result<u64> {
                self.inner.set_enabled(id, enabled)
            }

            #infer

            /// The report of every training run, the best marked.
            pub fn status(&self) -> ::easeml_runtime::Result<::easeml_runtime::Status> {
                self.inner.status()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Registry, compile};

    fn items(source: &str, manifest: ManifestSource<'_>, server: Option<&str>) -> String {
        let compiled = compile(source, "app", &Registry::builtin()).unwrap();
        let file: syn::File = syn::parse2(client_items(&compiled, manifest, server)).unwrap();
        prettyplease::unparse(&file)
    }

    #[test]
    fn feed_labelled_exists_only_with_declared_labels() {
        let labelled = items(
            "Input = [3]\nOutput = [2]\nlabels = [a, b]",
            ManifestSource::Literal("{}"),
            None,
        );
        assert!(labelled.contains("pub fn feed_labelled("), "{labelled}");
        let unlabelled = items(
            "Input = [3]\nOutput = [2]",
            ManifestSource::Literal("{}"),
            None,
        );
        assert!(!unlabelled.contains("feed_labelled"), "{unlabelled}");
        assert!(unlabelled.contains("pub fn infer("), "{unlabelled}");
    }

    #[test]
    fn the_manifest_is_included_or_inline_and_the_server_baked_in() {
        let squeezed = |text: String| text.split_whitespace().collect::<String>();
        let included = items(
            "Input = [3]\nOutput = [2]",
            ManifestSource::IncludeStr("../easeml.json"),
            Some("http://h:9000"),
        );
        let included = squeezed(included);
        assert!(
            included.contains(r#"pubconstMANIFEST:&str=::core::include_str!("../easeml.json");"#),
            "{included}"
        );
        assert!(
            included.contains(r#"=::core::option::Option::Some("http://h:9000""#),
            "{included}"
        );
        let inline = items(
            "Input = [3]\nOutput = [2]",
            ManifestSource::Literal("{\"app\":\"x\"}"),
            None,
        );
        let inline = squeezed(inline);
        assert!(
            inline.contains(r#"pubconstMANIFEST:&str="{\"app\":\"x\"}";"#),
            "{inline}"
        );
        assert!(
            inline.contains("SERVER:::core::option::Option<&str>=::core::option::Option::None;"),
            "{inline}"
        );
    }

    #[test]
    fn generated_code_names_only_the_runtime_public_api_core_and_std() {
        let text = items(
            "Input = [3]\nOutput = [2]\nlabels = [a, b]",
            ManifestSource::Literal("{}"),
            None,
        );
        let mut roots = std::collections::BTreeSet::new();
        let mut runtime_names = std::collections::BTreeSet::new();
        let bytes = text.as_bytes();
        for (index, _) in text.match_indices("::") {
            let leading = index == 0
                || !(bytes[index - 1].is_ascii_alphanumeric()
                    || matches!(bytes[index - 1], b'_' | b'>' | b':'));
            if !leading {
                continue;
            }
            let mut segments = text[index + 2..].split("::").map(|segment| {
                segment
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
            });
            let root = segments.next().unwrap_or("");
            roots.insert(root.to_owned());
            if root == "easeml_runtime" {
                runtime_names.insert(segments.next().unwrap_or("").to_owned());
            }
        }
        assert_eq!(
            roots.into_iter().collect::<Vec<_>>(),
            ["core", "easeml_runtime", "std"]
        );
        assert_eq!(
            runtime_names.into_iter().collect::<Vec<_>>(),
            [
                "AppSpec",
                "Classified",
                "Client",
                "Connection",
                "ExampleId",
                "ExampleRecord",
                "FeedReport",
                "Page",
                "PageRequest",
                "Result",
                "Status",
                "__private"
            ]
        );
    }
}
