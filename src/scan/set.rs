//! Patterns matched together: one pass over a line says which of them match.
//!
//! The parser's dispatch set and the rule base's line patterns run on every candidate line. The
//! `regex` crate's `RegexSet` allocates a fresh match list on each call and lists the matches by
//! walking every pattern's slot; a [`LineSet`] fills a [`SetMatches`] that the caller keeps from
//! line to line, and lists the matches by stopping after the last one. Where lines rarely match
//! (progress and loss lines that only a rule's pattern made candidates), it first asks whether
//! anything matches at all: 10-16 % off a pass over the held-out corpus's logs.

use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternID, PatternSet, meta};

/// How a set reads its patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetSyntax {
    /// Unicode classes on UTF-8 text, as `regex::RegexSet` reads them by default.
    Unicode,
    /// ASCII classes on bytes, as the rule patterns are compiled (see `rules::pattern`).
    Bytes,
}

/// A set that did not compile.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetError(#[from] Box<meta::BuildError>);

/// Patterns compiled into one automaton.
#[derive(Debug, Clone)]
pub struct LineSet {
    regex: meta::Regex,
}

/// Which patterns of a [`LineSet`] matched the last line given to [`LineSet::matches`].
#[derive(Debug, Clone)]
pub struct SetMatches {
    which: PatternSet,
    /// The same patterns as a list, in ascending order. Listing a `PatternSet` walks every slot
    /// up to its last match, which cost as much as the search itself on progress lines matched
    /// by a pattern late in the rule base; the list of the line before is kept when the new line
    /// matched exactly the same patterns (the usual case in a run of similar lines).
    list: Vec<usize>,
    /// Lines in a row on which no pattern matched.
    misses: u32,
}

/// After this many lines in a row without a match, a line is first asked whether anything
/// matches at all: a search that may stop at its first match, and runs faster than listing every
/// match. Where most lines match (a traceback), the list is made at once.
const MISSES_BEFORE_CHECKING: u32 = 4;

impl LineSet {
    /// Compiles `patterns`, pattern `i` of the set being `patterns[i]`.
    pub fn new<P: AsRef<str>>(patterns: &[P], syntax: SetSyntax) -> Result<Self, SetError> {
        let config = meta::Config::new()
            .match_kind(MatchKind::All)
            .which_captures(WhichCaptures::None);
        let (config, syntax) = match syntax {
            // The `regex` crate's defaults, but for the lazy DFA's cache: at its 2 MiB the
            // parser's dispatch set fills it on a few hundred different real logs, clears it
            // and builds the same states again, which made a pass over the held-out corpus's
            // logs 3.3 times slower (`cargo bench --bench pipeline -- held_out_corpus`). The
            // cache grows only as states are built: those logs need well under 8 MiB.
            SetSyntax::Unicode => (
                config
                    .utf8_empty(true)
                    .nfa_size_limit(Some(10 << 20))
                    .hybrid_cache_capacity(16 << 20),
                syntax::Config::new(),
            ),
            // A whole rule base as one set stays well under these.
            SetSyntax::Bytes => (
                config
                    .utf8_empty(false)
                    .nfa_size_limit(Some(512 << 20))
                    .hybrid_cache_capacity(64 << 20),
                syntax::Config::new().unicode(false).utf8(false),
            ),
        };
        let regex = meta::Builder::new()
            .configure(config)
            .syntax(syntax)
            .build_many(patterns)
            .map_err(Box::new)?;
        Ok(Self { regex })
    }

    /// The number of patterns.
    pub fn len(&self) -> usize {
        self.regex.pattern_len()
    }

    /// Whether the set has no pattern.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty match list for this set.
    pub fn new_matches(&self) -> SetMatches {
        SetMatches {
            which: PatternSet::new(self.len()),
            list: Vec::new(),
            misses: 0,
        }
    }

    /// Records in `out` which patterns match somewhere in `line`; returns whether any did.
    /// `out` must come from [`LineSet::new_matches`] of this set.
    pub fn matches(&self, line: &[u8], out: &mut SetMatches) -> bool {
        if !out.which.is_empty() {
            out.which.clear();
        }
        let input = Input::new(line);
        if out.misses >= MISSES_BEFORE_CHECKING && !self.regex.is_match(input.clone()) {
            out.misses = out.misses.saturating_add(1);
            out.list.clear();
            return false;
        }
        self.regex.which_overlapping_matches(&input, &mut out.which);
        out.update_list();
        let matched = !out.which.is_empty();
        out.misses = if matched { 0 } else { out.misses.saturating_add(1) };
        matched
    }
}

impl SetMatches {
    /// The patterns that matched, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.list.iter().copied()
    }

    /// Makes `list` name the patterns in `which`.
    fn update_list(&mut self) {
        let same = self.list.len() == self.which.len()
            && self
                .list
                .iter()
                .all(|&p| PatternID::new(p).is_ok_and(|id| self.which.contains(id)));
        if !same {
            self.list.clear();
            // Stop after the last match instead of walking every remaining slot.
            let which = &self.which;
            self.list
                .extend(which.iter().take(which.len()).map(|p| p.as_usize()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_lists_every_matching_pattern_in_order() {
        let set = LineSet::new(&["b", "a", "z", "a+"], SetSyntax::Bytes);
        let set = set.unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches(b"xaab", &mut out));
        assert_eq!(out.iter().collect::<Vec<_>>(), vec![0, 1, 3]);
    }

    #[test]
    fn matches_of_an_earlier_line_are_forgotten() {
        let set = LineSet::new(&["a", "b"], SetSyntax::Unicode).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches(b"a", &mut out));
        assert!(!set.matches(b"c", &mut out));
        assert_eq!(out.iter().count(), 0);
        assert!(set.matches(b"b", &mut out));
        assert_eq!(out.iter().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_line_matching_as_many_patterns_as_the_last_one_lists_its_own() {
        let set = LineSet::new(&["a", "b", "c"], SetSyntax::Bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        let mut listed = |line: &[u8]| {
            set.matches(line, &mut out);
            out.iter().collect::<Vec<_>>()
        };
        assert_eq!(listed(b"a"), vec![0]);
        assert_eq!(listed(b"a again"), vec![0]);
        assert_eq!(listed(b"b"), vec![1]);
        assert_eq!(listed(b"ab"), vec![0, 1]);
        assert_eq!(listed(b"bc"), vec![1, 2]);
        assert_eq!(listed(b"c"), vec![2]);
    }

    #[test]
    fn after_a_run_of_lines_without_a_match_every_match_is_still_listed() {
        let set = LineSet::new(&["a", "b", "ab"], SetSyntax::Bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        for _ in 0..10 {
            assert!(!set.matches(b"xyz", &mut out));
            assert_eq!(out.iter().count(), 0);
        }
        assert!(set.matches(b"xab", &mut out));
        assert_eq!(out.iter().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(!set.matches(b"x", &mut out));
        assert_eq!(out.iter().count(), 0, "a miss after the check clears the list");
    }

    #[test]
    fn the_syntax_decides_how_classes_read_non_ascii_text() {
        let unicode = LineSet::new(&[r"^\w+$"], SetSyntax::Unicode).unwrap_or_else(|e| panic!("{e}"));
        let bytes = LineSet::new(&[r"^\w+$"], SetSyntax::Bytes).unwrap_or_else(|e| panic!("{e}"));
        let (mut a, mut b) = (unicode.new_matches(), bytes.new_matches());
        assert!(unicode.matches("café".as_bytes(), &mut a));
        assert!(!bytes.matches("café".as_bytes(), &mut b));
    }

    #[test]
    fn a_bad_pattern_is_an_error_not_a_panic() {
        let err = LineSet::new(&["ok", "(unclosed"], SetSyntax::Bytes).err();
        assert!(err.is_some_and(|e| !e.to_string().is_empty()));
    }
}
