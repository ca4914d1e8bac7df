//! Turning stored data into what the pages show: dates, the log folded around its evidence,
//! charts, finding summaries, links without credentials. Pure functions.

use std::collections::BTreeSet;

use crate::kb::redact::redacted;
use crate::kb::rows::DayCount;
use crate::model::{Confidence, EvidenceTier, Finding, Role};

/// Lines shown around each evidence line.
const CONTEXT: u64 = 3;
/// Lines shown at each end of a log without evidence.
const EDGE: u64 = 40;
/// A folded run longer than this is not sent at all (the raw log link has it).
const MAX_FOLDED: usize = 2000;

/// `2026-11-22 04:35 UTC` from Unix milliseconds.
pub fn when(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// `2026-11-22` from a day number.
pub fn day(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// One line of the log view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Original line number.
    pub number: u64,
    /// Text.
    pub text: String,
    /// It is evidence of a finding.
    pub evidence: bool,
}

/// A run of lines: shown, or folded (with its lines unless too many).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Folded behind a summary.
    pub folded: bool,
    /// First line number.
    pub from: u64,
    /// Last line number.
    pub to: u64,
    /// Lines hidden (folded segments).
    pub hidden: usize,
    /// The lines (empty for a fold too long to send).
    pub lines: Vec<LogLine>,
}

/// The log cut into shown runs around the evidence lines and folded runs between them.
pub fn fold_log(log: &str, evidence: &BTreeSet<u64>) -> Vec<Segment> {
    let total = log.lines().count() as u64;
    let shown = |n: u64| -> bool {
        if evidence.is_empty() {
            return n <= EDGE || n + EDGE > total;
        }
        evidence
            .range(n.saturating_sub(CONTEXT)..=n + CONTEXT)
            .next()
            .is_some()
    };
    let mut segments: Vec<Segment> = Vec::new();
    for (i, text) in log.lines().enumerate() {
        let number = i as u64 + 1;
        let folded = !shown(number);
        let line = LogLine {
            number,
            text: text.to_owned(),
            evidence: evidence.contains(&number),
        };
        match segments.last_mut() {
            Some(s) if s.folded == folded => {
                s.to = number;
                s.hidden += usize::from(folded);
                if !folded || s.lines.len() < MAX_FOLDED {
                    s.lines.push(line);
                } else {
                    s.lines.clear();
                }
            }
            _ => segments.push(Segment {
                folded,
                from: number,
                to: number,
                hidden: usize::from(folded),
                lines: vec![line],
            }),
        }
    }
    // A fold that outgrew the limit keeps no lines at all.
    for s in &mut segments {
        if s.folded && s.hidden > MAX_FOLDED {
            s.lines.clear();
        }
    }
    segments
}

/// One bar of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
    /// Tooltip.
    pub tip: String,
}

/// An inline SVG bar chart of counts per day.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Accessible label.
    pub label: String,
    /// View box width.
    pub width: u32,
    /// View box height.
    pub height: u32,
    /// Baseline y.
    pub base: u32,
    /// Bars.
    pub bars: Vec<Bar>,
    /// First day.
    pub first: String,
    /// Last day.
    pub last: String,
    /// Largest count.
    pub max: i64,
}

/// A chart of `daily` counts over the `days` days ending `today` (a day number).
pub fn chart(label: &str, daily: &[DayCount], days: i64, today: i64) -> Chart {
    let (width, height, base) = (600u32, 130u32, 115u32);
    let days = days.clamp(1, 366);
    let start = today - days + 1;
    let max = daily.iter().map(|d| d.count).max().unwrap_or(0);
    let slot = f64::from(width) / days as f64;
    let bars = daily
        .iter()
        .filter(|d| d.day >= start && d.day <= today)
        .map(|d| {
            let h = if max == 0 {
                0.0
            } else {
                d.count as f64 / max as f64 * f64::from(base - 14)
            };
            Bar {
                x: (d.day - start) as f64 * slot + slot * 0.1,
                y: f64::from(base) - h,
                w: (slot * 0.8).max(1.0),
                h,
                tip: format!("{}: {}", day(d.day), d.count),
            }
        })
        .collect();
    Chart {
        label: format!(
            "{label}: {} over {days} days",
            daily.iter().map(|d| d.count).sum::<i64>()
        ),
        width,
        height,
        base,
        bars,
        first: day(start),
        last: day(today),
        max,
    }
}

/// A finding as the diagnosis page shows it.
#[derive(Debug, Clone)]
pub struct FindingView {
    /// Rule id.
    pub rule: String,
    /// Class.
    pub class: String,
    /// Title.
    pub title: String,
    /// Summary.
    pub summary: String,
    /// `root cause`, `symptom`, `context`.
    pub role_label: &'static str,
    /// CSS class of the role.
    pub role_class: &'static str,
    /// `high`, `medium`, `low`.
    pub confidence: &'static str,
    /// `pattern`, `confirmed`, `refuted`.
    pub tier: &'static str,
    /// Plain words for the tier.
    pub tier_label: &'static str,
    /// Why this confidence.
    pub reasons: String,
    /// Causes.
    pub causes: Vec<CauseView>,
    /// Fixes.
    pub fixes: Vec<FixView>,
    /// Next artifact.
    pub next_artifact: Option<String>,
    /// The root cause it is a symptom of.
    pub symptom_of: Option<String>,
    /// Whether a class detector (not a specific rule) found it: a wording no rule knows yet.
    pub from_detector: bool,
}

/// A cause.
#[derive(Debug, Clone)]
pub struct CauseView {
    /// Title.
    pub title: String,
    /// Detail.
    pub detail: String,
    /// Replay check that can confirm it.
    pub check: Option<String>,
    /// What a replay said: (`confirmed` / `refuted` / `inconclusive`, summary sentence, backend).
    pub outcome: Option<(&'static str, String, String)>,
}

/// A fix.
#[derive(Debug, Clone)]
pub struct FixView {
    /// Title.
    pub title: String,
    /// Code.
    pub code: Option<String>,
}

impl From<&Finding> for FindingView {
    fn from(f: &Finding) -> Self {
        let (role_label, role_class) = match f.role {
            Role::Root => ("root cause", "root"),
            Role::Symptom => ("symptom", "symptom"),
            Role::Context => ("context", "context"),
        };
        let (tier, tier_label) = match f.tier {
            EvidenceTier::Pattern => ("pattern", "matched by pattern"),
            EvidenceTier::Confirmed => ("confirmed", "confirmed by replay"),
            EvidenceTier::Refuted => ("refuted", "refuted by replay"),
        };
        Self {
            rule: f.rule.clone(),
            class: f.class.clone(),
            title: f.title.to_string(),
            summary: f.summary.clone(),
            role_label,
            role_class,
            confidence: match f.confidence {
                Confidence::High => "high",
                Confidence::Medium => "medium",
                Confidence::Low => "low",
            },
            tier,
            tier_label,
            reasons: f.confidence_reasons.join("; "),
            causes: f
                .causes
                .iter()
                .map(|c| CauseView {
                    title: c.title.to_string(),
                    detail: c.detail.to_string(),
                    check: c.replay.as_ref().map(|r| r.check.clone()),
                    outcome: c
                        .outcome
                        .as_ref()
                        .map(|o| (verdict_word(o.verdict), o.summary.clone(), o.backend.clone())),
                })
                .collect(),
            fixes: f
                .fixes
                .iter()
                .map(|x| FixView {
                    title: x.title.to_string(),
                    code: x.code.as_ref().map(|c| c.trim_matches('\n').to_owned()),
                })
                .collect(),
            next_artifact: f.next_artifact.as_deref().map(str::to_owned),
            symptom_of: f.symptom_of.clone(),
            from_detector: f.origin == crate::model::FindingOrigin::Detector,
        }
    }
}

/// `confirmed`, `refuted`, `inconclusive`.
pub fn verdict_word(verdict: crate::model::Verdict) -> &'static str {
    match verdict {
        crate::model::Verdict::Confirmed => "confirmed",
        crate::model::Verdict::Refuted => "refuted",
        crate::model::Verdict::Inconclusive => "inconclusive",
        crate::model::Verdict::Consistent => "consistent",
    }
}

/// A link target the page may show: only http(s) URLs (never `javascript:`), never with
/// credentials: without userinfo (`user:password@`) and with any other secret (a token in the
/// query) redacted, for the rows stored before metadata was redacted too.
pub fn safe_url(url: Option<&str>) -> Option<String> {
    let url = url?;
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let scheme = &url[..url.len() - rest.len()];
    // The authority ends where a browser ends it; its userinfo ends at its last `@`.
    let authority = &rest[..rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len())];
    let host = authority.rfind('@').map_or(0, |at| at + 1);
    Some(redacted(format!("{scheme}{}", &rest[host..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(when(0), "1970-01-01 00:00 UTC");
        assert_eq!(when(1_795_315_500_000), "2026-11-22 02:45 UTC");
        assert_eq!(day(19_723), "2024-01-01");
    }

    #[test]
    fn the_log_is_folded_around_its_evidence() {
        let log: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let segments = fold_log(&log, &BTreeSet::from([50]));
        let shape: Vec<(bool, u64, u64)> = segments.iter().map(|s| (s.folded, s.from, s.to)).collect();
        assert_eq!(shape, vec![(true, 1, 46), (false, 47, 53), (true, 54, 100)]);
        assert!(segments[1].lines[3].evidence);
        assert_eq!(segments[0].hidden, 46);
    }

    #[test]
    fn long_folds_send_no_lines() {
        let log: String = (1..=5000).map(|i| format!("l{i}\n")).collect();
        let segments = fold_log(&log, &BTreeSet::from([4990]));
        assert!(segments[0].folded && segments[0].lines.is_empty() && segments[0].hidden == 4986);
    }

    #[test]
    fn only_http_links_are_links() {
        assert_eq!(safe_url(Some("javascript:alert(1)")), None);
        assert_eq!(safe_url(Some("https://ci/1")).as_deref(), Some("https://ci/1"));
    }

    #[test]
    fn a_link_never_shows_credentials_even_from_a_row_stored_before_redaction() {
        assert_eq!(
            safe_url(Some("https://bot:s3cret@ci.example.com/job/1")).as_deref(),
            Some("https://ci.example.com/job/1")
        );
        assert_eq!(
            safe_url(Some("http://ghp_abcdefghijklmnopqrstuvwxyzABCDEF123456@ci/1?x=1")).as_deref(),
            Some("http://ci/1?x=1")
        );
        assert_eq!(
            safe_url(Some(
                "https://ci/job/1?token=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234"
            ))
            .as_deref(),
            Some("https://ci/job/1?token=hf_<redacted>")
        );
        assert_eq!(
            safe_url(Some("https://ci/job/1@2")).as_deref(),
            Some("https://ci/job/1@2"),
            "an @ in the path is no userinfo"
        );
    }

    #[test]
    fn charts_scale_bars_to_the_largest_day() {
        let c = chart(
            "incidents",
            &[DayCount { day: 100, count: 2 }, DayCount { day: 101, count: 4 }],
            2,
            101,
        );
        assert_eq!(c.bars.len(), 2);
        assert!(c.bars[1].h > c.bars[0].h);
        assert_eq!(c.max, 4);
    }
}
