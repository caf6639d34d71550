//! `ApiError`: every failure of a request as a status code and a JSON body `{"error": "..."}`
//! ([`crate::wire::ErrorBody`], with a `code` where a client must tell errors apart).

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use easeml_client::wire::{BadLine, ErrorBody, code};

/// A failed request: its status and its JSON body (a message for people, and for some errors a
/// `code` and details such as a feed's bad lines).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: message.into(),
                ..ErrorBody::default()
            },
        }
    }

    /// The same error with a machine-readable `code`.
    fn with_code(mut self, code: &str) -> ApiError {
        self.body.code = Some(code.to_owned());
        self
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

impl From<easeml_client::Error> for ApiError {
    fn from(error: easeml_client::Error) -> ApiError {
        use easeml_store::Error as StoreError;
        match error {
            easeml_client::Error::BadInput {
                errors,
                total,
                batch,
            } => {
                let bad = errors.count();
                let lines: Vec<BadLine> = errors
                    .iter()
                    .map(|error| BadLine {
                        line: error.line,
                        message: error.message.clone(),
                    })
                    .collect();
                let message = easeml_client::Error::BadInput {
                    errors,
                    total,
                    batch,
                }
                .to_string()
                .replace(" (use --skip-bad to store the good ones)", "");
                let mut error = ApiError::bad_request(message).with_code(code::BAD_INPUT);
                error.body.errors = Some(lines);
                error.body.bad = Some(bad);
                error.body.total = Some(total);
                error
            }
            easeml_client::Error::Manifest(_) | easeml_client::Error::Read(_) => {
                ApiError::bad_request(error.to_string())
            }
            easeml_client::Error::NoModel { training, .. } => {
                let mut error = ApiError::new(StatusCode::CONFLICT, error.to_string())
                    .with_code(code::NO_MODEL);
                error.body.training = Some(training);
                error
            }
            easeml_client::Error::NoEngine => ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                "this server has no engine (libtorch) to answer with; `easeml serve` has one",
            ),
            easeml_client::Error::SchemaMismatch { .. } => {
                ApiError::new(StatusCode::CONFLICT, error.to_string())
            }
            easeml_client::Error::Store(store_error) => match store_error {
                StoreError::AppExists(_) => {
                    ApiError::new(StatusCode::CONFLICT, store_error.to_string())
                        .with_code(code::APP_EXISTS)
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
        let mut response = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::PAYLOAD_TOO_LARGE
            || self.status == StatusCode::REQUEST_TIMEOUT
        {
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

impl From<crate::ServerError> for ApiError {
    fn from(error: crate::ServerError) -> ApiError {
        match error {
            crate::ServerError::Client(error) => ApiError::from(error),
            crate::ServerError::Serve { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
            }
        }
    }
}

impl From<easeml_store::Error> for ApiError {
    fn from(error: easeml_store::Error) -> ApiError {
        ApiError::from(easeml_client::Error::Store(error))
    }
}

#[cfg(test)]
mod no_engine_tests {
    use super::*;

    #[test]
    fn a_process_without_the_engine_answers_inference_with_501() {
        let error = ApiError::from(easeml_client::Error::NoEngine);
        assert_eq!(error.status, StatusCode::NOT_IMPLEMENTED);
        assert!(
            error.body.error.contains("no engine"),
            "{}",
            error.body.error
        );
    }
}
