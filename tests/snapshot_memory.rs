//! Bounded memory under hostile snapshots (issue 19): `.npz` files of a few hundred KB whose one
//! member inflates to 200 MiB, uploaded six at once to the real server while its embedded worker
//! replays them, keep the server's peak resident size (`VmHWM`) under 512 MiB (it was 3.7 GiB when
//! every upload inflated and copied its member); every upload is acknowledged (202) or told to come
//! back (503 with `Retry-After`), and the server still answers.
//!
//! In process: with the snapshot memory budget spent, an upload through the API or the page's form
//! is answered 503 with `Retry-After` and nothing is stored, and the worker waits for its share
//! before it loads a job's snapshot.

#[path = "api/server.rs"]
mod server;
mod support;

use std::io::{Cursor, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use faultline::app::App;
use faultline::config::Config;
use faultline::worker::{Outcome, Worker, WorkerOptions};
use server::{call, try_call};
use tower::ServiceExt;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

/// A cross-entropy target assert: the rule's causes name the `target_bounds` check on `labels`.
const LOG: &str = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:247: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\nRuntimeError: CUDA error: device-side assert triggered\n";

/// Uploads sent at once.
const UPLOADS: usize = 6;
/// What the one member of each hostile file inflates to (under the server's inflated limit).
const INFLATED_BYTES: u64 = 200 << 20;
/// The bound on the server's peak resident size. One job's 200 MiB is inflated at a time: usually
/// measured 245-270 MiB (about 40 MiB idle). The allocator may still hold the pages of the job
/// before while the next one inflates (freed on another thread, returned to the system after a
/// delay): a loaded CI machine measured 445 MiB once. So the bound is idle plus two jobs' members
/// and headroom, still far below the 3.7 GiB of six uploads inflated at once.
const PEAK_LIMIT_MIB: u64 = 512;

/// The binary, replaying on the CPU.
fn faultline() -> Command {
    let mut command = support::faultline();
    command.env("FAULTLINE_REPLAY_BACKEND", "cpu");
    command
}

/// An `.npz` whose `labels.npy` is `inflated` bytes of int64 zeros, deflated to a few hundred KB,
/// with `num_classes = 2` in its `params.json`.
fn hostile_npz(inflated: u64) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '<i8', 'fortran_order': False, 'shape': ({},), }}",
        inflated / 8
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    zip.start_file("params.json", options)
        .unwrap_or_else(|e| panic!("{e}"));
    zip.write_all(br#"{"num_classes": 2}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    zip.start_file("labels.npy", options)
        .unwrap_or_else(|e| panic!("{e}"));
    zip.write_all(b"\x93NUMPY\x01\x00")
        .unwrap_or_else(|e| panic!("{e}"));
    zip.write_all(&(header.len() as u16).to_le_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    zip.write_all(header.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..inflated / zeros.len() as u64 {
        zip.write_all(&zeros).unwrap_or_else(|e| panic!("{e}"));
    }
    zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

/// The process's peak resident size in MiB (`VmHWM` of `/proc/<pid>/status`).
fn peak_resident_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_else(|e| panic!("{e}"));
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    kib / 1024
}

/// Polls a job until it is done or failed.
fn finished_job(base: &str, status_url: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let job = call(&format!("{base}{status_url}"), "GET", None, b"", None).json();
        if job["state"] == "done" || job["state"] == "failed" {
            return job;
        }
        assert!(Instant::now() < deadline, "the job did not finish: {job}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn six_hostile_npz_uploads_and_their_replays_keep_the_server_under_512_mib() {
    let db = support::TempDb::new("snapshot-memory");
    let database = db.url();
    let token = support::create_token(&database, "t");
    let file = hostile_npz(INFLATED_BYTES);
    assert!(file.len() < 1 << 20, "the hostile file is {} bytes", file.len());

    let (mut child, base) = support::start_server(faultline(), &database);
    let incident = call(
        &format!("{base}/api/v1/analyze"),
        "POST",
        Some("text/plain"),
        LOG.as_bytes(),
        Some(&token),
    )
    .json()["incident_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no incident id"));
    let idle = peak_resident_mib(child.id());

    let url = format!("{base}/api/v1/incidents/{incident}/snapshots");
    let answers: Vec<server::Answer> = std::thread::scope(|scope| {
        let uploads: Vec<_> = (0..UPLOADS)
            .map(|_| {
                scope.spawn(|| {
                    try_call(
                        &url,
                        "POST",
                        Some("application/octet-stream"),
                        &file,
                        Some(&token),
                    )
                    .unwrap_or_else(|e| panic!("the upload got no answer: {e}"))
                })
            })
            .collect();
        uploads
            .into_iter()
            .map(|u| u.join().unwrap_or_else(|_| panic!("an upload thread panicked")))
            .collect()
    });
    let mut accepted = Vec::new();
    for answer in &answers {
        match answer.status {
            202 => accepted.push(support::json_str(&answer.json(), "status_url").to_owned()),
            503 => assert!(
                answer.header("retry-after").is_some(),
                "a 503 without Retry-After: {}",
                answer.body
            ),
            other => panic!("upload answered {other}: {}", answer.body),
        }
    }
    assert!(!accepted.is_empty(), "no upload was accepted");
    for status_url in &accepted {
        let job = finished_job(&base, status_url);
        assert_eq!(job["state"], "done", "{job}");
    }

    let peak = peak_resident_mib(child.id());
    let healthz = call(&format!("{base}/healthz"), "GET", None, b"", None);
    let _ = child.kill();
    let _ = child.wait();
    let _ = writeln!(
        std::io::stderr(),
        "{UPLOADS} uploads of {} KB inflating to {} MiB each, {} accepted and replayed: peak resident {peak} MiB (idle {idle} MiB)",
        file.len() / 1000,
        INFLATED_BYTES >> 20,
        accepted.len()
    );
    assert_eq!(healthz.status, 200, "{}", healthz.body);
    assert!(
        peak < PEAK_LIMIT_MIB,
        "the server peaked at {peak} MiB resident, over {PEAK_LIMIT_MIB} MiB"
    );
}

/// A server in this process, without its embedded worker, with a token and a stored incident.
struct InProcess {
    app: App,
    token: String,
    incident: i64,
    _db: support::TempDb,
}

impl InProcess {
    async fn start(name: &str) -> Self {
        let db = support::TempDb::new(name);
        let config = Config {
            database: db.url(),
            snapshot_store: db.dir.join("objects").display().to_string(),
            embedded_worker: false,
            rate_limit_per_minute: 0,
            ..Config::default()
        };
        let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
        let app = App::start(config, rules)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let token = app
            .state
            .store
            .create_token("t")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let incident = support::stored_incident(&app.state.store, LOG).await;
        Self {
            app,
            token,
            incident,
            _db: db,
        }
    }

    /// `file` sent to the API: status, `Retry-After`, body.
    async fn upload(&self, file: &[u8]) -> (u16, Option<String>, String) {
        let request = Request::post(format!("/api/v1/incidents/{}/snapshots", self.incident))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/octet-stream")
            .header("content-length", file.len())
            .body(Body::from(file.to_vec()))
            .unwrap_or_else(|e| panic!("{e}"));
        self.send(request).await
    }

    /// `file` sent through the incident page's form, by a signed-in visitor on this site.
    async fn upload_through_the_page(&self, file: &[u8]) -> (u16, Option<String>, String) {
        let boundary = "faultline-test-boundary-7MA4YWxk";
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"snapshot\"; filename=\"batch.npz\"\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(file);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let request = Request::post(format!("/incidents/{}/snapshots", self.incident))
            .header("host", "localhost")
            .header("origin", "http://localhost")
            .header("cookie", format!("fl_session={}", self.token))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .header("content-length", body.len())
            .body(Body::from(body))
            .unwrap_or_else(|e| panic!("{e}"));
        self.send(request).await
    }

    async fn send(&self, request: Request<Body>) -> (u16, Option<String>, String) {
        let response = self
            .app
            .router()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (status, retry_after, String::from_utf8_lossy(&body).into_owned())
    }

    fn stored_files(&self) -> usize {
        let dir = self.app.state.snapshots.location().to_owned();
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten())
                    .count()
            })
            .unwrap_or(0)
    }
}

#[tokio::test]
async fn an_upload_that_finds_the_memory_budget_spent_is_told_to_retry_and_nothing_is_stored() {
    let server = InProcess::start("snapshot-budget").await;
    let budget = &server.app.state.snapshot_memory;
    let file = hostile_npz(1 << 20);
    let held = budget.try_reserve(budget.total_bytes());
    assert!(held.is_some(), "the test holds the whole budget");

    let (status, retry_after, body) = server.upload(&file).await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("5")), "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["error"], "busy", "{body}");
    assert!(
        error["detail"].as_str().is_some_and(|d| d.contains("busy")),
        "{body}"
    );
    let (status, retry_after, page) = server.upload_through_the_page(&file).await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("5")));
    assert!(page.contains("busy with other snapshots"), "{page}");
    assert_eq!(server.stored_files(), 0, "nothing refused is stored");

    drop(held);
    let (status, _, body) = server.upload(&file).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(server.stored_files(), 1);
    assert_eq!(
        budget.available_bytes(),
        budget.total_bytes(),
        "the upload gave its share back"
    );
}

#[tokio::test]
async fn an_npz_over_the_servers_inflated_limit_is_refused_with_the_member_and_the_limit() {
    let server = InProcess::start("snapshot-inflated").await;
    let limit = server.app.state.config.snapshot_max_inflated_bytes;
    let (status, _, body) = server.upload(&hostile_npz(limit as u64 + (1 << 20))).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("zip member labels.npy inflates the .npz to")
            && body.contains(&format!("over the limit of {limit} inflated bytes")),
        "{body}"
    );
    assert_eq!(server.stored_files(), 0);
}

#[tokio::test]
async fn the_worker_waits_for_its_share_of_the_budget_before_it_loads_a_snapshot() {
    let server = InProcess::start("snapshot-worker-budget").await;
    let (status, _, body) = server.upload(&hostile_npz(8 << 20)).await;
    assert_eq!(status, 202, "{body}");
    let budget = server.app.state.snapshot_memory.clone();
    let mut options = WorkerOptions::from_config(&server.app.state.config);
    options.backend = faultline::replay::BackendChoice::Cpu;
    let worker = Worker::new(
        server.app.state.store.clone(),
        server.app.state.snapshots.clone(),
        options,
    )
    .with_budget(budget.clone());

    let held = budget.try_reserve(budget.total_bytes());
    let job = tokio::spawn(async move { worker.run_next().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!job.is_finished(), "the job waits while the budget is spent");
    drop(held);
    let outcome = tokio::time::timeout(Duration::from_secs(60), job).await;
    assert!(
        matches!(outcome, Ok(Ok(Ok(Some(Outcome::Done { .. }))))),
        "{outcome:?}"
    );
    assert_eq!(
        budget.available_bytes(),
        budget.total_bytes(),
        "the worker gave its share back"
    );
}
