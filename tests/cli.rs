//! The `faultline` binary as CI jobs use it: formats, exit codes, errors on bad input.
//! These tests run against the small rule base in tests/fixtures/rules so that they do not move
//! when the real rule base grows.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

const OOM_LOG: &str = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n";

fn fixture_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rules")
}

/// `path` as the `&str` an argument list takes; panics on a path that is not UTF-8 rather than
/// passing an empty argument.
fn utf8(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("not a UTF-8 path: {}", path.display()))
}

/// The text of a fixture file; panics naming the file when it cannot be read.
fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn faultline(args: &[&str], stdin: &str) -> Output {
    support::run_with_stdin(args, stdin)
}

fn analyze(format: &str, log: &str) -> Output {
    let rules = fixture_rules();
    faultline(
        &["analyze", "--rules", utf8(&rules), "--format", format, "-"],
        log,
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_diagnosed_log_exits_0_and_json_names_the_rule_class_and_evidence() {
    let out = analyze("json", OOM_LOG);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("not JSON: {e}"));
    let top = &doc["findings"][0];
    assert_eq!(top["rule"], "demo.oom");
    assert_eq!(top["class"], "cuda.oom");
    assert_eq!(top["role"], "root");
    assert_eq!(top["confidence"], "high");
    assert_eq!(top["evidence"][0]["line"], 3);
    assert_eq!(top["captures"]["oom_tried"], "1.95 GiB");
    assert!(top["causes"].as_array().is_some_and(|c| !c.is_empty()));
    assert!(top["fixes"].as_array().is_some_and(|f| !f.is_empty()));
    assert!(top["next_artifact"].is_string());
    assert!(doc["fingerprint"].as_str().is_some_and(|f| f.len() == 16));
}

#[test]
fn a_log_with_nothing_known_exits_1() {
    let out = analyze("human", "Epoch 1 loss 0.2\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("No known GPU / PyTorch failure"));
}

#[test]
fn human_output_puts_the_root_cause_first_with_its_fix() {
    let out = analyze(
        "human",
        &format!("RuntimeError: CUDA error: device-side assert triggered\n{OOM_LOG}"),
    );
    let text = stdout(&out);
    let root = text.find("ROOT CAUSE").unwrap_or(usize::MAX);
    assert!(
        text[root..].starts_with("ROOT CAUSE [high confidence] The GPU ran out of memory"),
        "{text}"
    );
    assert!(text.contains("Halve the batch size"), "{text}");
}

#[test]
fn github_annotations_are_workflow_commands() {
    let out = analyze("github", OOM_LOG);
    let text = stdout(&out);
    assert!(
        text.starts_with("::error line=3,title=faultline root cause%3A The GPU ran out of memory::"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
}

#[test]
fn sarif_output_is_sarif_2_1_0() {
    let out = analyze("sarif", OOM_LOG);
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "faultline");
    assert_eq!(run["results"][0]["ruleId"], "demo.oom");
    assert_eq!(run["results"][0]["level"], "error");
    assert_eq!(
        run["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        3
    );
}

#[test]
fn a_missing_file_exits_2_with_a_message() {
    let out = faultline(&["analyze", "/no/such/log.txt"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot open /no/such/log.txt"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directory_given_as_the_log_exits_2() {
    let out = faultline(&["parse", env!("CARGO_MANIFEST_DIR")], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is a directory"));
}

#[test]
fn an_unknown_flag_exits_2() {
    let out = faultline(&["analyze", "--colour"], "");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_broken_rule_directory_exits_2_naming_file_rule_and_field() {
    let dir = tempdir("broken-rules");
    std::fs::create_dir_all(dir.join("demo")).unwrap_or_else(|e| panic!("{e}"));
    let taxonomy = read(&fixture_rules().join("taxonomy.toml"));
    std::fs::write(dir.join("taxonomy.toml"), taxonomy).unwrap_or_else(|e| panic!("{e}"));
    let rule = read(&fixture_rules().join("demo/assert.toml"));
    std::fs::write(
        dir.join("demo/assert.toml"),
        rule.replace("device-side assert triggered", "device-side (assert"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = faultline(&["analyze", "--rules", utf8(&dir), "-"], "x");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("demo/assert.toml: rule demo.assert: match.any[0]: invalid regex"),
        "{err}"
    );
}

#[test]
fn rules_test_passes_on_the_fixture_rules_and_names_a_failing_example() {
    let rules = fixture_rules();
    let out = faultline(&["rules", "test", "--rules", utf8(&rules)], "");
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("2 rule(s), 4 example(s), 0 failure(s)"));

    let dir = tempdir("failing-example");
    std::fs::create_dir_all(dir.join("demo")).unwrap_or_else(|e| panic!("{e}"));
    let taxonomy = read(&rules.join("taxonomy.toml"));
    std::fs::write(dir.join("taxonomy.toml"), taxonomy).unwrap_or_else(|e| panic!("{e}"));
    let oom = read(&rules.join("demo/oom.toml"));
    std::fs::write(
        dir.join("demo/oom.toml"),
        oom.replace("oom_tried = \"1.95 GiB\"", "oom_tried = \"2 GiB\""),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = faultline(&["rules", "test", "--rules", utf8(&dir)], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("demo/oom.toml: rule demo.oom: example \"torch 2 OOM\": capture oom_tried: expected \"2 GiB\", got \"1.95 GiB\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn eval_ends_with_the_machine_readable_line() {
    let dir = tempdir("eval");
    let corpus = dir.join("cases.jsonl");
    let cases = [
        serde_json::json!({"id": "a", "label": "cuda.oom", "also": [], "log": OOM_LOG}),
        serde_json::json!({"id": "b", "label": "none", "also": [], "log": "all good"}),
    ];
    let text: String = cases.iter().map(|c| format!("{c}\n")).collect();
    std::fs::write(&corpus, text).unwrap_or_else(|e| panic!("{e}"));
    let rules = fixture_rules();
    let out = faultline(&["eval", "--rules", utf8(&rules), utf8(&corpus)], "");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text.lines().last(),
        Some("eval: n=2 top1=1.000 top3=1.000 confident_wrong=0"),
        "{text}"
    );
}

#[test]
fn parse_prints_json_events_with_line_spans() {
    let out = faultline(&["parse", "--format", "json", "-"], OOM_LOG);
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(doc["lines"], 3);
    let kinds: Vec<&str> = doc["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"traceback") && kinds.contains(&"oom"),
        "{kinds:?}"
    );
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("faultline-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}
