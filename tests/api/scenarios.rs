//! What a CI job and a teammate do with the API, as scenarios run against each backend.

use faultline::config::Config;
use faultline::service::Access;
use serde_json::json;

use crate::server::{TestServer, call};
use crate::support::{self, TempDb};

const ASSERT: &str = "Traceback (most recent call last):
  File \"/work/train.py\", line 88, in step
    loss = model(batch)
/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
RuntimeError: CUDA error: device-side assert triggered
";

const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n";

pub fn all(config: &Config) {
    let server = TestServer::start(config.clone());
    health_and_metrics(&server);
    analyze_stores_incidents_in_groups(&server);
    analyze_reads_json_and_keeps_bad_input_out(&server);
    secrets_never_reach_storage(&server);
    incidents_groups_feedback_and_notes(&server);
    undiagnosed_logs_wait_in_a_queue(&server);
    rules_and_backtests(&server);
    every_documented_operation_is_routed(&server);
}

fn health_and_metrics(s: &TestServer) {
    assert_eq!(s.get("/healthz").status, 200);
    let ready = s.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(ready.json()["rules"].as_u64().is_some_and(|n| n > 10));
    s.call(
        "POST",
        "/api/v1/analyze?store=false",
        Some("text/plain"),
        OOM.as_bytes(),
        false,
    );
    let metrics = s.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/plain"))
    );
    assert!(
        metrics.body.contains("faultline_analysis_seconds_count"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("route=\"/api/v1/analyze\""),
        "{}",
        metrics.body
    );
}

fn analyze_stores_incidents_in_groups(s: &TestServer) {
    let first = s.post_log("/api/v1/analyze?project=vision", ASSERT);
    assert_eq!(first.status, 200, "{}", first.body);
    let doc = first.json();
    assert_eq!(doc["findings"][0]["class"], "cuda.device_assert.index");
    assert_eq!(doc["findings"][0]["role"], "root");
    assert!(doc["incident_id"].as_i64().is_some());
    assert_eq!(doc["new_group"], true);
    assert!(doc["fingerprint"].is_string());

    let second = s
        .post_log(
            "/api/v1/analyze?project=vision",
            &ASSERT.replace("line 88", "line 91"),
        )
        .json();
    assert_eq!(
        second["group_id"], doc["group_id"],
        "a moved line is the same failure"
    );
    assert_eq!(second["new_group"], false);

    // Without storing, no token is needed and nothing is stored.
    let dry = s.call(
        "POST",
        "/api/v1/analyze?store=false",
        Some("text/plain"),
        OOM.as_bytes(),
        false,
    );
    assert_eq!(dry.status, 200);
    assert!(dry.json().get("incident_id").is_none());

    // Storing needs a token; a wrong one is refused.
    let anonymous = s.call(
        "POST",
        "/api/v1/analyze",
        Some("text/plain"),
        OOM.as_bytes(),
        false,
    );
    assert_eq!(
        (anonymous.status, anonymous.json()["error"].clone()),
        (401, json!("unauthorized"))
    );
    let wrong = call(
        &s.url("/api/v1/analyze"),
        "POST",
        Some("text/plain"),
        OOM.as_bytes(),
        Some("fl_nope"),
    );
    assert_eq!(wrong.status, 401);
}

fn analyze_reads_json_and_keeps_bad_input_out(s: &TestServer) {
    let body = json!({"log": OOM, "project": "nlp", "commit": "abc123", "job_url": "https://ci/1", "tags": ["nightly"]});
    let stored = s.post_json("/api/v1/analyze", &body);
    assert_eq!(stored.status, 200, "{}", stored.body);
    let id = support::json_i64(&stored.json(), "incident_id");
    let incident = s.get(&format!("/api/v1/incidents/{id}")).json();
    assert_eq!(
        (incident["project"].clone(), incident["commit"].clone()),
        (json!("nlp"), json!("abc123"))
    );
    assert_eq!(incident["tags"], json!(["nightly"]));
    assert_eq!(incident["log"], OOM);

    let bad_json = s.call(
        "POST",
        "/api/v1/analyze",
        Some("application/json"),
        b"{\"log\": ",
        true,
    );
    assert_eq!(
        (bad_json.status, bad_json.json()["error"].clone()),
        (400, json!("bad_request"))
    );
    let unknown = s.post_json("/api/v1/analyze", &json!({"log": "x", "colour": "red"}));
    assert_eq!(unknown.status, 400);
    let media = s.call("POST", "/api/v1/analyze", Some("image/png"), b"\x89PNG", true);
    assert_eq!(
        (media.status, media.json()["error"].clone()),
        (415, json!("unsupported_media_type"))
    );
    let bad_meta = s.post_json("/api/v1/analyze", &json!({"log": "x", "tags": [""]}));
    assert_eq!(bad_meta.status, 422);

    // Invalid UTF-8 is analysed, not refused.
    let mut bytes = b"RuntimeError: CUDA error: an illegal memory access was encountered \xff\xfe\n".to_vec();
    bytes.extend_from_slice(b"\x00garbage\n");
    let odd = s.call("POST", "/api/v1/analyze", Some("text/plain"), &bytes, true);
    assert_eq!(odd.status, 200, "{}", odd.body);
    assert_eq!(odd.json()["findings"][0]["class"], "cuda.illegal_memory_access");

    assert_eq!(s.get("/api/v1/incidents/99999999").status, 404);
    assert_eq!(s.get("/api/v1/incidents/abc").status, 400);
    let unknown_route = s.get("/api/v1/nothing");
    assert_eq!(
        (unknown_route.status, unknown_route.json()["error"].clone()),
        (404, json!("not_found"))
    );
    let wrong_method = s.get("/api/v1/analyze");
    assert_eq!(
        (wrong_method.status, wrong_method.json()["error"].clone()),
        (405, json!("method_not_allowed"))
    );
    assert_eq!(wrong_method.header("allow"), Some("POST"));
}

fn secrets_never_reach_storage(s: &TestServer) {
    let log = format!("login with token hf_abcdefghijklmnopqrstuvwxyzABCDEF1234 by ann@example.org\n{OOM}");
    let id = support::json_i64(&s.post_log("/api/v1/analyze", &log).json(), "incident_id");
    let stored = s.get(&format!("/api/v1/incidents/{id}")).body;
    assert!(!stored.contains("hf_abcdefghij"), "{stored}");
    assert!(!stored.contains("ann@example.org"), "{stored}");
    assert!(stored.contains("hf_<redacted>"));
}

fn incidents_groups_feedback_and_notes(s: &TestServer) {
    let listed = s.get("/api/v1/incidents?project=vision").json();
    let items = listed["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("expected a list of items in {listed}"));
    assert_eq!(items.len(), 2);
    let id = support::json_i64(&items[0], "id");
    let by_class = s.get("/api/v1/incidents?class=cuda.oom&limit=1").json();
    assert_eq!(by_class["items"].as_array().map(Vec::len), Some(1));
    assert!(
        by_class["next_offset"].as_i64().is_some(),
        "more OOM incidents on the next page"
    );
    let searched = s.get("/api/v1/incidents?q=srcSelectDimSize").json();
    assert_eq!(searched["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(s.get("/api/v1/incidents?colour=red").status, 400);

    let similar = s.get(&format!("/api/v1/incidents/{id}/similar")).json();
    assert!(similar.as_array().is_some_and(|a| !a.is_empty()));

    let feedback = s.post_json(
        &format!("/api/v1/incidents/{id}/feedback"),
        &json!({"verdict": "right", "fix_worked": true, "comment": "resized the embeddings"}),
    );
    assert_eq!(feedback.status, 201, "{}", feedback.body);
    assert_eq!(feedback.json()["author"], "tests");
    let anonymous = s.call(
        "POST",
        &format!("/api/v1/incidents/{id}/feedback"),
        Some("application/json"),
        b"{\"verdict\":\"right\"}",
        false,
    );
    assert_eq!(anonymous.status, 401);
    let empty = s.post_json(&format!("/api/v1/incidents/{id}/feedback"), &json!({}));
    assert_eq!(empty.status, 422);
    let bad_verdict = s.post_json(
        &format!("/api/v1/incidents/{id}/feedback"),
        &json!({"verdict": "maybe"}),
    );
    assert!(
        bad_verdict.status == 400 || bad_verdict.status == 422,
        "{}",
        bad_verdict.status
    );

    let group = support::json_i64(&items[0], "group_id");
    let note = s.post_json(
        &format!("/api/v1/groups/{group}/notes"),
        &json!({"body": "Run with the resized tokenizer."}),
    );
    assert_eq!(note.status, 201, "{}", note.body);
    let detail = s.get(&format!("/api/v1/groups/{group}")).json();
    assert_eq!(detail["count"], 2);
    assert_eq!(detail["notes"][0]["body"], "Run with the resized tokenizer.");
    assert_eq!(detail["projects"][0]["name"], "vision");
    assert!(detail["trend"].is_string());
    let groups = s.get("/api/v1/groups?class=cuda.device_assert.index").json();
    assert_eq!(groups["items"][0]["id"], group);
    assert_eq!(s.get("/api/v1/groups/99999999").status, 404);
}

fn undiagnosed_logs_wait_in_a_queue(s: &TestServer) {
    let unknown = s.post_log(
        "/api/v1/analyze?project=queue",
        "Traceback (most recent call last):\n  File \"/work/train.py\", line 9, in <module>\nKeyError: 'warmup_ratio'\n",
    );
    assert_eq!(unknown.status, 200, "{}", unknown.body);
    let id = unknown.json()["incident_id"].clone();
    assert!(id.is_i64());
    let ids = |query: &str| -> Vec<serde_json::Value> {
        let page = s.get(&format!("/api/v1/incidents?{query}")).json();
        page["items"]
            .as_array()
            .map(|items| items.iter().map(|i| i["id"].clone()).collect())
            .unwrap_or_else(|| panic!("expected a list of items in {page}"))
    };
    assert_eq!(ids("diagnosed=false&project=queue"), vec![id.clone()]);
    let queued = s.get("/api/v1/incidents?project=queue").json();
    assert_eq!(queued["items"][0]["diagnosed"], false);
    let vision = s.get("/api/v1/incidents?project=vision").json();
    assert_eq!(vision["items"][0]["diagnosed"], true);
    assert!(ids("diagnosed=false").contains(&id));
    assert!(!ids("diagnosed=true").contains(&id));
    assert!(
        ids("diagnosed=false&project=vision").is_empty(),
        "both device-side asserts of that project were diagnosed"
    );

    let on_groups = s.get("/api/v1/groups?diagnosed=false");
    assert_eq!(
        (on_groups.status, on_groups.json()["error"].clone()),
        (400, json!("bad_request"))
    );
    assert_eq!(s.get("/api/v1/incidents?diagnosed=maybe").status, 400);

    let metrics = s.get("/metrics").body;
    let undiagnosed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("faultline_analyses_undiagnosed_total "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(undiagnosed.is_some_and(|n| n >= 1), "{metrics}");
}

fn rules_and_backtests(s: &TestServer) {
    let rules = s.get("/api/v1/rules").json();
    let list = rules
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("expected a list of rules, got {rules}"));
    assert!(list.len() > 50);
    let hit = list
        .iter()
        .find(|r| r["stats"]["right"] == 1)
        .cloned()
        .unwrap_or_else(|| panic!("expected a rule with one right verdict in {rules}"));
    assert_eq!(hit["stats"]["precision"], 1.0, "feedback feeds precision: {hit}");
    let id = support::json_str(&hit, "id");
    let detail = s.get(&format!("/api/v1/rules/{id}")).json();
    assert!(detail["causes"].as_array().is_some_and(|c| !c.is_empty()));
    assert!(detail["stats"]["daily"].as_array().is_some_and(|d| !d.is_empty()));
    assert_eq!(s.get("/api/v1/rules/no.such_rule").status, 404);

    let candidate = r#"
id = "team.embedding_assert"
class = "cuda.device_assert.index"
title = "Our embedding ids overflow"
summary = "An id is too large."
severity = "error"
priority = 99
role = "root"
confidence = "high"
next_artifact = "input_ids.max()"

[match]
any = ['srcIndex < srcSelectDimSize']

[[cause]]
title = "Tokenizer mismatch"
detail = "The ids come from another tokenizer."

[[fix]]
title = "Use the model's tokenizer"

[[example]]
name = "assert"
log = "Assertion `srcIndex < srcSelectDimSize` failed."
expect = { matched = true }
"#;
    let anonymous = s.call(
        "POST",
        "/api/v1/rules/backtest",
        Some("text/plain"),
        candidate.as_bytes(),
        false,
    );
    assert_eq!(
        anonymous.status, 401,
        "a backtest always needs a token: {}",
        anonymous.body
    );
    let report = s.call(
        "POST",
        "/api/v1/rules/backtest",
        Some("text/plain"),
        candidate.as_bytes(),
        true,
    );
    assert_eq!(report.status, 200, "{}", report.body);
    let report = report.json();
    assert_eq!(report["rule"], "team.embedding_assert");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(report["matched"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        report["takes_primary"], 2,
        "priority 99 takes both from the current rule"
    );
    let broken = s.call(
        "POST",
        "/api/v1/rules/backtest",
        Some("text/plain"),
        b"id = 'x'",
        true,
    );
    assert_eq!(
        (broken.status, broken.json()["error"].clone()),
        (422, json!("unprocessable"))
    );
}

fn every_documented_operation_is_routed(s: &TestServer) {
    let spec = s.get("/api/v1/openapi.json").json();
    assert_eq!(spec["openapi"], "3.1.0");
    let mut refs = Vec::new();
    collect_refs(&spec, &mut refs);
    assert!(refs.len() > 10);
    for target in refs {
        let pointer = target.strip_prefix('#').unwrap_or(&target);
        assert!(spec.pointer(pointer).is_some(), "{target} points nowhere");
    }
    let paths = spec["paths"]
        .as_object()
        .cloned()
        .unwrap_or_else(|| panic!("expected an object of paths in {spec}"));
    assert!(paths.len() >= 15);
    for (path, ops) in &paths {
        for method in ops
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("expected an object of operations for {path}, got {ops}"))
        {
            let concrete = path.replace("{id}", "1");
            let answer = s.call(
                &method.to_uppercase(),
                &concrete,
                Some("application/json"),
                b"{}",
                true,
            );
            let unrouted = answer.status == 404
                && answer.json()["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("no route"));
            assert!(!unrouted, "{method} {path} is documented but not routed");
            assert_ne!(answer.status, 405, "{method} {path}");
        }
    }
}

pub fn limits(db: &TempDb) {
    let config = Config {
        database: db.url(),
        max_body_bytes: 1024,
        rate_limit_per_minute: 60,
        rate_limit_burst: 5,
        access: Access::Private,
        ..Config::default()
    };
    let s = TestServer::start(config);
    let big = "x".repeat(4096);
    let too_large = s.post_log("/api/v1/analyze", &big);
    assert_eq!(
        (too_large.status, too_large.json()["error"].clone()),
        (413, json!("payload_too_large"))
    );
    assert!(
        too_large.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("1024"))
    );

    let anonymous_read = s.get("/api/v1/incidents");
    assert_eq!(anonymous_read.status, 401);
    let read = s.call("GET", "/api/v1/incidents", None, b"", true);
    assert_eq!(read.status, 200, "{}", read.body);
    // Health stays open for probes.
    assert_eq!(s.get("/healthz").status, 200);

    let mut limited = None;
    for _ in 0..20 {
        let a = s.call("GET", "/api/v1/rules", None, b"", true);
        if a.status == 429 {
            limited = Some(a);
            break;
        }
    }
    let limited = limited.unwrap_or_else(|| panic!("the rate limit never answered 429"));
    assert_eq!(limited.json()["error"], "rate_limited");
    assert!(
        limited
            .header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|s| s >= 1)
    );
}

/// Every `$ref` of a JSON document.
fn collect_refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(target) = map.get("$ref").and_then(|r| r.as_str()) {
                out.push(target.to_owned());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
