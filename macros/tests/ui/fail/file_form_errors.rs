// The file form reports every code from its .eml file (tests/fixtures/, copied into the trybuild
// project by compiletest.rs) on the path literal, with the file's line and column. E013 cannot
// arise (the built-in registry accepts every program).
use easeml_macros::easeml_schema;

#[easeml_schema(file = "fixtures/e001_missing_end.eml")]
mod e001_missing_end {}

#[easeml_schema(file = "fixtures/e002_no_output.eml")]
mod e002_no_output {}

#[easeml_schema(file = "fixtures/e003_input_twice.eml")]
mod e003_input_twice {}

#[easeml_schema(file = "fixtures/e004_duplicate_field.eml")]
mod e004_duplicate_field {}

#[easeml_schema(file = "fixtures/e005_hyphen.eml")]
mod e005_hyphen {}

#[easeml_schema(file = "fixtures/e006_zero_dimension.eml")]
mod e006_zero_dimension {}

#[easeml_schema(file = "fixtures/e007_product_too_large.eml")]
mod e007_product_too_large {}

#[easeml_schema(file = "fixtures/e008_input_points_at_output.eml")]
mod e008_input_points_at_output {}

#[easeml_schema(file = "fixtures/e009_only_recursive.eml")]
mod e009_only_recursive {}

#[easeml_schema(file = "fixtures/e010_label_count.eml")]
mod e010_label_count {}

#[easeml_schema(file = "fixtures/e011_duplicate_label.eml")]
mod e011_duplicate_label {}

#[easeml_schema(file = "fixtures/e012_unknown_metric.eml")]
mod e012_unknown_metric {}

#[easeml_schema(file = "fixtures/e014_app_twice.eml")]
mod e014_app_twice {}

#[easeml_schema(file = "fixtures/multi_many_errors.eml")]
mod multi_many_errors {}

#[easeml_schema(file = "fixtures/e015_too_many_fields.eml")]
mod e015_too_many_fields {}

fn main() {}
