//! Incidents: listing with filters and search, one incident, similar ones, feedback.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::{JsonBody, PathParams, QueryParams};
use super::{ApiResult, AppState, Caller};
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
