//! The REST API v1 (JSON) and the operational endpoints, over [`AppState`].
//!
//! Handlers call core functions and [`Store`](crate::kb::Store) methods only. Every failure has the
//! shape of [`ApiError`]. Middleware, outermost first: request metrics, timeout, the refusal of a
//! declared body over the limit, authentication and rate limit.

pub mod analyze;
pub mod auth;
pub mod error;
mod extract;
mod groups;
mod health;
mod incidents;
pub mod limit;
mod openapi;
pub mod rules;
pub mod snapshots;

pub use analyze::AnalyzeResponse;
pub use auth::{Caller, client_key, peer_ip, verify_guarded};
pub use error::{ApiError, ApiResult};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::config::Config;
use crate::kb::Store;
use crate::kb::writer::Writer;
use crate::metrics::Metrics;
use crate::rules::RuleSet;
use crate::service::Policy;
use extract::BodyLimit;
use limit::RateLimiter;

/// What every request can reach.
#[derive(Clone)]
pub struct AppState {
    /// The rule base.
    pub rules: Arc<RuleSet>,
    /// The knowledge base.
    pub store: Store,
    /// Where incidents are written.
    pub writer: Writer,
    /// The configuration.
    pub config: Arc<Config>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Rate limiter.
    pub limiter: Arc<RateLimiter>,
    /// Verified tokens.
    pub tokens: Arc<auth::TokenCache>,
    /// Wrong tokens per client address.
    pub guesses: Arc<RateLimiter>,
    /// Who may do what.
    pub policy: Policy,
    /// One rule backtest at a time.
    pub backtests: Arc<tokio::sync::Semaphore>,
    /// Signs the pages' CSRF tokens (the knowledge base's shared key once the app opens it).
    pub csrf_key: crate::web::session::CsrfKey,
    /// Where tensor snapshots are written (none until the app opens it).
    pub snapshots: crate::objects::SnapshotStore,
    /// Memory shared by the snapshot uploads in flight and the embedded replay worker.
    pub snapshot_memory: crate::replay::budget::MemoryBudget,
}

impl AppState {
    /// State over a store whose writer is already running.
    pub fn new(rules: RuleSet, store: Store, writer: Writer, config: Config) -> Self {
        Self {
            rules: Arc::new(rules),
            store,
            writer,
            limiter: Arc::new(RateLimiter::new(
                config.rate_limit_per_minute,
                config.rate_limit_burst,
            )),
            guesses: Arc::new(RateLimiter::new(auth::GUESSES_PER_MINUTE, auth::GUESS_BURST)),
            policy: config.policy(),
            backtests: Arc::new(tokio::sync::Semaphore::new(1)),
            csrf_key: crate::web::session::CsrfKey::random(),
            snapshot_memory: crate::replay::budget::MemoryBudget::new(
                config.snapshot_memory_budget_bytes as u64,
            ),
            config: Arc::new(config),
            metrics: Arc::new(Metrics::default()),
            tokens: Arc::new(auth::TokenCache::default()),
            snapshots: crate::objects::SnapshotStore::disabled(),
        }
    }
}

/// The API and operational routes, without the server-wide layers ([`with_layers`] adds them).
pub fn routes(state: AppState) -> Router<AppState> {
    let snapshot_limit = DefaultBodyLimit::max(state.config.snapshot_max_bytes);
    let api = Router::new()
        .route("/api/v1/analyze", post(analyze::analyze))
        .route("/api/v1/incidents", get(incidents::list))
        .route("/api/v1/incidents/{id}", get(incidents::get_one))
        .route("/api/v1/incidents/{id}/similar", get(incidents::similar))
        .route("/api/v1/incidents/{id}/feedback", post(incidents::feedback))
        .route(
            "/api/v1/incidents/{id}/snapshots",
            post(snapshots::upload).layer(snapshot_limit),
        )
        .route("/api/v1/replay/jobs/{id}", get(snapshots::job))
        .route("/api/v1/groups", get(groups::list))
        .route("/api/v1/groups/{id}", get(groups::get_one))
        .route("/api/v1/groups/{id}/notes", post(groups::add_note))
        .route("/api/v1/rules", get(rules::list))
        .route("/api/v1/rules/backtest", post(rules::backtest))
        .route("/api/v1/rules/{id}", get(rules::get_one))
        .route("/api/v1/openapi.json", get(openapi::document))
        .route("/api/v1/ping", post(health::ping))
        .route_layer(middleware::from_fn_with_state(state, auth::authenticate));
    let ops = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics));
    api.merge(ops)
}

/// The API alone with the server-wide layers (the web pages are added by `app`).
pub fn router(state: AppState) -> Router {
    let routes = routes(state.clone())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    with_layers(routes, state)
}

/// The least time a snapshot upload is given, whatever the request timeout.
pub(crate) const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Body limit, timeout and request metrics around `routes`.
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = Duration::from_secs(state.config.request_timeout_secs.max(1));
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            refuse_oversized_bodies,
        ))
        .layer(middleware::from_fn(
            move |mut req: Request, next: Next| async move {
                req.extensions_mut().insert(BodyLimit(limit));
                // A snapshot upload (up to hundreds of MiB) may take minutes on a slow link.
                let timeout = if req.uri().path().ends_with("/snapshots") {
                    timeout.max(UPLOAD_TIMEOUT)
                } else {
                    timeout
                };
                match tokio::time::timeout(timeout, next.run(req)).await {
                    Ok(response) => response,
                    Err(_) => {
                        ApiError::Unavailable(format!("the request took longer than {} s", timeout.as_secs()))
                            .into_response()
                    }
                }
            },
        ))
        .layer(middleware::from_fn_with_state(state.clone(), count_requests))
        .with_state(state)
}

/// The routes whose body may reach `snapshot_max_bytes` (the uploads of the API and of the page);
/// every other route's limit is `max_body_bytes`.
const SNAPSHOT_ROUTES: [&str; 2] = ["/api/v1/incidents/{id}/snapshots", "/incidents/{id}/snapshots"];

/// Answers 413 at once, before a byte of the body is read, when the declared `Content-Length` is
/// over the route's limit: the API's JSON error under `/api/`, the error page elsewhere.
async fn refuse_oversized_bodies(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
    let limit = if route.is_some_and(|r| SNAPSHOT_ROUTES.contains(&r)) {
        state.config.snapshot_max_bytes
    } else {
        state.config.max_body_bytes
    };
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let over = declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX));
    if !over {
        return next.run(req).await;
    }
    let refusal = ApiError::TooLarge { limit };
    if req.uri().path().starts_with("/api/") {
        refusal.into_response()
    } else {
        crate::web::WebError(refusal).into_response()
    }
}

async fn count_requests(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(req).await;
    state.metrics.request(&route, response.status().as_u16());
    response
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no route {}", uri.path()))
}

/// A known route asked with a method it does not take (axum adds `Allow`).
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not a method of {}", uri.path()))
}
