//! Drives the pest grammar (`eml.pest`) item by item and converts pest pairs into [`crate::ast`].
//!
//! Parsing never fails: each top-level item is parsed on its own, so a syntax error in one item is
//! reported (E001) and parsing resumes at the next line that starts an item. Every resumption moves
//! strictly forward, so the work is linear in the input and always terminates.

use pest::Parser;
use pest::iterators::Pair;

#[cfg(test)]
use crate::ast;
use crate::ast::{
    AppDecl, ConstraintDecl, Dim, Field, FieldType, File, Form, Ident, Item, LabelsDecl, Program,
    TensorType, TypeDef,
};
use crate::syntax_error::syntax_error;
use crate::{Diagnostic, Span};

/// The pest parser generated from `eml.pest`. Private: pest types never leave this crate.
#[derive(pest_derive::Parser)]
#[grammar = "eml.pest"]
pub(crate) struct EmlParser;

/// At most this many syntax errors are reported for one file; past that they are noise.
const MAX_SYNTAX_ERRORS: usize = 50;

/// Parses a whole `.eml` source text into its items, collecting every syntax error (E001).
pub fn parse(source: &str) -> (File, Vec<Diagnostic>) {
    let mut file = File::default();
    let mut diagnostics = Vec::new();
    let mut position = skip_trivia(source, 0);
    while position < source.len() {
        let rest = &source[position..];
        match EmlParser::parse(Rule::item_at, rest) {
            Ok(mut pairs) => {
                let Some(pair) = pairs.find(|pair| pair.as_rule() != Rule::EOI) else {
                    break;
                };
                let end = pair.as_span().end();
                let converter = Converter { offset: position };
                file.items.push(converter.item(pair));
                position = skip_trivia(source, position + end.max(1));
            }
            Err(error) => {
                let diagnostic = syntax_error(source, position, &error);
                let error_at = diagnostic.span.start;
                diagnostics.push(diagnostic);
                let syntax_errors = diagnostics
                    .iter()
                    .filter(|diagnostic| diagnostic.code == crate::Code::E001)
                    .count();
                if syntax_errors >= MAX_SYNTAX_ERRORS {
                    break;
                }
                match next_item_start(source, error_at.max(position + 1)) {
                    Some(next) => position = next,
                    None => break,
                }
            }
        }
    }
    (file, diagnostics)
}

/// Skips whitespace and comments from `position`; returns the first position of a token or the end.
pub(crate) fn skip_trivia(source: &str, mut position: usize) -> usize {
    let bytes = source.as_bytes();
    while position < bytes.len() {
        match bytes[position] {
            b' ' | b'\t' | b'\r' | b'\n' => position += 1,
            b'#' => {
                while position < bytes.len() && bytes[position] != b'\n' {
                    position += 1;
                }
            }
            _ if source[position..].starts_with('\u{FEFF}') => position += '\u{FEFF}'.len_utf8(),
            _ => break,
        }
    }
    position.min(bytes.len())
}

/// The words that begin a top-level item, used to resynchronise after a syntax error.
const ITEM_STARTS: [&str; 6] = ["type", "Input", "Output", "app", "labels", "constraint"];

/// The first line at or after `from` whose first token starts an item.
fn next_item_start(source: &str, from: usize) -> Option<usize> {
    let mut line_start = 0;
    for line in source.split_inclusive('\n') {
        let first_token = line_start + (line.len() - line.trim_start().len());
        line_start += line.len();
        if first_token < from || first_token >= source.len() {
            continue;
        }
        let text = &source[first_token..];
        let starts_item = text.starts_with('{')
            || ITEM_STARTS.iter().any(|word| {
                text.strip_prefix(word).is_some_and(|after| {
                    after
                        .chars()
                        .next()
                        .is_none_or(|next| !(next.is_alphanumeric() || next == '_' || next == '-'))
                })
            });
        if starts_item {
            return Some(first_token);
        }
    }
    None
}

/// Converts pairs of one item into AST nodes, shifting spans by the item's offset in the file.
struct Converter {
    offset: usize,
}

impl Converter {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let span = pair.as_span();
        Span::new(span.start(), span.end()).shifted(self.offset)
    }

    fn ident(&self, pair: &Pair<'_, Rule>) -> Ident {
        Ident {
            text: pair.as_str().to_owned(),
            span: self.span(pair),
            quoted: false,
        }
    }

    fn item(&self, pair: Pair<'_, Rule>) -> Item {
        match pair.as_rule() {
            Rule::shorthand => Item::Type(self.type_def(pair, Form::Shorthand)),
            Rule::type_block => Item::Type(self.type_def(pair, Form::Block)),
            Rule::formal_program => Item::Program(self.formal_program(pair)),
            Rule::app_item => Item::App(self.app(pair)),
            Rule::labels_item => Item::Labels(self.labels(pair)),
            _ => Item::Constraint(self.constraint(pair)),
        }
    }

    /// A type in the shorthand (`Input = [...]`) or block (`type Input ... end`) form.
    fn type_def(&self, pair: Pair<'_, Rule>, form: Form) -> TypeDef {
        let span = self.span(&pair);
        let mut name = None;
        let mut fields = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::type_name => name = Some(self.ident(&inner)),
                Rule::block_field => fields.push(self.block_field(inner)),
                Rule::shorthand_dims => {
                    let tensor = self.tensor(inner);
                    fields.push(Field {
                        name: None,
                        span: tensor.span,
                        ty: FieldType::Tensor(tensor),
                    });
                }
                _ => {}
            }
        }
        TypeDef {
            form,
            name: name.unwrap_or_else(|| missing_ident(span)),
            fields,
            span,
        }
    }

    fn block_field(&self, pair: Pair<'_, Rule>) -> Field {
        let span = self.span(&pair);
        let mut name = None;
        let mut ty = FieldType::Recursive { target: None };
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::field_name => name = Some(self.ident(&inner)),
                Rule::tensor_type => ty = FieldType::Tensor(self.tensor(inner)),
                Rule::nullable_type => {
                    let target = inner
                        .into_inner()
                        .find(|part| part.as_rule() == Rule::type_name)
                        .map(|part| self.ident(&part));
                    ty = FieldType::Recursive { target };
                }
                _ => {}
            }
        }
        Field { name, ty, span }
    }

    /// A tensor from `tensor_type` (`Tensor[...]`) or `shorthand_dims` (`[...]`).
    fn tensor(&self, pair: Pair<'_, Rule>) -> TensorType {
        let span = self.span(&pair);
        let dims = pair
            .into_inner()
            .filter(|inner| inner.as_rule() == Rule::dim)
            .map(|inner| Dim {
                text: inner.as_str().to_owned(),
                span: self.span(&inner),
            })
            .collect();
        TensorType { dims, span }
    }

    fn formal_program(&self, pair: Pair<'_, Rule>) -> Program {
        let span = self.span(&pair);
        let mut names = Vec::new();
        let mut types = Vec::new();
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::kw_input | Rule::kw_output => names.push(self.span(&inner)),
                Rule::formal_type => types.push(inner),
                _ => {}
            }
        }
        let mut defs = names
            .into_iter()
            .zip(types)
            .zip(["Input", "Output"])
            .map(|((name_span, ty), name)| self.formal_type(name, name_span, ty));
        let input = defs.next();
        let output = defs.next();
        let placeholder = |name: &str| TypeDef {
            form: Form::Formal,
            name: Ident {
                text: name.to_owned(),
                span,
                quoted: false,
            },
            fields: Vec::new(),
            span,
        };
        Program {
            input: input.unwrap_or_else(|| placeholder("Input")),
            output: output.unwrap_or_else(|| placeholder("Output")),
            span,
        }
    }

    fn formal_type(&self, name: &str, name_span: Span, pair: Pair<'_, Rule>) -> TypeDef {
        let span = self.span(&pair);
        let mut fields = Vec::new();
        for list in pair.into_inner() {
            match list.as_rule() {
                Rule::nonrec_list => {
                    for field in list
                        .into_inner()
                        .filter(|part| part.as_rule() == Rule::formal_field)
                    {
                        let field_span = self.span(&field);
                        let mut field_name = None;
                        let mut tensor = None;
                        for part in field.into_inner() {
                            match part.as_rule() {
                                Rule::field_name => field_name = Some(self.ident(&part)),
                                Rule::tensor_type => tensor = Some(self.tensor(part)),
                                _ => {}
                            }
                        }
                        let tensor = tensor.unwrap_or(TensorType {
                            dims: Vec::new(),
                            span: field_span,
                        });
                        fields.push(Field {
                            name: field_name,
                            ty: FieldType::Tensor(tensor),
                            span: field_span,
                        });
                    }
                }
                Rule::rec_list => {
                    for field in list
                        .into_inner()
                        .filter(|part| part.as_rule() == Rule::field_name)
                    {
                        let ident = self.ident(&field);
                        fields.push(Field {
                            span: ident.span,
                            name: Some(ident),
                            ty: FieldType::Recursive { target: None },
                        });
                    }
                }
                _ => {}
            }
        }
        TypeDef {
            form: Form::Formal,
            name: Ident {
                text: name.to_owned(),
                span: name_span,
                quoted: false,
            },
            fields,
            span,
        }
    }

    fn app(&self, pair: Pair<'_, Rule>) -> AppDecl {
        let span = self.span(&pair);
        let name = pair
            .into_inner()
            .find_map(|inner| match inner.as_rule() {
                Rule::app_name => Some(self.ident(&inner)),
                Rule::string => Some(self.string(inner)),
                _ => None,
            })
            .unwrap_or_else(|| missing_ident(span));
        AppDecl { name, span }
    }

    fn labels(&self, pair: Pair<'_, Rule>) -> LabelsDecl {
        let span = self.span(&pair);
        let labels = pair
            .into_inner()
            .filter_map(|inner| match inner.as_rule() {
                Rule::label_word => Some(self.ident(&inner)),
                Rule::string => Some(self.string(inner)),
                _ => None,
            })
            .collect();
        LabelsDecl { labels, span }
    }

    /// A double-quoted string, unescaped (`\"` and `\\`; any other escape keeps its character).
    fn string(&self, pair: Pair<'_, Rule>) -> Ident {
        let span = self.span(&pair);
        let body = pair
            .into_inner()
            .next()
            .map(|body| body.as_str())
            .unwrap_or("");
        let mut text = String::with_capacity(body.len());
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => text.push('\n'),
                    Some('t') => text.push('\t'),
                    Some(other) => text.push(other),
                    None => {}
                }
            } else {
                text.push(c);
            }
        }
        Ident {
            text,
            span,
            quoted: true,
        }
    }

    fn constraint(&self, pair: Pair<'_, Rule>) -> ConstraintDecl {
        let span = self.span(&pair);
        let mut metric = None;
        let mut comparison = None;
        let mut limit = None;
        let mut unit = None;
        for inner in pair.into_inner() {
            match inner.as_rule() {
                Rule::metric => metric = Some(self.ident(&inner)),
                Rule::comparison => comparison = Some(self.ident(&inner)),
                Rule::quantity => {
                    for part in inner.into_inner() {
                        match part.as_rule() {
                            Rule::number => limit = Some(self.ident(&part)),
                            Rule::unit => unit = Some(self.ident(&part)),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        ConstraintDecl {
            metric: metric.unwrap_or_else(|| missing_ident(span)),
            comparison: comparison.unwrap_or_else(|| missing_ident(span)),
            limit: limit.unwrap_or_else(|| missing_ident(span)),
            unit,
            span,
        }
    }
}

/// A stand-in for a name the grammar guarantees; never reached for text the grammar accepted.
fn missing_ident(span: Span) -> Ident {
    Ident {
        text: String::new(),
        span,
        quoted: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use crate::ast::DimValue;

    #[test]
    fn the_three_forms_parse_to_typed_items_with_spans() {
        let source =
            "Input = [2, 3]\ntype Output\n  y :: Tensor[4]\n  next :: Nullable{Output}\nend\n";
        let (file, diagnostics) = parse(source);
        assert!(diagnostics.is_empty(), "{diagnostics:#?}");
        insta::assert_debug_snapshot!(file);
        let (file, diagnostics) =
            parse("{input: {[Tensor[1], x :: Tensor[2]], [next]}, output: {[Tensor[3]], []}}");
        assert!(diagnostics.is_empty(), "{diagnostics:#?}");
        let Item::Program(program) = &file.items[0] else {
            panic!("expected a program: {file:#?}")
        };
        assert_eq!(program.input.fields.len(), 3);
        assert_eq!(program.input.name.text, "Input");
        assert_eq!(program.output.fields.len(), 1);
    }

    #[test]
    fn every_syntax_error_is_reported_and_good_items_are_kept() {
        let source = "Input = [3\nOutput = [2]\nlabels = [a b]\napp demo\n";
        let (file, diagnostics) = parse(source);
        let codes: Vec<Code> = diagnostics
            .iter()
            .map(|diagnostic| diagnostic.code)
            .collect();
        assert_eq!(codes, [Code::E001, Code::E001]);
        assert!(
            file.items
                .iter()
                .any(|item| matches!(item, Item::App(app) if app.name.text == "demo"))
        );
        assert!(
            file.items
                .iter()
                .any(|item| matches!(item, Item::Type(def) if def.name.text == "Output"))
        );
    }

    #[test]
    fn errors_name_tokens_in_user_words_never_rule_names() {
        for source in [
            "Input = [3 4]",
            "type Input\n x : Tensor[1]\nend",
            "{input: {[]}",
            "labels = [",
            "constraint x 4",
            "%",
        ] {
            let (_, diagnostics) = parse(source);
            let message = &diagnostics[0].message;
            let rule_names = include_str!("eml.pest")
                .lines()
                .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim()))
                .filter(|name| name.contains('_') || *name == "EOI" || name.starts_with("kw"));
            for rule_name in rule_names.chain(["rbracket", "lbracket", "dcolon", "lbrace"]) {
                assert!(
                    !message.contains(rule_name),
                    "{source:?} names the rule {rule_name}: {message}"
                );
            }
        }
    }

    #[test]
    fn crlf_comments_and_a_byte_order_mark_are_whitespace() {
        let (file, diagnostics) = parse("\u{feff}# é\r\nInput = [1] # c\r\nOutput = [2]\r\n# end");
        assert!(diagnostics.is_empty(), "{diagnostics:#?}");
        assert_eq!(file.items.len(), 2);
    }

    #[test]
    fn dimensions_tell_zero_negative_and_huge_apart() {
        let dim = |text: &str| ast::Dim {
            text: text.to_owned(),
            span: Span::default(),
        };
        assert_eq!(dim("0").value(), DimValue::Value(0));
        assert_eq!(dim("-0").value(), DimValue::Value(0));
        assert_eq!(dim("-7").value(), DimValue::Negative);
        assert_eq!(dim("18446744073709551616").value(), DimValue::Huge);
        assert_eq!(dim("256").value(), DimValue::Value(256));
    }

    #[test]
    fn hostile_inputs_terminate_without_panicking() {
        let long_garbage = "}{][::=,".repeat(5000);
        let deep = "{".repeat(10_000);
        let many_lines = "Input\n".repeat(5000);
        for source in [
            long_garbage.as_str(),
            deep.as_str(),
            many_lines.as_str(),
            "\"",
            "type",
            "\u{0}\u{ffff}",
        ] {
            let (_, diagnostics) = parse(source);
            assert!(!diagnostics.is_empty());
            assert!(diagnostics.len() <= MAX_SYNTAX_ERRORS);
        }
    }
}
