use super::*;
use crate::model::{Confidence, FindingOrigin, Role};

fn rules() -> RuleSet {
    RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"))
}

/// `log` analyzed on the calling thread with the rule base's prefilter, whatever its size.
fn analyze_with_the_prefilter_on_one_thread(rules: &RuleSet, log: &[u8]) -> Analysis {
    let mut sink = LineAnalyzer::new(rules);
    let prefilter = rules.prefilter().unwrap_or_else(|e| panic!("{e}"));
    let stats = scan::scan_slice_one_thread(log, prefilter, &mut sink);
    finish(rules, sink, stats, Window::of(log))
}

/// The class of each finding, in the diagnosis's order.
fn classes(d: &Diagnosis) -> Vec<&str> {
    d.findings.iter().map(|f| f.class.as_str()).collect()
}

/// Asserts that two analyses found the same events and made the same diagnosis.
fn assert_same_analysis(got: &Analysis, expected: &Analysis, context: &str) {
    assert_eq!(got.parsed.events, expected.parsed.events, "{context}");
    assert_eq!(
        serde_json::to_value(&got.diagnosis).ok(),
        serde_json::to_value(&expected.diagnosis).ok(),
        "{context}"
    );
}

#[test]
fn an_assertion_line_outranks_the_generic_device_assert_which_becomes_its_symptom() {
    let d = analyze_str(
        &rules(),
        "RuntimeError: CUDA error: device-side assert triggered
/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
",
    );
    let order: Vec<(&str, Role)> = d.findings.iter().map(|f| (f.class.as_str(), f.role)).collect();
    assert_eq!(
        order,
        vec![
            ("cuda.device_assert.index", Role::Root),
            ("cuda.device_assert.unknown", Role::Symptom)
        ]
    );
    assert_eq!(d.findings[1].symptom_of, Some(d.findings[0].rule.clone()));
}

#[test]
fn advice_lines_are_never_evidence() {
    let d = analyze_str(
        &rules(),
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1 to see the device-side assert triggered\n",
    );
    assert!(d.findings.is_empty(), "{:?}", d.findings);
}

#[test]
fn the_source_lines_rich_prints_around_a_frame_are_never_evidence() {
    // rich shows the lines around the raising one; here, the fork check's message of the line
    // before, which did not run.
    let d = analyze_str(
        &rules(),
        "│ /opt/envs/a/lib/python3.8/site-packages/torch/cuda/__init__.py:211 in _lazy_init                 │
│                                                                                                  │
│   208 │   │   │   │   \"Cannot re-initialize CUDA in forked subprocess. To use CUDA with \"        │
│   209 │   │   │   │   \"multiprocessing, you must use the 'spawn' start method\")                  │
│   210 │   │   if not hasattr(torch._C, '_cuda_getDeviceCount'):                                  │
│ ❱ 211 │   │   │   raise AssertionError(\"Torch not compiled with CUDA enabled\")                   │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
AssertionError: Torch not compiled with CUDA enabled
",
    );
    assert_eq!(classes(&d), vec!["cuda.not_available"]);
}

#[test]
fn the_source_lines_ipython_prints_around_a_frame_are_never_evidence() {
    let d = analyze_str(
        &rules(),
        "---------------------------------------------------------------------------
AssertionError                            Traceback (most recent call last)
Cell In[3], line 1
----> 1 x = torch.zeros(1).cuda()

File ~/envs/a/lib/python3.10/site-packages/torch/cuda/__init__.py:289, in _lazy_init()
    284     raise RuntimeError(
    285         \"Cannot re-initialize CUDA in forked subprocess. To use CUDA with \"
    286         \"multiprocessing, you must use the 'spawn' start method\"
    287     )
    288 if not hasattr(torch._C, \"_cuda_getDeviceCount\"):
--> 289     raise AssertionError(\"Torch not compiled with CUDA enabled\")

AssertionError: Torch not compiled with CUDA enabled
",
    );
    assert_eq!(classes(&d), vec!["cuda.not_available"]);
}

#[test]
fn the_strings_a_traceback_shows_around_a_frame_are_not_read_as_failures() {
    // accelerate's list of the errors it retries on, shown by IPython and by rich around the
    // frame that raised an unrelated error
    let ipython = "---------------------------------------------------------------------------
KeyError                                  Traceback (most recent call last)
File ~/envs/a/lib/python3.10/site-packages/accelerate/utils/memory.py:95, in should_reduce_batch_size(exception)
     91 _statements = [
     92     \"CUDA out of memory.\",  # CUDA OOM
     93     \"cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.\",  # CUDNN SNAFU
     94 ]
---> 95 return batch[\"labels\"]

KeyError: 'labels'
";
    let rich =
        "│ /envs/a/lib/python3.10/site-packages/accelerate/utils/memory.py:95 in should_reduce_batch_size   │
│                                                                                                  │
│    92 │   │   \"CUDA out of memory.\",  # CUDA OOM                                               │
│    93 │   │   \"cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.\",  # CUDNN SNAFU                        │
│ ❱  95 │   return batch[\"labels\"]                                                               │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
KeyError: 'labels'
";
    for log in [ipython, rich] {
        assert_eq!(classes(&analyze_str(&rules(), log)), Vec::<&str>::new(), "{log}");
    }
}

#[test]
fn the_fingerprint_ignores_numbers_paths_and_line_numbers() {
    let a = analyze_str(
        &rules(),
        "  File \"/home/alice/proj/train.py\", line 45, in step\nRuntimeError: CUDA error: device-side assert triggered\n",
    );
    let b = analyze_str(
        &rules(),
        "noise\n  File \"/home/bob/work/train.py\", line 51, in step\nRuntimeError: CUDA error: device-side assert triggered\n",
    );
    assert!(a.fingerprint.is_some());
    assert_eq!(a.fingerprint, b.fingerprint);
    let c = analyze_str(
        &rules(),
        "  File \"/home/bob/work/train.py\", line 51, in evaluate\nRuntimeError: CUDA error: device-side assert triggered\n",
    );
    assert_ne!(
        a.fingerprint, c.fingerprint,
        "another in-app function is another group"
    );
}

#[test]
fn a_log_with_nothing_known_has_no_findings_and_no_fingerprint() {
    let d = analyze_str(&rules(), "Epoch 1 loss 0.25\nall good\n");
    assert!(d.findings.is_empty());
    assert_eq!(d.fingerprint, None);
    assert!(!d.is_diagnosed());
}

#[test]
fn environment_versions_are_collected() {
    let d = analyze_str(
        &rules(),
        "PyTorch version: 2.1.0+cu121\nGPU 0: NVIDIA A100-SXM4-80GB\n",
    );
    assert_eq!(d.environment.get("torch"), Some(&vec!["2.1.0+cu121".to_owned()]));
    assert_eq!(d.environment.get("cuda"), Some(&vec!["12.1".to_owned()]));
}

#[path = "../../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;

#[test]
fn a_large_log_scanned_on_two_threads_gets_the_diagnosis_of_one_thread() {
    let rules = rules();
    let mut log = Vec::new();
    // Writing into a Vec cannot fail; large enough for two threads, failures included.
    let _ = noisy_log::generate(9 << 20, 7, &mut log);
    let one = analyze_with_the_prefilter_on_one_thread(&rules, &log);
    assert!(one.diagnosis.findings.len() > 3, "{:?}", one.diagnosis.findings);
    assert_same_analysis(&analyze_bytes(&rules, &log), &one, "in memory");
    let from_reader = analyze_reader(&rules, &log[..]).unwrap_or_else(|e| panic!("{e}"));
    assert_same_analysis(&from_reader, &one, "from a reader");
}

#[test]
fn a_torch_warning_that_names_a_gpu_problem_is_not_a_confident_diagnosis() {
    // The `UserWarning: CUDA initialization:` head of this TORCH_WARN was lost; its tail still
    // says it is a warning. The run went on (on the CPU) and failed elsewhere.
    // Source: https://github.com/SiyuanQi-zz/gpnn/issues/31
    let d = analyze_str(
        &rules(),
        "The NVIDIA driver on your system is too old (found version 10010). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx (Triggered internally at  /opt/conda/conda-bld/pytorch_1623448233824/work/c10/cuda/CUDAFunctions.cpp:115.)
  return torch._C._cuda_getDeviceCount() > 0
Traceback (most recent call last):
  File \"hico.py\", line 33, in __getitem__
KeyError: 'classes'
",
    );
    let primary = d.primary().map(|f| (f.class.as_str(), f.confidence, f.role));
    assert_eq!(
        primary,
        Some(("cuda.driver_too_old", Confidence::Medium, Role::Context)),
        "a warning before another failure is context"
    );
    assert!(!d.is_diagnosed());
}

#[test]
fn a_warning_stays_a_cause_when_the_failure_after_it_is_one_the_rules_know() {
    let d = analyze_str(
        &rules(),
        "UserWarning: Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)
Traceback (most recent call last):
  File \"train.py\", line 10, in <module>
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of which 1.02 GiB is free.
",
    );
    assert_eq!(d.primary().map(|f| f.class.as_str()), Some("cuda.oom"));
    let cudnn = d.findings.iter().find(|f| f.class == "cudnn.status");
    assert!(
        cudnn.is_none_or(|f| f.role != Role::Context),
        "only a warning before an unexplained failure is demoted: {cudnn:?}"
    );
}

#[test]
fn a_gpu_warning_before_a_program_error_of_another_class_is_context() {
    // torch warned that the driver is too old and fell back to the CPU; the run then failed on
    // its own shapes, which no driver causes.
    let d = analyze_str(
        &rules(),
        "/usr/lib/python3.6/site-packages/torch/cuda/__init__.py:52: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 9010). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx (Triggered internally at  /pytorch/c10/cuda/CUDAFunctions.cpp:100.)
  return torch._C._cuda_getDeviceCount() > 0
Traceback (most recent call last):
  File \"agent.py\", line 40, in act
    q = self.net(obs)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x5 and 7x64)
",
    );
    assert_eq!(
        d.primary().map(|f| f.class.as_str()),
        Some("torch.shape_mismatch")
    );
    let driver = d.findings.iter().find(|f| f.class == "cuda.driver_too_old");
    assert_eq!(driver.map(|f| f.role), Some(Role::Context), "{driver:?}");
}

#[test]
fn a_log_with_no_diagnosis_points_at_the_error_it_ends_with() {
    let d = analyze_str(
        &rules(),
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    cfg = CONFIGS[name]\nKeyError: 'warmup_ratio'\n",
    );
    assert!(!d.is_diagnosed());
    let error = d.unexplained_error.as_ref().map(|e| (e.line, e.text.as_str()));
    assert_eq!(error, Some((4, "KeyError: 'warmup_ratio'")));
    let text = crate::output::human(&d, "train.log");
    assert!(
        text.contains("Its last error, line 4: KeyError: 'warmup_ratio'"),
        "{text}"
    );
}

#[test]
fn a_diagnosed_log_names_no_unexplained_error() {
    let d = analyze_str(
        &rules(),
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
    );
    assert!(d.is_diagnosed());
    assert_eq!(d.unexplained_error, None);
    let logged = analyze_str(&rules(), "all good\n");
    assert_eq!(
        logged.unexplained_error, None,
        "no traceback, nothing to point at"
    );
}

#[test]
fn a_short_log_scanned_without_the_prefilter_gets_the_diagnosis_the_prefilter_gives() {
    let rules = rules();
    let log = noisy_log::cuda_assert_traceback(3);
    assert!(log.len() < 8 << 10, "short enough to be scanned line by line");
    let filtered = analyze_with_the_prefilter_on_one_thread(&rules, &log);
    let short = analyze_bytes(&rules, &log);
    assert!(!short.diagnosis.findings.is_empty());
    assert_same_analysis(&short, &filtered, "a short log");
}

#[test]
fn a_log_read_from_a_stream_gets_the_diagnosis_of_its_bytes_in_memory_whatever_its_size() {
    let rules = rules();
    let mut log = noisy_log::cuda_assert_traceback(3);
    // Writing into a Vec cannot fail.
    let _ = noisy_log::generate(24 << 10, 11, &mut log);
    log.extend(noisy_log::cuda_assert_traceback(5));
    let threshold = scan::PREFILTER_MIN_BYTES;
    for len in [1_000, threshold - 1, threshold, threshold + 1, log.len()] {
        let bytes = &log[..len];
        let streamed = analyze_reader(&rules, bytes).unwrap_or_else(|e| panic!("{e}"));
        let in_memory = analyze_bytes(&rules, bytes);
        assert!(!in_memory.diagnosis.findings.is_empty(), "{len} bytes");
        assert_same_analysis(&streamed, &in_memory, &format!("{len} bytes"));
    }
}

/// Detector findings of a diagnosis: (rule, role, confidence, first evidence line).
fn detector_findings(d: &Diagnosis) -> Vec<(&str, Role, Confidence, Option<u64>)> {
    d.findings
        .iter()
        .filter(|f| f.origin == FindingOrigin::Detector)
        .map(|f| {
            (
                f.rule.as_str(),
                f.role,
                f.confidence,
                f.evidence.first().map(|e| e.line),
            )
        })
        .collect()
}

const UNKNOWN_WORDING: &str = "init: failed to create a gpu context, code 999\n";

#[test]
fn a_log_no_specific_rule_explains_gets_the_class_detectors_finding_marked_as_a_detectors() {
    let d = analyze_str(&rules(), UNKNOWN_WORDING);
    assert_eq!(
        detector_findings(&d),
        vec![("detect.driver_unknown", Role::Root, Confidence::Low, Some(1))]
    );
    assert!(d.is_diagnosed());
    assert!(d.unexplained_error.is_none());
}

#[test]
fn a_log_a_specific_rule_explains_is_never_read_by_the_detectors() {
    // The detector's line is there, after a failure a specific rule names.
    let log = format!("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n{UNKNOWN_WORDING}");
    let d = analyze_str(&rules(), &log);
    assert_eq!(d.primary().map(|f| f.rule.as_str()), Some("oom.gpu_oom"));
    assert!(detector_findings(&d).is_empty(), "{:?}", detector_findings(&d));
}

#[test]
fn a_detector_reads_the_end_of_a_long_log_and_numbers_its_evidence_as_the_logs_lines() {
    let rules = rules();
    let mut log = Vec::new();
    let mut lines = 0u64;
    while log.len() <= fallback::WINDOW_BYTES + (1 << 20) {
        log.extend_from_slice(b"step 1200: loss 0.4812, lr 3.0e-05, tokens/s 18211\n");
        lines += 1;
    }
    log.extend_from_slice(UNKNOWN_WORDING.as_bytes());
    let in_memory = analyze_bytes(&rules, &log);
    assert_eq!(
        detector_findings(&in_memory.diagnosis),
        vec![(
            "detect.driver_unknown",
            Role::Root,
            Confidence::Low,
            Some(lines + 1)
        )]
    );
    let streamed = analyze_reader(&rules, &log[..]).unwrap_or_else(|e| panic!("{e}"));
    assert_same_analysis(&streamed, &in_memory, "a streamed log longer than the window");
}

#[test]
fn a_detector_line_before_the_window_of_a_long_log_is_not_read() {
    let rules = rules();
    let mut log = UNKNOWN_WORDING.as_bytes().to_vec();
    while log.len() <= fallback::WINDOW_BYTES + 64 {
        log.extend_from_slice(b"step 1200: loss 0.4812, lr 3.0e-05, tokens/s 18211\n");
    }
    let d = analyze_bytes(&rules, &log).diagnosis;
    assert!(detector_findings(&d).is_empty(), "{:?}", detector_findings(&d));
    let streamed = analyze_reader(&rules, &log[..]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        serde_json::to_value(&streamed.diagnosis).ok(),
        serde_json::to_value(&d).ok()
    );
}

#[test]
fn same_line_patterns_must_all_match_the_one_line_an_any_pattern_matches() {
    let file = |relative: &str, text: &str| crate::rules::RuleFile {
        relative: relative.to_owned(),
        display: relative.to_owned(),
        text: text.to_owned(),
    };
    let rule = r#"
id = "test.shared"
class = "cuda.oom"
title = "Memory words and a GPU on one line"
summary = "Memory ran out."
severity = "error"
priority = 35
role = "root"
confidence = "medium"

[match]
any = ['(?i)out of memory']
same_line = ['(?i)\bgpu\b', '\d']

[[cause]]
title = "Too large"
detail = "Lower the batch size."

[[fix]]
title = "Halve the batch size"

[[example]]
name = "one line"
log = "engine: out of memory on gpu 0"
expect = { matched = true }
"#;
    let rules = RuleSet::from_files(
        &file("taxonomy.toml", include_str!("../../rules/taxonomy.toml")),
        &[file("test/shared.toml", rule)],
        "test",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rule_of = |log: &str| analyze_str(&rules, log).primary().map(|f| f.rule.clone());
    assert_eq!(
        rule_of("engine: out of memory on gpu 0\n").as_deref(),
        Some("test.shared")
    );
    assert_eq!(
        rule_of("engine: out of memory\nrunning on gpu 0\n"),
        None,
        "the words on two lines"
    );
    assert_eq!(
        rule_of("engine: out of memory on the gpu\nengine: out of memory at step 3\n"),
        None,
        "each same_line pattern on another `any` line"
    );
}
