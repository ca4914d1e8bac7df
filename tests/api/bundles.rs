//! A distributed job's files through the API: a multipart bundle, a JSON bundle, an archive, bad
//! parts refused with JSON errors, and one log answered exactly as before. What a user submits is
//! kept in a form that reads back: a flight-recorder pickle as its JSON, from which the analysis
//! gives the same diagnosis; any other binary file is neither analysed nor kept, and the answer
//! says so.

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
    a_flight_recorder_pickle_is_kept_as_its_json_and_the_kept_files_give_the_same_diagnosis(s);
    a_binary_file_that_is_no_dump_is_neither_analysed_nor_kept_and_the_answer_says_so(s);
    a_bundle_of_binary_files_none_of_them_a_dump_is_refused_with_a_json_error(s);
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

/// A job of the fixtures (`tests/fixtures/distributed/<job>/`): every file but its verdict and
/// torch's JSON copies of its dumps, so that each dump comes as torch writes it, a pickle.
fn fixture_job(job: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/distributed")
        .join(job);
    let mut files = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let name = path.strip_prefix(&dir).unwrap_or(&path).display().to_string();
            if path.is_dir() {
                stack.push(path);
            } else if name != "expected.toml" && !(name.contains("fr_trace/") && name.ends_with(".json")) {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.push((name, bytes));
            }
        }
    }
    files.sort();
    files
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|items| items.iter().find(|f| f["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

fn warnings(doc: &Value) -> Vec<String> {
    doc["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|w| w["message"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The first fault and the collectives: what a re-run must give again.
fn verdict(doc: &Value) -> (Value, Value, Value, Value) {
    let fault = &doc["first_fault"];
    (
        fault["kind"].clone(),
        fault["rank"].clone(),
        fault["collective"].clone(),
        doc["collectives"].clone(),
    )
}

fn a_flight_recorder_pickle_is_kept_as_its_json_and_the_kept_files_give_the_same_diagnosis(s: &TestServer) {
    let job = "sleep-past-timeout-torch2.15.0-gloo-n8";
    let files = fixture_job(job);
    let parts: Vec<(&str, Option<&str>, &[u8])> = files
        .iter()
        .map(|(name, bytes)| ("file", Some(name.as_str()), bytes.as_slice()))
        .collect();
    let answer = post_multipart(s, "/api/v1/analyze", &parts);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let doc = answer.json();
    assert_eq!(
        (&doc["first_fault"]["kind"], &doc["first_fault"]["rank"]),
        (&json!("never_entered"), &json!(3)),
        "the straggler is found from the dumps: {doc}"
    );
    assert!(warnings(&doc).is_empty(), "{:?}", warnings(&doc));

    let id = support::json_i64(&doc, "incident_id");
    let incident = s.get(&format!("/api/v1/incidents/{id}")).json();
    let stored = &incident["files"];
    assert_eq!(
        stored.as_array().map(Vec::len),
        Some(files.len()),
        "every file is kept"
    );
    let dump = named(stored, "host-a/fr_trace/fr_3");
    assert_eq!(
        (&dump["kind"], &dump["binary"], &dump["kept_as"]),
        (
            &json!("flight_recorder"),
            &json!(true),
            &json!("host-a/fr_trace/fr_3.json")
        )
    );
    let log = named(stored, "host-a/console.log");
    assert!(
        log.get("kept_as").is_none(),
        "a text file is kept as it came: {log}"
    );

    // The kept dump reads back as JSON, the same structure torch's own JSON dump has.
    let kept = s.get(&format!("/api/v1/incidents/{id}/files/{}", dump["ordinal"]));
    assert_eq!(kept.status, 200, "{}", kept.body);
    assert_eq!(kept.header("content-type"), Some("application/json"));
    let kept = kept.json();
    let torch_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/distributed")
        .join(job)
        .join("host-a/fr_trace/fr_3.json");
    let torch: Value = serde_json::from_slice(&std::fs::read(&torch_path).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (&kept["version"], &kept["pg_config"]),
        (&torch["version"], &torch["pg_config"])
    );
    let entries = |d: &Value| d["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries(&kept).len(), entries(&torch).len());
    assert!(!entries(&kept).is_empty(), "{kept}");
    for (mine, theirs) in entries(&kept).iter().zip(entries(&torch).iter()) {
        let keys = |e: &Value| e.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(mine), keys(theirs));
        for key in [
            "collective_seq_id",
            "profiling_name",
            "input_sizes",
            "state",
            "pg_id",
        ] {
            assert_eq!(mine[key], theirs[key], "{key}");
        }
    }
    let seq = |d: &Value| {
        d["pg_status"]["0"]["last_enqueued_collective"]
            .to_string()
            .replace('"', "")
    };
    assert_eq!(
        seq(&kept),
        seq(&torch),
        "torch writes the number as a string, the kept JSON as it was"
    );
    let text = s.get(&format!("/api/v1/incidents/{id}/files/{}", log["ordinal"]));
    assert_eq!(text.header("content-type"), Some("text/plain; charset=utf-8"));

    // Run again from the files as kept, each under the name it is kept as: the same diagnosis.
    let kept_files: Vec<(String, String)> = stored
        .as_array()
        .map(|list| {
            list.iter()
                .map(|f| {
                    let name = f["kept_as"].as_str().or(f["name"].as_str()).unwrap_or_default();
                    let body = s
                        .get(&format!("/api/v1/incidents/{id}/files/{}", f["ordinal"]))
                        .body;
                    (name.to_owned(), body)
                })
                .collect()
        })
        .unwrap_or_default();
    let rerun = post_multipart(s, "/api/v1/analyze?store=false", &files_of(&kept_files));
    assert_eq!(rerun.status, 200, "{}", rerun.body);
    assert_eq!(verdict(&rerun.json()), verdict(&doc));

    let page = s.get(&format!("/incidents/{id}")).body;
    assert!(
        page.contains("a flight-recorder pickle, kept as host-a/fr_trace/fr_3.json (its content in JSON)"),
        "{page}"
    );
    let shown = s.get(&format!("/incidents/{id}/files/{}", dump["ordinal"]));
    assert_eq!(shown.header("content-type"), Some("application/json"));

    // A pickle sent alone is a bundle of one dump, kept the same way, not one log of lossy text.
    let alone = post_multipart(
        s,
        "/api/v1/analyze",
        &[(
            "file",
            Some("fr_trace/fr_3"),
            &files[files
                .iter()
                .position(|(n, _)| n == "host-a/fr_trace/fr_3")
                .unwrap_or(0)]
            .1,
        )],
    );
    assert_eq!(alone.status, 200, "{}", alone.body);
    assert_eq!(alone.json()["kind"], "bundle");
    let id = support::json_i64(&alone.json(), "incident_id");
    let one = s.get(&format!("/api/v1/incidents/{id}")).json();
    assert_eq!(
        named(&one["files"], "fr_trace/fr_3")["kept_as"],
        "fr_trace/fr_3.json"
    );
}

/// An ELF core dump's first bytes and a PNG's: binary files faultline does not read.
const CORE_DUMP: &[u8] = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x3e\x00";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00";

fn a_binary_file_that_is_no_dump_is_neither_analysed_nor_kept_and_the_answer_says_so(s: &TestServer) {
    let files = four_ranks();
    let mut parts = files_of(&files);
    parts.push(("file", Some("core.1234"), CORE_DUMP));
    parts.push(("file", Some("loss.png"), PNG));
    let answer = post_multipart(s, "/api/v1/analyze", &parts);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let doc = answer.json();
    assert_eq!(doc["first_fault"]["rank"], 2, "{doc}");
    let said = warnings(&doc);
    for name in ["core.1234", "loss.png"] {
        let words =
            format!("file \"{name}\": binary, not a format faultline reads; not analysed and not kept");
        assert!(said.contains(&words), "{said:?}");
        assert!(
            doc["files"]
                .as_array()
                .is_some_and(|f| f.iter().all(|f| f["name"] != name)),
            "{name} was not analysed: {doc}"
        );
    }

    let id = support::json_i64(&doc, "incident_id");
    let incident = s.get(&format!("/api/v1/incidents/{id}")).json();
    let names: Vec<&str> = incident["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        vec!["rank0.log", "rank1.log", "rank2.log", "rank3.log"],
        "only what was read is kept"
    );
    assert_eq!(warnings(&incident["bundle"]), said, "the incident says so too");
    let page = s.get(&format!("/incidents/{id}")).body;
    assert!(
        page.contains("core.1234") && page.contains("not analysed and not kept"),
        "{page}"
    );
}

fn a_bundle_of_binary_files_none_of_them_a_dump_is_refused_with_a_json_error(s: &TestServer) {
    let refused = |answer: Answer| {
        assert_eq!(answer.status, 422, "{}", answer.body);
        let doc = answer.json();
        assert_eq!(doc["error"], "unprocessable");
        let detail = doc["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with("no file of the bundle can be read")
                && detail.contains(r#""core.1234": binary, not a format faultline reads"#),
            "{doc}"
        );
    };
    refused(post_multipart(
        s,
        "/api/v1/analyze",
        &[
            ("file", Some("core.1234"), CORE_DUMP),
            ("file", Some("loss.png"), PNG),
        ],
    ));
    refused(post_multipart(
        s,
        "/api/v1/analyze",
        &[("file", Some("core.1234"), CORE_DUMP)],
    ));
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
