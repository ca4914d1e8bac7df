//! Parsing: normalized lines in, typed [`Event`]s out.
//!
//! One-line facts (CUDA errors, cuBLAS / cuDNN / NCCL statuses, OOM figures, advice, shapes,
//! versions) come from *extractors*, each guarded by a trigger regex; one set of all triggers
//! ([`LineSet`]) dispatches a line to the extractors that can use it. Multi-line structures (Python tracebacks,
//! C++ stacks, torchrun failure summaries) are state machines that ask for every line while open.
//! Parsing never fails: odd input gives fewer events, and warnings.

use std::io::Read;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::model::{Event, Warning};
use crate::normalize::Line;
use crate::scan::{self, LineSet, LineSink, Prefilter, ScanStats, SetMatches};

/// A lazily compiled constant regex. Every pattern is exercised by this module's tests.
macro_rules! regex {
    ($re:literal) => {{
        static RE: ::std::sync::LazyLock<::regex::Regex> = ::std::sync::LazyLock::new(|| {
            #[allow(clippy::expect_used)]
            ::regex::Regex::new(&$crate::scan::ascii_classes($re)).expect("constant regex compiles")
        });
        &*RE
    }};
}
pub(crate) use regex;

/// A constant literal's searcher, built once: lines that run often (an assertion repeated for
/// every failing thread) would otherwise build one per search.
macro_rules! literal {
    ($text:literal) => {{
        static FINDER: ::std::sync::LazyLock<::memchr::memmem::Finder<'static>> =
            ::std::sync::LazyLock::new(|| ::memchr::memmem::Finder::new($text));
        &*FINDER
    }};
}

mod advice;
mod child;
mod collector;
mod cpp;
mod cuda;
mod env;
mod facts;
mod generic;
mod libs;
mod oom;
mod traceback;
mod wrapped;

pub use advice::advice_kind;
pub use collector::{AssertId, Collector, MAX_EVENTS};
pub use oom::parse_size;
pub use traceback::{is_app_path, is_rich_context_line};

/// A per-line extractor: a trigger regex and the function that reads the line when it fires.
pub(crate) struct Extractor {
    /// Regex on the normalized line; the handler only runs on lines it matches.
    pub trigger: &'static str,
    /// Reads the line and records events.
    pub handle: fn(&mut Collector, &Line<'_>),
}

/// Whether a line reports a warning rather than a failure: a warning log level, a Python
/// `SomethingWarning:`, or a library saying it recovers from the error it prints.
pub fn is_warning_line(line: &Line<'_>) -> bool {
    line.meta.level == Some(crate::normalize::Level::Warning) || is_warning_text(line.text)
}

/// Whether a line's text (whatever its log level) reports a warning: see [`is_warning_line`].
pub fn is_warning_text(text: &str) -> bool {
    // c10's TORCH_WARN ends its message with `(Triggered internally at <file>:<line>.)`, also
    // when the `UserWarning:` head was lost (cut, or printed on the line before); torch.cuda's
    // `CUDA initialization: …` is the text of the warning `is_available()` gives.
    regex!(r"\w*Warning: |\[W\d{3,4} |\(Triggered internally at |(?i)will (?:attempt to )?recover|falling back to|\bCUDA initialization: ")
        .is_match(text)
}

/// Compiles a table of constant (pattern, value) pairs.
pub(crate) fn compile_table<T: Copy>(table: &[(&str, T)]) -> Vec<(Regex, T)> {
    table
        .iter()
        .map(|(pattern, value)| {
            #[allow(clippy::expect_used)]
            let re = Regex::new(&crate::scan::ascii_classes(pattern)).expect("constant regex compiles");
            (re, *value)
        })
        .collect()
}

fn extractors() -> impl Iterator<Item = &'static Extractor> {
    [
        cuda::EXTRACTORS,
        libs::EXTRACTORS,
        oom::EXTRACTORS,
        facts::EXTRACTORS,
        env::EXTRACTORS,
        advice::EXTRACTORS,
        // Last: it reads only lines that no extractor above read.
        generic::EXTRACTORS,
    ]
    .into_iter()
    .flatten()
}

static EXTRACTORS: LazyLock<Vec<&'static Extractor>> = LazyLock::new(|| extractors().collect());

/// One set of every trigger: one pass over a line says which code has anything to do with it.
/// (The analysis does without it: the rule base's line set holds the triggers too.)
static DISPATCH: LazyLock<LineSet> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    LineSet::new(&trigger_patterns().collect::<Vec<_>>()).expect("parser triggers compile")
});

/// Which structure parsers a line may start (from the dispatch set's matches).
#[derive(Debug, Clone, Copy, Default)]
struct Starts {
    traceback: bool,
    cpp: bool,
    child: bool,
    wrapped: bool,
    wrapped_tail: bool,
}

/// Every trigger, in dispatch order (the extractors' first, then those that can open a
/// traceback, a C++ stack, a torchrun summary): every pattern that can make the parser act on a
/// line when it is idle, so the prefilter must let all such lines through. Triggers are read
/// like rule patterns, with ASCII classes (`(?-u:…)`): they look for keywords, numbers and
/// indentation, which are ASCII, and Unicode classes made the automata that hold them 40 %
/// larger and their searches 15-25 % slower. The extractors they guard read with Unicode.
pub fn trigger_patterns() -> impl Iterator<Item = String> {
    extractors()
        .map(|e| e.trigger)
        .chain(traceback::TRIGGERS.iter().copied())
        .chain(cpp::TRIGGERS.iter().copied())
        .chain(child::TRIGGERS.iter().copied())
        .chain(wrapped::TRIGGERS.iter().copied())
        .map(|p| format!("(?-u:{p})"))
}

/// The parser's own prefilter (for parsing without rules).
pub fn prefilter() -> &'static Prefilter {
    static PREFILTER: LazyLock<Prefilter> = LazyLock::new(|| {
        #[allow(clippy::expect_used)]
        Prefilter::new(trigger_patterns()).expect("parser triggers form a valid prefilter")
    });
    &PREFILTER
}

/// The parsed log.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Parsed {
    /// Lines in the input.
    pub lines: u64,
    /// Bytes in the input.
    pub bytes: u64,
    /// Events in log order.
    pub events: Vec<Event>,
    /// Problems met; parsing went on.
    pub warnings: Vec<Warning>,
    /// The lines (ascending) that were source code a traceback shows around a frame, which
    /// nothing may take for what the program printed.
    #[serde(skip)]
    pub code_lines: Vec<u64>,
}

/// The streaming parser: a [`LineSink`] that turns lines into events.
#[derive(Debug, Default)]
pub struct Parser {
    out: Collector,
    /// The lines read so far that were code a traceback shows around a frame.
    code_lines: Vec<u64>,
    tracebacks: traceback::Tracebacks,
    cpp: cpp::CppTraces,
    children: child::ChildFailures,
    wrapped: wrapped::WrappedAssertions,
    /// The dispatch set's matches on the current line (made on the first line that comes
    /// without its triggers).
    dispatch: Option<SetMatches>,
}

impl Parser {
    /// A parser with no events yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Closes open structures and returns the events with the scan's figures.
    pub fn finish(mut self, stats: ScanStats) -> Parsed {
        self.tracebacks.finish(&mut self.out);
        self.cpp.finish(&mut self.out);
        self.children.finish(&mut self.out);
        let (events, mut warnings) = self.out.finish();
        let mut all = stats.warnings;
        all.append(&mut warnings);
        Parsed {
            lines: stats.lines,
            bytes: stats.bytes,
            events,
            warnings: all,
            code_lines: self.code_lines,
        }
    }

    /// Reads `line`, whose matching triggers someone else found: `triggers` are indices into
    /// [`trigger_patterns`], ascending.
    pub fn triggered_line<T>(&mut self, line: &Line<'_>, triggers: T)
    where
        T: IntoIterator<Item = usize>,
        T::IntoIter: Clone,
    {
        let triggers = triggers.into_iter();
        let extractors = EXTRACTORS.len();
        let tb = extractors + traceback::TRIGGERS.len();
        let cpp = tb + cpp::TRIGGERS.len();
        let child = cpp + child::TRIGGERS.len();
        let wrapped = child + wrapped::TRIGGERS.len();
        let mut starts = Starts::default();
        for i in triggers.clone() {
            match i {
                i if i < extractors => {}
                i if i < tb => starts.traceback = true,
                i if i < cpp => starts.cpp = true,
                i if i < child => starts.child = true,
                i if i < wrapped && i - child == wrapped::TAIL => starts.wrapped_tail = true,
                i if i < wrapped => starts.wrapped = true,
                _ => {}
            }
        }
        // The traceback reads the line first: it knows whether the line is code shown around a
        // frame, whose words (a message in a string, a status in a list) did not happen.
        self.tracebacks.line(&mut self.out, line, starts.traceback);
        if self.read_code_context() {
            self.code_lines.push(line.number);
        } else {
            for i in triggers.take_while(|&i| i < extractors) {
                (EXTRACTORS[i].handle)(&mut self.out, line);
            }
        }
        self.cpp.line(&mut self.out, line, starts.cpp);
        self.children.line(&mut self.out, line, starts.child);
        self.wrapped
            .line(&mut self.out, line, starts.wrapped, starts.wrapped_tail);
    }

    /// Whether the line just read was source code a traceback shows around a frame (rich's and
    /// IPython's context lines), which neither the parser nor a rule takes for what the program
    /// printed.
    pub fn read_code_context(&self) -> bool {
        self.tracebacks.last_was_context()
    }
}

impl LineSink for Parser {
    fn wants_every_line(&self) -> bool {
        self.tracebacks.wants_every_line()
            || self.cpp.wants_every_line()
            || self.children.wants_every_line()
            || self.wrapped.wants_every_line()
    }

    fn line(&mut self, line: &Line<'_>) {
        let mut dispatch = self.dispatch.take().unwrap_or_else(|| DISPATCH.new_matches());
        DISPATCH.matches(line.text.as_bytes(), &mut dispatch);
        self.triggered_line(line, dispatch.as_slice().iter().copied());
        self.dispatch = Some(dispatch);
    }
}

/// Parses a whole log from a reader, streaming.
pub fn parse_reader<R: Read + Send>(reader: R) -> std::io::Result<Parsed> {
    let mut parser = Parser::new();
    let stats = scan::scan(reader, prefilter(), &mut parser)?;
    Ok(parser.finish(stats))
}

/// Parses a log held in memory.
pub fn parse_bytes(bytes: &[u8]) -> Parsed {
    let mut parser = Parser::new();
    let stats = scan::scan_slice(bytes, prefilter(), &mut parser);
    parser.finish(stats)
}

/// Parses a log held in a string.
pub fn parse_str(text: &str) -> Parsed {
    parse_bytes(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trigger_compiles_into_the_dispatch_set_and_the_prefilter() {
        assert_eq!(DISPATCH.len(), trigger_patterns().count());
        assert!(!prefilter().is_every_line());
    }

    #[test]
    fn scanning_with_and_without_the_prefilter_gives_the_same_events() {
        let log = include_str!("../../tests/fixtures/logs/mixed_ci_log.txt");
        let fast = parse_str(log);
        let mut parser = Parser::new();
        let stats = scan::scan(log.as_bytes(), &Prefilter::every_line(), &mut parser).unwrap_or_default();
        let slow = parser.finish(stats);
        assert_eq!(fast.events, slow.events);
        assert!(fast.events.len() > 10, "{:?}", fast.events);
    }
}
