//! Who is calling: `Authorization: Bearer <token>` checked against the stored token hashes (and a
//! short-lived cache of the verified ones), then the rate limit for that caller. Writes need a
//! token; reads too when the server is started with `--require-token-for-reads`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, ApiResult, AppState};
use crate::kb::codec::sha256_hex;
use crate::kb::tokens::TokenOwner;

/// How long a verified token is trusted without asking the database again.
const TOKEN_TTL: Duration = Duration::from_secs(60);

/// Verified tokens by hash.
#[derive(Debug, Default)]
pub struct TokenCache(Mutex<HashMap<String, (TokenOwner, Instant)>>);

impl TokenCache {
    fn get(&self, hash: &str, now: Instant) -> Option<TokenOwner> {
        let map = self.0.lock().ok()?;
        map.get(hash)
            .filter(|(_, at)| now.duration_since(*at) < TOKEN_TTL)
            .map(|(o, _)| o.clone())
    }

    fn put(&self, hash: String, owner: TokenOwner, now: Instant) {
        if let Ok(mut map) = self.0.lock() {
            if map.len() > 10_000 {
                map.clear();
            }
            map.insert(hash, (owner, now));
        }
    }
}

/// The caller of a request: a token's owner, or anonymous.
#[derive(Debug, Clone)]
pub struct Caller(pub Option<TokenOwner>);

impl Caller {
    /// The owner, or 401 for an anonymous caller.
    pub fn require(&self) -> ApiResult<&TokenOwner> {
        self.0.as_ref().ok_or_else(|| {
            ApiError::Unauthorized(
                "this request needs `Authorization: Bearer <token>` (faultline token create --name NAME)"
                    .into(),
            )
        })
    }

    /// The owner's name, for authorship.
    pub fn name(&self) -> Option<&str> {
        self.0.as_ref().map(|o| o.name.as_str())
    }
}

/// Resolves the caller, applies the read policy and the rate limit.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let caller = match bearer(&req) {
        Some(token) => match verify(&state, &token).await {
            Ok(Some(owner)) => Caller(Some(owner)),
            Ok(None) => return ApiError::Unauthorized("the token is not valid".into()).into_response(),
            Err(e) => return e.into_response(),
        },
        None => Caller(None),
    };
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if read && state.config.require_token_for_reads && caller.0.is_none() {
        return ApiError::Unauthorized("this server requires a token for reads".into()).into_response();
    }
    let client = match &caller.0 {
        Some(owner) => format!("token:{}", owner.id),
        None => req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "ip:unknown".to_owned(), |c| format!("ip:{}", c.0.ip())),
    };
    if let Err(retry_after_secs) = state.limiter.check(&client, Instant::now()) {
        state.metrics.limited();
        return ApiError::RateLimited { retry_after_secs }.into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

fn bearer(req: &Request) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

async fn verify(state: &AppState, token: &str) -> ApiResult<Option<TokenOwner>> {
    let hash = sha256_hex(token.as_bytes());
    let now = Instant::now();
    if let Some(owner) = state.tokens.get(&hash, now) {
        return Ok(Some(owner));
    }
    let owner = state.store.verify_token(token).await?;
    if let Some(o) = &owner {
        state.tokens.put(hash, o.clone(), now);
    }
    Ok(owner)
}
