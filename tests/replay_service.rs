//! Replay as a service: replay jobs in the knowledge base (SQLite always, PostgreSQL when
//! `TEST_POSTGRES_URL` is set), snapshot storage (a local folder always, S3 through a moto server
//! when `TEST_S3_URL` is set), the upload API with its embedded worker, the incident page, and
//! `faultline analyze --snapshot`.

#[path = "api/server.rs"]
mod server;
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use faultline::config::Config;
use faultline::kb::codec::sha256_hex;
use faultline::kb::replay::{JobState, NewSnapshot};
use faultline::kb::{Store, now_ms};
use faultline::model::{EvidenceTier, Verdict};
use faultline::objects::{ObjectError, SnapshotStore, new_key};
use faultline::replay::snapshot::Format;
use faultline::replay::{BackendChoice, CheckResult, DType, Limits, Snapshot};
use faultline::service::Access;
use faultline::worker::{Outcome, Worker, WorkerOptions};
use safetensors::tensor::TensorView;
use server::TestServer;

/// A cross-entropy target assert: the rule's causes name the `target_bounds` check.
const LOG: &str = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:247: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\nRuntimeError: CUDA error: device-side assert triggered\n";
const CONFIRMED: &str = "labels[2] = 2 >= num_classes = 2";

/// A safetensors file with one int64 tensor `labels` and its metadata.
fn labels_snapshot(labels: &[i64], metadata: &[(&str, &str)]) -> Vec<u8> {
    let bytes: Vec<u8> = labels.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = TensorView::new(safetensors::Dtype::I64, vec![labels.len()], &bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    let metadata: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    safetensors::serialize([("labels", view)], (!metadata.is_empty()).then_some(metadata))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The canonical confirming case: labels [0, 1, 2, 1] with num_classes = 2.
fn confirming_snapshot() -> Vec<u8> {
    labels_snapshot(&[0, 1, 2, 1], &[("num_classes", "2")])
}

fn in_memory_summary() -> faultline::replay::snapshot::SnapshotSummary {
    let labels: Vec<u8> = [0i64, 1, 2, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
    Snapshot::from_tensors(
        Format::Safetensors,
        vec![("labels".into(), DType::I64, vec![4], labels)],
        [("num_classes".to_owned(), "2".to_owned())].into(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .summary()
}

/// A snapshot row whose file is under its hash alone, as files were stored before uploads had keys
/// of their own.
fn new_snapshot(incident_id: i64, sha256: &str) -> NewSnapshot {
    NewSnapshot {
        incident_id,
        sha256: sha256.to_owned(),
        object_key: sha256.to_owned(),
        bytes: 96,
        summary: in_memory_summary(),
        params: serde_json::json!({}),
        stored: true,
    }
}

fn a_result() -> CheckResult {
    CheckResult {
        check: "target_bounds".into(),
        verdict: Verdict::Confirmed,
        summary: format!("{CONFIRMED} (1 of 4 values out of range)"),
        tensor: Some("labels".into()),
        elements: 4,
        offending: 1,
        min: Some("0".into()),
        max: Some("2".into()),
        first_offenses: Vec::new(),
        params: Default::default(),
        positions: Vec::new(),
        backend: "cpu".into(),
    }
}

/// Leases, heartbeats, completion by the lease holder only, retries and the last attempt.
async fn jobs_are_leased_once_and_finish_once(store: Store) {
    let incident = support::stored_incident(&store, LOG).await;
    let key = sha256_hex(b"a");
    let (snapshot_id, job_id) = store
        .submit_snapshot(&new_snapshot(incident, &key), 3)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        store
            .submit_snapshot(&new_snapshot(999_999, &key), 3)
            .await
            .is_err(),
        "a snapshot of an unknown incident is refused"
    );

    let leased = store
        .lease_job("a", 60_000)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let job = leased.unwrap_or_else(|| panic!("the queued job is leased"));
    assert_eq!((job.id, job.snapshot_id, job.attempts), (job_id, snapshot_id, 1));
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.lease_owner.as_deref(), Some("a"));
    assert!(
        store
            .lease_job("b", 60_000)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none(),
        "a leased job is not leased twice"
    );
    assert!(store.heartbeat(job_id, "a", 60_000).await.unwrap_or(false));
    assert!(!store.heartbeat(job_id, "b", 60_000).await.unwrap_or(true));

    let mut diagnosis = store.diagnosis(incident).await.unwrap_or_else(|e| panic!("{e}"));
    diagnosis.findings[0].tier = EvidenceTier::Confirmed;
    let completed_by_b = store.complete_job(job_id, "b", &[a_result()], &diagnosis).await;
    assert!(!completed_by_b.unwrap_or(true), "only the lease holder completes");
    let completed_by_a = store.complete_job(job_id, "a", &[a_result()], &diagnosis).await;
    assert!(completed_by_a.unwrap_or(false));
    let again = store.complete_job(job_id, "a", &[a_result()], &diagnosis).await;
    assert!(!again.unwrap_or(true), "a done job is not completed again");
    let done = store.job(job_id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.state, JobState::Done);
    assert_eq!(done.results, vec![a_result()]);
    let updated = store.diagnosis(incident).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(updated.findings[0].tier, EvidenceTier::Confirmed);

    // A worker that stops renewing its lease loses the job to another one.
    let second = store
        .enqueue_job(incident, snapshot_id, 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first_try = store.lease_job("a", 1).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first_try.map(|j| j.id), Some(second));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let retry = store.lease_job("b", 1).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(retry.map(|j| (j.id, j.attempts)), Some((second, 2)));
    assert!(
        !store
            .complete_job(second, "a", &[], &diagnosis)
            .await
            .unwrap_or(true)
    );
    assert_eq!(
        store.fail_job(second, "a", "late").await.ok(),
        Some(None),
        "the old holder cannot fail it either"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        store
            .lease_job("c", 60_000)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none(),
        "its attempts are spent"
    );
    let failed = store.job(second).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failed.state, JobState::Failed);
    assert!(failed.error.is_some_and(|e| e.contains("lease expired")));

    // A failed attempt is queued again while attempts remain.
    let third = store
        .enqueue_job(incident, snapshot_id, 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        store
            .lease_job("a", 60_000)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );
    assert_eq!(
        store.fail_job(third, "a", "boom").await.ok(),
        Some(Some(JobState::Queued))
    );
    assert!(
        store
            .lease_job("a", 60_000)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );
    assert_eq!(
        store.fail_job(third, "a", "boom").await.ok(),
        Some(Some(JobState::Failed))
    );
    assert_eq!(
        store.job(third).await.ok().and_then(|j| j.error).as_deref(),
        Some("boom")
    );

    // Retention: old files with no pending job may go; their summaries and results stay.
    let keys = store
        .releasable_snapshot_keys(now_ms() + 1, 100)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(keys, vec![key.clone()]);
    assert!(
        store
            .releasable_snapshot_keys(now_ms() - 86_400_000, 100)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty(),
        "a snapshot younger than the cutoff is kept"
    );
    assert_eq!(
        store.mark_snapshot_released(&key, now_ms() + 1).await.ok(),
        Some(1)
    );
    let kept = store
        .snapshot(snapshot_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!kept.stored);
    assert_eq!(kept.summary, in_memory_summary());
    assert_eq!(store.job(job_id).await.ok().map(|j| j.results.len()), Some(1));
    assert_eq!(
        store.snapshots_of_incident(incident).await.ok().map(|s| s.len()),
        Some(1)
    );
    assert_eq!(
        store.jobs_of_incident(incident).await.ok().map(|j| j.len()),
        Some(3)
    );
}

#[tokio::test]
async fn jobs_are_leased_once_and_finish_once_on_sqlite() {
    let db = support::TempDb::new("replay-jobs");
    let store = db.store().await;
    jobs_are_leased_once_and_finish_once(store).await;
}

#[tokio::test]
async fn jobs_are_leased_once_and_finish_once_on_postgres() {
    let Some(store) = support::postgres_store("replay_jobs").await else {
        return;
    };
    jobs_are_leased_once_and_finish_once(store).await;
}

/// A migrated SQLite knowledge base and a snapshot folder beside it.
async fn sqlite_with_snapshots(name: &str) -> (support::TempDb, Store, SnapshotStore) {
    let db = support::TempDb::new(name);
    let store = db.store().await;
    let objects = SnapshotStore::local(&db.dir.join("snapshots")).unwrap_or_else(|e| panic!("{e}"));
    (db, store, objects)
}

/// A worker on the CPU backend with no retention of its own, run job by job with `run_next`.
fn cpu_worker(store: &Store, objects: &SnapshotStore) -> Worker {
    let options = WorkerOptions {
        id: "w".into(),
        backend: BackendChoice::Cpu,
        lease: Duration::from_secs(30),
        poll: Duration::from_millis(10),
        summary_only: false,
        retention_days: 0,
        limits: Limits::default(),
    };
    Worker::new(store.clone(), objects.clone(), options)
}

#[tokio::test]
async fn a_stored_file_that_does_not_match_its_hash_fails_after_its_attempts() {
    let (_db, store, objects) = sqlite_with_snapshots("replay-corrupt").await;
    let incident = support::stored_incident(&store, LOG).await;
    let key = sha256_hex(&confirming_snapshot());
    objects
        .put(&key, b"something else".to_vec().into())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_, job_id) = store
        .submit_snapshot(&new_snapshot(incident, &key), 2)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let worker = cpu_worker(&store, &objects);
    let states: Vec<Option<JobState>> = [worker.run_next().await, worker.run_next().await]
        .into_iter()
        .map(|o| match o {
            Ok(Some(Outcome::Failed { state, .. })) => Some(state),
            _ => None,
        })
        .collect();
    assert_eq!(states, vec![Some(JobState::Queued), Some(JobState::Failed)]);
    let job = store.job(job_id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.attempts, 2);
    assert!(job.error.is_some_and(|e| e.contains("does not match its hash")));
    assert!(
        matches!(worker.run_next().await, Ok(None)),
        "nothing is left to do"
    );
}

/// The retention sweep lists an old upload's file as releasable; before it deletes it, the same
/// bytes are uploaded again for a new incident. The new upload has a file of its own, which the
/// sweep does not touch, and its job runs.
#[tokio::test]
async fn the_retention_sweep_never_takes_the_file_of_a_new_upload_of_the_same_bytes() {
    let (_db, store, objects) = sqlite_with_snapshots("replay-retention-race").await;
    let worker = cpu_worker(&store, &objects);
    let data = confirming_snapshot();
    let upload = |incident_id: i64| {
        let (store, objects, data) = (store.clone(), objects.clone(), data.clone());
        async move {
            let sha256 = sha256_hex(&data);
            let object_key = new_key(&sha256).unwrap_or_else(|e| panic!("{e}"));
            objects
                .put(&object_key, data.into())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let snapshot = NewSnapshot {
                object_key,
                ..new_snapshot(incident_id, &sha256)
            };
            store
                .submit_snapshot(&snapshot, 2)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let (old, _) = upload(support::stored_incident(&store, LOG).await).await;
    assert!(matches!(worker.run_next().await, Ok(Some(Outcome::Done { .. }))));

    let cutoff = now_ms() + 1;
    let releasable = store
        .releasable_snapshot_keys(cutoff, 100)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (new, job) = upload(support::stored_incident(&store, LOG).await).await;
    for key in &releasable {
        objects.delete(key).await.unwrap_or_else(|e| panic!("{e}"));
        store
            .mark_snapshot_released(key, cutoff)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    let snapshot = |id| {
        let store = store.clone();
        async move { store.snapshot(id).await.unwrap_or_else(|e| panic!("{e}")) }
    };
    let (old, new) = (snapshot(old).await, snapshot(new).await);
    assert_eq!(releasable, vec![old.object_key.clone()]);
    assert!(!old.stored && new.stored);
    assert!(matches!(
        objects.get(&old.object_key).await,
        Err(ObjectError::NotFound(_))
    ));
    assert_eq!(
        objects.get(&new.object_key).await.ok().map(|b| b.to_vec()),
        Some(data)
    );
    assert!(matches!(worker.run_next().await, Ok(Some(Outcome::Done { .. }))));
    assert_eq!(store.job(job).await.ok().map(|j| j.state), Some(JobState::Done));
}

/// A snapshot whose record cannot be written (here: its incident is gone) leaves no file behind:
/// the key is this upload's own, so nothing else could ever use it.
#[tokio::test]
async fn a_snapshot_the_database_refuses_leaves_no_file() {
    let db = support::TempDb::new("replay-refused");
    let folder = db.dir.join("objects");
    let config = Config {
        database: db.url(),
        snapshot_store: folder.display().to_string(),
        embedded_worker: false,
        ..Config::default()
    };
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let app = faultline::app::App::start(config, rules)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = faultline::service::snapshots::store_snapshot(
        &app.state,
        999_999,
        confirming_snapshot().into(),
        serde_json::json!({}),
    )
    .await;
    assert!(refused.is_err());
    let files = std::fs::read_dir(&folder)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(files, 0, "no file is left in {}", folder.display());
}

/// `TEST_S3_URL` (a moto server); its absence skips (see `support::skip_unless_ci`).
fn s3_url() -> Option<String> {
    match std::env::var("TEST_S3_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            support::skip_unless_ci(
                "S3 snapshot storage tests",
                "TEST_S3_URL (a moto server, e.g. http://127.0.0.1:5000; .ci/run sets it)",
            );
            None
        }
    }
}

#[tokio::test]
async fn snapshots_round_trip_through_s3() {
    let Some(url) = s3_url() else {
        return;
    };
    let bucket = format!("faultline-test-{}", std::process::id());
    // moto takes an unsigned bucket creation.
    let created = server::call(&format!("{url}/{bucket}"), "PUT", None, b"", None);
    assert!(
        created.status < 300,
        "cannot create the bucket: {} {}",
        created.status,
        created.body
    );
    let store = SnapshotStore::s3(
        &format!("s3://{bucket}/snapshots"),
        &[
            ("aws_endpoint", url.as_str()),
            ("aws_access_key_id", "test"),
            ("aws_secret_access_key", "test"),
            ("aws_region", "us-east-1"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let data = confirming_snapshot();
    let key = new_key(&sha256_hex(&data)).unwrap_or_else(|e| panic!("{e}"));
    store
        .put(&key, data.clone().into())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .put(&key, data.clone().into())
        .await
        .unwrap_or_else(|e| panic!("the same file twice: {e}"));
    assert_eq!(store.get(&key).await.ok().map(|b| b.to_vec()), Some(data));
    let listed = server::call(&format!("{url}/{bucket}?list-type=2"), "GET", None, b"", None);
    assert!(
        listed.body.contains(&format!("snapshots/{}/{key}", &key[..2])),
        "the object is under its prefix and key: {}",
        listed.body
    );
    store.delete(&key).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(store.get(&key).await, Err(ObjectError::NotFound(_))));
}

fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "faultline-test-boundary-7MA4YWxk";
    let mut body = Vec::new();
    for (name, file, data) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match file {
            Some(f) => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
            ),
            None => body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes()),
        }
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Waits for a job to finish (done or failed) and returns its status document.
fn finished_job(s: &TestServer, status_url: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = s.get(status_url).json();
        if job["state"] == "done" || job["state"] == "failed" || Instant::now() > deadline {
            return job;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn uploaded_snapshots_are_checked_by_the_embedded_worker() {
    let db = support::TempDb::new("replay-api");
    let folder = db.dir.join("objects");
    let s = TestServer::start(Config {
        database: db.url(),
        snapshot_store: folder.display().to_string(),
        snapshot_max_bytes: 64 << 10,
        replay_backend: BackendChoice::Cpu,
        rate_limit_per_minute: 0,
        access: Access::TokenForWrites,
        ..Config::default()
    });
    let incident = s.post_log("/api/v1/analyze", LOG).json()["incident_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no incident id"));
    let path = format!("/api/v1/incidents/{incident}/snapshots");

    // Refused before anything is stored.
    let bad = s.call(
        "POST",
        &path,
        Some("application/octet-stream"),
        b"not a snapshot",
        true,
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert_eq!(bad.json()["error"], "unprocessable");
    assert!(
        bad.json()["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("invalid snapshot"))
    );
    let unknown = s.call(
        "POST",
        "/api/v1/incidents/999999/snapshots",
        Some("application/octet-stream"),
        &confirming_snapshot(),
        true,
    );
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let anonymous = s.call(
        "POST",
        &path,
        Some("application/octet-stream"),
        &confirming_snapshot(),
        false,
    );
    assert_eq!(anonymous.status, 401);
    let huge = s.call(
        "POST",
        &path,
        Some("application/octet-stream"),
        &vec![0u8; 100 << 10],
        true,
    );
    assert_eq!(huge.status, 413, "{}", huge.body);
    let wrong_type = s.call("POST", &path, Some("text/plain"), b"x", true);
    assert_eq!(wrong_type.status, 415);
    assert!(
        !folder.exists() || std::fs::read_dir(&folder).map(|d| d.count()).unwrap_or(0) == 0,
        "nothing refused was stored"
    );

    // Raw body, parameters in the query string.
    let plain = labels_snapshot(&[0, 1, 2, 1], &[]);
    let raw = s.call(
        "POST",
        &format!("{path}?num_classes=2"),
        Some("application/octet-stream"),
        &plain,
        true,
    );
    assert_eq!(raw.status, 202, "{}", raw.body);
    let accepted = raw.json();
    let status_url = support::json_str(&accepted, "status_url").to_owned();
    assert_eq!(status_url, format!("/api/v1/replay/jobs/{}", accepted["job_id"]));
    let hash = sha256_hex(&plain);
    let stored: Vec<String> = std::fs::read_dir(folder.join(&hash[..2]))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_else(|e| panic!("no snapshot folder for {hash}: {e}"));
    assert!(
        stored.iter().any(|name| name.starts_with(&format!("{hash}."))),
        "stored under a key that starts with its hash: {stored:?}"
    );

    let job = finished_job(&s, &status_url);
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["results"][0]["verdict"], "confirmed", "{job}");
    assert_eq!(job["snapshot"]["summary"]["params"]["num_classes"], "2");

    let detail = s.get(&format!("/api/v1/incidents/{incident}")).json();
    let finding = &detail["diagnosis"]["findings"][0];
    assert_eq!(finding["tier"], "confirmed", "{finding}");
    let outcomes: Vec<&str> = finding["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["outcome"]["summary"].as_str())
                .collect()
        })
        .unwrap_or_else(|| panic!("expected a list of causes in {finding}"));
    assert!(
        outcomes.iter().any(|o| o.contains(CONFIRMED)),
        "the cause outcome says {CONFIRMED}: {outcomes:?}"
    );

    // Multipart: the file part and a JSON parameter part (here refuting: labels in range).
    let (content_type, body) = multipart(&[
        (
            "snapshot",
            Some("batch.safetensors"),
            &labels_snapshot(&[0, 1, 1, 0], &[]),
        ),
        ("params", None, br#"{"num_classes": 2}"#),
    ]);
    let form = s.call("POST", &path, Some(&content_type), &body, true);
    assert_eq!(form.status, 202, "{}", form.body);
    let job = finished_job(&s, support::json_str(&form.json(), "status_url"));
    assert_eq!(job["results"][0]["verdict"], "refuted", "{job}");
    let (content_type, body) = multipart(&[("params", None, b"{}")]);
    let missing = s.call("POST", &path, Some(&content_type), &body, true);
    assert_eq!(missing.status, 422, "{}", missing.body);

    // The incident page shows the verdicts, and the form to whom may send it (signed in here).
    let signed_in = |path: &str| {
        let session = [("cookie", format!("fl_session={}", s.token))];
        server::request(&s.url(path), "GET", &session, b"")
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .body
    };
    let page = signed_in(&format!("/incidents/{incident}"));
    assert!(
        page.contains(&format!("action=\"/incidents/{incident}/snapshots\"")),
        "the page has the snapshot form"
    );
    assert!(page.contains("refuted"), "the latest job's verdict is shown");
    assert!(
        page.contains("the latest replay&#39;s verdict for this diagnosis")
            || page.contains("the latest replay's verdict for this diagnosis"),
        "the diagnosis's one verdict is shown"
    );
    assert!(page.contains("verdict for the diagnosis: "), "with its report");
    assert!(
        page.contains(CONFIRMED.replace('>', "&#62;").as_str()),
        "the first job's summary is shown"
    );

    // A diagnosis none of whose causes has a check: the page offers no form and says why, and a
    // snapshot sent anyway through the API is done with nothing checked.
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
    let oom_incident = s.post_log("/api/v1/analyze", oom).json()["incident_id"].clone();
    let sent = s.call(
        "POST",
        &format!("/api/v1/incidents/{oom_incident}/snapshots?num_classes=2"),
        Some("application/octet-stream"),
        &plain,
        true,
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
    let job = finished_job(&s, support::json_str(&sent.json(), "status_url"));
    assert_eq!(
        (job["state"].clone(), job["results"].clone()),
        (serde_json::json!("done"), serde_json::json!([]))
    );
    let page = signed_in(&format!("/incidents/{oom_incident}"));
    assert!(
        !page.contains(&format!("action=\"/incidents/{oom_incident}/snapshots\""))
            && page.contains("so a snapshot would not be checked"),
        "{page}"
    );
    assert!(page.contains("Done, with nothing checked"), "{page}");
}

fn faultline() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_faultline"));
    c.env_remove("FAULTLINE_RULES").env_remove("FAULTLINE_SERVER");
    c
}

#[test]
fn analyze_with_a_snapshot_runs_the_checks_of_the_diagnosis() {
    let dir = support::TempDb::new("replay-cli");
    let log = dir.dir.join("train.log");
    let snapshot = dir.dir.join("batch.safetensors");
    std::fs::write(&log, LOG).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&snapshot, labels_snapshot(&[0, 1, 2, 1], &[])).unwrap_or_else(|e| panic!("{e}"));
    let args = |extra: &[&str]| {
        let mut a = vec![
            "analyze".to_owned(),
            log.display().to_string(),
            "--snapshot".into(),
            snapshot.display().to_string(),
            "--param".into(),
            "num_classes=2".into(),
            "--backend".into(),
            "cpu".into(),
        ];
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let human = faultline()
        .args(args(&[]))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&human.stdout);
    assert_eq!(
        human.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&human.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("replay (cpu): confirmed: ") && l.contains(CONFIRMED)),
        "{text}"
    );
    let json = faultline()
        .args(args(&["--format", "json"]))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(doc["findings"][0]["tier"], "confirmed");
    // The labels past the classes are the observation; the causes sharing it are consistent.
    assert_eq!(
        doc["findings"][0]["causes"][0]["outcome"]["verdict"],
        "consistent"
    );
    assert_eq!(doc["replay"]["verdict"], "confirmed");

    std::fs::write(&snapshot, b"not a snapshot").unwrap_or_else(|e| panic!("{e}"));
    let bad = faultline()
        .args(args(&[]))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid snapshot"));
}

#[test]
fn analyze_with_a_server_uploads_the_snapshot_to_the_stored_incident() {
    let db = support::TempDb::new("replay-cli-upload");
    let s = TestServer::start(Config {
        database: db.url(),
        snapshot_store: db.dir.join("objects").display().to_string(),
        replay_backend: BackendChoice::Cpu,
        rate_limit_per_minute: 0,
        access: Access::TokenForWrites,
        ..Config::default()
    });
    let log = db.dir.join("train.log");
    let snapshot = db.dir.join("batch.safetensors");
    std::fs::write(&log, LOG).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&snapshot, labels_snapshot(&[0, 1, 2, 1], &[])).unwrap_or_else(|e| panic!("{e}"));
    let run = faultline()
        .args(["analyze", &log.display().to_string(), "--server", &s.base])
        .args(["--token", &s.token, "--snapshot", &snapshot.display().to_string()])
        .args(["--param", "num_classes=2", "--format", "json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let status_url = stderr
        .split_whitespace()
        .find_map(|w| w.strip_prefix(s.base.as_str()))
        .unwrap_or_else(|| panic!("no job URL in: {stderr}"));
    let job = finished_job(&s, status_url);
    assert_eq!(job["results"][0]["verdict"], "confirmed", "{job}");
    assert_eq!(job["snapshot"]["summary"]["params"]["num_classes"], "2");

    let anonymous = faultline()
        .args(["analyze", &log.display().to_string(), "--server", &s.base])
        .args(["--snapshot", &snapshot.display().to_string()])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(anonymous.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("401"),
        "{}",
        String::from_utf8_lossy(&anonymous.stderr)
    );
}
