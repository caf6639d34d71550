//! The `#[easeml_schema]` front end: Rust items to the same AST, the same checks and the same
//! generated types as `easemlc` (the `easeml-macros` crate is a thin wrapper over [`expand`]).
//!
//! Two forms:
//! - `#[easeml_schema(labels = [dog, cat], constraint(train_time <= 30m))] mod pets { pub struct
//!   Input { pub image: Tensor<64, 64, 3> } pub struct Output(Tensor<2>); }`: structs named `Input`
//!   and `Output`, tensor fields written `Tensor<d1, d2, ...>` (or `#[shape(d1, d2)] field: Tensor`),
//!   recursive fields `Option<Box<Input>>`, tuple fields unnamed like the shorthand form.
//! - `#[easeml_schema(file = "pets.eml")] mod pets {}`: the program is read from a `.eml` file
//!   relative to the crate's manifest dir; its diagnostics carry the file's line and column.
//!
//! Rust items are lowered into [`easeml_grammar::ast`] with synthetic spans (an index into a table
//! of token spans), so every check of [`crate::check`] runs unchanged and each diagnostic comes back
//! as a `syn::Error` on the offending tokens, prefixed with its code. On error the module is still
//! emitted with stub `Input` / `Output` types and the client, so the user sees the real error, not
//! ten follow-ups.
//!
//! The module's items are exactly those of the crate `easemlc` generates for the same program
//! ([`inline_items`]): [`rust_types`](crate::codegen::rust_types) (`APP`, `SYSTEM_TYPE`, `Input`,
//! `Output`, `Label`) and [`client_items`](crate::codegen::client_items) (`MANIFEST`, `SERVER`,
//! `Client`), with the manifest (`easeml.json`, from [`manifest`](crate::codegen::manifest))
//! computed here at compile time and emitted as a string literal. The macro has no `--server` option:
//! `SERVER` is `None`, and `EASEML_SERVER` picks a server at run time.

use std::path::{Path, PathBuf};

use easeml_grammar::ast::{
    AppDecl, ConstraintDecl, Dim, Field, FieldType, File, Form, Ident as AstIdent, Item,
    LabelsDecl, TensorType, TypeDef,
};
use easeml_grammar::{Code, Diagnostic, Span as AstSpan};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::ext::IdentExt as _;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Token, bracketed, parenthesized};

use crate::codegen::{Answers, ManifestSource, client_tokens, inline_items};
use crate::diagnostic::line_column;
use crate::{Compiled, Registry, compile, compile_ast};

/// Expands `#[easeml_schema(attr)] item`; errors become `compile_error!`s next to a stub module.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let module = match syn::parse2::<syn::ItemMod>(item) {
        Ok(module) => module,
        Err(error) => {
            return syn::Error::new(
                error.span(),
                format!("#[easeml_schema] goes on an inline module, e.g. `mod myapp {{ pub struct Input {{ ... }} ... }}`: {error}"),
            )
            .to_compile_error();
        }
    };
    match lower_module(attr, &module) {
        Ok(lowered) => {
            let items = inline_items(&lowered.compiled);
            emit(&module, items, lowered.tracked_file)
        }
        Err(error) => {
            let client = client_tokens(Answers::Values, ManifestSource::Literal(""), None);
            let stub = quote! {
                use ::easeml_runtime::__private as easeml;

                /// Stub emitted because the schema has errors.
                #[derive(easeml::serde::Serialize)]
                #[serde(crate = "easeml::serde")]
                pub struct Input;
                /// Stub emitted because the schema has errors.
                #[derive(easeml::serde::Serialize, easeml::serde::Deserialize)]
                #[serde(crate = "easeml::serde")]
                pub struct Output;
                #client
            };
            let mut tokens = error.to_compile_error();
            tokens.extend(emit(&module, stub, None));
            tokens
        }
    }
}

/// A module lowered and checked.
pub struct Lowered {
    /// The compiled program, exactly as `easemlc` would compile the same schema.
    pub compiled: Compiled,
    /// The `.eml` file read by the `file = "..."` form (tracked with `include_str!`).
    pub tracked_file: Option<PathBuf>,
}

fn emit(module: &syn::ItemMod, body: TokenStream, tracked_file: Option<PathBuf>) -> TokenStream {
    let attrs = &module.attrs;
    let vis = &module.vis;
    let ident = &module.ident;
    let track = tracked_file.map(|path| {
        let path = path.display().to_string();
        quote!(
            const _: &str = ::core::include_str!(#path);
        )
    });
    quote! {
        #(#attrs)*
        #vis mod #ident {
            #track
            #body
        }
    }
}

/// Lowers and checks a module with the macro's arguments; all errors are combined into one.
pub fn lower_module(attr: TokenStream, module: &syn::ItemMod) -> syn::Result<Lowered> {
    let arguments = Arguments::parse.parse2(attr)?;
    let registry = Registry::builtin();
    if let Some((path_literal, path)) = &arguments.file {
        if module
            .content
            .as_ref()
            .is_some_and(|(_, items)| !items.is_empty())
        {
            return Err(syn::Error::new(
                module.ident.span(),
                "with `file = \"...\"` the module must be empty: its types come from the file",
            ));
        }
        if arguments.app.is_some()
            || arguments.labels.is_some()
            || !arguments.constraints.is_empty()
        {
            return Err(syn::Error::new(
                path_literal.span(),
                "with `file = \"...\"`, write `app`, `labels` and `constraint` in the .eml file",
            ));
        }
        return lower_file(path_literal, path, &registry);
    }
    let Some((_, items)) = &module.content else {
        return Err(syn::Error::new(
            module.ident.span(),
            "#[easeml_schema] needs an inline module: `mod myapp { ... }` (or `mod myapp {}` with `file = \"...\"`)",
        ));
    };
    let mut lowering = Lowering::new(module.ident.span());
    let mut file = File::default();
    for item in items {
        match item {
            syn::Item::Struct(item) => {
                if let Some(def) = lowering.structure(item)? {
                    file.items.push(Item::Type(def));
                }
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "E001: only the structs `Input` and `Output` may appear in an #[easeml_schema] module",
                ));
            }
        }
    }
    lowering.arguments(&arguments, &mut file);
    let default_app = module.ident.to_string();
    compile_ast(
        &file,
        Vec::new(),
        default_app.trim_start_matches("r#"),
        &registry,
    )
    .map(|compiled| Lowered {
        compiled,
        tracked_file: None,
    })
    .map_err(|diagnostics| lowering.errors(&diagnostics))
}

fn lower_file(literal: &syn::LitStr, relative: &str, registry: &Registry) -> syn::Result<Lowered> {
    let base =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    let path = base.join(relative);
    let source = std::fs::read_to_string(&path).map_err(|error| {
        syn::Error::new(
            literal.span(),
            format!("cannot read `{relative}` (the path is relative to the directory of the crate's Cargo.toml): {error}"),
        )
    })?;
    let stem = Path::new(relative)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    match compile(&source, &stem, registry) {
        Ok(compiled) => Ok(Lowered {
            compiled,
            tracked_file: Some(path),
        }),
        Err(diagnostics) => {
            let mut combined: Option<syn::Error> = None;
            for diagnostic in &diagnostics {
                let (line, column) = line_column(&source, diagnostic.span.start);
                let message = format!("{}:{line}:{column}: {}", relative, message_of(diagnostic));
                let error = syn::Error::new(literal.span(), message);
                match &mut combined {
                    Some(combined) => combined.combine(error),
                    None => combined = Some(error),
                }
            }
            Err(combined.unwrap_or_else(|| syn::Error::new(literal.span(), "invalid program")))
        }
    }
}

/// `E004: field `x` is defined twice in `Input`` + the help, as one message.
fn message_of(diagnostic: &Diagnostic) -> String {
    let mut message = format!("{}: {}", diagnostic.code, diagnostic.message);
    if !diagnostic.label.is_empty() && !diagnostic.message.contains(&diagnostic.label) {
        message.push_str(&format!(" ({})", diagnostic.label));
    }
    if let Some(help) = &diagnostic.help {
        message.push_str(&format!("\n\n= help: {help}"));
    }
    message
}

/// The arguments of `#[easeml_schema(...)]`.
#[derive(Default)]
struct Arguments {
    app: Option<(syn::Ident, String, Span)>,
    file: Option<(syn::LitStr, String)>,
    labels: Option<(Span, Vec<LabelSyntax>)>,
    constraints: Vec<ConstraintSyntax>,
}

/// One label as written: its text, where, and whether it was a string literal.
struct LabelSyntax {
    text: String,
    span: Span,
    quoted: bool,
}

struct ConstraintSyntax {
    span: Span,
    metric: (String, Span),
    comparison: (String, Span),
    limit: (String, Span),
    unit: Option<(String, Span)>,
}

impl Arguments {
    fn parse(input: ParseStream<'_>) -> syn::Result<Arguments> {
        let mut arguments = Arguments::default();
        while !input.is_empty() {
            let key: syn::Ident = input.call(syn::Ident::parse_any)?;
            match key.to_string().as_str() {
                "app" => {
                    input.parse::<Token![=]>()?;
                    let (name, span) = if input.peek(syn::LitStr) {
                        let literal: syn::LitStr = input.parse()?;
                        (literal.value(), literal.span())
                    } else {
                        let ident: syn::Ident = input.call(syn::Ident::parse_any)?;
                        (ident.unraw().to_string(), ident.span())
                    };
                    arguments.app = Some((key, name, span));
                }
                "file" => {
                    input.parse::<Token![=]>()?;
                    let literal: syn::LitStr = input.parse()?;
                    let value = literal.value();
                    arguments.file = Some((literal, value));
                }
                "labels" => {
                    input.parse::<Token![=]>()?;
                    let content;
                    let brackets = bracketed!(content in input);
                    let mut labels = Vec::new();
                    while !content.is_empty() {
                        if content.peek(syn::LitStr) {
                            let literal: syn::LitStr = content.parse()?;
                            labels.push(LabelSyntax {
                                text: literal.value(),
                                span: literal.span(),
                                quoted: true,
                            });
                        } else if content.peek(syn::LitInt) {
                            let literal: syn::LitInt = content.parse()?;
                            labels.push(LabelSyntax {
                                text: literal.to_string(),
                                span: literal.span(),
                                quoted: false,
                            });
                        } else {
                            let ident: syn::Ident = content.call(syn::Ident::parse_any)?;
                            labels.push(LabelSyntax {
                                text: ident.to_string(),
                                span: ident.span(),
                                quoted: false,
                            });
                        }
                        if content.is_empty() {
                            break;
                        }
                        content.parse::<Token![,]>()?;
                    }
                    arguments.labels = Some((brackets.span.join(), labels));
                }
                "constraint" => {
                    let content;
                    let parens = parenthesized!(content in input);
                    let metric: syn::Ident = content.call(syn::Ident::parse_any)?;
                    let comparison = parse_comparison(&content)?;
                    let negative = content.parse::<Option<Token![-]>>()?.is_some();
                    let literal: syn::Lit = content.parse()?;
                    let (digits, suffix) = match &literal {
                        syn::Lit::Int(int) => {
                            (int.base10_digits().to_owned(), int.suffix().to_owned())
                        }
                        syn::Lit::Float(float) => {
                            (float.base10_digits().to_owned(), float.suffix().to_owned())
                        }
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "E012: a limit is a number with a unit, e.g. `30m`",
                            ));
                        }
                    };
                    let digits = if negative {
                        format!("-{digits}")
                    } else {
                        digits
                    };
                    arguments.constraints.push(ConstraintSyntax {
                        span: parens.span.join(),
                        metric: (metric.to_string(), metric.span()),
                        comparison,
                        limit: (digits, literal.span()),
                        unit: (!suffix.is_empty()).then(|| (suffix, literal.span())),
                    });
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown argument `{other}`: expected `app`, `labels`, `constraint(...)` or `file`"
                        ),
                    ));
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(arguments)
    }
}

fn parse_comparison(input: ParseStream<'_>) -> syn::Result<(String, Span)> {
    let lookahead = input.lookahead1();
    macro_rules! try_token {
        ($($token:tt)*) => {
            $(
                if lookahead.peek(Token![$token]) {
                    let token: Token![$token] = input.parse()?;
                    return Ok((stringify!($token).to_owned(), token.span()));
                }
            )*
        };
    }
    try_token!(<= >= == < > =);
    Err(lookahead.error())
}

/// Builds AST nodes with synthetic spans: span `i..i+1` stands for `token_spans[i]`.
struct Lowering {
    token_spans: Vec<Span>,
}

impl Lowering {
    fn new(module_span: Span) -> Lowering {
        // Index 0 is the module name: whole-program diagnostics (E002, E013) point at it.
        Lowering {
            token_spans: vec![module_span],
        }
    }

    fn span(&mut self, span: Span) -> AstSpan {
        let index = self.token_spans.len();
        self.token_spans.push(span);
        AstSpan::new(index, index + 1)
    }

    fn ident(&mut self, text: String, span: Span, quoted: bool) -> AstIdent {
        AstIdent {
            text,
            span: self.span(span),
            quoted,
        }
    }

    fn structure(&mut self, item: &syn::ItemStruct) -> syn::Result<Option<TypeDef>> {
        let name = item.ident.to_string();
        if name != "Input" && name != "Output" {
            return Err(syn::Error::new(
                item.ident.span(),
                format!(
                    "E001: expected `Input` or `Output`, found `{name}`: an #[easeml_schema] module defines exactly these two structs"
                ),
            ));
        }
        if !item.generics.params.is_empty() {
            return Err(syn::Error::new(
                item.generics.span(),
                "E001: `Input` and `Output` take no generic parameters",
            ));
        }
        let name = self.ident(name, item.ident.span(), false);
        let mut fields = Vec::new();
        for field in item.fields.iter() {
            let field_name = field.ident.as_ref().map(|ident| {
                let text = ident.to_string();
                self.ident(
                    text.trim_start_matches("r#").to_owned(),
                    ident.span(),
                    false,
                )
            });
            let shape_attribute = field
                .attrs
                .iter()
                .find(|attr| attr.path().is_ident("shape"));
            let ty = self.field_type(&field.ty, shape_attribute)?;
            let span = self.span(field.span());
            fields.push(Field {
                name: field_name,
                ty,
                span,
            });
        }
        let span = self.span(item.span());
        Ok(Some(TypeDef {
            form: Form::Block,
            name,
            fields,
            span,
        }))
    }

    fn field_type(
        &mut self,
        ty: &syn::Type,
        shape_attribute: Option<&syn::Attribute>,
    ) -> syn::Result<FieldType> {
        let tokens = ty.to_token_stream();
        let type_span = ty.span();
        let parsed = (|input: ParseStream<'_>| parse_field_syntax(input)).parse2(tokens)?;
        match parsed {
            FieldSyntax::Tensor(dims) => {
                let dims = match (dims, shape_attribute) {
                    (Some(_), Some(attribute)) => {
                        return Err(syn::Error::new(
                            attribute.meta.span(),
                            "the shape is given twice: write either `Tensor<28, 28>` or `#[shape(28, 28)] field: Tensor`",
                        ));
                    }
                    (Some(dims), None) => dims,
                    (None, Some(attribute)) => attribute.parse_args_with(parse_dims)?,
                    (None, None) => Vec::new(),
                };
                let dims = dims
                    .into_iter()
                    .map(|(text, span)| Dim {
                        text,
                        span: self.span(span),
                    })
                    .collect();
                Ok(FieldType::Tensor(TensorType {
                    dims,
                    span: self.span(type_span),
                }))
            }
            FieldSyntax::Recursive(target, span) => Ok(FieldType::Recursive {
                target: Some(self.ident(target, span, false)),
            }),
        }
    }

    fn arguments(&mut self, arguments: &Arguments, file: &mut File) {
        if let Some((key, name, span)) = &arguments.app {
            let name = self.ident(name.clone(), *span, false);
            let span = self.span(key.span());
            file.items.push(Item::App(AppDecl { name, span }));
        }
        if let Some((span, labels)) = &arguments.labels {
            let labels = labels
                .iter()
                .map(|label| self.ident(label.text.clone(), label.span, label.quoted))
                .collect();
            let span = self.span(*span);
            file.items.push(Item::Labels(LabelsDecl { labels, span }));
        }
        for constraint in &arguments.constraints {
            let metric = self.ident(constraint.metric.0.clone(), constraint.metric.1, false);
            let comparison = self.ident(
                constraint.comparison.0.clone(),
                constraint.comparison.1,
                false,
            );
            let limit = self.ident(constraint.limit.0.clone(), constraint.limit.1, false);
            let unit = constraint
                .unit
                .as_ref()
                .map(|(text, span)| self.ident(text.clone(), *span, false));
            let span = self.span(constraint.span);
            file.items.push(Item::Constraint(ConstraintDecl {
                metric,
                comparison,
                limit,
                unit,
                span,
            }));
        }
    }

    /// The diagnostics as one combined `syn::Error`, each on its tokens.
    fn errors(&self, diagnostics: &[Diagnostic]) -> syn::Error {
        let mut combined: Option<syn::Error> = None;
        for diagnostic in diagnostics {
            let span = self
                .token_spans
                .get(diagnostic.span.start)
                .copied()
                .unwrap_or_else(Span::call_site);
            let error = syn::Error::new(span, message_of(diagnostic));
            match &mut combined {
                Some(combined) => combined.combine(error),
                None => combined = Some(error),
            }
        }
        combined.unwrap_or_else(|| {
            syn::Error::new(Span::call_site(), format!("{}: invalid schema", Code::E001))
        })
    }
}

enum FieldSyntax {
    /// `Tensor<...>` (dims given) or bare `Tensor` (dims from `#[shape]`).
    Tensor(Option<Vec<(String, Span)>>),
    /// `Option<Box<Name>>`.
    Recursive(String, Span),
}

fn parse_field_syntax(input: ParseStream<'_>) -> syn::Result<FieldSyntax> {
    let head: syn::Ident = input.parse()?;
    match head.to_string().as_str() {
        "Tensor" => {
            if input.is_empty() {
                return Ok(FieldSyntax::Tensor(None));
            }
            input.parse::<Token![<]>()?;
            let mut dims = Vec::new();
            while !input.peek(Token![>]) {
                dims.push(parse_dim(input)?);
                if input.peek(Token![>]) {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            input.parse::<Token![>]>()?;
            Ok(FieldSyntax::Tensor(Some(dims)))
        }
        "Option" => {
            input.parse::<Token![<]>()?;
            let boxed: syn::Ident = input.parse()?;
            if boxed != "Box" {
                return Err(syn::Error::new(
                    boxed.span(),
                    "E001: a recursive field is written `Option<Box<Input>>` (or `Option<Box<Output>>` in `Output`)",
                ));
            }
            input.parse::<Token![<]>()?;
            let target: syn::Ident = input.parse()?;
            input.parse::<Token![>]>()?;
            input.parse::<Token![>]>()?;
            Ok(FieldSyntax::Recursive(target.to_string(), target.span()))
        }
        _ => Err(syn::Error::new(
            head.span(),
            "E001: expected a tensor `Tensor<d1, d2, ...>` or a recursive field `Option<Box<Input>>`",
        )),
    }
}

fn parse_dims(input: ParseStream<'_>) -> syn::Result<Vec<(String, Span)>> {
    let mut dims = Vec::new();
    while !input.is_empty() {
        dims.push(parse_dim(input)?);
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(dims)
}

/// A dimension: a whole number, possibly negative (the checker reports E006 for that).
fn parse_dim(input: ParseStream<'_>) -> syn::Result<(String, Span)> {
    let minus = input.parse::<Option<Token![-]>>()?;
    let literal: syn::LitInt = input.parse().map_err(|error| {
        syn::Error::new(
            error.span(),
            "E001: a dimension is a whole number, e.g. `Tensor<28, 28>`",
        )
    })?;
    if !literal.suffix().is_empty() {
        return Err(syn::Error::new(
            literal.span(),
            "E001: write dimensions without a type suffix, e.g. `28`",
        ));
    }
    let text = match minus {
        Some(_) => format!("-{}", literal.base10_digits()),
        None => literal.base10_digits().to_owned(),
    };
    Ok((text, literal.span()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower(attr: &str, item: &str) -> syn::Result<Lowered> {
        let module: syn::ItemMod = syn::parse_str(item).unwrap();
        lower_module(attr.parse().unwrap(), &module)
    }

    fn error(attr: &str, item: &str) -> String {
        match lower(attr, item) {
            Ok(lowered) => panic!(
                "expected an error, got {}",
                lowered.compiled.schema.system_type()
            ),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn both_shape_spellings_and_tuple_fields_lower_to_the_same_schema() {
        let in_type = lower(
            "",
            "mod a { pub struct Input { pub x: Tensor<28, 28> } pub struct Output(Tensor<10>); }",
        )
        .unwrap();
        let in_attribute = lower(
            "",
            "mod a { pub struct Input { #[shape(28, 28)] pub x: Tensor } pub struct Output { pub field1: Tensor<10> } }",
        )
        .unwrap();
        assert_eq!(in_type.compiled.schema, in_attribute.compiled.schema);
        assert_eq!(in_type.compiled.workload(), "image_classification");
    }

    #[test]
    fn arguments_become_app_labels_and_constraints() {
        let lowered = lower(
            "app = pets, labels = [cat, \"sea lion\", 3], constraint(train_time <= 1.5h), constraint(infer_latency <= 20ms)",
            "mod a { pub struct Input(Tensor<4>); pub struct Output(Tensor<3>); }",
        )
        .unwrap();
        let schema = lowered.compiled.schema;
        assert_eq!(schema.app, "pets");
        assert_eq!(
            schema.labels,
            Some(vec![
                "cat".to_owned(),
                "sea lion".to_owned(),
                "3".to_owned()
            ])
        );
        assert_eq!(schema.constraints[0].seconds, 5400.0);
        assert_eq!(schema.constraints[1].limit, "20ms");
    }

    #[test]
    fn keyword_and_std_app_names_are_e014_with_a_suggestion() {
        let module = "mod a { pub struct Input(Tensor<3>); pub struct Output(Tensor<2>); }";
        for (name, suggestion) in [
            ("fn", "fn_app"),
            ("r#gen", "gen_app"),
            ("\"self\"", "self_app"),
            ("std", "std_app"),
            ("core", "core_app"),
            ("test", "test_app"),
        ] {
            let message = error(&format!("app = {name}"), module);
            assert!(message.starts_with("E014: invalid app name"), "{message}");
            assert!(
                message.contains(&format!("try `app {suggestion}`")),
                "{message}"
            );
        }
        // A module named like a keyword gets a valid default app name.
        let lowered = lower(
            "",
            "mod r#async { pub struct Input(Tensor<3>); pub struct Output(Tensor<2>); }",
        )
        .unwrap();
        assert_eq!(lowered.compiled.schema.app, "async_app");
    }

    #[test]
    fn fields_named_like_keywords_lower_to_the_schema_names() {
        let lowered = lower(
            "labels = [\"a\\u{202E}b\", c]",
            "mod a { pub struct Input { pub r#gen: Tensor<3> } pub struct Output(Tensor<2>); }",
        );
        let message = match lowered {
            Ok(_) => panic!("a bidi control in a label is accepted"),
            Err(error) => error.to_string(),
        };
        assert!(
            message.starts_with("E010: a label cannot contain"),
            "{message}"
        );
        let lowered = lower(
            "",
            "mod a { pub struct Input { pub r#gen: Tensor<3>, pub r#try: Tensor<1> } pub struct Output(Tensor<2>); }",
        )
        .unwrap();
        let names: Vec<&str> = lowered
            .compiled
            .schema
            .input
            .fields
            .iter()
            .map(|field| field.name.as_str())
            .collect();
        assert_eq!(names, ["gen", "try"]);
    }

    #[test]
    fn every_shape_error_names_the_fix() {
        let twice = error(
            "",
            "mod a { pub struct Input { #[shape(2)] pub x: Tensor<2> } pub struct Output(Tensor<2>); }",
        );
        assert!(twice.contains("the shape is given twice"), "{twice}");
        let suffix = error(
            "",
            "mod a { pub struct Input(Tensor<3u8>); pub struct Output(Tensor<2>); }",
        );
        assert!(suffix.contains("without a type suffix"), "{suffix}");
        let not_number = error(
            "",
            "mod a { pub struct Input(Tensor<N>); pub struct Output(Tensor<2>); }",
        );
        assert!(
            not_number.contains("a dimension is a whole number"),
            "{not_number}"
        );
        let negative = error(
            "",
            "mod a { pub struct Input(Tensor<-3>); pub struct Output(Tensor<2>); }",
        );
        assert!(
            negative.starts_with("E006: a negative tensor dimension `-3`"),
            "{negative}"
        );
        let empty = error(
            "",
            "mod a { pub struct Input(Tensor); pub struct Output(Tensor<2>); }",
        );
        assert!(
            empty.starts_with("E006: a tensor needs at least one dimension"),
            "{empty}"
        );
    }

    #[test]
    fn module_shape_errors_are_reported() {
        let other_item = error(
            "",
            "mod a { fn f() {} pub struct Input(Tensor<3>); pub struct Output(Tensor<2>); }",
        );
        assert!(
            other_item.contains("only the structs `Input` and `Output`"),
            "{other_item}"
        );
        let other_struct = error(
            "",
            "mod a { pub struct Inputs(Tensor<3>); pub struct Output(Tensor<2>); }",
        );
        assert!(
            other_struct.contains("expected `Input` or `Output`, found `Inputs`"),
            "{other_struct}"
        );
        let generic = error(
            "",
            "mod a { pub struct Input<T>(Tensor<3>, T); pub struct Output(Tensor<2>); }",
        );
        assert!(generic.contains("take no generic parameters"), "{generic}");
        let outline = error("", "mod a;");
        assert!(outline.contains("needs an inline module"), "{outline}");
        let mixed = error("file = \"x.eml\", app = b", "mod a {}");
        assert!(
            mixed.contains("write `app`, `labels` and `constraint` in the .eml file"),
            "{mixed}"
        );
        let bad_limit = error(
            "constraint(train_time <= \"30m\")",
            "mod a { pub struct Input(Tensor<3>); pub struct Output(Tensor<2>); }",
        );
        assert!(
            bad_limit.contains("a limit is a number with a unit"),
            "{bad_limit}"
        );
    }

    #[test]
    fn expand_emits_the_module_or_the_errors_with_a_stub() {
        let good = expand(
            TokenStream::new(),
            "pub mod a { pub struct Input(Tensor<3>); pub struct Output(Tensor<2>); }"
                .parse()
                .unwrap(),
        )
        .to_string();
        assert!(good.starts_with("pub mod a"), "{good}");
        assert!(good.contains("pub struct Input"), "{good}");
        assert!(good.contains("pub struct Client"), "{good}");
        assert!(good.contains("pub const MANIFEST : & str = \"{"), "{good}");
        let bad = expand(
            TokenStream::new(),
            "mod a { pub struct Input(Tensor<0>); pub struct Output(Tensor<2>); }"
                .parse()
                .unwrap(),
        )
        .to_string();
        assert!(bad.contains("compile_error"), "{bad}");
        assert!(bad.contains("E006"), "{bad}");
        assert!(bad.contains("pub struct Input ;"), "{bad}");
        assert!(bad.contains("pub struct Client"), "{bad}");
        let not_module = expand(TokenStream::new(), "fn f() {}".parse().unwrap()).to_string();
        assert!(
            not_module.contains("goes on an inline module"),
            "{not_module}"
        );
    }
}
