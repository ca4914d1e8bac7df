//! The typed vocabulary shared by every stage: line spans, parsed events, findings and diagnoses.
//!
//! This module owns data only; it holds no parsing logic and does no IO.

mod bundle;
mod diagnosis;
mod event;
mod text;

pub use bundle::*;
pub use diagnosis::*;
pub use event::*;
pub use text::Text;

use serde::{Deserialize, Serialize};

/// An inclusive range of ORIGINAL line numbers (1-based) in the raw log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Span {
    /// First line of the range.
    pub start: u64,
    /// Last line of the range (equal to `start` for a one-line span).
    pub end: u64,
}

impl Span {
    /// A span covering exactly one line.
    pub fn line(number: u64) -> Self {
        Self {
            start: number,
            end: number,
        }
    }

    /// Grows the span so that it also covers `number`.
    pub fn extend_to(&mut self, number: u64) {
        self.start = self.start.min(number);
        self.end = self.end.max(number);
    }

    /// Whether `number` lies inside the span.
    pub fn contains(&self, number: u64) -> bool {
        (self.start..=self.end).contains(&number)
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

/// A non-fatal problem met while reading a log: the input is still processed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable machine-readable code, e.g. `invalid_utf8`.
    pub code: String,
    /// Human explanation.
    pub message: String,
    /// First line concerned, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl Warning {
    /// Builds a warning.
    pub fn new(code: &str, message: impl Into<String>, line: Option<u64>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            line,
        }
    }
}
