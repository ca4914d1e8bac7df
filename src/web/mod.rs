//! The web pages: paste a traceback and read the diagnosis; browse incidents, groups and rules.
//!
//! Server-rendered askama templates (templates/), one stylesheet and one small script served by
//! the binary, no external resource. Every form carries a CSRF token; every response carries a
//! Content-Security-Policy that allows only the server's own files, and a form is taken only from
//! a page of this site (its `Origin`, else its `Referer`). Who may read and write is the service's
//! [`Policy`](crate::service::Policy), the same as for the API: a page the visitor may not read
//! sends them to the sign-in (an API token kept in an HttpOnly cookie).

mod browse;
pub mod bundles;
mod forms;
pub mod pages;
pub mod session;
pub mod timeline;
pub mod views;

use std::time::Instant;

use askama::Template;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::http::access::{decide_request, is_local_request};
use crate::http::peer_ip;
use crate::kb::tokens::TokenOwner;
use crate::service::AppState;
use crate::service::Error as ApiError;
use crate::service::auth::{client_key, verify_guarded};
use crate::service::{Action, Denied, Requester};
use pages::{ErrorPage, VERSION};
use session::{CSRF_COOKIE, SESSION_COOKIE, cookie, same_origin, set_cookie};

/// The policy: only this server's own scripts, styles and forms.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The CSRF token of this browser (from its cookie, or new).
#[derive(Debug, Clone)]
pub struct Csrf(pub String);

/// Which forms the visitor may send, by the same policy that will judge them: a page shows a
/// form only to whom it will accept it from, and a sign-in link to the others.
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    /// Store incidents, feedback, notes, snapshots.
    pub write: bool,
    /// Backtest rules.
    pub administer: bool,
}

/// The visitor's address, when the server recorded it.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub Option<std::net::IpAddr>);

/// Who uses the pages: a signed-in token owner, or anonymous.
#[derive(Debug, Clone)]
pub struct Visitor(pub Option<TokenOwner>);

impl Visitor {
    /// Name to sign notes and feedback with.
    pub fn name(&self) -> Option<&str> {
        self.0.as_ref().map(|o| o.name.as_str())
    }
}

/// The pages and their assets.
pub fn router(state: AppState) -> Router<AppState> {
    let snapshot_limit = axum::extract::DefaultBodyLimit::max(state.config.snapshot_max_bytes);
    Router::new()
        .route("/", get(browse::home))
        .route("/analyze", post(forms::analyze))
        .route("/incidents", get(browse::incidents))
        .route("/incidents/{id}", get(browse::incident))
        .route("/incidents/{id}/log", get(browse::raw_log))
        .route("/incidents/{id}/files/{file}", get(browse::incident_file))
        .route("/incidents/{id}/feedback", post(forms::feedback))
        .route(
            "/incidents/{id}/snapshots",
            post(forms::snapshot).layer(snapshot_limit),
        )
        .route("/groups", get(browse::groups))
        .route("/groups/{id}", get(browse::group))
        .route("/groups/{id}/notes", post(forms::note))
        .route("/offenders", get(browse::offenders))
        .route("/rules", get(browse::rules))
        .route("/rules/backtest", post(forms::backtest))
        .route("/rules/{id}", get(browse::rule))
        .route("/signin", get(forms::signin_page).post(forms::signin))
        .route("/signout", post(forms::signout))
        .route_layer(middleware::from_fn_with_state(state.clone(), session_layer))
        .route(
            "/static/app.css",
            get(|| asset("text/css; charset=utf-8", include_str!("../../static/app.css"))),
        )
        .route(
            "/static/app.js",
            get(|| {
                asset(
                    "text/javascript; charset=utf-8",
                    include_str!("../../static/app.js"),
                )
            }),
        )
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// Security headers for every response of the server (the API's JSON too).
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// CSRF cookie, the sign-in, the policy's decision, the same-origin check of forms, and the
/// per-client rate limit of the pages.
async fn session_layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let existing = cookie(req.headers(), CSRF_COOKIE)
        .filter(|c| state.csrf_key.made(c))
        .map(str::to_owned);
    let fresh = existing.is_none();
    let csrf = existing.unwrap_or_else(|| state.csrf_key.new_token());
    req.extensions_mut().insert(Csrf(csrf.clone()));

    let peer = peer_ip(&req);
    let session = cookie(req.headers(), SESSION_COOKIE).map(str::to_owned);
    // A session cookie is a token like a bearer one: a wrong one spends the client's budget of
    // guesses, and is cleared so that a revoked token costs its browser one guess, not one a page.
    let (owner, stale_session) = match session {
        Some(token) => match verify_guarded(&state, &token, peer).await {
            Ok(owner) => (Some(owner), false),
            Err(ApiError::Unauthorized(_)) => (None, true),
            Err(other) => return WebError(other).into_response(),
        },
        None => (None, false),
    };
    let who = Requester {
        signed_in: owner.is_some(),
        local: is_local_request(peer, req.headers()),
    };
    let is_read = matches!(*req.method(), Method::GET | Method::HEAD);
    match decide_request(&state.policy, &req, who) {
        Ok(_) => {}
        Err(Denied::SignInRequired { .. }) if is_read => return Redirect::to("/signin").into_response(),
        Err(denied) => return WebError(denied.into()).into_response(),
    }
    if !is_read && !same_origin(req.headers()) {
        return WebError(ApiError::Forbidden(
            "This form was not sent from a page of this site (its Origin or Referer names another). Open the page on this server and submit it there."
                .into(),
        ))
        .into_response();
    }
    let client = client_key(owner.as_ref(), peer);
    if let Err(retry_after_secs) = state.limiter.check(&client, Instant::now()) {
        state.metrics.limited();
        return WebError(ApiError::RateLimited { retry_after_secs }).into_response();
    }
    req.extensions_mut().insert(Allowed {
        write: state.policy.decide(Action::StoreIncident, who).is_ok(),
        administer: state.policy.decide(Action::BacktestRule, who).is_ok(),
    });
    req.extensions_mut().insert(Visitor(owner));
    req.extensions_mut().insert(Peer(peer));
    let mut response = next.run(req).await;
    if fresh && let Some(v) = set_cookie(CSRF_COOKIE, &csrf, false, None) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    if stale_session && let Some(v) = set_cookie(SESSION_COOKIE, "", true, Some(0)) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// A failure shown as a page in the site's style, with the right status.
#[derive(Debug)]
pub struct WebError(pub ApiError);

impl From<ApiError> for WebError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl From<crate::kb::StoreError> for WebError {
    fn from(e: crate::kb::StoreError) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (status, _) = crate::http::status_and_code(&self.0);
        let heading = match status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::METHOD_NOT_ALLOWED => "Not a page",
            StatusCode::PAYLOAD_TOO_LARGE => "Too large",
            StatusCode::TOO_MANY_REQUESTS => "Too many requests",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::UNAUTHORIZED => "Sign in needed",
            s if s.is_server_error() => "Something went wrong",
            _ => "This request cannot be served",
        };
        let detail = match &self.0 {
            ApiError::Internal(cause) => {
                tracing::error!(%cause, "internal error on a page");
                "The server failed; the cause is in its log.".to_owned()
            }
            ApiError::TooLarge { limit } => format!(
                "The log is larger than this server accepts ({}). Upload the last part of it: the failure is usually at the end.",
                human_bytes(*limit)
            ),
            other => other.to_string(),
        };
        let page = ErrorPage {
            version: VERSION,
            status: status.as_u16(),
            heading: heading.to_owned(),
            detail,
        };
        let body = page.render().unwrap_or_else(|_| "error".to_owned());
        let mut response = (status, Html(body)).into_response();
        if let Some(seconds) = self.0.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `16 MiB`.
pub fn human_bytes(n: usize) -> String {
    crate::rules::conditions::human_size(n as u64).replace(".00", "")
}

/// A page's address asked with a method it does not take — typically a form's target opened as a
/// link (`Allow` is added by axum).
pub fn method_not_allowed(method: &axum::http::Method, uri: &axum::http::Uri) -> Response {
    let hint = if method == axum::http::Method::GET {
        " It receives a form's submission: go back to the page with the form."
    } else {
        ""
    };
    WebError(ApiError::MethodNotAllowed(format!(
        "{} does not answer {method}.{hint}",
        uri.path()
    )))
    .into_response()
}

/// The 404 page for paths no route serves.
pub fn not_found(uri: &axum::http::Uri) -> Response {
    WebError(ApiError::NotFound(format!("There is no page at {}.", uri.path()))).into_response()
}
