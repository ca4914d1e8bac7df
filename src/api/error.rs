//! One error shape for every failure of the API: `{"error": code, "detail": text}` with the right
//! status. 4xx explain what to change; 5xx bodies never carry internals (the cause is logged).

use axum::Json;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The service's error, as the API answers it.
pub use crate::service::Error as ApiError;

use crate::http::status_and_code;

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = status_and_code(&self);
        let detail = match &self {
            Self::Internal(cause) => {
                tracing::error!(%cause, "internal error");
                "the server failed; the cause is in its log".to_owned()
            }
            Self::Unavailable(cause) => {
                tracing::warn!(%cause, "unavailable");
                self.to_string()
            }
            other => {
                tracing::debug!(error = %other, "client error");
                other.to_string()
            }
        };
        let mut response = (status, Json(Body { error: code, detail })).into_response();
        if let Some(seconds) = self.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `Result` for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
