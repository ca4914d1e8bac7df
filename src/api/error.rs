//! One error shape for every failure of the API: `{"error": code, "detail": text}` with the right
//! status. 4xx explain what to change; 5xx bodies never carry internals (the cause is logged).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::kb::StoreError;
use crate::service::Denied;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 401: a token is missing or wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the request is refused whoever asks (a form from another site, a route without an
    /// access rule).
    #[error("{0}")]
    Forbidden(String),
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists, not with this method.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 413: the body is larger than the limit.
    #[error("the request body is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// 415: a content type the route does not take.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: well-formed but not valid (a rule that does not compile, feedback without content).
    #[error("{0}")]
    Unprocessable(String),
    /// 429 with Retry-After.
    #[error("too many requests; retry in {retry_after_secs} s")]
    RateLimited {
        /// Seconds until a request is allowed again.
        retry_after_secs: u64,
    },
    /// 503 with Retry-After: a budget the request needs (snapshot memory) is spent for now.
    #[error("{detail}")]
    Busy {
        /// Seconds after which a retry may find room.
        retry_after_secs: u64,
        /// What is busy.
        detail: String,
    },
    /// 503: the database or the writer is unavailable, or the request timed out.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a bug or a failure that is not the client's.
    #[error("internal error")]
    Internal(String),
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    detail: String,
}

impl ApiError {
    /// Status and machine-readable code.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            Self::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
            Self::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl ApiError {
    /// Seconds the client is told to wait (`Retry-After`), for the errors that pass.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_secs } | Self::Busy { retry_after_secs, .. } => {
                Some(*retry_after_secs)
            }
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
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

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => Self::NotFound(format!("{what} not found")),
            StoreError::Invalid(why) => Self::Unprocessable(why),
            StoreError::Unavailable(why) => Self::Unavailable(why),
            StoreError::Db(sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_)) => {
                Self::Unavailable("the database is unavailable".into())
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::SignInRequired { .. } => Self::Unauthorized(denied.to_string()),
            Denied::UnknownRoute => Self::Forbidden(denied.to_string()),
        }
    }
}

/// `Result` for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
