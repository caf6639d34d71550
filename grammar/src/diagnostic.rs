//! `Diagnostic`: the one error type of the front end, shared by the parser (E001) and the checker
//! (E002-E015). Rendering (text, JSON) lives in `easeml-compiler`; this module only holds data.

use std::fmt;

use serde::Serialize;

/// A half-open byte range `start..end` in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub struct Span {
    /// First byte of the range.
    pub start: usize,
    /// One past the last byte of the range.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end` (swapped when given backwards).
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start.min(end),
            end: start.max(end),
        }
    }

    /// The span moved right by `offset` bytes.
    pub fn shifted(self, offset: usize) -> Span {
        Span::new(self.start + offset, self.end + offset)
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// The stable error codes of LANGUAGE.md section 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Code {
    /// Syntax error.
    E001,
    /// No `Input` or no `Output` definition.
    E002,
    /// `Input` or `Output` defined twice.
    E003,
    /// A field name used twice in one type.
    E004,
    /// An invalid field name.
    E005,
    /// A tensor dimension of 0, or a tensor with no dimensions.
    E006,
    /// A tensor with more than 2^31 - 1 elements.
    E007,
    /// A recursive field that points at the other type.
    E008,
    /// A type with no non-recursive field.
    E009,
    /// `labels` that do not fit the output.
    E010,
    /// A label listed twice.
    E011,
    /// A bad `constraint`.
    E012,
    /// No model template accepts the program.
    E013,
    /// `app` given twice, or an invalid app name.
    E014,
    /// The program is too large: a type with more fields than `rules::MAX_FIELDS`, or more errors
    /// than the compiler reports.
    E015,
}

impl Code {
    /// The code as written in messages, e.g. `"E004"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::E001 => "E001",
            Code::E002 => "E002",
            Code::E003 => "E003",
            Code::E004 => "E004",
            Code::E005 => "E005",
            Code::E006 => "E006",
            Code::E007 => "E007",
            Code::E008 => "E008",
            Code::E009 => "E009",
            Code::E010 => "E010",
            Code::E011 => "E011",
            Code::E012 => "E012",
            Code::E013 => "E013",
            Code::E014 => "E014",
            Code::E015 => "E015",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secondary place in the source that explains the primary one ("first defined here").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// Where.
    pub span: Span,
    /// What it says about that place.
    pub message: String,
}

/// One error found in a program: what is wrong, where, and how to fix it when a fix is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The stable error code.
    pub code: Code,
    /// The headline, e.g. "field `a` is defined twice in `Input`".
    pub message: String,
    /// The offending tokens.
    pub span: Span,
    /// A short text shown under the caret; empty when the headline says it all.
    pub label: String,
    /// Other places that explain this one.
    pub notes: Vec<Note>,
    /// How to fix it, when known.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with no label, notes or help yet.
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            message: message.into(),
            span,
            label: String::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Sets the text under the caret.
    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    /// Adds a secondary place.
    pub fn with_note(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.notes.push(Note {
            span,
            message: message.into(),
        });
        self
    }

    /// Sets how to fix it.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }
}
