//! The diagnosis as text for a terminal.

use std::fmt::Write;

use crate::model::{Confidence, Diagnosis, Finding, FindingOrigin, Role};

/// Evidence lines shown per finding.
const SHOWN_EVIDENCE: usize = 4;

/// Renders the diagnosis; `source` names the log (a path, or `-`).
pub fn human(diagnosis: &Diagnosis, source: &str) -> String {
    let mut out = String::new();
    let roots = diagnosis.findings.iter().filter(|f| f.role == Role::Root).count();
    let symptoms = diagnosis
        .findings
        .iter()
        .filter(|f| f.role == Role::Symptom)
        .count();
    let _ = writeln!(
        out,
        "faultline: {source}: {} line(s), {roots} root cause(s), {symptoms} symptom(s)",
        diagnosis.lines
    );
    if !diagnosis.is_diagnosed() {
        let _ = writeln!(out, "\nNo known GPU / PyTorch failure found in this log.");
        if let Some(error) = &diagnosis.unexplained_error {
            let _ = writeln!(out, "Its last error, line {}: {}", error.line, error.text);
        }
    }
    for (i, finding) in diagnosis.findings.iter().enumerate() {
        out.push('\n');
        write_finding(&mut out, finding, i == 0);
    }
    if !diagnosis.environment.is_empty() {
        let env: Vec<String> = diagnosis
            .environment
            .iter()
            .map(|(k, v)| format!("{k} {}", v.join(" / ")))
            .collect();
        let _ = writeln!(out, "\nenvironment: {}", env.join(", "));
    }
    for w in &diagnosis.warnings {
        let _ = writeln!(out, "warning: {}", w.message);
    }
    if let Some(fp) = &diagnosis.fingerprint {
        let _ = writeln!(out, "fingerprint: {fp}");
    }
    out
}

fn write_finding(out: &mut String, f: &Finding, primary: bool) {
    let role = match f.role {
        Role::Root => "ROOT CAUSE",
        Role::Symptom => "SYMPTOM",
        Role::Context => "CONTEXT",
    };
    let confidence = match f.confidence {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    };
    match f.origin {
        FindingOrigin::Rule => {
            let _ = writeln!(out, "{role} [{confidence} confidence] {}", f.title);
            let _ = writeln!(out, "  class {} · rule {}", f.class, f.rule);
        }
        FindingOrigin::Detector => {
            let _ = writeln!(out, "{role} [{confidence} confidence, detector] {}", f.title);
            let _ = writeln!(
                out,
                "  class {} · detector {} (no specific rule knows this wording: write one)",
                f.class, f.rule
            );
        }
    }
    if let Some(of) = &f.symptom_of {
        let _ = writeln!(out, "  symptom of {of}");
    }
    let _ = writeln!(out, "  {}", f.summary);
    let _ = writeln!(out, "  evidence:");
    for e in f.evidence.iter().take(SHOWN_EVIDENCE) {
        let rank = e.rank.map(|r| format!(" [rank {r}]")).unwrap_or_default();
        let repeats = e.repeats.map(|n| format!("  (x{n})")).unwrap_or_default();
        let _ = writeln!(out, "    line {}{rank}: {}{repeats}", e.line, e.text);
    }
    if f.evidence.len() > SHOWN_EVIDENCE {
        let _ = writeln!(out, "    … {} more", f.evidence.len() - SHOWN_EVIDENCE);
    }
    if !f.captures.is_empty() {
        let values: Vec<String> = f.captures.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let _ = writeln!(out, "  values: {}", values.join(", "));
    }
    if !primary {
        return;
    }
    if !f.causes.is_empty() {
        let _ = writeln!(out, "  likely causes:");
        for (i, c) in f.causes.iter().enumerate() {
            let _ = writeln!(out, "    {}. {} — {}", i + 1, c.title, c.detail);
        }
    }
    if !f.fixes.is_empty() {
        let _ = writeln!(out, "  fixes:");
        for (i, fix) in f.fixes.iter().enumerate() {
            let _ = writeln!(out, "    {}. {}", i + 1, fix.title);
            if let Some(code) = &fix.code {
                for line in code.trim_matches('\n').lines() {
                    let _ = writeln!(out, "       | {line}");
                }
            }
        }
    }
    if let Some(next) = &f.next_artifact {
        let _ = writeln!(out, "  to tell the causes apart, capture: {next}");
    }
    if !f.confidence_reasons.is_empty() {
        let _ = writeln!(out, "  confidence: {}", f.confidence_reasons.join("; "));
    }
}
