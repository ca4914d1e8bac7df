use super::*;
use crate::model::FindingOrigin;

const TAXONOMY: &str = r#"
[[class]]
id = "cuda.oom"
description = "GPU memory exhausted."
"#;

const GOOD: &str = r#"
id = "test.oom"
class = "cuda.oom"
title = "Out of memory"
summary = "Tried {oom_tried|more than was free}."
severity = "error"
priority = 50
role = "root"
confidence = "high"

[match]
any = ['CUDA out of memory']

[[cause]]
title = "Batch too large"
detail = "Lower the batch size."

[[fix]]
title = "Halve the batch size"

[[example]]
name = "torch OOM"
log = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"
expect = { matched = true }
"#;

fn file(relative: &str, text: &str) -> RuleFile {
    RuleFile {
        relative: relative.to_owned(),
        display: format!("rules/{relative}"),
        text: text.to_owned(),
    }
}

fn load(files: &[RuleFile]) -> Result<RuleSet, LoadErrors> {
    RuleSet::from_files(&file("taxonomy.toml", TAXONOMY), files, "test")
}

fn errors(files: &[RuleFile]) -> Vec<String> {
    match load(files) {
        Ok(_) => panic!("expected load errors"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_valid_rule_loads_with_its_patterns_interned() {
    let set = load(&[file("test/oom.toml", GOOD)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(set.rules().len(), 1);
    assert_eq!(set.patterns().len(), 1);
    assert!(set.rule("test.oom").is_some());
}

#[test]
fn an_invalid_regex_is_reported_with_file_rule_and_field() {
    let bad = GOOD.replace(
        "any = ['CUDA out of memory']",
        "any = ['ok', 'CUDA (out of memory']",
    );
    let errs = errors(&[file("test/oom.toml", &bad)]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("rules/test/oom.toml: rule test.oom: match.any[1]: invalid regex"),
        "{}",
        errs[0]
    );
}

#[test]
fn yields_to_takes_classes_and_a_rule_id_there_is_reported() {
    let with = |globs: &str| {
        GOOD.replace(
            "confidence = \"high\"",
            &format!("confidence = \"high\"\nyields_to = [{globs}]"),
        )
    };
    assert!(load(&[file("test/oom.toml", &with(r#""cuda.*", "cuda.oom""#))]).is_ok());
    let errs = errors(&[file("test/oom.toml", &with(r#""oom.gpu_oom""#))]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .starts_with("rules/test/oom.toml: rule test.oom: yields_to: \"oom.gpu_oom\" matches no class"),
        "{}",
        errs[0]
    );
}

#[test]
fn an_unknown_class_and_a_wrong_id_are_both_reported() {
    let bad = GOOD.replace("class = \"cuda.oom\"", "class = \"cuda.oops\"");
    let errs = errors(&[file("test/other_name.toml", &bad)]);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("id: must be \"test.other_name\"")));
    assert!(errs.iter().any(|e| e.contains("unknown class \"cuda.oops\"")));
}

#[test]
fn unknown_fields_are_syntax_errors_naming_the_file_and_the_position() {
    let bad = GOOD.replace("priority = 50", "priority = 50\npriorty = 3");
    let errs = errors(&[file("test/oom.toml", &bad)]);
    assert!(errs[0].starts_with("rules/test/oom.toml: "), "{}", errs[0]);
    assert!(errs[0].contains("priorty"), "{}", errs[0]);
}

#[test]
fn the_same_id_twice_is_an_error() {
    let errs = errors(&[file("test/oom.toml", GOOD), file("test/oom.toml", GOOD)]);
    assert!(errs[0].contains("defined twice"), "{errs:?}");
}

#[test]
fn bad_templates_versions_comparisons_and_facts_are_all_reported() {
    let bad = GOOD
        .replace("summary = \"Tried {oom_tried|more than was free}.\"", "summary = \"Tried {oom tried}.\"")
        .replace(
            "any = ['CUDA out of memory']",
            "any = ['CUDA out of memory']\nfact = 'shapes'\nversions = { torch = 'new' }\noom = { compare = ['tried > lots'] }",
        );
    let errs = errors(&[file("test/oom.toml", &bad)]);
    for field in [
        "summary",
        "match.fact",
        "match.versions.torch",
        "match.oom.compare[0]",
    ] {
        assert!(
            errs.iter().any(|e| e.contains(&format!(": {field}: "))),
            "{field} not in {errs:?}"
        );
    }
}

#[test]
fn a_rule_without_a_positive_example_is_an_error() {
    let bad = GOOD.replace("expect = { matched = true }", "expect = { matched = false }");
    let errs = errors(&[file("test/oom.toml", &bad)]);
    assert!(errs.iter().any(|e| e.contains(": example: ")), "{errs:?}");
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let err = RuleSet::load_dir(Path::new("/nonexistent/rules")).err();
    assert!(err.is_some_and(|e| e.to_string().contains("cannot read")));
}

#[test]
fn the_embedded_rule_base_loads() {
    let set = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    assert!(!set.rules().is_empty());
    assert_eq!(set.origin(), "embedded");
}

const DETECTOR: &str = r#"
id = "detect.memory_words"
class = "cuda.oom"
title = "Memory words"
summary = "Memory ran out."
severity = "error"
priority = 35
role = "root"
confidence = "medium"

[match]
any = ['(?i)out of memory']
same_line = ['(?i)\bgpu\b']

[[cause]]
title = "Too large"
detail = "Lower the batch size."

[[fix]]
title = "Halve the batch size"

[[example]]
name = "memory words and a GPU on one line"
log = "engine: out of memory on gpu 0"
expect = { matched = true }
"#;

#[test]
fn a_rule_under_detect_is_a_class_detector_whose_patterns_come_after_the_specific_rules() {
    let set = load(&[
        file("detect/memory_words.toml", DETECTOR),
        file("test/oom.toml", GOOD),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let origins: Vec<(&str, FindingOrigin)> = set.rules().iter().map(|r| (r.id.as_str(), r.origin)).collect();
    // Rules keep the order of their files; the specific rule's pattern takes the first id.
    assert_eq!(
        origins,
        vec![
            ("detect.memory_words", FindingOrigin::Detector),
            ("test.oom", FindingOrigin::Rule)
        ]
    );
    assert_eq!(set.patterns().source(0), "CUDA out of memory");
    assert!(set.has_detectors());
    assert!(set.detector_automata().is_ok());
}

#[test]
fn a_class_detector_is_never_high_always_a_root_and_reads_lines_only() {
    let bad = DETECTOR
        .replace("confidence = \"medium\"", "confidence = \"high\"")
        .replace("role = \"root\"", "role = \"symptom\"")
        .replace(
            "same_line = ['(?i)\\bgpu\\b']",
            "same_line = ['(?i)\\bgpu\\b']\ncuda_error = 'out of memory'",
        );
    let errs = errors(&[file("detect/memory_words.toml", &bad)]);
    for field in ["confidence", "role", "match"] {
        assert!(
            errs.iter().any(|e| e.starts_with(&format!(
                "rules/detect/memory_words.toml: rule detect.memory_words: {field}: "
            ))),
            "{field} not in {errs:?}"
        );
    }
    // The same rule outside detect/ is a specific rule, which may be all of these.
    let specific = bad.replace("detect.memory_words", "test.memory_words");
    assert!(load(&[file("test/memory_words.toml", &specific)]).is_ok());
}

#[test]
fn same_line_patterns_need_an_any_line_to_share() {
    let bad = DETECTOR.replace("any = ['(?i)out of memory']\n", "");
    let errs = errors(&[file("detect/memory_words.toml", &bad)]);
    assert!(errs.iter().any(|e| e.contains(": match.same_line: ")), "{errs:?}");
}
