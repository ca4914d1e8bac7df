//! Every rule's examples, as `faultline rules test` runs them: a failure names the rule file and
//! the example. And the rule patterns as the line set runs them: cheap, and matching the same
//! lines. And where the rule language reads a rule's extracted values.

use std::borrow::Cow;

use faultline::diagnose::analyze_str;
use faultline::normalize::Normalizer;
use faultline::rulecheck::cost::unguarded_loop;
use faultline::rulecheck::examples::run_examples;
use faultline::rules::{RuleFile, RuleSet};
use faultline::scan::set_form;
use regex_syntax::hir::Hir;

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

/// Every line of every rule example, normalized as the analysis reads it.
fn example_lines(rules: &RuleSet) -> Vec<String> {
    let mut normalizer = Normalizer::new();
    rules
        .rules()
        .iter()
        .flat_map(|r| &r.examples)
        .flat_map(|e| e.log.lines())
        .map(|raw| normalizer.normalize(0, raw.as_bytes()).text.to_owned())
        .collect()
}

#[test]
fn no_rule_pattern_keeps_the_line_set_under_way_in_every_word() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let table = rules.patterns();
    let costly: Vec<&str> = (0..table.len())
        .filter(|&p| unguarded_loop(&set_form(table.hir(p))).is_some())
        .map(|p| table.source(p))
        .collect();
    assert!(
        costly.is_empty(),
        "patterns that can loop over a wide class before a literal (`faultline rules lint` says more): {costly:#?}"
    );
}

#[test]
fn the_line_set_runs_each_pattern_in_a_form_that_matches_the_same_example_lines() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let table = rules.patterns();
    let lines = example_lines(&rules);
    let compile = |hir: &Hir| {
        regex::bytes::RegexBuilder::new(&hir.to_string())
            .unicode(false)
            .build()
            .unwrap_or_else(|e| panic!("{hir}: {e}"))
    };
    let mut changed = 0;
    for p in 0..table.len() {
        let form = set_form(table.hir(p));
        if matches!(form, Cow::Borrowed(_)) {
            continue;
        }
        changed += 1;
        let (whole, reduced) = (compile(table.hir(p)), compile(&form));
        for line in &lines {
            assert_eq!(
                whole.is_match(line.as_bytes()),
                reduced.is_match(line.as_bytes()),
                "{} on {line:?}",
                table.source(p)
            );
        }
    }
    assert!(changed > 0, "some patterns have a loop to cut");
}

fn rule_file(relative: &str, text: &str) -> RuleFile {
    RuleFile {
        relative: relative.to_owned(),
        display: format!("rules/{relative}"),
        text: text.to_owned(),
    }
}

#[test]
fn an_extracted_value_comes_from_the_finding_s_own_line_when_one_holds_it_else_from_the_first() {
    let taxonomy = rule_file(
        "taxonomy.toml",
        "[[class]]\nid = \"cuda.oom\"\ndescription = \"GPU memory exhausted.\"\n",
    );
    let rule = rule_file(
        "test/oom.toml",
        r#"
id = "test.oom"
class = "cuda.oom"
title = "Out of memory"
summary = "{detail|}"
severity = "error"
priority = 50
role = "root"
confidence = "high"

[match]
any = ['CUDA out of memory']

[extract]
detail = '(?i)(tried\b.*)'
steps = 'max_steps=(\d+)'

[[cause]]
title = "Batch too large"
detail = "Lower the batch size."

[[fix]]
title = "Halve the batch size"

[[example]]
name = "torch OOM"
log = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"
expect = { matched = true }
"#,
    );
    let set = RuleSet::from_files(&taxonomy, &[rule], "test").unwrap_or_else(|e| panic!("{e}"));
    let log = "config: max_steps=500\nnote: tried a warm-up run first\nRuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n";
    let diagnosis = analyze_str(&set, log);
    let finding = diagnosis
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {diagnosis:?}"));
    assert_eq!(
        finding.captures.get("detail").map(String::as_str),
        Some("Tried to allocate 20.00 MiB"),
        "the error line holds a detail: it is read there, not from the note before it"
    );
    assert_eq!(
        finding.captures.get("steps").map(String::as_str),
        Some("500"),
        "no line of the finding holds a step count: the log's first is read"
    );
}

/// A rule of the NaN class for a loop that stops on a non-finite loss, `fatal_warning` as given.
fn nan_rule(fatal_warning: bool) -> RuleSet {
    let taxonomy = rule_file(
        "taxonomy.toml",
        "[[class]]\nid = \"torch.nan_inf\"\ndescription = \"NaN or inf.\"\n",
    );
    let rule = rule_file(
        "test/nan.toml",
        &format!(
            r#"
id = "test.nan"
class = "torch.nan_inf"
title = "Training stopped on a non-finite loss"
summary = "The loop stopped."
severity = "error"
priority = 50
role = "root"
confidence = "medium"

[match]
any = ['non-finite loss, ending training']
fatal_warning = {fatal_warning}

[[cause]]
title = "Divergence"
detail = "The learning rate is too high."

[[fix]]
title = "Lower the learning rate"

[[example]]
name = "the loop's warning"
log = "non-finite loss, ending training"
expect = {{ matched = true }}
"#
        ),
    );
    RuleSet::from_files(&taxonomy, &[rule], "test").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_warning_that_reports_the_run_stopped_keeps_its_confidence_only_where_the_rule_says_so() {
    let log = "2026-11-27 10:00:00,123 - WARNING - non-finite loss, ending training\n";
    let confidence = |fatal| {
        let diagnosis = analyze_str(&nan_rule(fatal), log);
        diagnosis.findings.first().map(|f| f.confidence)
    };
    assert_eq!(confidence(true), Some(faultline::model::Confidence::Medium));
    assert_eq!(confidence(false), Some(faultline::model::Confidence::Low));
}
