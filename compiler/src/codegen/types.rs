//! The Rust types of an app: `Input`, `Output` (named fields; tensors checked against their declared
//! shape on construction; recursive fields as `Option<Box<Self>>`) and, when labels are declared, a
//! `Label` enum. Built with quote and printed with prettyplease, so `easemlc` and the
//! `#[easeml_schema]` macro emit the very same items.

use std::collections::HashSet;

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

use easeml_schema::rules::{is_forbidden_label_char, is_rust_keyword};
use easeml_schema::{DataType, FieldKind, Schema};

use super::labels::label_variants;

/// The items of an app's types. Generated code reaches the runtime only through
/// `::easeml_runtime::__private` (imported as `easeml`).
pub fn rust_types(schema: &Schema) -> TokenStream {
    let app = &schema.app;
    let system_type = schema.system_type();
    let input = data_type_items(&schema.input, "Input", app);
    let output = data_type_items(&schema.output, "Output", app);
    let labels = schema
        .labels
        .as_deref()
        .map(label_items)
        .unwrap_or_default();
    quote! {
        use ::easeml_runtime::__private as easeml;

        /// The app's name.
        pub const APP: &str = #app;
        /// The app's canonical system data type.
        pub const SYSTEM_TYPE: &str = #system_type;
        #input
        #output
        #labels
    }
}

/// Formats items as a Rust source file (prettyplease), after a `//` header line.
pub fn format_items(header: &str, items: TokenStream) -> Result<String, syn::Error> {
    let file: syn::File = syn::parse2(items)?;
    Ok(format!("// {header}\n\n{}", prettyplease::unparse(&file)))
}

/// The Rust name of one schema field in the generated struct.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RustField {
    /// The field's name in the schema (and in JSON: serde renames back to it).
    pub field: String,
    /// The Rust identifier, as written in the generated code (`reading`, `r#type`, `field_self`).
    pub rust: String,
    /// Whether the identifier is not the field's name, so serde renames it (`self` becomes
    /// `field_self`); a raw identifier (`r#type`) is no rename.
    pub renamed: bool,
}

impl RustField {
    /// The identifier token.
    fn ident(&self) -> Ident {
        match self.rust.strip_prefix("r#") {
            Some(raw) => Ident::new_raw(raw, Span::call_site()),
            None => Ident::new(&self.rust, Span::call_site()),
        }
    }

    /// The identifier without `r#`, from which the `<NAME>_SHAPE` constant is made.
    fn bare(&self) -> &str {
        self.rust.trim_start_matches("r#")
    }
}

/// The Rust identifiers of a type's fields, in order and all distinct (the renaming is injective
/// within the type, so the `<NAME>_SHAPE` constants are distinct too). A field name (`[a-z0-9_]+`)
/// is kept when it is an identifier, becomes a raw identifier when it is a Rust keyword
/// ([`easeml_schema::rules::RUST_KEYWORDS`], edition 2024: `r#type`, `r#gen`), and becomes
/// `field_` + the name where neither works (`3d`, `self`, `super`, `crate`, `_`); when that name is
/// another field's, `field2_` + the name, `field3_` + the name, ... (a number between, not after:
/// `field2__` for `_` stays snake case, where `field___2` would warn).
pub fn rust_fields(data_type: &DataType) -> Vec<RustField> {
    let kept: Vec<Option<String>> = data_type
        .fields
        .iter()
        .map(|field| kept_identifier(&field.name))
        .collect();
    let mut taken: HashSet<String> = kept
        .iter()
        .flatten()
        .map(|rust| rust.trim_start_matches("r#").to_owned())
        .collect();
    data_type
        .fields
        .iter()
        .zip(kept)
        .map(|(field, kept)| match kept {
            Some(rust) => RustField {
                field: field.name.clone(),
                rust,
                renamed: false,
            },
            None => {
                let mut rust = format!("field_{}", field.name);
                let mut number = 2;
                while taken.contains(&rust) {
                    rust = format!("field{number}_{}", field.name);
                    number += 1;
                }
                taken.insert(rust.clone());
                RustField {
                    field: field.name.clone(),
                    rust,
                    renamed: true,
                }
            }
        })
        .collect()
}

/// The field name as an identifier (`r#` + a keyword), or `None` when it cannot be one: it starts
/// with a digit, is `_`, or is a keyword that cannot be raw (`self`, `super`, `crate`, `Self`).
fn kept_identifier(name: &str) -> Option<String> {
    let starts_well = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let characters_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !starts_well || !characters_ok || name == "_" {
        return None;
    }
    if !is_rust_keyword(name) {
        return Some(name.to_owned());
    }
    (!matches!(name, "self" | "super" | "crate" | "Self")).then(|| format!("r#{name}"))
}

/// Every field of the schema whose Rust identifier is not its name (`self` is `field_self`), as
/// (`Input` or `Output`, the field's Rust name): what `easemlc` tells the user it chose.
pub fn renamed_fields(schema: &Schema) -> Vec<(&'static str, RustField)> {
    [("Input", &schema.input), ("Output", &schema.output)]
        .into_iter()
        .flat_map(|(side, data_type)| {
            rust_fields(data_type)
                .into_iter()
                .filter(|field| field.renamed)
                .map(move |field| (side, field))
        })
        .collect()
}

fn data_type_items(data_type: &DataType, type_name: &str, app: &str) -> TokenStream {
    let private = quote!(easeml);
    let name = Ident::new(type_name, Span::call_site());
    let doc = format!(
        " The {} of `{app}`: `{data_type}`.",
        type_name.to_lowercase()
    );
    let mut fields = Vec::new();
    let mut constants = Vec::new();
    let mut parameters = Vec::new();
    let mut checks = Vec::new();
    let mut names = Vec::new();
    for (field, rust) in data_type.fields.iter().zip(rust_fields(data_type)) {
        let ident = rust.ident();
        let field_name = &field.name;
        let rename = rust.renamed.then(|| quote!(#[serde(rename = #field_name)]));
        match &field.kind {
            FieldKind::Tensor(tensor) => {
                let dims = &tensor.dims;
                let dim_literals = dims.iter().map(|dim| Literal::u64_unsuffixed(*dim));
                let shape = format!(
                    "Tensor[{}]",
                    dims.iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                );
                let field_doc = format!(" `{field_name}`: a tensor of shape {:?}.", dims);
                let constant = format_ident!("{}_SHAPE", rust.bare().to_uppercase());
                let constant_doc = format!(" The declared shape of `{field_name}` ({shape}).");
                fields.push(quote! {
                    #[doc = #field_doc]
                    #rename
                    pub #ident: #private::Tensor,
                });
                constants.push(quote! {
                    #[doc = #constant_doc]
                    pub const #constant: &[u64] = &[#(#dim_literals),*];
                });
                parameters.push(quote!(#ident: #private::Tensor));
                checks.push(quote!(#ident.check_shape(#field_name, Self::#constant)?;));
            }
            FieldKind::Recursive => {
                let field_doc = format!(" `{field_name}`: another `{type_name}`, or nothing.");
                fields.push(quote! {
                    #[doc = #field_doc]
                    #rename
                    #[serde(default)]
                    pub #ident: ::core::option::Option<::std::boxed::Box<#name>>,
                });
                parameters.push(quote!(#ident: ::core::option::Option<::std::boxed::Box<#name>>));
            }
        }
        names.push(ident);
    }
    quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, PartialEq, #private::serde::Serialize, #private::serde::Deserialize)]
        #[serde(crate = "easeml::serde", deny_unknown_fields)]
        pub struct #name {
            #(#fields)*
        }

        impl #name {
            #(#constants)*

            /// Builds a value, checking every tensor against its declared shape.
            #[allow(clippy::too_many_arguments)]
            pub fn new(#(#parameters),*) -> ::core::result::Result<Self, #private::ShapeError> {
                #(#checks)*
                ::core::result::Result::Ok(Self { #(#names),* })
            }
        }
    }
}

/// Text made safe for a doc comment: the characters no label may contain (a carriage return, bidi
/// controls, ...: `rustc` refuses them in doc comments) are written as `\u{...}` escapes. The rule
/// refuses such labels before code generation; this keeps the generated code compiling anyway.
fn doc_text(text: &str) -> String {
    let mut safe = String::with_capacity(text.len());
    for c in text.chars() {
        if is_forbidden_label_char(c) {
            safe.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
        } else {
            safe.push(c);
        }
    }
    safe
}

fn label_items(labels: &[String]) -> TokenStream {
    let private = quote!(easeml);
    let variants: Vec<Ident> = label_variants(labels)
        .iter()
        .map(|variant| Ident::new(variant, Span::call_site()))
        .collect();
    let docs: Vec<String> = labels
        .iter()
        .map(|label| format!(" The class `{}`.", doc_text(label)))
        .collect();
    let indices = (0..labels.len()).map(Literal::usize_unsuffixed);
    let count = Literal::usize_unsuffixed(labels.len());
    quote! {
        /// The output classes, in the order of the program's `labels`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Label {
            #(#[doc = #docs] #variants,)*
        }

        impl Label {
            /// Every label, in declaration order (the class index order).
            pub const ALL: [Label; #count] = [#(Label::#variants),*];

            /// The label's name as declared.
            pub fn name(self) -> &'static str {
                match self {
                    #(Label::#variants => #labels,)*
                }
            }

            /// The class index (the position in `labels`).
            pub fn index(self) -> usize {
                match self {
                    #(Label::#variants => #indices,)*
                }
            }

            /// The label with this name, if any.
            pub fn from_name(name: &str) -> ::core::option::Option<Label> {
                Label::ALL.into_iter().find(|label| label.name() == name)
            }

            /// The label of a class index, if any.
            pub fn from_index(index: usize) -> ::core::option::Option<Label> {
                Label::ALL.get(index).copied()
            }
        }

        impl ::core::fmt::Display for Label {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::core::str::FromStr for Label {
            type Err = #private::UnknownLabel;

            fn from_str(name: &str) -> ::core::result::Result<Label, Self::Err> {
                Label::from_name(name).ok_or_else(|| #private::UnknownLabel::new(name, &[#(#labels),*]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use easeml_schema::rules::RUST_KEYWORDS;
    use easeml_schema::{Field, Tensor};

    fn data_type(names: &[&str]) -> DataType {
        DataType {
            fields: names
                .iter()
                .map(|name| Field {
                    name: (*name).to_owned(),
                    kind: FieldKind::Tensor(Tensor { dims: vec![2] }),
                })
                .collect(),
        }
    }

    fn schema(input: &[&str], labels: Option<&[&str]>) -> Schema {
        Schema {
            app: "app".into(),
            input: data_type(input),
            output: data_type(&["out"]),
            labels: labels.map(|labels| labels.iter().map(|label| (*label).to_owned()).collect()),
            constraints: vec![],
        }
    }

    fn rust_names(names: &[&str]) -> Vec<String> {
        rust_fields(&data_type(names))
            .into_iter()
            .map(|field| field.rust)
            .collect()
    }

    /// The generated items, printed as `easemlc` prints them.
    fn printed(schema: &Schema) -> String {
        format_items("header", rust_types(schema)).unwrap()
    }

    #[test]
    fn edition_2024_keywords_become_raw_identifiers() {
        assert_eq!(
            rust_names(&[
                "gen", "try", "async", "dyn", "box", "yield", "type", "union", "raw"
            ]),
            [
                "r#gen", "r#try", "r#async", "r#dyn", "r#box", "r#yield", "r#type", "union", "raw"
            ]
        );
        let text = printed(&schema(&["gen", "type"], None));
        assert!(text.contains("pub r#gen: easeml::Tensor"), "{text}");
        assert!(text.contains("pub const GEN_SHAPE"), "{text}");
        assert!(!text.contains("serde(rename"), "{text}");
    }

    #[test]
    fn every_keyword_field_name_gets_a_usable_identifier() {
        let names: Vec<&str> = RUST_KEYWORDS
            .into_iter()
            .filter(|keyword| easeml_schema::rules::is_field_name(keyword))
            .collect();
        let fields = rust_fields(&data_type(&names));
        for field in &fields {
            let bare = field.rust.trim_start_matches("r#");
            assert!(
                field.rust.starts_with("r#") || field.rust.starts_with("field_"),
                "{field:?}"
            );
            assert_eq!(field.renamed, field.rust.starts_with("field_"), "{field:?}");
            assert!(bare == field.field || field.renamed, "{field:?}");
        }
        // The whole set prints as one valid file.
        printed(&schema(&names, None));
    }

    #[test]
    fn renaming_is_injective_within_a_type() {
        assert_eq!(
            rust_names(&["self", "field_self", "3d", "field_3d", "_", "field__"]),
            [
                "field2_self",
                "field_self",
                "field2_3d",
                "field_3d",
                "field2__",
                "field__"
            ]
        );
        assert_eq!(
            rust_names(&["field2_self", "self", "field_self"]),
            ["field2_self", "field3_self", "field_self"]
        );
        let text = printed(&schema(&["self", "field_self", "3d", "field_3d"], None));
        for expected in [
            "#[serde(rename = \"self\")]\n    pub field2_self:",
            "pub field_self: easeml::Tensor",
            "#[serde(rename = \"3d\")]\n    pub field2_3d:",
            "pub const FIELD_SELF_SHAPE",
            "pub const FIELD2_SELF_SHAPE",
            "pub const FIELD_3D_SHAPE",
            "pub const FIELD2_3D_SHAPE",
        ] {
            assert!(text.contains(expected), "{expected}\n{text}");
        }
        let renamed = renamed_fields(&schema(&["self", "field_self", "type"], None));
        assert_eq!(renamed.len(), 1);
        assert_eq!(renamed[0].0, "Input");
        assert_eq!(renamed[0].1.field, "self");
        assert_eq!(renamed[0].1.rust, "field2_self");
    }

    #[test]
    fn no_label_text_reaches_a_doc_comment_unescaped() {
        let labels = [
            "a\rb",
            "\u{202E}evil",
            "x\u{2066}y\u{2069}",
            "line\nbreak",
            "*/ \"# `tick`",
        ];
        let text = printed(&schema(&["x"], Some(&labels)));
        for forbidden in ['\r', '\u{202E}', '\u{2066}', '\u{2069}'] {
            assert!(!text.contains(forbidden), "{forbidden:?} in\n{text}");
        }
        assert!(text.contains("/// The class `a\\u{000d}b`."), "{text}");
        assert!(text.contains("/// The class `\\u{202e}evil`."), "{text}");
        assert!(
            text.contains("/// The class `line\\u{000a}break`."),
            "{text}"
        );
    }
}
