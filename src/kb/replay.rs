//! Replay in the knowledge base: the snapshots attached to incidents and the jobs that check them.
//!
//! A job is leased by one worker at a time (`lease_owner` until `lease_expires_at`); a worker that
//! dies lets its lease expire and the job is leased again, up to `max_attempts` times. A job is
//! completed in ONE transaction with the incident's updated diagnosis, and only by the worker that
//! still holds its lease, so it finishes once. This module stores; it never runs a check.

use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::codec::{compress, decompress};
use super::{Backend, Result, Store, StoreError, now_ms};
use crate::model::Diagnosis;
use crate::replay::CheckResult;
use crate::replay::snapshot::{Format, SnapshotSummary};

/// Where a replay job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for a worker.
    Queued,
    /// Leased by a worker.
    Running,
    /// Finished: results stored, the incident's diagnosis updated.
    Done,
    /// Gave up after its attempts.
    Failed,
}

impl JobState {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        match s {
            "queued" => Ok(Self::Queued),
            "running" => Ok(Self::Running),
            "done" => Ok(Self::Done),
            "failed" => Ok(Self::Failed),
            other => Err(StoreError::Corrupt(format!("job state {other:?}"))),
        }
    }
}

/// A snapshot to record (its tensors are already in the object store, or not kept).
#[derive(Debug, Clone)]
pub struct NewSnapshot {
    /// The incident it belongs to.
    pub incident_id: i64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// Where the object store keeps the file (`objects::new_key`).
    pub object_key: String,
    /// File size.
    pub bytes: i64,
    /// What it holds.
    pub summary: SnapshotSummary,
    /// The parameters sent with the upload, as a JSON object (`{}` when none).
    pub params: serde_json::Value,
    /// Whether the object store holds the file.
    pub stored: bool,
}

/// A stored snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// Id.
    pub id: i64,
    /// Its incident.
    pub incident_id: i64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// Where the object store keeps the file: this upload's own key, or the SHA-256 alone for
    /// files stored before uploads had keys of their own.
    #[serde(skip)]
    pub object_key: String,
    /// File size.
    pub bytes: i64,
    /// File format.
    pub format: Format,
    /// What it holds.
    pub summary: SnapshotSummary,
    /// The parameters sent with the upload.
    pub params: serde_json::Value,
    /// Whether its tensors are still stored (false in summary-only mode once checked, or after
    /// the retention period).
    pub stored: bool,
    /// When it was uploaded (Unix ms).
    pub created_at: i64,
}

/// A replay job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Id.
    pub id: i64,
    /// The incident whose diagnosis it checks.
    pub incident_id: i64,
    /// The snapshot it checks.
    pub snapshot_id: i64,
    /// State.
    pub state: JobState,
    /// Leases taken so far.
    pub attempts: i64,
    /// Leases allowed before it fails.
    pub max_attempts: i64,
    /// The worker that holds (or last held) it.
    pub lease_owner: Option<String>,
    /// When the lease ends (Unix ms).
    pub lease_expires_at: Option<i64>,
    /// The check results, once done.
    pub results: Vec<CheckResult>,
    /// The last error.
    pub error: Option<String>,
    /// Created (Unix ms).
    pub created_at: i64,
    /// Last changed (Unix ms).
    pub updated_at: i64,
}

const JOB_COLUMNS: &str = "id, incident_id, snapshot_id, state, attempts, max_attempts, lease_owner, lease_expires_at, results, error, created_at, updated_at";
const SNAPSHOT_COLUMNS: &str =
    "id, incident_id, sha256, bytes, format, summary, params, stored, created_at, object_key";

fn job_from_row(row: &AnyRow) -> Result<Job> {
    let state: String = row.try_get(3)?;
    let results: Option<String> = row.try_get(8)?;
    let id: i64 = row.try_get(0)?;
    Ok(Job {
        id,
        incident_id: row.try_get(1)?,
        snapshot_id: row.try_get(2)?,
        state: JobState::parse(&state)?,
        attempts: row.try_get(4)?,
        max_attempts: row.try_get(5)?,
        lease_owner: row.try_get(6)?,
        lease_expires_at: row.try_get(7)?,
        results: match results {
            Some(json) => serde_json::from_str(&json)
                .map_err(|e| StoreError::Corrupt(format!("results of job {id}: {e}")))?,
            None => Vec::new(),
        },
        error: row.try_get(9)?,
        created_at: row.try_get(10)?,
        updated_at: row.try_get(11)?,
    })
}

fn snapshot_from_row(row: &AnyRow) -> Result<SnapshotRecord> {
    let id: i64 = row.try_get(0)?;
    let corrupt =
        |what: &str, e: serde_json::Error| StoreError::Corrupt(format!("{what} of snapshot {id}: {e}"));
    let format: String = row.try_get(4)?;
    let summary: String = row.try_get(5)?;
    let params: String = row.try_get(6)?;
    let stored: i64 = row.try_get(7)?;
    Ok(SnapshotRecord {
        id,
        incident_id: row.try_get(1)?,
        sha256: row.try_get(2)?,
        bytes: row.try_get(3)?,
        format: serde_json::from_value(serde_json::Value::String(format))
            .map_err(|e| corrupt("format", e))?,
        summary: serde_json::from_str(&summary).map_err(|e| corrupt("summary", e))?,
        params: serde_json::from_str(&params).map_err(|e| corrupt("params", e))?,
        stored: stored != 0,
        created_at: row.try_get(8)?,
        object_key: row.try_get(9)?,
    })
}

fn format_word(format: Format) -> &'static str {
    match format {
        Format::Safetensors => "safetensors",
        Format::Npz => "npz",
    }
}

impl Store {
    /// Fails with `NotFound` unless the incident exists.
    pub async fn require_incident(&self, id: i64) -> Result<()> {
        sqlx::query("SELECT id FROM incidents WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .map(|_| ())
            .ok_or_else(|| StoreError::NotFound(format!("incident {id}")))
    }

    /// Records a snapshot; returns its id.
    pub async fn add_snapshot(&self, snapshot: &NewSnapshot) -> Result<i64> {
        let mut tx = self.pool().begin().await?;
        let id = insert_snapshot(&mut tx, snapshot).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Queues a job checking `snapshot_id` against its incident's diagnosis; returns its id.
    pub async fn enqueue_job(&self, incident_id: i64, snapshot_id: i64, max_attempts: u32) -> Result<i64> {
        let mut tx = self.pool().begin().await?;
        let id = insert_job(&mut tx, incident_id, snapshot_id, max_attempts).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Records a snapshot and queues its job in one transaction: `(snapshot_id, job_id)`.
    pub async fn submit_snapshot(&self, snapshot: &NewSnapshot, max_attempts: u32) -> Result<(i64, i64)> {
        self.require_incident(snapshot.incident_id).await?;
        let mut tx = self.pool().begin().await?;
        let snapshot_id = insert_snapshot(&mut tx, snapshot).await?;
        let job_id = insert_job(&mut tx, snapshot.incident_id, snapshot_id, max_attempts).await?;
        tx.commit().await?;
        Ok((snapshot_id, job_id))
    }

    /// Leases the oldest job that is queued or whose lease expired, for `lease_ms`; jobs whose
    /// expired lease was their last attempt become failed first.
    pub async fn lease_job(&self, worker_id: &str, lease_ms: i64) -> Result<Option<Job>> {
        let now = now_ms();
        // An idle worker polls every second: a read first, so that an empty queue never takes
        // SQLite's one write lock from the incident writer.
        let pending = sqlx::query(
            "SELECT 1 FROM replay_jobs
             WHERE state = 'queued' OR (state = 'running' AND lease_expires_at < $1) LIMIT 1",
        )
        .bind(now)
        .fetch_optional(self.pool())
        .await?;
        if pending.is_none() {
            return Ok(None);
        }
        sqlx::query(
            "UPDATE replay_jobs SET state = 'failed', updated_at = $1,
                 error = COALESCE(error, 'the worker stopped before finishing (lease expired)')
             WHERE state = 'running' AND lease_expires_at < $1 AND attempts >= max_attempts",
        )
        .bind(now)
        .execute(self.pool())
        .await?;
        // One statement: a job is leased by one worker only. PostgreSQL lets concurrent workers
        // skip the rows another is taking; SQLite has one writer at a time anyway.
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "UPDATE replay_jobs SET state = 'running', attempts = attempts + 1, lease_owner = $1,
                 lease_expires_at = $2, updated_at = $3
             WHERE id = (SELECT id FROM replay_jobs
                         WHERE (state = 'queued' OR (state = 'running' AND lease_expires_at < $3))
                           AND attempts < max_attempts
                         ORDER BY id LIMIT 1{lock})
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(worker_id)
            .bind(now + lease_ms)
            .bind(now)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(job_from_row).transpose()
    }

    /// Extends the lease of a running job; `false` when `worker_id` no longer holds it.
    pub async fn heartbeat(&self, job_id: i64, worker_id: &str, lease_ms: i64) -> Result<bool> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE replay_jobs SET lease_expires_at = $1, updated_at = $2
             WHERE id = $3 AND state = 'running' AND lease_owner = $4",
        )
        .bind(now + lease_ms)
        .bind(now)
        .bind(job_id)
        .bind(worker_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a job's results and its incident's updated diagnosis in one transaction, if
    /// `worker_id` still holds the lease; `false` (nothing written) when it does not.
    pub async fn complete_job(
        &self,
        job_id: i64,
        worker_id: &str,
        results: &[CheckResult],
        diagnosis: &Diagnosis,
    ) -> Result<bool> {
        let results = serde_json::to_string(results)
            .map_err(|e| StoreError::Invalid(format!("results cannot be encoded: {e}")))?;
        let diagnosis = serde_json::to_vec(diagnosis)
            .map_err(|e| StoreError::Invalid(format!("diagnosis cannot be encoded: {e}")))?;
        let mut tx = self.pool().begin().await?;
        let row = sqlx::query(
            "UPDATE replay_jobs SET state = 'done', results = $1, error = NULL, updated_at = $2
             WHERE id = $3 AND state = 'running' AND lease_owner = $4 RETURNING incident_id",
        )
        .bind(results)
        .bind(now_ms())
        .bind(job_id)
        .bind(worker_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(false);
        };
        let incident_id: i64 = row.try_get(0)?;
        sqlx::query("UPDATE incidents SET diagnosis = $1 WHERE id = $2")
            .bind(compress(&diagnosis))
            .bind(incident_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a failed attempt: the job is queued again while attempts remain, else failed.
    /// `None` when `worker_id` no longer holds the lease (nothing written).
    pub async fn fail_job(&self, job_id: i64, worker_id: &str, error: &str) -> Result<Option<JobState>> {
        let row = sqlx::query(
            "UPDATE replay_jobs
             SET state = CASE WHEN attempts < max_attempts THEN 'queued' ELSE 'failed' END,
                 error = $1, lease_expires_at = NULL, updated_at = $2
             WHERE id = $3 AND state = 'running' AND lease_owner = $4 RETURNING state",
        )
        .bind(error)
        .bind(now_ms())
        .bind(job_id)
        .bind(worker_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| JobState::parse(&r.try_get::<String, _>(0)?))
            .transpose()
    }

    /// One job.
    pub async fn job(&self, id: i64) -> Result<Job> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM replay_jobs WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("replay job {id}")))?;
        job_from_row(&row)
    }

    /// The jobs of an incident, newest first.
    pub async fn jobs_of_incident(&self, incident_id: i64) -> Result<Vec<Job>> {
        let sql =
            format!("SELECT {JOB_COLUMNS} FROM replay_jobs WHERE incident_id = $1 ORDER BY id DESC LIMIT 50");
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(incident_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// One snapshot.
    pub async fn snapshot(&self, id: i64) -> Result<SnapshotRecord> {
        let sql = format!("SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE id = $1");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("snapshot {id}")))?;
        snapshot_from_row(&row)
    }

    /// The snapshots of an incident, newest first.
    pub async fn snapshots_of_incident(&self, incident_id: i64) -> Result<Vec<SnapshotRecord>> {
        let sql = format!(
            "SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE incident_id = $1 ORDER BY id DESC LIMIT 50"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(incident_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(snapshot_from_row).collect()
    }

    /// An incident's diagnosis alone (without its log).
    pub async fn diagnosis(&self, incident_id: i64) -> Result<Diagnosis> {
        let row = sqlx::query("SELECT diagnosis FROM incidents WHERE id = $1")
            .bind(incident_id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("incident {incident_id}")))?;
        let data: Vec<u8> = row.try_get(0)?;
        decompress(&data)
            .ok()
            .and_then(|d| serde_json::from_slice::<Diagnosis>(&d).ok())
            .ok_or_else(|| StoreError::Corrupt(format!("diagnosis of incident {incident_id}")))
    }

    /// Object keys whose files may be deleted: every snapshot with the key was uploaded before
    /// `cutoff` (Unix ms) and no job of theirs is still queued or running. A key belongs to one
    /// upload (several only for files stored before uploads had keys of their own).
    pub async fn releasable_snapshot_keys(&self, cutoff: i64, limit: i64) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT DISTINCT s.object_key FROM snapshots s
             WHERE s.stored = 1 AND s.created_at < $1
               AND NOT EXISTS (SELECT 1 FROM snapshots n
                               WHERE n.object_key = s.object_key AND n.stored = 1 AND n.created_at >= $1)
               AND NOT EXISTS (SELECT 1 FROM snapshots p JOIN replay_jobs j ON j.snapshot_id = p.id
                               WHERE p.object_key = s.object_key AND j.state IN ('queued', 'running'))
             LIMIT $2",
        )
        .bind(cutoff)
        .bind(limit.clamp(1, 10_000))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(Into::into))
            .collect()
    }

    /// Marks the snapshots whose file is under `object_key`, uploaded before `cutoff`, as no
    /// longer stored (their summaries and results stay).
    pub async fn mark_snapshot_released(&self, object_key: &str, cutoff: i64) -> Result<u64> {
        let done = sqlx::query("UPDATE snapshots SET stored = 0 WHERE object_key = $1 AND created_at < $2")
            .bind(object_key)
            .bind(cutoff)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}

async fn insert_snapshot(tx: &mut sqlx::Transaction<'_, sqlx::Any>, s: &NewSnapshot) -> Result<i64> {
    let summary = serde_json::to_string(&s.summary)
        .map_err(|e| StoreError::Invalid(format!("snapshot summary cannot be encoded: {e}")))?;
    let row = sqlx::query(
        "INSERT INTO snapshots (incident_id, sha256, bytes, format, summary, params, stored, created_at, object_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(s.incident_id)
    .bind(&s.sha256)
    .bind(s.bytes)
    .bind(format_word(s.summary.format))
    .bind(summary)
    .bind(s.params.to_string())
    .bind(i64::from(s.stored))
    .bind(now_ms())
    .bind(&s.object_key)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get(0)?)
}

async fn insert_job(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    incident_id: i64,
    snapshot_id: i64,
    max_attempts: u32,
) -> Result<i64> {
    let now = now_ms();
    let row = sqlx::query(
        "INSERT INTO replay_jobs (incident_id, snapshot_id, state, attempts, max_attempts, created_at, updated_at)
         VALUES ($1, $2, 'queued', 0, $3, $4, $4) RETURNING id",
    )
    .bind(incident_id)
    .bind(snapshot_id)
    .bind(i64::from(max_attempts.max(1)))
    .bind(now)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get(0)?)
}
