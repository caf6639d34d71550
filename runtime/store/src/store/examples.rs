//! Examples: a feed's rows (one bulk insert a batch, `Db::insert_rows`; small inputs and outputs
//! in the rows themselves), the paged and filtered listing, their bytes read by example ([`Store::example_bytes`]), the counts
//! on the app's row, enabling and disabling one.

use super::*;

/// Where a feed puts one of an example's blobs.
pub(super) enum Placed<'a> {
    /// A small one ([`INLINE_BLOB_BYTES`]): its bytes go into the example's own row.
    Row(BlobHash, &'a [u8]),
    /// A larger one (or one stored before): a blob of the folder or bucket, written now.
    Stored(BlobHash),
}

impl Placed<'_> {
    fn hash(&self) -> &BlobHash {
        match self {
            Placed::Row(hash, _) | Placed::Stored(hash) => hash,
        }
    }

    /// The bytes the row keeps (`NULL` for a stored blob).
    fn row_bytes(&self) -> crate::db::Value {
        match self {
            Placed::Row(_, bytes) => crate::db::Value::Blob(bytes.to_vec()),
            Placed::Stored(_) => crate::db::Value::Null,
        }
    }
}

/// Where an example's blob goes (see [`Placed`]); a larger one is written before the rows.
pub(super) fn place_blob<'a>(blobs: &Blobs, blob: &'a Blob) -> Result<Placed<'a>> {
    match blob {
        Blob::Bytes(bytes) if bytes.len() <= INLINE_BLOB_BYTES => {
            Ok(Placed::Row(BlobHash::of(bytes), bytes.as_slice()))
        }
        _ => Ok(Placed::Stored(blobs.put_or_check(blob)?)),
    }
}

/// The columns of one example row a feed inserts, in the order of its values.
const INSERT_COLUMNS: [&str; 8] = [
    "app",
    "input_sha256",
    "input_bytes",
    "output_sha256",
    "output_bytes",
    "label_index",
    "data_version",
    "created_ms",
];

/// The bytes of one example ([`Store::example_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleBytes {
    /// The input's encoding.
    pub input: Vec<u8>,
    /// The output's encoding, for an example whose output is a blob (not a label).
    pub output: Option<Vec<u8>>,
}

pub(super) const EXAMPLE_COLUMNS: &str = "e.id, e.input_sha256, e.output_sha256, e.label_index, l.label, e.enabled, e.data_version, e.created_ms";

pub(super) fn example_from_row(row: &Row) -> DbResult<ExampleRecord> {
    let input: String = row.get(1)?;
    let output_hash: Option<String> = row.get(2)?;
    let label_index: Option<i64> = row.get(3)?;
    let label: Option<String> = row.get(4)?;
    let output = match (output_hash, label_index) {
        (Some(hash), _) => StoredOutput::Blob(trusted_hash(hash)),
        (None, index) => StoredOutput::Label {
            index: index.unwrap_or_default() as u32,
            name: label.unwrap_or_default(),
        },
    };
    Ok(ExampleRecord {
        id: ExampleId(row.get(0)?),
        input: trusted_hash(input),
        output,
        enabled: row.get(5)?,
        data_version: row.get::<i64>(6)? as u64,
        created_ms: row.get(7)?,
    })
}

impl Store {
    /// Stores a batch of examples atomically: every example or none. Blobs are written first, then
    /// one transaction maps labels (first-seen order, up to D), inserts the rows and bumps the data
    /// version. An empty batch changes nothing.
    pub fn insert_examples(&mut self, id: AppId, examples: &[NewExample]) -> Result<InsertReport> {
        let app = self.app(id)?;
        if examples.is_empty() {
            return Ok(InsertReport {
                ids: Vec::new(),
                data_version: app.data_version,
                new_labels: Vec::new(),
            });
        }
        // Small blobs go into the rows themselves (one file per example would make a feed of a
        // million rows a million file creations, and a table keyed by their hashes a million
        // random inserts: the rows are appended in id order); larger ones are written to the
        // blob folder or bucket first.
        let mut placed = Vec::with_capacity(examples.len());
        for example in examples {
            let input = place_blob(&self.blobs, &example.input)?;
            let output = match &example.output {
                NewOutput::Blob(blob) => Some(place_blob(&self.blobs, blob)?),
                NewOutput::Label(_) => None,
            };
            placed.push((input, output));
        }
        let context = format!(
            "storing {} example(s) of app `{}`",
            examples.len(),
            app.name
        );
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        // Re-read inside the transaction (the app's row locked on PostgreSQL: feeds of one app
        // take their turns): another writer may have changed them.
        let app = query_app_in(&transaction, id)?;
        let mut label_map = read_label_map(&transaction, &app)?;
        let known_before = label_map.as_ref().map_or(0, |map| map.labels.len());
        let data_version = app.data_version + 1;
        let created = now_ms();
        let mut rows = Vec::with_capacity(examples.len() * INSERT_COLUMNS.len());
        for (example, (input, output)) in examples.iter().zip(&placed) {
            let label_index = match &example.output {
                NewOutput::Blob(_) => None,
                NewOutput::Label(label) => {
                    let Some(map) = label_map.as_mut() else {
                        return Err(Error::NoLabels(app.name.clone()));
                    };
                    Some(map.resolve(label).map_err(|source| Error::Label {
                        app: app.name.clone(),
                        source,
                    })?)
                }
            };
            use crate::db::Value;
            rows.extend([
                Value::Int(id.0),
                Value::Text(input.hash().as_str().to_owned()),
                input.row_bytes(),
                output.as_ref().map_or(Value::Null, |output| {
                    Value::Text(output.hash().as_str().to_owned())
                }),
                output.as_ref().map_or(Value::Null, Placed::row_bytes),
                label_index.map_or(Value::Null, |index| Value::Int(i64::from(index))),
                Value::Int(data_version as i64),
                Value::Int(created),
            ]);
        }
        let ids: Vec<ExampleId> = transaction
            .insert_rows("examples", &INSERT_COLUMNS, &rows)
            .map_err(db(context.clone()))?
            .into_iter()
            .map(ExampleId)
            .collect();
        let mut new_labels = Vec::new();
        if let Some(map) = &label_map {
            for (index, label) in map.labels.iter().enumerate().skip(known_before) {
                transaction
                    .execute(
                        "INSERT INTO label_maps (app, label, label_index) VALUES (?1, ?2, ?3)",
                        params![id.0, label, index as i64],
                    )
                    .map_err(db(context.clone()))?;
                new_labels.push((label.clone(), index as u32));
            }
        }
        transaction
            .execute(
                "UPDATE apps SET data_version = ?1, example_count = example_count + ?3,
                 enabled_count = enabled_count + ?3 WHERE id = ?2",
                params![data_version as i64, id.0, ids.len() as i64],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(InsertReport {
            ids,
            data_version,
            new_labels,
        })
    }

    /// The bytes of each of `records` (examples of any app, read by [`Store::examples`] or
    /// [`Store::example`]), in order: a small input or output from its example's row, read by
    /// the example's id a thousand to a query; a larger one (and every blob of a store from
    /// before schema version 14) from the blobs, by its hash. Every one is checked against its
    /// hash, as [`Store::blob`] checks a blob; an example removed since it was listed (with its
    /// app) is an error.
    pub fn example_bytes(&self, records: &[&ExampleRecord]) -> Result<Vec<ExampleBytes>> {
        type RowBytes = (Option<Vec<u8>>, Option<Vec<u8>>);
        let mut in_rows: std::collections::HashMap<i64, RowBytes> =
            std::collections::HashMap::with_capacity(records.len());
        for chunk in records.chunks(BLOBS_PER_QUERY) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("?{i}")).collect();
            let ids: Vec<i64> = chunk.iter().map(|record| record.id.0).collect();
            let values: Vec<&dyn crate::db::ToValue> =
                ids.iter().map(|id| id as &dyn crate::db::ToValue).collect();
            let rows = self
                .connection
                .query_map(
                    &format!(
                        "SELECT id, input_bytes, output_bytes FROM examples WHERE id IN ({})",
                        placeholders.join(", ")
                    ),
                    values.as_slice(),
                    |row| Ok((row.get::<i64>(0)?, (row.get(1)?, row.get(2)?))),
                )
                .map_err(db("reading the examples' bytes"))?;
            in_rows.extend(rows);
        }
        // The blobs not in their rows, read together.
        let mut elsewhere: Vec<&BlobHash> = Vec::new();
        for record in records {
            let Some((input, output)) = in_rows.get(&record.id.0) else {
                return Err(Error::InvalidInput(format!(
                    "example {} is no longer in the store (its app was removed)",
                    record.id.0
                )));
            };
            if input.is_none() {
                elsewhere.push(&record.input);
            }
            if let (StoredOutput::Blob(hash), None) = (&record.output, output) {
                elsewhere.push(hash);
            }
        }
        // (`Store::blobs` answers one per hash, in order, or an error)
        let mut from_blobs = self.blobs(&elsewhere)?.into_iter();
        let mut next_blob = |hash: &BlobHash| {
            from_blobs
                .next()
                .ok_or_else(|| Error::MissingBlob(hash.clone()))
        };
        records
            .iter()
            .map(|record| {
                let (input, output) = &in_rows[&record.id.0];
                let input = match input {
                    Some(bytes) => crate::blobs::verified(&record.input, bytes.clone())?,
                    None => next_blob(&record.input)?,
                };
                let output = match (&record.output, output) {
                    (StoredOutput::Blob(hash), Some(bytes)) => {
                        Some(crate::blobs::verified(hash, bytes.clone())?)
                    }
                    (StoredOutput::Blob(hash), None) => Some(next_blob(hash)?),
                    (StoredOutput::Label { .. }, _) => None,
                };
                Ok(ExampleBytes { input, output })
            })
            .collect()
    }

    /// One page of the app's examples, in id order.
    pub fn examples(&self, id: AppId, request: PageRequest) -> Result<Page<ExampleRecord>> {
        self.examples_filtered(id, request, &ExampleFilter::default())
    }

    /// One page of the app's examples that pass `filter`, in id order; `total` counts those that
    /// pass.
    pub fn examples_filtered(
        &self,
        id: AppId,
        request: PageRequest,
        filter: &ExampleFilter,
    ) -> Result<Page<ExampleRecord>> {
        let app = self.app(id)?;
        let limit = request.limit.clamp(1, 10_000);
        let context = format!("listing examples of app `{}`", app.name);
        // The casts give PostgreSQL the type of a parameter that may be NULL.
        const FILTER: &str = "(CAST(?2 AS BIGINT) IS NULL OR e.enabled = ?2) AND (CAST(?3 AS TEXT) IS NULL OR l.label = ?3)";
        let items: Vec<ExampleRecord> = self
            .connection
            .query_map(
                &format!(
                    "SELECT {EXAMPLE_COLUMNS} FROM examples e
                     LEFT JOIN label_maps l ON l.app = e.app AND l.label_index = e.label_index
                     WHERE e.app = ?1 AND {FILTER} AND e.id > ?4 ORDER BY e.id LIMIT ?5"
                ),
                params![
                    id.0,
                    filter.enabled,
                    filter.label,
                    request.after.map_or(i64::MIN, |after| after.0),
                    limit + 1
                ],
                example_from_row,
            )
            .map_err(db(context.clone()))?;
        let mut items = items;
        let more = items.len() > limit as usize;
        items.truncate(limit as usize);
        // Unfiltered, the total is the count kept on the app's row: a caller paging through a
        // million examples (the engine loads 10,000 a page) does not count them on every page.
        let total: i64 = if filter.enabled.is_none() && filter.label.is_none() {
            self.example_counts(id)?.0 as i64
        } else {
            self.connection
                .query_row(
                    &format!(
                        "SELECT COUNT(*) FROM examples e
                         LEFT JOIN label_maps l ON l.app = e.app AND l.label_index = e.label_index
                         WHERE e.app = ?1 AND {FILTER}"
                    ),
                    params![id.0, filter.enabled, filter.label],
                    |row| row.get(0),
                )
                .map_err(db(context))?
        };
        let next = match items.last() {
            Some(last) if more => Some(PageRequest {
                after: Some(last.id),
                limit,
            }),
            _ => None,
        };
        Ok(Page {
            items,
            next,
            total: total as u64,
        })
    }

    /// One example of the app.
    pub fn example(&self, id: AppId, example: ExampleId) -> Result<ExampleRecord> {
        let app = self.app(id)?;
        self.connection
            .query_row(
                &format!(
                    "SELECT {EXAMPLE_COLUMNS} FROM examples e
                     LEFT JOIN label_maps l ON l.app = e.app AND l.label_index = e.label_index
                     WHERE e.app = ?1 AND e.id = ?2"
                ),
                params![id.0, example.0],
                example_from_row,
            )
            .optional()
            .map_err(db(format!(
                "reading example {} of app `{}`",
                example.0, app.name
            )))?
            .ok_or(Error::NoSuchExample {
                app: app.name,
                id: example.0,
            })
    }

    /// The number of the app's examples: (all, enabled). Kept on the app's row by the
    /// transactions that store and toggle examples, so reading them costs one row however many
    /// examples the app has (`status` reads them on every call).
    pub fn example_counts(&self, id: AppId) -> Result<(u64, u64)> {
        self.connection
            .query_row(
                "SELECT example_count, enabled_count FROM apps WHERE id = ?1",
                [id.0],
                |row| Ok((row.get::<i64>(0)? as u64, row.get::<i64>(1)? as u64)),
            )
            .optional()
            .map_err(db("counting examples"))?
            .ok_or(Error::NoSuchAppId(id.0))
    }

    /// Turns an example on or off for training. When the flag changes the app's data version is
    /// bumped; setting the flag it already has changes nothing. Returns the data version.
    pub fn set_enabled(&mut self, id: AppId, example: ExampleId, enabled: bool) -> Result<u64> {
        let app = self.app(id)?;
        let context = format!("toggling example {} of app `{}`", example.0, app.name);
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        let current: Option<bool> = transaction
            .query_row(
                &format!(
                    "SELECT enabled FROM examples WHERE app = ?1 AND id = ?2{}",
                    transaction.dialect().for_update()
                ),
                params![id.0, example.0],
                |row| row.get(0),
            )
            .optional()
            .map_err(db(context.clone()))?;
        let Some(current) = current else {
            return Err(Error::NoSuchExample {
                app: app.name,
                id: example.0,
            });
        };
        let app = query_app_in(&transaction, id)?;
        if current == enabled {
            return Ok(app.data_version);
        }
        let data_version = app.data_version + 1;
        transaction
            .execute(
                "UPDATE examples SET enabled = ?1 WHERE id = ?2",
                params![enabled, example.0],
            )
            .map_err(db(context.clone()))?;
        transaction
            .execute(
                "UPDATE apps SET data_version = ?1, enabled_count = enabled_count + ?3 WHERE id = ?2",
                params![data_version as i64, id.0, if enabled { 1i64 } else { -1 }],
            )
            .map_err(db(context.clone()))?;
        transaction.commit().map_err(db(context))?;
        Ok(data_version)
    }
}
