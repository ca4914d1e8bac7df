//! Accuracy on a labelled corpus (`faultline eval`): top-1 / top-3 accuracy, per-class precision
//! and recall, "confidently wrong" diagnoses, and calibration: how often each confidence level of
//! the primary finding is right (high is what the CLI's exit code and the service's "diagnosed"
//! count on, and should be right at least 99 % of the time).
//!
//! A case is right at top-k when one of the first k distinct classes of the diagnosis is its label
//! or one of its `also` labels. For a case labelled `none` (no GPU root cause), no diagnosis, a
//! low-confidence one, or one in `also` is right. A diagnosis is confidently wrong when its primary
//! finding has high confidence and a class that is neither the label nor in `also`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{Confidence, Diagnosis, Role};

/// The label of cases without a GPU root cause.
pub const NONE: &str = "none";

/// One corpus case.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    /// Case id.
    pub id: String,
    /// Root-cause class, or `none`.
    pub label: String,
    /// Other acceptable classes.
    #[serde(default)]
    pub also: Vec<String>,
    /// The log.
    pub log: String,
}

impl Case {
    fn accepts(&self, class: &str) -> bool {
        self.label == class || self.also.iter().any(|a| a == class)
    }
}

/// What faultline said about a case, as eval sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Case id.
    pub id: String,
    /// Expected label.
    pub label: String,
    /// Distinct classes of the findings, in rank order.
    pub classes: Vec<String>,
    /// Confidence of the primary finding.
    pub confidence: Option<Confidence>,
    /// Right at top-1.
    pub top1: bool,
    /// Right at top-3.
    pub top3: bool,
    /// Confidently wrong.
    pub confident_wrong: bool,
}

/// Per-class figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassStats {
    /// Cases with this label.
    pub support: usize,
    /// Cases whose primary class is this one.
    pub predicted: usize,
    /// Of those, cases where it is right.
    pub correct_predictions: usize,
    /// Cases with this label that were right at top-1.
    pub recalled: usize,
}

impl ClassStats {
    /// Precision (1 when the class was never predicted).
    pub fn precision(&self) -> f64 {
        ratio(self.correct_predictions, self.predicted)
    }

    /// Recall (1 when the class has no case).
    pub fn recall(&self) -> f64 {
        ratio(self.recalled, self.support)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// How often one confidence level was right at top-1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Calibration {
    /// Cases whose primary finding had this confidence (`none`: no finding).
    pub cases: usize,
    /// Of those, cases right at top-1.
    pub right: usize,
}

impl Calibration {
    /// The share right (1 when no case had this level).
    pub fn accuracy(&self) -> f64 {
        ratio(self.right, self.cases)
    }
}

/// The name of a confidence level in reports (`none` when there was no finding).
pub fn level_name(confidence: Option<Confidence>) -> &'static str {
    match confidence {
        Some(Confidence::High) => "high",
        Some(Confidence::Medium) => "medium",
        Some(Confidence::Low) => "low",
        None => "none",
    }
}

/// The report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EvalReport {
    /// Cases.
    pub n: usize,
    /// Top-1 accuracy.
    pub top1: f64,
    /// Top-3 accuracy.
    pub top3: f64,
    /// Confidently wrong cases.
    pub confident_wrong: usize,
    /// Per class (labels and predicted classes).
    pub classes: BTreeMap<String, ClassStats>,
    /// Per confidence level of the primary finding (`high`, `medium`, `low`, `none`).
    pub calibration: BTreeMap<&'static str, Calibration>,
    /// Every case.
    pub predictions: Vec<Prediction>,
}

impl EvalReport {
    /// The machine-readable last line of `faultline eval`.
    pub fn summary_line(&self) -> String {
        format!(
            "eval: n={} top1={:.3} top3={:.3} confident_wrong={}",
            self.n, self.top1, self.top3, self.confident_wrong
        )
    }
}

/// Judges one diagnosis against its case.
pub fn judge(case: &Case, diagnosis: &Diagnosis) -> Prediction {
    let mut classes: Vec<String> = Vec::new();
    for f in &diagnosis.findings {
        if !classes.contains(&f.class) {
            classes.push(f.class.clone());
        }
    }
    let primary = diagnosis.primary();
    // What a log of another failure must not get is a claimed GPU cause: a root cause or a
    // symptom. Context alone is no diagnosis (the CLI exits 1 for it).
    let claimed = diagnosis.findings.iter().find(|f| f.role != Role::Context);
    let confidence = primary.map(|f| f.confidence);
    let (top1, top3, confident_wrong) = if case.label == NONE {
        let right = match claimed {
            None => true,
            Some(f) => f.confidence == Confidence::Low || case.accepts(&f.class),
        };
        let wrong = claimed.is_some_and(|f| f.confidence == Confidence::High && !case.accepts(&f.class));
        (right, right, wrong)
    } else {
        let top1 = classes.first().is_some_and(|c| case.accepts(c));
        let top3 = classes.iter().take(3).any(|c| case.accepts(c));
        let wrong = primary.is_some_and(|f| f.confidence == Confidence::High && !case.accepts(&f.class));
        (top1, top3, wrong)
    };
    Prediction {
        id: case.id.clone(),
        label: case.label.clone(),
        classes,
        confidence,
        top1,
        top3,
        confident_wrong,
    }
}

/// Aggregates judged cases.
pub fn report(predictions: Vec<Prediction>, cases: &[Case]) -> EvalReport {
    let n = predictions.len();
    let mut classes: BTreeMap<String, ClassStats> = BTreeMap::new();
    for (p, case) in predictions.iter().zip(cases) {
        let label = classes.entry(p.label.clone()).or_default();
        label.support += 1;
        if p.top1 {
            label.recalled += 1;
        }
        let predicted = match (p.classes.first(), p.confidence) {
            (Some(c), Some(conf)) if !(case.label == NONE && conf == Confidence::Low) => c.clone(),
            _ => NONE.to_owned(),
        };
        let stats = classes.entry(predicted.clone()).or_default();
        stats.predicted += 1;
        if case.accepts(&predicted) || (predicted == NONE && case.label == NONE) {
            stats.correct_predictions += 1;
        }
    }
    let mut calibration: BTreeMap<&'static str, Calibration> = BTreeMap::new();
    for p in &predictions {
        let level = calibration.entry(level_name(p.confidence)).or_default();
        level.cases += 1;
        level.right += usize::from(p.top1);
    }
    let count = |f: fn(&Prediction) -> bool| predictions.iter().filter(|p| f(p)).count();
    EvalReport {
        n,
        top1: ratio(count(|p| p.top1), n),
        top3: ratio(count(|p| p.top3), n),
        confident_wrong: count(|p| p.confident_wrong),
        classes,
        calibration,
        predictions,
    }
}

/// Reads corpus cases from JSON Lines; errors name the line.
pub fn read_cases(text: &str, source: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case = serde_json::from_str(line).map_err(|e| format!("{source}:{}: {e}", i + 1))?;
        if !ids.insert(case.id.clone()) {
            return Err(format!("{source}:{}: duplicate case id {}", i + 1, case.id));
        }
        cases.push(case);
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Finding, Role, Severity};

    fn case(label: &str, also: &[&str]) -> Case {
        Case {
            id: "c1".into(),
            label: label.into(),
            also: also.iter().map(|s| (*s).to_owned()).collect(),
            log: String::new(),
        }
    }

    fn diagnosis(findings: &[(&str, Confidence)]) -> Diagnosis {
        Diagnosis {
            format_version: 1,
            lines: 1,
            bytes: 1,
            fingerprint: None,
            findings: findings
                .iter()
                .map(|(class, confidence)| Finding {
                    rule: format!("r.{class}"),
                    class: (*class).into(),
                    title: Default::default(),
                    summary: String::new(),
                    severity: Severity::Error,
                    role: Role::Root,
                    origin: Default::default(),
                    symptom_of: None,
                    confidence: *confidence,
                    confidence_reasons: vec![],
                    tier: Default::default(),
                    priority: 0,
                    evidence: vec![],
                    captures: Default::default(),
                    causes: vec![],
                    fixes: vec![],
                    next_artifact: None,
                    links: vec![],
                })
                .collect(),
            unexplained_error: None,
            environment: Default::default(),
            warnings: vec![],
            replay: None,
        }
    }

    #[test]
    fn the_label_or_an_also_class_first_is_right_at_top1() {
        let p = judge(
            &case("cuda.oom", &["cublas.alloc_failed"]),
            &diagnosis(&[("cublas.alloc_failed", Confidence::High)]),
        );
        assert!(p.top1 && p.top3 && !p.confident_wrong);
    }

    #[test]
    fn a_right_class_in_second_or_third_place_is_right_at_top3_only() {
        let d = diagnosis(&[
            ("a", Confidence::Medium),
            ("b", Confidence::Medium),
            ("cuda.oom", Confidence::Low),
        ]);
        let p = judge(&case("cuda.oom", &[]), &d);
        assert!(!p.top1 && p.top3 && !p.confident_wrong);
    }

    #[test]
    fn a_wrong_class_at_high_confidence_is_confidently_wrong() {
        let p = judge(
            &case("cuda.oom", &[]),
            &diagnosis(&[("nccl.error", Confidence::High)]),
        );
        assert!(!p.top1 && p.confident_wrong);
    }

    #[test]
    fn for_none_silence_or_a_low_confidence_guess_is_right() {
        assert!(judge(&case(NONE, &[]), &diagnosis(&[])).top1);
        assert!(judge(&case(NONE, &[]), &diagnosis(&[("cuda.oom", Confidence::Low)])).top1);
        let p = judge(&case(NONE, &[]), &diagnosis(&[("cuda.oom", Confidence::Medium)]));
        assert!(!p.top1 && !p.confident_wrong);
        let p = judge(&case(NONE, &[]), &diagnosis(&[("cuda.oom", Confidence::High)]));
        assert!(!p.top1 && p.confident_wrong);
        let p = judge(
            &case(NONE, &["cuda.not_available"]),
            &diagnosis(&[("cuda.not_available", Confidence::High)]),
        );
        assert!(p.top1 && !p.confident_wrong);
    }

    #[test]
    fn for_none_a_context_finding_is_no_claimed_cause() {
        let mut d = diagnosis(&[("cudnn.status", Confidence::High)]);
        d.findings[0].role = Role::Context;
        let p = judge(&case(NONE, &[]), &d);
        assert!(p.top1 && !p.confident_wrong);
        // For a labelled case the context finding still shows the class first.
        assert!(judge(&case("cudnn.status", &[]), &d).top1);
    }

    #[test]
    fn the_summary_line_has_the_fixed_shape() {
        let cases = vec![case("cuda.oom", &[]), case(NONE, &[])];
        let predictions = vec![
            judge(&cases[0], &diagnosis(&[("cuda.oom", Confidence::High)])),
            judge(&cases[1], &diagnosis(&[("nccl.error", Confidence::High)])),
        ];
        let r = report(predictions, &cases);
        assert_eq!(
            r.summary_line(),
            "eval: n=2 top1=0.500 top3=0.500 confident_wrong=1"
        );
        assert_eq!(r.classes["cuda.oom"].precision(), 1.0);
        assert_eq!(r.classes["nccl.error"].precision(), 0.0);
    }

    #[test]
    fn calibration_counts_how_often_each_confidence_level_is_right() {
        let cases = vec![
            case("cuda.oom", &[]),
            case("cuda.oom", &[]),
            case("nccl.error", &[]),
            case(NONE, &[]),
        ];
        let predictions = vec![
            judge(&cases[0], &diagnosis(&[("cuda.oom", Confidence::High)])),
            judge(&cases[1], &diagnosis(&[("nccl.error", Confidence::High)])),
            judge(&cases[2], &diagnosis(&[("nccl.error", Confidence::Low)])),
            judge(&cases[3], &diagnosis(&[])),
        ];
        let r = report(predictions, &cases);
        assert_eq!(r.calibration["high"], Calibration { cases: 2, right: 1 });
        assert_eq!(r.calibration["high"].accuracy(), 0.5);
        assert_eq!(r.calibration["low"], Calibration { cases: 1, right: 1 });
        assert_eq!(r.calibration["none"], Calibration { cases: 1, right: 1 });
        assert!(!r.calibration.contains_key("medium"));
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let err = read_cases(
            "{\"id\":\"a\",\"label\":\"x\",\"log\":\"\"}\nnot json\n",
            "dev.jsonl",
        )
        .err();
        assert!(err.is_some_and(|e| e.starts_with("dev.jsonl:2:")));
    }
}
