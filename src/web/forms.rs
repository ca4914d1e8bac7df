//! The pages' forms: analyze a pasted or uploaded log (or a distributed job's files), feedback,
//! notes, rule backtests, sign-in.
//! Every form is checked against the CSRF cookie before anything is done.

use axum::Form;
use axum::extract::{Extension, Multipart, Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::pages::{BacktestPage, SignIn, VERSION};
use super::session::{SESSION_COOKIE, set_cookie};
use super::{Csrf, Peer, Visitor, WebError};
use crate::http::{content_length, field_bytes};
use crate::kb::queries::FeedbackInput;
use crate::kb::rows::Verdict;
use crate::kb::writer::IncidentMeta;
use crate::service::analyze::analyze_and_store;
use crate::service::auth::verify_guarded;
use crate::service::bundle::{Upload, analyze_uploads};
use crate::service::csrf::same_secret;
use crate::service::rules::backtest_candidate;
use crate::service::snapshots::{parse_params_part, reserve_upload, store_snapshot, upload_capacity};
use crate::service::{AppState, Error as ApiError};

fn check_csrf(csrf: &Csrf, token: &str) -> Result<(), WebError> {
    // The browser's token came from a genuine cookie (a forged one was replaced by a fresh token
    // that no form can hold).
    if same_secret(&csrf.0, token) {
        Ok(())
    } else {
        Err(WebError(ApiError::BadRequest(
            "This form has expired or did not come from this site. Reload the page and submit it again."
                .into(),
        )))
    }
}

fn multipart_error(e: axum::extract::multipart::MultipartError, limit: usize) -> WebError {
    if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        WebError(ApiError::TooLarge { limit })
    } else {
        WebError(ApiError::BadRequest(format!(
            "The form could not be read: {}",
            e.body_text()
        )))
    }
}

pub(super) async fn analyze(
    State(state): State<AppState>,
    Extension(browser): Extension<Csrf>,
    mut form: Multipart,
) -> Result<Response, WebError> {
    let limit = state.config.max_body_bytes;
    let (mut csrf, mut pasted, mut uploads, mut project) = (String::new(), String::new(), Vec::new(), None);
    while let Some(field) = form.next_field().await.map_err(|e| multipart_error(e, limit))? {
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field.file_name().unwrap_or_default().to_owned();
        let bytes = field.bytes().await.map_err(|e| multipart_error(e, limit))?;
        match name.as_str() {
            "csrf" => csrf = String::from_utf8_lossy(&bytes).into_owned(),
            "log" => pasted = String::from_utf8_lossy(&bytes).into_owned(),
            // A browser sends an empty part when no file was chosen.
            "file" if !bytes.is_empty() || !file_name.is_empty() => uploads.push(Upload {
                name: if file_name.is_empty() {
                    format!("file-{}", uploads.len() + 1)
                } else {
                    file_name
                },
                bytes,
            }),
            "project" => project = Some(String::from_utf8_lossy(&bytes).trim().to_owned()),
            _ => {}
        }
    }
    check_csrf(&browser, &csrf)?;
    let meta = IncidentMeta {
        project: project.filter(|p| !p.is_empty()),
        source: Some("web".to_owned()),
        ..IncidentMeta::default()
    }
    .validated()?;
    let id = if uploads.is_empty() {
        if pasted.trim().is_empty() {
            return Err(WebError(ApiError::Unprocessable(
                "The log is empty: paste a traceback or choose a file.".into(),
            )));
        }
        analyze_and_store(&state, pasted, meta, true).await?.incident_id
    } else {
        analyze_uploads(&state, uploads, meta, true).await?.incident_id()
    };
    Ok(Redirect::to(&format!("/incidents/{}", id.unwrap_or_default())).into_response())
}

/// A snapshot attached from the incident page (multipart: csrf, snapshot file, params text).
pub(super) async fn snapshot(
    State(state): State<AppState>,
    Extension(browser): Extension<Csrf>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    mut form: Multipart,
) -> Result<Response, WebError> {
    let id: i64 = raw
        .parse()
        .map_err(|_| WebError(ApiError::NotFound(format!("There is no incident {raw}."))))?;
    let limit = state.config.snapshot_max_bytes;
    // Reserved before the form is read, held until the snapshot is stored or refused; none left:
    // the error page with 503 and Retry-After.
    let _memory = reserve_upload(&state, content_length(&headers))?;
    let capacity = upload_capacity(&state, content_length(&headers));
    let (mut csrf, mut data, mut params) = (String::new(), None, None);
    while let Some(mut field) = form.next_field().await.map_err(|e| multipart_error(e, limit))? {
        let name = field.name().unwrap_or_default().to_owned();
        let bytes = if name == "snapshot" {
            field_bytes(&mut field, capacity).await
        } else {
            field.bytes().await
        }
        .map_err(|e| multipart_error(e, limit))?;
        match name.as_str() {
            "csrf" => csrf = String::from_utf8_lossy(&bytes).into_owned(),
            "snapshot" if !bytes.is_empty() => data = Some(bytes),
            "params" if !bytes.iter().all(u8::is_ascii_whitespace) => params = Some(bytes),
            _ => {}
        }
    }
    check_csrf(&browser, &csrf)?;
    state.store.require_incident(id).await?;
    let data = data.ok_or_else(|| {
        WebError(ApiError::Unprocessable(
            "No snapshot file was chosen: pick a .safetensors or .npz file.".into(),
        ))
    })?;
    let params = match params {
        Some(text) => parse_params_part(&text)?,
        None => serde_json::Value::Object(serde_json::Map::new()),
    };
    store_snapshot(&state, id, data, params).await?;
    Ok(Redirect::to(&format!("/incidents/{id}?snapshot=queued#replay-h")).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct FeedbackForm {
    csrf: String,
    #[serde(default)]
    verdict: Option<String>,
    #[serde(default)]
    fix_worked: Option<String>,
    #[serde(default)]
    comment: Option<String>,
}

pub(super) async fn feedback(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(csrf): Extension<Csrf>,
    Path(raw): Path<String>,
    Form(form): Form<FeedbackForm>,
) -> Result<Response, WebError> {
    check_csrf(&csrf, &form.csrf)?;
    let id: i64 = raw
        .parse()
        .map_err(|_| WebError(ApiError::NotFound(format!("There is no incident {raw}."))))?;
    let input = FeedbackInput {
        rule: None,
        verdict: match form.verdict.as_deref() {
            Some("right") => Some(Verdict::Right),
            Some("wrong") => Some(Verdict::Wrong),
            _ => None,
        },
        fix_worked: match form.fix_worked.as_deref() {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        },
        comment: form.comment.filter(|c| !c.trim().is_empty()),
    };
    state.store.add_feedback(id, &input, visitor.name()).await?;
    Ok(Redirect::to(&format!("/incidents/{id}?feedback=saved#feedback-h")).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct NoteForm {
    csrf: String,
    body: String,
}

pub(super) async fn note(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(csrf): Extension<Csrf>,
    Path(raw): Path<String>,
    Form(form): Form<NoteForm>,
) -> Result<Response, WebError> {
    check_csrf(&csrf, &form.csrf)?;
    let id: i64 = raw
        .parse()
        .map_err(|_| WebError(ApiError::NotFound(format!("There is no group {raw}."))))?;
    state.store.add_note(id, &form.body, visitor.name()).await?;
    Ok(Redirect::to(&format!("/groups/{id}#notes-h")).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct BacktestForm {
    csrf: String,
    rule: String,
}

pub(super) async fn backtest(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Form(form): Form<BacktestForm>,
) -> Result<BacktestPage, WebError> {
    check_csrf(&csrf, &form.csrf)?;
    let page = match backtest_candidate(&state, &form.rule, 500).await {
        Ok(report) => BacktestPage {
            version: VERSION,
            problem: None,
            rule: report.rule,
            scanned: report.scanned,
            takes: report.takes_primary,
            matched: report
                .matched
                .into_iter()
                .map(|m| {
                    (
                        m.incident_id,
                        m.primary_before.unwrap_or_else(|| "–".into()),
                        m.primary_after.unwrap_or_else(|| "–".into()),
                        format!("{:?}", m.confidence).to_lowercase(),
                    )
                })
                .collect(),
        },
        Err(ApiError::Unprocessable(problem)) => BacktestPage {
            version: VERSION,
            problem: Some(problem),
            rule: String::new(),
            scanned: 0,
            takes: 0,
            matched: Vec::new(),
        },
        Err(other) => return Err(WebError(other)),
    };
    Ok(page)
}

pub(super) async fn signin_page(Extension(csrf): Extension<Csrf>) -> SignIn {
    SignIn {
        version: VERSION,
        csrf: csrf.0,
        problem: None,
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct SignInForm {
    csrf: String,
    token: String,
}

pub(super) async fn signin(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(Peer(peer)): Extension<Peer>,
    Form(form): Form<SignInForm>,
) -> Result<Response, WebError> {
    check_csrf(&csrf, &form.csrf)?;
    let token = form.token.trim();
    match verify_guarded(&state, token, peer).await {
        Ok(_) => {}
        Err(ApiError::Unauthorized(_)) => {
            let page = SignIn {
                version: VERSION,
                csrf: csrf.0,
                problem: Some("This token is not valid.".into()),
            };
            return Ok((axum::http::StatusCode::UNAUTHORIZED, page).into_response());
        }
        Err(other) => return Err(WebError(other)),
    }
    let mut response = Redirect::to("/").into_response();
    if let Some(cookie) = set_cookie(SESSION_COOKIE, token, true, Some(30 * 86_400)) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub(super) struct SignOutForm {
    csrf: String,
}

pub(super) async fn signout(
    Extension(csrf): Extension<Csrf>,
    Form(form): Form<SignOutForm>,
) -> Result<Response, WebError> {
    check_csrf(&csrf, &form.csrf)?;
    let mut response = Redirect::to("/signin").into_response();
    if let Some(cookie) = set_cookie(SESSION_COOKIE, "", true, Some(0)) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}
