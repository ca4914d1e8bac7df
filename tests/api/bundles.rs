//! A distributed job's files through the API: a multipart bundle, a JSON bundle, an archive, bad
//! parts refused with JSON errors, and one log answered exactly as before.

use std::io::Write;

use serde_json::{Value, json};

use crate::server::{Answer, TestServer};
use crate::support;

/// The PyTorch watchdog's line on a rank left waiting in ALLREDUCE `seq`.
fn timeout(rank: u32, seq: u64) -> String {
    format!(
        "[rank{rank}]:[E1127 05:10:10.000000 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
    )
}

/// A rank that raised ten minutes before the others timed out.
fn index_error(rank: u32) -> String {
    format!(
        "[rank{rank}]:[I1127 05:00:10.000000 train.py:10] step 41\n[rank{rank}]: Traceback (most recent call last):\n[rank{rank}]:   File \"train.py\", line 12, in <module>\n[rank{rank}]:     x = table[idx]\n[rank{rank}]: IndexError: index 7 is out of bounds for dimension 0 with size 4\n"
    )
}

/// Four ranks: rank 2 raises, the others wait for it.
fn four_ranks() -> Vec<(String, String)> {
    (0..4)
        .map(|rank| {
            let text = if rank == 2 {
                index_error(rank)
            } else {
                timeout(rank, 41)
            };
            (format!("rank{rank}.log"), text)
        })
        .collect()
}

/// A multipart body of `parts` (field name, file name, bytes) and its content type.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "faultline-test-boundary";
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        let disposition = match file {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        let _ = write!(body, "--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n");
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    let _ = write!(body, "--{boundary}--\r\n");
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn post_multipart(s: &TestServer, path: &str, parts: &[(&str, Option<&str>, &[u8])]) -> Answer {
    let (content_type, body) = multipart(parts);
    s.call("POST", path, Some(&content_type), &body, true)
}

fn files_of(files: &[(String, String)]) -> Vec<(&str, Option<&str>, &[u8])> {
    files
        .iter()
        .map(|(name, text)| ("file", Some(name.as_str()), text.as_bytes()))
        .collect()
}

fn ranks(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// A zip of `files` (name, text), deflated.
fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in files {
        let options =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(*name, options).unwrap_or_else(|e| panic!("{e}"));
        zip.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

pub fn all(s: &TestServer) {
    a_multipart_bundle_names_the_rank_that_failed_first(s);
    a_json_bundle_is_redacted_and_kept_file_by_file(s);
    an_archive_is_unpacked_into_its_files(s);
    bad_parts_are_refused_with_json_errors(s);
    one_log_is_answered_as_before(s);
}

fn a_multipart_bundle_names_the_rank_that_failed_first(s: &TestServer) {
    let files = four_ranks();
    let mut parts = files_of(&files);
    parts.push(("project", None, b"llm"));
    let answer = post_multipart(s, "/api/v1/analyze", &parts);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let doc = answer.json();
    assert_eq!(doc["kind"], "bundle");
    assert_eq!(doc["first_fault"]["rank"], 2, "{doc}");
    assert_eq!(doc["first_fault"]["kind"], "rank_failure");
    assert_eq!(ranks(&doc["cascades"][0]["ranks"]), vec![0, 1, 3]);
    assert_eq!(doc["files"].as_array().map(Vec::len), Some(4));

    let id = support::json_i64(&doc, "incident_id");
    let incident = s.get(&format!("/api/v1/incidents/{id}")).json();
    assert_eq!(incident["project"], "llm");
    assert_eq!(incident["bundle"]["first_fault"]["rank"], 2);
    let names: Vec<&str> = incident["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["rank0.log", "rank1.log", "rank2.log", "rank3.log"]);
    assert!(
        incident["log"].as_str().is_some_and(|l| l.contains("IndexError")),
        "the incident shows the log of the rank that failed first: {incident}"
    );
    let file = s.get(&format!("/api/v1/incidents/{id}/files/2"));
    assert_eq!((file.status, file.body.as_str()), (200, files[2].1.as_str()));
    assert_eq!(s.get(&format!("/api/v1/incidents/{id}/files/9")).status, 404);

    let page = s.get(&format!("/incidents/{id}")).body;
    assert!(
        page.contains("<svg ") && page.contains("class=\"mark first-fault\""),
        "{page}"
    );
    assert!(
        page.contains("Cascades") && page.contains("href=\"/incidents/"),
        "{page}"
    );

    let unstored = post_multipart(s, "/api/v1/analyze?store=false", &files_of(&files));
    assert_eq!(unstored.status, 200, "{}", unstored.body);
    assert!(
        unstored.json().get("incident_id").is_none(),
        "store=false stores nothing"
    );
}

fn a_json_bundle_is_redacted_and_kept_file_by_file(s: &TestServer) {
    let mut files = four_ranks();
    files[0]
        .1
        .insert_str(0, "[rank0]: HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234\n");
    let body = json!({
        "files": files.iter().map(|(name, content)| json!({"name": name, "content": content})).collect::<Vec<_>>(),
        "project": "llm",
        "job_url": "https://ci.example.com/job/7",
    });
    let answer = s.post_json("/api/v1/analyze", &body);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let doc = answer.json();
    assert_eq!(
        (doc["kind"].clone(), doc["first_fault"]["rank"].clone()),
        (json!("bundle"), json!(2))
    );
    assert!(
        !answer.body.contains("hf_abcdefghij"),
        "the answer is made from redacted text"
    );
    let id = support::json_i64(&doc, "incident_id");
    let kept = s.get(&format!("/api/v1/incidents/{id}/files/0")).body;
    assert!(
        kept.contains("<redacted>") && !kept.contains("hf_abcdefghij"),
        "{kept}"
    );
    assert_eq!(
        s.get(&format!("/api/v1/incidents/{id}")).json()["job_url"],
        "https://ci.example.com/job/7"
    );

    let offenders = s.get("/api/v1/offenders");
    assert_eq!(offenders.status, 200, "{}", offenders.body);
    assert_eq!(offenders.json()["threshold"], 3);
}

fn an_archive_is_unpacked_into_its_files(s: &TestServer) {
    let files = four_ranks();
    let members: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (n.as_str(), t.as_bytes())).collect();
    let zip = zip_of(&members);
    let answer = post_multipart(s, "/api/v1/analyze", &[("file", Some("job.zip"), &zip)]);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let doc = answer.json();
    assert_eq!(doc["first_fault"]["rank"], 2, "{doc}");
    let names: Vec<&str> = doc["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names.len(), 4);
    assert!(names.iter().all(|n| n.starts_with("job.zip/")), "{names:?}");
}

fn bad_parts_are_refused_with_json_errors(s: &TestServer) {
    let files = four_ranks();
    let refused = |answer: Answer, status: u16, words: &str| {
        assert_eq!(answer.status, status, "{}", answer.body);
        let doc = answer.json();
        assert!(doc["error"].is_string(), "{doc}");
        assert!(doc["detail"].as_str().is_some_and(|d| d.contains(words)), "{doc}");
    };
    let mut plain = files_of(&files);
    plain.push(("colour", None, b"red"));
    refused(
        post_multipart(s, "/api/v1/analyze", &plain),
        400,
        "has no file name",
    );
    let twice = [
        ("file", Some("rank0.log"), files[0].1.as_bytes()),
        ("file", Some("rank0.log"), files[1].1.as_bytes()),
    ];
    refused(
        post_multipart(s, "/api/v1/analyze", &twice),
        422,
        "two files are named",
    );
    let empty = [
        ("file", Some("a.log"), &b""[..]),
        ("file", Some("b.log"), &b"  \n"[..]),
    ];
    refused(
        post_multipart(s, "/api/v1/analyze", &empty),
        422,
        "every file is empty",
    );
    refused(post_multipart(s, "/api/v1/analyze", &[]), 422, "no file was sent");
    let unnamed = [
        ("file", Some(""), files[0].1.as_bytes()),
        ("file", Some("b.log"), files[1].1.as_bytes()),
    ];
    refused(post_multipart(s, "/api/v1/analyze", &unnamed), 400, "has no name");
    refused(
        s.call(
            "POST",
            "/api/v1/analyze",
            Some("multipart/form-data"),
            b"--x\r\n",
            true,
        ),
        400,
        "multipart",
    );
    refused(
        s.post_json("/api/v1/analyze", &json!({"log": "x", "files": []})),
        400,
        "not both",
    );
    refused(
        s.post_json("/api/v1/analyze", &json!({"project": "llm"})),
        400,
        "neither",
    );
    refused(
        s.post_json("/api/v1/analyze", &json!({"files": [{"content": "x"}]})),
        400,
        "name",
    );
    refused(
        post_multipart(
            s,
            "/api/v1/analyze",
            &[("file", Some("job.zip"), b"PK\x03\x04 not really a zip")],
        ),
        422,
        "job.zip",
    );
}

fn one_log_is_answered_as_before(s: &TestServer) {
    let log = index_error(0);
    let plain = s.post_log("/api/v1/analyze?store=false", &log).json();
    let one_part = post_multipart(
        s,
        "/api/v1/analyze?store=false",
        &[("file", Some("train.log"), log.as_bytes())],
    )
    .json();
    let one_file = s
        .post_json(
            "/api/v1/analyze?store=false",
            &json!({"files": [{"name": "train.log", "content": log}]}),
        )
        .json();
    assert!(
        plain.get("kind").is_none() && plain["findings"].is_array(),
        "{plain}"
    );
    assert_eq!(one_part, plain, "one file in a multipart body is one log");
    assert_eq!(one_file, plain, "one file in a JSON bundle is one log");
}

/// A zip that inflates past the server's limit is refused before it is inflated.
pub fn a_zip_bomb_is_refused(s: &TestServer) {
    let zeros = vec![0u8; 4 << 20];
    let bomb = zip_of(&[("rank0.log", &zeros), ("rank1.log", &zeros)]);
    assert!(bomb.len() < 64 << 10, "the bomb is small: {} bytes", bomb.len());
    let (content_type, body) = multipart(&[("file", Some("bomb.zip"), &bomb)]);
    let answer = s.call("POST", "/api/v1/analyze", Some(&content_type), &body, true);
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.json()["error"], "unprocessable");
    assert!(
        answer.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("bomb.zip") && d.contains("inflates to more than")),
        "{}",
        answer.body
    );
}
