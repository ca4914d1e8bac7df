//! `POST /api/v1/analyze`: a log in, its diagnosis out, the incident stored unless `store=false`;
//! or a distributed job's files in, the bundle's diagnosis out.
//!
//! The body is the raw log (`text/plain`, any bytes: invalid UTF-8 is decoded lossily; curl's
//! default `application/x-www-form-urlencoded` is read the same way) or JSON
//! `{log, project, source, commit, job_url, tags}`. An empty log is refused (422). Metadata can also come as query parameters.
//!
//! A bundle comes as `multipart/form-data`, each file a part with a file name (a `.zip` or
//! `.tar.gz` is unpacked; a flight-recorder pickle is taken as it is, then analysed and kept as its
//! JSON; any other binary file is left out, with a warning) and the metadata as plain fields, or
//! as JSON `{files: [{name, content}, …], project, …}` with text files. The whole body is bounded
//! by `max_body_bytes`. Files that come to one text log get today's single-log answer; several get
//! the bundle's (`"kind": "bundle"`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use serde::Deserialize;

use super::extract::{BodyLimit, QueryParams, RawBody};
use super::{ApiError, ApiResult, AppState};
use crate::kb::writer::IncidentMeta;
pub use crate::service::analyze::AnalyzeResponse;
use crate::service::analyze::analyze_and_store;
use crate::service::bundle::{Analysis, Upload, analyze_uploads};

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

/// The JSON body form: one `log`, or a bundle's `files`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalyzeJson {
    #[serde(default)]
    log: Option<String>,
    #[serde(default)]
    files: Option<Vec<JsonFile>>,
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

/// A file of the JSON body's bundle.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFile {
    name: String,
    content: String,
}

/// What the body holds.
enum Input {
    /// One log.
    Log(String),
    /// A bundle's files.
    Files(Vec<Upload>),
}

pub(super) async fn analyze(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<AnalyzeQuery>,
    request: Request,
) -> ApiResult<Json<Analysis>> {
    // Whether the caller may store was decided by the policy (`store=false` is a read).
    let store = query.store.unwrap_or(true);
    let (input, meta) = read_body(request, query).await?;
    let meta = meta.validated()?;
    let outcome = match input {
        Input::Log(log) => {
            if log.trim().is_empty() {
                return Err(ApiError::Unprocessable(
                    "the log is empty: send the log as the body (text/plain) or as {\"log\": …}".into(),
                ));
            }
            Analysis::Single(Box::new(analyze_and_store(&state, log, meta, store).await?))
        }
        Input::Files(files) => analyze_uploads(&state, files, meta, store).await?,
    };
    Ok(Json(outcome))
}

fn tags(t: Option<String>) -> Vec<String> {
    t.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

async fn read_body(request: Request, query: AnalyzeQuery) -> ApiResult<(Input, IncidentMeta)> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    if content_type.as_deref() == Some("multipart/form-data") {
        return read_multipart(request, query).await;
    }
    let RawBody(body) = RawBody::from_request(request, &()).await?;
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
            Ok((Input::Log(String::from_utf8_lossy(&body).into_owned()), meta))
        }
        Some("application/json") => {
            let parsed: AnalyzeJson = serde_json::from_slice(&body).map_err(|e| {
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
            let input = match (parsed.log, parsed.files) {
                (Some(log), None) => Input::Log(log),
                (None, Some(files)) => Input::Files(
                    files
                        .into_iter()
                        .map(|f| Upload {
                            name: f.name,
                            bytes: Bytes::from(f.content),
                        })
                        .collect(),
                ),
                (Some(_), Some(_)) => {
                    return Err(ApiError::BadRequest(
                        "send either one log as {\"log\": …} or a bundle as {\"files\": [{\"name\": …, \"content\": …}, …]}, not both".into(),
                    ));
                }
                (None, None) => {
                    return Err(ApiError::BadRequest(
                        "the JSON body has neither \"log\" nor \"files\": send {\"log\": …} or {\"files\": [{\"name\": …, \"content\": …}, …]}".into(),
                    ));
                }
            };
            Ok((input, meta))
        }
        Some(other) => Err(ApiError::UnsupportedMediaType(format!(
            "send the log as text/plain or as application/json {{\"log\": …}}, or a bundle as multipart/form-data, not {other}"
        ))),
    }
}

/// A multipart bundle: each part with a file name is a file, the plain fields are the metadata
/// (query parameters fill what they leave out).
async fn read_multipart(request: Request, query: AnalyzeQuery) -> ApiResult<(Input, IncidentMeta)> {
    let limit = request.extensions().get::<BodyLimit>().map_or(0, |l| l.0);
    let bad = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge { limit }
        } else {
            ApiError::BadRequest(format!("the multipart body cannot be read: {}", e.body_text()))
        }
    };
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::BadRequest(format!("the multipart body cannot be read: {}", e.body_text())))?;
    let mut files = Vec::new();
    let mut meta = IncidentMeta {
        project: query.project,
        source: query.source,
        commit: query.commit,
        job_url: query.job_url,
        tags: tags(query.tags),
    };
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let part = field.name().unwrap_or_default().to_owned();
        if let Some(name) = field.file_name().map(str::to_owned) {
            let bytes = field.bytes().await.map_err(bad)?;
            files.push(Upload { name, bytes });
            continue;
        }
        let value = String::from_utf8_lossy(&field.bytes().await.map_err(bad)?)
            .trim()
            .to_owned();
        match part.as_str() {
            "project" => meta.project = Some(value),
            "source" => meta.source = Some(value),
            "commit" => meta.commit = Some(value),
            "job_url" => meta.job_url = Some(value),
            "tags" => meta.tags = tags(Some(value)),
            other => {
                return Err(ApiError::BadRequest(format!(
                    "the part {other:?} has no file name: send each file as a part with its file name (curl -F 'file=@rank0.log'); the plain fields are project, source, commit, job_url and tags"
                )));
            }
        }
    }
    Ok((Input::Files(files), meta))
}
