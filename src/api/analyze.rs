//! `POST /api/v1/analyze`: a log in, its diagnosis out, the incident stored unless `store=false`.
//!
//! The body is the raw log (`text/plain`, any bytes: invalid UTF-8 is decoded lossily; curl's
//! default `application/x-www-form-urlencoded` is read the same way) or JSON
//! `{log, project, source, commit, job_url, tags}`. An empty log is refused (422). Metadata can also come as query parameters.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::Deserialize;

use super::extract::{QueryParams, RawBody};
use super::{ApiError, ApiResult, AppState};
use crate::kb::writer::IncidentMeta;
pub use crate::service::analyze::AnalyzeResponse;
use crate::service::analyze::analyze_and_store;

/// Query parameters of `POST /api/v1/analyze`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnalyzeQuery {
    /// `false` analyses without storing.
    store: Option<bool>,
    project: Option<String>,
    source: Option<String>,
    commit: Option<String>,
    job_url: Option<String>,
    /// Comma-separated.
    tags: Option<String>,
}

/// The JSON body form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalyzeJson {
    log: String,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    commit: Option<String>,
    #[serde(default)]
    job_url: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

pub(super) async fn analyze(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<AnalyzeQuery>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> ApiResult<Json<AnalyzeResponse>> {
    // Whether the caller may store was decided by the policy (`store=false` is a read).
    let store = query.store.unwrap_or(true);
    let (log, meta) = read_body(&headers, &body, query)?;
    if log.trim().is_empty() {
        return Err(ApiError::Unprocessable(
            "the log is empty: send the log as the body (text/plain) or as {\"log\": …}".into(),
        ));
    }
    let meta = meta.validated()?;
    let outcome = analyze_and_store(&state, log, meta, store).await?;
    Ok(Json(outcome))
}

fn read_body(headers: &HeaderMap, body: &[u8], query: AnalyzeQuery) -> ApiResult<(String, IncidentMeta)> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let tags = |t: Option<String>| -> Vec<String> {
        t.map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
    };
    match content_type.as_deref() {
        // `curl --data-binary @train.log` says form-urlencoded: its body is the log as it is.
        None
        | Some(
            "text/plain" | "application/octet-stream" | "text/x-log" | "application/x-www-form-urlencoded",
        ) => {
            let meta = IncidentMeta {
                project: query.project,
                source: query.source,
                commit: query.commit,
                job_url: query.job_url,
                tags: tags(query.tags),
            };
            Ok((String::from_utf8_lossy(body).into_owned(), meta))
        }
        Some("application/json") => {
            let parsed: AnalyzeJson = serde_json::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!("the JSON body does not have the expected shape: {e}"))
            })?;
            let meta = IncidentMeta {
                project: parsed.project.or(query.project),
                source: parsed.source.or(query.source),
                commit: parsed.commit.or(query.commit),
                job_url: parsed.job_url.or(query.job_url),
                tags: if parsed.tags.is_empty() {
                    tags(query.tags)
                } else {
                    parsed.tags
                },
            };
            Ok((parsed.log, meta))
        }
        Some(other) => Err(ApiError::UnsupportedMediaType(format!(
            "send the log as text/plain or as application/json {{\"log\": …}}, not {other}"
        ))),
    }
}
