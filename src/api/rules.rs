//! Rules: listing with hit counts and feedback precision, one rule with its patterns, causes,
//! fixes, examples and hits over time, and the backtest of a candidate rule.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};

use super::extract::{PathParams, QueryParams, RawBody};
use super::{ApiError, ApiResult, AppState};
use crate::kb::rows::RuleStats;
use crate::model::{Confidence, Role, Severity};
use crate::rules::{Rule, RuleSet};
use crate::service::backtest::{self as job, BacktestError, Bounds};
pub use crate::service::backtest::{BacktestMatch, BacktestReport};

/// What a client that finds a backtest running is told to wait.
const BACKTEST_RETRY_SECS: u64 = 5;

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

/// Runs a candidate rule (the text of its file) over the latest `limit` stored incidents: one
/// backtest at a time per server (another is answered 429), stopped before the request's timeout.
pub async fn backtest_candidate(state: &AppState, text: &str, limit: i64) -> ApiResult<BacktestReport> {
    let Ok(_running) = state.backtests.try_acquire() else {
        return Err(ApiError::RateLimited {
            retry_after_secs: BACKTEST_RETRY_SECS,
        });
    };
    // Three quarters of the request's time: the report of a long backtest still gets out.
    let time = Duration::from_millis(state.config.request_timeout_secs.max(1) * 750);
    let bounds = Bounds {
        incidents: limit,
        time,
    };
    job::backtest(&state.store, &state.rules, text, bounds)
        .await
        .map_err(|e| match e {
            BacktestError::InvalidRule(why) => ApiError::Unprocessable(why),
            BacktestError::Store(e) => e.into(),
            BacktestError::Task(why) => ApiError::Internal(format!("backtest failed: {why}")),
        })
}
