//! `#[easeml_schema]` and `easemlc` agree: for every example program, the same schema written as a
//! Rust module lowers (through the macro's front end) to the same `Schema`, the same canonical type,
//! the same candidates, and exactly the same generated Rust items as the `.eml` file, and the
//! `file = "..."` form gives the same items as well.

use std::fmt::Write as _;

use easeml_compiler::codegen::rust_types;
use easeml_compiler::rust_front::lower_module;
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
