//! The pages that show things: the start page, incidents, groups, rules.

use std::collections::BTreeSet;

use axum::extract::{Extension, Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::bundles::bundle_view;
use super::pages::{
    CheckView, CoverageView, GroupPage, GroupRow, GroupsPage, Home, IncidentPage, IncidentRow, IncidentsPage,
    NoteView, OffenderRow, OffendersPage, ProjectView, ReplayJobView, RuleHead, RulePage, RuleRow, RulesPage,
    VERSION,
};
use super::views::{FindingView, chart, fold_log, safe_url, verdict_word, when};
use super::{Allowed, Csrf, WebError, human_bytes};
use crate::kb::bundles::{Offender, OffenderKind};
use crate::kb::now_ms;
use crate::kb::queries::Filter;
use crate::kb::rows::{GroupSummary, IncidentSummary, Trend};
use crate::model::{Confidence, Role};
use crate::service::AppState;
use crate::service::Error as ApiError;
use crate::service::rules::rule_detail;

const DAY_MS: i64 = 86_400_000;
/// Days of history in charts.
const CHART_DAYS: i64 = 30;
/// Days over which the start page counts the diagnosed share.
const COVERAGE_DAYS: i64 = 30;

fn id(raw: &str, what: &str) -> Result<i64, WebError> {
    raw.parse()
        .map_err(|_| WebError(ApiError::NotFound(format!("There is no {what} {raw}."))))
}

fn group_row(g: GroupSummary) -> GroupRow {
    GroupRow {
        id: g.id,
        title: g.title,
        class: g.class,
        count: g.count,
        first_seen: when(g.first_seen),
        last_seen: when(g.last_seen),
    }
}

fn incident_row(i: IncidentSummary) -> IncidentRow {
    IncidentRow {
        id: i.id,
        title: match (i.diagnosed, i.unexplained_error, i.title) {
            (false, Some(error), _) => format!("no diagnosis: {error}"),
            (_, _, Some(title)) => title,
            _ => "no diagnosis".to_owned(),
        },
        class: i.class.unwrap_or_default(),
        project: i.project.unwrap_or_default(),
        when: when(i.created_at),
    }
}

fn classes(state: &AppState) -> Vec<String> {
    state.rules.classes().iter().map(|c| c.id.clone()).collect()
}

pub(super) async fn home(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(allowed): Extension<Allowed>,
) -> Result<Home, WebError> {
    let groups = state
        .store
        .list_groups(&Filter {
            limit: Some(10),
            ..Filter::default()
        })
        .await?;
    let coverage = state.store.coverage(now_ms() - COVERAGE_DAYS * DAY_MS).await?;
    Ok(Home {
        version: VERSION,
        csrf: csrf.0,
        allowed,
        max_upload: human_bytes(state.config.max_body_bytes),
        groups: groups.items.into_iter().map(group_row).collect(),
        coverage: coverage.percent().map(|percent| CoverageView {
            days: COVERAGE_DAYS,
            incidents: coverage.incidents,
            diagnosed: coverage.diagnosed,
            undiagnosed: coverage.undiagnosed(),
            percent: format!("{percent:.1}"),
        }),
    })
}

/// Filters of the list pages, as the forms send them (empty fields are no filter).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ListQuery {
    q: String,
    class: String,
    project: String,
    since: String,
    /// `yes`, `no` or empty (incidents only).
    diagnosed: String,
    offset: Option<i64>,
}

impl ListQuery {
    /// The incidents filter: the list filter plus whether a rule explained the incident.
    fn incident_filter(&self) -> Filter {
        Filter {
            diagnosed: match self.diagnosed.as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            },
            ..self.filter()
        }
    }

    fn filter(&self) -> Filter {
        let text = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        Filter {
            class: text(&self.class),
            rule: None,
            project: text(&self.project),
            since: self
                .since
                .parse::<i64>()
                .ok()
                .map(|days| now_ms() - days * DAY_MS),
            q: text(&self.q),
            diagnosed: None,
            limit: Some(50),
            offset: self.offset,
        }
    }

    fn next_page(&self, path: &str, next: Option<i64>) -> Option<String> {
        let enc = |s: &str| -> String {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect()
        };
        next.map(|o| {
            format!(
                "{path}?q={}&class={}&project={}&since={}&diagnosed={}&offset={o}",
                enc(&self.q),
                enc(&self.class),
                enc(&self.project),
                enc(&self.since),
                enc(&self.diagnosed)
            )
        })
    }
}

pub(super) async fn incidents(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<IncidentsPage, WebError> {
    let page = state.store.list_incidents(&query.incident_filter()).await?;
    Ok(IncidentsPage {
        version: VERSION,
        next_page: query.next_page("/incidents", page.next_offset),
        rows: page.items.into_iter().map(incident_row).collect(),
        classes: classes(&state),
        since_options: [
            ("", "any time"),
            ("1", "last day"),
            ("7", "last 7 days"),
            ("30", "last 30 days"),
        ]
        .iter()
        .map(|(v, l)| ((*v).to_owned(), (*l).to_owned()))
        .collect(),
        q: query.q,
        class: query.class,
        project: query.project,
        since: query.since,
        diagnosed: query.diagnosed,
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct IncidentQuery {
    feedback: String,
    snapshot: String,
}

pub(super) async fn incident(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(allowed): Extension<Allowed>,
    Path(raw): Path<String>,
    Query(query): Query<IncidentQuery>,
) -> Result<IncidentPage, WebError> {
    let detail = state.store.incident(id(&raw, "incident")?).await?;
    let d = &detail.diagnosis;
    let evidence: BTreeSet<u64> = d
        .findings
        .iter()
        .flat_map(|f| &f.evidence)
        .chain(&d.unexplained_error)
        .map(|e| e.line)
        .collect();
    let primary = d
        .findings
        .first()
        .filter(|f| f.role != Role::Context || f.confidence != Confidence::Low);
    let others = d
        .findings
        .iter()
        .skip(usize::from(primary.is_some()))
        .map(FindingView::from)
        .collect();
    let similar = state.store.similar(detail.incident.id, 5).await?;
    let replay = replay_views(&state, detail.incident.id).await?;
    let feedback = detail
        .feedback
        .iter()
        .map(|f| {
            let verdict = f.verdict.map(|v| format!("{v:?}").to_lowercase());
            let fix = f
                .fix_worked
                .map(|w| if w { "fix worked" } else { "fix did not work" }.to_owned());
            let parts: Vec<String> = [verdict, fix, f.comment.clone()].into_iter().flatten().collect();
            format!(
                "{} — {} ({})",
                f.author.as_deref().unwrap_or("someone"),
                parts.join(", "),
                when(f.created_at)
            )
        })
        .collect();
    let i = &detail.incident;
    Ok(IncidentPage {
        version: VERSION,
        csrf: csrf.0,
        allowed,
        id: i.id,
        group_id: i.group_id,
        group_count: detail.group.as_ref().map_or(0, |g| g.count),
        primary: primary.map(FindingView::from),
        others,
        values: primary
            .map(|f| f.captures.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        unexplained_error: d.unexplained_error.as_ref().map(|e| (e.line, e.text.clone())),
        lines: d.lines,
        segments: fold_log(&detail.log, &evidence),
        feedback_saved: query.feedback == "saved",
        feedback,
        created: when(i.created_at),
        project: i.project.clone(),
        source: i.source.clone(),
        commit: i.commit.clone(),
        job_url: safe_url(i.job_url.as_deref()),
        environment: d
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.join(" / ")))
            .collect(),
        fingerprint: d.fingerprint.clone(),
        similar: similar.into_iter().map(incident_row).collect(),
        replay,
        replay_summary: d.replay.as_ref().map(|r| {
            (
                crate::replay::summary::word(r.verdict),
                crate::replay::summary::lines(r),
            )
        }),
        snapshot_queued: query.snapshot == "queued",
        replayable: d
            .findings
            .iter()
            .flat_map(|f| &f.causes)
            .any(|c| c.replay.is_some()),
        max_snapshot: human_bytes(state.config.snapshot_max_bytes),
        bundle: detail.bundle.as_ref().map(|b| bundle_view(b, &detail.files)),
    })
}

/// The replay jobs of an incident with their snapshots, for its page.
async fn replay_views(state: &AppState, incident_id: i64) -> Result<Vec<ReplayJobView>, WebError> {
    let snapshots = state.store.snapshots_of_incident(incident_id).await?;
    let jobs = state.store.jobs_of_incident(incident_id).await?;
    Ok(jobs
        .into_iter()
        .map(|job| {
            let snapshot = snapshots.iter().find(|s| s.id == job.snapshot_id);
            let describe = snapshot.map_or_else(String::new, |s| {
                let tensors: Vec<String> = s
                    .summary
                    .tensors
                    .iter()
                    .take(8)
                    .map(|t| format!("{} {} {:?}", t.name, t.dtype.torch_name(), t.shape))
                    .collect();
                let more = s.summary.tensors.len().saturating_sub(8);
                format!(
                    "{}, {}: {}{}",
                    serde_json::to_value(s.format)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    human_bytes(usize::try_from(s.bytes).unwrap_or(0)),
                    tensors.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            });
            ReplayJobView {
                id: job.id,
                state: job.state.as_str(),
                attempts: job.attempts,
                error: job.error,
                snapshot: describe,
                params: snapshot
                    .map(|s| {
                        s.summary
                            .params
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default(),
                stored: snapshot.is_some_and(|s| s.stored),
                when: when(job.created_at),
                results: job
                    .results
                    .into_iter()
                    .map(|r| CheckView {
                        check: r.check,
                        verdict: verdict_word(r.verdict),
                        summary: r.summary,
                        backend: r.backend,
                    })
                    .collect(),
            }
        })
        .collect())
}

pub(super) async fn raw_log(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Response, WebError> {
    let detail = state.store.incident(id(&raw, "incident")?).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], detail.log).into_response())
}

/// One file of a bundle incident, as it was kept (a flight-recorder pickle's content as JSON).
pub(super) async fn incident_file(
    State(state): State<AppState>,
    Path((raw, ordinal)): Path<(String, String)>,
) -> Result<Response, WebError> {
    let id = id(&raw, "incident")?;
    let ordinal: i64 = ordinal.parse().map_err(|_| {
        WebError(ApiError::NotFound(format!(
            "Incident {id} has no file {ordinal}."
        )))
    })?;
    let (file, text) = state.store.incident_file(id, ordinal).await?;
    Ok(([(header::CONTENT_TYPE, file.media_type())], text).into_response())
}

/// GPUs and hosts that failed first in several jobs.
pub(super) async fn offenders(State(state): State<AppState>) -> Result<OffendersPage, WebError> {
    let list = state
        .store
        .offenders(i64::from(state.config.offender_threshold))
        .await?;
    let row = |o: Offender| OffenderRow {
        name: match (&o.gpu, o.kind) {
            (Some(gpu), OffenderKind::Gpu) => gpu.to_string(),
            _ => o.key.clone(),
        },
        host: o.host.unwrap_or_default(),
        jobs: o.jobs,
        flagged: o.flagged,
        incidents: o.incidents,
        projects: o.projects.join(", "),
        last_seen: when(o.last_seen),
    };
    Ok(OffendersPage {
        version: VERSION,
        threshold: list.threshold,
        gpus: list.gpus.into_iter().map(row).collect(),
        hosts: list.hosts.into_iter().map(row).collect(),
    })
}

pub(super) async fn groups(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<GroupsPage, WebError> {
    let page = state.store.list_groups(&query.filter()).await?;
    Ok(GroupsPage {
        version: VERSION,
        next_page: query.next_page("/groups", page.next_offset),
        groups: page.items.into_iter().map(group_row).collect(),
        classes: classes(&state),
        q: query.q,
        class: query.class,
        project: query.project,
    })
}

pub(super) async fn group(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(allowed): Extension<Allowed>,
    Path(raw): Path<String>,
) -> Result<GroupPage, WebError> {
    let detail = state.store.group(id(&raw, "group")?, CHART_DAYS).await?;
    let similar = match detail.recent.first() {
        Some(latest) => state
            .store
            .similar(latest.id, 10)
            .await?
            .into_iter()
            .filter(|s| s.group_id != Some(detail.group.id))
            .take(5)
            .map(incident_row)
            .collect(),
        None => Vec::new(),
    };
    Ok(GroupPage {
        version: VERSION,
        csrf: csrf.0,
        allowed,
        trend: match detail.trend {
            Trend::Rising => "rising",
            Trend::Falling => "falling",
            Trend::Steady => "steady",
        },
        first_seen: when(detail.group.first_seen),
        last_seen: when(detail.group.last_seen),
        days: CHART_DAYS,
        chart: chart("incidents", &detail.daily, CHART_DAYS, now_ms() / DAY_MS),
        notes: detail
            .notes
            .into_iter()
            .map(|n| NoteView {
                body: n.body,
                who: n.author.unwrap_or_else(|| "anonymous".to_owned()),
                when: when(n.created_at),
            })
            .collect(),
        projects: detail
            .projects
            .into_iter()
            .map(|p| ProjectView {
                name: p.name,
                count: p.count,
            })
            .collect(),
        recent: detail.recent.into_iter().map(incident_row).collect(),
        similar,
        group: detail.group,
    })
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Root => "root",
        Role::Symptom => "symptom",
        Role::Context => "context",
    }
}

fn precision(p: Option<f64>) -> String {
    p.map_or_else(|| "–".to_owned(), |p| format!("{:.0} %", p * 100.0))
}

pub(super) async fn rules(State(state): State<AppState>) -> Result<RulesPage, WebError> {
    let mut stats = state.store.all_rule_stats().await?;
    Ok(RulesPage {
        version: VERSION,
        origin: state.rules.origin().to_owned(),
        rules: state
            .rules
            .rules()
            .iter()
            .map(|r| {
                let s = stats.remove(&r.id);
                RuleRow {
                    id: r.id.clone(),
                    title: r.title.to_string(),
                    class: r.class.clone(),
                    role: role_name(r.role),
                    priority: r.priority,
                    hits: s.as_ref().map_or(0, |s| s.hits),
                    precision: precision(s.and_then(|s| s.precision)),
                }
            })
            .collect(),
    })
}

pub(super) async fn rule(
    State(state): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Extension(allowed): Extension<Allowed>,
    Path(rule_id): Path<String>,
) -> Result<RulePage, WebError> {
    let rule = state
        .rules
        .rule(&rule_id)
        .ok_or_else(|| WebError(ApiError::NotFound(format!("There is no rule {rule_id}."))))?;
    let stats = state.store.rule_stats(&rule_id, CHART_DAYS).await?;
    let detail = rule_detail(&state.rules, rule, stats.clone());
    let patterns = [
        ("any", &detail.patterns.any),
        ("all", &detail.patterns.all),
        ("same_line", &detail.patterns.same_line),
        ("not", &detail.patterns.not),
    ]
    .into_iter()
    .flat_map(|(kind, list)| list.iter().map(move |p| (kind, p.clone())))
    .collect();
    Ok(RulePage {
        version: VERSION,
        csrf: csrf.0,
        allowed,
        rule: RuleHead {
            id: rule.id.clone(),
            class: rule.class.clone(),
            title: rule.title.to_string(),
            role: role_name(rule.role),
            priority: rule.priority,
            confidence: match rule.confidence {
                Confidence::High => "high",
                Confidence::Medium => "medium",
                Confidence::Low => "low",
            },
            file: rule.file.clone(),
        },
        summary: detail.summary,
        hits: stats.hits,
        precision: precision(stats.precision),
        right: stats.right,
        wrong: stats.wrong,
        days: CHART_DAYS,
        chart: chart("hits", &stats.daily, CHART_DAYS, now_ms() / DAY_MS),
        patterns,
        yields_to: detail.yields_to,
        causes: detail
            .causes
            .into_iter()
            .map(|c| (c.title, c.text.unwrap_or_default()))
            .collect(),
        fixes: detail
            .fixes
            .into_iter()
            .map(|f| {
                (
                    f.title,
                    f.text
                        .map(|t| t.trim_matches('\n').to_owned())
                        .unwrap_or_default(),
                )
            })
            .collect(),
        next_artifact: detail.next_artifact,
        examples: detail.examples,
        source: state.rules.file_text(&rule_id).unwrap_or_default().to_owned(),
    })
}
