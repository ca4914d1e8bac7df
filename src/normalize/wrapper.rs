//! The outermost prefix of a line: what a container runtime, the system log or the person who
//! pasted the log put in front of everything a program printed. Docker Compose writes
//! `service-1  | ` (v1: `service_1  | `), journald and syslog write `Nov 27 10:00:00 host
//! unit[pid]: ` (`journalctl -o short-iso`: an ISO timestamp instead of the date), moreutils' `ts`
//! writes the date alone, and a log quoted in Markdown has `> ` before each line. Such a prefix
//! comes before any other (a program's own timestamp, level or rank follows it), so it is read
//! once, at the start of the line.

use std::sync::LazyLock;

use regex::Regex;

use super::LineMeta;

/// Where the program's text starts after a container or system-log prefix (0 without one).
pub(super) fn strip(line: &str, meta: &mut LineMeta) -> usize {
    let quote = markdown_quote(line);
    let rest = &line[quote..];
    if let Some(end) = compose(rest) {
        return quote + end;
    }
    match system_log(rest) {
        Some(end) => {
            meta.timestamp = true;
            quote + end
        }
        None => quote,
    }
}

/// Markdown's block quote: `> ` (or a bare `>` on an empty quoted line), up to three levels.
fn markdown_quote(line: &str) -> usize {
    let s = line.as_bytes();
    let mut end = 0;
    for _ in 0..3 {
        match (s.get(end), s.get(end + 1)) {
            (Some(b'>'), Some(b' ')) => end += 2,
            (Some(b'>'), None) => end += 1,
            _ => break,
        }
    }
    end
}

/// Longest service or container name read as a Compose prefix.
const MAX_NAME: usize = 64;

/// Docker Compose's `name  | `: a name (letters, digits, `_`, `-`; it starts with a letter), the
/// padding that aligns every service's bar, then `| `. Compose pads a name with at least two
/// spaces, so one space is taken only after a replica number (`vllm-1 | `). Not taken: a name with
/// a dot (a table of weights: `score.weight   | MISMATCH |`), a log level (loguru's `ERROR    |
/// `), or a line starting with a digit (a model summary's `0 | encoder | …`).
fn compose(line: &str) -> Option<usize> {
    let s = line.as_bytes();
    if !s.first()?.is_ascii_alphabetic() {
        return None;
    }
    let name = s
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        .count();
    let spaces = s[name..].iter().take_while(|b| **b == b' ').count();
    let bar = name + spaces;
    let replica = {
        let digits = s[..name].iter().rev().take_while(|b| b.is_ascii_digit()).count();
        digits > 0 && digits < name && matches!(s[name - digits - 1], b'-' | b'_')
    };
    let padded = spaces >= 2 || (spaces == 1 && replica);
    if name > MAX_NAME || !padded || s.get(bar) != Some(&b'|') || is_level(&line[..name]) {
        return None;
    }
    match s.get(bar + 1) {
        None => Some(bar + 1),
        Some(b' ') => Some(bar + 2),
        Some(_) => None,
    }
}

fn is_level(word: &str) -> bool {
    super::prefix::LEVELS.split('|').any(|level| level == word)
}

/// journald / syslog: `Nov 27 10:00:00 host unit[pid]: ` (only the kernel's lines have no pid: a
/// `host unit: ` without one could be the program's own `CUDA error: `),
/// `journalctl -o short-iso`'s `2024-11-27T10:00:00+0000 host unit[pid]: `, and the date alone
/// (moreutils' `ts`: `Nov 27 10:00:00 `).
static SYSTEM_LOG: LazyLock<Regex> = LazyLock::new(|| {
    let date = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{2}:\d{2}:\d{2}";
    let iso = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?";
    let host = r"[\w.-]{1,64}";
    let unit = r"[\w.@/+-]{1,64}";
    let pattern =
        format!(r"(?-u)^(?:{date} {host} (?:{unit}\[\d+\]|kernel): |{iso} {host} {unit}\[\d+\]: |{date} )");
    // The pattern is a constant of this file; the unit tests compile it.
    #[allow(clippy::expect_used)]
    Regex::new(&pattern).expect("system log pattern compiles")
});

/// Compiles the pattern now rather than on the first line that needs it.
pub(super) fn warm_up() {
    LazyLock::force(&SYSTEM_LOG);
}

fn system_log(line: &str) -> Option<usize> {
    let s = line.as_bytes();
    // `Nov 27 …` or `2024-…T…`: the cheap shape first, most lines stop here.
    let month = s.len() > 16 && s[0].is_ascii_uppercase() && s[3] == b' ';
    let iso = s.len() > 20 && s[0].is_ascii_digit() && s[4] == b'-' && s[10] == b'T';
    if !(month || iso) {
        return None;
    }
    SYSTEM_LOG.find(line).map(|m| m.end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(line: &str) -> (&str, bool) {
        let mut meta = LineMeta::default();
        let end = strip(line, &mut meta);
        (&line[end..], meta.timestamp)
    }

    #[test]
    fn compose_prefixes_of_both_versions_are_removed() {
        for (line, text) in [
            ("vllm-1  | RuntimeError: CUDA error", "RuntimeError: CUDA error"),
            (
                "detect_worker_1  |   File \"x.py\", line 3",
                "  File \"x.py\", line 3",
            ),
            (
                "monai_sam2    | Traceback (most recent call last):",
                "Traceback (most recent call last):",
            ),
            (
                "vllm-1 | torch.OutOfMemoryError: CUDA out of memory.",
                "torch.OutOfMemoryError: CUDA out of memory.",
            ),
            ("vllm-rs-swe  | ", ""),
            ("vllm-rs-swe  |", ""),
        ] {
            assert_eq!(stripped(line), (text, false), "{line}");
        }
    }

    #[test]
    fn tables_levels_and_unpadded_bars_are_not_compose_prefixes() {
        for line in [
            "score.weight                | MISMATCH   | Reinit due to size mismatch",
            "ERROR    | 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - HIP out of memory",
            "0 | transmvsnet       | TransMVSNet           | 1.1 M",
            "loss | 0.5",
            "worker  |x",
            "| epoch | 1 |",
        ] {
            assert_eq!(stripped(line), (line, false), "{line}");
        }
    }

    #[test]
    fn journald_and_syslog_prefixes_are_removed_as_timestamps() {
        for (line, text) in [
            (
                "Oct 04 13:19:39 llm sd-webui-forge-start[394]: RuntimeError: CUDA error: out of memory",
                "RuntimeError: CUDA error: out of memory",
            ),
            (
                "Nov  7 10:00:00 gpu-node-3 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
                "NVRM: Xid (PCI:0000:3b:00): 79",
            ),
            (
                "2024-11-27T10:00:00+0000 gpu-node-3 ollama[1234]: cuda driver library failed",
                "cuda driver library failed",
            ),
        ] {
            assert_eq!(stripped(line), (text, true), "{line}");
        }
    }

    #[test]
    fn the_date_alone_is_a_timestamp_and_a_markdown_quote_is_removed_first() {
        assert_eq!(
            stripped("Nov 27 10:00:01 CUDA error: out of memory"),
            ("CUDA error: out of memory", true)
        );
        assert_eq!(
            stripped("Nov 27 10:00:01 RuntimeError: CUDA error: out of memory"),
            ("RuntimeError: CUDA error: out of memory", true)
        );
        assert_eq!(
            stripped("> vllm-1  | RuntimeError: CUDA error"),
            ("RuntimeError: CUDA error", false)
        );
        assert_eq!(stripped(">"), ("", false));
        assert_eq!(stripped(">>> import torch"), (">>> import torch", false));
    }

    #[test]
    fn an_iso_timestamp_without_a_host_and_unit_is_left_to_the_prefix_table() {
        for line in [
            "2024-11-27T10:00:00Z RuntimeError: CUDA error: out of memory",
            "Nov 27 was the day: it failed",
        ] {
            assert_eq!(stripped(line), (line, false), "{line}");
        }
    }
}
