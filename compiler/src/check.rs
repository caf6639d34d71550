//! Semantic checks E002-E012, E014 and E015 (LANGUAGE.md section 2), and lowering of the AST to [`Schema`].
//!
//! Every check runs and every error is collected; a [`Schema`] comes out only when there is none.
//! Checks that only make sense for a complete program (E002) are skipped when the file has syntax
//! errors, because the missing definition is then most likely the one that did not parse.

use std::collections::HashMap;

use easeml_grammar::ast::{
    self, ConstraintDecl, DimValue, FieldType, Ident, Item, LabelsDecl, TypeDef,
};
use easeml_grammar::{Code, Diagnostic, Span};

use easeml_schema::rules::{
    MAX_TENSOR_ELEMENTS, app_name_from_stem, app_name_problem, fields_problem, is_field_name,
    is_positive_limit, label_problem,
};
use easeml_schema::{Constraint, DataType, Field, FieldKind, Metric, Schema, Tensor};

/// Checks a parsed file and lowers it; `default_app` names the app when the file has no `app` item
/// (it is made valid first, see [`app_name_from_stem`]). `had_syntax_errors` suppresses E002.
pub fn check(
    file: &ast::File,
    default_app: &str,
    had_syntax_errors: bool,
) -> (Option<Schema>, Vec<Diagnostic>) {
    let mut checker = Checker::default();
    let mut input = None;
    let mut output = None;
    let mut first_definition: HashMap<Side, Span> = HashMap::new();
    let mut type_defs: Vec<&TypeDef> = Vec::new();
    let mut apps = Vec::new();
    let mut labels = Vec::new();
    let mut constraints = Vec::new();
    for item in &file.items {
        match item {
            Item::Type(def) => type_defs.push(def),
            Item::Program(program) => {
                type_defs.push(&program.input);
                type_defs.push(&program.output);
            }
            Item::App(app) => apps.push(app),
            Item::Labels(decl) => labels.push(decl),
            Item::Constraint(decl) => constraints.push(decl),
        }
    }
    for def in type_defs {
        let Some(side) = checker.side_of(&def.name) else {
            continue;
        };
        let data_type = checker.data_type(def, side);
        if let Some(first) = first_definition.get(&side) {
            checker.report(
                Diagnostic::new(
                    Code::E003,
                    def.name.span,
                    format!("`{}` is defined twice", side.name()),
                )
                .with_label(format!("second definition of `{}`", side.name()))
                .with_note(*first, "first defined here")
                .with_help(format!(
                    "remove one of the two definitions of `{}`",
                    side.name()
                )),
            );
            continue;
        }
        first_definition.insert(side, def.name.span);
        match side {
            Side::Input => input = data_type,
            Side::Output => output = data_type,
        }
    }
    // A misspelt or unparsable definition is already reported; "no Input" would only repeat it.
    let definition_unreadable = had_syntax_errors
        || checker
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.code == Code::E001);
    if !definition_unreadable {
        for side in [Side::Input, Side::Output] {
            if !first_definition.contains_key(&side) {
                checker.report(
                    Diagnostic::new(
                        Code::E002,
                        Span::new(0, 0),
                        format!("no `{}` definition", side.name()),
                    )
                    .with_label(format!("this program does not define `{}`", side.name()))
                    .with_help(match side {
                        Side::Input => "add the input type, e.g. `Input = [256, 256, 3]`",
                        Side::Output => "add the output type, e.g. `Output = [3]`",
                    }),
                );
            }
        }
    }
    let app = checker.app(&apps, default_app);
    let labels = checker.labels(&labels, output.as_ref());
    let constraints = checker.constraints(&constraints);
    let schema = match (input, output) {
        (Some(input), Some(output)) if checker.diagnostics.is_empty() => Some(Schema {
            app,
            input,
            output,
            labels,
            constraints,
        }),
        _ => None,
    };
    (schema, checker.diagnostics)
}

/// Which of the two types a definition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Input,
    Output,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Input => "Input",
            Side::Output => "Output",
        }
    }

    fn other(self) -> Side {
        match self {
            Side::Input => Side::Output,
            Side::Output => Side::Input,
        }
    }

    fn from_name(name: &str) -> Option<Side> {
        match name {
            "Input" => Some(Side::Input),
            "Output" => Some(Side::Output),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Checker {
    diagnostics: Vec<Diagnostic>,
}

impl Checker {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// `Input` or `Output`; anything else is a syntax error with a suggestion.
    fn side_of(&mut self, name: &Ident) -> Option<Side> {
        if let Some(side) = Side::from_name(&name.text) {
            return Some(side);
        }
        let mut diagnostic = Diagnostic::new(
            Code::E001,
            name.span,
            format!(
                "syntax error: expected `Input` or `Output`, found `{}`",
                name.text
            ),
        )
        .with_label("a program defines exactly the types `Input` and `Output`");
        if let Some(suggestion) = closest(&name.text, &["Input", "Output"]) {
            diagnostic = diagnostic.with_help(format!("did you mean `{suggestion}`?"));
        }
        self.report(diagnostic);
        None
    }

    /// Checks one type definition and lowers it; `None` when it has errors. A type with more
    /// fields than `rules::MAX_FIELDS` is one E015 and its fields are not looked at.
    fn data_type(&mut self, def: &TypeDef, side: Side) -> Option<DataType> {
        if let Some(problem) = fields_problem(def.fields.len()) {
            self.report(
                Diagnostic::new(
                    Code::E015,
                    def.name.span,
                    format!("`{}` is too large: {problem}", side.name()),
                )
                .with_label("too many fields")
                .with_help("gather fields into tensors: one `Tensor[N]` field holds N values"),
            );
            return None;
        }
        let errors_before = self.diagnostics.len();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for field in &def.fields {
            let Some(name) = &field.name else { continue };
            self.field_name(name);
            if let Some(first) = seen.get(name.text.as_str()) {
                self.report(
                    Diagnostic::new(
                        Code::E004,
                        name.span,
                        format!(
                            "field `{}` is defined twice in `{}`",
                            name.text,
                            side.name()
                        ),
                    )
                    .with_label("second definition")
                    .with_note(*first, "first defined here")
                    .with_help("give each field of a type its own name"),
                );
            } else {
                seen.insert(&name.text, name.span);
            }
        }
        let mut fields = Vec::with_capacity(def.fields.len());
        let mut tensor_position = 0;
        // The smallest number an unnamed field may still take: every `fieldN` below it that is
        // not declared was generated already (see `unnamed_field_name`).
        let mut next_unnamed = 0;
        for field in &def.fields {
            let kind = match &field.ty {
                FieldType::Tensor(tensor) => {
                    tensor_position += 1;
                    self.tensor(tensor).map(FieldKind::Tensor)
                }
                FieldType::Recursive { target } => {
                    self.recursive_target(target.as_ref(), side);
                    Some(FieldKind::Recursive)
                }
            };
            let name = match &field.name {
                Some(name) => name.text.clone(),
                None => {
                    let (name, number) =
                        unnamed_field_name(tensor_position.max(next_unnamed), &seen);
                    next_unnamed = number + 1;
                    name
                }
            };
            if let Some(kind) = kind {
                fields.push(Field { name, kind });
            }
        }
        if !def
            .fields
            .iter()
            .any(|field| matches!(field.ty, FieldType::Tensor(_)))
        {
            let what = if def.fields.is_empty() {
                "no fields"
            } else {
                "only recursive fields"
            };
            self.report(
                Diagnostic::new(
                    Code::E009,
                    def.name.span,
                    format!("`{}` has {what}, so it would carry no data", side.name()),
                )
                .with_label("needs at least one tensor field")
                .with_help(match def.form {
                    ast::Form::Formal => {
                        "add a tensor to the first list, e.g. `{[Tensor[10]], [next]}`"
                    }
                    _ => "add a tensor field, e.g. `value :: Tensor[10]`",
                }),
            );
        }
        (self.diagnostics.len() == errors_before).then_some(DataType { fields })
    }

    /// E005: field names are `[a-z0-9_]+`.
    fn field_name(&mut self, name: &Ident) {
        if is_field_name(&name.text) {
            return;
        }
        let fixed: String = name
            .text
            .chars()
            .map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        let mut diagnostic = Diagnostic::new(
            Code::E005,
            name.span,
            format!("invalid field name `{}`", name.text),
        )
        .with_label("field names may use only lowercase letters `a`-`z`, digits and `_`");
        if is_field_name(&fixed) {
            let reason = match (
                name.text.contains('-'),
                name.text.chars().any(|c| c.is_uppercase()),
            ) {
                (true, true) => "use lowercase letters and `_` instead of `-`",
                (true, false) => "use `_` instead of `-`",
                _ => "use lowercase letters",
            };
            diagnostic = diagnostic.with_help(format!("{reason}: `{fixed}`"));
        } else {
            diagnostic = diagnostic.with_help(
                "rename the field using only `a`-`z`, `0`-`9` and `_`, e.g. `pixel_values`",
            );
        }
        self.report(diagnostic);
    }

    /// E006 and E007: every dimension at least 1, at least one dimension, at most 2^31 - 1 elements.
    fn tensor(&mut self, tensor: &ast::TensorType) -> Option<Tensor> {
        if tensor.dims.is_empty() {
            self.report(
                Diagnostic::new(
                    Code::E006,
                    tensor.span,
                    "a tensor needs at least one dimension",
                )
                .with_label("no dimensions")
                .with_help("give the shape, e.g. `[10]` for a vector or `[28, 28]` for a grid"),
            );
            return None;
        }
        let mut dims = Vec::with_capacity(tensor.dims.len());
        let mut valid = true;
        let mut elements: Option<u64> = Some(1);
        for dim in &tensor.dims {
            match dim.value() {
                DimValue::Value(0) | DimValue::Negative => {
                    valid = false;
                    let zero = dim.value() == DimValue::Value(0);
                    self.report(
                        Diagnostic::new(
                            Code::E006,
                            dim.span,
                            if zero {
                                "a tensor dimension of 0".to_owned()
                            } else {
                                format!("a negative tensor dimension `{}`", dim.text)
                            },
                        )
                        .with_label("dimensions must be at least 1")
                        .with_help("every dimension is a size: a whole number of at least 1"),
                    );
                }
                DimValue::Value(value) => {
                    dims.push(value);
                    elements = elements.and_then(|count| count.checked_mul(value));
                }
                DimValue::Huge => {
                    elements = None;
                }
            }
        }
        if !valid {
            return None;
        }
        match elements {
            Some(count) if count <= MAX_TENSOR_ELEMENTS => Some(Tensor { dims }),
            _ => {
                let count =
                    elements.map_or_else(|| "more than 2^64".to_owned(), |count| count.to_string());
                self.report(
                    Diagnostic::new(
                        Code::E007,
                        tensor.span,
                        format!("tensor too large: {count} elements, the limit is 2^31 - 1 = {MAX_TENSOR_ELEMENTS}"),
                    )
                    .with_label("too many elements")
                    .with_help("downsample the data (e.g. resize images) so one tensor has at most 2147483647 elements"),
                );
                None
            }
        }
    }

    /// E008: `Nullable{...}` must name the type it is in.
    fn recursive_target(&mut self, target: Option<&Ident>, side: Side) {
        let Some(target) = target else { return };
        if target.text == side.name() {
            return;
        }
        if target.text == side.other().name() {
            self.report(
                Diagnostic::new(
                    Code::E008,
                    target.span,
                    format!(
                        "recursive field in `{}` points at `{}`",
                        side.name(),
                        side.other().name()
                    ),
                )
                .with_label(format!("must be `{}`", side.name()))
                .with_help(format!(
                    "a recursive field points at another object of its own type: `Nullable{{{}}}`",
                    side.name()
                )),
            );
            return;
        }
        self.report(
            Diagnostic::new(
                Code::E001,
                target.span,
                format!(
                    "syntax error: expected `{}`, found `{}`",
                    side.name(),
                    target.text
                ),
            )
            .with_label("unknown type")
            .with_help(format!(
                "a recursive field points at another object of its own type: `Nullable{{{}}}`",
                side.name()
            )),
        );
    }

    /// E014: at most one `app`, named `[a-z][a-z0-9_]*`, at most 64 characters long, no Rust keyword
    /// or reserved crate name (`app_name_problem`); the help suggests `app_name_from_stem`'s name.
    fn app(&mut self, apps: &[&ast::AppDecl], default_app: &str) -> String {
        for duplicate in apps.iter().skip(1) {
            self.report(
                Diagnostic::new(Code::E014, duplicate.span, "`app` is given twice")
                    .with_label("second `app`")
                    .with_note(apps[0].span, "first given here")
                    .with_help("keep one `app` line"),
            );
        }
        let Some(first) = apps.first() else {
            return app_name_from_stem(default_app);
        };
        let name = &first.name.text;
        if let Some(problem) = app_name_problem(name) {
            self.report(
                Diagnostic::new(
                    Code::E014,
                    first.name.span,
                    format!("invalid app name `{name}`"),
                )
                .with_label(problem)
                .with_help(format!("try `app {}`", app_name_from_stem(name))),
            );
        }
        name.clone()
    }

    /// E010 and E011: labels fit an output `[D]` with D distinct, valid names (`label_problem`).
    fn labels(&mut self, decls: &[&LabelsDecl], output: Option<&DataType>) -> Option<Vec<String>> {
        for duplicate in decls.iter().skip(1) {
            self.report(
                Diagnostic::new(Code::E010, duplicate.span, "`labels` is given twice")
                    .with_label("second `labels`")
                    .with_note(decls[0].span, "first given here")
                    .with_help("list every class once, in one `labels` line"),
            );
        }
        let decl = decls.first()?;
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for label in &decl.labels {
            if let Some(problem) = label_problem(&label.text) {
                let (caret, help) = if label.text.is_empty() {
                    (
                        "empty label",
                        "give every class a name, e.g. `\"sea lion\"`",
                    )
                } else {
                    (
                        "in this label",
                        "remove it: labels are shown in reports and written into generated code, where such a character is invisible or reorders the text around it",
                    )
                };
                self.report(
                    Diagnostic::new(Code::E010, label.span, problem)
                        .with_label(caret)
                        .with_help(help),
                );
            } else if let Some(first) = seen.get(label.text.as_str()) {
                self.report(
                    Diagnostic::new(
                        Code::E011,
                        label.span,
                        format!("label `{}` is listed twice", label.text),
                    )
                    .with_label("listed again here")
                    .with_note(*first, "first listed here")
                    .with_help("every class needs its own distinct name"),
                );
            } else {
                seen.insert(&label.text, label.span);
            }
        }
        // When the output is missing or broken, its own diagnostic says so.
        if let Some(output) = output {
            match output.single_vector() {
                Some(classes) if classes != decl.labels.len() as u64 => {
                    self.report(
                        Diagnostic::new(
                            Code::E010,
                            decl.span,
                            format!(
                                "{} label{} for an output of {classes} class{}",
                                decl.labels.len(),
                                if decl.labels.len() == 1 { "" } else { "s" },
                                if classes == 1 { "" } else { "es" }
                            ),
                        )
                        .with_label(format!("expected exactly {classes} labels"))
                        .with_help(format!(
                            "list exactly {classes} distinct names, or change the output to `Output = [{}]`",
                            decl.labels.len()
                        )),
                    );
                }
                Some(_) => {}
                None => self.report(
                    Diagnostic::new(
                        Code::E010,
                        decl.span,
                        format!("`labels` needs an output of one rank-1 tensor `[D]`, but the output is `{output}`"),
                    )
                    .with_label("labels name the classes of an output `[D]`")
                    .with_help("remove `labels`, or declare the output as one vector, e.g. `Output = [3]`"),
                ),
            }
        }
        Some(decl.labels.iter().map(|label| label.text.clone()).collect())
    }

    /// E012: known metric, a time unit, a positive limit, one constraint per metric.
    fn constraints(&mut self, decls: &[&ConstraintDecl]) -> Vec<Constraint> {
        let mut constraints = Vec::new();
        let mut seen: HashMap<Metric, Span> = HashMap::new();
        for decl in decls {
            let errors_before = self.diagnostics.len();
            let metric = Metric::ALL
                .into_iter()
                .find(|metric| metric.name() == decl.metric.text);
            if metric.is_none() {
                let names: Vec<&str> = Metric::ALL.iter().map(|metric| metric.name()).collect();
                let mut diagnostic = Diagnostic::new(
                    Code::E012,
                    decl.metric.span,
                    format!("unknown constraint metric `{}`", decl.metric.text),
                )
                .with_label("not a metric easeml can limit");
                diagnostic = match closest(&decl.metric.text, &names) {
                    Some(suggestion) => {
                        diagnostic.with_help(format!("did you mean `{suggestion}`?"))
                    }
                    None => {
                        diagnostic.with_help("the metrics are `train_time` and `infer_latency`")
                    }
                };
                self.report(diagnostic);
            }
            if metric.is_some() && decl.comparison.text != "<=" {
                self.report(
                    Diagnostic::new(
                        Code::E012,
                        decl.comparison.span,
                        format!(
                            "a constraint is an upper limit, written with `<=`, not `{}`",
                            decl.comparison.text
                        ),
                    )
                    .with_label("expected `<=`")
                    .with_help(format!(
                        "write `constraint {} <= {}{}`",
                        decl.metric.text,
                        decl.limit.text,
                        decl.unit.as_ref().map_or("", |unit| unit.text.as_str())
                    )),
                );
            }
            let unit_seconds = match &decl.unit {
                // An unknown metric is reported above; its unit cannot be judged.
                _ if metric.is_none() => None,
                None => {
                    self.report(
                        Diagnostic::new(
                            Code::E012,
                            decl.limit.span,
                            format!("the limit `{}` has no unit", decl.limit.text),
                        )
                        .with_label("missing unit")
                        .with_help(format!(
                            "add a time unit: `{}ms`, `{}s`, `{}m` or `{}h`",
                            decl.limit.text, decl.limit.text, decl.limit.text, decl.limit.text
                        )),
                    );
                    None
                }
                Some(unit) => match unit.text.as_str() {
                    "ms" => Some(0.001),
                    "s" => Some(1.0),
                    "m" => Some(60.0),
                    "h" => Some(3600.0),
                    other => {
                        let what = metric.map_or("this metric", Metric::name);
                        self.report(
                            Diagnostic::new(
                                Code::E012,
                                unit.span,
                                format!(
                                    "the unit `{other}` does not fit `{what}`, which is a time"
                                ),
                            )
                            .with_label("not a time unit")
                            .with_help("use one of `ms`, `s`, `m` (minutes) or `h`"),
                        );
                        None
                    }
                },
            };
            let value: Option<f64> = decl.limit.text.parse().ok();
            if let Some(value) = value
                && !is_positive_limit(value)
            {
                self.report(
                    Diagnostic::new(
                        Code::E012,
                        decl.limit.span,
                        format!("the limit `{}` is not positive", decl.limit.text),
                    )
                    .with_label("must be greater than 0")
                    .with_help("a constraint is an upper limit: give a positive time, e.g. `30m`"),
                );
            }
            if let Some(metric) = metric {
                if let Some(first) = seen.get(&metric) {
                    self.report(
                        Diagnostic::new(
                            Code::E012,
                            decl.span,
                            format!("a `{}` constraint is given twice", metric.name()),
                        )
                        .with_label("second constraint on the same metric")
                        .with_note(*first, "first given here")
                        .with_help("keep one limit per metric"),
                    );
                } else {
                    seen.insert(metric, decl.span);
                }
            }
            if self.diagnostics.len() != errors_before {
                continue;
            }
            if let (Some(metric), Some(unit_seconds), Some(value)) = (metric, unit_seconds, value) {
                let unit = decl.unit.as_ref().map_or("", |unit| unit.text.as_str());
                constraints.push(Constraint {
                    metric,
                    limit: format!("{}{unit}", decl.limit.text),
                    seconds: value * unit_seconds,
                });
            }
        }
        constraints
    }
}

/// The name of the `position`-th tensor field when unnamed: `field{position}`, or the next free
/// `fieldN` when that name is taken by a declared field or an earlier generated one; with its number.
///
/// The caller passes `max(position, last generated number + 1)`: an earlier unnamed field took the
/// smallest free number at or above its own position, so every number from there up to the one it
/// took is taken, and only declared names remain to be skipped. Each number is tried at most once
/// per type, so naming n fields is linear in n (it was cubic: 2,000 unnamed fields beside 2,000
/// declared `fieldN` took 53 s).
fn unnamed_field_name(from: usize, declared: &HashMap<&str, Span>) -> (String, usize) {
    let mut number = from;
    loop {
        let name = format!("field{number}");
        if !declared.contains_key(name.as_str()) {
            return (name, number);
        }
        number += 1;
    }
}

/// The closest of `options` to `word`, when it is close enough to be a likely typo.
fn closest<'a>(word: &str, options: &[&'a str]) -> Option<&'a str> {
    options
        .iter()
        .map(|option| {
            (
                strsim::damerau_levenshtein(&word.to_lowercase(), &option.to_lowercase()),
                *option,
            )
        })
        .filter(|(distance, option)| *distance <= 2.max(option.len() / 3))
        .min()
        .map(|(_, option)| option)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::{Registry, compile};

    /// The naming rule as it was first written (quadratic per field): for each unnamed tensor field
    /// at 1-based position p, the smallest `fieldN`, N >= p, that no declared field and no earlier
    /// unnamed field has.
    fn reference_names(fields: &[Option<usize>]) -> Vec<String> {
        let declared: Vec<String> = fields
            .iter()
            .flatten()
            .map(|number| format!("field{number}"))
            .collect();
        let mut names: Vec<String> = Vec::new();
        for (index, field) in fields.iter().enumerate() {
            let name = match field {
                Some(number) => format!("field{number}"),
                None => (index + 1..)
                    .map(|number| format!("field{number}"))
                    .find(|name| !declared.contains(name) && !names.contains(name))
                    .unwrap(),
            };
            names.push(name);
        }
        names
    }

    proptest! {
        /// Linear naming gives exactly the names of the rule as first written, whatever mix of
        /// unnamed fields and declared `fieldN` names a type has.
        #[test]
        fn unnamed_fields_are_named_as_the_reference_rule_names_them(
            fields in proptest::collection::vec(proptest::option::of(0usize..24), 1..16)
        ) {
            // Declared names must be distinct (a repeated name is E-something of its own).
            let mut seen = std::collections::HashSet::new();
            let fields: Vec<Option<usize>> = fields
                .into_iter()
                .map(|field| field.filter(|number| seen.insert(*number)))
                .collect();
            let items: Vec<String> = fields
                .iter()
                .map(|field| match field {
                    Some(number) => format!("field{number} :: Tensor[1]"),
                    None => "Tensor[1]".to_owned(),
                })
                .collect();
            let source = format!(
                "{{input: {{[{}], []}}, output: {{[Tensor[1]], []}}}}",
                items.join(", ")
            );
            let compiled = compile(&source, "naming", &Registry::builtin());
            let compiled = compiled.map_err(|diagnostics| {
                TestCaseError::fail(format!("{source}: {diagnostics:?}"))
            })?;
            let names: Vec<String> = compiled
                .schema
                .input
                .fields
                .iter()
                .map(|field| field.name.clone())
                .collect();
            prop_assert_eq!(names, reference_names(&fields));
        }
    }
}
