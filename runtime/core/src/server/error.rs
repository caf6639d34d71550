//! `ApiError`: every failure of a request as a status code and a JSON body `{"error": "..."}`.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed request: its status, a message for people, and optional structured details that are
/// merged into the JSON body (a feed's `errors`).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            details: None,
        }
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 Not Found.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 500, with the details logged and not shown (they may name files of the server).
    pub fn internal(error: impl std::fmt::Display) -> ApiError {
        tracing::error!(%error, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal server error (the server's log has the details)",
        )
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<crate::Error> for ApiError {
    fn from(error: crate::Error) -> ApiError {
        use easeml_store::Error as StoreError;
        match error {
            crate::Error::BadInput { errors, total } => {
                let lines: Vec<Value> = errors
                    .iter()
                    .map(|error| json!({"line": error.line, "message": error.message}))
                    .collect();
                let message = crate::Error::BadInput {
                    errors: errors.clone(),
                    total,
                }
                .to_string()
                .replace(" (use --skip-bad to store the good ones)", "");
                ApiError {
                    status: StatusCode::BAD_REQUEST,
                    message,
                    details: Some(json!({"errors": lines, "total": total})),
                }
            }
            crate::Error::Manifest(_) | crate::Error::Read(_) => {
                ApiError::bad_request(error.to_string())
            }
            crate::Error::NoModel { .. } => ApiError::new(StatusCode::CONFLICT, error.to_string()),
            crate::Error::SchemaMismatch { .. } => {
                ApiError::new(StatusCode::CONFLICT, error.to_string())
            }
            crate::Error::Store(store_error) => match store_error {
                StoreError::AppExists(_) => {
                    ApiError::new(StatusCode::CONFLICT, store_error.to_string())
                }
                StoreError::NoSuchApp(_)
                | StoreError::NoSuchAppId(_)
                | StoreError::NoSuchExample { .. }
                | StoreError::NoSuchRun(_) => ApiError::not_found(store_error.to_string()),
                StoreError::Label { .. } | StoreError::NoLabels(_) => {
                    ApiError::bad_request(store_error.to_string())
                }
                other => ApiError::internal(other),
            },
            other => ApiError::internal(other),
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> ApiError {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                "the request body is larger than this server accepts (its --max-body-bytes); send the examples in smaller batches",
            )
        } else {
            ApiError::new(status, format!("cannot read the request body: {rejection}"))
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::bad_request(format!("bad path: {}", rejection.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::bad_request(format!("bad query string: {}", rejection.body_text()))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.message});
        if let (Some(Value::Object(details)), Value::Object(map)) = (self.details, &mut body) {
            map.extend(details);
        }
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is not read: the connection cannot carry another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<easeml_store::Error> for ApiError {
    fn from(error: easeml_store::Error) -> ApiError {
        ApiError::from(crate::Error::Store(error))
    }
}
