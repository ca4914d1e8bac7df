//! A candidate rule run over stored logs: what it would match and which primary findings it would
//! take. A bounded job: at most [`MAX_INCIDENTS`] incidents, each distinct log read, decompressed
//! and analysed once (incidents that share a log share its result), one log in memory at a time,
//! the CPU work off the async threads, and a time limit after which the report says how far it
//! got. Dropping the future (the client went away) stops it after the log in hand.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::diagnose::analyze_str;
use crate::kb::codec::decompress;
use crate::kb::{Store, StoreError};
use crate::model::Confidence;
use crate::rules::RuleSet;

/// The most incidents one backtest reads.
pub const MAX_INCIDENTS: i64 = 10_000;

/// How far a backtest may go.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The latest incidents to read (clamped to 1..=[`MAX_INCIDENTS`]).
    pub incidents: i64,
    /// Time after which it stops and reports what it has.
    pub time: Duration,
}

/// What a candidate rule would do over stored incidents.
#[derive(Debug, Serialize, Deserialize)]
pub struct BacktestReport {
    /// The candidate's id.
    pub rule: String,
    /// Incidents analysed.
    pub scanned: usize,
    /// Distinct logs among them (incidents with the same log are analysed once).
    pub distinct_logs: usize,
    /// Incidents it matches.
    pub matched: Vec<BacktestMatch>,
    /// How many of those it would become the primary finding of, taking them from another rule.
    pub takes_primary: usize,
    /// Whether every incident asked for was analysed.
    pub complete: bool,
    /// Why it stopped early, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// One incident a candidate matches.
#[derive(Debug, Serialize, Deserialize)]
pub struct BacktestMatch {
    /// Incident.
    pub incident_id: i64,
    /// Primary rule when it was stored.
    pub primary_before: Option<String>,
    /// Primary rule with the candidate.
    pub primary_after: Option<String>,
    /// The candidate's confidence there.
    pub confidence: Confidence,
}

/// Why a backtest could not run.
#[derive(Debug, thiserror::Error)]
pub enum BacktestError {
    /// The candidate is not a valid rule.
    #[error("{0}")]
    InvalidRule(String),
    /// The knowledge base failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The analysis task failed.
    #[error("the analysis task failed: {0}")]
    Task(String),
}

/// What the candidate did to one log.
struct Outcome {
    primary_after: Option<String>,
    confidence: Option<Confidence>,
}

/// Runs the candidate rule (the text of its file) over the latest stored incidents.
pub async fn backtest(
    store: &Store,
    rules: &RuleSet,
    candidate_text: &str,
    bounds: Bounds,
) -> Result<BacktestReport, BacktestError> {
    let candidate = rules
        .with_candidate(candidate_text)
        .map_err(|e| BacktestError::InvalidRule(e.to_string().trim_end().to_owned()))?;
    let id = candidate.rules().last().map(|r| r.id.clone()).unwrap_or_default();
    let candidate = Arc::new(candidate);
    let started = Instant::now();
    let incidents = store
        .recent_incident_logs(bounds.incidents.clamp(1, MAX_INCIDENTS))
        .await?;
    let mut outcomes: HashMap<String, Outcome> = HashMap::new();
    let mut scanned = 0;
    let mut stopped = None;
    for incident in &incidents {
        if !outcomes.contains_key(&incident.log_hash) {
            if started.elapsed() >= bounds.time {
                stopped = Some(format!(
                    "stopped at the time limit of {} s after {scanned} of {} incidents",
                    bounds.time.as_secs(),
                    incidents.len()
                ));
                break;
            }
            let data = store.compressed_log(&incident.log_hash).await?;
            let (rules, id) = (candidate.clone(), id.clone());
            let outcome = tokio::task::spawn_blocking(move || analyze(&rules, &id, &data))
                .await
                .map_err(|e| BacktestError::Task(e.to_string()))??;
            outcomes.insert(incident.log_hash.clone(), outcome);
        }
        scanned += 1;
    }
    let matched: Vec<BacktestMatch> = incidents[..scanned]
        .iter()
        .filter_map(|incident| {
            let outcome = outcomes.get(&incident.log_hash)?;
            Some(BacktestMatch {
                incident_id: incident.incident_id,
                primary_before: incident.primary_rule.clone(),
                primary_after: outcome.primary_after.clone(),
                confidence: outcome.confidence?,
            })
        })
        .collect();
    let takes_primary = matched
        .iter()
        .filter(|m| {
            m.primary_after.as_deref() == Some(id.as_str())
                && m.primary_before.as_deref() != Some(id.as_str())
        })
        .count();
    Ok(BacktestReport {
        rule: id,
        scanned,
        distinct_logs: outcomes.len(),
        matched,
        takes_primary,
        complete: stopped.is_none(),
        stopped,
    })
}

/// Decompresses and analyses one stored log with the candidate.
fn analyze(rules: &RuleSet, id: &str, data: &[u8]) -> Result<Outcome, BacktestError> {
    let log = decompress(data).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let diagnosis = analyze_str(rules, &String::from_utf8_lossy(&log));
    Ok(Outcome {
        confidence: diagnosis
            .findings
            .iter()
            .find(|f| f.rule == id)
            .map(|f| f.confidence),
        primary_after: diagnosis.primary().map(|p| p.rule.clone()),
    })
}
