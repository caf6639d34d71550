//! Slow, idle and cross-site clients against a real server on loopback (issue 49). The connection limit gives an
//! idle socket's place to a new connection (so `/api/v1/health` answers while twice the limit of
//! idle or half-sent requests are open), refuses with 503 only when every connection is busy,
//! closes half-sent headers after the header timeout and idle connections after the idle timeout,
//! and answers a slow body 408. Without an admin token, a cross-site browser POST and a rebound
//! `Host` are refused. Feed lines with a key twice or a number that rounds to 0 are bad lines, and
//! a bad line's echo is cut. Pass or fail never depends on a timing, except generous upper
//! bounds where the issue asks for an answer "within" a time.

mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{TestServer, http, schema, status_json, with_token};

/// Whether the server has closed `stream` (EOF or reset), waiting at most `wait` for it.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Everything the server sends on `stream` until it closes it (at most 30 s).
fn read_to_close(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut text = Vec::new();
    let _ = stream.read_to_end(&mut text);
    String::from_utf8_lossy(&text).into_owned()
}

/// Reads from `stream` until `needle` has arrived (at most 30 s).
fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&text).contains(needle) {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(read) => text.extend_from_slice(&buf[..read]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

#[test]
fn health_answers_while_twice_the_connection_limit_of_idle_and_half_sent_requests_are_open() {
    const LIMIT: usize = 16;
    let server = TestServer::start(|config| {
        config.max_connections = LIMIT;
        config.header_timeout = Duration::from_secs(600);
        config.idle_timeout = Duration::from_secs(600);
    });
    let mut sockets: Vec<TcpStream> = (0..2 * LIMIT)
        .map(|index| {
            let mut socket = TcpStream::connect(server.address).unwrap();
            if index % 2 == 1 {
                // Headers begun and never finished (slowloris).
                socket
                    .write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n")
                    .unwrap();
            }
            socket
        })
        .collect();
    let started = Instant::now();
    let response = http().get(server.api("/health")).send().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(response.status(), 200);
    assert!(
        elapsed < Duration::from_secs(5),
        "health took {elapsed:?} with {} idle sockets open",
        2 * LIMIT
    );
    // Structural: the server keeps at most LIMIT of them; the rest lost their place (oldest first).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut closed = vec![false; sockets.len()];
    while closed.iter().filter(|&&c| c).count() < LIMIT + 1 && Instant::now() < deadline {
        for (socket, closed) in sockets.iter_mut().zip(closed.iter_mut()) {
            if !*closed {
                *closed = closed_within(socket, Duration::from_millis(5));
            }
        }
    }
    let count = closed.iter().filter(|&&c| c).count();
    assert!(
        count > LIMIT,
        "{count} of {} idle sockets closed; the limit is {LIMIT}",
        sockets.len()
    );
    // Which ones lost their place depends on when the server accepted each (under load, not in
    // the order they connected), so the test checks the count, not the order.
}

#[test]
fn a_connection_past_the_limit_when_every_connection_is_busy_gets_a_clear_503() {
    let server = TestServer::start(|config| {
        config.max_connections = 2;
        config.body_timeout = Duration::from_secs(600);
    });
    // Two requests in flight: their handlers are reading bodies that never come. `Expect:
    // 100-continue` makes the server say when the handler reads the body, so nothing is timed.
    let busy: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut socket = TcpStream::connect(server.address).unwrap();
            socket
                .write_all(
                    b"POST /api/v1/apps HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n",
                )
                .unwrap();
            let continued = read_until(&mut socket, "100 Continue");
            assert!(continued.contains("100 Continue"), "{continued}");
            socket
        })
        .collect();
    let mut third = TcpStream::connect(server.address).unwrap();
    third
        .write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut third);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("--max-connections"), "{answer}");
    assert!(answer.contains("try again"), "{answer}");
    drop(busy);
    // The places come back when the busy connections end.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = http().get(server.api("/health")).send().unwrap();
        if response.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", response.text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn half_sent_headers_are_cut_after_the_header_timeout_and_an_idle_socket_is_not() {
    let server = TestServer::start(|config| {
        config.header_timeout = Duration::from_millis(300);
        config.idle_timeout = Duration::from_secs(600);
    });
    let mut idle = TcpStream::connect(server.address).unwrap();
    let mut slow = TcpStream::connect(server.address).unwrap();
    let started = Instant::now();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    assert!(
        closed_within(&mut slow, Duration::from_secs(30)),
        "half-sent headers were held open"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // The idle socket (nothing sent) is under the idle timeout, not the header timeout: still
    // open, and it is answered when it asks.
    assert!(!closed_within(&mut idle, Duration::from_millis(10)));
    idle.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut idle);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let server = TestServer::start(|config| {
        config.idle_timeout = Duration::from_millis(300);
        config.header_timeout = Duration::from_secs(600);
    });
    // Never a request.
    let mut silent = TcpStream::connect(server.address).unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(30)));
    // Kept alive after an answer.
    let mut kept = TcpStream::connect(server.address).unwrap();
    kept.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let answer = read_until(&mut kept, "\"ok\":true");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed_within(&mut kept, Duration::from_secs(30)));
}

#[test]
fn a_slow_body_is_answered_408() {
    let server = TestServer::start(|config| {
        config.body_timeout = Duration::from_millis(300);
    });
    let mut socket = TcpStream::connect(server.address).unwrap();
    socket
        .write_all(b"POST /api/v1/apps HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{\"app\"")
        .unwrap();
    let answer = read_to_close(&mut socket);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--body-timeout"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
}

#[test]
fn without_an_admin_token_cross_site_writes_and_rebound_hosts_are_refused() {
    let server = TestServer::start(|_| {});
    let manifest = common::manifest(&schema(
        "app xs\nInput = [2]\nOutput = [2]\nlabels = [a, b]",
    ));
    // A page of another site posting a text/plain "simple request".
    let (status, body) = status_json(
        http()
            .post(server.api("/apps"))
            .header("Origin", "http://evil.example")
            .header("Content-Type", "text/plain")
            .body(manifest.clone())
            .send()
            .unwrap(),
    );
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--admin-token-file"),
        "{body}"
    );
    // DNS rebinding: the attacker's name resolved to this server.
    let (status, body) = status_json(
        http()
            .post(server.api("/apps"))
            .header("Host", "evil.example:9000")
            .body(manifest.clone())
            .send()
            .unwrap(),
    );
    assert_eq!(status, 403, "{body}");
    // Reading stays open; the server's own page (same Origin) may write.
    assert_eq!(
        http()
            .get(server.api("/health"))
            .header("Host", "evil.example")
            .send()
            .unwrap()
            .status(),
        200
    );
    let response = http()
        .post(server.api("/apps"))
        .header("Origin", server.url.clone())
        .body(manifest)
        .send()
        .unwrap();
    assert_eq!(response.status(), 201, "{:?}", response.text());
}

#[test]
fn feed_lines_with_a_key_twice_or_a_number_rounding_to_zero_are_bad_and_echoes_are_cut() {
    let server = TestServer::start(|_| {});
    let token = server.register(&schema(
        "app dup\nInput = [2]\nOutput = [2]\nlabels = [a, b]",
    ));
    let feed = |body: String| {
        status_json(
            with_token(http().post(server.api("/apps/dup/examples")), &token)
                .body(body)
                .send()
                .unwrap(),
        )
    };
    let (status, body) =
        feed("{\"input\": [1, 2], \"input\": [3, 4], \"output\": \"a\"}\n".to_owned());
    assert_eq!(status, 400, "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("appears twice"),
        "{body}"
    );
    for line in [
        "[1e-400, 1] a\n",
        "{\"input\": [1e-50, 1], \"output\": \"a\"}\n",
    ] {
        let (status, body) = feed(line.to_owned());
        assert_eq!(status, 400, "{line}: {body}");
        assert!(
            body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("rounds to 0"),
            "{body}"
        );
    }
    // 20 bad lines of 600 KB: each echo is cut, so the answer stays small.
    // (An unknown label, quoted by its message.)
    let bad_line = format!("[1, 2] {}\n", "x".repeat(600_000));
    let (status, body) = feed(bad_line.repeat(20));
    assert_eq!(status, 400);
    let text = body.to_string();
    // (The message spells out the bad lines too; 12 MB before the cut.)
    assert!(text.len() < 20 * 1000, "an answer of {} bytes", text.len());
    assert!(
        text.contains("bytes in all"),
        "{}",
        &text[..text.len().min(600)]
    );
    assert_eq!(body["bad"], 20);
}
