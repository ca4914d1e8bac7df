//! Who is calling and whether they may: `Authorization: Bearer <token>` checked against the stored
//! token hashes (and a short-lived cache of the verified ones), the request's action decided by
//! the service's [`Policy`](crate::service::Policy), then the rate limit for that caller.
//!
//! Wrong tokens are budgeted per client address ([`GUESSES_PER_MINUTE`]): once a client has spent
//! its budget, its tokens are refused with 429 before the database is asked.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, ApiResult, AppState};
use crate::kb::codec::sha256_hex;
use crate::kb::tokens::TokenOwner;
use crate::service::Requester;
use crate::service::policy::is_local_request;

/// How long a verified token is trusted without asking the database again.
const TOKEN_TTL: Duration = Duration::from_secs(60);

/// Wrong tokens a client address may send a minute (after a burst of [`GUESS_BURST`]).
pub const GUESSES_PER_MINUTE: u32 = 20;
/// Wrong tokens a client address may send at once.
pub const GUESS_BURST: u32 = 10;

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
    /// The owner's name, for authorship.
    pub fn name(&self) -> Option<&str> {
        self.0.as_ref().map(|o| o.name.as_str())
    }
}

/// The peer's address, when the server recorded it.
pub fn peer_ip(req: &Request) -> Option<IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The rate limiter's key for a caller: the token's id, else the peer's address.
pub fn client_key(owner: Option<&TokenOwner>, peer: Option<IpAddr>) -> String {
    match (owner, peer) {
        (Some(owner), _) => format!("token:{}", owner.id),
        (None, Some(ip)) => format!("ip:{ip}"),
        (None, None) => "ip:unknown".to_owned(),
    }
}

/// Resolves the caller, asks the policy about the route's action, applies the rate limit.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let peer = peer_ip(&req);
    let caller = match bearer(req.headers()) {
        Some(token) => match verify_guarded(&state, &token, peer).await {
            Ok(owner) => Caller(Some(owner)),
            Err(e) => return e.into_response(),
        },
        None => Caller(None),
    };
    let who = Requester {
        signed_in: caller.0.is_some(),
        local: is_local_request(peer, req.headers()),
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    if let Err(denied) = state
        .policy
        .decide_route(req.method(), &route, req.uri().query(), who)
    {
        return ApiError::from(denied).into_response();
    }
    let client = client_key(caller.0.as_ref(), peer);
    if let Err(retry_after_secs) = state.limiter.check(&client, Instant::now()) {
        state.metrics.limited();
        return ApiError::RateLimited { retry_after_secs }.into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

/// The owner of `token`; 401 when it is not valid, 429 once `peer` has sent too many wrong ones.
/// Shared by the API's bearer tokens and the pages' sign-in.
pub async fn verify_guarded(state: &AppState, token: &str, peer: Option<IpAddr>) -> ApiResult<TokenOwner> {
    let key = client_key(None, peer);
    let now = Instant::now();
    if let Err(retry_after_secs) = state.guesses.peek(&key, now) {
        state.metrics.limited();
        return Err(ApiError::RateLimited { retry_after_secs });
    }
    match verify(state, token).await? {
        Some(owner) => Ok(owner),
        None => {
            let _ = state.guesses.check(&key, now);
            Err(ApiError::Unauthorized("the token is not valid".into()))
        }
    }
}

/// The owner of `token`, from the cache of verified tokens or the database.
pub async fn verify(state: &AppState, token: &str) -> ApiResult<Option<TokenOwner>> {
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
