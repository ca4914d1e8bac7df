//! The service attacked as a hostile user would: each finding of the security review (issue 19)
//! replayed against a real server on a loopback port, on SQLite and on PostgreSQL. Every test
//! here must pass; none may pass by skipping (PostgreSQL is required under CI).
//!
//! Slow clients are attacked in `tests/slow_clients.rs`, snapshot memory in
//! `tests/snapshot_memory.rs`, and redaction by the property test in `tests/redaction.rs`.

#[path = "support/mod.rs"]
mod support;

#[path = "api/server.rs"]
mod server;

use std::time::Duration;

use faultline::config::Config;
use faultline::service::Access;
use faultline::service::backtest::{Bounds, backtest};
use server::{Answer, TestServer, call, request};

/// A log holding a "secret" that survived redaction: what an oracle would try to read.
const SECRET_LOG: &str = "launch code is zx81q\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";

/// A candidate rule that matches the guessed fragment.
const ORACLE_RULE: &str = r#"
id = "probe.guess"
class = "cuda.oom"
title = "probe"
summary = "probe"
severity = "error"
priority = 1
role = "root"
confidence = "low"

[match]
any = ['launch code is zx81']

[[cause]]
title = "x"
detail = "x"

[[fix]]
title = "x"

[[example]]
name = "x"
log = "launch code is zx81"
expect = { matched = true }
"#;

/// A CSRF token the server made, as a browser gets it with any page (its cookie's value, which
/// the pages' forms carry as a field).
fn csrf(s: &TestServer) -> String {
    let page = s.get("/signin");
    page.header("set-cookie")
        .and_then(|c| c.strip_prefix("fl_csrf="))
        .and_then(|c| c.split(';').next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no CSRF cookie: {:?}", page.headers))
}

/// Runs every attack against a server on `database`.
fn all(database: &str) {
    let base = Config {
        database: database.to_owned(),
        ..Config::default()
    };
    the_backtest_is_no_anonymous_oracle(&base);
    a_private_server_closes_its_pages_as_well_as_its_api(&base);
    by_default_stored_logs_are_never_open_to_the_network(&base);
    page_forms_write_only_where_the_api_would(&base);
    wrong_tokens_are_budgeted_per_client(&base);
    page_reads_are_rate_limited(&base);
    forms_from_another_site_are_refused(&base);
    empty_logs_are_refused_and_curls_default_content_type_is_a_log(&base);
    a_backtest_reads_each_shared_log_once(&base);
    no_credential_survives_in_the_log_the_metadata_or_the_page(&base);
}

#[test]
fn attacks_fail_on_sqlite() {
    let db = support::TempDb::new("attack");
    all(&db.url());
    the_database_and_snapshots_are_readable_by_their_owner_only(&db);
}

#[test]
fn attacks_fail_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let Some(url) = runtime.block_on(support::postgres_database("attack")) else {
        return;
    };
    all(&url);
}

#[test]
fn a_backtest_stops_at_its_time_limit_and_says_how_far_it_got() {
    let db = support::TempDb::new("attack-backtest-time");
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        let store = db.store().await;
        support::stored_incident(&store, SECRET_LOG).await;
        let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
        let bounds = Bounds {
            incidents: 100,
            time: Duration::ZERO,
        };
        let report = backtest(&store, &rules, ORACLE_RULE, bounds)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!report.complete);
        assert_eq!(report.scanned, 0);
        assert!(
            report
                .stopped
                .as_deref()
                .is_some_and(|s| s.contains("time limit") && s.contains("0 of 1")),
            "{:?}",
            report.stopped
        );
    });
}

fn start(base: &Config, access: Access) -> TestServer {
    TestServer::start(Config {
        access,
        ..base.clone()
    })
}

/// Stores `log` with the server's token; its incident id.
fn stored(s: &TestServer, log: &str) -> i64 {
    let answer = s.post_log("/api/v1/analyze", log);
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["incident_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no incident id: {}", answer.body))
}

fn get_with(s: &TestServer, path: &str, headers: &[(&str, String)]) -> Answer {
    request(&s.url(path), "GET", headers, b"").unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The pages' sign-in cookie holding the server's token.
fn session(s: &TestServer) -> (&'static str, String) {
    ("cookie", format!("fl_session={}", s.token))
}

/// A page form as a browser on this site sends it, signed in or not.
fn form(s: &TestServer, path: &str, fields: &str, signed_in: bool) -> Answer {
    let token = csrf(s);
    let cookie = if signed_in {
        format!("{}; fl_csrf={token}", session(s).1)
    } else {
        format!("fl_csrf={token}")
    };
    let headers = [
        ("content-type", "application/x-www-form-urlencoded".to_owned()),
        ("origin", s.base.clone()),
        ("cookie", cookie),
    ];
    let body = format!("csrf={token}&{fields}");
    request(&s.url(path), "POST", &headers, body.as_bytes()).unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// A multipart page form (the paste form, the snapshot form).
fn multipart(s: &TestServer, path: &str, parts: &[(&str, &str)], signed_in: bool) -> Answer {
    let token = csrf(s);
    let mut body = format!("--b\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{token}\r\n");
    for (name, value) in parts {
        body.push_str(&format!(
            "--b\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str("--b--\r\n");
    let cookie = if signed_in {
        format!("{}; fl_csrf={token}", session(s).1)
    } else {
        format!("fl_csrf={token}")
    };
    let headers = [
        ("content-type", "multipart/form-data; boundary=b".to_owned()),
        ("origin", s.base.clone()),
        ("cookie", cookie),
    ];
    request(&s.url(path), "POST", &headers, body.as_bytes()).unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

fn the_backtest_is_no_anonymous_oracle(base: &Config) {
    let modes = [
        Access::Private,
        Access::TokenForWrites,
        Access::Open,
        Access::Auto,
    ];
    for (stored_so_far, access) in (1..).zip(modes) {
        let s = start(base, access);
        stored(&s, SECRET_LOG);
        let guess = s.call(
            "POST",
            "/api/v1/rules/backtest",
            Some("text/plain"),
            ORACLE_RULE.as_bytes(),
            false,
        );
        assert_eq!(guess.status, 401, "{access}: {}", guess.body);
        assert_eq!(guess.json()["error"], "unauthorized");
        assert!(!guess.body.contains("matched"), "{access}: {}", guess.body);
        let rule = ORACLE_RULE
            .replace('\n', "%0A")
            .replace(' ', "+")
            .replace('=', "%3D");
        let page = form(&s, "/rules/backtest", &format!("rule={rule}"), false);
        assert_eq!(page.status, 401, "{access}: the page's backtest form too");
        assert!(page.body.contains("Sign in needed"), "{}", page.body);
        let owned = s.call(
            "POST",
            "/api/v1/rules/backtest",
            Some("text/plain"),
            ORACLE_RULE.as_bytes(),
            true,
        );
        assert_eq!(owned.status, 200, "{access}: {}", owned.body);
        assert_eq!(
            owned.json()["matched"].as_array().map(Vec::len),
            Some(stored_so_far),
            "the owner sees every match"
        );
    }
}

fn a_private_server_closes_its_pages_as_well_as_its_api(base: &Config) {
    let s = start(base, Access::Private);
    let id = stored(&s, SECRET_LOG);
    for path in [
        "/".to_owned(),
        "/incidents".to_owned(),
        format!("/incidents/{id}"),
        format!("/incidents/{id}/log"),
        "/groups".to_owned(),
        "/rules".to_owned(),
    ] {
        // The client follows the redirect: it lands on the sign-in page, not on the log.
        let page = s.get(&path);
        assert!(
            page.body.contains("Sign in") && !page.body.contains("zx81q"),
            "{path} answered {}: {}",
            page.status,
            page.body
        );
        let signed_in = get_with(&s, &path, &[session(&s)]);
        assert_eq!(signed_in.status, 200, "{path} for a signed-in visitor");
    }
    let log = get_with(&s, &format!("/incidents/{id}/log"), &[session(&s)]);
    assert!(
        log.body.contains("zx81q"),
        "the owner reads the log: {}",
        log.body
    );
    for path in [
        format!("/api/v1/incidents/{id}"),
        "/api/v1/incidents".to_owned(),
        "/api/v1/groups".to_owned(),
        "/api/v1/rules".to_owned(),
    ] {
        assert_eq!(s.get(&path).status, 401, "{path}");
    }
    let dry = s.call(
        "POST",
        "/api/v1/analyze?store=false",
        Some("text/plain"),
        SECRET_LOG.as_bytes(),
        false,
    );
    assert_eq!(dry.status, 401, "analyses are reads: {}", dry.body);
    assert_eq!(s.get("/healthz").status, 200, "probes stay open");
    assert_eq!(s.get("/signin").status, 200);
}

fn by_default_stored_logs_are_never_open_to_the_network(base: &Config) {
    // The policy sees the configured address; the test server itself listens on loopback.
    let exposed = TestServer::start(Config {
        bind: "0.0.0.0:8080".parse().unwrap_or_else(|e| panic!("{e}")),
        ..base.clone()
    });
    let id = stored(&exposed, SECRET_LOG);
    assert_eq!(exposed.get(&format!("/api/v1/incidents/{id}")).status, 401);
    assert_eq!(exposed.get("/api/v1/incidents").status, 401);
    let page = exposed.get(&format!("/incidents/{id}/log"));
    assert!(!page.body.contains("zx81q"), "{}", page.body);
    let paste = multipart(&exposed, "/analyze", &[("log", SECRET_LOG)], false);
    assert_eq!(paste.status, 401, "{}", paste.body);

    // On loopback, open to this machine only: not to a page that rebinds its name to 127.0.0.1,
    // nor to requests a local reverse proxy forwards.
    let local = TestServer::start(base.clone());
    let id = stored(&local, SECRET_LOG);
    let path = format!("/api/v1/incidents/{id}");
    assert_eq!(local.get(&path).status, 200, "this machine reads");
    let rebound = get_with(&local, &path, &[("host", "attacker.example:8080".to_owned())]);
    assert_eq!(rebound.status, 401, "{}", rebound.body);
    let proxied = get_with(&local, &path, &[("x-forwarded-for", "203.0.113.7".to_owned())]);
    assert_eq!(proxied.status, 401, "{}", proxied.body);
    let anonymous_write = local.call(
        "POST",
        "/api/v1/analyze",
        Some("text/plain"),
        SECRET_LOG.as_bytes(),
        false,
    );
    assert_eq!(anonymous_write.status, 200, "this machine writes without a token");
}

fn page_forms_write_only_where_the_api_would(base: &Config) {
    let s = start(base, Access::TokenForWrites);
    let id = stored(&s, SECRET_LOG);
    let group = s.get(&format!("/api/v1/incidents/{id}")).json()["group_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no group"));
    let action = format!("action=\"/incidents/{id}/feedback\"");
    let anonymous_page = s.get(&format!("/incidents/{id}")).body;
    assert!(
        !anonymous_page.contains(&action) && anonymous_page.contains("href=\"/signin\""),
        "the page offers a sign-in, not a form it would refuse: {anonymous_page}"
    );
    let owner_page = get_with(&s, &format!("/incidents/{id}"), &[session(&s)]).body;
    assert!(owner_page.contains(&action), "{owner_page}");
    let feedback = form(&s, &format!("/incidents/{id}/feedback"), "verdict=right", false);
    assert_eq!(feedback.status, 401, "{}", feedback.body);
    let note = form(&s, &format!("/groups/{group}/notes"), "body=hello", false);
    assert_eq!(note.status, 401, "{}", note.body);
    let paste = multipart(&s, "/analyze", &[("log", SECRET_LOG)], false);
    assert_eq!(paste.status, 401, "{}", paste.body);
    let snapshot = multipart(
        &s,
        &format!("/incidents/{id}/snapshots"),
        &[("snapshot", "not a snapshot")],
        false,
    );
    assert_eq!(snapshot.status, 401, "{}", snapshot.body);
    let api_note = s.call(
        "POST",
        &format!("/api/v1/groups/{group}/notes"),
        Some("application/json"),
        b"{\"body\":\"hello\"}",
        false,
    );
    assert_eq!(api_note.status, 401, "the API refuses the same");

    // A revoked token's cookie reads as anonymous and is cleared.
    let stale = get_with(
        &s,
        "/incidents",
        &[("cookie", "fl_session=fl_revoked".to_owned())],
    );
    assert_eq!(stale.status, 200);
    assert!(
        stale.headers.iter().any(|(name, value)| name == "set-cookie"
            && value.starts_with("fl_session=;")
            && value.contains("Max-Age=0")),
        "{:?}",
        stale.headers
    );

    // Signed in, the same forms write (and answer with a redirect the client follows).
    let feedback = form(&s, &format!("/incidents/{id}/feedback"), "verdict=right", true);
    assert_eq!(feedback.status, 200, "{}", feedback.body);
    let note = form(&s, &format!("/groups/{group}/notes"), "body=hello", true);
    assert_eq!(note.status, 200, "{}", note.body);
    let notes = s.get(&format!("/api/v1/groups/{group}")).json();
    assert!(
        notes["notes"][0]["author"]
            .as_str()
            .is_some_and(|a| a.starts_with("tests")),
        "the note is signed by the token's name: {notes}"
    );
}

fn wrong_tokens_are_budgeted_per_client(base: &Config) {
    let s = start(base, Access::Private);
    let mut statuses = Vec::new();
    for i in 0..(faultline::service::auth::GUESS_BURST + 5) {
        let answer = call(
            &s.url("/api/v1/incidents"),
            "GET",
            None,
            b"",
            Some(&format!("fl_{i:048x}")),
        );
        statuses.push(answer.status);
    }
    assert!(statuses.starts_with(&[401, 401]), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let signin = form(&s, "/signin", "token=fl_nope", false);
    assert_eq!(signin.status, 429, "the sign-in form shares the budget");
    let cookie = get_with(&s, "/incidents", &[("cookie", "fl_session=fl_nope".to_owned())]);
    assert_eq!(cookie.status, 429, "and so does the session cookie");
}

fn page_reads_are_rate_limited(base: &Config) {
    let s = TestServer::start(Config {
        rate_limit_per_minute: 60,
        rate_limit_burst: 5,
        ..base.clone()
    });
    let statuses: Vec<u16> = (0..10).map(|_| s.get("/incidents").status).collect();
    assert_eq!(statuses.first(), Some(&200));
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
}

fn forms_from_another_site_are_refused(base: &Config) {
    let s = start(base, Access::Open);
    let id = stored(&s, SECRET_LOG);
    let token = csrf(&s);
    let post = |origin: &str, token: &str| {
        let headers = [
            ("content-type", "application/x-www-form-urlencoded".to_owned()),
            ("origin", origin.to_owned()),
            ("cookie", format!("fl_csrf={token}")),
        ];
        let body = format!("csrf={token}&verdict=wrong");
        request(
            &s.url(&format!("/incidents/{id}/feedback")),
            "POST",
            &headers,
            body.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let answer = post("http://evil.example", &token);
    assert_eq!(answer.status, 403, "{}", answer.body);
    // A cookie the server did not make (tossed by a sibling site) is no token, even when the form
    // carries the same value.
    for forged in ["0123456789abcdef0123456789abcdef".to_owned(), "0".repeat(64)] {
        let answer = post(&s.base, &forged);
        assert_eq!(answer.status, 400, "{forged}: {}", answer.body);
    }
    let feedback = s.get(&format!("/api/v1/incidents/{id}")).json();
    assert_eq!(feedback["feedback"], serde_json::json!([]), "nothing was written");
}

fn empty_logs_are_refused_and_curls_default_content_type_is_a_log(base: &Config) {
    let s = start(base, Access::TokenForWrites);
    for body in ["", "  \n\t\n"] {
        let empty = s.post_log("/api/v1/analyze", body);
        assert_eq!(empty.status, 422, "{}", empty.body);
        assert!(
            empty.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains("empty"))
        );
    }
    let curl = s.call(
        "POST",
        "/api/v1/analyze?store=false",
        Some("application/x-www-form-urlencoded"),
        SECRET_LOG.as_bytes(),
        false,
    );
    assert_eq!(curl.status, 200, "{}", curl.body);
    assert_eq!(curl.json()["findings"][0]["class"], "cuda.oom");
}

fn a_backtest_reads_each_shared_log_once(base: &Config) {
    let s = start(base, Access::TokenForWrites);
    for _ in 0..5 {
        stored(&s, SECRET_LOG);
    }
    let report = s.call(
        "POST",
        "/api/v1/rules/backtest?limit=5",
        Some("text/plain"),
        ORACLE_RULE.as_bytes(),
        true,
    );
    assert_eq!(report.status, 200, "{}", report.body);
    let report = report.json();
    assert_eq!(
        (
            report["scanned"].clone(),
            report["distinct_logs"].clone(),
            report["complete"].clone()
        ),
        (
            serde_json::json!(5),
            serde_json::json!(1),
            serde_json::json!(true)
        ),
        "{report}"
    );
}

fn no_credential_survives_in_the_log_the_metadata_or_the_page(base: &Config) {
    let s = start(base, Access::TokenForWrites);
    let secrets = [
        "fl_0123456789abcdef0123456789abcdef0123456789abcdef",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "hunter2hunter2",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ];
    let log = format!(
        "export HF_TOKEN=x{}\n{{\"SecretAccessKey\": \"{}\"}}\npassword={}\nslack {}\nopenai {}\n{SECRET_LOG}",
        secrets[0], secrets[1], secrets[2], secrets[3], secrets[4]
    );
    let body = serde_json::json!({
        "log": log,
        "project": format!("vision password={}", secrets[2]),
        "job_url": format!("https://ci-user:{}@ci.example/job/7", secrets[2]),
        "tags": [format!("token:{}", secrets[0])],
    });
    let answer = s.post_json("/api/v1/analyze", &body);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let id = support::json_i64(&answer.json(), "incident_id");
    let stored = s.get(&format!("/api/v1/incidents/{id}")).body;
    let page = s.get(&format!("/incidents/{id}")).body;
    let raw = s.get(&format!("/incidents/{id}/log")).body;
    for secret in secrets {
        for (what, text) in [("stored incident", &stored), ("page", &page), ("raw log", &raw)] {
            assert!(!text.contains(secret), "{secret} survived in the {what}: {text}");
        }
    }
    let note = s.post_json(
        &format!("/api/v1/incidents/{id}/feedback"),
        &serde_json::json!({"comment": format!("fixed it, the key was {}", secrets[4])}),
    );
    assert_eq!(note.status, 201, "{}", note.body);
    assert!(!note.body.contains(secrets[4]), "{}", note.body);
}

#[cfg(unix)]
fn the_database_and_snapshots_are_readable_by_their_owner_only(db: &support::TempDb) {
    use std::os::unix::fs::PermissionsExt;
    let folder = db.dir.join("fresh");
    std::fs::create_dir_all(&folder).unwrap_or_else(|e| panic!("{e}"));
    let s = TestServer::start(Config {
        database: format!("sqlite://{}", folder.join("kb.db").display()),
        snapshot_store: folder.join("snapshots").display().to_string(),
        ..Config::default()
    });
    stored(&s, SECRET_LOG);
    let mode = |name: &str| {
        std::fs::metadata(folder.join(name))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(mode("kb.db"), 0o600);
    assert_eq!(
        mode("kb.db-wal"),
        0o600,
        "SQLite gives its WAL the database's mode"
    );
    assert_eq!(mode("snapshots"), 0o700);
}

#[cfg(not(unix))]
fn the_database_and_snapshots_are_readable_by_their_owner_only(_: &support::TempDb) {}
