//! `/healthz` (the process answers), `/readyz` (the database answers too), `/metrics`.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::{ApiError, ApiResult, AppState};

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// A connectivity check for CI jobs: reads the body, answers its size (the baseline of the load
/// benchmark: everything a request costs except the analysis).
pub(super) async fn ping(super::extract::RawBody(body): super::extract::RawBody) -> Json<Value> {
    Json(json!({ "bytes": body.len() }))
}

pub(super) async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state
        .store
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("the database does not answer: {e}")))?;
    Ok(Json(
        json!({ "status": "ready", "rules": state.rules.rules().len() }),
    ))
}

pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let gauges = [
        (
            "faultline_rules",
            "Rules loaded.",
            state.rules.rules().len() as f64,
        ),
        (
            "faultline_write_queue",
            "Incidents waiting to be committed.",
            state.writer.queued() as f64,
        ),
    ];
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&gauges),
    )
}
