//! `faultline rules lint`: problems a rule base can have while still loading: patterns that never
//! fire on their own examples, rules shadowed on all their examples, missing negative examples,
//! costly patterns, placeholders never filled, classes no rule covers.

use std::fmt;

use regex_syntax::hir::literal::{ExtractKind, Extractor};

use super::cost;
use crate::diagnose::analyze_str;
use crate::model::Role;
use crate::normalize::Normalizer;
use crate::rules::{Rule, RuleSet};
use crate::scan::set_form;

/// Shortest literal that lets the prefilter skip lines without running a pattern's automaton.
const MIN_LITERAL: usize = 3;

/// How bad a lint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LintLevel {
    /// Should be fixed before merging.
    Error,
    /// Worth a look.
    Warning,
}

/// One finding of the linter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// Severity.
    pub level: LintLevel,
    /// Rule file (or `rules/taxonomy.toml`).
    pub file: String,
    /// Rule id, when about a rule.
    pub rule: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            LintLevel::Error => "error",
            LintLevel::Warning => "warning",
        };
        match &self.rule {
            Some(rule) => write!(f, "{level}: {}: rule {rule}: {}", self.file, self.message),
            None => write!(f, "{level}: {}: {}", self.file, self.message),
        }
    }
}

/// Lints the whole rule set.
pub fn lint(rules: &RuleSet) -> Vec<Lint> {
    let mut lints = Vec::new();
    for rule in rules.rules() {
        let mut push = |level, message: String| {
            lints.push(Lint {
                level,
                file: rule.file.clone(),
                rule: Some(rule.id.clone()),
                message,
            });
        };
        for message in silent_patterns(rules, rule) {
            push(LintLevel::Error, message);
        }
        for message in costly_patterns(rules, rule) {
            push(LintLevel::Warning, message);
        }
        for message in unguarded_loops(rules, rule) {
            push(LintLevel::Error, message);
        }
        if let Some(message) = shadowed(rules, rule) {
            push(LintLevel::Warning, message);
        }
        if !rule.examples.iter().any(|e| !e.expect.matched) {
            push(
                LintLevel::Warning,
                "no negative example (a log the rule must not match)".into(),
            );
        }
        if rule.role == Role::Root && rule.next_artifact.is_none() {
            push(
                LintLevel::Warning,
                "a root cause rule should name the next artifact to capture".into(),
            );
        }
        for message in unfilled_placeholders(rules, rule) {
            push(LintLevel::Warning, message);
        }
        for message in replay_problems(rule) {
            push(LintLevel::Error, message);
        }
    }
    for class in rules.classes() {
        if !rules.rules().iter().any(|r| r.class == class.id) {
            lints.push(Lint {
                level: LintLevel::Warning,
                file: "rules/taxonomy.toml".into(),
                rule: None,
                message: format!("class {} has no rule", class.id),
            });
        }
    }
    lints.sort_by(|a, b| a.level.cmp(&b.level).then(a.file.cmp(&b.file)));
    lints
}

/// Normalized lines of the rule's positive examples.
fn positive_lines(rule: &Rule) -> Vec<String> {
    let mut normalizer = Normalizer::new();
    rule.examples
        .iter()
        .filter(|e| e.expect.matched)
        .flat_map(|e| e.log.lines().map(str::to_owned).collect::<Vec<_>>())
        .map(|raw| normalizer.normalize(0, raw.as_bytes()).text.to_owned())
        .collect()
}

fn silent_patterns(rules: &RuleSet, rule: &Rule) -> Vec<String> {
    let lines = positive_lines(rule);
    let fields = [
        ("match.any", &rule.any),
        ("match.all", &rule.all),
        ("match.same_line", &rule.same_line),
    ];
    let mut out = Vec::new();
    for (field, ids) in fields {
        for (i, &p) in ids.iter().enumerate() {
            let pattern = rules.patterns().pattern(p);
            let fires = lines.iter().any(|l| pattern.is_match(l));
            if !fires {
                out.push(format!(
                    "{field}[{i}] {:?} never fires on the rule's own examples: add an example for it or remove it",
                    rules.patterns().source(p)
                ));
            }
        }
    }
    out
}

fn costly_patterns(rules: &RuleSet, rule: &Rule) -> Vec<String> {
    rule.any
        .iter()
        .chain(&rule.all)
        .filter_map(|&p| {
            let source = rules.patterns().source(p);
            (!has_good_literal(source)).then(|| {
                format!(
                    "{source:?} has no literal of {MIN_LITERAL}+ characters: every line must run its automaton; anchor it on a fixed word"
                )
            })
        })
        .collect()
}

/// Patterns of the `match` and `extract` fields (all of them run in the line set) that can enter
/// a loop over a wide class before a literal: see [`cost`].
fn unguarded_loops(rules: &RuleSet, rule: &Rule) -> Vec<String> {
    let fields = [
        ("match.any", &rule.any),
        ("match.all", &rule.all),
        ("match.same_line", &rule.same_line),
        ("match.not", &rule.not),
    ];
    let listed = fields.into_iter().flat_map(|(field, ids)| {
        ids.iter()
            .enumerate()
            .map(move |(i, &p)| (format!("{field}[{i}]"), p))
    });
    let extracted = rule
        .extract
        .iter()
        .map(|(name, p)| (format!("extract.{name}"), *p));
    listed
        .chain(extracted)
        .filter_map(|(field, p)| {
            let read = cost::unguarded_loop(&set_form(rules.patterns().hir(p)))?;
            Some(format!(
                "{field} {:?} can loop over a wide class (\\w+, \\S*, .*, [^…]+) after {read} byte(s) of literal: \
                 the line set is then under way in every word of every line and builds states for each \
                 (costly on logs it has not seen); start the pattern with {} or more literal bytes",
                rules.patterns().source(p),
                cost::GUARD
            ))
        })
        .collect()
}

/// Whether every match of the pattern starts or ends with a literal of [`MIN_LITERAL`] bytes.
fn has_good_literal(pattern: &str) -> bool {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return false;
    };
    [ExtractKind::Prefix, ExtractKind::Suffix]
        .into_iter()
        .any(|kind| {
            let mut extractor = Extractor::new();
            extractor.kind(kind);
            let seq = extractor.extract(&hir);
            seq.min_literal_len().is_some_and(|n| n >= MIN_LITERAL)
        })
}

/// On every positive example, another rule of the same role and higher priority ranks first.
fn shadowed(rules: &RuleSet, rule: &Rule) -> Option<String> {
    let mut shadows = Vec::new();
    for example in rule.examples.iter().filter(|e| e.expect.matched) {
        let diagnosis = analyze_str(rules, &example.log);
        let primary = diagnosis.primary()?;
        let ours = diagnosis.findings.iter().find(|f| f.rule == rule.id)?;
        if primary.rule == rule.id || primary.role != ours.role || primary.priority <= rule.priority {
            return None;
        }
        shadows.push(primary.rule.clone());
    }
    shadows.dedup();
    (!shadows.is_empty()).then(|| format!("shadowed on all its examples by {}", shadows.join(", ")))
}

fn unfilled_placeholders(rules: &RuleSet, rule: &Rule) -> Vec<String> {
    let mut captured = std::collections::BTreeSet::new();
    for example in rule.examples.iter().filter(|e| e.expect.matched) {
        let diagnosis = analyze_str(rules, &example.log);
        if let Some(f) = diagnosis.findings.iter().find(|f| f.rule == rule.id) {
            captured.extend(f.captures.keys().cloned());
        }
    }
    let templates = std::iter::once(&rule.summary)
        .chain(rule.causes.iter().flat_map(|c| [&c.title, &c.detail]))
        .chain(rule.fixes.iter().map(|f| &f.title))
        .chain(rule.next_artifact.iter());
    let mut out: Vec<String> = templates
        .flat_map(|t| t.placeholders())
        .filter(|(name, has_fallback)| {
            !has_fallback && !name.starts_with("env.") && !captured.contains(*name)
        })
        .map(|(name, _)| format!("placeholder {{{name}}} has no fallback and no example captures it"))
        .collect();
    out.dedup();
    out
}

/// Replay checks a rule names that do not exist, or parameters their check does not take.
fn replay_problems(rule: &Rule) -> Vec<String> {
    let mut out = Vec::new();
    for (i, cause) in rule.causes.iter().enumerate() {
        let Some((name, params)) = &cause.replay else {
            continue;
        };
        let Some(check) = crate::replay::check::check_info(name) else {
            out.push(format!("cause[{i}].replay: unknown check {name:?}"));
            continue;
        };
        for param in params.keys().filter(|p| !check.knows(p)) {
            out.push(format!(
                "cause[{i}].replay: check {name} has no parameter {param:?}"
            ));
        }
        if let Some(shows) = params.get(crate::replay::shows::PARAM)
            && let Err(e) = shows.source().parse::<crate::replay::shows::Shows>()
        {
            out.push(format!("cause[{i}].replay: {e}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_anchors_are_recognised() {
        assert!(has_good_literal(r"CUDA error: (?P<msg>.+)"));
        assert!(has_good_literal(r"(?i)out of memory"));
        assert!(has_good_literal(r"\d+ is out of bounds"));
        assert!(!has_good_literal(r".*\d+"));
        assert!(!has_good_literal(r"\w+"));
    }
}
