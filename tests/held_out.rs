//! Real logs the rule base was not written from: over 1,880 cases from public issue threads (each
//! names its source), collected in rounds after the rules to check that they describe failures,
//! not samples: every class of the taxonomy, traps where the visible error is not the root cause,
//! other runtimes and formats, and decoys whose logs mention CUDA without a GPU cause. See
//! tests/fixtures/README.md.

use faultline::diagnose::analyze_str;
use faultline::eval::{judge, read_cases, report};
use faultline::rules::RuleSet;

#[test]
fn real_logs_the_rules_were_not_written_from_are_diagnosed_and_never_confidently_wrong() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/corpus/held_out.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let cases = read_cases(&text, path).unwrap_or_else(|e| panic!("{e}"));
    assert!(cases.len() >= 1_880, "{} cases", cases.len());
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let predictions = cases
        .iter()
        .map(|case| judge(case, &analyze_str(&rules, &case.log)))
        .collect();
    let report = report(predictions, &cases);
    let misses: Vec<(&str, &[String])> = report
        .predictions
        .iter()
        .filter(|p| !p.top1)
        .map(|p| (p.id.as_str(), p.classes.as_slice()))
        .collect();
    assert_eq!(report.confident_wrong, 0, "{}", report.summary_line());
    assert!(
        report.top1 >= 0.97,
        "{}; missed: {misses:?}",
        report.summary_line()
    );
}
