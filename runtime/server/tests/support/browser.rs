// Headless Chromium for the browser tests (the refine page's, `runtime/server/tests/
// refine_browser.rs`, and the web console's, `runtime/cli/tests/web.rs`, which includes this file
// by path): Debian's `chromium` driven through `chromedriver` on a free loopback port. Chromium is
// started with the flags this closed network needs (no background networking, no component
// updates) and a profile folder of the test's own.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client as Browser, ClientBuilder};
use serde_json::{Value, json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser is installed; when it is not, says so loudly (the test then skips).
pub fn browser_available(test: &str) -> bool {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return true;
    }
    easeml_test_support::missing_part(
        test,
        "Chromium and chromedriver",
        &format!("{CHROMIUM} or {CHROMEDRIVER} is missing"),
        "`cargo xtask setup` installs them (apt-get install chromium chromium-driver)",
    );
    false
}

/// chromedriver on a free loopback port, killed on drop.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    /// Starts chromedriver and waits (at most `patience`) until it listens.
    pub fn start(patience: Duration) -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start chromedriver");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < patience, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session with its profile in `profile` and `extra` flags.
pub async fn open_browser(driver: &Driver, profile: &Path, extra: &[&str]) -> Browser {
    let mut args: Vec<Value> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .chain(extra)
    .map(|flag| json!(flag))
    .collect();
    args.push(json!(format!("--user-data-dir={}", profile.display())));
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("cannot open a Chromium session through chromedriver")
}

/// Runs `code` in the page; its return value.
pub async fn script(browser: &Browser, code: &str) -> Value {
    browser.execute(code, vec![]).await.unwrap()
}
