//! Analysing a distributed job's files for a client, whichever face sent them: archives unpacked
//! (bounded), every text file redacted before it is analysed or stored, the bundle diagnosed as
//! one job, and stored as one incident with all its files unless the client asked not to. A
//! request that holds one text log, once archives are unpacked, is analysed as today's single log.
//!
//! What is kept of a file is what was analysed, so that the analysis can be run again from it: a
//! text file redacted; a flight-recorder pickle as its content in JSON (`fr_3` kept as
//! `fr_3.json`, the form torch's own JSON dump takes), redacted; any other binary file is neither
//! analysed nor kept, and the bundle diagnosis says so. A bundle with no file left to read is
//! refused (422).

use std::io::Cursor;
use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::analyze::{AnalyzeResponse, analyze_and_store};
use super::{AppState, Error, Result};
use crate::bundle::binary::{self, LeftOut};
use crate::bundle::xid::{CATALOG_FILE, XidCatalog};
use crate::bundle::{ArchiveLimits, BundleAnalyzer, archive_kind, read_archive};
use crate::diagnose::analyze_str;
use crate::kb::bundles::BundleText;
use crate::kb::now_ms;
use crate::kb::redact::{redact, redact_json};
use crate::kb::writer::{IncidentMeta, NewIncident, Stored};
use crate::model::{BundleDiagnosis, FileKind};
use crate::rules::RuleSet;

/// Most files a bundle may hold, archives unpacked.
pub const MAX_FILES: usize = 20_000;
/// Longest file name accepted.
const MAX_NAME: usize = 512;

/// A file as a face received it.
#[derive(Debug, Clone)]
pub struct Upload {
    /// Its name (a path inside a folder or an archive).
    pub name: String,
    /// Its bytes.
    pub bytes: Bytes,
}

/// Always `"bundle"`: tells a bundle's answer from a single log's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BundleKind {
    /// A distributed job's bundle.
    Bundle,
}

/// A bundle's diagnosis, with where it was stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct BundleResponse {
    /// `bundle`.
    pub kind: BundleKind,
    /// The bundle diagnosis (the same document as `faultline analyze --format json FILES…`).
    #[serde(flatten)]
    pub bundle: BundleDiagnosis,
    /// The stored incident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident_id: Option<i64>,
    /// Its group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<i64>,
    /// Whether this incident created its group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_group: Option<bool>,
}

/// What analysing several files gave: one log's diagnosis, or a bundle's.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Analysis {
    /// The files held one log: today's single-log answer.
    Single(Box<AnalyzeResponse>),
    /// A distributed job's bundle.
    Bundle(Box<BundleResponse>),
}

impl Analysis {
    /// The stored incident, when one was stored.
    pub fn incident_id(&self) -> Option<i64> {
        match self {
            Self::Single(r) => r.incident_id,
            Self::Bundle(r) => r.incident_id,
        }
    }
}

/// The Xid catalog of a rule base: `xid.toml` in the rules directory when it has one, else the
/// embedded one.
pub fn xid_catalog(rules_dir: Option<&std::path::Path>) -> anyhow::Result<XidCatalog> {
    let file = rules_dir.map(|d| d.join(CATALOG_FILE)).filter(|p| p.is_file());
    Ok(match file {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            XidCatalog::parse(&text, &path.display().to_string())?
        }
        None => XidCatalog::embedded()?,
    })
}

/// Analyses the files a client sent (archives unpacked) and, when `store`, commits the incident.
pub async fn analyze_uploads(
    state: &AppState,
    uploads: Vec<Upload>,
    meta: IncidentMeta,
    store: bool,
) -> Result<Analysis> {
    check_names(&uploads)?;
    let limits = ArchiveLimits {
        max_entries: MAX_FILES,
        max_inflated: state.config.bundle_max_inflated_bytes as u64,
    };
    let files = if uploads.iter().any(|u| archive_kind(&u.bytes).is_some()) {
        tokio::task::spawn_blocking(move || unpack(uploads, limits))
            .await
            .map_err(|e| Error::Internal(format!("unpacking task failed: {e}")))??
    } else {
        uploads
    };
    check_names(&files)?;
    if files.iter().all(|f| f.bytes.iter().all(u8::is_ascii_whitespace)) {
        return Err(Error::Unprocessable(
            "every file is empty: send the logs of the job's ranks (and its dmesg, error files or dumps)"
                .into(),
        ));
    }
    if let [one] = files.as_slice()
        && !binary::is_binary(&one.bytes)
    {
        let log = String::from_utf8_lossy(&one.bytes).into_owned();
        let single = analyze_and_store(state, log, meta, store).await?;
        return Ok(Analysis::Single(Box::new(single)));
    }

    let started = Instant::now();
    let bytes: usize = files.iter().map(|f| f.bytes.len()).sum();
    let rules = state.rules.clone();
    let catalog = state.xids.clone();
    let work = move || {
        let kept: Vec<Kept> = files.iter().map(kept).collect();
        let left: Vec<(String, LeftOut)> = kept
            .iter()
            .filter_map(|k| match k {
                Kept::LeftOut(name, why) => Some((name.clone(), why.clone())),
                Kept::Text(_) => None,
            })
            .collect();
        if left.len() == kept.len() {
            return Err(Error::Unprocessable(binary::nothing_readable(&left)));
        }
        let bundle = diagnose(&rules, &catalog, &kept)?;
        let mut texts: Vec<BundleText> = kept
            .into_iter()
            .filter_map(|k| match k {
                Kept::Text(text) => Some(text),
                Kept::LeftOut(..) => None,
            })
            .collect();
        for text in &mut texts {
            if let Some(read) = bundle.files.iter().find(|f| f.name == text.name) {
                text.kind = read.kind;
            }
        }
        let incident = store.then(|| {
            let shown = shown_file(&bundle, &texts);
            let diagnosis = bundle
                .files
                .iter()
                .find(|f| texts.get(shown).is_some_and(|t| t.name == f.name))
                .and_then(|f| f.diagnosis.clone())
                .unwrap_or_else(|| analyze_str(&rules, texts.get(shown).map_or("", |t| t.text.as_str())));
            NewIncident::prepare_bundle(&texts, shown, &diagnosis, &bundle, meta, now_ms())
        });
        Ok::<_, Error>((bundle, incident))
    };
    let (bundle, incident) = tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("bundle analysis task failed: {e}")))??;
    state
        .metrics
        .analysis(bytes, started.elapsed(), bundle.is_diagnosed());
    let stored: Option<Stored> = match incident {
        Some(incident) => {
            let stored = state.writer.write(incident).await?;
            state.metrics.stored();
            Some(stored)
        }
        None => None,
    };
    Ok(Analysis::Bundle(Box::new(BundleResponse {
        kind: BundleKind::Bundle,
        bundle,
        incident_id: stored.map(|s| s.incident_id),
        group_id: stored.and_then(|s| s.group_id),
        new_group: stored.map(|s| s.new_group),
    })))
}

/// Every name present, not too long, and no two alike.
fn check_names(files: &[Upload]) -> Result<()> {
    if files.is_empty() {
        return Err(Error::Unprocessable("no file was sent".into()));
    }
    if files.len() > MAX_FILES {
        return Err(Error::Unprocessable(format!(
            "a bundle holds at most {MAX_FILES} files"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for f in files {
        if f.name.trim().is_empty() {
            return Err(Error::BadRequest(
                "a file has no name: give each file its name".into(),
            ));
        }
        if f.name.len() > MAX_NAME {
            return Err(Error::Unprocessable(format!(
                "a file name is longer than {MAX_NAME} bytes"
            )));
        }
        if !seen.insert(f.name.as_str()) {
            return Err(Error::Unprocessable(format!(
                "two files are named {:?}: give each file of the bundle its own name",
                f.name
            )));
        }
    }
    Ok(())
}

/// The files with every `.zip` / `.tar.gz` replaced by its members (`ARCHIVE/MEMBER`), within
/// `limits` for all archives together: a zip bomb is refused (422), never inflated past them.
fn unpack(uploads: Vec<Upload>, limits: ArchiveLimits) -> Result<Vec<Upload>> {
    let mut files = Vec::with_capacity(uploads.len());
    let mut left = limits;
    for upload in uploads {
        if archive_kind(&upload.bytes).is_none() {
            files.push(upload);
            continue;
        }
        let mut inflated = 0u64;
        read_archive(Cursor::new(&upload.bytes), left, |name, reader| {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
            inflated += bytes.len() as u64;
            files.push(Upload {
                name: format!("{}/{name}", upload.name),
                bytes: Bytes::from(bytes),
            });
            Ok(())
        })
        .map_err(|e| Error::Unprocessable(format!("{}: {e}", upload.name)))?;
        left.max_inflated = left.max_inflated.saturating_sub(inflated);
        left.max_entries = limits.max_entries.saturating_sub(files.len());
    }
    Ok(files)
}

/// What becomes of a file: kept (and analysed as it is kept), or left out.
#[derive(Debug)]
pub enum Kept {
    /// Its kept text.
    Text(BundleText),
    /// Its name, and why it is neither analysed nor kept.
    LeftOut(String, LeftOut),
}

/// What is kept of a file: a text file redacted, as a log is; a flight-recorder pickle as its
/// content in JSON, each string and each `"key": value` pair redacted; any other binary file not
/// at all.
pub fn kept(file: &Upload) -> Kept {
    if !binary::is_binary(&file.bytes) {
        let text = String::from_utf8_lossy(&file.bytes);
        return Kept::Text(BundleText {
            name: file.name.clone(),
            kind: FileKind::Unknown,
            text: redact(&text).into_owned(),
            bytes: file.bytes.len() as u64,
            binary: false,
            kept_as: None,
        });
    }
    let json = binary::decode(&file.name, &file.bytes).and_then(|decoded| {
        let mut json = decoded.value.to_json();
        redact_json(&mut json);
        binary::json_text(&json)
    });
    match json {
        Ok(text) => Kept::Text(BundleText {
            name: file.name.clone(),
            kind: FileKind::FlightRecorder,
            text,
            bytes: file.bytes.len() as u64,
            binary: true,
            kept_as: Some(binary::json_name(&file.name)),
        }),
        Err(why) => Kept::LeftOut(file.name.clone(), why),
    }
}

/// Diagnoses the bundle from what is kept of each file, under the name it was submitted as; a
/// file left out is named in a warning.
fn diagnose(rules: &RuleSet, catalog: &XidCatalog, kept: &[Kept]) -> Result<BundleDiagnosis> {
    let mut analyzer = BundleAnalyzer::new(rules, catalog.clone());
    for file in kept {
        match file {
            Kept::Text(text) => analyzer
                .add_bytes(&text.name, text.text.as_bytes())
                .map_err(|e| Error::Unprocessable(e.to_string()))?,
            Kept::LeftOut(name, why) => analyzer.leave_out(name, why),
        }
    }
    Ok(analyzer.finish())
}

/// The file the incident shows as its log: the first fault's evidence file, else a log of the first
/// fault's rank, else the first log of the bundle, else the first file.
fn shown_file(bundle: &BundleDiagnosis, texts: &[BundleText]) -> usize {
    let index = |name: &str| texts.iter().position(|t| t.name == name);
    let is_log = |name: &str| bundle.files.iter().any(|f| f.name == name && f.kind.is_log());
    let first = bundle.first_fault.as_ref();
    let evidence = first.and_then(|f| {
        f.evidence
            .iter()
            .find(|e| is_log(&e.file))
            .and_then(|e| index(&e.file))
    });
    let rank_log = || {
        let rank = first?.rank?;
        let report = bundle.ranks.iter().find(|r| r.rank == rank)?;
        report.files.iter().find(|f| is_log(f)).and_then(|f| index(f))
    };
    let any_log = || {
        bundle
            .files
            .iter()
            .find(|f| f.kind.is_log())
            .and_then(|f| index(&f.name))
    };
    evidence.or_else(rank_log).or_else(any_log).unwrap_or(0)
}
