//! Examples: a feed's rows (many a statement, small blobs inline in the same transaction), the
//! paged and filtered listing, the counts on the app's row, enabling and disabling one.

use super::*;

/// Rows one `INSERT` statement of a feed carries (6 parameters each for examples: far below
/// SQLite's 32,766 and PostgreSQL's 65,535 parameters a statement).
pub(super) const ROWS_PER_INSERT: usize = 500;

/// `(?1, ?2), (?3, ?4), ...`: `rows` groups of `columns` numbered placeholders.
pub(super) fn placeholder_rows(rows: usize, columns: usize) -> String {
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

/// Values as statement parameters.
pub(super) fn value_params(values: &[crate::db::Value]) -> Vec<&dyn crate::db::ToValue> {
    values
        .iter()
        .map(|value| value as &dyn crate::db::ToValue)
        .collect()
}

/// Where an example's blob goes: a small one's bytes into `inline` (stored by the caller's
/// transaction), a larger one written now; its hash either way.
pub(super) fn place_blob<'a>(
    blobs: &Blobs,
    blob: &'a Blob,
    inline: &mut Vec<(BlobHash, &'a [u8])>,
) -> Result<BlobHash> {
    match blob {
        Blob::Bytes(bytes) if bytes.len() <= INLINE_BLOB_BYTES => {
            let hash = BlobHash::of(bytes);
            inline.push((hash.clone(), bytes.as_slice()));
            Ok(hash)
        }
        _ => blobs.put_or_check(blob),
    }
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
        // Small blobs go into the transaction below with their rows (one file per example
        // would make a feed of a million rows a million file creations); larger ones are written
        // to the blob folder or bucket first.
        let mut inline: Vec<(BlobHash, &[u8])> = Vec::new();
        let mut hashes = Vec::with_capacity(examples.len());
        for example in examples {
            let input = place_blob(&self.blobs, &example.input, &mut inline)?;
            let output = match &example.output {
                NewOutput::Blob(blob) => Some(place_blob(&self.blobs, blob, &mut inline)?),
                NewOutput::Label(_) => None,
            };
            hashes.push((input, output));
        }
        // In key order: the blob table's B-tree is keyed by the hash (random), so rows in feed
        // order would visit its leaves at random, each fetched (and spilled) again and again in a
        // large batch; sorted, every leaf is visited once.
        inline.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        inline.dedup_by(|a, b| a.0 == b.0);
        let context = format!(
            "storing {} example(s) of app `{}`",
            examples.len(),
            app.name
        );
        let transaction = self.connection.transaction().map_err(db(context.clone()))?;
        // Re-read inside the transaction (the app's row locked on PostgreSQL: feeds of one app
        // take their turns): another writer may have changed them.
        let app = query_app_in(&transaction, id)?;
        // Many rows a statement: on PostgreSQL every statement is a round trip.
        for chunk in inline.chunks(ROWS_PER_INSERT) {
            let values: Vec<crate::db::Value> = chunk
                .iter()
                .flat_map(|(hash, bytes)| {
                    [
                        crate::db::Value::Text(hash.as_str().to_owned()),
                        crate::db::Value::Blob(bytes.to_vec()),
                    ]
                })
                .collect();
            transaction
                .execute(
                    &format!(
                        "INSERT INTO blob_bytes (sha256, bytes) VALUES {} ON CONFLICT (sha256) DO NOTHING",
                        placeholder_rows(chunk.len(), 2)
                    ),
                    value_params(&values).as_slice(),
                )
                .map_err(db(context.clone()))?;
        }
        let mut label_map = read_label_map(&transaction, &app)?;
        let known_before = label_map.as_ref().map_or(0, |map| map.labels.len());
        let data_version = app.data_version + 1;
        let created = now_ms();
        let mut rows = Vec::with_capacity(examples.len() * 6);
        for (example, (input, output)) in examples.iter().zip(&hashes) {
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
                Value::Text(input.as_str().to_owned()),
                output
                    .as_ref()
                    .map_or(Value::Null, |hash| Value::Text(hash.as_str().to_owned())),
                label_index.map_or(Value::Null, |index| Value::Int(i64::from(index))),
                Value::Int(data_version as i64),
                Value::Int(created),
            ]);
        }
        let mut ids = Vec::with_capacity(examples.len());
        for chunk in rows.chunks(ROWS_PER_INSERT * 6) {
            let mut chunk_ids: Vec<i64> = transaction
                .query_map(
                    &format!(
                        "INSERT INTO examples (app, input_sha256, output_sha256, label_index, data_version, created_ms)
                         VALUES {} RETURNING id",
                        placeholder_rows(chunk.len() / 6, 6)
                    ),
                    value_params(chunk).as_slice(),
                    |row| row.get(0),
                )
                .map_err(db(context.clone()))?;
            // Ids are drawn in the order of the rows (a row id or an identity, one statement, the
            // app's row locked): sorted, they are the rows' ids in feed order, whatever order
            // RETURNING lists them in.
            chunk_ids.sort_unstable();
            ids.extend(chunk_ids.into_iter().map(ExampleId));
        }
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
