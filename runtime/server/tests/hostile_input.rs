//! Hostile request bodies against a real server on loopback, each run in a child process whose
//! address space is capped (`common/memory_cap.rs`), so that memory sized by what a request
//! *declares* instead of what it *holds* fails the test:
//! - a 6-byte feed line for an app that declares 2^31 - 1 input elements (it used to reserve 8 GiB
//!   and abort the server for every tenant), to the feed and the inference routes and to an
//!   embedded client (the same line checker);
//! - millions of bad lines: the answer lists the first `MAX_KEPT_LINE_ERRORS` and counts the rest
//!   (it used to be ~300x the request's size);
//! - registration of an app whose one example cannot fit the body limit is refused;
//! - a property test over feed and infer bodies of random lines (malformed JSON, deep nesting,
//!   huge numbers, paths, ragged arrays, records) for apps of every shape: every answer is 2xx or
//!   4xx with a bounded body, and the server keeps answering. `EASEML_FUZZ_SECONDS=600` runs it
//!   for that long instead of its fixed number of cases.

mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::io::Cursor;
use std::time::{Duration, Instant};

use common::memory_cap::run_capped;
use common::{TestServer, app, http, schema, status_json, with_token};
use easeml_client::{Client, Connection, Error, FeedOptions, MAX_KEPT_LINE_ERRORS};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;

/// The address-space cap of the children: far below what one declared-shape allocation of an
/// `Input = [2147483647]` app takes (8 GiB), far above what the server needs.
const CAP_KIB: u64 = 6_000_000;

const HUGE: &str = "app huge\nInput = [2147483647]\nOutput = [2]\nlabels = [a, b]";

/// Registers `source`'s app straight in the server's store (as `easeml apps register` would, with no
/// body limit to check): the server must survive apps registered before its limits existed.
fn register_in_store(server: &TestServer, source: &str) -> String {
    let mut store = easeml_store::Store::open(&server.home).unwrap();
    let (_, token) = app(source).register(&mut store).unwrap();
    token
}

#[test]
fn a_tiny_line_for_a_huge_declared_shape_allocates_by_the_line() {
    if !run_capped(
        "a_tiny_line_for_a_huge_declared_shape_allocates_by_the_line",
        CAP_KIB,
    ) {
        return;
    }
    let server = TestServer::start(|_| {});
    let token = register_in_store(&server, HUGE);
    let client = http();
    for route in ["/apps/huge/examples", "/apps/huge/infer"] {
        for body in [
            "[1] a\n",
            "[1]\n",
            "[1, 2, 3] b\n",
            "{\"input\": [1], \"output\": \"a\"}\n",
        ] {
            let (status, json) = status_json(
                with_token(client.post(server.api(route)), &token)
                    .body(body)
                    .send()
                    .unwrap(),
            );
            assert_eq!(status, 400, "{route} {body:?}: {json}");
            assert_eq!(json["code"], "bad_input", "{json}");
            assert!(
                json["error"].as_str().unwrap().contains("[2147483647]"),
                "the error names the declared shape: {json}"
            );
        }
    }
    let (status, _) = status_json(client.get(server.api("/health")).send().unwrap());
    assert_eq!(status, 200, "the server is still up");

    // The embedded client reads lines with the same checker.
    let dir = tempfile::tempdir().unwrap();
    let mut embedded = Client::open(
        &Connection::Embedded {
            home: dir.path().to_owned(),
        },
        app(HUGE),
    )
    .unwrap();
    let error = embedded
        .feed_lines(Cursor::new("[1] a\n"), &FeedOptions::default())
        .unwrap_err();
    assert!(matches!(error, Error::BadInput { .. }), "{error}");
}

#[test]
fn millions_of_bad_lines_get_a_bounded_answer() {
    if !run_capped("millions_of_bad_lines_get_a_bounded_answer", CAP_KIB) {
        return;
    }
    let server = TestServer::start(|_| {});
    let token = server.register(&schema("app nums\nInput = [3]\nOutput = [3]"));
    let lines = 1_000_000;
    let body = "a\n".repeat(lines);
    let client = http();
    for route in ["/apps/nums/examples", "/apps/nums/infer"] {
        let response = with_token(client.post(server.api(route)), &token)
            .body(body.clone())
            .send()
            .unwrap();
        assert_eq!(response.status(), 400);
        let text = response.text().unwrap();
        assert!(
            text.len() < 64 << 10,
            "{route}: a {} byte answer to a {} byte body",
            text.len(),
            body.len()
        );
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json["errors"].as_array().unwrap().len(),
            MAX_KEPT_LINE_ERRORS
        );
        assert_eq!(json["bad"], lines, "{}", json["error"]);
        assert_eq!(json["total"], lines);
        let message = json["error"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{lines} of {lines} line(s) are bad")),
            "{message}"
        );
        assert!(message.contains("... and 999980 more"), "{message}");
    }

    // The embedded client keeps the same bounded list, also for --skip-bad.
    let dir = tempfile::tempdir().unwrap();
    let mut embedded = Client::open(
        &Connection::Embedded {
            home: dir.path().to_owned(),
        },
        app("app nums\nInput = [3]\nOutput = [3]"),
    )
    .unwrap();
    let error = embedded
        .feed_lines(Cursor::new(body.as_bytes()), &FeedOptions::default())
        .unwrap_err();
    let Error::BadInput { errors, total, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(
        (errors.kept().len(), errors.count(), *total),
        (100, lines, lines)
    );
    let options = FeedOptions {
        skip_bad: true,
        ..FeedOptions::default()
    };
    let report = embedded
        .feed_lines(
            Cursor::new(format!("{body}[1, 2, 3] [4, 5, 6]\n")),
            &options,
        )
        .unwrap();
    assert_eq!(report.added, 1);
    assert_eq!(report.skipped.kept().len(), MAX_KEPT_LINE_ERRORS);
    assert_eq!(report.skipped.count(), lines);
}

#[test]
fn registration_refuses_an_app_whose_one_example_cannot_fit_the_body_limit() {
    let server = TestServer::start(|config| config.max_body_bytes = 1 << 20);
    let client = http();
    let register = |source: &str| {
        status_json(
            client
                .post(server.api("/apps"))
                .body(common::manifest(&schema(source)))
                .send()
                .unwrap(),
        )
    };
    let (status, json) = register("app big\nInput = [1000, 1000]\nOutput = [2]");
    assert_eq!(status, 400, "{json}");
    let message = json["error"].as_str().unwrap();
    assert!(
        message.contains("at least 2000003 bytes")
            && message.contains("(1048576 bytes)")
            && message.contains("--max-body-bytes"),
        "{message}"
    );
    let (status, json) = register("app small\nInput = [1000]\nOutput = [2]");
    assert_eq!(status, 201, "{json}");
}

/// One line of a hostile body.
fn hostile_line() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        any::<f64>().prop_map(|value| value.to_string()),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("NaN".to_owned()),
        Just("123456789012345678901234567890".to_owned()),
        (0u32..10).prop_map(|value| value.to_string()),
    ];
    let array = proptest::collection::vec(number.clone(), 0..6)
        .prop_map(|items| format!("[{}]", items.join(", ")))
        .prop_recursive(4, 64, 6, |inner| {
            proptest::collection::vec(inner, 0..5)
                .prop_map(|items| format!("[{}]", items.join(",")))
        });
    let deep = (1usize..6000, 0usize..6000)
        .prop_map(|(open, close)| format!("{}1{}", "[".repeat(open), "]".repeat(close)));
    let deep_record = (1usize..400).prop_map(|depth| {
        let mut record = "{\"word\": [1]}".to_owned();
        for _ in 0..depth {
            record = format!("{{\"word\": [1], \"left\": {record}, \"right\": null}}");
        }
        format!("{{\"input\": {record}, \"output\": \"a\"}}")
    });
    let output = prop_oneof![
        Just("a".to_owned()),
        Just("\"sea lion\"".to_owned()),
        Just("/dev/zero".to_owned()),
        Just("x.npy".to_owned()),
        "\\PC{0,12}",
        array.clone(),
    ];
    let input = prop_oneof![
        array.clone(),
        Just("/dev/zero".to_owned()),
        Just("../../etc/passwd.png".to_owned()),
        Just("x.npy".to_owned()),
        "\\PC{0,16}",
    ];
    let record = (array.clone(), output.clone(), "[a-z]{0,8}").prop_map(|(input, output, key)| {
        let output = serde_json::to_string(&output).unwrap_or_default();
        format!("{{\"input\": {input}, \"output\": {output}, \"{key}\": 1}}")
    });
    prop_oneof![
        3 => (input, output).prop_map(|(input, output)| format!("{input} {output}")),
        2 => record,
        1 => deep,
        1 => deep_record,
        1 => proptest::collection::vec(any::<u8>(), 0..64)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        1 => array,
    ]
}

/// A hostile body: a few lines, joined by `\n` or `\r\n`.
fn hostile_body() -> impl Strategy<Value = (usize, bool, String)> {
    (
        0usize..5,
        any::<bool>(),
        proptest::collection::vec(hostile_line(), 0..12).prop_map(|lines| lines.join("\n")),
    )
}

#[test]
fn random_feed_and_infer_bodies_never_crash_the_server() {
    if !run_capped(
        "random_feed_and_infer_bodies_never_crash_the_server",
        CAP_KIB,
    ) {
        return;
    }
    let server = TestServer::start(|config| config.max_body_bytes = 1 << 20);
    let apps = [
        (
            "pics",
            "app pics\nInput = [4, 4, 3]\nOutput = [2]\nlabels = [a, b]",
        ),
        ("nums", "app nums\nInput = [3]\nOutput = [3]"),
        (
            "chain",
            "app chain\ntype Input\n  reading :: Tensor[2]\n  next :: Nullable{Input}\nend\nOutput = [2]",
        ),
        (
            "tree",
            "app tree\ntype Input\n  word :: Tensor[1]\n  left :: Nullable{Input}\n  right :: Nullable{Input}\nend\nOutput = [2]\nlabels = [a, b]",
        ),
        ("huge", HUGE),
    ];
    let tokens: Vec<(&str, String)> = apps
        .iter()
        .map(|(name, source)| (*name, register_in_store(&server, source)))
        .collect();
    let client = http();
    let seconds: u64 = std::env::var("EASEML_FUZZ_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let cases = std::cell::Cell::new(0usize);
    let mut round = 0u64;
    loop {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&round.to_le_bytes());
        let mut runner = TestRunner::new_with_rng(
            ProptestConfig {
                cases: 96,
                failure_persistence: None,
                ..ProptestConfig::default()
            },
            TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
        );
        runner
            .run(&hostile_body(), |(app, infer, body)| {
                cases.set(cases.get() + 1);
                let (name, token) = &tokens[app];
                let route = if infer { "infer" } else { "examples" };
                let response = with_token(
                    client.post(server.api(&format!("/apps/{name}/{route}"))),
                    token,
                )
                .body(body.clone())
                .send()
                .map_err(|error| TestCaseError::fail(format!("no answer: {error}")))?;
                let status = response.status().as_u16();
                let text = response.text().unwrap_or_default();
                prop_assert!(
                    (200..500).contains(&status),
                    "{name}/{route}: {status} {text} for {body:?}"
                );
                prop_assert!(
                    text.len() <= 64 * 1024 + 4 * body.len(),
                    "{name}/{route}: a {} byte answer to a {} byte body",
                    text.len(),
                    body.len()
                );
                Ok(())
            })
            .unwrap();
        round += 1;
        if started.elapsed() >= Duration::from_secs(seconds) {
            break;
        }
    }
    let (status, _) = status_json(client.get(server.api("/health")).send().unwrap());
    let cases = cases.get();
    assert_eq!(status, 200, "the server is still up after {cases} bodies");
    eprintln!(
        "{cases} hostile bodies in {:.0} s, no crash",
        started.elapsed().as_secs_f64()
    );
}
