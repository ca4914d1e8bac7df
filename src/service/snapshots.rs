//! Tensor snapshots attached to incidents: what an upload may reserve of the memory budget, how
//! it is validated (without holding its tensors), stored, and recorded with its replay job. The
//! API and the page form read the upload; everything after that is here.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::budget::Reservation;
use super::{AppState, Error, Result};
use crate::kb::codec::sha256_hex;
use crate::kb::replay::NewSnapshot;
use crate::objects::{ObjectError, new_key};
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

/// Seconds a client is told to wait when the snapshot memory budget is spent.
pub const RETRY_AFTER_SECS: u64 = 5;

/// Reserves, before its body is read, the memory an upload will buffer: its declared length, or
/// the route's limit when it sends none. (A body said to be over the limit needs nothing: it is
/// refused unread.) [`Error::Busy`] when the budget has not that much left: nothing is queued.
pub fn reserve_upload(state: &AppState, declared: Option<u64>) -> Result<Reservation> {
    let limit = state.config.snapshot_max_bytes as u64;
    let bytes = match declared {
        Some(n) if n > limit => 0,
        Some(n) => n,
        None => limit,
    };
    state
        .snapshot_memory
        .try_reserve(bytes)
        .ok_or_else(|| Error::Busy {
            retry_after_secs: RETRY_AFTER_SECS,
            detail: format!(
                "the server is busy with other snapshots; send this one again in {RETRY_AFTER_SECS} s"
            ),
        })
}

/// The room to gather an upload's snapshot into: its declared length within the route's limit
/// (0 when it sends none: the buffer then grows as the body comes).
pub fn upload_capacity(state: &AppState, declared: Option<u64>) -> usize {
    declared.map_or(0, |n| n.min(state.config.snapshot_max_bytes as u64) as usize)
}

/// Validates a snapshot (without holding its tensors: [`Snapshot::summarize`]), writes its file as
/// sent, records it with a queued job: what was accepted. Shared by the API and the page form,
/// which have reserved its bytes ([`reserve_upload`]).
pub async fn store_snapshot(
    state: &AppState,
    incident_id: i64,
    data: Bytes,
    params: serde_json::Value,
) -> Result<Accepted> {
    let limits = state.config.snapshot_limits();
    let checked = data.clone();
    let params_json = params.to_string();
    let (summary, sha256) = tokio::task::spawn_blocking(move || validate(&checked, &params_json, &limits))
        .await
        .map_err(|e| Error::Internal(format!("snapshot validation task failed: {e}")))??;
    let bytes = data.len() as i64;
    let unavailable = |e| match e {
        ObjectError::Disabled => Error::Unavailable("this server keeps no snapshots".into()),
        other => Error::Unavailable(format!("the snapshot could not be stored: {other}")),
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
fn validate(data: &[u8], params: &str, limits: &Limits) -> Result<(SnapshotSummary, String)> {
    if data.is_empty() {
        return Err(Error::Unprocessable("the snapshot is empty".into()));
    }
    let invalid = |e: crate::replay::SnapshotError| Error::Unprocessable(format!("invalid snapshot: {e}"));
    let sha256 = sha256_hex(data);
    let mut summary = Snapshot::summarize(data, limits).map_err(invalid)?;
    if params != "{}" {
        summary = summary.with_params(params.as_bytes(), limits).map_err(invalid)?;
    }
    Ok((summary, sha256))
}

/// The `params` part: a JSON object, or `key=value` lines (the page form takes either).
pub fn parse_params_part(bytes: &[u8]) -> Result<serde_json::Value> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.starts_with('{') {
        return serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| Error::Unprocessable(format!("invalid snapshot: parameters: {e}")));
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
                return Err(Error::Unprocessable(format!(
                    "invalid snapshot: parameters: {line:?} is not key=value (or send a JSON object)"
                )));
            }
        }
    }
    Ok(serde_json::Value::Object(map))
}
