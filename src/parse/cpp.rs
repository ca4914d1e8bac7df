//! C++ stacks printed by c10 (`Exception raised from … (most recent call first): frame #N: …`)
//! and `terminate called after throwing an instance of 'X'` with its `what():` line.

use super::Collector;
use crate::model::{CppException, CppFrame, CppTrace, EventKind, Span};
use crate::normalize::Line;

/// Frames kept per stack (the rest are counted by their last index only).
const MAX_FRAMES: usize = 64;

/// Lines after `terminate called…` within which `what():` is looked for.
const WHAT_WINDOW: u64 = 3;

/// Lines that can start or continue a C++ stack, for the prefilter.
pub(super) const TRIGGERS: &[&str] = &[
    r"Exception raised from ",
    r"^\s*frame #\d+: ",
    r"terminate called after throwing an instance of",
    r"^\s*what\(\): ",
];

#[derive(Debug)]
struct OpenTrace {
    lines: Span,
    rank: Option<u32>,
    trace: CppTrace,
    /// The header (or first frame) line.
    text: String,
}

/// Builds C++ stack events.
#[derive(Debug, Default)]
pub(super) struct CppTraces {
    open: Option<OpenTrace>,
    /// The `terminate called…` event waiting for its `what():`, and its line.
    terminate: Option<(usize, u64)>,
}

impl CppTraces {
    pub(super) fn wants_every_line(&self) -> bool {
        self.open.is_some() || self.terminate.is_some()
    }

    /// Feeds a line; `may_start` says whether it matches a trigger of this parser.
    pub(super) fn line(&mut self, out: &mut Collector, line: &Line<'_>, may_start: bool) {
        if !may_start && !self.wants_every_line() {
            return;
        }
        let text = line.text;
        if let Some((index, at)) = self.terminate {
            if let Some(c) = regex!(r"^\s*what\(\):\s+(?P<w>.+)$").captures(text) {
                let what = c["w"].trim();
                let mut from_thrust = false;
                if let Some(EventKind::CppException(e)) = out.get_mut(index).map(|e| &mut e.kind) {
                    e.what = Some(what.to_owned());
                    from_thrust = e.type_name.starts_with("thrust::");
                }
                if from_thrust {
                    super::cuda::thrust_error(out, line, what);
                }
                self.terminate = None;
            } else if line.number > at + WHAT_WINDOW {
                self.terminate = None;
            }
        }
        if let Some(c) =
            regex!(r"terminate called after throwing an instance of '(?P<t>[^']+)'").captures(text)
        {
            let event = CppException {
                type_name: c["t"].to_owned(),
                what: None,
            };
            self.terminate = out
                .emit(line, EventKind::CppException(event))
                .map(|i| (i, line.number));
        }
        if let Some(open) = &mut self.open {
            if let Some(frame) = parse_frame(text) {
                open.lines.extend_to(line.number);
                if open.trace.frames.len() < MAX_FRAMES {
                    open.trace.frames.push(frame);
                }
                return;
            }
            self.close(out);
        }
        if let Some(c) = regex!(r"Exception raised from (?P<f>\S+)(?: at (?P<loc>\S+))?").captures(text) {
            let trace = CppTrace {
                raised_from: Some(c["f"].to_owned()),
                location: c.name("loc").map(|m| m.as_str().to_owned()),
                frames: Vec::new(),
            };
            self.open = Some(OpenTrace {
                lines: Span::line(line.number),
                rank: line.rank(),
                trace,
                text: text.to_owned(),
            });
        } else if let Some(frame) = parse_frame(text) {
            // A stack whose header was cut off.
            self.open = Some(OpenTrace {
                lines: Span::line(line.number),
                rank: line.rank(),
                trace: CppTrace {
                    raised_from: None,
                    location: None,
                    frames: vec![frame],
                },
                text: text.to_owned(),
            });
        }
    }

    fn close(&mut self, out: &mut Collector) {
        if let Some(open) = self.open.take() {
            out.emit_span(
                open.lines,
                open.rank,
                EventKind::CppTrace(open.trace),
                Some(&open.text),
            );
        }
    }

    pub(super) fn finish(mut self, out: &mut Collector) {
        self.close(out);
    }
}

fn parse_frame(text: &str) -> Option<CppFrame> {
    let c = regex!(
        r"^\s*frame #(?P<n>\d+): (?P<sym>.*?)(?: \+ 0x[0-9a-f]+)?(?: \((?:0x[0-9a-f]+ in )?(?P<lib>[^()]*)\))?\s*$"
    )
    .captures(text)?;
    Some(CppFrame {
        index: c["n"].parse().ok()?,
        symbol: c["sym"].trim().to_owned(),
        library: c.name("lib").map(|m| m.as_str().to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use crate::model::{CppException, CppTrace, EventKind, Span};
    use crate::parse::parse_str;

    fn traces(log: &str) -> Vec<(Span, CppTrace)> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::CppTrace(t) => Some((e.lines, t)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_c10_stack_gives_its_origin_and_frames() {
        let got = traces(
            "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f7a4b6a3617 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)
frame #1: <unknown function> + 0x3d0b8 (0x7f2c5e3bc0b8 in /usr/lib/libc.so.6)
done
",
        );
        assert_eq!(got.len(), 1);
        let (span, t) = &got[0];
        assert_eq!(*span, Span { start: 1, end: 3 });
        assert_eq!(t.raised_from.as_deref(), Some("c10_cuda_check_implementation"));
        assert_eq!(t.location.as_deref(), Some("../c10/cuda/CUDAException.cpp:44"));
        assert_eq!(
            t.frames[0].symbol,
            "c10::Error::Error(c10::SourceLocation, std::string)"
        );
        assert_eq!(
            t.frames[0].library.as_deref(),
            Some("/usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so")
        );
        assert_eq!(t.frames[1].symbol, "<unknown function>");
    }

    #[test]
    fn a_stack_cut_before_its_header_is_still_a_stack() {
        let got = traces("frame #0: c10::Error::Error() + 0x1 (0x1 in libc10.so)\n");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.raised_from, None);
    }

    #[test]
    fn thrusts_what_gives_the_cuda_error_at_its_end() {
        let codes: Vec<_> = parse_str(
            "terminate called after throwing an instance of 'thrust::system::system_error'
  what():  radix_sort: failed to get memory buffer: out of memory
",
        )
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::CudaError(c) => Some(c.code),
            _ => None,
        })
        .collect();
        assert_eq!(codes, vec![Some(2)]);
    }

    #[test]
    fn terminate_lines_take_their_what() {
        let events = parse_str(
            "terminate called after throwing an instance of 'c10::CUDAError'\n  what():  CUDA error: an illegal memory access was encountered\n",
        )
        .events;
        let found: Vec<&CppException> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::CppException(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].type_name, "c10::CUDAError");
        assert_eq!(
            found[0].what.as_deref(),
            Some("CUDA error: an illegal memory access was encountered")
        );
    }
}
