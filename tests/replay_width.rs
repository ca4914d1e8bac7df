//! The `hidden_size` check: embeddings and encoder states handed to a model at another width than
//! its config records confirm the shape cause; matching widths refute that cause for those
//! tensors only, so the shape finding they belong to is never refuted by them.

use std::collections::BTreeMap;

use faultline::model::{EvidenceTier, Verdict};
use faultline::replay::check::{self, CheckSpec};
use faultline::replay::cpu::Cpu;
use faultline::replay::snapshot::Format;
use faultline::replay::{CheckResult, DType, Snapshot, replay_diagnosis};
use faultline::rules::RuleSet;

/// A zero-filled float32 tensor.
fn floats(name: &str, shape: &[u64]) -> (String, DType, Vec<u64>, Vec<u8>) {
    let n: u64 = shape.iter().product();
    (name.into(), DType::F32, shape.to_vec(), vec![0; n as usize * 4])
}

fn snapshot(tensors: Vec<(String, DType, Vec<u64>, Vec<u8>)>, meta: &[(&str, &str)]) -> Snapshot {
    let params = meta.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Snapshot::from_tensors(Format::Safetensors, tensors, params).unwrap_or_else(|e| panic!("{e}"))
}

fn hidden_size(snapshot: &Snapshot) -> CheckResult {
    let spec = CheckSpec {
        name: "hidden_size".into(),
        params: BTreeMap::new(),
    };
    check::run(&spec, snapshot, &Cpu::new()).unwrap_or_else(|e| panic!("check failed: {e}"))
}

#[test]
fn embeddings_narrower_than_d_model_confirm_and_name_both_widths() {
    let snap = snapshot(
        vec![floats("inputs_embeds", &[2, 8, 512])],
        &[("model_type", "t5"), ("d_model", "768")],
    );
    let r = hidden_size(&snap);
    assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
    assert_eq!(
        r.summary,
        "inputs_embeds [2, 8, 512] has 512 features but d_model = 768: the model's layers take 768"
    );
    assert_eq!(r.tensor.as_deref(), Some("inputs_embeds"));
}

#[test]
fn encoder_states_of_another_model_confirm_through_the_capture_helpers_keys() {
    let snap = snapshot(
        vec![
            floats("inputs_embeds", &[2, 8, 768]),
            floats("encoder_hidden_states", &[2, 20, 1024]),
        ],
        &[("model.model_type", "gpt2"), ("model.n_embd", "768")],
    );
    let r = hidden_size(&snap);
    assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
    assert!(
        r.summary
            .starts_with("encoder_hidden_states [2, 20, 1024] has 1024 features but model.n_embd = 768"),
        "{}",
        r.summary
    );
}

#[test]
fn matching_widths_refute_the_cause_for_the_tensors_checked_only() {
    let snap = snapshot(
        vec![
            floats("inputs_embeds", &[2, 8, 64]),
            floats("encoder_outputs", &[2, 5, 64]),
        ],
        &[("model_type", "bart"), ("d_model", "64")],
    );
    let r = hidden_size(&snap);
    assert_eq!(r.verdict, Verdict::Refuted, "{}", r.summary);
    assert_eq!(
        r.summary,
        "inputs_embeds [2, 8, 64]: last dim 64 = d_model = 64; encoder_outputs [2, 5, 64]: last dim 64 = d_model = 64; \
         refuted for inputs_embeds, encoder_outputs only: a layer's own in_features, or tensors the snapshot does not hold, were not checked"
    );
}

#[test]
fn a_family_with_its_own_embedding_width_is_judged_by_that_width_only() {
    // ALBERT takes inputs_embeds at embedding_size (128) and projects them to hidden_size.
    let tensors = || vec![floats("inputs_embeds", &[1, 4, 128])];
    let r = hidden_size(&snapshot(
        tensors(),
        &[("model_type", "albert"), ("hidden_size", "768")],
    ));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.summary);
    assert!(
        r.summary
            .contains("albert takes inputs_embeds at a width of its own, not recorded (add embedding_size"),
        "{}",
        r.summary
    );
    let r = hidden_size(&snapshot(
        tensors(),
        &[
            ("model_type", "albert"),
            ("hidden_size", "768"),
            ("embedding_size", "128"),
        ],
    ));
    assert_eq!(r.verdict, Verdict::Refuted, "{}", r.summary);
}

#[test]
fn without_the_family_or_the_width_nothing_is_decided() {
    let r = hidden_size(&snapshot(
        vec![floats("inputs_embeds", &[1, 4, 100])],
        &[("hidden_size", "768")],
    ));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.summary);
    assert!(
        r.summary.contains("model family unknown (record model_type"),
        "{}",
        r.summary
    );
    let r = hidden_size(&snapshot(
        vec![floats("inputs_embeds", &[1, 4, 100])],
        &[("model_type", "bert")],
    ));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.summary);
    assert!(
        r.summary.contains("add hidden_size, d_model or n_embd"),
        "{}",
        r.summary
    );
    let r = hidden_size(&snapshot(
        vec![floats("logits", &[1, 4, 100])],
        &[("model_type", "bert"), ("hidden_size", "768")],
    ));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.summary);
    assert!(
        r.summary.starts_with("the snapshot holds none of inputs_embeds"),
        "{}",
        r.summary
    );
}

#[test]
fn a_width_that_is_not_a_positive_number_is_an_error_that_names_it() {
    let spec = CheckSpec {
        name: "hidden_size".into(),
        params: BTreeMap::from([("hidden_size".to_owned(), "0".to_owned())]),
    };
    let snap = snapshot(
        vec![floats("inputs_embeds", &[1, 4, 8])],
        &[("model_type", "bert")],
    );
    let err = check::run(&spec, &snap, &Cpu::new()).map(|r| r.summary);
    assert!(
        matches!(&err, Err(e) if e.to_string() == "parameter hidden_size = 0 is not a width (a positive number of features)"),
        "{err:?}"
    );
}

/// A BART fed embeddings from a 512-wide model: the encoder's first projection fails.
const MATMUL_LOG: &str = r#"Traceback (most recent call last):
  File "/work/train.py", line 30, in <module>
    out = model(inputs_embeds=embeds, labels=labels)
  File "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x512 and 768x768)
"#;

fn replayed(snap: &Snapshot) -> faultline::model::Diagnosis {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut diagnosis = faultline::diagnose::analyze_str(&rules, MATMUL_LOG);
    replay_diagnosis(&mut diagnosis, snap, &Cpu::new());
    diagnosis
}

const WIDTH_CAUSE: &str = "Embeddings or encoder states of another width than the model's hidden size";

#[test]
fn the_matmul_shape_finding_is_confirmed_by_embeddings_of_another_width() {
    let diagnosis = replayed(&snapshot(
        vec![floats("inputs_embeds", &[2, 8, 512])],
        &[("model_type", "bart"), ("d_model", "768")],
    ));
    let top = &diagnosis.findings[0];
    assert_eq!(
        (top.rule.as_str(), top.class.as_str()),
        ("torch.shape_matmul", "torch.shape_mismatch")
    );
    assert_eq!(top.tier, EvidenceTier::Confirmed);
    let cause = top.causes.iter().find(|c| c.title == WIDTH_CAUSE);
    let verdict = cause.and_then(|c| c.outcome.as_ref()).map(|o| o.verdict);
    assert_eq!(verdict, Some(Verdict::Confirmed));
}

#[test]
fn matching_widths_leave_the_shape_finding_and_its_other_causes_open() {
    let diagnosis = replayed(&snapshot(
        vec![floats("inputs_embeds", &[2, 8, 768])],
        &[("model_type", "bart"), ("d_model", "768")],
    ));
    let top = &diagnosis.findings[0];
    let verdict = top
        .causes
        .iter()
        .find(|c| c.title == WIDTH_CAUSE)
        .and_then(|c| c.outcome.as_ref())
        .map(|o| o.verdict);
    assert_eq!(verdict, Some(Verdict::Refuted));
    assert_eq!(
        top.tier,
        EvidenceTier::Pattern,
        "one cause refuted is not the finding refuted"
    );
    let replay = diagnosis.replay.unwrap_or_else(|| panic!("no replay summary"));
    assert_eq!(replay.verdict, Verdict::Inconclusive, "{replay:?}");
    assert!(
        replay
            .not_checked
            .iter()
            .any(|c| c == "The features reaching the layer differ from its in_features"),
        "{replay:?}"
    );
}
