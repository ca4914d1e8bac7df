//! Rendering a [`Diagnosis`](crate::model::Diagnosis) for people and programs: human text, JSON,
//! GitHub Actions annotations and SARIF 2.1.0. Pure functions from a diagnosis to a string.

mod github;
mod human;
mod sarif;

pub use github::github_annotations;
pub use human::human;
pub use sarif::sarif;

use crate::model::Diagnosis;

/// The diagnosis as pretty JSON (the document `faultline analyze --format json` prints).
pub fn json(diagnosis: &Diagnosis) -> String {
    serde_json::to_string_pretty(diagnosis).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
