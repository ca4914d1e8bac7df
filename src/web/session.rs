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

/// Whether the form's token is the cookie's (compared in constant time).
pub fn csrf_ok(headers: &HeaderMap, form_token: &str) -> bool {
    let Some(cookie) = cookie(headers, CSRF_COOKIE) else {
        return false;
    };
    !cookie.is_empty()
        && cookie.len() == form_token.len()
        && cookie
            .bytes()
            .zip(form_token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
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
    fn the_form_token_must_equal_the_cookie() {
        let h = headers("fl_csrf=abc123");
        assert!(csrf_ok(&h, "abc123"));
        assert!(!csrf_ok(&h, "abc124"));
        assert!(!csrf_ok(&h, ""));
        assert!(!csrf_ok(&HeaderMap::new(), "abc123"));
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
