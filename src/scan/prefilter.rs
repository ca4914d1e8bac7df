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

use std::borrow::Borrow;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

use regex_automata::Input;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::pool::Pool;
use regex_syntax::ast::{self, Ast, GroupKind};
use regex_syntax::hir::{Hir, HirKind, Repetition};

/// Lines that must always be normalized in full: escape and control bytes, orphaned SGR codes,
/// a copy's substitutes for spaces and quotes (`normalize::typography`) and HTML entities.
const NEEDS_NORMALIZATION: &str = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|(?-u:\xC2[\x80-\x9F\xA0])|(?-u:\xE2\x80[\x87\x89\xAF\x98\x99\x9C\x9D])|&(?:lt|gt|amp|quot|apos|#39|#x27|#34);|\[[0-9;]{1,12}[mK]";

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
        source: Box<regex_syntax::Error>,
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
    /// could match. They are read as `regex::bytes::Regex` reads a pattern: Unicode classes
    /// unless a pattern turns them off, any byte allowed.
    pub fn new(patterns: impl IntoIterator<Item = impl AsRef<str>>) -> Result<Self, PrefilterError> {
        let parsed = patterns
            .into_iter()
            .map(|p| parse(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_hirs(parsed)
    }

    /// [`Prefilter::new`] for patterns already parsed.
    pub fn from_hirs<H: Borrow<Hir>>(patterns: impl IntoIterator<Item = H>) -> Result<Self, PrefilterError> {
        let mut union = vec![parse(NEEDS_NORMALIZATION)?];
        union.extend(patterns.into_iter().map(|p| relax_hir(p.borrow())));
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None)
                    .nfa_size_limit(Some(256 << 20)),
            )
            .build_from_hir(&Hir::alternation(union))
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

/// Parses a pattern as `regex::bytes::Regex` would.
fn parse(pattern: &str) -> Result<Hir, PrefilterError> {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .map_err(|source| PrefilterError::Syntax {
            pattern: pattern.to_owned(),
            source: Box::new(source),
        })
}

/// Rewrites `pattern` so that it matches wherever the original could match inside a longer line:
/// assertions removed, capture groups made plain (so that patterns can be joined). Printed in
/// `regex-syntax`'s own form, classes spelled out.
pub fn relax(pattern: &str) -> Result<String, PrefilterError> {
    parse(pattern).map(|p| relax_hir(&p).to_string())
}

/// The relaxed form of a parsed pattern (see [`relax`]).
fn relax_hir(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Capture(capture) => relax_hir(&capture.sub),
        HirKind::Repetition(repetition) => {
            let sub = relax_hir(&repetition.sub);
            if matches!(sub.kind(), HirKind::Empty) {
                return sub;
            }
            Hir::repetition(Repetition {
                min: repetition.min,
                max: repetition.max,
                greedy: repetition.greedy,
                sub: Box::new(sub),
            })
        }
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(relax_hir).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.iter().map(relax_hir).collect()),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
    }
}

/// Rewrites the word boundaries (`\b`, `\B`, `\b{start}`…) and the Perl classes `\d`, `\s`, `\w`
/// of `pattern` to their ASCII forms (`(?-u:\b)`, `[[:word:]]`…); `\D`, `\S`, `\W` stay as they
/// are (their ASCII forms could match invalid UTF-8, which a `&str` regex refuses).
///
/// For the constant patterns of the parser, which read log keywords, numbers, exception and
/// module names: a Unicode word boundary makes the regex engine leave its fast DFA on any line
/// with a non-ASCII byte (a tqdm bar, a box drawing) and run 100 times slower, and a Unicode `\w`
/// makes a regex several times costlier to compile, which every `faultline analyze` pays for the
/// patterns its log needs. A pattern that does not parse is returned unchanged (compiling it
/// reports the error).
pub fn ascii_classes(pattern: &str) -> String {
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

/// `node` inside a non-capturing group with the Unicode flag off.
fn without_unicode(node: &mut Ast, span: ast::Span) {
    let inner = std::mem::replace(node, Ast::empty(span));
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
        ast: Box::new(inner),
    });
}

/// Rewrites boundaries and classes in place (see [`ascii_classes`]); returns whether it changed
/// anything.
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
            without_unicode(node, span);
            true
        }
        Ast::ClassPerl(c) if !c.negated => {
            let span = c.span;
            without_unicode(node, span);
            true
        }
        Ast::ClassBracketed(c) => ascii_class_set(&mut c.kind),
        Ast::Repetition(r) => ascii_ast(&mut r.ast),
        Ast::Group(g) => ascii_ast(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().map(ascii_ast).fold(false, |x, y| x | y),
        Ast::Concat(c) => c.asts.iter_mut().map(ascii_ast).fold(false, |x, y| x | y),
        _ => false,
    }
}

/// Rewrites `\d`, `\s`, `\w` inside a bracketed class to `[:digit:]`, `[:space:]`, `[:word:]`.
fn ascii_class_set(set: &mut ast::ClassSet) -> bool {
    match set {
        ast::ClassSet::Item(item) => ascii_class_item(item),
        ast::ClassSet::BinaryOp(op) => ascii_class_set(&mut op.lhs) | ascii_class_set(&mut op.rhs),
    }
}

fn ascii_class_item(item: &mut ast::ClassSetItem) -> bool {
    match item {
        ast::ClassSetItem::Perl(p) if !p.negated => {
            let kind = match p.kind {
                ast::ClassPerlKind::Digit => ast::ClassAsciiKind::Digit,
                ast::ClassPerlKind::Space => ast::ClassAsciiKind::Space,
                ast::ClassPerlKind::Word => ast::ClassAsciiKind::Word,
            };
            *item = ast::ClassSetItem::Ascii(ast::ClassAscii {
                span: p.span,
                kind,
                negated: false,
            });
            true
        }
        ast::ClassSetItem::Union(u) => u.items.iter_mut().map(ascii_class_item).fold(false, |x, y| x | y),
        ast::ClassSetItem::Bracketed(b) => ascii_class_set(&mut b.kind),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relaxed form of `pattern`, compiled.
    fn relaxed(pattern: &str) -> regex::bytes::Regex {
        relax(pattern)
            .map_err(|e| e.to_string())
            .and_then(|p| regex::bytes::Regex::new(&p).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    #[test]
    fn relaxing_drops_anchors_and_boundaries() {
        let re = relaxed(r"^\s*Traceback\b.*$");
        assert!(re.is_match(b"2024-01-01T00:00:00Z Traceback (most recent call last):"));
        assert!(re.is_match(b"xTracebacky"));
        assert!(!re.is_match(b"Trace back"));
    }

    #[test]
    fn relaxing_turns_captures_into_plain_groups() {
        let re = relaxed(r"Target (?P<value>-?\d+) is (out)");
        assert_eq!(re.captures_len(), 1, "only the whole match");
        assert!(re.is_match(b"[rank0]: Target -1 is out of bounds"));
    }

    #[test]
    fn relaxing_keeps_flags() {
        assert!(relaxed(r"(?i)^cuda out of memory").is_match(b"E: CUDA Out Of Memory"));
        assert!(
            !relaxed(r"(?-u:\w)").is_match("é".as_bytes()),
            "ASCII classes stay ASCII"
        );
    }

    #[test]
    fn repeated_assertions_vanish_whole() {
        assert!(relaxed(r"a\b+c").is_match(b"ac"));
    }

    #[test]
    fn word_boundaries_become_ascii_and_anchors_stay() {
        assert_eq!(ascii_classes(r"^\bfoo\B(x)$"), r"^(?-u:\b)foo(?-u:\B)(x)$");
        assert_eq!(ascii_classes(r"no boundary"), "no boundary");
        assert_eq!(ascii_classes(r"bad("), "bad(");
        let re = regex::Regex::new(&ascii_classes(r"\bcuda\b")).ok();
        assert!(re.is_some_and(|re| re.is_match("█ cuda █")));
    }

    #[test]
    fn perl_classes_become_ascii_and_their_negations_stay() {
        assert_eq!(
            ascii_classes(r"\d+ [\w.<>]+\s[^\s\d]\S"),
            r"(?-u:\d)+ [[:word:].<>]+(?-u:\s)[^[:space:][:digit:]]\S"
        );
        let re = regex::Regex::new(&ascii_classes(r"^(?P<n>\w+) in \S+$")).ok();
        assert!(re.as_ref().is_some_and(|re| re.is_match("forward in /é/a.py")));
        assert!(
            re.is_some_and(|re| !re.is_match("entraîner in a.py")),
            "ASCII words only"
        );
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
