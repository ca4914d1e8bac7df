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
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use serde::{Deserialize, Serialize};

use super::extract::{PathParams, QueryParams};
use super::{ApiError, ApiResult, AppState};
use crate::http::{content_length, field_bytes};
use crate::kb::replay::{Job, SnapshotRecord};
pub use crate::service::snapshots::{Accepted, parse_params_part};
use crate::service::snapshots::{reserve_upload, store_snapshot, upload_capacity};

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
    let _memory = reserve_upload(&state, content_length(request.headers()))?;
    let upload = read_upload(&state, query, request).await?;
    let accepted = store_snapshot(&state, incident_id, upload.data, upload.params).await?;
    Ok((StatusCode::ACCEPTED, Json(accepted)))
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
    let capacity = upload_capacity(state, content_length(request.headers()));
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
