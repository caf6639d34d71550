//! Every program in `examples/` is valid, starts with a comment saying what real task it models, and
//! together they cover every template row and every surface form.

use std::collections::BTreeSet;

use easeml_compiler::{Registry, compile};
use easeml_tests::examples_dir;

#[test]
fn examples_are_valid_documented_and_cover_every_row_and_form() {
    let registry = Registry::builtin();
    let mut rows = BTreeSet::new();
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "eml") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        assert!(
            source.starts_with("# "),
            "{}: must start with a comment about its task",
            path.display()
        );
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let compiled = compile(&source, &stem, &registry)
            .unwrap_or_else(|diagnostics| panic!("{}: {diagnostics:#?}", path.display()));
        rows.insert(compiled.template().id.clone());
        sources.push(source);
    }
    let all_rows: BTreeSet<String> = registry
        .templates
        .iter()
        .map(|template| template.id.clone())
        .collect();
    assert_eq!(rows, all_rows, "some template has no example");
    for form in [
        "Input  =",
        "type Input",
        "{input:",
        "labels =",
        "constraint ",
        "app ",
    ] {
        assert!(
            sources.iter().any(|source| source.contains(form)),
            "no example uses `{form}`"
        );
    }
}
