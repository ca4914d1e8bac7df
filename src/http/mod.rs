//! What the two HTTP faces (the API and the pages) share: the status of each service error, the
//! peer's address, the declared body length, a multipart field into one buffer.

pub mod access;

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, StatusCode, header};

use crate::service::Error;

/// The peer's address, when the server recorded it.
pub fn peer_ip(req: &Request) -> Option<IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The body length a request declares.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A multipart field whole, chunk by chunk into one buffer of `capacity` bytes (see
/// `service::snapshots::upload_capacity`): no regrowth, no second copy.
pub async fn field_bytes(field: &mut Field<'_>, capacity: usize) -> Result<Bytes, MultipartError> {
    let mut data = Vec::with_capacity(capacity);
    while let Some(chunk) = field.chunk().await? {
        data.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(data))
}

/// The status and machine-readable code of a service error.
pub fn status_and_code(error: &Error) -> (StatusCode, &'static str) {
    match error {
        Error::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        Error::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
        Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
        Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        Error::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
        Error::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        Error::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        Error::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable"),
        Error::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
        Error::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
        Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        Error::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}
