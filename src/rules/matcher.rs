//! Matching rules against a log in one pass.
//!
//! While the log streams, [`Matcher`] remembers where each rule pattern hit (a bounded number of
//! hits per pattern; the analysis finds them with the rule base's line set, in the same pass over
//! the line that finds the parser's triggers). When the log is done, [`Matcher::evaluate`] checks
//! each rule whose patterns hit (and the event-only rules) against those hits and the parsed
//! events. Advice lines are never evidence.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use super::conditions::{EventIndex, event_captures};
use super::pattern::group_text;
use super::{Rule, RuleSet};
use crate::model::{Confidence, EnvKey, Event, EventKind, EvidenceLine, FindingOrigin};
use crate::normalize::Level;
use crate::normalize::Line;
use crate::parse::{Parsed, advice_kind, is_warning_text};
use crate::rules::version::Version;

/// Hits kept at each end of a pattern's hit list.
const KEPT_HITS: usize = 16;

/// Evidence lines kept per finding.
const MAX_EVIDENCE: usize = 8;

/// A line on which a pattern matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Original line number.
    pub line: u64,
    /// Normalized text (cut like event texts).
    pub text: String,
    /// Rank that printed it.
    pub rank: Option<u32>,
    /// The line is known to be a warning: logged at the warning level, or its text was cut and
    /// the whole line read as a warning. Otherwise [`Hit::is_warning`] reads the kept text.
    known_warning: bool,
}

impl Hit {
    /// The line is a warning (a logged warning or `SomethingWarning:`), not an error.
    pub fn is_warning(&self) -> bool {
        self.known_warning || is_warning_text(&self.text)
    }
}

/// What the patterns that matched one line record of it.
struct Seen<'a> {
    line: u64,
    text: Cow<'a, str>,
    rank: Option<u32>,
    known_warning: bool,
}

impl<'a> Seen<'a> {
    fn new(line: &'a Line<'_>) -> Self {
        let trimmed = line.text.trim();
        let text = crate::model::clipped_text(trimmed);
        // Most hits are never evidence: the text is only read for warnings when asked, unless
        // cutting it may have dropped a warning marker.
        let cut = text.len() != trimmed.len();
        Self {
            line: line.number,
            rank: line.rank(),
            known_warning: line.meta.level == Some(Level::Warning) || (cut && is_warning_text(trimmed)),
            text,
        }
    }

    fn to_hit(&self) -> Hit {
        Hit {
            line: self.line,
            text: self.text.as_ref().to_owned(),
            rank: self.rank,
            known_warning: self.known_warning,
        }
    }

    /// Overwrites `hit`, reusing its text's allocation.
    fn write_into(&self, hit: &mut Hit) {
        hit.line = self.line;
        hit.rank = self.rank;
        hit.known_warning = self.known_warning;
        hit.text.clear();
        hit.text.push_str(&self.text);
    }
}

/// Hits of one pattern: the first and the last few, and how many in all.
#[derive(Debug, Clone, Default)]
struct Hits {
    first: Vec<Hit>,
    last: VecDeque<Hit>,
    total: u32,
}

impl Hits {
    fn record(&mut self, seen: &Seen<'_>) {
        self.total = self.total.saturating_add(1);
        if self.first.len() < KEPT_HITS {
            self.first.push(seen.to_hit());
        } else if self.last.len() == KEPT_HITS
            && let Some(mut oldest) = self.last.pop_front()
        {
            // A long run of the same pattern (progress lines) allocates nothing per line.
            seen.write_into(&mut oldest);
            self.last.push_back(oldest);
        } else {
            self.last.push_back(seen.to_hit());
        }
    }

    fn all(&self) -> impl Iterator<Item = &Hit> {
        self.first.iter().chain(&self.last)
    }

    fn earliest(&self) -> Option<&Hit> {
        self.first.first()
    }

    fn latest(&self) -> Option<&Hit> {
        self.last.back().or(self.first.last())
    }
}

/// A rule that matched, before ranking and rendering.
#[derive(Debug, Clone)]
pub struct Match {
    /// Index of the rule in the rule set.
    pub rule: usize,
    /// Evidence lines, in log order.
    pub evidence: Vec<EvidenceLine>,
    /// Captured values.
    pub captures: BTreeMap<String, String>,
    /// Confidence after adjustments.
    pub confidence: Confidence,
    /// Why.
    pub reasons: Vec<String>,
    /// Every evidence line is a warning (a logged warning, `UserWarning:`, a recovered error).
    pub only_warnings: bool,
}

/// Streams lines, then evaluates the rules of one origin: the specific rules, or the class
/// detectors.
#[derive(Debug)]
pub struct Matcher<'r> {
    rules: &'r RuleSet,
    /// Which rules it evaluates.
    origin: FindingOrigin,
    /// The table ids of the patterns it records, ascending (slot `i` is pattern `slots[i]`);
    /// `None`: every pattern of the table (slot `id`).
    slots: Option<&'r [usize]>,
    /// By slot, where the slot's hits are in `hits` ([`NOT_HIT`] until its pattern hits): a log
    /// hits a few dozen of the rule base's patterns, so only those get a [`Hits`].
    hit_index: Vec<u32>,
    /// The hits of the patterns that hit, in the order they first did.
    hits: Vec<Hits>,
}

/// A slot whose pattern has not hit.
const NOT_HIT: u32 = u32::MAX;

impl<'r> Matcher<'r> {
    /// A matcher for the specific rules of `rules`, with no hits yet; [`Matcher::record`] takes
    /// ids of the pattern table.
    pub fn new(rules: &'r RuleSet) -> Self {
        Self {
            rules,
            origin: FindingOrigin::Rule,
            slots: None,
            hit_index: vec![NOT_HIT; rules.patterns().len()],
            hits: Vec::new(),
        }
    }

    /// A matcher for the class detectors of `rules`, with no hits yet, that records the
    /// patterns `slots` (table ids, ascending: the detectors' set); [`Matcher::record`] takes
    /// indices into `slots`.
    pub fn for_detectors(rules: &'r RuleSet, slots: &'r [usize]) -> Self {
        Self {
            rules,
            origin: FindingOrigin::Detector,
            slots: Some(slots),
            hit_index: vec![NOT_HIT; slots.len()],
            hits: Vec::new(),
        }
    }

    /// Records that `patterns` (ids of the rule base's pattern table, or indices into the
    /// detectors' slots) matched `line`; advice lines are never recorded. The caller leaves out
    /// the lines that were code a traceback showed (`Parser::read_code_context`).
    pub fn record(&mut self, line: &Line<'_>, patterns: &[usize]) {
        if patterns.is_empty() || advice_kind(line.text).is_some() {
            return;
        }
        let seen = Seen::new(line);
        for &p in patterns {
            let Some(at) = self.hit_index.get_mut(p) else {
                continue;
            };
            if *at == NOT_HIT {
                let Ok(next) = u32::try_from(self.hits.len()) else {
                    continue;
                };
                *at = next;
                self.hits.push(Hits::default());
            }
            if let Some(hits) = self.hits.get_mut(*at as usize) {
                hits.record(&seen);
            }
        }
    }

    /// The rules that match, given the parsed events of the same log.
    pub fn evaluate(&self, parsed: &Parsed) -> Vec<Match> {
        let events = EventIndex::new(&parsed.events);
        self.rules
            .rules()
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.origin == self.origin)
            .filter_map(|(i, rule)| self.evaluate_rule(i, rule, parsed, &events))
            .collect()
    }

    fn hits(&self, pattern: usize) -> &Hits {
        static NONE: Hits = Hits {
            first: Vec::new(),
            last: VecDeque::new(),
            total: 0,
        };
        let slot = match self.slots {
            None => Some(pattern),
            Some(slots) => slots.binary_search(&pattern).ok(),
        };
        slot.and_then(|i| self.hit_index.get(i))
            .and_then(|&at| self.hits.get(at as usize))
            .unwrap_or(&NONE)
    }

    fn evaluate_rule(
        &self,
        index: usize,
        rule: &Rule,
        parsed: &Parsed,
        events: &EventIndex<'_>,
    ) -> Option<Match> {
        // Most rules stop here: none of their `any` patterns hit this log.
        let any_hit: Vec<usize> = rule
            .any
            .iter()
            .copied()
            .filter(|&p| self.hits(p).total > 0)
            .collect();
        if !rule.any.is_empty() && any_hit.is_empty() {
            return None;
        }
        if rule.not.iter().any(|&p| self.hits(p).total > 0) {
            return None;
        }
        if rule.all.iter().any(|&p| self.hits(p).total == 0) {
            return None;
        }
        // With `same_line`, the one `any` line that holds them all anchors the rule.
        let shared = if rule.same_line.is_empty() {
            None
        } else {
            Some(self.shared_line(&any_hit, &rule.same_line)?)
        };
        let all_hits = match rule.within {
            Some(n) => {
                let anchors: Vec<u64> = match &shared {
                    Some(hit) => vec![hit.line],
                    None => any_hit
                        .iter()
                        .flat_map(|&p| self.hits(p).all().map(|h| h.line))
                        .collect(),
                };
                self.hits_within(&anchors, &rule.all, n)?
            }
            None => rule
                .all
                .iter()
                .filter_map(|&p| self.hits(p).earliest().cloned())
                .collect(),
        };
        let events = rule.events.matching(events)?;
        let mut reasons = Vec::new();
        if !versions_allow(rule, &parsed.events, &mut reasons) {
            return None;
        }

        let mut evidence: Vec<(EvidenceLine, bool)> = Vec::new();
        let mut captures = BTreeMap::new();
        if let Some(hit) = &shared {
            for &p in any_hit.iter().chain(&rule.same_line) {
                if self.hits(p).all().any(|h| h.line == hit.line) {
                    capture_groups(self.rules, p, &hit.text, &mut captures);
                }
            }
            evidence.push((evidence_line(hit, 1), hit.is_warning()));
        }
        // Without `same_line`, the first and the last line of each `any` pattern.
        for &p in any_hit.iter().filter(|_| shared.is_none()) {
            let hits = self.hits(p);
            if let Some(first) = hits.earliest() {
                capture_groups(self.rules, p, &first.text, &mut captures);
                evidence.push((evidence_line(first, hits.total), first.is_warning()));
            }
            if let Some(last) = hits
                .latest()
                .filter(|h| Some(h.line) != hits.earliest().map(|e| e.line))
            {
                evidence.push((evidence_line(last, 1), last.is_warning()));
            }
        }
        for (p, hit) in rule.all.iter().zip(&all_hits) {
            capture_groups(self.rules, *p, &hit.text, &mut captures);
            evidence.push((evidence_line(hit, 1), hit.is_warning()));
        }
        for event in events.iter().take(MAX_EVIDENCE) {
            event_captures(event, &mut captures);
            if let Some(line) = event_evidence(event) {
                evidence.push((line, event.warning));
            }
        }
        // A value is read from the finding's own lines when one of them holds it (a detector's
        // `detail` is the error it found), else from the first line of the log that does (a
        // figure printed elsewhere: `vocab_size=…` in a config dump).
        for (name, p) in &rule.extract {
            let hits = self.hits(*p);
            let on_evidence = hits
                .all()
                .find(|h| evidence.iter().any(|(e, _)| e.line == h.line));
            if let Some(hit) = on_evidence.or_else(|| hits.earliest()) {
                extract_value(self.rules, *p, name, &hit.text, &mut captures);
            }
        }

        evidence.sort_by_key(|(e, _)| e.line);
        evidence.dedup_by_key(|(e, _)| e.line);
        let only_warnings = !evidence.is_empty() && evidence.iter().all(|(_, warning)| *warning);
        let mut evidence: Vec<EvidenceLine> = evidence.into_iter().map(|(e, _)| e).collect();
        if evidence.len() > MAX_EVIDENCE {
            // Keep the first lines (where the failure starts) and the very last one.
            let last = evidence.pop();
            evidence.truncate(MAX_EVIDENCE - 1);
            evidence.extend(last);
        }

        let mut confidence = rule.confidence;
        if only_warnings && !rule.fatal_warning {
            confidence = confidence.lowered();
            reasons.push("seen only in warnings, not in an error".to_owned());
        }
        Some(Match {
            rule: index,
            evidence,
            captures,
            confidence,
            reasons,
            only_warnings,
        })
    }

    /// The first line matched by one of `any` (those that hit) and by every `same_line`
    /// pattern.
    fn shared_line(&self, any: &[usize], same_line: &[usize]) -> Option<Hit> {
        any.iter()
            .flat_map(|&p| self.hits(p).all())
            .filter(|h| {
                same_line
                    .iter()
                    .all(|&q| self.hits(q).all().any(|g| g.line == h.line))
            })
            .min_by_key(|h| h.line)
            .cloned()
    }

    /// For each `all` pattern, a hit within `n` lines of one of the `anchors` lines.
    fn hits_within(&self, anchors: &[u64], all: &[usize], n: u64) -> Option<Vec<Hit>> {
        all.iter()
            .map(|&p| {
                self.hits(p)
                    .all()
                    .find(|h| anchors.iter().any(|&a| a.abs_diff(h.line) <= n))
                    .cloned()
            })
            .collect()
    }
}

fn evidence_line(hit: &Hit, total: u32) -> EvidenceLine {
    EvidenceLine {
        line: hit.line,
        text: hit.text.clone(),
        rank: hit.rank,
        repeats: (total > 1).then_some(total),
    }
}

fn event_evidence(event: &Event) -> Option<EvidenceLine> {
    let line = match &event.kind {
        EventKind::Traceback(t) => t.final_exception().map_or(event.lines.start, |e| e.line),
        _ => event.lines.start,
    };
    let repeats = match &event.kind {
        EventKind::CudaAssert(a) => a.occurrences,
        _ => event.count,
    };
    Some(EvidenceLine {
        line,
        text: event.text.clone()?,
        rank: event.rank,
        repeats: (repeats > 1).then_some(repeats),
    })
}

fn capture_groups(rules: &RuleSet, pattern: usize, text: &str, out: &mut BTreeMap<String, String>) {
    // A pattern without groups is never compiled on its own (the line set found its hits).
    if !rules.patterns().has_groups(pattern) {
        return;
    }
    let p = rules.patterns().pattern(pattern);
    if let (Some(c), Some(re)) = (p.captures(text), p.regex()) {
        for name in re.capture_names().flatten() {
            if let Some(value) = group_text(&c, name) {
                out.entry(name.to_owned()).or_insert(value);
            }
        }
    }
}

fn extract_value(
    rules: &RuleSet,
    pattern: usize,
    name: &str,
    text: &str,
    out: &mut BTreeMap<String, String>,
) {
    let Some(c) = rules.patterns().pattern(pattern).captures(text) else {
        return;
    };
    let value = c.name(name).or_else(|| c.get(1)).or_else(|| c.get(0));
    if let Some(v) = value {
        out.entry(name.to_owned())
            .or_insert_with(|| String::from_utf8_lossy(v.as_bytes()).into_owned());
    }
}

/// The first version of `key` printed in the log.
pub fn env_version(events: &[Event], key: EnvKey) -> Option<(String, Version)> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Env(f) if f.key == key => Version::parse(&f.value).map(|v| (f.value.clone(), v)),
        _ => None,
    })
}

/// Whether the versions in the log allow the rule; unknown versions allow it, with a reason.
fn versions_allow(rule: &Rule, events: &[Event], reasons: &mut Vec<String>) -> bool {
    for (key, req, written) in &rule.versions {
        match env_version(events, *key) {
            Some((_, version)) if !req.matches(&version) => return false,
            Some((printed, _)) => reasons.push(format!(
                "{} {printed} is in the affected range {written}",
                key.name()
            )),
            None if rule.require_versions => return false,
            None => reasons.push(format!(
                "{} version not in the log; this cause only exists for {written}",
                key.name()
            )),
        }
    }
    true
}
