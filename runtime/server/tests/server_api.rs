//! The HTTP API of `easeml_client::server` on a real loopback socket: the routes, tenant
//! isolation, bad input (each a clear 4xx that stores nothing), and a load of 50 concurrent feeders
//! with concurrent readers where every example must be stored exactly once.

mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::collections::HashMap;

use common::{TestServer, app, http, manifest, schema, status_json, with_token};
use easeml_client::{Client, Connection, PageRequest};
use serde_json::{Value, json};

const PICS: &str = "app pics\nInput = [4, 4, 3]\nOutput = [2]\nlabels = [cat, dog]";

/// Example `i` of the pictures app: a 4x4 RGB image as nested JSON, values depending on `i`.
fn image(i: usize) -> Value {
    let rows: Vec<Value> = (0..4)
        .map(|r| {
            let pixels: Vec<Value> = (0..4)
                .map(|c| {
                    let v = ((i * 31 + r * 4 + c) % 17) as f32 / 16.0;
                    json!([v, 1.0 - v, 0.5])
                })
                .collect();
            Value::Array(pixels)
        })
        .collect();
    Value::Array(rows)
}

fn image_lines(range: std::ops::Range<usize>) -> String {
    range
        .map(|i| {
            format!(
                "{} {}\n",
                image(i),
                if i.is_multiple_of(2) { "cat" } else { "dog" }
            )
        })
        .collect()
}

#[test]
fn register_feed_list_read_toggle_and_status() {
    let server = TestServer::start(|_| {});
    let client = http();
    let pics = schema(PICS);
    let token = server.register(&pics);

    let (status, body) = status_json(client.get(server.api("/health")).send().unwrap());
    assert_eq!(
        (status, body),
        (
            200,
            json!({"ok": true, "max_body_bytes": easeml_server::DEFAULT_MAX_BODY_BYTES})
        )
    );

    // A second registration of the name is a conflict, and the first token keeps working.
    let (status, body) = status_json(
        client
            .post(server.api("/apps"))
            .body(manifest(&pics))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("already registered")
    );

    let feed = with_token(client.post(server.api("/apps/pics/examples")), &token)
        .body(image_lines(0..3))
        .send()
        .unwrap();
    let (status, report) = status_json(feed);
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["added"], 3);
    assert_eq!(report["data_version"], 1);
    let ids: Vec<i64> = report["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);

    // Paging.
    let get = |path: &str| {
        status_json(
            with_token(client.get(server.api(path)), &token)
                .send()
                .unwrap(),
        )
    };
    let (status, page) = get("/apps/pics/examples?limit=2");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["next_after"], ids[1]);
    assert_eq!(page["thumbnails"], true);
    assert_eq!(page["labels"], json!(["cat", "dog"]));
    assert_eq!(page["items"][0]["label"], "cat");
    let (_, page) = get(&format!("/apps/pics/examples?after={}", ids[1]));
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["next_after"], Value::Null);
    let (_, page) = get("/apps/pics/examples?label=dog");
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["id"], ids[1]);

    // One example, decoded: the input reads back as fed.
    let (status, example) = get(&format!("/apps/pics/examples/{}", ids[2]));
    assert_eq!(status, 200, "{example}");
    assert_eq!(example["input"], image(2));
    assert_eq!(example["output"], "cat");
    assert_eq!(example["enabled"], true);

    // Its thumbnail is a 4x4 PNG of those pixels.
    let response = with_token(
        client.get(server.api(&format!("/apps/pics/examples/{}/thumbnail.png", ids[2]))),
        &token,
    )
    .send()
    .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    let png = image::load_from_memory(&response.bytes().unwrap())
        .unwrap()
        .to_rgb8();
    assert_eq!(png.dimensions(), (4, 4));
    let first = image(2)[0][0].clone();
    let expected_red = (first[0].as_f64().unwrap() * 255.0).round() as u8;
    assert_eq!(
        png.get_pixel(0, 0).0,
        [expected_red, 255 - expected_red, 128]
    );

    // Toggle: off, off again (no change), the filter sees it, the status counts it.
    let patch = |id: i64, body: Value| {
        status_json(
            with_token(
                client.patch(server.api(&format!("/apps/pics/examples/{id}"))),
                &token,
            )
            .json(&body)
            .send()
            .unwrap(),
        )
    };
    let (status, toggled) = patch(ids[0], json!({"enabled": false}));
    assert_eq!(status, 200, "{toggled}");
    assert_eq!(
        toggled,
        json!({"id": ids[0], "enabled": false, "data_version": 2})
    );
    let (_, toggled) = patch(ids[0], json!({"enabled": false}));
    assert_eq!(toggled["data_version"], 2);
    let (_, page) = get("/apps/pics/examples?enabled=false");
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["id"], ids[0]);
    assert_eq!(page["items"][0]["enabled"], false);
    let (_, page) = get("/apps/pics/examples?enabled=true");
    assert_eq!(page["total"], 2);

    let (status, report) = get("/apps/pics/status");
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["app"], "pics");
    assert_eq!(report["examples"], 3);
    assert_eq!(report["enabled_examples"], 2);
    assert_eq!(report["data_version"], 2);
    assert_eq!(report["runs"], json!([]));
    assert_eq!(report["best"], Value::Null);
    let (status, runs) = get("/apps/pics/runs");
    assert_eq!((status, runs["runs"].clone()), (200, json!([])));

    // No model is trained yet: inference says so.
    let (status, body) = status_json(
        with_token(client.post(server.api("/apps/pics/infer")), &token)
            .body(image_lines(5..6))
            .send()
            .unwrap(),
    );
    // This process has the engine (installed by the server's start below); without it the
    // answer is 501 (the error module's test).
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no model"),
        "{body}"
    );
    // Routes that are not there.
    let (status, body) = status_json(client.get(server.api("/nothing")).send().unwrap());
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("no route"));
    let (status, body) = status_json(
        client
            .delete(server.api("/apps/pics/status"))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 405);
    assert!(body["error"].is_string());

    // The refine page is served with a strict content security policy and the app's name.
    let page = client
        .get(format!("{}/apps/pics/refine", server.url))
        .send()
        .unwrap();
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let html = page.text().unwrap();
    assert!(html.contains(r#"const SESSION = {"app":"pics","token":null}"#));
}

#[test]
fn registration_needs_the_admin_token_when_one_is_configured() {
    let admin = "an-admin-token-that-is-long-enough";
    let server = TestServer::start(|config| config.admin_token = Some(admin.to_owned()));
    let client = http();
    let body = manifest(&schema(PICS));
    let register = |token: Option<&str>| {
        let request = client.post(server.api("/apps")).body(body.clone());
        let request = match token {
            Some(token) => with_token(request, token),
            None => request,
        };
        status_json(request.send().unwrap())
    };
    let (status, refused) = register(None);
    assert_eq!(status, 401, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("admin token"));
    assert_eq!(register(Some("not-the-admin-token")).0, 403);
    let (status, registered) = register(Some(admin));
    assert_eq!(status, 201, "{registered}");
    // An app's token is not the admin's.
    assert_eq!(register(registered["token"].as_str()).0, 403);
    // The admin token opens the app's routes (the operator page links every app's dashboard),
    // not an app that does not exist; a wrong token still opens nothing.
    let status_with = |app: &str, token: &str| {
        status_json(
            with_token(
                client.get(server.api(&format!("/apps/{app}/status"))),
                token,
            )
            .send()
            .unwrap(),
        )
    };
    let (status, report) = status_with("pics", admin);
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["app"], "pics", "{report}");
    assert_eq!(status_with("no_such_app", admin).0, 403);
    assert_eq!(status_with("pics", "not-the-admin-token").0, 403);
}

#[test]
fn one_apps_token_opens_nothing_of_another_app() {
    let server = TestServer::start(|_| {});
    let client = http();
    let token_a = server.register(&schema(PICS));
    let token_b = server.register(&schema(
        "app secret_b\nInput = [4, 4, 3]\nOutput = [2]\nlabels = [b_secret_one, b_secret_two]",
    ));
    let feed = |app: &str, token: &str, lines: String| {
        let (status, report) = status_json(
            with_token(
                client.post(server.api(&format!("/apps/{app}/examples"))),
                token,
            )
            .body(lines)
            .send()
            .unwrap(),
        );
        assert_eq!(status, 200, "{report}");
        report["ids"][0].as_i64().unwrap()
    };
    let id_a = feed("pics", &token_a, image_lines(0..2));
    let b_lines: String = (10..12)
        .map(|i| format!("{} b_secret_one\n", image(i)))
        .collect();
    let id_b = feed("secret_b", &token_b, b_lines);
    let b_before = status_json(
        with_token(client.get(server.api("/apps/secret_b/status")), &token_b)
            .send()
            .unwrap(),
    );

    // Every route of B with A's token, with a made-up token and with no token.
    let routes: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", "/apps/secret_b/status".to_owned(), None),
        ("GET", "/apps/secret_b/runs".to_owned(), None),
        ("GET", "/apps/secret_b/examples".to_owned(), None),
        ("GET", format!("/apps/secret_b/examples/{id_b}"), None),
        (
            "GET",
            format!("/apps/secret_b/examples/{id_b}/thumbnail.png"),
            None,
        ),
        (
            "PATCH",
            format!("/apps/secret_b/examples/{id_b}"),
            Some(json!({"enabled": false})),
        ),
        ("POST", "/apps/secret_b/examples".to_owned(), None),
        ("POST", "/apps/secret_b/infer".to_owned(), None),
        // An app that does not exist answers like one that is not yours.
        ("GET", "/apps/no_such_app/status".to_owned(), None),
    ];
    for (method, path, body) in &routes {
        for (token, expected) in [
            (Some(token_a.as_str()), 403),
            (Some("0123abcd"), 403),
            (None, 401),
        ] {
            let mut request = client.request(method.parse().unwrap(), server.api(path));
            if let Some(token) = token {
                request = with_token(request, token);
            }
            request = match (body, *method) {
                (Some(body), _) => request.json(body),
                (None, "POST") => request.body(image_lines(20..21)),
                (None, _) => request,
            };
            let response = request.send().unwrap();
            let status = response.status().as_u16();
            let text = response.text().unwrap();
            assert_eq!(status, expected, "{method} {path} with {token:?}: {text}");
            assert!(!text.contains("b_secret"), "{method} {path}: {text}");
            let error: Value = serde_json::from_str(&text).unwrap();
            assert!(error["error"].is_string(), "{text}");
        }
    }
    // Malformed Authorization headers are 401 too.
    for header in ["Basic abc", "Bearer", "Bearer ", token_a.as_str()] {
        let response = client
            .get(server.api("/apps/secret_b/status"))
            .header("Authorization", header)
            .send()
            .unwrap();
        assert_eq!(response.status(), 401, "{header}");
    }

    // B's example is not reachable through A's routes either, and A's listing holds only A's.
    for path in [
        format!("/apps/pics/examples/{id_b}"),
        format!("/apps/pics/examples/{id_b}/thumbnail.png"),
    ] {
        let response = with_token(client.get(server.api(&path)), &token_a)
            .send()
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert!(!response.text().unwrap().contains("b_secret"));
    }
    let (status, patched) = status_json(
        with_token(
            client.patch(server.api(&format!("/apps/pics/examples/{id_b}"))),
            &token_a,
        )
        .json(&json!({"enabled": false}))
        .send()
        .unwrap(),
    );
    assert_eq!(status, 404, "{patched}");
    let (_, listing) = status_json(
        with_token(client.get(server.api("/apps/pics/examples")), &token_a)
            .send()
            .unwrap(),
    );
    let listed: Vec<i64> = listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, vec![id_a, id_a + 1]);
    assert!(!listing.to_string().contains("b_secret"));

    // Nothing of B changed.
    let b_after = status_json(
        with_token(client.get(server.api("/apps/secret_b/status")), &token_b)
            .send()
            .unwrap(),
    );
    assert_eq!(b_before, b_after);
    assert_eq!(b_after.1["examples"], 2);
    assert_eq!(b_after.1["enabled_examples"], 2);
}

#[test]
fn bad_input_gets_a_clear_4xx_and_stores_nothing() {
    let server = TestServer::start(|config| config.max_body_bytes = 64 << 10);
    let client = http();
    let token = server.register(&schema("app nums\nInput = [3]\nOutput = [3]"));
    let feed = |body: Vec<u8>| {
        status_json(
            with_token(client.post(server.api("/apps/nums/examples")), &token)
                .body(body)
                .send()
                .unwrap(),
        )
    };
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "malformed JSON",
            b"[1, 2, 3 a\n".to_vec(),
            400,
            "malformed JSON",
        ),
        (
            "a malformed record",
            b"{\"input\": [1, 2, 3], \"output\": \n".to_vec(),
            400,
            "malformed JSON",
        ),
        ("a wrong shape", b"[1, 2] a\n".to_vec(), 400, "[3]"),
        (
            "a wrong nesting",
            b"[[1], [2], [3]] a\n".to_vec(),
            400,
            "input",
        ),
        ("NaN", b"[NaN, 1, 2] a\n".to_vec(), 400, "malformed JSON"),
        (
            "a null (NaN from JSON.stringify)",
            b"{\"input\": [null, 1, 2], \"output\": \"a\"}\n".to_vec(),
            400,
            "NaN",
        ),
        (
            "infinity in f32",
            b"[1e39, 1, 2] a\n".to_vec(),
            400,
            "32-bit float",
        ),
        (
            "an overflowing literal",
            b"[1e400, 1, 2] a\n".to_vec(),
            400,
            "line 1",
        ),
        (
            "more labels than D",
            b"[1, 2, 3] a\n[1, 2, 3] b\n[1, 2, 3] c\n[1, 2, 3] d\n".to_vec(),
            400,
            "at most 3",
        ),
        ("an image path", b"photo.png a\n".to_vec(), 400, "file path"),
        ("a .npy path", b"/etc/x.npy a\n".to_vec(), 400, "file path"),
        (
            "a path in a record",
            b"{\"input\": \"/etc/passwd.png\", \"output\": \"a\"}\n".to_vec(),
            400,
            "file path",
        ),
        (
            "an output path",
            b"[1, 2, 3] /tmp/out.npy\n".to_vec(),
            400,
            "file path",
        ),
        (
            "a good line and a bad one",
            b"[1, 2, 3] a\n[1, 2] b\n".to_vec(),
            400,
            "line 2",
        ),
        ("not UTF-8", b"[1, 2, 3] \xff\xfe\n".to_vec(), 400, "UTF-8"),
        (
            "an unknown key",
            b"{\"input\": [1, 2, 3], \"output\": \"a\", \"x\": 1}\n".to_vec(),
            400,
            "unexpected key",
        ),
        (
            "an oversized body",
            format!("{}\n", "[1, 2, 3] a\n".repeat(30_000)).into_bytes(),
            413,
            "larger than",
        ),
    ];
    for (what, body, expected, needle) in cases {
        let (status, error) = feed(body);
        assert_eq!(status, expected, "{what}: {error}");
        let message = error["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {error}"));
        assert!(message.contains(needle), "{what}: {message}");
        if expected == 400 {
            assert!(
                error["errors"]
                    .as_array()
                    .is_some_and(|errors| !errors.is_empty()),
                "{what}: {error}"
            );
        }
    }

    // Other routes.
    let send = |request: reqwest::blocking::RequestBuilder| {
        status_json(with_token(request, &token).send().unwrap())
    };
    let bad_requests = [
        (
            "PATCH text",
            client
                .patch(server.api("/apps/nums/examples/1"))
                .body("off"),
            400,
        ),
        (
            "PATCH wrong type",
            client
                .patch(server.api("/apps/nums/examples/1"))
                .body(r#"{"enabled": "no"}"#),
            400,
        ),
        (
            "PATCH unknown key",
            client
                .patch(server.api("/apps/nums/examples/1"))
                .body(r#"{"enabled": true, "x": 1}"#),
            400,
        ),
        (
            "an id that is not a number",
            client.get(server.api("/apps/nums/examples/abc")),
            400,
        ),
        (
            "an unknown example",
            client.get(server.api("/apps/nums/examples/123456")),
            404,
        ),
        (
            "a bad limit",
            client.get(server.api("/apps/nums/examples?limit=many")),
            400,
        ),
        (
            "an unknown query key",
            client.get(server.api("/apps/nums/examples?sort=id")),
            400,
        ),
        (
            "a thumbnail of a non-image",
            client.get(server.api("/apps/nums/examples/1/thumbnail.png")),
            404,
        ),
    ];
    for (what, request, expected) in bad_requests {
        let (status, error) = send(request);
        assert_eq!(status, expected, "{what}: {error}");
        assert!(error["error"].is_string(), "{what}: {error}");
    }
    let with_train_time = |seconds: &str| {
        let text = manifest(&schema(&format!("{PICS}\nconstraint train_time <= 5s\n")));
        let changed = text
            .replace("\"seconds\":5.0", &format!("\"seconds\":{seconds}"))
            .replace("\"seconds\": 5.0", &format!("\"seconds\": {seconds}"));
        assert_ne!(changed, text, "the limit is in the manifest: {text}");
        changed
    };
    let manifests = [
        ("malformed JSON", "{\"schema\": ".to_owned()),
        ("no schema", "{\"app\": \"x\"}".to_owned()),
        (
            "a bad name",
            manifest(&schema(PICS)).replace("\"pics\"", "\"../etc\""),
        ),
        (
            "a huge tensor",
            manifest(&schema(PICS)).replace("[4,4,3]", "[4000000000,4000000000,3]"),
        ),
        (
            "a zero dimension",
            manifest(&schema(PICS)).replace("[4,4,3]", "[0,4,3]"),
        ),
        (
            "a wrong system type",
            manifest(&schema(PICS)).replace("Tensor[4,4,3]", "Tensor[5,4,3]"),
        ),
        // easemlc refuses these with E012; the server holds a manifest to the same rule.
        ("a negative time limit", with_train_time("-5.0")),
        ("a zero time limit", with_train_time("0.0")),
    ];
    for (what, body) in manifests {
        let (status, error) =
            status_json(client.post(server.api("/apps")).body(body).send().unwrap());
        assert_eq!(status, 400, "{what}: {error}");
        assert!(
            error["error"].as_str().unwrap().contains("manifest"),
            "{what}: {error}"
        );
    }

    // Nothing was stored, the data version never moved, and a good feed still works.
    let (_, report) = send(client.get(server.api("/apps/nums/status")));
    assert_eq!(
        (report["examples"].clone(), report["data_version"].clone()),
        (json!(0), json!(0))
    );
    let (status, report) = feed(b"[1, 2, 3] a\n[4, 5, 6] b\n[7, 8, 9] c\n".to_vec());
    assert_eq!(
        (status, report["added"].clone()),
        (200, json!(3)),
        "{report}"
    );
    let (status, error) = feed(b"[1, 2, 3] d\n".to_vec());
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("label `d`"),
        "{error}"
    );
    let (_, report) = send(client.get(server.api("/apps/nums/status")));
    assert_eq!(
        (report["examples"].clone(), report["data_version"].clone()),
        (json!(3), json!(1))
    );
    let mut apps = 0;
    let store = easeml_client::store::Store::open(&server.home).unwrap();
    for app in store.apps().unwrap() {
        apps += 1;
        assert_eq!(app.name, "nums");
    }
    assert_eq!(apps, 1);
}

/// 50 feeders send 200 examples each (10 requests of 20) while 4 readers list, read and report;
/// afterwards every example is in the store exactly once. Bounded: 10,000 small examples, and every
/// request has a timeout.
#[test]
fn fifty_concurrent_feeders_store_every_example_exactly_once() {
    const FEEDERS: usize = 50;
    const PER_FEEDER: usize = 200;
    const BATCH: usize = 20;
    let mut server = TestServer::start(|_| {});
    let source = "app load\nInput = [3]\nOutput = [1]";
    let token = server.register(&schema(source));
    let done = std::sync::atomic::AtomicBool::new(false);
    let reads = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let feeders: Vec<_> = (0..FEEDERS)
            .map(|feeder| {
                let (server, token) = (&server, &token);
                scope.spawn(move || {
                    let client = http();
                    for batch in 0..PER_FEEDER / BATCH {
                        let lines: String = (0..BATCH)
                            .map(|k| {
                                let index = batch * BATCH + k;
                                format!("[{feeder}, {index}, 0.5] {}\n", feeder * 1000 + index)
                            })
                            .collect();
                        let (status, report) = status_json(
                            with_token(client.post(server.api("/apps/load/examples")), token)
                                .body(lines)
                                .send()
                                .unwrap(),
                        );
                        assert_eq!(status, 200, "feeder {feeder}: {report}");
                        assert_eq!(report["added"], BATCH);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..4)
            .map(|reader| {
                let (server, token, done, reads) = (&server, &token, &done, &reads);
                scope.spawn(move || {
                    let client = http();
                    while !done.load(std::sync::atomic::Ordering::SeqCst) {
                        let path = match reader % 3 {
                            0 => "/apps/load/status".to_owned(),
                            1 => "/apps/load/examples?limit=100".to_owned(),
                            _ => "/apps/load/examples?enabled=true&limit=5".to_owned(),
                        };
                        let (status, body) = status_json(
                            with_token(client.get(server.api(&path)), token)
                                .send()
                                .unwrap(),
                        );
                        assert_eq!(status, 200, "{path}: {body}");
                        if let Some(id) = body["items"][0]["id"].as_i64() {
                            let (status, example) = status_json(
                                with_token(
                                    client.get(server.api(&format!("/apps/load/examples/{id}"))),
                                    token,
                                )
                                .send()
                                .unwrap(),
                            );
                            assert_eq!(status, 200, "{example}");
                            assert_eq!(example["input"].as_array().unwrap().len(), 3);
                        }
                        reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let mut panicked = false;
        for feeder in feeders {
            panicked |= feeder.join().is_err();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        for reader in readers {
            panicked |= reader.join().is_err();
        }
        assert!(!panicked, "a feeder or reader failed");
    });
    assert!(reads.load(std::sync::atomic::Ordering::SeqCst) > 0);
    server.stop();

    // Exactly once: 10,000 examples, each (feeder, index) once, its output matching its input.
    let client = Client::open(&Connection::embedded(&server.home), app(source)).unwrap();
    let mut seen: HashMap<(u32, u32), usize> = HashMap::new();
    let mut request = PageRequest {
        after: None,
        limit: 1000,
    };
    loop {
        let page = client.examples(request).unwrap();
        for record in &page.items {
            let example = client.example(record.id).unwrap();
            let input = &example.input.tensors[0];
            let (feeder, index) = (input[0] as u32, input[1] as u32);
            let easeml_client::CheckedOutput::Object(output) = &example.output else {
                panic!("a label output");
            };
            assert_eq!(output.tensors[0][0], (feeder * 1000 + index) as f32);
            *seen.entry((feeder, index)).or_default() += 1;
        }
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    assert_eq!(seen.len(), FEEDERS * PER_FEEDER);
    assert!(seen.values().all(|count| *count == 1));
    assert_eq!(
        client.status().unwrap().examples,
        (FEEDERS * PER_FEEDER) as u64
    );
    assert_eq!(client.store().unwrap().integrity_check().unwrap(), Ok(()));
}

/// Inference over HTTP once the engine has trained a model: answers in the app's terms with their
/// lines, a score when every line has its expected output, and the feed's checks on its input.
#[test]
fn infer_answers_with_the_best_model_once_one_is_trained() {
    use easeml_engine::{Engine, EngineConfig, Step};
    let server = TestServer::start(|_| {});
    let client = http();
    let token = server.register(&schema(
        "app tab\nInput = [3]\nOutput = [2]\nlabels = [low, high]",
    ));
    let line = |i: usize| {
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
    };
    let infer = |body: String| {
        status_json(
            with_token(client.post(server.api("/apps/tab/infer")), &token)
                .body(body)
                .send()
                .unwrap(),
        )
    };
    let (status, report) = status_json(
        with_token(client.post(server.api("/apps/tab/examples")), &token)
            .body((0..40).map(line).collect::<String>())
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{report}");
    assert_eq!(infer(line(100)).0, 409);

    let mut config = EngineConfig::for_device(tch::Device::Cpu);
    config.max_run_seconds = 4.0;
    config.max_epochs = 2;
    config.min_steps = 0; // the epochs as set: a quick test, not a good model
    let mut engine = Engine::open(&server.home, config).unwrap();
    let mut trained = false;
    for _ in 0..4 {
        match engine.step(None, &mut |_| {}).unwrap() {
            Some(Step::Run(run)) if run.quality.is_some() => {
                trained = true;
                break;
            }
            Some(_) => continue,
            None => break,
        }
    }
    assert!(trained, "no run finished");
    drop(engine);

    let queries: String = (100..104).map(line).collect();
    let (status, report) = infer(format!("# a comment\n{queries}"));
    assert_eq!(status, 200, "{report}");
    let answers = report["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 4);
    for (index, answer) in answers.iter().enumerate() {
        assert_eq!(answer["line"], index + 2, "{answer}");
        assert!(
            matches!(answer["output"].as_str(), Some("low" | "high")),
            "{answer}"
        );
        assert!(answer["confidence"].as_f64().is_some(), "{answer}");
    }
    assert_eq!(report["score"]["total"], 4, "{report}");
    assert!(report["run"].as_i64().is_some() && report["candidate"].is_string());
    let report_run = report["run"].clone();
    // The run also by its number within the app, as the status report shows it.
    assert!(
        report["run_number"]
            .as_u64()
            .is_some_and(|number| number >= 1),
        "{report}"
    );
    // A request of several chunks (lines are checked 1024 at a time and answered 256 at a time,
    // taking turns with other apps): every line answered in order, the same answers as one at a
    // time, one run, the whole request scored; a bad line in a late chunk fails it all.
    let many: String = (0..2500).map(|i| line(100 + i % 4)).collect();
    let (status, big) = infer(format!("# a comment\n{many}"));
    assert_eq!(status, 200);
    let big_answers = big["answers"].as_array().unwrap();
    assert_eq!(big_answers.len(), 2500);
    for (index, answer) in big_answers.iter().enumerate() {
        assert_eq!(answer["line"], index + 2);
        assert_eq!(answer["output"], answers[index % 4]["output"], "{answer}");
    }
    assert_eq!(big["run"], report["run"]);
    assert_eq!(big["score"]["total"], 2500, "{}", big["score"]);
    let (status, error) = infer(format!("{many}[0.8, 0.8]\n"));
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["bad"], 1, "{error}");
    assert_eq!(error["errors"][0]["line"], 2501, "{error}");
    // Inputs alone: answered, not scored.
    let (status, report) = infer("[0.8, 0.8, 0.8]\n{\"input\": [0.1, 0.1, 0.1]}\n".to_owned());
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["answers"].as_array().unwrap().len(), 2);
    assert_eq!(report["score"], Value::Null);
    // 64 clients at once, three lines each: none refused, each request answered on its own
    // terms (its lines numbered from 1, the answers one request at a time gives, its own score),
    // though the server answers small requests of one app together.
    let url = server.api("/apps/tab/infer");
    let senders: Vec<_> = (0..64)
        .map(|t| {
            let body: String = (0..3).map(|k| line(100 + (t + k) % 4)).collect();
            let (client, url, token) = (client.clone(), url.clone(), token.clone());
            std::thread::spawn(move || {
                status_json(
                    with_token(client.post(url), &token)
                        .body(body)
                        .send()
                        .unwrap(),
                )
            })
        })
        .collect();
    for (t, sender) in senders.into_iter().enumerate() {
        let (status, together) = sender.join().unwrap();
        assert_eq!(status, 200, "client {t}: {together}");
        let mine = together["answers"].as_array().unwrap();
        assert_eq!(mine.len(), 3, "client {t}: {together}");
        for (k, answer) in mine.iter().enumerate() {
            assert_eq!(answer["line"], k + 1, "client {t}: {together}");
            assert_eq!(
                answer["output"],
                answers[(t + k) % 4]["output"],
                "client {t}: {together}"
            );
        }
        assert_eq!(together["score"]["total"], 3, "client {t}: {together}");
        assert_eq!(together["run"], report_run, "client {t}");
    }
    // Bad lines and paths are refused like in a feed.
    let (status, error) = infer("[0.8, 0.8]\n".to_owned());
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("line 1"),
        "{error}"
    );
    let (status, error) = infer("/etc/x.npy\n".to_owned());
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("file path"),
        "{error}"
    );
    // Another app's token gets nothing.
    let other = server.register(&schema("app other\nInput = [3]\nOutput = [1]"));
    let (status, _) = status_json(
        with_token(client.post(server.api("/apps/tab/infer")), &other)
            .body(line(1))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 403);
}

/// A server thread that cannot listen says so (the address and why) instead of hanging or
/// panicking, and a stopped one frees its port.
#[test]
fn a_server_thread_on_a_taken_port_is_a_clear_error() {
    use easeml_server::{Config, ServerThread};
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path().join("home"));
    config.listen = "127.0.0.1:0".parse().unwrap();
    let mut first = ServerThread::spawn(config.clone()).unwrap();
    config.listen = first.address();
    let error = ServerThread::spawn(config.clone()).unwrap_err().to_string();
    assert!(
        error.contains(&format!("cannot listen on {}", first.address())),
        "{error}"
    );
    first.stop().unwrap();
    first.stop().unwrap();
    let again = ServerThread::spawn(config).unwrap();
    assert_eq!(again.address(), first.address());
}

#[test]
fn the_web_console_without_a_compiler_says_so_and_the_overview_is_the_operators() {
    let admin = "an-admin-token-that-is-long-enough";
    let server = TestServer::start(|config| config.admin_token = Some(admin.to_owned()));
    let client = http();

    // No compiler given (only `easeml serve` links one): 501 with what to do, and the page knows.
    for route in ["/compile?file=a.eml", "/compile/download"] {
        let (status, body) = status_json(
            with_token(client.post(server.api(route)), admin)
                .body("Input = [4]\nOutput = [2]")
                .send()
                .unwrap(),
        );
        assert_eq!(status, 501, "{route}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("compiling is not available"),
            "{body}"
        );
    }
    let page = client.get(&server.url).send().unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'nonce-")
    );
    let page = page.text().unwrap();
    assert!(page.contains("\"compiler\":false"), "{page}");
    assert!(page.contains("Compiling is not available on this server"));
    // The dashboard page names its app in its session, escaped.
    let page = client
        .get(format!("{}/apps/pics/dashboard", server.url))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(page.contains("\"app\":\"pics\""), "{page}");

    // The overview: the admin token, never an app's.
    let token = with_token(client.post(server.api("/apps")), admin)
        .body(manifest(&schema(PICS)))
        .send()
        .unwrap()
        .json::<Value>()
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let overview = |token: Option<&str>| {
        let request = client.get(server.api("/admin/overview"));
        let request = match token {
            Some(token) => with_token(request, token),
            None => request,
        };
        status_json(request.send().unwrap())
    };
    assert_eq!(overview(None).0, 401);
    assert_eq!(overview(Some(&token)).0, 403);
    assert_eq!(overview(Some("not-the-admin-token")).0, 403);
    let (status, body) = overview(Some(admin));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apps"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["apps"][0]["status"]["app"], "pics");
    assert_eq!(body["units"], json!([]));
    assert_eq!(body["workers"], json!([]));
    // A MOP run queues three epochs of two partitions: the queue shows the current epoch's two
    // sub-epochs, and the app's status how far the run is.
    {
        let mut store = easeml_store::Store::open(&server.home).unwrap();
        let pics = store.app_by_name("pics").unwrap().unwrap();
        let initial = store.put_blob(b"initial state").unwrap();
        let units: Vec<easeml_store::NewSubEpoch<'_>> = (0..3)
            .flat_map(|epoch| {
                (0..2).map(move |partition| easeml_store::NewSubEpoch {
                    epoch,
                    partition,
                    target_worker: None,
                    rank: 0,
                    spec: "{}",
                    gang: None,
                })
            })
            .collect();
        store
            .queue_sub_epoch_run(pics.id, "mlp_small", &initial, &units)
            .unwrap();
    }
    let (status, body) = overview(Some(admin));
    assert_eq!(status, 200, "{body}");
    let units = body["units"].as_array().unwrap();
    assert_eq!(units.len(), 2, "{body}");
    assert!(units.iter().all(|unit| unit["epoch"] == 0), "{body}");
    assert_eq!(
        units
            .iter()
            .map(|unit| unit["partition"].clone())
            .collect::<Vec<_>>(),
        [json!(0), json!(1)]
    );
    assert_eq!(
        body["apps"][0]["status"]["runs"][0]["hops"],
        json!({"committed": 0, "total": 6}),
        "{body}"
    );

    // A server without an admin token has no operator.
    let open = TestServer::start(|_| {});
    let (status, body) = status_json(client.get(open.api("/admin/overview")).send().unwrap());
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--admin-token-file")
    );
}

#[test]
fn the_refine_servers_have_no_console() {
    let server = TestServer::start(|_| {});
    server.register(&schema(PICS));
    let refine = TestServer::start_over(server.home.clone(), |config| {
        config.refine_only = Some(easeml_server::RefineOnly::new("pics").unwrap());
    });
    let client = http();
    let response = client
        .get(format!("{}/apps/pics/dashboard", refine.url))
        .send()
        .unwrap();
    assert_eq!(response.status(), 404);
    let (status, _) = status_json(client.get(refine.api("/admin/overview")).send().unwrap());
    assert_eq!(status, 403);
    let (status, _) = status_json(
        client
            .post(refine.api("/compile"))
            .body("Input = [4]\nOutput = [2]")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 501);
}

/// The dashboard's upload (issue 45): a table sent as the feed's body with `?format=csv` and its
/// label column is read by the client's table reader (the rules of `feed FILE.csv`), with every
/// error path; and the listing's bounded `preview` of each input, for the refine page.
#[test]
fn a_table_feeds_through_the_api_and_listings_preview_inputs() {
    let server = TestServer::start(|_| {});
    let client = http();
    let token = server.register(&schema(
        "app iris\nInput = [12]\nOutput = [3]\nlabels = [setosa, versicolor, virginica]",
    ));
    let feed = |query: &str, body: &str| {
        status_json(
            with_token(
                client.post(server.api(&format!("/apps/iris/examples{query}"))),
                &token,
            )
            .body(body.to_owned())
            .send()
            .unwrap(),
        )
    };
    let header: Vec<String> = (0..12).map(|k| format!("f{k}")).collect();
    let row = |offset: usize, label: &str| {
        let values: Vec<String> = (0..12).map(|k| (offset * 100 + k).to_string()).collect();
        format!("{},{label}\n", values.join(","))
    };
    let table = format!(
        "{},species\n{}{}",
        header.join(","),
        row(1, "setosa"),
        row(2, "virginica")
    );
    let (status, body) = feed("?format=csv&label_column=species", &table);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["added"], 2, "{body}");
    // Tab-separated, the label column first.
    let tsv = format!("species\t{}\nsetosa\t{}\n", header.join("\t"), {
        let values: Vec<String> = (0..12).map(|k| k.to_string()).collect();
        values.join("\t")
    });
    let (status, body) = feed("?format=tsv&label_column=species", &tsv);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["added"], 1, "{body}");

    // Error paths: nothing is stored.
    let (status, body) = feed("?format=csv&label_column=kind", &table);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("the table: the label column `kind` is not in the header"),
        "{body}"
    );
    let missing = format!(
        "{},species\n{}{}",
        header.join(","),
        row(3, "setosa"),
        row(4, "setosa").replacen("403,", ",", 1)
    );
    let (status, body) = feed("?format=csv&label_column=species", &missing);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "bad_input", "{body}");
    assert_eq!(body["errors"][0]["line"], 3, "{body}");
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("column `f3`: the value is missing"),
        "{message}"
    );
    // A cell that names a file is never read on the server.
    let mut cells: Vec<String> = vec!["/etc/passwd.npy".to_owned()];
    cells.push("setosa".to_owned());
    let (status, body) = feed(
        "?format=csv&label_column=species",
        &format!("pixels,species\n{}\n", cells.join(",")),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["errors"][0]["line"], 2, "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("`/etc/passwd.npy` is a file path, and the server never reads files"),
        "a path in a table sent to the server: {body}"
    );
    let (status, body) = feed("?format=xlsx", &table);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not one of lines, csv, tsv")
    );
    let (status, body) = feed("?label_column=species", &table);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("format=csv"));
    let (status, body) = feed("?nonsense=1", &table);
    assert_eq!(status, 400, "{body}");

    // The listing: no preview unless asked; a preview holds at most N numbers and the count.
    let list = |query: &str| {
        status_json(
            with_token(
                client.get(server.api(&format!("/apps/iris/examples{query}"))),
                &token,
            )
            .send()
            .unwrap(),
        )
    };
    let (status, page) = list("");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["total"], 3, "{page}");
    assert!(page["items"][0].get("preview").is_none(), "{page}");
    let (status, page) = list("?preview=5");
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["items"][0]["preview"],
        json!({"kind": "values", "values": [100.0, 101.0, 102.0, 103.0, 104.0], "count": 12}),
        "{page}"
    );
    let (_, page) = list("?preview=100000");
    assert_eq!(
        page["items"][1]["preview"]["values"]
            .as_array()
            .unwrap()
            .len(),
        12,
        "{page}"
    );

    // A chain's preview is a series: the first number of each step.
    let token = server.register(&schema(
        "app series\ntype Input\n  reading :: Tensor[2]\n  next :: Nullable{Input}\nend\ntype Output\n  label :: Tensor[2]\nend",
    ));
    let (status, body) = status_json(
        with_token(client.post(server.api("/apps/series/examples")), &token)
            .body(r#"{"input": [{"reading": [1, 9]}, {"reading": [3, 9]}, {"reading": [2, 9]}], "output": [1, 0]}"#.to_owned() + "\n")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let (status, page) = status_json(
        with_token(
            client.get(server.api("/apps/series/examples?preview=2")),
            &token,
        )
        .send()
        .unwrap(),
    );
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        page["items"][0]["preview"],
        json!({"kind": "series", "values": [1.0, 3.0], "count": 3}),
        "{page}"
    );
}
