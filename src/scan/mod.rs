//! Streaming over a raw log: blocks in, normalized candidate lines out, original numbers kept.
//!
//! The scanner reads any `Read` in fixed-size blocks (memory stays bounded whatever the input
//! size), counts lines with `memchr`, asks the [`Prefilter`] for the next line worth looking at and
//! normalizes only that line. A [`LineSink`] that is in the middle of a multi-line structure (a
//! traceback, a C++ stack) asks for every line until it is done. Inputs larger than a block or two
//! are scanned on two threads ([`pipeline`]), with the same result.

mod pipeline;
mod prefilter;
mod set;
mod set_form;
mod tail;

use pipeline::Split;

pub use prefilter::{Prefilter, PrefilterError, ascii_classes, relax};
pub use set::{LineSet, SetError, SetMatches};
pub use set_form::set_form;
pub use tail::Tail;

use std::io::{self, Read};
use std::ops::Range;

use crate::model::Warning;
use crate::normalize::{Line, Normalizer};

/// Bytes read per block. Small enough to stay in a core's cache while the two threads of a
/// large scan pass it from one to the other, and for the second thread to start soon: 4 MiB
/// blocks made the 100 MB analysis ~7 % slower.
const BLOCK_BYTES: usize = 512 << 10;

/// Lines longer than this are cut for processing (the rest of the line is skipped).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// A consumer of normalized lines.
pub trait LineSink {
    /// Whether the sink needs the next line even if the prefilter would skip it.
    fn wants_every_line(&self) -> bool {
        false
    }

    /// Receives one normalized line. Lines arrive in order; skipped lines are never sent while
    /// [`LineSink::wants_every_line`] is true.
    fn line(&mut self, line: &Line<'_>);
}

impl<A: LineSink, B: LineSink> LineSink for (A, B) {
    fn wants_every_line(&self) -> bool {
        self.0.wants_every_line() || self.1.wants_every_line()
    }

    fn line(&mut self, line: &Line<'_>) {
        self.0.line(line);
        self.1.line(line);
    }
}

/// What the scan saw of the raw input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Lines in the input (a last line without `\n` counts).
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Lines normalized and handed to the sink.
    pub candidates: u64,
    /// Problems met (the scan went on).
    pub warnings: Vec<Warning>,
}

/// Scans `reader` to its end, feeding candidate lines to `sink`.
///
/// Only an IO error of the reader stops the scan; odd content never does. An input larger than
/// one block is scanned on two threads (see [`pipeline`]): same lines, same order.
pub fn scan<R: Read + Send>(
    mut reader: R,
    prefilter: &Prefilter,
    sink: &mut impl LineSink,
) -> io::Result<ScanStats> {
    let mut first = vec![0u8; BLOCK_BYTES];
    let filled = read_some(&mut reader, &mut first)?;
    if filled < first.len() {
        // The whole input fits in one block.
        first.truncate(filled);
        return Ok(scan_slice_on_this_thread(&first, for_size(filled, prefilter), sink).finish());
    }
    let input = io::Cursor::new(first).chain(reader);
    match pipeline::run(prefilter, sink, input, Split::Balanced, |input, target| {
        scan_on_this_thread(input, prefilter, target)
    }) {
        Ok(scanned) => scanned,
        Err(input) => Ok(scan_on_this_thread(input, prefilter, sink)?.finish()),
    }
}

/// Scans a log held in memory: the same result as [`scan`], without copying it into blocks.
pub fn scan_slice(bytes: &[u8], prefilter: &Prefilter, sink: &mut impl LineSink) -> ScanStats {
    if bytes.len() < PIPELINE_MIN_BYTES {
        return scan_slice_on_this_thread(bytes, for_size(bytes.len(), prefilter), sink).finish();
    }
    scan_slice_on_two_threads(bytes, prefilter, sink, Split::Balanced)
}

/// [`scan_slice`] with `prefilter` whatever the input's size: for a sink that wants few of a
/// log's lines (the class detectors), where even a short log's one pass over its bytes costs
/// less than normalizing every line.
pub fn scan_slice_sparse(bytes: &[u8], prefilter: &Prefilter, sink: &mut impl LineSink) -> ScanStats {
    if bytes.len() < PIPELINE_MIN_BYTES {
        return scan_slice_on_this_thread(bytes, prefilter, sink).finish();
    }
    scan_slice_on_two_threads(bytes, prefilter, sink, Split::Balanced)
}

fn scan_slice_on_two_threads(
    bytes: &[u8],
    prefilter: &Prefilter,
    sink: &mut impl LineSink,
    split: Split,
) -> ScanStats {
    let scanned = pipeline::run(prefilter, sink, bytes, split, |bytes, target| {
        Ok(scan_slice_on_this_thread(bytes, prefilter, target))
    });
    match scanned {
        Ok(Ok(stats)) => stats,
        // A slice has no reader that could fail; should the helper fail anyway, say so.
        Ok(Err(e)) => ScanStats {
            warnings: vec![Warning::new(
                "scan_failed",
                format!("the scan stopped: {e}"),
                None,
            )],
            ..ScanStats::default()
        },
        Err(bytes) => scan_slice_on_this_thread(bytes, prefilter, sink).finish(),
    }
}

/// [`scan_slice`] on the calling thread whatever the size: the reference the two-thread scan is
/// tested against.
#[cfg(test)]
pub(crate) fn scan_slice_one_thread(
    bytes: &[u8],
    prefilter: &Prefilter,
    sink: &mut impl LineSink,
) -> ScanStats {
    scan_slice_on_this_thread(bytes, prefilter, sink).finish()
}

/// Inputs at least this large are scanned on two threads.
const PIPELINE_MIN_BYTES: usize = 2 * BLOCK_BYTES;

/// Inputs smaller than this are scanned without the prefilter: nearly every line of a short log
/// (a traceback) is a candidate, so a pass over its bytes to find them costs more than the lines
/// it skips (a 4 KB traceback: 88 → 82 µs per analysis; a 16 KB noisy log gains from it).
pub const PREFILTER_MIN_BYTES: usize = 8 << 10;

/// The prefilter that makes every line a candidate, for whoever needs one that lives forever.
pub static EVERY_LINE: Prefilter = Prefilter::every_line();

/// The prefilter to scan an input of `len` bytes with.
fn for_size(len: usize, prefilter: &Prefilter) -> &Prefilter {
    if len < PREFILTER_MIN_BYTES {
        &EVERY_LINE
    } else {
        prefilter
    }
}

fn scan_on_this_thread<'p, R: Read>(
    mut reader: R,
    prefilter: &'p Prefilter,
    sink: &mut impl Target,
) -> io::Result<ScanState<'p>> {
    let mut state = ScanState::new(prefilter);
    let mut buf = vec![0u8; BLOCK_BYTES];
    let mut filled = 0;
    loop {
        let read = read_some(&mut reader, &mut buf[filled..])?;
        state.stats.bytes += read as u64;
        filled += read;
        let at_eof = read == 0;
        match memchr::memrchr(b'\n', &buf[..filled]) {
            Some(last_newline) => {
                state.block(&buf[..=last_newline], sink);
                buf.copy_within(last_newline + 1..filled, 0);
                filled -= last_newline + 1;
            }
            None if filled == buf.len() => {
                // One line longer than the whole buffer: process its head, skip the rest.
                filled = state.overlong_line(&mut reader, &mut buf, sink)?;
            }
            None => {}
        }
        if at_eof {
            if filled > 0 {
                state.one_line(&buf[..filled], sink);
            }
            return Ok(state);
        }
    }
}

fn scan_slice_on_this_thread<'p>(
    bytes: &[u8],
    prefilter: &'p Prefilter,
    sink: &mut impl Target,
) -> ScanState<'p> {
    let mut state = ScanState::new(prefilter);
    state.stats.bytes = bytes.len() as u64;
    let complete = memchr::memrchr(b'\n', bytes).map_or(0, |i| i + 1);
    // Blocks keep the UTF-8 check and the line counting in cache-sized pieces.
    let mut start = 0;
    while start < complete {
        let end = (start + BLOCK_BYTES).min(complete);
        let end = memchr::memrchr(b'\n', &bytes[start..end]).map_or(complete, |i| start + i + 1);
        state.block(&bytes[start..end], sink);
        start = end;
    }
    if complete < bytes.len() {
        state.one_line(&bytes[complete..], sink);
    }
    state
}

/// Reads into `buf` until it is full or the reader is exhausted (retrying interrupted reads).
fn read_some<R: Read>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut total = 0;
    while total < buf.len() {
        match reader.read(&mut buf[total..]) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// A warning counted over the whole scan: how often, and where first.
#[derive(Debug, Default)]
struct Tally {
    count: u64,
    first_line: Option<u64>,
}

impl Tally {
    fn note(&mut self, line: u64) {
        self.count += 1;
        self.first_line.get_or_insert(line);
    }

    fn absorb(&mut self, other: &Tally) {
        self.count += other.count;
        self.first_line = match (self.first_line, other.first_line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn warning(&self, code: &str, what: &str) -> Option<Warning> {
        (self.count > 0).then(|| {
            Warning::new(
                code,
                format!(
                    "{what}: {} time(s), first at line {}",
                    self.count,
                    self.first_line.unwrap_or(0)
                ),
                self.first_line,
            )
        })
    }
}

/// Where the scanner sends lines: a [`LineSink`] itself, or the batch that the producer of a
/// [`pipeline`] fills for the thread that feeds the sink.
trait Target {
    fn wants_every_line(&self) -> bool;
    /// Receives one normalized line; `end` is the offset just past it in the scanned bytes.
    fn line(&mut self, line: &Line<'_>, end: usize);

    /// The scan is done with a piece of the input: `lines` lines from `first_line` on.
    fn block_done(&mut self, _bytes: &[u8], _first_line: u64, _lines: u64) {}

    /// Whether the next candidate may be handed over raw ([`Target::raw_line`]), for the other
    /// end of a pipeline to normalize.
    fn takes_raw(&self) -> bool {
        false
    }

    /// Receives candidate line `number` without normalizing it: `raw` is where its bytes (cut
    /// like an overlong line) lie in the piece that [`Target::block_done`] hands over next, `end`
    /// where the whole line ends there.
    fn raw_line(&mut self, _number: u64, _raw: Range<usize>, _end: usize) {}
}

impl<S: LineSink> Target for S {
    fn wants_every_line(&self) -> bool {
        LineSink::wants_every_line(self)
    }

    fn line(&mut self, line: &Line<'_>, _end: usize) {
        LineSink::line(self, line);
    }
}

struct ScanState<'p> {
    prefilter: &'p Prefilter,
    normalizer: Normalizer,
    /// Number of the next line to start.
    next_line: u64,
    stats: ScanStats,
    invalid_utf8: Tally,
    control: Tally,
    cut: Tally,
}

impl<'p> ScanState<'p> {
    fn new(prefilter: &'p Prefilter) -> Self {
        Self {
            prefilter,
            normalizer: Normalizer::new(),
            next_line: 1,
            stats: ScanStats::default(),
            invalid_utf8: Tally::default(),
            control: Tally::default(),
            cut: Tally::default(),
        }
    }

    /// Processes a block made of whole lines (it ends with `\n`).
    fn block(&mut self, block: &[u8], sink: &mut impl Target) {
        let first_line = self.next_line;
        self.block_lines(block, sink);
        sink.block_done(block, first_line, self.next_line - first_line);
    }

    fn block_lines(&mut self, block: &[u8], sink: &mut impl Target) {
        self.check_utf8(block);
        let mut pos = 0;
        while pos < block.len() {
            let line_start = if sink.wants_every_line() {
                pos
            } else {
                match self.prefilter.next_candidate(block, pos) {
                    Some(hit) => {
                        let start = memchr::memrchr(b'\n', &block[pos..hit]).map_or(pos, |i| pos + i + 1);
                        self.next_line += count_newlines(&block[pos..start]);
                        start
                    }
                    None => {
                        self.next_line += count_newlines(&block[pos..]);
                        return;
                    }
                }
            };
            let line_end =
                memchr::memchr(b'\n', &block[line_start..]).map_or(block.len(), |i| line_start + i);
            self.candidate(line_start..line_end, sink, block);
            pos = line_end + 1;
        }
    }

    /// Processes the last line of the input, which has no `\n`.
    fn one_line(&mut self, line: &[u8], sink: &mut impl Target) {
        self.check_utf8(line);
        let candidate = sink.wants_every_line() || self.prefilter.next_candidate(line, 0).is_some();
        let number = self.next_line;
        if candidate {
            self.candidate(0..line.len(), sink, line);
        } else {
            self.next_line += 1;
        }
        sink.block_done(line, number, 1);
    }

    /// Handles a line that does not fit in the buffer: its head is processed, the rest skipped.
    /// Returns how many bytes of the following line(s) are left at the start of `buf`.
    fn overlong_line<R: Read>(
        &mut self,
        reader: &mut R,
        buf: &mut [u8],
        sink: &mut impl Target,
    ) -> io::Result<usize> {
        let head = &buf[..MAX_LINE_BYTES];
        // Cut on a character boundary where possible, so the head decodes cleanly.
        let head = match std::str::from_utf8(head) {
            Ok(_) => head,
            Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
            Err(_) => head,
        };
        let number = self.next_line;
        self.cut.note(number);
        self.emit(head, head.len(), sink);
        // The head is the only line of this piece and was sent: no one needs its bytes again.
        sink.block_done(&[], number, 1);
        loop {
            let read = read_some(reader, buf)?;
            self.stats.bytes += read as u64;
            if read == 0 {
                return Ok(0);
            }
            if let Some(newline) = memchr::memchr(b'\n', &buf[..read]) {
                buf.copy_within(newline + 1..read, 0);
                return Ok(read - newline - 1);
            }
        }
    }

    /// Sends on candidate line `line` of `piece`, a piece that the target gets whole next
    /// ([`Target::block_done`]): raw if the target takes it so, else normalized.
    fn candidate(&mut self, line: Range<usize>, sink: &mut impl Target, piece: &[u8]) {
        if !sink.takes_raw() {
            self.emit(&piece[line.clone()], line.end, sink);
            return;
        }
        let number = self.count_candidate(line.len());
        let cut_end = line.start + line.len().min(MAX_LINE_BYTES);
        sink.raw_line(number, line.start..cut_end, line.end);
    }

    /// Normalizes one raw line and sends it on; `end` is where it ends in the scanned bytes.
    fn emit(&mut self, raw: &[u8], end: usize, sink: &mut impl Target) {
        let number = self.count_candidate(raw.len());
        let raw = &raw[..raw.len().min(MAX_LINE_BYTES)];
        self.send_normalized(number, raw, end, sink);
    }

    /// Numbers the next line as a candidate of `len` bytes (noting a cut if it is too long).
    fn count_candidate(&mut self, len: usize) -> u64 {
        let number = self.next_line;
        self.next_line += 1;
        self.stats.candidates += 1;
        if len > MAX_LINE_BYTES {
            self.cut.note(number);
        }
        number
    }

    /// Normalizes candidate line `number` (already counted and cut) and sends it on.
    fn send_normalized(&mut self, number: u64, raw: &[u8], end: usize, sink: &mut impl Target) {
        let line = self.normalizer.normalize(number, raw);
        if line.meta.control {
            self.control.note(number);
        }
        sink.line(&line, end);
    }

    fn check_utf8(&mut self, bytes: &[u8]) {
        if std::str::from_utf8(bytes).is_ok() {
            return;
        }
        // The line of each invalid sequence is counted on from the one before: counting from
        // the start of the block each time made binary input quadratic (2 MB: 22 s).
        let (mut offset, mut counted, mut line) = (0, 0, self.next_line);
        for chunk in bytes.utf8_chunks() {
            offset += chunk.valid().len();
            if !chunk.invalid().is_empty() {
                line += count_newlines(&bytes[counted..offset]);
                counted = offset;
                self.invalid_utf8.note(line);
            }
            offset += chunk.invalid().len();
        }
    }

    /// Adds what another state saw of the same input (the pipeline's two threads).
    fn absorb(&mut self, other: &ScanState<'_>) {
        self.stats.candidates += other.stats.candidates;
        self.invalid_utf8.absorb(&other.invalid_utf8);
        self.control.absorb(&other.control);
        self.cut.absorb(&other.cut);
    }

    fn finish(mut self) -> ScanStats {
        self.stats.lines = self.next_line - 1;
        let warnings = [
            self.invalid_utf8
                .warning("invalid_utf8", "invalid UTF-8 decoded lossily"),
            self.control
                .warning("control_bytes", "NUL or control bytes removed"),
            self.cut.warning(
                "long_line",
                &format!("lines longer than {} KiB cut", MAX_LINE_BYTES >> 10),
            ),
        ];
        self.stats.warnings.extend(warnings.into_iter().flatten());
        self.stats
    }
}

fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every line it is given, and wants every line after a line saying "open" until a
    /// line saying "close".
    #[derive(Default)]
    struct Recorder {
        lines: Vec<(u64, String)>,
        open: bool,
    }

    impl LineSink for Recorder {
        fn wants_every_line(&self) -> bool {
            self.open
        }
        fn line(&mut self, line: &Line<'_>) {
            self.lines.push((line.number, line.text.to_owned()));
            if line.text.contains("open") {
                self.open = true;
            }
            if line.text.contains("close") {
                self.open = false;
            }
        }
    }

    /// Reads `input` on this thread, with a prefilter of `patterns` however short the input.
    fn run(input: &[u8], patterns: &[&str]) -> (Recorder, ScanStats) {
        let prefilter = Prefilter::new(patterns).unwrap_or_else(|_| Prefilter::every_line());
        let mut rec = Recorder::default();
        let stats = scan_on_this_thread(input, &prefilter, &mut rec).map(ScanState::finish);
        (rec, stats.unwrap_or_default())
    }

    #[test]
    fn a_short_input_is_scanned_without_the_prefilter() {
        let prefilter = Prefilter::new(["ERROR"]).unwrap_or_else(|e| panic!("{e}"));
        let input = b"a\nERROR x\nb";
        let (mut from_reader, mut from_slice) = (Recorder::default(), Recorder::default());
        let stats = scan(&input[..], &prefilter, &mut from_reader).unwrap_or_default();
        scan_slice(input, &prefilter, &mut from_slice);
        assert_eq!(stats.candidates, 3);
        assert_eq!(from_reader.lines, from_slice.lines);
        assert_eq!(from_slice.lines.len(), 3);
    }

    #[test]
    fn only_candidate_lines_are_sent_with_their_original_numbers() {
        let (rec, stats) = run(b"a\nb\nERROR x\nc\nERROR y", &["ERROR"]);
        assert_eq!(rec.lines, vec![(3, "ERROR x".into()), (5, "ERROR y".into())]);
        assert_eq!(stats.lines, 5);
        assert_eq!(stats.candidates, 2);
    }

    #[test]
    fn a_sink_in_the_middle_of_a_structure_gets_every_line() {
        let (rec, _) = run(b"x\nopen\n1\n2\nclose\n3\n", &["open|close"]);
        let numbers: Vec<u64> = rec.lines.iter().map(|l| l.0).collect();
        assert_eq!(numbers, vec![2, 3, 4, 5]);
    }

    #[test]
    fn scanning_a_slice_is_scanning_a_reader() {
        let mut input = b"first\n".to_vec();
        for i in 0..300_000 {
            input.extend_from_slice(format!("noise {i}\nERROR {i}\n").as_bytes());
        }
        input.extend_from_slice(b"ERROR last without newline");
        let prefilter = Prefilter::new(["ERROR"]).unwrap_or_else(|_| Prefilter::every_line());
        let (mut a, mut b) = (Recorder::default(), Recorder::default());
        let from_reader = scan(&input[..], &prefilter, &mut a).unwrap_or_default();
        let from_slice = scan_slice(&input, &prefilter, &mut b);
        assert_eq!(from_reader, from_slice);
        assert_eq!(a.lines, b.lines);
        assert_eq!(b.lines.len(), 300_001);
    }

    #[test]
    fn empty_input_has_no_lines() {
        let (rec, stats) = run(b"", &["x"]);
        assert!(rec.lines.is_empty());
        assert_eq!(stats.lines, 0);
    }

    #[test]
    fn line_numbers_survive_block_boundaries() {
        let mut input = Vec::new();
        for i in 0..600_000 {
            input.extend_from_slice(format!("noise line {i}\n").as_bytes());
        }
        input.extend_from_slice(b"ERROR at the end\n");
        let (rec, stats) = run(&input, &["ERROR"]);
        assert_eq!(rec.lines, vec![(600_001, "ERROR at the end".into())]);
        assert_eq!(stats.lines, 600_001);
        assert!(stats.bytes > BLOCK_BYTES as u64);
    }

    #[test]
    fn a_line_longer_than_a_block_is_cut_and_the_next_line_keeps_its_number() {
        let mut input = b"first\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', BLOCK_BYTES + 10));
        input.extend_from_slice(b"\nERROR after\n");
        let (rec, stats) = run(&input, &["ERROR|first"]);
        assert_eq!(rec.lines.len(), 3);
        assert_eq!(rec.lines[1].1.len(), MAX_LINE_BYTES);
        assert_eq!(rec.lines[2], (3, "ERROR after".into()));
        assert!(stats.warnings.iter().any(|w| w.code == "long_line"));
    }

    #[test]
    fn invalid_utf8_is_warned_about_with_its_line() {
        let (rec, stats) = run(b"ok\nERROR \xff\xfe\n", &["ERROR"]);
        assert_eq!(rec.lines, vec![(2, "ERROR \u{fffd}\u{fffd}".into())]);
        let w = stats.warnings.iter().find(|w| w.code == "invalid_utf8");
        assert_eq!(w.and_then(|w| w.line), Some(2));
    }

    #[test]
    fn invalid_utf8_on_many_lines_is_counted_each_time_and_first_seen_on_its_line() {
        let mut log = b"ok\nfine\n".to_vec();
        for i in 0..1000 {
            log.extend_from_slice(format!("junk {i} ").as_bytes());
            log.extend_from_slice(b"\xff\xfe x \xc3\n");
        }
        let (_, stats) = run(&log, &["ERROR"]);
        let w = stats.warnings.iter().find(|w| w.code == "invalid_utf8");
        assert_eq!(w.and_then(|w| w.line), Some(3));
        assert!(
            // Three invalid sequences a line: `\xff`, `\xfe` and a `\xc3` cut by the newline.
            w.is_some_and(|w| w.message.contains("3000 time")),
            "{w:?}"
        );
    }

    #[test]
    fn lines_with_escape_bytes_are_always_candidates() {
        let (rec, _) = run(b"\x1b[31mERR\x1b[0mOR\n", &["ERROR"]);
        assert_eq!(rec.lines, vec![(1, "ERROR".into())]);
    }

    #[test]
    fn a_match_spanning_lines_does_not_hide_a_later_line() {
        // `a\nb` is no line's match; `c` on line 2 is.
        let (rec, _) = run(b"a\nb c\nd\n", &[r"a\s+b|c"]);
        let numbers: Vec<u64> = rec.lines.iter().map(|l| l.0).collect();
        assert_eq!(numbers, vec![2]);
    }
}
