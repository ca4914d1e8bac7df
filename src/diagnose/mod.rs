//! The whole pure pipeline: raw log → [`Diagnosis`].
//!
//! One streaming pass normalizes the candidate lines, finds the parser's triggers and the rule
//! patterns on each with one set, and feeds them to the parser (events) and to the rule matcher
//! (pattern hits); then the matching rules become findings, ranked root causes first, with their
//! templates filled from the captured values, and the diagnosis gets its fingerprint. Where the
//! specific rules find no root cause, the class detectors read the log's end ([`fallback`]).

pub mod fallback;
mod fingerprint;
mod lines;
mod rank;

pub use fingerprint::{fingerprint, mask_message};
pub use lines::LineAnalyzer;

use std::collections::BTreeMap;
use std::io::Read;

use crate::model::{
    Cause, DIAGNOSIS_FORMAT_VERSION, Diagnosis, EventKind, EvidenceLine, Finding, FindingOrigin, Fix, Role,
    Warning,
};
use crate::parse::Parsed;
use crate::rules::matcher::Match;
use crate::rules::{Rule, RuleSet};
use crate::scan;
use fallback::Window;

/// A diagnosis with the parse it was made from.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The diagnosis.
    pub diagnosis: Diagnosis,
    /// The parsed events.
    pub parsed: Parsed,
}

/// Analyzes a log from a reader, streaming.
pub fn analyze_reader<R: Read + Send>(rules: &RuleSet, mut reader: R) -> std::io::Result<Analysis> {
    // The head tells whether the input is large enough to need the prefilter at all.
    let mut head = Vec::with_capacity(scan::PREFILTER_MIN_BYTES);
    reader
        .by_ref()
        .take(scan::PREFILTER_MIN_BYTES as u64)
        .read_to_end(&mut head)?;
    if head.len() < scan::PREFILTER_MIN_BYTES {
        return Ok(analyze_bytes(rules, &head));
    }
    let prefilter = prefilter_for_large_input(rules);
    let mut sink = LineAnalyzer::new(rules);
    let mut input = scan::Tail::new(std::io::Cursor::new(head).chain(reader), Window::KEEP);
    let stats = scan::scan(&mut input, prefilter, &mut sink)?;
    let (end, total) = input.into_kept();
    Ok(finish(rules, sink, stats, Window::from_tail(&end, total)))
}

/// Analyzes a log held in memory.
pub fn analyze_bytes(rules: &RuleSet, bytes: &[u8]) -> Analysis {
    let prefilter = if bytes.len() < scan::PREFILTER_MIN_BYTES {
        &scan::EVERY_LINE
    } else {
        prefilter_for_large_input(rules)
    };
    let mut sink = LineAnalyzer::new(rules);
    let stats = scan::scan_slice(bytes, prefilter, &mut sink);
    finish(rules, sink, stats, Window::of(bytes))
}

/// Analyzes a log reading every line, without the prefilter: the reference the prefilter must
/// agree with (tests use it; it is slower and gives the same diagnosis).
pub fn analyze_every_line(rules: &RuleSet, bytes: &[u8]) -> Analysis {
    let mut sink = LineAnalyzer::new(rules);
    let stats = scan::scan_slice(bytes, &scan::EVERY_LINE, &mut sink);
    finish(rules, sink, stats, Window::of(bytes))
}

/// The prefilter of the rule base (built now, beside the line set); the parser's own when the
/// rule base's line set could not be built (rules then find nothing, and the diagnosis says
/// why); none when only the prefilter could not be (the scan then reads every line: slower, the
/// same result).
fn prefilter_for_large_input(rules: &RuleSet) -> &scan::Prefilter {
    rules.prepare_for_large_inputs();
    match (rules.automata(), rules.prefilter()) {
        (Err(_), _) => crate::parse::prefilter(),
        (Ok(_), Ok(prefilter)) => prefilter,
        (Ok(_), Err(_)) => &scan::EVERY_LINE,
    }
}

fn finish(rules: &RuleSet, sink: LineAnalyzer<'_>, stats: scan::ScanStats, end: Window<'_>) -> Analysis {
    let (parser, matcher) = sink.into_parts();
    let mut parsed = parser.finish(stats);
    if let Err(e) = rules.automata() {
        parsed
            .warnings
            .push(Warning::new("rules_unavailable", e.to_string(), None));
    }
    let matches = matcher.evaluate(&parsed);
    let diagnosis = diagnose(rules, &parsed, matches, || {
        fallback::detect(rules, end, parsed.lines, &parsed)
            .map_err(|e| Warning::new("detectors_unavailable", e.to_string(), None))
    });
    Analysis { diagnosis, parsed }
}

/// Analyzes a log held in a string.
pub fn analyze_str(rules: &RuleSet, text: &str) -> Diagnosis {
    analyze_bytes(rules, text.as_bytes()).diagnosis
}

/// The findings of the specific rules' `matches`, ranked; where none is a root cause or a
/// symptom, `detect` runs the class detectors and their findings join them.
fn diagnose(
    rules: &RuleSet,
    parsed: &Parsed,
    matches: Vec<Match>,
    detect: impl FnOnce() -> Result<Vec<Match>, Warning>,
) -> Diagnosis {
    let environment = environment(parsed);
    let unexplained = unexplained_final_error(parsed, &matches);
    let roots = error_roots(rules, &matches);
    let to_finding = |m: Match| {
        // Seen only in warnings, all before a failure no rule explains or a program error of
        // another class: context.
        let before = unexplained
            .as_ref()
            .filter(|error| m.only_warnings && m.evidence.iter().all(|e| e.line < error.line))
            .cloned()
            .or_else(|| later_error_of_another_class(rules, &roots, &m));
        let mut f = finding(&rules.rules()[m.rule], m, &environment);
        if let Some(error) = before {
            f.role = Role::Context;
            f.confidence_reasons.push(format!(
                "a warning before another failure (line {}: {})",
                error.line, error.text
            ));
        }
        f
    };
    let mut findings: Vec<Finding> = matches.into_iter().map(to_finding).collect();
    let mut warnings = parsed.warnings.clone();
    if findings.iter().all(|f| f.role == Role::Context) {
        // No specific rule explains the log: the class detectors get their turn.
        match detect() {
            Ok(found) => findings.extend(found.into_iter().map(to_finding)),
            Err(warning) => warnings.push(warning),
        }
    }
    let no_yields: &[String] = &[];
    let findings = rank::rank(findings, |id| rules.rule(id).map_or(no_yields, |r| &r.yields_to));
    // Only where nothing else is named: a diagnosed log's last error is often the same failure
    // worded by a wrapper, which the finding explains though it is not its evidence.
    let unexplained_error = unexplained.filter(|_| findings.iter().all(|f| f.role == Role::Context));
    let fingerprint = findings
        .first()
        .map(|primary| fingerprint(primary, &parsed.events));
    Diagnosis {
        format_version: DIAGNOSIS_FORMAT_VERSION,
        lines: parsed.lines,
        bytes: parsed.bytes,
        fingerprint,
        findings,
        unexplained_error,
        environment,
        warnings,
        replay: None,
    }
}

/// The root findings seen in errors whose class is a program error (a shape, a dtype, an index…),
/// with their evidence: what a finding seen only in warnings is compared with (empty where no
/// match is only in warnings, the usual case).
fn error_roots<'r>(rules: &'r RuleSet, matches: &[Match]) -> Vec<(&'r str, Vec<EvidenceLine>)> {
    if !matches.iter().any(|m| m.only_warnings) {
        return Vec::new();
    }
    matches
        .iter()
        .filter(|m| !m.only_warnings)
        .map(|m| (&rules.rules()[m.rule], m))
        .filter(|(rule, _)| rule.role == Role::Root && rules.is_program_error(&rule.class))
        .map(|(rule, m)| (rule.class.as_str(), m.evidence.clone()))
        .collect()
}

/// For a match seen only in warnings: the first error line, after all of its evidence, of a root
/// finding of a program error of another class. A driver too old for the build, named in a
/// warning on which torch fell back to the CPU, did not cause the shape mismatch after it.
fn later_error_of_another_class(
    rules: &RuleSet,
    roots: &[(&str, Vec<EvidenceLine>)],
    m: &Match,
) -> Option<EvidenceLine> {
    if !m.only_warnings {
        return None;
    }
    let class = rules.rules()[m.rule].class.as_str();
    let last = m.evidence.iter().map(|e| e.line).max()?;
    roots
        .iter()
        .filter(|(c, _)| *c != class)
        .filter_map(|(_, evidence)| evidence.iter().find(|e| e.line > last))
        .min_by_key(|e| e.line)
        .cloned()
}

/// The exception the log's last traceback ends with, when no rule explains it (none has it as
/// evidence): a finding seen only in warnings before it did not cause it, so it is only context.
fn unexplained_final_error(parsed: &Parsed, matches: &[Match]) -> Option<EvidenceLine> {
    let last = parsed.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Traceback(t) => t.final_exception(),
        _ => None,
    })?;
    let explained = matches
        .iter()
        .any(|m| !m.only_warnings && m.evidence.iter().any(|e| e.line >= last.line));
    (!explained).then(|| EvidenceLine {
        line: last.line,
        text: crate::model::clipped_text(&last.line_text()).into_owned(),
        rank: None,
        repeats: None,
    })
}

/// Versions and GPU names printed in the log, each kind in order of appearance.
fn environment(parsed: &Parsed) -> BTreeMap<String, Vec<String>> {
    let mut env: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in &parsed.events {
        if let EventKind::Env(f) = &event.kind {
            let values = env.entry(f.key.name().to_owned()).or_default();
            if !values.contains(&f.value) {
                values.push(f.value.clone());
            }
        }
    }
    env
}

fn finding(rule: &Rule, m: Match, environment: &BTreeMap<String, Vec<String>>) -> Finding {
    let mut values = m.captures.clone();
    for (key, vals) in environment {
        if let Some(first) = vals.first() {
            values.insert(format!("env.{key}"), first.clone());
        }
    }
    let mut reasons = vec![base_reason(rule)];
    if rule.origin == FindingOrigin::Detector {
        reasons.push(
            "recognized by a class detector from the failure's vocabulary: no specific rule knows this wording yet".to_owned(),
        );
    }
    reasons.extend(m.reasons);
    Finding {
        rule: rule.id.clone(),
        class: rule.class.clone(),
        title: rule.title.clone(),
        summary: rule.summary.render(&values),
        severity: rule.severity,
        role: rule.role,
        origin: rule.origin,
        symptom_of: None,
        confidence: m.confidence,
        confidence_reasons: reasons,
        tier: Default::default(),
        priority: rule.priority,
        evidence: m.evidence,
        captures: m.captures,
        causes: rule
            .causes
            .iter()
            .map(|c| Cause {
                title: c.title.render_text(&values),
                detail: c.detail.render_text(&values),
                replay: c.replay_spec(&values),
                outcome: None,
            })
            .collect(),
        fixes: rule
            .fixes
            .iter()
            .map(|f| Fix {
                title: f.title.render_text(&values),
                code: f.code.clone(),
            })
            .collect(),
        next_artifact: rule.next_artifact.as_ref().map(|t| t.render_text(&values)),
        links: rule.links.clone(),
    }
}

fn base_reason(rule: &Rule) -> String {
    use crate::model::Confidence::*;
    match rule.confidence {
        High => "the log names this failure explicitly",
        Medium => "the log fits this failure, but other causes fit it too",
        Low => "a weak signal: check it before acting on it",
    }
    .to_owned()
}

#[cfg(test)]
mod tests;
