//! The GPU backend (feature `cuda`): cudarc with the driver, NVRTC and cuBLAS loaded at run time.
//!
//! Without the `cuda` feature this module is empty and [`super::open_backend`] answers
//! [`ReplayError::GpuUnavailable`](super::ReplayError::GpuUnavailable). With it:
//!
//! - `Gpu::open` probes libcuda and libnvrtc before any cudarc call (cudarc panics when a
//!   library is missing), then opens the device; every failure is `GpuUnavailable` with the reason.
//! - The kernels (`KERNEL_SOURCES`, the `.cu` files under `kernels/`) are compiled by NVRTC to a
//!   CUBIN for the device's own architecture (`sm_XY`) when the device opens, once per process
//!   and compute capability: no PTX reaches the driver, so its JIT never meets a PTX newer than
//!   itself. A CUBIN still needs a driver of its CUDA major version; when the kernels cannot be
//!   built or loaded, the GPU counts as unavailable and `--backend auto` uses the CPU.
//! - [`Backend::scan`](super::Backend::scan) gives exactly the CPU backend's
//!   [`ScanOutput`](super::ScanOutput): the same bounds, turned into a closed interval in the
//!   element's lane (`i64`, `f32`, `f64`) by the same rules; one kernel per element type does the
//!   count, the min / max (order-preserving integer keys, one atomic per block) and collects
//!   offending positions into a fixed device buffer (`OFFENSE_SLOTS`); types of up to 32 bits
//!   compare in a 32-bit lane, so that a vector of many small elements stays memory-bound. When more offenders than
//!   slots exist, windows from the first offending position are scanned again until the
//!   [`MAX_OFFENSES`](super::MAX_OFFENSES) smallest positions are known. Values (and the sign of
//!   a zero min / max) are read from the host bytes, as the CPU reads them. Tensors move to the
//!   device in chunks of `CHUNK_BYTES`.
//! - [`Backend::gemm_status`](super::Backend::gemm_status) makes the real `cublasGemmEx` call on
//!   zero-filled operands (at most `GEMM_MAX_BYTES` of them).
//! - Any panic inside cudarc (a symbol an old driver lacks) becomes an error, never a crash.
//!
//! Files: `nvrtc.rs` compiles the kernels, `device.rs` owns the device and launches them,
//! `host.rs` is what they compute seen from the host (bounds, keys, result words, the chunked
//! scan), tested on the CPU against an emulated kernel in `tests.rs`.

#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod host;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(all(test, feature = "cuda"))]
mod tests;

#[cfg(feature = "cuda")]
pub use device::{CHUNK_BYTES, GEMM_MAX_BYTES, Gpu, OFFENSE_SLOTS, Timing, open};
#[cfg(feature = "cuda")]
pub use nvrtc::{KERNEL_SOURCES, Output, compile_kernels, compile_source, nvrtc_present, nvrtc_version};

/// A panic caught around a cudarc call, as an error message.
#[cfg(feature = "cuda")]
fn panic_text(panic: &(dyn std::any::Any + Send), what: &str) -> String {
    let msg = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    format!("{what} failed inside cudarc: {msg}")
}
