//! easeml's example model: one input or output object checked against its schema, and its storage form.
//!
//! A checked [`Object`] holds, for every tensor field of its [`DataType`](easeml_schema::DataType), the values as row-major
//! `f32`, and for every recursive field an optional child object. Objects are built from JSON by
//! [`object_from_json`] (which checks shapes, types and finiteness and names the offending field), or
//! by the runtime's loaders (images, `.npy`) through [`check_tensor_values`]. [`codec`] turns them into
//! the compact binary blobs that the store keeps and the trainer reads.
//!
//! This crate knows nothing of SQL, HTTP or tch: the store, the client library and the trainer all
//! depend on it, so that they agree on what an example is.

pub mod codec;
mod confusion;
pub mod deep_json;
mod inference;
mod json;
mod object;

pub use confusion::{ClassTally, Confusion};
pub use inference::Inference;
pub use json::{
    json_shape_description, object_from_json, object_to_json, object_to_record_json, tensor_to_json,
};
pub use object::{MAX_DEPTH, Object, check_tensor_values, format_dims, format_index};

/// Everything that can be wrong with an example or its encoding. Every variant names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A tensor with the wrong shape.
    #[error("field `{field}`: expected shape {expected}, found {found}")]
    Shape {
        /// The field's path, e.g. `input.reading` or `input[2].reading`.
        field: String,
        /// The declared shape, e.g. `[32,32,3]`.
        expected: String,
        /// What was given, e.g. `[32,32]` or `a ragged array (...)`.
        found: String,
    },
    /// A NaN or infinite value.
    #[error("field `{field}`: the value at {index} is {value}; NaN and infinity are not allowed")]
    NotFinite {
        /// The field's path.
        field: String,
        /// The element's index, e.g. `[0,2,1]`.
        index: String,
        /// The value as text (`NaN`, `inf`, `-inf`).
        value: String,
    },
    /// A finite number too large for `f32`.
    #[error("field `{field}`: the value {value} at {index} does not fit in a 32-bit float")]
    OutOfRange {
        /// The field's path.
        field: String,
        /// The element's index.
        index: String,
        /// The value as given.
        value: String,
    },
    /// A JSON value of the wrong kind (a string where an object was expected, ...).
    #[error("field `{field}`: expected {expected}, found {found}")]
    Kind {
        /// The field's path.
        field: String,
        /// What the schema asks for.
        expected: String,
        /// What was given.
        found: String,
    },
    /// A JSON object key that is not a field of the type.
    #[error("field `{field}` is not in the schema; the fields are: {known}")]
    UnknownField {
        /// The unknown key's path.
        field: String,
        /// The type's field names, comma-separated.
        known: String,
    },
    /// A tensor field missing from a JSON object.
    #[error("field `{field}` is missing")]
    MissingField {
        /// The missing field's path.
        field: String,
    },
    /// A chain or tree deeper than [`MAX_DEPTH`].
    #[error("field `{field}`: the object nests more than {limit} levels deep")]
    TooDeep {
        /// Where the limit was reached.
        field: String,
        /// [`MAX_DEPTH`].
        limit: usize,
    },
    /// A blob that is not a valid encoding for the type.
    #[error("encoded example: {0}")]
    Decode(String),
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
