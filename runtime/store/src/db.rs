//! The SQL layer under the store: one small API over SQLite (rusqlite) and PostgreSQL (the
//! synchronous `postgres` crate), so that every query of the store is written once.
//!
//! - Queries are written in the dialect both engines share, with `?1, ?2, ...` placeholders
//!   (PostgreSQL gets them as `$1, $2, ...`). Where the engines differ, the store asks
//!   [`Db::dialect`] (`FOR UPDATE` row locks and `SKIP LOCKED` exist on PostgreSQL only; SQLite's
//!   `BEGIN IMMEDIATE` already makes each write transaction the only writer).
//! - Values cross the layer as [`Value`]s: integers are `BIGINT` (`INTEGER` on SQLite), reals
//!   `DOUBLE PRECISION` (`REAL`), text and bytes; a parameter is converted to the column type
//!   PostgreSQL infers for its placeholder, so one `i64` binds to a `BIGINT` or an `INTEGER`.
//! - A [`Transaction`] is `BEGIN` on the connection, committed by [`Transaction::commit`] and
//!   rolled back when dropped uncommitted. PostgreSQL transactions run at READ COMMITTED; the
//!   store takes row locks (`FOR UPDATE`) where it reads what it then writes.
//! - The PostgreSQL client blocks (it drives a runtime of its own): called from a thread inside a
//!   tokio runtime (the server's), each call runs on a scoped thread of its own (`outside_async`),
//!   so the store stays callable from anywhere.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Deref;

/// One SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// NULL.
    Null,
    /// An integer (booleans are 0 and 1).
    Int(i64),
    /// A real.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// Errors of the SQL layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// From SQLite.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// From PostgreSQL.
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    /// A query that must return a row returned none.
    #[error("the query returned no row")]
    NoRows,
    /// A column's value is not of the type asked for.
    #[error("column {index} holds {found}, not {wanted}")]
    Type {
        /// The column.
        index: usize,
        /// What it holds.
        found: String,
        /// What was asked for.
        wanted: &'static str,
    },
}

impl DbError {
    /// Whether this is a unique-constraint violation (a row that exists already).
    pub fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => {
                error.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || error.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            }
            DbError::Postgres(error) => {
                error.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
            }
            _ => false,
        }
    }
}

/// The layer's results.
pub type DbResult<T> = std::result::Result<T, DbError>;

/// Which engine a [`Db`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite: one writer at a time (`BEGIN IMMEDIATE`).
    Sqlite,
    /// PostgreSQL: concurrent writers, row locks.
    Postgres,
}

impl Dialect {
    /// `FOR UPDATE` (lock the rows read, for the transaction) on PostgreSQL; nothing on SQLite,
    /// whose write transactions exclude each other already.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }

    /// `FOR UPDATE SKIP LOCKED` (lock the rows read, skipping rows another transaction holds) on
    /// PostgreSQL; nothing on SQLite.
    pub fn for_update_skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}

/// A value that can be a query parameter.
pub trait ToValue {
    /// The value.
    fn to_value(&self) -> Value;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_to_value!(i64, i32, u32, u16, u8);

impl ToValue for u64 {
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for usize {
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Blob(self.clone())
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToValue::to_value)
    }
}

/// A query's parameters: `()`, an array of one type, or [`params!`](crate::params).
pub trait Params {
    /// The values, in placeholder order.
    fn values(self) -> Vec<Value>;
}

impl Params for () {
    fn values(self) -> Vec<Value> {
        Vec::new()
    }
}

impl<T: ToValue, const N: usize> Params for [T; N] {
    fn values(self) -> Vec<Value> {
        self.iter().map(ToValue::to_value).collect()
    }
}

impl Params for &[&dyn ToValue] {
    fn values(self) -> Vec<Value> {
        self.iter().map(|value| value.to_value()).collect()
    }
}

/// Parameters of mixed types: `params![a, b, c]`.
#[macro_export]
#[doc(hidden)]
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$(&$value as &dyn $crate::db::ToValue),*] as &[&dyn $crate::db::ToValue]
    };
}

/// A value that a column can be read as.
pub trait FromValue: Sized {
    /// The type's name, for errors.
    const NAME: &'static str;
    /// The value as this type, if it is one.
    fn from_value(value: &Value) -> Option<Self>;
}

impl FromValue for i64 {
    const NAME: &'static str = "an integer";
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(int) => Some(*int),
            _ => None,
        }
    }
}

macro_rules! narrow_int_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            const NAME: &'static str = concat!("an integer that fits ", stringify!($t));
            fn from_value(value: &Value) -> Option<Self> {
                match value {
                    Value::Int(int) => <$t>::try_from(*int).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
narrow_int_from_value!(u64, u32, i32, usize);

impl FromValue for bool {
    const NAME: &'static str = "a boolean (0 or 1)";
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(0) => Some(false),
            Value::Int(1) => Some(true),
            _ => None,
        }
    }
}

impl FromValue for f64 {
    const NAME: &'static str = "a real";
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Real(real) => Some(*real),
            // SQLite keeps a REAL column's integral value as an integer in some expressions.
            Value::Int(int) => Some(*int as f64),
            _ => None,
        }
    }
}

impl FromValue for String {
    const NAME: &'static str = "text";
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Text(text) => Some(text.clone()),
            _ => None,
        }
    }
}

impl FromValue for Vec<u8> {
    const NAME: &'static str = "bytes";
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Blob(bytes) => Some(bytes.clone()),
            _ => None,
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    const NAME: &'static str = T::NAME;
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One result row.
#[derive(Debug)]
pub struct Row {
    values: Vec<Value>,
}

impl Row {
    /// Column `index` as `T`.
    pub fn get<T: FromValue>(&self, index: usize) -> DbResult<T> {
        let value = self.values.get(index).unwrap_or(&Value::Null);
        T::from_value(value).ok_or_else(|| DbError::Type {
            index,
            found: format!("{value:?}"),
            wanted: T::NAME,
        })
    }
}

/// `query_row(...).optional()`: no row is `None`.
pub trait OptionalExt<T> {
    /// `Ok(None)` for [`DbError::NoRows`].
    fn optional(self) -> DbResult<Option<T>>;
}

impl<T> OptionalExt<T> for DbResult<T> {
    fn optional(self) -> DbResult<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(DbError::NoRows) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Runs `op` where the synchronous PostgreSQL client may block: on this thread, or, when this
/// thread is inside a tokio runtime (the server's start-up and its blocking tasks), on a scoped
/// thread of its own (the client drives its own runtime, which tokio refuses to start inside
/// another).
pub(crate) fn outside_async<T: Send>(op: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return op();
    }
    std::thread::scope(|scope| {
        scope
            .spawn(op)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A PostgreSQL connection with its prepared statements, by SQL text.
pub struct PgConnection {
    /// Always `Some` but while being dropped.
    client: Option<postgres::Client>,
    statements: HashMap<String, postgres::Statement>,
}

impl std::fmt::Debug for PgConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConnection")
            .field("statements", &self.statements.len())
            .finish_non_exhaustive()
    }
}

impl Drop for PgConnection {
    fn drop(&mut self) {
        // Closing the client blocks too.
        if let Some(client) = self.client.take() {
            outside_async(move || drop(client));
        }
    }
}

impl PgConnection {
    /// Connects to `url` (`postgres://user:password@host:port/database`, no TLS: use a local
    /// socket, a loopback port or a tunnel).
    pub fn connect(url: &str) -> DbResult<PgConnection> {
        let client = outside_async(|| postgres::Client::connect(url, postgres::NoTls))?;
        Ok(PgConnection {
            client: Some(client),
            statements: HashMap::new(),
        })
    }

    fn client(&mut self) -> &mut postgres::Client {
        self.client
            .as_mut()
            .unwrap_or_else(|| unreachable!("the client is only taken by Drop"))
    }

    fn statement(&mut self, sql: &str) -> DbResult<postgres::Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client().prepare(&postgres_placeholders(sql))?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    fn query(&mut self, sql: &str, values: &[Value]) -> DbResult<Vec<postgres::Row>> {
        outside_async(|| {
            let statement = self.statement(sql)?;
            let params: Vec<&(dyn postgres::types::ToSql + Sync)> = values
                .iter()
                .map(|value| value as &(dyn postgres::types::ToSql + Sync))
                .collect();
            Ok(self.client().query(&statement, &params)?)
        })
    }

    fn execute(&mut self, sql: &str, values: &[Value]) -> DbResult<u64> {
        outside_async(|| {
            let statement = self.statement(sql)?;
            let params: Vec<&(dyn postgres::types::ToSql + Sync)> = values
                .iter()
                .map(|value| value as &(dyn postgres::types::ToSql + Sync))
                .collect();
            Ok(self.client().execute(&statement, &params)?)
        })
    }

    fn batch_execute(&mut self, sql: &str) -> DbResult<()> {
        outside_async(|| Ok(self.client().batch_execute(sql)?))
    }

    /// `rows` (flat, `columns.len()` values each) into `table` by `COPY ... FROM STDIN (FORMAT
    /// binary)`, each row after its id from `ids` (the column `id`): one statement and one stream
    /// however many rows, no SQL parsed per row. The columns' types are the table's (read once,
    /// from a prepared `SELECT` of them).
    fn copy_in(
        &mut self,
        table: &str,
        ids: &[i64],
        columns: &[&str],
        rows: &[Value],
    ) -> DbResult<()> {
        outside_async(|| {
            let list = format!("id, {}", columns.join(", "));
            let types: Vec<postgres::types::Type> = self
                .statement(&format!("SELECT {list} FROM {table} LIMIT 0"))?
                .columns()
                .iter()
                .map(|column| column.type_().clone())
                .collect();
            let sink = self
                .client()
                .copy_in(&format!("COPY {table} ({list}) FROM STDIN (FORMAT binary)"))?;
            let mut writer = postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
            let mut cells: Vec<&(dyn postgres::types::ToSql + Sync)> =
                Vec::with_capacity(columns.len() + 1);
            for (id, row) in ids.iter().zip(rows.chunks(columns.len())) {
                cells.clear();
                cells.push(id);
                cells.extend(
                    row.iter()
                        .map(|value| value as &(dyn postgres::types::ToSql + Sync)),
                );
                writer.write(&cells)?;
            }
            writer.finish()?;
            Ok(())
        })
    }
}

/// `?1` -> `$1`: PostgreSQL's placeholders (the store's SQL has no `?` anywhere else).
pub fn postgres_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// Rows one multi-row `INSERT` of [`Db::insert_rows`] carries on SQLite (8 parameters each for
/// examples: far below SQLite's 32,766 parameters a statement).
pub const ROWS_PER_INSERT: usize = 500;

/// `(?1, ?2), (?3, ?4), ...`: `rows` groups of `columns` numbered placeholders.
fn placeholder_rows(rows: usize, columns: usize) -> String {
    (0..rows)
        .map(|row| {
            let cells: Vec<String> = (1..=columns)
                .map(|column| format!("?{}", row * columns + column))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A connection to one of the two engines.
#[derive(Debug)]
pub enum Db {
    /// An SQLite database file.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL database (boxed: its client is much larger than an SQLite handle).
    Postgres(Box<RefCell<PgConnection>>),
}

impl Db {
    /// The engine.
    pub fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a statement; returns the rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> DbResult<usize> {
        let values = params.values();
        match self {
            Db::Sqlite(connection) => {
                Ok(connection.execute(sql, rusqlite::params_from_iter(values.iter()))?)
            }
            Db::Postgres(connection) => {
                let changed = connection.borrow_mut().execute(sql, &values)?;
                Ok(usize::try_from(changed).unwrap_or(usize::MAX))
            }
        }
    }

    /// Runs several statements without parameters (DDL, `BEGIN`, `COMMIT`).
    pub fn execute_batch(&self, sql: &str) -> DbResult<()> {
        match self {
            Db::Sqlite(connection) => Ok(connection.execute_batch(sql)?),
            Db::Postgres(connection) => connection.borrow_mut().batch_execute(sql),
        }
    }

    /// Every row of a query, each mapped by `map`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut map: impl FnMut(&Row) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let values = params.values();
        match self {
            Db::Sqlite(connection) => {
                let mut statement = connection.prepare_cached(sql)?;
                let columns = statement.column_count();
                let mut rows = statement.query(rusqlite::params_from_iter(values.iter()))?;
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    let values = (0..columns)
                        .map(|index| row.get_ref(index).map(from_sqlite))
                        .collect::<rusqlite::Result<Vec<Value>>>()?;
                    out.push(map(&Row { values })?);
                }
                Ok(out)
            }
            Db::Postgres(connection) => {
                let rows = connection.borrow_mut().query(sql, &values)?;
                rows.iter()
                    .map(|row| {
                        let values = (0..row.len())
                            .map(|index| row.try_get::<_, Value>(index))
                            .collect::<Result<Vec<Value>, postgres::Error>>()?;
                        map(&Row { values })
                    })
                    .collect()
            }
        }
    }

    /// The first row of a query mapped by `map`; [`DbError::NoRows`] when there is none.
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        map: impl FnOnce(&Row) -> DbResult<T>,
    ) -> DbResult<T> {
        let mut map = Some(map);
        let mut first = None;
        // The rows after the first are read and dropped (the store's single-row queries
        // return at most one).
        self.query_map(sql, params, |row| {
            if let Some(map) = map.take() {
                first = Some(map(row)?);
            }
            Ok(())
        })?;
        first.ok_or(DbError::NoRows)
    }

    /// Inserts `rows` (flat: `columns.len()` values a row) into `table`, whose `id` is its row id
    /// (SQLite) or identity (PostgreSQL), and returns the new rows' ids in the rows' order, each
    /// above the ids drawn before it by this connection. SQLite: multi-row `INSERT ... RETURNING
    /// id` statements of [`ROWS_PER_INSERT`] rows. PostgreSQL: the ids drawn from the identity's
    /// sequence in one query, then every row in one binary `COPY` with its id (no statement to
    /// parse and no round trip per 500 rows; bench/results/service fix 10).
    /// `table` and `columns` are the store's own names, never user input.
    pub fn insert_rows(&self, table: &str, columns: &[&str], rows: &[Value]) -> DbResult<Vec<i64>> {
        let width = columns.len();
        assert!(
            width > 0 && rows.len().is_multiple_of(width),
            "insert_rows: {} values are not rows of {width} columns",
            rows.len()
        );
        let count = rows.len() / width;
        if count == 0 {
            return Ok(Vec::new());
        }
        match self {
            Db::Sqlite(_) => {
                let mut ids = Vec::with_capacity(count);
                for chunk in rows.chunks(ROWS_PER_INSERT * width) {
                    let params: Vec<&dyn ToValue> =
                        chunk.iter().map(|value| value as &dyn ToValue).collect();
                    let mut chunk_ids: Vec<i64> = self.query_map(
                        &format!(
                            "INSERT INTO {table} ({}) VALUES {} RETURNING id",
                            columns.join(", "),
                            placeholder_rows(chunk.len() / width, width)
                        ),
                        params.as_slice(),
                        |row| row.get(0),
                    )?;
                    // Row ids are drawn in the order of the rows (one writer): sorted, they are
                    // the rows' ids in order, whatever order RETURNING lists them in.
                    chunk_ids.sort_unstable();
                    ids.extend(chunk_ids);
                }
                Ok(ids)
            }
            Db::Postgres(connection) => {
                // One session draws from a sequence in increasing order; sorted, the ids follow
                // the rows (other sessions' draws may come between them: ids need not be dense).
                // The sequence is looked up once (materialized): named in the select list, the
                // lookup ran per row and cost 8x the draws.
                let mut ids: Vec<i64> = self.query_map(
                    &format!(
                        "WITH sequence AS MATERIALIZED \
                         (SELECT pg_get_serial_sequence('{table}', 'id')::regclass AS name) \
                         SELECT nextval(sequence.name) FROM sequence, generate_series(1, ?1::bigint)"
                    ),
                    params![count as i64],
                    |row| row.get(0),
                )?;
                ids.sort_unstable();
                connection
                    .borrow_mut()
                    .copy_in(table, &ids, columns, rows)?;
                Ok(ids)
            }
        }
    }

    /// Begins a write transaction: `BEGIN IMMEDIATE` on SQLite (the only writer until it ends),
    /// `BEGIN` (READ COMMITTED) on PostgreSQL.
    pub fn transaction(&self) -> DbResult<Transaction<'_>> {
        self.execute_batch(match self.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        })?;
        Ok(Transaction {
            db: self,
            finished: false,
        })
    }
}

/// An open transaction: its queries are the connection's; [`Transaction::commit`] ends it, and
/// dropping it uncommitted rolls it back.
#[derive(Debug)]
pub struct Transaction<'a> {
    db: &'a Db,
    finished: bool,
}

impl Transaction<'_> {
    /// Commits.
    pub fn commit(mut self) -> DbResult<()> {
        self.finished = true;
        self.db.execute_batch("COMMIT")
    }
}

impl Deref for Transaction<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }
}

fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(int) => Value::Int(int),
        ValueRef::Real(real) => Value::Real(real),
        ValueRef::Text(text) => Value::Text(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Blob(bytes) => Value::Blob(bytes.to_vec()),
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(int) => ValueRef::Integer(*int),
            Value::Real(real) => ValueRef::Real(*real),
            Value::Text(text) => ValueRef::Text(text.as_bytes()),
            Value::Blob(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, BoxError> {
        use postgres::types::{IsNull, Type};
        let mismatch = || -> BoxError { format!("cannot bind {self:?} as {ty}").into() };
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(int) => match *ty {
                Type::INT8 => int.to_sql(ty, out),
                Type::INT4 => i32::try_from(*int)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*int)?.to_sql(ty, out),
                Type::FLOAT8 => (*int as f64).to_sql(ty, out),
                Type::BOOL => (*int != 0).to_sql(ty, out),
                _ => Err(mismatch()),
            },
            Value::Real(real) => match *ty {
                Type::FLOAT8 => real.to_sql(ty, out),
                Type::FLOAT4 => (*real as f32).to_sql(ty, out),
                _ => Err(mismatch()),
            },
            Value::Text(text) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    text.as_str().to_sql(ty, out)
                }
                _ => Err(mismatch()),
            },
            Value::Blob(bytes) => match *ty {
                Type::BYTEA => bytes.as_slice().to_sql(ty, out),
                _ => Err(mismatch()),
            },
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl<'a> postgres::types::FromSql<'a> for Value {
    fn from_sql(ty: &postgres::types::Type, raw: &'a [u8]) -> Result<Value, BoxError> {
        use postgres::types::Type;
        Ok(match *ty {
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, raw)?)),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                Value::Text(String::from_sql(ty, raw)?)
            }
            Type::BYTEA => Value::Blob(Vec::<u8>::from_sql(ty, raw)?),
            _ => return Err(format!("the store reads no column of type {ty}").into()),
        })
    }

    fn from_sql_null(_: &postgres::types::Type) -> Result<Value, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_postgres_ones() {
        assert_eq!(
            postgres_placeholders("SELECT a FROM t WHERE b = ?1 AND c IN (?2, ?10) AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $10) AND d = '?'"
        );
    }

    #[test]
    fn rows_read_as_the_types_asked_for_or_say_why_not() {
        let row = Row {
            values: vec![
                Value::Int(7),
                Value::Null,
                Value::Text("x".into()),
                Value::Int(-1),
            ],
        };
        assert_eq!(row.get::<i64>(0).unwrap(), 7);
        assert_eq!(row.get::<f64>(0).unwrap(), 7.0);
        assert_eq!(row.get::<Option<String>>(1).unwrap(), None);
        assert_eq!(row.get::<String>(2).unwrap(), "x");
        let error = row.get::<u32>(3).unwrap_err().to_string();
        assert_eq!(
            error,
            "column 3 holds Int(-1), not an integer that fits u32"
        );
        assert!(row.get::<String>(1).is_err());
    }

    #[test]
    fn a_dropped_transaction_rolls_back() {
        let db = Db::Sqlite(rusqlite::Connection::open_in_memory().unwrap());
        db.execute_batch("CREATE TABLE t (a INTEGER)").unwrap();
        {
            let transaction = db.transaction().unwrap();
            transaction
                .execute("INSERT INTO t (a) VALUES (?1)", [1])
                .unwrap();
        }
        let count: i64 = db
            .query_row("SELECT COUNT(*) FROM t", (), |row| row.get(0))
            .unwrap();
        assert_eq!(count, 0);
        let transaction = db.transaction().unwrap();
        transaction
            .execute("INSERT INTO t (a) VALUES (?1)", params![2_i64])
            .unwrap();
        transaction.commit().unwrap();
        let rows = db
            .query_map("SELECT a FROM t", (), |row| row.get::<i64>(0))
            .unwrap();
        assert_eq!(rows, [2]);
        assert!(matches!(
            db.query_row("SELECT a FROM t WHERE a = 5", (), |row| row.get::<i64>(0)),
            Err(DbError::NoRows)
        ));
    }
}
