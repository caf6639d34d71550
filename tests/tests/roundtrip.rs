//! Property test: a random schema printed in each surface form (shorthand, type blocks, the formal
//! syntax, and mixtures, with random comments and line endings) parses back to the same canonical
//! system data type.

use easeml_compiler::{Registry, compile};
use proptest::prelude::*;

/// A generated field: a tensor with an optional name, or a recursive field.
#[derive(Debug, Clone)]
enum GenField {
    Tensor {
        name: Option<String>,
        dims: Vec<u32>,
    },
    Recursive {
        name: String,
    },
}

#[derive(Debug, Clone)]
struct GenType {
    fields: Vec<GenField>,
}

fn gen_type() -> impl Strategy<Value = GenType> {
    let field = prop_oneof![
        3 => (any::<bool>(), prop::collection::vec(1u32..=64, 1..=4)).prop_map(|(named, dims)| (named, Some(dims))),
        1 => Just((true, None)),
    ];
    (
        "[a-z][a-z0-9_]{0,5}",
        prop::collection::vec(field, 1..=6),
        1u32..=64,
    )
        .prop_map(|(prefix, fields, first_dim)| {
            let mut fields: Vec<GenField> = fields
                .into_iter()
                .enumerate()
                .map(|(index, (named, dims))| {
                    let name = format!("{prefix}_{index}");
                    match dims {
                        Some(dims) => GenField::Tensor {
                            name: named.then_some(name),
                            dims,
                        },
                        None => GenField::Recursive { name },
                    }
                })
                .collect();
            if !fields
                .iter()
                .any(|field| matches!(field, GenField::Tensor { .. }))
            {
                fields.push(GenField::Tensor {
                    name: None,
                    dims: vec![first_dim],
                });
            }
            GenType { fields }
        })
}

fn dims_text(dims: &[u32], separator: &str) -> String {
    dims.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

impl GenType {
    fn recursive_names(&self) -> Vec<&str> {
        self.fields
            .iter()
            .filter_map(|field| match field {
                GenField::Recursive { name } => Some(name.as_str()),
                GenField::Tensor { .. } => None,
            })
            .collect()
    }

    /// The canonical form, computed independently of the compiler.
    fn canonical(&self) -> String {
        let tensors: Vec<String> = self
            .fields
            .iter()
            .filter_map(|field| match field {
                GenField::Tensor { dims, .. } => Some(format!("Tensor[{}]", dims_text(dims, ","))),
                GenField::Recursive { .. } => None,
            })
            .collect();
        let recursive = self.recursive_names();
        format!("{{[{}], [{}]}}", tensors.join(","), recursive.join(","))
    }

    fn shorthand(&self, side: &str) -> Option<String> {
        match self.fields.as_slice() {
            [GenField::Tensor { dims, .. }] => {
                Some(format!("{side} = [{}]\n", dims_text(dims, ", ")))
            }
            _ => None,
        }
    }

    fn block(&self, side: &str, line_end: &str) -> String {
        let mut text = format!("type {side}{line_end}");
        for (index, field) in self.fields.iter().enumerate() {
            match field {
                GenField::Tensor { name, dims } => {
                    let name = name.clone().unwrap_or_else(|| format!("unnamed_{index}"));
                    text.push_str(&format!(
                        "  {name} :: Tensor[{}]{line_end}",
                        dims_text(dims, ", ")
                    ));
                }
                GenField::Recursive { name } => {
                    text.push_str(&format!("  {name} :: Nullable{{{side}}}{line_end}"))
                }
            }
        }
        text.push_str(&format!("end{line_end}"));
        text
    }

    fn formal(&self) -> String {
        let tensors: Vec<String> = self
            .fields
            .iter()
            .filter_map(|field| match field {
                GenField::Tensor {
                    name: Some(name),
                    dims,
                } => Some(format!("{name} :: Tensor[{}]", dims_text(dims, ","))),
                GenField::Tensor { name: None, dims } => {
                    Some(format!("Tensor[{}]", dims_text(dims, ", ")))
                }
                GenField::Recursive { .. } => None,
            })
            .collect();
        let recursive = self.recursive_names();
        format!("{{[{}], [{}]}}", tensors.join(", "), recursive.join(", "))
    }
}

fn canonical_of(source: &str) -> String {
    match compile(source, "roundtrip", &Registry::builtin()) {
        Ok(compiled) => compiled.schema.system_type(),
        Err(diagnostics) => panic!("{source}\n{diagnostics:#?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_surface_form_gives_the_same_canonical_type(
        input in gen_type(),
        output in gen_type(),
        crlf in any::<bool>(),
        comment in any::<bool>(),
    ) {
        let expected = format!("{{input: {}, output: {}}}", input.canonical(), output.canonical());
        let line_end = match (crlf, comment) {
            (false, false) => "\n",
            (true, false) => "\r\n",
            (false, true) => " # a comment\n",
            (true, true) => " # ünïcode ✓\r\n",
        };
        let blocks = format!("{}{}", input.block("Input", line_end), output.block("Output", line_end));
        prop_assert_eq!(canonical_of(&blocks), expected.clone());
        let formal = format!("{{input: {}, output: {}}}", input.formal(), output.formal());
        prop_assert_eq!(canonical_of(&formal), expected.clone());
        let mixed = format!(
            "{}{}",
            output.shorthand("Output").unwrap_or_else(|| output.block("Output", line_end)),
            input.shorthand("Input").unwrap_or_else(|| input.block("Input", line_end)),
        );
        prop_assert_eq!(canonical_of(&mixed), expected);
    }
}
