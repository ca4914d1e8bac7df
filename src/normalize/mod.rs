//! Normalization of one raw log line: what the parser and the rules see.
//!
//! A raw line (bytes, without its `\n`) becomes a [`Line`]: decoded lossily, carriage-return
//! progress bars reduced to their last state, ANSI escapes and control bytes removed, a copy's
//! substitutes (no-break spaces, curly quotes, HTML entities) read back, and container, system-log,
//! CI, timestamp, log-level and multi-process prefixes stripped but remembered in [`LineMeta`].
//! Normalization never fails; it only ever shortens a line, so a pattern that matches the
//! normalized text also matches somewhere in the raw line unless the line held escape or control
//! bytes or a copy's substitutes (see [`needs_full_normalization`]).

mod ansi;
mod prefix;
mod typography;
mod wrapper;

pub use prefix::{CiMarker, Level};

/// One normalized line, borrowed from the [`Normalizer`] that produced it.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// Original 1-based line number in the raw log.
    pub number: u64,
    /// Normalized text: prefixes removed, trailing whitespace trimmed, indentation kept.
    pub text: &'a str,
    /// What normalization removed or noticed.
    pub meta: LineMeta,
}

impl Line<'_> {
    /// The process rank that printed the line, when a prefix said so.
    pub fn rank(&self) -> Option<u32> {
        self.meta.rank
    }
}

/// What normalization removed from a line or noticed about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineMeta {
    /// Rank from `[rank3]:`, `[default0]:`, `rank 3:`, `3: ` (srun -l) or `[1,3]<stdout>:`.
    pub rank: Option<u32>,
    /// Log level from a logging prefix.
    pub level: Option<Level>,
    /// GitHub Actions / GitLab marker.
    pub ci: Option<CiMarker>,
    /// A timestamp prefix was removed.
    pub timestamp: bool,
    /// The line was not valid UTF-8 and was decoded lossily.
    pub lossy: bool,
    /// The line held NUL or other control bytes, which were removed.
    pub control: bool,
}

/// Compiles the prefix patterns now rather than on the first line that needs them.
pub fn warm_up() {
    prefix::warm_up();
    wrapper::warm_up();
}

/// Whether a raw line holds bytes that normalization removes from inside the text (escape
/// sequences, control bytes, orphaned SGR codes such as `[0m`). For such lines the normalized text
/// may not be a substring of the raw line, so a raw-bytes prefilter must not skip them.
pub fn needs_full_normalization(raw: &[u8]) -> bool {
    // One cheap pass over the bytes first: most lines hold no byte that could start either. It
    // has no early exit, so that it compiles to vector instructions (4x faster on log lines).
    let (suspicious, star) = raw.iter().fold((false, false), |(seen, star), &b| {
        (
            seen | (b < 0x20) | (b == 0x7f) | (b == 0xC2) | (b == 0xE2) | (b == b'&'),
            star | (b == b'*'),
        )
    });
    let control = suspicious
        && (raw.iter().any(|&b| (b < 0x20 && b != b'\t' && b != b'\r') || b == 0x7f)
            // C1 control characters (U+0080 to U+009F) are removed too.
            || memchr::memchr_iter(0xC2, raw)
                .any(|i| raw.get(i + 1).is_some_and(|b| (0x80..=0x9F).contains(b)))
            // and a copy's substitutes (no-break spaces, curly quotes, HTML entities) read back
            || typography::present(raw));
    // Markdown's bold markers are dropped as well (`*args` alone is no marker).
    let bold = star && typography::has_bold(raw);
    control || bold || ansi::has_orphan_sgr(raw)
}

/// Normalizes lines one at a time, reusing its buffers.
#[derive(Debug, Default)]
pub struct Normalizer {
    buf: String,
}

impl Normalizer {
    /// A normalizer with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Normalizes one raw line (without its trailing `\n`).
    pub fn normalize<'a>(&'a mut self, number: u64, raw: &'a [u8]) -> Line<'a> {
        let mut meta = LineMeta::default();
        let raw = last_progress_state(raw);
        let decoded: &str = match std::str::from_utf8(raw) {
            Ok(s) if !needs_full_normalization(raw) => s,
            Ok(s) => {
                self.buf.clear();
                meta.control = ansi::clean_into(s, &mut self.buf);
                &self.buf
            }
            Err(_) => {
                meta.lossy = true;
                let lossy = String::from_utf8_lossy(raw);
                self.buf.clear();
                meta.control = ansi::clean_into(&lossy, &mut self.buf);
                &self.buf
            }
        };
        let start = prefix::strip(decoded, &mut meta);
        Line {
            number,
            text: decoded[start..].trim_end(),
            meta,
        }
    }
}

/// Reduces a line rewritten with carriage returns (tqdm, pip, wget progress) to its last
/// non-empty state, and drops the `\r` of a CRLF line ending.
fn last_progress_state(raw: &[u8]) -> &[u8] {
    let trimmed = raw.strip_suffix(b"\r").unwrap_or(raw);
    if memchr::memchr(b'\r', trimmed).is_none() {
        return trimmed;
    }
    trimmed
        .split(|&b| b == b'\r')
        .rev()
        .find(|segment| segment.iter().any(|b| !b.is_ascii_whitespace()))
        .unwrap_or(b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(raw: &str) -> (String, LineMeta) {
        let mut n = Normalizer::new();
        let line = n.normalize(7, raw.as_bytes());
        assert_eq!(line.number, 7);
        (line.text.to_owned(), line.meta)
    }

    #[test]
    fn markdown_bold_a_reporter_added_is_dropped_and_python_s_double_star_kept() {
        let (text, _) =
            norm("RuntimeError: Expected object of scalar type **Double** but got scalar type **Float**");
        assert_eq!(
            text,
            "RuntimeError: Expected object of scalar type Double but got scalar type Float"
        );
        let (text, _) = norm("    return func(*args, **kwargs)");
        assert_eq!(text, "    return func(*args, **kwargs)");
    }

    #[test]
    fn plain_lines_pass_through_with_indentation_kept() {
        let (text, meta) = norm("  File \"train.py\", line 3, in <module>");
        assert_eq!(text, "  File \"train.py\", line 3, in <module>");
        assert_eq!(meta, LineMeta::default());
    }

    #[test]
    fn crlf_endings_and_trailing_spaces_are_dropped() {
        assert_eq!(norm("RuntimeError: boom  \r").0, "RuntimeError: boom");
    }

    #[test]
    fn progress_bars_are_reduced_to_their_last_state() {
        let raw = " 10%|█         | 1/10\r 20%|██        | 2/10\r100%|██████████| 10/10\r";
        assert_eq!(norm(raw).0, "100%|██████████| 10/10");
    }

    #[test]
    fn ansi_colours_are_removed() {
        let (text, _) = norm("\x1b[31mRuntimeError\x1b[0m: CUDA error: \x1b[1munknown error\x1b[0m");
        assert_eq!(text, "RuntimeError: CUDA error: unknown error");
    }

    #[test]
    fn orphaned_colour_codes_left_by_copy_paste_are_removed() {
        let (text, _) = norm("[36m(RayWorkerWrapper pid=4009)[0m [rank1]:[E ProcessGroupNCCL.cpp:563] boom");
        assert_eq!(text, "boom");
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily_and_flagged() {
        let mut n = Normalizer::new();
        let line = n.normalize(1, b"RuntimeError: bad \xff byte");
        assert_eq!(line.text, "RuntimeError: bad \u{fffd} byte");
        assert!(line.meta.lossy);
    }

    #[test]
    fn nul_and_control_bytes_are_removed_and_flagged() {
        let (text, meta) = norm("Runtime\0Error: a\x07b");
        assert_eq!(text, "RuntimeError: ab");
        assert!(meta.control);
    }

    #[test]
    fn a_copy_s_no_break_spaces_curly_quotes_and_html_entities_are_read_as_printed() {
        let (text, meta) =
            norm("RuntimeError:\u{a0}CUDA error: the argument \u{2018}weight\u{2019} is \u{201c}bad\u{201d}");
        assert_eq!(text, "RuntimeError: CUDA error: the argument 'weight' is \"bad\"");
        assert!(!meta.control);
        let (text, _) =
            norm("Assertion `srcIndex &lt; srcSelectDimSize` failed &amp; &quot;x&quot; &#39;y&#39;");
        assert_eq!(text, "Assertion `srcIndex < srcSelectDimSize` failed & \"x\" 'y'");
        assert!(needs_full_normalization("a\u{a0}b".as_bytes()));
        assert!(needs_full_normalization(b"a &lt; b"));
        assert!(!needs_full_normalization("100%|\u{2588}\u{2588}| R&D".as_bytes()));
    }

    #[test]
    fn needs_full_normalization_spots_escapes_but_not_tabs_or_carriage_returns() {
        assert!(needs_full_normalization(b"a\x1b[0mb"));
        assert!(needs_full_normalization(b"a\0b"));
        assert!(needs_full_normalization(b"[0mfoo"));
        assert!(!needs_full_normalization(b"\tsize mismatch for a\r"));
        assert!(!needs_full_normalization(b"block: [0,0,0], thread: [1,0,0]"));
    }
}
