//! Template patterns (LANGUAGE.md section 4), parsed with the same grammar file as programs.
//!
//! A pattern is a system data type with variables: `{[Tensor[A,B,C]], []}`, `{[Tensor[A], *], [a]}`,
//! `{[*], [*]}`. Matching lives in `easeml-compiler`; this module only reads patterns.

use std::fmt;

use pest::Parser;
use pest::iterators::Pair;
use serde::Serialize;

use crate::Diagnostic;
use crate::parser::{EmlParser, Rule};
use crate::syntax_error::syntax_error;

/// A pattern over one data type: its non-recursive list and its recursive list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DataTypePattern {
    /// The pattern of the non-recursive (tensor) fields.
    pub tensors: ListPattern<TensorPattern>,
    /// The pattern of the recursive field names.
    pub recursive: ListPattern<NamePattern>,
}

/// A list pattern: fixed leading elements, then optionally `*` for any number of further ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListPattern<T> {
    /// The elements that must be there, in order.
    pub elements: Vec<T>,
    /// Whether `*` follows them (zero or more further elements of any kind).
    pub rest: bool,
}

/// `Tensor[A, B, 3]`, `Tensor[A, *]`.
pub type TensorPattern = ListPattern<DimPattern>;

/// One dimension in a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DimPattern {
    /// `A`..`Z`: any natural number; the same letter must bind the same value in one template.
    Variable(char),
    /// A literal value.
    Exactly(u64),
}

/// `a`..`z` in a recursive list: any one field name; the same letter binds the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NamePattern(pub char);

/// Parses a pattern; errors come back as E001 diagnostics with spans into `text`.
pub fn parse_pattern(text: &str) -> Result<DataTypePattern, Diagnostic> {
    let mut pairs =
        EmlParser::parse(Rule::pattern_at, text).map_err(|error| syntax_error(text, 0, &error))?;
    let pair = pairs
        .find(|pair| pair.as_rule() == Rule::pattern_type)
        .ok_or_else(|| {
            Diagnostic::new(
                crate::Code::E001,
                crate::Span::new(0, text.len()),
                "empty pattern",
            )
        })?;
    let mut lists = pair
        .into_inner()
        .filter(|inner| matches!(inner.as_rule(), Rule::pattern_nonrec | Rule::pattern_rec));
    let tensors = lists
        .next()
        .map(|list| list_pattern(list, tensor_pattern))
        .unwrap_or_else(ListPattern::any);
    let recursive = lists
        .next()
        .map(|list| {
            list_pattern(list, |name| {
                NamePattern(name.as_str().chars().next().unwrap_or('a'))
            })
        })
        .unwrap_or_else(ListPattern::any);
    Ok(DataTypePattern { tensors, recursive })
}

fn list_pattern<T>(pair: Pair<'_, Rule>, element: impl Fn(Pair<'_, Rule>) -> T) -> ListPattern<T> {
    let mut list = ListPattern {
        elements: Vec::new(),
        rest: false,
    };
    for inner in pair.into_inner() {
        match inner.as_rule() {
            Rule::pattern_any => list.rest = true,
            Rule::pattern_tensor | Rule::pattern_name | Rule::pattern_dim => {
                list.elements.push(element(inner))
            }
            _ => {}
        }
    }
    list
}

fn tensor_pattern(pair: Pair<'_, Rule>) -> TensorPattern {
    list_pattern(pair, |dim| {
        let text = dim.as_str();
        match text.parse::<u64>() {
            Ok(value) => DimPattern::Exactly(value),
            Err(_) => DimPattern::Variable(text.chars().next().unwrap_or('A')),
        }
    })
}

impl<T> ListPattern<T> {
    /// `[*]`: any list.
    pub fn any() -> ListPattern<T> {
        ListPattern {
            elements: Vec::new(),
            rest: true,
        }
    }
}

impl<T: fmt::Display> fmt::Display for ListPattern<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (index, element) in self.elements.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{element}")?;
        }
        if self.rest {
            if !self.elements.is_empty() {
                f.write_str(", ")?;
            }
            f.write_str("*")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for DimPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimPattern::Variable(letter) => write!(f, "{letter}"),
            DimPattern::Exactly(value) => write!(f, "{value}"),
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for DataTypePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        f.write_str("[")?;
        for (index, tensor) in self.tensors.elements.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "Tensor{}", tensor.to_string().replace(", ", ","))?;
        }
        if self.tensors.rest {
            if !self.tensors.elements.is_empty() {
                f.write_str(", ")?;
            }
            f.write_str("*")?;
        }
        write!(f, "], {}}}", self.recursive)
    }
}
