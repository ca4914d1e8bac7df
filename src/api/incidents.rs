//! Incidents: listing with filters and search, one incident, similar ones, feedback, a bundle's
//! files, and the repeat offenders (GPUs and hosts that failed first in several jobs).

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;

use super::extract::{JsonBody, PathParams, QueryParams};
use super::{ApiResult, AppState, Caller};
use crate::kb::bundles::Offenders;
use crate::kb::queries::{FeedbackInput, Filter};
use crate::kb::rows::{Feedback, IncidentDetail, IncidentSummary, Page};

pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Page<IncidentSummary>>> {
    Ok(Json(state.store.list_incidents(&filter).await?))
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    PathParams(id): PathParams<i64>,
) -> ApiResult<Json<IncidentDetail>> {
    Ok(Json(state.store.incident(id).await?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct SimilarQuery {
    limit: Option<i64>,
}

pub(super) async fn similar(
    State(state): State<AppState>,
    PathParams(id): PathParams<i64>,
    QueryParams(q): QueryParams<SimilarQuery>,
) -> ApiResult<Json<Vec<IncidentSummary>>> {
    Ok(Json(state.store.similar(id, q.limit.unwrap_or(10)).await?))
}

pub(super) async fn feedback(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParams(id): PathParams<i64>,
    JsonBody(input): JsonBody<FeedbackInput>,
) -> ApiResult<(StatusCode, Json<Feedback>)> {
    let saved = state.store.add_feedback(id, &input, caller.name()).await?;
    Ok((StatusCode::CREATED, Json(saved)))
}

/// One file of a bundle incident, as it was kept: its redacted text (`text/plain`), or a
/// flight-recorder pickle's content (`application/json`).
pub(super) async fn file(
    State(state): State<AppState>,
    PathParams((id, ordinal)): PathParams<(i64, i64)>,
) -> ApiResult<impl IntoResponse> {
    let (file, text) = state.store.incident_file(id, ordinal).await?;
    Ok(([(header::CONTENT_TYPE, file.media_type())], text))
}

pub(super) async fn offenders(State(state): State<AppState>) -> ApiResult<Json<Offenders>> {
    let threshold = i64::from(state.config.offender_threshold);
    Ok(Json(state.store.offenders(threshold).await?))
}
