//! How rule patterns are compiled: byte-wise, with ASCII classes (`\w`, `\d`, `\s`, `\b` and case
//! folding are ASCII; `.` is any byte but `\n`; a literal non-ASCII character matches its UTF-8
//! bytes). Log keywords are ASCII, so this means what authors intend, and it keeps rules cheap:
//! a Unicode `\w` makes a regex 30 times costlier to compile, and a Unicode `\b` forces the slow
//! engine on any line with a non-ASCII byte.

use std::sync::OnceLock;

use regex::bytes::{Captures, Regex, RegexBuilder};
use regex_syntax::hir::Hir;

/// Largest compiled automaton accepted (a whole rule base as one set stays well under it).
const SIZE_LIMIT: usize = 512 << 20;

/// A rule pattern: validated when its rule loads, compiled the first time a log needs it. Most
/// are never compiled: a line pattern's hits come from the rule base's line set (only its groups
/// need its own regex), and an event condition runs only on the events of a log that has them.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl Pattern {
    /// Validates `pattern` (see [`Pattern::parse`]); compiles nothing yet.
    pub fn new(pattern: &str) -> Result<Self, String> {
        Self::parse(pattern)?;
        Ok(Self::parsed(pattern))
    }

    /// A pattern [`Pattern::parse`] has accepted.
    pub(super) fn parsed(pattern: &str) -> Self {
        Self {
            source: pattern.to_owned(),
            compiled: OnceLock::new(),
        }
    }

    /// Parses `pattern` without building an automaton (what loading a rule does): the parsed
    /// form is what the rule base's combined automata are compiled from, so no pattern is parsed
    /// twice.
    pub fn parse(pattern: &str) -> Result<Hir, String> {
        regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .map_err(|e| e.to_string())
    }

    /// The pattern as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether it matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.regex().is_some_and(|re| re.is_match(text.as_bytes()))
    }

    /// The first match's groups.
    pub fn captures<'t>(&self, text: &'t str) -> Option<Captures<'t>> {
        self.regex()?.captures(text.as_bytes())
    }

    /// The compiled regex, compiled now if it is not yet (`None` only if a validated pattern
    /// exceeds the size limit, which is logged: the pattern then matches nothing).
    pub fn regex(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| {
                RegexBuilder::new(&self.source)
                    .unicode(false)
                    .size_limit(SIZE_LIMIT)
                    .build()
                    .map_err(|e| {
                        tracing::error!(pattern = %self.source, error = %e, "a validated rule pattern does not compile");
                    })
                    .ok()
            })
            .as_ref()
    }
}

/// A capture group's text (lossy where a match split a character).
pub fn group_text(c: &Captures<'_>, name: &str) -> Option<String> {
    c.name(name)
        .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_ascii_and_literals_match_their_bytes() {
        let p = Pattern::new(r"│ (?P<f>\S+) in \w+").unwrap_or_else(|e| panic!("{e}"));
        assert!(p.is_match("│ /a/b.py in forward"));
        let c = p.captures("│ /chemin/é.py in f");
        assert_eq!(
            c.and_then(|c| group_text(&c, "f")).as_deref(),
            Some("/chemin/é.py")
        );
        assert!(Pattern::new("(?i)cuda OUT of memory").is_ok_and(|p| p.is_match("Cuda out OF MEMORY")));
        assert!(Pattern::parse("a(").is_err());
        assert!(
            Pattern::parse(r"\p{Greek}").is_err(),
            "Unicode classes are not rule syntax"
        );
    }
}
