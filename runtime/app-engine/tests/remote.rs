//! The remote client (`Connection::Remote`) against a real `easeml_runtime::server` on a loopback
//! port (tests/common): the same `Client` calls as embedded mode over HTTP, tokens (registration,
//! the token file, a refused token), the errors a user meets (no server, wrong token, the server's
//! 4xx, no model yet, a server that dies mid-feed), and the app command line (`app_cli`, run in a
//! child process) with `EASEML_SERVER`, `--server` and a baked-in server URL; `export` over the
//! local store, refused with a server.

#[path = "../../server/tests/common/mod.rs"]
mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::io::{Cursor, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{TestServer, app, schema};
use easeml_runtime::store::Store;
use easeml_runtime::{
    CheckedOutput, Client, Connection, Error, ExampleId, FeedOptions, PageRequest, TokenOrigin,
};
use serde_json::{Value, json};

const PICS: &str = "app pics\nInput = [4, 4, 3]\nOutput = [2]\nlabels = [cat, dog]";

/// Example `i`: a 4x4 RGB image as nested JSON, bright for cats and dark for dogs.
fn image(i: usize) -> Value {
    let base = if i.is_multiple_of(2) { 0.7 } else { 0.1 };
    json!(
        (0..4)
            .map(|r| (0..4)
                .map(|c| {
                    let v = base + ((i * 31 + r * 4 + c) % 7) as f64 / 40.0;
                    json!([v, v, 1.0 - v])
                })
                .collect::<Vec<_>>())
            .collect::<Vec<_>>()
    )
}

fn label(i: usize) -> &'static str {
    if i.is_multiple_of(2) { "cat" } else { "dog" }
}

fn image_lines(range: std::ops::Range<usize>) -> String {
    range
        .map(|i| format!("{} {}\n", image(i), label(i)))
        .collect()
}

/// A remote connection to `server` with token files under `dir`, no token given.
fn remote(server: &TestServer, dir: &Path) -> Connection {
    Connection::Remote {
        url: server.url.clone(),
        token: None,
        admin_token: None,
        token_dir: Some(dir.to_owned()),
    }
}

fn with_token(server_url: &str, token: &str) -> Connection {
    Connection::Remote {
        url: server_url.to_owned(),
        token: Some(token.to_owned()),
        admin_token: None,
        token_dir: None,
    }
}

/// Trains the apps of the store under `home` until one run has finished (CPU, a few seconds).
fn train_once(home: &Path) {
    use easeml_engine::{Engine, EngineConfig};
    let mut config = EngineConfig::for_device(tch::Device::Cpu);
    config.max_run_seconds = 4.0;
    config.max_epochs = 2;
    config.min_steps = 0; // the epochs as set: a quick test, not a good model
    let mut engine = Engine::open(home, config).unwrap();
    for _ in 0..6 {
        match engine.step(None, &mut |_| {}).unwrap() {
            Some(easeml_engine::Step::Run(run)) if run.quality.is_some() => return,
            Some(_) => continue,
            None => break,
        }
    }
    panic!("no run finished");
}

/// Writes `image(i)` as a 4x4 PNG (what `feed` reads from a path, scaled to [0, 1]).
fn write_png(path: &Path, i: usize) -> Vec<f32> {
    let value = image(i);
    let mut png = image::RgbImage::new(4, 4);
    let mut scaled = Vec::new();
    for r in 0..4 {
        for c in 0..4 {
            let pixel: Vec<u8> = (0..3)
                .map(|k| (value[r][c][k].as_f64().unwrap() * 255.0).round() as u8)
                .collect();
            scaled.extend(pixel.iter().map(|&byte| f32::from(byte) / 255.0));
            png.put_pixel(
                c as u32,
                r as u32,
                image::Rgb([pixel[0], pixel[1], pixel[2]]),
            );
        }
    }
    png.save(path).unwrap();
    scaled
}

#[test]
fn feed_list_toggle_status_and_infer_over_http_match_the_embedded_store() {
    let server = TestServer::start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");

    // First use registers the app and saves its token (private).
    let mut client = Client::open(&remote(&server, &tokens), app(PICS)).unwrap();
    let token_file = tokens.join(format!(
        "http_127.0.0.1_{}/pics.token",
        server.address.port()
    ));
    assert_eq!(
        client.token_origin(),
        Some(&TokenOrigin::Registered {
            file: Some(token_file.clone()),
            problem: None
        })
    );
    assert_eq!(client.server_url(), Some(server.url.as_str()));
    assert!(client.store().is_none() && client.app_id().is_none());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(
        std::fs::read_to_string(&token_file).unwrap().trim(),
        client.token().unwrap()
    );

    // A feed with an image path (read here, sent inline) and inline lines; a comment is skipped.
    let png_values = write_png(&dir.path().join("first.png"), 0);
    let feed = format!("first.png cat\n# a comment\n{}", image_lines(1..6));
    let options = FeedOptions {
        base_dir: Some(dir.path().to_owned()),
        ..FeedOptions::default()
    };
    let report = client.feed_lines(Cursor::new(feed), &options).unwrap();
    assert_eq!(report.added, 6);
    assert_eq!(report.data_version, 1);
    assert_eq!(report.new_labels, Vec::<(String, u32)>::new()); // declared labels
    let ids = report.ids.clone();

    // Typed values, as the generated crate's `Client::feed` sends them.
    let typed: Vec<(Value, &str)> = (6..8).map(|i| (image(i), label(i))).collect();
    let report = client.feed(typed).unwrap();
    assert_eq!((report.added, report.data_version), (2, 2));

    // Paging: pages of 3, in id order, the same records the store holds.
    let mut listed = Vec::new();
    let mut request = PageRequest {
        after: None,
        limit: 3,
    };
    loop {
        let page = client.examples(request).unwrap();
        assert_eq!(page.total, 8);
        assert!(page.items.len() <= 3);
        listed.extend(page.items);
        match page.next {
            Some(next) => request = next,
            None => break,
        }
    }
    let embedded = Client::open(&Connection::embedded(&server.home), app(PICS)).unwrap();
    let stored = embedded
        .examples(PageRequest {
            after: None,
            limit: 100,
        })
        .unwrap();
    assert_eq!(listed, stored.items);
    assert_eq!(listed[..6].iter().map(|r| r.id).collect::<Vec<_>>(), ids);

    // One example reads back with the pixels the PNG gave (to the bit) and its label.
    let first = client.example(ids[0]).unwrap();
    assert_eq!(first, embedded.example(ids[0]).unwrap());
    assert_eq!(first.input.tensors[0], png_values);
    assert_eq!(first.output, CheckedOutput::Label("cat".to_owned()));

    // Toggle, and the filtered listing, status, labels and data version see it.
    assert_eq!(client.set_enabled(ids[1], false).unwrap(), 3);
    assert_eq!(client.set_enabled(ids[1], false).unwrap(), 3);
    let disabled = client
        .examples_filtered(
            PageRequest::default(),
            &easeml_runtime::store::ExampleFilter {
                enabled: Some(false),
                label: None,
            },
        )
        .unwrap();
    assert_eq!(
        disabled.items.iter().map(|r| r.id).collect::<Vec<_>>(),
        [ids[1]]
    );
    let status = client.status().unwrap();
    assert_eq!(status, embedded.status().unwrap());
    assert_eq!((status.examples, status.enabled_examples), (8, 7));
    assert_eq!(client.data_version().unwrap(), 3);
    assert_eq!(
        client.labels().unwrap(),
        Some(vec!["cat".to_owned(), "dog".to_owned()])
    );

    // Opening again reads the saved token.
    let again = Client::open(&remote(&server, &tokens), app(PICS)).unwrap();
    assert_eq!(again.token_origin(), Some(&TokenOrigin::File(token_file)));
    assert_eq!(again.status().unwrap().examples, 8);

    {
        use easeml_runtime::Score;
        // No model yet: the embedded message, saying that the server trains.
        let error = client
            .infer_lines(Cursor::new(image_lines(20..21)), &FeedOptions::default())
            .unwrap_err();
        assert!(
            matches!(&error, Error::NoModel { app, training: false, server: Some(url) } if app == "pics" && *url == server.url),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(
                "no model of app `pics` is trained yet; the server at http://127.0.0.1:"
            ),
            "{message}"
        );

        train_once(&server.home);
        // Answers name the caller's lines (the comment and blank line are not sent), and are
        // scored here when every line has its output, like embedded mode.
        let queries = format!("# queries\n\n{}", image_lines(20..24));
        let report = client
            .infer_lines(Cursor::new(queries.clone()), &FeedOptions::default())
            .unwrap();
        let mut embedded = embedded;
        let local = embedded
            .infer_lines(Cursor::new(queries), &FeedOptions::default())
            .unwrap();
        assert_eq!(
            report
                .answers
                .iter()
                .map(|(line, _)| *line)
                .collect::<Vec<_>>(),
            [3, 4, 5, 6]
        );
        assert_eq!(
            (report.run, &report.candidate),
            (local.run, &local.candidate)
        );
        assert_eq!(
            report
                .answers
                .iter()
                .map(|(_, answer)| answer.output.clone())
                .collect::<Vec<_>>(),
            local
                .answers
                .iter()
                .map(|(_, answer)| answer.output.clone())
                .collect::<Vec<_>>()
        );
        assert!(matches!(
            report.score,
            Some(Score::Accuracy { total: 4, .. })
        ));
        assert_eq!(report.score, local.score);
        // Typed inputs.
        let typed = client.infer((30..33).map(image)).unwrap();
        assert_eq!(
            typed
                .answers
                .iter()
                .map(|(position, _)| *position)
                .collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert!(typed.score.is_none());
    }
}

#[test]
fn bad_lines_are_named_here_and_nothing_is_sent() {
    let server = TestServer::start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::open(&remote(&server, dir.path()), app(PICS)).unwrap();
    let feed = format!(
        "{}[[1, 2]] cat\n{}missing.png dog\n{} bird\n",
        image_lines(0..1),
        image_lines(1..2),
        image(2)
    );
    let error = client
        .feed_lines(Cursor::new(feed.clone()), &FeedOptions::default())
        .unwrap_err();
    let Error::BadInput {
        errors,
        total,
        batch,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(*total, 5);
    assert_eq!(*batch, easeml_runtime::Batch::Feed);
    assert_eq!(
        errors.iter().map(|error| error.line).collect::<Vec<_>>(),
        [2, 4, 5]
    );
    let message = error.to_string();
    assert!(message.contains("line 2: "), "{message}");
    assert!(message.contains("missing.png"), "{message}");
    assert!(message.contains("label `bird`"), "{message}");
    assert_eq!(client.status().unwrap().examples, 0);

    // --skip-bad stores the good lines and reports the others.
    let options = FeedOptions {
        skip_bad: true,
        ..FeedOptions::default()
    };
    let report = client.feed_lines(Cursor::new(feed), &options).unwrap();
    assert_eq!(report.added, 2);
    assert_eq!(
        report
            .skipped
            .iter()
            .map(|error| error.line)
            .collect::<Vec<_>>(),
        [2, 4, 5]
    );
    assert_eq!(client.status().unwrap().examples, 2);
}

#[test]
fn a_feed_larger_than_the_server_takes_at_once_goes_in_several_requests() {
    let server = TestServer::start(|config| config.max_body_bytes = 16 << 10);
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::open(
        &remote(&server, dir.path()),
        app("app big\nInput = [4, 4, 3]\nOutput = [2]"),
    )
    .unwrap();
    // About 300 bytes a line as the client writes it: 400 lines take several requests, each a
    // stored batch (a data version).
    let report = client
        .feed_lines(Cursor::new(image_lines(0..400)), &FeedOptions::default())
        .unwrap();
    assert_eq!(report.added, 400);
    assert!(report.data_version >= 2, "{}", report.data_version);
    assert_eq!(client.status().unwrap().data_version, report.data_version);
    assert_eq!(
        report.new_labels,
        vec![("cat".to_owned(), 0), ("dog".to_owned(), 1)]
    );
    let ids: Vec<i64> = report.ids.iter().map(|id| id.0).collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(client.status().unwrap().examples, 400);

    // An example larger than the whole limit is a bad line, and nothing is sent.
    let mut big = Client::open(
        &remote(&server, dir.path()),
        app("app huge\nInput = [2000]\nOutput = [1]"),
    )
    .unwrap();
    let values: Vec<f32> = (0..2000).map(|i| i as f32 / 3.0).collect();
    let error = big
        .feed_lines(
            Cursor::new(format!("{} 1\n", serde_json::to_string(&values).unwrap())),
            &FeedOptions::default(),
        )
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::BadInput { .. }), "{message}");
    assert!(
        message.contains("line 1: this example is") && message.contains("--max-body-bytes"),
        "{message}"
    );
    assert_eq!(big.status().unwrap().examples, 0);
}

#[test]
fn no_server_says_which_url_and_what_to_do() {
    // Nothing listens there.
    let url = common::refusing_url();
    let error = Client::open(&with_token(&url, "t"), app(PICS)).unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("cannot reach the easeml server at {url} (")),
        "{message}"
    );
    assert!(
        message.contains("start it with `easeml serve`") && message.contains("unset EASEML_SERVER"),
        "{message}"
    );

    // A URL this client cannot use, and one that is not an easeml server.
    let error = Client::open(&with_token("ftp://127.0.0.1:1", "t"), app(PICS)).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("`ftp://127.0.0.1:1` is not a server URL this client can use"),
        "{error}"
    );
    let server = TestServer::start(|_| {});
    let error = Client::open(
        &with_token(&format!("{}/not-easeml", server.url), "t"),
        app(PICS),
    )
    .unwrap_err();
    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    assert!(
        error.to_string().contains("is this an easeml server?"),
        "{error}"
    );
}

#[test]
fn a_refused_token_says_which_app_and_how_to_fix_it() {
    let server = TestServer::start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let real = server.register(&schema(PICS));

    // EASEML_TOKEN with another token: 403, naming the app and the variable.
    let error = Client::open(&with_token(&server.url, "not-the-token"), app(PICS)).unwrap_err();
    assert!(
        matches!(&error, Error::Unauthorized { status: 403, app, .. } if app == "pics"),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("refused the token of app `pics`"),
        "{message}"
    );
    assert!(message.contains("EASEML_TOKEN"), "{message}");
    assert!(!message.contains(&real), "{message}");

    // No token anywhere, and the app is registered already (by someone else): 409 says where to
    // put the token.
    let error = Client::open(&remote(&server, &tokens), app(PICS)).unwrap_err();
    assert!(
        matches!(error, Error::Unauthorized { status: 409, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    let file = tokens.join(format!(
        "http_127.0.0.1_{}/pics.token",
        server.address.port()
    ));
    assert!(
        message.contains("app `pics` is registered on the easeml server at")
            && message.contains("set EASEML_TOKEN")
            && message.contains(&file.display().to_string()),
        "{message}"
    );

    // The token written there works; a wrong one there is refused, naming the file.
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, format!("{real}\n")).unwrap();
    let client = Client::open(&remote(&server, &tokens), app(PICS)).unwrap();
    assert_eq!(
        client.token_origin(),
        Some(&TokenOrigin::File(file.clone()))
    );
    std::fs::write(&file, "stale").unwrap();
    let error = Client::open(&remote(&server, &tokens), app(PICS)).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, Error::Unauthorized { status: 403, .. }),
        "{message}"
    );
    assert!(
        message.contains("refused the token of app `pics` saved in")
            && message.contains(&file.display().to_string())
            && message.contains("registered there under another token"),
        "{message}"
    );

    // A stale token file of an app removed from the server: the app is registered anew.
    {
        let mut store = Store::open(&server.home).unwrap();
        let app = store.app_by_name("pics").unwrap().unwrap();
        store.remove_app(app.id).unwrap();
    }
    let client = Client::open(&remote(&server, &tokens), app(PICS)).unwrap();
    assert!(
        matches!(client.token_origin(), Some(TokenOrigin::Registered { file: Some(saved), .. }) if *saved == file)
    );
    assert_ne!(std::fs::read_to_string(&file).unwrap().trim(), "stale");
    assert_eq!(client.status().unwrap().examples, 0);

    // Another program's type under the same name.
    let error = Client::open(
        &remote(&server, &tokens),
        app("app pics\nInput = [5, 5, 3]\nOutput = [2]\nlabels = [cat, dog]"),
    )
    .unwrap_err();
    assert!(matches!(error, Error::SchemaMismatch { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("app `pics` is already registered with type"),
        "{error}"
    );
}

#[test]
fn registering_needs_the_admin_token_when_the_server_has_one() {
    let admin = "an-admin-token-that-is-long-enough";
    let server = TestServer::start(|config| config.admin_token = Some(admin.to_owned()));
    let dir = tempfile::tempdir().unwrap();
    let connection = |admin_token: Option<&str>| Connection::Remote {
        url: server.url.clone(),
        token: None,
        admin_token: admin_token.map(str::to_owned),
        token_dir: Some(dir.path().to_owned()),
    };
    let error = Client::open(&connection(None), app(PICS)).unwrap_err();
    assert!(
        matches!(error, Error::Unauthorized { status: 401, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("set EASEML_ADMIN_TOKEN"),
        "{error}"
    );
    let error = Client::open(&connection(Some("not-the-admin-token")), app(PICS)).unwrap_err();
    assert!(
        matches!(error, Error::Unauthorized { status: 403, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("EASEML_ADMIN_TOKEN is not this server's admin token"),
        "{error}"
    );
    let client = Client::open(&connection(Some(admin)), app(PICS)).unwrap();
    assert!(matches!(
        client.token_origin(),
        Some(TokenOrigin::Registered { file: Some(_), .. })
    ));
    // Without a folder for token files the token is kept in memory, and the reason given.
    let client = Client::open(
        &Connection::Remote {
            url: server.url.clone(),
            token: None,
            admin_token: Some(admin.to_owned()),
            token_dir: None,
        },
        app("app other\nInput = [2]\nOutput = [1]"),
    )
    .unwrap();
    assert!(matches!(
        client.token_origin(),
        Some(TokenOrigin::Registered { file: None, problem: Some(problem) }) if problem.contains("EASEML_CONFIG_DIR")
    ));
    assert_eq!(client.status().unwrap().app, "other");
}

#[test]
fn the_servers_4xx_come_back_with_its_message() {
    let server = TestServer::start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let mut client = Client::open(&remote(&server, dir.path()), app(PICS)).unwrap();
    let error = client.set_enabled(ExampleId(123_456), false).unwrap_err();
    assert!(
        matches!(&error, Error::Server { status: 404, url, .. } if *url == server.url),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "the easeml server at {} answered 404: ",
            server.url
        )),
        "{message}"
    );
    assert!(message.contains("123456"), "{message}");
    let error = client.example(ExampleId(123_456)).unwrap_err();
    assert!(
        matches!(error, Error::Server { status: 404, .. }),
        "{error:?}"
    );

    // The app removed on the server while a client holds it: its token opens nothing now.
    {
        let mut store = Store::open(&server.home).unwrap();
        let app = store.app_by_name("pics").unwrap().unwrap();
        store.remove_app(app.id).unwrap();
    }
    let error = client.status().unwrap_err();
    assert!(
        matches!(&error, Error::Unauthorized { status: 403, app, .. } if app == "pics"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("run again to register it anew"),
        "{error}"
    );
}

/// A loopback proxy in front of the server that forwards the first `budget` bytes clients send and
/// then cuts every connection: a server that goes away in the middle of a feed.
struct CuttingProxy {
    url: String,
}

impl CuttingProxy {
    fn start(target: std::net::SocketAddr, budget: usize) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(target) else {
                    return;
                };
                let sent = std::sync::Arc::clone(&sent);
                let (mut client_read, mut server_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut server_read, mut client_write) = (server, client);
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 4096];
                    loop {
                        let read = match client_read.read(&mut buffer) {
                            Ok(0) | Err(_) => break,
                            Ok(read) => read,
                        };
                        let before = sent.fetch_add(read, std::sync::atomic::Ordering::SeqCst);
                        let allowed = budget.saturating_sub(before).min(read);
                        if server_write.write_all(&buffer[..allowed]).is_err() || allowed < read {
                            break;
                        }
                    }
                    let _ = server_write.shutdown(std::net::Shutdown::Both);
                    let _ = client_read.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_read, &mut client_write);
                    let _ = client_write.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        CuttingProxy { url }
    }
}

#[test]
fn a_server_that_goes_away_mid_feed_leaves_the_earlier_requests_stored_and_says_so() {
    let server = TestServer::start(|config| config.max_body_bytes = 16 << 10);
    let token = server.register(&schema(PICS));
    // Opening and the label snapshot are a few hundred bytes; then 16 KiB requests: the cut
    // falls in the second one.
    let proxy = CuttingProxy::start(server.address, 24 << 10);
    let mut client = Client::open(&with_token(&proxy.url, &token), app(PICS)).unwrap();
    let error = client
        .feed_lines(Cursor::new(image_lines(0..200)), &FeedOptions::default())
        .unwrap_err();
    let Error::PartlyStored { stored, source } = &error else {
        panic!("{error:?}");
    };
    assert!(matches!(**source, Error::Unreachable { .. }), "{source:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("cannot reach the easeml server at {}", proxy.url)),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "the {} examples of the earlier ones were stored",
            stored.len()
        )),
        "{message}"
    );
    // Exactly those are in the store.
    let embedded = Client::open(&Connection::embedded(&server.home), app(PICS)).unwrap();
    let page = embedded
        .examples(PageRequest {
            after: None,
            limit: 1000,
        })
        .unwrap();
    assert!(!stored.is_empty() && stored.len() < 200);
    assert_eq!(
        page.items
            .iter()
            .map(|record| record.id)
            .collect::<Vec<_>>(),
        *stored
    );
}

// ----- the app command line, in a child process -----

/// Not a test of its own: the child process of `the_app_command_line_works_against_a_server`. When
/// `EASEML_TEST_APP_ARGS` is set, it runs the app command line of `PICS` with those arguments (and
/// `EASEML_TEST_BAKED_SERVER` as the server baked in by `easemlc --server`), then exits with its code.
#[test]
fn app_cli_child() {
    let Ok(arguments) = std::env::var("EASEML_TEST_APP_ARGS") else {
        return;
    };
    let arguments: Vec<String> = serde_json::from_str(&arguments).unwrap();
    let manifest = common::manifest(&schema(PICS));
    let baked = easeml_runtime::app_cli::Baked {
        server: std::env::var("EASEML_TEST_BAKED_SERVER").ok(),
    };
    // An `<app>` with the engine in its process (the generated `<app>` starts `<app>-infer` and
    // `<app>-train` instead; the golden crates test runs those).
    let code = easeml_app_engine::run_engine_from(
        &manifest,
        easeml_runtime::app_cli::Entry::App,
        &baked,
        arguments,
    );
    std::process::exit(if code == std::process::ExitCode::SUCCESS {
        0
    } else {
        1
    });
}

/// What one run of the app's command line did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `pics ARGS` (the app command line in a child process of this test binary) with `env`, in
/// `dir`, with `stdin`; no EASEML_* variable of this process leaks in.
fn pics(args: &[&str], env: &[(&str, &str)], dir: &Path, stdin: &str) -> Run {
    let mut arguments = vec!["pics"];
    arguments.extend_from_slice(args);
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "app_cli_child",
            "--exact",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars() {
        if name.starts_with("EASEML_") && name != "EASEML_DEVICE" {
            command.env_remove(name);
        }
    }
    command.env(
        "EASEML_TEST_APP_ARGS",
        serde_json::to_string(&arguments).unwrap(),
    );
    command.env("EASEML_HOME", dir.join("local-home"));
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    // The test harness prints "running 1 test" before the child's own output.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stdout = stdout
        .split_once("running 1 test\n")
        .map_or(stdout.as_ref(), |(_, rest)| rest)
        .to_owned();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn the_app_command_line_works_against_a_server() {
    let server = TestServer::start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    let config = config.to_str().unwrap();
    let url = server.url.as_str();
    let env = [("EASEML_SERVER", url), ("EASEML_CONFIG_DIR", config)];
    write_png(&dir.path().join("first.png"), 0);
    std::fs::write(
        dir.path().join("data.txt"),
        format!("first.png cat\n{}", image_lines(1..8)),
    )
    .unwrap();

    // feed (from a file with an image path, read by the client): registers the app, saves the token.
    let run = pics(&["feed", "data.txt"], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "pics: 8 examples added\n");
    let token_file: PathBuf = PathBuf::from(config).join(format!(
        "tokens/http_127.0.0.1_{}/pics.token",
        server.address.port()
    ));
    assert!(
        run.stderr.contains(&format!(
            "pics: registered on {url}; its token is saved in {}",
            token_file.display()
        )),
        "{}",
        run.stderr
    );
    // Nothing went to the local store.
    assert!(
        !dir.path()
            .join("local-home")
            .join("easeml.sqlite3")
            .exists()
    );

    // A bad line from standard input names its line; nothing is stored.
    let run = pics(
        &["feed"],
        &env,
        dir.path(),
        &format!("{}[1, 2] dog\n", image_lines(0..1)),
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("pics: error: 1 of 2 line(s) are bad")
            && run.stderr.contains("line 2:"),
        "{}",
        run.stderr
    );

    // refine --list / --disable, status: over HTTP, the second run with the saved token.
    let run = pics(&["refine", "--list"], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(listed.len(), 8, "{}", run.stdout);
    assert!(listed[0].ends_with("on   cat"), "{}", run.stdout);
    let first_id = listed[0].split_whitespace().next().unwrap().to_owned();
    let run = pics(&["refine", "--disable", &first_id], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("pics: example {first_id} disabled (data version 2)\n")
    );
    let run = pics(&[], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("app pics: ")
            && run
                .stdout
                .contains("8 examples (7 enabled), data version 2"),
        "{}",
        run.stdout
    );

    // refine with no option: the server's page; train: the server trains.
    let run = pics(&["refine"], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("pics: the refine page is at {url}/apps/pics/refine\n")
    );
    assert!(
        run.stderr.contains(&token_file.display().to_string()),
        "{}",
        run.stderr
    );
    let run = pics(&["train", "--budget", "1m"], &env, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "the server at {url} trains every app in the background"
        )),
        "{}",
        run.stderr
    );
    assert!(run.stdout.starts_with("app pics: "), "{}", run.stdout);

    // --server on the command line, and the server baked in by `easemlc --server`, work the same;
    // an empty EASEML_SERVER means the local store even when a server is baked in.
    let with_config = [("EASEML_CONFIG_DIR", config)];
    let run = pics(&["--server", url, "status"], &with_config, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("8 examples (7 enabled)"),
        "{}",
        run.stdout
    );
    let baked = [
        ("EASEML_CONFIG_DIR", config),
        ("EASEML_TEST_BAKED_SERVER", url),
    ];
    let run = pics(&["status"], &baked, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("8 examples (7 enabled)"),
        "{}",
        run.stdout
    );
    let local = [("EASEML_SERVER", ""), ("EASEML_TEST_BAKED_SERVER", url)];
    let run = pics(&["status"], &local, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("0 examples (0 enabled)"),
        "{}",
        run.stdout
    );

    {
        // infer: no model yet, then answers once the store has one.
        let queries = image_lines(20..23);
        let run = pics(&["infer"], &env, dir.path(), &queries);
        assert_eq!(run.code, 1);
        assert!(
            run.stderr.contains(&format!(
                "pics: error: no model of app `pics` is trained yet; the server at {url} trains it"
            )),
            "{}",
            run.stderr
        );
        train_once(&server.home);
        let run = pics(&["infer", "--json"], &env, dir.path(), &queries);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let answers: Vec<Value> = run
            .stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(answers.len(), 3, "{}", run.stdout);
        for (index, answer) in answers.iter().enumerate() {
            assert_eq!(answer["line"], index + 1);
            assert!(
                matches!(answer["output"].as_str(), Some("cat" | "dog")),
                "{answer}"
            );
        }
        assert!(run.stderr.contains("pics: accuracy "), "{}", run.stderr);
    }

    // A token that cannot be saved (the config folder is a file) is shown once, and works.
    let other = TestServer::start(|_| {});
    let not_a_folder = dir.path().join("not-a-folder");
    std::fs::write(&not_a_folder, "").unwrap();
    let unsaved = [
        ("EASEML_SERVER", other.url.as_str()),
        ("EASEML_CONFIG_DIR", not_a_folder.to_str().unwrap()),
    ];
    let run = pics(&["status"], &unsaved, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (before, token) = run
        .stderr
        .split_once("it is shown only once: ")
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        before.contains(&format!(
            "pics: registered on {}, but its token could not be saved (cannot write ",
            other.url
        )),
        "{}",
        run.stderr
    );
    let token = token.split_whitespace().next().unwrap();
    let run = pics(
        &["status"],
        &[
            ("EASEML_SERVER", other.url.as_str()),
            ("EASEML_TOKEN", token),
        ],
        dir.path(),
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("app pics: "), "{}", run.stdout);

    // The errors a user meets: a wrong EASEML_TOKEN, no server at the URL.
    let wrong = [
        ("EASEML_SERVER", url),
        ("EASEML_CONFIG_DIR", config),
        ("EASEML_TOKEN", "wrong"),
    ];
    let run = pics(&["status"], &wrong, dir.path(), "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with("pics: error: the easeml server at")
            && run.stderr.contains("refused the token of app `pics`")
            && run.stderr.contains("EASEML_TOKEN"),
        "{}",
        run.stderr
    );
    let dead = common::refusing_url();
    let run = pics(&["status"], &[("EASEML_SERVER", &dead)], dir.path(), "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with(&format!(
            "pics: error: cannot reach the easeml server at {dead} ("
        )) && run.stderr.contains("easeml serve")
            && run.stderr.contains("EASEML_SERVER"),
        "{}",
        run.stderr
    );
}

/// `feed FILE` / `infer FILE` with no such file, or with a folder: one error line naming it (here
/// embedded: the same code serves both modes, before any connection is made).
#[test]
fn export_writes_the_local_model_and_refuses_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let local = [("EASEML_SERVER", "")];
    std::fs::write(dir.path().join("data.txt"), image_lines(0..16)).unwrap();
    let run = pics(&["feed", "data.txt"], &local, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = dir.path().join("model");
    let export = ["export", "--out", out.to_str().unwrap()];

    let run = pics(&export, &local, dir.path(), "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "pics: error: app pics has no trained model yet; feed examples and train first"
        ),
        "{}",
        run.stderr
    );
    assert!(!out.exists());

    train_once(&dir.path().join("local-home"));
    let run = pics(&export, &local, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("exported "), "{}", run.stdout);
    let metadata: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("easeml-export.json")).unwrap())
            .unwrap();
    assert_eq!(metadata["app"], "pics");
    assert_eq!(metadata["labels"], json!(["cat", "dog"]));
    // `[4, 4, 3]` for a network, `[48]` (a flattened row) for a classic model.
    let shape: Vec<u64> = serde_json::from_value(metadata["model"]["input_shape"].clone()).unwrap();
    assert_eq!(shape.iter().product::<u64>(), 48, "{metadata}");
    assert!(out.join("README.md").is_file());

    // Not over an export already there, unless --force.
    let run = pics(&export, &local, dir.path(), "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("exists and is not empty; give a new or empty folder, or --force"),
        "{}",
        run.stderr
    );
    let forced = ["export", "--out", out.to_str().unwrap(), "--force"];
    let run = pics(&forced, &local, dir.path(), "");
    assert_eq!(run.code, 0, "{}", run.stderr);

    // A server's app is exported on the server's machine.
    let remote = [("EASEML_SERVER", "http://127.0.0.1:9")];
    let other = dir.path().join("other");
    let run = pics(
        &["export", "--out", other.to_str().unwrap()],
        &remote,
        dir.path(),
        "",
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(
            "pics: error: `export` reads the local store, not a server's; on the server's machine run `easeml export pics --store DIR --out DIR`"
        ),
        "{}",
        run.stderr
    );
    assert!(!other.exists());
}

#[test]
fn feed_and_infer_name_a_missing_file_or_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("photos")).unwrap();
    for command in ["feed", "infer"] {
        let run = pics(&[command, "photos"], &[], dir.path(), "");
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.starts_with(
                "pics: error: `photos` is a folder; give a file of lines, or no FILE to read standard input"
            ),
            "{}",
            run.stderr
        );
        let run = pics(&[command, "missing.txt"], &[], dir.path(), "");
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr
                .starts_with("pics: error: cannot read `missing.txt`: No such file"),
            "{}",
            run.stderr
        );
    }
    // A bad input line: infer answers nothing and says so (no word of storing or --skip-bad).
    let run = pics(&["infer"], &[], dir.path(), "[1, 2]\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with("pics: error: 1 of 1 line(s) are bad; nothing was answered:\n  line 1: "),
        "{}",
        run.stderr
    );
}

/// `refine --listen` on an address other machines reach is refused (the page carries its access
/// token) unless `--allow-remote` says the user means it.
#[test]
fn refine_refuses_a_non_loopback_address_without_allow_remote() {
    let dir = tempfile::tempdir().unwrap();
    let run = pics(&["refine", "--listen", "0.0.0.0:0"], &[], dir.path(), "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--listen 0.0.0.0:0 is not a loopback address")
            && run.stderr.contains("--allow-remote"),
        "{}",
        run.stderr
    );
    use easeml_runtime::app_cli::{Entry, command};
    let spec = app(PICS);
    let matches = command(&spec, Entry::Refine)
        .try_get_matches_from(["pics-refine", "--listen", "0.0.0.0:0", "--allow-remote"])
        .unwrap();
    assert!(matches.get_flag("allow_remote"));
    assert!(
        command(&spec, Entry::Refine)
            .try_get_matches_from(["pics-refine", "--list", "--allow-remote"])
            .is_err()
    );
}

/// The generated binaries' `refine`: no option serves the page (on `--listen`, 127.0.0.1:9000 by
/// default); `--list`, `--enable`, `--disable` still work and do not take `--listen`.
#[test]
fn refine_serves_the_page_without_an_action_and_keeps_its_flags() {
    use easeml_runtime::app_cli::{Entry, command};
    let spec = app(PICS);
    let parse = |entry: Entry, args: &[&str]| command(&spec, entry).try_get_matches_from(args);
    let listen = |matches: &clap::ArgMatches| {
        matches
            .get_one::<std::net::SocketAddr>("listen")
            .copied()
            .unwrap()
    };
    let matches = parse(Entry::App, &["pics", "refine"]).unwrap();
    let refine = matches.subcommand_matches("refine").unwrap();
    assert_eq!(listen(refine), "127.0.0.1:9000".parse().unwrap());
    assert!(!refine.get_flag("list"));
    let matches = parse(Entry::Refine, &["pics-refine", "--listen", "127.0.0.1:0"]).unwrap();
    assert_eq!(listen(&matches), "127.0.0.1:0".parse().unwrap());
    for args in [
        &["pics", "refine", "--list"][..],
        &["pics", "refine", "--disable", "3"],
        &["pics", "refine", "--enable", "3"],
    ] {
        assert!(parse(Entry::App, args).is_ok(), "{args:?}");
    }
    for args in [
        &["pics", "refine", "--list", "--listen", "127.0.0.1:0"][..],
        &["pics", "refine", "--enable", "1", "--disable", "2"],
        &["pics", "refine", "--listen", "not-an-address"],
    ] {
        assert!(parse(Entry::App, args).is_err(), "{args:?}");
    }
}
