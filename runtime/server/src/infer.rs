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
//! many busy apps as threads no two share one. Small requests of one app are answered together:
//! a turn checks the lines of several of them (up to one chunk's worth) and answers those at the
//! front in one call of the model (up to [`INFER_CHUNK`] inputs), so 64 clients asking one line
//! each cost one forward pass, not 64. A request whose client hung up (its answer's receiver
//! dropped with the request) is dropped before its next chunk, so abandoned work costs at most one
//! chunk. At most [`MAX_REQUESTS_PER_APP`] requests of one app, of at most
//! [`MAX_QUEUED_BYTES_PER_APP`] together, are queued or in progress; more are answered 503 at once. The answers of one request all come from one model: when a
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
/// Inputs answered in one turn (one call of the model: the inputs of several small requests of
/// an app are answered together).
pub(crate) const INFER_CHUNK: usize = 256;
/// Requests of one app queued or in progress at once; more are refused (503).
pub(crate) const MAX_REQUESTS_PER_APP: usize = 64;
/// Bytes of the bodies of one app's requests queued or in progress at once; a request that would
/// pass it is refused (503), unless it is the app's only one (one request may be as large as the
/// server's body limit).
pub(crate) const MAX_QUEUED_BYTES_PER_APP: usize = 32 << 20;
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

impl Job {
    /// Sends the answer, after giving the request's place back: a client that sends its next
    /// request the moment it reads this answer finds the place free.
    fn answer(self, result: Result<InferReport, ApiError>) {
        let Job { reply, _slot, .. } = self;
        drop(_slot);
        let _ = reply.send(result);
    }
}

/// A request's place among its app's [`MAX_REQUESTS_PER_APP`] and [`MAX_QUEUED_BYTES_PER_APP`].
struct Slot {
    queued: Arc<Queued>,
    bytes: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.queued.requests.fetch_sub(1, Ordering::AcqRel);
        self.queued.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// An app's requests queued or in progress, and their bodies' bytes.
#[derive(Default)]
struct Queued {
    requests: AtomicUsize,
    bytes: AtomicUsize,
}

/// Where an app's requests go.
struct AppRoute {
    thread: usize,
    queued: Arc<Queued>,
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
                        queued: Arc::new(Queued::default()),
                    },
                );
            }
            let route = apps.get(&app).ok_or_else(stopped)?;
            let before = route.queued.requests.fetch_add(1, Ordering::AcqRel);
            let bytes_before = route.queued.bytes.fetch_add(body.len(), Ordering::AcqRel);
            let slot = Slot {
                queued: Arc::clone(&route.queued),
                bytes: body.len(),
            };
            if before >= MAX_REQUESTS_PER_APP {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "app `{app}` has {MAX_REQUESTS_PER_APP} inference requests queued or in progress, the most one app may have; wait for their answers, or send more lines per request"
                    ),
                ));
            }
            if before > 0 && bytes_before + body.len() > MAX_QUEUED_BYTES_PER_APP {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "app `{app}` has {before} inference requests of {:.1} MiB queued or in progress, and this one's {:.1} MiB would pass the {} MiB one app may have; wait for their answers",
                        bytes_before as f64 / f64::from(1 << 20),
                        body.len() as f64 / f64::from(1 << 20),
                        MAX_QUEUED_BYTES_PER_APP >> 20
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
    run_number: u64,
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
        take_turn(home, &mut clients, &app, &mut tasks);
        if !tasks.is_empty() {
            turns.push_back((app, tasks));
        }
    }
}

/// One turn of an app with work: requests whose client hung up are dropped; then its requests'
/// lines are checked, in order, up to one chunk's worth over them all ([`CHECK_CHUNK_BYTES`],
/// [`CHECK_CHUNK_LINES`] requests); then the requests at the front whose lines are all checked
/// are answered together, up to [`INFER_CHUNK`] inputs in one call of the model, or the first
/// request alone gets one chunk of its answers. So many small requests of one app (64 clients
/// asking one line each) cost one call of the model, not one each, and a turn's work stays
/// bounded by about two chunks, as the fairness between apps wants.
fn take_turn(
    home: &Path,
    clients: &mut HashMap<String, Client>,
    app: &str,
    tasks: &mut VecDeque<Task>,
) {
    tasks.retain(|task| {
        let open = !task.job.reply.is_closed();
        if !open {
            tracing::info!(
                app = %app,
                chunks = task.chunks,
                "inference dropped: its client hung up"
            );
        }
        open
    });
    // Check: requests in order, while the turn's check budget lasts.
    let (mut bytes, mut checked, mut index) = (0, 0, 0);
    while index < tasks.len() && bytes < CHECK_CHUNK_BYTES && checked < CHECK_CHUNK_LINES {
        let task = &mut tasks[index];
        if !matches!(task.stage, Stage::Check { .. }) {
            index += 1;
            continue;
        }
        task.chunks += 1;
        bytes += task.job.body.len().min(CHECK_CHUNK_BYTES);
        checked += 1;
        match step(home, clients, task) {
            Some(result) => {
                if let Some(task) = tasks.remove(index) {
                    task.job.answer(result);
                }
            }
            None if matches!(task.stage, Stage::Check { .. }) => break,
            None => index += 1,
        }
    }
    // Answer: the front requests together when they are small, else the first one's next chunk.
    let together = tasks
        .iter()
        .take_while(|task| task.fresh_answer().is_some())
        .scan(0, |inputs, task| {
            *inputs += task.fresh_answer().unwrap_or(0);
            (*inputs <= INFER_CHUNK).then_some(())
        })
        .count();
    if together >= 2 && answer_together(clients, app, tasks, together) {
        return;
    }
    if tasks
        .front()
        .is_some_and(|task| matches!(task.stage, Stage::Answer { .. }))
        && let Some(mut task) = tasks.pop_front()
    {
        task.chunks += 1;
        match step(home, clients, &mut task) {
            None => tasks.push_front(task),
            Some(result) => {
                task.job.answer(result);
            }
        }
    }
}

impl Task {
    /// The number of its inputs when its lines are all checked and none is answered yet.
    fn fresh_answer(&self) -> Option<usize> {
        match &self.stage {
            Stage::Answer {
                inputs,
                next: 0,
                model: None,
                ..
            } => Some(inputs.objects.len()),
            _ => None,
        }
    }
}

/// Answers the first `count` requests (all checked, none answered) with one call of the app's
/// model and replies to each; `false`, changing nothing, when that call fails (each request is
/// then answered on its own, with its own error).
fn answer_together(
    clients: &mut HashMap<String, Client>,
    app: &str,
    tasks: &mut VecDeque<Task>,
    count: usize,
) -> bool {
    let Some(client) = clients.get_mut(app) else {
        return false;
    };
    let objects: Vec<Object> = tasks
        .iter()
        .take(count)
        .flat_map(|task| match &task.stage {
            Stage::Answer { inputs, .. } => inputs.objects.clone(),
            Stage::Check { .. } => Vec::new(),
        })
        .collect();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| client.infer_objects(&objects)));
    let Ok(Ok(report)) = outcome else {
        return false;
    };
    let mut answers = report.answers.into_iter();
    for mut task in tasks.drain(..count) {
        let Stage::Answer { inputs, .. } = &mut task.stage else {
            continue;
        };
        let mine: Vec<(usize, Inference)> = answers
            .by_ref()
            .take(inputs.objects.len())
            .zip(&inputs.lines)
            .map(|((_, inference), &line)| (line, inference))
            .collect();
        let score = score_of(client, &mine, &mut inputs.expected);
        task.job.answer(Ok(InferReport {
            answers: mine,
            run: report.run,
            run_number: report.run_number,
            candidate: report.candidate.clone(),
            data_version: report.data_version,
            score,
        }));
    }
    true
}

/// The score of a request's answers when every one of its lines carried its expected output.
fn score_of(
    client: &Client,
    answers: &[(usize, Inference)],
    expected: &mut Vec<Option<CheckedOutput>>,
) -> Option<easeml_client::Score> {
    if expected.is_empty() || !expected.iter().all(Option::is_some) {
        return None;
    }
    let expected: Vec<CheckedOutput> = std::mem::take(expected).into_iter().flatten().collect();
    client.score_answers(answers, &expected)
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
                run_number: report.run_number,
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
            let score = score_of(client, &answers, &mut inputs.expected);
            Ok(Some(InferReport {
                answers,
                run: model.run,
                run_number: model.run_number,
                candidate: model.candidate,
                data_version: model.data_version,
                score,
            }))
        }
    }
}
