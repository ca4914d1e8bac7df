//! Large inputs on two threads: a producer finds and normalizes the candidate lines, the calling
//! thread feeds them to the sink.
//!
//! Finding and normalizing candidates costs about as much as parsing and matching them, so the
//! two halves overlap. The producer cannot know when the sink is inside a multi-line structure
//! and wants every line, so each batch carries its raw block too: the consumer normalizes the
//! lines between two candidates itself while the sink asks for them. The sink sees exactly the
//! lines, numbers and order of the one-thread scan.
//!
//! Which half costs more depends on the log (how many lines are candidates, how much the sink
//! does with them), so the work is balanced as it goes: while the consumer has no batch waiting,
//! the producer hands candidates over raw and the consumer normalizes them itself.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};

use super::{LineSink, Prefilter, ScanState, ScanStats, Target};
use crate::normalize::{Line, LineMeta};

/// Batches in flight between the threads (each holds one block of the input).
const IN_FLIGHT: usize = 2;

/// A candidate line, owned so that it can cross threads.
struct Candidate {
    number: u64,
    /// Where the raw line ends in its batch's bytes.
    end: usize,
    form: Form,
}

/// How a candidate line crosses.
enum Form {
    /// Normalized by the producer: its text in the batch's `texts`.
    Normalized { text: Range<usize>, meta: LineMeta },
    /// Left to the consumer: its bytes (cut like an overlong line) in the batch's `bytes`.
    Raw(Range<usize>),
}

/// Who normalizes the candidate lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// The producer, except while the consumer has no batch waiting.
    Balanced,
    /// Always the producer (tests).
    #[cfg(test)]
    Producer,
    /// Always the consumer (tests).
    #[cfg(test)]
    Consumer,
}

/// One piece of the input: its raw bytes, and its candidate lines already normalized.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    first_line: u64,
    lines: u64,
    candidates: Vec<Candidate>,
    texts: String,
}

/// Scans `input` on two threads: `produce` runs the one-thread scan of `input` on a helper thread,
/// into batches; this thread hands their lines to `sink`. When no thread can be started, `input`
/// comes back untouched (`Err`) for the caller to scan on its own thread.
pub(super) fn run<'p, I, P>(
    prefilter: &'p Prefilter,
    sink: &mut impl LineSink,
    input: I,
    split: Split,
    produce: P,
) -> Result<io::Result<ScanStats>, I>
where
    I: Send,
    P: FnOnce(I, &mut Producer) -> io::Result<ScanState<'p>> + Send,
{
    let (batches, received) = mpsc::sync_channel(IN_FLIGHT);
    let (give_back, recycled) = mpsc::channel();
    let waiting = Arc::new(AtomicUsize::new(0));
    let consumer_waiting = Arc::clone(&waiting);
    // The input goes to the helper only once it runs, so that it is still ours if it cannot.
    let (start, started) = mpsc::sync_channel::<I>(1);
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("faultline-scan".into())
            .spawn_scoped(scope, move || {
                let mut target = Producer {
                    batch: Batch::default(),
                    batches,
                    recycled,
                    waiting,
                    split,
                };
                started.recv().ok().map(|input| produce(input, &mut target))
            });
        let helper = match helper {
            Ok(helper) => helper,
            Err(_) => return Err(input),
        };
        if let Err(unsent) = start.send(input) {
            // The helper is already gone (it cannot be: it waits for this).
            return Err(unsent.0);
        }
        let mut consumer = ScanState::new(prefilter);
        for batch in received {
            consumer_waiting.fetch_sub(1, Ordering::Relaxed);
            consumer.deliver(&batch, sink);
            // The producer may have stopped: the batch is then simply dropped.
            let _ = give_back.send(batch);
        }
        let mut state = match helper.join() {
            Ok(Some(Ok(state))) => state,
            Ok(Some(Err(e))) => return Ok(Err(e)),
            Ok(None) => return Ok(Err(io::Error::other("the scan thread got no input"))),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        state.absorb(&consumer);
        Ok(Ok(state.finish()))
    })
}

/// The producer's end: collects candidates into batches and sends each when its block is done.
pub(super) struct Producer {
    batch: Batch,
    batches: SyncSender<Batch>,
    recycled: Receiver<Batch>,
    /// Batches sent that the consumer has not taken yet.
    waiting: Arc<AtomicUsize>,
    split: Split,
}

impl Target for Producer {
    fn wants_every_line(&self) -> bool {
        false
    }

    fn line(&mut self, line: &Line<'_>, end: usize) {
        let texts = &mut self.batch.texts;
        let start = texts.len();
        texts.push_str(line.text);
        self.batch.candidates.push(Candidate {
            number: line.number,
            end,
            form: Form::Normalized {
                text: start..texts.len(),
                meta: line.meta,
            },
        });
    }

    fn takes_raw(&self) -> bool {
        match self.split {
            // The consumer is idle (or about to be): let it normalize.
            Split::Balanced => self.waiting.load(Ordering::Relaxed) == 0,
            #[cfg(test)]
            Split::Producer => false,
            #[cfg(test)]
            Split::Consumer => true,
        }
    }

    fn raw_line(&mut self, number: u64, raw: Range<usize>, end: usize) {
        self.batch.candidates.push(Candidate {
            number,
            end,
            form: Form::Raw(raw),
        });
    }

    fn block_done(&mut self, bytes: &[u8], first_line: u64, lines: u64) {
        let mut next = self.recycled.try_recv().unwrap_or_default();
        next.bytes.clear();
        next.candidates.clear();
        next.texts.clear();
        let mut batch = std::mem::replace(&mut self.batch, next);
        batch.bytes.extend_from_slice(bytes);
        batch.first_line = first_line;
        batch.lines = lines;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        // A closed channel means the consumer is gone (it panicked): nothing is left to do.
        let _ = self.batches.send(batch);
    }
}

impl ScanState<'_> {
    /// Hands a batch's lines to `sink`: each candidate, and the lines before it while the sink
    /// wants every line.
    fn deliver(&mut self, batch: &Batch, sink: &mut impl LineSink) {
        let mut pos = 0;
        let mut next = batch.first_line;
        for candidate in &batch.candidates {
            self.lines_between(batch, &mut pos, &mut next, candidate.number, sink);
            match &candidate.form {
                Form::Normalized { text, meta } => sink.line(&Line {
                    number: candidate.number,
                    text: batch.texts.get(text.clone()).unwrap_or_default(),
                    meta: *meta,
                }),
                Form::Raw(raw) => {
                    let raw = batch.bytes.get(raw.clone()).unwrap_or_default();
                    self.send_normalized(candidate.number, raw, candidate.end, sink);
                }
            }
            pos = candidate.end + 1;
            next = candidate.number + 1;
        }
        self.lines_between(batch, &mut pos, &mut next, batch.first_line + batch.lines, sink);
    }

    /// Sends the lines from `next` (starting at byte `pos`) up to line `until`, for as long as
    /// the sink wants every line.
    fn lines_between(
        &mut self,
        batch: &Batch,
        pos: &mut usize,
        next: &mut u64,
        until: u64,
        sink: &mut impl LineSink,
    ) {
        while *next < until && sink.wants_every_line() {
            let Some(rest) = batch.bytes.get(*pos..) else {
                return;
            };
            let end = memchr::memchr(b'\n', rest).map_or(batch.bytes.len(), |i| *pos + i);
            self.next_line = *next;
            self.emit(&batch.bytes[*pos..end], end, sink);
            *pos = end + 1;
            *next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BLOCK_BYTES, scan, scan_slice, scan_slice_on_this_thread, scan_slice_on_two_threads};
    use super::*;

    /// Records every line with its number and flags; wants every line from a line saying "open"
    /// to one saying "close".
    #[derive(Default)]
    struct Recorder {
        lines: Vec<(u64, String, LineMeta)>,
        open: bool,
    }

    impl LineSink for Recorder {
        fn wants_every_line(&self) -> bool {
            self.open
        }
        fn line(&mut self, line: &Line<'_>) {
            self.lines.push((line.number, line.text.to_owned(), line.meta));
            self.open = (self.open || line.text.contains("open")) && !line.text.contains("close");
        }
    }

    fn one_thread(input: &[u8], prefilter: &Prefilter) -> (Recorder, ScanStats) {
        let mut rec = Recorder::default();
        let stats = scan_slice_on_this_thread(input, prefilter, &mut rec).finish();
        (rec, stats)
    }

    /// Structures that open in one block and close in another, candidates inside and outside
    /// them, odd bytes, an overlong line, and no newline at the end.
    fn tricky_input() -> Vec<u8> {
        let mut input = Vec::new();
        let mut i = 0u64;
        while input.len() < 3 * BLOCK_BYTES {
            let line: &[u8] = match i % 997 {
                0 => b"[rank1]: open a structure",
                1..=3 => b"  a line inside, not a candidate",
                4 => b"2024-05-06T07:08:09.0167164Z ERROR inside\r",
                5 => b"close",
                6 => b"ERROR \xff\xfe invalid",
                7 => b"ERROR with \x1b[31mcolour\x1b[0m and a \x00 NUL",
                500 => b"open one that stays open across the block boundary",
                _ if i.is_multiple_of(13) => b"ERROR outside",
                _ => b"noise noise noise noise noise noise",
            };
            input.extend_from_slice(line);
            input.extend_from_slice(format!(" #{i}\n").as_bytes());
            i += 1;
        }
        input.extend_from_slice(b"open at the end\n");
        input.extend(std::iter::repeat_n(b'x', BLOCK_BYTES + 100));
        input.extend_from_slice(b"\nclose\nnoise\nERROR last, without a newline");
        input
    }

    #[test]
    fn two_threads_send_the_sink_exactly_what_one_thread_sends() {
        let input = tricky_input();
        let prefilter = Prefilter::new(["ERROR|open|close"]).unwrap_or_else(|e| panic!("{e}"));
        let (expected, expected_stats) = one_thread(&input, &prefilter);
        assert!(expected.lines.len() > 10_000);

        let mut from_slice = Recorder::default();
        let slice_stats = scan_slice(&input, &prefilter, &mut from_slice);
        assert_eq!(from_slice.lines, expected.lines);
        assert_eq!(slice_stats, expected_stats);

        // Whoever normalizes the candidates, the sink gets the same lines.
        for split in [Split::Producer, Split::Consumer] {
            let mut rec = Recorder::default();
            let stats = scan_slice_on_two_threads(&input, &prefilter, &mut rec, split);
            assert_eq!(rec.lines, expected.lines, "{split:?}");
            assert_eq!(stats, expected_stats, "{split:?}");
        }

        // The reader cuts the overlong line where the slice cannot; everything else agrees.
        let mut from_reader = Recorder::default();
        let reader_stats = scan(&input[..], &prefilter, &mut from_reader).unwrap_or_default();
        assert_eq!(reader_stats.lines, expected_stats.lines);
        assert_eq!(from_reader.lines.len(), expected.lines.len());
        for (got, want) in from_reader.lines.iter().zip(&expected.lines) {
            assert_eq!((got.0, got.2), (want.0, want.2));
            assert!(want.1.starts_with(&got.1), "line {}", got.0);
        }
    }

    #[test]
    fn two_threads_without_a_prefilter_send_every_line() {
        let input = tricky_input();
        let every = Prefilter::every_line();
        let (expected, expected_stats) = one_thread(&input, &every);
        let mut rec = Recorder::default();
        let stats = scan_slice(&input, &every, &mut rec);
        assert_eq!(rec.lines, expected.lines);
        assert_eq!(stats, expected_stats);
        assert_eq!(stats.candidates, stats.lines);
    }

    #[test]
    fn a_failing_reader_fails_the_two_thread_scan() {
        struct Failing(usize);
        impl io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk gone"));
                }
                let n = buf.len().min(self.0);
                buf[..n].fill(b'\n');
                self.0 -= n;
                Ok(n)
            }
        }
        let prefilter = Prefilter::every_line();
        let result = scan(Failing(3 * BLOCK_BYTES), &prefilter, &mut Recorder::default());
        assert_eq!(
            result.map_err(|e| e.to_string()).err().as_deref(),
            Some("disk gone")
        );
    }
}
