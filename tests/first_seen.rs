//! The first-seen record: what faultline answered on each case of every blind round since round
//! 21, with the release build of the commit named beside it, before any rule was changed for that
//! round (`tests/fixtures/corpus/first_seen.jsonl`). That figure predicts the next user's log;
//! `held_out.rs` measures the same cases after their fixes. These tests keep the record, the
//! corpus and the figures published from it (the table in `benches/RESULTS.md`) in step.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;

mod support;

/// One case as its round's build answered it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FirstSeen {
    round: u32,
    build: String,
    id: String,
    /// The label the case was measured with.
    label: String,
    /// The class of the primary finding, if any.
    first: Option<String>,
    confidence: Option<String>,
    right: bool,
    confidently_wrong: bool,
}

/// A round's figures: cases, right at top-1, confidently wrong.
#[derive(Debug, Default, PartialEq, Eq)]
struct Figures {
    cases: u32,
    right: u32,
    confidently_wrong: u32,
}

/// Cases relabelled after their round was measured, each explained in benches/RESULTS.md.
const RELABELLED_AFTER_MEASURE: &[&str] = &["h34e010"];

fn record() -> Vec<FirstSeen> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/corpus/first_seen.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    text.lines()
        .enumerate()
        .map(|(i, line)| serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}:{}: {e}", i + 1)))
        .collect()
}

fn figures_by_round(record: &[FirstSeen]) -> BTreeMap<u32, Figures> {
    let mut rounds = BTreeMap::<u32, Figures>::new();
    for case in record {
        let figures = rounds.entry(case.round).or_default();
        figures.cases += 1;
        figures.right += u32::from(case.right);
        figures.confidently_wrong += u32::from(case.confidently_wrong);
    }
    rounds
}

/// The rows of RESULTS.md's first-seen table (its section on accuracy on logs nobody had seen): `| 44 | ids | 147 (132 projects) | 143 (97.3 %) | 0 |`.
fn published_figures() -> BTreeMap<u32, Figures> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/RESULTS.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let leading_number = |cell: &str| -> Option<u32> {
        cell.trim()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
    };
    let header = "| round | ids | cases | right at top-1, first seen | wrong (high) |";
    let table = text
        .split_once(header)
        .unwrap_or_else(|| panic!("{path} has no first-seen table ({header})"))
        .1;
    table
        .lines()
        .skip(2) // the rest of the header line and the separator
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.strip_prefix('|')?.split('|').collect();
            let [round, _ids, cases, right, wrong, ..] = cells.as_slice() else {
                return None;
            };
            Some((
                leading_number(round)?,
                Figures {
                    cases: leading_number(cases)?,
                    right: leading_number(right)?,
                    confidently_wrong: leading_number(wrong)?,
                },
            ))
        })
        .collect()
}

#[test]
fn every_round_s_published_figure_is_the_one_its_cases_record() {
    let published = published_figures();
    let recorded = figures_by_round(&record());
    assert!(recorded.len() >= 29, "{} rounds recorded", recorded.len());
    for (round, figures) in &recorded {
        assert_eq!(
            published.get(round),
            Some(figures),
            "round {round}: benches/RESULTS.md and first_seen.jsonl disagree"
        );
    }
}

#[test]
fn each_round_was_measured_with_one_build_and_each_case_once() {
    let record = record();
    let mut builds = BTreeMap::<u32, BTreeSet<&str>>::new();
    let mut ids = HashMap::<&str, u32>::new();
    for case in &record {
        builds.entry(case.round).or_default().insert(&case.build);
        if let Some(round) = ids.insert(&case.id, case.round) {
            panic!(
                "{} was measured in round {round} and again in round {}",
                case.id, case.round
            );
        }
    }
    for (round, used) in builds {
        assert_eq!(used.len(), 1, "round {round} names several builds: {used:?}");
    }
}

#[test]
fn confidently_wrong_means_high_confidence_and_a_labelled_case_is_right_only_with_an_answer() {
    for case in record() {
        if case.confidently_wrong {
            assert_eq!(case.confidence.as_deref(), Some("high"), "{case:?}");
            assert!(!case.right, "{case:?}");
        }
        if case.right && case.label != "none" {
            assert!(case.first.is_some(), "{case:?}");
        }
    }
}

#[test]
fn every_case_measured_first_is_kept_in_the_held_out_corpus_under_the_label_it_was_measured_with() {
    let labels: HashMap<String, String> = support::held_out_cases()
        .into_iter()
        .map(|case| (case.id, case.label))
        .collect();
    for case in record() {
        let kept = labels
            .get(&case.id)
            .unwrap_or_else(|| panic!("{} is not in held_out.jsonl", case.id));
        if !RELABELLED_AFTER_MEASURE.contains(&case.id.as_str()) {
            assert_eq!(kept, &case.label, "{} was relabelled", case.id);
        }
    }
}
