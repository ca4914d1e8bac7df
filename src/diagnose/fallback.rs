//! The fallback pass: the class detectors (`rules/detect/`) over a log that the specific rules
//! leave unexplained (no root cause or symptom found).
//!
//! A log a specific rule explains never gets here, so it pays nothing for the detectors. An
//! unexplained one is read a second time, only its last [`WINDOW_BYTES`] (where a failure
//! ends a log), with the detectors' own prefilter and line set: a streamed log keeps that
//! much of its end while it is read ([`crate::scan::Tail`]), a log in memory is cut the same
//! way, so every face gives the same diagnosis.

use crate::model::FindingOrigin;
use crate::normalize::{Line, LineMeta};
use crate::parse::{Parsed, is_rich_context_line};
use crate::rules::matcher::{Match, Matcher};
use crate::rules::{DetectorAutomata, LoadError, RuleSet};
use crate::scan::{self, LineSink, SetMatches};

/// How much of a log's end the detectors read.
pub const WINDOW_BYTES: usize = 4 << 20;

/// The end of a log that the fallback pass reads.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// The last bytes of the log: all of it, or its last `WINDOW_BYTES + 1` (the byte before
    /// the window tells whether the window starts a line).
    last: &'a [u8],
    /// The whole log's length.
    total: u64,
}

impl<'a> Window<'a> {
    /// The window of a log held in memory.
    pub fn of(log: &'a [u8]) -> Self {
        Self {
            last: &log[log.len().saturating_sub(WINDOW_BYTES + 1)..],
            total: log.len() as u64,
        }
    }

    /// The window of a streamed log, from the bytes it kept of its end ([`Window::KEEP`] of
    /// them, or all it had) and its length.
    pub fn from_tail(last: &'a [u8], total: u64) -> Self {
        Self { last, total }
    }

    /// How many bytes of its end a streamed log keeps for [`Window::from_tail`].
    pub const KEEP: usize = WINDOW_BYTES + 1;

    /// The lines that start within the log's last [`WINDOW_BYTES`].
    fn lines(&self) -> &'a [u8] {
        if self.total <= WINDOW_BYTES as u64 {
            return self.last;
        }
        match memchr::memchr(b'\n', self.last) {
            Some(end) => &self.last[end + 1..],
            None => &[],
        }
    }
}

/// The detectors that match the window, their evidence numbered as lines of the whole log
/// (`log_lines` long). Nothing when the rule base has no detector.
pub fn detect(
    rules: &RuleSet,
    window: Window<'_>,
    log_lines: u64,
    parsed: &Parsed,
) -> Result<Vec<Match>, LoadError> {
    if !rules.has_detectors() {
        return Ok(Vec::new());
    }
    let automata = rules.detector_automata().map_err(Clone::clone)?;
    let mut sink = DetectorLines {
        automata,
        matches: automata.new_matches(),
        slots: Vec::new(),
        matched: Vec::new(),
    };
    let stats = scan::scan_slice_sparse(window.lines(), &automata.prefilter, &mut sink);
    let before = log_lines.saturating_sub(stats.lines);
    let mut matcher = Matcher::for_detectors(rules, automata.ids());
    for held in &sink.matched {
        // The parser saw every line of an open traceback; a rich box's lines, told by their
        // shape, also where the parser had no reason to read them (a box whose top was cut).
        let code = parsed.code_lines.binary_search(&(held.number + before)).is_ok()
            || is_rich_context_line(&held.text);
        if !code {
            let line = Line {
                number: held.number,
                text: &held.text,
                meta: held.meta,
            };
            matcher.record(&line, &held.slots);
        }
    }
    let mut found = matcher.evaluate(parsed);
    for m in &mut found {
        debug_assert_eq!(rules.rules()[m.rule].origin, FindingOrigin::Detector);
        for e in &mut m.evidence {
            e.line += before;
        }
    }
    Ok(found)
}

/// Finds the window's lines that match a detector pattern.
struct DetectorLines<'r> {
    automata: &'r DetectorAutomata,
    matches: Vec<SetMatches>,
    /// The slots of the patterns that match the current line.
    slots: Vec<usize>,
    /// The lines that matched, kept until the scan is done: only then is a line's number in the
    /// whole log known, and with it whether the line was code a traceback showed.
    matched: Vec<HeldLine>,
}

/// A window line that matched a detector pattern, and the slots it matched.
struct HeldLine {
    number: u64,
    meta: LineMeta,
    text: String,
    slots: Vec<usize>,
}

impl LineSink for DetectorLines<'_> {
    fn line(&mut self, line: &Line<'_>) {
        self.automata
            .matches(line.text.as_bytes(), &mut self.matches, &mut self.slots);
        if !self.slots.is_empty() {
            self.matched.push(HeldLine {
                number: line.number,
                meta: line.meta,
                text: line.text.to_owned(),
                slots: self.slots.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window_lines(log: &[u8]) -> &[u8] {
        Window::of(log).lines()
    }

    #[test]
    fn a_log_within_the_window_is_read_whole() {
        assert_eq!(window_lines(b"one\ntwo"), b"one\ntwo");
    }

    #[test]
    fn a_longer_log_is_read_from_the_first_line_that_starts_in_its_last_window() {
        let mut log = vec![b'x'; 10];
        log.push(b'\n');
        log.extend(std::iter::repeat_n(b'y', WINDOW_BYTES - 5));
        log.extend_from_slice(b"\nlast\n");
        // The window's first bytes are the end of the `y` line: it starts at `last`.
        assert_eq!(window_lines(&log), b"last\n");
        // A line that starts exactly where the window starts is in it.
        let mut log = vec![b'x'; 10];
        log.push(b'\n');
        log.extend(std::iter::repeat_n(b'z', WINDOW_BYTES));
        assert_eq!(window_lines(&log).len(), WINDOW_BYTES);
    }

    #[test]
    fn a_streamed_log_keeps_the_same_window_as_one_in_memory() {
        let mut log = Vec::new();
        for i in 0..400_000 {
            log.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        assert!(log.len() > WINDOW_BYTES);
        let mut tail = scan::Tail::new(&log[..], Window::KEEP);
        std::io::copy(&mut tail, &mut std::io::sink()).unwrap_or_else(|e| panic!("{e}"));
        let (kept, total) = tail.into_kept();
        assert_eq!(Window::from_tail(&kept, total).lines(), window_lines(&log));
    }
}
