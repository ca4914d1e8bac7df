//! Real failing training steps on the CPU (`tests/fixtures/replay/`, written by its
//! `generate.py` with torch 2.15.0 and transformers 5.24.0; see its README): each log, torch's
//! own CPU wording, is diagnosed as the failure it is, and each snapshot, saved the way users
//! save one (by hand with a few metadata keys, or by the capture helper with the model),
//! replayed on the CPU gives the true cause the verdict it should: confirmed with the value at
//! fault; consistent with the data where other causes share the observation and the offending
//! values do not tell them apart; or, where the snapshot cannot tell, not checked and never
//! refuted. The reproducer of each position verdict uses the bounds the check used, and prints
//! the same offending row when a Python with numpy and safetensors runs it.

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use faultline::diagnose::analyze_str;
use faultline::model::{Diagnosis, Verdict};
use faultline::replay::check::{self, CheckSpec};
use faultline::replay::cpu::Cpu;
use faultline::replay::{CheckResult, Limits, Snapshot, replay_diagnosis, reproducer};
use faultline::rules::RuleSet;

/// The torch and transformers versions in the fixtures' names.
const VERSIONS: &str = "torch-2.15.0+cu132__transformers-5.24.0";

fn fixture(case: &str, ext: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay")
        .join(format!("{case}__{VERSIONS}.{ext}"))
}

fn replayed(case: &str) -> Diagnosis {
    let log = std::fs::read_to_string(fixture(case, "log")).unwrap_or_else(|e| panic!("{case}: {e}"));
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut diagnosis = analyze_str(&rules, &log);
    let bytes = std::fs::read(fixture(case, "safetensors")).unwrap_or_else(|e| panic!("{case}: {e}"));
    let snapshot = Snapshot::from_bytes(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    replay_diagnosis(&mut diagnosis, &snapshot, &Cpu::new());
    diagnosis
}

const WORDS: &str = "A token id is >= the vocabulary size of the embedding";
const POSITIONS: &str = "The input is longer than max_position_embeddings";
const TOKEN_TYPES: &str = "token_type_ids >= type_vocab_size";
const LABEL: &str = "Label 100 >= num_classes: the model outputs fewer classes than the data has";

/// Each case: its rule, the cause that is true, its verdict, and how its summary starts. Labels
/// past the vocabulary are consistent, not confirmed: padding, 1-based ids or a too-small table
/// would all give them.
const CASES: [(&str, &str, &str, Verdict, &str); 9] = [
    (
        "t5_labels_past_the_vocabulary",
        "index.embedding_out_of_range",
        WORDS,
        Verdict::Consistent,
        "labels[1, 5] = 103 >= vocab_size = 100 (1 of 16 values out of range; max 103); the labels are token ids",
    ),
    (
        "bart_input_longer_than_the_position_table",
        "index.embedding_out_of_range",
        POSITIONS,
        Verdict::Confirmed,
        "input_ids length 40 > the 32 positions of max_position_embeddings = 32: positions 32..39 have no row",
    ),
    (
        "bart_input_longer_than_the_position_table_sizes_only",
        "index.embedding_out_of_range",
        POSITIONS,
        Verdict::Inconclusive,
        "not checked: model family unknown (record model_type",
    ),
    (
        "bart_labels_padded_with_vocab_size",
        "index.embedding_out_of_range",
        WORDS,
        Verdict::Consistent,
        "labels[0, 9] = 120 >= num_embeddings = 120 (9 of 36 values out of range; max 120); the labels are token ids, the decoder's input ids once shifted right",
    ),
    (
        "gpt2_past_n_positions",
        "index.embedding_out_of_range",
        POSITIONS,
        Verdict::Confirmed,
        "input_ids length 30 > the 24 positions of max_position_embeddings = 24",
    ),
    (
        "gpt2_labels_padded_with_vocab_size",
        "index.target_out_of_bounds",
        LABEL,
        Verdict::Consistent,
        "labels[1, 10] = 100 >= vocab_size = 100 (6 of 32 values out of range); the loss is over the language model's head (loss_function ForCausalLMLoss)",
    ),
    (
        "opt_past_its_positions",
        "index.embedding_out_of_range",
        POSITIONS,
        Verdict::Confirmed,
        "attention_mask[1] attends to 30 tokens: more than the 24 positions of max_position_embeddings = 24",
    ),
    (
        "bert_token_type_past_type_vocab_size",
        "index.embedding_out_of_range",
        TOKEN_TYPES,
        Verdict::Confirmed,
        "token_type_ids[1, 12] = 2 >= type_vocab_size = 2 (4 of 32 values out of range; max 2)",
    ),
    (
        "led_encoder_past_its_positions",
        "index.embedding_out_of_range",
        POSITIONS,
        Verdict::Confirmed,
        "input_ids length 50, padded to 64 (a multiple of attention_window 16) > the 60 positions of max_encoder_position_embeddings = 60",
    ),
];

#[test]
fn every_real_cpu_failure_is_diagnosed_and_its_true_cause_gets_its_verdict_on_the_cpu() {
    for (case, rule, cause, verdict, summary) in CASES {
        let diagnosis = replayed(case);
        let top = diagnosis
            .findings
            .first()
            .unwrap_or_else(|| panic!("{case}: no finding"));
        assert_eq!(top.rule, rule, "{case}");
        let outcome = top
            .causes
            .iter()
            .find(|c| c.title == cause)
            .and_then(|c| c.outcome.as_ref())
            .unwrap_or_else(|| panic!("{case}: the cause {cause:?} was not replayed: {:#?}", top.causes));
        assert_eq!(outcome.verdict, verdict, "{case}: {}", outcome.summary);
        assert!(
            outcome.summary.starts_with(summary),
            "{case}: {}",
            outcome.summary
        );
    }
}

#[test]
fn no_cause_of_another_table_is_confirmed_and_the_diagnosis_is_never_refuted() {
    for (case, _, cause, _, _) in CASES {
        let diagnosis = replayed(case);
        let replay = diagnosis
            .replay
            .as_ref()
            .unwrap_or_else(|| panic!("{case}: no replay summary"));
        assert_ne!(replay.verdict, Verdict::Refuted, "{case}: {replay:?}");
        // A word, position or token-type cause confirmed is that table's; the other tables'
        // causes are refuted or not checked.
        for other in [WORDS, POSITIONS, TOKEN_TYPES]
            .into_iter()
            .filter(|c| *c != cause)
        {
            let confirmed = replay
                .decided
                .iter()
                .any(|d| d.cause == other && d.verdict == Verdict::Confirmed);
            assert!(!confirmed, "{case}: {other} confirmed: {replay:?}");
        }
    }
}

#[test]
fn labels_past_the_vocabulary_confirm_the_observation_once_and_no_cause_that_shares_it() {
    for (case, shared) in [
        (
            "gpt2_labels_padded_with_vocab_size",
            ["Labels numbered from 1", LABEL],
        ),
        (
            "t5_labels_past_the_vocabulary",
            [WORDS, "A negative, padding or 1-based id"],
        ),
        (
            "bart_labels_padded_with_vocab_size",
            [WORDS, "A negative, padding or 1-based id"],
        ),
    ] {
        let diagnosis = replayed(case);
        let replay = diagnosis
            .replay
            .as_ref()
            .unwrap_or_else(|| panic!("{case}: no replay summary"));
        assert_eq!(replay.verdict, Verdict::Confirmed, "{case}: {replay:?}");
        assert!(
            replay.decided.iter().all(|d| d.verdict != Verdict::Confirmed),
            "{case}: a cause confirmed alone: {replay:?}"
        );
        let [observation] = replay.observations.as_slice() else {
            panic!("{case}: not one shared observation: {replay:?}");
        };
        assert!(
            observation.summary.starts_with("labels["),
            "{case}: {observation:?}"
        );
        for cause in shared {
            assert!(
                observation.causes.iter().any(|c| c == cause),
                "{case}: {cause:?} missing: {observation:?}"
            );
        }
        assert_eq!(
            diagnosis.findings[0].tier,
            faultline::model::EvidenceTier::Confirmed,
            "{case}"
        );
    }
}

/// The check the position cause of `case`'s first finding names, as the replay of the diagnosis
/// runs it (without the `shows` condition it reads itself); None when the finding has none.
fn position_check(case: &str) -> Option<(CheckSpec, Snapshot)> {
    let log = std::fs::read_to_string(fixture(case, "log")).unwrap_or_else(|e| panic!("{case}: {e}"));
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let diagnosis = analyze_str(&rules, &log);
    let cause = diagnosis
        .findings
        .first()?
        .causes
        .iter()
        .find(|c| c.title == POSITIONS)?;
    let mut spec = CheckSpec::from(cause.replay.as_ref()?);
    spec.params.remove("shows");
    let bytes = std::fs::read(fixture(case, "safetensors")).unwrap_or_else(|e| panic!("{case}: {e}"));
    let snapshot = Snapshot::from_bytes(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    Some((spec, snapshot))
}

/// Runs `script` with `python` in the fixtures' folder (where the snapshot it names is); its
/// stdout and stderr.
fn run_script(python: &str, script: &str) -> (String, String) {
    let mut child = Command::new(python)
        .arg("-")
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replay"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the script printed for each lookup with a counted row matches the check's row; a
/// confirmed lookup past its table fails the call where torch is installed.
fn assert_prints_the_checks_rows(case: &str, result: &CheckResult, stdout: &str, stderr: &str) {
    for lookup in &result.positions {
        let Some(largest) = lookup.largest_row else {
            continue;
        };
        let line = format!("to {largest} of a table of {} rows", lookup.rows);
        assert!(
            stdout.contains(&line),
            "{case}: no {line:?} in\n{stdout}\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("Error") || stderr.contains("IndexError"),
        "{case}: {stderr}"
    );
    if result.verdict == Verdict::Confirmed {
        assert!(!stdout.contains("the call ran without error"), "{case}: {stdout}");
        let without_torch = stderr.contains("torch is not installed");
        assert!(
            without_torch || stderr.contains("index out of range"),
            "{case}: the call did not fail: {stderr}"
        );
    }
}

#[test]
fn the_reproducer_of_each_position_verdict_uses_the_bounds_the_check_used() {
    let python = support::numpy_python("the reproducer runs of the replay fixtures");
    let mut looked_up = Vec::new();
    for (case, ..) in CASES {
        let Some((spec, snapshot)) = position_check(case) else {
            continue;
        };
        let result = check::run(&spec, &snapshot, &Cpu::new()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let file = fixture(case, "safetensors");
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let script = reproducer::script(&spec, &result, &snapshot.summary(), &name);
        if result.positions.is_empty() {
            // No bound judged, none written: the script says so rather than guess one.
            assert_eq!(
                result.verdict,
                Verdict::Inconclusive,
                "{case}: {}",
                result.summary
            );
            assert!(
                script.contains("raise SystemExit(\"faultline judged no position lookup"),
                "{case}: {script}"
            );
            assert!(!script.contains("rows ="), "{case}: {script}");
            continue;
        }
        looked_up.push(case);
        for lookup in &result.positions {
            let table = format!("rows = {}  # {} = {}", lookup.rows, lookup.key, lookup.size);
            let first = format!(
                " + {}  # position 0 is row {}\n",
                lookup.first_row, lookup.first_row
            );
            let read = format!("x = tensor({:?})\n", lookup.tensor);
            for held in [table, first, read] {
                assert!(script.contains(&held), "{case}: no {held:?} in\n{script}");
            }
        }
        if let Some(python) = python {
            let (stdout, stderr) = run_script(python, &script);
            assert_prints_the_checks_rows(case, &result, &stdout, &stderr);
        }
    }
    // Confirmed past the table, or (BART's and BERT's short inputs) refuted within it; T5 has no
    // position table and the BART with sizes only no known family.
    assert_eq!(
        looked_up,
        [
            "bart_input_longer_than_the_position_table",
            "bart_labels_padded_with_vocab_size",
            "gpt2_past_n_positions",
            "opt_past_its_positions",
            "bert_token_type_past_type_vocab_size",
            "led_encoder_past_its_positions",
        ],
        "the cases whose position check judged a lookup"
    );
}
