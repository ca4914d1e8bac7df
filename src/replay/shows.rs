//! What offending labels show of one cause alone ([`Shows`], a rule's `shows` parameter).
//!
//! Several causes of a finding can name one check on one tensor ("labels numbered from 1",
//! "padding with the wrong value", "too few classes" all end as labels >= num_classes). A
//! confirmation then shows the observation they share, not which of them holds. A cause is
//! confirmed alone only when the offending values discriminate it, as its `shows` says:
//!
//! - `padding:-1,pad_token_id`: every offending value is one of these negative marks (integers,
//!   or metadata keys read as `KEY` or `model.KEY`), the marks a padding or unlabelled target
//!   carries. A mark at or past the class count (a [PAD] id past the vocabulary) counts for
//!   nothing: a head narrower than the label set gives that value too.
//!
//! Classes numbered from 1 have no condition: labels that run `1..=C` are also what labels padded
//! with `C` give in a batch that happens to hold no class 0, so one batch cannot show that cause
//! alone, and it stays consistent with the data.
//!
//! Only a `target_bounds` confirmation is judged: its offending values are those of one tensor
//! against one bound (`num_classes` and `ignore_index` as the check used them).

use super::{Backend, CheckResult, ReplayError, Scan, Snapshot, TensorRef};

/// The name of the parameter in a rule's `replay` part.
pub const PARAM: &str = "shows";

/// The condition under which the offending values show one cause alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shows {
    /// Every offending value is one of these marks, each negative.
    Padding(Vec<Mark>),
}

/// A padding mark: a value, or the metadata key that records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// A value (`-1`).
    Value(i64),
    /// A metadata key (`pad_token_id`), also read as `model.KEY`.
    Key(String),
}

/// A `shows` text that names no condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shows = {text:?}: expected `padding:` with a comma-separated list of integers or metadata keys")]
pub struct BadShows {
    /// The text as given.
    pub text: String,
}

impl std::str::FromStr for Shows {
    type Err = BadShows;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadShows {
            text: text.to_owned(),
        };
        let text = text.trim();
        let list = text.strip_prefix("padding:").ok_or_else(bad)?;
        let marks: Vec<Mark> = list
            .split(',')
            .map(str::trim)
            .map(|m| match m.parse::<i64>() {
                Ok(v) => Some(Mark::Value(v)),
                Err(_) if is_key(m) => Some(Mark::Key(m.to_owned())),
                Err(_) => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        Ok(Shows::Padding(marks))
    }
}

fn is_key(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

impl Shows {
    /// What the offending values of the confirmation `result` show of this condition: `Some`
    /// with the words that say so when they discriminate the cause, `None` when they do not (or
    /// the result is not one this can judge).
    pub fn judge(
        &self,
        result: &CheckResult,
        snapshot: &Snapshot,
        backend: &dyn Backend,
    ) -> Result<Option<String>, ReplayError> {
        let Some(labels) = Judged::of(result, snapshot) else {
            return Ok(None);
        };
        match self {
            Shows::Padding(marks) => labels.padding(marks, snapshot, backend),
        }
    }
}

/// A `target_bounds` confirmation as the discriminators read it.
struct Judged<'a> {
    tensor: TensorRef<'a>,
    classes: i64,
    ignore: i64,
    offending: u64,
}

impl<'a> Judged<'a> {
    fn of(result: &CheckResult, snapshot: &'a Snapshot) -> Option<Self> {
        let int = |key: &str| result.params.get(key).and_then(|v| v.parse::<i64>().ok());
        if result.check != "target_bounds" || result.offending == 0 {
            return None;
        }
        let tensor = snapshot.tensor(result.tensor.as_deref()?)?;
        (!tensor.dtype.is_float()).then_some(())?;
        Some(Judged {
            tensor,
            classes: int("num_classes")?,
            ignore: int("ignore_index")?,
            offending: result.offending,
        })
    }

    /// How many elements equal `value`.
    fn count(&self, value: i64, backend: &dyn Backend) -> Result<u64, ReplayError> {
        let Some(next) = value.checked_add(1) else {
            // i64::MAX: counted as everything at or above it.
            let out = backend.scan(
                self.tensor,
                Scan::IntRange {
                    lo: i64::MIN,
                    hi: value,
                    skip: None,
                },
            )?;
            return Ok(out.offending);
        };
        let out = backend.scan(
            self.tensor,
            Scan::IntRange {
                lo: value,
                hi: next,
                skip: None,
            },
        )?;
        Ok(out.elements - out.offending)
    }

    fn offends(&self, value: i64) -> bool {
        value != self.ignore && (value < 0 || value >= self.classes)
    }

    fn padding(
        &self,
        marks: &[Mark],
        snapshot: &Snapshot,
        backend: &dyn Backend,
    ) -> Result<Option<String>, ReplayError> {
        let mut values: Vec<(i64, String)> = Vec::new();
        for mark in marks {
            let found = match mark {
                Mark::Value(v) => Some((*v, v.to_string())),
                Mark::Key(key) => [key.clone(), format!("model.{key}")]
                    .iter()
                    .find_map(|k| snapshot.param(k))
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .map(|v| (v, format!("{key} {v}"))),
            };
            // Only a negative mark tells padding from a narrower head (no class is negative).
            if let Some((v, label)) = found.filter(|(v, _)| *v < 0 && self.offends(*v))
                && !values.iter().any(|(seen, _)| *seen == v)
            {
                values.push((v, label));
            }
        }
        let mut counted = 0u64;
        let mut seen = Vec::new();
        for (value, label) in &values {
            let n = self.count(*value, backend)?;
            if n > 0 {
                counted += n;
                seen.push(label.as_str());
            }
        }
        Ok((counted == self.offending && !seen.is_empty()).then(|| {
            format!(
                "every one of the {} offending values is the padding mark {}",
                self.offending,
                seen.join(" or ")
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shows_text_names_padding_marks_and_nothing_else() {
        assert_eq!(
            "padding:-1, pad_token_id".parse::<Shows>(),
            Ok(Shows::Padding(vec![
                Mark::Value(-1),
                Mark::Key("pad_token_id".into())
            ]))
        );
        assert!("padding:".parse::<Shows>().is_err());
        assert!("padding:-1,pad id".parse::<Shows>().is_err());
        assert!("zero_based".parse::<Shows>().is_err());
        assert!(
            "one_based".parse::<Shows>().is_err(),
            "one batch cannot tell 1-based labels from labels padded with C"
        );
    }
}
