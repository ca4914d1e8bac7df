//! A distributed job's incident in the knowledge base: the files of its bundle (each kept as it
//! was analysed: a text file redacted, a flight-recorder pickle as its JSON), its ranks with their hosts and GPUs (the first fault's marked), the bundle's
//! diagnosis, and the repeat offenders: the GPUs and hosts that failed first in incidents of
//! different jobs.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, Row};

use super::codec::{compress, decompress, sha256_hex};
use super::{Result, Store, StoreError};
use crate::model::{BundleDiagnosis, FileKind, GpuRef};

/// Most offenders of each kind listed.
const MAX_OFFENDERS: i64 = 200;
/// Most incidents listed with each offender.
const INCIDENTS_PER_OFFENDER: usize = 20;

/// One file of a bundle as it is kept: its name, what it is, and its text (redacted by the
/// caller, as a log is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleText {
    /// The name it was submitted under.
    pub name: String,
    /// What it is.
    pub kind: FileKind,
    /// Its text, redacted; for a binary file, its readable text.
    pub text: String,
    /// Bytes as submitted.
    pub bytes: u64,
    /// Not text: a flight-recorder pickle, kept as its content in JSON.
    pub binary: bool,
    /// The name of the form it is kept in, when that is not the form it came in: `fr_3.json` for
    /// the pickle `fr_3`.
    pub kept_as: Option<String>,
}

/// What a bundle adds to an incident, encoded and ready to be written.
#[derive(Debug, Clone)]
pub(super) struct PreparedBundle {
    /// Deflate of the bundle diagnosis JSON.
    pub(super) diagnosis: Vec<u8>,
    pub(super) files: Vec<PreparedFile>,
    pub(super) ranks: Vec<RankRow>,
}

/// A file, as a row of `logs` and one of `incident_files`.
#[derive(Debug, Clone)]
pub(super) struct PreparedFile {
    pub(super) name: String,
    pub(super) kind: &'static str,
    pub(super) hash: String,
    pub(super) bytes: i64,
    pub(super) text_bytes: i64,
    pub(super) lines: i64,
    pub(super) data: Vec<u8>,
    pub(super) binary: bool,
    pub(super) kept_as: Option<String>,
}

/// A rank (or a place the first fault names without a rank) as a row of `incident_ranks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RankRow {
    pub(super) rank: Option<i64>,
    pub(super) host: Option<String>,
    pub(super) local_rank: Option<i64>,
    pub(super) gpu: GpuRef,
    pub(super) gpu_key: Option<String>,
    pub(super) first_fault: bool,
}

impl PreparedBundle {
    /// Encodes the files and the ranks of a bundle. CPU work: call it off the async threads.
    pub(super) fn prepare(files: &[BundleText], bundle: &BundleDiagnosis) -> Self {
        Self {
            diagnosis: compress(&serde_json::to_vec(bundle).unwrap_or_default()),
            files: files
                .iter()
                .map(|f| PreparedFile {
                    name: f.name.clone(),
                    kind: f.kind.name(),
                    hash: sha256_hex(f.text.as_bytes()),
                    bytes: i64::try_from(f.bytes).unwrap_or(i64::MAX),
                    text_bytes: f.text.len() as i64,
                    lines: f.text.lines().count() as i64,
                    data: compress(f.text.as_bytes()),
                    binary: f.binary,
                    kept_as: f.kept_as.clone(),
                })
                .collect(),
            ranks: rank_rows(bundle),
        }
    }
}

/// The rows of `incident_ranks`: every rank with its host and GPU, the first fault's marked; when
/// the first fault names no rank of the job (an Xid on a GPU no rank is known on), a row of its
/// own for its host and GPU.
fn rank_rows(bundle: &BundleDiagnosis) -> Vec<RankRow> {
    let first = bundle.first_fault.as_ref();
    let first_gpu = first.and_then(|f| {
        f.gpu
            .clone()
            .or_else(|| f.xid.as_ref().and_then(|x| x.gpu.clone()))
    });
    let first_host = first.and_then(|f| {
        f.host
            .clone()
            .or_else(|| f.xid.as_ref().and_then(|x| x.host.clone()))
    });
    let mut rows: Vec<RankRow> = bundle
        .ranks
        .iter()
        .map(|r| {
            let is_first = first.is_some_and(|f| f.rank == Some(r.rank));
            let mut gpu = r.gpu.clone().unwrap_or_default();
            let mut host = r.host.clone();
            if is_first {
                if let Some(g) = &first_gpu {
                    gpu.merge(g);
                }
                if host.is_none() {
                    host.clone_from(&first_host);
                }
            }
            RankRow {
                rank: Some(i64::from(r.rank)),
                gpu_key: gpu_key(host.as_deref(), &gpu),
                host,
                local_rank: r.local_rank.map(i64::from),
                gpu,
                first_fault: is_first,
            }
        })
        .collect();
    if let Some(f) = first
        && !rows.iter().any(|r| r.first_fault)
        && (first_host.is_some() || first_gpu.is_some())
    {
        let gpu = first_gpu.unwrap_or_default();
        rows.push(RankRow {
            rank: f.rank.map(i64::from),
            gpu_key: gpu_key(first_host.as_deref(), &gpu),
            host: first_host,
            local_rank: f.local_rank.map(i64::from),
            gpu,
            first_fault: true,
        });
    }
    rows
}

/// The name of a GPU across incidents: its UUID, else its host and PCI bus id; none when neither
/// is known (an index alone names a different GPU on every host).
pub fn gpu_key(host: Option<&str>, gpu: &GpuRef) -> Option<String> {
    let present = |s: &Option<String>| {
        s.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    if let Some(uuid) = present(&gpu.uuid) {
        return Some(format!("uuid:{uuid}"));
    }
    let host = host.map(str::trim).filter(|h| !h.is_empty())?;
    present(&gpu.bus_id).map(|bus| format!("bus:{host}/{bus}"))
}

/// A file of a stored bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// Its place in the bundle (from 0, in the order it came).
    pub ordinal: i64,
    /// The name it was submitted under.
    pub name: String,
    /// What it is (`rank_log`, `kernel_log`, `flight_recorder`, …).
    pub kind: String,
    /// Bytes as submitted.
    pub bytes: i64,
    /// Lines of its kept text.
    pub lines: i64,
    /// Not text when submitted: a flight-recorder pickle, kept as its content in JSON (`kept_as`);
    /// in incidents stored before faultline kept dumps as JSON, only its readable text was kept.
    pub binary: bool,
    /// The name of the form it is kept in, when that is not the form it came in: `fr_3.json` for
    /// the pickle `fr_3` (its content in JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_as: Option<String>,
}

impl StoredFile {
    /// The media type of its kept text: JSON for a file kept as JSON, else plain text.
    pub fn media_type(&self) -> &'static str {
        if self.kept_as.as_deref().is_some_and(|k| k.ends_with(".json")) {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        }
    }
}

/// What kind of thing an offender is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffenderKind {
    /// A GPU (by UUID, else host and bus id).
    Gpu,
    /// A host.
    Host,
}

/// A GPU or a host that was the first fault of incidents of several jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offender {
    /// GPU or host.
    pub kind: OffenderKind,
    /// What names it across incidents: `uuid:GPU-…`, `bus:HOST/0000:3b:00`, or the host name.
    pub key: String,
    /// Its host, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The GPU as the incidents name it (GPU offenders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    /// Distinct jobs whose first fault it was (incidents with the same CI job URL count once).
    pub jobs: i64,
    /// Those incidents, newest first (at most 20).
    pub incidents: Vec<i64>,
    /// Their projects.
    pub projects: Vec<String>,
    /// The latest of them (Unix ms).
    pub last_seen: i64,
    /// It was the first fault of at least the threshold's number of jobs.
    pub flagged: bool,
}

/// The repeat-offender list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offenders {
    /// Jobs at which a GPU or host is flagged (the `offender_threshold` setting).
    pub threshold: i64,
    /// GPUs that were the first fault of two jobs or more, most jobs first.
    pub gpus: Vec<Offender>,
    /// Hosts likewise.
    pub hosts: Vec<Offender>,
}

/// The distinct-job key of an incident: its CI job URL, else the incident itself.
const JOB: &str = "COALESCE(i.job_url, CAST(i.id AS TEXT))";

impl Store {
    /// The files of a bundle incident, in the order they came (none for a single log).
    pub async fn incident_files(&self, incident_id: i64) -> Result<Vec<StoredFile>> {
        let rows = sqlx::query(
            "SELECT f.ordinal, f.name, f.kind, f.bytes, l.lines, f.is_binary, f.kept_as FROM incident_files f
               JOIN logs l ON l.hash = f.log_hash WHERE f.incident_id = $1 ORDER BY f.ordinal",
        )
        .bind(incident_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(stored_file)
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// One file of a bundle incident with its kept text.
    pub async fn incident_file(&self, incident_id: i64, ordinal: i64) -> Result<(StoredFile, String)> {
        let row = sqlx::query(
            "SELECT f.ordinal, f.name, f.kind, f.bytes, l.lines, f.is_binary, f.kept_as, l.data FROM incident_files f
               JOIN logs l ON l.hash = f.log_hash WHERE f.incident_id = $1 AND f.ordinal = $2",
        )
        .bind(incident_id)
        .bind(ordinal)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("file {ordinal} of incident {incident_id}")))?;
        let file = stored_file(&row)?;
        let data: Vec<u8> = row.try_get(7)?;
        let text = decompress(&data)
            .map_err(|e| StoreError::Corrupt(format!("file {ordinal} of incident {incident_id}: {e}")))?;
        Ok((file, String::from_utf8_lossy(&text).into_owned()))
    }

    /// GPUs and hosts that were the first fault of incidents of two jobs or more (or of
    /// `threshold`, when lower), flagged from `threshold` jobs.
    pub async fn offenders(&self, threshold: i64) -> Result<Offenders> {
        let threshold = threshold.max(1);
        let least = threshold.min(2);
        Ok(Offenders {
            threshold,
            gpus: self.offenders_by(OffenderKind::Gpu, least, threshold).await?,
            hosts: self.offenders_by(OffenderKind::Host, least, threshold).await?,
        })
    }

    async fn offenders_by(&self, kind: OffenderKind, least: i64, threshold: i64) -> Result<Vec<Offender>> {
        let column = match kind {
            OffenderKind::Gpu => "r.gpu_key",
            OffenderKind::Host => "r.host",
        };
        let sql = format!(
            "SELECT {column}, COUNT(DISTINCT {JOB}) AS jobs, MAX(i.created_at) AS last_seen
               FROM incident_ranks r JOIN incidents i ON i.id = r.incident_id
              WHERE r.first_fault = 1 AND {column} IS NOT NULL
              GROUP BY {column} HAVING COUNT(DISTINCT {JOB}) >= $1
              ORDER BY jobs DESC, last_seen DESC LIMIT $2"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(least)
            .bind(MAX_OFFENDERS)
            .fetch_all(self.pool())
            .await?;
        let mut offenders = Vec::with_capacity(rows.len());
        let mut index = HashMap::new();
        for row in &rows {
            let key: String = row.try_get(0)?;
            let jobs: i64 = row.try_get(1)?;
            index.insert(key.clone(), offenders.len());
            offenders.push(Offender {
                kind,
                key,
                host: None,
                gpu: None,
                jobs,
                incidents: Vec::new(),
                projects: Vec::new(),
                last_seen: row.try_get(2)?,
                flagged: jobs >= threshold,
            });
        }
        if offenders.is_empty() {
            return Ok(offenders);
        }
        // The incidents of the listed keys, newest first.
        let placeholders: Vec<String> = (1..=offenders.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT {column}, i.id, i.project, r.host, r.gpu_index, r.gpu_bus_id, r.gpu_uuid
               FROM incident_ranks r JOIN incidents i ON i.id = r.incident_id
              WHERE r.first_fault = 1 AND {column} IN ({}) ORDER BY i.id DESC",
            placeholders.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for o in &offenders {
            query = query.bind(o.key.clone());
        }
        let mut projects: Vec<BTreeSet<String>> = vec![BTreeSet::new(); offenders.len()];
        for row in query.fetch_all(self.pool()).await? {
            let key: String = row.try_get(0)?;
            let Some(&k) = index.get(&key) else { continue };
            let offender = &mut offenders[k];
            if offender.incidents.len() < INCIDENTS_PER_OFFENDER {
                offender.incidents.push(row.try_get(1)?);
            }
            if let Some(project) = row.try_get::<Option<String>, _>(2)? {
                projects[k].insert(project);
            }
            if offender.host.is_none() {
                offender.host = row.try_get(3)?;
            }
            if kind == OffenderKind::Gpu {
                let seen = GpuRef {
                    index: row
                        .try_get::<Option<i64>, _>(4)?
                        .and_then(|i| u32::try_from(i).ok()),
                    bus_id: row.try_get(5)?,
                    uuid: row.try_get(6)?,
                    name: None,
                };
                offender.gpu.get_or_insert_with(GpuRef::default).merge(&seen);
            }
        }
        for (offender, names) in offenders.iter_mut().zip(projects) {
            offender.projects = names.into_iter().collect();
        }
        Ok(offenders)
    }
}

/// The bundle diagnosis of an incident as stored (`incidents.bundle`), when it is a bundle's.
pub(super) fn decode_bundle(incident_id: i64, encoded: Option<Vec<u8>>) -> Result<Option<BundleDiagnosis>> {
    let Some(encoded) = encoded else {
        return Ok(None);
    };
    decompress(&encoded)
        .ok()
        .and_then(|d| serde_json::from_slice::<BundleDiagnosis>(&d).ok())
        .map(Some)
        .ok_or_else(|| StoreError::Corrupt(format!("bundle diagnosis of incident {incident_id}")))
}

fn stored_file(row: &sqlx::any::AnyRow) -> Result<StoredFile, sqlx::Error> {
    Ok(StoredFile {
        ordinal: row.try_get(0)?,
        name: row.try_get(1)?,
        kind: row.try_get(2)?,
        bytes: row.try_get(3)?,
        lines: row.try_get(4)?,
        binary: row.try_get::<i64, _>(5)? != 0,
        kept_as: row.try_get(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Confidence, Coverage, FaultKind, FirstFault, RankOutcome, RankReport};

    fn gpu(index: Option<u32>, bus: Option<&str>, uuid: Option<&str>) -> GpuRef {
        GpuRef {
            index,
            bus_id: bus.map(str::to_owned),
            uuid: uuid.map(str::to_owned),
            name: None,
        }
    }

    fn rank(rank: u32, host: &str, g: Option<GpuRef>) -> RankReport {
        RankReport {
            rank,
            host: Some(host.to_owned()),
            local_rank: Some(rank % 8),
            gpu: g,
            files: Vec::new(),
            outcome: RankOutcome::Cascade,
            root: None,
            first_failure: None,
        }
    }

    fn bundle(ranks: Vec<RankReport>, first_fault: Option<FirstFault>) -> BundleDiagnosis {
        BundleDiagnosis {
            format_version: crate::model::BUNDLE_FORMAT_VERSION,
            first_fault,
            cascades: Vec::new(),
            missing: Vec::new(),
            collectives: Vec::new(),
            xids: Vec::new(),
            coverage: Coverage::default(),
            ranks,
            hosts: Vec::new(),
            clock_offsets: Vec::new(),
            timeline: Vec::new(),
            files: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn fault(rank: Option<u32>, host: Option<&str>, g: Option<GpuRef>) -> FirstFault {
        FirstFault {
            kind: FaultKind::RankFailure,
            summary: "rank failed".into(),
            rank,
            host: host.map(str::to_owned),
            local_rank: None,
            gpu: g,
            collective: None,
            cause: None,
            xid: None,
            at_us: None,
            confidence: Confidence::High,
            reasons: Vec::new(),
            evidence: Vec::new(),
        }
    }

    #[test]
    fn a_gpu_is_named_by_its_uuid_else_by_its_host_and_bus_id_else_not_at_all() {
        let both = gpu(Some(3), Some("0000:3b:00"), Some("GPU-5c6b"));
        assert_eq!(gpu_key(Some("node-1"), &both).as_deref(), Some("uuid:GPU-5c6b"));
        let bus = gpu(Some(3), Some("0000:3b:00"), None);
        assert_eq!(
            gpu_key(Some("node-1"), &bus).as_deref(),
            Some("bus:node-1/0000:3b:00")
        );
        assert_eq!(gpu_key(None, &bus), None, "a bus id names a GPU only on its host");
        assert_eq!(gpu_key(Some("node-1"), &gpu(Some(3), None, None)), None);
    }

    #[test]
    fn the_first_faults_rank_is_marked_and_takes_the_gpu_its_fault_names() {
        let b = bundle(
            vec![rank(0, "a", None), rank(1, "b", Some(gpu(Some(1), None, None)))],
            Some(fault(
                Some(1),
                Some("b"),
                Some(gpu(None, Some("0000:3b:00"), None)),
            )),
        );
        let rows = rank_rows(&b);
        assert_eq!(rows.len(), 2);
        assert!(!rows[0].first_fault);
        assert!(rows[1].first_fault);
        assert_eq!(rows[1].gpu, gpu(Some(1), Some("0000:3b:00"), None));
        assert_eq!(rows[1].gpu_key.as_deref(), Some("bus:b/0000:3b:00"));
    }

    #[test]
    fn a_first_fault_without_a_rank_of_the_job_gets_a_row_of_its_own() {
        let b = bundle(
            vec![rank(0, "a", None)],
            Some(fault(None, Some("c"), Some(gpu(None, None, Some("GPU-1"))))),
        );
        let rows = rank_rows(&b);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1],
            RankRow {
                rank: None,
                host: Some("c".into()),
                local_rank: None,
                gpu: gpu(None, None, Some("GPU-1")),
                gpu_key: Some("uuid:GPU-1".into()),
                first_fault: true,
            }
        );
        assert!(
            rank_rows(&bundle(vec![rank(0, "a", None)], None))
                .iter()
                .all(|r| !r.first_fault)
        );
    }
}
