//! Storing incidents: many requests, few commits.
//!
//! Handlers prepare an incident (redacted log compressed and hashed, diagnosis encoded) and hand it
//! to the [`Writer`], a single task that takes every incident waiting, writes them in ONE
//! transaction and answers each request only after the commit: nothing acknowledged is lost, and
//! the cost of a commit (an fsync) is shared by the whole batch. When a batch fails, its incidents
//! are retried one by one so that one bad incident cannot fail the others.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

use sqlx::Row;
use sqlx::any::AnyRow;
use tokio::sync::{mpsc, oneshot};

use super::bundles::{BundleText, PreparedBundle};
use super::codec::{compress, sha256_hex};
use super::redact::redacted;
use super::{Backend, Result, Store, StoreError};
use crate::diagnose::mask_message;
use crate::model::{BundleDiagnosis, Confidence, Diagnosis, Role};

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
    /// Checks sizes (of what was sent) and redacts every field (a job URL's password, a token in
    /// a tag): the API and the web forms both come through here. Empty strings count as absent.
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
        for field in [
            &mut self.project,
            &mut self.source,
            &mut self.commit,
            &mut self.job_url,
        ] {
            *field = field.take().map(redacted);
        }
        self.tags = self.tags.into_iter().map(redacted).collect();
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
    /// A rule found a root cause or a symptom.
    diagnosed: bool,
    /// When undiagnosed, the exception the log ends with.
    unexplained_error: Option<String>,
    /// The lines search reads: the primary finding's evidence, and the unexplained error.
    evidence: Option<String>,
    rules: Vec<(String, &'static str)>,
    /// A distributed job's bundle: its files, ranks and diagnosis.
    bundle: Option<PreparedBundle>,
    /// The title when no finding gives one: the bundle's first fault.
    fallback_title: Option<String>,
}

#[derive(Debug, Clone)]
struct Primary {
    class: String,
    rule: String,
    confidence: &'static str,
    title: String,
    summary: String,
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
                title: f.title.to_string(),
                summary: f.summary.clone(),
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
            diagnosed: diagnosis.is_diagnosed(),
            unexplained_error: diagnosis.unexplained_error.as_ref().map(|e| e.text.clone()),
            evidence: searched_lines(diagnosis),
            rules,
            bundle: None,
            fallback_title: None,
        }
    }

    /// Encodes a distributed job's bundle: its files (each redacted by the caller), the bundle
    /// diagnosis, and the file the incident shows as its log (`shown`, the one with the first
    /// fault) with its single-log `diagnosis`, by which lists, groups and search know it. CPU work.
    pub fn prepare_bundle(
        files: &[BundleText],
        shown: usize,
        diagnosis: &Diagnosis,
        bundle: &BundleDiagnosis,
        meta: IncidentMeta,
        created_at: i64,
    ) -> Self {
        let log = files.get(shown).map_or("", |f| f.text.as_str());
        let mut incident = Self::prepare(log, diagnosis, meta, created_at);
        incident.diagnosed = incident.diagnosed || bundle.is_diagnosed();
        incident.fallback_title = bundle.first_fault.as_ref().map(|f| f.summary.clone());
        incident.bundle = Some(PreparedBundle::prepare(files, bundle));
        incident
    }
}

/// The lines that text search finds an incident by: its primary finding's evidence, and the
/// last error of a log with no diagnosis.
fn searched_lines(diagnosis: &Diagnosis) -> Option<String> {
    let evidence = diagnosis.primary().into_iter().flat_map(|f| &f.evidence);
    let lines: Vec<&str> = evidence
        .chain(&diagnosis.unexplained_error)
        .map(|e| e.text.as_str())
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
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
    // A few multi-row statements per batch, whatever its size: one statement per row made the
    // writer's round-trips to the database the bottleneck of storing.
    let mut tx = store.pool().begin().await?;
    insert_logs(&mut tx, incidents).await?;
    let groups = upsert_groups(&mut tx, incidents).await?;
    let stored = insert_incidents(&mut tx, incidents, &groups).await?;

    let ids = || stored.iter().map(|s| s.incident_id).zip(incidents);
    let rule_rows: Vec<Vec<Value<'_>>> = ids()
        .flat_map(|(id, i)| {
            i.rules.iter().map(move |(rule, role)| {
                vec![
                    Value::Int(Some(id)),
                    Value::Text(Some(rule)),
                    Value::Text(Some(role)),
                    Value::Int(Some(i.created_at)),
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
    insert_bundles(&mut tx, &stored, incidents).await?;
    if store.backend() == Backend::Sqlite {
        let search_rows: Vec<Vec<Value<'_>>> = ids()
            .map(|(id, i)| {
                let p = i.primary.as_ref();
                vec![
                    Value::Int(Some(id)),
                    Value::Text(p.map(|p| p.title.as_str()).or(i.fallback_title.as_deref())),
                    Value::Text(p.map(|p| p.summary.as_str())),
                    Value::Text(i.evidence.as_deref()),
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

/// Stores each distinct log of the batch once (logs are content-addressed).
async fn insert_logs(tx: &mut Tx<'_>, incidents: &[&NewIncident]) -> Result<()> {
    let mut seen = HashSet::new();
    let own = incidents.iter().map(|i| {
        (
            i.log_hash.as_str(),
            i.log_bytes,
            i.log_lines,
            i.log_data.as_slice(),
        )
    });
    let files = incidents
        .iter()
        .flat_map(|i| i.bundle.iter().flat_map(|b| &b.files))
        .map(|f| (f.hash.as_str(), f.text_bytes, f.lines, f.data.as_slice()));
    let rows: Vec<Vec<Value<'_>>> = own
        .chain(files)
        .filter(|(hash, ..)| seen.insert(*hash))
        .map(|(hash, bytes, lines, data)| {
            vec![
                Value::Text(Some(hash)),
                Value::Int(Some(bytes)),
                Value::Int(Some(lines)),
                Value::Blob(Some(data)),
            ]
        })
        .collect();
    insert_rows(
        tx,
        "INSERT INTO logs (hash, bytes, lines, data) VALUES ",
        " ON CONFLICT (hash) DO NOTHING",
        &rows,
    )
    .await?;
    Ok(())
}

/// The files and ranks of the batch's bundle incidents.
async fn insert_bundles(tx: &mut Tx<'_>, stored: &[Stored], incidents: &[&NewIncident]) -> Result<()> {
    let bundles = || {
        stored
            .iter()
            .zip(incidents)
            .filter_map(|(s, i)| i.bundle.as_ref().map(|b| (s.incident_id, i.created_at, b)))
    };
    let file_rows: Vec<Vec<Value<'_>>> = bundles()
        .flat_map(|(id, _, b)| {
            b.files.iter().enumerate().map(move |(n, f)| {
                vec![
                    Value::Int(Some(id)),
                    Value::Int(Some(n as i64)),
                    Value::Text(Some(&f.name)),
                    Value::Text(Some(f.kind)),
                    Value::Text(Some(&f.hash)),
                    Value::Int(Some(f.bytes)),
                    Value::Int(Some(i64::from(f.binary))),
                    Value::Text(f.kept_as.as_deref()),
                ]
            })
        })
        .collect();
    insert_rows(
        tx,
        "INSERT INTO incident_files (incident_id, ordinal, name, kind, log_hash, bytes, is_binary, kept_as) VALUES ",
        "",
        &file_rows,
    )
    .await?;
    let rank_rows: Vec<Vec<Value<'_>>> = bundles()
        .flat_map(|(id, created_at, b)| {
            b.ranks.iter().enumerate().map(move |(n, r)| {
                vec![
                    Value::Int(Some(id)),
                    Value::Int(Some(n as i64)),
                    Value::Int(r.rank),
                    Value::Text(r.host.as_deref()),
                    Value::Int(r.local_rank),
                    Value::Int(r.gpu.index.map(i64::from)),
                    Value::Text(r.gpu.bus_id.as_deref()),
                    Value::Text(r.gpu.uuid.as_deref()),
                    Value::Text(r.gpu_key.as_deref()),
                    Value::Int(Some(i64::from(r.first_fault))),
                    Value::Int(Some(created_at)),
                ]
            })
        })
        .collect();
    insert_rows(
        tx,
        "INSERT INTO incident_ranks (incident_id, ordinal, global_rank, host, local_rank, gpu_index, gpu_bus_id, gpu_uuid, gpu_key, first_fault, created_at) VALUES ",
        "",
        &rank_rows,
    )
    .await?;
    Ok(())
}

/// A group as the batch left it.
#[derive(Debug, Clone, Copy)]
struct GroupRow {
    id: i64,
    /// Created by this batch.
    new: bool,
}

/// One fingerprint of a batch: the fields of its first incident, how many incidents, when.
struct BatchGroup<'a> {
    primary: &'a Primary,
    count: i64,
    first_seen: i64,
    last_seen: i64,
}

/// Counts the batch's incidents into their groups, creating the groups that do not exist yet, in
/// one upsert (several servers may race on a new fingerprint: the database serializes them).
async fn upsert_groups<'a>(
    tx: &mut Tx<'_>,
    incidents: &[&'a NewIncident],
) -> Result<HashMap<&'a str, GroupRow>> {
    let mut batch: Vec<BatchGroup<'_>> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for i in incidents {
        let Some(p) = &i.primary else { continue };
        match index.get(p.fingerprint.as_str()) {
            Some(&k) => {
                let group = &mut batch[k];
                group.count += 1;
                group.last_seen = group.last_seen.max(i.created_at);
            }
            None => {
                index.insert(&p.fingerprint, batch.len());
                batch.push(BatchGroup {
                    primary: p,
                    count: 1,
                    first_seen: i.created_at,
                    last_seen: i.created_at,
                });
            }
        }
    }
    let rows: Vec<Vec<Value<'_>>> = batch
        .iter()
        .map(|g| {
            let p = g.primary;
            vec![
                Value::Text(Some(&p.fingerprint)),
                Value::Text(Some(&p.class)),
                Value::Text(Some(&p.rule)),
                Value::Text(Some(&p.title)),
                Value::Text(Some(&p.message)),
                Value::Int(Some(g.count)),
                Value::Int(Some(g.first_seen)),
                Value::Int(Some(g.last_seen)),
            ]
        })
        .collect();
    let returned = insert_rows(
        tx,
        "INSERT INTO groups (fingerprint, class, rule, title, message, count, first_seen, last_seen) VALUES ",
        " ON CONFLICT (fingerprint) DO UPDATE SET count = groups.count + excluded.count, last_seen = excluded.last_seen
         RETURNING id, fingerprint, count",
        &rows,
    )
    .await?;
    let mut groups = HashMap::with_capacity(batch.len());
    for row in returned.iter().flatten() {
        let fingerprint: String = row.try_get(1)?;
        let Some(&k) = index.get(fingerprint.as_str()) else {
            continue;
        };
        let group = &batch[k];
        // Counts start at 1 and never go down: a group that existed before holds more than this
        // batch's incidents.
        let total: i64 = row.try_get(2)?;
        groups.insert(
            group.primary.fingerprint.as_str(),
            GroupRow {
                id: row.try_get(0)?,
                new: total == group.count,
            },
        );
    }
    Ok(groups)
}

/// Inserts the incident rows; their ids in batch order.
async fn insert_incidents(
    tx: &mut Tx<'_>,
    incidents: &[&NewIncident],
    groups: &HashMap<&str, GroupRow>,
) -> Result<Vec<Stored>> {
    let tags: Vec<String> = incidents
        .iter()
        .map(|i| serde_json::to_string(&i.meta.tags).unwrap_or_else(|_| "[]".into()))
        .collect();
    let group_of = |i: &NewIncident| {
        i.primary
            .as_ref()
            .and_then(|p| groups.get(p.fingerprint.as_str()))
            .copied()
    };
    let rows: Vec<Vec<Value<'_>>> = incidents
        .iter()
        .zip(&tags)
        .map(|(i, tags)| {
            let p = i.primary.as_ref();
            vec![
                Value::Int(Some(i.created_at)),
                Value::Int(group_of(i).map(|g| g.id)),
                Value::Text(Some(&i.log_hash)),
                Value::Text(i.meta.project.as_deref()),
                Value::Text(i.meta.source.as_deref()),
                Value::Text(i.meta.commit.as_deref()),
                Value::Text(i.meta.job_url.as_deref()),
                Value::Text(Some(tags)),
                Value::Text(p.map(|p| p.class.as_str())),
                Value::Text(p.map(|p| p.rule.as_str())),
                Value::Text(p.map(|p| p.confidence)),
                Value::Text(p.map(|p| p.title.as_str()).or(i.fallback_title.as_deref())),
                Value::Text(p.map(|p| p.summary.as_str())),
                Value::Text(i.evidence.as_deref()),
                Value::Int(Some(i.log_lines)),
                Value::Blob(Some(&i.diagnosis)),
                Value::Int(Some(i64::from(i.diagnosed))),
                Value::Text(i.unexplained_error.as_deref()),
                Value::Blob(i.bundle.as_ref().map(|b| b.diagnosis.as_slice())),
            ]
        })
        .collect();
    let returned = insert_rows(
        tx,
        "INSERT INTO incidents (created_at, group_id, log_hash, project, source, commit_sha, job_url, tags, class, rule, confidence, title, summary, evidence, lines, diagnosis, diagnosed, unexplained_error, bundle) VALUES ",
        " RETURNING id",
        &rows,
    )
    .await?;
    // Ids come from an increasing sequence (SQLite AUTOINCREMENT, PostgreSQL BIGSERIAL) and are
    // given to the VALUES rows in order, but RETURNING may list the rows in any order: sorting
    // each statement's ids puts them back in batch order.
    let mut ids = Vec::with_capacity(incidents.len());
    for statement in returned {
        let mut chunk = statement
            .iter()
            .map(|row| row.try_get::<i64, _>(0))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        chunk.sort_unstable();
        ids.extend(chunk);
    }
    if ids.len() != incidents.len() {
        return Err(StoreError::Invalid(format!(
            "the database returned {} ids for {} incidents",
            ids.len(),
            incidents.len()
        )));
    }
    // The first incident of a group created by this batch is the one that created it.
    let mut announced = HashSet::new();
    Ok(ids
        .into_iter()
        .zip(incidents)
        .map(|(incident_id, i)| {
            let group = group_of(i);
            Stored {
                incident_id,
                group_id: group.map(|g| g.id),
                new_group: group.is_some_and(|g| g.new && announced.insert(g.id)),
            }
        })
        .collect())
}

type Tx<'c> = sqlx::Transaction<'c, sqlx::Any>;

/// A value bound into a multi-row insert.
enum Value<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
    Blob(Option<&'a [u8]>),
}

impl Value<'_> {
    /// Roughly what the value weighs in a statement.
    fn bytes(&self) -> usize {
        match self {
            Value::Int(_) => 8,
            Value::Text(t) => t.map_or(0, str::len),
            Value::Blob(b) => b.map_or(0, <[u8]>::len),
        }
    }
}

/// Most bound values in one statement (SQLite's default limit is 32,766).
const MAX_BOUND_VALUES: usize = 4_000;
/// Most bound bytes in one statement (a PostgreSQL message holds at most 1 GiB; logs are large).
const MAX_BOUND_BYTES: usize = 64 << 20;

/// Inserts `rows` (all of the same width) with `head` `($1, $2, …), (…)` `tail`, in as few
/// statements as the bound-value and byte limits allow; the rows each statement returned.
async fn insert_rows(
    tx: &mut Tx<'_>,
    head: &str,
    tail: &str,
    rows: &[Vec<Value<'_>>],
) -> Result<Vec<Vec<AnyRow>>> {
    let width = rows.first().map_or(1, Vec::len).max(1);
    let mut returned = Vec::new();
    let mut rest = rows;
    while !rest.is_empty() {
        let mut take = 0;
        let mut bytes = 0;
        for row in rest {
            let weight: usize = row.iter().map(Value::bytes).sum();
            let full = (take + 1) * width > MAX_BOUND_VALUES || bytes + weight > MAX_BOUND_BYTES;
            if take > 0 && full {
                break;
            }
            take += 1;
            bytes += weight;
        }
        let (chunk, next) = rest.split_at(take);
        rest = next;
        let mut sql = String::from(head);
        for (r, row) in chunk.iter().enumerate() {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for c in 1..=row.len() {
                if c > 1 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("${}", r * width + c));
            }
            sql.push(')');
        }
        sql.push_str(tail);
        // Only the constant head and tail and numbered placeholders: no value is in the text.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in chunk.iter().flatten() {
            query = match value {
                Value::Int(v) => query.bind(*v),
                Value::Text(v) => query.bind(*v),
                Value::Blob(v) => query.bind(*v),
            };
        }
        returned.push(query.fetch_all(&mut **tx).await?);
    }
    Ok(returned)
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

    #[test]
    fn every_metadata_field_is_redacted() {
        let hf = "hf_abcdefghijklmnopqrstuvwxyzABCDEF1234";
        let meta = IncidentMeta {
            project: Some(format!("vision {hf}")),
            source: Some("ci PASSWORD=hunter2".into()),
            commit: Some(format!("abc123 {hf}")),
            job_url: Some("https://bot:s3cret@ci.example.com/job/1".into()),
            tags: vec!["gpu".into(), format!("token:{hf}")],
        }
        .validated()
        .unwrap_or_default();
        assert_eq!(
            meta,
            IncidentMeta {
                project: Some("vision hf_<redacted>".into()),
                source: Some("ci PASSWORD=<redacted>".into()),
                commit: Some("abc123 hf_<redacted>".into()),
                job_url: Some("https://bot:<redacted>@ci.example.com/job/1".into()),
                tags: vec!["gpu".into(), "token:hf_<redacted>".into()],
            }
        );
    }
}
