//! Analysing a log for a client: redacted first, analysed off the async threads when large,
//! counted, and stored as an incident (grouped by fingerprint) unless the client asked not to.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{AppState, Error, Result};
use crate::diagnose::analyze_str;
use crate::kb::now_ms;
use crate::kb::redact::redact;
use crate::kb::writer::{IncidentMeta, NewIncident, Stored};
use crate::model::Diagnosis;

/// Logs larger than this are analysed on the blocking pool, not on the async threads.
const INLINE_BYTES: usize = 256 << 10;

/// The diagnosis, with where it was stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct AnalyzeResponse {
    /// The diagnosis (the same document as `faultline analyze --format json`).
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
    /// The stored incident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident_id: Option<i64>,
    /// Its group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<i64>,
    /// Whether this incident created its group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_group: Option<bool>,
}

/// Analyses a log (redacted first) and, when `store`, commits the incident.
pub async fn analyze_and_store(
    state: &AppState,
    log: String,
    meta: IncidentMeta,
    store: bool,
) -> Result<AnalyzeResponse> {
    let started = Instant::now();
    let bytes = log.len();
    let rules = state.rules.clone();
    let work = move || {
        let log = redact(&log).into_owned();
        let diagnosis = analyze_str(&rules, &log);
        let incident = store.then(|| NewIncident::prepare(&log, &diagnosis, meta, now_ms()));
        (diagnosis, incident)
    };
    let (diagnosis, incident) = if bytes > INLINE_BYTES {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| Error::Internal(format!("analysis task failed: {e}")))?
    } else {
        work()
    };
    state
        .metrics
        .analysis(bytes, started.elapsed(), diagnosis.is_diagnosed());
    let stored = match incident {
        Some(incident) => {
            let stored: Stored = state.writer.write(incident).await?;
            state.metrics.stored();
            Some(stored)
        }
        None => None,
    };
    Ok(AnalyzeResponse {
        diagnosis,
        incident_id: stored.map(|s| s.incident_id),
        group_id: stored.and_then(|s| s.group_id),
        new_group: stored.map(|s| s.new_group),
    })
}
