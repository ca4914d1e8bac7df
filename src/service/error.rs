//! The one error type of the service's actions, whichever face asked: what went wrong, in words
//! that say what to change (4xx) or that the failure was not the caller's (5xx). The faces give
//! each variant its status: JSON for the API (`api::error`), a page for the web.

use crate::kb::StoreError;
use crate::service::Denied;

/// A failure of a service action.
#[derive(Debug, thiserror::Error)]
pub enum Error {
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

impl Error {
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

impl From<StoreError> for Error {
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

impl From<Denied> for Error {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::SignInRequired { .. } => Self::Unauthorized(denied.to_string()),
            Denied::UnknownRoute => Self::Forbidden(denied.to_string()),
        }
    }
}

/// `Result` of the service's actions.
pub type Result<T, E = Error> = std::result::Result<T, E>;
