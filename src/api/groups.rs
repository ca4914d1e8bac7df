//! Groups: listing, one group with its history, notes.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::{JsonBody, PathParams, QueryParams};
use super::{ApiError, ApiResult, AppState, Caller};
use crate::kb::queries::Filter;
use crate::kb::rows::{GroupDetail, GroupSummary, Note, Page};

pub(super) async fn list(
    State(state): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Page<GroupSummary>>> {
    if filter.diagnosed.is_some() {
        return Err(ApiError::BadRequest(
            "unknown query parameter `diagnosed` for groups: it filters incidents".into(),
        ));
    }
    Ok(Json(state.store.list_groups(&filter).await?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct GroupQuery {
    /// Days of history (default 30).
    days: Option<i64>,
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    PathParams(id): PathParams<i64>,
    QueryParams(q): QueryParams<GroupQuery>,
) -> ApiResult<Json<GroupDetail>> {
    Ok(Json(state.store.group(id, q.days.unwrap_or(30)).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewNote {
    body: String,
}

pub(super) async fn add_note(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathParams(id): PathParams<i64>,
    JsonBody(note): JsonBody<NewNote>,
) -> ApiResult<(StatusCode, Json<Note>)> {
    let saved = state.store.add_note(id, &note.body, caller.name()).await?;
    Ok((StatusCode::CREATED, Json(saved)))
}
