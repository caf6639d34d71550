//! Inference latency of a small CNN on the CPU, one input per call: embedded
//! (`Connection::Embedded`) against over HTTP on loopback (`Connection::Remote` to an in-process
//! `easeml_runtime::server` over the same store), side by side in one run.
//!
//! `cargo run --release -p easeml-runtime --example infer_latency [N]` (default N = 500 calls per
//! mode). Trains one `alexnet` run (the image classifier at the CPU width: a quarter of the
//! published channels) on 200 synthetic `[32,32,3]` images of 10 classes, then times
//! `Client::infer` with one input: 50 warm-up calls per mode, then N calls per mode in alternating
//! rounds of 50, so that both modes see the same machine. Also times the loaded model alone
//! (`ServedModel::predict` of one checked input), the floor of both. Prints p50, p90, p99 and the
//! mean in milliseconds.

mod common;

use std::io::Cursor;
use std::time::Instant;

use anyhow::Result;
use common::LoopbackServer;
use easeml_runtime::engine::{Engine, EngineConfig, ServedModel, choose_device, device_name};
use easeml_runtime::{AppSpec, Client, Connection, FeedOptions, Object};
use serde_json::{Value, json};

/// Calls per round; the modes take turns round by round.
const ROUND: usize = 50;

fn main() -> Result<()> {
    let n: usize = std::env::args().nth(1).map_or(Ok(500), |arg| arg.parse())?;
    let mut compiled = easeml_compiler::compile(
        "app latency\nInput = [32, 32, 3]\nOutput = [10]",
        "latency",
        &easeml_compiler::Registry::builtin(),
    )
    .map_err(|diagnostics| anyhow::anyhow!("{diagnostics:?}"))?;
    // One small CNN: the measurement is the serving path, not the model search.
    compiled
        .candidates
        .retain(|candidate| candidate.id == "alexnet");
    let manifest = easeml_compiler::codegen::manifest(&compiled).to_json();
    let spec = AppSpec::from_manifest_json(&manifest)?;

    // Images whose class is their brightness band, so the model has something to learn.
    let image = |index: usize| -> Value {
        let class = index % 10;
        let values: Vec<Value> = (0..32)
            .map(|row| {
                json!(
                    (0..32)
                        .map(|column| {
                            let jitter = ((index * 7919 + row * 32 + column) % 13) as f64 / 130.0;
                            let v = class as f64 / 10.0 + jitter;
                            json!([v, v, 1.0 - v])
                        })
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        Value::Array(values)
    };
    let home = tempfile::tempdir()?;
    let server = LoopbackServer::start_over(home.path(), &manifest)?;
    let mut remote = Client::open(&server.connection(), spec.clone())?;
    let feed: String = (0..200)
        .map(|index| format!("{} c{}\n", image(index), index % 10))
        .collect();
    remote.feed_lines(Cursor::new(feed), &FeedOptions::default())?;

    let device = choose_device()?;
    let mut config = EngineConfig::for_device(device);
    config.max_run_seconds = 60.0;
    config.max_epochs = 5;
    config.min_steps = 0; // the epochs as set: a quick test, not a good model
    let started = Instant::now();
    let mut engine = Engine::open(home.path(), config)?;
    let run = loop {
        match engine.step(None, &mut |_| {})? {
            Some(easeml_engine::Step::Run(run)) if run.quality.is_some() => break run,
            Some(_) => continue,
            None => anyhow::bail!("no run finished"),
        }
    };
    drop(engine);
    println!(
        "trained {} on {} in {:.1} s (quality {:.3})",
        run.candidate,
        device_name(device),
        started.elapsed().as_secs_f64(),
        run.quality.unwrap_or_default()
    );

    let mut embedded = Client::open(&Connection::embedded(home.path()), spec.clone())?;
    let inputs: Vec<Value> = (1000..1020).map(image).collect();
    let store = embedded
        .store()
        .ok_or_else(|| anyhow::anyhow!("an embedded client has a store"))?;
    let app = embedded
        .app_id()
        .ok_or_else(|| anyhow::anyhow!("an embedded client has an app id"))?;
    let model = ServedModel::load(store, app, device)?
        .ok_or_else(|| anyhow::anyhow!("no model to load"))?;
    let objects: Vec<Object> = inputs
        .iter()
        .map(|input| easeml_runtime::object::object_from_json(&spec.schema().input, input, "input"))
        .collect::<std::result::Result<_, _>>()?;

    let mut times: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut call = |mode: usize, index: usize| -> Result<f64> {
        let input = &inputs[index % inputs.len()];
        let start = Instant::now();
        let answers = match mode {
            0 => model
                .predict(std::slice::from_ref(&objects[index % objects.len()]))?
                .len(),
            1 => embedded.infer(std::iter::once(input))?.answers.len(),
            _ => remote.infer(std::iter::once(input))?.answers.len(),
        };
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(answers == 1, "{answers} answers to one input");
        Ok(elapsed)
    };
    for mode in 0..3 {
        for index in 0..ROUND {
            call(mode, index)?;
        }
    }
    let mut done = 0;
    while done < n {
        let count = ROUND.min(n - done);
        for (mode, times) in times.iter_mut().enumerate() {
            for index in done..done + count {
                times.push(call(mode, index)?);
            }
        }
        done += count;
    }
    println!(
        "one input per call, {n} calls per mode, threads: libtorch {}",
        tch::get_num_threads()
    );
    for (name, times) in [
        "the loaded model alone (ServedModel::predict)",
        "embedded (Connection::Embedded, Client::infer)",
        "over HTTP on loopback (Connection::Remote, Client::infer)",
    ]
    .iter()
    .zip(times.iter_mut())
    {
        times.sort_by(f64::total_cmp);
        let percentile =
            |p: f64| times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
        println!(
            "{name}: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
            percentile(0.50),
            percentile(0.90),
            percentile(0.99),
            times.iter().sum::<f64>() / times.len() as f64
        );
    }
    drop(server);
    Ok(())
}
