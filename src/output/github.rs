//! GitHub Actions workflow commands (`::error file=…,line=…,title=…::message`), one per finding,
//! so a CI job's summary shows the diagnosis next to the log.

use crate::model::{Diagnosis, Role, Severity};

/// Renders the annotations; `source` is the log's path as the job sees it (or `-`).
pub fn github_annotations(diagnosis: &Diagnosis, source: &str) -> String {
    let mut out = String::new();
    for f in diagnosis.findings.iter().filter(|f| f.role != Role::Context) {
        let command = match (f.role, f.severity) {
            (Role::Root, Severity::Error) => "error",
            (_, Severity::Info) => "notice",
            _ => "warning",
        };
        let mut props = Vec::new();
        if source != "-" {
            props.push(format!("file={}", property(source)));
        }
        if let Some(e) = f.evidence.first() {
            props.push(format!("line={}", e.line));
        }
        let role = if f.role == Role::Root {
            "root cause"
        } else {
            "symptom"
        };
        props.push(format!(
            "title={}",
            property(&format!("faultline {role}: {}", f.title))
        ));
        let mut message = f.summary.clone();
        if let Some(fix) = f.fixes.first() {
            message.push_str(&format!("\nFix: {}", fix.title));
        }
        message.push_str(&format!(
            "\n(class {}, rule {}, confidence {:?})",
            f.class, f.rule, f.confidence
        ));
        out.push_str(&format!("::{command} {}::{}\n", props.join(","), data(&message)));
    }
    out
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
    fn messages_and_properties_are_escaped() {
        assert_eq!(data("50%\nnext"), "50%25%0Anext");
        assert_eq!(property("a: b, c"), "a%3A b%2C c");
    }
}
