//! End to end in a real browser (headless Chromium through chromedriver) against the real server
//! on loopback: paste a CUDA traceback and read the root cause, upload a file, an XSS log stays
//! inert, feedback is saved, the group page counts. A screenshot of the diagnosis page is saved to
//! target/e2e/diagnosis.png.

#[path = "api/server.rs"]
mod server;
mod support;

use faultline::config::Config;
use serde_json::json;
use server::TestServer;
use support::webdriver::{Browser, available};

/// A real log: an NLL target out of range on rank 15 (corpus c0109, from a public issue).
const TARGET_ASSERT: &str = include_str!("fixtures/logs/c0109_srun_nll_target.log");
/// A real log: an OOM in a GitHub Actions job (corpus c0055).
const OOM: &str = include_str!("fixtures/logs/c0055_oom_github_actions.log");

#[test]
fn a_teammate_pastes_a_traceback_and_reads_the_root_cause() {
    if !available() {
        return;
    }
    let db = support::TempDb::new("browser");
    let server = TestServer::start(Config {
        database: db.url(),
        ..Config::default()
    });
    let browser = Browser::start();

    // Paste a traceback.
    browser.goto(&server.url("/"));
    assert!(browser.text("h1").contains("What killed the training job?"));
    browser.set_value("#log", TARGET_ASSERT);
    browser.type_into("#project", "vision");
    browser.click("button.primary");
    let first = browser.wait_for_url("/incidents/");
    assert_eq!(
        browser.text(".verdict .kicker"),
        "ROOT CAUSE",
        "the kicker is upper-cased by CSS"
    );
    assert!(
        browser.text("#verdict").contains("class label"),
        "{}",
        browser.text("#verdict")
    );
    assert!(
        browser
            .text(".verdict .badges")
            .contains("cuda.device_assert.target")
    );
    assert!(
        browser
            .text(".log .ln.ev")
            .contains("Assertion `t >= 0 && t < n_classes` failed")
    );
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../e2e");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("diagnosis.png"), &png);

    // Feedback is saved.
    browser.click("form.feedback button[value=right]");
    browser.wait_for_url("feedback=saved");
    assert!(browser.text("#feedback-h + p").contains("saved"));
    let id = incident_id(&first).to_owned();
    let stored = server.get(&format!("/api/v1/incidents/{id}")).json();
    assert_eq!(stored["feedback"][0]["verdict"], "right");

    // The same failure again: the group page counts two.
    browser.goto(&server.url("/"));
    browser.set_value("#log", TARGET_ASSERT);
    browser.click("button.primary");
    browser.wait_for_url("/incidents/");
    browser.click(".crumbs a[href^='/groups/']");
    browser.wait_for_url("/groups/");
    assert_eq!(browser.text(".count"), "2");

    // Upload a file.
    let file = db.dir.join("train.log");
    std::fs::write(&file, OOM).unwrap_or_else(|e| panic!("{e}"));
    browser.goto(&server.url("/"));
    browser.type_into("#file", &file.display().to_string());
    browser.click("button.primary");
    browser.wait_for_url("/incidents/");
    assert!(
        browser.text(".verdict .badges").contains("cuda.oom"),
        "{}",
        browser.text(".verdict")
    );

    // A log that tries to inject markup is shown as text and runs nothing.
    let xss = "<script>alert('xss')</script>\n\"><img src=x onerror=alert('img')>\nRuntimeError: CUDA error: device-side assert triggered\n";
    browser.goto(&server.url("/"));
    browser.set_value("#log", xss);
    browser.click("button.primary");
    browser.wait_for_url("/incidents/");
    assert_eq!(browser.alert(), None, "a script from the log ran");
    let log = browser.text(".log");
    assert!(log.contains("<script>alert('xss')</script>"), "{log}");
    assert!(log.contains("onerror=alert('img')"), "{log}");

    // A failure no rule knows: the start page counts it and leads to the queue.
    browser.goto(&server.url("/"));
    browser.set_value(
        "#log",
        "Traceback (most recent call last):\nKeyError: 'warmup_ratio'\n",
    );
    browser.click("button.primary");
    let unknown = browser.wait_for_url("/incidents/");
    browser.goto(&server.url("/"));
    browser.click("a[href^='/incidents?diagnosed=no']");
    browser.wait_for_url("diagnosed=no");
    let queue = browser.text("table");
    let unknown_id = incident_id(&unknown);
    assert!(
        queue.contains("no diagnosis") && queue.contains(unknown_id),
        "{queue}"
    );
}

#[test]
fn the_start_page_counts_what_the_rules_explain_and_links_the_rest() {
    let db = support::TempDb::new("coverage");
    let server = TestServer::start(Config {
        database: db.url(),
        ..Config::default()
    });
    assert!(
        !server.get("/").body.contains("What the rules explain"),
        "no share without incidents"
    );
    let known = server.post_log("/api/v1/analyze", OOM).json()["incident_id"].clone();
    let unknown = server
        .post_log(
            "/api/v1/analyze",
            "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nKeyError: warmup_ratio\n",
        )
        .json()["incident_id"]
        .clone();
    let home = server.get("/").body;
    assert!(
        home.contains("a rule found the cause of <strong>1 of 2</strong>")
            && home.contains("(50.0 %)")
            && home.contains("<a href=\"/incidents?diagnosed=no&amp;since=30\">1 not diagnosed</a>"),
        "{home}"
    );
    let queue = server.get("/incidents?diagnosed=no&since=30").body;
    assert!(
        queue.contains(&format!("href=\"/incidents/{unknown}\""))
            && !queue.contains(&format!("href=\"/incidents/{known}\""))
            && queue.contains("<option value=\"no\" selected>"),
        "{queue}"
    );
    assert!(queue.contains("the failures the rule base does not know"));
    assert!(
        queue.contains("no diagnosis: KeyError: warmup_ratio"),
        "the queue shows the error the log ends with: {queue}"
    );
    let page = server.get(&format!("/incidents/{unknown}")).body;
    assert!(
        page.contains("last error is <a href=\"#L3\">line 3</a>: <code>KeyError: warmup_ratio</code>")
            && page.contains("id=\"L3\""),
        "{page}"
    );
    let explained = server.get("/incidents?diagnosed=yes").body;
    assert!(explained.contains(&format!("href=\"/incidents/{known}\"")));
    assert!(!explained.contains(&format!("href=\"/incidents/{unknown}\"")));
}

#[test]
fn pages_answer_in_the_site_style_with_security_headers() {
    let db = support::TempDb::new("pages");
    let server = TestServer::start(Config {
        database: db.url(),
        max_body_bytes: 4096,
        ..Config::default()
    });
    let home = server.get("/");
    assert_eq!(home.status, 200);
    assert!(
        home.header("content-security-policy")
            .is_some_and(|c| c.contains("script-src 'self'"))
    );
    assert!(
        home.header("set-cookie")
            .is_some_and(|c| c.starts_with("fl_csrf="))
    );
    for path in [
        "/incidents",
        "/groups",
        "/rules",
        "/rules/assert.generic",
        "/offenders",
        "/static/app.css",
        "/static/app.js",
    ] {
        assert_eq!(server.get(path).status, 200, "{path}");
    }
    let missing = server.get("/incidents/424242");
    assert_eq!(missing.status, 404);
    assert!(
        missing.body.contains("<h1>404 · Not found</h1>"),
        "{}",
        missing.body
    );
    assert_eq!(server.get("/nowhere").status, 404);
    assert_eq!(
        server.get("/api/v1/nowhere").json()["error"],
        "not_found",
        "the API keeps JSON errors"
    );
    // A form's target opened as a link: a page that says so, and the API's JSON under /api.
    let form_target = server.get("/analyze");
    assert_eq!(
        (form_target.status, form_target.header("allow")),
        (405, Some("POST"))
    );
    assert!(
        form_target.body.contains("<h1>405 · Not a page</h1>")
            && form_target.body.contains("go back to the page with the form"),
        "{}",
        form_target.body
    );
    let page_posted = server.call("POST", "/groups", Some("text/plain"), b"x", false);
    assert_eq!(page_posted.status, 405);
    assert!(
        page_posted.body.contains("/groups does not answer POST.")
            && !page_posted.body.contains("go back to the page with the form"),
        "{}",
        page_posted.body
    );
    assert_eq!(
        server.get("/api/v1/analyze").json()["error"],
        "method_not_allowed"
    );

    // A form from another site, or one without the CSRF cookie, is refused.
    let cross_site = server.call(
        "POST",
        "/incidents/1/feedback",
        Some("application/x-www-form-urlencoded"),
        b"csrf=x&verdict=right",
        false,
    );
    assert_eq!(cross_site.status, 403);
    assert!(cross_site.body.contains("not sent from a page of this site"));
    let forged = server.post_form(
        "/incidents/1/feedback",
        "application/x-www-form-urlencoded",
        b"csrf=x&verdict=right",
    );
    assert_eq!(forged.status, 400);
    assert!(forged.body.contains("did not come from this site"));

    // Too large: the page says the limit.
    let body = format!(
        "--b\r\nContent-Disposition: form-data; name=\"log\"\r\n\r\n{}\r\n--b--\r\n",
        "x".repeat(8192)
    );
    let big = server.post_form("/analyze", "multipart/form-data; boundary=b", body.as_bytes());
    assert_eq!(big.status, 413, "{}", big.body);
    assert!(big.body.contains("4 KiB"), "{}", big.body);
}

/// The PyTorch watchdog's line on a rank left waiting in ALLREDUCE SeqNum 41.
fn watchdog_timeout(rank: u32) -> String {
    format!(
        "[rank{rank}]:[E1127 05:10:10.000000 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
    )
}

/// Four ranks' logs: rank 2 raises at 05:00:10, the others time out waiting for it ten minutes on.
fn four_rank_logs() -> Vec<(String, String)> {
    (0..4)
        .map(|rank| {
            let text = if rank == 2 {
                "[rank2]:[I1127 05:00:10.000000 train.py:10] step 41\n[rank2]: Traceback (most recent call last):\n[rank2]:   File \"train.py\", line 12, in <module>\n[rank2]:     x = table[idx]\n[rank2]: IndexError: index 7 is out of bounds for dimension 0 with size 4\n".to_owned()
            } else {
                watchdog_timeout(rank)
            };
            (format!("rank{rank}.log"), text)
        })
        .collect()
}

/// What a bundle's incident page must show: the first fault named, and the timeline drawn with
/// it marked on rank 2's row.
fn the_page_shows_rank_2_failed_first(browser: &Browser) {
    assert!(
        browser.text("#first-fault-h").contains("rank 2"),
        "{}",
        browser.text("#first-fault-h")
    );
    browser.find("svg.timeline .mark.first-fault");
    assert!(
        browser
            .text("svg.timeline .row-label.first")
            .starts_with("rank 2")
    );
    assert_eq!(
        browser
            .execute(
                "return document.querySelectorAll('svg.timeline .mark.cascade').length;",
                json!([])
            )
            .as_u64(),
        Some(3),
        "the three waiting ranks are greyed"
    );
    assert!(browser.text(".cascades").contains("3 ranks"));
}

#[test]
fn a_teammate_drops_every_ranks_log_and_sees_which_rank_failed_first() {
    if !available() {
        return;
    }
    let db = support::TempDb::new("browser-bundle");
    let server = TestServer::start(Config {
        database: db.url(),
        ..Config::default()
    });
    let browser = Browser::start();
    let logs = four_rank_logs();

    // Dropped on the form: the script puts the files in the file input.
    browser.goto(&server.url("/"));
    let drop = "const [files] = arguments;
        const data = new DataTransfer();
        for (const [name, text] of files) data.items.add(new File([text], name, { type: 'text/plain' }));
        const form = document.querySelector('form[data-drop]');
        form.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
        form.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
        return document.querySelector('#file').files.length;";
    let dropped = browser.execute(drop, json!([logs]));
    assert_eq!(dropped.as_u64(), Some(4), "{dropped}");
    assert!(browser.text("#dropped").starts_with("4 files: rank0.log"));
    browser.click("button.primary");
    browser.wait_for_url("/incidents/");
    the_page_shows_rank_2_failed_first(&browser);
    let png = browser.screenshot();
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../e2e");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("bundle.png"), &png);

    // Chosen at once in the file dialog (no script needed): the same answer.
    let paths: Vec<String> = logs
        .iter()
        .map(|(name, text)| {
            let path = db.dir.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            path.display().to_string()
        })
        .collect();
    browser.goto(&server.url("/"));
    browser.type_into("#file", &paths.join("\n"));
    browser.click("button.primary");
    browser.wait_for_url("/incidents/");
    the_page_shows_rank_2_failed_first(&browser);

    // The files are kept: each links to its text.
    browser.click(".files a[href$='/files/2']");
    browser.wait_for_url("/files/2");
    assert!(
        browser
            .text("body")
            .contains("IndexError: index 7 is out of bounds")
    );
}

/// The incident id at the end of an incident page's URL; panics showing the URL when it has none.
fn incident_id(url: &str) -> &str {
    url.rsplit_once('/')
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| panic!("no incident id at the end of {url}"))
}
