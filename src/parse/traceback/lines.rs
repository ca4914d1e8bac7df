//! What one line means inside (or at the start of) a Python traceback.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::memmem;

use crate::model::Frame;

/// The role a line can play in a traceback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TbLine {
    /// `Traceback (most recent call last):`; `origin_hint` is text before it (`Original`).
    Header { dataloader: bool },
    /// IPython's `RuntimeError      Traceback (most recent call last)`.
    IpythonHeader,
    /// rich's `╭──── Traceback (most recent call last) ────╮`.
    RichTop,
    /// rich's `╰────╯`.
    RichBottom,
    /// A line inside a rich box, without its borders.
    RichContent(String),
    /// `File "x.py", line 3, in f`.
    Frame(Frame),
    /// `File "x.py", line` cut by a terminal wrap: the rest is on the next line.
    FrameStart,
    /// IPython frame headers (`Cell In[3], line 5`, `File ~/x.py:12, in f(a)`, `x.py in f(a)`).
    IpythonFrame(Frame),
    /// `[Previous line repeated 996 more times]`.
    Repeated(u32),
    /// Python 3.11 position markers (`~~~^^^`).
    Carets,
    /// "The above exception was the direct cause of the following exception:"
    ChainCause,
    /// "During handling of the above exception, another exception occurred:"
    ChainContext,
    /// `-- Process 1 terminated with the following error:`
    ProcessOrigin(u32),
    /// `Type: message`; `strict` when the type name looks like an exception on its own.
    Exception {
        type_name: String,
        message: String,
        strict: bool,
    },
    /// An empty line.
    Blank,
    /// Anything else.
    Other,
}

/// Patterns that can start a traceback when none is open, for the prefilter.
pub(crate) const TRIGGERS: &[&str] = &[
    r"Traceback \(most recent call last\)",
    r#"^\s*File ""#,
    r"^\s*(?:│|╭)",
    r"^(?:Cell In\s?\[\d+\]|Input In \[\d+\]|<ipython-input-)",
    r"^File \S+:\d+, in ",
    r"^\S+\.py in [\w.<>]+\(",
    r"^-- Process \d+ terminated with the following error",
    r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt|Exit|Failure|Timeout)\b",
    r"^(?:StopIteration|StopAsyncIteration|GeneratorExit)\b",
];

/// Exception type suffixes that make a bare `Name: message` line an exception.
const EXCEPTION_SUFFIXES: &[&str] = &["Error", "Exception", "Interrupt", "Exit", "Failure", "Timeout"];

/// Exception names without one of those suffixes.
const EXCEPTION_NAMES: &[&str] = &["StopIteration", "StopAsyncIteration", "GeneratorExit"];

/// The header's words, searched for with a searcher built once (`str::contains` builds one for
/// every line, which cost more than the rest of the line's reading).
static TRACEBACK_HEADER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new("Traceback (most recent call last)"));

pub(super) fn classify(text: &str) -> TbLine {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return TbLine::Blank;
    }
    if let Some(content) = rich_content(trimmed) {
        return content;
    }
    if TRACEBACK_HEADER.find(trimmed.as_bytes()).is_some() {
        if regex!(r"^[A-Za-z_][\w.]*\s{2,}Traceback \(most recent call last\)$").is_match(trimmed) {
            return TbLine::IpythonHeader;
        }
        return TbLine::Header {
            dataloader: trimmed.starts_with("Original Traceback"),
        };
    }
    if trimmed.starts_with("File \"") {
        return match parse_frame(trimmed) {
            Some(frame) => TbLine::Frame(frame),
            None => TbLine::FrameStart,
        };
    }
    if let Some(frame) = parse_ipython_frame(trimmed) {
        return TbLine::IpythonFrame(frame);
    }
    if trimmed.starts_with("[Previous line repeated ")
        && let Some(c) = regex!(r"^\[Previous line repeated (?P<n>\d+) more times?\]$").captures(trimmed)
    {
        return TbLine::Repeated(c["n"].parse().unwrap_or(0));
    }
    if trimmed.bytes().all(|b| b == b'~' || b == b'^') {
        return TbLine::Carets;
    }
    if trimmed.starts_with("The above exception was the direct cause of the following exception") {
        return TbLine::ChainCause;
    }
    if trimmed.starts_with("During handling of the above exception, another exception occurred") {
        return TbLine::ChainContext;
    }
    if trimmed.starts_with("-- Process ")
        && let Some(c) =
            regex!(r"^-- Process (?P<n>\d+) terminated with the following error:").captures(trimmed)
    {
        return TbLine::ProcessOrigin(c["n"].parse().unwrap_or(0));
    }
    // An exception line starts at the left margin.
    if !text.starts_with(char::is_whitespace)
        && let Some(exception) = parse_exception(trimmed)
    {
        return exception;
    }
    TbLine::Other
}

/// Whether a line is one of the source lines rich prints around a frame's current line
/// (`│   208 │     "Cannot re-initialize CUDA …"  │`): code near the failure that did not run,
/// unlike the current line, marked `❱`, which a plain traceback prints too.
pub fn is_rich_context_line(text: &str) -> bool {
    let Some(inner) = text.trim_start().strip_prefix('│') else {
        return false;
    };
    let inner = inner.trim_start();
    let digits = inner.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && inner[digits..].trim_start().starts_with('│')
}

fn rich_content(trimmed: &str) -> Option<TbLine> {
    if trimmed.starts_with('╭') {
        return Some(if trimmed.contains("Traceback") {
            TbLine::RichTop
        } else {
            TbLine::RichContent(String::new())
        });
    }
    if trimmed.starts_with('╰') {
        return Some(TbLine::RichBottom);
    }
    let inner = trimmed.strip_prefix('│')?;
    let inner = inner.strip_suffix('│').unwrap_or(inner).trim();
    Some(TbLine::RichContent(inner.to_owned()))
}

fn parse_exception(trimmed: &str) -> Option<TbLine> {
    let (type_name, colon, message) = exception_parts(trimmed)?;
    let short = type_name.rsplit('.').next().unwrap_or(type_name);
    let strict = EXCEPTION_SUFFIXES.iter().any(|s| short.ends_with(s)) || EXCEPTION_NAMES.contains(&short);
    // A qualified name with a message (`jinja2.exceptions.TemplateNotFound: x`) is an exception
    // inside a traceback; so is any `Warning` there (warnings turned into errors).
    let lenient = (type_name.contains('.') && colon) || short.ends_with("Warning");
    if !strict && !lenient {
        return None;
    }
    Some(TbLine::Exception {
        type_name: type_name.to_owned(),
        message: message.trim_end().to_owned(),
        strict,
    })
}

/// `Type`, `Type:` or `Type: message` (a dotted name): the name, whether a colon follows it and
/// the message, read by hand as the parser's regexes would read
/// `^(?P<t>(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*)(?P<colon>:(?:\s(?P<msg>.*))?)?$`
/// (ASCII `\s`): every line of a traceback is asked.
fn exception_parts(trimmed: &str) -> Option<(&str, bool, &str)> {
    let name_len = trimmed
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    let (type_name, rest) = trimmed.split_at(name_len);
    let segments_are_names = type_name.split('.').all(|segment| {
        segment
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
    });
    if !segments_are_names {
        return None;
    }
    let Some(after_colon) = rest.strip_prefix(':') else {
        return rest.is_empty().then_some((type_name, false, ""));
    };
    match after_colon.as_bytes().first() {
        None => Some((type_name, true, "")),
        // `.*` stops at a line feed, which `$` does not pass.
        Some(&b) if is_regex_space(b) && !after_colon[1..].contains('\n') => {
            Some((type_name, true, &after_colon[1..]))
        }
        Some(_) => None,
    }
}

/// The regexes' ASCII `\s`: tab, line feed, vertical tab, form feed, carriage return, space.
fn is_regex_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// `File "x.py", line 3, in f` (the `in f` part is missing for some frames).
pub(super) fn parse_frame(trimmed: &str) -> Option<Frame> {
    let (file, line, function) = frame_parts(trimmed)?;
    Some(Frame {
        in_app: is_app_path(file),
        line: line.parse().ok(),
        function: function.unwrap_or("<module>").trim().to_owned(),
        code: None,
        file: file.to_owned(),
    })
}

/// The file, line and function of a frame line, read by hand as the parser's regexes would read
/// `^File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$` (ASCII digits): every
/// frame of every traceback is read.
fn frame_parts(trimmed: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = trimmed.strip_prefix("File \"")?;
    let (file, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(", line ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (line, rest) = rest.split_at(digits);
    if file.is_empty() || line.is_empty() || rest.contains('\n') {
        return None;
    }
    match rest.strip_prefix(", in ") {
        _ if rest.is_empty() => Some((file, line, None)),
        Some(function) if !function.is_empty() => Some((file, line, Some(function))),
        _ => None,
    }
}

fn parse_ipython_frame(trimmed: &str) -> Option<Frame> {
    // The literal each of the patterns below needs: most lines of a traceback have none.
    let may_be_one = ["Cell In", "Input In [", "File ", "<ipython-input-"]
        .iter()
        .any(|start| trimmed.starts_with(start))
        || trimmed.contains(".py in ");
    if !may_be_one {
        return None;
    }
    let (file, line, function) =
        if let Some(c) = regex!(r"^(?P<file>Cell In\s?\[\d+\]), line (?P<line>\d+)").captures(trimmed) {
            (c["file"].to_owned(), c["line"].parse().ok(), "<cell>".to_owned())
        } else if let Some(c) =
            regex!(r"^Input In \[(?P<cell>\d+)\], in (?P<func><cell line: (?P<line>\d+)>|[\w.<>]+)")
                .captures(trimmed)
        {
            (
                format!("Input In [{}]", &c["cell"]),
                c.name("line").and_then(|m| m.as_str().parse().ok()),
                c["func"].to_owned(),
            )
        } else if let Some(c) =
            regex!(r"^File (?P<file>\S.*?):(?P<line>\d+), in (?P<func>[\w.<>]+)").captures(trimmed)
        {
            (c["file"].to_owned(), c["line"].parse().ok(), c["func"].to_owned())
        } else if let Some(c) =
            regex!(r"^(?P<file><ipython-input-[^>]+>|\S+\.py) in (?P<func>[\w.<>]+)\(").captures(trimmed)
        {
            (c["file"].to_owned(), None, c["func"].to_owned())
        } else {
            return None;
        };
    Some(Frame {
        in_app: is_app_path(&file),
        file,
        line,
        function,
        code: None,
    })
}

/// `path/to/file.py:45 in forward` inside a rich box.
pub(super) fn parse_rich_frame(content: &str) -> Option<Frame> {
    let c =
        regex!(r"^(?P<file>\S.*?\.py[a-z]?|<[^>]+>):(?P<line>\d+) in (?P<func>\S+)$").captures(content)?;
    let file = c["file"].to_owned();
    Some(Frame {
        in_app: is_app_path(&file),
        line: c["line"].parse().ok(),
        function: c["func"].to_owned(),
        code: None,
        file,
    })
}

/// What in a frame's file says it is a library's, the standard library's or torch /
/// transformers internals rather than the user's own code.
const LIBRARY_MARKERS: &[&str] = &[
    "site-packages",
    "dist-packages",
    "/lib/python",
    "\\lib\\python",
    "\\Lib\\",
    "/usr/lib/",
    "/usr/local/lib/",
    "<frozen ",
    "/torch/",
    "\\torch\\",
    "/transformers/",
    "\\transformers\\",
    "/accelerate/",
    "/deepspeed/",
    "/peft/",
    "/trl/",
];

/// [`LIBRARY_MARKERS`] searched for in one pass over a path (leftmost-first: any marker will do,
/// and this kind lets the automaton use its vectorised prefilter).
static LIBRARY_PATHS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    // A fixed list of short literals always builds; the tests build it.
    #[allow(clippy::expect_used)]
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(LIBRARY_MARKERS)
        .expect("library markers build")
});

/// Whether a frame's file is the user's own code rather than a library, the standard library
/// or torch / transformers internals.
pub fn is_app_path(file: &str) -> bool {
    !LIBRARY_PATHS.is_match(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_split_into_file_line_and_function() {
        let TbLine::Frame(f) = classify(
            "  File \"/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py\", line 1501, in _call_impl",
        ) else {
            panic!("not a frame");
        };
        assert_eq!(f.line, Some(1501));
        assert_eq!(f.function, "_call_impl");
        assert!(!f.in_app);
        let TbLine::Frame(f) = classify("File \"train.py\", line 45, in <module>") else {
            panic!("not a frame");
        };
        assert!(f.in_app);
    }

    /// Lines that the readers below must read as their regexes do.
    const AWKWARD_LINES: &[&str] = &[
        "File \"train.py\", line 45, in <module>",
        "File \"train.py\", line 45",
        "File \"train.py\", line 45, in ",
        "File \"train.py\", line 45, in  f ",
        "File \"train.py\", line 45x",
        "File \"train.py\", line , in f",
        "File \"\", line 4, in f",
        "File \"a\"b\", line 4, in f",
        "File \"train.py\", line 4, in f\nmore",
        "File \"train.py",
        "RuntimeError",
        "RuntimeError:",
        "RuntimeError: ",
        "RuntimeError: CUDA error: device-side assert triggered  ",
        "RuntimeError:\tx",
        "RuntimeError:\u{b}x",
        "RuntimeError:x",
        "RuntimeError :x",
        "torch._C._RuntimeError: x",
        "a..b: x",
        ".a: x",
        "a.: x",
        "1a: x",
        "_a1.b_2: x",
        "Error: x\ny",
        "Fehler: Ä",
        "",
    ];

    #[test]
    fn frames_are_read_as_their_pattern_reads_them() {
        let re = regex::Regex::new(&crate::scan::ascii_classes(
            r#"^File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$"#,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        for line in AWKWARD_LINES {
            let by_regex = re
                .captures(line)
                .map(|c| (c.name("file"), c.name("line"), c.name("func")))
                .map(|(f, l, func)| {
                    (
                        f.map_or("", |m| m.as_str()),
                        l.map_or("", |m| m.as_str()),
                        func.map(|m| m.as_str()),
                    )
                });
            assert_eq!(frame_parts(line), by_regex, "{line:?}");
        }
    }

    #[test]
    fn exception_lines_are_read_as_their_pattern_reads_them() {
        let re = regex::Regex::new(&crate::scan::ascii_classes(
            r"^(?P<t>(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*)(?P<colon>:(?:\s(?P<msg>.*))?)?$",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        for line in AWKWARD_LINES {
            let by_regex = re.captures(line).map(|c| {
                let text = |name| c.name(name).map_or("", |m| m.as_str());
                (text("t"), c.name("colon").is_some(), text("msg"))
            });
            assert_eq!(exception_parts(line), by_regex, "{line:?}");
        }
    }

    #[test]
    fn library_paths_are_told_apart_from_the_users_code() {
        assert!(is_app_path("/home/user/project/train.py"));
        assert!(is_app_path("<ipython-input-4-1f3e5e48d5a5>"));
        assert!(!is_app_path(
            "C:\\Users\\user\\Python313\\Lib\\site-packages\\torch\\_utils.py"
        ));
        assert!(!is_app_path("<frozen importlib._bootstrap>"));
        assert!(!is_app_path("/pytorch/torch/nn/functional.py"));
    }

    #[test]
    fn exception_lines_need_an_exception_like_name() {
        assert!(matches!(
            classify("torch._C._RuntimeError: CUDA error: device-side assert triggered"),
            TbLine::Exception { strict: true, .. }
        ));
        assert!(matches!(
            classify("KeyboardInterrupt"),
            TbLine::Exception { strict: true, .. }
        ));
        assert!(matches!(
            classify("jinja2.exceptions.TemplateNotFound: x"),
            TbLine::Exception { strict: false, .. }
        ));
        assert_eq!(classify("pass"), TbLine::Other);
        assert_eq!(classify("Note: something"), TbLine::Other);
        assert_eq!(classify("    RuntimeError: indented is code"), TbLine::Other);
    }

    #[test]
    fn headers_in_their_three_styles() {
        assert_eq!(
            classify("Traceback (most recent call last):"),
            TbLine::Header { dataloader: false }
        );
        assert_eq!(
            classify("Original Traceback (most recent call last):"),
            TbLine::Header { dataloader: true }
        );
        assert_eq!(
            classify("RuntimeError                              Traceback (most recent call last)"),
            TbLine::IpythonHeader
        );
        assert_eq!(
            classify(
                "╭─────────────────────────────── Traceback (most recent call last) ────────────────────────────────╮"
            ),
            TbLine::RichTop
        );
    }

    #[test]
    fn ipython_frames_in_old_and_new_formats() {
        let TbLine::IpythonFrame(f) = classify(
            "File ~/miniconda3/lib/python3.9/site-packages/torch/nn/modules/module.py:1194, in Module._call_impl(self, *input, **kwargs)",
        ) else {
            panic!("not a frame");
        };
        assert_eq!(
            (f.line, f.function.as_str(), f.in_app),
            (Some(1194), "Module._call_impl", false)
        );
        let TbLine::IpythonFrame(f) = classify("<ipython-input-4-1f3e5e48d5a5> in <module>()") else {
            panic!("not a frame");
        };
        assert!(f.in_app);
        assert!(matches!(classify("Cell In[3], line 5"), TbLine::IpythonFrame(_)));
    }

    #[test]
    fn rich_context_lines_are_told_from_the_current_line_and_from_tables() {
        assert!(is_rich_context_line(
            "│   208 │   │   \"Cannot re-initialize CUDA\"   │"
        ));
        assert!(is_rich_context_line("  │ 1024│ x = 1 │"));
        assert!(!is_rich_context_line(
            "│ ❱ 211 │   raise AssertionError(\"Torch not compiled\") │"
        ));
        assert!(!is_rich_context_line(
            "│ /opt/torch/cuda/__init__.py:211 in _lazy_init │"
        ));
        assert!(!is_rich_context_line("| 208 | a markdown table's row |"));
    }

    #[test]
    fn rich_box_lines_lose_their_borders() {
        assert_eq!(
            classify("│ /usr/lib/python3.9/site-packages/torch/nn/functional.py:2238 in embedding     │"),
            TbLine::RichContent(
                "/usr/lib/python3.9/site-packages/torch/nn/functional.py:2238 in embedding".into()
            )
        );
        let f = parse_rich_frame("/home/user/train.py:45 in <module>");
        assert_eq!(
            f.map(|f| (f.line, f.function)),
            Some((Some(45), "<module>".into()))
        );
    }

    #[test]
    fn chain_markers_and_process_origins() {
        assert_eq!(
            classify("The above exception was the direct cause of the following exception:"),
            TbLine::ChainCause
        );
        assert_eq!(
            classify("During handling of the above exception, another exception occurred:"),
            TbLine::ChainContext
        );
        assert_eq!(
            classify("-- Process 3 terminated with the following error:"),
            TbLine::ProcessOrigin(3)
        );
    }
}
