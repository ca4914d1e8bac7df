//! The replay worker: leases a job, loads its snapshot (object store) and its incident's
//! diagnosis, runs the replay checks of the diagnosis's causes on a backend, and completes the job
//! with the results and the updated diagnosis.
//!
//! The lease is renewed while the job runs; a worker that dies (kill -9) lets it expire and
//! another worker leases the job again. A failed attempt is retried until the job's attempts are
//! spent. `faultline serve` runs one worker in the process ([`Worker::run`]); `faultline worker`
//! runs one on its own. This module never speaks HTTP.
//!
//! Memory: a job's snapshot is inflated once, when the job runs; in the server's process the
//! worker first waits for that much of the snapshot memory budget it shares with the uploads
//! ([`Worker::with_budget`]: the file and its inflated tensors, from the snapshot's summary).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::kb::codec::sha256_hex;
use crate::kb::replay::{Job, JobState};
use crate::kb::{Store, StoreError, now_ms};
use crate::model::Diagnosis;
use crate::objects::{ObjectError, SnapshotStore};
use crate::replay::{Backend, BackendChoice, CheckResult, Limits, Snapshot, open_backend, replay_latest};
use crate::service::budget::MemoryBudget;

const DAY_MS: i64 = 86_400_000;
/// How often the retention sweep runs.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// How a worker works.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Its name in the leases it takes (unique per process).
    pub id: String,
    /// Where checks run.
    pub backend: BackendChoice,
    /// Lease length; renewed every third of it while a job runs.
    pub lease: Duration,
    /// Wait between looks at an empty queue.
    pub poll: Duration,
    /// Delete a snapshot's file once its job has finished.
    pub summary_only: bool,
    /// Delete snapshot files older than this many days (0: never).
    pub retention_days: u32,
    /// Bounds on the snapshots read (the server's: those its uploads were validated under).
    pub limits: Limits,
}

impl WorkerOptions {
    /// The options a configuration asks for, with a fresh worker id.
    pub fn from_config(config: &Config) -> Self {
        Self {
            id: worker_id(),
            backend: config.replay_backend,
            lease: Duration::from_secs(config.replay_lease_secs.max(1)),
            poll: Duration::from_secs(1),
            summary_only: config.snapshot_summary_only,
            retention_days: config.snapshot_retention_days,
            limits: config.snapshot_limits(),
        }
    }
}

/// `host-pid-random`: unique per worker process.
pub fn worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    let mut random = [0u8; 4];
    let _ = getrandom::fill(&mut random);
    format!("{host}-{}-{}", std::process::id(), crate::kb::codec::hex(&random))
}

/// What became of one leased job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Results stored, the incident's diagnosis updated.
    Done {
        /// The job.
        job_id: i64,
        /// The check results.
        results: Vec<CheckResult>,
    },
    /// The attempt failed; the job is queued again or failed for good (`state`).
    Failed {
        /// The job.
        job_id: i64,
        /// Why.
        error: String,
        /// `Queued` (retried) or `Failed`.
        state: JobState,
    },
    /// Another worker took the job over (this one was too slow to renew its lease).
    LeaseLost {
        /// The job.
        job_id: i64,
    },
}

type SharedBackend = Result<Arc<dyn Backend>, String>;

/// A replay worker.
#[derive(Clone)]
pub struct Worker {
    store: Store,
    objects: SnapshotStore,
    options: WorkerOptions,
    backend: Arc<OnceLock<SharedBackend>>,
    budget: Option<MemoryBudget>,
}

impl Worker {
    /// A worker over a knowledge base and a snapshot store.
    pub fn new(store: Store, objects: SnapshotStore, options: WorkerOptions) -> Self {
        Self {
            store,
            objects,
            options,
            backend: Arc::default(),
            budget: None,
        }
    }

    /// The worker waits for its share of `budget` (the memory of the job's snapshot, loaded)
    /// before it reads a job's file: the server's budget, shared with its uploads.
    pub fn with_budget(mut self, budget: MemoryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Its options.
    pub fn options(&self) -> &WorkerOptions {
        &self.options
    }

    /// Runs jobs until `shutdown` resolves (a job in flight is dropped; its lease expires and
    /// another worker takes it). Sweeps old snapshot files every hour.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut last_sweep: Option<Instant> = None;
        loop {
            if last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
                last_sweep = Some(Instant::now());
                if let Err(e) = self.sweep().await {
                    tracing::warn!(error = %e, "snapshot retention sweep failed");
                }
            }
            let next = tokio::select! {
                () = &mut shutdown => return,
                next = self.run_next() => next,
            };
            let idle = match next {
                Ok(Some(outcome)) => {
                    log_outcome(&outcome);
                    false
                }
                Ok(None) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "replay worker cannot reach the knowledge base");
                    true
                }
            };
            if idle {
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(self.options.poll) => {}
                }
            }
        }
    }

    /// Waits for a job, runs it, and returns what became of it (`faultline worker --once`).
    pub async fn run_one(&self) -> Result<Outcome, StoreError> {
        loop {
            if let Some(outcome) = self.run_next().await? {
                log_outcome(&outcome);
                return Ok(outcome);
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    /// Leases the next job and runs it; `None` when no job is waiting.
    pub async fn run_next(&self) -> Result<Option<Outcome>, StoreError> {
        let lease_ms = self.options.lease.as_millis() as i64;
        let Some(job) = self.store.lease_job(&self.options.id, lease_ms).await? else {
            return Ok(None);
        };
        tracing::info!(
            job = job.id,
            incident = job.incident_id,
            attempt = job.attempts,
            "replay job leased"
        );
        let work = self.execute(&job);
        tokio::pin!(work);
        let mut beat = tokio::time::interval((self.options.lease / 3).max(Duration::from_millis(50)));
        beat.tick().await;
        let result = loop {
            tokio::select! {
                result = &mut work => break result,
                _ = beat.tick() => {
                    if !self.store.heartbeat(job.id, &self.options.id, lease_ms).await? {
                        return Ok(Some(Outcome::LeaseLost { job_id: job.id }));
                    }
                }
            }
        };
        let outcome = match result {
            Ok((results, diagnosis)) => {
                if self
                    .store
                    .complete_job(job.id, &self.options.id, &results, &diagnosis)
                    .await?
                {
                    Outcome::Done {
                        job_id: job.id,
                        results,
                    }
                } else {
                    Outcome::LeaseLost { job_id: job.id }
                }
            }
            Err(error) => match self.store.fail_job(job.id, &self.options.id, &error).await? {
                Some(state) => Outcome::Failed {
                    job_id: job.id,
                    error,
                    state,
                },
                None => Outcome::LeaseLost { job_id: job.id },
            },
        };
        if self.options.summary_only
            && let Err(e) = self.release(now_ms() + 1).await
        {
            tracing::warn!(error = %e, "cannot delete checked snapshot files");
        }
        Ok(Some(outcome))
    }

    /// Loads the job's snapshot and diagnosis and runs the checks: the results and the updated
    /// diagnosis, or the error text of a failed attempt.
    async fn execute(&self, job: &Job) -> Result<(Vec<CheckResult>, Diagnosis), String> {
        let record = self
            .store
            .snapshot(job.snapshot_id)
            .await
            .map_err(|e| e.to_string())?;
        if !record.stored {
            return Err(format!(
                "snapshot {} is no longer stored (summary-only mode or retention); upload it again",
                record.id
            ));
        }
        // Moved into the replay task below: given back when the snapshot is dropped, even when
        // this future is dropped first (shutdown, lease lost).
        let memory = match &self.budget {
            Some(budget) => {
                let file_bytes = u64::try_from(record.bytes).unwrap_or(0);
                Some(budget.reserve(record.summary.load_bytes(file_bytes)).await)
            }
            None => None,
        };
        let data = self.objects.get(&record.object_key).await.map_err(|e| match e {
            ObjectError::NotFound(_) => format!(
                "the file of snapshot {} is missing from {}",
                record.id,
                self.objects.location()
            ),
            other => other.to_string(),
        })?;
        let diagnosis = self
            .store
            .diagnosis(job.incident_id)
            .await
            .map_err(|e| e.to_string())?;
        let params = match &record.params {
            serde_json::Value::Object(map) if !map.is_empty() => Some(record.params.to_string()),
            _ => None,
        };
        let (limits, choice, backend) = (self.options.limits, self.options.backend, self.backend.clone());
        let sha256 = record.sha256.clone();
        tokio::task::spawn_blocking(move || {
            let _memory = memory;
            test_hook_delay();
            if sha256_hex(&data) != sha256 {
                return Err(format!(
                    "the stored file of snapshot {sha256} does not match its hash"
                ));
            }
            let mut snapshot =
                Snapshot::from_bytes(data.into(), &limits).map_err(|e| format!("invalid snapshot: {e}"))?;
            if let Some(params) = params {
                snapshot = snapshot
                    .with_params(params.as_bytes(), &limits)
                    .map_err(|e| format!("invalid snapshot: {e}"))?;
            }
            let backend = backend
                .get_or_init(|| open_backend(choice).map(Arc::from).map_err(|e| e.to_string()))
                .clone()?;
            let mut diagnosis = diagnosis;
            let results = replay_latest(&mut diagnosis, &snapshot, backend.as_ref());
            Ok((results, diagnosis))
        })
        .await
        .map_err(|e| format!("the replay task failed: {e}"))?
    }

    /// Deletes snapshot files past the retention period (or, in summary-only mode, every file
    /// whose job has finished); returns how many files went.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        let mut released = 0;
        if self.options.summary_only {
            released += self.release(now_ms() + 1).await?;
        }
        if self.options.retention_days > 0 {
            released += self
                .release(now_ms() - i64::from(self.options.retention_days) * DAY_MS)
                .await?;
        }
        Ok(released)
    }

    async fn release(&self, cutoff: i64) -> Result<usize, StoreError> {
        let keys = self.store.releasable_snapshot_keys(cutoff, 1000).await?;
        let mut released = 0;
        for key in keys {
            match self.objects.delete(&key).await {
                Ok(()) => {
                    self.store.mark_snapshot_released(&key, cutoff).await?;
                    released += 1;
                }
                Err(e) => tracing::warn!(error = %e, key, "cannot delete a snapshot file"),
            }
        }
        Ok(released)
    }
}

fn log_outcome(outcome: &Outcome) {
    match outcome {
        Outcome::Done { job_id, results } => {
            tracing::info!(job = job_id, checks = results.len(), "replay job done");
        }
        Outcome::Failed { job_id, error, state } => {
            tracing::warn!(
                job = job_id,
                error,
                state = state.as_str(),
                "replay job attempt failed"
            );
        }
        Outcome::LeaseLost { job_id } => {
            tracing::warn!(job = job_id, "replay job lease lost to another worker");
        }
    }
}

/// TEST HOOK, read nowhere else: `FAULTLINE_WORKER_TEST_DELAY_MS` makes every job wait that long
/// before it reads its snapshot, so that tests/replay_worker_crash.rs can kill a worker mid-job.
fn test_hook_delay() {
    if let Some(ms) = std::env::var("FAULTLINE_WORKER_TEST_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}
