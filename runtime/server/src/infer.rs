//! The inference worker: one thread that owns a `Client` per app which has answered an inference, so
//! that the app's loaded best model stays in memory (the client reloads it when a better run has
//! finished). Loaded models are not `Send` (libtorch modules behind trait objects), so they never
//! leave this thread; requests reach it over a channel and take turns.

use std::collections::HashMap;
use std::io::Cursor;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};

use axum::body::Bytes;
use tokio::sync::oneshot;

use easeml_client::{Client, FeedOptions, InferReport};

/// One inference request: the app (its token already checked), the body, where the answer goes.
struct Job {
    app: String,
    body: Bytes,
    reply: oneshot::Sender<crate::Result<InferReport>>,
}

/// The handle on the worker thread (the thread ends when the handle is dropped).
pub(crate) struct InferWorker {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl InferWorker {
    /// Starts the worker over the store under `home`.
    pub(crate) fn start(home: PathBuf) -> std::io::Result<InferWorker> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("easeml-infer".to_owned())
            .stack_size(8 << 20)
            .spawn(move || work(&home, &queue))?;
        Ok(InferWorker {
            jobs: Mutex::new(jobs),
        })
    }

    /// Answers the lines of `body` with `app`'s best model; `None` when the worker is gone.
    pub(crate) async fn infer(
        &self,
        app: String,
        body: Bytes,
    ) -> Option<crate::Result<InferReport>> {
        let (reply, answer) = oneshot::channel();
        {
            let jobs = self.jobs.lock().ok()?;
            jobs.send(Job { app, body, reply }).ok()?;
        }
        answer.await.ok()
    }
}

fn work(home: &std::path::Path, queue: &mpsc::Receiver<Job>) {
    let mut clients: HashMap<String, Client> = HashMap::new();
    while let Ok(job) = queue.recv() {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            answer(home, &mut clients, &job.app, &job.body)
        }));
        let result = match outcome {
            Ok(result) => result.map_err(crate::ServerError::from),
            Err(_) => {
                // A panic in a model must not leave a half-updated client behind.
                clients.remove(&job.app);
                Err(crate::ServerError::Serve {
                    what: format!("inference for app `{}`", job.app),
                    source: std::io::Error::other("the model panicked"),
                })
            }
        };
        let _ = job.reply.send(result);
    }
}

fn answer(
    home: &std::path::Path,
    clients: &mut HashMap<String, Client>,
    app: &str,
    body: &[u8],
) -> easeml_client::Result<InferReport> {
    if !clients.contains_key(app) {
        let store = easeml_store::Store::open(home)?;
        clients.insert(app.to_owned(), Client::attach(store, app)?);
    }
    let Some(client) = clients.get_mut(app) else {
        return Err(easeml_store::Error::NoSuchApp(app.to_owned()).into());
    };
    let options = FeedOptions {
        allow_paths: false,
        ..FeedOptions::default()
    };
    let report = client.infer_lines(Cursor::new(body), &options);
    if matches!(report, Err(easeml_client::Error::Store(_))) {
        // The app may have been removed (and registered again): open it afresh next time.
        clients.remove(app);
    }
    report
}
