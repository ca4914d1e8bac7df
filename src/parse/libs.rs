//! cuBLAS, cuDNN and NCCL statuses.

use super::{Collector, Extractor};
use crate::model::{CublasError, CudnnError, EventKind, NcclEvent, NcclKind};
use crate::normalize::Line;

pub(super) const EXTRACTORS: &[Extractor] = &[
    Extractor {
        // (`CUDA error: <cuBLAS status text>` is how ggml / llama.cpp report a cuBLAS status.)
        trigger: r"CUBLAS_STATUS_[A-Z_]+|!!!! kernel execution error\.|cuBLAS Error in \w+: \d+ \(|(?i:cublas)\w* error \d+ in |Could not initialize cublas|(?i:cublas runtime error) ?: |cuBLAS API failed with status \d+|(?i:cublas error)\s*\(\d+\)|(?i:cublas error) \d+ at |(?i:cublas error) at \S+ code=\d+|(?i:cublas error): \d+ - |(?i:cublas) call \w+.* failed at \S+ '|(?:CUDA error|(?i:cublas).*): (?:the library was not initialized|the resource allocation failed|an invalid numeric value was used as an argument|an unsupported value or parameter was passed to the function|an absent device architectural feature is required|an access to GPU memory space failed|the GPU program failed to execute|an internal operation failed|the requested functionality is not supported)",
        handle: cublas,
    },
    Extractor {
        trigger: r"On entry to \S+\s+parameter number \d+ had an illegal value",
        handle: cublas_illegal_parameter,
    },
    Extractor {
        trigger: r"CUDNN_STATUS_[A-Z_]+|(?i:cudnn) error: |Unable to find a valid cuDNN algorithm|no valid convolution algorithms available in CuDNN|cuDNN version incompatibility|(?:GET|FIND) was unable to find an engine|(?i:cudnn frontend error)|Error while calling cudnn\w+\(|(?i:cudnn)\w*\.(?:cpp|cu|h):\d+\. code: \d+, reason: |Cudnn Error in [\w:]+: \d+\b",
        handle: cudnn,
    },
    Extractor {
        // (NCCL before 2.4 printed `include/socket.h:185 WARN …` without its name.)
        trigger: r"NCCL WARN |\.(?:h|cc|cu|cpp):\d+ WARN ",
        handle: nccl_warn,
    },
    Extractor {
        // The result names, and an NCCL call that failed with its result text (`ncclCommInitRank
        // failed: unhandled cuda error`, as Horovod and XLA report it), CuPy's `NcclError:
        // NCCL_ERROR_…: <result text>` and RAFT's `NCCL_ERROR: b'<result text>'`. NCCL's own
        // `unhandled system error` / `unhandled cuda error` need no name beside them (HugeCTR's
        // `Runtime error: unhandled system error` over its `ncclGroupEnd()` line).
        // XGBoost's check gives the result's text after `NCCL failure :`.
        trigger: r"(?i)nccl[ _]?error|nccl(?:Unhandled\w*Error|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b|(?i:unhandled (?:system|cuda) error)|(?-i:\bnccl[A-Z]\w*(?:\([^)]*\))? failed: )|NCCL failure [^']*'|NCCL failure ?:",
        handle: nccl_error,
    },
    Extractor {
        trigger: r"(?:Watchdog caught|Caught) collective operation timeout|Timeout at NCCL work: \d+",
        handle: nccl_watchdog,
    },
];

/// cuBLAS's status texts and the statuses they stand for: `cublasGetStatusString`'s, as other
/// programs print them after their `CUDA error: `, and THC's shorter ones after `cublas runtime
/// error : ` (whose `unknown error` is any other status).
const CUBLAS_STATUS_TEXTS: &[(&str, &str)] = &[
    ("the library was not initialized", "NOT_INITIALIZED"),
    ("library not initialized", "NOT_INITIALIZED"),
    ("the resource allocation failed", "ALLOC_FAILED"),
    ("resource allocation failed", "ALLOC_FAILED"),
    (
        "an invalid numeric value was used as an argument",
        "INVALID_VALUE",
    ),
    // cuBLAS 12's text (llama.cpp's `CUDA error: an unsupported value or parameter was passed to
    // the function` over its `cublasSgemm_v2(…)` call).
    (
        "an unsupported value or parameter was passed to the function",
        "INVALID_VALUE",
    ),
    (
        "an absent device architectural feature is required",
        "ARCH_MISMATCH",
    ),
    ("an access to GPU memory space failed", "MAPPING_ERROR"),
    ("the GPU program failed to execute", "EXECUTION_FAILED"),
    ("an internal operation failed", "INTERNAL_ERROR"),
    ("the requested functionality is not supported", "NOT_SUPPORTED"),
];

/// The cuBLAS status a `CUDA error: …` message names with cuBLAS's own words, if it does: such a
/// line is a cuBLAS failure, not a CUDA runtime one.
pub(super) fn cublas_status_text(message: &str) -> Option<&'static str> {
    CUBLAS_STATUS_TEXTS
        .iter()
        .find(|(text, _)| message.starts_with(text))
        .map(|(_, status)| *status)
}

/// The status of a line that names cuBLAS and then, after a `: `, carries one of its status texts
/// (TransformerEngine's `check_cublas_: CUBLAS Error: the requested functionality is not
/// supported`): whatever the program's own words between them.
fn status_text_after_cublas(text: &str) -> Option<&'static str> {
    let named = regex!(r"(?i)cublas").find(text)?;
    let after = &text[named.end()..];
    after
        .match_indices(": ")
        .find_map(|(at, sep)| cublas_status_text(&after[at + sep.len()..]))
}

/// The status whose text starts with `cut` (a line cut inside the text), when one status alone
/// does; `None` for a start that several share (`an `).
fn cublas_status_text_cut(cut: &str) -> Option<&'static str> {
    let cut = cut.trim_end();
    let mut statuses = CUBLAS_STATUS_TEXTS
        .iter()
        .filter(|(text, _)| cut.len() >= 3 && text.starts_with(cut))
        .map(|(_, status)| *status);
    let first = statuses.next()?;
    statuses.all(|s| s == first).then_some(first)
}

/// cuBLAS status numbers (cublasStatus_t).
const CUBLAS_CODES: &[(u32, &str)] = &[
    (1, "NOT_INITIALIZED"),
    (3, "ALLOC_FAILED"),
    (7, "INVALID_VALUE"),
    (8, "ARCH_MISMATCH"),
    (11, "MAPPING_ERROR"),
    (13, "EXECUTION_FAILED"),
    (14, "INTERNAL_ERROR"),
    (15, "NOT_SUPPORTED"),
    (16, "LICENSE_ERROR"),
];

fn cublas(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let status = if let Some(c) = regex!(r"CUBLAS_STATUS_(?P<s>[A-Z_]+)")
        .captures_iter(text)
        .find(|c| &c["s"] != "SUCCESS")
    {
        c["s"].to_owned()
    } else if let Some(c) =
        regex!(r"(?i:cublas runtime error) ?: (?P<msg>.+?)(?: at \S+:\d+)?$").captures(text)
    {
        // THC says `unknown error` for any other status; a text it cannot read otherwise is one
        // that a wrapped or clipped line cut, whose status only its start may tell.
        let msg = &c["msg"];
        match cublas_status_text(msg).or_else(|| cublas_status_text_cut(msg)) {
            Some(status) => status.to_owned(),
            None if msg.trim_end().starts_with("unknown error") => "UNKNOWN".to_owned(),
            None => return,
        }
    } else if let Some(c) = regex!(
        r"cuBLAS API failed with status (?P<n>\d+)|CUBLAS_STATUS_SUCCESS \((?P<m>\d+) vs\. 0\)|(?i:cublas error)\s*\((?P<o>\d+)\)|(?i:cublas error) (?P<p>\d+) at |(?i:cublas error) at \S+ code=(?P<q>\d+)|(?i:cublas error): (?P<r>\d+) - |cuBLAS Error in \w+: (?P<s>\d+) \(|(?i:cublas)\w* error (?P<t>\d+) in "
    )
    .captures(text)
    {
        // TensorRT's `cuBLAS Error in CublasWrapper: 1 (Could not initialize cublas. …)`, a
        // plugin's `cublasgemm error 13 in deconvolution`
        let n: u32 = ["n", "m", "o", "p", "q", "r", "s", "t"]
            .iter()
            .find_map(|g| c.name(g))
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0);
        CUBLAS_CODES
            .iter()
            .find(|(code, _)| *code == n)
            .map_or_else(|| format!("STATUS_{n}"), |(_, s)| (*s).to_owned())
    } else if let Some(status) = regex!(r"CUDA error: (?P<msg>.+)$|(?i:cublas) call \w+.* failed at \S+ '(?P<said>[^']+)'")
        .captures(text)
        .and_then(|c| cublas_status_text(c.name("msg").or(c.name("said"))?.as_str()))
        .or_else(|| status_text_after_cublas(text))
    {
        status.to_owned()
    } else if regex!(r"Could not initialize cublas(?:Lt)?\b").is_match(text) {
        // TensorRT since 8: `Error Code 1: Cublas (Could not initialize cublasLt. Please check CUDA
        // installation.)`, its `1` TensorRT's own code
        "NOT_INITIALIZED".to_owned()
    } else if let Some(c) =
        regex!(r"!!!! kernel execution error\.(?: \(m: \d+, n: \d+, k: \d+, error: (?P<n>\d+)\))?").captures(text)
    {
        // DeepSpeed's GEMM wrappers, for any status but success; early releases left the number
        // out and said only what failed: the kernel's execution.
        let code = c.name("n").and_then(|n| n.as_str().parse::<u32>().ok());
        match code {
            Some(n) => CUBLAS_CODES
                .iter()
                .find(|(code, _)| *code == n)
                .map_or_else(|| format!("STATUS_{n}"), |(_, s)| (*s).to_owned()),
            None => "EXECUTION_FAILED".to_owned(),
        }
    } else {
        return;
    };
    // `when calling `cublasGemmEx( handle, …)``; the call may be cut off or lack its parentheses.
    // Projects' own check macros write `cuBLAS call cublasLtMatmul(…) failed at file:line '…'`.
    let call = regex!(r"when calling `?(?P<call>\w+)(?:\s*\((?P<args>[^`]*?)\)?`?\s*$)?")
        .captures(text)
        .or_else(|| regex!(r"(?i:cublas) call (?P<call>\w+)\(").captures(text))
        .or_else(|| regex!(r"\b(?P<call>cublas\w+)\(.*\): ").captures(text));
    let args: Vec<String> = call
        .as_ref()
        .and_then(|c| c.name("args"))
        .map(|a| {
            a.as_str()
                .split(',')
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let event = CublasError {
        status,
        dtypes: dtypes_in(text),
        call: call.map(|c| c["call"].to_owned()),
        args,
        illegal_parameter: None,
    };
    out.emit(line, EventKind::Cublas(event));
}

/// CUDA data types named on a cuBLAS line: `CUDA_R_16F` arguments (also inside
/// `cond ? CUDA_R_32F : …`), and cuBLASLt's numeric `abcType 14` / `cType 0`.
fn dtypes_in(text: &str) -> Vec<String> {
    let named = regex!(r"\b(?:CUDA_[RC]_\w+|CUBLAS_COMPUTE_\w+)")
        .find_iter(text)
        .map(|m| m.as_str().to_owned());
    let numbered = regex!(r"\b(?:abc|ab|a|b|c|d|scale)Type[ =:]+(?P<n>\d+)")
        .captures_iter(text)
        .filter_map(|c| cuda_data_type(c["n"].parse().ok()?).map(str::to_owned));
    named.chain(numbered).collect()
}

/// `cudaDataType_t` values as cuBLASLt prints them.
fn cuda_data_type(n: u32) -> Option<&'static str> {
    Some(match n {
        0 => "CUDA_R_32F",
        1 => "CUDA_R_64F",
        2 => "CUDA_R_16F",
        3 => "CUDA_R_8I",
        8 => "CUDA_R_8U",
        10 => "CUDA_R_32I",
        14 => "CUDA_R_16BF",
        28 => "CUDA_R_8F_E4M3",
        29 => "CUDA_R_8F_E5M2",
        _ => return None,
    })
}

fn cublas_illegal_parameter(out: &mut Collector, line: &Line<'_>) {
    let re = regex!(r"On entry to (?P<routine>\S+)\s+parameter number (?P<n>\d+) had an illegal value");
    let Some(c) = re.captures(line.text) else {
        return;
    };
    let event = CublasError {
        status: "INVALID_VALUE".to_owned(),
        call: Some(c["routine"].to_owned()),
        args: Vec::new(),
        dtypes: Vec::new(),
        illegal_parameter: c["n"].parse().ok(),
    };
    out.emit(line, EventKind::Cublas(event));
}

/// cuDNN status numbers before cuDNN 9 (cudnnStatus_t), as dlib (`code: 2`) and TensorRT print them.
const CUDNN_CODES: &[(u32, &str)] = &[
    (1, "NOT_INITIALIZED"),
    (2, "ALLOC_FAILED"),
    (3, "BAD_PARAM"),
    (4, "INTERNAL_ERROR"),
    (5, "INVALID_VALUE"),
    (6, "ARCH_MISMATCH"),
    (7, "MAPPING_ERROR"),
    (8, "EXECUTION_FAILED"),
    (9, "NOT_SUPPORTED"),
    (10, "LICENSE_ERROR"),
];

fn cudnn(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    // dlib's check: `Error while calling cudnnFindConvolutionForwardAlgorithm(…) in file
    // …/cudnn_dlibapi.cpp:820. code: 2, reason: CUDA Resources could not be allocated.`;
    // TensorRT's: `Cudnn Error in execute: 8 (CUDNN_STATUS_ EXECUTION_FAILED)`.
    let numbered = || {
        let c = regex!(r"(?i:cudnn)\w*\.(?:cpp|cu|h):\d+\. code: (?P<n>\d+), reason: |Cudnn Error in [\w:]+: (?P<m>\d+)\b")
            .captures(text)?;
        let n: u32 = c.name("n").or_else(|| c.name("m"))?.as_str().parse().ok()?;
        CUDNN_CODES
            .iter()
            .find(|(code, _)| *code == n)
            .map(|(_, status)| (*status).to_owned())
    };
    let status = regex!(r"CUDNN_STATUS_(?P<s>[A-Z_]+)")
        .captures_iter(text)
        .map(|c| c["s"].to_owned())
        .find(|s| s != "SUCCESS")
        .or_else(numbered);
    if status.is_none() && regex!(r"CUDNN_STATUS_SUCCESS").is_match(text) && !text.contains("rror") {
        return; // A check that printed only the expected status.
    }
    let message = regex!(r"(?i:cudnn) error: (?P<msg>.+)$")
        .captures(text)
        .map_or_else(|| text.trim().to_owned(), |c| c["msg"].trim().to_owned());
    out.emit(line, EventKind::Cudnn(CudnnError { status, message }));
}

fn nccl_warn(out: &mut Collector, line: &Line<'_>) {
    let Some(c) = regex!(r"(?:NCCL )?WARN (?P<msg>.+)$").captures(line.text) else {
        return;
    };
    let message = c["msg"].trim().to_owned();
    // NCCL's CUDACHECK warns `Cuda failure N 'message'` and returns ncclUnhandledCudaError.
    let cuda_failure = message.starts_with("Cuda failure");
    out.emit(
        line,
        EventKind::Nccl(NcclEvent {
            kind: NcclKind::Warn,
            message: message.clone(),
        }),
    );
    if cuda_failure {
        let kind = NcclKind::Error {
            code: "ncclUnhandledCudaError".to_owned(),
        };
        out.emit(line, EventKind::Nccl(NcclEvent { kind, message }));
    }
}

/// NCCL result texts (`ncclGetErrorString`) and their names.
const NCCL_RESULTS: &[(&str, &str)] = &[
    ("unhandled cuda error", "ncclUnhandledCudaError"),
    ("unhandled system error", "ncclSystemError"),
    ("internal error", "ncclInternalError"),
    ("invalid argument", "ncclInvalidArgument"),
    ("invalid usage", "ncclInvalidUsage"),
    (
        "remote process exited or there was a network error",
        "ncclRemoteError",
    ),
    ("remote error", "ncclRemoteError"),
];

fn nccl_error(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let named = regex!(
        r"nccl(?P<n>Unhandled\w*Error|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b"
    )
    .captures(text)
    .map(|c| format!("nccl{}", &c["n"]));
    let lower = text.to_ascii_lowercase();
    let code = named.or_else(|| {
        NCCL_RESULTS
            .iter()
            .find(|(msg, _)| lower.contains(msg))
            .map(|(_, name)| (*name).to_owned())
    });
    let Some(code) = code else {
        return;
    };
    let message = regex!(r"(?i)(?P<msg>nccl.*)$")
        .captures(text)
        .map_or_else(|| text.trim().to_owned(), |c| c["msg"].trim().to_owned());
    out.emit(
        line,
        EventKind::Nccl(NcclEvent {
            kind: NcclKind::Error { code },
            message,
        }),
    );
}

fn nccl_watchdog(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let number = |name: &str| -> Option<u64> {
        let re =
            regex!(r"(?P<k>SeqNum|NumelIn|NumelOut|Timeout\(ms\)|Timeout at NCCL work)(?:: ?|=)(?P<v>\d+)");
        re.captures_iter(text)
            .find(|c| &c["k"] == name)
            .and_then(|c| c["v"].parse().ok())
    };
    let op = regex!(r"OpType=(?P<op>\w+)")
        .captures(text)
        .map(|c| c["op"].to_owned());
    let ran_ms = regex!(r"ran for (?P<ms>\d+) milliseconds")
        .captures(text)
        .and_then(|c| c["ms"].parse().ok());
    let message =
        regex!(r"(?P<msg>(?:Watchdog caught|Caught) collective operation timeout.*|Timeout at NCCL work.*)$")
            .captures(text)
            .map_or_else(|| text.to_owned(), |c| c["msg"].to_owned());
    let kind = NcclKind::WatchdogTimeout {
        seq: number("SeqNum").or_else(|| number("Timeout at NCCL work")),
        op,
        numel_in: number("NumelIn"),
        numel_out: number("NumelOut"),
        timeout_ms: number("Timeout(ms)"),
        ran_ms,
    };
    out.emit(line, EventKind::Nccl(NcclEvent { kind, message }));
}

#[cfg(test)]
mod tests {
    use crate::model::{CublasError, EventKind, NcclKind};
    use crate::parse::parse_str;

    /// The kinds of the NCCL events found in `log`, in order.
    fn nccl_kinds(log: &str) -> Vec<NcclKind> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Nccl(n) => Some(n.kind),
                _ => None,
            })
            .collect()
    }

    fn cublas(log: &str) -> CublasError {
        parse_str(log)
            .events
            .into_iter()
            .find_map(|e| match e.kind {
                EventKind::Cublas(c) => Some(c),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no cuBLAS event in {log:?}"))
    }

    #[test]
    fn cublas_status_with_its_call_arguments_and_dtypes() {
        let c = cublas(
            "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
        );
        assert_eq!(c.status, "INVALID_VALUE");
        assert_eq!(c.call.as_deref(), Some("cublasGemmEx"));
        assert_eq!(c.args.len(), 19);
        assert_eq!(c.args[3], "m");
        assert_eq!(
            c.dtypes,
            vec!["CUDA_R_16F", "CUDA_R_16F", "CUDA_R_16F", "CUDA_R_32F"]
        );
    }

    #[test]
    fn cublas_handle_creation_failures() {
        let c = cublas(
            "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        );
        assert_eq!(
            (c.status.as_str(), c.call.as_deref()),
            ("NOT_INITIALIZED", Some("cublasCreate"))
        );
        let c = cublas("RuntimeError: Failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED");
        assert_eq!(c.status, "NOT_INITIALIZED");
    }

    #[test]
    fn legacy_cublas_messages_map_to_statuses() {
        let c = cublas(
            "RuntimeError: cublas runtime error : the GPU program failed to execute at /pytorch/aten/src/THC/THCBlas.cu:258",
        );
        assert_eq!(c.status, "EXECUTION_FAILED");
        let c = cublas("RuntimeError: cublas runtime error : unknown error at /opt/conda/THCGeneral.cpp:228");
        assert_eq!(c.status, "UNKNOWN");
        // Some builds printed no space before the colon.
        let c = cublas(
            "RuntimeError: cublas runtime error: library not initialized at /conda/.../THC/THCGeneral.cpp:250",
        );
        assert_eq!(c.status, "NOT_INITIALIZED");
    }

    #[test]
    fn deepspeed_gemm_failures_carry_the_cublas_status_when_printed() {
        let c = cublas("!!!! kernel execution error. (m: 4096, n: 2048, k: 1024, error: 14)");
        assert_eq!(c.status, "INTERNAL_ERROR");
        let c = cublas("!!!! kernel execution error.");
        assert_eq!(c.status, "EXECUTION_FAILED");
    }

    #[test]
    fn ggml_numbers_its_cublas_errors() {
        let c = cublas("cuBLAS error 15 at ggml-cuda.cu:7548: the requested functionality is not supported");
        assert_eq!(c.status, "NOT_SUPPORTED");
    }

    #[test]
    fn projects_own_cublas_check_macros_give_the_status() {
        let coded = cublas("RuntimeError: cuBLAS error at /src/csrc/gemm/gemm_runner.cu:125 code=15");
        assert_eq!(coded.status, "NOT_SUPPORTED");
        let said = cublas(
            "cuBLAS call cublasLtMatmulAlgoGetHeuristic(handle_.get(), op_desc_.get(), preference_.get()) failed at /src/cublaslt_utils.cc:98 'the requested functionality is not supported'",
        );
        assert_eq!(
            (said.status.as_str(), said.call.as_deref()),
            ("NOT_SUPPORTED", Some("cublasLtMatmulAlgoGetHeuristic"))
        );
    }

    #[test]
    fn a_thc_status_text_cut_by_a_wrapped_line_is_read_from_its_start_when_only_one_fits() {
        let c = cublas("RuntimeError: cublas runtime error : resource allocatio");
        assert_eq!(c.status, "ALLOC_FAILED");
        let c = cublas("nn/Linear.lua:99: cublas runtime error : the GPU program fail");
        assert_eq!(c.status, "EXECUTION_FAILED");
        let c = cublas("RuntimeError: cublas runtime error : unknown error at /pytorch/THCBlas.cu:12");
        assert_eq!(c.status, "UNKNOWN");
        // `an ` starts four texts: no status, and no claim of an unknown one.
        let events = parse_str("nn/Linear.lua:86: cublas runtime error : an \n").events;
        assert!(
            !events.iter().any(|e| matches!(e.kind, EventKind::Cublas(_))),
            "{events:?}"
        );
    }

    #[test]
    fn cublas_status_texts_after_the_failed_call_are_cublas_statuses() {
        // XLA's wording: the call with its arguments, then cublasGetStatusString's text.
        let c = cublas(
            "Execution of replica 0 failed: INTERNAL: cublasLtMatmul( blas_lt_ref_.blas_lt_.get(), op_desc_.get(), alpha, palgo, workspace, algorithm.workspace_size, gpu::AsGpuStreamValue(stream)): the requested functionality is not supported",
        );
        assert_eq!(
            (c.status.as_str(), c.call.as_deref()),
            ("NOT_SUPPORTED", Some("cublasLtMatmul"))
        );
    }

    #[test]
    fn cublas_status_texts_after_cuda_error_are_cublas_statuses() {
        let c = cublas("CUDA error: the requested functionality is not supported");
        assert_eq!(c.status, "NOT_SUPPORTED");
        let c = cublas("CUDA error: the resource allocation failed");
        assert_eq!(c.status, "ALLOC_FAILED");
        let c = cublas("CUDA error: an unsupported value or parameter was passed to the function");
        assert_eq!(c.status, "INVALID_VALUE");
        let events = parse_str("CUDA error: the requested functionality is not supported\n").events;
        assert!(
            !events.iter().any(|e| matches!(e.kind, EventKind::CudaError(_))),
            "{events:?}"
        );
    }

    #[test]
    fn a_status_text_after_any_wording_that_names_cublas_is_its_status() {
        let c = cublas(
            "RuntimeError: /tmp/pip-req-build/transformer_engine/common/include/transformer_engine/logging.h:38 in function check_cublas_: CUBLAS Error: the requested functionality is not supported",
        );
        assert_eq!(c.status, "NOT_SUPPORTED");
        let c = cublas("cuBLAS failure in gemm_fp8: an internal operation failed");
        assert_eq!(c.status, "INTERNAL_ERROR");
    }

    #[test]
    fn a_status_text_on_a_line_that_does_not_name_cublas_is_not_a_cublas_error() {
        let events = parse_str("ValueError: the requested functionality is not supported\n").events;
        assert!(events.iter().all(|e| !matches!(e.kind, EventKind::Cublas(_))));
    }

    #[test]
    fn cublas_error_wordings_are_read_in_any_case() {
        assert_eq!(cublas("CUBLAS Error (13) in gemm").status, "EXECUTION_FAILED");
        assert_eq!(
            cublas("cuBLAS Error 15 at ggml-cuda.cu:7548: the requested functionality is not supported")
                .status,
            "NOT_SUPPORTED"
        );
        assert_eq!(
            cublas(
                "RuntimeError: CUBLAS Runtime Error : the GPU program failed to execute at THCBlas.cu:258"
            )
            .status,
            "EXECUTION_FAILED"
        );
    }

    #[test]
    fn tensorrts_cublas_wordings_give_the_status() {
        assert_eq!(
            cublas("[TensorRT] ERROR: ../rtSafe/cublas/cublasWrapper.cpp (71) - cuBLAS Error in CublasWrapper: 1 (Could not initialize cublas. Please check CUDA installation.)").status,
            "NOT_INITIALIZED"
        );
        assert_eq!(
            cublas("[07/26/2022-11:14:38] [TRT] [E] 1: [ltWrapper.cpp::CublasLtWrapper::66] Error Code 1: Cublas (Could not initialize cublasLt.").status,
            "NOT_INITIALIZED"
        );
        assert_eq!(
            cublas("cublasgemm error 13 in deconvolution").status,
            "EXECUTION_FAILED"
        );
    }

    #[test]
    fn marians_numbered_cublas_error_gives_the_status() {
        let c = cublas(
            "[2021-04-27 18:45:38] Error: Cublas Error: 13 - /home/user/marian-dev/src/tensors/gpu/prod.cpp:118: cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc, CUDA_R_32F, algorithm)",
        );
        assert_eq!(c.status, "EXECUTION_FAILED");
    }

    #[test]
    fn dlibs_cudnn_check_gives_the_status_by_its_number() {
        assert_eq!(
            cudnn_statuses(
                "cudnn_dlibapi.cpp:820. code: 2, reason: CUDA Resources could not be allocated.\nRuntimeError: Error while calling cudnnFindConvolutionForwardAlgorithm( context(), descriptor(data),\n"
            ),
            vec![Some("ALLOC_FAILED".to_owned()), None]
        );
    }

    /// The statuses of the cuDNN events found in `log`, in order.
    fn cudnn_statuses(log: &str) -> Vec<Option<String>> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Cudnn(c) => Some(c.status),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn tensorrts_numbered_cudnn_error_gives_the_status() {
        assert_eq!(
            cudnn_statuses(
                "[TensorRT] ERROR: ../rtSafe/cuda/cudaConvolutionRunner.cpp (303) - Cudnn Error in execute: 8 (CUDNN_STATUS_ EXECUTION_FAILED)\n"
            ),
            vec![Some("EXECUTION_FAILED".to_owned())]
        );
    }

    #[test]
    fn caffe_style_checks_skip_the_success_status() {
        let c = cublas(
            "Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  CUBLAS_STATUS_EXECUTION_FAILED",
        );
        assert_eq!(c.status, "EXECUTION_FAILED");
    }

    #[test]
    fn illegal_parameter_messages_are_invalid_values() {
        let c = cublas(" ** On entry to SGEMM  parameter number 10 had an illegal value");
        assert_eq!(c.status, "INVALID_VALUE");
        assert_eq!(c.illegal_parameter, Some(10));
    }

    #[test]
    fn cudnn_statuses_and_algorithm_failures() {
        let events = parse_str(
            "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED\nRuntimeError: Unable to find a valid cuDNN algorithm to run convolution\n",
        )
        .events;
        let statuses: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Cudnn(c) => Some(c.status.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(statuses, vec![Some("EXECUTION_FAILED".to_owned()), None]);
    }

    #[test]
    fn nccl_watchdog_timeouts_carry_their_figures_and_rank() {
        let events = parse_str(
            "[rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out.",
        )
        .events;
        let event = events.iter().find(|e| matches!(e.kind, EventKind::Nccl(_)));
        let Some(event) = event else {
            panic!("no NCCL event in {events:?}");
        };
        assert_eq!(event.rank, Some(4));
        let EventKind::Nccl(n) = &event.kind else {
            unreachable!()
        };
        assert_eq!(
            n.kind,
            NcclKind::WatchdogTimeout {
                seq: Some(1580),
                op: Some("ALLREDUCE".into()),
                numel_in: Some(466_119_168),
                numel_out: Some(466_119_168),
                timeout_ms: Some(600_000),
                ran_ms: Some(600_067),
            }
        );
    }

    #[test]
    fn old_and_cut_watchdog_reports_are_timeouts_too() {
        let kinds: Vec<NcclKind> = parse_str(
            "[E ProcessGroupNCCL.cpp:566] Caught collective operation timeout: WorkNCCL(OpType=BROADCAST, TensorShape=[1], Timeout(ms)=1800000) ran for 1800124 milliseconds before timing out.\n[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.\n",
        )
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Nccl(n) => Some(n.kind),
            _ => None,
        })
        .collect();
        assert!(
            matches!(&kinds[0], NcclKind::WatchdogTimeout { op: Some(op), timeout_ms: Some(1_800_000), .. } if op == "BROADCAST"),
            "{kinds:?}"
        );
        assert!(
            matches!(
                &kinds[1],
                NcclKind::WatchdogTimeout {
                    seq: Some(158_046),
                    ..
                }
            ),
            "{kinds:?}"
        );
    }

    #[test]
    fn numbered_cublas_statuses_and_cublaslt_types() {
        assert_eq!(
            cublas("Check failed: status == CUBLAS_STATUS_SUCCESS (11 vs. 0)").status,
            "MAPPING_ERROR"
        );
        assert_eq!(
            cublas("OSError: (External) CUBLAS error(15).").status,
            "NOT_SUPPORTED"
        );
        let c = cublas(
            "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul with transpose_mat1 1 transpose_mat2 0 m 4096 n 8 k 4096 mat1_ld 4096 mat2_ld 4096 result_ld 4096 abcType 14 computeType 68 scaleType 0",
        );
        assert_eq!(c.call.as_deref(), Some("cublasLtMatmul"));
        assert_eq!(c.dtypes, vec!["CUDA_R_16BF", "CUDA_R_32F"]);
        let c = cublas(
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmStridedBatchedExFix",
        );
        assert_eq!(c.call.as_deref(), Some("cublasGemmStridedBatchedExFix"));
    }

    #[test]
    fn a_cudnn_check_that_printed_only_success_is_no_event() {
        let events = parse_str("cudnn status: CUDNN_STATUS_SUCCESS\n").events;
        assert!(
            events.iter().all(|e| !matches!(e.kind, EventKind::Cudnn(_))),
            "{events:?}"
        );
    }

    #[test]
    fn old_nccl_warnings_and_failures_without_the_library_name_are_nccl_events() {
        let kinds = nccl_kinds(
            "*server name* [0] include/socket.h:185 WARN Call to connect failed : Connection refused\nNCCL failure *MyProgram*.cu:110 'unhandled system error'\n",
        );
        assert_eq!(
            kinds,
            vec![
                NcclKind::Warn,
                NcclKind::Error {
                    code: "ncclSystemError".into()
                }
            ]
        );
    }

    #[test]
    fn a_cuda_failure_warned_by_nccl_is_an_unhandled_cuda_error() {
        let kinds = nccl_kinds("transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'\n");
        assert_eq!(
            kinds,
            vec![
                NcclKind::Warn,
                NcclKind::Error {
                    code: "ncclUnhandledCudaError".into()
                }
            ]
        );
    }

    #[test]
    fn a_failed_nccl_call_gets_the_name_of_its_result_text() {
        for text in [
            "UnknownError (see above for traceback): ncclCommInitRank failed: unhandled cuda error",
            "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:275: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error",
        ] {
            let code = "ncclUnhandledCudaError".to_owned();
            assert_eq!(nccl_kinds(text), vec![NcclKind::Error { code }], "{text}");
        }
    }

    #[test]
    fn cupy_s_nccl_error_gets_the_name_of_its_result_text() {
        assert_eq!(
            nccl_kinds(
                "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
            ),
            vec![NcclKind::Error {
                code: "ncclUnhandledCudaError".into()
            }]
        );
    }

    #[test]
    fn raft_s_nccl_error_gets_the_name_of_its_result_text() {
        assert_eq!(
            nccl_kinds("RuntimeError: NCCL_ERROR: b'unhandled system error'\n"),
            vec![NcclKind::Error {
                code: "ncclSystemError".into()
            }]
        );
    }

    #[test]
    fn nccl_errors_get_their_result_name() {
        let kinds = nccl_kinds(
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled cuda error, NCCL version 2.14.3\nncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\nnode1:1234:5678 [0] NCCL WARN Cuda failure 'out of memory'\n",
        );
        assert_eq!(
            kinds,
            vec![
                NcclKind::Error {
                    code: "ncclUnhandledCudaError".into()
                },
                NcclKind::Error {
                    code: "ncclSystemError".into()
                },
                NcclKind::Warn,
                // the warned CUDA failure is the unhandled CUDA error NCCL returns
                NcclKind::Error {
                    code: "ncclUnhandledCudaError".into()
                },
            ]
        );
    }

    #[test]
    fn nccls_own_result_text_is_an_nccl_error_without_its_name_beside_it() {
        for (log, code) in [
            // HugeCTR, over its `ncclGroupEnd()` line
            (
                "RuntimeError: Runtime error: unhandled system error\n        ncclGroupEnd() at ResourceManagerCore(/hugectr/HugeCTR/src/resource_managers/resource_manager_core.cpp:175)\n",
                "ncclSystemError",
            ),
            // XGBoost's check
            (
                "Exception in gpu_hist: ../src/common/device_helpers.cuh:135: NCCL failure :remote process exited or there was a network error ../src/collective/nccl_device_communicator.cuh(54)\n",
                "ncclRemoteError",
            ),
        ] {
            assert_eq!(
                nccl_kinds(log),
                vec![NcclKind::Error { code: code.into() }],
                "{log}"
            );
        }
    }
}
