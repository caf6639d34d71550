//! The remote backend of [`crate::Client`]: the same calls over HTTP to an `easeml serve` server
//! (`/api/v1`, with the JSON bodies of `wire.rs`), through ureq (blocking, no async runtime; plain
//! `http://`, and `https://` with the runtime's `tls` feature).
//!
//! The client checks every input against the schema before anything is sent, as in embedded mode,
//! so a bad line is named by its line in the caller's file; files named in a feed (images, `.npy`)
//! are read here, never by the server. Checked examples travel as feed lines with inline values
//! (`feed::write_feed_line`), exact to the bit, and the server checks them again. A feed
//! larger than one request (8 MiB, or the server's body limit when lower) goes in several requests
//! after every line has been checked: a bad line still stores nothing, but a server that fails
//! between two requests leaves the earlier ones stored ([`Error::PartlyStored`] says which).
//!
//! Tokens ([`Remote::open`]): the connection's token (`EASEML_TOKEN`), else the token file
//! `<token dir>/<server>/<app>.token` written when this client registered the app, else the app is
//! registered now (`POST /api/v1/apps`, with `EASEML_ADMIN_TOKEN` when the server needs one) and the
//! new token is saved in that file (mode 0600). A token file the server refuses is replaced when
//! the app can be registered again (it was removed from the server); else the error says what to do.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use easeml_object::{Object, object_from_json};
use easeml_schema::Schema;
use easeml_store::tokens;
use easeml_store::{
    BlobHash, ExampleFilter, ExampleId, ExampleRecord, LabelMap, Page, PageRequest, StoredOutput,
};
use serde::de::DeserializeOwned;

use crate::backend::{Backend, Batch, Drive};
use crate::feed::write_feed_line;
use crate::feed::{CheckedOutput, FeedOptions, LineError, LineErrors};
use crate::wire::{
    ErrorBody, ExamplesPage, Fed, FullExample, Health, Listed, Registered, Toggle, Toggled, code,
};
use crate::{AppSpec, Error, FeedReport, LoadedExample, Result, Status};

mod resolver;

/// The most bytes of examples one request carries (less when the server's body limit is lower).
const REQUEST_BYTES: usize = 8 << 20;
/// The largest answer read.
const MAX_ANSWER_BYTES: u64 = 1 << 30;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, end to end (a feed may wait for a feed permit, an inference for
/// its model to load).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// What [`Remote::open`] needs of a `Connection::Remote`.
pub(crate) struct RemoteSettings<'a> {
    pub url: &'a str,
    pub token: Option<&'a str>,
    pub admin_token: Option<&'a str>,
    pub token_dir: Option<&'a Path>,
}

/// Where a remote client's token for its app came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenOrigin {
    /// Given with the connection (`EASEML_TOKEN`).
    Given,
    /// Read from this token file.
    File(PathBuf),
    /// The app was registered on the server just now. Its token is saved in `file`; when `file` is
    /// `None` it is saved nowhere (`problem` says why) and should be shown to the user once.
    Registered {
        /// The token file written.
        file: Option<PathBuf>,
        /// Why no token file was written.
        problem: Option<String>,
    },
}

/// One app on one server.
pub(crate) struct Remote {
    /// The base URL, without a trailing slash.
    url: String,
    agent: ureq::Agent,
    app: String,
    token: String,
    origin: TokenOrigin,
    labels_declared: bool,
    /// The most bytes of examples one request may carry.
    request_bytes: usize,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("app", &self.app)
            .field("token", &"(hidden)")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Which lines a request's body holds, to name the caller's lines in the server's errors.
struct Lines<'a> {
    /// The caller's 1-based line (or position) of each line of the body.
    lines: &'a [usize],
    /// `line`, `example` or `input`.
    unit: &'static str,
    /// How many lines or values the whole batch had.
    total: usize,
    /// What the batch is for.
    batch: crate::Batch,
}

impl Remote {
    /// Connects to the server, finds or makes the app's token (see the module documentation), and
    /// checks that the app registered there has this spec's type and labels.
    pub(crate) fn open(settings: &RemoteSettings<'_>, spec: &AppSpec) -> Result<Remote> {
        let url = normalize_url(settings.url)?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(REQUEST_TIMEOUT))
            .user_agent(concat!("easeml-runtime/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            resolver::QuickResolver::default(),
        );
        let mut remote = Remote {
            url,
            agent,
            app: spec.schema().app.clone(),
            token: String::new(),
            origin: TokenOrigin::Given,
            labels_declared: false,
            request_bytes: REQUEST_BYTES,
        };
        let health = remote.get(&format!("{}/api/v1/health", remote.url), &[])?;
        let health: Health = remote
            .parse(200, health, None)
            .map_err(|error| match error {
                Error::Server { url, status, .. } | Error::Unauthorized { url, status, .. } => {
                    Error::Protocol {
                        reason: format!(
                            "GET /api/v1/health answered {status}; is this an easeml server?"
                        ),
                        url,
                    }
                }
                other => other,
            })?;
        remote.request_bytes = REQUEST_BYTES.min(health.max_body_bytes.max(1));

        let file = settings
            .token_dir
            .map(|dir| tokens::token_file(dir, &remote.url, &remote.app));
        let saved = match &file {
            Some(path) => read_token(path)?,
            None => None,
        };
        match (settings.token, saved, &file) {
            (Some(token), _, _) => remote.token = token.to_owned(),
            (None, Some(token), Some(path)) => {
                remote.token = token;
                remote.origin = TokenOrigin::File(path.clone());
            }
            _ => remote.register(spec, settings.admin_token, file.as_deref())?,
        }
        let first = PageRequest {
            after: None,
            limit: 1,
        };
        let page = match remote.page(first, &ExampleFilter::default()) {
            Err(Error::Unauthorized { status, .. })
                if matches!(remote.origin, TokenOrigin::File(_)) =>
            {
                // A saved token the server refuses: the app may have been removed there.
                if let Err(error) = remote.register(spec, settings.admin_token, file.as_deref()) {
                    return Err(remote.stale_token_file(status, error));
                }
                remote.page(first, &ExampleFilter::default())?
            }
            other => other?,
        };
        let schema = spec.schema();
        let stored_labels = page.labels_declared.then(|| page.labels.clone()).flatten();
        if page.system_type != schema.system_type() || stored_labels != schema.labels {
            let describe = |system_type: &str, labels: &Option<Vec<String>>| match labels {
                Some(labels) => format!("{system_type} with labels [{}]", labels.join(", ")),
                None => system_type.to_owned(),
            };
            return Err(Error::SchemaMismatch {
                app: remote.app.clone(),
                stored: describe(&page.system_type, &stored_labels),
                given: describe(&schema.system_type(), &schema.labels),
            });
        }
        remote.labels_declared = page.labels_declared;
        Ok(remote)
    }

    /// Registers the app (`POST /api/v1/apps`) and keeps its new token, saved in `file` when given.
    fn register(
        &mut self,
        spec: &AppSpec,
        admin_token: Option<&str>,
        file: Option<&Path>,
    ) -> Result<()> {
        let mut request = self
            .agent
            .post(format!("{}/api/v1/apps", self.url))
            .header("Content-Type", "application/json");
        if let Some(admin) = admin_token {
            request = request.header("Authorization", format!("Bearer {admin}"));
        }
        let (status, body) = self.finish(request.send(spec.manifest().as_bytes()))?;
        let (url, app) = (&self.url, &self.app);
        let refused = |status: u16, message: String| Error::Unauthorized {
            url: url.clone(),
            app: app.clone(),
            status,
            message,
        };
        match status {
            201 => {
                let registered: Registered = self.parse(201, (status, body), None)?;
                self.token = registered.token;
                self.origin = match file {
                    Some(path) => match tokens::save_token_file(path, &self.token) {
                        Ok(()) => TokenOrigin::Registered {
                            file: Some(path.to_owned()),
                            problem: None,
                        },
                        Err(error) => TokenOrigin::Registered {
                            file: None,
                            problem: Some(format!("cannot write {}: {error}", path.display())),
                        },
                    },
                    None => TokenOrigin::Registered {
                        file: None,
                        problem: Some(
                            "no folder for token files is known (set EASEML_CONFIG_DIR)".to_owned(),
                        ),
                    },
                };
                Ok(())
            }
            409 if error_code(&body).as_deref() == Some(code::APP_EXISTS) => {
                // Another process may have registered it and saved the token meanwhile.
                if let Some(path) = file
                    && let Some(token) = read_token(path)?
                    && token != self.token
                {
                    self.token = token;
                    self.origin = TokenOrigin::File(path.to_owned());
                    return Ok(());
                }
                let write_it = file.map_or_else(String::new, |path| {
                    format!(", or write it to {}", path.display())
                });
                Err(refused(
                    409,
                    format!(
                        "app `{app}` is registered on the easeml server at {url}, but this client has no token for it: set EASEML_TOKEN to the token printed when it was registered{write_it}"
                    ),
                ))
            }
            401 | 403 => {
                let message = error_message(&body);
                let what = if admin_token.is_some() {
                    "EASEML_ADMIN_TOKEN is not this server's admin token: set it to the one in the file given to `easeml serve --admin-token-file`"
                } else {
                    "set EASEML_ADMIN_TOKEN to the server's admin token (the one in the file given to `easeml serve --admin-token-file`)"
                };
                Err(refused(
                    status,
                    format!(
                        "the easeml server at {url} refused to register app `{app}` ({status}: {message}); {what}, or EASEML_TOKEN to the app's token if it is registered already"
                    ),
                ))
            }
            _ => Err(self.error_from(status, &body, None)),
        }
    }

    /// The error for a saved token the server refuses, when registering the app again failed too.
    fn stale_token_file(&self, status: u16, registering: Error) -> Error {
        let TokenOrigin::File(path) = &self.origin else {
            return registering;
        };
        let (url, app) = (&self.url, &self.app);
        let why = match &registering {
            Error::Unauthorized { status: 409, .. } => format!(
                "app `{app}` is registered there under another token: put that token in {} (or in EASEML_TOKEN), or remove the app on the server (`easeml apps remove {app}`) to register it anew",
                path.display()
            ),
            Error::Unauthorized { .. } => format!(
                "if the app was removed from the server, registering it again needs the server's admin token (EASEML_ADMIN_TOKEN); else put the app's token in {} (or in EASEML_TOKEN)",
                path.display()
            ),
            other => format!("registering the app again failed: {other}"),
        };
        Error::Unauthorized {
            url: url.clone(),
            app: app.clone(),
            status,
            message: format!(
                "the easeml server at {url} refused the token of app `{app}` saved in {}; {why}",
                path.display()
            ),
        }
    }

    /// The server's base URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The app's token.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Where the token came from.
    pub(crate) fn origin(&self) -> &TokenOrigin {
        &self.origin
    }

    /// Whether the app's labels are declared (as registered on the server).
    pub(crate) fn labels_declared(&self) -> bool {
        self.labels_declared
    }

    // ----- the app's routes -----

    fn app_url(&self, rest: &str) -> String {
        format!("{}/api/v1/apps/{}{rest}", self.url, self.app)
    }

    /// One page of examples, with what the listing says about the app.
    fn page(&self, request: PageRequest, filter: &ExampleFilter) -> Result<ExamplesPage> {
        let mut query = vec![("limit", request.limit.clamp(1, 1000).to_string())];
        if let Some(after) = request.after {
            query.push(("after", after.0.to_string()));
        }
        if let Some(enabled) = filter.enabled {
            query.push(("enabled", enabled.to_string()));
        }
        if let Some(label) = &filter.label {
            query.push(("label", label.clone()));
        }
        let answer = self.get(&self.app_url("/examples"), &query)?;
        self.parse(200, answer, None)
    }

    /// The app's labels in index order, `None` when its output takes no labels.
    pub(crate) fn labels(&self) -> Result<Option<Vec<String>>> {
        let first = PageRequest {
            after: None,
            limit: 1,
        };
        Ok(self.page(first, &ExampleFilter::default())?.labels)
    }

    /// A snapshot of the app's label map, to check a feed's labels before it is sent.
    pub(crate) fn label_map(&self, schema: &Schema) -> Result<Option<LabelMap>> {
        let Some(capacity) = schema.label_capacity() else {
            return Ok(None);
        };
        Ok(self.labels()?.map(|labels| LabelMap {
            labels,
            capacity,
            declared: self.labels_declared,
        }))
    }

    /// Sends a checked feed: every example, in requests of at most `request_bytes`.
    pub(crate) fn send_feed(
        &self,
        outbox: &Outbox,
        unit: &'static str,
        total: usize,
    ) -> Result<FeedReport> {
        let oversized: LineErrors = (0..outbox.len())
            .filter(|&index| outbox.size(index) > self.request_bytes)
            .map(|index| LineError {
                unit,
                line: outbox.lines[index],
                message: format!(
                    "this example is {} bytes as inline JSON, more than the server at {} accepts in one request ({} bytes; `easeml serve --max-body-bytes`)",
                    outbox.size(index),
                    self.url,
                    self.request_bytes
                ),
            })
            .collect();
        if !oversized.is_empty() {
            return Err(Error::BadInput {
                errors: oversized,
                total,
                batch: crate::Batch::Feed,
            });
        }
        let mut report = FeedReport {
            added: 0,
            ids: Vec::new(),
            data_version: 0,
            new_labels: Vec::new(),
            skipped: LineErrors::new(),
            ignored_files: crate::feed::IgnoredFiles::default(),
        };
        for range in outbox.chunks(self.request_bytes) {
            let body = outbox.read(range.clone())?;
            let request = self
                .agent
                .post(self.app_url("/examples"))
                .header("Authorization", self.bearer())
                .header("Content-Type", "text/plain; charset=utf-8");
            let lines = Lines {
                lines: &outbox.lines[range],
                unit,
                total,
                batch: crate::Batch::Feed,
            };
            let fed: Fed = match self
                .finish(request.send(&body[..]))
                .and_then(|answer| self.parse(200, answer, Some(&lines)))
            {
                Ok(fed) => fed,
                Err(error) if report.ids.is_empty() => return Err(error),
                Err(error) => {
                    return Err(Error::PartlyStored {
                        stored: report.ids,
                        source: Box::new(error),
                    });
                }
            };
            report.added += fed.added;
            report.ids.extend(fed.ids.into_iter().map(ExampleId));
            report.data_version = fed.data_version;
            report
                .new_labels
                .extend(fed.new_labels.into_iter().map(|new| (new.label, new.index)));
        }
        Ok(report)
    }

    /// One page of the app's examples.
    pub(crate) fn examples(
        &self,
        request: PageRequest,
        filter: &ExampleFilter,
    ) -> Result<Page<ExampleRecord>> {
        let page = self.page(request, filter)?;
        let items = page
            .items
            .into_iter()
            .map(|listed| self.record(listed))
            .collect::<Result<Vec<_>>>()?;
        Ok(Page {
            items,
            next: page.next_after.map(|after| PageRequest {
                after: Some(ExampleId(after)),
                limit: request.limit,
            }),
            total: page.total,
        })
    }

    /// A listed example as the store's record.
    fn record(&self, listed: Listed) -> Result<ExampleRecord> {
        let hash = |text: &str| {
            BlobHash::parse(text).map_err(|_| self.protocol(format!("`{text}` is not a blob hash")))
        };
        let output = match (listed.label, listed.label_index, listed.output_hash) {
            (Some(name), Some(index), _) => StoredOutput::Label { index, name },
            (None, _, Some(output)) => StoredOutput::Blob(hash(&output)?),
            _ => {
                return Err(self.protocol(format!(
                    "example {} has neither a label nor an output hash",
                    listed.id
                )));
            }
        };
        Ok(ExampleRecord {
            id: ExampleId(listed.id),
            input: hash(&listed.input_hash)?,
            output,
            enabled: listed.enabled,
            data_version: listed.data_version,
            created_ms: listed.created_ms,
        })
    }

    /// One example with its input and output.
    pub(crate) fn example(&self, schema: &Schema, id: ExampleId) -> Result<LoadedExample> {
        let answer = self.get(&self.app_url(&format!("/examples/{}", id.0)), &[])?;
        let full: FullExample = self.parse(200, answer, None)?;
        let unreadable = |error: easeml_object::Error| {
            self.protocol(format!("example {} does not fit the schema: {error}", id.0))
        };
        let input = object_from_json(&schema.input, &full.input, "input").map_err(unreadable)?;
        let output = match &full.listed.label {
            Some(label) => CheckedOutput::Label(label.clone()),
            None => CheckedOutput::Object(
                object_from_json(&schema.output, &full.output, "output").map_err(unreadable)?,
            ),
        };
        Ok(LoadedExample {
            record: self.record(full.listed)?,
            input,
            output,
        })
    }

    /// Turns an example on or off; the app's data version after.
    pub(crate) fn set_enabled(&self, id: ExampleId, enabled: bool) -> Result<u64> {
        let body = serde_json::to_vec(&Toggle { enabled })
            .map_err(|error| self.protocol(error.to_string()))?;
        let request = self
            .agent
            .patch(self.app_url(&format!("/examples/{}", id.0)))
            .header("Authorization", self.bearer())
            .header("Content-Type", "application/json");
        let answer = self.finish(request.send(&body[..]))?;
        let toggled: Toggled = self.parse(200, answer, None)?;
        Ok(toggled.data_version)
    }

    /// The figure-5 report.
    pub(crate) fn status(&self) -> Result<Status> {
        let answer = self.get(&self.app_url("/status"), &[])?;
        self.parse(200, answer, None)
    }

    /// Answers checked inputs with the server's best model, in requests of at most
    /// `request_bytes`; each answer carries its input's 1-based position.
    pub(crate) fn infer(&self, schema: &Schema, inputs: &[Object]) -> Result<crate::InferReport> {
        let mut outbox = Outbox::new(usize::MAX);
        for (index, input) in inputs.iter().enumerate() {
            outbox.push(schema, index + 1, input, None)?;
        }
        let mut report = crate::InferReport {
            answers: Vec::with_capacity(inputs.len()),
            run: easeml_store::RunId(0),
            run_number: 0,
            candidate: String::new(),
            data_version: 0,
            score: None,
        };
        for range in outbox.chunks(self.request_bytes) {
            let body = outbox.read(range.clone())?;
            let request = self
                .agent
                .post(self.app_url("/infer"))
                .header("Authorization", self.bearer())
                .header("Content-Type", "text/plain; charset=utf-8");
            let lines = Lines {
                lines: &outbox.lines[range.clone()],
                unit: "input",
                total: inputs.len(),
                batch: crate::Batch::Infer,
            };
            let answered: crate::wire::Answered = self
                .finish(request.send(&body[..]))
                .and_then(|answer| self.parse(200, answer, Some(&lines)))?;
            for answer in answered.answers {
                let position = answer
                    .line
                    .checked_sub(1)
                    .and_then(|line| lines.lines.get(line))
                    .ok_or_else(|| {
                        self.protocol(format!(
                            "an answer for line {}, which was not sent",
                            answer.line
                        ))
                    })?;
                report.answers.push((*position, answer.inference));
            }
            report.run = easeml_store::RunId(answered.run);
            report.run_number = answered.run_number;
            report.candidate = answered.candidate;
            report.data_version = answered.data_version;
        }
        if report.answers.len() != inputs.len() {
            return Err(self.protocol(format!(
                "{} answers for {} inputs",
                report.answers.len(),
                inputs.len()
            )));
        }
        Ok(report)
    }

    // ----- HTTP -----

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// `GET url?query` with the app's token (none before there is one: the health check).
    fn get(&self, url: &str, query: &[(&str, String)]) -> Result<(u16, Vec<u8>)> {
        let mut request = self.agent.get(url);
        if !self.token.is_empty() {
            request = request.header("Authorization", self.bearer());
        }
        for (key, value) in query {
            request = request.query(*key, value);
        }
        self.finish(request.call())
    }

    /// The status and body of a sent request, or why there is none.
    fn finish(
        &self,
        sent: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<(u16, Vec<u8>)> {
        let mut response = sent.map_err(|error| self.transport(error))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|error| self.transport(error))?;
        Ok((status, body))
    }

    /// The answer's JSON when its status is `expected`, else the error it means.
    fn parse<T: DeserializeOwned>(
        &self,
        expected: u16,
        (status, body): (u16, Vec<u8>),
        lines: Option<&Lines<'_>>,
    ) -> Result<T> {
        if status != expected {
            return Err(self.error_from(status, &body, lines));
        }
        serde_json::from_slice(&body).map_err(|error| self.protocol(error.to_string()))
    }

    /// An error answer as the client's error: 401/403 as a refused token (saying how to fix it),
    /// `no_model` as [`Error::NoModel`], bad lines as [`Error::BadInput`] naming the caller's lines,
    /// anything else as [`Error::Server`] with the server's message.
    fn error_from(&self, status: u16, body: &[u8], lines: Option<&Lines<'_>>) -> Error {
        let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
        let message = error_message(body);
        if matches!(status, 401 | 403) {
            return self.refused(status, &message);
        }
        if let Some(parsed) = parsed {
            let bad = parsed.bad;
            match (parsed.code.as_deref(), parsed.errors, lines) {
                (Some(code::NO_MODEL), _, _) => {
                    return Error::NoModel {
                        app: self.app.clone(),
                        training: parsed.training.unwrap_or(false),
                        server: Some(self.url.clone()),
                    };
                }
                (Some(code::BAD_INPUT), Some(errors), Some(lines)) if !errors.is_empty() => {
                    let count = bad.unwrap_or(errors.len());
                    let kept = errors
                        .into_iter()
                        .map(|error| LineError {
                            unit: lines.unit,
                            line: error
                                .line
                                .checked_sub(1)
                                .and_then(|index| lines.lines.get(index))
                                .copied()
                                .unwrap_or(error.line),
                            message: error.message,
                        })
                        .collect();
                    return Error::BadInput {
                        errors: LineErrors::from_parts(kept, count),
                        total: lines.total,
                        batch: lines.batch,
                    };
                }
                _ => {}
            }
        }
        Error::Server {
            url: self.url.clone(),
            status,
            message,
        }
    }

    /// The error for a refused token: which app, and how to fix it given where the token came from.
    fn refused(&self, status: u16, message: &str) -> Error {
        let (url, app) = (&self.url, &self.app);
        let fix = match &self.origin {
            TokenOrigin::Given => "the token comes from EASEML_TOKEN: set it to the token printed when the app was registered on this server, or unset it to use the saved token file (or to register the app)".to_owned(),
            TokenOrigin::File(path) => format!(
                "the token comes from {}: put the app's token there (or in EASEML_TOKEN)",
                path.display()
            ),
            TokenOrigin::Registered { .. } => {
                "the app was registered just now; was it removed from the server since? run again to register it anew".to_owned()
            }
        };
        Error::Unauthorized {
            url: url.clone(),
            app: app.clone(),
            status,
            message: format!(
                "the easeml server at {url} refused the token of app `{app}` ({status}: {message}); {fix}"
            ),
        }
    }

    fn transport(&self, error: ureq::Error) -> Error {
        match error {
            ureq::Error::BadUri(reason) => Error::BadServerUrl {
                url: self.url.clone(),
                reason,
            },
            other => Error::Unreachable {
                url: self.url.clone(),
                reason: other.to_string(),
            },
        }
    }

    fn protocol(&self, reason: String) -> Error {
        Error::Protocol {
            url: self.url.clone(),
            reason,
        }
    }
}

/// The `error` of an error answer, or the start of a body that is not one (a proxy's page).
fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(parsed) => parsed.error,
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                "no message".to_owned()
            } else {
                text.chars().take(200).collect()
            }
        }
    }
}

/// The `code` of an error answer.
fn error_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(body).ok()?.code
}

/// `http://host:port` from what the user wrote: `http://` when no scheme is given, no trailing
/// slash; `https://` only with the `tls` feature.
pub(crate) fn normalize_url(url: &str) -> Result<String> {
    let given = url.trim();
    let bad = |reason: &str| Error::BadServerUrl {
        url: given.to_owned(),
        reason: reason.to_owned(),
    };
    let (scheme, rest) = given.split_once("://").unwrap_or(("http", given));
    let rest = rest.trim_end_matches('/');
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "http" => {}
        "https" if cfg!(feature = "tls") => {}
        "https" => {
            return Err(bad(
                "https:// needs the runtime's `tls` feature (easeml-runtime with features = [\"tls\"]); `easeml serve` itself speaks plain http://",
            ));
        }
        _ => return Err(bad("the scheme must be http:// (or https://)")),
    }
    if rest.is_empty() || rest.starts_with('/') {
        return Err(bad("no host"));
    }
    if rest.contains(['?', '#', ' ']) || rest.contains(char::is_control) {
        return Err(bad("a server URL has no query, fragment or spaces"));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// The token saved in `path` ([`tokens::read_token_file`]), an unreadable file named in the error.
fn read_token(path: &Path) -> Result<Option<String>> {
    tokens::read_token_file(path).map_err(|source| Error::TokenFile {
        path: path.to_owned(),
        source,
    })
}

/// The checked examples (or inputs) of one batch as feed lines, ready to send: in memory up to a
/// limit, then in an anonymous temporary file.
pub(crate) struct Outbox {
    /// The caller's 1-based line (or position) of each example.
    lines: Vec<usize>,
    /// Where each example's line starts in the spool, and where the last ends.
    offsets: Vec<u64>,
    memory: Vec<u8>,
    file: Option<std::fs::File>,
    memory_limit: usize,
    line: Vec<u8>,
}

impl Outbox {
    /// An empty outbox that keeps up to `memory_limit` bytes in memory.
    pub(crate) fn new(memory_limit: usize) -> Outbox {
        Outbox {
            lines: Vec::new(),
            offsets: vec![0],
            memory: Vec::new(),
            file: None,
            memory_limit,
            line: Vec::new(),
        }
    }

    /// Adds one checked example (or, with no output, one input) from the caller's line `line`.
    pub(crate) fn push(
        &mut self,
        schema: &Schema,
        line: usize,
        input: &Object,
        output: Option<&CheckedOutput>,
    ) -> Result<()> {
        self.line.clear();
        write_feed_line(schema, input, output, &mut self.line);
        if self.file.is_none() && self.memory.len() + self.line.len() > self.memory_limit {
            let mut file = tempfile::tempfile().map_err(spool_error)?;
            file.write_all(&self.memory).map_err(spool_error)?;
            self.memory = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write_all(&self.line).map_err(spool_error)?,
            None => self.memory.extend_from_slice(&self.line),
        }
        let end = self.offsets.last().copied().unwrap_or(0) + self.line.len() as u64;
        self.offsets.push(end);
        self.lines.push(line);
        Ok(())
    }

    /// How many examples it holds.
    fn len(&self) -> usize {
        self.lines.len()
    }

    /// The bytes of example `index`'s line.
    fn size(&self, index: usize) -> usize {
        (self.offsets[index + 1] - self.offsets[index]) as usize
    }

    /// Consecutive ranges of examples of at most `limit` bytes each (an example larger than that
    /// alone); one empty range when there are none, so that an empty batch still makes a request.
    fn chunks(&self, limit: usize) -> Vec<std::ops::Range<usize>> {
        let mut ranges = Vec::new();
        let mut start = 0;
        while start < self.len() {
            let mut end = start + 1;
            let mut bytes = self.size(start);
            while end < self.len() && bytes + self.size(end) <= limit {
                bytes += self.size(end);
                end += 1;
            }
            ranges.push(start..end);
            start = end;
        }
        if ranges.is_empty() {
            ranges.push(0..0);
        }
        ranges
    }

    /// The lines of the examples in `range`, as one body.
    fn read(&self, range: std::ops::Range<usize>) -> Result<Vec<u8>> {
        let (start, end) = (self.offsets[range.start], self.offsets[range.end]);
        match &self.file {
            None => Ok(self.memory[start as usize..end as usize].to_vec()),
            Some(file) => {
                let mut file = file;
                let mut bytes = vec![0; (end - start) as usize];
                file.seek(SeekFrom::Start(start)).map_err(spool_error)?;
                file.read_exact(&mut bytes).map_err(spool_error)?;
                file.seek(SeekFrom::End(0)).map_err(spool_error)?;
                Ok(bytes)
            }
        }
    }
}

fn spool_error(error: std::io::Error) -> Error {
    Error::Read(std::io::Error::new(
        error.kind(),
        format!("the temporary file of a large feed: {error}"),
    ))
}

impl Backend for Remote {
    fn app_name(&self) -> &str {
        &self.app
    }

    fn data_version(&self) -> Result<u64> {
        Ok(Remote::status(self)?.data_version)
    }

    fn labels(&self) -> Result<Option<Vec<String>>> {
        Remote::labels(self)
    }

    fn labels_declared(&self) -> bool {
        Remote::labels_declared(self)
    }

    fn feed(
        &mut self,
        schema: &Schema,
        unit: &'static str,
        options: &FeedOptions,
        drive: Drive<'_>,
    ) -> Result<FeedReport> {
        let mut batch = Batch::new(self.label_map(schema)?, unit);
        let mut outbox = Outbox::new(options.max_batch_memory);
        drive(&mut |line, checked| {
            match checked {
                Ok(example) => {
                    if batch.accept(line, &example.output) {
                        outbox.push(schema, line, &example.input, Some(&example.output))?;
                    }
                }
                Err(message) => batch.reject(line, message),
            }
            Ok(())
        })?;
        let total = batch.total;
        let skipped = batch.finish(options.skip_bad)?;
        let mut report = self.send_feed(&outbox, unit, total)?;
        report.skipped = skipped;
        Ok(report)
    }

    fn examples(&self, page: PageRequest, filter: &ExampleFilter) -> Result<Page<ExampleRecord>> {
        Remote::examples(self, page, filter)
    }

    fn example(&self, schema: &Schema, id: ExampleId) -> Result<LoadedExample> {
        Remote::example(self, schema, id)
    }

    fn set_enabled(&mut self, id: ExampleId, enabled: bool) -> Result<u64> {
        Remote::set_enabled(self, id, enabled)
    }

    fn status(&self, _schema: &Schema) -> Result<Status> {
        Remote::status(self)
    }

    fn infer(&mut self, schema: &Schema, inputs: &[Object]) -> Result<crate::InferReport> {
        Remote::infer(self, schema, inputs)
    }

    fn remote(&self) -> Option<&Remote> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert_eq!(
            normalize_url(" http://127.0.0.1:9000/ ").unwrap(),
            "http://127.0.0.1:9000"
        );
        assert_eq!(
            normalize_url("localhost:9000").unwrap(),
            "http://localhost:9000"
        );
        assert_eq!(
            normalize_url("HTTP://h:1/easeml").unwrap(),
            "http://h:1/easeml"
        );
        for (url, needle) in [
            ("ftp://h:9000", "http://"),
            ("http://", "no host"),
            ("http:///x", "no host"),
            ("http://h:9000/?x=1", "no query"),
        ] {
            let error = normalize_url(url).unwrap_err().to_string();
            assert!(error.contains(needle), "{url}: {error}");
            assert!(error.contains("is not a server URL"), "{url}: {error}");
        }
        if !cfg!(feature = "tls") {
            let error = normalize_url("https://h").unwrap_err().to_string();
            assert!(error.contains("`tls` feature"), "{error}");
        }
    }

    #[test]
    fn an_outbox_spills_to_a_file_and_reads_back_in_chunks() {
        let schema = easeml_compiler::compile(
            "app t\nInput = [2]\nOutput = [2]",
            "t",
            &easeml_compiler::Registry::builtin(),
        )
        .unwrap()
        .schema;
        for memory_limit in [usize::MAX, 10] {
            let mut outbox = Outbox::new(memory_limit);
            let mut expected = Vec::new();
            for index in 0..50 {
                let input = Object::single(vec![index as f32, 0.5]);
                let output = CheckedOutput::Label(format!("l{}", index % 2));
                outbox
                    .push(&schema, index * 2 + 1, &input, Some(&output))
                    .unwrap();
                expected
                    .extend_from_slice(format!("[{index}.0,0.5] \"l{}\"\n", index % 2).as_bytes());
            }
            assert_eq!(outbox.file.is_some(), memory_limit == 10);
            let ranges = outbox.chunks(100);
            assert!(ranges.len() > 1);
            assert_eq!(ranges.first().unwrap().start, 0);
            assert_eq!(ranges.last().unwrap().end, 50);
            let mut all = Vec::new();
            for range in ranges {
                let body = outbox.read(range.clone()).unwrap();
                assert!(body.len() <= 100 || range.len() == 1);
                all.extend(body);
            }
            assert_eq!(
                String::from_utf8(all).unwrap(),
                String::from_utf8(expected.clone()).unwrap()
            );
        }
        assert_eq!(Outbox::new(10).chunks(100), vec![0..0]);
    }
}
