//! Who may do what: one token per app (`Authorization: Bearer <token>`), an optional admin token for
//! registration and compiling (the operator's overview needs it configured) that also opens every
//! app's routes, and the embedded refine page's per-process token and loopback-only `Host`.

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use easeml_store::tokens::same_secret;
use easeml_store::{App, Store};

use super::{ApiError, AppState};

/// Who an app route is for and what it presents: the `{name}` of the route and the request's
/// bearer token. Every app route takes one, so the token is read in one place (no token is 401);
/// whether it is this app's token is checked with the store (`authorize_app`: 403 otherwise).
pub(crate) struct AppAccess {
    /// The app named by the route.
    pub(crate) name: String,
    /// The bearer token presented.
    pub(crate) token: String,
}

impl<S: Send + Sync> FromRequestParts<S> for AppAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
        let name = params
            .iter()
            .find(|(key, _)| *key == "name")
            .map(|(_, value)| value.to_owned())
            .ok_or_else(|| ApiError::internal("an app route without `{name}`"))?;
        let token = bearer(&parts.headers)?;
        Ok(AppAccess { name, token })
    }
}

/// The bearer token of a request.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<String, ApiError> {
    let missing = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this route needs the app's token: `Authorization: Bearer <token>`",
        )
    };
    let value = headers.get(header::AUTHORIZATION).ok_or_else(missing)?;
    let value = value.to_str().map_err(|_| missing())?;
    let (scheme, token) = value.split_once(' ').ok_or_else(missing)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(missing());
    }
    Ok(token.to_owned())
}

/// The app `name` when `token` gives access to it. A missing app and a wrong token get the same
/// 403, so that a token for one app tells nothing about the others.
pub(crate) fn authorize_app(
    state: &AppState,
    store: &Store,
    name: &str,
    token: &str,
) -> Result<App, ApiError> {
    let refused = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            format!("this token does not give access to app `{name}`"),
        )
    };
    if let Some(refine) = &state.config().refine_only {
        if name != refine.app {
            return Err(refused());
        }
        if same_secret(token, &refine.token) {
            return store.app_by_name(name)?.ok_or_else(refused);
        }
    }
    // The operator's admin token opens every app (the operator page links each app's dashboard).
    if let Some(admin) = &state.config().admin_token
        && same_secret(token, admin)
    {
        return store.app_by_name(name)?.ok_or_else(refused);
    }
    let Some(app) = store.app_by_name(name)? else {
        // The same work as a wrong token (issue 49): one more query and one hash, so the time of
        // the answer does not tell whether the app exists.
        let _ = store.verify_token(easeml_store::AppId(i64::MIN), token);
        let _ = easeml_store::tokens::matches_hash(token, UNKNOWN_APP_HASH);
        return Err(refused());
    };
    if store.verify_token(app.id, token)? {
        Ok(app)
    } else {
        Err(refused())
    }
}

/// A token hash no token has (not hex), compared against for an app that does not exist.
const UNKNOWN_APP_HASH: &str = "----------------------------------------------------------------";

/// Whether the request may register apps: the admin token when one is configured; never on the
/// embedded refine page's server.
pub(crate) fn authorize_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let config = state.config();
    if config.refine_only.is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this is an app's refine page server; register apps with `easeml serve`",
        ));
    }
    match &config.admin_token {
        None => Ok(()),
        Some(admin) => {
            let token = bearer(headers).map_err(|_| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "registering an app needs the server's admin token: `Authorization: Bearer <admin token>`",
                )
            })?;
            if same_secret(&token, admin) {
                Ok(())
            } else {
                Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "this is not the server's admin token",
                ))
            }
        }
    }
}

/// Whether the request is the operator's: the server's admin token, which must be configured (a
/// server without one has no operator, so the overview of every app is not served).
pub(crate) fn authorize_operator(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.config().refine_only.is_none() && state.config().admin_token.is_none() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this server has no admin token, so no operator's overview: start it with `easeml serve --admin-token-file FILE`",
        ));
    }
    authorize_admin(state, headers)
}

/// On the embedded refine page's server, refuses requests whose `Host` is not a loopback name:
/// a website that points its own name at 127.0.0.1 (DNS rebinding) must not reach the page and
/// its token.
pub(crate) async fn check_host(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refused) = unguarded_write_refused(state.config(), &request) {
        return refused.into_response();
    }
    if state.config().refine_only.is_some() {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .unwrap_or("");
        if !is_loopback_host(host) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "the refine page answers only to localhost, 127.0.0.1 or [::1]",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// On a server without an admin token (anyone who reaches it may register apps), a request that
/// changes state (any method but GET, HEAD, OPTIONS) is refused when a browser sent it for another
/// site: an `Origin` that is not this server's own (`http://` + the request's `Host`), or a `Host`
/// that is a name other than a loopback name (DNS rebinding: a website that points its own name at
/// this server). IP addresses and the configured listen address are accepted as `Host`.
fn unguarded_write_refused(config: &crate::Config, request: &Request) -> Option<ApiError> {
    if config.admin_token.is_some()
        || config.refine_only.is_some()
        || matches!(
            *request.method(),
            axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
        )
    {
        return None;
    }
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("");
    let listen = config.listen.to_string();
    let host_name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    let host_ok =
        is_loopback_host(host) || host == listen || host_name.parse::<std::net::IpAddr>().is_ok();
    if !host_ok {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this server has no admin token, so it takes changes only from requests addressed to localhost or an IP address, not `{}`: use http://127.0.0.1:PORT, or start it with --admin-token-file",
                host.chars().take(100).collect::<String>()
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let own = [format!("http://{host}"), format!("https://{host}")];
        if !own.iter().any(|own| own == origin) {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "a request from the web page of another site (Origin `{}`) may not change this server, which has no admin token; start it with --admin-token-file to serve other sites' pages",
                    origin.chars().take(100).collect::<String>()
                ),
            ));
        }
    }
    None
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost:9000",
            "127.0.0.1:9000",
            "[::1]:9000",
            "127.0.0.1",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example:9000",
            "",
            "10.0.0.1:9000",
            "localhost.evil.example",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn secrets_compare_by_value() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
