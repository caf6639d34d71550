//! Tables: a CSV or TSV file with a header row, read with the `csv` crate into the same checked
//! examples a feed line gives (`Client::feed_csv`, `<app> feed FILE.csv --label-column NAME`).
//!
//! - The separator is `,` for `.csv`, a tab for `.tsv` / `.tab`, else the one of `,`, tab, `;`,
//!   `|` that the header line holds most often (outside quotes); [`CsvOptions::delimiter`]
//!   overrides. Cells are trimmed; quoting is CSV's (`"a, b"`, `""` for a quote).
//! - The output is the column named by [`CsvOptions::label_column`] (by its header name), read by the
//!   feed lines' one rule for an OUTPUT (`LineChecker::output_text`): a label (declared, or new
//!   ones up to the output's size), a number for a one-value output, a JSON array, a `.npy` path.
//! - The input, by the schema:
//!   - one tensor field: the column named like the field when the header has one; else, when the
//!     field has more than one value and the table one input column, that column; else the other
//!     columns in file order, exactly as many as the field has values (row-major for a matrix).
//!   - a record of tensor fields: one column per field, by the field's name. Every field must have
//!     its column; **a column that is neither a field nor the label column is an error**, naming
//!     it (decision: a misspelt field name, or an id column that would silently not be trained on,
//!     is better found than ignored; drop such columns first).
//!   - recursive types cannot be a table row: feed JSON Lines.
//!
//!   A cell of a one-value field is a number. A cell of a larger field is an inline JSON array
//!   nested to its shape, or a path of an image or `.npy` file, resolved against the table's
//!   folder and read by the feed lines' loaders.
//! - Numbers are read as Rust reads an `f32` (`1`, `-0.5`, `.5`, `1e-5`); an empty cell or `NA`,
//!   `N/A`, `NaN`, `null`, `?` (any case) is a missing value, refused with the line and column
//!   and what to do, as are infinities. (Mapping missing values, e.g. to a mean, is not done.)
//! - scikit-learn's layout (its bundled `breast_cancer.csv`): a first line `COUNT,FEATURES,NAME...`
//!   (two whole numbers, then the class names), rows of FEATURES numbers and the class index last.
//!   It is found by its first line, needs no label column (one given is an error), maps a class
//!   index to its name, and a file with other than COUNT rows is an error (cut short?).
//!
//! Problems of the header (no such label column, the columns do not fit the schema) are errors of
//! the whole file ([`Error::Read`], nothing read further); problems of a row (missing value, too
//! few or many cells, a value that is not a number) are [`LineError`](super::LineError)s naming
//! the row by its 1-based line in the file, so `skip_bad` and the capped error list work as for
//! feed lines. A row's cell count is compared with the header's before any cell is read, and
//! values are gathered by the schema's sizes, never by the row's: a row of a million cells is one
//! refused row. Rows are read one at a time (the `csv` reader's record buffer, as a feed line's
//! buffer) and handed on to the feed's batch, which spills to disk beyond its memory limit.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use csv::{ByteRecord, ReaderBuilder, Trim};
use easeml_object::object_from_json;
use easeml_schema::{DataType, Field, FieldKind, Schema};

use super::{CheckedExample, CheckedOutput, LineChecker, describe_type};
use crate::{Error, Result};

/// How to read a table (CSV / TSV).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvOptions {
    /// The header name of the column that holds each row's output (`--label-column`). Required
    /// for a table with a header; not given for scikit-learn's layout (the class index is last).
    pub label_column: Option<String>,
    /// The separator byte; `None`: by the file's extension (`.csv` comma, `.tsv` / `.tab` tab),
    /// else guessed from the header line.
    pub delimiter: Option<u8>,
}

/// The values read as missing (compared without case), besides an empty cell.
const MISSING: [&str; 5] = ["na", "n/a", "nan", "null", "?"];

/// At most this many column names are listed in a message (a header may be very wide).
const LISTED_COLUMNS: usize = 20;

/// An opened table: its header read and matched with the schema, its rows not read yet.
pub(crate) struct Table {
    reader: csv::Reader<Box<dyn BufRead>>,
    shown: String,
    /// The header's names (`column N` where a header cell is empty, and for scikit-learn's
    /// layout, which has none).
    columns: Vec<String>,
    input: Input,
    output: Output,
    /// scikit-learn's layout: the number of rows its first line promises.
    promised_rows: Option<u64>,
}

/// Where a row's input comes from.
enum Input {
    /// One tensor field filled by these columns' numbers, in this order.
    Ordered(Vec<usize>),
    /// One column per tensor field, in the fields' order: the column and the field's own type
    /// (to read a JSON array or a file with the feed's readers).
    Named(Vec<(usize, DataType)>),
}

/// Where a row's output comes from.
enum Output {
    /// A column read as a feed line's OUTPUT.
    Column(usize),
    /// scikit-learn's layout: a class index into these names, in this column.
    ClassIndex(usize, Vec<String>),
}

/// A header or file-level problem: the whole file is refused.
fn bad_file(shown: &str, message: impl std::fmt::Display) -> Error {
    Error::Read(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{shown}: {message}"),
    ))
}

impl Table {
    /// Opens `path` and reads its header, matching its columns with `schema`; every problem of
    /// the header is an error here, before any row is read.
    pub(crate) fn open(path: &Path, options: &CsvOptions, schema: &Schema) -> Result<Table> {
        let shown = path.display().to_string();
        let metadata = std::fs::metadata(path).map_err(|error| {
            Error::Read(std::io::Error::new(
                error.kind(),
                format!("{shown}: {error}"),
            ))
        })?;
        if !metadata.is_file() {
            let kind = if metadata.is_dir() {
                "a folder"
            } else {
                "not a regular file"
            };
            return Err(bad_file(
                &shown,
                format!("is {kind}; give a CSV or TSV file"),
            ));
        }
        let file = File::open(path).map_err(|error| {
            Error::Read(std::io::Error::new(
                error.kind(),
                format!("{shown}: {error}"),
            ))
        })?;
        let file = BufReader::with_capacity(64 << 10, file);
        let delimiter = options.delimiter.or_else(|| extension_delimiter(path));
        Table::from_reader(Box::new(file), shown, delimiter, options, schema)
    }

    /// A table read from `text` (its header read and matched with `schema` here, as
    /// [`Table::open`] does), `shown` naming it in messages: the server's table feed, whose body
    /// is the table. The separator is `delimiter`, else guessed from the header line.
    pub(crate) fn from_reader(
        mut text: Box<dyn BufRead>,
        shown: String,
        delimiter: Option<u8>,
        options: &CsvOptions,
        schema: &Schema,
    ) -> Result<Table> {
        let delimiter = match delimiter {
            Some(delimiter) => delimiter,
            None => sniff_delimiter(text.fill_buf().map_err(Error::Read)?),
        };
        let mut reader = ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(Trim::All)
            .delimiter(delimiter)
            .from_reader(text);
        let mut header = ByteRecord::new();
        let read = reader
            .read_byte_record(&mut header)
            .map_err(|error| bad_file(&shown, error))?;
        if !read {
            return Err(bad_file(
                &shown,
                "is empty; a table starts with a header row naming its columns",
            ));
        }
        // A header wider than any layout of this schema is refused before its names are kept.
        let widest = max_columns(schema);
        if header.len() as u64 > widest {
            return Err(bad_file(
                &shown,
                format!(
                    "the header has {} columns; this app's input {} and a label column take at most {widest}",
                    header.len(),
                    describe_type(&schema.input)
                ),
            ));
        }
        let names: Vec<String> = header
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let name = String::from_utf8_lossy(name);
                let name = name.trim_start_matches('\u{feff}').trim();
                if name.is_empty() {
                    format!("column {}", index + 1)
                } else {
                    name.to_owned()
                }
            })
            .collect();
        if let Some(layout) = sklearn_layout(&names) {
            return Table::sklearn(reader, shown, options, schema, layout);
        }
        let Some(label_column) = &options.label_column else {
            return Err(bad_file(
                &shown,
                format!(
                    "no label column was named: pass --label-column NAME, the column that holds each row's output; the header's columns are {}",
                    list_columns(&names)
                ),
            ));
        };
        let label = find_column(&names, label_column, &shown)?.ok_or_else(|| {
            bad_file(
                &shown,
                format!(
                    "the label column `{label_column}` is not in the header; its columns are {}",
                    list_columns(&names)
                ),
            )
        })?;
        let input = input_columns(&names, label, schema, &shown)?;
        Ok(Table {
            reader,
            shown,
            columns: names,
            input,
            output: Output::Column(label),
            promised_rows: None,
        })
    }

    /// scikit-learn's layout: `COUNT,FEATURES,NAME...`, then rows of FEATURES numbers and the
    /// class index.
    fn sklearn(
        reader: csv::Reader<Box<dyn BufRead>>,
        shown: String,
        options: &CsvOptions,
        schema: &Schema,
        (rows, features, names): (u64, u64, Vec<String>),
    ) -> Result<Table> {
        if let Some(label_column) = &options.label_column {
            return Err(bad_file(
                &shown,
                format!(
                    "this file has scikit-learn's layout (a first line of {rows} rows, {features} features and the class names {}), whose class index is the last column; leave out --label-column `{label_column}`",
                    names.join(", ")
                ),
            ));
        }
        if schema.label_capacity().is_none() {
            return Err(bad_file(
                &shown,
                format!(
                    "this file has scikit-learn's layout, whose outputs are class names ({}); this app's output {} takes no labels",
                    names.join(", "),
                    describe_type(&schema.output)
                ),
            ));
        }
        let wanted = single_tensor(&schema.input).map(|(_, data_type)| element_count(&data_type));
        if wanted != Some(features) {
            return Err(bad_file(
                &shown,
                format!(
                    "the first line says each row has {features} features (scikit-learn's layout); this app's input is {}{}",
                    describe_type(&schema.input),
                    wanted.map_or(String::new(), |count| format!(", {count} values"))
                ),
            ));
        }
        // Features fit an element count, which the schema bounds (2^31 - 1).
        let features = features as usize;
        let columns = (0..=features)
            .map(|index| format!("column {}", index + 1))
            .collect();
        Ok(Table {
            reader,
            shown,
            columns,
            input: Input::Ordered((0..features).collect()),
            output: Output::ClassIndex(features, names),
            promised_rows: Some(rows),
        })
    }

    /// Reads every row, handing each to `each` with its 1-based line in the file (checked, or
    /// why not), and `progress` the rows read so far. A file-level problem (I/O, a file of
    /// scikit-learn's layout whose row count is not its first line's) is the error.
    pub(crate) fn read_rows(
        mut self,
        checker: &LineChecker<'_>,
        each: &mut dyn FnMut(usize, std::result::Result<CheckedExample, String>) -> Result<()>,
        progress: &mut dyn FnMut(usize),
    ) -> Result<()> {
        let mut record = ByteRecord::new();
        let mut rows = 0usize;
        loop {
            let read = self
                .reader
                .read_byte_record(&mut record)
                .map_err(|error| bad_file(&self.shown, error))?;
            if !read {
                break;
            }
            rows += 1;
            let line = record
                .position()
                .map_or(rows + 1, |position| position.line() as usize);
            each(line, self.row(checker, &record))?;
            progress(rows);
        }
        if let Some(promised) = self.promised_rows
            && promised != rows as u64
        {
            return Err(bad_file(
                &self.shown,
                format!(
                    "the first line says {promised} rows (scikit-learn's layout), but the file has {rows}; is it cut short?"
                ),
            ));
        }
        Ok(())
    }

    /// One row, checked.
    fn row(
        &self,
        checker: &LineChecker<'_>,
        record: &ByteRecord,
    ) -> std::result::Result<CheckedExample, String> {
        if record.len() != self.columns.len() {
            return Err(format!(
                "the row has {} cells, the header {} columns; every row needs one value per column (quote a value that holds the separator)",
                record.len(),
                self.columns.len()
            ));
        }
        let input = match &self.input {
            Input::Ordered(columns) => {
                let mut values = Vec::with_capacity(columns.len());
                for &column in columns {
                    values.push(self.number(record, column)?);
                }
                easeml_object::Object::single(values)
            }
            Input::Named(fields) => {
                let mut object = easeml_object::Object::default();
                for (column, data_type) in fields {
                    object
                        .tensors
                        .push(self.field(checker, record, *column, data_type)?);
                }
                object
            }
        };
        let output = match &self.output {
            Output::Column(column) => {
                let text = self.cell(record, *column)?;
                checker
                    .output_text(text, 0)
                    .map_err(|message| format!("{}: {message}", self.name(*column)))?
            }
            Output::ClassIndex(column, names) => {
                let text = self.cell(record, *column)?;
                let index = text
                    .parse::<usize>()
                    .ok()
                    .filter(|index| *index < names.len())
                    .ok_or_else(|| {
                        format!(
                            "{} (the class index): `{text}` is not a class index; the first line names {} classes, so it is 0 to {}",
                            self.name(*column),
                            names.len(),
                            names.len() - 1
                        )
                    })?;
                CheckedOutput::Label(names[index].clone())
            }
        };
        Ok(CheckedExample { input, output })
    }

    /// The value of one tensor field from its cell: a number for a one-value field, else a JSON
    /// array or a file path (the feed lines' readers).
    fn field(
        &self,
        checker: &LineChecker<'_>,
        record: &ByteRecord,
        column: usize,
        data_type: &DataType,
    ) -> std::result::Result<Vec<f32>, String> {
        let count = element_count(data_type);
        let text = self.cell(record, column)?;
        let in_column = |message: String| format!("{}: {message}", self.name(column));
        if text.starts_with('[') {
            let value = super::parse_json(text, 0).map_err(in_column)?;
            let path = format!("input.{}", data_type.fields[0].name);
            let object = object_from_json(data_type, value.value(), &path)
                .map_err(|error| in_column(error.to_string()))?;
            let mut object = object;
            return Ok(std::mem::take(&mut object.tensors)
                .into_iter()
                .next()
                .unwrap_or_default());
        }
        if count == 1 {
            return self.number(record, column).map(|value| vec![value]);
        }
        if text.parse::<f64>().is_ok() {
            return Err(in_column(format!(
                "one number, but the field `{}` is {} ({count} values): give a JSON array, or the path of an image or .npy file",
                data_type.fields[0].name,
                describe_type(data_type)
            )));
        }
        checker.input_file(data_type, text).map_err(in_column)
    }

    /// A cell's text, refused when it is missing.
    fn cell<'r>(
        &self,
        record: &'r ByteRecord,
        column: usize,
    ) -> std::result::Result<&'r str, String> {
        let bytes = record.get(column).unwrap_or_default();
        let text = std::str::from_utf8(bytes)
            .map_err(|error| format!("{}: not UTF-8 text: {error}", self.name(column)))?;
        if text.is_empty()
            || MISSING
                .iter()
                .any(|missing| text.eq_ignore_ascii_case(missing))
        {
            let value = if text.is_empty() {
                String::new()
            } else {
                format!(" (`{text}`)")
            };
            return Err(format!(
                "{}: the value is missing{value}; fill it in or remove the row",
                self.name(column)
            ));
        }
        Ok(text)
    }

    /// A cell's number: finite, not missing.
    fn number(&self, record: &ByteRecord, column: usize) -> std::result::Result<f32, String> {
        let text = self.cell(record, column)?;
        match text.parse::<f32>() {
            Ok(value) if value.is_finite() => Ok(value),
            Ok(_) => Err(format!(
                "{}: `{text}` is not a finite number (or too large for 32 bits); every value must be finite",
                self.name(column)
            )),
            Err(_) => Err(format!("{}: `{text}` is not a number", self.name(column))),
        }
    }

    /// A column as messages name it: ``column `petal_width` `` (or `column 3` when it has no name).
    fn name(&self, column: usize) -> String {
        describe_column(&self.columns[column])
    }
}

/// ``column `NAME` ``, or `column N` for a column without a name.
fn describe_column(name: &str) -> String {
    if name.starts_with("column ") && name[7..].parse::<usize>().is_ok() {
        name.to_owned()
    } else {
        format!("column `{name}`")
    }
}

/// The separator a file's extension names: `,` for `.csv`, a tab for `.tsv` and `.tab`.
fn extension_delimiter(path: &Path) -> Option<u8> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "csv" => Some(b','),
        "tsv" | "tab" => Some(b'\t'),
        _ => None,
    }
}

/// Whether a path names a table by its extension (`.csv`, `.tsv`, `.tab`): what the `feed`
/// command reads as a table (`Client::feed_csv`), not as feed lines.
pub fn is_table_path(path: &Path) -> bool {
    extension_delimiter(path).is_some()
}

/// The separator of the header line at the start of `start`: the one of `,`, tab, `;`, `|` it
/// holds most often outside quotes (`,` on a tie or when it holds none).
fn sniff_delimiter(start: &[u8]) -> u8 {
    let line = start
        .split(|byte| *byte == b'\n')
        .next()
        .unwrap_or_default();
    let candidates = [b',', b'\t', b';', b'|'];
    let mut counts = [0usize; 4];
    let mut quoted = false;
    for byte in line {
        if *byte == b'"' {
            quoted = !quoted;
        } else if !quoted && let Some(index) = candidates.iter().position(|c| c == byte) {
            counts[index] += 1;
        }
    }
    let mut best = 0;
    for index in 1..candidates.len() {
        if counts[index] > counts[best] {
            best = index;
        }
    }
    candidates[best]
}

/// scikit-learn's first line: two whole numbers (rows, features), then at least one class name
/// (none a number).
fn sklearn_layout(names: &[String]) -> Option<(u64, u64, Vec<String>)> {
    let [rows, features, classes @ ..] = names else {
        return None;
    };
    let rows = rows.parse::<u64>().ok()?;
    let features = features.parse::<u64>().ok()?;
    let is_name = |name: &String| !name.starts_with("column ") && name.parse::<f64>().is_err();
    if classes.is_empty() || !classes.iter().all(is_name) {
        return None;
    }
    Some((rows, features, classes.to_vec()))
}

/// The index of the column named `name`; an error when the header has it more than once.
fn find_column(names: &[String], name: &str, shown: &str) -> Result<Option<usize>> {
    let mut found = names
        .iter()
        .enumerate()
        .filter(|(_, column)| *column == name);
    let first = found.next().map(|(index, _)| index);
    if let Some((second, _)) = found.next() {
        return Err(bad_file(
            shown,
            format!(
                "the header names the column `{name}` twice (columns {} and {}); rename one",
                first.unwrap_or_default() + 1,
                second + 1
            ),
        ));
    }
    Ok(first)
}

/// The schema's only tensor field and its type, when the input is exactly one tensor field.
fn single_tensor(data_type: &DataType) -> Option<(&Field, DataType)> {
    match data_type.fields.as_slice() {
        [
            field @ Field {
                kind: FieldKind::Tensor(_),
                ..
            },
        ] => Some((field, data_type.clone())),
        _ => None,
    }
}

/// The most columns a table of `schema` can have: its input's values (one tensor field, in file
/// order) or fields (by name), and the label column; or scikit-learn's first line (two numbers
/// and the class names).
fn max_columns(schema: &Schema) -> u64 {
    let input = match single_tensor(&schema.input) {
        Some((_, data_type)) => element_count(&data_type),
        None => schema.input.fields.len() as u64,
    };
    (input + 1).max(2 + schema.label_capacity().unwrap_or(0))
}

/// The number of values of a type of one tensor field.
fn element_count(data_type: &DataType) -> u64 {
    data_type
        .tensors()
        .map(|tensor| tensor.element_count())
        .sum()
}

/// Matches the header's columns (less the label column) with the schema's input.
fn input_columns(names: &[String], label: usize, schema: &Schema, shown: &str) -> Result<Input> {
    let input = &schema.input;
    let described = describe_type(input);
    if let Some(name) = input.recursive_names().next() {
        return Err(bad_file(
            shown,
            format!(
                "this app's input {described} is recursive (field `{name}`); a table row cannot hold it: feed JSON Lines"
            ),
        ));
    }
    let others: Vec<usize> = (0..names.len()).filter(|index| *index != label).collect();
    if let Some((field, data_type)) = single_tensor(input) {
        let count = element_count(&data_type);
        if let Some(column) = find_column(names, &field.name, shown)?.filter(|c| *c != label) {
            return named(names, label, vec![(column, data_type)], shown);
        }
        if count > 1 && others.len() == 1 {
            return Ok(Input::Named(vec![(others[0], data_type)]));
        }
        if others.len() as u64 != count {
            let listed: Vec<String> = others.iter().map(|index| names[*index].clone()).collect();
            return Err(bad_file(
                shown,
                format!(
                    "this app's input is {described}: expected {count} input columns besides the label column `{}`, found {}: {}",
                    names[label],
                    others.len(),
                    list_columns(&listed)
                ),
            ));
        }
        return Ok(Input::Ordered(others));
    }
    let mut fields = Vec::new();
    let mut missing = Vec::new();
    for field in &input.fields {
        let data_type = DataType {
            fields: vec![field.clone()],
        };
        match find_column(names, &field.name, shown)?.filter(|column| *column != label) {
            Some(column) => fields.push((column, data_type)),
            None => missing.push(format!("`{}`", field.name)),
        }
    }
    if !missing.is_empty() {
        return Err(bad_file(
            shown,
            format!(
                "this app's input {described} takes one column per field, by name; the header has none for {}; its columns are {}",
                missing.join(", "),
                list_columns(names)
            ),
        ));
    }
    named(names, label, fields, shown)
}

/// One column per field; any other column (not the label's) is an error naming it.
fn named(
    names: &[String],
    label: usize,
    fields: Vec<(usize, DataType)>,
    shown: &str,
) -> Result<Input> {
    let extra: Vec<String> = (0..names.len())
        .filter(|index| *index != label && !fields.iter().any(|(column, _)| column == index))
        .map(|index| names[index].clone())
        .collect();
    if !extra.is_empty() {
        let wanted: Vec<String> = fields
            .iter()
            .map(|(_, data_type)| format!("`{}`", data_type.fields[0].name))
            .collect();
        return Err(bad_file(
            shown,
            format!(
                "the input columns are the fields {} and the label column `{}`; the header also has {}: remove {} (extra columns are refused, not ignored)",
                wanted.join(", "),
                names[label],
                list_columns(&extra),
                if extra.len() == 1 { "it" } else { "them" }
            ),
        ));
    }
    Ok(Input::Named(fields))
}

/// Column names for a message: `` `a`, `b`, `c` ``, the first [`LISTED_COLUMNS`] of a long list and
/// how many more.
fn list_columns(names: &[String]) -> String {
    let mut listed: Vec<String> = names
        .iter()
        .take(LISTED_COLUMNS)
        .map(|name| format!("`{name}`"))
        .collect();
    if names.len() > LISTED_COLUMNS {
        listed.push(format!("and {} more", names.len() - LISTED_COLUMNS));
    }
    if listed.is_empty() {
        "none".to_owned()
    } else {
        listed.join(", ")
    }
}

/// The folder a table's relative paths are read from: the table's own.
pub(crate) fn table_folder(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}
