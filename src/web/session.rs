//! Cookies of the web pages: the CSRF token (double-submit: a cookie and the same value in every
//! form), and, when the server asks for it, the API token of the signed-in user (HttpOnly, Secure,
//! SameSite=Strict).

use axum::http::{HeaderMap, HeaderValue, header};

use crate::kb::codec::hex;

/// Name of the CSRF cookie.
pub const CSRF_COOKIE: &str = "fl_csrf";
/// Name of the session cookie (an API token).
pub const SESSION_COOKIE: &str = "fl_session";

/// A cookie's value from the request.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A fresh random token.
pub fn new_token() -> String {
    let mut bytes = [0u8; 16];
    // Without randomness the form tokens would be guessable: refuse rather than degrade.
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    hex(&bytes)
}

/// `Set-Cookie` for a cookie of the pages. A `secret` one (the session's API token) is HttpOnly
/// and Secure, so browsers keep it only for HTTPS (and localhost); the CSRF cookie is neither, so
/// that forms also work on a plain-HTTP team server.
pub fn set_cookie(name: &str, value: &str, secret: bool, max_age_secs: Option<u64>) -> Option<HeaderValue> {
    let mut text = format!("{name}={value}; Path=/; SameSite=Strict");
    if secret {
        text.push_str("; HttpOnly; Secure");
    }
    if let Some(age) = max_age_secs {
        text.push_str(&format!("; Max-Age={age}"));
    }
    HeaderValue::from_str(&text).ok()
}

/// Whether a form comes from a page of this site: its `Origin` (every current browser sends one
/// with a form's POST), else its `Referer`, names the host the request was sent to. A request that
/// names neither is refused too: a browser always names one, and a script can send `Origin`.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let source = [header::ORIGIN, header::REFERER]
        .into_iter()
        .find_map(|name| headers.get(name).and_then(|v| v.to_str().ok()));
    source
        .and_then(authority)
        .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

/// `http://host:8080/path` → `host:8080`; `None` for `null` or anything without a scheme.
fn authority(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|a| !a.is_empty() && !a.contains('@'))
}

/// Whether the form's token is this browser's (compared in constant time): the token of a
/// genuine cookie, since a forged cookie was replaced by a fresh token no form can hold.
pub fn csrf_ok(expected: &str, form_token: &str) -> bool {
    !expected.is_empty()
        && expected.len() == form_token.len()
        && expected
            .bytes()
            .zip(form_token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The key that signs the pages' CSRF tokens: a token is a random nonce and its HMAC-SHA256, so
/// a cookie value the server did not make (set by a sibling site, say) is refused.
#[derive(Clone)]
pub struct CsrfKey([u8; 32]);

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(…)")
    }
}

/// Hex characters of a token's nonce and of its signature.
const NONCE_HEX: usize = 32;

impl CsrfKey {
    /// A key of this process alone (a server whose knowledge base gave none).
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        // Without randomness the key would be guessable: no token then verifies.
        if getrandom::fill(&mut key).is_err() {
            key = [0; 32];
        }
        Self(key)
    }

    /// The key from its hex text (as the knowledge base keeps it).
    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).ok()?;
            key[i] = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Self(key))
    }

    fn sign(&self, nonce: &str) -> String {
        use hmac::{KeyInit, Mac};
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0) else {
            return String::new();
        };
        mac.update(nonce.as_bytes());
        let tag = mac.finalize().into_bytes();
        hex(&tag[..NONCE_HEX / 2])
    }

    /// A fresh token: nonce and signature, 64 hex characters.
    pub fn new_token(&self) -> String {
        let nonce = new_token();
        if nonce.is_empty() {
            return String::new();
        }
        let signature = self.sign(&nonce);
        format!("{nonce}{signature}")
    }

    /// Whether `token` is one this key made.
    pub fn made(&self, token: &str) -> bool {
        if token.len() != 2 * NONCE_HEX || !token.is_ascii() {
            return false;
        }
        let (nonce, signature) = token.split_at(NONCE_HEX);
        csrf_ok(&self.sign(nonce), signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(cookie: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(cookie).unwrap_or(HeaderValue::from_static("")),
        );
        h
    }

    #[test]
    fn cookies_are_read_by_name() {
        let h = headers("a=1; fl_csrf=abc; b=2");
        assert_eq!(cookie(&h, "fl_csrf"), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
    }

    #[test]
    fn the_form_token_must_equal_the_browsers() {
        assert!(csrf_ok("abc123", "abc123"));
        assert!(!csrf_ok("abc123", "abc124"));
        assert!(!csrf_ok("abc123", ""));
        assert!(!csrf_ok("", ""));
    }

    #[test]
    fn only_tokens_the_key_made_are_genuine() {
        let key = CsrfKey::random();
        let token = key.new_token();
        assert_eq!(token.len(), 64);
        assert!(key.made(&token));
        assert!(!CsrfKey::random().made(&token), "another key's token");
        assert!(!key.made(&"0".repeat(64)), "a value of the right length");
        assert!(!key.made(&token[..32]), "an old-style 32-character value");
        let mut forged = token.clone();
        forged.replace_range(63.., if token.ends_with('0') { "1" } else { "0" });
        assert!(!key.made(&forged));
        let hex_key = "11".repeat(32);
        let shared = CsrfKey::from_hex(&hex_key).unwrap_or_else(CsrfKey::random);
        let again = CsrfKey::from_hex(&hex_key).unwrap_or_else(CsrfKey::random);
        assert!(
            again.made(&shared.new_token()),
            "servers that share the key share tokens"
        );
        assert!(CsrfKey::from_hex("zz").is_none());
    }

    #[test]
    fn a_form_is_taken_only_from_a_page_of_this_site() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, HeaderValue::from_static(value));
            }
            same_origin(&h)
        };
        assert!(with(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ]));
        assert!(with(&[
            ("host", "faultline.example"),
            ("referer", "https://faultline.example/incidents/3")
        ]));
        assert!(!with(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ]));
        assert!(!with(&[
            ("host", "faultline.example"),
            ("origin", "https://faultline.example.evil.example")
        ]));
        assert!(!with(&[("host", "127.0.0.1:8080"), ("origin", "null")]));
        assert!(!with(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
            ("referer", "http://127.0.0.1:8080/")
        ]));
        assert!(!with(&[("host", "127.0.0.1:8080")]), "a form that names no page");
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
