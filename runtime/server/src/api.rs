//! The handlers of the JSON API under `/api/v1` (see the module documentation of `server` for the
//! routes). Store work runs on blocking threads, after the token check.

use std::io::Cursor;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use easeml_client::wire::{ExamplesPage, Fed, Health, NewLabel, Registered, Toggle, Toggled};

use super::auth::{AppAccess, authorize_admin, authorize_app};
use super::{ApiError, AppState, json as example_json, thumbnail};
use easeml_client::feed::CsvOptions;
use easeml_client::{AppSpec, Client, ExampleId, FeedOptions, PageRequest};

/// The most examples one listing page returns.
const MAX_PAGE: u32 = 1000;

/// Runs `work` on a blocking thread with a store connection from the pool.
async fn with_store<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce(&mut easeml_store::Store) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let pool = &state.shared.pool;
        let mut store = pool.get()?;
        let result = work(&mut store);
        pool.put(store);
        result
    })
    .await
    .map_err(ApiError::internal)?
}

/// Checks the request's token for its app ([`AppAccess`]), then runs `work` on a blocking thread
/// with the app's client.
async fn with_app<T: Send + 'static>(
    state: &AppState,
    access: AppAccess,
    work: impl FnOnce(&mut Client) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let pool = &state.shared.pool;
        let store = pool.get()?;
        if let Err(error) = authorize_app(&state, &store, &access.name, &access.token) {
            pool.put(store);
            return Err(error);
        }
        let mut client = Client::attach(store, &access.name)?;
        let result = work(&mut client);
        if let Some(store) = client.into_store() {
            pool.put(store);
        }
        result
    })
    .await
    .map_err(ApiError::internal)?
}

/// Checks the request's token for its app before its body is read (and again with the store, in
/// [`with_app`]), so that a stranger's body is never read.
async fn authorize_early(state: &AppState, access: &AppAccess) -> Result<(), ApiError> {
    let (state_for_check, name, token) = (state.clone(), access.name.clone(), access.token.clone());
    with_store(state, move |store| {
        authorize_app(&state_for_check, store, &name, &token).map(drop)
    })
    .await
}

/// The body of `request`, read within [`crate::Config::body_timeout`] (408 past it: a client that
/// sends its body slowly cannot hold a connection and a handler for ever) and the body limit (413).
pub(crate) async fn read_body(state: &AppState, request: Request) -> Result<Bytes, ApiError> {
    let limit = state.config().body_timeout;
    match tokio::time::timeout(limit, Bytes::from_request(request, state)).await {
        Ok(body) => Ok(body?),
        Err(_) => Err(body_timeout(limit)),
    }
}

/// 408: the body did not arrive within `limit`.
pub(crate) fn body_timeout(limit: std::time::Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "the request body did not arrive within {} s (the server's --body-timeout); send it faster, or in smaller requests",
            limit.as_secs_f64()
        ),
    )
}

/// The example id of an example route.
fn example_id(path: Result<Path<(String, String)>, PathRejection>) -> Result<ExampleId, ApiError> {
    let Path((_, id)) = path?;
    let id = id
        .parse::<i64>()
        .map_err(|_| ApiError::bad_request(format!("example id `{id}` is not a number")))?;
    Ok(ExampleId(id))
}

/// `GET /api/v1/health`: up, with the body limit (the remote client sizes its requests by it).
pub(crate) async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        ok: true,
        max_body_bytes: state.config().max_body_bytes,
    })
}

/// `POST /api/v1/apps`: registers the app of the `easeml.json` in the body.
pub(crate) async fn register(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    authorize_admin(&state, request.headers())?;
    let body = read_body(&state, request).await?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("the manifest is not UTF-8 text"))?;
    let spec = AppSpec::from_manifest_json(text)?;
    let max_body_bytes = state.config().max_body_bytes;
    let smallest = easeml_client::feed::min_feed_line_bytes(spec.schema());
    if smallest > max_body_bytes as u64 {
        return Err(ApiError::bad_request(format!(
            "app `{}`: one example of this app takes at least {smallest} bytes as a feed line (2 bytes a tensor value), more than this server accepts in one request ({max_body_bytes} bytes), so it could never be fed; declare smaller tensors, or start the server with a larger --max-body-bytes",
            spec.schema().app
        )));
    }
    let (app, token) = with_store(&state, move |store| Ok(spec.register(store)?)).await?;
    tracing::info!(app = %app.name, id = app.id.0, "registered app");
    let body = Registered {
        id: app.id.0,
        name: app.name,
        token,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /api/v1/apps/{name}/status`: the figure-5 report.
pub(crate) async fn status(
    State(state): State<AppState>,
    access: AppAccess,
) -> Result<Json<easeml_client::Status>, ApiError> {
    let status = with_app(&state, access, |client| Ok(client.status()?)).await?;
    Ok(Json(status))
}

/// `GET /api/v1/apps/{name}/runs`: every run, oldest first.
pub(crate) async fn runs(
    State(state): State<AppState>,
    access: AppAccess,
) -> Result<Json<Value>, ApiError> {
    let status = with_app(&state, access, |client| Ok(client.status()?)).await?;
    Ok(Json(
        json!({"app": status.app, "best": status.best.map(|best| best.run.0), "runs": status.runs}),
    ))
}

/// The query of `POST .../examples`: how the body is laid out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedQuery {
    /// `lines` (the default: the `feed` line formats), `csv` (comma-separated) or `tsv`
    /// (tab-separated): a table with a header row.
    format: Option<String>,
    /// A table's label column, by its header name (not given for scikit-learn's layout).
    label_column: Option<String>,
}

/// `POST /api/v1/apps/{name}/examples`: a feed. The body is text in the `feed` line formats, or
/// with `?format=csv&label_column=NAME` (or `tsv`) a table with a header row; every line (row) is
/// checked, then all examples are stored in one transaction, or none when one is bad.
///
/// Decision (issue 45, the dashboard's upload): a table is read here, by the client's one table
/// reader (`Client::feed_csv_text`, the rules of `<app> feed FILE.csv --label-column NAME`), not
/// converted to feed lines in the browser, so the page, the command line and Python read a table
/// the same way (scikit-learn's layout, input columns by field name, missing values refused with
/// their row and column). The body is the table: a cell naming a file is a bad row, as a path in a
/// feed line is, so the server never reads its own disk for a client.
pub(crate) async fn feed(
    State(state): State<AppState>,
    access: AppAccess,
    query: Result<Query<FeedQuery>, QueryRejection>,
    request: Request,
) -> Result<Json<Fed>, ApiError> {
    let Query(query) = query?;
    let delimiter = match query.format.as_deref() {
        None | Some("lines") => None,
        Some("csv") => Some(b','),
        Some("tsv") => Some(b'\t'),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format `{other}` is not one of lines, csv, tsv"
            )));
        }
    };
    if delimiter.is_none() && query.label_column.is_some() {
        return Err(ApiError::bad_request(
            "label_column is for tables: give format=csv or format=tsv too",
        ));
    }
    authorize_early(&state, &access).await?;
    let body = read_body(&state, request).await?;
    let _permit = state
        .shared
        .feeds
        .acquire()
        .await
        .map_err(ApiError::internal)?;
    let lines = body.len();
    let name = access.name.clone();
    let report = with_app(&state, access, move |client| {
        let options = FeedOptions {
            allow_paths: false,
            ..FeedOptions::default()
        };
        match delimiter {
            None => Ok(client.feed_lines(Cursor::new(body), &options)?),
            Some(delimiter) => {
                let csv = CsvOptions {
                    label_column: query.label_column,
                    delimiter: Some(delimiter),
                };
                Ok(client.feed_csv_text(
                    Cursor::new(body),
                    "the table",
                    &csv,
                    &options,
                    &mut |_| {},
                )?)
            }
        }
    })
    .await?;
    tracing::info!(app = %name, added = report.added, bytes = lines, data_version = report.data_version, "feed");
    Ok(Json(Fed {
        added: report.added,
        ids: report.ids.iter().map(|id| id.0).collect(),
        data_version: report.data_version,
        new_labels: report
            .new_labels
            .into_iter()
            .map(|(label, index)| NewLabel { label, index })
            .collect(),
    }))
}

/// The query of `GET .../examples`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Examples with ids above this.
    after: Option<i64>,
    /// At most this many (default 50, at most 1000).
    limit: Option<u32>,
    /// Only enabled (`true`) or disabled (`false`) ones.
    enabled: Option<bool>,
    /// Only those with this label.
    label: Option<String>,
    /// With each example a preview of its input: at most this many numbers (capped at
    /// [`MAX_PREVIEW`]); none when not given.
    preview: Option<u32>,
}

/// The most numbers of an input one listed example's preview holds (the refine page asks for 64:
/// eight shown as numbers, a series' sparkline from all).
const MAX_PREVIEW: u32 = 64;

/// `GET /api/v1/apps/{name}/examples?after=&limit=&enabled=&label=&preview=`: one page of
/// examples, each with a preview of its input when `preview` asks (for the refine page).
pub(crate) async fn list_examples(
    State(state): State<AppState>,
    access: AppAccess,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ExamplesPage>, ApiError> {
    let Query(query) = query?;
    let request = PageRequest {
        after: query.after.map(ExampleId),
        limit: query.limit.unwrap_or(50).clamp(1, MAX_PAGE),
    };
    let filter = easeml_store::ExampleFilter {
        enabled: query.enabled,
        label: query.label,
    };
    let preview = query.preview.map(|limit| limit.min(MAX_PREVIEW));
    let value = with_app(&state, access, move |client| {
        let page = client.examples_filtered(request, &filter)?;
        Ok(ExamplesPage {
            app: client.app_name().to_owned(),
            total: page.total,
            next_after: page.next.and_then(|next| next.after).map(|id| id.0),
            labels: client.labels()?,
            labels_declared: client.labels_declared(),
            thumbnails: thumbnail::image_shape(&client.schema().input).is_some(),
            system_type: client.schema().system_type(),
            items: page
                .items
                .iter()
                .map(|record| {
                    let mut listed = example_json::listed(record);
                    if let Some(limit) = preview {
                        let example = client.example(record.id)?;
                        listed.preview = Some(example_json::preview(
                            client.schema(),
                            &example.input,
                            limit as usize,
                        ));
                    }
                    Ok(listed)
                })
                .collect::<Result<_, ApiError>>()?,
        })
    })
    .await?;
    Ok(Json(value))
}

/// `GET /api/v1/apps/{name}/examples/{id}`: one example with its input and output.
pub(crate) async fn get_example(
    State(state): State<AppState>,
    access: AppAccess,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = example_id(path)?;
    // Serialized on the blocking thread: deep recursive examples make deep JSON.
    let bytes = with_app(&state, access, move |client| {
        let example = client.example(id)?;
        serde_json::to_vec(&example_json::full(client.schema(), &example))
            .map_err(ApiError::internal)
    })
    .await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response())
}

/// `GET /api/v1/apps/{name}/examples/{id}/thumbnail.png`: a PNG of an image input.
pub(crate) async fn thumbnail(
    State(state): State<AppState>,
    access: AppAccess,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = example_id(path)?;
    let png = with_app(&state, access, move |client| {
        let schema = client.schema().clone();
        if thumbnail::image_shape(&schema.input).is_none() {
            return Err(ApiError::not_found(format!(
                "app `{}` has no thumbnails: its input {} is not an image ([A,B,3], [A,B,1] or [A,B])",
                schema.app, schema.input
            )));
        }
        let example = client.example(id)?;
        let values = example.input.tensors.first().map_or(&[][..], Vec::as_slice);
        thumbnail::png(&schema.input, values)
            .ok_or_else(|| ApiError::internal("encoding a thumbnail failed"))
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("image/png")),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=86400"),
            ),
        ],
        png,
    )
        .into_response())
}

/// `PATCH /api/v1/apps/{name}/examples/{id}` with `{"enabled": bool}`: turns an example on or off.
pub(crate) async fn set_enabled(
    State(state): State<AppState>,
    access: AppAccess,
    path: Result<Path<(String, String)>, PathRejection>,
    request: Request,
) -> Result<Json<Toggled>, ApiError> {
    let id = example_id(path)?;
    let body = read_body(&state, request).await?;
    let toggle: Toggle = serde_json::from_slice(&body).map_err(|error| {
        ApiError::bad_request(format!(
            "the body must be {{\"enabled\": true}} or {{\"enabled\": false}}: {error}"
        ))
    })?;
    let data_version = with_app(&state, access, move |client| {
        Ok(client.set_enabled(id, toggle.enabled)?)
    })
    .await?;
    Ok(Json(Toggled {
        id: id.0,
        enabled: toggle.enabled,
        data_version,
    }))
}

/// `POST /api/v1/apps/{name}/infer`: answers inputs with the app's best model so far. The body is
/// text in the feed line formats with the output optional (`INPUT` or `INPUT OUTPUT` lines, or JSON
/// Lines `{"input": ...}`); when every line gives its expected output the answers are scored. A bad
/// line fails the whole request; before any model is trained the answer is 409.
pub(crate) async fn infer(
    State(state): State<AppState>,
    access: AppAccess,
    request: Request,
) -> Result<Response, ApiError> {
    authorize_early(&state, &access).await?;
    let body = read_body(&state, request).await?;
    answer(&state, access.name, body).await
}

/// Inference itself, on the inference thread.
async fn answer(state: &AppState, name: String, body: Bytes) -> Result<Response, ApiError> {
    use easeml_client::wire::{Answer, Answered, WireScore};
    let report = state.shared.infer.infer(name, body).await?;
    let score = report.score.map(|score| match score {
        easeml_client::Score::Accuracy { correct, total } => WireScore::Accuracy {
            accuracy: correct as f64 / total.max(1) as f64,
            correct,
            total,
        },
        easeml_client::Score::MeanSquaredError { value, total } => WireScore::MeanSquaredError {
            mean_squared_error: value,
            total,
        },
    });
    Ok(Json(Answered {
        answers: report
            .answers
            .into_iter()
            .map(|(line, inference)| Answer { line, inference })
            .collect(),
        run: report.run.0,
        run_number: report.run_number,
        candidate: report.candidate,
        data_version: report.data_version,
        score,
    })
    .into_response())
}

/// Any other path.
pub(crate) async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route {method} {}", uri.path()))
}

/// A known path with another method.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {method}", uri.path()),
    )
}
