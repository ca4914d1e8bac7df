//! Tensor snapshots and replay jobs: `POST /api/v1/incidents/{id}/snapshots` (a raw safetensors /
//! `.npz` body with parameters in the query string, or multipart with a `snapshot` file part and
//! an optional `params` JSON part) and `GET /api/v1/replay/jobs/{id}`.
//!
//! A snapshot is validated before anything is stored, then written to the object store, then
//! recorded with its job in one transaction; only then is it acknowledged (202).
//!
//! Memory: before its body is read, an upload reserves the bytes it will buffer (its
//! `Content-Length`) in the server's snapshot memory budget, and is answered 503 with
//! `Retry-After` when too little is left ([`reserve_upload`]). The body is gathered once, into a
//! buffer of that size; validation streams an `.npz`'s members through the inflater into a
//! counter ([`Snapshot::summarize`]), so it holds no tensor whatever they inflate to. The file
//! stored is the upload as sent: the worker that runs its job inflates it, once.

use std::collections::BTreeMap;
use std::pin::Pin;

use axum::Json;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::{Deserialize, Serialize};

use super::extract::{PathParams, QueryParams};
use super::{ApiError, ApiResult, AppState};
use crate::kb::codec::sha256_hex;
use crate::kb::replay::{Job, NewSnapshot, SnapshotRecord};
use crate::objects::{ObjectError, new_key};
use crate::replay::budget::Reservation;
use crate::replay::snapshot::SnapshotSummary;
use crate::replay::{Limits, Snapshot};

/// The answer to an upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The stored snapshot.
    pub snapshot_id: i64,
    /// The replay job queued for it.
    pub job_id: i64,
    /// Where to follow the job.
    pub status_url: String,
}

/// A job with its snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job: state, attempts, results, error.
    #[serde(flatten)]
    pub job: Job,
    /// The snapshot it checks.
    pub snapshot: SnapshotRecord,
}

/// A snapshot read from a request, before validation.
struct Upload {
    data: Bytes,
    params: serde_json::Value,
}

pub(super) async fn upload(
    State(state): State<AppState>,
    PathParams(incident_id): PathParams<i64>,
    QueryParams(query): QueryParams<BTreeMap<String, String>>,
    request: Request,
) -> ApiResult<(StatusCode, Json<Accepted>)> {
    state.store.require_incident(incident_id).await?;
    // Held until the upload is stored or refused.
    let _memory = reserve_upload(&state, request.headers())?;
    let upload = read_upload(&state, query, request).await?;
    let accepted = store_snapshot(&state, incident_id, upload.data, upload.params).await?;
    Ok((StatusCode::ACCEPTED, Json(accepted)))
}

/// Seconds a client is told to wait when the snapshot memory budget is spent.
pub const RETRY_AFTER_SECS: u64 = 5;

/// Reserves, before its body is read, the memory an upload will buffer: its `Content-Length`, or
/// the route's limit when it sends none. (A body said to be over the limit needs nothing: it is
/// refused unread.) [`ApiError::Busy`] when the budget has not that much left: nothing is queued.
pub fn reserve_upload(state: &AppState, headers: &HeaderMap) -> ApiResult<Reservation> {
    let limit = state.config.snapshot_max_bytes as u64;
    let bytes = match content_length(headers) {
        Some(n) if n > limit => 0,
        Some(n) => n,
        None => limit,
    };
    state
        .snapshot_memory
        .try_reserve(bytes)
        .ok_or_else(|| ApiError::Busy {
            retry_after_secs: RETRY_AFTER_SECS,
            detail: format!(
                "the server is busy with other snapshots; send this one again in {RETRY_AFTER_SECS} s"
            ),
        })
}

/// The room to gather an upload's snapshot into: its `Content-Length` within the route's limit
/// (0 when it sends none: the buffer then grows as the body comes).
pub fn upload_capacity(state: &AppState, headers: &HeaderMap) -> usize {
    content_length(headers).map_or(0, |n| n.min(state.config.snapshot_max_bytes as u64) as usize)
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A multipart field whole, chunk by chunk into one buffer of `capacity` bytes (see
/// [`upload_capacity`]): no regrowth, no second copy.
pub async fn field_bytes(field: &mut Field<'_>, capacity: usize) -> Result<Bytes, MultipartError> {
    let mut data = Vec::with_capacity(capacity);
    while let Some(chunk) = field.chunk().await? {
        data.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(data))
}

/// A raw body whole, chunk by chunk into one buffer of `capacity` bytes; over `limit`: 413.
async fn body_bytes(mut body: Body, capacity: usize, limit: usize) -> ApiResult<Bytes> {
    let mut data = Vec::with_capacity(capacity);
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| ApiError::BadRequest(format!("the body could not be read: {e}")))?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if data.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge { limit });
        }
        data.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(data))
}

/// Validates a snapshot (without holding its tensors: [`Snapshot::summarize`]), writes its file as
/// sent, records it with a queued job: what was accepted. Shared by the API and the page form,
/// which have reserved its bytes ([`reserve_upload`]).
pub async fn store_snapshot(
    state: &AppState,
    incident_id: i64,
    data: Bytes,
    params: serde_json::Value,
) -> ApiResult<Accepted> {
    let limits = Limits::server(&state.config);
    let checked = data.clone();
    let params_json = params.to_string();
    let (summary, sha256) = tokio::task::spawn_blocking(move || validate(&checked, &params_json, &limits))
        .await
        .map_err(|e| ApiError::Internal(format!("snapshot validation task failed: {e}")))??;
    let bytes = data.len() as i64;
    let unavailable = |e| match e {
        ObjectError::Disabled => ApiError::Unavailable("this server keeps no snapshots".into()),
        other => ApiError::Unavailable(format!("the snapshot could not be stored: {other}")),
    };
    let object_key = new_key(&sha256).map_err(unavailable)?;
    state
        .snapshots
        .put(&object_key, data)
        .await
        .map_err(unavailable)?;
    let snapshot = NewSnapshot {
        incident_id,
        sha256,
        object_key,
        bytes,
        summary,
        params,
        stored: true,
    };
    let submitted = state
        .store
        .submit_snapshot(&snapshot, state.config.replay_max_attempts)
        .await;
    let (snapshot_id, job_id) = match submitted {
        Ok(ids) => ids,
        Err(e) => {
            // No row names the file (the key is this upload's own): take it back, so that a
            // client retrying while the database is down leaves no orphans. The caller gets the
            // database's error either way.
            if let Err(cleanup) = state.snapshots.delete(&snapshot.object_key).await {
                tracing::warn!(error = %cleanup, key = snapshot.object_key, "cannot delete an unrecorded snapshot file");
            }
            return Err(e.into());
        }
    };
    Ok(Accepted {
        snapshot_id,
        job_id,
        status_url: format!("/api/v1/replay/jobs/{job_id}"),
    })
}

/// Validates the snapshot (CPU work; memory: one `.npy` header at a time): its summary and SHA-256.
fn validate(data: &[u8], params: &str, limits: &Limits) -> ApiResult<(SnapshotSummary, String)> {
    if data.is_empty() {
        return Err(ApiError::Unprocessable("the snapshot is empty".into()));
    }
    let invalid = |e: crate::replay::SnapshotError| ApiError::Unprocessable(format!("invalid snapshot: {e}"));
    let sha256 = sha256_hex(data);
    let mut summary = Snapshot::summarize(data, limits).map_err(invalid)?;
    if params != "{}" {
        summary = summary.with_params(params.as_bytes(), limits).map_err(invalid)?;
    }
    Ok((summary, sha256))
}

async fn read_upload(
    state: &AppState,
    query: BTreeMap<String, String>,
    request: Request,
) -> ApiResult<Upload> {
    let limit = state.config.snapshot_max_bytes;
    let too_large = |status: StatusCode, text: String| {
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge { limit }
        } else {
            ApiError::BadRequest(text)
        }
    };
    let capacity = upload_capacity(state, request.headers());
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    match content_type.as_deref() {
        None | Some("application/octet-stream") => {
            if content_length(request.headers()).is_some_and(|n| n > limit as u64) {
                return Err(ApiError::TooLarge { limit });
            }
            let data = body_bytes(request.into_body(), capacity, limit).await?;
            Ok(Upload {
                data,
                params: params_from_query(query),
            })
        }
        Some("multipart/form-data") => {
            let mut form = Multipart::from_request(request, state)
                .await
                .map_err(|e| too_large(e.status(), e.body_text()))?;
            let (mut data, mut params) = (None, None);
            while let Some(mut field) = form
                .next_field()
                .await
                .map_err(|e| too_large(e.status(), e.body_text()))?
            {
                let name = field.name().unwrap_or_default().to_owned();
                let bytes = if name == "snapshot" {
                    field_bytes(&mut field, capacity).await
                } else {
                    field.bytes().await
                }
                .map_err(|e| too_large(e.status(), e.body_text()))?;
                match name.as_str() {
                    "snapshot" => data = Some(bytes),
                    "params" if !bytes.iter().all(u8::is_ascii_whitespace) => {
                        params = Some(parse_params_part(&bytes)?)
                    }
                    _ => {}
                }
            }
            let data =
                data.ok_or_else(|| ApiError::Unprocessable("the form has no `snapshot` file part".into()))?;
            Ok(Upload {
                data,
                params: params.unwrap_or_else(|| params_from_query(query)),
            })
        }
        Some(other) => Err(ApiError::UnsupportedMediaType(format!(
            "send the snapshot as application/octet-stream or multipart/form-data, not {other}"
        ))),
    }
}

/// Query parameters as a JSON object of strings.
fn params_from_query(query: BTreeMap<String, String>) -> serde_json::Value {
    serde_json::Value::Object(
        query
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect(),
    )
}

/// The `params` part: a JSON object, or `key=value` lines (the page form takes either).
pub fn parse_params_part(bytes: &[u8]) -> ApiResult<serde_json::Value> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.starts_with('{') {
        return serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| ApiError::Unprocessable(format!("invalid snapshot: parameters: {e}")));
    }
    let mut map = serde_json::Map::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                map.insert(
                    k.trim().to_owned(),
                    serde_json::Value::String(v.trim().to_owned()),
                );
            }
            _ => {
                return Err(ApiError::Unprocessable(format!(
                    "invalid snapshot: parameters: {line:?} is not key=value (or send a JSON object)"
                )));
            }
        }
    }
    Ok(serde_json::Value::Object(map))
}

pub(super) async fn job(
    State(state): State<AppState>,
    PathParams(id): PathParams<i64>,
) -> ApiResult<Json<JobStatus>> {
    let job = state.store.job(id).await?;
    let snapshot = state.store.snapshot(job.snapshot_id).await?;
    Ok(Json(JobStatus { job, snapshot }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_params_part_is_json_or_key_value_lines() {
        let json = parse_params_part(br#"{"num_classes": 2}"#).ok();
        assert_eq!(json, Some(serde_json::json!({"num_classes": 2})));
        let lines = parse_params_part(b"num_classes=2\n role.labels = y \n").ok();
        assert_eq!(
            lines,
            Some(serde_json::json!({"num_classes": "2", "role.labels": "y"}))
        );
        assert!(parse_params_part(b"num_classes").is_err());
    }
}
