//! Reading the knowledge base: incidents with filters and search, groups with their history,
//! similar incidents, notes, feedback and per-rule statistics.

use std::collections::BTreeMap;

use serde::Deserialize;
use sqlx::{AssertSqlSafe, Row};

use super::bundles::decode_bundle;
use super::codec::decompress;
use super::redact::{redact, redacted};
use super::rows::{
    Coverage, DayCount, Feedback, GROUP_COLUMNS, GroupDetail, GroupSummary, INCIDENT_COLUMNS, IncidentDetail,
    IncidentSummary, NamedCount, Note, Page, RuleStats, Trend, Verdict,
};
use super::{Backend, Result, Store, StoreError, now_ms};
use crate::model::Diagnosis;

/// Largest page.
pub const MAX_LIMIT: i64 = 200;
const DAY_MS: i64 = 86_400_000;

/// Filters for incident and group listings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Filter {
    /// Class of the primary finding.
    pub class: Option<String>,
    /// Rule of the primary finding.
    pub rule: Option<String>,
    /// Project.
    pub project: Option<String>,
    /// Only since this time (Unix ms).
    pub since: Option<i64>,
    /// Words to search for.
    pub q: Option<String>,
    /// Incidents only: `false` keeps the ones no rule explained (no root cause or symptom found,
    /// at most context): the queue of failures the rule base does not know yet; `true` the others.
    pub diagnosed: Option<bool>,
    /// Page size (default 50, at most 200).
    pub limit: Option<i64>,
    /// Page offset.
    pub offset: Option<i64>,
}

impl Filter {
    fn limit(&self) -> i64 {
        self.limit.unwrap_or(50).clamp(1, MAX_LIMIT)
    }

    fn offset(&self) -> i64 {
        self.offset.unwrap_or(0).max(0)
    }
}

/// Words of a search as a safe query: FTS5 phrases (`"cuda" "oom"`) or PostgreSQL plain text.
fn search_terms(q: &str) -> Option<String> {
    let words: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .take(16)
        .map(|w| w.to_lowercase())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// A WHERE clause under construction with its bound values.
struct Where {
    clauses: Vec<String>,
    values: Vec<Value>,
}

enum Value {
    Text(String),
    Int(i64),
}

impl Where {
    fn new() -> Self {
        Self {
            clauses: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Adds a clause whose `?` stands for the next bound value.
    fn push(&mut self, clause: &str, value: Value) {
        self.values.push(value);
        self.clauses
            .push(clause.replace('?', &format!("${}", self.values.len())));
    }

    fn sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }

    fn next_param(&self) -> usize {
        self.values.len() + 1
    }

    fn bind<'q>(
        self,
        mut query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        for v in self.values {
            query = match v {
                Value::Text(t) => query.bind(t),
                Value::Int(i) => query.bind(i),
            };
        }
        query
    }
}

impl Store {
    fn text_search_clause(&self, column: &str) -> String {
        match self.backend {
            Backend::Sqlite => {
                format!("{column} IN (SELECT rowid FROM incidents_fts WHERE incidents_fts MATCH ?)")
            }
            Backend::Postgres => "i.search @@ plainto_tsquery('simple', ?)".to_owned(),
        }
    }

    fn search_value(&self, terms: &str) -> String {
        match self.backend {
            // Each word a quoted phrase: user input can never be FTS5 syntax.
            Backend::Sqlite => terms
                .split(' ')
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(" "),
            Backend::Postgres => terms.to_owned(),
        }
    }

    /// Incidents, newest first.
    pub async fn list_incidents(&self, filter: &Filter) -> Result<Page<IncidentSummary>> {
        let mut w = Where::new();
        if let Some(c) = &filter.class {
            w.push("i.class = ?", Value::Text(c.clone()));
        }
        if let Some(r) = &filter.rule {
            w.push("i.rule = ?", Value::Text(r.clone()));
        }
        if let Some(p) = &filter.project {
            w.push("i.project = ?", Value::Text(p.clone()));
        }
        if let Some(s) = filter.since {
            w.push("i.created_at >= ?", Value::Int(s));
        }
        if let Some(terms) = filter.q.as_deref().and_then(search_terms) {
            w.push(
                &self.text_search_clause("i.id"),
                Value::Text(self.search_value(&terms)),
            );
        }
        if let Some(diagnosed) = filter.diagnosed {
            w.push("i.diagnosed = ?", Value::Int(i64::from(diagnosed)));
        }
        self.incident_page(w, filter.limit(), filter.offset()).await
    }

    /// How many incidents since `since` (Unix ms) there are, and how many of them a rule
    /// explained (a root cause or a symptom found).
    pub async fn coverage(&self, since: i64) -> Result<Coverage> {
        let row =
            sqlx::query("SELECT COUNT(*), COALESCE(SUM(diagnosed), 0) FROM incidents WHERE created_at >= $1")
                .bind(since)
                .fetch_one(self.pool())
                .await?;
        Ok(Coverage {
            since,
            incidents: row.try_get(0)?,
            diagnosed: row.try_get(1)?,
        })
    }

    async fn incident_page(&self, w: Where, limit: i64, offset: i64) -> Result<Page<IncidentSummary>> {
        let n = w.next_param();
        let sql = format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents i{} ORDER BY i.id DESC LIMIT ${n} OFFSET ${}",
            w.sql(),
            n + 1
        );
        let rows = w
            .bind(sqlx::query(AssertSqlSafe(sql)))
            .bind(limit + 1)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        let mut items = rows
            .iter()
            .map(IncidentSummary::from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        Ok(Page {
            items,
            next_offset: more.then_some(offset + limit),
        })
    }

    /// One incident with its log, diagnosis, feedback and group.
    pub async fn incident(&self, id: i64) -> Result<IncidentDetail> {
        let sql = format!(
            "SELECT {INCIDENT_COLUMNS}, l.data, i.diagnosis, i.bundle FROM incidents i JOIN logs l ON l.hash = i.log_hash WHERE i.id = $1"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("incident {id}")))?;
        let incident = IncidentSummary::from_row(&row)?;
        let log: Vec<u8> = row.try_get(16)?;
        let diagnosis: Vec<u8> = row.try_get(17)?;
        let log = decompress(&log).map_err(|e| StoreError::Corrupt(format!("log of incident {id}: {e}")))?;
        let diagnosis = decompress(&diagnosis)
            .ok()
            .and_then(|d| serde_json::from_slice::<Diagnosis>(&d).ok())
            .ok_or_else(|| StoreError::Corrupt(format!("diagnosis of incident {id}")))?;
        let group = match incident.group_id {
            Some(g) => Some(self.group_summary(g).await?),
            None => None,
        };
        let bundle = decode_bundle(id, row.try_get(18)?)?;
        let files = match bundle {
            Some(_) => self.incident_files(id).await?,
            None => Vec::new(),
        };
        Ok(IncidentDetail {
            log: String::from_utf8_lossy(&log).into_owned(),
            diagnosis,
            feedback: self.feedback_of(id).await?,
            group,
            incident,
            bundle,
            files,
        })
    }

    /// Incidents like this one: its group first, then those whose text is closest.
    pub async fn similar(&self, id: i64, limit: i64) -> Result<Vec<IncidentSummary>> {
        let limit = limit.clamp(1, MAX_LIMIT);
        let me = self.incident_summary(id).await?;
        let mut found = Vec::new();
        if let Some(g) = me.group_id {
            let sql = format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents i WHERE i.group_id = $1 AND i.id <> $2 ORDER BY i.id DESC LIMIT $3"
            );
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(g)
                .bind(id)
                .bind(limit)
                .fetch_all(self.pool())
                .await?;
            found = rows
                .iter()
                .map(IncidentSummary::from_row)
                .collect::<Result<Vec<_>, _>>()?;
        }
        let text = [me.title.as_deref(), me.summary.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        let remaining = limit - found.len() as i64;
        if let (Some(terms), true) = (search_terms(&text), remaining > 0) {
            // Any of the words, best ranked first.
            let (sql, value) = match self.backend {
                Backend::Sqlite => (
                    format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents_fts f JOIN incidents i ON i.id = f.rowid
                         WHERE incidents_fts MATCH $1 AND i.id <> $2 AND (i.group_id IS NULL OR i.group_id <> $3)
                         ORDER BY f.rank LIMIT $4"
                    ),
                    terms.split(' ').map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" OR "),
                ),
                Backend::Postgres => (
                    format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents i, to_tsquery('simple', $1) query
                         WHERE i.search @@ query AND i.id <> $2 AND (i.group_id IS NULL OR i.group_id <> $3)
                         ORDER BY ts_rank(i.search, query) DESC, i.id DESC LIMIT $4"
                    ),
                    terms.split(' ').collect::<Vec<_>>().join(" | "),
                ),
            };
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(value)
                .bind(id)
                .bind(me.group_id.unwrap_or(-1))
                .bind(remaining)
                .fetch_all(self.pool())
                .await?;
            for row in &rows {
                found.push(IncidentSummary::from_row(row)?);
            }
        }
        Ok(found)
    }

    async fn incident_summary(&self, id: i64) -> Result<IncidentSummary> {
        let sql = format!("SELECT {INCIDENT_COLUMNS} FROM incidents i WHERE i.id = $1");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("incident {id}")))?;
        Ok(IncidentSummary::from_row(&row)?)
    }

    /// Groups, most recently seen first.
    pub async fn list_groups(&self, filter: &Filter) -> Result<Page<GroupSummary>> {
        if filter.diagnosed.is_some() {
            return Err(StoreError::Invalid(
                "`diagnosed` filters incidents, not groups".into(),
            ));
        }
        let mut w = Where::new();
        if let Some(c) = &filter.class {
            w.push("g.class = ?", Value::Text(c.clone()));
        }
        if let Some(r) = &filter.rule {
            w.push("g.rule = ?", Value::Text(r.clone()));
        }
        if let Some(s) = filter.since {
            w.push("g.last_seen >= ?", Value::Int(s));
        }
        if let Some(p) = &filter.project {
            w.push(
                "g.id IN (SELECT group_id FROM incidents WHERE project = ?)",
                Value::Text(p.clone()),
            );
        }
        if let Some(terms) = filter.q.as_deref().and_then(search_terms) {
            let clause = format!(
                "g.id IN (SELECT i.group_id FROM incidents i WHERE {})",
                self.text_search_clause("i.id")
            );
            w.push(&clause, Value::Text(self.search_value(&terms)));
        }
        let (limit, offset) = (filter.limit(), filter.offset());
        let n = w.next_param();
        let sql = format!(
            "SELECT {GROUP_COLUMNS} FROM groups g{} ORDER BY g.last_seen DESC, g.id DESC LIMIT ${n} OFFSET ${}",
            w.sql(),
            n + 1
        );
        let rows = w
            .bind(sqlx::query(AssertSqlSafe(sql)))
            .bind(limit + 1)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        let mut items = rows
            .iter()
            .map(GroupSummary::from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        Ok(Page {
            items,
            next_offset: more.then_some(offset + limit),
        })
    }

    async fn group_summary(&self, id: i64) -> Result<GroupSummary> {
        let sql = format!("SELECT {GROUP_COLUMNS} FROM groups g WHERE g.id = $1");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("group {id}")))?;
        Ok(GroupSummary::from_row(&row)?)
    }

    /// A group with its projects, daily counts over `days` days, trend, notes and latest incidents.
    pub async fn group(&self, id: i64, days: i64) -> Result<GroupDetail> {
        let group = self.group_summary(id).await?;
        let projects = sqlx::query(
            "SELECT COALESCE(project, '(none)'), COUNT(*) FROM incidents WHERE group_id = $1 GROUP BY project ORDER BY COUNT(*) DESC LIMIT 20",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| Ok(NamedCount { name: r.try_get(0)?, count: r.try_get(1)? }))
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let since = now_ms() - days.clamp(1, 366) * DAY_MS;
        let daily = self
            .daily("SELECT created_at / 86400000, COUNT(*) FROM incidents WHERE group_id = $1 AND created_at >= $2 GROUP BY created_at / 86400000 ORDER BY 1", Value::Int(id), since)
            .await?;
        let today = now_ms() / DAY_MS;
        let week = |from: i64, to: i64| {
            daily
                .iter()
                .filter(|d| d.day > today - from && d.day <= today - to)
                .map(|d| d.count)
                .sum::<i64>()
        };
        let trend = Trend::from_counts(week(7, 0), week(14, 7));
        let notes = sqlx::query(
            "SELECT id, group_id, body, author, created_at FROM notes WHERE group_id = $1 ORDER BY id",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| {
            Ok(Note {
                id: r.try_get(0)?,
                group_id: r.try_get(1)?,
                body: r.try_get(2)?,
                author: r.try_get(3)?,
                created_at: r.try_get(4)?,
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let mut w = Where::new();
        w.push("i.group_id = ?", Value::Int(id));
        let recent = self.incident_page(w, 20, 0).await?.items;
        Ok(GroupDetail {
            group,
            trend,
            projects,
            daily,
            notes,
            recent,
        })
    }

    async fn daily(&self, sql: &'static str, key: Value, since: i64) -> Result<Vec<DayCount>> {
        let query = match key {
            Value::Text(t) => sqlx::query(sql).bind(t),
            Value::Int(i) => sqlx::query(sql).bind(i),
        };
        let rows = query.bind(since).fetch_all(self.pool()).await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(DayCount {
                    day: r.try_get(0)?,
                    count: r.try_get(1)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?)
    }

    /// Adds a note to a group, its secrets redacted.
    pub async fn add_note(&self, group_id: i64, body: &str, author: Option<&str>) -> Result<Note> {
        let body = body.trim();
        if body.is_empty() || body.len() > 10_000 {
            return Err(StoreError::Invalid("a note is 1 to 10000 bytes".into()));
        }
        let body = &*redact(body);
        self.group_summary(group_id).await?;
        let created_at = now_ms();
        let row = sqlx::query(
            "INSERT INTO notes (group_id, body, author, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(group_id)
        .bind(body)
        .bind(author)
        .bind(created_at)
        .fetch_one(self.pool())
        .await?;
        Ok(Note {
            id: row.try_get(0)?,
            group_id,
            body: body.to_owned(),
            author: author.map(str::to_owned),
            created_at,
        })
    }

    /// Records feedback on an incident, its comment's secrets redacted; the rule defaults to its
    /// primary finding's.
    pub async fn add_feedback(
        &self,
        incident_id: i64,
        input: &FeedbackInput,
        author: Option<&str>,
    ) -> Result<Feedback> {
        if input.verdict.is_none()
            && input.fix_worked.is_none()
            && input.comment.as_deref().is_none_or(str::is_empty)
        {
            return Err(StoreError::Invalid(
                "feedback needs a verdict, fix_worked or a comment".into(),
            ));
        }
        if input.comment.as_deref().is_some_and(|c| c.len() > 10_000) {
            return Err(StoreError::Invalid("comment is longer than 10000 bytes".into()));
        }
        let comment = input.comment.clone().map(redacted);
        let incident = self.incident_summary(incident_id).await?;
        let rule = input.rule.clone().or(incident.rule);
        let verdict = input.verdict.map(|v| match v {
            Verdict::Right => "right",
            Verdict::Wrong => "wrong",
        });
        let created_at = now_ms();
        let row = sqlx::query(
            "INSERT INTO feedback (incident_id, rule, verdict, fix_worked, comment, author, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(incident_id)
        .bind(&rule)
        .bind(verdict)
        .bind(input.fix_worked.map(i64::from))
        .bind(&comment)
        .bind(author)
        .bind(created_at)
        .fetch_one(self.pool())
        .await?;
        Ok(Feedback {
            id: row.try_get(0)?,
            incident_id,
            rule,
            verdict: input.verdict,
            fix_worked: input.fix_worked,
            comment,
            author: author.map(str::to_owned),
            created_at,
        })
    }

    async fn feedback_of(&self, incident_id: i64) -> Result<Vec<Feedback>> {
        let rows = sqlx::query(
            "SELECT id, incident_id, rule, verdict, fix_worked, comment, author, created_at FROM feedback WHERE incident_id = $1 ORDER BY id",
        )
        .bind(incident_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let verdict: Option<String> = r.try_get(3)?;
                let fix: Option<i64> = r.try_get(4)?;
                Ok(Feedback {
                    id: r.try_get(0)?,
                    incident_id: r.try_get(1)?,
                    rule: r.try_get(2)?,
                    verdict: verdict.as_deref().and_then(|v| match v {
                        "right" => Some(Verdict::Right),
                        "wrong" => Some(Verdict::Wrong),
                        _ => None,
                    }),
                    fix_worked: fix.map(|f| f != 0),
                    comment: r.try_get(5)?,
                    author: r.try_get(6)?,
                    created_at: r.try_get(7)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Hits over `days` days and feedback of one rule.
    pub async fn rule_stats(&self, rule: &str, days: i64) -> Result<RuleStats> {
        let mut stats = self
            .all_rule_stats()
            .await?
            .remove(rule)
            .unwrap_or_else(|| RuleStats::empty(rule));
        let since = now_ms() - days.clamp(1, 366) * DAY_MS;
        stats.daily = self
            .daily("SELECT created_at / 86400000, COUNT(*) FROM incident_rules WHERE rule = $1 AND created_at >= $2 GROUP BY created_at / 86400000 ORDER BY 1", Value::Text(rule.to_owned()), since)
            .await?;
        Ok(stats)
    }

    /// Hits and feedback of every rule that has any.
    pub async fn all_rule_stats(&self) -> Result<BTreeMap<String, RuleStats>> {
        let mut all: BTreeMap<String, RuleStats> = BTreeMap::new();
        let hits = sqlx::query(
            "SELECT rule, COUNT(*), SUM(CASE WHEN role = 'root' THEN 1 ELSE 0 END) FROM incident_rules GROUP BY rule",
        )
        .fetch_all(self.pool())
        .await?;
        for r in &hits {
            let rule: String = r.try_get(0)?;
            let s = all.entry(rule.clone()).or_insert_with(|| RuleStats::empty(&rule));
            s.hits = r.try_get(1)?;
            s.primary_hits = r.try_get::<Option<i64>, _>(2)?.unwrap_or(0);
        }
        let feedback = sqlx::query(
            "SELECT rule,
                    SUM(CASE WHEN verdict = 'right' THEN 1 ELSE 0 END),
                    SUM(CASE WHEN verdict = 'wrong' THEN 1 ELSE 0 END),
                    SUM(CASE WHEN fix_worked = 1 THEN 1 ELSE 0 END),
                    SUM(CASE WHEN fix_worked = 0 THEN 1 ELSE 0 END)
             FROM feedback WHERE rule IS NOT NULL GROUP BY rule",
        )
        .fetch_all(self.pool())
        .await?;
        for r in &feedback {
            let rule: String = r.try_get(0)?;
            let s = all.entry(rule.clone()).or_insert_with(|| RuleStats::empty(&rule));
            let get = |i: usize| r.try_get::<Option<i64>, _>(i).map(|v| v.unwrap_or(0));
            s.right = get(1)?;
            s.wrong = get(2)?;
            s.fix_worked = get(3)?;
            s.fix_failed = get(4)?;
            s.precision = (s.right + s.wrong > 0).then(|| s.right as f64 / (s.right + s.wrong) as f64);
        }
        Ok(all)
    }

    /// The latest `limit` incidents: each one's primary rule and log hash (for backtests, which
    /// then read each distinct log once with [`Self::compressed_log`]).
    pub async fn recent_incident_logs(&self, limit: i64) -> Result<Vec<IncidentLog>> {
        let rows = sqlx::query("SELECT id, rule, log_hash FROM incidents ORDER BY id DESC LIMIT $1")
            .bind(limit.max(1))
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| {
                Ok(IncidentLog {
                    incident_id: r.try_get(0)?,
                    primary_rule: r.try_get(1)?,
                    log_hash: r.try_get(2)?,
                })
            })
            .collect()
    }

    /// A stored log as it is kept (compressed): [`decompress`] it off the async threads.
    pub async fn compressed_log(&self, hash: &str) -> Result<Vec<u8>> {
        sqlx::query("SELECT data FROM logs WHERE hash = $1")
            .bind(hash)
            .fetch_optional(self.pool())
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("log {hash}")))?
            .try_get(0)
            .map_err(Into::into)
    }
}

/// An incident's primary rule and the hash of its (possibly shared) log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentLog {
    /// The incident.
    pub incident_id: i64,
    /// Its primary rule when it was stored.
    pub primary_rule: Option<String>,
    /// The SHA-256 of its log: incidents with the same log share one row of `logs`.
    pub log_hash: String,
}

/// Feedback as submitted.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FeedbackInput {
    /// Rule judged (default: the primary finding's).
    pub rule: Option<String>,
    /// Right or wrong.
    pub verdict: Option<Verdict>,
    /// Whether the fix worked.
    pub fix_worked: Option<bool>,
    /// Comment.
    pub comment: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_terms_keep_words_only() {
        assert_eq!(
            search_terms("CUDA \"out\" of memory; DROP TABLE").as_deref(),
            Some("cuda out of memory drop table")
        );
        assert_eq!(search_terms("*** ::"), None);
    }
}
