//! Fuzzes the whole analysis with the embedded rule base: any bytes in, no panic out, and a
//! diagnosis that stays inside the log, is ranked, reads back from its JSON and renders in every
//! output format.
#![no_main]

use std::sync::OnceLock;

use faultline::model::{Diagnosis, Role};
use faultline::rules::RuleSet;
use libfuzzer_sys::fuzz_target;

fn rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(|| RuleSet::embedded().unwrap_or_else(|e| panic!("the embedded rule base: {e}")))
}

fn role_order(role: Role) -> u8 {
    match role {
        Role::Root => 0,
        Role::Symptom => 1,
        Role::Context => 2,
    }
}

fuzz_target!(|data: &[u8]| {
    let diagnosis = faultline::diagnose::analyze_bytes(rules(), data).diagnosis;
    assert_eq!(diagnosis.bytes, data.len() as u64, "bytes counted");
    for finding in &diagnosis.findings {
        for evidence in &finding.evidence {
            assert!(
                1 <= evidence.line && evidence.line <= diagnosis.lines,
                "evidence line {} of {} lines in {}",
                evidence.line,
                diagnosis.lines,
                finding.rule
            );
        }
    }
    if let Some(error) = &diagnosis.unexplained_error {
        assert!(1 <= error.line && error.line <= diagnosis.lines, "unexplained error {error:?}");
    }
    let roles: Vec<u8> = diagnosis.findings.iter().map(|f| role_order(f.role)).collect();
    assert!(roles.is_sorted(), "root causes, then symptoms, then context: {roles:?}");
    assert_eq!(
        diagnosis.fingerprint.is_some(),
        !diagnosis.findings.is_empty(),
        "a fingerprint exactly when something was found"
    );

    let json = faultline::output::json(&diagnosis);
    let read_back: Diagnosis = serde_json::from_str(&json).unwrap_or_else(|e| panic!("the JSON reads back: {e}"));
    assert_eq!(read_back, diagnosis, "JSON round trip");
    let sarif = faultline::output::sarif(&diagnosis, "fuzz.log");
    serde_json::from_str::<serde_json::Value>(&sarif).unwrap_or_else(|e| panic!("SARIF is JSON: {e}"));
    let _ = faultline::output::human(&diagnosis, "fuzz.log");
    let _ = faultline::output::github_annotations(&diagnosis, "fuzz.log");
});
