//! Patterns matched together: one pass over a line says which of them match.
//!
//! The rule base's line patterns, with the parser's triggers in the same set (see
//! `diagnose::LineAnalyzer`), run on every candidate line. A [`LineSet`] is one lazy DFA over all
//! of its patterns, searched forward only: `regex`'s `RegexSet` (and regex-automata's meta regex
//! under it) also compiles a reverse automaton that a set never uses (a third of the build, which
//! every `faultline analyze` pays before its first line), and lists matches by walking a slot per
//! pattern. Each [`SetMatches`] holds a DFA cache for as long as it lives and gives it back to its
//! set when dropped, so the states one analysis built serve the next. Where lines rarely match
//! (progress and loss lines that only a rule's pattern made candidates), it first asks whether
//! anything matches at all: 10-16 % off a pass over the held-out corpus's logs.

use std::borrow::{Borrow, Cow};
use std::sync::{Arc, Mutex, PoisonError};

use regex_automata::hybrid::dfa::{Cache, DFA, OverlappingState};
use regex_automata::nfa::thompson::{self, NFA, WhichCaptures, pikevm};
use regex_automata::{Input, MatchKind, PatternSet};
use regex_syntax::hir::Hir;

use super::set_form::set_form;

/// A set that did not compile.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// A pattern does not parse.
    #[error("{0}")]
    Syntax(#[from] Box<regex_syntax::Error>),
    /// The whole is over the size limit.
    #[error("{0}")]
    Compile(#[from] Box<thompson::BuildError>),
    /// The lazy DFA refused the automaton.
    #[error("{0}")]
    Dfa(#[from] Box<regex_automata::hybrid::BuildError>),
}

/// Patterns compiled into one automaton.
#[derive(Debug, Clone)]
pub struct LineSet {
    dfa: DFA,
    /// Answers where the lazy DFA cannot (a Unicode word boundary on a non-ASCII line; the
    /// faultline sets have none, so this never runs in practice).
    pikevm: pikevm::PikeVM,
    /// DFA caches not held by a [`SetMatches`] right now.
    caches: Arc<Mutex<Vec<Cache>>>,
}

/// Which patterns of a [`LineSet`] matched the last line given to [`LineSet::matches`], and the
/// search state (the lazy DFA's cache) for the next line.
#[derive(Debug)]
pub struct SetMatches {
    /// Matched patterns, ascending.
    list: Vec<usize>,
    /// `seen[p]`: pattern `p` is in `list` (an overlapping search reports a pattern once per
    /// place where it matches).
    seen: Vec<bool>,
    /// Lines in a row on which no pattern matched.
    misses: u32,
    /// Always `Some` until dropped.
    cache: Option<Cache>,
    pikevm: Option<(pikevm::Cache, PatternSet)>,
    home: Arc<Mutex<Vec<Cache>>>,
}

/// After this many lines in a row without a match, a line is first asked whether anything
/// matches at all: a search that may stop at its first match, and runs faster than listing every
/// match. Where most lines match (a traceback), the list is made at once.
const MISSES_BEFORE_CHECKING: u32 = 4;

/// The most memory a lazy DFA cache may take. At 2 MiB the parser's trigger set filled it on a
/// few hundred different real logs, cleared it and built the same states again, which made a
/// pass over the held-out corpus's logs 3.3 times slower (`cargo bench --bench pipeline`). The
/// cache grows only as states are built: a 100 MB noisy log takes ~3 MiB.
const CACHE_BYTES: usize = 64 << 20;

impl LineSet {
    /// Compiles `patterns`, pattern `i` of the set being `patterns[i]`, as the rule patterns are
    /// read (see `rules::pattern`): ASCII classes on bytes, unless a pattern asks for Unicode
    /// (`(?u:…)`).
    pub fn new<P: AsRef<str>>(patterns: &[P]) -> Result<Self, SetError> {
        let mut parser = regex_syntax::ParserBuilder::new();
        parser.unicode(false).utf8(false);
        let parsed = patterns
            .iter()
            .map(|p| parser.build().parse(p.as_ref()).map_err(Box::new))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_hirs(&parsed)
    }

    /// Compiles patterns already parsed (pattern `i` of the set is `patterns[i]`), each in the
    /// form that decides whether it matches a line and no more ([`set_form`]).
    pub fn from_hirs<H: Borrow<Hir>>(patterns: &[H]) -> Result<Self, SetError> {
        let patterns: Vec<Cow<'_, Hir>> = patterns.iter().map(|p| set_form(p.borrow())).collect();
        let nfa: NFA = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(WhichCaptures::None)
                    // A whole rule base as one set stays well under it.
                    .nfa_size_limit(Some(512 << 20)),
            )
            .build_many_from_hir(&patterns)
            .map_err(Box::new)?;
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    .match_kind(MatchKind::All)
                    .cache_capacity(CACHE_BYTES)
                    .unicode_word_boundary(true),
            )
            .build_from_nfa(nfa.clone())
            .map_err(Box::new)?;
        let pikevm = pikevm::PikeVM::builder()
            .configure(pikevm::Config::new().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .map_err(Box::new)?;
        Ok(Self {
            dfa,
            pikevm,
            caches: Arc::default(),
        })
    }

    /// The number of patterns.
    pub fn len(&self) -> usize {
        self.dfa.pattern_len()
    }

    /// Whether the set has no pattern.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty match list for this set, with a DFA cache that earlier lists of this set
    /// warmed when there is one.
    pub fn new_matches(&self) -> SetMatches {
        let cache = self
            .caches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| self.dfa.create_cache());
        SetMatches {
            list: Vec::new(),
            seen: vec![false; self.len()],
            misses: 0,
            cache: Some(cache),
            pikevm: None,
            home: Arc::clone(&self.caches),
        }
    }

    /// Records in `out` which patterns match somewhere in `line` (one line: no `\n` in it);
    /// returns whether any did. `out` must come from [`LineSet::new_matches`] of this set.
    pub fn matches(&self, line: &[u8], out: &mut SetMatches) -> bool {
        out.clear();
        let input = Input::new(line);
        if out.misses >= MISSES_BEFORE_CHECKING && !self.is_match(&input, out) {
            out.misses = out.misses.saturating_add(1);
            return false;
        }
        if self.list_matches(&input, out).is_err() {
            self.list_matches_slowly(&input, out);
        }
        out.list.sort_unstable();
        let matched = !out.list.is_empty();
        out.misses = if matched { 0 } else { out.misses.saturating_add(1) };
        matched
    }

    fn is_match(&self, input: &Input<'_>, out: &mut SetMatches) -> bool {
        let cache = out.cache.get_or_insert_with(|| self.dfa.create_cache());
        let earliest = input.clone().earliest(true);
        match self.dfa.try_search_fwd(cache, &earliest) {
            Ok(found) => found.is_some(),
            Err(_) => {
                let (cache, _) = self.pikevm_state(&mut out.pikevm);
                self.pikevm.is_match(cache, earliest)
            }
        }
    }

    /// Every pattern that matches, by the lazy DFA (an error where it gives up).
    fn list_matches(
        &self,
        input: &Input<'_>,
        out: &mut SetMatches,
    ) -> Result<(), regex_automata::MatchError> {
        let SetMatches {
            cache, list, seen, ..
        } = out;
        let cache = cache.get_or_insert_with(|| self.dfa.create_cache());
        let mut state = OverlappingState::start();
        loop {
            self.dfa.try_search_overlapping_fwd(cache, input, &mut state)?;
            let Some(found) = state.get_match() else {
                return Ok(());
            };
            insert(list, seen, found.pattern().as_usize());
        }
    }

    fn list_matches_slowly(&self, input: &Input<'_>, out: &mut SetMatches) {
        out.clear();
        let SetMatches {
            pikevm, list, seen, ..
        } = out;
        let (cache, which) = self.pikevm_state(pikevm);
        which.clear();
        self.pikevm.which_overlapping_matches(cache, input, which);
        for p in which.iter() {
            insert(list, seen, p.as_usize());
        }
    }

    /// The PikeVM's cache and match set of a match list, made on first need.
    fn pikevm_state<'a>(
        &self,
        slot: &'a mut Option<(pikevm::Cache, PatternSet)>,
    ) -> &'a mut (pikevm::Cache, PatternSet) {
        slot.get_or_insert_with(|| (self.pikevm.create_cache(), PatternSet::new(self.len())))
    }
}

impl SetMatches {
    /// The patterns that matched, ascending.
    pub fn as_slice(&self) -> &[usize] {
        &self.list
    }

    fn clear(&mut self) {
        for &p in &self.list {
            if let Some(seen) = self.seen.get_mut(p) {
                *seen = false;
            }
        }
        self.list.clear();
    }
}

/// Adds `pattern` to `list` unless `seen` says it is there.
fn insert(list: &mut Vec<usize>, seen: &mut [bool], pattern: usize) {
    if let Some(seen) = seen.get_mut(pattern)
        && !*seen
    {
        *seen = true;
        list.push(pattern);
    }
}

impl Drop for SetMatches {
    /// Gives the DFA cache back to its set, for the next analysis.
    fn drop(&mut self) {
        if let Some(cache) = self.cache.take() {
            self.home
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(cache);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_lists_every_matching_pattern_in_order() {
        let set = LineSet::new(&["b", "a", "z", "a+"]);
        let set = set.unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches(b"xaab", &mut out));
        assert_eq!(out.as_slice().to_vec(), vec![0, 1, 3]);
    }

    #[test]
    fn matches_of_an_earlier_line_are_forgotten() {
        let set = LineSet::new(&["a", "b"]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches(b"a", &mut out));
        assert!(!set.matches(b"c", &mut out));
        assert_eq!(out.as_slice().len(), 0);
        assert!(set.matches(b"b", &mut out));
        assert_eq!(out.as_slice().to_vec(), vec![1]);
    }

    #[test]
    fn a_line_matching_as_many_patterns_as_the_last_one_lists_its_own() {
        let set = LineSet::new(&["a", "b", "c"]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        let mut listed = |line: &[u8]| {
            set.matches(line, &mut out);
            out.as_slice().to_vec()
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
        let set = LineSet::new(&["a", "b", "ab"]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        for _ in 0..10 {
            assert!(!set.matches(b"xyz", &mut out));
            assert_eq!(out.as_slice().len(), 0);
        }
        assert!(set.matches(b"xab", &mut out));
        assert_eq!(out.as_slice().to_vec(), vec![0, 1, 2]);
        assert!(!set.matches(b"x", &mut out));
        assert_eq!(out.as_slice().len(), 0, "a miss after the check clears the list");
    }

    #[test]
    fn classes_are_ascii_unless_a_pattern_asks_for_unicode() {
        let unicode = LineSet::new(&[r"(?u:^\w+$)"]).unwrap_or_else(|e| panic!("{e}"));
        let bytes = LineSet::new(&[r"^\w+$"]).unwrap_or_else(|e| panic!("{e}"));
        let (mut a, mut b) = (unicode.new_matches(), bytes.new_matches());
        assert!(unicode.matches("café".as_bytes(), &mut a));
        assert!(!bytes.matches("café".as_bytes(), &mut b));
    }

    #[test]
    fn a_pattern_that_matches_in_several_places_is_listed_once() {
        let set = LineSet::new(&["x", "a"]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches(b"a a a x", &mut out));
        assert_eq!(out.as_slice().to_vec(), vec![0, 1]);
    }

    #[test]
    fn a_unicode_word_boundary_on_non_ascii_text_is_still_answered() {
        // The lazy DFA gives up on such a line; the PikeVM answers.
        let set = LineSet::new(&[r"(?u:\bcafé\b)", "zzz"]).unwrap_or_else(|e| panic!("{e}"));
        let mut out = set.new_matches();
        assert!(set.matches("un café noir".as_bytes(), &mut out));
        assert_eq!(out.as_slice().to_vec(), vec![0]);
        assert!(!set.matches("un cafés noir".as_bytes(), &mut out));
        for _ in 0..5 {
            assert!(!set.matches("thé".as_bytes(), &mut out));
        }
        assert!(
            set.matches("le café".as_bytes(), &mut out),
            "after the misses, the check too"
        );
    }

    #[test]
    fn a_dropped_match_list_gives_its_warm_cache_to_the_next() {
        let set = LineSet::new(&["a"]).unwrap_or_else(|e| panic!("{e}"));
        let count = || set.caches.lock().map(|c| c.len()).unwrap_or(usize::MAX);
        let first = set.new_matches();
        let second = set.new_matches();
        assert_eq!(count(), 0);
        drop(first);
        drop(second);
        assert_eq!(count(), 2);
        let _third = set.new_matches();
        assert_eq!(count(), 1);
    }

    #[test]
    fn a_bad_pattern_is_an_error_not_a_panic() {
        let err = LineSet::new(&["ok", "(unclosed"]).err();
        assert!(err.is_some_and(|e| !e.to_string().is_empty()));
    }
}
