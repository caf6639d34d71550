//! trybuild: every template row compiles through `#[easeml_schema]`, and every error code that can
//! arise in either form is a compile error on the right tokens (`.stderr` snapshots; refresh with
//! `TRYBUILD=overwrite cargo test -p easeml-macros --test compiletest`).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
