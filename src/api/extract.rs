//! Extractors whose rejections come out in the API's error shape instead of axum's plain text.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

fn from_status(status: StatusCode, text: String, limit: usize) -> ApiError {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge { limit },
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(text),
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::Unprocessable(text),
        _ => ApiError::BadRequest(text),
    }
}

/// The configured body limit, put in the request extensions by the router.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

fn limit_of(parts_ext: &axum::http::Extensions) -> usize {
    parts_ext.get::<BodyLimit>().map_or(0, |l| l.0)
}

/// The raw body.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = limit_of(req.extensions());
        Bytes::from_request(req, state)
            .await
            .map(Self)
            .map_err(|e: BytesRejection| from_status(e.status(), e.body_text(), limit))
    }
}

/// A JSON body.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = limit_of(req.extensions());
        axum::Json::<T>::from_request(req, state)
            .await
            .map(|j| Self(j.0))
            .map_err(|e: JsonRejection| from_status(e.status(), e.body_text(), limit))
    }
}

/// Query parameters.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e: QueryRejection| ApiError::BadRequest(e.body_text()))
    }
}

/// Path parameters.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Self(p.0))
            .map_err(|e: PathRejection| match e.status() {
                StatusCode::NOT_FOUND => ApiError::NotFound(e.body_text()),
                _ => ApiError::BadRequest(e.body_text()),
            })
    }
}
