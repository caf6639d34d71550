//! Every validation rule of a schema, in one place.
//!
//! The compiler's checks (`easeml_compiler::check`, E005-E014) call these predicates and turn a
//! broken rule into a diagnostic with a span; the runtime calls [`validate`] on every schema it reads
//! from outside (a manifest file, an HTTP registration), since such a schema did not necessarily
//! come from `easemlc`. A rule changed here changes for both (a test in this crate and one in the
//! compiler keep them in step).

use std::collections::HashSet;

use thiserror::Error;

use crate::types::{Constraint, DataType, Schema};

/// The largest number of elements a tensor may have (E007): 2^31 - 1.
pub const MAX_TENSOR_ELEMENTS: u64 = (1 << 31) - 1;

/// The longest app name, in bytes (E014). App names name files (token files, the generated crate's
/// binaries) and database rows, so they are kept short.
pub const MAX_APP_NAME_LEN: usize = 64;

/// The most fields (tensor and recursive) one type may have (E015). Real programs have a few; the
/// limit bounds the work of a compile (every field is named, checked and matched) and of every
/// stage after it, whoever sends the program.
pub const MAX_FIELDS: usize = 1024;

/// Why a type of `count` fields is too large (E015), or `None` when it is within [`MAX_FIELDS`].
pub fn fields_problem(count: usize) -> Option<String> {
    (count > MAX_FIELDS)
        .then(|| format!("{count} fields, and a type may have at most {MAX_FIELDS}"))
}

/// `[a-z0-9_]+`: a field name (E005).
pub fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Every Rust keyword of edition 2024: strict (`fn`, `self`, `async`, `dyn`, ...), reserved for
/// future use (`abstract`, `become`, `box`, `do`, `final`, `macro`, `override`, `priv`, `typeof`,
/// `unsized`, `virtual`, `yield`, `try`, `gen`). Weak keywords (`union`, `macro_rules`, `raw`,
/// `safe`, `default`, `auto`) are identifiers wherever generated code uses names, so they are not
/// listed. An explicit list, not a parser's view, so that a name is never taken for an identifier
/// by one tool and refused by the compiler of the generated crate.
#[rustfmt::skip]
pub const RUST_KEYWORDS: [&str; 52] = [
    // Strict keywords (every edition).
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while",
    // Strict since edition 2018.
    "async", "await", "dyn",
    // Reserved (every edition; `try` since 2018; `gen` since 2024).
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized",
    "virtual", "yield", "try", "gen",
];

/// Whether `name` is a Rust keyword of edition 2024 ([`RUST_KEYWORDS`]).
pub fn is_rust_keyword(name: &str) -> bool {
    RUST_KEYWORDS.contains(&name)
}

/// Names an app cannot take although they are `[a-z][a-z0-9_]*`: the app name is the generated
/// crate's name, so its binaries write `<app>::MANIFEST`; a Rust keyword is no crate name there,
/// the built-in crates (`std`, `core`, `alloc`, `proc_macro`, `test`) would be shadowed, and the
/// generated crate's own dependencies (`easeml_runtime`, `easeml_app_engine`, `easeml_torch_link`)
/// would be ambiguous.
pub const RESERVED_APP_NAMES: [&str; 8] = [
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "easeml_runtime",
    "easeml_app_engine",
    "easeml_torch_link",
];

/// `[a-z][a-z0-9_]*` of at most [`MAX_APP_NAME_LEN`] bytes, neither a Rust keyword nor one of
/// [`RESERVED_APP_NAMES`]: an app name (E014).
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
    if is_rust_keyword(name) {
        return Some(format!(
            "`{name}` is a Rust keyword, and the app name names the generated Rust crate"
        ));
    }
    if RESERVED_APP_NAMES.contains(&name) {
        return Some(format!(
            "`{name}` is a crate name that the generated Rust crate already sees (a built-in crate or one of its dependencies)"
        ));
    }
    None
}

/// Makes a valid app name from a file stem: `My-App` becomes `my_app`, `2019 survey` becomes
/// `app_2019_survey`, an empty stem becomes `app`, a name longer than [`MAX_APP_NAME_LEN`] is cut
/// to that length, and a keyword or reserved name gets `_app` (`fn` becomes `fn_app`). An invalid
/// `app` name's diagnostic suggests this name too.
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
    // Keywords and reserved names are short, so the suffix keeps the name within the limit.
    if is_rust_keyword(&name) || RESERVED_APP_NAMES.contains(&name.as_str()) {
        name.push_str("_app");
    }
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

/// Whether a character may not appear in a label: a control character (`char::is_control`: C0
/// such as a carriage return, line feed or tab, DEL, C1), a bidirectional formatting character
/// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: they reorder how the text around a label
/// is displayed) or a line or paragraph separator (U+2028, U+2029).
pub fn is_forbidden_label_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// What is wrong with one label, or `None` when it is a valid class name (E010): it is not empty
/// and has no [forbidden character](is_forbidden_label_char).
pub fn label_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("a label cannot be empty".to_owned());
    }
    label
        .chars()
        .find(|&c| is_forbidden_label_char(c))
        .map(|c| {
            format!(
                "a label cannot contain the control or bidirectional formatting character U+{:04X}",
                u32::from(c)
            )
        })
}

/// What is wrong with declared labels for an output, or `None` when they fit (E010, E011): exactly
/// D distinct names for an output that is one `[D]` tensor, each valid ([`label_problem`]).
pub fn labels_problem(labels: &[String], output: &DataType) -> Option<String> {
    if let Some(problem) = labels.iter().find_map(|label| label_problem(label)) {
        return Some(problem);
    }
    let distinct: HashSet<&String> = labels.iter().collect();
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

/// Whether `value` can be a constraint's limit (E012): a finite number greater than 0. easemlc
/// checks the number as written, and [`validate`] the limit in seconds of every schema registered
/// (a manifest sent to a server included), with this one rule.
pub fn is_positive_limit(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

/// What is wrong with a schema's constraints (E012's rules on the lowered form): each limit
/// positive and finite in seconds, and one constraint per metric.
pub fn constraints_problem(constraints: &[Constraint]) -> Option<String> {
    let mut seen = HashSet::new();
    for constraint in constraints {
        let name = constraint.metric.name();
        if !is_positive_limit(constraint.seconds) {
            return Some(format!(
                "the `{name}` limit is {} seconds; a constraint is an upper limit: give a positive \
                 time, e.g. 30m (1800 seconds)",
                constraint.seconds
            ));
        }
        if !seen.insert(constraint.metric) {
            return Some(format!(
                "a `{name}` constraint is given twice; keep one limit per metric"
            ));
        }
    }
    None
}

/// Checks every rule of a schema read from outside the compiler: a valid app name, at least one
/// tensor field and at most [`MAX_FIELDS`] fields per side, non-empty unique field names, shapes within the limits, and declared labels
/// that fit a `[D]` output, and constraints as easemlc accepts them ([`constraints_problem`]).
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
        if let Some(problem) = fields_problem(data_type.fields.len()) {
            return Err(SchemaError(format!("the {side} has {problem}")));
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
    if let Some(problem) = constraints_problem(&schema.constraints) {
        return Err(SchemaError(format!("`constraints`: {problem}")));
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
    fn keywords_and_reserved_crate_names_are_no_app_names_and_stems_avoid_them() {
        for name in [
            "fn", "self", "gen", "async", "try", "yield", "dyn", "crate", "super",
        ]
        .into_iter()
        .chain([
            "std",
            "core",
            "alloc",
            "test",
            "proc_macro",
            "easeml_runtime",
        ]) {
            let problem = app_name_problem(name).unwrap_or_else(|| panic!("{name} is accepted"));
            assert!(problem.contains(&format!("`{name}`")), "{problem}");
            assert!(validate(&schema(name)).is_err(), "{name}");
            let suggested = app_name_from_stem(name);
            assert_eq!(suggested, format!("{name}_app"));
            assert!(is_app_name(&suggested), "{suggested}");
        }
        for keyword in RUST_KEYWORDS {
            assert!(!is_app_name(keyword), "{keyword}");
            assert!(is_app_name(&app_name_from_stem(keyword)), "{keyword}");
        }
        // Weak keywords and names that merely contain a keyword stay valid.
        for name in [
            "union",
            "raw",
            "macro_rules",
            "fn_app",
            "std2",
            "tests",
            "gen_1",
        ] {
            assert!(is_app_name(name), "{name}");
            assert_eq!(app_name_from_stem(name), name);
        }
        assert_eq!(app_name_from_stem("Fn"), "fn_app");
    }

    #[test]
    fn labels_refuse_control_and_bidirectional_characters() {
        let two = vector(&[2]);
        for bad in [
            "a\rb",
            "a\nb",
            "tab\t",
            "\u{7f}",
            "\u{85}",
            "\u{202E}evil",
            "\u{200E}",
            "\u{200F}",
            "\u{202A}",
            "\u{2066}x",
            "\u{2069}",
            "\u{061C}",
            "\u{2028}",
        ] {
            let problem = label_problem(bad).unwrap_or_else(|| panic!("{bad:?} is accepted"));
            assert!(problem.contains("U+"), "{problem}");
            let labels = vec!["ok".to_owned(), bad.to_owned()];
            assert!(labels_problem(&labels, &two).is_some(), "{bad:?}");
            let mut with_labels = schema("ok");
            with_labels.labels = Some(labels);
            assert!(
                validate(&with_labels).unwrap_err().0.contains("U+"),
                "{bad:?}"
            );
        }
        for good in [
            "sea lion",
            "Möwe",
            "鯨",
            "\"quoted\"",
            "back\\slash",
            "*/",
            "\"#",
            "👩\u{200D}🔬",
        ] {
            assert_eq!(label_problem(good), None, "{good:?}");
        }
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
        let mut bad = schema("ok");
        bad.input.fields = (0..=MAX_FIELDS)
            .map(|index| Field {
                name: format!("f{index}"),
                kind: FieldKind::Tensor(Tensor { dims: vec![1] }),
            })
            .collect();
        assert_eq!(
            validate(&bad).unwrap_err().0,
            "the input has 1025 fields, and a type may have at most 1024"
        );
        bad.input.fields.pop();
        assert!(validate(&bad).is_ok());
    }
}
