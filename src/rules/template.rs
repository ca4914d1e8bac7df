//! Text with `{name}` and `{name|fallback}` placeholders filled from captured values.

use std::collections::BTreeMap;

use crate::model::Text;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
    /// The text of a template with no placeholder, shared by every diagnosis that shows it.
    literal: Option<Text>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Value { name: String, fallback: Option<String> },
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(String);

/// Shown for a placeholder with no value and no fallback.
pub const MISSING: &str = "?";

impl Template {
    /// Parses `text`. `{{` and `}}` stand for literal braces.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let body: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    let (name, fallback) = match body.split_once('|') {
                        Some((n, f)) => (n.trim(), Some(f.to_owned())),
                        None => (body.trim(), None),
                    };
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                    {
                        return Err(TemplateError(format!("bad placeholder {{{body}}}")));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Value {
                        name: name.to_owned(),
                        fallback,
                    });
                }
                '}' => return Err(TemplateError("unmatched `}` (write `}}` for a brace)".into())),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        let literal = match parts.as_slice() {
            [] => Some(Text::shared("")),
            [Part::Text(t)] => Some(Text::shared(t)),
            _ => None,
        };
        Ok(Self {
            source: text.to_owned(),
            parts,
            literal,
        })
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The placeholder names, with whether each has a fallback.
    pub fn placeholders(&self) -> impl Iterator<Item = (&str, bool)> {
        self.parts.iter().filter_map(|p| match p {
            Part::Value { name, fallback } => Some((name.as_str(), fallback.is_some())),
            Part::Text(_) => None,
        })
    }

    /// Fills the placeholders from `values`, as a diagnosis's text: a template with none is
    /// shared, not copied.
    pub fn render_text(&self, values: &BTreeMap<String, String>) -> Text {
        match &self.literal {
            Some(text) => text.clone(),
            None => self.render(values).into(),
        }
    }

    /// Fills the placeholders from `values`.
    pub fn render(&self, values: &BTreeMap<String, String>) -> String {
        // Sized for the text and a short value per placeholder: one allocation for most.
        let capacity = self
            .parts
            .iter()
            .map(|part| match part {
                Part::Text(t) => t.len(),
                Part::Value { .. } => 24,
            })
            .sum();
        let mut out = String::with_capacity(capacity);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Value { name, fallback } => match (values.get(name), fallback) {
                    (Some(v), _) => out.push_str(v),
                    (None, Some(f)) => out.push_str(f),
                    (None, None) => out.push_str(MISSING),
                },
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn placeholders_are_filled_or_fall_back() {
        let t = Template::parse("label {value} >= num_classes {n|the number of classes}")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.render(&values(&[("value", "5"), ("n", "2")])),
            "label 5 >= num_classes 2"
        );
        assert_eq!(
            t.render(&values(&[("value", "5")])),
            "label 5 >= num_classes the number of classes"
        );
        assert_eq!(
            t.render(&values(&[])),
            "label ? >= num_classes the number of classes"
        );
    }

    #[test]
    fn doubled_braces_are_literal() {
        let t = Template::parse("d = {{'pad_token': '[PAD]'}}").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.render(&values(&[])), "d = {'pad_token': '[PAD]'}");
    }

    #[test]
    fn malformed_placeholders_are_errors() {
        assert!(Template::parse("{a b}").is_err());
        assert!(Template::parse("x }").is_err());
        assert!(Template::parse("{}").is_err());
    }
}
