//! Real failures produced on a GPU: the job logs and snapshots in tests/fixtures/device were
//! written by `tests/device/failures.py` on an NVIDIA H100 (torch 2.11.0+cu130, transformers
//! 5.17, driver 580.159.04; see tests/fixtures/device/README.md). Each log is diagnosed as the
//! failure it is, and each snapshot the capture helper saved confirms the cause on the CPU twin,
//! with the offending values, and confirms nothing else.

use std::path::PathBuf;

use faultline::diagnose::analyze_str;
use faultline::model::{Confidence, Diagnosis, Role, Verdict};
use faultline::replay::cpu::Cpu;
use faultline::replay::{Limits, Snapshot, replay_diagnosis};
use faultline::rules::RuleSet;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/device")
        .join(name)
}

fn diagnose(case: &str) -> Diagnosis {
    let path = fixture(&format!("{case}.log"));
    let log = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    analyze_str(&rules, &log)
}

/// Every log, the class and rule of its root cause.
const DIAGNOSES: [(&str, &str, &str); 11] = [
    (
        "classifier_labels_out_of_range",
        "cuda.device_assert.target",
        "assert.class_target",
    ),
    (
        "nll_labels_out_of_range_blocking",
        "cuda.device_assert.target",
        "assert.class_target",
    ),
    (
        "hf_token_id_past_the_embedding",
        "cuda.device_assert.index",
        "assert.embedding_gather",
    ),
    (
        "embedding_then_matmul_without_blocking",
        "cuda.device_assert.index",
        "assert.embedding_gather",
    ),
    (
        "gather_index_past_the_dimension",
        "cuda.device_assert.index",
        "assert.index_kernel",
    ),
    (
        "bce_on_logits_not_probabilities",
        "cuda.device_assert.target",
        "assert.bce_input",
    ),
    (
        "input_left_on_the_cpu",
        "torch.device_mismatch",
        "torch.device_mismatch",
    ),
    (
        "half_weights_float_input",
        "torch.dtype_mismatch",
        "torch.dtype_mismatch",
    ),
    (
        "shapes_that_do_not_multiply",
        "torch.shape_mismatch",
        "torch.shape_matmul",
    ),
    (
        "allocation_larger_than_the_card",
        "cuda.oom",
        "oom.larger_than_gpu",
    ),
    (
        "nan_found_by_anomaly_detection",
        "torch.nan_inf",
        "torch.nan_anomaly",
    ),
];

#[test]
fn every_real_gpu_failure_is_diagnosed_as_what_it_is_with_high_confidence() {
    for (case, class, rule) in DIAGNOSES {
        let diagnosis = diagnose(case);
        let top = diagnosis
            .findings
            .first()
            .unwrap_or_else(|| panic!("{case}: no finding"));
        assert_eq!((top.class.as_str(), top.rule.as_str()), (class, rule), "{case}");
        assert_eq!(
            (top.role, top.confidence),
            (Role::Root, Confidence::High),
            "{case}"
        );
        let other_roots: Vec<&str> = diagnosis.findings[1..]
            .iter()
            .filter(|f| f.role == Role::Root)
            .map(|f| f.rule.as_str())
            .collect();
        assert!(
            other_roots.is_empty(),
            "{case}: other root causes {other_roots:?}"
        );
    }
}

/// Every snapshot, the start of what confirms the root cause, and the checks that may confirm
/// a cause of any finding (the values at fault fail them; a check about other values must not).
const CONFIRMATIONS: [(&str, &str, &[&str]); 6] = [
    (
        "classifier_labels_out_of_range",
        "labels[3] = 2 >= num_classes = 2 (2 of 64 values out of range",
        &["target_bounds", "index_bounds"],
    ),
    (
        "nll_labels_out_of_range_blocking",
        "labels[31] = 5 >= num_classes = 5 (1 of 32 values out of range",
        &["target_bounds", "index_bounds"],
    ),
    (
        "hf_token_id_past_the_embedding",
        "input_ids[1, 7] = 1000 >= num_embeddings = 1000 (2 of 192 values out of range",
        &["index_bounds"],
    ),
    (
        "embedding_then_matmul_without_blocking",
        "input_ids[5, 60] = 500 >= vocab_size = 500 (1 of 512 values out of range",
        &["index_bounds"],
    ),
    (
        "gather_index_past_the_dimension",
        "labels[9] = 10 >= num_classes = 10 (1 of 16 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "bce_on_logits_not_probabilities",
        "scores[0] = -0.22993287 < 0 (110 of 128 values outside [0, 1] or NaN",
        &["value_range"],
    ),
];

/// A cause whose check other causes of its finding share is `consistent` with the confirmed
/// observation, not confirmed alone (the data shows labels out of range, not why): either counts.
#[test]
fn the_snapshot_saved_at_each_failure_confirms_its_cause_or_the_observation_its_causes_share() {
    for (case, summary, checks) in CONFIRMATIONS {
        let path = fixture(&format!("{case}.safetensors"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let snapshot =
            Snapshot::from_bytes(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut diagnosis = diagnose(case);
        replay_diagnosis(&mut diagnosis, &snapshot, &Cpu::new());
        let top = &diagnosis.findings[0];
        let confirmed = top.causes.iter().find(|c| {
            c.outcome
                .as_ref()
                .is_some_and(|o| matches!(o.verdict, Verdict::Confirmed | Verdict::Consistent))
        });
        assert_eq!(
            diagnosis.replay.as_ref().map(|r| r.verdict),
            Some(Verdict::Confirmed),
            "{case}: the diagnosis's replay verdict"
        );
        let Some(cause) = confirmed else {
            panic!(
                "{case}: no cause of {} confirmed or consistent: {:#?}",
                top.rule, top.causes
            );
        };
        let outcome = cause
            .outcome
            .as_ref()
            .map(|o| o.summary.as_str())
            .unwrap_or_else(|| panic!("{case}: the confirmed cause has no outcome: {cause:#?}"));
        assert!(outcome.starts_with(summary), "{case}: {outcome}");
        for finding in &diagnosis.findings {
            for c in &finding.causes {
                let (Some(spec), Some(o)) = (&c.replay, &c.outcome) else {
                    continue;
                };
                assert!(
                    o.verdict != Verdict::Confirmed || checks.contains(&spec.check.as_str()),
                    "{case}: {} confirmed by {}: {}",
                    c.title,
                    spec.check,
                    o.summary
                );
            }
        }
    }
}
