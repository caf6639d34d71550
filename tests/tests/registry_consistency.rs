//! "The registry is data" kept true: every template of the built-in registry (`templates/
//! registry.toml`) names a workload the engine knows (`easeml_schema::Workload`), and every
//! candidate id the compiler generates for it parses in the trainer and fits the trainer's task
//! for that template's data, the task derived exactly as the engine derives it when it trains.
//!
//! The runtime's own copies of those rules (it links neither the compiler nor the trainer) are
//! checked here too: `Workload::schema_problem` accepts a program exactly when a template of that
//! workload matches it, and `easeml_schema::models` accepts a candidate for a workload exactly
//! when the trainer's `check_fits` accepts it for that workload's task.
//!
//! Data-driven: the programs are every valid fixture and example; each template must be chosen by
//! at least one of them, so a template added to the registry without a program that reaches it
//! fails here.

use std::collections::BTreeMap;

use easeml_compiler::{Compiled, Registry};
use easeml_engine::AppModel;
use easeml_engine::dataset::{StoredTarget, examples_of};
use easeml_object::Object;
use easeml_schema::{DataType, Workload};
use easeml_tests::{Expectation, Fixture, examples, fixtures_dir};
use easeml_trainer::{ALL_MODELS, Candidate, Task};

/// An object of `data_type` with every value 0.5 and no children (one record, a one-node tree).
fn object_of(data_type: &DataType) -> Object {
    Object {
        tensors: data_type
            .tensors()
            .map(|tensor| vec![0.5; tensor.element_count() as usize])
            .collect(),
        children: data_type.recursive_names().map(|_| None).collect(),
    }
}

/// The valid programs: every `ok` fixture (with its own registry) and every example.
fn programs() -> Vec<(String, Compiled)> {
    let builtin = Registry::builtin();
    let mut programs = Vec::new();
    for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "eml") {
            continue;
        }
        let fixture = Fixture::read(&path);
        // Valid programs of the built-in registry (the e013 fixtures use a registry of their own).
        if !matches!(fixture.expectation, Expectation::Valid { .. })
            || fixture.name.starts_with("e013")
        {
            continue;
        }
        programs.push((fixture.name.clone(), fixture.compile().unwrap()));
    }
    for (stem, source) in examples() {
        let compiled = easeml_compiler::compile(&source, &stem, &builtin)
            .unwrap_or_else(|diagnostics| panic!("{stem}: {diagnostics:?}"));
        programs.push((stem, compiled));
    }
    programs
}

#[test]
fn every_template_has_a_known_workload_and_candidates_that_fit_its_task() {
    let registry = Registry::builtin();
    let mut reached: BTreeMap<String, usize> = BTreeMap::new();
    for (name, compiled) in programs() {
        let template = compiled.template();
        *reached.entry(template.id.clone()).or_default() += 1;
        let workload = Workload::from_name(&template.workload).unwrap_or_else(|| {
            panic!(
                "{name}: template `{}` names workload `{}`, which the engine does not know",
                template.id, template.workload
            )
        });
        let parsed: Vec<Candidate> = compiled
            .candidates
            .iter()
            .map(|candidate| {
                Candidate::parse(&candidate.id).unwrap_or_else(|error| {
                    panic!(
                        "{name}: candidate `{}` of template `{}` does not parse in the trainer: {error}",
                        candidate.id, template.id
                    )
                })
            })
            .collect();
        // Programs with huge tensors (the fixtures at the 2^31 - 1 limit) are checked up to here:
        // four examples of them would take gigabytes.
        let elements = |data_type: &DataType| -> u64 {
            data_type
                .tensors()
                .map(|tensor| tensor.element_count())
                .sum()
        };
        if elements(&compiled.schema.input) + elements(&compiled.schema.output) > 1 << 20 {
            continue;
        }
        let manifest = easeml_compiler::codegen::manifest(&compiled).to_json();
        let app = AppModel::from_manifest(&compiled.schema.app, &manifest)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(app.workload, workload, "{name}");
        // Four examples, two per class for classification, as the engine would hand them over.
        let inputs: Vec<Object> = (0..4).map(|_| object_of(&app.schema.input)).collect();
        let targets: Vec<StoredTarget> = (0..4)
            .map(|index| match app.n_classes() {
                Some(_) => StoredTarget::Class(index % 2),
                None => StoredTarget::Object(object_of(&app.schema.output)),
            })
            .collect();
        let examples = examples_of(&app, (0..4).collect(), &inputs, &targets)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let task = Task::of(&examples).unwrap_or_else(|error| panic!("{name}: {error}"));
        // The runtime's model catalogue agrees with the trainer on every model, plain and
        // normalized, for this workload's task.
        for (_, model) in ALL_MODELS {
            for id in [model.to_owned(), format!("{model}+norm_k2")] {
                let trainer = Candidate::parse(&id).unwrap().check_fits(&task).is_ok();
                let catalogue = easeml_schema::models::candidate_problem(workload, &id);
                assert_eq!(
                    trainer,
                    catalogue.is_none(),
                    "{name}: the trainer {} `{id}` for {}, the schema crate's catalogue says {catalogue:?}",
                    if trainer { "accepts" } else { "refuses" },
                    workload.name()
                );
            }
        }
        for (candidate, parsed) in compiled.candidates.iter().zip(&parsed) {
            parsed.check_fits(&task).unwrap_or_else(|error| {
                panic!(
                    "{name}: candidate `{}` of template `{}` does not fit its task: {error}",
                    candidate.id, template.id
                )
            });
        }
    }
    for template in &registry.templates {
        assert!(
            reached.contains_key(&template.id),
            "no valid fixture or example reaches template `{}` (row {}); add one",
            template.id,
            template.row
        );
    }
    for workload in Workload::ALL {
        assert!(
            registry
                .templates
                .iter()
                .any(|template| template.workload == workload.name()),
            "no template of the builtin registry has workload `{}`",
            workload.name()
        );
    }
}

#[test]
fn the_runtime_workload_rule_agrees_with_the_registry_patterns() {
    let registry = Registry::builtin();
    for (name, compiled) in programs() {
        for workload in Workload::ALL {
            let registry_says = registry.templates.iter().any(|template| {
                template.workload == workload.name() && template.matches(&compiled.schema)
            });
            let rule = workload.schema_problem(&compiled.schema);
            assert_eq!(
                registry_says,
                rule.is_none(),
                "{name} ({} -> {}): the registry {} it as {}, Workload::schema_problem says {rule:?}",
                compiled.schema.input,
                compiled.schema.output,
                if registry_says {
                    "matches"
                } else {
                    "does not match"
                },
                workload.name()
            );
        }
    }
}

#[test]
fn the_model_catalogue_is_the_trainers() {
    let trainer: Vec<&str> = ALL_MODELS.iter().map(|(_, id)| *id).collect();
    let catalogue: Vec<&str> = easeml_schema::models::MODELS
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(trainer, catalogue);
    // The catalogue's classic models are the trainer's.
    for (kind, id) in ALL_MODELS {
        assert_eq!(
            easeml_trainer::classic::is_classic(kind),
            easeml_schema::models::is_classic(id),
            "{id}"
        );
    }
}
