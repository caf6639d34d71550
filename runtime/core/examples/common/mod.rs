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
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
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
        let (address_sender, address) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let Ok(runtime) = easeml_runtime::server::runtime() else {
                return;
            };
            runtime.block_on(async move {
                let server = match easeml_runtime::server::Server::bind(config).await {
                    Ok(server) => server,
                    Err(error) => {
                        let _ = address_sender.send(Err(error.to_string()));
                        return;
                    }
                };
                let _ = address_sender.send(server.local_addr().map_err(|e| e.to_string()));
                let _ = server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let address = address.recv()?.map_err(anyhow::Error::msg)?;
        let url = format!("http://{address}");
        let response = reqwest::blocking::Client::new()
            .post(format!("{url}/api/v1/apps"))
            .body(manifest.to_owned())
            .send()?;
        anyhow::ensure!(response.status() == 201, "{}", response.text()?);
        let token = response.json::<serde_json::Value>()?["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok(LoopbackServer {
            url,
            token,
            home: home.to_owned(),
            stop: Some(stop),
            thread: Some(thread),
            _dir: None,
        })
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

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
