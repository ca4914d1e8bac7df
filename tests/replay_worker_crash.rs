//! A replay worker killed with SIGKILL mid-job loses nothing: its lease expires, another worker
//! leases the job again and finishes it, once. The first worker is slowed by the worker's test
//! hook (`FAULTLINE_WORKER_TEST_DELAY_MS`) so that it is surely killed while it holds the job.

mod support;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use faultline::kb::Store;
use faultline::kb::codec::sha256_hex;
use faultline::kb::replay::{JobState, NewSnapshot};
use faultline::model::{EvidenceTier, Verdict};
use faultline::objects::{SnapshotStore, new_key};
use faultline::replay::DType;
use faultline::replay::snapshot::{Format, SnapshotSummary, TensorSummary};
use safetensors::tensor::TensorView;

const LOG: &str = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:247: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\nRuntimeError: CUDA error: device-side assert triggered\n";

/// labels [0, 1, 2, 1] with num_classes = 2 in its metadata.
fn snapshot_file() -> Vec<u8> {
    let bytes: Vec<u8> = [0i64, 1, 2, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = TensorView::new(safetensors::Dtype::I64, vec![4], &bytes).unwrap_or_else(|e| panic!("{e}"));
    let metadata = [("num_classes".to_owned(), "2".to_owned())].into();
    safetensors::serialize([("labels", view)], Some(metadata)).unwrap_or_else(|e| panic!("{e}"))
}

/// An incident with a snapshot and its queued job; returns the job id.
async fn queued_job(store: &Store, objects: &SnapshotStore) -> i64 {
    let incident = support::stored_incident(store, LOG).await;
    let data = snapshot_file();
    let sha256 = sha256_hex(&data);
    let object_key = new_key(&sha256).unwrap_or_else(|e| panic!("{e}"));
    objects
        .put(&object_key, data.clone().into())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let snapshot = NewSnapshot {
        incident_id: incident,
        sha256,
        object_key,
        bytes: data.len() as i64,
        summary: SnapshotSummary {
            format: Format::Safetensors,
            data_bytes: 32,
            tensors: vec![TensorSummary {
                name: "labels".into(),
                dtype: DType::I64,
                shape: vec![4],
            }],
            params: [("num_classes".to_owned(), "2".to_owned())].into(),
        },
        params: serde_json::json!({}),
        stored: true,
    };
    store
        .submit_snapshot(&snapshot, 3)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// Starts `faultline worker --once` with a one-second lease; returns it and its worker id.
fn start_worker(database: &str, objects: &Path, delay_ms: Option<u64>) -> (Child, String) {
    let mut command = support::faultline();
    command
        .args(["worker", "--database", database, "--backend", "cpu", "--once"])
        .args(["--lease-secs", "1", "--poll-secs", "0.05", "--snapshot-store"])
        .arg(objects)
        .env_remove("FAULTLINE_WORKER_TEST_DELAY_MS");
    if let Some(ms) = delay_ms {
        command.env("FAULTLINE_WORKER_TEST_DELAY_MS", ms.to_string());
    }
    let (child, line) = support::spawn_reading_first_line(command);
    let id = line
        .strip_prefix("faultline worker ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, id)
}

fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the worker did not finish within {limit:?}");
}

async fn a_killed_workers_job_runs_again_and_finishes_once(database: String, objects: PathBuf) {
    let store = Store::open_and_migrate(&database, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let snapshots = SnapshotStore::local(&objects).unwrap_or_else(|e| panic!("{e}"));
    let job_id = queued_job(&store, &snapshots).await;

    let (mut first, first_id) = start_worker(&database, &objects, Some(120_000));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = store.job(job_id).await.unwrap_or_else(|e| panic!("{e}"));
        if job.state == JobState::Running && job.lease_owner.as_deref() == Some(first_id.as_str()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first worker never leased the job: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let it renew its lease a few times, so that the kill lands mid-job.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first
        .kill()
        .unwrap_or_else(|e| panic!("cannot kill the worker: {e}"));
    let _ = first.wait();
    let held = store.job(job_id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((held.state, held.attempts), (JobState::Running, 1), "{held:?}");

    let (mut second, second_id) = start_worker(&database, &objects, None);
    assert_eq!(wait_for_exit(&mut second, Duration::from_secs(60)), Some(0));

    let job = store.job(job_id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.state, JobState::Done, "{job:?}");
    assert_eq!(job.attempts, 2, "leased by the killed worker, then by the second");
    assert_eq!(job.lease_owner.as_deref(), Some(second_id.as_str()));
    // One check may run on several tensors (index_bounds on input_ids, position_ids and
    // token_type_ids): a result is one check with its parameters.
    let runs: Vec<(&str, &std::collections::BTreeMap<String, String>)> = job
        .results
        .iter()
        .map(|r| (r.check.as_str(), &r.params))
        .collect();
    let mut distinct = runs.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        runs.len(),
        distinct.len(),
        "each check's result is stored once: {runs:?}"
    );
    let target = job.results.iter().find(|r| r.check == "target_bounds");
    assert_eq!(
        target.map(|r| r.verdict),
        Some(Verdict::Confirmed),
        "{:?}",
        job.results
    );
    let diagnosis = store
        .diagnosis(job.incident_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(diagnosis.findings[0].tier, EvidenceTier::Confirmed);
    assert!(
        store
            .lease_job("late", 1000)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none(),
        "the finished job is not leased again"
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_workers_job_runs_again_and_finishes_once_on_sqlite() {
    let db = support::TempDb::new("replay-crash");
    let objects = db.dir.join("snapshots");
    a_killed_workers_job_runs_again_and_finishes_once(db.url(), objects).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_workers_job_runs_again_and_finishes_once_on_postgres() {
    let Some(url) = support::postgres_database("replay_crash").await else {
        return;
    };
    let dir = support::TempDb::new("replay-crash-pg");
    a_killed_workers_job_runs_again_and_finishes_once(url, dir.dir.join("snapshots")).await;
}
