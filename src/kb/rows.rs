//! What the knowledge base returns: plain serializable records, read from rows by hand (the same
//! code for SQLite and PostgreSQL).

use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::bundles::StoredFile;
use crate::model::{BundleDiagnosis, Diagnosis};

/// An incident as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentSummary {
    /// Id.
    pub id: i64,
    /// When it was submitted (Unix ms).
    pub created_at: i64,
    /// Its group, when something was diagnosed.
    pub group_id: Option<i64>,
    /// Project.
    pub project: Option<String>,
    /// Where the log came from (CI system, job name).
    pub source: Option<String>,
    /// Commit.
    pub commit: Option<String>,
    /// CI job URL.
    pub job_url: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Class of the primary finding.
    pub class: Option<String>,
    /// Rule of the primary finding.
    pub rule: Option<String>,
    /// Confidence of the primary finding.
    pub confidence: Option<String>,
    /// Title of the primary finding.
    pub title: Option<String>,
    /// Summary of the primary finding.
    pub summary: Option<String>,
    /// Lines in the log.
    pub lines: i64,
    /// A rule found a root cause or a symptom (context alone is no diagnosis).
    #[serde(default)]
    pub diagnosed: bool,
    /// When undiagnosed, the exception the log ends with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained_error: Option<String>,
}

/// Columns selected for an [`IncidentSummary`], in order.
pub const INCIDENT_COLUMNS: &str = "i.id, i.created_at, i.group_id, i.project, i.source, i.commit_sha, i.job_url, i.tags, i.class, i.rule, i.confidence, i.title, i.summary, i.lines, i.diagnosed, i.unexplained_error";

impl IncidentSummary {
    pub(crate) fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        let tags: String = row.try_get(7)?;
        Ok(Self {
            id: row.try_get(0)?,
            created_at: row.try_get(1)?,
            group_id: row.try_get(2)?,
            project: row.try_get(3)?,
            source: row.try_get(4)?,
            commit: row.try_get(5)?,
            job_url: row.try_get(6)?,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            class: row.try_get(8)?,
            rule: row.try_get(9)?,
            confidence: row.try_get(10)?,
            title: row.try_get(11)?,
            summary: row.try_get(12)?,
            lines: row.try_get(13)?,
            diagnosed: row.try_get::<i64, _>(14)? != 0,
            unexplained_error: row.try_get(15)?,
        })
    }
}

/// An incident with everything known about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentDetail {
    /// The summary fields.
    #[serde(flatten)]
    pub incident: IncidentSummary,
    /// The stored (redacted) log.
    pub log: String,
    /// The diagnosis made when it was submitted.
    pub diagnosis: Diagnosis,
    /// Feedback given on it.
    pub feedback: Vec<Feedback>,
    /// Its group.
    pub group: Option<GroupSummary>,
    /// A distributed job's incident: the diagnosis of its whole bundle (`log` and `diagnosis` are
    /// then those of the file that shows the first fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<BundleDiagnosis>,
    /// The files of its bundle, in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<StoredFile>,
}

/// A group of incidents sharing a fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    /// Id.
    pub id: i64,
    /// Fingerprint.
    pub fingerprint: String,
    /// Class.
    pub class: String,
    /// Rule of the primary finding.
    pub rule: String,
    /// Title.
    pub title: String,
    /// The masked message the fingerprint was made from.
    pub message: String,
    /// Incidents in the group.
    pub count: i64,
    /// First incident (Unix ms).
    pub first_seen: i64,
    /// Last incident (Unix ms).
    pub last_seen: i64,
}

/// Columns selected for a [`GroupSummary`], in order.
pub const GROUP_COLUMNS: &str =
    "g.id, g.fingerprint, g.class, g.rule, g.title, g.message, g.count, g.first_seen, g.last_seen";

impl GroupSummary {
    pub(crate) fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: row.try_get(0)?,
            fingerprint: row.try_get(1)?,
            class: row.try_get(2)?,
            rule: row.try_get(3)?,
            title: row.try_get(4)?,
            message: row.try_get(5)?,
            count: row.try_get(6)?,
            first_seen: row.try_get(7)?,
            last_seen: row.try_get(8)?,
        })
    }
}

/// Whether a group is seen more or less often lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    /// More incidents in the last 7 days than in the 7 before.
    Rising,
    /// Fewer.
    Falling,
    /// About the same.
    Steady,
}

impl Trend {
    /// Compares the last 7 days with the 7 before.
    pub fn from_counts(last_week: i64, week_before: i64) -> Self {
        if last_week > week_before + week_before / 4 {
            Self::Rising
        } else if last_week + last_week / 4 < week_before {
            Self::Falling
        } else {
            Self::Steady
        }
    }
}

/// A group with its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDetail {
    /// The group.
    #[serde(flatten)]
    pub group: GroupSummary,
    /// Trend over the last two weeks.
    pub trend: Trend,
    /// Projects the incidents came from, most frequent first.
    pub projects: Vec<NamedCount>,
    /// Incidents per day (Unix day number), oldest first.
    pub daily: Vec<DayCount>,
    /// The team's notes, oldest first.
    pub notes: Vec<Note>,
    /// The latest incidents.
    pub recent: Vec<IncidentSummary>,
}

/// A name and a count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedCount {
    /// Name (`(none)` for a missing project).
    pub name: String,
    /// Count.
    pub count: i64,
}

/// A count on a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    /// Days since the Unix epoch.
    pub day: i64,
    /// Count.
    pub count: i64,
}

/// A note on a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// Id.
    pub id: i64,
    /// Group.
    pub group_id: i64,
    /// Text.
    pub body: String,
    /// Who wrote it (token name), when known.
    pub author: Option<String>,
    /// When (Unix ms).
    pub created_at: i64,
}

/// Whether a finding was right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The diagnosis was right.
    Right,
    /// The diagnosis was wrong.
    Wrong,
}

/// Feedback on an incident's diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// Id.
    pub id: i64,
    /// Incident.
    pub incident_id: i64,
    /// The rule judged (the primary finding's when not given).
    pub rule: Option<String>,
    /// Right or wrong.
    pub verdict: Option<Verdict>,
    /// Whether the fix worked.
    pub fix_worked: Option<bool>,
    /// Comment.
    pub comment: Option<String>,
    /// Who (token name), when known.
    pub author: Option<String>,
    /// When (Unix ms).
    pub created_at: i64,
}

/// Hits and feedback of one rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleStats {
    /// Rule id.
    pub rule: String,
    /// Incidents the rule matched.
    pub hits: i64,
    /// Incidents where it was the primary finding.
    pub primary_hits: i64,
    /// Hits per day, oldest first.
    pub daily: Vec<DayCount>,
    /// Feedback saying it was right.
    pub right: i64,
    /// Feedback saying it was wrong.
    pub wrong: i64,
    /// right / (right + wrong), when there is feedback.
    pub precision: Option<f64>,
    /// Feedback saying its fix worked.
    pub fix_worked: i64,
    /// Feedback saying its fix did not work.
    pub fix_failed: i64,
}

impl RuleStats {
    /// Stats of a rule nobody has seen yet.
    pub fn empty(rule: &str) -> Self {
        Self {
            rule: rule.to_owned(),
            hits: 0,
            primary_hits: 0,
            daily: Vec::new(),
            right: 0,
            wrong: 0,
            precision: None,
            fix_worked: 0,
            fix_failed: 0,
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// Items.
    pub items: Vec<T>,
    /// Offset of the next page, when there is one.
    pub next_offset: Option<i64>,
}

/// How much of what was submitted the rule base explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Counted from this time (Unix ms).
    pub since: i64,
    /// Incidents stored since then.
    pub incidents: i64,
    /// Those of them in which a rule found a root cause or a symptom.
    pub diagnosed: i64,
}

impl Coverage {
    /// Incidents no rule explained.
    pub fn undiagnosed(&self) -> i64 {
        self.incidents - self.diagnosed
    }

    /// The diagnosed share in percent, rounded down to one decimal (none without incidents).
    pub fn percent(&self) -> Option<f64> {
        (self.incidents > 0).then(|| (self.diagnosed * 1000 / self.incidents) as f64 / 10.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_is_a_share_rounded_down_and_none_without_incidents() {
        let c = |incidents, diagnosed| Coverage {
            since: 0,
            incidents,
            diagnosed,
        };
        assert_eq!(c(3, 2).percent(), Some(66.6));
        assert_eq!(c(1000, 999).undiagnosed(), 1);
        assert_eq!(c(1000, 999).percent(), Some(99.9), "never rounded up to 100");
        assert_eq!(c(0, 0).percent(), None);
    }

    #[test]
    fn trends_compare_two_weeks() {
        assert_eq!(Trend::from_counts(10, 2), Trend::Rising);
        assert_eq!(Trend::from_counts(2, 10), Trend::Falling);
        assert_eq!(Trend::from_counts(10, 9), Trend::Steady);
        assert_eq!(Trend::from_counts(0, 0), Trend::Steady);
    }
}
