//! Inference: a few threads (one per core, 2 to 8) that own a `Client` per app which has answered
//! an inference, so that the app's loaded best model stays in memory (the client reloads it when a
//! better run has finished). Loaded models are not `Send` (libtorch modules behind trait objects),
//! so an app is given to one thread, the one with the fewest apps, when it first infers, and stays
//! there; requests reach that thread over a channel.
//!
//! **Fairness (issue 49).** A thread does not answer a request in one go: it checks a request's
//! lines [`CHECK_CHUNK_LINES`] at a time (at most [`CHECK_CHUNK_BYTES`]) and answers its inputs
//! [`INFER_CHUNK`] at a time, taking turns between the apps that have work on it, one chunk each
//! (one app's requests in their order). So a request of app B waits behind at most one chunk of
//! each other busy app on B's thread, whatever the size of their requests, and with at most as
//! many busy apps as threads no two share one. A request whose client hung up (its answer's
//! receiver dropped with the request) is dropped before its next chunk, so abandoned work costs at
//! most one chunk. At most [`MAX_REQUESTS_PER_APP`] requests of one app are queued or in progress;
//! more are answered 503 at once. The answers of one request all come from one model: when a
//! better run finishes in the middle of a request, its answers start again with the new model (at
//! most [`MAX_RESTARTS`] times).

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use axum::body::Bytes;
use axum::http::StatusCode;
use tokio::sync::oneshot;

use easeml_client::feed::LineChecker;
use easeml_client::{
    Batch, CheckedOutput, Client, Error, FeedOptions, InferReport, Inference, LineError,
    LineErrors, Object, RunId,
};

use crate::ApiError;

/// Lines checked in one turn.
pub(crate) const CHECK_CHUNK_LINES: usize = 1024;
/// Bytes of lines checked in one turn (a turn ends after the line that crosses it).
pub(crate) const CHECK_CHUNK_BYTES: usize = 1 << 20;
/// Inputs answered in one turn.
pub(crate) const INFER_CHUNK: usize = 256;
/// Requests of one app queued or in progress at once; more are refused (503).
pub(crate) const MAX_REQUESTS_PER_APP: usize = 8;
/// How many times a request starts its answers again because a better model arrived meanwhile.
pub(crate) const MAX_RESTARTS: u32 = 3;

/// One inference request: the app (its token already checked), the body, where the answer goes.
struct Job {
    app: String,
    body: Bytes,
    reply: oneshot::Sender<Result<InferReport, ApiError>>,
    /// Counts the request against its app's [`MAX_REQUESTS_PER_APP`] until dropped.
    _slot: Slot,
}

/// A request's place among its app's [`MAX_REQUESTS_PER_APP`].
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where an app's requests go.
struct AppRoute {
    thread: usize,
    requests: Arc<AtomicUsize>,
}

/// The inference threads (they end when the handle is dropped).
pub(crate) struct InferWorker {
    threads: Vec<Mutex<mpsc::Sender<Job>>>,
    /// Apps given to each thread.
    load: Mutex<Vec<usize>>,
    apps: Mutex<HashMap<String, AppRoute>>,
}

impl InferWorker {
    /// Starts the threads over the store under `home`.
    pub(crate) fn start(home: PathBuf) -> std::io::Result<InferWorker> {
        let count = std::thread::available_parallelism()
            .map_or(2, |cores| cores.get())
            .clamp(2, 8);
        let mut threads = Vec::with_capacity(count);
        for index in 0..count {
            let (jobs, queue) = mpsc::channel::<Job>();
            let home = home.clone();
            std::thread::Builder::new()
                .name(format!("easeml-infer-{index}"))
                .stack_size(8 << 20)
                .spawn(move || work(&home, &queue))?;
            threads.push(Mutex::new(jobs));
        }
        Ok(InferWorker {
            load: Mutex::new(vec![0; count]),
            threads,
            apps: Mutex::new(HashMap::new()),
        })
    }

    /// Answers the lines of `body` with `app`'s best model. When the caller's future is dropped
    /// (the client hung up), the work stops before its next chunk.
    pub(crate) async fn infer(&self, app: String, body: Bytes) -> Result<InferReport, ApiError> {
        let stopped = || ApiError::internal("the inference threads have stopped");
        let (thread, slot) = {
            let mut apps = self.apps.lock().map_err(|_| stopped())?;
            if !apps.contains_key(&app) {
                let mut load = self.load.lock().map_err(|_| stopped())?;
                let thread = (0..load.len()).min_by_key(|&at| load[at]).unwrap_or(0);
                if let Some(count) = load.get_mut(thread) {
                    *count += 1;
                }
                apps.insert(
                    app.clone(),
                    AppRoute {
                        thread,
                        requests: Arc::new(AtomicUsize::new(0)),
                    },
                );
            }
            let route = apps.get(&app).ok_or_else(stopped)?;
            let before = route.requests.fetch_add(1, Ordering::AcqRel);
            let slot = Slot(Arc::clone(&route.requests));
            if before >= MAX_REQUESTS_PER_APP {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "app `{app}` has {MAX_REQUESTS_PER_APP} inference requests queued or in progress, the most one app may have; wait for their answers, or send more lines per request"
                    ),
                ));
            }
            (route.thread, slot)
        };
        let (reply, answer) = oneshot::channel();
        {
            let jobs = self
                .threads
                .get(thread)
                .ok_or_else(stopped)?
                .lock()
                .map_err(|_| stopped())?;
            jobs.send(Job {
                app,
                body,
                reply,
                _slot: slot,
            })
            .map_err(|_| stopped())?;
        }
        answer.await.map_err(|_| stopped())?
    }
}

/// A request being answered: its lines checked so far, then its answers so far.
struct Task {
    job: Job,
    stage: Stage,
    /// Chunks done so far (the log of a dropped request says how far it got).
    chunks: usize,
}

enum Stage {
    /// Checking lines from byte `offset` (the next line is number `line`).
    Check {
        offset: usize,
        line: usize,
        inputs: Inputs,
        errors: LineErrors,
        total: usize,
    },
    /// Answering `inputs` from `next`.
    Answer {
        inputs: Inputs,
        next: usize,
        answers: Vec<(usize, Inference)>,
        model: Option<Model>,
        restarts: u32,
    },
}

/// Checked inputs: their lines, objects and expected outputs.
#[derive(Default)]
struct Inputs {
    lines: Vec<usize>,
    objects: Vec<Object>,
    expected: Vec<Option<CheckedOutput>>,
}

/// The model that answered a request's first chunk.
#[derive(Clone, PartialEq)]
struct Model {
    run: RunId,
    candidate: String,
    data_version: u64,
}

/// One thread: takes turns between the apps with work, one chunk each.
fn work(home: &Path, queue: &mpsc::Receiver<Job>) {
    let mut clients: HashMap<String, Client> = HashMap::new();
    // Apps with work, in turn order, each with its requests in order.
    let mut turns: VecDeque<(String, VecDeque<Task>)> = VecDeque::new();
    loop {
        if turns.is_empty() {
            match queue.recv() {
                Ok(job) => enqueue(&mut turns, job),
                Err(_) => return,
            }
        }
        while let Ok(job) = queue.try_recv() {
            enqueue(&mut turns, job);
        }
        let Some((app, mut tasks)) = turns.pop_front() else {
            continue;
        };
        if let Some(mut task) = tasks.pop_front() {
            if task.job.reply.is_closed() {
                tracing::info!(
                    app = %app,
                    chunks = task.chunks,
                    "inference dropped: its client hung up"
                );
            } else {
                task.chunks += 1;
                match step(home, &mut clients, &mut task) {
                    None => tasks.push_front(task),
                    Some(result) => {
                        let _ = task.job.reply.send(result);
                    }
                }
            }
        }
        if !tasks.is_empty() {
            turns.push_back((app, tasks));
        }
    }
}

fn enqueue(turns: &mut VecDeque<(String, VecDeque<Task>)>, job: Job) {
    let task = Task {
        stage: Stage::Check {
            offset: 0,
            line: 1,
            inputs: Inputs::default(),
            errors: LineErrors::new(),
            total: 0,
        },
        job,
        chunks: 0,
    };
    match turns.iter_mut().find(|(app, _)| *app == task.job.app) {
        Some((_, tasks)) => tasks.push_back(task),
        None => turns.push_back((task.job.app.clone(), VecDeque::from([task]))),
    }
}

/// One chunk of `task`; its outcome when it is done.
fn step(
    home: &Path,
    clients: &mut HashMap<String, Client>,
    task: &mut Task,
) -> Option<Result<InferReport, ApiError>> {
    let app = task.job.app.clone();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let client = match clients.entry(app.clone()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let store = easeml_store::Store::open(home)?;
                entry.insert(Client::attach(store, &app)?)
            }
        };
        advance(client, task)
    }));
    match outcome {
        Ok(Ok(None)) => None,
        Ok(Ok(Some(report))) => Some(Ok(report)),
        Ok(Err(Failure::Busy(error))) => Some(Err(error)),
        Ok(Err(Failure::Client(error))) => {
            if matches!(error, Error::Store(_)) {
                // The app may have been removed (and registered again): open it afresh next time.
                clients.remove(&app);
            }
            Some(Err(error.into()))
        }
        Err(_) => {
            // A panic in a model must not leave a half-updated client behind.
            clients.remove(&app);
            Some(Err(ApiError::internal(format!(
                "inference for app `{app}`: the model panicked"
            ))))
        }
    }
}

/// Why a request could not be answered.
enum Failure {
    /// The client library's error (bad lines, no model, the store).
    Client(Error),
    /// The model kept changing under the request (503).
    Busy(ApiError),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Client(error)
    }
}

impl From<easeml_store::Error> for Failure {
    fn from(error: easeml_store::Error) -> Failure {
        Failure::Client(error.into())
    }
}

/// Moves `task` on by one chunk: `Ok(Some(report))` when it is answered.
fn advance(client: &mut Client, task: &mut Task) -> Result<Option<InferReport>, Failure> {
    let body = &task.job.body;
    match &mut task.stage {
        Stage::Check {
            offset,
            line,
            inputs,
            errors,
            total,
        } => {
            let options = FeedOptions {
                allow_paths: false,
                ..FeedOptions::default()
            };
            let checker = LineChecker::new(
                client.schema(),
                &options,
                client.schema().label_capacity().is_some(),
            );
            let start = *offset;
            let mut lines = 0;
            while *offset < body.len()
                && lines < CHECK_CHUNK_LINES
                && *offset - start < CHECK_CHUNK_BYTES
            {
                let rest = &body[*offset..];
                let (text, advance) = match rest.iter().position(|&byte| byte == b'\n') {
                    Some(end) => (&rest[..end], end + 1),
                    None => (rest, rest.len()),
                };
                *offset += advance;
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                // As `BufRead::lines`: text that is not UTF-8 fails the request.
                let text = std::str::from_utf8(text).map_err(|_| {
                    Error::Read(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("line {line}: the body is not UTF-8 text"),
                    ))
                })?;
                match checker.check_infer_line(text) {
                    Ok(None) => {}
                    Ok(Some((input, output))) => {
                        *total += 1;
                        inputs.lines.push(*line);
                        inputs.objects.push(input);
                        inputs.expected.push(output);
                    }
                    Err(message) => {
                        *total += 1;
                        errors.push(LineError {
                            unit: "line",
                            line: *line,
                            message,
                        });
                    }
                }
                *line += 1;
                lines += 1;
            }
            if *offset < body.len() {
                return Ok(None);
            }
            if !errors.is_empty() {
                return Err(Failure::Client(Error::BadInput {
                    errors: std::mem::take(errors),
                    total: *total,
                    batch: Batch::Infer,
                }));
            }
            task.stage = Stage::Answer {
                inputs: std::mem::take(inputs),
                next: 0,
                answers: Vec::new(),
                model: None,
                restarts: 0,
            };
            Ok(None)
        }
        Stage::Answer {
            inputs,
            next,
            answers,
            model,
            restarts,
        } => {
            let end = (*next + INFER_CHUNK).min(inputs.objects.len());
            let report = client.infer_objects(&inputs.objects[*next..end])?;
            let answered = Model {
                run: report.run,
                candidate: report.candidate,
                data_version: report.data_version,
            };
            match model {
                None => *model = Some(answered),
                Some(first) if *first == answered => {}
                Some(_) => {
                    // A better model arrived: answer every input with it.
                    *restarts += 1;
                    if *restarts > MAX_RESTARTS {
                        return Err(Failure::Busy(ApiError::new(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the app's best model changed several times while this request was answered (it is training); send the request again",
                        )));
                    }
                    *model = Some(answered);
                    answers.clear();
                    *next = 0;
                    return Ok(None);
                }
            }
            answers.extend(
                report
                    .answers
                    .into_iter()
                    .zip(&inputs.lines[*next..end])
                    .map(|((_, inference), &line)| (line, inference)),
            );
            *next = end;
            if *next < inputs.objects.len() {
                return Ok(None);
            }
            let Some(model) = model.take() else {
                return Ok(None);
            };
            let answers = std::mem::take(answers);
            let score =
                if !inputs.expected.is_empty() && inputs.expected.iter().all(Option::is_some) {
                    let expected: Vec<CheckedOutput> = std::mem::take(&mut inputs.expected)
                        .into_iter()
                        .flatten()
                        .collect();
                    client.score_answers(&answers, &expected)
                } else {
                    None
                };
            Ok(Some(InferReport {
                answers,
                run: model.run,
                candidate: model.candidate,
                data_version: model.data_version,
                score,
            }))
        }
    }
}
