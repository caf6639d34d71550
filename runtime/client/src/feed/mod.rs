//! The `feed` input formats of DESIGN.md section 2, checked against an app's schema.
//!
//! One example per line; empty lines and lines starting with `#` are skipped.
//! - `INPUT OUTPUT`: INPUT is an image path (`.png`, `.jpg`, `.jpeg`; resized to the declared
//!   `[A,B,3]`, `[A,B,1]` or `[A,B]`, values scaled to [0, 1]), a `.npy` path, or an inline JSON array
//!   nested to the declared shape. OUTPUT is a label (for an output `[D]` with D >= 2: declared labels,
//!   or new ones in first-seen order up to D), a JSON array, a number (for a one-element output) or a
//!   `.npy` path. A path or label containing spaces is written as a JSON string (`"sea lion"`).
//!   Relative paths are resolved against [`FeedOptions::base_dir`].
//! - JSON Lines, `{"input": ..., "output": ...}`, for any schema and the only form for recursive types:
//!   a chain is a JSON list of records or nested objects, a tree nests
//!   `{..., "left": {...}, "right": null}`; field names come from the schema. A string input is a path
//!   as above; a string output is a label (or a `.npy` path).
//!
//! - Tables (`table.rs`): a CSV / TSV file with a header row and a label column, or scikit-learn's
//!   layout (a first line `COUNT,FEATURES,NAME...`, the class index last), each row checked into the
//!   same examples a line gives ([`CsvOptions`], `Client::feed_csv`).
//! - Image folders (`folder.rs`): `DIR/LABEL/*.png`, one example per image, labelled by its
//!   sub-folder (`Client::feed_image_folder`).
//!
//! Every line is checked completely (shapes, NaN/infinity, labels) before anything is stored; an error
//! names the line, the field, and the expected and found shapes.

mod fast_json;
mod folder;
mod image;
mod json_checks;
mod npy;
mod table;
mod write;

pub use folder::IgnoredFiles;
pub(crate) use folder::ImageFolder;
pub use table::CsvOptions;
pub use table::is_table_path;
pub(crate) use table::{Table, table_folder};
pub use write::{min_feed_line_bytes, write_feed_line};

use std::fmt;
use std::path::{Path, PathBuf};

use easeml_object::deep_json::{
    DeepJsonError, DeepValue, json_value_end, parse_deep_json, too_deep_message,
};
use easeml_object::{Object, object_from_json};
use easeml_schema::{DataType, FieldKind, Schema};
use serde_json::Value;

/// How to read a feed.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// Relative paths in the feed are resolved against this directory (default: the current one).
    pub base_dir: Option<PathBuf>,
    /// Store the good lines and report the bad ones, instead of storing nothing when a line is bad.
    pub skip_bad: bool,
    /// The most encoded bytes a feed holds in memory while it checks its lines (default 256 MiB);
    /// beyond it, encoded examples are written to blob files as they are checked. The database
    /// still gets all of the batch or none of it; the blob files of a failed batch this large stay
    /// unreferenced until `Store::collect_garbage`.
    pub max_batch_memory: usize,
    /// Whether inputs and outputs may name files (images, `.npy`) to read. The server turns this off:
    /// it never reads its own files on a client's behalf, so a path is a bad line there.
    pub allow_paths: bool,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            base_dir: None,
            skip_bad: false,
            max_batch_memory: 256 << 20,
            allow_paths: true,
        }
    }
}

/// One bad line (or value) of a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// `line` for text feeds, `example` for typed ones.
    pub unit: &'static str,
    /// The 1-based line number (or the value's 1-based position for typed feeds).
    pub line: usize,
    /// What is wrong, naming the field and the expected and found shapes where they apply.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.unit, self.line, self.message)
    }
}

/// At most this many bad lines of one batch are kept in full (in [`LineErrors`]: an error, a feed
/// report, a server's answer); the rest are only counted. A body of millions of bad lines must not
/// become millions of messages in memory or in an answer.
pub const MAX_KEPT_LINE_ERRORS: usize = 100;

/// A kept bad line's message is cut to about this many bytes (a message may quote the line, and a
/// line may be megabytes: 100 of them must not make a 100 MB answer), ending in `…` and the
/// message's full length.
pub const MAX_LINE_ERROR_BYTES: usize = 200;

/// `message` cut to [`MAX_LINE_ERROR_BYTES`] at a character boundary, saying how long it was.
fn cut_message(message: String) -> String {
    if message.len() <= MAX_LINE_ERROR_BYTES + 40 {
        return message;
    }
    let mut end = MAX_LINE_ERROR_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut: {} bytes in all)", &message[..end], message.len())
}

/// The bad lines of one batch: the first [`MAX_KEPT_LINE_ERRORS`] in full, and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineErrors {
    kept: Vec<LineError>,
    count: usize,
}

impl LineErrors {
    /// No bad lines yet.
    pub fn new() -> LineErrors {
        LineErrors::default()
    }

    /// Bad lines as reported by someone else (a server): `kept` (at most
    /// [`MAX_KEPT_LINE_ERRORS`] are kept) out of `count` in all.
    pub fn from_parts(mut kept: Vec<LineError>, count: usize) -> LineErrors {
        kept.truncate(MAX_KEPT_LINE_ERRORS);
        for error in &mut kept {
            error.message = cut_message(std::mem::take(&mut error.message));
        }
        let count = count.max(kept.len());
        LineErrors { kept, count }
    }

    /// Counts a bad line, keeping it when fewer than [`MAX_KEPT_LINE_ERRORS`] are kept (its
    /// message cut to [`MAX_LINE_ERROR_BYTES`]).
    pub fn push(&mut self, mut error: LineError) {
        self.count += 1;
        if self.kept.len() < MAX_KEPT_LINE_ERRORS {
            error.message = cut_message(error.message);
            self.kept.push(error);
        }
    }

    /// How many lines were bad in all.
    pub fn count(&self) -> usize {
        self.count
    }

    /// True when no line was bad.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The first bad lines, in order (all of them when there were at most
    /// [`MAX_KEPT_LINE_ERRORS`]).
    pub fn kept(&self) -> &[LineError] {
        &self.kept
    }

    /// How many bad lines were counted but not kept.
    pub fn not_kept(&self) -> usize {
        self.count - self.kept.len()
    }

    /// The kept bad lines, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, LineError> {
        self.kept.iter()
    }
}

impl FromIterator<LineError> for LineErrors {
    fn from_iter<I: IntoIterator<Item = LineError>>(errors: I) -> LineErrors {
        let mut collected = LineErrors::new();
        for error in errors {
            collected.push(error);
        }
        collected
    }
}

impl<'a> IntoIterator for &'a LineErrors {
    type Item = &'a LineError;
    type IntoIter = std::slice::Iter<'a, LineError>;

    fn into_iter(self) -> Self::IntoIter {
        self.kept.iter()
    }
}

/// A checked example, before encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedExample {
    /// The input object.
    pub input: Object,
    /// The output.
    pub output: CheckedOutput,
}

/// A checked output.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedOutput {
    /// An output object.
    Object(Object),
    /// A label (its index is assigned when the batch is stored).
    Label(String),
}

/// Reads the schema-dependent forms of one line. Holds what every line needs.
#[derive(Debug, Clone)]
pub struct LineChecker<'a> {
    schema: &'a Schema,
    base_dir: PathBuf,
    takes_labels: bool,
    allow_paths: bool,
}

/// A token of a pair line: JSON, or text (a path or a label), or an input tensor already checked
/// (the fast path for inline JSON arrays).
enum Token<'v> {
    Json(JsonToken<'v>),
    Text(String),
    Checked(Object),
}

/// A JSON token: parsed from a pair line (owned, dropped without recursion), or a field of a
/// parsed record (borrowed: a deep value is never copied).
enum JsonToken<'v> {
    Owned(DeepValue),
    Borrowed(&'v Value),
}

impl JsonToken<'_> {
    fn value(&self) -> &Value {
        match self {
            JsonToken::Owned(value) => value.value(),
            JsonToken::Borrowed(value) => value,
        }
    }
}

impl<'a> LineChecker<'a> {
    /// A checker for `schema`. `takes_labels` says whether the output may be a label.
    pub fn new(schema: &'a Schema, options: &FeedOptions, takes_labels: bool) -> LineChecker<'a> {
        LineChecker {
            schema,
            base_dir: options.base_dir.clone().unwrap_or_default(),
            takes_labels,
            allow_paths: options.allow_paths,
        }
    }

    /// Checks one feed line (`INPUT OUTPUT` or a JSON Lines record); `Ok(None)` for a blank or
    /// comment line.
    pub fn check_line(&self, line: &str) -> Result<Option<CheckedExample>, String> {
        match self.check_any_line(line)? {
            None => Ok(None),
            Some((input, Some(output))) => Ok(Some(CheckedExample { input, output })),
            Some((_, None)) => Err(if line.trim_start().starts_with('{') {
                "missing `output`".to_owned()
            } else {
                "missing the output: a line is `INPUT OUTPUT`".to_owned()
            }),
        }
    }

    /// Checks one `infer` line: `INPUT`, or `INPUT OUTPUT` (the output is then checked too, so that
    /// the caller can score the answer), or a JSON Lines record whose `output` is optional;
    /// `Ok(None)` for a blank or comment line.
    pub fn check_infer_line(
        &self,
        line: &str,
    ) -> Result<Option<(Object, Option<CheckedOutput>)>, String> {
        self.check_any_line(line)
    }

    fn check_any_line(
        &self,
        line: &str,
    ) -> Result<Option<(Object, Option<CheckedOutput>)>, String> {
        // A byte-order mark (editors on Windows write one at the start of a file) is not content.
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(None);
        }
        if line.starts_with('{') {
            let value = parse_json(line, 0)?;
            return self.check_record(value.value()).map(Some);
        }
        let (input, rest) = match single_tensor_dims(&self.schema.input)
            .filter(|_| line.starts_with('['))
            .and_then(|dims| fast_json::tensor_prefix(line, dims))
        {
            Some((values, rest)) if rest.is_empty() || rest.starts_with(char::is_whitespace) => {
                if let Some(token) =
                    json_checks::number_rounding_to_zero(&line[..line.len() - rest.len()])
                {
                    return Err(json_checks::rounds_to_zero_message(token));
                }
                (Token::Checked(Object::single(values)), rest)
            }
            _ => split_token(line, 0)?,
        };
        let rest = rest.trim_start();
        let input = self.input_from(input)?;
        if rest.is_empty() {
            return Ok(Some((input, None)));
        }
        let output = self.output_text(rest, line.len() - rest.len())?;
        Ok(Some((input, Some(output))))
    }

    /// The OUTPUT of a pair line (`text`, starting `offset` bytes into its line): a JSON value when
    /// it starts with `[`, `{` or `"`, else a label, a number or a `.npy` path, up to the end. The
    /// table reader gives its output cells here too (`table.rs`), so one rule reads both.
    pub(crate) fn output_text(&self, text: &str, offset: usize) -> Result<CheckedOutput, String> {
        let (output, trailing) = if text.starts_with(['[', '{', '"']) {
            split_token(text, offset)?
        } else {
            (Token::Text(text.to_owned()), "")
        };
        if !trailing.trim().is_empty() {
            return Err(format!(
                "unexpected text after the output: `{}` (quote a label or path with spaces as a JSON string)",
                trailing.trim()
            ));
        }
        self.output_from(output)
    }

    /// Checks a JSON Lines record `{"input": ..., "output": ...}` (also the typed feed's form).
    pub fn check_json(&self, value: &Value) -> Result<CheckedExample, String> {
        match self.check_record(value)? {
            (input, Some(output)) => Ok(CheckedExample { input, output }),
            (_, None) => Err("missing `output`".to_owned()),
        }
    }

    /// A record with a required `input` and an optional `output`.
    fn check_record(&self, value: &Value) -> Result<(Object, Option<CheckedOutput>), String> {
        let Value::Object(map) = value else {
            return Err("expected a JSON object {\"input\": ..., \"output\": ...}".to_owned());
        };
        if let Some(key) = map.keys().find(|key| *key != "input" && *key != "output") {
            return Err(format!(
                "unexpected key `{key}`: a record has only `input` and `output`"
            ));
        }
        let input = map.get("input").ok_or("missing `input`")?;
        let input = match input {
            Value::String(path) => Token::Text(path.clone()),
            other => Token::Json(JsonToken::Borrowed(other)),
        };
        let input = self.input_from(input)?;
        let output = match map.get("output") {
            None => None,
            Some(Value::String(text)) => Some(self.output_from(Token::Text(text.clone()))?),
            Some(other) => Some(self.output_from(Token::Json(JsonToken::Borrowed(other)))?),
        };
        Ok((input, output))
    }

    fn input_from(&self, token: Token<'_>) -> Result<Object, String> {
        let data_type = &self.schema.input;
        match token {
            Token::Checked(object) => Ok(object),
            Token::Json(value) => object_from_json(data_type, value.value(), "input")
                .map_err(|error| error.to_string()),
            Token::Text(path) => self.input_file(data_type, &path).map(Object::single),
        }
    }

    /// The values of `data_type` (one tensor field) that the file named `path` gives: resolved
    /// against [`FeedOptions::base_dir`], refused where files may not be read. The table reader
    /// reads a cell naming a file here too.
    pub(crate) fn input_file(&self, data_type: &DataType, path: &str) -> Result<Vec<f32>, String> {
        if !self.allow_paths {
            return Err(refused_path("input", path));
        }
        read_input_file(data_type, &self.resolve(path), path)
    }

    fn output_from(&self, token: Token<'_>) -> Result<CheckedOutput, String> {
        let data_type = &self.schema.output;
        match token {
            Token::Checked(object) => Ok(CheckedOutput::Object(object)),
            Token::Json(value) => object_from_json(data_type, value.value(), "output")
                .map(CheckedOutput::Object)
                .map_err(|error| error.to_string()),
            Token::Text(text)
                if text.to_ascii_lowercase().ends_with(".npy") && !self.allow_paths =>
            {
                Err(refused_path("output", &text))
            }
            Token::Text(text) if text.to_ascii_lowercase().ends_with(".npy") => self
                .npy(data_type, &text, "output")
                .map(CheckedOutput::Object),
            Token::Text(text) if self.takes_labels => Ok(CheckedOutput::Label(text)),
            Token::Text(text) => match serde_json::from_str::<Value>(&text) {
                Ok(value @ Value::Number(_)) => object_from_json(data_type, &value, "output")
                    .map(CheckedOutput::Object)
                    .map_err(|error| error.to_string()),
                _ => Err(format!(
                    "output `{text}` looks like a label, but this app's output {data_type} takes no labels; give a JSON array or a .npy path"
                )),
            },
        }
    }

    fn npy(&self, data_type: &DataType, path: &str, side: &str) -> Result<Object, String> {
        read_npy_file(data_type, &self.resolve(path), path, side).map(Object::single)
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.base_dir.join(path)
        }
    }
}

/// The values of an input that a file gives, read exactly as a feed line naming it is read: a
/// `.npy` file (any type of exactly one tensor field) or a PNG / JPEG image (`[A,B,3]`, `[A,B,1]` or
/// `[A,B]`: converted, resized and scaled as `image.rs` says). `path` is opened, `shown` is how the
/// messages name it. The generated Python package reads file paths through it.
pub fn read_input_file(data_type: &DataType, path: &Path, shown: &str) -> Result<Vec<f32>, String> {
    let lower = shown.to_ascii_lowercase();
    if lower.ends_with(".npy") {
        read_npy_file(data_type, path, shown, "input")
    } else if is_image_name(shown) {
        let dims = single_tensor_dims(data_type).ok_or_else(|| {
            format!(
                "{shown}: an image can only give an input of shape [A,B,3], [A,B,1] or [A,B]; this app's input is {data_type}"
            )
        })?;
        image::load(path, shown, dims)
    } else {
        Err(format!(
            "input `{shown}` is not an image (.png, .jpg, .jpeg), a .npy file or a JSON array"
        ))
    }
}

/// Whether a file name is an image's by its extension (`.png`, `.jpg`, `.jpeg`, any case): the
/// one rule of what a feed reads as an image (a line's path, an image folder's file).
pub(crate) fn is_image_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg"]
        .iter()
        .any(|extension| lower.ends_with(extension))
}

/// The values of one side (`input` or `output`) that a `.npy` file gives, read as a feed line
/// naming it is read (a regular file on a disk, at most the declared size).
pub fn read_npy_file(
    data_type: &DataType,
    path: &Path,
    shown: &str,
    side: &str,
) -> Result<Vec<f32>, String> {
    let dims = single_tensor_dims(data_type).ok_or_else(|| {
        format!(
            "{shown}: a .npy file can only give a type with exactly one tensor field; this app's {side} is {data_type} (use JSON Lines)"
        )
    })?;
    npy::load(path, shown, side, dims)
}

/// Where the kernel's pseudo files live: they pass as regular files but are made as they are read
/// (`/proc/self/status` says it has 0 bytes and reads as text, `/proc/kcore` says it has 128 TB),
/// and nothing under `/dev` is an example's data.
const PSEUDO_FILE_ROOTS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Reads the file a feed line names, whole, after refusing, before anything is read:
/// - what is not a regular file: a device such as `/dev/zero` would be read forever, and a FIFO
///   would block the feed (the type is checked before opening, since opening a FIFO blocks, and
///   again on the opened file);
/// - a file that is, once its symbolic links are resolved, under `/proc`, `/sys` or `/dev`
///   ([`PSEUDO_FILE_ROOTS`]): a link to a regular file elsewhere is fine;
/// - an empty file, and one of more than `limit` bytes (`what` names the limit in words, e.g.
///   "any .npy file of this app's input shape [2,2]").
///
/// It reads through `Read::take` at most the size the opened file had, so a file that grows while it
/// is read is not followed past it.
fn read_data_file(path: &Path, shown: &str, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let cannot_read = |error: std::io::Error| format!("{shown}: cannot read: {error}");
    let not_regular =
        |kind: &str| format!("{shown}: is {kind}, not a regular file; name an image or .npy file");
    let kind_of = |metadata: &std::fs::Metadata| {
        if metadata.is_dir() {
            Some("a folder")
        } else if !metadata.is_file() {
            Some("a device, FIFO or socket")
        } else {
            None
        }
    };
    let metadata = std::fs::metadata(path).map_err(cannot_read)?;
    if let Some(kind) = kind_of(&metadata) {
        return Err(not_regular(kind));
    }
    let target = std::fs::canonicalize(path).map_err(cannot_read)?;
    if let Some(root) = PSEUDO_FILE_ROOTS
        .iter()
        .find(|root| target.starts_with(Path::new(root)))
    {
        return Err(format!(
            "{shown}: is {}, one of the kernel's files under {root}, not a regular file on a disk; name an image or .npy file",
            target.display()
        ));
    }
    let file = std::fs::File::open(&target).map_err(cannot_read)?;
    let metadata = file.metadata().map_err(cannot_read)?;
    if let Some(kind) = kind_of(&metadata) {
        return Err(not_regular(kind));
    }
    let size = metadata.len();
    if size == 0 {
        return Err(format!(
            "{shown}: is empty (0 bytes); name an image or .npy file"
        ));
    }
    if size > limit {
        return Err(format!(
            "{shown}: {size} bytes, larger than {what} can be ({limit} bytes); is it the right file?"
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(size)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    Ok(bytes)
}

/// The error for a file path where files may not be read ([`FeedOptions::allow_paths`] off).
fn refused_path(side: &str, path: &str) -> String {
    format!(
        "{side} `{path}` is a file path, and the server never reads files on a client's behalf; send the values inline (a JSON array, or a JSON Lines record)"
    )
}

/// A JSON syntax error in a feed line, by its column in the line (serde counts lines and columns
/// from where the value starts, and a feed line is one line), with what to do when the value is a
/// number JSON does not have (NaN, infinities). `text` starts `offset` bytes into the line.
/// One JSON value of a line (`text` starts `offset` bytes into it): parsed however deep an
/// object may nest (`easeml_object::deep_json`), or the error naming the column or the limit.
fn parse_json(text: &str, offset: usize) -> Result<DeepValue, String> {
    let value = parse_deep_json(text).map_err(|error| match error {
        DeepJsonError::TooDeep(nesting) => too_deep_message(nesting),
        DeepJsonError::Syntax(error) => malformed_json(&error, text, offset),
    })?;
    // What the parsed value no longer shows (issue 49): the last of two equal keys would win.
    if let Some(key) = json_checks::duplicate_key(text) {
        let key: String = key.chars().take(60).collect();
        return Err(format!(
            "the key `{key}` appears twice in one object; give each key once"
        ));
    }
    if let Some(token) = json_checks::number_rounding_to_zero(text) {
        return Err(json_checks::rounds_to_zero_message(token));
    }
    Ok(value)
}

fn malformed_json(error: &serde_json::Error, text: &str, offset: usize) -> String {
    let full = error.to_string();
    let what = full
        .strip_suffix(&format!(
            " at line {} column {}",
            error.line(),
            error.column()
        ))
        .unwrap_or(&full);
    let start = error.column().saturating_sub(1);
    // serde stops at the first byte it cannot take: the `N` of `NaN`, the `I` of `-Infinity`, but
    // the `a` of `nan` (an `n` may start `null`).
    let non_finite = |at: usize| {
        let rest = text.get(at..).unwrap_or("");
        ["NaN", "nan", "Infinity", "infinity", "inf"]
            .iter()
            .any(|token| rest.starts_with(token))
    };
    if let Some(at) = [start, start.saturating_sub(1)]
        .into_iter()
        .find(|&at| non_finite(at))
    {
        return format!(
            "malformed JSON at column {}: NaN and infinities are not JSON numbers; every value must be a finite number",
            offset + at + 1
        );
    }
    format!("malformed JSON at column {}: {what}", offset + start + 1)
}

/// A type as the table and image-folder messages name it: `[30]` for one tensor field, else
/// its canonical form.
pub(crate) fn describe_type(data_type: &DataType) -> String {
    match single_tensor_dims(data_type) {
        Some(dims) => easeml_object::format_dims(dims),
        None => data_type.to_string(),
    }
}

/// The dims of a type that is exactly one tensor field (no recursive field): the feed's fast path
/// and the server's JSON writer both take it.
pub(crate) fn single_tensor_dims(data_type: &DataType) -> Option<&[u64]> {
    match data_type.fields.as_slice() {
        [field] => match &field.kind {
            FieldKind::Tensor(tensor) => Some(&tensor.dims),
            FieldKind::Recursive => None,
        },
        _ => None,
    }
}

/// Splits the first token off a line: a JSON value when it starts with `[`, `{` or `"`, else text
/// up to the first whitespace. `text` starts `offset` bytes into its line (for error columns).
fn split_token(text: &str, offset: usize) -> Result<(Token<'static>, &str), String> {
    if text.starts_with(['[', '{', '"']) {
        // The value's extent first (brackets balanced outside strings), then the value itself
        // through the one deep-JSON reader; text that does not close is read whole, so that the
        // error names what is wrong where.
        let end = json_value_end(text).unwrap_or(text.len());
        let (value_text, rest) = text.split_at(end);
        let value = parse_json(value_text, offset)?;
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            return Err(format!(
                "malformed JSON: unexpected `{}` right after a value",
                rest.chars().next().unwrap_or(' ')
            ));
        }
        let token = match value.value() {
            Value::String(text) => Token::Text(text.clone()),
            _ => Token::Json(JsonToken::Owned(value)),
        };
        Ok((token, rest))
    } else {
        let end = text.find(char::is_whitespace).unwrap_or(text.len());
        Ok((Token::Text(text[..end].to_owned()), &text[end..]))
    }
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_with_their_length() {
        let mut errors = LineErrors::new();
        let long = format!("malformed: {}", "é".repeat(300_000));
        errors.push(LineError {
            unit: "line",
            line: 1,
            message: long.clone(),
        });
        errors.push(LineError {
            unit: "line",
            line: 2,
            message: "short".to_owned(),
        });
        let kept = errors.kept();
        assert!(
            kept[0].message.len() < MAX_LINE_ERROR_BYTES + 60,
            "{}",
            kept[0].message
        );
        assert!(kept[0].message.starts_with("malformed: é"));
        assert!(
            kept[0]
                .message
                .ends_with(&format!("… (cut: {} bytes in all)", long.len())),
            "{}",
            kept[0].message
        );
        assert_eq!(kept[1].message, "short");
    }
}
