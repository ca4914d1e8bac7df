//! Python tracebacks: plain, rich-boxed and IPython, chained, truncated, re-raised from child
//! processes and DataLoader workers. One state machine per rank, so interleaved tracebacks from
//! several processes are regrouped.

mod lines;

pub(crate) use lines::TRIGGERS;
pub use lines::{is_app_path, is_rich_context_line};

use lines::{TbLine, classify, parse_frame, parse_rich_frame};

use super::Collector;
use crate::model::{
    ChainLink, ChainedException, EventKind, Exception, Frame, Origin, Span, Traceback, TracebackStyle,
};
use crate::normalize::{Level, Line};

/// Lines of an exception message kept before the message is considered over.
const MAX_MESSAGE_LINES: u32 = 40;
/// Frames kept per exception: the first and last half of this many.
const MAX_FRAMES: usize = 100;
/// Unrecognised lines tolerated between frames (plain, then IPython, which shows code context).
const PLAIN_NOISE: u32 = 3;
const IPYTHON_NOISE: u32 = 40;
/// Blank lines tolerated after a message before a chain marker.
const MAX_BLANKS: u32 = 2;
/// A traceback that has taken no line for this many lines is closed.
const STALE_LINES: u64 = 50;
/// How far before a traceback header a `-- Process N terminated` line may be.
const ORIGIN_WINDOW: u64 = 5;

/// Builds traceback events, one open traceback per rank.
#[derive(Debug, Default)]
pub(super) struct Tracebacks {
    open: Vec<Builder>,
    /// Origin announced for the next traceback of a rank, and the line that announced it.
    pending_origin: Vec<(Option<u32>, Origin, u64)>,
    /// Whether the last line fed was a source line rich or IPython print around a frame's current
    /// line.
    context_line: bool,
}

impl Tracebacks {
    pub(super) fn wants_every_line(&self) -> bool {
        !self.open.is_empty()
    }

    /// Whether the last line fed was one of the source lines rich or IPython print around a
    /// frame's current line (`│   208 │ "Cannot re-initialize CUDA …" │`, `    208  "Cannot …"`):
    /// code near the failure that did not run. The current line, marked `❱` or `---->`, is not
    /// one.
    pub(super) fn last_was_context(&self) -> bool {
        self.context_line
    }

    /// Feeds a line; `may_start` says whether it matches a trigger that can open a traceback.
    pub(super) fn line(&mut self, out: &mut Collector, line: &Line<'_>, may_start: bool) {
        self.context_line = is_rich_context_line(line.text);
        self.close_stale(out, line.number);
        let open_here = self.open.iter().any(|b| b.rank == line.rank());
        if !open_here && !may_start {
            return;
        }
        let tb = classify(line.text);
        if let Some(i) = self.open.iter().position(|b| b.rank == line.rank()) {
            let ipython = self.open[i].style == TracebackStyle::Ipython;
            match self.open[i].feed(&tb, line) {
                Feed::Taken => {
                    self.context_line |=
                        ipython && matches!(tb, TbLine::Other) && is_ipython_context_line(line.text);
                    return;
                }
                Feed::Done { reprocess } => {
                    let builder = self.open.remove(i);
                    self.close(builder, out);
                    if !reprocess {
                        return;
                    }
                }
            }
        }
        self.start(tb, line);
    }

    pub(super) fn finish(mut self, out: &mut Collector) {
        for builder in std::mem::take(&mut self.open) {
            self.close(builder, out);
        }
    }

    fn close_stale(&mut self, out: &mut Collector, number: u64) {
        while let Some(i) = self.open.iter().position(|b| number > b.last + STALE_LINES) {
            let builder = self.open.remove(i);
            self.close(builder, out);
        }
    }

    fn close(&mut self, builder: Builder, out: &mut Collector) {
        let rank = builder.rank;
        let (traceback, lines, next_origin) = builder.finish();
        if let Some(origin) = next_origin {
            self.pending_origin.push((rank, origin, lines.end));
        }
        if let Some(traceback) = traceback {
            let text = traceback.final_exception().map(Exception::line_text);
            out.emit_span(lines, rank, EventKind::Traceback(traceback), text.as_deref());
        }
    }

    fn take_origin(&mut self, rank: Option<u32>, number: u64) -> Option<Origin> {
        self.pending_origin
            .retain(|(_, _, at)| number <= at + ORIGIN_WINDOW);
        let i = self.pending_origin.iter().position(|(r, ..)| *r == rank)?;
        Some(self.pending_origin.remove(i).1)
    }

    fn start(&mut self, tb: TbLine, line: &Line<'_>) {
        let (style, phase) = match &tb {
            TbLine::Header { .. } => (TracebackStyle::Plain, Phase::Frames { noise: 0 }),
            TbLine::IpythonHeader | TbLine::IpythonFrame(_) => {
                (TracebackStyle::Ipython, Phase::Frames { noise: 0 })
            }
            TbLine::RichTop | TbLine::RichContent(_) => (TracebackStyle::Rich, Phase::RichBox { noise: 0 }),
            TbLine::Frame(_) | TbLine::FrameStart => (TracebackStyle::Plain, Phase::Frames { noise: 0 }),
            TbLine::Exception { strict: true, .. } => (TracebackStyle::Plain, Phase::Frames { noise: 0 }),
            TbLine::ProcessOrigin(index) => {
                self.pending_origin
                    .push((line.rank(), Origin::ChildProcess { index: *index }, line.number));
                return;
            }
            _ => return,
        };
        let header = matches!(
            tb,
            TbLine::Header { .. } | TbLine::IpythonHeader | TbLine::RichTop
        );
        let origin = self.take_origin(line.rank(), line.number);
        let mut builder = Builder {
            rank: line.rank(),
            style,
            origin,
            start: line.number,
            last: line.number,
            chain: Vec::new(),
            part: Part::new(None, line.number, header),
            phase,
            message_level: None,
            pending_frame: None,
        };
        if !header {
            // The line is the traceback's first content (its header was cut off): feed it.
            let _ = builder.feed(&tb, line);
        }
        self.open.push(builder);
    }
}

/// What a builder did with a line.
enum Feed {
    /// The line belongs to the traceback.
    Taken,
    /// The traceback is over; `reprocess` when the line was not part of it.
    Done { reprocess: bool },
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Between header and exception line: frames, code lines.
    Frames { noise: u32 },
    /// Inside a rich box.
    RichBox { noise: u32 },
    /// After a rich box, waiting for the exception line.
    AfterBox { blanks: u32 },
    /// Collecting the lines of the exception message.
    Message { lines: u32 },
    /// After a blank line that ended the message: a chain marker may follow.
    AfterMessage { blanks: u32 },
    /// After a chain marker: the next traceback of the chain follows.
    AwaitChained { link: ChainLink, blanks: u32 },
}

/// One exception of a chain being built.
#[derive(Debug)]
struct Part {
    link: Option<ChainLink>,
    lines: Span,
    header: bool,
    frames: Vec<Frame>,
    omitted: u32,
    /// The last frame was printed flush left (a flattened paste): its code line is flush left too.
    flat_frame: bool,
    exception: Option<Exception>,
}

impl Part {
    fn new(link: Option<ChainLink>, number: u64, header: bool) -> Self {
        Self {
            link,
            lines: Span::line(number),
            header,
            frames: Vec::new(),
            omitted: 0,
            flat_frame: false,
            exception: None,
        }
    }

    fn push_frame(&mut self, frame: Frame, flat: bool) {
        if self.frames.len() >= MAX_FRAMES {
            // Keep the outermost and innermost halves; drop from the middle.
            self.frames.remove(MAX_FRAMES / 2);
            self.omitted = self.omitted.saturating_add(1);
        }
        self.frames.push(frame);
        self.flat_frame = flat;
    }

    fn wants_code(&self) -> bool {
        self.frames.last().is_some_and(|f| f.code.is_none())
    }

    fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.exception.is_none()
    }

    fn into_chained(self) -> ChainedException {
        ChainedException {
            link: self.link,
            lines: self.lines,
            truncated: !self.header || self.exception.is_none(),
            frames: self.frames,
            frames_omitted: self.omitted,
            exception: self.exception,
        }
    }
}

#[derive(Debug)]
struct Builder {
    rank: Option<u32>,
    style: TracebackStyle,
    origin: Option<Origin>,
    start: u64,
    last: u64,
    chain: Vec<ChainedException>,
    part: Part,
    phase: Phase,
    /// Log level of the exception line, to notice when later lines are another log record.
    message_level: Option<Level>,
    /// The head of a frame line cut by a terminal wrap.
    pending_frame: Option<String>,
}

impl Builder {
    fn feed(&mut self, tb: &TbLine, line: &Line<'_>) -> Feed {
        let feed = match self.phase {
            Phase::Frames { noise } => self.in_frames(tb, line, noise),
            Phase::RichBox { noise } => self.in_rich_box(tb, line, noise),
            Phase::AfterBox { blanks } => match tb {
                TbLine::Blank if blanks < MAX_BLANKS => {
                    self.phase = Phase::AfterBox { blanks: blanks + 1 };
                    Feed::Taken
                }
                TbLine::Exception { .. } => self.exception(tb, line),
                _ => Feed::Done { reprocess: true },
            },
            Phase::Message { lines } => self.in_message(tb, line, lines),
            Phase::AfterMessage { blanks } => match tb {
                TbLine::Blank if blanks < MAX_BLANKS => {
                    self.phase = Phase::AfterMessage { blanks: blanks + 1 };
                    Feed::Taken
                }
                TbLine::ChainCause => self.await_chained(ChainLink::Cause),
                TbLine::ChainContext => self.await_chained(ChainLink::Context),
                _ => Feed::Done { reprocess: true },
            },
            Phase::AwaitChained { link, blanks } => self.chained(tb, line, link, blanks),
        };
        if matches!(feed, Feed::Taken) {
            self.last = line.number;
            self.part.lines.extend_to(line.number);
        }
        feed
    }

    fn in_frames(&mut self, tb: &TbLine, line: &Line<'_>, noise: u32) -> Feed {
        if let Some(head) = self.pending_frame.take() {
            let tail = line.text.trim();
            let joined =
                parse_frame(&format!("{head}{tail}")).or_else(|| parse_frame(&format!("{head} {tail}")));
            if let Some(frame) = joined {
                self.part.push_frame(frame, false);
                return Feed::Taken;
            }
        }
        match tb {
            TbLine::Frame(frame) => {
                self.part
                    .push_frame(frame.clone(), !line.text.starts_with(char::is_whitespace));
                self.phase = Phase::Frames { noise: 0 };
                Feed::Taken
            }
            TbLine::IpythonFrame(frame) if self.style == TracebackStyle::Ipython => {
                self.part.push_frame(frame.clone(), false);
                self.phase = Phase::Frames { noise: 0 };
                Feed::Taken
            }
            TbLine::FrameStart => {
                self.pending_frame = Some(line.text.trim().to_owned());
                Feed::Taken
            }
            TbLine::Repeated(n) => {
                self.part.omitted = self.part.omitted.saturating_add(*n);
                Feed::Taken
            }
            TbLine::Carets => Feed::Taken,
            TbLine::Exception { .. } => self.exception(tb, line),
            TbLine::Header { .. } if self.part.is_empty() && self.chain.is_empty() => Feed::Taken,
            TbLine::Blank if self.style == TracebackStyle::Ipython => Feed::Taken,
            TbLine::Other
                if self.part.wants_code()
                    && (self.part.flat_frame || line.text.starts_with(char::is_whitespace)) =>
            {
                if let Some(frame) = self.part.frames.last_mut() {
                    frame.code = Some(line.text.trim().to_owned());
                }
                Feed::Taken
            }
            TbLine::Other | TbLine::Blank | TbLine::IpythonFrame(_) => {
                let limit = if self.style == TracebackStyle::Ipython {
                    IPYTHON_NOISE
                } else {
                    PLAIN_NOISE
                };
                if noise >= limit {
                    return Feed::Done { reprocess: true };
                }
                self.phase = Phase::Frames { noise: noise + 1 };
                Feed::Taken
            }
            _ => Feed::Done { reprocess: true },
        }
    }

    fn in_rich_box(&mut self, tb: &TbLine, line: &Line<'_>, noise: u32) -> Feed {
        match tb {
            TbLine::RichContent(content) => {
                let candidate = match self.pending_frame.take() {
                    Some(head) => format!("{head}{content}"),
                    None => content.clone(),
                };
                if let Some(frame) = parse_rich_frame(&candidate) {
                    self.part.push_frame(frame, false);
                } else if looks_like_path_head(&candidate) {
                    // rich wraps long paths over several box lines.
                    self.pending_frame = Some(candidate);
                }
                Feed::Taken
            }
            TbLine::RichTop => Feed::Taken,
            TbLine::RichBottom => {
                self.phase = Phase::AfterBox { blanks: 0 };
                Feed::Taken
            }
            // The box's bottom border was cut off.
            TbLine::Exception { .. } => self.exception(tb, line),
            _ if noise < PLAIN_NOISE => {
                self.phase = Phase::RichBox { noise: noise + 1 };
                Feed::Taken
            }
            _ => Feed::Done { reprocess: true },
        }
    }

    fn exception(&mut self, tb: &TbLine, line: &Line<'_>) -> Feed {
        let TbLine::Exception {
            type_name, message, ..
        } = tb
        else {
            return Feed::Done { reprocess: true };
        };
        self.part.exception = Some(Exception {
            type_name: type_name.clone(),
            message: message.clone(),
            line: line.number,
        });
        self.message_level = line.meta.level;
        self.phase = Phase::Message { lines: 0 };
        Feed::Taken
    }

    fn in_message(&mut self, tb: &TbLine, line: &Line<'_>, lines: u32) -> Feed {
        match tb {
            TbLine::Blank => {
                self.phase = Phase::AfterMessage { blanks: 1 };
                Feed::Taken
            }
            TbLine::ChainCause => self.await_chained(ChainLink::Cause),
            TbLine::ChainContext => self.await_chained(ChainLink::Context),
            TbLine::Exception { strict: true, .. }
                if lines == 0 && self.part.exception.as_ref().is_some_and(|e| e.message.is_empty()) =>
            {
                // `RuntimeError` alone, then `torch._C._RuntimeError: CUDA error: …`: the second
                // line names the same exception in full.
                self.exception(tb, line)
            }
            // A new `Type: message` at the margin is the next error, not more of this message.
            TbLine::Exception {
                strict: true,
                message,
                ..
            } if !message.is_empty() => Feed::Done { reprocess: true },
            TbLine::Other | TbLine::Exception { .. } | TbLine::Carets | TbLine::Repeated(_) => {
                let another_record = line.meta.level.is_some() && self.message_level.is_none();
                if another_record || line.meta.ci.is_some() || lines >= MAX_MESSAGE_LINES {
                    return Feed::Done { reprocess: true };
                }
                if let Some(exception) = &mut self.part.exception {
                    exception.message.push('\n');
                    exception.message.push_str(line.text.trim_end());
                }
                self.phase = Phase::Message { lines: lines + 1 };
                Feed::Taken
            }
            _ => Feed::Done { reprocess: true },
        }
    }

    fn await_chained(&mut self, link: ChainLink) -> Feed {
        self.phase = Phase::AwaitChained { link, blanks: 0 };
        Feed::Taken
    }

    fn chained(&mut self, tb: &TbLine, line: &Line<'_>, link: ChainLink, blanks: u32) -> Feed {
        match tb {
            TbLine::Blank if blanks < MAX_BLANKS => {
                self.phase = Phase::AwaitChained {
                    link,
                    blanks: blanks + 1,
                };
                Feed::Taken
            }
            TbLine::Header { .. } | TbLine::IpythonHeader => {
                self.next_part(link, line.number, true);
                self.phase = Phase::Frames { noise: 0 };
                Feed::Taken
            }
            TbLine::RichTop => {
                self.next_part(link, line.number, true);
                self.phase = Phase::RichBox { noise: 0 };
                Feed::Taken
            }
            TbLine::Frame(_) | TbLine::FrameStart => {
                self.next_part(link, line.number, false);
                self.phase = Phase::Frames { noise: 0 };
                self.in_frames(tb, line, 0)
            }
            TbLine::Exception { .. } => {
                self.next_part(link, line.number, false);
                self.exception(tb, line)
            }
            _ => Feed::Done { reprocess: true },
        }
    }

    fn next_part(&mut self, link: ChainLink, number: u64, header: bool) {
        let done = std::mem::replace(&mut self.part, Part::new(Some(link), number, header));
        self.chain.push(done.into_chained());
    }

    /// The traceback (if it holds anything), its lines, and the origin its message announces for
    /// the traceback that follows (`Caught X in DataLoader worker process N`).
    fn finish(mut self) -> (Option<Traceback>, Span, Option<Origin>) {
        let next_origin = self.part.exception.as_ref().and_then(|e| {
            regex!(r"in DataLoader worker process (?P<n>\d+)")
                .captures(&e.message)
                .and_then(|c| c["n"].parse().ok())
                .map(|index| Origin::DataLoaderWorker { index })
        });
        if !self.part.is_empty() || self.chain.is_empty() {
            self.chain.push(self.part.into_chained());
        }
        let lines = Span {
            start: self.start,
            end: self.last,
        };
        let empty = self
            .chain
            .iter()
            .all(|c| c.frames.is_empty() && c.exception.is_none());
        let traceback = (!empty).then_some(Traceback {
            style: self.style,
            origin: self.origin,
            chain: self.chain,
        });
        (traceback, lines, next_origin)
    }
}

/// IPython's numbered source lines: indentation, the line's number, then the code.
fn is_ipython_context_line(text: &str) -> bool {
    let rest = text.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest.len() < text.len() && digits > 0 && rest[digits..].starts_with(' ')
}

/// Whether rich content could be the start of a wrapped `path:line in function` header.
fn looks_like_path_head(content: &str) -> bool {
    !content.is_empty()
        && !content.contains(' ')
        && (content.contains('/') || content.contains('\\'))
        && !content.contains('│')
}

#[cfg(test)]
mod tests;
