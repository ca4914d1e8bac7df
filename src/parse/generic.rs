//! CUDA errors in wordings no extractor of its own knows: a line that names CUDA, then the CUDA
//! runtime's own message after a `: ` or an `error ` (MXNet's `Check failed: e == cudaSuccess:
//! CUDA: initialization error`, TurboMind's `CUDA runtime error: out of memory
//! /…/memory_utils.cu:32`, KataGo's `CUDA Error, for createComputeHandle …, error unknown error`).
//! Each framework wraps the runtime's message in its own words; the message itself is the same
//! everywhere. Its extractor comes last, and reads only lines no other extractor read.

use super::cuda::cuda_error;
use super::{Collector, Extractor};
use crate::model::CudaApi;
use crate::normalize::Line;

pub(super) const EXTRACTORS: &[Extractor] = &[Extractor {
    trigger: r"(?:: |\berror )(?:device-side assert triggered|an illegal memory access was encountered|misaligned address|unspecified launch failure|the launch timed out and was terminated|no kernel image is available for execution on the device|out of memory|initialization error|all CUDA-capable devices are busy or unavailable|CUDA driver version is insufficient for CUDA runtime version|no CUDA-capable device is detected|invalid device ordinal|unknown error)\b",
    handle: runtime_message,
}];

/// The runtime's messages (`cudaGetErrorString`) that say which failure it was. Messages that fit
/// many failures (`invalid argument`, `operation not supported`) are left out: a wrapper's
/// wording around them says too little.
const MESSAGES: &[&str] = &[
    "device-side assert triggered",
    "an illegal memory access was encountered",
    "misaligned address",
    "unspecified launch failure",
    "the launch timed out and was terminated",
    "no kernel image is available for execution on the device",
    "out of memory",
    "initialization error",
    "all CUDA-capable devices are busy or unavailable",
    "CUDA driver version is insufficient for CUDA runtime version",
    "no CUDA-capable device is detected",
    "invalid device ordinal",
    "unknown error",
];

fn runtime_message(out: &mut Collector, line: &Line<'_>) {
    if out.emitted_on(line.number) {
        return;
    }
    let text = line.text;
    let Some((head, message)) = MESSAGES.iter().find_map(|m| {
        text.match_indices(m)
            .find_map(|(at, _)| Some((head(text, at, m.len())?, *m)))
    }) else {
        return;
    };
    if !names_cuda(head) {
        return;
    }
    out.emit(line, cuda_error(message, CudaApi::Runtime, None, None));
}

/// For the message at `at..at + len` of `text`: the text before its lead (`: `, or the word
/// `error `, not the end of `MyError `), when the message is a whole word and has one.
fn head(text: &str, at: usize, len: usize) -> Option<&str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    if text[at + len..].starts_with(is_word) {
        return None;
    }
    let before = &text[..at];
    before
        .strip_suffix(": ")
        .or_else(|| before.strip_suffix("error ").filter(|h| !h.ends_with(is_word)))
}

/// Whether `head` names CUDA: the word (`CUDA:`, `Cuda error`), a runtime or driver call
/// (`cudaMalloc`, `cuInit`), the check of one (`e == cudaSuccess`), or TensorFlow's wrapper of
/// one (`GpuLaunchKernel`, `GpuMemcpy`).
fn names_cuda(head: &str) -> bool {
    regex!(r"(?i:\bcuda\b)|\bcu(?:da)?[A-Z]\w*|\bGpu[A-Z]\w*").is_match(head)
}

#[cfg(test)]
mod tests {
    use crate::model::{CudaError, EventKind};
    use crate::parse::parse_str;

    fn cuda_errors(log: &str) -> Vec<CudaError> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::CudaError(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_runtime_message_after_a_wrapper_that_names_cuda_is_a_cuda_error() {
        for (line, message, name) in [
            (
                "[06:25:22] tensor_gpu-inl.h:35: Check failed: e == cudaSuccess: CUDA: initialization error",
                "initialization error",
                "cudaErrorInitializationError",
            ),
            (
                // a Python version read from the path on the same line does not explain it
                "File \"/home/user/.local/lib/python3.9/site-packages/decord/_ffi/base.py\", line 78, in check_call raise DECORDError(err_str) decord._ffi.base.DECORDError: [12:18:41] /src/video/nvcodec/cuda_stream.cc:20: Check failed: e == cudaSuccess || e == cudaErrorCudartUnloading CUDA: initialization error at line: 20",
                "initialization error",
                "cudaErrorInitializationError",
            ),
            (
                "RuntimeError: [TM][ERROR] CUDA runtime error: out of memory /src/turbomind/utils/memory_utils.cu:32",
                "out of memory",
                "cudaErrorMemoryAllocation",
            ),
            (
                "Non-OK-status: GpuLaunchKernel (FillPhiloxRandomKernelLaunch <Distribution>, num_blocks, block_size, 0, d.stream (), gen, data, size, dist) status: Internal: out of memory",
                "out of memory",
                "cudaErrorMemoryAllocation",
            ),
            (
                "fatal: cuMemAlloc: unknown error",
                "unknown error",
                "cudaErrorUnknown",
            ),
            (
                "  what():  CUDA Error, for createComputeHandle file cudabackend.cpp, func cudaSetDevice(gpuIdxForThisThread), line 2706, error unknown error",
                "unknown error",
                "cudaErrorUnknown",
            ),
        ] {
            let errors = cuda_errors(&format!("{line}\n"));
            assert_eq!(errors.len(), 1, "{line}: {errors:?}");
            assert_eq!(errors[0].message, message, "{line}");
            assert_eq!(errors[0].name.as_deref(), Some(name), "{line}");
        }
    }

    #[test]
    fn the_trigger_names_every_message_the_extractor_reads() {
        let trigger = super::EXTRACTORS[0].trigger;
        for m in super::MESSAGES {
            assert!(trigger.contains(m), "{m}");
        }
    }

    #[test]
    fn a_line_a_specific_extractor_read_is_not_read_twice() {
        let errors = cuda_errors("RuntimeError: CUDA error: out of memory\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn messages_without_cuda_before_them_or_inside_longer_words_are_not_cuda_errors() {
        for line in [
            "MemoryError: out of memory",
            "ollama: unknown error",
            "CUDA: out of memory_pool_size is set",
            "cudaMallocAsync: operation not supported",
            "Warning: out of memory for CUDA graphs",
            "CUDA setup: my_error unknown error",
        ] {
            assert_eq!(cuda_errors(&format!("{line}\n")), vec![], "{line}");
        }
    }
}
