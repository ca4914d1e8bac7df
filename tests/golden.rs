//! Golden tests: every log in tests/fixtures/logs parses to the events recorded in
//! tests/snapshots, and gets the diagnosis recorded there (each finding's rule, class, role and
//! confidence, in rank order), so that a parser or ranking change shows in review. Review changes
//! with `INSTA_UPDATE=always cargo test --test golden` and a diff.

use std::path::Path;

fn fixture_logs() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/logs");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "txt"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn every_fixture_log_parses_to_its_recorded_events() {
    let logs = fixture_logs();
    assert!(logs.len() >= 10, "fixtures missing: {logs:?}");
    for path in logs {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let parsed = faultline::parse::parse_bytes(&bytes);
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("log")
            .to_owned();
        insta::assert_json_snapshot!(format!("parse_{name}"), parsed);
    }
}

/// What a reviewer reads of a diagnosis: its findings in rank order.
#[derive(serde::Serialize)]
struct FindingLine {
    rule: String,
    class: String,
    role: faultline::model::Role,
    confidence: faultline::model::Confidence,
}

#[test]
fn every_fixture_log_gets_its_recorded_diagnosis() {
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    for path in fixture_logs() {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let diagnosis = faultline::diagnose::analyze_str(&rules, &text);
        let findings: Vec<FindingLine> = diagnosis
            .findings
            .iter()
            .map(|f| FindingLine {
                rule: f.rule.clone(),
                class: f.class.clone(),
                role: f.role,
                confidence: f.confidence,
            })
            .collect();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("log")
            .to_owned();
        insta::assert_json_snapshot!(format!("diagnosis_{name}"), findings);
    }
}
