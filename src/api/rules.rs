//! Rules: listing with hit counts and feedback precision, one rule with its patterns, causes,
//! fixes, examples and hits over time, and the backtest of a candidate rule.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::Deserialize;

use super::extract::{PathParams, QueryParams, RawBody};
use super::{ApiError, ApiResult, AppState};
use crate::kb::rows::RuleStats;
pub use crate::service::backtest::{BacktestMatch, BacktestReport};
pub use crate::service::rules::{
    ExampleView, RuleDetail, RuleSummary, backtest_candidate, rule_detail, summary,
};

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

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct DaysQuery {
    days: Option<i64>,
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
