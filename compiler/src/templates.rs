//! The model-template registry (LANGUAGE.md section 4) and the pattern matcher.
//!
//! The registry is data: `templates/registry.toml` is embedded as the default, and a custom file can
//! replace it (`easemlc --templates FILE`). Templates are tried top to bottom; the first match picks
//! the workload and the models. Patterns bind upper-case letters to numbers and lower-case letters
//! to field names, consistently across the input and output of one template; `*` ends a list.

use std::collections::BTreeMap;
use std::fmt;

use easeml_grammar::pattern::{
    DataTypePattern, DimPattern, ListPattern, NamePattern, TensorPattern,
};
use serde::Deserialize;

use easeml_schema::{DataType, Schema, TemplateSummary, Tensor};

/// The text of the default registry.
pub const DEFAULT_REGISTRY: &str = include_str!("../../templates/registry.toml");

/// Why a registry file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Not valid TOML, or not the registry's shape.
    #[error("{file}: not a valid template registry: {message}")]
    Format {
        /// The registry file.
        file: String,
        /// What is wrong, from the TOML reader.
        message: String,
    },
    /// A template with a bad pattern, condition or model list.
    #[error("{file}: template `{template}`: {message}")]
    Template {
        /// The registry file.
        file: String,
        /// The template's id.
        template: String,
        /// What is wrong.
        message: String,
    },
}

/// A template registry, ready to match.
#[derive(Debug, Clone)]
pub struct Registry {
    /// The templates in matching order.
    pub templates: Vec<Template>,
    /// The normalization exponents k of f_k, in candidate order.
    pub normalization_ks: Vec<u32>,
    /// Display names of model ids.
    pub model_names: BTreeMap<String, String>,
    /// The models that go beyond the paper's figure 6, with their source (`explain` marks them).
    pub beyond_paper: BTreeMap<String, String>,
    /// The models never augmented with input normalizations (they are not networks).
    pub not_normalized: Vec<String>,
}

/// One template: patterns, conditions, the workload and the models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// A stable identifier, e.g. `image_classification`.
    pub id: String,
    /// The row of LANGUAGE.md's table, e.g. `1` or `7+`.
    pub row: String,
    /// The input pattern.
    pub input: DataTypePattern,
    /// The output pattern.
    pub output: DataTypePattern,
    /// Extra conditions on number variables.
    pub conditions: Vec<Condition>,
    /// The workload name (snake_case).
    pub workload: String,
    /// The model ids, in candidate order.
    pub models: Vec<String>,
    /// Whether candidates get the normalization augmentation.
    pub normalize: bool,
}

/// `D >= 2`: a condition on a number variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    /// The variable.
    pub variable: char,
    /// The comparison.
    pub operator: Comparison,
    /// The number compared with.
    pub value: u64,
}

/// A comparison operator of a [`Condition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `>=`
    AtLeast,
    /// `<=`
    AtMost,
    /// `>`
    Greater,
    /// `<`
    Less,
}

impl Comparison {
    const ALL: [(&'static str, Comparison); 6] = [
        ("==", Comparison::Equal),
        ("!=", Comparison::NotEqual),
        (">=", Comparison::AtLeast),
        ("<=", Comparison::AtMost),
        (">", Comparison::Greater),
        ("<", Comparison::Less),
    ];

    fn holds(self, left: u64, right: u64) -> bool {
        match self {
            Comparison::Equal => left == right,
            Comparison::NotEqual => left != right,
            Comparison::AtLeast => left >= right,
            Comparison::AtMost => left <= right,
            Comparison::Greater => left > right,
            Comparison::Less => left < right,
        }
    }

    fn symbol(self) -> &'static str {
        Comparison::ALL
            .iter()
            .find(|(_, operator)| *operator == self)
            .map_or("?", |(symbol, _)| symbol)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.variable,
            self.operator.symbol(),
            self.value
        )
    }
}

/// The file shape of the registry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(default = "default_ks")]
    normalization_ks: Vec<u32>,
    template: Vec<TemplateFile>,
    #[serde(default)]
    model_names: BTreeMap<String, String>,
    #[serde(default)]
    beyond_paper: BTreeMap<String, String>,
    #[serde(default)]
    not_normalized: Vec<String>,
}

fn default_ks() -> Vec<u32> {
    vec![1, 2, 4]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateFile {
    id: String,
    #[serde(default)]
    row: Option<String>,
    input: String,
    output: String,
    #[serde(default, rename = "where")]
    conditions: Vec<String>,
    workload: String,
    models: Vec<String>,
    #[serde(default)]
    normalize: bool,
}

impl Registry {
    /// The default registry (LANGUAGE.md section 4), embedded from `templates/registry.toml`.
    pub fn builtin() -> Registry {
        // The embedded file is part of the program and is checked by a unit test.
        Registry::from_toml(DEFAULT_REGISTRY, "templates/registry.toml")
            .unwrap_or_else(|error| panic!("the embedded registry is broken: {error}"))
    }

    /// Reads a registry from TOML text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Registry, RegistryError> {
        let parsed: RegistryFile = toml::from_str(text).map_err(|error| RegistryError::Format {
            file: file.to_owned(),
            message: error.to_string(),
        })?;
        if let Some(k) = parsed.normalization_ks.iter().find(|k| **k == 0) {
            return Err(RegistryError::Format {
                file: file.to_owned(),
                message: format!("normalization_ks must be positive, found {k}"),
            });
        }
        let mut templates = Vec::with_capacity(parsed.template.len());
        for (index, template) in parsed.template.into_iter().enumerate() {
            let fail = |message: String| RegistryError::Template {
                file: file.to_owned(),
                template: template.id.clone(),
                message,
            };
            let pattern = |text: &str, which: &str| {
                easeml_grammar::parse_pattern(text).map_err(|diagnostic| {
                    fail(format!("{which} pattern `{text}`: {}", diagnostic.message))
                })
            };
            let input = pattern(&template.input, "input")?;
            let output = pattern(&template.output, "output")?;
            let conditions = template
                .conditions
                .iter()
                .map(|text| {
                    parse_condition(text)
                        .ok_or_else(|| fail(format!("bad condition `{text}`: write e.g. `D >= 2`")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if template.models.is_empty() {
                return Err(fail("lists no models".to_owned()));
            }
            if template.workload.is_empty() {
                return Err(fail("has an empty workload".to_owned()));
            }
            templates.push(Template {
                row: template
                    .row
                    .clone()
                    .unwrap_or_else(|| (index + 1).to_string()),
                id: template.id,
                input,
                output,
                conditions,
                workload: template.workload,
                models: template.models,
                normalize: template.normalize,
            });
        }
        if let Some(model) = parsed.not_normalized.iter().find(|model| {
            !templates
                .iter()
                .any(|template| template.models.contains(*model))
        }) {
            return Err(RegistryError::Format {
                file: file.to_owned(),
                message: format!(
                    "not_normalized names `{model}`, which no template lists among its models"
                ),
            });
        }
        if let Some(model) = parsed.beyond_paper.keys().find(|model| {
            !templates
                .iter()
                .any(|template| template.models.contains(*model))
        }) {
            return Err(RegistryError::Format {
                file: file.to_owned(),
                message: format!(
                    "[beyond_paper] names `{model}`, which no template lists among its models"
                ),
            });
        }
        Ok(Registry {
            templates,
            normalization_ks: parsed.normalization_ks,
            model_names: parsed.model_names,
            beyond_paper: parsed.beyond_paper,
            not_normalized: parsed.not_normalized,
        })
    }

    /// Every template that accepts the schema, in registry order (the first one is chosen).
    pub fn matching(&self, schema: &Schema) -> Vec<&Template> {
        self.templates
            .iter()
            .filter(|template| template.matches(schema))
            .collect()
    }
}

fn parse_condition(text: &str) -> Option<Condition> {
    let text = text.trim();
    let variable = text.chars().next().filter(char::is_ascii_uppercase)?;
    let rest = text[1..].trim_start();
    let (symbol, operator) = Comparison::ALL
        .iter()
        .find(|(symbol, _)| rest.starts_with(symbol))?;
    let value = rest[symbol.len()..].trim().parse().ok()?;
    Some(Condition {
        variable,
        operator: *operator,
        value,
    })
}

/// Variable bindings while matching one template.
#[derive(Debug, Default)]
struct Bindings<'s> {
    numbers: BTreeMap<char, u64>,
    names: BTreeMap<char, &'s str>,
}

impl Template {
    /// Whether the template accepts the schema.
    pub fn matches(&self, schema: &Schema) -> bool {
        let mut bindings = Bindings::default();
        match_data_type(&self.input, &schema.input, &mut bindings)
            && match_data_type(&self.output, &schema.output, &mut bindings)
            && self.conditions.iter().all(|condition| {
                bindings
                    .numbers
                    .get(&condition.variable)
                    .is_some_and(|value| condition.operator.holds(*value, condition.value))
            })
    }
}

fn match_data_type<'s>(
    pattern: &DataTypePattern,
    data_type: &'s DataType,
    bindings: &mut Bindings<'s>,
) -> bool {
    let tensors: Vec<&Tensor> = data_type.tensors().collect();
    let names: Vec<&str> = data_type.recursive_names().collect();
    match_list(&pattern.tensors, &tensors, |tensor_pattern, tensor| {
        match_tensor(tensor_pattern, tensor, bindings)
    }) && match_list(&pattern.recursive, &names, |name_pattern, name| {
        match_name(*name_pattern, name, bindings)
    })
}

/// Matches the fixed elements pairwise; `*` allows any further elements.
fn match_list<P, T>(
    pattern: &ListPattern<P>,
    items: &[T],
    mut element: impl FnMut(&P, &T) -> bool,
) -> bool {
    let length_fits = if pattern.rest {
        items.len() >= pattern.elements.len()
    } else {
        items.len() == pattern.elements.len()
    };
    length_fits
        && pattern
            .elements
            .iter()
            .zip(items)
            .all(|(pattern, item)| element(pattern, item))
}

fn match_tensor(pattern: &TensorPattern, tensor: &Tensor, bindings: &mut Bindings<'_>) -> bool {
    match_list(
        pattern,
        &tensor.dims,
        |dim_pattern, dim| match dim_pattern {
            DimPattern::Exactly(value) => value == dim,
            DimPattern::Variable(letter) => {
                *bindings.numbers.entry(*letter).or_insert(*dim) == *dim
            }
        },
    )
}

fn match_name<'s>(pattern: NamePattern, name: &'s str, bindings: &mut Bindings<'s>) -> bool {
    *bindings.names.entry(pattern.0).or_insert(name) == name
}

impl From<&Template> for TemplateSummary {
    fn from(template: &Template) -> TemplateSummary {
        TemplateSummary {
            id: template.id.clone(),
            row: template.row.clone(),
            input: template.input.to_string(),
            output: template.output.to_string(),
            conditions: template
                .conditions
                .iter()
                .map(ToString::to_string)
                .collect(),
            workload: template.workload.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;

    fn schema(source: &str) -> Schema {
        match compile(source, "test", &Registry::builtin()) {
            Ok(compiled) => compiled.schema,
            Err(diagnostics) => panic!("{diagnostics:#?}"),
        }
    }

    fn registry(templates: &str) -> Registry {
        Registry::from_toml(templates, "test.toml").unwrap()
    }

    fn one_template(input: &str, output: &str, conditions: &str) -> Registry {
        registry(&format!(
            "[[template]]\nid = \"t\"\ninput = \"{input}\"\noutput = \"{output}\"\n{conditions}\nworkload = \"w\"\nmodels = [\"m\"]\n"
        ))
    }

    #[test]
    fn the_embedded_registry_loads_in_the_documented_order() {
        let registry = Registry::builtin();
        let rows: Vec<&str> = registry
            .templates
            .iter()
            .map(|template| template.row.as_str())
            .collect();
        assert_eq!(rows, ["1", "2", "3", "4", "5", "6+", "7+", "7+", "8", "9"]);
        assert_eq!(registry.normalization_ks, [1, 2, 4]);
        for template in &registry.templates {
            for model in &template.models {
                assert!(
                    registry.model_names.contains_key(model),
                    "{model} has no display name"
                );
            }
        }
    }

    #[test]
    fn a_number_variable_used_twice_must_bind_the_same_value() {
        let registry = one_template("{[Tensor[A,A]], []}", "{[Tensor[D]], []}", "");
        assert!(registry.templates[0].matches(&schema("Input = [3, 3]\nOutput = [2]")));
        assert!(!registry.templates[0].matches(&schema("Input = [3, 4]\nOutput = [2]")));
    }

    #[test]
    fn variables_bind_across_input_and_output() {
        let registry = one_template("{[Tensor[A]], []}", "{[Tensor[A]], []}", "");
        assert!(registry.templates[0].matches(&schema("Input = [5]\nOutput = [5]")));
        assert!(!registry.templates[0].matches(&schema("Input = [5]\nOutput = [4]")));
    }

    #[test]
    fn distinct_letters_may_bind_equal_values() {
        let registry = one_template("{[Tensor[A,B]], []}", "{[Tensor[D]], []}", "");
        assert!(registry.templates[0].matches(&schema("Input = [3, 3]\nOutput = [3]")));
    }

    #[test]
    fn a_name_variable_used_twice_must_bind_the_same_name() {
        let registry = one_template("{[Tensor[A]], [a, a]}", "{[Tensor[D]], []}", "");
        let tree = "type Input\n x :: Tensor[2]\n l :: Nullable{Input}\n r :: Nullable{Input}\nend\nOutput = [2]";
        assert!(!registry.templates[0].matches(&schema(tree)));
        let registry = one_template("{[Tensor[A]], [a]}", "{[Tensor[B]], [a]}", "");
        let same = "{input: {[Tensor[3]], [next]}, output: {[Tensor[3]], [next]}}";
        let different = "{input: {[Tensor[3]], [next]}, output: {[Tensor[3]], [prev]}}";
        assert!(registry.templates[0].matches(&schema(same)));
        assert!(!registry.templates[0].matches(&schema(different)));
    }

    #[test]
    fn a_star_tail_matches_zero_or_more_elements() {
        let registry = one_template("{[Tensor[A], *], [*]}", "{[*], [*]}", "");
        let template = &registry.templates[0];
        assert!(template.matches(&schema("Input = [3]\nOutput = [2]")));
        assert!(template.matches(&schema(
            "{input: {[Tensor[3], Tensor[4, 4]], [a, b]}, output: {[Tensor[2]], []}}"
        )));
        assert!(!template.matches(&schema("Input = [3, 3]\nOutput = [2]")));
        let registry = one_template("{[Tensor[A, *]], []}", "{[*], [*]}", "");
        assert!(registry.templates[0].matches(&schema("Input = [3, 3, 3, 3]\nOutput = [2]")));
    }

    #[test]
    fn literal_numbers_and_conditions_restrict_matches() {
        let registry = one_template(
            "{[Tensor[A,B,3]], []}",
            "{[Tensor[D]], []}",
            "where = [\"D >= 3\", \"A == 32\"]",
        );
        let template = &registry.templates[0];
        assert!(template.matches(&schema("Input = [32, 8, 3]\nOutput = [3]")));
        assert!(!template.matches(&schema("Input = [32, 8, 1]\nOutput = [3]")));
        assert!(!template.matches(&schema("Input = [32, 8, 3]\nOutput = [2]")));
        assert!(!template.matches(&schema("Input = [31, 8, 3]\nOutput = [3]")));
    }

    #[test]
    fn bad_registries_are_reported_with_the_template_and_the_reason() {
        let bad_pattern = Registry::from_toml(
            "[[template]]\nid = \"x\"\ninput = \"{[Tensor[a]], []}\"\noutput = \"{[*], [*]}\"\nworkload = \"w\"\nmodels = [\"m\"]\n",
            "r.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            bad_pattern.contains("template `x`: input pattern"),
            "{bad_pattern}"
        );
        let bad_condition = Registry::from_toml(
            "[[template]]\nid = \"y\"\ninput = \"{[*], [*]}\"\noutput = \"{[*], [*]}\"\nwhere = [\"D ~ 2\"]\nworkload = \"w\"\nmodels = [\"m\"]\n",
            "r.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            bad_condition.contains("bad condition `D ~ 2`"),
            "{bad_condition}"
        );
        let no_models = Registry::from_toml(
            "[[template]]\nid = \"z\"\ninput = \"{[*], [*]}\"\noutput = \"{[*], [*]}\"\nworkload = \"w\"\nmodels = []\n",
            "r.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(no_models.contains("lists no models"), "{no_models}");
        let unknown_key = Registry::from_toml("colour = 1\n[[template]]\n", "r.toml")
            .unwrap_err()
            .to_string();
        assert!(
            unknown_key.starts_with("r.toml: not a valid template registry"),
            "{unknown_key}"
        );
        let zero_k = Registry::from_toml("normalization_ks = [0]\ntemplate = []\n", "r.toml")
            .unwrap_err()
            .to_string();
        assert!(zero_k.contains("must be positive"), "{zero_k}");
        let stray_mark = Registry::from_toml(
            "[[template]]\nid = \"z\"\ninput = \"{[*], [*]}\"\noutput = \"{[*], [*]}\"\nworkload = \"w\"\nmodels = [\"m\"]\n[beyond_paper]\nknn = \"Cover and Hart 1967\"\n",
            "r.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            stray_mark.contains("[beyond_paper] names `knn`, which no template lists"),
            "{stray_mark}"
        );
    }

    #[test]
    fn the_papers_models_are_not_marked_beyond_it_and_every_mark_has_a_source() {
        // The paper's figure 6: rows 1-5 and 8-9 (rows marked + are easeml's).
        let registry = Registry::builtin();
        for template in &registry.templates {
            if template.row.ends_with('+') {
                continue;
            }
            for model in &template.models {
                let paper = matches!(
                    model.as_str(),
                    "alexnet"
                        | "bn_alexnet"
                        | "resnet18"
                        | "resnet50"
                        | "googlenet"
                        | "squeezenet"
                        | "vgg16"
                        | "nin"
                        | "autoencoder"
                        | "gan"
                        | "pix2pix"
                        | "rnn"
                        | "lstm"
                        | "bilstm"
                        | "gru"
                        | "seq2seq"
                        | "tree_rnn"
                        | "tree_kernel_svm"
                        | "bit_rnn"
                        | "bit_autoencoder"
                );
                assert_eq!(
                    paper,
                    !registry.beyond_paper.contains_key(model),
                    "`{model}` of template `{}`: a model of the paper must not be marked beyond it, \
                     and every other model must say where it comes from",
                    template.id
                );
            }
        }
        assert!(
            registry
                .beyond_paper
                .values()
                .all(|source| !source.trim().is_empty())
        );
    }

    #[test]
    fn patterns_print_back_in_registry_syntax() {
        for text in [
            "{[Tensor[A,B,C]], []}",
            "{[Tensor[A], *], [a, c]}",
            "{[*], [*]}",
            "{[Tensor[A,*]], [a, *]}",
        ] {
            assert_eq!(
                easeml_grammar::parse_pattern(text).unwrap().to_string(),
                text
            );
        }
    }
}
