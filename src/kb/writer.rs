//! Storing incidents: many requests, few commits.
//!
//! Handlers prepare an incident (redacted log compressed and hashed, diagnosis encoded) and hand it
//! to the [`Writer`], a single task that takes every incident waiting, writes them in ONE
//! transaction and answers each request only after the commit: nothing acknowledged is lost, and
//! the cost of a commit (an fsync) is shared by the whole batch. When a batch fails, its incidents
//! are retried one by one so that one bad incident cannot fail the others.

use serde::{Deserialize, Serialize};
use sqlx::Row;
use tokio::sync::{mpsc, oneshot};

use super::codec::{compress, sha256_hex};
use super::{Backend, Result, Store, StoreError};
use crate::diagnose::mask_message;
use crate::model::{Confidence, Diagnosis, Role};

/// Longest accepted metadata field.
const MAX_FIELD: usize = 512;
/// Most tags on an incident.
const MAX_TAGS: usize = 32;
/// Requests waiting for the writer before submitters wait for room.
const QUEUE: usize = 16_384;

/// What a CI job says about the log it submits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IncidentMeta {
    /// Project.
    pub project: Option<String>,
    /// Source (CI system, job name).
    pub source: Option<String>,
    /// Commit.
    pub commit: Option<String>,
    /// CI job URL.
    pub job_url: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
}

impl IncidentMeta {
    /// Checks sizes; empty strings count as absent.
    pub fn validated(mut self) -> Result<Self> {
        for (name, field) in [
            ("project", &mut self.project),
            ("source", &mut self.source),
            ("commit", &mut self.commit),
            ("job_url", &mut self.job_url),
        ] {
            if field.as_deref().is_some_and(|v| v.trim().is_empty()) {
                *field = None;
            }
            if field.as_deref().is_some_and(|v| v.len() > MAX_FIELD) {
                return Err(StoreError::Invalid(format!(
                    "{name} is longer than {MAX_FIELD} bytes"
                )));
            }
        }
        if self.tags.len() > MAX_TAGS || self.tags.iter().any(|t| t.len() > 64 || t.is_empty()) {
            return Err(StoreError::Invalid(format!(
                "tags: at most {MAX_TAGS}, each 1 to 64 bytes"
            )));
        }
        Ok(self)
    }
}

/// An incident ready to be written.
#[derive(Debug, Clone)]
pub struct NewIncident {
    created_at: i64,
    meta: IncidentMeta,
    log_hash: String,
    log_bytes: i64,
    log_lines: i64,
    log_data: Vec<u8>,
    diagnosis: Vec<u8>,
    primary: Option<Primary>,
    rules: Vec<(String, &'static str)>,
}

#[derive(Debug, Clone)]
struct Primary {
    class: String,
    rule: String,
    confidence: &'static str,
    title: String,
    summary: String,
    evidence: String,
    fingerprint: String,
    message: String,
}

impl NewIncident {
    /// Encodes a (redacted) log and its diagnosis. CPU work: call it off the async threads for
    /// large logs.
    pub fn prepare(log: &str, diagnosis: &Diagnosis, meta: IncidentMeta, created_at: i64) -> Self {
        let primary = diagnosis
            .primary()
            .zip(diagnosis.fingerprint.as_ref())
            .map(|(f, fp)| Primary {
                class: f.class.clone(),
                rule: f.rule.clone(),
                confidence: match f.confidence {
                    Confidence::High => "high",
                    Confidence::Medium => "medium",
                    Confidence::Low => "low",
                },
                title: f.title.clone(),
                summary: f.summary.clone(),
                evidence: f
                    .evidence
                    .iter()
                    .map(|e| e.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                fingerprint: fp.clone(),
                message: f
                    .evidence
                    .first()
                    .map_or(String::new(), |e| mask_message(&e.text)),
            });
        let rules = diagnosis
            .findings
            .iter()
            .map(|f| {
                let role = match f.role {
                    Role::Root => "root",
                    Role::Symptom => "symptom",
                    Role::Context => "context",
                };
                (f.rule.clone(), role)
            })
            .collect();
        Self {
            created_at,
            meta,
            log_hash: sha256_hex(log.as_bytes()),
            log_bytes: log.len() as i64,
            log_lines: diagnosis.lines as i64,
            log_data: compress(log.as_bytes()),
            diagnosis: compress(&serde_json::to_vec(diagnosis).unwrap_or_default()),
            primary,
            rules,
        }
    }
}

/// Where an incident went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The incident's id.
    pub incident_id: i64,
    /// Its group, when something was diagnosed.
    pub group_id: Option<i64>,
    /// The group was created by this incident.
    pub new_group: bool,
}

type Job = (NewIncident, oneshot::Sender<Result<Stored>>);

/// The handle requests use to store incidents.
#[derive(Debug, Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
}

impl Writer {
    /// Starts the writer task; it ends when every handle is dropped and the queue is drained.
    pub fn spawn(store: Store, batch: usize) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(store, rx, batch.max(1)));
        (Self { tx }, task)
    }

    /// Stores an incident; returns once it is committed.
    pub async fn write(&self, incident: NewIncident) -> Result<Stored> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((incident, reply))
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the writer stopped before committing".into()))?
    }

    /// Incidents waiting to be written.
    pub fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }
}

async fn run(store: Store, mut rx: mpsc::Receiver<Job>, batch: usize) {
    let mut jobs: Vec<Job> = Vec::with_capacity(batch);
    while rx.recv_many(&mut jobs, batch).await > 0 {
        let incidents: Vec<&NewIncident> = jobs.iter().map(|(i, _)| i).collect();
        match write_batch(&store, &incidents).await {
            Ok(stored) => {
                for ((_, reply), s) in jobs.drain(..).zip(stored) {
                    let _ = reply.send(Ok(s));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, size = jobs.len(), "batch write failed; retrying one by one");
                for (incident, reply) in jobs.drain(..) {
                    let result = write_batch(&store, &[&incident]).await.map(|mut s| s.remove(0));
                    let _ = reply.send(result);
                }
            }
        }
    }
}

async fn write_batch(store: &Store, incidents: &[&NewIncident]) -> Result<Vec<Stored>> {
    let mut tx = store.pool().begin().await?;
    let mut stored = Vec::with_capacity(incidents.len());
    for incident in incidents {
        stored.push(write_one(&mut tx, incident).await?);
    }
    // The rows that only need the incident's id go in a few multi-row statements per batch:
    // one statement per row made the writer's round-trips to the database the bottleneck.
    let ids = || stored.iter().map(|s| s.incident_id).zip(incidents);
    let rule_rows: Vec<Vec<Value<'_>>> = ids()
        .flat_map(|(id, i)| {
            i.rules.iter().map(move |(rule, role)| {
                vec![
                    Value::Int(id),
                    Value::Text(Some(rule)),
                    Value::Text(Some(role)),
                    Value::Int(i.created_at),
                ]
            })
        })
        .collect();
    insert_rows(
        &mut tx,
        "INSERT INTO incident_rules (incident_id, rule, role, created_at) VALUES ",
        " ON CONFLICT DO NOTHING",
        &rule_rows,
    )
    .await?;
    if store.backend() == Backend::Sqlite {
        let search_rows: Vec<Vec<Value<'_>>> = ids()
            .map(|(id, i)| {
                let p = i.primary.as_ref();
                vec![
                    Value::Int(id),
                    Value::Text(p.map(|p| p.title.as_str())),
                    Value::Text(p.map(|p| p.summary.as_str())),
                    Value::Text(p.map(|p| p.evidence.as_str())),
                    Value::Text(i.meta.project.as_deref()),
                ]
            })
            .collect();
        insert_rows(
            &mut tx,
            "INSERT INTO incidents_fts (rowid, title, summary, evidence, project) VALUES ",
            "",
            &search_rows,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(stored)
}

/// A value bound into a multi-row insert.
enum Value<'a> {
    Int(i64),
    Text(Option<&'a str>),
}

/// Most bound values in one statement (SQLite's default limit is 32,766).
const MAX_BOUND_VALUES: usize = 4_000;

/// Inserts `rows` (all of the same width) with `head` `($1, $2, …), (…)` `tail`, in as few
/// statements as the bound-value limit allows.
async fn insert_rows(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    head: &str,
    tail: &str,
    rows: &[Vec<Value<'_>>],
) -> Result<()> {
    let width = rows.first().map_or(1, Vec::len).max(1);
    for chunk in rows.chunks((MAX_BOUND_VALUES / width).max(1)) {
        let mut sql = String::from(head);
        for (r, row) in chunk.iter().enumerate() {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            let placeholders: Vec<String> = (1..=row.len()).map(|c| format!("${}", r * width + c)).collect();
            sql.push_str(&placeholders.join(", "));
            sql.push(')');
        }
        sql.push_str(tail);
        // Only the constant head and tail and numbered placeholders: no value is in the text.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in chunk.iter().flatten() {
            query = match value {
                Value::Int(v) => query.bind(*v),
                Value::Text(v) => query.bind(*v),
            };
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes the log, the group and the incident row; [`write_batch`] adds the rest.
async fn write_one(tx: &mut sqlx::Transaction<'_, sqlx::Any>, i: &NewIncident) -> Result<Stored> {
    sqlx::query(
        "INSERT INTO logs (hash, bytes, lines, data) VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING",
    )
    .bind(&i.log_hash)
    .bind(i.log_bytes)
    .bind(i.log_lines)
    .bind(&i.log_data)
    .execute(&mut **tx)
    .await?;
    let (group_id, new_group) = match &i.primary {
        Some(p) => {
            let (id, new) = upsert_group(tx, p, i.created_at).await?;
            (Some(id), new)
        }
        None => (None, false),
    };
    let p = i.primary.as_ref();
    let row = sqlx::query(
        "INSERT INTO incidents (created_at, group_id, log_hash, project, source, commit_sha, job_url, tags, class, rule, confidence, title, summary, evidence, lines, diagnosis)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id",
    )
    .bind(i.created_at)
    .bind(group_id)
    .bind(&i.log_hash)
    .bind(&i.meta.project)
    .bind(&i.meta.source)
    .bind(&i.meta.commit)
    .bind(&i.meta.job_url)
    .bind(serde_json::to_string(&i.meta.tags).unwrap_or_else(|_| "[]".into()))
    .bind(p.map(|p| p.class.clone()))
    .bind(p.map(|p| p.rule.clone()))
    .bind(p.map(|p| p.confidence))
    .bind(p.map(|p| p.title.clone()))
    .bind(p.map(|p| p.summary.clone()))
    .bind(p.map(|p| p.evidence.clone()))
    .bind(i.log_lines)
    .bind(&i.diagnosis)
    .fetch_one(&mut **tx)
    .await?;
    let incident_id: i64 = row.try_get(0)?;
    Ok(Stored {
        incident_id,
        group_id,
        new_group,
    })
}

/// The group of a fingerprint, counting this incident; `true` when it was created now. Several
/// servers may race on a new fingerprint: the loser of the insert counts into the winner's group.
async fn upsert_group(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    p: &Primary,
    now: i64,
) -> Result<(i64, bool)> {
    let bump = "UPDATE groups SET count = count + 1, last_seen = $1 WHERE fingerprint = $2 RETURNING id";
    if let Some(row) = sqlx::query(bump)
        .bind(now)
        .bind(&p.fingerprint)
        .fetch_optional(&mut **tx)
        .await?
    {
        return Ok((row.try_get(0)?, false));
    }
    let inserted = sqlx::query(
        "INSERT INTO groups (fingerprint, class, rule, title, message, count, first_seen, last_seen)
         VALUES ($1, $2, $3, $4, $5, 1, $6, $6) ON CONFLICT (fingerprint) DO NOTHING RETURNING id",
    )
    .bind(&p.fingerprint)
    .bind(&p.class)
    .bind(&p.rule)
    .bind(&p.title)
    .bind(&p.message)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(row) = inserted {
        return Ok((row.try_get(0)?, true));
    }
    let row = sqlx::query(bump)
        .bind(now)
        .bind(&p.fingerprint)
        .fetch_one(&mut **tx)
        .await?;
    Ok((row.try_get(0)?, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_checked_and_blank_fields_dropped() {
        let meta = IncidentMeta {
            project: Some("  ".into()),
            tags: vec!["gpu".into()],
            ..IncidentMeta::default()
        };
        assert_eq!(meta.validated().ok().and_then(|m| m.project), None);
        let long = IncidentMeta {
            source: Some("x".repeat(MAX_FIELD + 1)),
            ..IncidentMeta::default()
        };
        assert!(long.validated().is_err());
        let tags = IncidentMeta {
            tags: vec![String::new()],
            ..IncidentMeta::default()
        };
        assert!(tags.validated().is_err());
    }
}
