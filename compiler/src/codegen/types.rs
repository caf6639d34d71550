//! The Rust types of an app: `Input`, `Output` (named fields; tensors checked against their declared
//! shape on construction; recursive fields as `Option<Box<Self>>`) and, when labels are declared, a
//! `Label` enum. Built with quote and printed with prettyplease, so `easemlc` and the
//! `#[easeml_schema]` macro emit the very same items.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};

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

/// The Rust identifier of a schema field name (`[a-z0-9_]+`): as is when it is one, a raw identifier
/// for a keyword, and `field_` + the name where neither works (`3d`, `self`, `_`). The second value
/// says whether serde must rename it back.
fn field_ident(name: &str) -> (Ident, bool) {
    if syn::parse_str::<Ident>(name).is_ok() {
        return (Ident::new(name, Span::call_site()), false);
    }
    let cannot_be_raw = matches!(name, "self" | "super" | "crate" | "_")
        || name.starts_with(|c: char| c.is_ascii_digit());
    if cannot_be_raw {
        (format_ident!("field_{}", name), true)
    } else {
        (Ident::new_raw(name, Span::call_site()), false)
    }
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
    for field in &data_type.fields {
        let (ident, renamed) = field_ident(&field.name);
        let field_name = &field.name;
        let rename = renamed.then(|| quote!(#[serde(rename = #field_name)]));
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
                let constant = format_ident!(
                    "{}_SHAPE",
                    ident.to_string().trim_start_matches("r#").to_uppercase()
                );
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

fn label_items(labels: &[String]) -> TokenStream {
    let private = quote!(easeml);
    let variants: Vec<Ident> = label_variants(labels)
        .iter()
        .map(|variant| Ident::new(variant, Span::call_site()))
        .collect();
    let docs: Vec<String> = labels
        .iter()
        .map(|label| format!(" The class `{label}`."))
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
