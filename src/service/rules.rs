//! Rules as clients read them (a listing with hit counts and feedback precision; one rule with
//! its patterns, causes, fixes and examples), and a candidate rule's backtest as a bounded job
//! for a client (one at a time per server, stopped before the request's timeout).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backtest::{self as job, BacktestError, BacktestReport, Bounds};
use super::{AppState, Error, Result};
use crate::kb::rows::RuleStats;
use crate::model::{Confidence, Role, Severity};
use crate::rules::{Rule, RuleSet};

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

/// A rule's row in a listing.
pub fn summary(rule: &Rule, stats: RuleStats) -> RuleSummary {
    RuleSummary {
        id: rule.id.clone(),
        class: rule.class.clone(),
        title: rule.title.to_string(),
        role: rule.role,
        priority: rule.priority,
        severity: rule.severity,
        confidence: rule.confidence,
        file: rule.file.clone(),
        stats,
    }
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
    /// Each must match the same line as an `any` pattern.
    #[serde(default)]
    pub same_line: Vec<String>,
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
            same_line: sources(&rule.same_line),
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
                text: f.code.as_deref().map(str::to_owned),
            })
            .collect(),
        next_artifact: rule.next_artifact.as_ref().map(|t| t.source().to_owned()),
        links: rule.links.iter().map(|l| l.to_string()).collect(),
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

/// Runs a candidate rule (the text of its file) over the latest `limit` stored incidents: one
/// backtest at a time per server (another is answered 429), stopped before the request's timeout.
pub async fn backtest_candidate(state: &AppState, text: &str, limit: i64) -> Result<BacktestReport> {
    let Ok(_running) = state.backtests.try_acquire() else {
        return Err(Error::RateLimited {
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
            BacktestError::InvalidRule(why) => Error::Unprocessable(why),
            BacktestError::Store(e) => e.into(),
            BacktestError::Task(why) => Error::Internal(format!("backtest failed: {why}")),
        })
}
