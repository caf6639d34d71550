//! Turns a pest error into an E001 [`Diagnostic`] in user words: what was expected (named as the
//! user writes it, never as a grammar rule), what was found, and a fix for the common slips.

use pest::error::{Error, ErrorVariant, InputLocation};

use crate::parser::Rule;
use crate::{Code, Diagnostic, Span};

/// Builds the E001 diagnostic for a pest error raised while parsing `source[item_start..]`.
pub(crate) fn syntax_error(source: &str, item_start: usize, error: &Error<Rule>) -> Diagnostic {
    let relative = match error.location {
        InputLocation::Pos(position) => position,
        InputLocation::Span((start, _)) => start,
    };
    let at = (item_start + relative).min(source.len());
    let found = found_token(source, at);
    let expected: Vec<Rule> = match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        ErrorVariant::CustomError { .. } => Vec::new(),
    };
    let mut words: Vec<&'static str> = expected
        .iter()
        .map(|rule| describe(*rule))
        .filter(|word| !word.is_empty())
        .collect();
    if expected.iter().any(|rule| is_item_rule(*rule)) {
        words.retain(|word| !ITEM_WORDS.contains(word));
        words.insert(0, "an item (`type Input ... end`, `Input = [...]`, `{input: ...}`, `app`, `labels` or `constraint`)");
    }
    words.dedup();
    let expected_text = match words.as_slice() {
        [] => "something else".to_owned(),
        [only] => (*only).to_owned(),
        [init @ .., last] => format!("{} or {}", init.join(", "), last),
    };
    let found_text = match &found {
        Some((text, _)) => format!("`{text}`"),
        None => "end of file".to_owned(),
    };
    let span = match &found {
        Some((_, span)) => *span,
        None => Span::new(source.len(), source.len()),
    };
    let mut diagnostic = Diagnostic::new(
        Code::E001,
        span,
        format!("syntax error: expected {expected_text}, found {found_text}"),
    )
    .with_label(format!("expected {expected_text}"));
    if let Some(help) = help_for(&expected, found.as_ref().map(|(text, _)| text.as_str())) {
        diagnostic = diagnostic.with_help(help);
    }
    diagnostic
}

/// The token at `at`: a whole word or number, or one character; `None` at the end of the input.
fn found_token(source: &str, at: usize) -> Option<(String, Span)> {
    let rest = source.get(at..)?;
    let first = rest.chars().next()?;
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let length = if is_word(first) {
        rest.char_indices()
            .find(|(_, c)| !is_word(*c))
            .map_or(rest.len(), |(index, _)| index)
    } else if rest.starts_with("::") || rest.starts_with("<=") {
        2
    } else {
        first.len_utf8()
    };
    let text = match &rest[..length] {
        "\n" | "\r\n" | "\r" => "end of line".to_owned(),
        word => word.chars().take(40).collect(),
    };
    Some((text, Span::new(at, at + length)))
}

/// What the user would call the thing a rule matches.
fn describe(rule: Rule) -> &'static str {
    match rule {
        Rule::kw_type | Rule::type_block => "`type`",
        Rule::kw_end => "`end`",
        Rule::kw_tensor | Rule::tensor_type | Rule::pattern_tensor => "`Tensor[...]`",
        Rule::kw_nullable | Rule::nullable_type => "`Nullable{...}`",
        Rule::kw_input => "`input`",
        Rule::kw_output => "`output`",
        Rule::kw_app | Rule::app_item => "`app`",
        Rule::kw_labels | Rule::labels_item => "`labels`",
        Rule::kw_constraint | Rule::constraint_item => "`constraint`",
        Rule::lbracket | Rule::nonrec_list | Rule::rec_list | Rule::shorthand_dims => "`[`",
        Rule::rbracket => "`]`",
        Rule::lbrace | Rule::formal_program | Rule::formal_type | Rule::pattern_type => "`{`",
        Rule::rbrace => "`}`",
        Rule::comma => "`,`",
        Rule::colon => "`:`",
        Rule::dcolon => "`::`",
        Rule::equals => "`=`",
        Rule::comparison => "`<=`",
        Rule::dim => "a dimension (a whole number such as `3`)",
        Rule::shorthand | Rule::type_name => "`Input` or `Output`",
        Rule::block_field => "a field (`name :: Tensor[...]`)",
        Rule::field_name | Rule::name => "a field name",
        Rule::formal_field => "a field (`Tensor[...]` or `name :: Tensor[...]`)",
        Rule::app_name => "an app name",
        Rule::label_word | Rule::string | Rule::string_body => "a label",
        Rule::metric => "a metric (`train_time` or `infer_latency`)",
        Rule::quantity | Rule::number => "a limit such as `30m`",
        Rule::unit => "a unit (`ms`, `s`, `m` or `h`)",
        Rule::pattern_nonrec | Rule::pattern_rec => "`[`",
        Rule::pattern_dim => "a dimension variable (`A`-`Z`) or a number",
        Rule::pattern_name => "a field-name variable (`a`-`z`)",
        Rule::pattern_any => "`*`",
        Rule::EOI => "end of file",
        // Silent rules: pest never reports them.
        Rule::WHITESPACE
        | Rule::COMMENT
        | Rule::name_char
        | Rule::dim_list
        | Rule::item_at
        | Rule::item
        | Rule::field_type
        | Rule::label
        | Rule::pattern_at => "",
    }
}

/// The words of rules that start an item; they are folded into one "an item (...)" phrase.
const ITEM_WORDS: [&str; 6] = [
    "`type`",
    "`app`",
    "`labels`",
    "`constraint`",
    "`Input` or `Output`",
    "`{`",
];

/// Whether the rule starts a top-level item, so that expecting it means "expected an item".
fn is_item_rule(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_type
            | Rule::kw_app
            | Rule::kw_labels
            | Rule::kw_constraint
            | Rule::type_block
            | Rule::shorthand
            | Rule::formal_program
            | Rule::app_item
            | Rule::labels_item
            | Rule::constraint_item
    )
}

/// A fix for the common slips, when the expectation and the found token make it clear.
fn help_for(expected: &[Rule], found: Option<&str>) -> Option<String> {
    let expects = |rule: Rule| expected.contains(&rule);
    if expects(Rule::kw_end) && matches!(found, None | Some("type" | "Input" | "Output")) {
        return Some("close the `type` block with `end` before this point".to_owned());
    }
    if expects(Rule::dcolon) && found == Some(":") {
        return Some("fields are declared with two colons: `label :: Tensor[2]`".to_owned());
    }
    if expects(Rule::dcolon) {
        return Some(
            "a field is written `name :: Tensor[d1, d2]` or `name :: Nullable{Input}`".to_owned(),
        );
    }
    if expects(Rule::comma)
        && expects(Rule::rbracket)
        && found.is_some_and(|text| text.chars().all(|c| c.is_ascii_digit()))
    {
        return Some("separate the dimensions with commas: `[256, 256, 3]`".to_owned());
    }
    if expects(Rule::dim) && found.is_some_and(|text| text.starts_with(|c: char| c.is_alphabetic()))
    {
        return Some("dimensions are whole numbers, e.g. `Tensor[28, 28]`".to_owned());
    }
    if (expects(Rule::tensor_type) || expects(Rule::kw_tensor))
        && found.is_some_and(|text| text.eq_ignore_ascii_case("tensor"))
    {
        return Some("write `Tensor` with a capital T".to_owned());
    }
    if expects(Rule::equals) && found == Some(":") {
        return Some("the shorthand form is written `Input = [256, 256, 3]`".to_owned());
    }
    if found == Some("\"") {
        return Some("a quoted name must end with `\"` on the same line".to_owned());
    }
    if expects(Rule::comparison) {
        return Some("constraints are upper limits: `constraint train_time <= 30m`".to_owned());
    }
    if expected.iter().any(|rule| is_item_rule(*rule)) {
        return Some("a program defines `Input` and `Output`, e.g. `Input = [256, 256, 3]` and `Output = [3]`".to_owned());
    }
    None
}
