//! Where parsed events accumulate: repeats folded, assertions folded per (file, line, expression),
//! the total bounded so that memory stays flat on any input.

use std::collections::{HashMap, HashSet};

use crate::model::{CudaAssert, Event, EventKind, Span, Warning, clip_text};
use crate::normalize::Line;

/// Most distinct events kept; later ones are counted and dropped with a warning.
pub const MAX_EVENTS: usize = 4096;

/// Most distinct (block, thread) pairs remembered per assertion for counting.
const MAX_TRACKED_THREADS: usize = 65_536;

/// What tells one assertion from another: file, source line, expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssertId<'a> {
    /// Source file, when the line names it.
    pub file: Option<&'a str>,
    /// Source line, when the line names it.
    pub source_line: Option<u32>,
    /// The expression that failed.
    pub expression: &'a str,
}

/// An [`AssertId`] kept.
type AssertKey = (Option<String>, Option<u32>, String);

impl AssertId<'_> {
    fn key(&self) -> AssertKey {
        (
            self.file.map(str::to_owned),
            self.source_line,
            self.expression.to_owned(),
        )
    }

    fn is(&self, key: &AssertKey) -> bool {
        self.file == key.0.as_deref() && self.source_line == key.1 && self.expression == key.2
    }
}

#[derive(Debug)]
struct AssertTally {
    key: AssertKey,
    event: usize,
    blocks: HashSet<String>,
    /// `block thread` pairs.
    threads: HashSet<String>,
}

/// Accumulates events.
#[derive(Debug, Default)]
pub struct Collector {
    events: Vec<Event>,
    /// The one-line events recorded so far, as first emitted, and where each is in `events`.
    folded: HashMap<FoldKey, usize>,
    /// Assertions folded so far, and where each is in `tallies`.
    asserts: HashMap<AssertKey, usize>,
    tallies: Vec<AssertTally>,
    /// The tally of the latest assertion line: the next one most often repeats it (a kernel
    /// prints its assertion once for every thread that failed).
    latest_assert: Option<usize>,
    /// The `block thread` pair of the current assertion line, in a buffer kept between lines.
    pair: String,
    /// The latest event of each kind (`oom`, `cuda_assert`), so that details printed on the
    /// following lines (OOM figures, device-side assertion reports) can join it.
    latest: HashMap<&'static str, usize>,
    /// The line of the latest failure event recorded or repeated (not a fact about the
    /// environment), so that a fallback reading of a line can tell whether a specific one
    /// already read it.
    last_line: Option<u64>,
    dropped: u64,
}

impl Collector {
    /// Records a one-line event; an identical earlier event (same rank) absorbs it as a repeat.
    pub fn emit(&mut self, line: &Line<'_>, kind: EventKind) -> Option<usize> {
        // A version or a path read from the line (`…/python3.9/…`) does not explain its failure.
        if !matches!(
            kind,
            EventKind::Env(_) | EventKind::Fact(_) | EventKind::Advice(_)
        ) {
            self.last_line = Some(line.number);
        }
        let key = FoldKey::new(line.rank(), kind);
        if let Some(&i) = self.folded.get(&key) {
            let event = &mut self.events[i];
            event.count = event.count.saturating_add(1);
            event.last_line = Some(line.number);
            return Some(i);
        }
        // The key keeps the kind as emitted: a later line may complete the event's own copy.
        let mut event = Event::new(Span::line(line.number), line.rank(), key.kind.clone());
        event.text = Some(clip_text(line.text.trim()));
        event.warning = super::is_warning_line(line);
        let i = self.push(event)?;
        self.folded.insert(key, i);
        Some(i)
    }

    /// Records a multi-line event as it is (no folding), with the text of its key line.
    pub fn emit_span(
        &mut self,
        lines: Span,
        rank: Option<u32>,
        kind: EventKind,
        text: Option<&str>,
    ) -> Option<usize> {
        let mut event = Event::new(lines, rank, kind);
        event.text = text.map(|t| clip_text(t.trim()));
        self.push(event)
    }

    fn push(&mut self, event: Event) -> Option<usize> {
        if self.events.len() >= MAX_EVENTS {
            self.dropped += 1;
            return None;
        }
        self.latest.insert(event.kind.name(), self.events.len());
        self.events.push(event);
        Some(self.events.len() - 1)
    }

    /// Folds one assertion line into the event for its `id`; `describe` gives the event of an
    /// assertion not seen before.
    pub fn assertion(
        &mut self,
        line: &Line<'_>,
        id: AssertId<'_>,
        describe: impl FnOnce() -> CudaAssert,
        block: Option<&str>,
        thread: Option<&str>,
    ) {
        self.last_line = Some(line.number);
        let Some(t) = self.assert_tally(line, id, describe) else {
            return;
        };
        let tally = &mut self.tallies[t];
        if let Some(block) = block {
            if tally.blocks.len() < MAX_TRACKED_THREADS && !tally.blocks.contains(block) {
                tally.blocks.insert(block.to_owned());
            }
            if let Some(thread) = thread
                && tally.threads.len() < MAX_TRACKED_THREADS
            {
                self.pair.clear();
                self.pair.extend([block, " ", thread]);
                if !tally.threads.contains(&self.pair) {
                    tally.threads.insert(self.pair.clone());
                }
            }
        }
        let (blocks, threads) = (tally.blocks.len() as u32, tally.threads.len() as u32);
        let event = &mut self.events[tally.event];
        event.lines.extend_to(line.number);
        if let EventKind::CudaAssert(a) = &mut event.kind {
            a.occurrences = a.occurrences.saturating_add(1);
            a.blocks = blocks;
            a.threads = threads;
        }
    }

    /// The tally of the assertion `id`, made with its event when it is new; `None` when the
    /// event limit dropped it.
    fn assert_tally(
        &mut self,
        line: &Line<'_>,
        id: AssertId<'_>,
        describe: impl FnOnce() -> CudaAssert,
    ) -> Option<usize> {
        if let Some(t) = self.latest_assert.filter(|&t| id.is(&self.tallies[t].key)) {
            return Some(t);
        }
        let key = id.key();
        let t = match self.asserts.get(&key) {
            Some(&t) => t,
            None => {
                let mut event = Event::new(
                    Span::line(line.number),
                    line.rank(),
                    EventKind::CudaAssert(describe()),
                );
                event.text = Some(clip_text(line.text.trim()));
                event.warning = super::is_warning_line(line);
                let event = self.push(event)?;
                self.tallies.push(AssertTally {
                    key: key.clone(),
                    event,
                    blocks: HashSet::new(),
                    threads: HashSet::new(),
                });
                self.asserts.insert(key, self.tallies.len() - 1);
                self.tallies.len() - 1
            }
        };
        self.latest_assert = Some(t);
        Some(t)
    }

    /// The event at `index` (as returned by [`Collector::emit`]), to complete it from a later line.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Event> {
        self.events.get_mut(index)
    }

    /// The latest event of `kind` (by [`EventKind::name`]), if it ended within `window` lines
    /// before `line`.
    pub fn recent(&mut self, kind: &str, line: u64, window: u64) -> Option<&mut Event> {
        let event = self.events.get_mut(*self.latest.get(kind)?)?;
        (line.saturating_sub(event.lines.end) <= window).then_some(event)
    }

    /// Whether a failure event (not an environment fact or advice) was recorded (or repeated)
    /// from line `line` by [`Collector::emit`] or [`Collector::assertion`].
    pub fn emitted_on(&self, line: u64) -> bool {
        self.last_line == Some(line)
    }

    /// The events in log order and the warnings about what was dropped.
    pub fn finish(mut self) -> (Vec<Event>, Vec<Warning>) {
        self.events.sort_by_key(|e| (e.lines.start, e.lines.end));
        let warnings = (self.dropped > 0)
            .then(|| {
                Warning::new(
                    "event_limit",
                    format!(
                        "more than {MAX_EVENTS} distinct events; {} later ones dropped",
                        self.dropped
                    ),
                    None,
                )
            })
            .into_iter()
            .collect();
        (self.events, warnings)
    }
}

/// What makes a one-line event a repeat of an earlier one: the same rank and the same kind with
/// the same payload.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FoldKey {
    rank: Option<u32>,
    kind: EventKind,
}

impl FoldKey {
    fn new(rank: Option<u32>, kind: EventKind) -> Self {
        // The environment is the same for every rank.
        let rank = if matches!(kind, EventKind::Env(_)) {
            None
        } else {
            rank
        };
        Self { rank, kind }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Advice, OomReport};
    use crate::normalize::LineMeta;

    fn line(number: u64, rank: Option<u32>) -> Line<'static> {
        Line {
            number,
            text: "",
            meta: LineMeta {
                rank,
                ..LineMeta::default()
            },
        }
    }

    #[test]
    fn identical_events_fold_into_one_with_a_count_and_last_line() {
        let mut c = Collector::default();
        c.emit(&line(3, None), EventKind::Advice(Advice::LaunchBlocking));
        c.emit(&line(9, None), EventKind::Advice(Advice::LaunchBlocking));
        let (events, _) = c.finish();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].count, events[0].lines.start, events[0].last_line),
            (2, 3, Some(9))
        );
    }

    #[test]
    fn an_event_completed_by_a_later_line_still_absorbs_its_repeats() {
        let mut c = Collector::default();
        let cut = || {
            EventKind::Oom(OomReport {
                message: "CUDA out of memory.".into(),
                ..OomReport::default()
            })
        };
        let i = c.emit(&line(1, None), cut());
        if let Some(EventKind::Oom(oom)) = i.and_then(|i| c.get_mut(i)).map(|e| &mut e.kind) {
            oom.tried_bytes = Some(1 << 20);
        }
        c.emit(&line(4, None), cut());
        let (events, _) = c.finish();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].count, 2);
    }

    #[test]
    fn the_same_event_on_two_ranks_stays_two_events() {
        let mut c = Collector::default();
        c.emit(&line(1, Some(0)), EventKind::Advice(Advice::LaunchBlocking));
        c.emit(&line(2, Some(1)), EventKind::Advice(Advice::LaunchBlocking));
        assert_eq!(c.finish().0.len(), 2);
    }

    #[test]
    fn assertions_fold_lines_blocks_and_threads() {
        let mut c = Collector::default();
        let a = CudaAssert {
            file: Some("Loss.cu".into()),
            source_line: Some(240),
            function: None,
            expression: "t >= 0 && t < n_classes".into(),
            occurrences: 0,
            blocks: 0,
            threads: 0,
        };
        let id = AssertId {
            file: Some("Loss.cu"),
            source_line: Some(240),
            expression: "t >= 0 && t < n_classes",
        };
        let other = AssertId {
            expression: "t < n_classes",
            ..id
        };
        c.assertion(&line(1, None), id, || a.clone(), Some("0,0,0"), Some("1,0,0"));
        c.assertion(&line(2, None), id, || a.clone(), Some("0,0,0"), Some("2,0,0"));
        c.assertion(&line(3, None), other, || a.clone(), Some("0,0,0"), Some("2,0,0"));
        c.assertion(&line(5, None), id, || a.clone(), Some("1,0,0"), Some("1,0,0"));
        let (events, _) = c.finish();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].lines, Span { start: 1, end: 5 });
        let EventKind::CudaAssert(a) = &events[0].kind else {
            panic!("not an assertion: {:?}", events[0].kind);
        };
        assert_eq!((a.occurrences, a.blocks, a.threads), (3, 2, 3));
    }

    #[test]
    fn events_beyond_the_limit_are_dropped_with_a_warning() {
        let mut c = Collector::default();
        for i in 0..(MAX_EVENTS as u64 + 5) {
            c.emit_span(
                Span::line(i + 1),
                None,
                EventKind::Advice(Advice::AsyncReport),
                None,
            );
        }
        let (events, warnings) = c.finish();
        assert_eq!(events.len(), MAX_EVENTS);
        assert_eq!(warnings.len(), 1);
    }
}
