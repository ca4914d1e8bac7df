//! Properties of the parser and the analysis on random and mutated logs: they never panic, events
//! point inside the log, and the prefilter never changes the events or the diagnosis.

use faultline::parse::{Parsed, Parser, parse_bytes};
use faultline::scan::{Prefilter, scan};
use proptest::prelude::*;

/// Real-looking lines the mutations draw from.
const LINES: &[&str] = &[
    "Traceback (most recent call last):",
    "  File \"train.py\", line 45, in <module>",
    "    outputs = model(input_ids)",
    "  File \"/usr/lib/python3.9/site-packages/torch/nn/modules/module.py\", line 1190, in _call_impl",
    "RuntimeError: CUDA error: device-side assert triggered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    "The above exception was the direct cause of the following exception:",
    "",
    "[rank1]: Traceback (most recent call last):",
    "[rank0]:   File \"train.py\", line 1, in <module>",
    "2024-05-06T07:08:09.1234567Z torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.",
    "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda)`",
    "[rank2]:[E506 07:09:10.123 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.",
    "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f0 in libc10.so)",
    "Root Cause (first observed failure):",
    "[0]:",
    "  exitcode  : -6 (pid: 4242)",
    "╭────── Traceback (most recent call last) ──────╮",
    "│ /home/user/train.py:45 in <module>           │",
    "╰───────────────────────────────────────────────╯",
    "RuntimeError                              Traceback (most recent call last)",
    "Cell In[3], line 5",
    "\x1b[31mERROR\x1b[0m something",
    " 10%|█         | 1/10\r 20%|██        | 2/10",
    "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |",
    "Epoch 1 loss 0.25",
    "pip install torch==2.1.0",
    "KeyError: Caught KeyError in DataLoader worker process 0.",
    "Original Traceback (most recent call last):",
    "-- Process 1 terminated with the following error:",
];

fn check_invariants(parsed: &Parsed) {
    let mut previous = 0;
    for event in &parsed.events {
        assert!(event.lines.start >= 1, "{event:?}");
        assert!(event.lines.start <= event.lines.end, "{event:?}");
        assert!(
            event.lines.end <= parsed.lines,
            "{event:?} beyond {} lines",
            parsed.lines
        );
        assert!(event.lines.start >= previous, "events out of order");
        previous = event.lines.start;
        if let Some(last) = event.last_line {
            assert!(last >= event.lines.start && last <= parsed.lines, "{event:?}");
        }
    }
}

fn rules() -> &'static faultline::rules::RuleSet {
    static RULES: std::sync::OnceLock<faultline::rules::RuleSet> = std::sync::OnceLock::new();
    RULES.get_or_init(|| faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}")))
}

fn parse_without_prefilter(bytes: &[u8]) -> Parsed {
    let mut parser = Parser::new();
    let stats = scan(bytes, &Prefilter::every_line(), &mut parser)
        .unwrap_or_else(|e| panic!("scanning {} bytes failed: {e}", bytes.len()));
    parser.finish(stats)
}

fn expected_line_count(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!bytes.is_empty() && bytes.last() != Some(&b'\n'))
}

/// A log made of real-looking lines, some of them mutated.
fn mutated_log() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        6 => prop::sample::select(LINES).prop_map(|l| l.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..40),
        1 => (prop::sample::select(LINES), any::<prop::sample::Index>()).prop_map(|(l, i)| {
            let bytes = l.as_bytes();
            bytes[..i.index(bytes.len() + 1)].to_vec()
        }),
    ];
    (prop::collection::vec(line, 0..60), any::<bool>()).prop_map(|(lines, trailing_newline)| {
        let mut log = lines.join(&b'\n');
        if trailing_newline {
            log.push(b'\n');
        }
        log
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic_and_give_sane_events(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let parsed = parse_bytes(&bytes);
        check_invariants(&parsed);
        prop_assert_eq!(parsed.lines, expected_line_count(&bytes));
        prop_assert_eq!(parsed.bytes, bytes.len() as u64);
    }

    #[test]
    fn mutated_real_logs_never_panic_and_give_sane_events(log in mutated_log()) {
        let parsed = parse_bytes(&log);
        check_invariants(&parsed);
        prop_assert_eq!(parsed.lines, expected_line_count(&log));
    }

    #[test]
    fn the_prefilter_never_changes_the_diagnosis(log in mutated_log()) {
        let rules = rules();
        let fast = faultline::diagnose::analyze_bytes(rules, &log).diagnosis;
        let slow = faultline::diagnose::analyze_every_line(rules, &log).diagnosis;
        prop_assert_eq!(fast, slow);
    }

    #[test]
    fn the_prefilter_never_changes_what_is_parsed(log in mutated_log()) {
        let fast = parse_bytes(&log);
        let slow = parse_without_prefilter(&log);
        prop_assert_eq!(fast.events, slow.events);
    }
}
