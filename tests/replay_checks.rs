//! Replay checks end to end: a diagnosis of a real log updated by a snapshot, the rule base's
//! replay parts linted, and `faultline replay` run on safetensors files.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use faultline::model::{Diagnosis, EvidenceTier, Verdict};
use faultline::replay::cpu::Cpu;
use faultline::replay::snapshot::Format;
use faultline::replay::{DType, Snapshot, replay_diagnosis};
use faultline::rulecheck::lint::{LintLevel, lint};
use faultline::rules::RuleSet;
use safetensors::tensor::{Dtype, TensorView};

fn rules() -> RuleSet {
    RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"))
}

fn diagnose(fixture: &str) -> Diagnosis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/logs")
        .join(fixture);
    let log = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    faultline::diagnose::analyze_str(&rules(), &log)
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn labels_snapshot(labels: &[i64], num_classes: &str) -> Snapshot {
    let params = BTreeMap::from([("num_classes".to_string(), num_classes.to_string())]);
    let tensors = vec![(
        "labels".to_string(),
        DType::I64,
        vec![labels.len() as u64],
        i64_bytes(labels),
    )];
    Snapshot::from_tensors(Format::Safetensors, tensors, params).unwrap_or_else(|e| panic!("{e}"))
}

const NLL_LOG: &str = "c0109_srun_nll_target.log";

#[test]
fn labels_at_num_classes_confirm_the_class_target_finding() {
    let mut diagnosis = diagnose(NLL_LOG);
    let snapshot = labels_snapshot(&[0, 1, 2, 1], "2");
    let results = replay_diagnosis(&mut diagnosis, &snapshot, &Cpu::new());
    let finding = diagnosis
        .findings
        .iter()
        .find(|f| f.rule == "assert.class_target");
    let Some(finding) = finding else {
        panic!("the NLL log is no longer diagnosed as assert.class_target");
    };
    assert_eq!(finding.tier, EvidenceTier::Confirmed);
    let outcome = finding.causes[0]
        .outcome
        .as_ref()
        .map(|o| (o.verdict, o.summary.as_str(), o.backend.as_str()));
    // The finding is confirmed; its first cause shares the observation with the others wired to
    // the same check, and labels 0..=2 tell none of them apart.
    assert_eq!(
        outcome,
        Some((
            Verdict::Consistent,
            "labels[2] = 2 >= num_classes = 2 (1 of 4 values out of range)",
            "cpu"
        ))
    );
    // Causes without a replay part keep no outcome.
    assert!(
        finding
            .causes
            .iter()
            .filter(|c| c.replay.is_none())
            .all(|c| c.outcome.is_none())
    );
    // The same target_bounds spec on several causes ran once.
    let target_runs = results.iter().filter(|r| r.check == "target_bounds").count();
    assert_eq!(target_runs, 1);
}

#[test]
fn labels_in_range_refute_the_class_target_finding() {
    let mut diagnosis = diagnose(NLL_LOG);
    replay_diagnosis(
        &mut diagnosis,
        &labels_snapshot(&[0, 1, -100, 1], "2"),
        &Cpu::new(),
    );
    let finding = diagnosis
        .findings
        .iter()
        .find(|f| f.rule == "assert.class_target");
    assert_eq!(finding.map(|f| f.tier), Some(EvidenceTier::Refuted));
}

#[test]
fn a_finding_with_causes_the_snapshot_cannot_check_keeps_its_pattern_tier() {
    // The generic assert also names the ids of the word, position and token-type tables, and
    // BCE's input, which this snapshot lacks.
    let mut diagnosis = diagnose(NLL_LOG);
    replay_diagnosis(&mut diagnosis, &labels_snapshot(&[0, 1], "2"), &Cpu::new());
    let generic = diagnosis.findings.iter().find(|f| f.rule == "assert.generic");
    let Some(generic) = generic else {
        panic!("the NLL log no longer has the generic assert finding");
    };
    assert_eq!(generic.tier, EvidenceTier::Pattern);
    let verdicts: Vec<Verdict> = generic
        .causes
        .iter()
        .filter_map(|c| c.outcome.as_ref())
        .map(|o| o.verdict)
        .collect();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Refuted,
            Verdict::Inconclusive,
            Verdict::Inconclusive,
            Verdict::Inconclusive,
            Verdict::Inconclusive
        ]
    );
}

const CUBLAS_LOG: &str = "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n";

#[test]
fn mixed_matmul_dtypes_confirm_the_dtype_cause_of_invalid_value_and_refute_the_others() {
    let mut diagnosis = faultline::diagnose::analyze_str(&rules(), CUBLAS_LOG);
    let zeros = |name: &str, dtype: DType, shape: Vec<u64>| {
        let bytes = vec![0; shape.iter().product::<u64>() as usize * dtype.size()];
        (name.to_string(), dtype, shape, bytes)
    };
    let snapshot = Snapshot::from_tensors(
        Format::Safetensors,
        vec![
            zeros("a", DType::F16, vec![8, 16]),
            zeros("b", DType::F32, vec![16, 4]),
        ],
        BTreeMap::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    replay_diagnosis(&mut diagnosis, &snapshot, &Cpu::new());
    let Some(finding) = diagnosis
        .findings
        .iter()
        .find(|f| f.rule == "cublas.invalid_value")
    else {
        panic!("the log is no longer diagnosed as cublas.invalid_value");
    };
    assert_eq!(finding.tier, EvidenceTier::Confirmed);
    let verdict_of = |title_start: &str| {
        finding
            .causes
            .iter()
            .find(|c| c.title.starts_with(title_start))
            .and_then(|c| c.outcome.as_ref())
            .map(|o| (o.verdict, o.summary.clone()))
            .unwrap_or_else(|| panic!("no replayed cause {title_start}"))
    };
    let (verdict, summary) = verdict_of("Operands with mixed");
    assert_eq!(verdict, Verdict::Confirmed, "{summary}");
    assert!(
        summary.contains("operand dtypes differ (float16 and float32)"),
        "{summary}"
    );
    assert_eq!(verdict_of("A stride or leading dimension").0, Verdict::Refuted);
    assert_eq!(verdict_of("A size beyond 32-bit").0, Verdict::Refuted);
}

#[test]
fn the_embedded_rules_name_only_known_checks_and_parameters() {
    let lints = lint(&rules());
    let replay: Vec<String> = lints
        .iter()
        .filter(|l| l.message.contains("replay"))
        .map(ToString::to_string)
        .collect();
    assert_eq!(replay, Vec::<String>::new());
}

#[test]
fn lint_reports_an_unknown_check_and_an_unknown_parameter() {
    let base = rules();
    let text = base
        .file_text("assert.bce_target")
        .unwrap_or_else(|| panic!("no assert.bce_target"));
    let broken = text
        .replacen("check = \"value_range\"", "check = \"ranges\"", 1)
        .replacen(
            "lo = \"0\", hi = \"1\" } }\n\n[[fix]]",
            "lo = \"0\", high = \"1\" } }\n\n[[fix]]",
            1,
        );
    let candidate = base.with_candidate(&broken).unwrap_or_else(|e| panic!("{e}"));
    let messages: Vec<String> = lint(&candidate)
        .into_iter()
        .filter(|l| l.level == LintLevel::Error && l.message.contains("replay"))
        .map(|l| l.message)
        .collect();
    assert_eq!(
        messages,
        vec![
            "cause[0].replay: unknown check \"ranges\"".to_string(),
            "cause[2].replay: check value_range has no parameter \"high\"".to_string(),
        ]
    );
}

/// A safetensors file in a fresh temporary folder.
fn safetensors_file(
    test: &str,
    tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)],
    metadata: &[(&str, &str)],
) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("faultline-replay-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = TensorView::new(*dtype, shape.clone(), bytes).unwrap_or_else(|e| panic!("{e}"));
            (name.to_string(), view)
        })
        .collect();
    let meta: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let bytes = safetensors::serialize(views, Some(meta)).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("snapshot.safetensors");
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn faultline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run faultline: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn labels_file(test: &str, labels: &[i64]) -> PathBuf {
    safetensors_file(
        test,
        &[("labels", Dtype::I64, vec![labels.len()], i64_bytes(labels))],
        &[("num_classes", "2")],
    )
}

#[test]
fn replay_json_has_the_verdict_and_the_first_offenses() {
    let file = labels_file("json", &[0, 1, 2, 1, 5]);
    let out = faultline(&[
        "replay",
        &file.to_string_lossy(),
        "--check",
        "target_bounds",
        "--format",
        "json",
        "--backend",
        "cpu",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(doc["verdict"], "confirmed");
    assert_eq!(
        doc["summary"],
        "labels[2] = 2 >= num_classes = 2 (2 of 5 values out of range)"
    );
    assert_eq!(doc["offending"], 2);
    assert_eq!(doc["first_offenses"][1]["index"][0], 4);
    assert_eq!(doc["first_offenses"][1]["value"], "5");
    assert_eq!(doc["backend"], "cpu");
}

#[test]
fn a_refuted_check_also_exits_0_and_a_param_overrides_the_metadata() {
    let file = labels_file("human", &[0, 1, 2]);
    let path = file.to_string_lossy();
    let out = faultline(&[
        "replay",
        &path,
        "--check",
        "target_bounds",
        "--param",
        "num_classes=3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("refuted: all 3 labels in [0, 3) or ignore_index -100"),
        "{stdout}"
    );
    assert!(
        stdout.contains("params: ignore_index=-100 num_classes=3 tensor=labels"),
        "{stdout}"
    );
}

#[test]
fn the_reproducer_names_the_snapshot_and_the_call() {
    let file = labels_file("reproducer", &[0, 3]);
    let out = faultline(&[
        "replay",
        &file.to_string_lossy(),
        "--check",
        "target_bounds",
        "--reproducer",
    ]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("load_file(\"snapshot.safetensors\")"), "{stdout}");
    assert!(
        stdout.contains("F.cross_entropy(logits, labels, ignore_index=-100)"),
        "{stdout}"
    );
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let file = labels_file("errors", &[0]);
    let path = file.to_string_lossy();
    for (args, message) in [
        (
            vec!["replay", "/nonexistent/snap.safetensors", "--check", "finite"],
            "cannot read /nonexistent/snap.safetensors",
        ),
        (
            vec!["replay", &*path, "--check", "bounds"],
            "unknown check \"bounds\"",
        ),
        (
            vec!["replay", &*path, "--check", "finite", "--param", "size=3"],
            "check finite has no parameter \"size\"",
        ),
        (
            vec![
                "replay",
                &*path,
                "--check",
                "target_bounds",
                "--param",
                "num_classes=two",
            ],
            "is not an integer",
        ),
        (
            vec!["replay", &*path, "--check", "finite", "--param", "nokey"],
            "is not KEY=VALUE",
        ),
        (
            vec!["replay", &*path, "--check", "finite", "--backend", "gpu"],
            "no GPU available",
        ),
    ] {
        let out = faultline(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(message),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let garbage = file.with_file_name("garbage.safetensors");
    std::fs::write(&garbage, b"not a snapshot").unwrap_or_else(|e| panic!("{e}"));
    let out = faultline(&["replay", &garbage.to_string_lossy(), "--check", "finite"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid snapshot"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn list_checks_prints_every_check_with_its_parameters() {
    let out = faultline(&["replay", "--list-checks"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for name in [
        "index_bounds:",
        "target_bounds:",
        "finite:",
        "value_range:",
        "consistency:",
        "gemm:",
        "ignore_index",
    ] {
        assert!(stdout.contains(name), "{name} missing from:\n{stdout}");
    }
}
