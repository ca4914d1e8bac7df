//! Who a token belongs to: tokens checked against their stored hashes, with a short-lived cache
//! of the verified ones, and a budget of wrong tokens per client address
//! ([`GUESSES_PER_MINUTE`]): once a client has spent it, its tokens are refused with 429 before
//! the database is asked. Both faces use it (the API's bearer tokens, the pages' sign-in).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{AppState, Error, Result};
use crate::kb::codec::sha256_hex;
use crate::kb::tokens::TokenOwner;

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

/// The rate limiter's key for a caller: the token's id, else the peer's address.
pub fn client_key(owner: Option<&TokenOwner>, peer: Option<IpAddr>) -> String {
    match (owner, peer) {
        (Some(owner), _) => format!("token:{}", owner.id),
        (None, Some(ip)) => format!("ip:{ip}"),
        (None, None) => "ip:unknown".to_owned(),
    }
}

/// The owner of `token`; 401 when it is not valid, 429 once `peer` has sent too many wrong ones.
/// Shared by the API's bearer tokens and the pages' sign-in.
pub async fn verify_guarded(state: &AppState, token: &str, peer: Option<IpAddr>) -> Result<TokenOwner> {
    let key = client_key(None, peer);
    let now = Instant::now();
    if let Err(retry_after_secs) = state.guesses.peek(&key, now) {
        state.metrics.limited();
        return Err(Error::RateLimited { retry_after_secs });
    }
    match verify(state, token).await? {
        Some(owner) => Ok(owner),
        None => {
            let _ = state.guesses.check(&key, now);
            Err(Error::Unauthorized("the token is not valid".into()))
        }
    }
}

/// The owner of `token`, from the cache of verified tokens or the database.
pub async fn verify(state: &AppState, token: &str) -> Result<Option<TokenOwner>> {
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
