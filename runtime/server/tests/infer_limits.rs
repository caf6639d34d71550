//! Inference under one app's load, over HTTP (issue 49): a request whose client hung up stops being
//! worked on (the server's log says after how many of its chunks), and past one app's limit of
//! requests queued or in progress the answer is a 503 in words. No model is needed: a request's
//! lines are checked, chunk by chunk, before any model is asked.

mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{TestServer, http, schema, status_json, with_token};

/// Lines of a big request: 196 chunks of 1024 lines to check.
const BIG_LINES: usize = 200_000;
/// How many big bodies the abandoned request sends at once.
const ABANDONED_TIMES: usize = 5;

/// Everything this process logs (text, no colours): installed once, shared by the tests.
fn log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .init();
        buffer
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn big_body() -> String {
    "[0.5, 0.25, 0.75]\n".repeat(BIG_LINES)
}

/// Regression: five 200k-line infers abandoned after 1 s each ran to their end (21.9 s of work).
/// Now the work stops before the request's next chunk once its client has hung up.
#[test]
fn an_abandoned_big_infer_is_dropped_before_its_end() {
    let log = log();
    let server = TestServer::start(|_| {});
    let token = server.register(&schema("app quitter\nInput = [3]\nOutput = [2]"));
    let quitter = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    // Five times the big body (18 MB, ~980 chunks to check), so that even a fast machine is still
    // checking it when the client hangs up.
    let sent = with_token(quitter.post(server.api("/apps/quitter/infer")), &token)
        .body(big_body().repeat(ABANDONED_TIMES))
        .send();
    assert!(sent.is_err_and(|error| error.is_timeout()));
    // The drop is logged when the thread comes to the request's next chunk.
    let started = Instant::now();
    let dropped = loop {
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        if let Some(line) = text
            .lines()
            .find(|line| line.contains("inference dropped") && line.contains("app=quitter"))
        {
            break line.to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no drop logged:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let chunks: usize = dropped
        .split("chunks=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no chunk count: {dropped}"));
    // Checking every line would take ~980 chunks, and answering more.
    assert!(
        chunks < (BIG_LINES * ABANDONED_TIMES).div_ceil(1024),
        "{dropped}"
    );
    // The app still answers (409: no model yet), so nothing of the dropped request is left holding it.
    let (status, body) = status_json(
        with_token(http().post(server.api("/apps/quitter/infer")), &token)
            .body("[0.5, 0.25, 0.75]\n")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 409, "{body}");
}

/// At most 32 MiB of one app's requests are queued or in progress (and at most 64 requests); the
/// others are answered 503 at once, in words, and another app is not refused meanwhile. Twelve
/// requests of 3.6 MB: nine fit.
#[test]
fn past_one_apps_limit_of_requests_in_progress_the_answer_is_503_in_words() {
    let server = TestServer::start(|_| {});
    let token = server.register(&schema("app busy\nInput = [3]\nOutput = [2]"));
    let other = server.register(&schema("app calm\nInput = [3]\nOutput = [2]"));
    let body = Arc::new(big_body());
    let senders: Vec<_> = (0..12)
        .map(|_| {
            let (url, token, body) = (
                server.api("/apps/busy/infer"),
                token.clone(),
                Arc::clone(&body),
            );
            std::thread::spawn(move || {
                status_json(
                    with_token(http().post(url), &token)
                        .body(body.as_bytes().to_vec())
                        .send()
                        .unwrap(),
                )
            })
        })
        .collect();
    let answers: Vec<_> = senders
        .into_iter()
        .map(|sender| sender.join().unwrap())
        .collect();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == 503)
        .collect();
    assert!(!refused.is_empty(), "{answers:?}");
    for (_, body) in &refused {
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("app `busy` has 9 inference requests of 30.9 MiB queued or in progress, and this one's 3.4 MiB would pass the 32 MiB one app may have"),
            "{body}"
        );
    }
    // The others were all worked on: checked, then 409 (no model yet).
    assert!(
        answers
            .iter()
            .all(|(status, _)| *status == 503 || *status == 409),
        "{answers:?}"
    );
    assert!(answers.iter().filter(|(status, _)| *status == 409).count() >= 8);
    let (status, _) = status_json(
        with_token(http().post(server.api("/apps/calm/infer")), &other)
            .body("[0.5, 0.25, 0.75]\n")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 409);
}
