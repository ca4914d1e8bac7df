//! Rules: listing with hit counts and feedback precision, one rule with its patterns, causes,
//! fixes, examples and hits over time, and the backtest of a candidate rule.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};

use super::extract::{PathParams, QueryParams, RawBody};
use super::{ApiError, ApiResult, AppState};
use crate::diagnose::analyze_str;
use crate::kb::rows::RuleStats;
use crate::model::{Confidence, Role, Severity};
use crate::rules::{Rule, RuleSet};

/// A rule in a listing.
#[derive(Debug, Serialize, Deserialize)]
pub struct RuleSummary {
    /// Id.
    pub id: String,
    /// Class.
    pub class: String,
    /// Title.
    pub title: String,
    /// Role.
    pub role: Role,
    /// Priority.
    pub priority: i32,
    /// Severity.
    pub severity: Severity,
    /// Base confidence.
    pub confidence: Confidence,
    /// Source file.
    pub file: String,
    /// Hits and feedback.
    pub stats: RuleStats,
}

fn summary(rule: &Rule, stats: RuleStats) -> RuleSummary {
    RuleSummary {
        id: rule.id.clone(),
        class: rule.class.clone(),
        title: rule.title.clone(),
        role: rule.role,
        priority: rule.priority,
        severity: rule.severity,
        confidence: rule.confidence,
        file: rule.file.clone(),
        stats,
    }
}

pub(super) async fn list(State(state): State<AppState>) -> ApiResult<Json<Vec<RuleSummary>>> {
    let mut stats = state.store.all_rule_stats().await?;
    Ok(Json(
        state
            .rules
            .rules()
            .iter()
            .map(|r| summary(r, stats.remove(&r.id).unwrap_or_else(|| RuleStats::empty(&r.id))))
            .collect(),
    ))
}

/// A rule in full.
#[derive(Debug, Serialize, Deserialize)]
pub struct RuleDetail {
    /// Summary and stats (with daily hits).
    #[serde(flatten)]
    pub rule: RuleSummary,
    /// Summary template.
    pub summary: String,
    /// Classes it yields to.
    pub yields_to: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Line patterns: `any`, `all`, `not`.
    pub patterns: PatternsView,
    /// Causes (templates).
    pub causes: Vec<TitledText>,
    /// Fixes.
    pub fixes: Vec<TitledText>,
    /// Next artifact.
    pub next_artifact: Option<String>,
    /// Links.
    pub links: Vec<String>,
    /// Examples.
    pub examples: Vec<ExampleView>,
}

/// Line patterns of a rule.
#[derive(Debug, Serialize, Deserialize)]
pub struct PatternsView {
    /// At least one must match.
    pub any: Vec<String>,
    /// All must match.
    pub all: Vec<String>,
    /// None may match.
    pub not: Vec<String>,
}

/// A title with a text (cause detail, fix code).
#[derive(Debug, Serialize, Deserialize)]
pub struct TitledText {
    /// Title.
    pub title: String,
    /// Text.
    pub text: Option<String>,
}

/// An example of a rule.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExampleView {
    /// Name.
    pub name: String,
    /// Source URL.
    pub source: Option<String>,
    /// Whether the rule must match it.
    pub matched: bool,
    /// The log.
    pub log: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct DaysQuery {
    days: Option<i64>,
}

/// The detail of a rule, for the API and the web page.
pub fn rule_detail(rules: &RuleSet, rule: &Rule, stats: RuleStats) -> RuleDetail {
    let sources = |ids: &[usize]| {
        ids.iter()
            .map(|&p| rules.patterns().source(p).to_owned())
            .collect()
    };
    RuleDetail {
        summary: rule.summary.source().to_owned(),
        yields_to: rule.yields_to.clone(),
        tags: rule.tags.clone(),
        patterns: PatternsView {
            any: sources(&rule.any),
            all: sources(&rule.all),
            not: sources(&rule.not),
        },
        causes: rule
            .causes
            .iter()
            .map(|c| TitledText {
                title: c.title.source().to_owned(),
                text: Some(c.detail.source().to_owned()),
            })
            .collect(),
        fixes: rule
            .fixes
            .iter()
            .map(|f| TitledText {
                title: f.title.source().to_owned(),
                text: f.code.clone(),
            })
            .collect(),
        next_artifact: rule.next_artifact.as_ref().map(|t| t.source().to_owned()),
        links: rule.links.clone(),
        examples: rule
            .examples
            .iter()
            .map(|e| ExampleView {
                name: e.name.clone(),
                source: e.source.clone(),
                matched: e.expect.matched,
                log: e.log.clone(),
            })
            .collect(),
        rule: summary(rule, stats),
    }
}

pub(super) async fn get_one(
    State(state): State<AppState>,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<DaysQuery>,
) -> ApiResult<Json<RuleDetail>> {
    let rule = state
        .rules
        .rule(&id)
        .ok_or_else(|| ApiError::NotFound(format!("rule {id} not found")))?;
    let stats = state.store.rule_stats(&id, q.days.unwrap_or(30)).await?;
    Ok(Json(rule_detail(&state.rules, rule, stats)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct BacktestQuery {
    /// Latest incidents to run it over (default 500, at most 10000).
    limit: Option<i64>,
}

/// What a candidate rule would do over stored incidents.
#[derive(Debug, Serialize, Deserialize)]
pub struct BacktestReport {
    /// The candidate's id.
    pub rule: String,
    /// Incidents analysed.
    pub scanned: usize,
    /// Incidents it matches.
    pub matched: Vec<BacktestMatch>,
    /// How many of those it would become the primary finding of, taking them from another rule.
    pub takes_primary: usize,
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

pub(super) async fn backtest(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<BacktestQuery>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> ApiResult<Json<BacktestReport>> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let text = if json {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Candidate {
            rule: String,
        }
        serde_json::from_slice::<Candidate>(&body)
            .map_err(|e| ApiError::BadRequest(format!("expected {{\"rule\": \"<TOML>\"}}: {e}")))?
            .rule
    } else {
        String::from_utf8(body.to_vec())
            .map_err(|_| ApiError::BadRequest("the rule is not UTF-8 text".into()))?
    };
    Ok(Json(
        backtest_candidate(&state, &text, q.limit.unwrap_or(500)).await?,
    ))
}

/// Runs a candidate rule (the text of its file) over the latest `limit` stored incidents.
pub async fn backtest_candidate(state: &AppState, text: &str, limit: i64) -> ApiResult<BacktestReport> {
    let candidate = state
        .rules
        .with_candidate(text)
        .map_err(|e| ApiError::Unprocessable(e.to_string().trim_end().to_owned()))?;
    let id = candidate.rules().last().map(|r| r.id.clone()).unwrap_or_default();
    let logs = state.store.recent_logs(limit).await?;
    let candidate = Arc::new(candidate);
    tokio::task::spawn_blocking(move || run_backtest(&candidate, &id, &logs))
        .await
        .map_err(|e| ApiError::Internal(format!("backtest failed: {e}")))
}

fn run_backtest(rules: &RuleSet, id: &str, logs: &[(i64, Option<String>, String)]) -> BacktestReport {
    let mut matched = Vec::new();
    for (incident_id, before, log) in logs {
        let diagnosis = analyze_str(rules, log);
        if let Some(f) = diagnosis.findings.iter().find(|f| f.rule == id) {
            matched.push(BacktestMatch {
                incident_id: *incident_id,
                primary_before: before.clone(),
                primary_after: diagnosis.primary().map(|p| p.rule.clone()),
                confidence: f.confidence,
            });
        }
    }
    let takes_primary = matched
        .iter()
        .filter(|m| m.primary_after.as_deref() == Some(id) && m.primary_before.as_deref() != Some(id))
        .count();
    BacktestReport {
        rule: id.to_owned(),
        scanned: logs.len(),
        matched,
        takes_primary,
    }
}
