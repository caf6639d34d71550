//! Feed throughput for `[32,32,3]` inputs: the embedded store against reading the same bytes raw,
//! and the same data over HTTP on loopback, raw and through the remote client.
//!
//! `cargo run --release -p easeml-runtime --example feed_throughput [N]` (default N = 2000). Writes N
//! examples as inline JSON lines and as N `.npy` files in a temp dir, then times: reading the files
//! raw (the baseline), `Client::feed_lines` of each form into a fresh embedded store (check,
//! encode, blob files, one SQLite transaction), `POST /api/v1/apps/bench/examples` of the text to an
//! in-process `easeml_runtime::server` over a fresh store (one request with every line; then
//! batches of 100 lines from 4 concurrent clients), and `Client::feed_lines` of each form through
//! `Connection::Remote` to such a server (checked and rewritten by the client, checked again by the
//! server, in requests of at most 8 MiB).

mod common;

use std::io::Cursor;
use std::time::Instant;

use anyhow::Result;
use common::LoopbackServer;
use easeml_runtime::{AppSpec, Client, Connection, FeedOptions};

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(2000), |arg| arg.parse())?;
    let dir = tempfile::tempdir()?;
    let compiled = easeml_compiler::compile(
        "app bench\nInput = [32, 32, 3]\nOutput = [10]",
        "bench",
        &easeml_compiler::Registry::builtin(),
    )
    .map_err(|diagnostics| anyhow::anyhow!("{diagnostics:?}"))?;
    let manifest = easeml_compiler::codegen::manifest(&compiled).to_json();
    let spec = AppSpec::from_manifest_json(&manifest)?;

    let (json_feed, npy_feed) = write_feeds(dir.path(), n)?;
    let json_path = dir.path().join("feed.txt");
    std::fs::write(&json_path, &json_feed)?;

    // Baselines: the least any feed of each form must do.
    let start = Instant::now();
    let text = std::fs::read_to_string(&json_path)?;
    let mut parsed = 0;
    for line in text.lines() {
        let end = line.rfind(' ').unwrap_or(line.len());
        let value: serde_json::Value = serde_json::from_str(&line[..end])?;
        parsed += usize::from(value.is_array());
    }
    assert_eq!(parsed, n);
    let json_baseline = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut bytes = 0;
    for index in 0..n {
        bytes += std::fs::read(dir.path().join(format!("x{index}.npy")))?.len();
    }
    let npy_baseline = start.elapsed().as_secs_f64();
    println!(
        "baseline, inline JSON: read {:.1} MB + serde_json::Value parse of every line: {json_baseline:.3} s, {:.0} examples/s",
        text.len() as f64 / 1e6,
        n as f64 / json_baseline
    );
    println!(
        "baseline, .npy paths: raw read of {n} files ({:.1} MB): {npy_baseline:.3} s, {:.0} examples/s",
        bytes as f64 / 1e6,
        n as f64 / npy_baseline
    );

    // Where the store's share goes: writing n distinct blob files of one encoded example each.
    let blob_home = tempfile::tempdir()?;
    let blob_store = easeml_runtime::store::Store::open(blob_home.path())?;
    let encoded: Vec<Vec<u8>> = (0..n)
        .map(|index| {
            easeml_runtime::object::codec::encode(&easeml_runtime::Object::single(example(index)))
        })
        .collect();
    let start = Instant::now();
    for bytes in &encoded {
        blob_store.put_blob(bytes)?;
    }
    let blob_seconds = start.elapsed().as_secs_f64();
    println!(
        "store alone: {n} blob files of {} bytes (sha256 + write + rename): {blob_seconds:.3} s",
        encoded[0].len()
    );

    let options = FeedOptions {
        base_dir: Some(dir.path().to_owned()),
        ..FeedOptions::default()
    };
    for (form, feed, baseline) in [
        ("inline JSON", &json_feed, json_baseline),
        (".npy paths", &npy_feed, npy_baseline),
    ] {
        let home = tempfile::tempdir()?;
        let mut client = Client::open(&Connection::embedded(home.path()), spec.clone())?;
        let start = Instant::now();
        let report = client.feed_lines(Cursor::new(feed.as_bytes()), &options)?;
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(report.added, n);
        println!(
            "feed, {form}: {n} examples of [32,32,3] into the embedded store in {seconds:.3} s: {:.0} examples/s ({:.1}x the baseline's time)",
            n as f64 / seconds,
            seconds / baseline
        );
    }

    // The same inline-JSON lines over HTTP on loopback, each variant into a fresh store.
    let lines: Vec<&str> = json_feed.lines().collect();
    for (variant, batch, clients) in [
        ("one request", n, 1usize),
        ("batches of 100, 4 clients", 100, 4),
    ] {
        let server = LoopbackServer::start(&manifest)?;
        let batches: Vec<String> = lines
            .chunks(batch)
            .map(|chunk| chunk.join("\n") + "\n")
            .collect();
        let start = Instant::now();
        post_concurrently(&server, &batches, clients, n)?;
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "feed over HTTP on loopback, inline JSON, {variant}: {n} examples in {seconds:.3} s: {:.0} examples/s ({:.1} MB sent)",
            n as f64 / seconds,
            json_feed.len() as f64 / 1e6
        );
    }

    // The remote client: the same `feed_lines` call as embedded, over HTTP.
    for (form, feed, baseline) in [
        ("inline JSON", &json_feed, json_baseline),
        (".npy paths", &npy_feed, npy_baseline),
    ] {
        let server = LoopbackServer::start(&manifest)?;
        let mut client = Client::open(&server.connection(), spec.clone())?;
        let start = Instant::now();
        let report = client.feed_lines(Cursor::new(feed.as_bytes()), &options)?;
        let seconds = start.elapsed().as_secs_f64();
        anyhow::ensure!(report.added == n, "{} of {n} stored", report.added);
        println!(
            "feed through Connection::Remote (loopback), {form}: {n} examples in {seconds:.3} s: {:.0} examples/s ({:.1}x the baseline's time)",
            n as f64 / seconds,
            seconds / baseline
        );
    }
    Ok(())
}

/// Example `index`'s pixel values: in [0, 1], different for every example.
fn example(index: usize) -> Vec<f32> {
    (0..32 * 32 * 3)
        .map(|position| ((index * 7919 + position * 31) % 256) as f32 / 255.0)
        .collect()
}

/// The `n` examples as inline JSON lines, and as `.npy` files in `dir` with the lines naming them.
fn write_feeds(dir: &std::path::Path, n: usize) -> Result<(String, String)> {
    let mut json_feed = String::new();
    let mut npy_feed = String::new();
    for index in 0..n {
        let values = example(index);
        let rows: Vec<String> = values
            .chunks(32 * 3)
            .map(|row| {
                let pixels: Vec<String> = row
                    .chunks(3)
                    .map(|pixel| format!("[{},{},{}]", pixel[0], pixel[1], pixel[2]))
                    .collect();
                format!("[{}]", pixels.join(","))
            })
            .collect();
        json_feed.push_str(&format!("[{}] class{}\n", rows.join(","), index % 10));
        let path = dir.join(format!("x{index}.npy"));
        write_npy(&path, &values)?;
        npy_feed.push_str(&format!("x{index}.npy class{}\n", index % 10));
    }
    Ok((json_feed, npy_feed))
}

/// Posts `batches` to `server` from `clients` concurrent HTTP clients, each taking the next batch;
/// checks that every one of the `n` examples was stored.
fn post_concurrently(
    server: &LoopbackServer,
    batches: &[String],
    clients: usize,
    n: usize,
) -> Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| -> Result<usize> {
                    let http = reqwest::blocking::Client::builder()
                        .timeout(std::time::Duration::from_secs(600))
                        .build()?;
                    let mut added = 0;
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(body) = batches.get(index) else {
                            return Ok(added);
                        };
                        let response = http
                            .post(format!("{}/api/v1/apps/bench/examples", server.url))
                            .header("Authorization", format!("Bearer {}", server.token))
                            .body(body.clone())
                            .send()?;
                        anyhow::ensure!(response.status() == 200, "{}", response.text()?);
                        added += response.json::<serde_json::Value>()?["added"]
                            .as_u64()
                            .unwrap_or(0) as usize;
                    }
                })
            })
            .collect();
        let mut added = 0;
        for worker in workers {
            added += worker
                .join()
                .map_err(|_| anyhow::anyhow!("a client panicked"))??;
        }
        anyhow::ensure!(added == n, "{added} of {n} stored");
        Ok(())
    })
}

fn write_npy(path: &std::path::Path, values: &[f32]) -> Result<()> {
    let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 32, 3), }".to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for value in values {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    std::fs::write(path, bytes)?;
    Ok(())
}
