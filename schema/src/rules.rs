//! Every validation rule of a schema, in one place.
//!
//! The compiler's checks (`easeml_compiler::check`, E005-E014) call these predicates and turn a
//! broken rule into a diagnostic with a span; the runtime calls [`validate`] on every schema it reads
//! from outside (a manifest file, an HTTP registration), since such a schema did not necessarily
//! come from `easemlc`. A rule changed here changes for both (a test in this crate and one in the
//! compiler keep them in step).

use std::collections::HashSet;

use thiserror::Error;

use crate::types::{DataType, Schema};

/// The largest number of elements a tensor may have (E007): 2^31 - 1.
pub const MAX_TENSOR_ELEMENTS: u64 = (1 << 31) - 1;

/// The longest app name, in bytes (E014). App names name files (token files, the generated crate's
/// binaries) and database rows, so they are kept short.
pub const MAX_APP_NAME_LEN: usize = 64;

/// `[a-z0-9_]+`: a field name (E005).
pub fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `[a-z][a-z0-9_]*` of at most [`MAX_APP_NAME_LEN`] bytes: an app name (E014).
pub fn is_app_name(name: &str) -> bool {
    app_name_problem(name).is_none()
}

/// What is wrong with an app name, in words, or `None` when it is valid.
pub fn app_name_problem(name: &str) -> Option<String> {
    if !(name.starts_with(|c: char| c.is_ascii_lowercase()) && is_field_name(name)) {
        return Some("app names are `[a-z][a-z0-9_]*`".to_owned());
    }
    if name.len() > MAX_APP_NAME_LEN {
        return Some(format!(
            "app names are at most {MAX_APP_NAME_LEN} characters; this one has {}",
            name.len()
        ));
    }
    None
}

/// Makes a valid app name from a file stem: `My-App` becomes `my_app`, `2019 survey` becomes
/// `app_2019_survey`, an empty stem becomes `app`, and a name longer than [`MAX_APP_NAME_LEN`] is
/// cut to that length.
pub fn app_name_from_stem(stem: &str) -> String {
    let mut name: String = stem
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        return "app".to_owned();
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "app_");
    }
    // Only ASCII is left, so any byte index is a character boundary.
    name.truncate(MAX_APP_NAME_LEN);
    name
}

/// The number of elements of a shape when it is one (at least one dimension, every dimension at
/// least 1, at most [`MAX_TENSOR_ELEMENTS`] elements); `None` otherwise (E006, E007).
pub fn shape_elements(dims: &[u64]) -> Option<u64> {
    if dims.is_empty() {
        return None;
    }
    let count = dims.iter().try_fold(1u64, |count, &dim| {
        (dim >= 1).then(|| count.checked_mul(dim)).flatten()
    })?;
    (count <= MAX_TENSOR_ELEMENTS).then_some(count)
}

/// What is wrong with declared labels for an output, or `None` when they fit (E010, E011): exactly
/// D distinct, non-empty names for an output that is one `[D]` tensor.
pub fn labels_problem(labels: &[String], output: &DataType) -> Option<String> {
    let distinct: HashSet<&String> = labels.iter().collect();
    if labels.iter().any(String::is_empty) {
        return Some("a label cannot be empty".to_owned());
    }
    if distinct.len() != labels.len() {
        return Some("declared labels must be distinct".to_owned());
    }
    match output.single_vector() {
        Some(dimension) if dimension == labels.len() as u64 => None,
        Some(dimension) => Some(format!(
            "{} labels are declared for an output [{dimension}]",
            labels.len()
        )),
        None => Some("labels need an output that is one [D] tensor".to_owned()),
    }
}

/// A schema that breaks one of the rules above.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// Checks every rule of a schema read from outside the compiler: a valid app name, at least one
/// tensor field per side, non-empty unique field names, shapes within the limits, and declared labels
/// that fit a `[D]` output.
pub fn validate(schema: &Schema) -> Result<(), SchemaError> {
    if let Some(problem) = app_name_problem(&schema.app) {
        return Err(SchemaError(format!(
            "app name {:?} is not valid: {problem}",
            schema.app
        )));
    }
    for (side, data_type) in [("input", &schema.input), ("output", &schema.output)] {
        if data_type.tensors().next().is_none() {
            return Err(SchemaError(format!("the {side} has no tensor field")));
        }
        let mut names = HashSet::new();
        for field in &data_type.fields {
            if !is_field_name(&field.name) || !names.insert(field.name.as_str()) {
                return Err(SchemaError(format!(
                    "the {side} has an invalid or repeated field name {:?} (field names are `[a-z0-9_]+`, each once)",
                    field.name
                )));
            }
        }
        for tensor in data_type.tensors() {
            if shape_elements(&tensor.dims).is_none() {
                return Err(SchemaError(format!(
                    "the {side} tensor {:?} is not a shape: dimensions of at least 1, at most 2^31 - 1 elements",
                    tensor.dims
                )));
            }
        }
    }
    if let Some(labels) = &schema.labels
        && let Some(problem) = labels_problem(labels, &schema.output)
    {
        return Err(SchemaError(format!("`labels`: {problem}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Field, FieldKind, Tensor};

    fn vector(dims: &[u64]) -> DataType {
        DataType {
            fields: vec![Field {
                name: "field0".into(),
                kind: FieldKind::Tensor(Tensor {
                    dims: dims.to_vec(),
                }),
            }],
        }
    }

    fn schema(app: &str) -> Schema {
        Schema {
            app: app.into(),
            input: vector(&[3]),
            output: vector(&[2]),
            labels: None,
            constraints: vec![],
        }
    }

    #[test]
    fn app_names_have_a_length_limit_and_stems_are_cut_to_it() {
        let longest = format!("a{}", "b".repeat(MAX_APP_NAME_LEN - 1));
        assert!(is_app_name(&longest));
        let too_long = format!("{longest}c");
        assert!(!is_app_name(&too_long));
        assert!(
            app_name_problem(&too_long)
                .unwrap()
                .contains("at most 64 characters; this one has 65")
        );
        assert!(validate(&schema(&longest)).is_ok());
        let error = validate(&schema(&too_long)).unwrap_err();
        assert!(error.0.contains("at most 64"), "{error}");
        assert_eq!(app_name_from_stem(&too_long), longest);
        assert_eq!(app_name_from_stem(&"9".repeat(80)).len(), MAX_APP_NAME_LEN);
        assert!(is_app_name(&app_name_from_stem(&"9".repeat(80))));
    }

    #[test]
    fn shapes_and_labels() {
        assert_eq!(shape_elements(&[2, 3]), Some(6));
        assert_eq!(shape_elements(&[]), None);
        assert_eq!(shape_elements(&[0]), None);
        assert_eq!(
            shape_elements(&[MAX_TENSOR_ELEMENTS]),
            Some(MAX_TENSOR_ELEMENTS)
        );
        assert_eq!(shape_elements(&[1 << 16, 1 << 16]), None);
        assert_eq!(shape_elements(&[u64::MAX, 2]), None);
        let two = vector(&[2]);
        assert_eq!(labels_problem(&["a".into(), "b".into()], &two), None);
        assert!(labels_problem(&["a".into(), "a".into()], &two).is_some());
        assert!(labels_problem(&["a".into(), "".into()], &two).is_some());
        assert!(labels_problem(&["a".into()], &two).is_some());
        assert!(labels_problem(&["a".into(), "b".into()], &vector(&[2, 2])).is_some());
    }

    #[test]
    fn validate_names_the_broken_rule() {
        let mut bad = schema("ok");
        bad.input.fields.push(bad.input.fields[0].clone());
        assert!(
            validate(&bad)
                .unwrap_err()
                .0
                .contains("repeated field name")
        );
        let mut bad = schema("ok");
        bad.output = vector(&[0]);
        assert!(validate(&bad).unwrap_err().0.contains("not a shape"));
        let mut bad = schema("ok");
        bad.labels = Some(vec!["x".into()]);
        assert!(validate(&bad).unwrap_err().0.contains("`labels`"));
        assert!(validate(&schema("Bad")).is_err());
    }
}
