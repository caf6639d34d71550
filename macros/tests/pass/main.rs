//! The macro's pass cases: every template row compiles through `#[easeml_schema]` in both forms
//! (inline types and `file = "..."`), and its typed `Client` runs against an embedded store
//! (`round_trip.rs`). Ordinary tests, built with the workspace and its dependencies; the compile
//! errors are trybuild's (`compiletest.rs`), which then only type-checks (`cargo check`), instead of
//! building every dependency a second time under its own flags to run these.

#[macro_use]
mod round_trip;

mod file_form;
mod general;
mod image_classification;
mod image_recovery;
mod one_channel_image;
mod tabular;
mod timeseries_classification;
mod timeseries_translation;
mod tree_classification;

/// Every example program is compiled by the file form.
#[test]
fn the_file_form_names_every_example() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let file_form = include_str!("file_form.rs");
    let mut named = 0;
    for entry in std::fs::read_dir(repository.join("examples"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".eml") {
            assert!(
                file_form.contains(&format!("(file = \"../examples/{name}\")")),
                "file_form.rs does not compile examples/{name}"
            );
            named += 1;
        }
    }
    assert!(named >= 10, "only {named} example programs found");
}
