//! SARIF 2.1.0, for code-scanning dashboards: one result per finding, the rules that fired as the
//! tool's rule descriptors, the log as the artifact, the fingerprint as a partial fingerprint.

use serde_json::{Value, json};

use crate::model::{Diagnosis, Role, Severity};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// Renders the SARIF log; `source` is the analysed log's path (or `-`).
pub fn sarif(diagnosis: &Diagnosis, source: &str) -> String {
    let uri = if source == "-" { "stdin" } else { source };
    let mut rule_ids: Vec<&str> = Vec::new();
    let mut descriptors = Vec::new();
    for f in &diagnosis.findings {
        if !rule_ids.contains(&f.rule.as_str()) {
            rule_ids.push(&f.rule);
            descriptors.push(json!({
                "id": f.rule,
                "name": f.class,
                "shortDescription": { "text": f.title },
                "help": { "text": f.fixes.iter().map(|x| x.title.as_str()).collect::<Vec<_>>().join("\n") },
                "properties": { "class": f.class, "priority": f.priority },
            }));
        }
    }
    let results: Vec<Value> = diagnosis
        .findings
        .iter()
        .map(|f| {
            let level = match (f.role, f.severity) {
                (Role::Context, _) | (_, Severity::Info) => "note",
                (Role::Root, Severity::Error) => "error",
                _ => "warning",
            };
            let locations: Vec<Value> = f
                .evidence
                .iter()
                .take(1)
                .map(|e| {
                    json!({
                        "physicalLocation": {
                            "artifactLocation": { "uri": uri },
                            "region": { "startLine": e.line, "snippet": { "text": e.text } },
                        }
                    })
                })
                .collect();
            let mut result = json!({
                "ruleId": f.rule,
                "ruleIndex": rule_ids.iter().position(|r| *r == f.rule).unwrap_or(0),
                "level": level,
                "message": { "text": f.summary },
                "locations": locations,
                "properties": {
                    "class": f.class,
                    "role": f.role,
                    "origin": f.origin,
                    "confidence": f.confidence,
                    "captures": f.captures,
                },
            });
            if let Some(fp) = &diagnosis.fingerprint {
                result["partialFingerprints"] = json!({ "faultline/v1": fp });
            }
            result
        })
        .collect();
    let doc = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "faultline",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": descriptors,
            }},
            "artifacts": [{ "location": { "uri": uri } }],
            "results": results,
        }],
    });
    let mut doc = doc;
    if let Some(replay) = &diagnosis.replay {
        // SARIF has no place for a verdict on tensors: the run's properties carry it.
        doc["runs"][0]["properties"] = json!({ "replay": replay });
    }
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
