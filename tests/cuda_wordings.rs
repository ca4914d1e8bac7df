//! A CUDA error is diagnosed as its class whatever program printed it: every error of the
//! runtime's that names a class, in each wording the parser reads (PyTorch, THC, ONNX Runtime,
//! TensorRT-LLM, ggml, Marian, CTranslate2, darknet, tiny-cuda-nn, the `gpuErrchk` macro).
//!
//! Three blind rounds of real logs (benches/RESULTS.md) missed errors that the parser had read
//! in a new wrapper while the rule for their class listed the wrappers it knew by their lines.
//! Rules now read the parser's events; this matrix keeps the two from drifting apart again.

use faultline::diagnose::analyze_str;
use faultline::rules::RuleSet;

/// The runtime's message, its code, and the class a diagnosis names first.
const ERRORS: &[(&str, u32, &str)] = &[
    (
        "an illegal memory access was encountered",
        700,
        "cuda.illegal_memory_access",
    ),
    ("misaligned address", 716, "cuda.misaligned_address"),
    ("unspecified launch failure", 719, "cuda.launch_failure"),
    (
        "the launch timed out and was terminated",
        702,
        "cuda.launch_timeout",
    ),
    (
        "no kernel image is available for execution on the device",
        209,
        "cuda.no_kernel_image",
    ),
    ("out of memory", 2, "cuda.oom"),
    ("initialization error", 3, "cuda.initialization_error"),
    (
        "all CUDA-capable devices are busy or unavailable",
        46,
        "cuda.busy_or_unavailable",
    ),
    (
        "CUDA driver version is insufficient for CUDA runtime version",
        35,
        "cuda.driver_too_old",
    ),
    ("no CUDA-capable device is detected", 100, "cuda.not_available"),
    ("invalid device ordinal", 101, "cuda.invalid_device"),
    ("unknown error", 999, "other.cuda_unknown_error"),
    ("uncorrectable ECC error encountered", 214, "cuda.hardware_fault"),
    ("device-side assert triggered", 710, "cuda.device_assert.unknown"),
];

/// How programs print a CUDA error: `{m}` is the runtime's message, `{c}` its code.
const WORDINGS: &[(&str, &str)] = &[
    ("PyTorch", "RuntimeError: CUDA error: {m}"),
    (
        "THC (torch < 1.0)",
        "RuntimeError: cuda runtime error ({c}) : {m} at /pytorch/aten/src/THC/THCGeneral.cpp:70",
    ),
    (
        "ONNX Runtime",
        "[E:onnxruntime:Default, cuda_call.cc:116 onnxruntime::CudaCall] CUDA failure {c}: {m} ; GPU=0 ; hostname=h ; file=x.cc ; line=1 ; expr=cudaMemcpyAsync(a, b, n);",
    ),
    (
        "TensorRT-LLM",
        "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMemcpyAsync(dst, src, n, kind, stream): {m} (/app/tensorrt_llm/cpp/runtime/buffers.h:1)",
    ),
    ("ggml", "CUDA error {c} at ggml-cuda.cu:100: {m}"),
    (
        "Marian",
        "Error: CUDA error {c} '{m}' - src/tensors/gpu/algorithm.cu:54: cudaStreamSynchronize(0)",
    ),
    ("CTranslate2", "RuntimeError: CUDA failed with error {m}"),
    ("darknet", "CUDA Error: {m}"),
    (
        "tiny-cuda-nn",
        "RuntimeError: /tcnn/include/common.h:44 cudaStreamCreate(&m_stream) failed with error {m}",
    ),
    ("gpuErrchk", "GPUassert: {m} kernel.cu 88"),
];

#[test]
fn every_cuda_error_is_diagnosed_as_its_class_in_every_wording_the_parser_reads() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for (message, code, class) in ERRORS {
        for (program, wording) in WORDINGS {
            let line = wording.replace("{m}", message).replace("{c}", &code.to_string());
            let diagnosis = analyze_str(&rules, &format!("{line}\n"));
            let first = diagnosis.findings.first().map(|f| f.class.as_str());
            if first != Some(*class) {
                wrong.push(format!("{program}: {line:?} -> {first:?}, not {class}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wording(s) missed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
