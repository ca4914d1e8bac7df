//! The CUDA device: opening it, moving tensors, launching the scan kernels, timing them, and the
//! cuBLAS GEMM replay.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use cudarc::cublas::CudaBlas;
use cudarc::cublas::sys as cublas_sys;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUresult};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError,
    LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::host::{Bounds, Found, HEADER, NONE, Passes, lane, scan_chunked};
use super::nvrtc::{cubin_for, no_nvrtc, nvrtc_present};
use super::panic_text;
use crate::replay::check::{GemmCall, Scan, ScanOutput};
use crate::replay::snapshot::{DType, TensorRef};
use crate::replay::{Backend, MAX_OFFENSES, ReplayError};

/// Bytes moved to the device per transfer; a tensor larger than this is scanned in chunks.
pub const CHUNK_BYTES: usize = 256 << 20;
/// Offending positions one kernel pass can collect (more trigger a windowed re-scan).
pub const OFFENSE_SLOTS: usize = 1024;
/// Largest total operand size [`Backend::gemm_status`] allocates.
pub const GEMM_MAX_BYTES: u64 = 1 << 30;
/// Threads per block (the kernels' `THREADS`).
const THREADS: u32 = 256;
/// Blocks per multiprocessor launched at most (grid-stride loops cover the rest).
const BLOCKS_PER_SM: u32 = 8;

/// Open the first GPU (ordinal 0).
pub fn open() -> Result<Gpu, ReplayError> {
    Gpu::open(0)
}

fn driver(what: &str) -> impl Fn(DriverError) -> ReplayError + '_ {
    move |e| ReplayError::Kernel(format!("{what}: {e}"))
}

/// The GPU backend: one CUDA device.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    name: String,
    capability: (i32, i32),
    multiprocessors: u32,
    chunk_bytes: usize,
    slots: usize,
    module: OnceLock<Result<Arc<CudaModule>, String>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .field("multiprocessors", &self.multiprocessors)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("slots", &self.slots)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Opens device `ordinal`; `GpuUnavailable` (never a panic) when there is no driver, no
    /// NVRTC or no such device.
    #[allow(unsafe_code)]
    pub fn open(ordinal: usize) -> Result<Self, ReplayError> {
        // SAFETY: only tries to dlopen libcuda by its usual names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(ReplayError::GpuUnavailable(
                "libcuda could not be loaded (no NVIDIA driver installed)".into(),
            ));
        }
        if !nvrtc_present() {
            return Err(no_nvrtc());
        }
        catch_unwind(|| Self::open_device(ordinal)).unwrap_or_else(|panic| {
            Err(ReplayError::GpuUnavailable(panic_text(
                &panic,
                "opening the device",
            )))
        })
    }

    fn open_device(ordinal: usize) -> Result<Self, ReplayError> {
        let unavailable = |what: &str, e: DriverError| {
            ReplayError::GpuUnavailable(format!("{what} (device {ordinal}): {e}{}", driver_hint(&e)))
        };
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable("cannot open the CUDA device", e))?;
        let name = ctx.name().map_err(|e| unavailable("device name", e))?;
        let capability = ctx
            .compute_capability()
            .map_err(|e| unavailable("compute capability", e))?;
        let multiprocessors = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| unavailable("multiprocessor count", e))?;
        let gpu = Gpu {
            ctx,
            name,
            capability,
            multiprocessors: u32::try_from(multiprocessors).unwrap_or(1).max(1),
            chunk_bytes: CHUNK_BYTES,
            slots: OFFENSE_SLOTS,
            module: OnceLock::new(),
        };
        // Kernels that cannot be built for this device (an architecture this NVRTC does not
        // know, a driver older than the CUBIN) make the GPU unavailable, so `auto` falls
        // back to the CPU instead of failing every check.
        gpu.module()
            .map_err(|e| ReplayError::GpuUnavailable(e.to_string()))?;
        Ok(gpu)
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// The device's compute capability (`(9, 0)`).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.capability
    }

    /// Moves tensors in chunks of `bytes` (rounded up to 16) instead of [`CHUNK_BYTES`]: lets
    /// tests run the chunked path on small tensors.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(16).next_multiple_of(16);
        self
    }

    /// Collects at most `slots` (at least [`MAX_OFFENSES`]) positions per pass instead of
    /// [`OFFENSE_SLOTS`]: lets tests run the windowed re-scan on small tensors.
    pub fn with_offense_slots(mut self, slots: usize) -> Self {
        self.slots = slots.max(MAX_OFFENSES);
        self
    }

    /// Device buffers for one scan: `bytes` of tensor data (rounded up to whole 16-byte
    /// vectors) and the result words.
    fn passes<'a>(
        &self,
        stream: &'a Arc<CudaStream>,
        func: &'a CudaFunction,
        bounds: Bounds,
        size: usize,
        bytes: usize,
    ) -> Result<DevicePasses<'a>, ReplayError> {
        let data = stream
            .alloc_zeros::<u8>(bytes.max(16).next_multiple_of(16))
            .map_err(driver("allocating the tensor buffer"))?;
        let out = stream
            .alloc_zeros::<u64>(HEADER + self.slots)
            .map_err(driver("allocating the result buffer"))?;
        Ok(DevicePasses {
            stream,
            func,
            data,
            out,
            bounds,
            size,
            max_blocks: self.multiprocessors.saturating_mul(BLOCKS_PER_SM),
        })
    }

    /// The kernels, compiled (first use in this process) and loaded (first use on this device).
    fn module(&self) -> Result<Arc<CudaModule>, ReplayError> {
        self.module
            .get_or_init(|| {
                let cubin = cubin_for(self.capability).map_err(|e| e.to_string())?;
                self.ctx
                    .load_module(Ptx::from_binary(cubin.to_vec()))
                    .map_err(|e| {
                        format!(
                            "loading the kernels (sm_{}{}): {e}",
                            self.capability.0, self.capability.1
                        )
                    })
            })
            .clone()
            .map_err(ReplayError::Kernel)
    }

    fn function(&self, dtype: DType) -> Result<CudaFunction, ReplayError> {
        let name = kernel_name(dtype);
        self.module()?.load_function(name).map_err(driver(name))
    }

    /// The scan, without the panic guard.
    fn scan_inner(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError> {
        crate::replay::validate_scan(&tensor, scan)?;
        let dtype = tensor.dtype;
        let n = tensor.elements();
        let bounds = Bounds::new(lane(dtype), scan);
        if n == 0 {
            return Ok(ScanOutput {
                elements: 0,
                offending: 0,
                min: None,
                max: None,
                first: Vec::new(),
            });
        }
        let func = self.function(dtype)?;
        let stream = self.ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let size = dtype.size();
        let per_chunk = (self.chunk_bytes / size) as u64;
        let buffer = n.min(per_chunk) as usize * size;
        let mut passes = self.passes(&stream, &func, bounds, size, buffer)?;
        scan_chunked(&mut passes, &tensor, bounds.lane, per_chunk)
    }

    /// Times the scan kernel over `tensor` resident on the device (one buffer, no chunks) and a
    /// device-to-device copy of the same bytes: medians of `reps` runs after a warm-up, by CUDA
    /// events. For the GPU benchmark.
    pub fn time_scan(&self, tensor: TensorRef<'_>, scan: Scan, reps: usize) -> Result<Timing, ReplayError> {
        guard("timing", || self.time_scan_inner(tensor, scan, reps.max(1)))
    }

    fn time_scan_inner(&self, tensor: TensorRef<'_>, scan: Scan, reps: usize) -> Result<Timing, ReplayError> {
        crate::replay::validate_scan(&tensor, scan)?;
        let dtype = tensor.dtype;
        let n = tensor.elements();
        let bounds = Bounds::new(lane(dtype), scan);
        let func = self.function(dtype)?;
        let stream = self.ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let mut passes = self.passes(&stream, &func, bounds, dtype.size(), tensor.bytes.len())?;
        let mut copy = stream
            .alloc_zeros::<u8>(passes.data.len())
            .map_err(driver("allocating the copy buffer"))?;
        passes.load(tensor.bytes)?;
        let found = passes.run(0, n, 0, true)?;
        let timed = |work: &mut dyn FnMut() -> Result<(), ReplayError>| -> Result<f64, ReplayError> {
            work()?;
            let mut ms = Vec::with_capacity(reps);
            for _ in 0..reps {
                let start = stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(driver("cuEventRecord"))?;
                work()?;
                let end = stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(driver("cuEventRecord"))?;
                ms.push(f64::from(
                    start.elapsed_ms(&end).map_err(driver("cuEventElapsedTime"))?,
                ));
            }
            ms.sort_by(f64::total_cmp);
            Ok(ms[ms.len() / 2])
        };
        let scan_ms = timed(&mut || passes.launch(0, n, 0, true))?;
        let copy_ms = timed(&mut || {
            stream
                .memcpy_dtod(&passes.data, &mut copy)
                .map_err(driver("cuMemcpyDtoD"))
        })?;
        stream.synchronize().map_err(driver("synchronizing"))?;
        Ok(Timing {
            bytes: tensor.bytes.len() as u64,
            scan_ms,
            copy_ms,
            offending: found.count,
        })
    }

    #[allow(unsafe_code)]
    fn gemm_inner(&self, call: &GemmCall) -> Result<String, ReplayError> {
        // SAFETY: only tries to dlopen libcublas by its usual names.
        if !unsafe { cublas_sys::is_culib_present() } {
            return Err(ReplayError::GpuUnavailable(
                "libcublas could not be loaded (put the folder holding libcublas.so.* on LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        let (a_type, a_size) = gemm_type(call.a_dtype)?;
        let (b_type, b_size) = gemm_type(call.b_dtype)?;
        let int = |name: &str, v: i64| {
            i32::try_from(v).map_err(|_| {
                ReplayError::Check(format!("{name} = {v} does not fit the 32-bit int cuBLAS takes"))
            })
        };
        let (m, n, k) = (int("m", call.m)?, int("n", call.n)?, int("k", call.k)?);
        let (lda, ldb, ldc) = (
            int("lda", call.lda)?,
            int("ldb", call.ldb)?,
            int("ldc", call.ldc)?,
        );
        // Column-major operands: op(A) is m x k, op(B) is k x n, C is m x n.
        let cols_a = if call.transa { call.m } else { call.k };
        let cols_b = if call.transb { call.k } else { call.n };
        let bytes = |ld: i64, cols: i64, size: usize| -> u64 {
            (ld.max(1) as u64)
                .saturating_mul(cols.max(1) as u64)
                .saturating_mul(size as u64)
        };
        let (a_bytes, b_bytes, c_bytes) = (
            bytes(call.lda, cols_a, a_size),
            bytes(call.ldb, cols_b, b_size),
            bytes(call.ldc, call.n, a_size),
        );
        let total = a_bytes.saturating_add(b_bytes).saturating_add(c_bytes);
        if total > GEMM_MAX_BYTES {
            return Err(ReplayError::Check(format!(
                "the operands need {total} bytes, over the {GEMM_MAX_BYTES} the GPU replay allocates"
            )));
        }
        let stream = self.ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let blas =
            CudaBlas::new(stream.clone()).map_err(|e| ReplayError::Kernel(format!("cublasCreate: {e:?}")))?;
        let alloc = |len: u64| {
            stream
                .alloc_zeros::<u8>(len as usize)
                .map_err(driver("allocating a GEMM operand"))
        };
        let (a, b, mut c) = (alloc(a_bytes)?, alloc(b_bytes)?, alloc(c_bytes)?);
        let op = |t: bool| {
            if t {
                cublas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                cublas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        // torch's choices: float accumulation for half types, double for double. alpha and
        // beta are typed locals, so cuBLAS reads them aligned.
        let (one_f64, zero_f64, one_f32, zero_f32) = (1f64, 0f64, 1f32, 0f32);
        let (compute, one, zero): (_, *const c_void, *const c_void) = if call.a_dtype == DType::F64 {
            (
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                std::ptr::from_ref(&one_f64).cast(),
                std::ptr::from_ref(&zero_f64).cast(),
            )
        } else {
            (
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                std::ptr::from_ref(&one_f32).cast(),
                std::ptr::from_ref(&zero_f32).cast(),
            )
        };
        let status = {
            let (pa, _ra) = a.device_ptr(&stream);
            let (pb, _rb) = b.device_ptr(&stream);
            let (pc, _rc) = c.device_ptr_mut(&stream);
            // SAFETY: the handle is live; A, B and C are device buffers of at least
            // ld x cols elements of their types (sized above, zero-filled), so cuBLAS reads and
            // writes inside them whatever it accepts; alpha / beta point to aligned host scalars of
            // the compute type's scale type that outlive the call (synchronized below).
            unsafe {
                cublas_sys::cublasGemmEx(
                    *blas.handle(),
                    op(call.transa),
                    op(call.transb),
                    m,
                    n,
                    k,
                    one,
                    pa as *const c_void,
                    a_type,
                    lda,
                    pb as *const c_void,
                    b_type,
                    ldb,
                    zero,
                    pc as *mut c_void,
                    a_type,
                    ldc,
                    compute,
                    cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
        };
        stream.synchronize().map_err(driver("running the GEMM"))?;
        drop(blas);
        Ok(format!("{status:?}"))
    }
}

/// What to do about a driver error that has one known cause.
pub(super) fn driver_hint(e: &DriverError) -> &'static str {
    match e.0 {
        CUresult::CUDA_ERROR_STUB_LIBRARY => {
            "; the libcuda.so loaded is the CUDA toolkit's stub: take its `stubs` folder off LD_LIBRARY_PATH so that the driver's libcuda.so.1 is found"
        }
        _ => "",
    }
}

/// Kernel and copy times of [`Gpu::time_scan`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Bytes of the tensor.
    pub bytes: u64,
    /// Median time of one scan kernel pass, ms.
    pub scan_ms: f64,
    /// Median time of one device-to-device copy of the same bytes, ms.
    pub copy_ms: f64,
    /// Offending elements the scan found.
    pub offending: u64,
}

impl Timing {
    /// Scan throughput: tensor bytes read per second, GB/s.
    pub fn scan_gbps(&self) -> f64 {
        self.bytes as f64 / (self.scan_ms * 1e6)
    }

    /// Copy throughput, counting bytes read plus bytes written, GB/s.
    pub fn copy_gbps(&self) -> f64 {
        2.0 * self.bytes as f64 / (self.copy_ms * 1e6)
    }
}

impl Backend for Gpu {
    fn name(&self) -> String {
        format!("gpu:{}", self.name)
    }

    fn scan(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError> {
        guard("the scan", || self.scan_inner(tensor, scan))
    }

    fn gemm_status(&self, call: &GemmCall) -> Option<Result<String, ReplayError>> {
        Some(guard("the GEMM", || self.gemm_inner(call)))
    }
}

/// Runs `f`, turning a cudarc panic (a symbol missing from an old driver) into an error.
fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, ReplayError>) -> Result<T, ReplayError> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(ReplayError::Kernel(panic_text(&panic, what))))
}

fn kernel_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool | DType::U8 => "scan_u8",
        DType::I8 => "scan_i8",
        DType::I16 => "scan_i16",
        DType::U16 => "scan_u16",
        DType::I32 => "scan_i32",
        DType::U32 => "scan_u32",
        DType::I64 => "scan_i64",
        DType::U64 => "scan_u64",
        DType::F16 => "scan_f16",
        DType::BF16 => "scan_bf16",
        DType::F32 => "scan_f32",
        DType::F64 => "scan_f64",
    }
}

/// The kernels on one device buffer.
struct DevicePasses<'a> {
    stream: &'a Arc<CudaStream>,
    func: &'a CudaFunction,
    data: CudaSlice<u8>,
    out: CudaSlice<u64>,
    bounds: Bounds,
    size: usize,
    max_blocks: u32,
}

impl DevicePasses<'_> {
    /// Clears the result words and launches the kernel over buffer elements `[begin, end)`.
    #[allow(unsafe_code)]
    fn launch(&mut self, begin: u64, end: u64, base: u64, collect: bool) -> Result<(), ReplayError> {
        {
            let mut header = self.out.slice_mut(0..HEADER);
            self.stream
                .memcpy_htod(&[0, NONE, 0, NONE, NONE, 0], &mut header)
                .map_err(driver("clearing the result buffer"))?;
        }
        let per = (16 / self.size) as u64;
        let vectors = end.div_ceil(per) - begin / per;
        let blocks = vectors
            .div_ceil(u64::from(THREADS))
            .clamp(1, u64::from(self.max_blocks)) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let cap = self.slots();
        let skip = self.bounds.skip.unwrap_or(0);
        let has_skip = i32::from(self.bounds.skip.is_some());
        let collect = i32::from(collect);
        let mut args = self.stream.launch_builder(self.func);
        args.arg(&self.data)
            .arg(&begin)
            .arg(&end)
            .arg(&base)
            .arg(&self.bounds.lo)
            .arg(&self.bounds.hi)
            .arg(&skip)
            .arg(&has_skip)
            .arg(&collect)
            .arg(&cap)
            .arg(&mut self.out);
        // SAFETY: the arguments match the kernel's parameters in number, order and type
        // (kernels/scan.cu SCAN_KERNEL); `data` holds whole 16-byte vectors covering
        // [begin, end) and `out` holds HEADER + cap words.
        unsafe { args.launch(cfg) }.map_err(driver("launching the scan kernel"))?;
        Ok(())
    }
}

impl Passes for DevicePasses<'_> {
    fn load(&mut self, bytes: &[u8]) -> Result<(), ReplayError> {
        let mut dst = self.data.slice_mut(0..bytes.len());
        self.stream
            .memcpy_htod(bytes, &mut dst)
            .map_err(driver("copying the tensor to the device"))
    }

    fn run(&mut self, begin: u64, end: u64, base: u64, collect: bool) -> Result<Found, ReplayError> {
        self.launch(begin, end, base, collect)?;
        let words = self
            .stream
            .clone_dtoh(&self.out)
            .map_err(driver("reading the scan result"))?;
        Ok(Found::from_words(&words, self.slots() as usize))
    }

    fn slots(&self) -> u64 {
        (self.out.len() - HEADER) as u64
    }
}

/// The cuBLAS type and element size of a GEMM operand.
fn gemm_type(dtype: DType) -> Result<(cublas_sys::cudaDataType, usize), ReplayError> {
    use cublas_sys::cudaDataType::*;
    Ok(match dtype {
        DType::F16 => (CUDA_R_16F, 2),
        DType::BF16 => (CUDA_R_16BF, 2),
        DType::F32 => (CUDA_R_32F, 4),
        DType::F64 => (CUDA_R_64F, 8),
        other => {
            return Err(ReplayError::Check(format!(
                "the GEMM replay takes float16, bfloat16, float32 or float64 operands, not {}",
                other.torch_name()
            )));
        }
    })
}
