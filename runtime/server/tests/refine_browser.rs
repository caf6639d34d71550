//! The refine page in a real headless Chromium (Debian's `chromium` + `chromium-driver`, installed
//! by `cargo xtask setup` / `cargo xtask test`), driven over WebDriver with fantoccini: the page
//! lists the stored examples with thumbnails, a click on an example's switch changes the store, the
//! filters show what they say; then the same on the embedded `refine` server, whose page carries
//! its own token.
//!
//! Skips, loudly, only when Chromium or chromedriver is not installed.

#[path = "support/browser.rs"]
mod browser;
mod common;

/// How this test process gets the engine for the servers it starts (see `common`).
fn install_engine() {
    easeml_engine::install_local_models();
}

use std::path::Path;
use std::time::{Duration, Instant};

use browser::{Driver, browser_available, open_browser, script};
use common::{TestServer, http, schema, status_json, with_token};
use easeml_client::ExampleId;
use easeml_client::store::Store;
use easeml_server::RefineOnly;
use fantoccini::{Client as Browser, Locator};
use serde_json::{Value, json};

/// How long any one thing may take before the test fails (a bound, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `condition` holds, polling; fails with `what` after [`PATIENCE`].
async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < PATIENCE, "waited too long: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Where screenshots go: `EASEML_SCREENSHOTS`, else a folder under the system's temporary one.
fn screenshots() -> std::path::PathBuf {
    let folder = std::env::var_os("EASEML_SCREENSHOTS").map_or_else(
        || std::env::temp_dir().join("easeml-refine-screenshots"),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// The example ids the page shows now.
async fn shown_ids(browser: &Browser) -> Vec<i64> {
    let ids = script(
        browser,
        "return Array.from(document.querySelectorAll('#rows tr[id^=example-]')).map(r => Number(r.id.slice(8)));",
    )
    .await;
    serde_json::from_value(ids).unwrap()
}

fn enabled_in_store(home: &Path, app: &str, id: i64) -> bool {
    let store = Store::open(home).unwrap();
    let app = store.app_by_name(app).unwrap().unwrap();
    store.example(app.id, ExampleId(id)).unwrap().enabled
}

fn image_line(i: usize) -> String {
    let rows: Vec<Value> = (0..8)
        .map(|r| {
            Value::Array(
                (0..8)
                    .map(|c| {
                        let v = ((i * 13 + r * 8 + c) % 16) as f32 / 15.0;
                        json!([v, 0.2, 1.0 - v])
                    })
                    .collect(),
            )
        })
        .collect();
    format!(
        "{} {}\n",
        Value::Array(rows),
        if i.is_multiple_of(2) { "cat" } else { "dog" }
    )
}

#[test]
fn the_refine_page_toggles_an_example_in_a_real_browser() {
    if !browser_available("the_refine_page_toggles_an_example_in_a_real_browser") {
        return;
    }
    let server = TestServer::start(|_| {});
    let token = server.register(&schema(
        "app pics\nInput = [8, 8, 3]\nOutput = [2]\nlabels = [cat, dog]",
    ));
    let lines: String = (0..5).map(image_line).collect();
    let (status, report) = status_json(
        with_token(http().post(server.api("/apps/pics/examples")), &token)
            .body(lines)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{report}");
    let ids: Vec<i64> = serde_json::from_value(report["ids"].clone()).unwrap();
    // A table app and a series app, whose rows show their values (issue 45).
    let table_token = server.register(&schema(
        "app nums\nInput = [12]\nOutput = [2]\nlabels = [low, high]",
    ));
    let (status, report) = status_json(
        with_token(http().post(server.api("/apps/nums/examples")), &table_token)
            .body(
                "[0.5, 1.25, 2, 3, 4, 5, 6, 7.125, 8, 9, 10, 11] low\n[1, 2, 3] high\n"
                    .replace("[1, 2, 3]", "[1,1,1,1,1,1,1,1,1,1,1,1]"),
            )
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{report}");
    let table_id = report["ids"][0].as_i64().unwrap();
    let series_token = server.register(&schema(
        "app series\ntype Input\n  reading :: Tensor[1]\n  next :: Nullable{Input}\nend\ntype Output\n  label :: Tensor[2]\nend",
    ));
    let (status, report) = status_json(
        with_token(http().post(server.api("/apps/series/examples")), &series_token)
            .body("{\"input\": [{\"reading\": [1]}, {\"reading\": [3]}, {\"reading\": [2]}, {\"reading\": [5]}], \"output\": [1, 0]}\n")
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{report}");
    let series_id = report["ids"][0].as_i64().unwrap();
    let profile = tempfile::tempdir().unwrap();
    let driver = Driver::start(PATIENCE);
    let home = server.home.clone();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let browser = open_browser(&driver, profile.path(), &[]).await;

        // `easeml serve`'s page, with the token in the URL fragment.
        browser
            .goto(&format!("{}/apps/pics/refine#token={token}", server.url))
            .await
            .unwrap();
        let switch = browser
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(&format!("#switch-{}", ids[3])))
            .await
            .unwrap();
        assert_eq!(shown_ids(&browser).await, ids);
        // The token left the address bar.
        assert!(!browser.current_url().await.unwrap().as_str().contains("token"));
        // Thumbnails are real 8x8 pictures.
        eventually("thumbnails", || async {
            script(
                &browser,
                "return Array.from(document.querySelectorAll('#rows img')).every(i => i.complete && i.naturalWidth === 8);",
            )
            .await
                == json!(true)
        })
        .await;
        assert!(enabled_in_store(&home, "pics", ids[3]));

        switch.click().await.unwrap();
        eventually("the store sees the click", || async {
            !enabled_in_store(&home, "pics", ids[3])
        })
        .await;
        eventually("the row shows the change", || async {
            script(
                &browser,
                &format!("return document.getElementById('example-{}').dataset.enabled;", ids[3]),
            )
            .await
                == json!("false")
        })
        .await;
        for (index, id) in ids.iter().enumerate() {
            assert_eq!(enabled_in_store(&home, "pics", *id), index != 3, "example {id}");
        }

        // Filters: disabled ones, then by label.
        browser
            .find(Locator::Css("#filter-state"))
            .await
            .unwrap()
            .select_by_value("false")
            .await
            .unwrap();
        eventually("the disabled filter", || async {
            shown_ids(&browser).await == vec![ids[3]]
        })
        .await;
        browser
            .find(Locator::Css("#filter-state"))
            .await
            .unwrap()
            .select_by_value("")
            .await
            .unwrap();
        browser
            .find(Locator::Css("#filter-label"))
            .await
            .unwrap()
            .select_by_value("dog")
            .await
            .unwrap();
        eventually("the label filter", || async {
            shown_ids(&browser).await == vec![ids[1], ids[3]]
        })
        .await;

        // Switching it back on.
        browser
            .find(Locator::Css(&format!("#switch-{}", ids[3])))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        eventually("the store sees the second click", || async {
            enabled_in_store(&home, "pics", ids[3])
        })
        .await;

        // A table's example shows its first 8 values, an ellipsis and the count; a series a sparkline.
        browser
            .goto(&format!("{}/apps/nums/refine#token={table_token}", server.url))
            .await
            .unwrap();
        let values_of = format!(
            "const cell = document.querySelector('#example-{table_id} td.values'); return cell === null ? null : cell.textContent;"
        );
        eventually("a table example's values", || async {
            script(&browser, &values_of).await != Value::Null
        })
        .await;
        assert_eq!(
            script(&browser, &values_of).await,
            json!("0.5, 1.25, 2, 3, 4, 5, 6, 7.125, …(12 values)")
        );
        assert_eq!(
            script(&browser, "return document.querySelector('#rows img') === null && document.querySelector('th.thumb-col').classList.contains('hidden');").await,
            json!(true)
        );
        let png = browser.screenshot().await.unwrap();
        std::fs::write(screenshots().join("refine-table.png"), png).unwrap();
        browser
            .goto(&format!("{}/apps/series/refine#token={series_token}", server.url))
            .await
            .unwrap();
        let series_of = format!(
            "const cell = document.querySelector('#example-{series_id} td.values'); \
             return cell === null ? null : [cell.textContent, cell.querySelector('polyline').getAttribute('points').split(' ').length];"
        );
        eventually("a series example's sparkline", || async {
            script(&browser, &series_of).await != Value::Null
        })
        .await;
        assert_eq!(script(&browser, &series_of).await, json!(["4 steps", 4]));
        // The image app's rows show no numbers.
        browser
            .goto(&format!("{}/apps/pics/refine#token={token}", server.url))
            .await
            .unwrap();
        eventually("the image rows again", || async {
            script(&browser, "return document.querySelectorAll('#rows img').length === 5 && Array.from(document.querySelectorAll('#rows td.values')).every(c => c.classList.contains('hidden') && c.textContent === '');").await == json!(true)
        })
        .await;

        // A wrong token gets the token form, and no change.
        browser
            .goto(&format!("{}/apps/pics/refine#token=not-the-token", server.url))
            .await
            .unwrap();
        eventually("the token form", || async {
            script(&browser, "return !document.getElementById('login').classList.contains('hidden');")
                .await
                == json!(true)
        })
        .await;
        browser.close().await.unwrap();
    });
    drop(runtime);

    // The embedded `refine` server: its page knows its token; `/` leads to it.
    let embedded = TestServer::start_over(home.clone(), |config| {
        config.refine_only = Some(RefineOnly::new("pics").unwrap());
    });
    let profile = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let browser = open_browser(&driver, profile.path(), &[]).await;
        browser.goto(&format!("{}/", embedded.url)).await.unwrap();
        let switch = browser
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(&format!("#switch-{}", ids[0])))
            .await
            .unwrap();
        switch.click().await.unwrap();
        eventually("the store sees the embedded page's click", || async {
            !enabled_in_store(&home, "pics", ids[0])
        })
        .await;
        browser.close().await.unwrap();
    });
}
