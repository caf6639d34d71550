//! `#[easeml_schema]` and `easemlc` agree: for every example program, the same schema written as a
//! Rust module lowers (through the macro's front end) to the same `Schema`, the same canonical type,
//! the same candidates, and exactly the same generated Rust items as the `.eml` file, and the
//! `file = "..."` form gives the same items as well. The whole expansion of both forms is the crate
//! `easemlc` generates: the items of its `src/types.rs` and `src/lib.rs` (types, `MANIFEST`,
//! `SERVER`, the typed `Client`), with the manifest inline instead of `include_str!("../easeml.json")`.

use std::fmt::Write as _;

use easeml_compiler::codegen::{CrateOptions, crate_files, rust_types};
use easeml_compiler::rust_front::{expand, lower_module};
use easeml_compiler::schema::{DataType, FieldKind, Schema};
use easeml_compiler::{Registry, compile};
use easeml_tests::examples;

/// The schema as the macro's inline form: named fields `name: Tensor<...>` and `Option<Box<...>>`.
fn as_macro_input(schema: &Schema) -> (String, String) {
    let mut attr = format!("app = {}", schema.app);
    if let Some(labels) = &schema.labels {
        let quoted: Vec<String> = labels.iter().map(|label| format!("{label:?}")).collect();
        let _ = write!(attr, ", labels = [{}]", quoted.join(", "));
    }
    for constraint in &schema.constraints {
        let _ = write!(
            attr,
            ", constraint({} <= {})",
            constraint.metric.name(),
            constraint.limit
        );
    }
    let item = format!(
        "mod {} {{ {} {} }}",
        schema.app,
        as_struct("Input", &schema.input),
        as_struct("Output", &schema.output)
    );
    (attr, item)
}

fn as_struct(name: &str, data_type: &DataType) -> String {
    let fields: Vec<String> = data_type
        .fields
        .iter()
        .map(|field| match &field.kind {
            FieldKind::Tensor(tensor) => {
                let dims: Vec<String> = tensor.dims.iter().map(u64::to_string).collect();
                format!("pub {}: Tensor<{}>", field.name, dims.join(", "))
            }
            FieldKind::Recursive => format!("pub {}: Option<Box<{name}>>", field.name),
        })
        .collect();
    format!("pub struct {name} {{ {} }}", fields.join(", "))
}

#[test]
fn the_macro_and_easemlc_generate_identical_items_for_every_example() {
    let registry = Registry::builtin();
    for (stem, source) in examples() {
        let from_file = compile(&source, &stem, &registry).unwrap();
        let (attr, item) = as_macro_input(&from_file.schema);
        let module: syn::ItemMod =
            syn::parse_str(&item).unwrap_or_else(|error| panic!("{stem}: {item}: {error}"));
        let lowered = lower_module(attr.parse().unwrap(), &module)
            .unwrap_or_else(|error| panic!("{stem}: {error}"));
        assert_eq!(lowered.compiled.schema, from_file.schema, "{stem}");
        assert_eq!(
            lowered.compiled.schema.system_type(),
            from_file.schema.system_type(),
            "{stem}"
        );
        assert_eq!(lowered.compiled.candidates, from_file.candidates, "{stem}");
        assert_eq!(
            rust_types(&lowered.compiled.schema).to_string(),
            rust_types(&from_file.schema).to_string(),
            "{stem}"
        );
    }
}

#[test]
fn the_file_form_generates_the_same_items() {
    // `file = ...` is relative to CARGO_MANIFEST_DIR, which is this crate's folder.
    let registry = Registry::builtin();
    for (stem, source) in examples() {
        let from_file = compile(&source, &stem, &registry).unwrap();
        let attr = format!("file = \"../examples/{stem}.eml\"");
        let module: syn::ItemMod = syn::parse_str(&format!("mod {stem} {{}}")).unwrap();
        let lowered = lower_module(attr.parse().unwrap(), &module)
            .unwrap_or_else(|error| panic!("{stem}: {error}"));
        assert_eq!(lowered.compiled.schema, from_file.schema, "{stem}");
        let tracked = lowered.tracked_file.expect("the file form tracks its file");
        assert!(
            tracked.ends_with(format!("examples/{stem}.eml")) && tracked.exists(),
            "{}",
            tracked.display()
        );
    }
}

#[test]
fn file_form_diagnostics_carry_the_files_line_and_column() {
    let module: syn::ItemMod = syn::parse_str("mod broken {}").unwrap();
    let attr = "file = \"fixtures/e004_duplicate_field.eml\""
        .parse()
        .unwrap();
    let error = lower_module(attr, &module)
        .err()
        .expect("the fixture is invalid")
        .to_string();
    assert!(
        error
            .starts_with("fixtures/e004_duplicate_field.eml:4:3: E004: field `x` is defined twice"),
        "{error}"
    );
    let nonempty: syn::ItemMod =
        syn::parse_str("mod broken { pub struct Input(Tensor<3>); }").unwrap();
    let attr = "file = \"../examples/breast_cancer.eml\"".parse().unwrap();
    let error = lower_module(attr, &nonempty).err().unwrap().to_string();
    assert!(error.contains("the module must be empty"), "{error}");
}

/// What the `MANIFEST` constant was set to.
#[derive(Debug, PartialEq)]
enum ManifestValue {
    /// A string literal, with its value.
    Literal(String),
    /// A macro call: `path!(tokens)`.
    Macro(String),
    /// Anything else.
    Other,
}

/// The items of a module or file, printed one by one (prettyplease), with the `MANIFEST` constant's
/// value replaced by a placeholder and returned, and the file form's tracking item
/// (`const _: &str = include_str!(...)`) left out.
fn printed_items(items: Vec<syn::Item>) -> (Vec<String>, Option<ManifestValue>) {
    let mut manifest = None;
    let mut printed = Vec::new();
    for mut item in items {
        if let syn::Item::Const(constant) = &mut item {
            if constant.ident == "_" {
                continue;
            }
            if constant.ident == "MANIFEST" {
                manifest = Some(match &*constant.expr {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(literal),
                        ..
                    }) => ManifestValue::Literal(literal.value()),
                    syn::Expr::Macro(call) => {
                        let path: Vec<String> = call
                            .mac
                            .path
                            .segments
                            .iter()
                            .map(|segment| segment.ident.to_string())
                            .collect();
                        let leading = if call.mac.path.leading_colon.is_some() {
                            "::"
                        } else {
                            ""
                        };
                        ManifestValue::Macro(format!(
                            "{leading}{}!({})",
                            path.join("::"),
                            call.mac.tokens
                        ))
                    }
                    _ => ManifestValue::Other,
                });
                *constant.expr = syn::parse_quote!("<easeml.json>");
            }
        }
        let mut file: syn::File = syn::parse_quote!();
        file.items.push(item);
        printed.push(prettyplease::unparse(&file));
    }
    (printed, manifest)
}

/// The expansion of `#[easeml_schema(attr)] item`, as the module's items.
fn expansion(stem: &str, attr: &str, item: &str) -> Vec<syn::Item> {
    let tokens = expand(attr.parse().unwrap(), item.parse().unwrap());
    let module: syn::ItemMod =
        syn::parse2(tokens.clone()).unwrap_or_else(|error| panic!("{stem}: {error}: {tokens}"));
    module.content.map(|(_, items)| items).unwrap_or_default()
}

#[test]
fn both_macro_forms_expand_to_the_generated_crates_types_and_client_for_every_example() {
    let registry = Registry::builtin();
    for (stem, source) in examples() {
        // The generator's own text, before `easemlc build` runs rustfmt over it (rustfmt only lays
        // out, though it may add braces, e.g. around a long closure body).
        let options = CrateOptions {
            runtime: easeml_compiler::codegen::RuntimeSource::Path(
                "../../../runtime/core".to_owned(),
            ),
            server: None,
            python: false,
        };
        let files = crate_files(&compile(&source, &stem, &registry).unwrap(), &options).unwrap();
        let parse = |path: &str| -> syn::File {
            syn::parse_file(&files[path]).unwrap_or_else(|error| panic!("{stem}/{path}: {error}"))
        };
        let lib_items = parse("src/lib.rs").items.into_iter().filter(|item| {
            // `mod types; pub use types::*;`: the crate's two files are the macro's one module.
            !matches!(item, syn::Item::Mod(_) | syn::Item::Use(_))
        });
        let crate_items: Vec<syn::Item> = parse("src/types.rs")
            .items
            .into_iter()
            .chain(lib_items)
            .collect();
        let (crate_printed, crate_manifest) = printed_items(crate_items);
        assert_eq!(
            crate_manifest,
            Some(ManifestValue::Macro(
                r#"::core::include_str!("../easeml.json")"#.to_owned()
            )),
            "{stem}"
        );
        assert!(
            crate_printed
                .iter()
                .any(|item| item.contains("pub struct Client")),
            "{stem}: {crate_printed:#?}"
        );

        let from_file = compile(&source, &stem, &registry).unwrap();
        let (attr, item) = as_macro_input(&from_file.schema);
        let inline = expansion(&stem, &attr, &item);
        let file_form = expansion(
            &stem,
            &format!("file = \"../examples/{stem}.eml\""),
            &format!("mod {stem} {{}}"),
        );
        for (form, items) in [("inline", inline), ("file", file_form)] {
            let (printed, manifest) = printed_items(items);
            assert_eq!(printed, crate_printed, "{stem}, {form} form");
            assert_eq!(
                manifest,
                Some(ManifestValue::Literal(files["easeml.json"].clone())),
                "{stem}, {form} form"
            );
        }
    }
}
