//! easemlc's library: the `.eml` front end after parsing.
//!
//! The stages are visible in the API (see ARCHITECTURE.md): [`easeml_grammar::parse`] (text to AST),
//! [`check::check`] (AST to [`Schema`], E002-E015), [`Registry::matching`] (template matching) and
//! [`candidates::candidates`] (augmentation). [`compile`] runs them all and collects every
//! diagnostic; [`explain::Explanation`] and [`diagnostic`] turn the result into reports.

pub mod candidates;
pub mod check;
pub mod codegen;
pub mod diagnostic;
pub mod explain;
pub mod rust_front;
pub mod templates;

pub use easeml_grammar::{Code, Diagnostic, Span};
/// The schema model (`easeml-schema`), re-exported: the compiler produces its types.
pub use easeml_schema as schema;
pub use easeml_schema::{Candidate, Normalization, Schema};
pub use templates::{Registry, Template};

/// A program that passed every check: its schema, the chosen template, and the candidates.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The checked program.
    pub schema: Schema,
    /// Every template that accepts the program, in registry order; the first is the chosen one.
    pub matching_templates: Vec<Template>,
    /// The candidate models of the chosen template, augmented.
    pub candidates: Vec<Candidate>,
    /// The candidates' models that go beyond the paper's list (registry `[beyond_paper]`), with
    /// the source of each.
    pub beyond_paper: std::collections::BTreeMap<String, String>,
}

impl Compiled {
    /// The compiled program of an already checked schema: the templates of `registry` that accept
    /// it and the first one's candidates; `None` when no template accepts it (E013).
    pub fn from_schema(schema: Schema, registry: &Registry) -> Option<Compiled> {
        let matching_templates: Vec<Template> =
            registry.matching(&schema).into_iter().cloned().collect();
        let chosen = matching_templates.first()?;
        let candidates =
            candidates::candidates(chosen, &registry.normalization_ks, &registry.not_normalized);
        let beyond_paper = chosen
            .models
            .iter()
            .filter_map(|model| Some((model.clone(), registry.beyond_paper.get(model)?.clone())))
            .collect();
        Some(Compiled {
            schema,
            matching_templates,
            candidates,
            beyond_paper,
        })
    }

    /// The chosen template (the first that matches).
    pub fn template(&self) -> &Template {
        // `compile` only builds a `Compiled` with at least one matching template.
        &self.matching_templates[0]
    }

    /// The workload name, e.g. `image_classification`.
    pub fn workload(&self) -> &str {
        &self.template().workload
    }
}

/// Parses, checks and matches a program. `default_app` is the app name used when the program has no
/// `app` item (usually the file stem; it is made valid). On failure, every diagnostic found, in
/// source order.
pub fn compile(
    source: &str,
    default_app: &str,
    registry: &Registry,
) -> Result<Compiled, Vec<Diagnostic>> {
    let (file, diagnostics) = easeml_grammar::parse(source);
    compile_ast(&file, diagnostics, default_app, registry)
}

/// [`compile`] over the bytes of a file (`easemlc`'s files and standard input, the web page's
/// uploads): text that is not UTF-8 is one E001 diagnostic at the first invalid byte. Returns the
/// text read (lossily, for rendering the diagnostics) with the outcome.
pub fn compile_bytes(
    bytes: &[u8],
    default_app: &str,
    registry: &Registry,
) -> (String, Result<Compiled, Vec<Diagnostic>>) {
    match std::str::from_utf8(bytes) {
        Ok(source) => (source.to_owned(), compile(source, default_app, registry)),
        Err(error) => {
            let source = String::from_utf8_lossy(bytes).into_owned();
            let at = error.valid_up_to();
            let end = source[at..]
                .chars()
                .next()
                .map_or(at, |c| at + c.len_utf8());
            let diagnostic = Diagnostic::new(
                Code::E001,
                Span::new(at, end),
                "the file is not valid UTF-8 text",
            )
            .with_label("invalid byte here")
            .with_help("save the file as UTF-8");
            (source, Err(vec![diagnostic]))
        }
    }
}

/// The most diagnostics one compile reports, the first by position; past it, one E015 says how
/// many there were. Rendering and placing each diagnostic costs time in the size of the program, so
/// thousands of them (a 256 KiB program can make 35,000) took seconds to minutes to report.
pub const MAX_DIAGNOSTICS: usize = 100;

/// Checks and matches an already parsed program (the `.eml` parser's or the macro front end's);
/// `syntax_diagnostics` are the errors found while building `file`.
pub fn compile_ast(
    file: &easeml_grammar::ast::File,
    syntax_diagnostics: Vec<Diagnostic>,
    default_app: &str,
    registry: &Registry,
) -> Result<Compiled, Vec<Diagnostic>> {
    let mut diagnostics = syntax_diagnostics;
    let (schema, check_diagnostics) = check::check(file, default_app, !diagnostics.is_empty());
    diagnostics.extend(check_diagnostics);
    diagnostics.sort_by_key(|diagnostic| (diagnostic.span.start, diagnostic.code));
    if diagnostics.len() > MAX_DIAGNOSTICS {
        let count = diagnostics.len();
        let first_unreported = diagnostics[MAX_DIAGNOSTICS].span;
        diagnostics.truncate(MAX_DIAGNOSTICS);
        diagnostics.push(
            Diagnostic::new(
                Code::E015,
                first_unreported,
                format!(
                    "too many errors: {count} in all, and only the first {MAX_DIAGNOSTICS} are reported"
                ),
            )
            .with_label("the errors from here on are not reported")
            .with_help("fix the errors above and compile again"),
        );
    }
    let schema = match schema {
        Some(schema) if diagnostics.is_empty() => schema,
        _ => return Err(diagnostics),
    };
    let system_type = schema.system_type();
    let Some(compiled) = Compiled::from_schema(schema, registry) else {
        return Err(vec![
            Diagnostic::new(
                Code::E013,
                input_definition_span(file),
                format!("no model template accepts `{system_type}`"),
            )
            .with_label("no template in the registry matches this program")
            .with_help("add a template for this type to the registry, or compile with the default registry"),
        ]);
    };
    Ok(compiled)
}

/// Where the program's `Input` is defined (its name), for diagnostics about the whole program.
fn input_definition_span(file: &easeml_grammar::ast::File) -> Span {
    use easeml_grammar::ast::Item;
    file.items
        .iter()
        .find_map(|item| match item {
            Item::Type(def) if def.name.text == "Input" => Some(def.name.span),
            Item::Program(program) => Some(program.input.name.span),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past [`MAX_DIAGNOSTICS`] errors, the first are reported and one E015 says how many there were.
    #[test]
    fn a_program_with_too_many_errors_reports_the_first_and_a_count() {
        let program = format!(
            "type Input\n{}end\nOutput = [2]\n",
            "  x :: Tensor[1]\n".repeat(150)
        );
        let diagnostics = compile(&program, "app", &Registry::builtin()).unwrap_err();
        assert_eq!(diagnostics.len(), MAX_DIAGNOSTICS + 1);
        assert!(
            diagnostics[..MAX_DIAGNOSTICS]
                .iter()
                .all(|diagnostic| diagnostic.code == Code::E004)
        );
        let last = &diagnostics[MAX_DIAGNOSTICS];
        assert_eq!(last.code, Code::E015);
        assert_eq!(
            last.message,
            "too many errors: 149 in all, and only the first 100 are reported"
        );
        // The 101st duplicate `x` (line 103) is where the unreported errors start.
        assert_eq!(diagnostic::line_column(&program, last.span.start), (103, 3));
        // Exactly MAX_DIAGNOSTICS errors are all reported.
        let program = format!(
            "type Input\n{}end\nOutput = [2]\n",
            "  x :: Tensor[1]\n".repeat(101)
        );
        let diagnostics = compile(&program, "app", &Registry::builtin()).unwrap_err();
        assert_eq!(diagnostics.len(), MAX_DIAGNOSTICS);
        assert!(
            diagnostics
                .iter()
                .all(|diagnostic| diagnostic.code == Code::E004)
        );
    }
}
