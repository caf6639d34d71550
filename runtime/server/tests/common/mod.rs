//! A real server on a loopback port for the HTTP tests, with helpers to register apps and call it.
#![allow(dead_code)]

pub mod memory_cap;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use easeml_client::AppSpec;
use easeml_compiler::{Compiled, Registry, compile, schema::Schema};
use easeml_server::{Config, ServerThread};
use reqwest::blocking::{Client as Http, RequestBuilder, Response};
use serde_json::Value;

/// The schema of a small `.eml` program.
pub fn schema(source: &str) -> Schema {
    compile(source, "app", &Registry::builtin())
        .unwrap_or_else(|diagnostics| panic!("{diagnostics:?}"))
        .schema
}

/// The `easeml.json` easemlc writes for a schema (the builtin registry's template and candidates).
pub fn manifest(schema: &Schema) -> String {
    let compiled = Compiled::from_schema(schema.clone(), &Registry::builtin()).expect("a template");
    easeml_compiler::codegen::manifest(&compiled).to_json()
}

/// The app of a schema, described by the manifest easemlc writes for it.
pub fn spec(schema: &Schema) -> AppSpec {
    AppSpec::from_manifest_json(&manifest(schema)).unwrap()
}

/// The app of a small `.eml` program.
pub fn app(source: &str) -> AppSpec {
    spec(&schema(source))
}

/// An HTTP client with a timeout, so that no test can hang on the server.
pub fn http() -> Http {
    Http::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// A server in a thread of this process, on 127.0.0.1 and a free port, over a fresh store.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The store's directory.
    pub home: PathBuf,
    /// The address it listens on.
    pub address: SocketAddr,
    server: ServerThread,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server; `configure` may change its settings (not `listen` or `home`).
    pub fn start(configure: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        TestServer::start_in(dir, home, configure)
    }

    /// A server over the store under `home` (another server's, say).
    pub fn start_over(home: PathBuf, configure: impl FnOnce(&mut Config)) -> TestServer {
        TestServer::start_in(tempfile::tempdir().unwrap(), home, configure)
    }

    fn start_in(
        dir: tempfile::TempDir,
        home: PathBuf,
        configure: impl FnOnce(&mut Config),
    ) -> TestServer {
        // Inference over HTTP answers with the engine's models: each test crate that uses this
        // module says how its process gets the engine (`install_engine` at its root).
        crate::install_engine();
        let mut config = Config::new(&home);
        config.listen = "127.0.0.1:0".parse().unwrap();
        configure(&mut config);
        let server = ServerThread::spawn(config).expect("the server did not start");
        TestServer {
            url: server.url(),
            home,
            address: server.address(),
            server,
            _dir: dir,
        }
    }

    /// The URL of an API path (`/apps/x/status` -> `http://.../api/v1/apps/x/status`).
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.url)
    }

    /// Registers an app (no admin token); returns its token.
    pub fn register(&self, schema: &Schema) -> String {
        let response = http()
            .post(self.api("/apps"))
            .body(manifest(schema))
            .send()
            .unwrap();
        assert_eq!(response.status(), 201, "{:?}", response.text());
        let body: Value = response.json().unwrap();
        body["token"].as_str().unwrap().to_owned()
    }

    /// Stops the server and waits for it (also done on drop).
    pub fn stop(&mut self) {
        self.server.stop().expect("the server did not stop cleanly");
    }
}

/// Sends a request with a bearer token.
pub fn with_token(request: RequestBuilder, token: &str) -> RequestBuilder {
    request.header("Authorization", format!("Bearer {token}"))
}

/// The status and JSON body of a response (`Value::Null` for a body that is not JSON).
pub fn status_json(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A loopback URL where nobody listens ([`easeml_test_support::refusing_address`]).
pub fn refusing_url() -> String {
    format!("http://{}", easeml_test_support::refusing_address())
}
