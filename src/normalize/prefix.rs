//! Stripping of the prefixes that CI systems, loggers and multi-process launchers put in front of
//! what a program printed. Each prefix removed is remembered in [`LineMeta`].

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::LineMeta;

/// A log level taken from a logging prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// DEBUG / TRACE.
    Debug,
    /// INFO / NOTICE / glog `I`.
    Info,
    /// WARNING / WARN / glog `W`.
    Warning,
    /// ERROR / glog `E`.
    Error,
    /// CRITICAL / FATAL / glog `F`.
    Critical,
}

impl Level {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "DEBUG" | "TRACE" => Self::Debug,
            "INFO" | "NOTICE" | "I" => Self::Info,
            "WARNING" | "WARN" | "W" => Self::Warning,
            "ERROR" | "E" => Self::Error,
            "CRITICAL" | "FATAL" | "F" => Self::Critical,
            _ => return None,
        })
    }
}

/// A CI system's marker on a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMarker {
    /// `##[error]` / `::error::`.
    Error,
    /// `##[warning]` / `::warning::`.
    Warning,
    /// `##[notice]`, `##[debug]`, `##[command]` and the like.
    Note,
    /// `##[group]`, `section_start:` (a folded section begins).
    GroupStart,
    /// `##[endgroup]`, `section_end:`.
    GroupEnd,
}

impl CiMarker {
    fn parse(s: &str) -> Self {
        match s {
            "error" => Self::Error,
            "warning" => Self::Warning,
            "group" | "section_start" => Self::GroupStart,
            "endgroup" | "section_end" => Self::GroupEnd,
            _ => Self::Note,
        }
    }
}

/// What one prefix pattern means.
#[derive(Clone, Copy)]
enum Kind {
    /// A timestamp (ISO, bracketed, HF's `01/02/2024 03:04:05 -`, time of day).
    Timestamp,
    /// A log level that may only follow a timestamp (`- INFO -`); group 1 is the level.
    LevelAfterTimestamp,
    /// A log level that stands on its own (`[INFO]`, `WARNING:root:`); group 1 is the level.
    Level,
    /// glog / c10 / TensorFlow: group 1 is the level letter.
    Glog,
    /// GitHub / GitLab marker; group 1 is the marker name.
    Ci,
    /// Rank prefix; group 1 is the rank.
    Rank,
    /// A process label without a rank (`(RayWorkerWrapper pid=4009)`).
    Process,
}

pub(super) const LEVELS: &str = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE|TRACE";

static PREFIXES: LazyLock<Vec<(Kind, Regex)>> = LazyLock::new(|| {
    let specs: Vec<(Kind, String)> = vec![
        // Ray's C++ logging: `[2025-04-15 00:31:11,815 E 808 17795] logging.cc:108: `.
        (
            Kind::Glog,
            r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d+ ([IWEF]) \d+ \d+\] [\w./-]+:\d+: ".into(),
        ),
        // 2024-01-02T03:04:05.678Z, [2024-01-02 03:04:05,678], GitLab's `00O+` stream tag after it.
        (
            Kind::Timestamp,
            r"^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?\]?(?: \d{2}[OE]\+?)?(?: +- +| *: +| |$)".into(),
        ),
        // Hugging Face's `01/02/2024 03:04:05 - `, and a bare time of day `[12:34:56] `.
        (
            Kind::Timestamp,
            r"^(?:\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?)(?: +- +| +)".into(),
        ),
        (
            Kind::LevelAfterTimestamp,
            format!(r"^ *(?:\| *)?({LEVELS})(?: *\| *(?:[\w.<>]+:[\w.<>]+:\d+ +- +)?| +- +(?:[\w.]+ +- +)?| *: +| +)"),
        ),
        (Kind::Level, format!(r"^\[({LEVELS})\](?: *[-:|] *| +)?")),
        (Kind::Level, format!(r"^({LEVELS}):[\w.<>-]+:")),
        // vLLM: `ERROR 04-15 00:31:11 worker_base.py:574] `.
        (
            Kind::Level,
            format!(r"^({LEVELS}) \d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)? [\w./-]+:\d+\] "),
        ),
        // TensorFlow after its timestamp: `E tensorflow/core/x.cc:123] `.
        (Kind::Glog, r"^([IWEF]) [\w./-]+:\d+\] ".into()),
        // glog: `E0321 02:07:08.408271 12345 file.cc:607] `.
        (
            Kind::Glog,
            r"^([IWEF])\d{3,4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [\w./-]+:\d+\] ".into(),
        ),
        // c10 logging: `[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] `, `[E ProcessGroupNCCL.cpp:563] `.
        (
            Kind::Glog,
            r"^\[([IWEF])(?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d+)?(?: +\d+)? *[\w./-]+:\d+\] ?".into(),
        ),
        (
            Kind::Ci,
            r"^##\[(error|warning|notice|debug|group|endgroup|section|command)\]".into(),
        ),
        (
            Kind::Ci,
            r"^::(error|warning|notice|debug|group|endgroup)(?: (?u:[^:])*)?::".into(),
        ),
        (Kind::Ci, r"^(section_start|section_end):\d+:[\w.\[\]=,-]+".into()),
        (
            Kind::Rank,
            r"^\[(?:rank|default|trainer|worker|local_rank)(\d+)\]:? ?".into(),
        ),
        (Kind::Rank, r"^rank (\d+): ".into()),
        (Kind::Rank, r"^\[1,(\d+)\]<std(?:out|err)>: ?".into()),
        // Open MPI's tag on SageMaker: `[1,mpirank:0,algo-1]<stderr>:`.
        (Kind::Rank, r"^\[1,mpirank:(\d+),[\w.-]+\]<std(?:out|err)>: ?".into()),
        // Accelerate's multi-process logger: `[RANK 0] `.
        (Kind::Rank, r"^\[RANK (\d+)\] ".into()),
        // Hydra's `[2024-01-02 03:04:05,678][module][LEVEL] - ` (no space after the timestamp).
        (
            Kind::Level,
            format!(r"^\[\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)?\]\[[\w.-]+\]\[({LEVELS})\] -? ?"),
        ),
        (
            Kind::Process,
            r"^\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\) ".into(),
        ),
        // Ray's own processes: `(raylet) `, `(autoscaler +1m20s) `, `(gcs_server) `.
        (
            Kind::Process,
            r"^\((?:raylet|gcs_server|dashboard|monitor|autoscaler)(?: \+[\w.]+)?\) ".into(),
        ),
        // `kubectl logs --prefix`: `[pod/trainer-0/pytorch] `.
        (Kind::Process, r"^\[pod/[\w.-]+/[\w.-]+\] ".into()),
        // DeepSpeed's `log_dist` source tag: `[logging.py:96:log_dist] `.
        (Kind::Process, r"^\[[\w./-]+\.py:\d+:\w+\] ".into()),
    ];
    specs
        .into_iter()
        .map(|(kind, pattern)| {
            // The patterns are constants of this file; the unit tests compile every one of them.
            #[allow(clippy::expect_used)]
            let re = Regex::new(&ascii(&pattern)).expect("prefix pattern compiles");
            (kind, re)
        })
        .collect()
});

/// `pattern` with ASCII classes: `\d`, `\w` and `\s` of a prefix mean ASCII digits, word
/// characters and spaces (timestamps, levels, ranks and host names are ASCII). With Unicode
/// classes these few patterns took longer to compile (~15 ms, `[\w.-]{1,100}` alone ~40 ms) than
/// the analysis of a megabyte of log, and every `faultline analyze` paid for it.
fn ascii(pattern: &str) -> String {
    format!("(?-u){pattern}")
}

/// All prefix patterns as one set: one pass tells which (if any) applies to a line.
static PREFIX_SET: LazyLock<regex::RegexSet> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    regex::RegexSet::new(PREFIXES.iter().map(|(_, re)| re.as_str())).expect("prefix patterns compile")
});

/// Compiles the patterns every log's lines are tried against.
pub(super) fn warm_up() {
    LazyLock::force(&PREFIX_SET);
    LazyLock::force(&PREFIXES);
}

/// A host and stream tag (`node-3.cluster [stderr] `), which may start with any letter.
static HOST_STREAM: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(&ascii(r"^[\w.-]{1,100} \[std(?:out|err)\] ")).expect("host pattern compiles")
});

/// SLURM `srun -l`: `3: ` (right-aligned). Only accepted as the very first prefix of a line.
static SRUN_RANK: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(&ascii(r"^ {0,4}(\d{1,4}): ")).expect("srun pattern compiles")
});

/// `[rank3]:` / `[default3]:` anywhere near the start, after prefixes we do not know.
static RANK_ANYWHERE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(&ascii(r"\[(?:rank|default)(\d+)\]: ?")).expect("rank pattern compiles")
});

/// How far into a line an unknown prefix may reach before `[rankN]:`.
const RANK_SEARCH_WINDOW: usize = 120;

/// Most prefixes a line can carry; bounds the loop on adversarial input.
const MAX_PREFIXES: usize = 8;

/// Returns the byte offset where the program's own text starts, filling `meta` with what the
/// removed prefixes said.
pub(super) fn strip(line: &str, meta: &mut LineMeta) -> usize {
    let mut start = super::wrapper::strip(line, meta);
    let rest = &line[start..];
    if after_bracket(&rest.as_bytes()[..rest.len().min(120)], |before, after| {
        before == Some(b' ') && after.starts_with(b"std")
    }) && let Some(m) = HOST_STREAM.find(rest)
    {
        start += m.end();
    }
    if let Some(c) = srun_like(&line[start..])
        .then(|| SRUN_RANK.captures(&line[start..]))
        .flatten()
    {
        meta.rank = c[1].parse().ok();
        start += c.get(0).map_or(0, |m| m.end());
    }
    for _ in 0..MAX_PREFIXES {
        let rest = &line[start..];
        if !may_start_prefix(rest, meta) {
            break;
        }
        match strip_one(rest, meta) {
            Some(len) if len > 0 => start += len,
            _ => break,
        }
    }
    if meta.rank.is_none() {
        start += rank_anywhere(&line[start..], meta);
    }
    start
}

/// Whether [`SRUN_RANK`] may match: false for the common lines it cannot (a timestamp's `2024-`
/// is four digits and a dash), so its captures run only on lines that look like `3: `.
fn srun_like(rest: &str) -> bool {
    let s = rest.trim_start_matches(' ').as_bytes();
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=4).contains(&digits) && s.get(digits) == Some(&b':')
}

/// Cheap test on the first bytes: whether any prefix pattern could match `rest`, given what
/// earlier prefixes of the line said. Most lines of a log (indented traceback frames, messages)
/// stop here without running the prefix set.
fn may_start_prefix(rest: &str, meta: &LineMeta) -> bool {
    let bytes = rest.as_bytes();
    match bytes.first() {
        Some(b'0'..=b'9' | b'[' | b'#' | b':' | b'(') => true,
        // Only a level after a timestamp (`- INFO -`, loguru's `| ERROR |`) starts this way.
        Some(b' ' | b'|') => meta.timestamp,
        Some(b'r') => rest.starts_with("rank "),
        Some(b's') => rest.starts_with("section_"),
        // A level word (`ERROR:root:`, vLLM's `ERROR 04-15 …`), or glog / TensorFlow's
        // `E0321 …` and `E tensorflow/…`.
        Some(b'A'..=b'Z') => {
            LEVELS.split('|').any(|level| rest.starts_with(level))
                || (matches!(bytes[0], b'I' | b'W' | b'E' | b'F')
                    && bytes.get(1).is_some_and(|b| *b == b' ' || b.is_ascii_digit()))
        }
        _ => false,
    }
}

/// Strips the first prefix of `rest`, if it has one: its length.
fn strip_one(rest: &str, meta: &mut LineMeta) -> Option<usize> {
    // The most common prefixes (GitHub Actions' timestamp on every line, torchrun's `[rank0]:`,
    // `[INFO]`) are read by hand, exactly as their patterns would; the set does the rest.
    match rest.as_bytes().first() {
        Some(b'0'..=b'9') => {
            if let Some(end) = iso_timestamp(rest) {
                meta.timestamp = true;
                return Some(end);
            }
        }
        Some(b'[') => {
            if let Some(end) = bracketed_rank(rest, meta).or_else(|| bracketed_level(rest, meta)) {
                return Some(end);
            }
        }
        _ => {}
    }
    strip_one_by_set(rest, meta)
}

/// Strips the first prefix of `rest` with the pattern table: the first pattern (in table order)
/// that matches wins.
fn strip_one_by_set(rest: &str, meta: &mut LineMeta) -> Option<usize> {
    let candidates = PREFIX_SET.matches(rest);
    if !candidates.matched_any() {
        return None;
    }
    for i in candidates.iter() {
        let (kind, re) = &PREFIXES[i];
        if matches!(kind, Kind::Timestamp | Kind::Process) {
            // No group to read: the cheaper search will do.
            if let Some(m) = re.find(rest) {
                meta.timestamp |= matches!(kind, Kind::Timestamp);
                return Some(m.end());
            }
            continue;
        }
        let Some(caps) = re.captures(rest) else {
            continue;
        };
        let group = caps.get(1).map_or("", |m| m.as_str());
        match kind {
            Kind::Timestamp | Kind::Process => {}
            Kind::LevelAfterTimestamp if !meta.timestamp => continue,
            Kind::LevelAfterTimestamp | Kind::Level | Kind::Glog => {
                meta.level = Level::parse(group);
            }
            Kind::Ci => meta.ci = Some(CiMarker::parse(group)),
            Kind::Rank => meta.rank = group.parse().ok(),
        }
        return caps.get(0).map(|m| m.end());
    }
    None
}

/// The ISO timestamp pattern (the first `Kind::Timestamp` of [`PREFIXES`]) written out by hand
/// for a line that starts with it: `Some(end)` exactly where that regex's match would end, `None`
/// where it does not match. It tries the pattern's optional parts in the regex's own
/// order (greedy first, then without), so the first success is the regex's leftmost-first match.
fn iso_timestamp(rest: &str) -> Option<usize> {
    let s = rest.as_bytes();
    // Lines starting with `[` may be Ray's glog prefix, which comes first in the table.
    if !s.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    for (i, shape) in b"dddd-dd-ddTdd:dd:dd".iter().enumerate() {
        let fits = match shape {
            b'd' => digit(s, i),
            b'T' => matches!(s.get(i), Some(b'T' | b' ')),
            c => s.get(i) == Some(c),
        };
        if !fits {
            return None;
        }
    }
    let mut i = 19;
    if matches!(s.get(i), Some(b'.' | b',')) && digit(s, i + 1) {
        i += 2;
        while digit(s, i) {
            i += 1;
        }
    }
    // `(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?`: at most one alternative fits; then without it.
    let zone = match s.get(i) {
        Some(b'Z') => Some(i + 1),
        Some(b'+' | b'-') if digit(s, i + 1) && digit(s, i + 2) => {
            if s.get(i + 3) == Some(&b':') && digit(s, i + 4) && digit(s, i + 5) {
                Some(i + 6)
            } else if digit(s, i + 3) && digit(s, i + 4) {
                Some(i + 5)
            } else {
                None
            }
        }
        _ if rest[i..].starts_with(" UTC") => Some(i + 4),
        _ if rest[i..].starts_with("UTC") => Some(i + 3),
        _ => None,
    };
    for after_zone in zone.into_iter().chain([i]) {
        // `\]?`
        let bracket = (s.get(after_zone) == Some(&b']')).then_some(after_zone + 1);
        for after_bracket in bracket.into_iter().chain([after_zone]) {
            // `(?: \d{2}[OE]\+?)?`, GitLab's stream tag.
            let b = after_bracket;
            // With the tag and its `+`, with the tag alone, then without the tag.
            let mut tags = [None, None];
            if s.get(b) == Some(&b' ')
                && digit(s, b + 1)
                && digit(s, b + 2)
                && matches!(s.get(b + 3), Some(b'O' | b'E'))
            {
                tags = [(s.get(b + 4) == Some(&b'+')).then_some(b + 5), Some(b + 4)];
            }
            for after_tag in tags.into_iter().flatten().chain([b]) {
                if let Some(end) = timestamp_end(s, after_tag) {
                    return Some(end);
                }
            }
        }
    }
    None
}

/// `^\[(?:rank|default|trainer|worker|local_rank)(\d+)\]:? ?` by hand (no earlier pattern of the
/// table matches a line starting this way).
fn bracketed_rank(rest: &str, meta: &mut LineMeta) -> Option<usize> {
    let s = rest.as_bytes();
    let name = ["rank", "default", "trainer", "worker", "local_rank"]
        .into_iter()
        .find(|name| rest[1..].starts_with(name))?;
    let digits_at = 1 + name.len();
    let digits = s[digits_at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let close = digits_at + digits;
    if digits == 0 || s.get(close) != Some(&b']') {
        return None;
    }
    let mut end = close + 1;
    for optional in [b':', b' '] {
        if s.get(end) == Some(&optional) {
            end += 1;
        }
    }
    meta.rank = rest[digits_at..close].parse().ok();
    Some(end)
}

/// `^\[(LEVELS)\](?: *[-:|] *| +)?` by hand (no earlier pattern of the table matches a line
/// starting with `[` and a letter).
fn bracketed_level(rest: &str, meta: &mut LineMeta) -> Option<usize> {
    let s = rest.as_bytes();
    let level = LEVELS
        .split('|')
        .find(|level| rest[1..].starts_with(level) && s.get(1 + level.len()) == Some(&b']'))?;
    let close = 1 + level.len() + 1;
    let spaces = |from: usize| s[from.min(s.len())..].iter().take_while(|b| **b == b' ').count();
    let lead = spaces(close);
    let end = match s.get(close + lead) {
        Some(b'-' | b':' | b'|') => close + lead + 1 + spaces(close + lead + 1),
        _ => close + lead,
    };
    meta.level = Level::parse(level);
    Some(end)
}

/// `(?: +- +| *: +| |$)` at `i`, alternatives in order.
fn timestamp_end(s: &[u8], i: usize) -> Option<usize> {
    let spaces = |from: usize| s[from.min(s.len())..].iter().take_while(|b| **b == b' ').count();
    let lead = spaces(i);
    let after = i + lead;
    if lead > 0 && s.get(after) == Some(&b'-') && spaces(after + 1) > 0 {
        return Some(after + 1 + spaces(after + 1));
    }
    if s.get(after) == Some(&b':') && spaces(after + 1) > 0 {
        return Some(after + 1 + spaces(after + 1));
    }
    if lead > 0 {
        return Some(i + 1);
    }
    (i == s.len()).then_some(i)
}

/// Whether byte `i` is an ASCII digit (the prefix patterns' `\d`).
fn digit(s: &[u8], i: usize) -> bool {
    s.get(i).is_some_and(u8::is_ascii_digit)
}

/// Whether some `[` of `bytes` has `test(byte before it, bytes after it)`: the substring checks
/// that run on every line, without setting a substring searcher up each time.
fn after_bracket(bytes: &[u8], test: impl Fn(Option<u8>, &[u8]) -> bool) -> bool {
    memchr::memchr_iter(b'[', bytes).any(|i| test(i.checked_sub(1).map(|b| bytes[b]), &bytes[i + 1..]))
}

fn rank_anywhere(rest: &str, meta: &mut LineMeta) -> usize {
    let window = (RANK_SEARCH_WINDOW..rest.len())
        .find(|&i| rest.is_char_boundary(i))
        .unwrap_or(rest.len());
    let head = &rest[..window];
    let bytes = head.as_bytes();
    if !after_bracket(bytes, |_, after| {
        after.starts_with(b"rank") || after.starts_with(b"default")
    }) {
        return 0;
    }
    match RANK_ANYWHERE.captures(head) {
        Some(c) => {
            meta.rank = c[1].parse().ok();
            let end = c.get(0).map_or(0, |m| m.end());
            // Prefixes may follow the rank too (`[rank0]:[E321 … ProcessGroupNCCL.cpp:607] `).
            end + strip_more(&rest[end..], meta)
        }
        None => 0,
    }
}

fn strip_more(rest: &str, meta: &mut LineMeta) -> usize {
    let mut start = 0;
    for _ in 0..MAX_PREFIXES {
        let tail = &rest[start..];
        if !may_start_prefix(tail, meta) {
            break;
        }
        match strip_one(tail, meta) {
            Some(len) if len > 0 => start += len,
            _ => break,
        }
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip_str(line: &str) -> (&str, LineMeta) {
        let mut meta = LineMeta::default();
        let start = strip(line, &mut meta);
        (&line[start..], meta)
    }

    #[test]
    fn every_prefix_pattern_compiles() {
        assert!(PREFIXES.len() > 10);
        assert!(SRUN_RANK.is_match("0: x"));
        assert!(RANK_ANYWHERE.is_match("[rank0]: x"));
    }

    /// The regex the fast path stands for, and where it ends on `line`.
    fn iso_regex_end(line: &str) -> Option<usize> {
        let (kind, re) = &PREFIXES[1];
        assert!(matches!(kind, Kind::Timestamp) && re.as_str().contains("[T ]"));
        re.find(line).map(|m| m.end())
    }

    #[test]
    fn the_timestamp_fast_path_ends_exactly_where_the_regex_does() {
        let heads = [
            "2024-01-02T03:04:05",
            "2024-01-02 03:04:05",
            "[2024-01-02 03:04:05",
            "2024-01-02T03:04",
        ];
        let fractions = ["", ".7342482", ",678", ".", ".12x"];
        let zones = ["", "Z", "+05:30", "-0800", "+05:3", " UTC", "UTC", "+0"];
        let brackets = ["", "]"];
        let tags = ["", " 00O", " 01E+", " 12", " 1O"];
        let tails = [
            "", " ", "  ", " - ", "  -  x", " : x", ": x", ":x", " -x", "x", " │ x", " ٣O x", "٣",
        ];
        let mut checked = 0;
        for h in heads {
            for f in fractions {
                for z in zones {
                    for b in brackets {
                        for t in tags {
                            for tail in tails {
                                let line = format!("{h}{f}{z}{b}{t}{tail}");
                                let fast = iso_timestamp(&line);
                                if line.starts_with('[') {
                                    assert_eq!(fast, None);
                                } else {
                                    assert_eq!(fast, iso_regex_end(&line), "{line:?}");
                                }
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn the_hand_read_prefixes_agree_with_the_pattern_table() {
        let heads = [
            "[rank0]",
            "[rank12]",
            "[default3]",
            "[local_rank1]",
            "[worker",
            "[rank]",
            "[rank٣]",
            "[INFO]",
            "[WARN]",
            "[WARNING]",
            "[WARNINGX]",
            "[ERROR]",
            "[info]",
            "[E321 02:07:08.408271257 a.cpp:607]",
            "[2024-01-02 03:04:05,678]",
            "2024-01-02T03:04:05.1Z",
            "[12:34:56]",
        ];
        let tails = [
            "", ":", ": ", ":x", " x", "  -  x", " | x", " :x", "x", "] x", "│ x",
        ];
        for head in heads {
            for tail in tails {
                let line = format!("{head}{tail}");
                let (mut fast, mut slow) = (LineMeta::default(), LineMeta::default());
                let fast_end = strip_one(&line, &mut fast);
                let slow_end = strip_one_by_set(&line, &mut slow);
                assert_eq!((fast_end, fast), (slow_end, slow), "{line:?}");
            }
        }
    }

    #[test]
    fn lines_that_cannot_start_a_prefix_skip_the_prefix_set() {
        for line in [
            "  File \"a.py\", line 1",
            "RuntimeError: x",
            "Traceback (most recent call last):",
            "|  0 |",
        ] {
            assert!(!may_start_prefix(line, &LineMeta::default()), "{line}");
            assert!(
                PREFIX_SET
                    .matches(line)
                    .iter()
                    .all(|i| matches!(PREFIXES[i].0, Kind::LevelAfterTimestamp)),
                "{line}"
            );
        }
        let after_timestamp = LineMeta {
            timestamp: true,
            ..LineMeta::default()
        };
        assert!(may_start_prefix(" - INFO - x", &after_timestamp));
        assert!(may_start_prefix("ERROR:root:x", &LineMeta::default()));
        assert!(may_start_prefix(
            "E0321 02:07:08.408271 1 f.cc:1] x",
            &LineMeta::default()
        ));
    }

    #[test]
    fn github_actions_timestamps_are_removed_but_indentation_kept() {
        let (text, meta) = strip_str("2026-07-30T03:36:29.7342482Z   File \"a.py\", line 1, in f");
        assert_eq!(text, "  File \"a.py\", line 1, in f");
        assert!(meta.timestamp);
    }

    #[test]
    fn github_error_markers_are_remembered() {
        let (text, meta) =
            strip_str("2025-01-04T03:01:04.0396597Z ##[error]Process completed with exit code 137.");
        assert_eq!(text, "Process completed with exit code 137.");
        assert_eq!(meta.ci, Some(CiMarker::Error));
    }

    #[test]
    fn python_logging_prefixes_with_timestamp_and_level_are_removed() {
        let (text, meta) = strip_str("2024-01-02 03:04:05,678 - INFO - training started");
        assert_eq!(text, "training started");
        assert_eq!(meta.level, Some(Level::Info));
        let (text, meta) = strip_str("01/02/2024 03:04:05 - WARNING - transformers.trainer - slow");
        assert_eq!(text, "slow");
        assert_eq!(meta.level, Some(Level::Warning));
    }

    #[test]
    fn loguru_prefixes_are_removed_and_table_borders_after_a_timestamp_are_kept() {
        let (text, meta) = strip_str("2024-01-02 03:04:05.678 | ERROR    | train:main:42 - loss is nan");
        assert_eq!((text, meta.level), ("loss is nan", Some(Level::Error)));
        let (text, _) = strip_str("2024-05-06T07:08:03.0000003Z |   0  NVIDIA A100-SXM4-80GB  On  |");
        assert_eq!(text, "|   0  NVIDIA A100-SXM4-80GB  On  |");
    }

    #[test]
    fn tensorflow_glog_prefix_after_a_timestamp_is_removed() {
        let (text, meta) = strip_str(
            "2019-02-11 16:42:08.131786: E tensorflow/stream_executor/cuda/cuda_blas.cc:654] failed to run cuBLAS routine",
        );
        assert_eq!(text, "failed to run cuBLAS routine");
        assert_eq!(meta.level, Some(Level::Error));
    }

    #[test]
    fn logger_name_prefixes_are_removed_without_touching_exception_names() {
        let (text, meta) =
            strip_str("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)");
        assert_eq!(text, "failed (exitcode: 1)");
        assert_eq!(meta.level, Some(Level::Error));
        let (text, meta) = strip_str("RuntimeError: CUDA error: unknown error");
        assert_eq!(text, "RuntimeError: CUDA error: unknown error");
        assert_eq!(meta.level, None);
        // A bare "ERROR: " is the program's own words (pip, conda): kept.
        assert_eq!(
            strip_str("ERROR: Cannot install torch").0,
            "ERROR: Cannot install torch"
        );
    }

    #[test]
    fn torch_rank_prefixes_are_understood() {
        let (text, meta) = strip_str("[rank3]: Traceback (most recent call last):");
        assert_eq!((text, meta.rank), ("Traceback (most recent call last):", Some(3)));
        let (text, meta) = strip_str("[default1]:  File \"t.py\", line 2, in <module>");
        assert_eq!(
            (text, meta.rank),
            (" File \"t.py\", line 2, in <module>", Some(1))
        );
        let (text, meta) = strip_str("rank 5: RuntimeError: x");
        assert_eq!((text, meta.rank), ("RuntimeError: x", Some(5)));
    }

    #[test]
    fn slurm_srun_labels_are_ranks_only_at_the_very_start() {
        let (text, meta) = strip_str(" 12: RuntimeError: x");
        assert_eq!((text, meta.rank), ("RuntimeError: x", Some(12)));
        let (text, meta) = strip_str("2024-01-02T03:04:05Z 12: x");
        assert_eq!((text, meta.rank), ("12: x", None));
    }

    #[test]
    fn rank_markers_after_unknown_prefixes_and_c10_log_prefixes_are_removed() {
        let (text, meta) = strip_str(
            "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout",
        );
        assert_eq!(text, "[Rank 0] Watchdog caught collective operation timeout");
        assert_eq!(meta.rank, Some(0));
        assert_eq!(meta.level, Some(Level::Error));
    }

    #[test]
    fn launchers_and_loggers_of_training_frameworks_are_removed() {
        let (text, meta) = strip_str("[1,mpirank:3,algo-1]<stderr>:RuntimeError: x");
        assert_eq!((text, meta.rank), ("RuntimeError: x", Some(3)));
        let (text, meta) = strip_str("[2026-11-27 10:00:00,123] [ERROR] [RANK 2] RuntimeError: x");
        assert_eq!(
            (text, meta.rank, meta.level),
            ("RuntimeError: x", Some(2), Some(Level::Error))
        );
        let (text, meta) = strip_str("[2026-11-27 10:00:00,123][__main__][ERROR] - RuntimeError: x");
        assert_eq!((text, meta.level), ("RuntimeError: x", Some(Level::Error)));
        assert_eq!(strip_str("(raylet) RuntimeError: x").0, "RuntimeError: x");
        assert_eq!(
            strip_str("(autoscaler +1m20s) Resized to 8 CPUs").0,
            "Resized to 8 CPUs"
        );
        assert_eq!(strip_str("(1, 2) is a tuple").0, "(1, 2) is a tuple");
    }

    #[test]
    fn ray_process_labels_are_removed() {
        let (text, meta) =
            strip_str("(RayWorkerWrapper pid=4009) [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] x");
        assert_eq!(text, "[Rank 1] x");
        assert_eq!(meta.rank, Some(1));
    }

    #[test]
    fn openmpi_tags_and_deepspeed_prefixes_are_removed() {
        let (text, meta) = strip_str("[1,2]<stderr>:RuntimeError: x");
        assert_eq!((text, meta.rank), ("RuntimeError: x", Some(2)));
        let (text, meta) =
            strip_str("[2024-01-02 03:04:05,678] [INFO] [logging.py:96:log_dist] [Rank 0] step 1");
        assert!(meta.timestamp);
        assert_eq!(meta.level, Some(Level::Info));
        assert_eq!(text, "[Rank 0] step 1");
    }

    #[test]
    fn vllm_ray_and_host_stream_prefixes_are_removed() {
        let (text, meta) = strip_str("ERROR 04-15 00:31:11 worker_base.py:574] RuntimeError: x");
        assert_eq!((text, meta.level), ("RuntimeError: x", Some(Level::Error)));
        let (text, meta) =
            strip_str("[2025-04-15 00:31:11,815 E 808 17795] logging.cc:108: Unhandled exception");
        assert_eq!((text, meta.level), ("Unhandled exception", Some(Level::Error)));
        let (text, _) = strip_str("dinov2-giant-nodes.cn-d003.nolog [stderr] frame #2: f() + 0x1");
        assert_eq!(text, "frame #2: f() + 0x1");
    }

    #[test]
    fn gitlab_section_markers_are_removed() {
        let (text, meta) = strip_str("section_start:1700000000:step_script");
        assert_eq!(text, "");
        assert_eq!(meta.ci, Some(CiMarker::GroupStart));
    }
}
