//! The bundle's own pass over a log, riding on the single-log analysis's read: every block the
//! analysis reads is handed here too ([`Tee`]), and only the lines holding one of
//! [`signals::TRIGGERS`] are decoded, normalized (for their rank) and read. What is kept per file
//! is bounded ([`MAX_FACTS`] lines), whatever the file's size.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use memchr::{memchr, memchr_iter, memrchr};

use super::signals::{self, Signal};
use super::stamp::{self, Wall};
use crate::model::clip_text;
use crate::normalize::Normalizer;

/// Lines kept per file: the first half and the last half of the lines worth reading.
pub const MAX_FACTS: usize = 4096;

/// Longest line read here (the rest of a longer line is skipped).
const MAX_LINE: usize = 64 << 10;

/// Lines looked back over for a time stamp when a failure line has none.
const LOOK_BACK_LINES: usize = 40;

static TRIGGERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    // Leftmost-first: any trigger in a line will do, and this match kind lets the automaton skip
    // ahead with its vectorised (Teddy) prefilter; the standard kind has none for this many
    // triggers and walks every byte (on a 1 GB bundle it cost twice the single-log analysis).
    // The triggers are constants of `signals`; the tests build this automaton.
    #[allow(clippy::expect_used)]
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(signals::TRIGGERS)
        .expect("the trigger automaton builds")
});

/// One line worth reading, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineFact {
    /// Original line number.
    pub line: u64,
    /// Rank from the line's prefix.
    pub rank: Option<u32>,
    /// Host from the line's stream tag (`node-3 [stderr] `).
    pub host: Option<String>,
    /// The line's time (its own stamp, or the nearest one before it).
    pub wall: Option<Wall>,
    /// That stamp as printed.
    pub stamp: Option<String>,
    /// Whether the stamp is the line's own.
    pub own_stamp: bool,
    /// The normalized text, clipped.
    pub text: String,
    /// What it says.
    pub signals: Vec<Signal>,
    /// Whether it may be a failure line.
    pub error_like: bool,
}

/// What the pass kept of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFacts {
    /// The lines worth reading (the first and the last [`MAX_FACTS`] / 2).
    pub facts: Vec<LineFact>,
    /// Lines worth reading that were not kept (between the two halves).
    pub dropped: u64,
    /// Lines in the file.
    pub lines: u64,
    /// Bytes in the file.
    pub bytes: u64,
    /// The first year a stamp showed.
    pub year: Option<i32>,
}

/// The pass over one file, fed block by block.
#[derive(Debug, Default)]
pub struct LogScan {
    normalizer: Normalizer,
    lines: u64,
    bytes: u64,
    pending: Vec<u8>,
    last_stamp: Option<(Wall, String)>,
    head: Vec<LineFact>,
    tail: VecDeque<LineFact>,
    dropped: u64,
    year: Option<i32>,
}

impl LogScan {
    /// A pass at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the next block of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        let mut start = 0;
        if !self.pending.is_empty() {
            let Some(end) = memchr(b'\n', chunk) else {
                self.keep_pending(chunk);
                return;
            };
            self.keep_pending(&chunk[..end]);
            let line = std::mem::take(&mut self.pending);
            self.lines += 1;
            if TRIGGERS.is_match(&line) {
                let number = self.lines;
                self.consider(number, &line, &[]);
            }
            if let Some(found) = look_back(&line, 1) {
                self.last_stamp = Some(found);
            }
            start = end + 1;
        }
        let rest = &chunk[start..];
        match memrchr(b'\n', rest) {
            Some(last) => {
                self.block(&rest[..=last]);
                self.keep_pending(&rest[last + 1..]);
            }
            None => self.keep_pending(rest),
        }
    }

    /// Ends the file: the last line without a newline is read too.
    pub fn finish(mut self) -> LogFacts {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.lines += 1;
            if TRIGGERS.is_match(&line) {
                let number = self.lines;
                self.consider(number, &line, &[]);
            }
        }
        let mut facts = self.head;
        facts.extend(self.tail);
        LogFacts {
            facts,
            dropped: self.dropped,
            lines: self.lines,
            bytes: self.bytes,
            year: self.year,
        }
    }

    fn keep_pending(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.pending.len());
        self.pending.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Complete lines (`body` ends with a newline).
    fn block(&mut self, body: &[u8]) {
        let base = self.lines;
        let mut counted_to = 0;
        let mut line_base = base;
        let mut at = 0;
        while at < body.len() {
            let Some(m) = TRIGGERS.find(Input::new(body).range(at..)) else {
                break;
            };
            let line_start = memrchr(b'\n', &body[..m.start()]).map_or(0, |i| i + 1);
            let line_end = memchr(b'\n', &body[m.start()..]).map_or(body.len(), |i| m.start() + i);
            line_base += memchr_iter(b'\n', &body[counted_to..line_start]).count() as u64;
            counted_to = line_start;
            let raw = &body[line_start..line_end.min(line_start + MAX_LINE)];
            self.consider(line_base + 1, raw, &body[..line_start]);
            at = line_end + 1;
        }
        self.lines = base + memchr_iter(b'\n', body).count() as u64;
        if let Some(found) = look_back(body, self.lines) {
            self.last_stamp = Some(found);
        }
    }

    /// Reads one line that holds a trigger; `before` is the text of the block before it.
    fn consider(&mut self, number: u64, raw: &[u8], before: &[u8]) {
        let decoded = String::from_utf8_lossy(raw);
        let host = signals::host_stream_tag(&decoded).map(str::to_owned);
        let line = self.normalizer.normalize(number, raw);
        let rank = line.meta.rank;
        let text = line.text;
        let mut found = Vec::new();
        found.extend(signals::read(text));
        let error_like = signals::is_error_like(text);
        if found.is_empty() && !error_like {
            return;
        }
        let text = clip_text(text);
        let own = stamp::find(&decoded);
        if let Some(year) = own.as_ref().and_then(|s| s.wall.year) {
            self.year.get_or_insert(year);
        }
        let own_stamp = own.is_some();
        let (wall, stamp) = match own {
            Some(s) => (Some(s.wall), Some(s.text)),
            None => match look_back(before, LOOK_BACK_LINES as u64).or_else(|| self.last_stamp.clone()) {
                Some((w, t)) => (Some(w), Some(t)),
                None => (None, None),
            },
        };
        let fact = LineFact {
            line: number,
            rank,
            host,
            wall,
            stamp,
            own_stamp,
            text,
            signals: found,
            error_like,
        };
        if self.head.len() < MAX_FACTS / 2 {
            self.head.push(fact);
        } else {
            if self.tail.len() == MAX_FACTS / 2 {
                self.tail.pop_front();
                self.dropped += 1;
            }
            self.tail.push_back(fact);
        }
    }
}

/// The nearest stamped line among the last `lines` lines of `text`.
fn look_back(text: &[u8], lines: u64) -> Option<(Wall, String)> {
    let mut end = text.len();
    for _ in 0..lines.min(LOOK_BACK_LINES as u64) {
        if end == 0 {
            return None;
        }
        let start = memrchr(b'\n', &text[..end - 1]).map_or(0, |i| i + 1);
        let line = &text[start..end];
        if let Some(found) = stamp::find(&String::from_utf8_lossy(&line[..line.len().min(256)])) {
            return Some((found.wall, found.text));
        }
        end = start;
    }
    None
}

/// A reader that hands every block it reads to a [`LogScan`] too.
pub struct Tee<'a, R> {
    inner: R,
    scan: &'a mut LogScan,
}

impl<'a, R> Tee<'a, R> {
    /// Wraps `inner`.
    pub fn new(inner: R, scan: &'a mut LogScan) -> Self {
        Self { inner, scan }
    }
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.scan.feed(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(text: &str, piece: usize) -> LogFacts {
        let mut scan = LogScan::new();
        for chunk in text.as_bytes().chunks(piece) {
            scan.feed(chunk);
        }
        scan.finish()
    }

    const LOG: &str = "\
[rank1]:[E1127 05:33:50.100000 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.
[rank0]: step 3 loss 0.25
[rank0]:[I1127 05:33:49.000000 train.cpp:1] heartbeat
[rank0]: Traceback (most recent call last):
[rank0]:   File \"train.py\", line 3, in <module>
[rank0]: IndexError: index 7 is out of bounds for dimension 0 with size 4
last line without newline: RuntimeError: x";

    #[test]
    fn lines_worth_reading_keep_their_number_rank_and_time_in_any_block_size() {
        let whole = scan_in_pieces(LOG, LOG.len());
        for piece in [1, 7, 64] {
            assert_eq!(scan_in_pieces(LOG, piece), whole, "blocks of {piece} bytes");
        }
        assert_eq!(whole.lines, 7);
        let lines: Vec<(u64, Option<u32>)> = whole.facts.iter().map(|f| (f.line, f.rank)).collect();
        assert_eq!(lines, vec![(1, Some(1)), (4, Some(0)), (6, Some(0)), (7, None)]);
        let timeout = &whole.facts[0];
        assert!(timeout.own_stamp);
        assert!(matches!(
            timeout.signals.as_slice(),
            [Signal::LabelRank(1), Signal::Timeout { seq: Some(7), .. }]
        ));
    }

    #[test]
    fn a_failure_line_without_a_stamp_takes_the_nearest_one_before_it() {
        let whole = scan_in_pieces(LOG, LOG.len());
        let index_error = &whole.facts[2];
        assert!(!index_error.own_stamp);
        assert_eq!(index_error.stamp.as_deref(), Some("I1127 05:33:49.000000"));
    }

    #[test]
    fn a_long_log_keeps_only_its_first_and_last_lines_worth_reading() {
        let log = "RuntimeError: x\n".repeat(MAX_FACTS * 2);
        let facts = scan_in_pieces(&log, 4096);
        assert_eq!(facts.facts.len(), MAX_FACTS);
        assert_eq!(facts.dropped, MAX_FACTS as u64);
        assert_eq!(facts.facts.last().map(|f| f.line), Some(MAX_FACTS as u64 * 2));
    }

    #[test]
    fn the_tee_reads_what_it_passes_on() {
        let mut scan = LogScan::new();
        let mut out = Vec::new();
        Tee::new(LOG.as_bytes(), &mut scan)
            .read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out, LOG.as_bytes());
        assert_eq!(scan.finish().facts.len(), 4);
    }
}
