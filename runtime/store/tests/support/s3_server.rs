// A real S3-compatible server for the tests of one test process: moto's server (PyPI `moto`, the
// S3 implementation the AWS SDKs' own tests use), in a venv made once under the target dir, on a
// free loopback port; started by the first test that asks for a bucket and stopped by a watchdog
// once the test process has exited. Every `bucket()` is a fresh bucket, so tests never see each
// other's objects.
//
// `EASEML_TEST_S3` (`http://host:port` of an S3-compatible server that takes unsigned requests and
// creates buckets on `PUT /bucket`) replaces the server started here. Without either (no python3,
// no PyPI), `bucket()` says so loudly and returns `None`: the caller skips.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// The test crate's root includes `support/watchdog.rs` as `watchdog` beside this module.
use crate::watchdog;
use crate::watchdog::shell_quote;

/// The moto the tests install (its S3 part and the server's web framework only).
const MOTO: &[&str] = &["moto[s3]==5.2.5", "flask==3.1.3", "flask-cors==6.0.5"];

/// A server: its address (`127.0.0.1:port`), and the count of buckets made so far.
struct Server {
    address: String,
    made: AtomicUsize,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();

/// A fresh bucket on the test server, as the blob location a user would write
/// (`s3://bucket/prefix?endpoint=...`); `None` (after a loud banner) when no server can run here.
#[allow(dead_code)]
pub fn bucket(prefix: &str) -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    let index = server.made.fetch_add(1, Ordering::SeqCst);
    let name = format!("easeml-test-{}-{index}", std::process::id());
    // Public: the store signs nothing (`skip_signature`), so anonymous requests must be allowed.
    let status = request(
        &server.address,
        "PUT",
        &format!("/{name}"),
        "x-amz-acl: public-read-write\r\n",
        b"",
    );
    assert_eq!(status, 200, "creating bucket {name}");
    Some(format!(
        "s3://{name}/{prefix}?endpoint=http://{}&region=us-east-1&allow_http=true&skip_signature=true",
        server.address
    ))
}

/// The endpoint of the test server (`http://127.0.0.1:port`), for processes given the location
/// by environment; `None` when no server can run here.
#[allow(dead_code)]
pub fn endpoint() -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    Some(format!("http://{}", server.address))
}

/// Replaces the object at `key` of the bucket of `location` (a `bucket()` answer) with `bytes`,
/// behind the store's back.
#[allow(dead_code)]
pub fn overwrite(location: &str, key: &str, bytes: &[u8]) {
    let server = SERVER
        .get()
        .and_then(Option::as_ref)
        .expect("a test server");
    let bucket = location
        .strip_prefix("s3://")
        .and_then(|rest| rest.split(['/', '?']).next())
        .expect("an s3:// location");
    let status = request(
        &server.address,
        "PUT",
        &format!("/{bucket}/{key}"),
        "",
        bytes,
    );
    assert_eq!(status, 200, "overwriting {key}");
}

/// One HTTP/1.1 request (`headers`: `Name: value\r\n` lines); the response's status code.
fn request(address: &str, method: &str, path: &str, headers: &str, body: &[u8]) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).expect("connecting to the S3 server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// A failure (or, with `EASEML_ALLOW_SKIPS=1`, a loud skip): `easeml_test_support::missing_part`.
fn banner(why: &str) {
    easeml_test_support::missing_part(
        "the S3 tests",
        "an S3-compatible server",
        why,
        "They install moto from PyPI into a venv (python3 with venv: `cargo xtask setup`), or set EASEML_TEST_S3",
    );
}

/// The venv with moto, made once per target dir.
fn venv() -> Result<PathBuf, String> {
    easeml_test_support::pypi_venv(Path::new(env!("CARGO_TARGET_TMPDIR")), "moto-venv", MOTO)
}

fn start() -> Option<Server> {
    if let Ok(endpoint) = std::env::var("EASEML_TEST_S3") {
        let address = endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        return Some(Server {
            address,
            made: AtomicUsize::new(0),
        });
    }
    let venv = match venv() {
        Ok(venv) => venv,
        Err(why) => {
            banner(&why);
            return None;
        }
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port");
    let log = std::env::temp_dir().join(format!("easeml-test-s3-{}.log", std::process::id()));
    // The server runs until this test process is gone.
    watchdog::spawn(
        "test S3 server",
        &format!(
            "{python} -m moto.server -H 127.0.0.1 -p {port} >{log} 2>&1",
            python = shell_quote(&venv.join("bin/python").to_string_lossy()),
            log = shell_quote(&log.to_string_lossy()),
        ),
        &format!(
            "kill $server; wait $server; rm -f {log}",
            log = shell_quote(&log.to_string_lossy())
        ),
    );
    let address = format!("127.0.0.1:{port}");
    let started = Instant::now();
    while std::net::TcpStream::connect(&address).is_err() {
        if started.elapsed() > Duration::from_secs(60) {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the test S3 server did not start within 60 s:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Server {
        address,
        made: AtomicUsize::new(0),
    })
}
