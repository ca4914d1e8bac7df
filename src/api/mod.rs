//! The REST API v1 (JSON) and the operational endpoints: a thin adapter over the service's
//! actions ([`crate::service`]) that reads requests and writes JSON. Every failure has the shape
//! of [`ApiError`]. Its own middleware resolves the caller (a bearer token), asks the service's
//! policy about the route and applies the rate limit; the server-wide layers are the app's.

pub mod analyze;
pub mod auth;
pub mod error;
pub mod extract;
mod groups;
mod health;
mod incidents;
mod openapi;
pub mod rules;
pub mod snapshots;

pub use crate::service::AppState;
pub use crate::service::auth::{client_key, verify_guarded};
pub use analyze::AnalyzeResponse;
pub use auth::Caller;
pub use error::{ApiError, ApiResult};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};

/// The API and operational routes, without the server-wide layers ([`with_layers`] adds them).
pub fn routes(state: AppState) -> Router<AppState> {
    let snapshot_limit = DefaultBodyLimit::max(state.config.snapshot_max_bytes);
    let api = Router::new()
        .route("/api/v1/analyze", post(analyze::analyze))
        .route("/api/v1/incidents", get(incidents::list))
        .route("/api/v1/incidents/{id}", get(incidents::get_one))
        .route("/api/v1/incidents/{id}/similar", get(incidents::similar))
        .route("/api/v1/incidents/{id}/feedback", post(incidents::feedback))
        .route("/api/v1/incidents/{id}/files/{file}", get(incidents::file))
        .route("/api/v1/offenders", get(incidents::offenders))
        .route(
            "/api/v1/incidents/{id}/snapshots",
            post(snapshots::upload).layer(snapshot_limit),
        )
        .route("/api/v1/replay/jobs/{id}", get(snapshots::job))
        .route("/api/v1/groups", get(groups::list))
        .route("/api/v1/groups/{id}", get(groups::get_one))
        .route("/api/v1/groups/{id}/notes", post(groups::add_note))
        .route("/api/v1/rules", get(rules::list))
        .route("/api/v1/rules/backtest", post(rules::backtest))
        .route("/api/v1/rules/{id}", get(rules::get_one))
        .route("/api/v1/openapi.json", get(openapi::document))
        .route("/api/v1/ping", post(health::ping))
        .route_layer(middleware::from_fn_with_state(state, auth::authenticate));
    let ops = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics));
    api.merge(ops)
}

/// A path no API route serves.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no route {}", uri.path()))
}

/// A known route asked with a method it does not take (axum adds `Allow`).
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not a method of {}", uri.path()))
}
