//! What the runtime's examples share: an `easeml_runtime::server` on a free loopback port, in a
//! thread of the example's process, with one app registered.
#![allow(dead_code)] // each example uses a part

use std::path::{Path, PathBuf};

use anyhow::Result;

/// A server on 127.0.0.1 over a store, with one app registered (its token in `token`).
pub struct LoopbackServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The registered app's token.
    pub token: String,
    /// The store's folder.
    pub home: PathBuf,
    _server: easeml_runtime::server::ServerThread,
    _dir: Option<tempfile::TempDir>,
}

impl LoopbackServer {
    /// A server over a fresh store in a temporary folder, with the app of `manifest` registered.
    pub fn start(manifest: &str) -> Result<LoopbackServer> {
        let dir = tempfile::tempdir()?;
        let mut server = LoopbackServer::start_over(dir.path(), manifest)?;
        server._dir = Some(dir);
        Ok(server)
    }

    /// A server over the store under `home`, with the app of `manifest` registered there.
    pub fn start_over(home: &Path, manifest: &str) -> Result<LoopbackServer> {
        let mut config = easeml_runtime::server::Config::new(home);
        config.listen = "127.0.0.1:0".parse()?;
        config.max_body_bytes = 1 << 30;
        let server = easeml_runtime::server::ServerThread::spawn(config)?;
        let mut loopback = LoopbackServer {
            url: server.url(),
            token: String::new(),
            home: home.to_owned(),
            _server: server,
            _dir: None,
        };
        loopback.token = loopback.register(manifest)?;
        Ok(loopback)
    }

    /// Registers one more app (no admin token); returns its token.
    pub fn register(&self, manifest: &str) -> Result<String> {
        let response = reqwest::blocking::Client::new()
            .post(format!("{}/api/v1/apps", self.url))
            .body(manifest.to_owned())
            .send()?;
        anyhow::ensure!(response.status() == 201, "{}", response.text()?);
        Ok(response.json::<serde_json::Value>()?["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// A remote connection to the app with its token (no token files).
    pub fn connection(&self) -> easeml_runtime::Connection {
        easeml_runtime::Connection::Remote {
            url: self.url.clone(),
            token: Some(self.token.clone()),
            admin_token: None,
            token_dir: None,
        }
    }
}
