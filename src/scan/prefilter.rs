//! The raw-bytes prefilter: one regex that finds every line any consumer could care about.
//!
//! Consumers (the parser, the rules) write their patterns for NORMALIZED lines. The prefilter
//! searches RAW blocks, so each pattern is relaxed first: anchors and word boundaries are dropped
//! (a prefix such as a timestamp may stand before the text in the raw line) and capture groups
//! become plain groups. Because normalization only removes a line's prefix, its trailing
//! whitespace and the bytes that [`crate::normalize::needs_full_normalization`] detects (which the
//! prefilter also matches), a relaxed pattern matches the raw line whenever the original matches
//! the normalized one. The prefilter is a pure optimization: scanning with
//! [`Prefilter::every_line`] gives the same result.

use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

use regex_automata::Input;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::pool::Pool;
use regex_automata::util::syntax;
use regex_syntax::ast::{self, Ast, GroupKind};

/// Lines that must always be normalized in full: escape and control bytes, orphaned SGR codes.
const NEEDS_NORMALIZATION: &str =
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|(?-u:\xC2[\x80-\x9F])|\[[0-9;]{1,12}[mK]";

/// Finds candidate lines in raw bytes.
#[derive(Debug, Clone)]
pub struct Prefilter {
    search: Option<Arc<Search>>,
}

/// The prefilter's automaton: a lazy DFA searched forward only (it is asked where the first
/// match ends, never where one starts, so the reverse automaton a `Regex` would build is not
/// needed), and the caches of the threads that search with it.
struct Search {
    dfa: DFA,
    caches: Pool<Cache, CacheMaker>,
}

type CacheMaker = Box<dyn Fn() -> Cache + Send + Sync + UnwindSafe + RefUnwindSafe>;

impl std::fmt::Debug for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("dfa", &self.dfa)
            .finish_non_exhaustive()
    }
}

/// A pattern the prefilter could not take.
#[derive(Debug, thiserror::Error)]
pub enum PrefilterError {
    /// The pattern is not a valid regex.
    #[error("invalid pattern {pattern:?}: {source}")]
    Syntax {
        /// The pattern.
        pattern: String,
        /// Why.
        source: Box<ast::Error>,
    },
    /// The union of all patterns is too large to compile.
    #[error("the combined prefilter does not compile: {0}")]
    Build(#[from] Box<thompson::BuildError>),
    /// The lazy DFA refused the automaton.
    #[error("the combined prefilter does not compile: {0}")]
    Dfa(#[from] Box<regex_automata::hybrid::BuildError>),
}

impl Prefilter {
    /// A prefilter that makes every line a candidate (no filtering at all).
    pub const fn every_line() -> Self {
        Self { search: None }
    }

    /// A prefilter matching any line on which one of `patterns` (written for normalized lines)
    /// could match.
    pub fn new(patterns: impl IntoIterator<Item = impl AsRef<str>>) -> Result<Self, PrefilterError> {
        let mut union = String::from(NEEDS_NORMALIZATION);
        for pattern in patterns {
            union.push_str("|(?:");
            union.push_str(&relax(pattern.as_ref())?);
            union.push(')');
        }
        // As `regex::bytes::Regex` reads a pattern: Unicode classes, any byte allowed.
        let nfa = thompson::Compiler::new()
            .syntax(syntax::Config::new().utf8(false))
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None)
                    .nfa_size_limit(Some(256 << 20)),
            )
            .build(&union)
            .map_err(Box::new)?;
        let dfa = DFA::builder()
            .configure(DFA::config().cache_capacity(64 << 20))
            .build_from_nfa(nfa)
            .map_err(Box::new)?;
        let maker_dfa = dfa.clone();
        let maker: CacheMaker = Box::new(move || maker_dfa.create_cache());
        Ok(Self {
            search: Some(Arc::new(Search {
                dfa,
                caches: Pool::new(maker),
            })),
        })
    }

    /// A byte of the first candidate line at or after `start` (where `start` begins a line), or
    /// `None` when no line from `start` on is a candidate. With [`Prefilter::every_line`] it is
    /// `start` itself.
    ///
    /// The search stops at the first byte where any match ends (the DFA never runs backwards to
    /// find where it began): a match that lies within one line ends on that line, so no candidate
    /// line is skipped; one spanning lines (a relaxed `\s` taking a newline) makes its last line a
    /// candidate too, which costs a look but changes nothing.
    pub fn next_candidate(&self, haystack: &[u8], start: usize) -> Option<usize> {
        let every_line = (start < haystack.len()).then_some(start);
        let Some(search) = &self.search else {
            return every_line;
        };
        if start > haystack.len() {
            return None;
        }
        let input = Input::new(haystack).range(start..).earliest(true);
        let mut cache = search.caches.get();
        match search.dfa.try_search_fwd(&mut cache, &input) {
            Ok(found) => found.map(|end| end.offset().saturating_sub(1).max(start)),
            // The relaxed patterns have no assertion, so the DFA has nothing to give up on;
            // should it anyway, the next line is a candidate (the prefilter only saves work).
            Err(_) => every_line,
        }
    }

    /// Whether every line is a candidate.
    pub fn is_every_line(&self) -> bool {
        self.search.is_none()
    }
}

/// Rewrites `pattern` so that it matches wherever the original could match inside a longer line:
/// assertions removed, capture groups made non-capturing (so that patterns can be joined).
pub fn relax(pattern: &str) -> Result<String, PrefilterError> {
    let mut parsed = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|source| PrefilterError::Syntax {
            pattern: pattern.to_owned(),
            source: Box::new(source),
        })?;
    relax_ast(&mut parsed);
    let mut out = String::new();
    // Printing into a String cannot fail.
    let _ = ast::print::Printer::new().print(&parsed, &mut out);
    Ok(out)
}

/// Rewrites every word boundary of `pattern` (`\b`, `\B`, `\b{start}`…) to its ASCII form
/// (`(?-u:\b)`). A Unicode word boundary makes the regex engine leave its fast DFA on any line
/// with a non-ASCII byte (a tqdm bar, a box drawing) and run 100 times slower; log keywords are
/// ASCII, so the ASCII boundary means the same thing for them. A pattern that does not parse is
/// returned unchanged (compiling it reports the error).
pub fn ascii_word_boundaries(pattern: &str) -> String {
    let Ok(mut parsed) = ast::parse::Parser::new().parse(pattern) else {
        return pattern.to_owned();
    };
    if !ascii_ast(&mut parsed) {
        return pattern.to_owned();
    }
    let mut out = String::new();
    let _ = ast::print::Printer::new().print(&parsed, &mut out);
    out
}

/// Rewrites word boundaries in place; returns whether it changed anything.
fn ascii_ast(node: &mut Ast) -> bool {
    match node {
        Ast::Assertion(a)
            if !matches!(
                a.kind,
                ast::AssertionKind::StartLine
                    | ast::AssertionKind::EndLine
                    | ast::AssertionKind::StartText
                    | ast::AssertionKind::EndText
            ) =>
        {
            let span = a.span;
            let assertion = std::mem::replace(node, Ast::empty(span));
            let flag = |kind| ast::FlagsItem { span, kind };
            *node = Ast::group(ast::Group {
                span,
                kind: GroupKind::NonCapturing(ast::Flags {
                    span,
                    items: vec![
                        flag(ast::FlagsItemKind::Negation),
                        flag(ast::FlagsItemKind::Flag(ast::Flag::Unicode)),
                    ],
                }),
                ast: Box::new(assertion),
            });
            true
        }
        Ast::Repetition(r) => ascii_ast(&mut r.ast),
        Ast::Group(g) => ascii_ast(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().map(ascii_ast).fold(false, |x, y| x | y),
        Ast::Concat(c) => c.asts.iter_mut().map(ascii_ast).fold(false, |x, y| x | y),
        _ => false,
    }
}

fn relax_ast(node: &mut Ast) {
    match node {
        Ast::Assertion(a) => *node = Ast::empty(a.span),
        Ast::Repetition(r) => {
            relax_ast(&mut r.ast);
            if matches!(*r.ast, Ast::Empty(_)) {
                *node = Ast::empty(r.span);
            }
        }
        Ast::Group(g) => {
            relax_ast(&mut g.ast);
            if matches!(g.kind, GroupKind::CaptureIndex(_) | GroupKind::CaptureName { .. }) {
                g.kind = GroupKind::NonCapturing(ast::Flags {
                    span: g.span,
                    items: Vec::new(),
                });
            }
        }
        Ast::Alternation(a) => a.asts.iter_mut().for_each(relax_ast),
        Ast::Concat(c) => c.asts.iter_mut().for_each(relax_ast),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxing_drops_anchors_and_boundaries() {
        assert_eq!(
            relax(r"^\s*Traceback\b.*$").unwrap_or_default(),
            r"\s*Traceback.*"
        );
    }

    #[test]
    fn relaxing_turns_captures_into_plain_groups() {
        assert_eq!(
            relax(r"Target (?P<value>-?\d+) is (out)").unwrap_or_default(),
            r"Target (?:-?\d+) is (?:out)"
        );
    }

    #[test]
    fn relaxing_keeps_flags() {
        assert_eq!(
            relax(r"(?i)^cuda out of memory").unwrap_or_default(),
            r"(?i)cuda out of memory"
        );
    }

    #[test]
    fn repeated_assertions_vanish_whole() {
        assert_eq!(relax(r"a\b+c").unwrap_or_default(), "ac");
    }

    #[test]
    fn word_boundaries_become_ascii_and_anchors_stay() {
        assert_eq!(
            ascii_word_boundaries(r"^\bfoo\B(x)$"),
            r"^(?-u:\b)foo(?-u:\B)(x)$"
        );
        assert_eq!(ascii_word_boundaries(r"no boundary"), "no boundary");
        assert_eq!(ascii_word_boundaries(r"bad("), "bad(");
        let re = regex::Regex::new(&ascii_word_boundaries(r"\bcuda\b")).ok();
        assert!(re.is_some_and(|re| re.is_match("█ cuda █")));
    }

    #[test]
    fn invalid_patterns_are_reported_with_the_pattern() {
        let err = relax("a(b").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("\"a(b\""), "{err}");
    }

    #[test]
    fn patterns_with_the_same_group_names_can_be_joined() {
        let p = Prefilter::new(["(?P<x>a)", "(?P<x>b)^"]);
        assert!(p.is_ok());
    }

    #[test]
    fn a_prefilter_finds_prefixed_lines_and_escape_bytes() {
        let p = Prefilter::new([r"^RuntimeError:"]).unwrap_or_else(|_| Prefilter::every_line());
        let hay = b"noise\n2024-01-01T00:00:00Z RuntimeError: x\n";
        let second_line = 6..hay.len() - 1;
        assert!(
            p.next_candidate(hay, 0)
                .is_some_and(|at| second_line.contains(&at))
        );
        assert_eq!(p.next_candidate(b"a\nb\x1b[0mc\n", 0), Some(3));
        assert_eq!(p.next_candidate(b"plain\n", 0), None);
        assert_eq!(p.next_candidate(b"plain\n", 6), None);
        assert_eq!(
            p.next_candidate(b"plain\n", 60),
            None,
            "past the end is no candidate, no panic"
        );
    }
}
