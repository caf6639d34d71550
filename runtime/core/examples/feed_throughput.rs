//! Feed throughput of the embedded store for `[32,32,3]` inputs, against reading the same bytes raw.
//!
//! `cargo run --release -p easeml-runtime --example feed_throughput [N]` (default N = 2000). Writes N
//! examples as inline JSON lines and as N `.npy` files in a temp dir, then times: reading the files
//! raw (the baseline), and `Client::feed_lines` of each form into a fresh embedded store (check,
//! encode, blob files, one SQLite transaction).

use std::io::Cursor;
use std::time::Instant;

use anyhow::Result;
use easeml_runtime::{Client, Connection, FeedOptions};

fn main() -> Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(2000), |arg| arg.parse())?;
    let dir = tempfile::tempdir()?;
    let schema = easeml_compiler::compile(
        "app bench\nInput = [32, 32, 3]\nOutput = [10]",
        "bench",
        &easeml_compiler::Registry::builtin(),
    )
    .map_err(|diagnostics| anyhow::anyhow!("{diagnostics:?}"))?
    .schema;

    // Data: pixel values in [0, 1], different for every example.
    let example = |index: usize| -> Vec<f32> {
        (0..32 * 32 * 3)
            .map(|position| ((index * 7919 + position * 31) % 256) as f32 / 255.0)
            .collect()
    };
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
        let path = dir.path().join(format!("x{index}.npy"));
        write_npy(&path, &values)?;
        npy_feed.push_str(&format!("x{index}.npy class{}\n", index % 10));
    }
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
            easeml_runtime::example::codec::encode(&easeml_runtime::Object::single(example(index)))
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
        let mut client = Client::open(&Connection::embedded(home.path()), schema.clone())?;
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
    Ok(())
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
