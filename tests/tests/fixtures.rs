//! Data-driven tests over `tests/fixtures/*.eml`: each fixture's `# expect:` line is checked, and the
//! full output (canonical type + explain JSON, or rendered diagnostics + JSON) is an insta snapshot.

use easeml_compiler::Code;
use easeml_tests::{Expectation, Fixture, fixtures_dir};

#[test]
fn every_fixture_meets_its_expectation_and_snapshot() {
    insta::glob!("../fixtures", "*.eml", |path| {
        let fixture = Fixture::read(path);
        match (&fixture.expectation, fixture.compile()) {
            (Expectation::Valid { workload }, Ok(compiled)) => {
                assert_eq!(
                    compiled.workload(),
                    workload,
                    "{}: wrong workload",
                    fixture.name
                );
            }
            (Expectation::Valid { .. }, Err(diagnostics)) => {
                panic!(
                    "{}: expected a valid program, got {diagnostics:#?}",
                    fixture.name
                )
            }
            (Expectation::Invalid { codes }, Ok(compiled)) => panic!(
                "{}: expected {codes:?}, but it compiled to {}",
                fixture.name,
                compiled.schema.system_type()
            ),
            (Expectation::Invalid { codes }, Err(diagnostics)) => {
                let mut found: Vec<String> = diagnostics
                    .iter()
                    .map(|diagnostic| diagnostic.code.to_string())
                    .collect();
                found.sort();
                found.dedup();
                assert_eq!(
                    &found, codes,
                    "{}: wrong error codes: {diagnostics:#?}",
                    fixture.name
                );
            }
        }
        insta::assert_snapshot!(fixture.snapshot_text());
    });
}

#[test]
fn the_fixture_set_covers_every_code_form_and_template_row() {
    let mut fixtures = Vec::new();
    for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "eml") {
            fixtures.push(Fixture::read(&path));
        }
    }
    assert!(fixtures.len() >= 60, "only {} fixtures", fixtures.len());
    let all_codes = [
        Code::E001,
        Code::E002,
        Code::E003,
        Code::E004,
        Code::E005,
        Code::E006,
        Code::E007,
        Code::E008,
        Code::E009,
        Code::E010,
        Code::E011,
        Code::E012,
        Code::E013,
        Code::E014,
        Code::E015,
    ];
    for code in all_codes {
        assert!(
            fixtures.iter().any(|fixture| matches!(&fixture.expectation,
                Expectation::Invalid { codes } if codes.contains(&code.to_string()))),
            "no fixture expects {code}"
        );
    }
    for workload in [
        "image_classification",
        "image_recovery",
        "timeseries_classification",
        "timeseries_translation",
        "tree_classification",
        "tabular_classification",
        "tabular_regression",
        "general_classification",
        "general_autoencoder",
    ] {
        assert!(
            fixtures.iter().any(|fixture| matches!(&fixture.expectation,
                Expectation::Valid { workload: found } if found == workload)),
            "no fixture of workload {workload}"
        );
    }
    for form in ["Input =", "type Input", "{input:", "\r\n", "#"] {
        assert!(
            fixtures.iter().any(|fixture| fixture.source.contains(form)),
            "no fixture uses `{form}`"
        );
    }
}
