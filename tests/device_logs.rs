//! Real failures produced on a GPU: the job logs and snapshots in tests/fixtures/device were
//! written by `tests/device/failures.py` on an NVIDIA H100 and an H200 (torch 2.11.0+cu130,
//! transformers 5.17, driver 580.159.04; see tests/fixtures/device/README.md). Each log is diagnosed as the
//! failure it is, and each snapshot the capture helper saved confirms the cause on the CPU twin,
//! with the offending values, and confirms nothing else.

use std::path::PathBuf;

use faultline::diagnose::analyze_str;
use faultline::model::Confidence::{High, Low, Medium};
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

/// Every log, the class, rule and confidence of its root cause.
const DIAGNOSES: [(&str, &str, &str, Confidence); 32] = [
    (
        "classifier_labels_out_of_range",
        "cuda.device_assert.target",
        "assert.class_target",
        High,
    ),
    (
        "nll_labels_out_of_range_blocking",
        "cuda.device_assert.target",
        "assert.class_target",
        High,
    ),
    (
        "hf_token_id_past_the_embedding",
        "cuda.device_assert.index",
        "assert.embedding_gather",
        High,
    ),
    (
        "embedding_then_matmul_without_blocking",
        "cuda.device_assert.index",
        "assert.embedding_gather",
        High,
    ),
    (
        "gather_index_past_the_dimension",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "bce_on_logits_not_probabilities",
        "cuda.device_assert.target",
        "assert.bce_input",
        High,
    ),
    (
        "input_left_on_the_cpu",
        "torch.device_mismatch",
        "torch.device_mismatch",
        High,
    ),
    (
        "half_weights_float_input",
        "torch.dtype_mismatch",
        "torch.dtype_mismatch",
        High,
    ),
    (
        "shapes_that_do_not_multiply",
        "torch.shape_mismatch",
        "torch.shape_matmul",
        High,
    ),
    (
        "allocation_larger_than_the_card",
        "cuda.oom",
        "oom.larger_than_gpu",
        High,
    ),
    (
        "nan_found_by_anomaly_detection",
        "torch.nan_inf",
        "torch.nan_anomaly",
        High,
    ),
    // written on an H200 (README): the Hugging Face steps past their tables
    (
        "hf_t5_labels_past_the_vocabulary",
        "cuda.device_assert.index",
        "assert.index_select",
        High,
    ),
    (
        "hf_bart_input_longer_than_the_position_table",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "hf_bart_labels_padded_with_vocab_size",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "hf_gpt2_past_n_positions",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "hf_gpt2_labels_padded_with_vocab_size",
        "cuda.device_assert.target",
        "assert.class_target",
        High,
    ),
    (
        "hf_opt_past_its_positions",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "hf_bert_token_type_past_type_vocab_size",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "hf_led_encoder_past_its_positions",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    // and the wordings only a GPU prints
    (
        "multinomial_with_nan_probabilities",
        "torch.nan_inf",
        "torch.nan_sampling",
        High,
    ),
    // the rule stays low: "invalid device ordinal" is labelled `none` in part of the dev corpus
    (
        "device_index_past_the_gpus",
        "cuda.invalid_device",
        "cuda.invalid_device_ordinal",
        Low,
    ),
    (
        "memory_capped_by_fraction",
        "cuda.oom",
        "oom.memory_fraction_cap",
        High,
    ),
    (
        "activations_that_fill_the_card",
        "cuda.oom",
        "oom.tensors_fill_gpu",
        High,
    ),
    (
        "index_put_past_the_end",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "scatter_add_past_the_classes",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "one_hot_past_num_classes",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "embedding_ids_left_on_the_cpu",
        "torch.device_mismatch",
        "torch.device_mismatch",
        High,
    ),
    (
        "triton_kernel_offsets_overflowing_int32",
        "cuda.illegal_memory_access",
        "cuda.invalid_address_space",
        Medium,
    ),
    (
        "triton_kernel_reading_past_its_buffer",
        "cuda.illegal_memory_access",
        "cuda.illegal_memory_access",
        High,
    ),
    (
        "nccl_two_ranks_on_one_gpu",
        "nccl.error",
        "nccl.invalid_usage",
        High,
    ),
    // the library that starts up after the assert fails too: its finding is a symptom
    (
        "assert_then_first_convolution",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
    (
        "assert_then_first_matmul",
        "cuda.device_assert.index",
        "assert.index_kernel",
        High,
    ),
];

#[test]
fn every_real_gpu_failure_is_diagnosed_as_what_it_is() {
    for (case, class, rule, confidence) in DIAGNOSES {
        let diagnosis = diagnose(case);
        let top = diagnosis
            .findings
            .first()
            .unwrap_or_else(|| panic!("{case}: no finding"));
        assert_eq!((top.class.as_str(), top.rule.as_str()), (class, rule), "{case}");
        assert_eq!((top.role, top.confidence), (Role::Root, confidence), "{case}");
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

#[test]
fn every_log_in_the_folder_has_its_expected_diagnosis() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/device");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.extension().is_some_and(|e| e == "log") {
            let case = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            assert!(
                DIAGNOSES.iter().any(|(c, ..)| *c == case),
                "{case}.log has no expected diagnosis in DIAGNOSES"
            );
        }
    }
}

/// Every snapshot, the start of what confirms the root cause, and the checks that may confirm
/// a cause of any finding (the values at fault fail them; a check about other values must not).
const CONFIRMATIONS: [(&str, &str, &[&str]); 18] = [
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
    (
        "hf_t5_labels_past_the_vocabulary",
        "labels[1, 5] = 103 >= vocab_size = 100 (1 of 16 values out of range",
        &["index_bounds"],
    ),
    (
        "hf_bart_input_longer_than_the_position_table",
        "input_ids length 40 > the 32 positions of max_position_embeddings = 32",
        &["index_bounds"],
    ),
    (
        "hf_bart_labels_padded_with_vocab_size",
        "labels[0, 9] = 120 >= num_classes = 120 (9 of 36 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "hf_gpt2_past_n_positions",
        "input_ids length 30 > the 24 positions of max_position_embeddings = 24",
        &["index_bounds"],
    ),
    (
        "hf_gpt2_labels_padded_with_vocab_size",
        "labels[1, 10] = 100 >= num_classes = 100 (6 of 32 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "hf_opt_past_its_positions",
        "attention_mask[1] attends to 30 tokens: more than the 24 positions",
        &["index_bounds"],
    ),
    (
        "hf_bert_token_type_past_type_vocab_size",
        "token_type_ids[1, 12] = 2 >= type_vocab_size = 2 (4 of 32 values out of range",
        &["index_bounds"],
    ),
    (
        "hf_led_encoder_past_its_positions",
        "input_ids length 50, padded to 64 (a multiple of attention_window 16) > the 60 positions",
        &["index_bounds"],
    ),
    (
        "scatter_add_past_the_classes",
        "labels[17] = 10 >= num_classes = 10 (1 of 64 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "one_hot_past_num_classes",
        "labels[5] = 4 >= num_classes = 4 (1 of 32 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "assert_then_first_convolution",
        "labels[3] = 12 >= num_classes = 10 (1 of 16 values out of range",
        &["index_bounds", "target_bounds"],
    ),
    (
        "assert_then_first_matmul",
        "labels[5] = 10 >= num_classes = 10 (1 of 16 values out of range",
        &["index_bounds", "target_bounds"],
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

/// The capture helper saved `token_ids`, a name no check knows, with only `vocab_size`: the
/// replay says what it lacks and refutes nothing.
#[test]
fn a_snapshot_whose_tensor_no_check_knows_is_inconclusive_not_refuted() {
    let case = "index_put_past_the_end";
    let path = fixture(&format!("{case}.safetensors"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let snapshot = Snapshot::from_bytes(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut diagnosis = diagnose(case);
    replay_diagnosis(&mut diagnosis, &snapshot, &Cpu::new());
    assert_eq!(
        diagnosis.replay.as_ref().map(|r| r.verdict),
        Some(Verdict::Inconclusive)
    );
    let refuted: Vec<&str> = diagnosis
        .findings
        .iter()
        .flat_map(|f| &f.causes)
        .filter(|c| c.outcome.as_ref().is_some_and(|o| o.verdict == Verdict::Refuted))
        .map(|c| c.title.as_str())
        .collect();
    assert!(refuted.is_empty(), "refuted without the data: {refuted:?}");
}

/// After a kernel's assert the next library to start up fails in the broken context (torch 2.11
/// on an H200: cuDNN says `CUDNN_STATUS_INTERNAL_ERROR`, cuBLAS `CUBLAS_STATUS_NOT_INITIALIZED
/// when calling cublasCreate(handle)`): that finding is the assert's symptom, never a root.
#[test]
fn a_library_failing_after_a_kernel_assert_is_the_assert_s_symptom() {
    for (case, library) in [
        ("assert_then_first_convolution", "cudnn.status"),
        ("assert_then_first_matmul", "cublas.not_initialized"),
    ] {
        let diagnosis = diagnose(case);
        let finding = diagnosis
            .findings
            .iter()
            .find(|f| f.class == library)
            .unwrap_or_else(|| panic!("{case}: no {library} finding"));
        assert_eq!(finding.role, Role::Symptom, "{case}");
        assert_eq!(
            finding.symptom_of.as_deref(),
            Some("assert.index_kernel"),
            "{case}"
        );
    }
}
