//! Reporting diagnostics: rustc-style text (with annotate-snippets, the renderer rustc itself uses)
//! and the JSON form of LANGUAGE.md section 2.
//!
//! The text form is `error[E004]: ...`, ` --> file.eml:LINE:COL`, the source line, a caret under the
//! span, notes at secondary places, and `= help: ...`. Lines and columns are 1-based; columns count
//! characters, not bytes, so unicode before an error does not shift the caret.

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use serde::Serialize;

pub use easeml_grammar::{Code, Diagnostic, Span};

/// One diagnostic in the JSON form: `{code, message, file, line, column, end_line, end_column, help}`.
/// `end_column` is exclusive, like rustc's JSON `column_end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsonDiagnostic {
    /// The stable code, e.g. `"E004"`.
    pub code: String,
    /// The headline.
    pub message: String,
    /// The file name as given on the command line.
    pub file: String,
    /// 1-based line of the start of the span.
    pub line: usize,
    /// 1-based column (in characters) of the start of the span.
    pub column: usize,
    /// 1-based line of the end of the span.
    pub end_line: usize,
    /// 1-based column (in characters) just past the end of the span.
    pub end_column: usize,
    /// How to fix it, or `null`.
    pub help: Option<String>,
}

/// 1-based line and character column of a byte offset (clamped into the text and onto a char
/// boundary, so any offset is safe).
pub fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = source[line_start..offset].chars().count() + 1;
    (line, column)
}

/// The JSON form of one diagnostic.
pub fn to_json(diagnostic: &Diagnostic, source: &str, file: &str) -> JsonDiagnostic {
    let (line, column) = line_column(source, diagnostic.span.start);
    let (end_line, end_column) = line_column(source, diagnostic.span.end);
    JsonDiagnostic {
        code: diagnostic.code.to_string(),
        message: diagnostic.message.clone(),
        file: file.to_owned(),
        line,
        column,
        end_line,
        end_column,
        help: diagnostic.help.clone(),
    }
}

/// Renders diagnostics rustc-style, one after the other, with ANSI colors when `color` is set.
pub fn render(diagnostics: &[Diagnostic], source: &str, file: &str, color: bool) -> String {
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&renderer.render(&report(diagnostic, source, file)));
        out.push_str("\n\n");
    }
    out
}

/// What `easemlc` prints for a program with errors: every diagnostic ([`render`]) and the closing
/// `error: could not compile `FILE` due to N previous errors` line. The web page shows the same.
pub fn render_failure(diagnostics: &[Diagnostic], source: &str, file: &str, color: bool) -> String {
    let count = diagnostics.len();
    format!(
        "{}error: could not compile `{file}` due to {count} previous error{}\n",
        render(diagnostics, source, file, color),
        if count == 1 { "" } else { "s" }
    )
}

/// The annotate-snippets report of one diagnostic.
fn report<'a>(diagnostic: &'a Diagnostic, source: &'a str, file: &'a str) -> Vec<Group<'a>> {
    let span = clamp(diagnostic.span, source);
    let mut snippet = Snippet::source(source).path(file).annotation(
        AnnotationKind::Primary
            .span(span)
            .label(non_empty(&diagnostic.label)),
    );
    for note in &diagnostic.notes {
        snippet = snippet.annotation(
            AnnotationKind::Context
                .span(clamp(note.span, source))
                .label(non_empty(&note.message)),
        );
    }
    let mut group = Level::ERROR
        .primary_title(diagnostic.message.as_str())
        .id(diagnostic.code.as_str())
        .element(snippet);
    if let Some(help) = &diagnostic.help {
        group = group.element(Level::HELP.message(help.as_str()));
    }
    vec![group]
}

fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// A span made safe for the renderer: inside the text and on char boundaries.
fn clamp(span: Span, source: &str) -> std::ops::Range<usize> {
    let fix = |mut offset: usize| {
        offset = offset.min(source.len());
        while !source.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    };
    fix(span.start)..fix(span.end)
}
