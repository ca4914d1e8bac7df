//! The layers around every route of the server, both faces: the body limit (and an early 413 on
//! a declared length over it), the request timeout (longer for snapshot uploads), request
//! metrics.

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::api::ApiError;
use crate::api::extract::BodyLimit;
use crate::service::AppState;

/// The least time a snapshot upload is given, whatever the request timeout.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Body limit, timeout and request metrics around `routes`.
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = Duration::from_secs(state.config.request_timeout_secs.max(1));
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            refuse_oversized_bodies,
        ))
        .layer(middleware::from_fn(
            move |mut req: Request, next: Next| async move {
                req.extensions_mut().insert(BodyLimit(limit));
                // A snapshot upload (up to hundreds of MiB) may take minutes on a slow link.
                let timeout = if req.uri().path().ends_with("/snapshots") {
                    timeout.max(UPLOAD_TIMEOUT)
                } else {
                    timeout
                };
                match tokio::time::timeout(timeout, next.run(req)).await {
                    Ok(response) => response,
                    Err(_) => {
                        ApiError::Unavailable(format!("the request took longer than {} s", timeout.as_secs()))
                            .into_response()
                    }
                }
            },
        ))
        .layer(middleware::from_fn_with_state(state.clone(), count_requests))
        .with_state(state)
}

/// The routes whose body may reach `snapshot_max_bytes` (the uploads of the API and of the page);
/// every other route's limit is `max_body_bytes`.
const SNAPSHOT_ROUTES: [&str; 2] = ["/api/v1/incidents/{id}/snapshots", "/incidents/{id}/snapshots"];

/// Answers 413 at once, before a byte of the body is read, when the declared `Content-Length` is
/// over the route's limit: the API's JSON error under `/api/`, the error page elsewhere.
async fn refuse_oversized_bodies(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    let limit = if route.is_some_and(|r| SNAPSHOT_ROUTES.contains(&r)) {
        state.config.snapshot_max_bytes
    } else {
        state.config.max_body_bytes
    };
    let declared = crate::http::content_length(req.headers());
    let over = declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX));
    if !over {
        return next.run(req).await;
    }
    let refusal = ApiError::TooLarge { limit };
    if req.uri().path().starts_with("/api/") {
        refusal.into_response()
    } else {
        crate::web::WebError(refusal).into_response()
    }
}

async fn count_requests(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(req).await;
    state.metrics.request(&route, response.status().as_u16());
    response
}
