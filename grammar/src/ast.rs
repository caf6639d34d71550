//! The typed syntax tree of a `.eml` file, with byte spans on every node.
//!
//! The tree keeps what the user wrote (names as written, dimensions as text) so that the checker can
//! report precise errors; it is not validated. The three surface forms of LANGUAGE.md section 1 map
//! onto one [`TypeDef`] shape, tagged with the [`Form`] they came from.

use serde::Serialize;

use crate::Span;

/// A whole `.eml` file: its items in source order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct File {
    /// The top-level items that parsed.
    pub items: Vec<Item>,
}

/// One top-level item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Item {
    /// `Input = [...]` or a `type ... end` block.
    Type(TypeDef),
    /// A formal program `{input: ..., output: ...}`: both types at once.
    Program(Program),
    /// `app NAME`.
    App(AppDecl),
    /// `labels = [...]`.
    Labels(LabelsDecl),
    /// `constraint METRIC <= LIMIT`.
    Constraint(ConstraintDecl),
}

/// The surface form a type was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Form {
    /// `Input = [256, 256, 3]`.
    Shorthand,
    /// `type Input ... end`.
    Block,
    /// `{input: {[...], [...]}, ...}`.
    Formal,
}

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Ident {
    /// The text, unescaped when it was a quoted string.
    pub text: String,
    /// Where it is (including quotes).
    pub span: Span,
    /// Whether it was written as a double-quoted string.
    pub quoted: bool,
}

/// The definition of `Input` or `Output` in any form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TypeDef {
    /// The surface form.
    pub form: Form,
    /// The type's name as written (`Input`, `Output`, or a misspelling the checker reports).
    pub name: Ident,
    /// The fields in declaration order.
    pub fields: Vec<Field>,
    /// The whole definition.
    pub span: Span,
}

/// A formal program: `{input: T, output: T}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Program {
    /// The input type (its name is `Input`, spanning the `input` keyword).
    pub input: TypeDef,
    /// The output type (its name is `Output`, spanning the `output` keyword).
    pub output: TypeDef,
    /// The whole program.
    pub span: Span,
}

/// One field of a type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Field {
    /// The field's name; `None` for an unnamed tensor (shorthand, or `Tensor[...]` in the formal form).
    pub name: Option<Ident>,
    /// What the field holds.
    pub ty: FieldType,
    /// The whole field.
    pub span: Span,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum FieldType {
    /// A tensor of fixed shape.
    Tensor(TensorType),
    /// A pointer to another object: `Nullable{Input}` names its target; a recursive field of the
    /// formal form (`[next]`) has `target: None` and points at its own type.
    Recursive {
        /// The type named inside `Nullable{...}`, if written.
        target: Option<Ident>,
    },
}

/// `Tensor[d1, ..., dn]` or the shorthand's `[d1, ..., dn]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorType {
    /// The dimensions as written.
    pub dims: Vec<Dim>,
    /// The whole tensor type.
    pub span: Span,
}

/// One dimension as written: an optional `-` and decimal digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dim {
    /// The digits as written.
    pub text: String,
    /// Where.
    pub span: Span,
}

/// The value of a dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimValue {
    /// A value that fits in `u64` (may be 0).
    Value(u64),
    /// A negative number.
    Negative,
    /// A number too large for `u64`.
    Huge,
}

impl Dim {
    /// The value, telling negative and overflowing numbers apart.
    pub fn value(&self) -> DimValue {
        if self.text.starts_with('-') {
            // `-0` is zero, not negative.
            return if self.text[1..].bytes().all(|b| b == b'0') {
                DimValue::Value(0)
            } else {
                DimValue::Negative
            };
        }
        match self.text.parse::<u64>() {
            Ok(value) => DimValue::Value(value),
            Err(_) => DimValue::Huge,
        }
    }
}

/// `app NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppDecl {
    /// The name as written.
    pub name: Ident,
    /// The whole item.
    pub span: Span,
}

/// `labels = [a, b, "c d"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelsDecl {
    /// The labels in order.
    pub labels: Vec<Ident>,
    /// The whole item.
    pub span: Span,
}

/// `constraint METRIC <= NUMBER UNIT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConstraintDecl {
    /// The metric name as written.
    pub metric: Ident,
    /// The comparison as written (only `<=` is valid; the checker says so).
    pub comparison: Ident,
    /// The number as written (may be negative or fractional).
    pub limit: Ident,
    /// The unit as written, if any.
    pub unit: Option<Ident>,
    /// The whole item.
    pub span: Span,
}
