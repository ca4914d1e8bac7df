//! A CUDA error is diagnosed as its class whatever program printed it: every error of the
//! runtime's that names a class, in each wording the parser reads (PyTorch, THC, ONNX Runtime,
//! TensorRT-LLM, ggml, Marian, CTranslate2, darknet, tiny-cuda-nn, the `gpuErrchk` macro); and
//! the same for cuDNN's statuses and NCCL's results in the words of the frameworks that report
//! them.
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
    let lines = ERRORS.iter().flat_map(|(message, code, class)| {
        WORDINGS.iter().map(move |(program, wording)| {
            let line = wording.replace("{m}", message).replace("{c}", &code.to_string());
            (*program, line, *class)
        })
    });
    assert_every_line_is_diagnosed_as(lines);
}

/// Every cuDNN status, printed by PyTorch, old PyTorch, TensorFlow, ONNX Runtime, MXNet,
/// PaddlePaddle, Caffe and Lua Torch: a cuDNN failure.
#[test]
fn every_cudnn_status_is_a_cudnn_failure_in_every_wording() {
    const STATUSES: &[&str] = &[
        "CUDNN_STATUS_NOT_INITIALIZED",
        "CUDNN_STATUS_ALLOC_FAILED",
        "CUDNN_STATUS_BAD_PARAM",
        "CUDNN_STATUS_INTERNAL_ERROR",
        "CUDNN_STATUS_EXECUTION_FAILED",
        "CUDNN_STATUS_NOT_SUPPORTED",
        "CUDNN_STATUS_MAPPING_ERROR",
        "CUDNN_STATUS_ARCH_MISMATCH",
    ];
    const WORDINGS: &[&str] = &[
        "RuntimeError: cuDNN error: {s}",
        "RuntimeError: CuDNN error: {s}",
        "2024-01-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: {s}",
        "Status Message: CUDNN failure 4: {s} ; GPU=0 ; hostname=h ; file=conv.cc ; line=1 ; expr=cudnnConvolutionForward(a);",
        "mxnet.base.MXNetError: [19:09:37] src/operator/./cudnn_rnn-inl.h:710: Check failed: e == CUDNN_STATUS_SUCCESS (8 vs. 0) cuDNN: {s}",
        "OSError: (External) CUDNN error(4), {s}.",
        "F0101 10:00:00.000 1234 cudnn_conv_layer.cpp:53] Check failed: status == CUDNN_STATUS_SUCCESS (4 vs. 0)  {s}",
        "/home/user/torch/install/share/lua/5.1/cudnn/init.lua:58: Error in CuDNN: {s} (cudnnFindConvolutionForwardAlgorithm)",
    ];
    let lines = STATUSES.iter().flat_map(|status| {
        WORDINGS
            .iter()
            .map(move |w| ("cuDNN", w.replace("{s}", status), "cudnn.status"))
    });
    assert_every_line_is_diagnosed_as(lines);
}

/// Every NCCL result text, as PyTorch (two releases), NCCL's own check macro, Horovod,
/// PaddlePaddle (two releases), CuPy and XLA report it: an NCCL error.
#[test]
fn every_nccl_result_is_an_nccl_error_in_every_wording() {
    const RESULTS: &[(&str, &str)] = &[
        ("unhandled cuda error", "UNHANDLED_CUDA_ERROR"),
        ("unhandled system error", "SYSTEM_ERROR"),
        ("internal error", "INTERNAL_ERROR"),
        ("invalid argument", "INVALID_ARGUMENT"),
        ("invalid usage", "INVALID_USAGE"),
        (
            "remote process exited or there was a network error",
            "REMOTE_ERROR",
        ),
    ];
    const WORDINGS: &[&str] = &[
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, {m}, NCCL version 2.14.3",
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, {m} (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "NCCL failure train.cu:110 '{m}'",
        "ncclCommInitRank failed: {m}",
        "ExternalError: Nccl error, {m}  (at /paddle/paddle/fluid/platform/collective_helper.cc:108)",
        "OSError: (External) NCCL error(1), {m}.",
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_{n}: {m}",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: {m}",
    ];
    let lines = RESULTS.iter().flat_map(|(text, name)| {
        WORDINGS
            .iter()
            .map(move |w| ("NCCL", w.replace("{m}", text).replace("{n}", name), "nccl.error"))
    });
    assert_every_line_is_diagnosed_as(lines);
}

/// Diagnoses each line alone (`who` printed it) and asserts that its first finding is of the
/// class given beside it, listing every line whose is not.
fn assert_every_line_is_diagnosed_as<'a>(lines: impl Iterator<Item = (&'a str, String, &'a str)>) {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (who, line, class) in lines {
        checked += 1;
        let diagnosis = analyze_str(&rules, &format!("{line}\n"));
        let first = diagnosis.findings.first().map(|f| f.class.as_str());
        if first != Some(class) {
            wrong.push(format!("{who}: {line:?} -> {first:?}, not {class}"));
        }
    }
    assert!(checked > 0, "no line was checked");
    assert!(
        wrong.is_empty(),
        "{} of {checked} wording(s) missed:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
