//! The web console of the real `easeml serve` (issue 19): the compile routes over HTTP with the
//! compiler the binary links (diagnostics as `easemlc` renders them, the explanation, registration
//! with the returned manifest, the download unpacked by `tar`, every error path), and the whole flow
//! in a headless Chromium (Debian's `chromium` + `chromium-driver`, as the refine page's test):
//! compile an invalid then an uploaded valid program, download, register, feed, watch the first
//! run appear and finish on the app's dashboard and the operator's, with screenshots checked for
//! drawn charts; the dashboard's upload (a bad table dropped, its errors listed; a good one through
//! the file input), the try-it box (no model yet, an answer with its run and data version, a bad
//! input), the zoomed chart's ticks, the phase badge and the per-class view. The browser test skips, loudly, only when Chromium or chromedriver is missing.

#[path = "../../server/tests/support/browser.rs"]
mod browser;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use browser::{Driver, browser_available, open_browser, script};
use easeml_compiler::diagnostic::render_failure;
use easeml_compiler::explain::Explanation;
use easeml_compiler::{Registry, compile};
use fantoccini::{Client as Browser, Locator};
use reqwest::blocking::Client as Http;
use serde_json::{Value, json};

const EASEML: &str = env!("CARGO_BIN_EXE_easeml");
const ADMIN: &str = "web-console-test-admin-token-0123456789abcdef";
/// A program with two errors.
const INVALID: &str = "app blobs\nInput = [4, 0]\nOutput = [2]\nlabels = [a, a]\n";
/// A small tabular app: two blobs of points, separable.
const VALID: &str = "app blobs\nInput = [4]\nOutput = [2]\nlabels = [low, high]\n";
/// How long any one thing may take before a test fails (a bound, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(180);

/// `easeml serve` on a free port over a fresh store, killed on drop.
struct Served {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Served {
    /// `easeml serve` with `extra` flags (`--admin-token-file` when `admin`).
    fn start(admin: bool, extra: &[&str]) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(EASEML);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(dir.path().join("home"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("EASEML_DEVICE", "cpu")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if admin {
            let file = dir.path().join("admin.token");
            std::fs::write(&file, ADMIN).unwrap();
            command.arg("--admin-token-file").arg(file);
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        Served {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http() -> Http {
    Http::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// `POST path` with a body and, when given, a bearer token: the status and the body as text.
fn post(url: &str, token: Option<&str>, body: impl Into<reqwest::blocking::Body>) -> (u16, String) {
    let mut request = http().post(url).body(body);
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let response = request.send().unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

/// Whether `text` is the try-it box's line on the model that answered.
fn regex_like_model(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("Answered by ") else {
        return false;
    };
    let Some((candidate, rest)) = rest.split_once(" (run ") else {
        return false;
    };
    let Some((run, rest)) = rest.split_once("), ") else {
        return false;
    };
    !candidate.is_empty() && run.parse::<u64>().is_ok() && rest == "trained on data version 1."
}

/// What `easemlc` prints for `source` saved as `file`.
fn easemlc_errors(source: &str, file: &str) -> String {
    let diagnostics = compile(source, "program", &Registry::builtin()).unwrap_err();
    render_failure(&diagnostics, source, file, false)
}

/// 40 feed lines of the `blobs` app: `low` points near 0, `high` points near 1.
fn blob_lines() -> String {
    (0..40)
        .map(|i| {
            let high = i % 2 == 1;
            let base = if high { 1.0 } else { 0.0 };
            let values: Vec<f32> = (0..4)
                .map(|k| base + ((i * 7 + k * 3) % 10) as f32 / 50.0)
                .collect();
            format!(
                "{} {}\n",
                serde_json::to_string(&values).unwrap(),
                if high { "high" } else { "low" }
            )
        })
        .collect()
}

/// [`blob_lines`] as a CSV table with a header, the label in the column `label`.
fn blob_table() -> String {
    let mut table = String::from("a,b,c,d,label\n");
    for line in blob_lines().lines() {
        let (values, label) = line.split_once(' ').unwrap();
        let values: Vec<f32> = serde_json::from_str(values).unwrap();
        let cells: Vec<String> = values.iter().map(f32::to_string).collect();
        table.push_str(&format!("{},{label}\n", cells.join(",")));
    }
    table
}

/// Gives the dashboard's upload `content` as a file named `name`: through the file input, or
/// dropped on the drop zone.
async fn give_file(browser: &Browser, name: &str, content: &str, drop: bool) {
    let code = "const [name, content, drop] = arguments; \
         const data = new DataTransfer(); \
         data.items.add(new File([content], name, {type: 'text/plain'})); \
         if (drop) { \
           document.getElementById('drop-zone').dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true})); \
         } else { \
           const input = document.getElementById('data-file'); input.files = data.files; \
           input.dispatchEvent(new Event('change')); \
         } \
         return true;";
    browser
        .execute(code, vec![json!(name), json!(content), json!(drop)])
        .await
        .unwrap();
    until(
        browser,
        "the file is read",
        &format!(
            "return document.getElementById('data-chosen').textContent.startsWith({}) && !document.getElementById('send-data').disabled;",
            json!(name)
        ),
    )
    .await;
}

#[test]
fn the_compile_routes_answer_as_easemlc_and_refuse_bad_requests() {
    let served = Served::start(false, &["--no-train"]);
    let compile_url = format!("{}/api/v1/compile?file=blobs.eml", served.url);
    let download_url = format!("{}/api/v1/compile/download?file=blobs.eml", served.url);

    // Errors: exactly easemlc's rendering, and the JSON form.
    let (status, text) = post(&compile_url, None, INVALID);
    assert_eq!(status, 200, "{text}");
    let body = json_of(&text);
    assert_eq!(body["ok"], false);
    assert_eq!(body["rendered"], easemlc_errors(INVALID, "blobs.eml"));
    assert!(
        body["rendered"]
            .as_str()
            .unwrap()
            .contains("could not compile `blobs.eml` due to 2 previous errors"),
        "{text}"
    );
    assert_eq!(body["diagnostics"].as_array().unwrap().len(), 2, "{text}");
    assert_eq!(body["diagnostics"][0]["file"], "blobs.eml");

    // Not UTF-8: one E001 at the byte, as easemlc says it.
    let (status, text) = post(
        &compile_url,
        None,
        b"Input = [4]\nOutput = [\xff]\n".to_vec(),
    );
    assert_eq!(status, 200, "{text}");
    let body = json_of(&text);
    assert_eq!(body["ok"], false);
    assert_eq!(body["diagnostics"][0]["code"], "E001");
    assert!(
        body["rendered"]
            .as_str()
            .unwrap()
            .contains("not valid UTF-8"),
        "{text}"
    );

    // A valid program: the explanation and manifest easemlc gives.
    let (status, text) = post(&compile_url, None, VALID);
    assert_eq!(status, 200, "{text}");
    let body = json_of(&text);
    assert_eq!(body["ok"], true, "{text}");
    assert_eq!(body["app"], "blobs");
    let registry = Registry::builtin();
    let compiled = compile(VALID, "blobs", &registry).unwrap();
    let explanation = Explanation::new(&compiled);
    assert_eq!(
        body["explanation"],
        serde_json::to_value(&explanation).unwrap()
    );
    assert_eq!(body["explain"], explanation.to_text(&registry));
    let manifest = easeml_compiler::codegen::manifest(&compiled).to_json();
    assert_eq!(body["manifest"], manifest);
    assert!(
        !body["explanation"]["candidates"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Registration is the API's own route, with that manifest; the token opens the app.
    let (status, text) = post(
        &format!("{}/api/v1/apps", served.url),
        None,
        manifest.clone(),
    );
    assert_eq!(status, 201, "{text}");
    let token = json_of(&text)["token"].as_str().unwrap().to_owned();
    let response = http()
        .get(format!("{}/api/v1/apps/blobs/status", served.url))
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    // A second registration of the same app is the API's 409.
    let (status, text) = post(
        &format!("{}/api/v1/apps", served.url),
        None,
        manifest.clone(),
    );
    assert_eq!(status, 409, "{text}");

    // The download: a tar `tar` unpacks into easemlc's files, pointed at this server.
    let response = http().post(&download_url).body(VALID).send().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-tar");
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"blobs.tar\""
    );
    let archive = response.bytes().unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("blobs.tar"), &archive).unwrap();
    let untar = Command::new("tar")
        .arg("-xf")
        .arg("blobs.tar")
        .current_dir(out.path())
        .output()
        .unwrap();
    assert!(untar.status.success(), "{untar:?}");
    let crate_dir = out.path().join("blobs");
    assert_eq!(
        std::fs::read_to_string(crate_dir.join("easeml.json")).unwrap(),
        manifest
    );
    let cargo = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("name = \"blobs\""), "{cargo}");
    // No path of the server's checkout (issue 49): the runtime is a checkout beside the folder.
    let checkout = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .unwrap()
        .display()
        .to_string();
    assert!(!cargo.contains(&checkout), "{cargo}");
    assert!(cargo.contains("\"../easeml/runtime/core\""), "{cargo}");
    let generated = easeml_compiler::codegen::crate_files(
        &compiled,
        &easeml_compiler::codegen::CrateOptions {
            runtime: easeml_compiler::codegen::RuntimeSource::Path(String::new()),
            server: None,
            python: true,
        },
    )
    .unwrap();
    for path in generated.keys() {
        assert!(crate_dir.join(path).is_file(), "{path} is missing");
    }
    // The Python package comes with the crate.
    assert!(crate_dir.join("python/pyproject.toml").is_file());
    // With the workspace's Cargo.lock (the versions easeml is tested with), so that beside a
    // checkout of easeml the crate resolves offline, as it unpacked.
    let workspace_lock = include_str!("../../../Cargo.lock");
    for lock in ["Cargo.lock", "python/Cargo.lock"] {
        let text = std::fs::read_to_string(crate_dir.join(lock)).unwrap();
        assert!(text == workspace_lock, "{lock} is not the workspace's");
    }
    let checkout_root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::os::unix::fs::symlink(&checkout_root, out.path().join("easeml")).unwrap();
    let metadata = Command::new(env!("CARGO"))
        .args(["metadata", "--offline", "--format-version", "1"])
        .current_dir(&crate_dir)
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "the download does not resolve beside a checkout (offline, from cargo's cache: `cargo \
         fetch` in the workspace fills it for every platform, as `cargo xtask test` does): {}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    // A server given a repository: its downloads take the runtime from there, versioned, with no
    // path anywhere, and resolve without a checkout beside them.
    let root = std::fs::canonicalize(&checkout_root).unwrap();
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(head.status.success());
    let rev = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    let url = format!("file://{}", root.display());
    let from_git = Served::start(
        false,
        &[
            "--no-train",
            "--download-runtime-git",
            &url,
            "--download-runtime-rev",
            &rev,
        ],
    );
    let response = http()
        .post(format!(
            "{}/api/v1/compile/download?file=blobs.eml",
            from_git.url
        ))
        .body(VALID)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("blobs.tar"),
        response.bytes().unwrap(),
    )
    .unwrap();
    let untar = Command::new("tar")
        .arg("-xf")
        .arg("blobs.tar")
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(untar.status.success(), "{untar:?}");
    let unpacked = elsewhere.path().join("blobs");
    for manifest in ["Cargo.toml", "python/Cargo.toml"] {
        let text = std::fs::read_to_string(unpacked.join(manifest)).unwrap();
        assert!(
            text.contains(&format!("git = \"{url}\"")),
            "{manifest}: {text}"
        );
        assert!(
            text.contains(&format!("rev = \"{rev}\"")),
            "{manifest}: {text}"
        );
        assert!(!text.contains("runtime/core"), "{manifest}: {text}");
    }
    let metadata = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(&unpacked)
        .output()
        .unwrap();
    assert!(
        metadata.status.success(),
        "the download does not resolve from the repository: {}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    drop(from_git);

    let host = served.url.trim_start_matches("http://");
    let baked = generated
        .keys()
        .filter(|path| path.ends_with(".rs"))
        .any(|path| {
            std::fs::read_to_string(crate_dir.join(path))
                .unwrap()
                .contains(&format!("http://{host}"))
        });
    assert!(baked, "the binaries do not name this server");

    // Error paths.
    let (status, text) = post(&download_url, None, INVALID);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("due to 2 previous errors"), "{text}");
    let (status, text) = post(&compile_url, None, vec![b'#'; (256 << 10) + 1]);
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("at most 262144 bytes"), "{text}");
    let (status, text) = post(&compile_url, None, " \n\t");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("the program is empty"), "{text}");
    for bad in ["a%2Fb.eml", "", "x%0A.eml"] {
        let (status, text) = post(
            &format!("{}/api/v1/compile?file={bad}", served.url),
            None,
            VALID,
        );
        assert_eq!(status, 400, "{bad}: {text}");
        assert!(text.contains("`file` must be a file name"), "{text}");
    }
    let (status, text) = post(
        &format!("{}/api/v1/compile?nonsense=1", served.url),
        None,
        VALID,
    );
    assert_eq!(status, 400, "{text}");
    let response = http()
        .get(format!("{}/api/v1/compile", served.url))
        .send()
        .unwrap();
    assert_eq!(response.status(), 405);
    // No admin token configured: no operator's overview.
    let response = http()
        .get(format!("{}/api/v1/admin/overview", served.url))
        .send()
        .unwrap();
    assert_eq!(response.status(), 403);
    // The page says compiling is available.
    let page = http().get(&served.url).send().unwrap().text().unwrap();
    assert!(page.contains("\"compiler\":true"), "{page}");
}

#[test]
fn with_an_admin_token_compiling_and_the_overview_need_it() {
    let served = Served::start(true, &["--no-train"]);
    let compile_url = format!("{}/api/v1/compile", served.url);
    let (status, text) = post(&compile_url, None, VALID);
    assert_eq!(status, 401, "{text}");
    let (status, text) = post(&compile_url, Some("not-the-admin-token"), VALID);
    assert_eq!(status, 403, "{text}");
    let (status, text) = post(
        &format!("{}/api/v1/compile/download", served.url),
        None,
        VALID,
    );
    assert_eq!(status, 401, "{text}");
    let (status, text) = post(&compile_url, Some(ADMIN), VALID);
    assert_eq!(status, 200, "{text}");
    let manifest = json_of(&text)["manifest"].as_str().unwrap().to_owned();
    let (status, text) = post(
        &format!("{}/api/v1/apps", served.url),
        Some(ADMIN),
        manifest,
    );
    assert_eq!(status, 201, "{text}");
    let token = json_of(&text)["token"].as_str().unwrap().to_owned();

    let overview = |token: Option<&str>| {
        let mut request = http().get(format!("{}/api/v1/admin/overview", served.url));
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let response = request.send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    };
    assert_eq!(overview(None).0, 401);
    // An app's token is not the operator's.
    assert_eq!(overview(Some(&token)).0, 403);
    let (status, text) = overview(Some(ADMIN));
    assert_eq!(status, 200, "{text}");
    let body = json_of(&text);
    assert_eq!(body["apps"][0]["status"]["app"], "blobs");
    assert_eq!(body["apps"][0]["status"]["examples"], 0);
    assert_eq!(body["units"], json!([]));
}

// ----- the browser -----

/// The chart's data colour (`--chart`, the first series of `console.html`).
const CHART_RGB: [u8; 3] = [0x1f, 0x6f, 0xd1];
/// More pixels of that colour than a drawn chart's one point (a dot of radius 4 is about 50) has at
/// least; an empty chart has none (checked first).
const MIN_LINE_PIXELS: usize = 40;

/// Waits until `code` returns `true` in the page; fails with `what` after [`PATIENCE`].
async fn until(browser: &Browser, what: &str, code: &str) {
    let started = Instant::now();
    while script(browser, code).await != json!(true) {
        assert!(started.elapsed() < PATIENCE, "waited too long: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The pixels of the data colour inside the element `id` on a screenshot of the page (the element
/// scrolled into view first).
async fn chart_pixels(browser: &Browser, id: &str, save_as: &Path) -> usize {
    let rect = script(
        browser,
        &format!(
            "const e = document.getElementById('{id}'); e.scrollIntoView({{block: 'center'}}); \
             const r = e.getBoundingClientRect(); \
             return [r.left, r.top, r.width, r.height, window.devicePixelRatio];"
        ),
    )
    .await;
    let rect: Vec<f64> = serde_json::from_value(rect).unwrap();
    let png = browser.screenshot().await.unwrap();
    std::fs::write(save_as, &png).unwrap();
    let image = image::load_from_memory(&png).unwrap().to_rgb8();
    let scale = rect[4];
    let (x0, y0) = ((rect[0] * scale) as u32, (rect[1] * scale) as u32);
    let (x1, y1) = (
        (((rect[0] + rect[2]) * scale) as u32).min(image.width()),
        (((rect[1] + rect[3]) * scale) as u32).min(image.height()),
    );
    assert!(
        x1 > x0 + 100 && y1 > y0 + 100,
        "the chart {id} is not on screen: {rect:?}"
    );
    let mut count = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let pixel = image.get_pixel(x, y).0;
            if pixel
                .iter()
                .zip(CHART_RGB)
                .all(|(&have, want)| have.abs_diff(want) < 40)
            {
                count += 1;
            }
        }
    }
    count
}

#[test]
fn the_web_console_compiles_registers_downloads_and_shows_training_in_a_real_browser() {
    if !browser_available("the web console's browser test") {
        return;
    }
    let started = Instant::now();
    let served = Served::start(true, &["--max-run", "4s"]);
    let work = tempfile::tempdir().unwrap();
    let upload = work.path().join("blobs.eml");
    std::fs::write(&upload, VALID).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start(PATIENCE);
    let screenshots = std::env::var_os("EASEML_SCREENSHOTS")
        .map_or_else(|| work.path().to_owned(), std::path::PathBuf::from);
    std::fs::create_dir_all(&screenshots).unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let browser = open_browser(
            &driver,
            profile.path(),
            &["--window-size=1200,1000", "--force-device-scale-factor=1"],
        )
        .await;
        browser.goto(&served.url).await.unwrap();
        let program = browser
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Id("program"))
            .await
            .unwrap();
        browser
            .find(Locator::Id("admin-token"))
            .await
            .unwrap()
            .send_keys(ADMIN)
            .await
            .unwrap();

        // An invalid program: the diagnostics as easemlc prints them.
        program.send_keys(INVALID).await.unwrap();
        browser.find(Locator::Id("compile")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the diagnostics",
            "return !document.getElementById('diagnostics').classList.contains('hidden');",
        )
        .await;
        let shown = script(&browser, "return document.getElementById('diagnostics').textContent;").await;
        assert_eq!(shown, json!(easemlc_errors(INVALID, "program.eml")));
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-diagnostics.png"), png).unwrap();

        // The valid program, uploaded as a file.
        browser
            .find(Locator::Id("upload"))
            .await
            .unwrap()
            .send_keys(&upload.display().to_string())
            .await
            .unwrap();
        until(
            &browser,
            "the upload fills the editor",
            "return document.getElementById('program').value.startsWith('app blobs\\nInput = [4]');",
        )
        .await;
        browser.find(Locator::Id("compile")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the candidates",
            "return !document.getElementById('compiled').classList.contains('hidden');",
        )
        .await;
        let compiled = compile(VALID, "blobs", &Registry::builtin()).unwrap();
        let expected: Vec<String> = compiled.candidates.iter().map(|c| c.id.clone()).collect();
        let shown = script(
            &browser,
            "return Array.from(document.querySelectorAll('#candidates tr')).map(r => r.children[1].textContent);",
        )
        .await;
        assert_eq!(shown, json!(expected));
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-compiled.png"), png).unwrap();
        assert!(script(&browser, "return document.getElementById('diagnostics').classList.contains('hidden');").await == json!(true));

        // Download: the archive the page received is easemlc's crate under `blobs/`.
        browser.find(Locator::Id("download")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the download",
            "return document.getElementById('download-status').textContent.startsWith('blobs.tar (');",
        )
        .await;
        let first = browser
            .execute_async(
                "const done = arguments[arguments.length - 1]; \
                 window.easemlLastDownload.slice(0, 100).text().then(t => done(t.split('\\u0000')[0]));",
                vec![],
            )
            .await
            .unwrap();
        assert!(first.as_str().unwrap().starts_with("blobs/"), "{first}");

        // Register: the token shown once opens the app.
        browser.find(Locator::Id("register")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the token",
            "return document.getElementById('new-token').textContent.length > 20;",
        )
        .await;
        let token = script(&browser, "return document.getElementById('new-token').textContent;").await;
        assert!(token.as_str().unwrap().len() > 20, "{token}");
        // The app's dashboard, before any data: an empty chart (the control of the pixel check).
        browser.find(Locator::Id("new-dashboard")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the empty dashboard",
            "return document.getElementById('count-examples').textContent === '0' \
             && !document.getElementById('dashboard').classList.contains('hidden');",
        )
        .await;
        let blank = chart_pixels(&browser, "app-chart", &screenshots.join("web-app-empty.png")).await;
        assert_eq!(blank, 0, "the chart of an app without runs has data pixels");
        until(
            &browser,
            "the phase badge before any data",
            "const badge = document.getElementById('phase-badge'); \
             return badge.dataset.phase === 'waiting_for_data' && badge.textContent === 'waiting for data';",
        )
        .await;
        assert_eq!(
            script(&browser, "return document.getElementById('class-section').classList.contains('hidden');").await,
            json!(true),
            "a per-class section without a served model"
        );
        // The registration page no longer names the API route.
        assert_eq!(
            script(&browser, "return document.getElementById('registered').textContent.includes('/api/v1');").await,
            json!(false)
        );

        // Try it before any model: the page says so in words.
        browser.find(Locator::Id("try-input")).await.unwrap().send_keys("[0.1, 0.1, 0.1, 0.1]").await.unwrap();
        browser.find(Locator::Id("try-answer")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "no model yet",
            "return document.getElementById('try-error').textContent.startsWith('No model is trained yet: ');",
        )
        .await;

        // A bad table, dropped: nothing added, its bad lines listed.
        let mut bad = blob_table();
        bad.push_str("0.5,,0.5,0.5,low\n0.5,0.5,0.5,0.5,middle\n0.1,0.1,0.1,0.1,high\n");
        give_file(&browser, "bad.csv", &bad, true).await;
        let columns = script(
            &browser,
            "const s = document.getElementById('label-column'); \
             return [Array.from(s.options).map(o => o.value), s.value, !document.getElementById('table-options').classList.contains('hidden')];",
        )
        .await;
        assert_eq!(columns, json!([["a", "b", "c", "d", "label"], "label", true]));
        browser.find(Locator::Id("send-data")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the bad table's errors",
            "return document.querySelectorAll('#upload-errors li').length > 0;",
        )
        .await;
        let shown = script(
            &browser,
            "return [document.getElementById('upload-result').textContent, \
             Array.from(document.querySelectorAll('#upload-errors li')).map(li => li.textContent)];",
        )
        .await;
        assert_eq!(
            shown[0],
            json!("Nothing was added: 2 of 43 rows of bad.csv cannot be read. Fix them and add the file again:"),
            "{shown}"
        );
        let errors = shown[1].as_array().unwrap();
        assert_eq!(errors.len(), 2, "{shown}");
        assert!(errors[0].as_str().unwrap().starts_with("line 42: column `b`: the value is missing"), "{shown}");
        assert!(errors[1].as_str().unwrap().starts_with("line 43: ") && errors[1].as_str().unwrap().contains("unknown label `middle`"), "{shown}");
        assert_eq!(script(&browser, "return document.getElementById('count-examples').textContent;").await, json!("0"));
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-upload-errors.png"), png).unwrap();

        // A file of feed lines (no table): its bad line is listed, nothing is added.
        give_file(&browser, "bad.txt", "[0.1, 0.1, 0.1, 0.1] low\n[1, 2] high\n", false).await;
        assert_eq!(
            script(&browser, "return document.getElementById('table-options').classList.contains('hidden');").await,
            json!(true)
        );
        browser.find(Locator::Id("send-data")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the bad lines' errors",
            // The final message, not the "checking bad.txt…" shown while the file is checked.
            "return document.getElementById('upload-result').textContent.includes('lines of bad.txt');",
        )
        .await;
        let shown = script(
            &browser,
            "return [document.getElementById('upload-result').textContent, \
             Array.from(document.querySelectorAll('#upload-errors li')).map(li => li.textContent)];",
        )
        .await;
        assert_eq!(
            shown[0],
            json!("Nothing was added: 1 of 2 lines of bad.txt cannot be read. Fix them and add the file again:"),
            "{shown}"
        );
        assert!(shown[1][0].as_str().unwrap().starts_with("line 2: "), "{shown}");

        // The good table through the file input.
        give_file(&browser, "blobs.csv", &blob_table(), false).await;
        browser.find(Locator::Id("send-data")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "the table is added",
            "return document.getElementById('upload-result').textContent.startsWith('Added ') \
             || document.getElementById('upload-result').textContent.startsWith('Nothing ');",
        )
        .await;
        assert_eq!(
            script(&browser, "return [document.getElementById('upload-result').textContent, document.getElementById('upload-errors').classList.contains('hidden')];").await,
            json!(["Added 40 examples from blobs.csv (data version 1). Training picks them up.", true])
        );

        // Counts, then a run appears and finishes, and the chart shows it.
        until(
            &browser,
            "the counts",
            "return document.getElementById('count-examples').textContent === '40';",
        )
        .await;
        until(
            &browser,
            "a run appears",
            "return document.querySelectorAll('#runs tr').length > 0;",
        )
        .await;
        until(
            &browser,
            "a run finishes",
            "return document.querySelectorAll('#runs tr[data-state=done]').length > 0;",
        )
        .await;
        // A finished run's trials unfold (and stay open through the page's refreshes).
        script(&browser, "document.querySelector('#runs tr[data-state=done] details summary').click(); return true;").await;
        // The page refreshes every 1.5 s.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        until(
            &browser,
            "a run's trials, unfolded through a refresh",
            "const open = document.querySelector('#runs tr[data-state=done] details[open]'); return open !== null && open.querySelectorAll('table.trials tbody tr').length > 0 && /^\\d+ trials?$/.test(open.querySelector('summary').textContent);",
        )
        .await;
        // The page says which model serves, on which data, and how its quality was measured.
        until(
            &browser,
            "the served model named, with its data version and its metric",
            "const summary = document.getElementById('app-summary').textContent; \
             const measured = document.getElementById('best-measured').textContent; \
             return /serving \\S+ \\(run \\d+, data version 1\\)/.test(summary) \
             && /^The best model's quality is its (accuracy|R²), /.test(measured) \
             && (/accuracy/.test(measured) \
                 ? /on \\d+ examples; 95% interval [01]\\.\\d{3}-[01]\\.\\d{3}\\.$/.test(measured) \
                 : /on \\d+ examples\\.$/.test(measured));",
        )
        .await;
        // And what it is expected to score on new examples, with its interval (the engine's
        // estimate after the run).
        until(
            &browser,
            "the served model's expected quality on new examples",
            "return /^Expected on new examples: [01]\\.\\d{3} \\(95% interval [01]\\.\\d{3}-[01]\\.\\d{3}\\), its choice among the runs accounted for \\(bootstrap bias-corrected cross-validation, \\d+ resamples\\)\\.$/ \
             .test(document.getElementById('best-expected').textContent);",
        )
        .await;
        let pixels = chart_pixels(&browser, "app-chart", &screenshots.join("web-app-dashboard.png")).await;
        eprintln!("the app's chart: {pixels} pixels of the line");
        assert!(pixels > MIN_LINE_PIXELS, "the app's chart is blank ({pixels} pixels of the line)");
        // The chart zooms to its data: its quality axis is not 0-1 (the blobs are separable), its
        // time axis runs from the first run to the last, not to now.
        let ticks = script(
            &browser,
            "return Array.from(document.querySelectorAll('#app-chart [data-tick=y]')).map(t => Number(t.textContent));",
        )
        .await;
        let ticks: Vec<f64> = serde_json::from_value(ticks).unwrap();
        assert!(ticks.len() >= 2 && ticks[0] > 0.0, "the quality axis is not zoomed: {ticks:?}");
        // The same drawing for qualities 0.8 to 0.95: round ticks inside the data's range.
        let drawn = script(
            &browser,
            "const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');              drawChart(svg, [{name: 'x', color: '#000', points: [[1e12, 0.8], [1e12 + 60000, 0.9], [1e12 + 600000, 0.95]]}], 'accuracy');              const ticks = (axis) => Array.from(svg.querySelectorAll('[data-tick=' + axis + ']')).map(t => t.textContent);              return [ticks('y'), ticks('x'), [fmtTime(1e12), fmtTime(1e12 + 300000), fmtTime(1e12 + 600000)]];",
        )
        .await;
        assert_eq!(drawn[0], json!(["0.80", "0.85", "0.90", "0.95"]), "{drawn}");
        assert_eq!(drawn[1], drawn[2], "the time axis runs from the first run to the last: {drawn}");

        // The phase badge names the phase.
        let phase = script(
            &browser,
            "const badge = document.getElementById('phase-badge'); return [badge.dataset.phase, badge.textContent];",
        )
        .await;
        assert!(
            phase == json!(["searching", "searching"]) || phase == json!(["finished", "finished"]),
            "{phase}"
        );
        // The out-of-date "no model yet" of the try-it box is gone.
        assert_eq!(script(&browser, "return document.getElementById('try-error').textContent;").await, json!(""));
        script(&browser, "document.getElementById('dash-name').scrollIntoView(); return true;").await;
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-app-top.png"), png).unwrap();

        // Try it: an answer, the model and data that gave it; a bad input is named as such.
        browser.find(Locator::Id("try-answer")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "an answer",
            "return !document.getElementById('try-result').classList.contains('hidden');",
        )
        .await;
        let answer = script(
            &browser,
            "return ['try-output', 'try-sure', 'try-model', 'try-error'].map(id => document.getElementById(id).textContent);",
        )
        .await;
        assert_eq!(answer[0], json!("low"), "{answer}");
        assert!(answer[1].as_str().unwrap().starts_with("The model gives this class a probability of "), "{answer}");
        assert!(
            regex_like_model(answer[2].as_str().unwrap()),
            "{answer}"
        );
        assert_eq!(answer[3], json!(""), "{answer}");
        // Every class's probability, the answered class first, summing to 100%.
        let classes = script(
            &browser,
            "return Array.from(document.querySelectorAll('#try-probabilities tr')).map(row => [row.dataset.label, parseFloat(row.children[1].textContent)]);",
        )
        .await;
        let classes = classes.as_array().unwrap();
        assert!(classes.len() >= 2, "one row per class: {classes:?}");
        assert_eq!(classes[0][0], answer[0], "the answered class is the most likely: {classes:?}");
        let sum: f64 = classes.iter().map(|row| row[1].as_f64().unwrap()).sum();
        assert!((sum - 100.0).abs() < 0.5, "the probabilities sum to 100%: {classes:?}");
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-try-it.png"), png).unwrap();
        script(&browser, "document.getElementById('try-input').value = '[1, 2]'; return true;").await;
        browser.find(Locator::Id("try-answer")).await.unwrap().click().await.unwrap();
        until(
            &browser,
            "a bad input named",
            "return document.getElementById('try-error').textContent.startsWith('This input cannot be read: ')              && document.getElementById('try-result').classList.contains('hidden');",
        )
        .await;
        let refine = script(&browser, "return document.getElementById('refine-link').getAttribute('href');").await;
        assert!(refine.as_str().unwrap().starts_with("/apps/blobs/refine#token="), "{refine}");

        // The operator's overview, with its own chart.
        browser
            .find(Locator::Id("op-token"))
            .await
            .unwrap()
            .send_keys(ADMIN)
            .await
            .unwrap();
        browser
            .find(Locator::Css("#op-login button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        until(
            &browser,
            "the operator's table",
            "const row = document.getElementById('op-app-blobs'); return row !== null && row.children[2].textContent !== '0';",
        )
        .await;
        // Each app's dashboard link carries the admin token, which the server takes on app routes.
        let link = script(&browser, "return document.querySelector('#op-app-blobs a').getAttribute('href');").await;
        assert!(
            link.as_str().unwrap().starts_with("/apps/blobs/dashboard#token="),
            "the operator's dashboard link opens the dashboard: {link}"
        );
        let pixels = chart_pixels(&browser, "op-chart", &screenshots.join("web-operator.png")).await;
        eprintln!("the operator's chart: {pixels} pixels of the line");
        assert!(pixels > MIN_LINE_PIXELS, "the operator's chart is blank ({pixels} pixels of the line)");

        // The served classifier's per-class view, from the status: a row per label (100% on the
        // separable blobs), and a confusion matrix of its 40 validation answers (5 folds). Waited
        // for as a whole: a run cut by `--max-run` may be served first with fewer answers.
        until(
            &browser,
            "the per-class view of a served model with all 40 validation answers right",
            "return !document.getElementById('class-section').classList.contains('hidden') \
             && document.querySelectorAll('#confusion rect').length === 4 \
             && Array.from(document.querySelectorAll('#confusion rect')).map(r => Number(r.nextElementSibling.textContent)).reduce((a, b) => a + b, 0) === 40 \
             && Array.from(document.querySelectorAll('#per-class tr')).every(r => r.textContent.endsWith('100%'));",
        )
        .await;
        let real = script(
            &browser,
            "return [Array.from(document.querySelectorAll('#per-class tr')).map(r => r.textContent), \
             Array.from(document.querySelectorAll('#confusion rect')).map(r => Number(r.nextElementSibling.textContent)).reduce((a, b) => a + b, 0)];",
        )
        .await;
        assert_eq!(real, json!([["low100%", "high100%"], 40]), "{real}");
        script(&browser, "document.getElementById('class-section').scrollIntoView(); return true;").await;
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-classes-served.png"), png).unwrap();

        // The same view of a made-up report with mistakes (the dashboard's refreshes stopped first).
        script(&browser, "pollApp = () => {}; clearTimeout(appTimer); return true;").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let classes = script(
            &browser,
            "renderClasses({per_class: {low: 1, high: 0.75}, confusion: {labels: ['low', 'high'], counts: [[20, 0], [5, 15]]}});              document.getElementById('class-section').scrollIntoView();              return [!document.getElementById('class-section').classList.contains('hidden'),                Array.from(document.querySelectorAll('#per-class tr')).map(r => r.textContent),                document.querySelectorAll('#confusion rect').length,                Array.from(document.querySelectorAll('#confusion text')).map(t => t.textContent)];",
        )
        .await;
        assert_eq!(classes[0], json!(true), "{classes}");
        assert_eq!(classes[1], json!(["low100%", "high75%"]), "{classes}");
        assert_eq!(classes[2], json!(4), "{classes}");
        for word in ["low", "high", "20", "5", "15"] {
            assert!(classes[3].as_array().unwrap().contains(&json!(word)), "{word}: {classes}");
        }
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots.join("web-classes.png"), png).unwrap();
        script(&browser, "renderClasses(null); return true;").await;
        assert_eq!(
            script(&browser, "return document.getElementById('class-section').classList.contains('hidden');").await,
            json!(true)
        );

        // The refine page from the dashboard's link.
        browser.goto(&format!("{}{}", served.url, refine.as_str().unwrap())).await.unwrap();
        until(
            &browser,
            "the refine page lists the examples",
            "return document.querySelectorAll('#rows tr[id^=example-]').length === 40;",
        )
        .await;
        browser.close().await.unwrap();
    });
    eprintln!(
        "the web console's browser test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
