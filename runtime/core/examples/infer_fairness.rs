//! Inference fairness between tenants (issue 49): app B's one-line infer over HTTP, unloaded and
//! while app A sends ten 200k-line infers to the same server, answered or abandoned after 1 s.
//!
//! `cargo run --release -p easeml-runtime --example infer_fairness [N]` (default N = 1000 calls of
//! B unloaded). One in-process `easeml_runtime::server` on loopback over a temporary store, two
//! tabular apps (`Input = [3]`, `Output = [2]`, one `mlp_small` run each, trained by the engine on
//! 40 examples). B's calls are sequential, on one kept-alive connection, 20 warm-up calls first.
//! Phases: unloaded (N calls); ten senders of A at once, each sending one 200k-line infer (5.2 MB)
//! and waiting for its answer (A may have 8 requests in progress, so two are refused with 503);
//! the same ten senders abandoning each request after 1 s (the client's timeout closes the
//! connection), three times in a row. In a loaded phase B calls from 0.2 s after the senders start
//! until the last sender is done; then B unloaded again. Prints B's p50, p90, p99 and max in milliseconds per phase, the
//! ratio of each loaded p99 to the unloaded one (the target: at most 2), and what A's requests got.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use common::LoopbackServer;
use easeml_runtime::engine::{Engine, EngineConfig, choose_device, device_name};

/// Calls of B before the measured ones.
const WARM_UP: usize = 20;
/// Rounds of ten abandoned requests in the abandoning phase.
const ABANDONED_ROUNDS: usize = 3;
/// Lines of one of A's requests.
const BIG_LINES: usize = 200_000;
/// A's concurrent senders.
const SENDERS: usize = 10;

/// Example `i` of either app: a row of three values and its label.
fn line(i: usize) -> String {
    let high = i.is_multiple_of(2);
    let base = if high { 0.8 } else { 0.1 };
    let jitter = (i % 5) as f32 * 0.02;
    format!(
        "[{}, {}, {}] {}\n",
        base + jitter,
        base - jitter,
        base,
        if high { "high" } else { "low" }
    )
}

/// A compiled tabular app of one candidate (`mlp_small`), as a manifest.
fn manifest(app: &str) -> Result<String> {
    let mut compiled = easeml_compiler::compile(
        &format!("app {app}\nInput = [3]\nOutput = [2]\nlabels = [low, high]"),
        app,
        &easeml_compiler::Registry::builtin(),
    )
    .map_err(|diagnostics| anyhow::anyhow!("{diagnostics:?}"))?;
    compiled
        .candidates
        .retain(|candidate| candidate.id == "mlp_small");
    Ok(easeml_compiler::codegen::manifest(&compiled).to_json())
}

/// What A's requests got during one phase.
#[derive(Default)]
struct Outcomes {
    answered: AtomicUsize,
    abandoned: AtomicUsize,
    refused: AtomicUsize,
    other: AtomicUsize,
}

/// One one-line infer of B, in milliseconds.
fn call_b(http: &reqwest::blocking::Client, url: &str, token: &str, index: usize) -> Result<f64> {
    let start = Instant::now();
    let response = http
        .post(url)
        .bearer_auth(token)
        .body(line(1000 + index))
        .send()?;
    let status = response.status();
    let text = response.text()?;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(status == 200, "B's infer: {status} {text}");
    Ok(elapsed)
}

/// The `p` quantile of sorted `times`.
fn percentile(times: &[f64], p: f64) -> f64 {
    times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1]
}

/// One `mlp_small` run of each app by the engine, over the store at `home`.
fn train_both(home: &std::path::Path) -> Result<()> {
    let device = choose_device()?;
    let mut config = EngineConfig::for_device(device);
    config.max_run_seconds = 20.0;
    config.max_epochs = 2;
    config.min_steps = 0; // the epochs as set: the measurement is the serving path, not the model
    let started = Instant::now();
    let mut engine = Engine::open(home, config)?;
    let mut trained = 0;
    for _ in 0..8 {
        match engine.step(None, &mut |_| {})? {
            Some(easeml_engine::Step::Run(run)) if run.quality.is_some() => {
                trained += 1;
                if trained == 2 {
                    break;
                }
            }
            Some(_) => continue,
            None => break,
        }
    }
    drop(engine);
    anyhow::ensure!(trained == 2, "{trained} of 2 apps trained");
    println!(
        "trained both apps on {} in {:.1} s",
        device_name(device),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A's senders: each sends one big infer `rounds` times (abandoning it after 1 s with
/// `abandon`), counts what it got in `outcomes`, and counts itself in `done` when through.
fn spawn_senders(
    (abandon, rounds): (bool, usize),
    (url, token): (&str, &str),
    big: &Arc<str>,
    done: &Arc<AtomicUsize>,
    outcomes: &Arc<Outcomes>,
) -> Vec<std::thread::JoinHandle<Result<()>>> {
    (0..SENDERS)
        .map(|_| {
            let (done, outcomes, big) = (done.clone(), outcomes.clone(), big.clone());
            let (url, token) = (url.to_owned(), token.to_owned());
            std::thread::spawn(move || -> Result<()> {
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(if abandon { 1 } else { 600 }))
                    .build()?;
                for _ in 0..rounds {
                    let sent = client
                        .post(&url)
                        .bearer_auth(&token)
                        .body(big.to_string())
                        .send()
                        .and_then(|response| {
                            let status = response.status();
                            response.bytes().map(|_| status)
                        });
                    let counter = match sent {
                        Ok(status) if status == 200 => &outcomes.answered,
                        Ok(status) if status == 503 => &outcomes.refused,
                        Ok(_) => &outcomes.other,
                        Err(error) if error.is_timeout() => &outcomes.abandoned,
                        Err(_) => &outcomes.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect()
}

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1000), |arg| arg.parse())?;
    // The server in this process answers inferences with the engine's models.
    easeml_runtime::install_engine();
    let home = tempfile::tempdir()?;
    let server = LoopbackServer::start_over(home.path(), &manifest("big")?)?;
    let token_a = server.token.clone();
    let token_b = server.register(&manifest("small")?)?;
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let api = |path: &str| format!("{}/api/v1{path}", server.url);
    for (app, token) in [("big", &token_a), ("small", &token_b)] {
        let response = http
            .post(api(&format!("/apps/{app}/examples")))
            .bearer_auth(token)
            .body((0..40).map(line).collect::<String>())
            .send()?;
        anyhow::ensure!(response.status() == 200, "feed {app}: {}", response.text()?);
    }

    train_both(home.path())?;

    let url_a = api("/apps/big/infer");
    let url_b = api("/apps/small/infer");
    let big: Arc<str> = (0..BIG_LINES).map(line).collect::<String>().into();
    // One of A's requests alone, for scale.
    let start = Instant::now();
    let response = http
        .post(&url_a)
        .bearer_auth(&token_a)
        .body(big.to_string())
        .send()?;
    anyhow::ensure!(response.status() == 200, "A's infer: {}", response.status());
    drop(response.bytes()?);
    println!(
        "one infer of A alone: {BIG_LINES} lines ({:.1} MB) in {:.2} s",
        big.len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );

    for index in 0..WARM_UP {
        call_b(&http, &url_b, &token_b, index)?;
    }
    let unloaded = || -> Result<Vec<f64>> {
        let mut times = (0..n)
            .map(|index| call_b(&http, &url_b, &token_b, index))
            .collect::<Result<Vec<f64>>>()?;
        times.sort_by(f64::total_cmp);
        Ok(times)
    };
    let mut rows = vec![("unloaded".to_owned(), unloaded()?, None)];
    for (abandon, rounds) in [(false, 1), (true, ABANDONED_ROUNDS)] {
        let done = Arc::new(AtomicUsize::new(0));
        let outcomes = Arc::new(Outcomes::default());
        let senders = spawn_senders(
            (abandon, rounds),
            (&url_a, &token_a),
            &big,
            &done,
            &outcomes,
        );
        // A's requests reach the server first.
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(200));
        let mut times = Vec::new();
        while done.load(Ordering::Relaxed) < SENDERS {
            times.push(call_b(&http, &url_b, &token_b, times.len())?);
        }
        let seconds = started.elapsed().as_secs_f64();
        for sender in senders {
            sender
                .join()
                .map_err(|_| anyhow::anyhow!("a sender panicked"))??;
        }
        anyhow::ensure!(!times.is_empty(), "no call of B while A was loaded");
        times.sort_by(f64::total_cmp);
        let what = format!(
            "A: {} answered, {} abandoned, {} refused (503), {} other; the load lasted {seconds:.1} s",
            outcomes.answered.load(Ordering::Relaxed),
            outcomes.abandoned.load(Ordering::Relaxed),
            outcomes.refused.load(Ordering::Relaxed),
            outcomes.other.load(Ordering::Relaxed)
        );
        let name = if abandon {
            format!("{SENDERS} infers of A at once, abandoned after 1 s, {rounds} times")
        } else {
            format!("{SENDERS} infers of A at once, answered")
        };
        rows.push((name, times, Some(what)));
    }

    // Again, to show how much the machine itself moves B's times.
    rows.push((
        "unloaded again, after A's phases".to_owned(),
        unloaded()?,
        None,
    ));
    println!("B: one line per call");
    let unloaded_p99 = percentile(&rows[0].1, 0.99);
    for (name, times, what) in &rows {
        let p99 = percentile(times, 0.99);
        println!(
            "{name}: {} calls, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; p99 / unloaded p99 = {:.2}",
            times.len(),
            percentile(times, 0.50),
            percentile(times, 0.90),
            p99,
            times.last().copied().unwrap_or_default(),
            p99 / unloaded_p99
        );
        if let Some(what) = what {
            println!("  {what}");
        }
    }
    drop(server);
    Ok(())
}
