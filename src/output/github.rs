//! GitHub Actions workflow commands (`::error file=…,line=…,title=…::message`), one per finding,
//! so a CI job's summary shows the diagnosis next to the log; a log with no diagnosis gets a
//! notice at the error it ends with.

use crate::model::{Diagnosis, FindingOrigin, Role, Severity, Verdict};
use crate::replay::summary;

/// Renders the annotations; `source` is the log's path as the job sees it (or `-`).
pub fn github_annotations(diagnosis: &Diagnosis, source: &str) -> String {
    let mut out = String::new();
    for f in diagnosis.findings.iter().filter(|f| f.role != Role::Context) {
        let command = match (f.role, f.severity) {
            (Role::Root, Severity::Error) => "error",
            (_, Severity::Info) => "notice",
            _ => "warning",
        };
        let role = if f.role == Role::Root {
            "root cause"
        } else {
            "symptom"
        };
        let mut message = f.summary.clone();
        if let Some(fix) = f.fixes.first() {
            message.push_str(&format!("\nFix: {}", fix.title));
        }
        let by = match f.origin {
            FindingOrigin::Rule => "rule",
            FindingOrigin::Detector => "class detector",
        };
        message.push_str(&format!(
            "\n(class {}, {by} {}, confidence {:?})",
            f.class, f.rule, f.confidence
        ));
        out.push_str(&annotation(
            command,
            source,
            f.evidence.first().map(|e| e.line),
            &format!("faultline {role}: {}", f.title),
            &message,
        ));
    }
    if let Some(replay) = &diagnosis.replay {
        // The replay's one verdict, where the primary finding points.
        let command = match replay.verdict {
            Verdict::Confirmed => "error",
            _ => "notice",
        };
        out.push_str(&annotation(
            command,
            source,
            diagnosis
                .primary()
                .and_then(|f| f.evidence.first())
                .map(|e| e.line),
            &format!(
                "faultline replay ({}): {}",
                replay.backend,
                summary::word(replay.verdict)
            ),
            &summary::lines(replay).join("\n"),
        ));
    }
    if let Some(error) = &diagnosis.unexplained_error {
        // Nothing known: a notice still says so in the job's summary, at the error to read.
        out.push_str(&annotation(
            "notice",
            source,
            Some(error.line),
            "faultline: no known GPU / PyTorch failure",
            &format!("The log's last error, which no rule explains: {}", error.text),
        ));
    }
    out
}

/// One workflow command: `::command file=…,line=…,title=…::message`, the file left out for
/// standard input.
fn annotation(command: &str, source: &str, line: Option<u64>, title: &str, message: &str) -> String {
    let mut props = Vec::new();
    if source != "-" {
        props.push(format!("file={}", property(source)));
    }
    if let Some(line) = line {
        props.push(format!("line={line}"));
    }
    props.push(format!("title={}", property(title)));
    format!("::{command} {}::{}\n", props.join(","), data(message))
}

/// Escapes a workflow command's message.
fn data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a workflow command's property value.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_with_no_diagnosis_gets_a_notice_at_its_last_error() {
        let diagnosis = Diagnosis {
            format_version: 1,
            lines: 3,
            bytes: 60,
            fingerprint: None,
            findings: Vec::new(),
            unexplained_error: Some(crate::model::EvidenceLine {
                line: 3,
                text: "KeyError: 'warmup_ratio'".into(),
                rank: None,
                repeats: None,
            }),
            environment: Default::default(),
            warnings: Vec::new(),
            replay: None,
        };
        assert_eq!(
            github_annotations(&diagnosis, "logs/train.log"),
            "::notice file=logs/train.log,line=3,title=faultline%3A no known GPU / PyTorch failure::The log's last error, which no rule explains: KeyError: 'warmup_ratio'\n"
        );
        let nothing = Diagnosis {
            unexplained_error: None,
            ..diagnosis
        };
        assert_eq!(github_annotations(&nothing, "-"), "");
    }

    #[test]
    fn a_replay_gives_one_annotation_with_its_verdict_and_what_was_not_checked() {
        let diagnosis = Diagnosis {
            format_version: 1,
            lines: 1,
            bytes: 1,
            fingerprint: None,
            findings: Vec::new(),
            unexplained_error: None,
            environment: Default::default(),
            warnings: Vec::new(),
            replay: Some(crate::model::ReplaySummary {
                verdict: Verdict::Inconclusive,
                decided: vec![crate::model::DecidedCause {
                    cause: "Labels >= num_classes".into(),
                    verdict: Verdict::Refuted,
                    summary: "all 4 labels in [0, 2)".into(),
                }],
                observations: vec![],
                not_checked: vec!["Token ids".into()],
                needs: vec!["vocab_size".into()],
                backend: "cpu".into(),
            }),
        };
        assert_eq!(
            github_annotations(&diagnosis, "-"),
            "::notice title=faultline replay (cpu)%3A inconclusive::refuted: all 4 labels in [0, 2) — Labels >= num_classes%0Anot checked (1): Token ids; they need vocab_size%0Averdict for the diagnosis: inconclusive\n"
        );
        let sarif: serde_json::Value = serde_json::from_str(&crate::output::sarif::sarif(&diagnosis, "-"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sarif["runs"][0]["properties"]["replay"]["verdict"],
            "inconclusive"
        );
        assert_eq!(sarif["runs"][0]["properties"]["replay"]["needs"][0], "vocab_size");
    }

    #[test]
    fn messages_and_properties_are_escaped() {
        assert_eq!(data("50%\nnext"), "50%25%0Anext");
        assert_eq!(property("a: b, c"), "a%3A b%2C c");
    }
}
