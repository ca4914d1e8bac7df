//! Every rule's examples, as `faultline rules test` runs them: a failure names the rule file and
//! the example.

use faultline::rulecheck::examples::run_examples;
use faultline::rules::RuleSet;

#[test]
fn every_rule_example_holds() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let report = run_examples(&rules);
    let failures: Vec<String> = report.failures.iter().map(ToString::to_string).collect();
    assert!(
        failures.is_empty(),
        "{} failing example(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        report.run >= 2 * rules.rules().len(),
        "every rule has a positive and a negative example"
    );
}
