//! Running every rule's examples against the whole rule set: the rules' own tests.
//! `faultline rules test` and `cargo test` (tests/rules.rs) both call [`run_examples`].

use std::fmt;

use crate::diagnose::analyze_str;
use crate::rules::RuleSet;

/// An example whose expectation did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleFailure {
    /// Rule file.
    pub file: String,
    /// Rule id.
    pub rule: String,
    /// Example name.
    pub example: String,
    /// What went wrong.
    pub problem: String,
}

impl fmt::Display for ExampleFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: rule {}: example {:?}: {}",
            self.file, self.rule, self.example, self.problem
        )
    }
}

/// The outcome of running the examples.
#[derive(Debug, Clone, Default)]
pub struct ExampleReport {
    /// Examples run.
    pub run: usize,
    /// Those that failed.
    pub failures: Vec<ExampleFailure>,
}

/// Runs every example of every rule.
pub fn run_examples(rules: &RuleSet) -> ExampleReport {
    let mut report = ExampleReport::default();
    for rule in rules.rules() {
        for example in &rule.examples {
            report.run += 1;
            let diagnosis = analyze_str(rules, &example.log);
            let position = diagnosis.findings.iter().position(|f| f.rule == rule.id);
            let fail = |problem: String| ExampleFailure {
                file: rule.file.clone(),
                rule: rule.id.clone(),
                example: example.name.clone(),
                problem,
            };
            let found: Vec<&str> = diagnosis.findings.iter().map(|f| f.rule.as_str()).collect();
            match (example.expect.matched, position) {
                (true, None) => report
                    .failures
                    .push(fail(format!("expected a match, got none (found: {found:?})"))),
                (false, Some(_)) => report
                    .failures
                    .push(fail("expected no match, but the rule matched".into())),
                (false, None) => {}
                (true, Some(i)) => {
                    if example.expect.primary && i != 0 {
                        report.failures.push(fail(format!(
                            "expected the primary finding, but {} ranks first (order: {found:?})",
                            found[0]
                        )));
                    }
                    let captures = &diagnosis.findings[i].captures;
                    for (name, want) in &example.expect.captures {
                        match captures.get(name) {
                            Some(got) if got == want => {}
                            Some(got) => report
                                .failures
                                .push(fail(format!("capture {name}: expected {want:?}, got {got:?}"))),
                            None => report
                                .failures
                                .push(fail(format!("capture {name}: expected {want:?}, got nothing"))),
                        }
                    }
                }
            }
        }
    }
    report
}
