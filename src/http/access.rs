//! Access at the HTTP edge: which [`Action`] each route of either face is ([`action_of`], the
//! one table; a route missing from it is refused), whether a request comes from this machine
//! ([`is_local_request`]), and the service's policy asked about a route ([`decide_route`]).

use std::net::IpAddr;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, Method, header};

use crate::service::{Action, Denied, Policy, Requester};

/// The action of a route of either face (`route` is axum's matched path, `query` the request's
/// query string); `None` for a route the table does not know, which is then refused.
pub fn action_of(method: &Method, route: &str, query: Option<&str>) -> Option<Action> {
    use Action::*;
    let read = *method == Method::GET || *method == Method::HEAD;
    let post = *method == Method::POST;
    let action = match route {
        "/healthz" | "/readyz" | "/metrics" | "/api/v1/openapi.json" if read => Operate,
        "/static/app.css" | "/static/app.js" | "/signin" if read => SignIn,
        "/signin" | "/signout" if post => SignIn,
        "/api/v1/ping" if post => Analyze,
        "/api/v1/analyze" if post && stores(query) => StoreIncident,
        "/api/v1/analyze" if post => Analyze,
        "/analyze" if post => StoreIncident,
        "/" if read => ViewGroups,
        "/incidents" | "/incidents/{id}" | "/incidents/{id}/log" | "/incidents/{id}/files/{file}" if read => {
            ViewIncidents
        }
        "/api/v1/incidents"
        | "/api/v1/incidents/{id}"
        | "/api/v1/incidents/{id}/similar"
        | "/api/v1/incidents/{id}/files/{file}"
            if read =>
        {
            ViewIncidents
        }
        // Where incidents' first faults were: read as incidents are.
        "/offenders" | "/api/v1/offenders" if read => ViewIncidents,
        "/groups" | "/groups/{id}" | "/api/v1/groups" | "/api/v1/groups/{id}" if read => ViewGroups,
        "/rules" | "/rules/{id}" | "/api/v1/rules" | "/api/v1/rules/{id}" if read => ViewRules,
        "/api/v1/replay/jobs/{id}" if read => ViewReplay,
        "/incidents/{id}/feedback" | "/api/v1/incidents/{id}/feedback" if post => AddFeedback,
        "/groups/{id}/notes" | "/api/v1/groups/{id}/notes" if post => AddNote,
        "/incidents/{id}/snapshots" | "/api/v1/incidents/{id}/snapshots" if post => UploadSnapshot,
        "/rules/backtest" | "/api/v1/rules/backtest" if post => BacktestRule,
        _ => return None,
    };
    Some(action)
}

/// Whether `POST /api/v1/analyze` stores its incident: unless the query says `store=false`.
fn stores(query: Option<&str>) -> bool {
    !query
        .unwrap_or_default()
        .split('&')
        .any(|pair| pair == "store=false")
}

/// The policy's decision for a request of either face: its matched route (its path when no
/// route matched), method and query.
pub fn decide_request(policy: &Policy, req: &Request, who: Requester) -> Result<Action, Denied> {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(req.uri().path(), MatchedPath::as_str);
    decide_route(policy, req.method(), route, req.uri().query(), who)
}

/// The policy's decision for a route of either face.
pub fn decide_route(
    policy: &Policy,
    method: &Method,
    route: &str,
    query: Option<&str>,
    who: Requester,
) -> Result<Action, Denied> {
    let action = action_of(method, route, query).ok_or(Denied::UnknownRoute)?;
    policy.decide(action, who)?;
    Ok(action)
}

/// Whether a request comes from this machine: its peer is a loopback address, its `Host` names a
/// loopback host (a page elsewhere that resolves its own name to 127.0.0.1 — DNS rebinding — is
/// not local), and it carries no proxy header (a reverse proxy on this machine forwards requests
/// from elsewhere).
pub fn is_local_request(peer: Option<IpAddr>, headers: &HeaderMap) -> bool {
    let proxied = ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip"]
        .iter()
        .any(|name| headers.contains_key(*name));
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    peer.is_some_and(|ip| ip.is_loopback()) && !proxied && host.is_some_and(is_loopback_host)
}

/// `localhost`, `127.0.0.1:8080`, `[::1]:8080`…
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::Access;
    use axum::http::HeaderValue;

    const SIGNED_IN_REMOTE: Requester = Requester {
        signed_in: true,
        local: false,
    };

    fn policy(mode: Access, bind: &str) -> Policy {
        Policy::new(mode, bind.parse().unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn every_route_of_both_faces_has_an_action_and_unknown_ones_have_none() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(
            action_of(&get, "/incidents/{id}/log", None),
            Some(Action::ViewIncidents)
        );
        assert_eq!(
            action_of(&post, "/rules/backtest", None),
            Some(Action::BacktestRule)
        );
        assert_eq!(
            action_of(&post, "/api/v1/rules/backtest", None),
            Some(Action::BacktestRule)
        );
        assert_eq!(
            action_of(&post, "/api/v1/analyze", None),
            Some(Action::StoreIncident)
        );
        assert_eq!(
            action_of(&post, "/api/v1/analyze", Some("project=x&store=false")),
            Some(Action::Analyze)
        );
        assert_eq!(action_of(&post, "/analyze", None), Some(Action::StoreIncident));
        assert_eq!(
            action_of(&get, "/api/v1/offenders", None),
            Some(Action::ViewIncidents)
        );
        assert_eq!(action_of(&get, "/offenders", None), Some(Action::ViewIncidents));
        assert_eq!(
            action_of(&get, "/incidents/{id}/files/{file}", None),
            Some(Action::ViewIncidents)
        );
        assert_eq!(
            action_of(&get, "/api/v1/incidents/{id}/files/{file}", None),
            Some(Action::ViewIncidents)
        );
        assert_eq!(action_of(&Method::DELETE, "/incidents/{id}", None), None);
        assert_eq!(action_of(&get, "/admin", None), None);
        let p = policy(Access::Open, "127.0.0.1:8080");
        assert_eq!(
            decide_route(&p, &get, "/admin", None, SIGNED_IN_REMOTE),
            Err(Denied::UnknownRoute)
        );
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_static(value));
        }
        h
    }

    #[test]
    fn a_request_is_local_only_from_loopback_to_a_loopback_host_without_a_proxy() {
        let loopback = Some(IpAddr::from([127, 0, 0, 1]));
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "127.0.0.1",
            "LOCALHOST",
        ] {
            assert!(is_local_request(loopback, &headers(&[("host", host)])), "{host}");
        }
        assert!(!is_local_request(
            loopback,
            &headers(&[("host", "attacker.example:8080")])
        ));
        assert!(!is_local_request(
            loopback,
            &headers(&[("host", "localhost:8080"), ("x-forwarded-for", "203.0.113.9")])
        ));
        assert!(!is_local_request(loopback, &headers(&[])));
        assert!(!is_local_request(
            Some(IpAddr::from([10, 0, 0, 7])),
            &headers(&[("host", "localhost:8080")])
        ));
        assert!(!is_local_request(None, &headers(&[("host", "localhost")])));
    }
}
