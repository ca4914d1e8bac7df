//! CUDA device assertions and CUDA runtime / driver errors.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use super::{AssertId, Collector, Extractor, compile_table};
use crate::model::{CudaApi, CudaAssert, CudaError, EventKind};
use crate::normalize::Line;

pub(super) const EXTRACTORS: &[Extractor] = &[
    Extractor {
        // The second form is a device assertion line cut after its expression (a log viewer's
        // line limit, a paste cut short): the thread grid before it says what it is.
        // The third is one whose quotes were lost (Markdown takes backquotes for code): the
        // thread grid says it is a kernel's.
        trigger: r"Assertion [`'].*[`'] failed|thread: \[[^\]]*\] Assertion [`'][^`']+[`']|thread: \[[^\]]*\] Assertion [^`'\s].* failed",
        handle: assertion,
    },
    Extractor {
        trigger: r"CUDA error: ",
        handle: runtime_error,
    },
    Extractor {
        trigger: r"THCudaCheck FAIL|CUDA error \(?\d+\)?: |details: CUDA error \d+ |CUDA error !+ <|Gpu API call \(|\(-217:Gpu API call\) |CUDA error \d+ at |CUDA error \d+ '|CUDA error \S+:\d+ '|HIP error: |== cudaSuccess \(\d+ vs\. 0\)|CUDA Error: |CUDA failure \d+: |Cuda Error in [\w:]+: \d+ \(|Error Code \d+: Cuda Runtime \(|(?i:cuda) failed with error |Cuda error: \d+\[|\bcuda[A-Z]\w*\(.*\) failed with error |GPUassert: |CUDA runtime error in \S|\bcuda[A-Z]\w* returned [1-9]\d*\s*$|(?i:cuda) initialization failure with error:? \d+|(?i:cuda) execution failed with error \d+|synchroni[sz]e failed \(\d+\)|CUresult error: \d+ \(|PhysX error: .+ failed! \d+\s*$|\bcu[A-Z]\w* failed with error \d+|CUDA error \(\d+\)(?: at \S+:\d+)?\s*$|^Error [a-z][a-z ]+ at \S+\.cuh?:\d+|\.cuh? at line \d+",
        handle: numbered_error,
    },
    Extractor {
        trigger: r"GPU assertion failure message = |File containing assertion = |Device function containing assertion = ",
        handle: dsa_report,
    },
    Extractor {
        trigger: r"Triton Error \[CUDA\]: ",
        handle: triton_error,
    },
    Extractor {
        trigger: r"(?i)cuda runtime error \(\d+\)",
        handle: legacy_error,
    },
    Extractor {
        trigger: r"CUDA_ERROR_[A-Z_]+|CUDA driver error: |\bcu[A-Z][a-z]\w* failed: |\[\d+\] Call to cu\w+ results in UNKNOWN_CUDA_ERROR",
        handle: driver_error,
    },
    Extractor {
        trigger: r"(?:cuda|hip)Error[A-Z]\w+|HIP_ERROR_[A-Z]\w+",
        handle: runtime_name,
    },
    Extractor {
        trigger: r"cudaGetDeviceCount\(\).*Error \d+: ",
        handle: device_count_error,
    },
    Extractor {
        trigger: BARE_MESSAGE,
        handle: bare_message_error,
    },
    Extractor {
        trigger: r"\.cuh?: \d+: |Check failed: \[\w+ == cudaSuccess\]",
        handle: checked_message,
    },
];

/// An exception whose whole message is one of the CUDA runtime's own error strings, as wrappers
/// that pass `cudaGetErrorString` on raise it: `ValueError(b'initialization error',)` in a
/// Celery task's report, `RuntimeError: misaligned address`. Strings that other programs also
/// use for their own errors (`out of memory`, `invalid argument`, `unknown error`) are left out.
const BARE_MESSAGE: &str = r#"(?:Error|Exception)(?:: |\()b?['"]?(?:initialization error|misaligned address|unspecified launch failure|invalid device function|invalid device ordinal|an illegal memory access was encountered|an illegal instruction was encountered|no kernel image is available for execution on the device|device-side assert triggered|too many resources requested for launch|all CUDA-capable devices are busy or unavailable|no CUDA-capable device is detected|the launch timed out and was terminated)['"]?,?\)?\s*$"#;

/// Known CUDA errors: a fragment of the runtime message, the runtime name, the driver name, the code.
const KNOWN: &[(&str, &str, &str, u32)] = &[
    (
        "device-side assert triggered",
        "cudaErrorAssert",
        "CUDA_ERROR_ASSERT",
        710,
    ),
    (
        "illegal memory access",
        "cudaErrorIllegalAddress",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        700,
    ),
    (
        "misaligned address",
        "cudaErrorMisalignedAddress",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        716,
    ),
    (
        "unspecified launch failure",
        "cudaErrorLaunchFailure",
        "CUDA_ERROR_LAUNCH_FAILED",
        719,
    ),
    (
        "launch timed out",
        "cudaErrorLaunchTimeout",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        702,
    ),
    (
        "too many resources requested for launch",
        "cudaErrorLaunchOutOfResources",
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        701,
    ),
    (
        "no kernel image is available",
        "cudaErrorNoKernelImageForDevice",
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        209,
    ),
    (
        "invalid device function",
        "cudaErrorInvalidDeviceFunction",
        "CUDA_ERROR_NOT_FOUND",
        98,
    ),
    (
        "out of memory",
        "cudaErrorMemoryAllocation",
        "CUDA_ERROR_OUT_OF_MEMORY",
        2,
    ),
    (
        "initialization error",
        "cudaErrorInitializationError",
        "CUDA_ERROR_NOT_INITIALIZED",
        3,
    ),
    (
        "busy or unavailable",
        "cudaErrorDevicesUnavailable",
        "CUDA_ERROR_DEVICE_UNAVAILABLE",
        46,
    ),
    (
        "driver version is insufficient",
        "cudaErrorInsufficientDriver",
        "CUDA_ERROR_INSUFFICIENT_DRIVER",
        35,
    ),
    (
        "no CUDA-capable device is detected",
        "cudaErrorNoDevice",
        "CUDA_ERROR_NO_DEVICE",
        100,
    ),
    (
        "invalid device ordinal",
        "cudaErrorInvalidDevice",
        "CUDA_ERROR_INVALID_DEVICE",
        101,
    ),
    (
        "illegal instruction",
        "cudaErrorIllegalInstruction",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        715,
    ),
    (
        "forward compatibility was attempted",
        "cudaErrorCompatNotSupportedOnDevice",
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        804,
    ),
    (
        "unsupported display driver / cuda driver combination",
        "cudaErrorSystemDriverMismatch",
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        803,
    ),
    (
        "unsupported toolchain",
        "cudaErrorUnsupportedPtxVersion",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        222,
    ),
    (
        "invalid resource handle",
        "cudaErrorInvalidResourceHandle",
        "CUDA_ERROR_INVALID_HANDLE",
        400,
    ),
    (
        "operation not supported",
        "cudaErrorNotSupported",
        "CUDA_ERROR_NOT_SUPPORTED",
        801,
    ),
    (
        "invalid argument",
        "cudaErrorInvalidValue",
        "CUDA_ERROR_INVALID_VALUE",
        1,
    ),
    ("unknown error", "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN", 999),
];

fn known_by_message(message: &str) -> Option<&'static (&'static str, &'static str, &'static str, u32)> {
    let lower = message.to_ascii_lowercase();
    KNOWN
        .iter()
        .find(|(fragment, ..)| lower.contains(&fragment.to_ascii_lowercase()))
        // A message that starts with the runtime's name for the error, its words cut after it
        // (`cudaErrorInitializationError initialization` at a wrapped line's end).
        .or_else(|| {
            let name = message.split(|c: char| !c.is_ascii_alphanumeric()).next()?;
            KNOWN.iter().find(|k| k.1 == name)
        })
}

pub(super) fn assertion(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let grid = thread_grid(text);
    let cut_thread = grid.is_none().then(|| thread_after_cut_block(text)).flatten();
    let in_kernel = grid.is_some() || cut_thread.is_some();
    let expression = assertion_expression(text).or_else(|| {
        in_kernel
            .then(|| cut_assertion_expression(text).or_else(|| unquoted_assertion_expression(text)))
            .flatten()
    });
    let Some(expression) = expression else {
        return;
    };
    let location = source_location(text);
    if !in_kernel && is_host_assertion(text, location.as_ref().map(|l| l.ext)) {
        return;
    }
    let id = AssertId {
        file: location.as_ref().map(|l| l.file),
        source_line: location.as_ref().and_then(|l| l.line.parse().ok()),
        expression,
    };
    let describe = || new_assert(id, kernel_function(text, location.as_ref()));
    let block = grid.map(|g| without_spaces(g.0));
    let thread = grid.map(|g| g.1).or(cut_thread).map(without_spaces);
    out.assertion(line, id, describe, block.as_deref(), thread.as_deref());
}

/// The thread index of a kernel's assertion line that a terminal wrapped inside its block index:
/// the line starts with the block's tail (`0,0], thread: [78,0,0] Assertion `…` fa`).
fn thread_after_cut_block(text: &str) -> Option<&str> {
    let c = regex!(r"^\s*[\d, ]*\], thread: \[(?P<t>[\d, ]+)\] Assertion ").captures(text)?;
    c.name("t").map(|t| t.as_str())
}

/// The event of an assertion seen for the first time.
pub(super) fn new_assert(id: AssertId<'_>, function: Option<String>) -> CudaAssert {
    CudaAssert {
        file: id.file.map(str::to_owned),
        source_line: id.source_line,
        function,
        expression: id.expression.to_owned(),
        occurrences: 0,
        blocks: 0,
        threads: 0,
    }
}

/// The kernel named after the source location (or at the start of a line that lost it).
fn kernel_function(text: &str, location: Option<&SourceLocation<'_>>) -> Option<String> {
    match location {
        Some(loc) => {
            let after = &text[loc.end..];
            let end = after
                .find("block:")
                .or_else(|| after.find("Assertion"))
                .unwrap_or(after.len());
            short_function(after[..end].trim().trim_end_matches(':'))
        }
        // `indexSelectLargeIndex: block: [..]` with the file cut off.
        None => regex!(r"^\s*(?P<f>[A-Za-z_][\w:]*(?:\(\))?): block: ")
            .captures(text)
            .map(|c| c["f"].to_owned()),
    }
}

/// A block or thread index as folded (`[43, 0, 0]` and `[43,0,0]` are one).
fn without_spaces(index: &str) -> Cow<'_, str> {
    if index.contains(' ') {
        Cow::Owned(index.replace(' ', ""))
    } else {
        Cow::Borrowed(index)
    }
}

/// The block and thread of the first `block: [1,0,0], thread: [5,0,0]` on the line, read by hand
/// as the parser's regexes would read `block: \[(?P<block>[\d, ]+)\], thread:
/// \[(?P<thread>[\d, ]+)\]` (ASCII digits): an assertion line repeats for every thread that failed.
fn thread_grid(text: &str) -> Option<(&str, &str)> {
    const BLOCK: &str = "block: [";
    const THREAD: &str = "], thread: [";
    // `[\d, ]+`: the longest run of digits, commas and spaces at the start of `s`, if any.
    fn run(s: &str) -> Option<&str> {
        let n = s
            .bytes()
            .take_while(|b| b.is_ascii_digit() || matches!(b, b',' | b' '))
            .count();
        (n > 0).then(|| &s[..n])
    }
    // The class cannot take a `]`, so from each start there is one way to match, or none.
    literal!("block: [").find_iter(text.as_bytes()).find_map(|start| {
        let after = &text[start + BLOCK.len()..];
        let block = run(after)?;
        let rest = after[block.len()..].strip_prefix(THREAD)?;
        let thread = run(rest)?;
        rest[thread.len()..].starts_with(']').then_some((block, thread))
    })
}

/// Where an assertion line names its source: `Loss.cu:240:`.
#[derive(Debug, PartialEq, Eq)]
struct SourceLocation<'a> {
    file: &'a str,
    ext: &'a str,
    line: &'a str,
    /// Byte offset just after the second colon.
    end: usize,
}

/// The extensions of [`source_location`]'s pattern; longer ones first where one ends another.
const SOURCE_EXTENSIONS: [&str; 8] = ["cuh", "cu", "cc", "cpp", "cxx", "c", "hpp", "h"];

/// The first `file.ext:line:` of `text`, read by hand as the parser's regexes would read
/// `(?P<file>[^\s:`']+\.(?P<ext>cuh?|c|cc|cpp|cxx|h|hpp)):(?P<line>\d+):` (ASCII spaces and
/// digits): an assertion line repeats for every thread block, so this runs often, and the regex
/// has to try every start position.
fn source_location(text: &str) -> Option<SourceLocation<'_>> {
    let bytes = text.as_bytes();
    let separator = |b: &u8| b.is_ascii_whitespace() || matches!(b, b':' | b'`' | b'\'');
    memchr::memchr_iter(b':', bytes).find_map(|colon| {
        let digits = bytes[colon + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || bytes.get(colon + 1 + digits) != Some(&b':') {
            return None;
        }
        let start = bytes[..colon].iter().rposition(separator).map_or(0, |i| i + 1);
        let file = &text[start..colon];
        let ext = SOURCE_EXTENSIONS.into_iter().find(|ext| {
            file.strip_suffix(ext)
                .and_then(|stem| stem.strip_suffix('.'))
                .is_some_and(|stem| !stem.is_empty())
        })?;
        Some(SourceLocation {
            file,
            ext,
            line: &text[colon + 1..colon + 1 + digits],
            end: colon + digits + 2,
        })
    })
}

/// An assertion of host code (glibc `assert`, TH / THNN on the CPU): a C / C++ source file named
/// before (`file.c:12:`) or after (`at file.c:93`) it, or glibc's `` `expr' `` quoting without a
/// kernel's thread grid (host code in a `.cu` file asserts like any C++: `python: ops.cu:408:
/// int igemmlt(…): Assertion `false' failed.`).
fn is_host_assertion(text: &str, ext: Option<&str>) -> bool {
    if ext.is_some_and(|e| !e.starts_with("cu")) {
        return true;
    }
    let named_after = regex!(r"failed\.?\s+at \S+\.(?:c|cc|cpp|cxx|h|hpp)(?::\d+)?").is_match(text);
    // A kernel's line names its thread even where a paste or a translation garbled its block.
    let kernel_grid = text.contains("block: [") || text.contains("thread: [");
    named_after || (text.contains("' failed") && !kernel_grid)
}

/// torch's device-side assertion report (`TORCH_USE_CUDA_DSA` builds): a message line, then the
/// file and the kernel on the following lines.
fn dsa_report(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    if let Some(c) = regex!(r"GPU assertion failure message = (?P<e>.+)$").captures(text) {
        let id = AssertId {
            file: None,
            source_line: None,
            expression: c["e"].trim().trim_matches('`'),
        };
        out.assertion(line, id, || new_assert(id, None), None, None);
        return;
    }
    let Some(event) = out.recent("cuda_assert", line.number, DSA_WINDOW) else {
        return;
    };
    let EventKind::CudaAssert(a) = &mut event.kind else {
        return;
    };
    if let Some(c) = regex!(r"File containing assertion = (?P<f>\S+?)(?::(?P<l>\d+))?$").captures(text) {
        a.file.get_or_insert_with(|| c["f"].to_owned());
        if let Some(l) = c.name("l") {
            a.source_line = a.source_line.or(l.as_str().parse().ok());
        }
    } else if let Some(c) = regex!(r"Device function containing assertion = (?P<f>.+)$").captures(text) {
        a.function.get_or_insert_with(|| c["f"].trim().to_owned());
    }
    event.lines.extend_to(line.number);
}

/// Lines after a device-side assertion message within which its details are looked for.
const DSA_WINDOW: u64 = 6;

/// The expression of the last complete "Assertion `expr` failed" on the line (interleaved output
/// from many threads can garble the earlier ones).
fn assertion_expression(text: &str) -> Option<&str> {
    let mut best = None;
    let mut rest = text;
    let assertion = literal!("Assertion ");
    while let Some(start) = assertion.find(rest.as_bytes()) {
        let after = &rest[start + "Assertion ".len()..];
        rest = after;
        let Some(body) = after.strip_prefix(['`', '\'']) else {
            continue;
        };
        let end = literal!("` failed")
            .find(body.as_bytes())
            .or_else(|| literal!("' failed").find(body.as_bytes()));
        if let Some(end) = end {
            let expr = &body[..end];
            if assertion.find(expr.as_bytes()).is_none() && !expr.is_empty() {
                best = Some(expr);
            }
        }
    }
    best
}

/// The expression of an assertion line cut after it: "Assertion `expr`" and at most the start of
/// " failed." after it, up to the end of the line.
fn cut_assertion_expression(text: &str) -> Option<&str> {
    let start = text.rfind("Assertion ")?;
    let after = &text[start + "Assertion ".len()..];
    let quote = after.chars().next().filter(|c| matches!(c, '`' | '\''))?;
    let body = &after[1..];
    let end = body.find(quote)?;
    let rest = body[end + 1..].trim_end();
    let expression = &body[..end];
    (" failed.".starts_with(rest) && !expression.is_empty()).then_some(expression)
}

/// The expression of an assertion line that lost its quotes (`Assertion t >= 0 && t < n_classes
/// failed.`: Markdown read the backquotes as code marks), read only after a kernel's thread grid.
fn unquoted_assertion_expression(text: &str) -> Option<&str> {
    let after = &text[text.rfind("] Assertion ")? + "] Assertion ".len()..];
    let end = after.rfind(" failed")?;
    let expression = after[..end].trim();
    let quoted = expression.contains(['`', '\'']);
    (!expression.is_empty() && !quoted).then_some(expression)
}

/// `void indexSelectSmallIndex(TensorInfo<T, IndexType>, …) [with T = float]` → `indexSelectSmallIndex`.
fn short_function(signature: &str) -> Option<String> {
    if signature.is_empty() {
        return None;
    }
    // `lambda [](int)->auto::operator()(int)->auto`, `operator()`.
    if signature.contains("operator()") {
        return Some("operator()".to_owned());
    }
    let head = match signature.find('(') {
        Some(0) | None => signature,
        Some(i) if signature[..i].ends_with("operator") => return Some("operator()".to_owned()),
        Some(i) => &signature[..i],
    };
    head.rsplit([' ', ':', '*', '&'])
        .find(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The codes of [`KNOWN`] errors that the driver API (`CUresult`) and the runtime
/// (`cudaError_t`) give the same number: a driver API code is read by the runtime's table only
/// for these.
const SAME_CODE_IN_BOTH_APIS: &[u32] = &[2, 3, 46, 100, 101, 209, 700, 701, 702, 710, 716, 719];

/// The [`KNOWN`] error of a code that every API and CUDA release numbers the same.
fn known_by_code(code: u32) -> Option<&'static (&'static str, &'static str, &'static str, u32)> {
    SAME_CODE_IN_BOTH_APIS
        .contains(&code)
        .then(|| KNOWN.iter().find(|k| k.3 == code))
        .flatten()
}

/// Whether a message stands in for one the runtime had no text for: a PyTorch built against an
/// older runtime prints `cuda runtime error (209) : unrecognized error code` for a missing kernel
/// image.
fn is_placeholder(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("unrecognized error code") || lower.contains("unknown error code")
}

/// Whether a message that is not the runtime's holds most words of the error its code names (a
/// report retyped by hand: faiss's `CUDA error 209 not kernel image is available …`). A message of
/// another library printed with its own number in the same frame (`CUDA error 3:
/// CUBLAS_STATUS_ALLOC_FAILED`) does not, and its number is not read as CUDA's.
fn resembles(message: &str, fragment: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    let (mut words, mut present) = (0, 0);
    for word in fragment.split_whitespace() {
        words += 1;
        present += usize::from(lower.contains(&word.to_ascii_lowercase()));
    }
    present * 4 >= words * 3
}

/// The runtime's message for an error code printed alone (`CUDA error 700` when it is unknown).
fn message_of_code(code: &str) -> String {
    KNOWN
        .iter()
        .find(|k| code.parse() == Ok(k.3))
        .map_or_else(|| format!("CUDA error {code}"), |k| k.0.to_owned())
}

pub(super) fn cuda_error(message: &str, api: CudaApi, code: Option<u32>, name: Option<String>) -> EventKind {
    let known = known_by_message(message).or_else(|| {
        code.and_then(known_by_code)
            .filter(|k| is_placeholder(message) || resembles(message, k.0))
    });
    EventKind::CudaError(CudaError {
        message: message.to_owned(),
        code: code.or(known.map(|k| k.3)),
        name: name.or(known.map(|k| k.1.to_owned())),
        api,
    })
}

/// Thrust's exceptions (`thrust::system::system_error`) say the step that failed, then the
/// runtime's message: `parallel_for failed: out of memory`, `radix_sort: failed to get memory
/// buffer: out of memory`. The last part is read as a CUDA error when it is one of the runtime's
/// messages.
pub(super) fn thrust_error(out: &mut Collector, line: &Line<'_>, what: &str) {
    let last = what
        .rsplit(": ")
        .next()
        .unwrap_or(what)
        .trim()
        .trim_end_matches('.');
    runtime_message_error(out, line, last);
}

/// A program's check that prints the runtime's message alone after its place or its condition:
/// XGBoost's `../src/common/host_device_vector.cu: 259: initialization error`, and easylogging's
/// CHECK in ThunderSVM, `Check failed: [error == cudaSuccess]  unknown error`. Read only when the
/// message is one of the runtime's.
fn checked_message(out: &mut Collector, line: &Line<'_>) {
    let re = regex!(r"(?:\S+\.cuh?: \d+:|Check failed: \[\w+ == cudaSuccess\]) +(?P<m>[^:]+?)\.?\s*$");
    let Some(c) = re.captures(line.text) else {
        return;
    };
    runtime_message_error(out, line, c["m"].trim());
}

/// A CUDA error for `message`, only when it is one of the runtime's own messages: a program's
/// text after a place or a step's name may be anything.
fn runtime_message_error(out: &mut Collector, line: &Line<'_>, message: &str) {
    if known_by_message(message).is_some() {
        out.emit(line, cuda_error(message, CudaApi::Runtime, None, None));
    }
}

fn runtime_error(out: &mut Collector, line: &Line<'_>) {
    let Some(c) = regex!(r"CUDA error: (?P<msg>.+?)(?: at \S+:\d+)?$").captures(line.text) else {
        return;
    };
    let message = c["msg"].trim_end_matches(['.', ' ']);
    // A library status reported through the CUDA error macro belongs to that library's extractor.
    if message.starts_with("CUBLAS_STATUS")
        || message.starts_with("CUDNN_STATUS")
        || super::libs::cublas_status_text(message).is_some()
        || message.is_empty()
    {
        return;
    }
    let code = regex!(r"\((?:error )?(\d+)\)$")
        .captures(message)
        .and_then(|c| c[1].parse().ok());
    out.emit(line, cuda_error(message, CudaApi::Runtime, code, None));
}

fn triton_error(out: &mut Collector, line: &Line<'_>) {
    let Some(c) = regex!(r"Triton Error \[CUDA\]: (?P<msg>.+?)\.?$").captures(line.text) else {
        return;
    };
    out.emit(line, cuda_error(c["msg"].trim(), CudaApi::Runtime, None, None));
}

/// The wordings of a CUDA error with its code (group `n`) and / or its message (group `m`), in the
/// order they are tried; a code printed without its message gets the runtime's message for it.
const NUMBERED: &[(&str, CudaApi)] = &[
    (
        r"THCudaCheck FAIL .*error=(?P<n>\d+) : (?P<m>.+)$",
        CudaApi::Legacy,
    ),
    (r"CUDA error \(?(?P<n>\d+)\)?: (?P<m>.+)$", CudaApi::Runtime),
    // SPECFEM's check: `CUDA error !!!!! <out of memory> !!!!!`
    (r"CUDA error !+ <(?P<m>[^>]+)> !+", CudaApi::Runtime),
    // OpenCV's CUDA module: `OpenCV Error: Gpu API call (unknown error) in allocate, file …` and,
    // since OpenCV 3.4, `error: (-217:Gpu API call) unknown error in function 'allocate'`
    (r"Gpu API call \((?P<m>[^)]+)\) in \w", CudaApi::Runtime),
    (
        r"\(-217:Gpu API call\) (?P<m>.+?) in function\b",
        CudaApi::Runtime,
    ),
    // faiss's GPU asserts: `Faiss assertion 'err__ == cudaSuccess' failed in … at
    // gpu/impl/L2Norm.cu:292; details: CUDA error 209 no kernel image is available …`
    (r"details: CUDA error (?P<n>\d+) (?P<m>.+)$", CudaApi::Runtime),
    // ggml (llama.cpp, whisper.cpp): `CUDA error 2 at ggml-cuda.cu:5509: out of memory`
    (r"CUDA error (?P<n>\d+) at \S+:\d+: (?P<m>.+)$", CudaApi::Runtime),
    // Marian's CUDA_CHECK: `Error: CUDA error 999 'unknown error' - file.cu:54: cudaStreamSynchronize(0)`
    (r"CUDA error (?P<n>\d+) '(?P<m>[^']+)'", CudaApi::Runtime),
    // DeepEP's check, the place then the message: `Failed: CUDA error
    // /root/DeepEP/csrc/kernels/layout.cu:138 'unknown error'`
    (r"CUDA error \S+:\d+ '(?P<m>[^']+)'", CudaApi::Runtime),
    (r"HIP error: (?P<m>.+)$", CudaApi::Runtime),
    // Caffe's CHECK: the code, then (usually) the message
    (
        r"== cudaSuccess \((?P<n>\d+) vs\. 0\)\s*(?P<m>.*)$",
        CudaApi::Runtime,
    ),
    // nvdiffrast: the code, then the call: `Cuda error: 2[cudaMalloc(&m_gpuPtr, bytes);]`
    (r"Cuda error: (?P<n>\d+)\[", CudaApi::Runtime),
    // tiny-cuda-nn: `cudaStreamCreate(&m_stream) failed with error unknown error`
    (
        r"\bcuda[A-Z]\w*\(.*\) failed with error (?P<m>.+)$",
        CudaApi::Runtime,
    ),
    // TensorRT-LLM and FasterTransformer's check: `CUDA runtime error in ::cudaMallocAsync(ptr, n,
    // stream): out of memory (/app/…/tllmBuffers.h:112)`
    (
        r"CUDA runtime error in \S.*?\): (?P<m>.+?)(?: \(?\S+\.\w+:\d+\)?)?$",
        CudaApi::Runtime,
    ),
    // the widespread `gpuErrchk` macro: `GPUassert: <message> <file> <line>`
    (
        r"GPUassert: (?P<m>.+?)\s+\S+\.(?:cuh?|cc|cpp|h)[: ]\d+\s*$",
        CudaApi::Runtime,
    ),
    // darknet
    (r"CUDA Error: (?P<m>.+)$", CudaApi::Runtime),
    // the CUDA samples (deviceQuery): `cudaGetDeviceCount returned 999`, the message on the next
    // line (`-> unknown error`)
    (r"\bcuda[A-Z]\w* returned (?P<n>[1-9]\d*)\s*$", CudaApi::Runtime),
    // ONNX Runtime, CNTK: `CUDA failure 2: out of memory ; GPU=0 ; hostname=… ; expr=…`
    (r"CUDA failure (?P<n>\d+): (?P<m>[^;]+)", CudaApi::Runtime),
    // TensorRT: `Cuda Error in allocate: 2 (out of memory)`, with the allocator's full name in
    // later versions, and `Error Code 1: Cuda Runtime (out of memory)` since TensorRT 8
    (
        r"Cuda Error in [\w:]+: (?P<n>\d+) \((?P<m>[^)]+)\)",
        CudaApi::Runtime,
    ),
    (r"Error Code \d+: Cuda Runtime \((?P<m>[^)]+)\)", CudaApi::Runtime),
    // TensorRT's samples and runners: `Cuda initialization failure with error 35. Please check
    // cuda installation` (its builder since 8.6: `CUDA initialization failure with error: 35.`);
    // its Myelin engine: `Error Code 1: Myelin (Final synchronize failed (700))` (a stream or
    // device synchronize returns the runtime's code).
    (
        r"(?i:cuda) initialization failure with error:? (?P<n>\d+)",
        CudaApi::Runtime,
    ),
    (r"\bsynchroni[sz]e failed \((?P<n>\d+)\)", CudaApi::Runtime),
    // spconv's index kernels (mmdetection3d, OpenPCDet): `cuda execution failed with error 2`
    (
        r"(?i:cuda) execution failed with error (?P<n>\d+)",
        CudaApi::Runtime,
    ),
    // torch_memory_saver (SGLang, slime, verl): `[torch_memory_saver.cpp] CUresult error: 2 (out of
    // memory) file=… func=cu_mem_create line=187`
    (r"CUresult error: (?P<n>\d+) \((?P<m>[^)]+)\)", CudaApi::Driver),
    // PhysX's GPU pipeline (Isaac Sim / Lab, Isaac Gym), the driver's code after the step that
    // failed: `PhysX error: Synchronizing GPU Narrowphase failed! 700` and `SynchronizeStreams
    // cuEventRecord failed with error 700` (the source location on the next line)
    (r"PhysX error: .+ failed! (?P<n>\d+)\s*$", CudaApi::Driver),
    (r"\bcu[A-Z]\w* failed with error (?P<n>\d+)\b", CudaApi::Driver),
    // OpenMM's CUDA platform, on the driver API: `Error invoking kernel: CUDA error (700)`, and
    // with the place: `… for CCMA: CUDA error (700) at …/CudaIntegrationUtilities.cpp:736`
    (r"CUDA error \((?P<n>\d+)\)(?: at \S+:\d+)?\s*$", CudaApi::Driver),
    // programs' own check macros, the runtime's message and a CUDA source file's place:
    // `Error out of memory at cuda_grid_lig.cu:174 …`, and the CUDA by Example book's
    // HANDLE_ERROR, `out of memory in kernel.cu at line 45`
    (r"^Error (?P<m>[a-z][a-z ]+?) at \S+\.cuh?:\d+", CudaApi::Runtime),
    (
        r"^(?P<m>[a-z][a-z ]+?) in \S+\.cuh? at line \d+",
        CudaApi::Runtime,
    ),
    // spconv / cumm: `cuda failed with error 2 out of memory. use CUDA_LAUNCH_BLOCKING=1 …`;
    // CTranslate2 (faster-whisper): `CUDA failed with error out of memory`
    (
        r"(?i:cuda) failed with error (?:(?P<n>\d+) )?(?P<m>.+?)\.?(?: use CUDA_LAUNCH_BLOCKING.*)?$",
        CudaApi::Runtime,
    ),
];

static NUMBERED_REGEXES: LazyLock<Vec<(Regex, CudaApi)>> = LazyLock::new(|| compile_table(NUMBERED));

/// `THCudaCheck FAIL file=… line=… error=59 : device-side assert triggered`,
/// `CUDA error 59: …`, `CUDA error (3): initialization error`, `HIP error: …`, and the wordings of
/// other runtimes and libraries ([`NUMBERED`]).
fn numbered_error(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let Some((c, api)) = NUMBERED_REGEXES
        .iter()
        .find_map(|(re, api)| re.captures(text).map(|c| (c, *api)))
    else {
        return;
    };
    let code = c.name("n").map(|n| n.as_str());
    let (message, name) = match (c.name("m").map(|m| m.as_str().trim()), code) {
        (Some(m), _) if !m.is_empty() => (m.to_owned(), None),
        // A driver API code alone is read only where both APIs number the error the same.
        (_, Some(n)) if api == CudaApi::Driver => match n.parse().ok().and_then(known_by_code) {
            Some(k) => (k.0.to_owned(), Some(k.2.to_owned())),
            None => return,
        },
        (_, Some(n)) => (message_of_code(n), None),
        _ => return,
    };
    let message = message.trim_end_matches('.');
    if !message.is_empty() {
        out.emit(
            line,
            cuda_error(message, api, code.and_then(|n| n.parse().ok()), name),
        );
    }
}

fn legacy_error(out: &mut Collector, line: &Line<'_>) {
    // `cuda runtime error (59) : device-side assert triggered at …`; torch 0.1 had no colon.
    let re = regex!(r"(?i)cuda runtime error \((?P<code>\d+)\) ?:? (?P<msg>.+?)(?: at \S+:\d+)?$");
    let Some(c) = re.captures(line.text) else {
        return;
    };
    let code = c["code"].parse().ok();
    out.emit(line, cuda_error(c["msg"].trim(), CudaApi::Legacy, code, None));
}

fn driver_error(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    if let Some(c) = regex!(r"CUDA driver error: (?P<msg>.+)$").captures(text) {
        out.emit(line, cuda_error(c["msg"].trim(), CudaApi::Driver, None, None));
        return;
    }
    // PyCUDA and other driver-API wrappers: `cuInit failed: initialization error`.
    if let Some(c) = regex!(r"\bcu[A-Z][a-z]\w* failed: (?P<msg>[^:]+?)\s*$").captures(text) {
        out.emit(line, cuda_error(c["msg"].trim(), CudaApi::Driver, None, None));
        return;
    }
    // numba names a result its own table lacks `UNKNOWN_CUDA_ERROR` and prints its number:
    // `CudaAPIError: [700] Call to cuCtxSynchronize results in UNKNOWN_CUDA_ERROR`.
    if let Some(c) = regex!(r"\[(?P<n>\d+)\] Call to cu\w+ results in UNKNOWN_CUDA_ERROR").captures(text) {
        let known = c["n"].parse::<u32>().ok().and_then(known_by_code);
        if let Some(k) = known {
            out.emit(
                line,
                cuda_error(k.0, CudaApi::Driver, Some(k.3), Some(k.2.to_owned())),
            );
        }
        return;
    }
    let Some(c) = regex!(r"CUDA_ERROR_(?P<name>[A-Z_]+)(?::? (?P<msg>[^;(]+))?").captures(text) else {
        return;
    };
    let name = format!("CUDA_ERROR_{}", &c["name"]);
    let known = KNOWN.iter().find(|k| k.2 == name);
    // cudarc (candle and other Rust programs) quotes the driver's message after the name:
    // `DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")`; where a paste broke the name
    // (`CUDA_ERROR_OUT_O F_MEMORY`), the message still says which error it is.
    if known.is_none()
        && let Some(q) = regex!(r#"DriverError\([^")]*, "(?P<m>[^"]+)"\)"#).captures(text)
    {
        out.emit(line, cuda_error(&q["m"], CudaApi::Driver, None, None));
        return;
    }
    let message = c
        .name("msg")
        .map(|m| m.as_str().trim().to_owned())
        .or_else(|| known.map(|k| k.0.to_owned()))
        .unwrap_or_else(|| name.to_ascii_lowercase().replace('_', " "));
    out.emit(
        line,
        EventKind::CudaError(CudaError {
            message,
            code: known.map(|k| k.3),
            name: Some(name),
            api: CudaApi::Driver,
        }),
    );
}

fn runtime_name(out: &mut Collector, line: &Line<'_>) {
    // `CUDA error: …` lines name the error themselves; this covers lines that only give the name.
    if line.text.contains("CUDA error: ") {
        return;
    }
    // TensorFlow on ROCm writes HIP's names as `HIP_ERROR_OutOfMemory`. A name compared in a
    // check's expression (`e == cudaSuccess || e == cudaErrorCudartUnloading`) is not the error.
    let Some(c) = regex!(r"(?:(?P<api>cuda|hip)Error|HIP_ERROR_)(?P<name>[A-Z]\w+)")
        .captures_iter(line.text)
        .find(|c| c.get(0).is_some_and(|m| !compared(&line.text[..m.start()])))
    else {
        return;
    };
    // ROCm's HIP runtime mirrors CUDA's names, except for a missing kernel binary and memory.
    let hip = c.name("api").is_none_or(|api| api.as_str() == "hip");
    let name = match (hip, &c["name"]) {
        (true, "NoBinaryForGpu") => "cudaErrorNoKernelImageForDevice".to_owned(),
        (true, "OutOfMemory") => "cudaErrorMemoryAllocation".to_owned(),
        (_, name) => format!("cudaError{name}"),
    };
    let known = KNOWN.iter().find(|k| k.1 == name);
    let message = known.map_or_else(|| name.clone(), |k| k.0.to_owned());
    out.emit(
        line,
        EventKind::CudaError(CudaError {
            message,
            code: known.map(|k| k.3),
            name: Some(name),
            api: CudaApi::Runtime,
        }),
    );
}

/// Whether the text before a name ends in a comparison (`e == `, `!=`): the name is then a
/// value a check expected or excused, not the error that happened.
fn compared(before: &str) -> bool {
    let before = before.trim_end();
    before.ends_with("==") || before.ends_with("!=")
}

fn device_count_error(out: &mut Collector, line: &Line<'_>) {
    let Some(c) =
        regex!(r"Error (?P<code>\d+): (?P<msg>.+?)(?: \(Triggered internally.*)?$").captures(line.text)
    else {
        return;
    };
    let code = c["code"].parse().ok();
    out.emit(line, cuda_error(c["msg"].trim(), CudaApi::Runtime, code, None));
}

fn bare_message_error(out: &mut Collector, line: &Line<'_>) {
    // The trigger ([`BARE_MESSAGE`]) admits only the runtime's own strings; this reads which one.
    let re = regex!(r#"(?:Error|Exception)(?:: |\()b?['"]?(?P<msg>[a-zA-Z -]+?)['"]?,?\)?\s*$"#);
    if let Some(c) = re.captures(line.text) {
        out.emit(line, cuda_error(&c["msg"], CudaApi::Runtime, None, None));
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{CudaApi, EventKind};

    #[test]
    fn thread_grids_are_read_by_hand_as_the_regex_would() {
        let re = regex::Regex::new(&crate::scan::ascii_classes(
            r"block: \[(?P<block>[\d, ]+)\], thread: \[(?P<thread>[\d, ]+)\]",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let pieces = [
            "block: [",
            "], thread: [",
            "]",
            "0,0,0",
            "1, 2, 3",
            " ",
            ",",
            "x",
            "[",
            "block: [1",
            "٣",
            "Assertion `t < n` failed.",
            "Loss.cu:240: ",
        ];
        // Every sequence of up to five pieces: broken, repeated and nested grids included.
        let mut lines = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = lines
                .iter()
                .flat_map(|l| pieces.iter().map(move |p| format!("{l}{p}")))
                .collect();
            lines.extend(longer);
            lines.dedup();
        }
        assert!(lines.len() > 100_000);
        for line in &lines {
            let expected = re
                .captures(line)
                .map(|c| (c["block"].to_owned(), c["thread"].to_owned()));
            let got = super::thread_grid(line).map(|(b, t)| (b.to_owned(), t.to_owned()));
            assert_eq!(got, expected, "{line}");
        }
    }

    #[test]
    fn source_locations_are_read_by_hand_as_the_regex_would() {
        let re = regex::Regex::new(&crate::scan::ascii_classes(
            r"(?P<file>[^\s:`']+\.(?P<ext>cuh?|c|cc|cpp|cxx|h|hpp)):(?P<line>\d+):",
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let lines = [
            "/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0` failed.",
            "../aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex: block: [1,0,0]",
            "C:\\cb\\pytorch\\aten\\src\\ATen\\native\\cuda\\ScatterGatherKernel.cu:365: block",
            "python3: /opt/conda/x.cpp:93: void f(): Assertion `x' failed.",
            "a.cuh:1:",
            "x .cu:1:",
            ".cu:3:",
            "f.cu:12",
            "f.cu:x:",
            "f.c:1: g.cu:2:",
            "`f.cpp:7:`",
            "f.hpp:70:x",
            "time 12:30:45 f.h:2:",
            "f.cc:1:2:",
            "a.b.cu:9:",
            "tail f.cu:",
            "",
            "::1:",
            "f.cxx:1:",
            "a.cuhh:1:",
            "Loss.cu:240\u{a0}f.cu:1:",
        ];
        for line in lines {
            let expected = re.captures(line).map(|c| {
                let end = c.get(0).map_or(0, |m| m.end());
                (
                    c["file"].to_owned(),
                    c["ext"].to_owned(),
                    c["line"].to_owned(),
                    end,
                )
            });
            let got = super::source_location(line)
                .map(|l| (l.file.to_owned(), l.ext.to_owned(), l.line.to_owned(), l.end));
            assert_eq!(got, expected, "{line}");
        }
    }
    use crate::parse::parse_str;

    fn kinds(log: &str) -> Vec<EventKind> {
        parse_str(log).events.into_iter().map(|e| e.kind).collect()
    }

    /// The CUDA errors found in `log`, in order.
    fn cuda_errors(log: &str) -> Vec<crate::model::CudaError> {
        kinds(log)
            .into_iter()
            .filter_map(|k| {
                if let EventKind::CudaError(e) = k {
                    Some(e)
                } else {
                    None
                }
            })
            .collect()
    }

    /// The device assertions found in `log`, in order.
    fn assertions(log: &str) -> Vec<crate::model::CudaAssert> {
        kinds(log)
            .into_iter()
            .filter_map(|k| {
                if let EventKind::CudaAssert(a) = k {
                    Some(a)
                } else {
                    None
                }
            })
            .collect()
    }

    /// `(code, message)` of each CUDA error found in `log`.
    fn codes_and_messages(log: &str) -> Vec<(Option<u32>, String)> {
        cuda_errors(log)
            .into_iter()
            .map(|e| (e.code, e.message))
            .collect()
    }

    fn only_assert(log: &str) -> crate::model::CudaAssert {
        let events = parse_str(log).events;
        let found: Vec<_> = events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::CudaAssert(a) => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found.into_iter().next().unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn assertion_lines_fold_into_one_event_per_expression() {
        let log = "\
/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [56,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [63,0,0], thread: [57,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
/pytorch/aten/src/ATen/native/cuda/Indexing.cu:658: indexSelectLargeIndex: block: [64,0,0], thread: [57,0,0] Assertion `srcIndex < srcSelectDimSize` failed.
";
        let a = only_assert(log);
        assert_eq!(
            a.file.as_deref(),
            Some("/pytorch/aten/src/ATen/native/cuda/Indexing.cu")
        );
        assert_eq!(a.source_line, Some(658));
        assert_eq!(a.function.as_deref(), Some("indexSelectLargeIndex"));
        assert_eq!(a.expression, "srcIndex < srcSelectDimSize");
        assert_eq!((a.occurrences, a.blocks, a.threads), (3, 2, 3));
    }

    #[test]
    fn old_thc_assertions_with_template_signatures_give_the_kernel_name() {
        let a = only_assert(
            "/pytorch/aten/src/THC/THCTensorIndex.cu:308: void indexSelectSmallIndex(TensorInfo<T, IndexType>, TensorInfo<long, IndexType>, int, int, IndexType, long) [with T = float, IndexType = unsigned int, DstDim =2, SrcDim = 2, IdxDim = -2: block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        );
        assert_eq!(a.function.as_deref(), Some("indexSelectSmallIndex"));
    }

    #[test]
    fn garbled_interleaved_assertion_lines_still_give_the_expression() {
        let a = only_assert(
            "../aten/src/ATen/native/cuda/Indexing.cu:1308: indexSelectLargeIndex: block: [61,0,0], thread: [120,0,0,0] Assertion `srcIndex < srcSelectDimSize] Assertion `srcIndex < srcSelectDimSize` failed.",
        );
        assert_eq!(a.expression, "srcIndex < srcSelectDimSize");
        assert_eq!(a.source_line, Some(1308));
    }

    #[test]
    fn operator_kernels_and_quoted_messages_in_expressions_are_kept() {
        let a = only_assert(
            "/opt/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.",
        );
        assert_eq!(a.function.as_deref(), Some("operator()"));
        assert_eq!(
            a.expression,
            "-sizes[i] <= index && index < sizes[i] && \"index out of bounds\""
        );
    }

    #[test]
    fn a_device_assertion_line_cut_after_its_expression_is_still_read() {
        for cut in ["", " ", " f", " fail", " failed"] {
            let a = only_assert(&format!(
                "/opt/conda/conda-bld/pytorch_1708025847130/work/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [14,0,0] Assertion `t >= 0 && t < n_classes`{cut}"
            ));
            assert_eq!(a.expression, "t >= 0 && t < n_classes", "{cut:?}");
            assert_eq!(
                a.function.as_deref(),
                Some("nll_loss_forward_reduce_cuda_kernel_2d")
            );
        }
    }

    #[test]
    fn a_cut_line_without_the_thread_grid_or_with_other_words_after_is_no_assertion() {
        for line in [
            "Assertion `t >= 0 && t < n_classes` fail",
            "/a/Loss.cu:250: k: block: [0,0,0], thread: [14,0,0] Assertion `t >= 0` was checked",
            "/a/Loss.cu:250: k: block: [0,0,0], thread: [14,0,0] Assertion `t >= 0 && t < n_cl",
        ] {
            let events = parse_str(line).events;
            assert!(
                !events.iter().any(|e| matches!(e.kind, EventKind::CudaAssert(_))),
                "{line}: {events:?}"
            );
        }
    }

    #[test]
    fn a_kernel_assertion_whose_quotes_markdown_ate_is_still_read() {
        let a = only_assert(
            "/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:105: void cunn_ClassNLLCriterion_updateOutput_kernel(Dtype *, Dtype *, Dtype *, long *, Dtype *, int, int, int, int, long) [with Dtype = float, Acctype = float]: block: [0,0,0], thread: [12,0,0] Assertion t >= 0 && t < n_classes failed.",
        );
        assert_eq!(a.expression, "t >= 0 && t < n_classes");
        assert_eq!(
            a.function.as_deref(),
            Some("cunn_ClassNLLCriterion_updateOutput_kernel")
        );
    }

    #[test]
    fn an_unquoted_assertion_without_a_thread_grid_is_no_device_assertion() {
        for line in [
            "main.c:12: main: Assertion n > 0 failed.",
            "Assertion t >= 0 && t < n_classes failed.",
        ] {
            let events = parse_str(line).events;
            assert!(
                !events.iter().any(|e| matches!(e.kind, EventKind::CudaAssert(_))),
                "{line}: {events:?}"
            );
        }
    }

    #[test]
    fn a_bare_assertion_without_a_file_is_still_an_assertion() {
        let a = only_assert("Assertion `srcIndex < srcSelectDimSize` failed");
        assert_eq!(a.file, None);
    }

    #[test]
    fn cpu_assertions_from_c_files_are_not_device_assertions() {
        let found = kinds("python: /src/lib/foo.c:12: main: Assertion `x > 0' failed.");
        assert!(
            !found.iter().any(|k| matches!(k, EventKind::CudaAssert(_))),
            "{found:?}"
        );
    }

    #[test]
    fn runtime_errors_get_their_canonical_name_and_code() {
        let found = kinds("RuntimeError: CUDA error: an illegal memory access was encountered");
        let Some(EventKind::CudaError(e)) = found.iter().find(|k| matches!(k, EventKind::CudaError(_)))
        else {
            panic!("no CUDA error in {found:?}");
        };
        assert_eq!(e.message, "an illegal memory access was encountered");
        assert_eq!(e.name.as_deref(), Some("cudaErrorIllegalAddress"));
        assert_eq!(e.code, Some(700));
        assert_eq!(e.api, CudaApi::Runtime);
    }

    #[test]
    fn a_driver_result_with_its_code_and_message_is_a_cuda_error() {
        assert_eq!(
            codes_and_messages(
                "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) file=csrc/utils.h func=cu_mem_create line=187\n"
            ),
            vec![(Some(2), "out of memory".to_owned())]
        );
    }

    #[test]
    fn a_name_compared_in_a_check_is_not_the_error() {
        let e = cuda_errors(
            "decord._ffi.base.DECORDError: [12:18:41] /src/video/nvcodec/cuda_stream.cc:20: Check failed: e == cudaSuccess || e == cudaErrorCudartUnloading CUDA: initialization error at line: 20\n",
        );
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].name.as_deref(), Some("cudaErrorInitializationError"));
        let e = cuda_errors("Check failed: status != cudaErrorNotReady: cudaErrorIllegalAddress\n");
        assert_eq!(e[0].name.as_deref(), Some("cudaErrorIllegalAddress"));
    }

    #[test]
    fn numbas_unknown_result_is_read_by_its_driver_code() {
        let e = cuda_errors(
            "numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuCtxSynchronize results in UNKNOWN_CUDA_ERROR\n",
        );
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].code, e[0].name.as_deref()),
            (Some(700), Some("CUDA_ERROR_ILLEGAL_ADDRESS"))
        );
        // A number whose meaning differs between the two APIs claims nothing.
        assert!(cuda_errors("CudaAPIError: [35] Call to cuInit results in UNKNOWN_CUDA_ERROR\n").is_empty());
    }

    #[test]
    fn tensorrts_numbered_failures_get_the_runtimes_message_for_their_code() {
        assert_eq!(
            codes_and_messages(
                "ERROR: Cuda initialization failure with error 35. Please check cuda installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html.\n"
            ),
            vec![(Some(35), super::message_of_code("35"))]
        );
        assert_eq!(
            codes_and_messages(
                "  what():  CUDA initialization failure with error: 35. Please check your CUDA installation: http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html In checkCudaInstalledAndPrintMemoryUsage at optimizer/api/builder.cpp:1238\n"
            ),
            vec![(Some(35), super::message_of_code("35"))]
        );
        assert_eq!(
            codes_and_messages(
                "[07/03/2023-14:32:48] [TRT] [E] 1: [runner.cpp::execute::386] Error Code 1: Myelin (Final synchronize failed (700))\n"
            ),
            vec![(Some(700), super::message_of_code("700"))]
        );
    }

    #[test]
    fn a_message_cut_after_the_runtimes_name_is_read_by_the_name() {
        let cut = cuda_errors(
            "RuntimeError: Unhandled CUDA error: cudaErrorInitializationError initialization\nerror\n",
        );
        let read: Vec<_> = cut.iter().map(|e| (e.code, e.name.as_deref())).collect();
        assert_eq!(read, vec![(Some(3), Some("cudaErrorInitializationError"))]);
    }

    #[test]
    fn physx_gpu_failures_are_read_by_their_driver_code() {
        let logs = [
            concat!(
                "2024-11-25 09:13:08 [11,526ms] [Error] [omni.physx.plugin] PhysX error: Synchronizing GPU Narrowphase failed! 700\n",
                ", FILE /builds/omniverse/physics/physx/source/gpunarrowphase/src/PxgNarrowphaseCore.cpp, LINE 1259\n",
            ),
            "[Error] [omni.physx.plugin] PhysX error: SynchronizeStreams cuEventRecord failed with error 700\n",
        ];
        for log in logs {
            let read: Vec<_> = cuda_errors(log)
                .into_iter()
                .map(|e| (e.api, e.code, e.name))
                .collect();
            let illegal_address = (
                CudaApi::Driver,
                Some(700),
                Some("CUDA_ERROR_ILLEGAL_ADDRESS".to_owned()),
            );
            assert_eq!(read, vec![illegal_address], "{log}");
        }
        // A code that the two APIs number differently claims nothing.
        assert!(cuda_errors("cuCtxCreate failed with error 35\n").is_empty());
    }

    #[test]
    fn openmms_bare_code_is_read_only_where_both_apis_number_it_alike() {
        let logs = [
            "Exception: Error synchronizing on event for CCMA: CUDA error (700) at /src/platforms/cuda/src/CudaIntegrationUtilities.cpp:736\n",
            "An error occurred: Error invoking kernel: CUDA error (700)\n",
        ];
        for log in logs {
            let read: Vec<_> = cuda_errors(log).into_iter().map(|e| (e.code, e.name)).collect();
            assert_eq!(
                read,
                vec![(Some(700), Some("CUDA_ERROR_ILLEGAL_ADDRESS".to_owned()))],
                "{log}"
            );
        }
        assert!(cuda_errors("Error creating context: CUDA error (35)\n").is_empty());
    }

    #[test]
    fn a_programs_check_macro_is_read_by_the_runtimes_message_and_a_cuda_files_place() {
        for log in [
            "Error out of memory at /workspace/fftdock/cuda_grid_lig.cu:174  in generating ligand grids using GPU\n",
            "out of memory in kernel.cu at line 45\n",
        ] {
            let read: Vec<_> = cuda_errors(log).into_iter().map(|e| e.code).collect();
            assert_eq!(read, vec![Some(2)], "{log}");
        }
        // a C++ file's place is not a CUDA check
        assert!(cuda_errors("Error out of memory at /src/pool.cpp:12\n").is_empty());
    }

    #[test]
    fn cudarcs_quoted_message_says_which_error_a_broken_name_was() {
        let read: Vec<_> = cuda_errors("DriverError(CUDA_ERROR_OUT_O F_MEMORY, \"out of memory\")\n")
            .into_iter()
            .map(|e| e.code)
            .collect();
        assert_eq!(read, vec![Some(2)]);
    }

    #[test]
    fn a_checks_bare_runtime_message_after_its_place_or_condition_is_a_cuda_error() {
        for (log, code) in [
            (
                "xgboost.core.XGBoostError: [01:50:07] ../src/common/common.h:44: ../src/common/host_device_vector.cu: 259: initialization error\n",
                3,
            ),
            (
                "2021-05-03 15:29:31,316 FATAL [default] Check failed: [error == cudaSuccess]  unknown error\n",
                999,
            ),
        ] {
            let read: Vec<_> = cuda_errors(log).into_iter().map(|e| e.code).collect();
            assert_eq!(read, vec![Some(code)], "{log}");
        }
        // a message that is not the runtime's claims nothing
        assert!(cuda_errors("../src/tree/updater.cu: 80: bad split\n").is_empty());
    }

    #[test]
    fn an_assertion_wrapped_inside_its_block_index_and_its_failed_is_still_read() {
        let asserts = assertions(
            "[ 3.62s/it] C:/cb/pytorch_1000000000000/work/aten/src/ATen/native/cuda/IndexKernel.cu:142: block: [0,\n0,0], thread: [78,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` fa\niled.\n",
        );
        let expressions: Vec<_> = asserts.iter().map(|a| a.expression.as_str()).collect();
        assert_eq!(
            expressions,
            vec!["index >= -sizes[i] && index < sizes[i] && \"index out of bounds\""]
        );
        // a host program's line that starts the same way is not a kernel's
        assert!(assertions("0,0] Assertion `x > 0` fa\n").is_empty());
    }

    #[test]
    fn spconvs_numbered_failure_gets_the_runtimes_message_for_its_code() {
        assert_eq!(
            codes_and_messages(
                "RuntimeError: mmdet3d/ops/spconv/src/indice_cuda.cu 124\ncuda execution failed with error 2\n"
            ),
            vec![(Some(2), super::message_of_code("2"))]
        );
    }

    #[test]
    fn the_cuda_samples_code_is_read_with_the_runtime_message() {
        assert_eq!(
            codes_and_messages("cudaGetDeviceCount returned 999\n-> unknown error\n"),
            vec![(Some(999), "unknown error".to_owned())]
        );
        assert_eq!(codes_and_messages("cudaMalloc returned 0\n"), vec![]);
    }

    #[test]
    fn legacy_and_driver_errors_are_recognised() {
        let errors: Vec<_> = cuda_errors(
            "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorCopy.c:70\nCUDA_ERROR_OUT_OF_MEMORY: out of memory\n",
        )
        .into_iter()
        .map(|e| (e.api, e.code, e.message))
        .collect();
        assert_eq!(
            errors,
            vec![
                (
                    CudaApi::Legacy,
                    Some(59),
                    "device-side assert triggered".to_owned()
                ),
                (CudaApi::Driver, Some(2), "out of memory".to_owned())
            ]
        );
    }

    #[test]
    fn cublas_statuses_reported_as_cuda_errors_are_left_to_the_cublas_extractor() {
        let found =
            kinds("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`");
        assert!(!found.iter().any(|k| matches!(k, EventKind::CudaError(_))));
        assert!(found.iter().any(|k| matches!(k, EventKind::Cublas(_))));
    }

    #[test]
    fn driver_api_wrappers_and_hip_names_are_cuda_errors() {
        let errors: Vec<_> = cuda_errors(
            "LogicError: cuInit failed: initialization error\nhipErrorNoBinaryForGpu: Unable to find code object for all current devices!\ncuBLAS failed: not a driver call\n",
        )
        .into_iter()
        .map(|e| (e.name, e.message))
        .collect();
        assert_eq!(
            errors,
            vec![
                (
                    Some("cudaErrorInitializationError".to_owned()),
                    "initialization error".to_owned()
                ),
                (
                    Some("cudaErrorNoKernelImageForDevice".to_owned()),
                    "no kernel image is available".to_owned()
                )
            ]
        );
    }

    #[test]
    fn the_oldest_legacy_errors_have_no_colon_before_the_message() {
        let found = kinds(
            "RuntimeError: cuda runtime error (3) initialization error at /py/conda-bld/pytorch_1490983232023/work/torch/lib/THC/generic/THCStorage.c:55\n",
        );
        assert!(
            found.iter().any(|k| matches!(k, EventKind::CudaError(e)
                if e.code == Some(3) && e.message == "initialization error")),
            "{found:?}"
        );
    }

    /// The names of the CUDA errors found in `log`, in order (`None` where none was known).
    fn cuda_error_names(log: &str) -> Vec<Option<String>> {
        cuda_errors(log).into_iter().map(|e| e.name).collect()
    }

    #[test]
    fn a_code_names_its_error_where_the_message_is_a_placeholder_or_was_retyped() {
        for log in [
            "RuntimeError: cuda runtime error (209) : unrecognized error code at mmdet/ops/roi_align/src/roi_align_kernel.cu:139\n",
            "Faiss assertion 'err__ == cudaSuccess' failed in void faiss::gpu::runL2Norm() at gpu/impl/L2Norm.cu:292; details: CUDA error 209 not kernel image is available for execution on the device\n",
        ] {
            let name = Some("cudaErrorNoKernelImageForDevice".to_owned());
            assert!(
                cuda_error_names(log).contains(&name),
                "{log}: {:?}",
                cuda_errors(log)
            );
        }
    }

    #[test]
    fn another_library_s_status_printed_with_its_own_number_is_not_read_as_cuda_s() {
        // cuBLAS's ALLOC_FAILED is 3, CUDA's 3 is an initialization error.
        let log = "CUDA error 3: CUBLAS_STATUS_ALLOC_FAILED in gemm\n";
        assert!(
            cuda_error_names(log).iter().all(Option::is_none),
            "{:?}",
            cuda_errors(log)
        );
    }

    #[test]
    fn runtime_messages_in_other_programs_frames_are_cuda_errors() {
        for (log, name) in [
            // OpenCV's CUDA module, before and since 3.4
            (
                "OpenCV Error: Gpu API call (unknown error) in allocate, file /opencv/modules/core/src/cuda/gpu_mat.cu, line 116\n",
                "cudaErrorUnknown",
            ),
            (
                "cv2.error: OpenCV(4.5.1) /opencv/modules/core/src/cuda/gpu_mat.cu:116: error: (-217:Gpu API call) out of memory in function 'allocate'\n",
                "cudaErrorMemoryAllocation",
            ),
            // SPECFEM
            (
                "CUDA error !!!!! <out of memory> !!!!! \n",
                "cudaErrorMemoryAllocation",
            ),
            // DeepEP
            (
                "RuntimeError: Failed: CUDA error /root/DeepEP/csrc/kernels/layout.cu:138 'unknown error'\n",
                "cudaErrorUnknown",
            ),
            // a wrapper raising cudaGetErrorString's text, in a Celery task's report
            (
                "[2016-03-06 01:25:19,012: ERROR/MainProcess] Task art.tasks.generate_art[8f03] raised unexpected: ValueError(b'initialization error',)\n",
                "cudaErrorInitializationError",
            ),
        ] {
            let names = cuda_error_names(log);
            assert!(names.contains(&Some(name.to_owned())), "{log}: {names:?}");
        }
    }

    #[test]
    fn a_message_that_only_begins_like_the_runtime_s_is_not_read() {
        for log in [
            "ValueError: initialization error in config file foo.yaml\n",
            "nvidia-container-cli: initialization error: load library failed\n",
            "MemoryError: out of memory\n",
        ] {
            assert_eq!(cuda_errors(log), vec![], "{log}");
        }
    }

    #[test]
    fn a_number_is_not_read_where_old_and_new_runtimes_number_differently() {
        // Before CUDA 10.1 the runtime's 59 was a device-side assert, since then another error.
        let log = "RuntimeError: cuda runtime error (59) : unrecognized error code at x.cu:1\n";
        assert!(
            cuda_error_names(log).iter().all(Option::is_none),
            "{:?}",
            cuda_errors(log)
        );
    }

    #[test]
    fn numbered_thc_and_hip_errors_are_cuda_errors() {
        let errors = codes_and_messages(
            "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=59 : device-side assert triggered\nCUDA error (3): initialization error\nHIP error: invalid device function\n",
        );
        assert_eq!(
            errors,
            vec![
                (Some(59), "device-side assert triggered".to_owned()),
                (Some(3), "initialization error".to_owned()),
                (Some(98), "invalid device function".to_owned())
            ]
        );
        let errors = codes_and_messages(
            "F0101 common.cu:153] Check failed: error == cudaSuccess (46 vs. 0)  all CUDA-capable devices are busy or unavailable\nCUDA Error: out of memory\n",
        );
        assert_eq!(
            errors,
            vec![
                (
                    Some(46),
                    "all CUDA-capable devices are busy or unavailable".to_owned()
                ),
                (Some(2), "out of memory".to_owned())
            ]
        );
    }

    #[test]
    fn host_code_in_a_cu_file_asserts_like_host_code() {
        let found = kinds(
            "python: /home/user/bitsandbytes/csrc/ops.cu:408: int igemmlt(cublasLtHandle_t, int, int, int, const int8_t*, const int8_t*, void*, float*, int, int, int) [with int FORMATB = 3; int DTYPE_OUT = 32; int SCALE_ROWS = 0; cublasLtHandle_t = cublasLtContext*; int8_t = signed char]: Assertion `false' failed.",
        );
        assert!(
            !found.iter().any(|k| matches!(k, EventKind::CudaAssert(_))),
            "{found:?}"
        );
    }

    #[test]
    fn host_assertions_from_th_on_the_cpu_are_not_device_assertions() {
        let found = kinds(
            "Assertion `cur_target >= 0 && cur_target < n_classes' failed.  at /pytorch/aten/src/THNN/generic/ClassNLLCriterion.c:93",
        );
        assert!(
            !found.iter().any(|k| matches!(k, EventKind::CudaAssert(_))),
            "{found:?}"
        );
    }

    #[test]
    fn lambda_kernels_and_file_less_lines_give_a_function() {
        let a = only_assert(
            "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:60: lambda [](int)->auto::operator()(int)->auto: block: [0,0,0], thread: [0,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` failed.",
        );
        assert_eq!(a.function.as_deref(), Some("operator()"));
        let a = only_assert(
            "indexSelectLargeIndex: block: [2,0,0], thread: [1,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        );
        assert_eq!(a.function.as_deref(), Some("indexSelectLargeIndex"));
    }

    #[test]
    fn device_side_assertion_reports_become_assertions() {
        let a = only_assert(
            "CUDA device-side assertion failures were found on GPU #0!\nAssertion failure 0\n  GPU assertion failure message = srcIndex < srcSelectDimSize\n  File containing assertion = /opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236\n  Device function containing assertion = indexSelectSmallIndex\n",
        );
        assert_eq!(a.expression, "srcIndex < srcSelectDimSize");
        assert_eq!(a.source_line, Some(1236));
        assert_eq!(a.function.as_deref(), Some("indexSelectSmallIndex"));
    }

    #[test]
    fn onnx_runtime_cuda_failures_stop_at_the_first_field() {
        let errors = codes_and_messages(
            r"[ONNXRuntimeError] : 1 : FAIL : D:\a\_work\1\s\onnxruntime\core\providers\cuda\cuda_call.cc:114 onnxruntime::CudaCall CUDA failure 2: out of memory ; GPU=0 ; hostname=PC ; file=cuda_stream_handle.cc ; line=175 ; expr=cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);",
        );
        assert_eq!(errors, vec![(Some(2), "out of memory".to_owned())]);
    }

    #[test]
    fn nvdiffrast_codes_and_tiny_cuda_nn_calls_are_cuda_errors() {
        assert_eq!(
            codes_and_messages("RuntimeError: Cuda error: 700[cudaLaunchKernel((void*)fineRasterKernel,"),
            vec![(Some(700), "illegal memory access".to_owned())]
        );
        assert_eq!(
            codes_and_messages("RuntimeError: Cuda error: 2[cudaMalloc(&m_gpuPtr, bytes);]"),
            vec![(Some(2), "out of memory".to_owned())]
        );
        let e = cuda_errors(
            "/tiny-cuda-nn/include/tiny-cuda-nn/multi_stream.h:44 cudaStreamCreate(&m_stream) failed with error unknown error",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].name.as_deref(), Some("cudaErrorUnknown"));
    }

    #[test]
    fn tensorrt_llm_names_the_call_then_the_runtime_message() {
        assert_eq!(
            codes_and_messages(
                "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)"
            ),
            vec![(Some(2), "out of memory".to_owned())]
        );
        assert_eq!(
            codes_and_messages(
                "[FT][ERROR] CUDA runtime error in cudaMemcpyAsync(dst, src, size, kind, stream): an illegal memory access was encountered /workspace/src/utils/memory_utils.cu:97"
            ),
            vec![(Some(700), "an illegal memory access was encountered".to_owned())]
        );
    }

    #[test]
    fn the_gpu_errchk_macro_reports_the_runtime_message() {
        let e = cuda_errors("ERROR! GPUassert: no CUDA-capable device is detected gCPPProcess.cu:354");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].message, "no CUDA-capable device is detected");
        assert_eq!(e[0].name.as_deref(), Some("cudaErrorNoDevice"));
        assert_eq!(
            codes_and_messages("GPUassert: out of memory kernel.cu 88").len(),
            1
        );
    }

    #[test]
    fn tensorrt_and_spconv_wordings_carry_code_and_message() {
        for text in [
            "[2022-03-04 13:39:28 ERROR] ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: 2 (out of memory)",
            "RuntimeError: TensorStorage /io/include/tensorview/tensor.h 168\ncuda failed with error 2 out of memory. use CUDA_LAUNCH_BLOCKING=1 to get correct traceback.",
        ] {
            assert_eq!(
                codes_and_messages(text),
                vec![(Some(2), "out of memory".to_owned())],
                "{text}"
            );
        }
    }

    #[test]
    fn other_runtimes_out_of_memory_wordings_are_cuda_memory_errors() {
        for text in [
            "CUDA error 2 at ggml-cuda.cu:359: out of memory",
            "RuntimeError: CUDA failed with error out of memory",
            "[E] [TRT] C:\\source\\rtSafe\\safeRuntime.cpp (25) - Cuda Error in nvinfer1::internal::DefaultAllocator::allocate: 2 (out of memory)",
            "[E] 1: [defaultAllocator.cpp::allocate::19] Error Code 1: Cuda Runtime (out of memory)",
            "E tensorflow/stream_executor/rocm/rocm_driver.cc:615] failed to allocate 3.86G (4143972352 bytes) from device: HIP_ERROR_OutOfMemory",
            "RuntimeError: HIP error: hipErrorOutOfMemory",
        ] {
            let errors = cuda_errors(text);
            assert!(
                errors
                    .iter()
                    .any(|e| e.name.as_deref() == Some("cudaErrorMemoryAllocation")),
                "{text}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_code_then_the_quoted_message_is_a_cuda_error_with_both() {
        // Marian NMT's CUDA_CHECK, after many hours of training
        let text = "[2025-01-21 16:30:37] Error: CUDA error 999 'unknown error' - /builds/worker/fetches/marian-source/src/tensors/gpu/algorithm.cu:54: cudaStreamSynchronize(0)";
        assert_eq!(
            codes_and_messages(text),
            vec![(Some(999), "unknown error".to_owned())]
        );
        let errors = cuda_errors(
            "Error: CUDA error 2 'out of memory' - src/tensors/gpu/device.cu:32: cudaMalloc(&data_, size)",
        );
        assert_eq!(errors[0].name.as_deref(), Some("cudaErrorMemoryAllocation"));
    }

    #[test]
    fn a_runtime_call_before_an_error_name_is_not_taken_for_it() {
        let errors = cuda_errors("cudaMalloc failed: cudaErrorInvalidValue");
        assert_eq!(
            errors
                .iter()
                .filter_map(|e| e.name.as_deref())
                .collect::<Vec<_>>(),
            vec!["cudaErrorInvalidValue"]
        );
    }

    #[test]
    fn triton_reports_cuda_errors_in_its_own_words() {
        let found = kinds("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered");
        assert!(
            found
                .iter()
                .any(|k| matches!(k, EventKind::CudaError(e) if e.code == Some(700))),
            "{found:?}"
        );
    }

    #[test]
    fn device_count_errors_carry_their_code() {
        let found = kinds(
            "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)",
        );
        let Some(EventKind::CudaError(e)) = found.iter().find(|k| matches!(k, EventKind::CudaError(_)))
        else {
            panic!("no CUDA error in {found:?}");
        };
        assert_eq!(e.code, Some(804));
        assert_eq!(
            e.message,
            "forward compatibility was attempted on non supported HW"
        );
    }
}
