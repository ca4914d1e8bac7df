//! Cookies of the web pages: the CSRF token (double-submit: a cookie and the same value in every
//! form), and, when the server asks for it, the API token of the signed-in user (HttpOnly, Secure,
//! SameSite=Strict).

use axum::http::{HeaderMap, HeaderValue, header};

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
}
