//! The refine web page (paper section 2.1): one self-contained HTML file embedded in the binary,
//! with the app (and, on the embedded `refine` server, the per-process token) written into it.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde_json::json;

use super::{ApiError, AppState};

/// The page, with `/*EASEML_SESSION*/null` where the session object goes.
const REFINE_HTML: &str = include_str!("refine.html");

/// `GET /`: the refine page's server sends you to its app's page; `easeml serve` says where pages are.
pub(crate) async fn index(State(state): State<AppState>) -> Response {
    match &state.config().refine_only {
        Some(refine) => Redirect::to(&format!("/apps/{}/refine", refine.app)).into_response(),
        None => Html(
            "<!doctype html><meta charset=utf-8><title>easeml</title>\
             <p>easeml server. The JSON API is under <code>/api/v1</code>; an app's refine page is \
             <code>/apps/NAME/refine</code>.</p>",
        )
        .into_response(),
    }
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
    // `<` escaped so that no value can close the script element.
    let session = json!({"app": name, "token": token})
        .to_string()
        .replace('<', "\\u003c");
    let mut nonce_bytes = [0u8; 16];
    getrandom::fill(&mut nonce_bytes).map_err(ApiError::internal)?;
    let nonce: String = nonce_bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let html = REFINE_HTML
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
