//! One report of a replay over a whole diagnosis ([`ReplaySummary`]): the causes a check decided
//! first (confirmed before refuted, and within each the causes the traceback's frames implicate
//! first), each with the value that decided it; each observation the data confirmed that several
//! causes share, once, with the causes consistent with it; then every cause no check could decide folded
//! into one "not checked" line with the metadata keys or `--param` names that would let them run,
//! and one verdict for the diagnosis that is never `refuted` while a cause went unchecked.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::check::Frames;
use crate::model::{DecidedCause, Diagnosis, ReplaySummary, SharedObservation, Verdict};

/// What an inconclusive summary asks for: `--param vocab_size=N`, `the metadata key role.logits`,
/// `add max_position_embeddings or n_positions to the metadata`.
static NEEDS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    let compile = |p: &str| Regex::new(p).expect("the needs patterns compile");
    vec![
        compile(r"--param ([A-Za-z_][A-Za-z0-9_.]*)="),
        compile(r"metadata key ([A-Za-z_][A-Za-z0-9_.]*)"),
        compile(r"\badd ([a-z_][a-z0-9_.]*[a-z0-9])(?: or [a-z_][a-z0-9_.]*)? to the (?:snapshot )?metadata"),
        compile(r"\badd ([a-z_][a-z0-9_.]*_[a-z0-9_.]+)\b"),
    ]
});

/// The summary of the replay outcomes of `diagnosis`'s causes; `None` when no cause was checked.
pub fn summarize(diagnosis: &Diagnosis) -> Option<ReplaySummary> {
    let mut decided = Vec::new();
    let mut observations: Vec<SharedObservation> = Vec::new();
    let mut not_checked: Vec<String> = Vec::new();
    let mut needs = BTreeSet::new();
    let mut backend = None;
    for finding in &diagnosis.findings {
        // A refutation that speaks for its own cause only leaves the finding's unchecked causes
        // open: they are not checked, not refuted.
        let narrow = finding.causes.iter().any(|c| {
            c.outcome.as_ref().is_some_and(|o| o.verdict == Verdict::Refuted)
                && c.replay
                    .as_ref()
                    .is_some_and(|r| !super::refutes_finding(&super::CheckSpec::from(r)))
        });
        for cause in finding.causes.iter().filter(|c| narrow && c.outcome.is_none()) {
            if !not_checked.iter().any(|t| cause.title == *t) {
                not_checked.push(cause.title.to_string());
            }
        }
    }
    let mut unchecked = Vec::new();
    for cause in diagnosis.findings.iter().flat_map(|f| &f.causes) {
        let Some(outcome) = &cause.outcome else {
            continue;
        };
        backend.get_or_insert_with(|| outcome.backend.clone());
        let suspect = implicated(cause);
        match outcome.verdict {
            Verdict::Confirmed | Verdict::Refuted => decided.push((
                suspect,
                DecidedCause {
                    cause: cause.title.to_string(),
                    verdict: outcome.verdict,
                    summary: outcome.summary.clone(),
                },
            )),
            Verdict::Inconclusive => {
                unchecked.push((suspect, cause.title.to_string()));
                needs.extend(wanted(&outcome.summary));
            }
            Verdict::Consistent => match observations.iter_mut().find(|o| o.summary == outcome.summary) {
                Some(o) if !o.causes.iter().any(|c| cause.title == *c) => {
                    o.causes.push(cause.title.to_string())
                }
                Some(_) => {}
                None => observations.push(SharedObservation {
                    summary: outcome.summary.clone(),
                    causes: vec![cause.title.to_string()],
                }),
            },
        }
    }
    let backend = backend?;
    // Confirmed first; within each verdict, the causes the log's traceback implicates first.
    decided.sort_by_key(|(suspect, d)| (d.verdict != Verdict::Confirmed, !suspect));
    let decided: Vec<DecidedCause> = decided.into_iter().map(|(_, d)| d).collect();
    unchecked.sort_by_key(|(suspect, _)| !suspect);
    let narrow = std::mem::take(&mut not_checked);
    for title in unchecked.into_iter().map(|(_, t)| t).chain(narrow) {
        if !not_checked.contains(&title) {
            not_checked.push(title);
        }
    }
    let verdict = if decided.iter().any(|d| d.verdict == Verdict::Confirmed) || !observations.is_empty() {
        Verdict::Confirmed
    } else if not_checked.is_empty() {
        Verdict::Refuted
    } else {
        Verdict::Inconclusive
    };
    Some(ReplaySummary {
        verdict,
        decided,
        observations,
        not_checked,
        needs: needs.into_iter().collect(),
        backend,
    })
}

/// Whether the traceback frames a rule gave the cause's check implicate the tensor it checks
/// (`embed_positions` the positions, the loss the labels).
fn implicated(cause: &crate::model::Cause) -> bool {
    let Some(spec) = &cause.replay else {
        return false;
    };
    let Some(frames) = spec.params.get("frames") else {
        return false;
    };
    let default = match spec.check.as_str() {
        "target_bounds" => "labels",
        _ => "input_ids",
    };
    let role = spec.params.get("tensor").map_or(default, String::as_str);
    Frames::parse(frames).implicate(role)
}

/// The keys and parameters an inconclusive summary names.
fn wanted(summary: &str) -> Vec<String> {
    NEEDS
        .iter()
        .flat_map(|pattern| pattern.captures_iter(summary))
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str().trim_end_matches('.').to_owned())
        .filter(|key| !matches!(key.as_str(), "it" | "tensor" | "them"))
        .collect()
}

/// The summary as lines for people: the decided causes, the not-checked line, the verdict.
pub fn lines(summary: &ReplaySummary) -> Vec<String> {
    let mut lines: Vec<String> = summary
        .decided
        .iter()
        .map(|d| format!("{}: {} — {}", word(d.verdict), d.summary, d.cause))
        .collect();
    // After the confirmed causes, before the refuted ones.
    let at = summary
        .decided
        .iter()
        .take_while(|d| d.verdict == Verdict::Confirmed)
        .count();
    for (i, o) in summary.observations.iter().enumerate() {
        let consistent = if o.causes.len() == 1 {
            format!("consistent with it, not confirmed: {}", o.causes.join(""))
        } else {
            format!(
                "consistent with it, the data does not tell them apart: {}",
                o.causes.join("; ")
            )
        };
        lines.insert(at + i, format!("confirmed: {} — {consistent}", o.summary));
    }
    if !summary.not_checked.is_empty() {
        let needs = if summary.needs.is_empty() {
            String::new()
        } else {
            format!("; they need {}", summary.needs.join(", "))
        };
        lines.push(format!(
            "not checked ({}): {}{needs}",
            summary.not_checked.len(),
            summary.not_checked.join("; ")
        ));
    }
    lines.push(format!("verdict for the diagnosis: {}", word(summary.verdict)));
    lines
}

/// `confirmed`, `refuted`, `inconclusive`.
pub fn word(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Confirmed => "confirmed",
        Verdict::Refuted => "refuted",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Consistent => "consistent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cause, ReplayOutcome};

    fn cause(title: &str, verdict: Verdict, summary: &str) -> Cause {
        Cause {
            title: title.into(),
            detail: Default::default(),
            replay: None,
            outcome: Some(ReplayOutcome {
                verdict,
                summary: summary.into(),
                backend: "cpu".into(),
            }),
        }
    }

    fn diagnosis(causes: Vec<Cause>) -> Diagnosis {
        let mut d: Diagnosis = serde_json::from_str(
            r#"{"format_version": 1, "lines": 1, "bytes": 1, "findings": [{"rule": "r", "class": "c",
                "title": "t", "summary": "s", "severity": "error", "role": "root", "confidence": "high",
                "priority": 1, "evidence": [], "causes": [], "fixes": []}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        d.findings[0].causes = causes;
        d
    }

    #[test]
    fn a_confirmed_cause_comes_first_and_confirms_the_diagnosis() {
        let s = summarize(&diagnosis(vec![
            cause("Wrong padding", Verdict::Refuted, "no -1 in labels"),
            cause(
                "Labels >= num_classes",
                Verdict::Confirmed,
                "labels[3] = 2 >= num_classes = 2",
            ),
            cause(
                "Token ids",
                Verdict::Inconclusive,
                "no input_ids tensor; add vocab_size to the metadata",
            ),
        ]))
        .unwrap_or_else(|| panic!("no summary"));
        assert_eq!(s.verdict, Verdict::Confirmed);
        assert_eq!(s.decided[0].cause, "Labels >= num_classes");
        assert_eq!(s.decided[1].verdict, Verdict::Refuted);
        assert_eq!(s.not_checked, vec!["Token ids".to_owned()]);
        assert_eq!(s.needs, vec!["vocab_size".to_owned()]);
    }

    #[test]
    fn the_diagnosis_is_refuted_only_when_no_cause_went_unchecked() {
        let refuted = vec![
            cause("A", Verdict::Refuted, "fine"),
            cause("B", Verdict::Refuted, "fine"),
        ];
        let s = summarize(&diagnosis(refuted)).unwrap_or_else(|| panic!("no summary"));
        assert_eq!(s.verdict, Verdict::Refuted);
        let partly = vec![
            cause("A", Verdict::Refuted, "fine"),
            cause(
                "B",
                Verdict::Inconclusive,
                "positions not checked: add max_position_embeddings or n_positions to the metadata or --param max_position_embeddings=N",
            ),
        ];
        let s = summarize(&diagnosis(partly)).unwrap_or_else(|| panic!("no summary"));
        assert_eq!(s.verdict, Verdict::Inconclusive);
        assert_eq!(s.needs, vec!["max_position_embeddings".to_owned()]);
    }

    #[test]
    fn the_not_checked_line_lists_what_would_let_each_cause_run() {
        let s = summarize(&diagnosis(vec![
            cause("Token ids", Verdict::Inconclusive, "no input_ids tensor in the snapshot; name it with --param tensor=NAME or the metadata key role.input_ids"),
            cause("BCE inputs", Verdict::Inconclusive, "no input tensor; name it with --param tensor=NAME or the metadata key role.input"),
        ]))
        .unwrap_or_else(|| panic!("no summary"));
        let text = lines(&s).join("\n");
        assert_eq!(
            text,
            "not checked (2): Token ids; BCE inputs; they need role.input, role.input_ids\nverdict for the diagnosis: inconclusive"
        );
    }

    #[test]
    fn a_confirmation_causes_share_is_one_observation_and_confirms_none_of_them() {
        let seen = "labels[5] = 50257 >= vocab_size = 50257 (3 of 64 values out of range)";
        let s = summarize(&diagnosis(vec![
            cause("Head narrower than the labels", Verdict::Consistent, seen),
            cause("Labels numbered from 1", Verdict::Consistent, seen),
            cause("Wrong padding", Verdict::Refuted, "no -1 in labels"),
        ]))
        .unwrap_or_else(|| panic!("no summary"));
        assert_eq!(s.verdict, Verdict::Confirmed);
        assert_eq!(s.decided.len(), 1);
        assert_eq!(s.observations.len(), 1);
        assert_eq!(
            lines(&s),
            vec![
                format!(
                    "confirmed: {seen} — consistent with it, the data does not tell them apart: Head narrower than the labels; Labels numbered from 1"
                ),
                "refuted: no -1 in labels — Wrong padding".to_owned(),
                "verdict for the diagnosis: confirmed".to_owned(),
            ]
        );
    }

    #[test]
    fn a_diagnosis_no_check_ran_on_has_no_summary() {
        let mut d = diagnosis(vec![]);
        d.findings[0].causes.push(Cause {
            title: "x".into(),
            detail: Default::default(),
            replay: None,
            outcome: None,
        });
        assert!(summarize(&d).is_none());
    }
}
