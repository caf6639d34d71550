//! The web pages, each one self-contained HTML file embedded in the binary with its session JSON
//! written in per response (and a CSP nonce for its one script): the refine page (paper section
//! 2.1; the app and, on the embedded `refine` server, the per-process token) and the web console
//! (`console.html`, issue 19: compile, register, download, the app's and the operator's
//! dashboards).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde_json::json;

use super::{ApiError, AppState};

/// The pages, with `/*EASEML_SESSION*/null` where the session object goes.
const REFINE_HTML: &str = include_str!("refine.html");
const CONSOLE_HTML: &str = include_str!("console.html");

/// `GET /`: the web console; the refine page's server sends you to its app's page.
pub(crate) async fn index(State(state): State<AppState>) -> Result<Response, ApiError> {
    match &state.config().refine_only {
        Some(refine) => Ok(Redirect::to(&format!("/apps/{}/refine", refine.app)).into_response()),
        None => console_page(&state, None),
    }
}

/// `GET /apps/{name}/dashboard`: the web console opened on the app's dashboard (it asks for the
/// app's token, or reads it from the URL fragment `#token=`).
pub(crate) async fn dashboard_page(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    if state.config().refine_only.is_some() {
        return Err(ApiError::not_found(format!(
            "no dashboard for app `{name}` here: this server serves a refine page only"
        )));
    }
    console_page(&state, Some(name))
}

fn console_page(state: &AppState, app: Option<String>) -> Result<Response, ApiError> {
    let session = json!({
        "app": app,
        "compiler": state.config().compiler.is_some(),
        "admin": state.config().admin_token.is_some(),
    });
    page(CONSOLE_HTML, &session)
}

/// `GET /apps/{name}/refine`: the page. It asks for the app's token (or reads it from the URL
/// fragment `#token=`); on the embedded `refine` server the token is in the page already.
pub(crate) async fn refine_page(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(name) = path?;
    let token = match &state.config().refine_only {
        Some(refine) if refine.app == name => Some(refine.token.clone()),
        Some(_) => {
            return Err(ApiError::not_found(format!(
                "no refine page for app `{name}` here"
            )));
        }
        None => None,
    };
    page(REFINE_HTML, &json!({"app": name, "token": token}))
}

/// A page with its session written in, a fresh CSP nonce for its script, and headers that keep it
/// out of frames and caches.
fn page(template: &str, session: &serde_json::Value) -> Result<Response, ApiError> {
    // `<` escaped so that no value can close the script element.
    let session = session.to_string().replace('<', "\\u003c");
    let mut nonce_bytes = [0u8; 16];
    getrandom::fill(&mut nonce_bytes).map_err(ApiError::internal)?;
    let nonce: String = nonce_bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let html = template
        .replacen("/*EASEML_SESSION*/null", &session, 1)
        .replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1);
    let policy = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src blob:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut response = (StatusCode::OK, Html(html)).into_response();
    let headers = response.headers_mut();
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}
