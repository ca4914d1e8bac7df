//! The askama templates (templates/*.html) and the data each one shows. Every value is escaped by
//! askama: a log containing `<script>` is shown as text.

use askama::Template;
use askama_web::WebTemplate;

use super::views::{Chart, FindingView, Segment};
use crate::service::rules::ExampleView;

/// The version shown in the footer.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A group in a list.
#[derive(Debug, Clone)]
pub struct GroupRow {
    /// Id.
    pub id: i64,
    /// Title.
    pub title: String,
    /// Class.
    pub class: String,
    /// Count.
    pub count: i64,
    /// First seen.
    pub first_seen: String,
    /// Last seen.
    pub last_seen: String,
}

/// An incident in a list.
#[derive(Debug, Clone)]
pub struct IncidentRow {
    /// Id.
    pub id: i64,
    /// Title (or "no diagnosis", with the log's last error when known).
    pub title: String,
    /// Class.
    pub class: String,
    /// Project.
    pub project: String,
    /// When.
    pub when: String,
}

/// `/`.
#[derive(Template, WebTemplate)]
#[template(path = "home.html")]
pub struct Home {
    /// Footer.
    pub version: &'static str,
    /// Form token.
    pub csrf: String,
    /// The forms this visitor may send.
    pub allowed: super::Allowed,
    /// Upload limit in words.
    pub max_upload: String,
    /// Recent groups.
    pub groups: Vec<GroupRow>,
    /// How much of the recent incidents the rules explain (none without incidents).
    pub coverage: Option<CoverageView>,
}

/// The diagnosed share of recent incidents, for the start page.
#[derive(Debug, Clone)]
pub struct CoverageView {
    /// Days counted.
    pub days: i64,
    /// Incidents in those days.
    pub incidents: i64,
    /// Those a rule explained.
    pub diagnosed: i64,
    /// Those no rule explained.
    pub undiagnosed: i64,
    /// The diagnosed share, `95.9`.
    pub percent: String,
}

/// `/signin`.
#[derive(Template, WebTemplate)]
#[template(path = "signin.html")]
pub struct SignIn {
    /// Footer.
    pub version: &'static str,
    /// Form token.
    pub csrf: String,
    /// What went wrong with the last attempt.
    pub problem: Option<String>,
}

/// An error page.
#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    /// Footer.
    pub version: &'static str,
    /// Status code.
    pub status: u16,
    /// Short heading.
    pub heading: String,
    /// Explanation.
    pub detail: String,
}

/// `/incidents/{id}`.
#[derive(Template, WebTemplate)]
#[template(path = "incident.html")]
pub struct IncidentPage {
    /// Footer.
    pub version: &'static str,
    /// Form token.
    pub csrf: String,
    /// The forms this visitor may send.
    pub allowed: super::Allowed,
    /// Id.
    pub id: i64,
    /// Group.
    pub group_id: Option<i64>,
    /// Incidents in the group.
    pub group_count: i64,
    /// The primary finding.
    pub primary: Option<FindingView>,
    /// Other findings.
    pub others: Vec<FindingView>,
    /// With no diagnosis, the log's last error: (line, text).
    pub unexplained_error: Option<(u64, String)>,
    /// Captured values.
    pub values: Vec<(String, String)>,
    /// Lines in the log.
    pub lines: u64,
    /// The log, folded around the evidence.
    pub segments: Vec<Segment>,
    /// Feedback was just saved.
    pub feedback_saved: bool,
    /// Feedback so far, in words.
    pub feedback: Vec<String>,
    /// When.
    pub created: String,
    /// Project.
    pub project: Option<String>,
    /// Source.
    pub source: Option<String>,
    /// Commit.
    pub commit: Option<String>,
    /// CI job (http(s) only).
    pub job_url: Option<String>,
    /// Versions and GPUs.
    pub environment: Vec<(String, String)>,
    /// Fingerprint.
    pub fingerprint: Option<String>,
    /// Similar incidents.
    pub similar: Vec<IncidentRow>,
    /// Replay jobs on snapshots of this incident, newest first.
    pub replay: Vec<ReplayJobView>,
    /// The latest replay's report over the diagnosis: its verdict, then its lines.
    pub replay_summary: Option<(&'static str, Vec<String>)>,
    /// A snapshot was just uploaded.
    pub snapshot_queued: bool,
    /// Some cause of the diagnosis names a replay check: a snapshot would be checked.
    pub replayable: bool,
    /// Snapshot upload limit in words.
    pub max_snapshot: String,
    /// A distributed job's incident: its bundle.
    pub bundle: Option<super::bundles::BundleView>,
}

/// A replay job as the incident page shows it.
#[derive(Debug, Clone)]
pub struct ReplayJobView {
    /// Job id.
    pub id: i64,
    /// `queued`, `running`, `done`, `failed`.
    pub state: &'static str,
    /// Leases taken.
    pub attempts: i64,
    /// The last error.
    pub error: Option<String>,
    /// The snapshot in words (format, size, tensors).
    pub snapshot: String,
    /// Its parameters (`num_classes=2`).
    pub params: String,
    /// Whether its tensors are still stored.
    pub stored: bool,
    /// When it was uploaded.
    pub when: String,
    /// The check results.
    pub results: Vec<CheckView>,
}

/// One check result.
#[derive(Debug, Clone)]
pub struct CheckView {
    /// Check name.
    pub check: String,
    /// `confirmed`, `refuted`, `inconclusive`.
    pub verdict: &'static str,
    /// The summary sentence.
    pub summary: String,
    /// Where it ran.
    pub backend: String,
}

/// `/incidents`.
#[derive(Template, WebTemplate)]
#[template(path = "incidents.html")]
pub struct IncidentsPage {
    /// Footer.
    pub version: &'static str,
    /// Rows.
    pub rows: Vec<IncidentRow>,
    /// Classes for the filter.
    pub classes: Vec<String>,
    /// Current filters.
    pub q: String,
    /// Class filter.
    pub class: String,
    /// Project filter.
    pub project: String,
    /// Since filter (days, or empty).
    pub since: String,
    /// Since choices.
    pub since_options: Vec<(String, String)>,
    /// Diagnosis filter: `yes`, `no` or empty.
    pub diagnosed: String,
    /// Link to the next page.
    pub next_page: Option<String>,
}

/// `/groups`.
#[derive(Template, WebTemplate)]
#[template(path = "groups.html")]
pub struct GroupsPage {
    /// Footer.
    pub version: &'static str,
    /// Rows.
    pub groups: Vec<GroupRow>,
    /// Classes for the filter.
    pub classes: Vec<String>,
    /// Search.
    pub q: String,
    /// Class filter.
    pub class: String,
    /// Project filter.
    pub project: String,
    /// Link to the next page.
    pub next_page: Option<String>,
}

/// A note as shown.
#[derive(Debug, Clone)]
pub struct NoteView {
    /// Text.
    pub body: String,
    /// Who.
    pub who: String,
    /// When.
    pub when: String,
}

/// A project count.
#[derive(Debug, Clone)]
pub struct ProjectView {
    /// Name.
    pub name: String,
    /// Count.
    pub count: i64,
}

/// `/groups/{id}`.
#[derive(Template, WebTemplate)]
#[template(path = "group.html")]
pub struct GroupPage {
    /// Footer.
    pub version: &'static str,
    /// Form token.
    pub csrf: String,
    /// The forms this visitor may send.
    pub allowed: super::Allowed,
    /// The group.
    pub group: crate::kb::rows::GroupSummary,
    /// Trend in words.
    pub trend: &'static str,
    /// First seen.
    pub first_seen: String,
    /// Last seen.
    pub last_seen: String,
    /// Days charted.
    pub days: i64,
    /// The chart.
    pub chart: Chart,
    /// Notes.
    pub notes: Vec<NoteView>,
    /// Projects.
    pub projects: Vec<ProjectView>,
    /// Latest incidents.
    pub recent: Vec<IncidentRow>,
    /// Similar incidents in other groups.
    pub similar: Vec<IncidentRow>,
}

/// A rule in the list.
#[derive(Debug, Clone)]
pub struct RuleRow {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Class.
    pub class: String,
    /// Role.
    pub role: &'static str,
    /// Priority.
    pub priority: i32,
    /// Hits.
    pub hits: i64,
    /// Precision in words.
    pub precision: String,
}

/// `/rules`.
#[derive(Template, WebTemplate)]
#[template(path = "rules.html")]
pub struct RulesPage {
    /// Footer.
    pub version: &'static str,
    /// Where the rules come from.
    pub origin: String,
    /// Rows.
    pub rules: Vec<RuleRow>,
}

/// `/rules/{id}`.
#[derive(Template, WebTemplate)]
#[template(path = "rule.html")]
pub struct RulePage {
    /// Footer.
    pub version: &'static str,
    /// Form token.
    pub csrf: String,
    /// The forms this visitor may send.
    pub allowed: super::Allowed,
    /// The rule's summary row.
    pub rule: RuleHead,
    /// Summary template.
    pub summary: String,
    /// Hits.
    pub hits: i64,
    /// Precision in words.
    pub precision: String,
    /// Right.
    pub right: i64,
    /// Wrong.
    pub wrong: i64,
    /// Days charted.
    pub days: i64,
    /// The chart.
    pub chart: Chart,
    /// (kind, pattern).
    pub patterns: Vec<(&'static str, String)>,
    /// Yields to.
    pub yields_to: Vec<String>,
    /// (title, detail).
    pub causes: Vec<(String, String)>,
    /// (title, code).
    pub fixes: Vec<(String, String)>,
    /// Next artifact.
    pub next_artifact: Option<String>,
    /// Examples.
    pub examples: Vec<ExampleView>,
    /// The rule file, to edit and backtest.
    pub source: String,
}

/// The head of a rule page.
#[derive(Debug, Clone)]
pub struct RuleHead {
    /// Id.
    pub id: String,
    /// Class.
    pub class: String,
    /// Title.
    pub title: String,
    /// Role.
    pub role: &'static str,
    /// Priority.
    pub priority: i32,
    /// Confidence.
    pub confidence: &'static str,
    /// File.
    pub file: String,
}

/// The result of a backtest from the page.
#[derive(Template, WebTemplate)]
#[template(path = "backtest.html")]
pub struct BacktestPage {
    /// Footer.
    pub version: &'static str,
    /// Why the rule does not load.
    pub problem: Option<String>,
    /// Rule id.
    pub rule: String,
    /// Incidents scanned.
    pub scanned: usize,
    /// (incident, before, after, confidence).
    pub matched: Vec<(i64, String, String, String)>,
    /// Incidents it takes.
    pub takes: usize,
}

/// `/offenders`: GPUs and hosts that failed first in several jobs.
#[derive(Template, WebTemplate)]
#[template(path = "offenders.html")]
pub struct OffendersPage {
    /// Footer.
    pub version: &'static str,
    /// Jobs from which one is flagged.
    pub threshold: i64,
    /// GPUs.
    pub gpus: Vec<OffenderRow>,
    /// Hosts.
    pub hosts: Vec<OffenderRow>,
}

/// A GPU or host on the offenders page.
#[derive(Debug, Clone)]
pub struct OffenderRow {
    /// What names it.
    pub name: String,
    /// Its host (GPUs).
    pub host: String,
    /// Jobs it failed first in.
    pub jobs: i64,
    /// At or over the threshold.
    pub flagged: bool,
    /// Their incidents, newest first.
    pub incidents: Vec<i64>,
    /// Their projects.
    pub projects: String,
    /// Latest.
    pub last_seen: String,
}
