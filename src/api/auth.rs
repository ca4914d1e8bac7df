//! Who is calling and whether they may: `Authorization: Bearer <token>` checked against the stored
//! token hashes (and a short-lived cache of the verified ones), the request's action decided by
//! the service's [`Policy`](crate::service::Policy), then the rate limit for that caller.
//!
//! Wrong tokens are budgeted per client address ([`GUESSES_PER_MINUTE`]): once a client has spent
//! its budget, its tokens are refused with 429 before the database is asked.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, AppState};
use crate::http::access::{decide_request, is_local_request};
use crate::http::peer_ip;
use crate::kb::tokens::TokenOwner;
use crate::service::Requester;
use crate::service::auth::{client_key, verify_guarded};

/// The caller of a request: a token's owner, or anonymous.
#[derive(Debug, Clone)]
pub struct Caller(pub Option<TokenOwner>);

impl Caller {
    /// The owner's name, for authorship.
    pub fn name(&self) -> Option<&str> {
        self.0.as_ref().map(|o| o.name.as_str())
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
    if let Err(denied) = decide_request(&state.policy, &req, who) {
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
