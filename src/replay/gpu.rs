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
//!   offending positions into a fixed device buffer (`OFFENSE_SLOTS`). When more offenders than
//!   slots exist, windows from the first offending position are scanned again until the
//!   [`MAX_OFFENSES`](super::MAX_OFFENSES) smallest positions are known. Values (and the sign of
//!   a zero min / max) are read from the host bytes, as the CPU reads them. Tensors move to the
//!   device in chunks of `CHUNK_BYTES`.
//! - [`Backend::gemm_status`](super::Backend::gemm_status) makes the real `cublasGemmEx` call on
//!   zero-filled operands (at most `GEMM_MAX_BYTES` of them).
//! - Any panic inside cudarc (a symbol an old driver lacks) becomes an error, never a crash.

#[cfg(feature = "cuda")]
pub use cuda::*;

#[cfg(feature = "cuda")]
mod cuda {
    use std::collections::BTreeMap;
    use std::ffi::{CStr, c_char, c_void};
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};

    use cudarc::cublas::CudaBlas;
    use cudarc::cublas::sys as cublas_sys;
    use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
    use cudarc::driver::{
        CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError,
        LaunchConfig, PushKernelArg,
    };
    use cudarc::nvrtc::Ptx;

    use crate::replay::check::{GemmCall, Scalar, Scan, ScanOutput};
    use crate::replay::snapshot::{DType, TensorRef};
    use crate::replay::{Backend, MAX_OFFENSES, ReplayError};

    /// The kernel sources, by file name, compiled together as one program.
    pub const KERNEL_SOURCES: &[(&str, &str)] = &[("scan.cu", include_str!("../../kernels/scan.cu"))];

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
    /// Words before the positions in the output buffer (see kernels/scan.cu).
    const HEADER: usize = 6;
    /// "No position" / "no key" in the output buffer.
    const NONE: u64 = u64::MAX;

    /// Open the first GPU (ordinal 0).
    pub fn open() -> Result<Gpu, ReplayError> {
        Gpu::open(0)
    }

    /// What NVRTC should produce.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Output {
        /// PTX text (for a virtual architecture, or NVRTC's default one).
        Ptx,
        /// A CUBIN for one real architecture (`sm_90`); needs `arch`.
        Cubin,
    }

    /// Whether libnvrtc can be loaded (it is looked for as `libnvrtc.so.13`, then `.so.12`, …).
    #[allow(unsafe_code)]
    pub fn nvrtc_present() -> bool {
        // SAFETY: only tries to dlopen the library by its usual names; nothing is called in it.
        unsafe { cudarc::nvrtc::sys::is_culib_present() }
    }

    /// The version of the libnvrtc that is loaded.
    #[allow(unsafe_code)]
    pub fn nvrtc_version() -> Result<(i32, i32), ReplayError> {
        if !nvrtc_present() {
            return Err(no_nvrtc());
        }
        let (mut major, mut minor) = (0, 0);
        // SAFETY: libnvrtc is present (checked above); both pointers are valid for writes.
        let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        status
            .result()
            .map_err(|e| ReplayError::Kernel(format!("nvrtcVersion: {e}")))?;
        Ok((major, minor))
    }

    fn no_nvrtc() -> ReplayError {
        ReplayError::GpuUnavailable(
        "libnvrtc could not be loaded (install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` and put the folder holding libnvrtc.so.* on LD_LIBRARY_PATH)".into(),
    )
    }

    /// Compiles [`KERNEL_SOURCES`] with NVRTC (no GPU needed) for `arch` (`sm_90`, `compute_90`, or
    /// NVRTC's default when `None`) and returns the PTX text or the CUBIN bytes.
    pub fn compile_kernels(arch: Option<&str>, output: Output) -> Result<Vec<u8>, ReplayError> {
        let source: String = KERNEL_SOURCES
            .iter()
            .map(|(name, text)| format!("// ---- {name}\n{text}\n"))
            .collect();
        compile_source(&source, arch, output)
    }

    /// Compiles one CUDA C++ `source` with the options the kernels use (see [`compile_kernels`]);
    /// a compile error carries NVRTC's log.
    pub fn compile_source(source: &str, arch: Option<&str>, output: Output) -> Result<Vec<u8>, ReplayError> {
        if !nvrtc_present() {
            return Err(no_nvrtc());
        }
        if output == Output::Cubin && !arch.is_some_and(|a| a.starts_with("sm_")) {
            return Err(ReplayError::Kernel(
                "a CUBIN needs a real architecture (sm_XY)".into(),
            ));
        }
        catch_unwind(|| nvrtc_compile(source, arch, output))
            .unwrap_or_else(|panic| Err(ReplayError::Kernel(panic_text(&panic, "NVRTC"))))
    }

    #[allow(unsafe_code)]
    fn nvrtc_compile(source: &str, arch: Option<&str>, output: Output) -> Result<Vec<u8>, ReplayError> {
        use cudarc::nvrtc::{result, sys};
        let kernel = |what: &str, e: &dyn std::fmt::Display| ReplayError::Kernel(format!("{what}: {e}"));
        let src = std::ffi::CString::new(source).map_err(|e| kernel("kernel source", &e))?;
        let prog = result::create_program(&src, Some(c"faultline_kernels.cu"))
            .map_err(|e| kernel("nvrtcCreateProgram", &e))?;
        let mut options = vec![
            "--std=c++17".to_string(),
            "--ftz=false".to_string(),
            "--prec-div=true".to_string(),
            "--fmad=false".to_string(),
        ];
        if let Some(arch) = arch {
            options.push(format!("--gpu-architecture={arch}"));
        }
        // SAFETY: `prog` was just created and is destroyed once below; `src` outlives it.
        let compiled = unsafe { result::compile_program(prog, &options) };
        let out = match compiled {
            Err(e) => {
                // SAFETY: `prog` is a live program.
                let log = unsafe { result::get_program_log(prog) }
                    .map(|log| c_text(&log))
                    .unwrap_or_default();
                Err(ReplayError::Kernel(format!(
                    "NVRTC could not compile the kernels ({e}): {log}"
                )))
            }
            Ok(()) => match output {
                // SAFETY: `prog` compiled successfully.
                Output::Ptx => unsafe { result::get_ptx(prog) }
                    .map(|ptx| c_text(&ptx).into_bytes())
                    .map_err(|e| kernel("nvrtcGetPTX", &e)),
                Output::Cubin => {
                    let mut size = 0usize;
                    // SAFETY: `prog` compiled for a real architecture; `size` is valid for writes.
                    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
                        .result()
                        .map_err(|e| kernel("nvrtcGetCUBINSize", &e))
                        .and_then(|()| {
                            let mut cubin = vec![0u8; size];
                            // SAFETY: `cubin` holds the `size` bytes NVRTC reported.
                            unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast::<c_char>()) }
                                .result()
                                .map_err(|e| kernel("nvrtcGetCUBIN", &e))
                                .map(|()| cubin)
                        })
                }
            },
        };
        // SAFETY: `prog` is live and not used after this.
        let _ = unsafe { result::destroy_program(prog) };
        out
    }

    /// NVRTC's text buffers end with a NUL.
    fn c_text(buf: &[c_char]) -> String {
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        CStr::from_bytes_until_nul(&bytes)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
    }

    fn panic_text(panic: &(dyn std::any::Any + Send), what: &str) -> String {
        let msg = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        format!("{what} failed inside cudarc: {msg}")
    }

    /// CUBINs compiled in this process, by compute capability.
    fn cubin_for(cc: (i32, i32)) -> Result<Arc<Vec<u8>>, ReplayError> {
        /// CUBIN bytes by compute capability.
        type Cubins = BTreeMap<(i32, i32), Arc<Vec<u8>>>;
        static CUBINS: Mutex<Cubins> = Mutex::new(BTreeMap::new());
        let mut cache = CUBINS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cubin) = cache.get(&cc) {
            return Ok(cubin.clone());
        }
        let arch = format!("sm_{}{}", cc.0, cc.1);
        let cubin = Arc::new(compile_kernels(Some(&arch), Output::Cubin)?);
        cache.insert(cc, cubin.clone());
        Ok(cubin)
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
                ReplayError::GpuUnavailable(format!("{what} (device {ordinal}): {e}"))
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
        pub fn time_scan(
            &self,
            tensor: TensorRef<'_>,
            scan: Scan,
            reps: usize,
        ) -> Result<Timing, ReplayError> {
            guard("timing", || self.time_scan_inner(tensor, scan, reps.max(1)))
        }

        fn time_scan_inner(
            &self,
            tensor: TensorRef<'_>,
            scan: Scan,
            reps: usize,
        ) -> Result<Timing, ReplayError> {
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
                "libcublas could not be loaded (put the folder holding libcublas.so.* on LD_LIBRARY_PATH)".into(),
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
            let blas = CudaBlas::new(stream.clone())
                .map_err(|e| ReplayError::Kernel(format!("cublasCreate: {e:?}")))?;
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

    /// The number type a dtype is compared in (as on the CPU).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Lane {
        I64,
        F32,
        F64,
    }

    fn lane(dtype: DType) -> Lane {
        match dtype {
            DType::F16 | DType::BF16 | DType::F32 => Lane::F32,
            DType::F64 => Lane::F64,
            _ => Lane::I64,
        }
    }

    /// One element as the CPU backend reads it.
    fn read_scalar(dtype: DType, bytes: &[u8], pos: u64) -> Scalar {
        let size = dtype.size();
        let at = pos as usize * size;
        let mut raw = [0u8; 8];
        if let Some(src) = bytes.get(at..at + size) {
            raw[..size].copy_from_slice(src);
        }
        let [b0, b1, b2, b3, ..] = raw;
        match dtype {
            DType::Bool | DType::U8 => Scalar::Int(i64::from(b0)),
            DType::I8 => Scalar::Int(i64::from(b0 as i8)),
            DType::I16 => Scalar::Int(i64::from(i16::from_le_bytes([b0, b1]))),
            DType::U16 => Scalar::Int(i64::from(u16::from_le_bytes([b0, b1]))),
            DType::I32 => Scalar::Int(i64::from(i32::from_le_bytes([b0, b1, b2, b3]))),
            DType::U32 => Scalar::Int(i64::from(u32::from_le_bytes([b0, b1, b2, b3]))),
            DType::I64 => Scalar::Int(i64::from_le_bytes(raw)),
            DType::U64 => Scalar::Int(i64::try_from(u64::from_le_bytes(raw)).unwrap_or(i64::MAX)),
            DType::F16 => Scalar::Float(f64::from(half::f16::from_le_bytes([b0, b1]).to_f32())),
            DType::BF16 => Scalar::Float(f64::from(half::bf16::from_le_bytes([b0, b1]).to_f32())),
            DType::F32 => Scalar::Float(f64::from(f32::from_le_bytes([b0, b1, b2, b3]))),
            DType::F64 => Scalar::Float(f64::from_le_bytes(raw)),
        }
    }

    /// A scan as the kernels see it: lane values outside `[lo, hi]` offend unless equal to `skip`;
    /// each value is the raw 64-bit pattern of the lane type.
    #[derive(Debug, Clone, Copy)]
    struct Bounds {
        lane: Lane,
        lo: u64,
        hi: u64,
        skip: Option<u64>,
    }

    impl Bounds {
        /// The CPU backend's rules: bounds moved to the nearest lane value inside the allowed
        /// range, an empty interval when none is, `skip` only when the lane holds it exactly.
        fn new(lane: Lane, scan: Scan) -> Self {
            match lane {
                Lane::I64 => {
                    let (lo, hi, skip) = match scan {
                        Scan::IntRange { lo, hi, skip } => (Some(lo), hi.checked_sub(1), skip),
                        Scan::NonFinite => (Some(i64::MIN), Some(i64::MAX), None),
                        Scan::FloatRange { lo, hi } => {
                            let (c, f) = (lo.ceil(), hi.floor());
                            // i64::MAX as f64 is 2^63, one past the largest i64.
                            (
                                (c < i64::MAX as f64).then_some(c as i64),
                                (f >= i64::MIN as f64).then_some(f as i64),
                                None,
                            )
                        }
                    };
                    let (lo, hi) = lo.zip(hi).unwrap_or((i64::MAX, i64::MIN));
                    Bounds {
                        lane,
                        lo: lo as u64,
                        hi: hi as u64,
                        skip: skip.map(|s| s as u64),
                    }
                }
                Lane::F32 => {
                    let (lo, hi, skip) = match scan {
                        Scan::IntRange { lo, hi, skip } => {
                            let l = lo as f32;
                            let l = if (l as i128) < i128::from(lo) {
                                l.next_up()
                            } else {
                                l
                            };
                            let h = hi as f32;
                            let h = if (h as i128) >= i128::from(hi) {
                                h.next_down()
                            } else {
                                h
                            };
                            let skip = skip.and_then(|s| {
                                let c = s as f32;
                                ((c as i128) == i128::from(s)).then_some(c)
                            });
                            (l, h, skip)
                        }
                        Scan::NonFinite => (f32::MIN, f32::MAX, None),
                        Scan::FloatRange { lo, hi } => {
                            let l = lo as f32;
                            let l = if f64::from(l) < lo { l.next_up() } else { l };
                            let h = hi as f32;
                            let h = if f64::from(h) > hi { h.next_down() } else { h };
                            (l, h, None)
                        }
                    };
                    Bounds {
                        lane,
                        lo: u64::from(lo.to_bits()),
                        hi: u64::from(hi.to_bits()),
                        skip: skip.map(|s| u64::from(s.to_bits())),
                    }
                }
                Lane::F64 => {
                    let (lo, hi, skip) = match scan {
                        Scan::IntRange { lo, hi, skip } => {
                            let l = lo as f64;
                            let l = if (l as i128) < i128::from(lo) {
                                l.next_up()
                            } else {
                                l
                            };
                            let h = hi as f64;
                            let h = if (h as i128) >= i128::from(hi) {
                                h.next_down()
                            } else {
                                h
                            };
                            let skip = skip.and_then(|s| {
                                let c = s as f64;
                                ((c as i128) == i128::from(s)).then_some(c)
                            });
                            (l, h, skip)
                        }
                        Scan::NonFinite => (f64::MIN, f64::MAX, None),
                        Scan::FloatRange { lo, hi } => (lo, hi, None),
                    };
                    Bounds {
                        lane,
                        lo: lo.to_bits(),
                        hi: hi.to_bits(),
                        skip: skip.map(f64::to_bits),
                    }
                }
            }
        }
    }

    /// The lane value of an order-preserving key (kernels/scan.cu `lane_key`).
    fn unkey(lane: Lane, key: u64) -> Scalar {
        const SIGN: u64 = 1 << 63;
        match lane {
            Lane::I64 => Scalar::Int((key ^ SIGN) as i64),
            Lane::F32 => {
                let k = key as u32;
                let bits = if k & 0x8000_0000 != 0 { k & 0x7fff_ffff } else { !k };
                Scalar::Float(f64::from(f32::from_bits(bits)))
            }
            Lane::F64 => {
                let bits = if key & SIGN != 0 { key & !SIGN } else { !key };
                Scalar::Float(f64::from_bits(bits))
            }
        }
    }

    /// What one or more kernel passes found.
    #[derive(Debug, Clone)]
    struct Found {
        count: u64,
        kmin: u64,
        kmax: u64,
        first: u64,
        zero: u64,
        /// Collected positions (all of them when [`Found::complete`]).
        positions: Vec<u64>,
    }

    impl Found {
        fn empty() -> Self {
            Found {
                count: 0,
                kmin: NONE,
                kmax: 0,
                first: NONE,
                zero: NONE,
                positions: Vec::new(),
            }
        }

        fn from_words(words: &[u64], slots: usize) -> Self {
            let word = |i: usize| words.get(i).copied().unwrap_or(0);
            let collected = (word(5).min(slots as u64) as usize).min(words.len().saturating_sub(HEADER));
            Found {
                count: word(0),
                kmin: word(1),
                kmax: word(2),
                first: word(3),
                zero: word(4),
                positions: words.get(HEADER..HEADER + collected).unwrap_or(&[]).to_vec(),
            }
        }

        /// Every offending position of the pass was collected.
        fn complete(&self) -> bool {
            self.count <= self.positions.len() as u64
        }

        /// Adds a later part of the tensor (positions are handled by the caller).
        fn merge(&mut self, next: &Found) {
            self.count += next.count;
            self.kmin = self.kmin.min(next.kmin);
            self.kmax = self.kmax.max(next.kmax);
            self.first = self.first.min(next.first);
            self.zero = self.zero.min(next.zero);
        }

        fn output(&self, tensor: &TensorRef<'_>, lane: Lane, first: Vec<u64>) -> ScanOutput {
            let dtype = tensor.dtype;
            // Every integer is keyed; a float tensor may hold only NaN.
            let seen = match lane {
                Lane::I64 => tensor.elements() > 0,
                Lane::F32 | Lane::F64 => self.kmin != NONE,
            };
            // A zero min or max is the first zero in the tensor, with its sign (as the CPU reports it).
            let value = |key: u64| match unkey(lane, key) {
                Scalar::Float(v) if v == 0.0 && self.zero != NONE => {
                    read_scalar(dtype, tensor.bytes, self.zero)
                }
                v => v,
            };
            ScanOutput {
                elements: tensor.elements(),
                offending: self.count,
                min: seen.then(|| value(self.kmin)),
                max: seen.then(|| value(self.kmax)),
                first: first
                    .into_iter()
                    .map(|p| (p, read_scalar(dtype, tensor.bytes, p)))
                    .collect(),
            }
        }
    }

    /// Kernel passes over the part of a tensor that is on the device (a trait so that the
    /// chunking and re-scan logic is tested on the CPU against an emulated kernel).
    trait Passes {
        /// Puts `bytes` (one chunk of elements) at the start of the device buffer.
        fn load(&mut self, bytes: &[u8]) -> Result<(), ReplayError>;
        /// One pass over buffer elements `[begin, end)`, positions reported at `base + i`;
        /// collects positions when `collect`.
        fn run(&mut self, begin: u64, end: u64, base: u64, collect: bool) -> Result<Found, ReplayError>;
        /// Positions one pass can collect.
        fn slots(&self) -> u64;
    }

    /// Scans `tensor` in chunks of `per_chunk` elements.
    fn scan_chunked(
        passes: &mut impl Passes,
        tensor: &TensorRef<'_>,
        lane: Lane,
        per_chunk: u64,
    ) -> Result<ScanOutput, ReplayError> {
        let size = tensor.dtype.size();
        let n = tensor.elements();
        let mut total = Found::empty();
        let mut first: Vec<u64> = Vec::new();
        let mut start = 0u64;
        while start < n {
            let len = per_chunk.min(n - start);
            let bytes = tensor
                .bytes
                .get(start as usize * size..(start + len) as usize * size)
                .ok_or_else(|| ReplayError::Check(format!("tensor {}: too few bytes", tensor.name)))?;
            passes.load(bytes)?;
            let need = MAX_OFFENSES - first.len();
            let found = passes.run(0, len, start, need > 0)?;
            if need > 0 && found.count > 0 {
                let mut positions = if found.complete() {
                    found.positions.clone()
                } else {
                    first_positions(passes, found.first - start, len, start, need)?
                };
                positions.sort_unstable();
                first.extend(positions.into_iter().take(need));
            }
            total.merge(&found);
            start += len;
        }
        Ok(total.output(tensor, lane, first))
    }

    /// The `need` smallest offending positions of buffer elements `[start, len)` (reported at
    /// `base + i`) after a pass overflowed its slots: windows from the first offending position,
    /// quadrupled while they hold too few; one that overflows is narrowed to the slot count
    /// (which cannot overflow) from its own first offender.
    fn first_positions(
        passes: &mut impl Passes,
        mut start: u64,
        len: u64,
        base: u64,
        need: usize,
    ) -> Result<Vec<u64>, ReplayError> {
        let slots = passes.slots();
        let mut width = slots * 4;
        let mut found = Vec::new();
        while found.len() < need && start < len {
            let end = start.saturating_add(width).min(len);
            let window = passes.run(start, end, base, true)?;
            if !window.complete() {
                // Nothing offends before the window's first offender; `slots` elements from
                // there cannot overflow.
                start = window.first - base;
                width = slots;
                continue;
            }
            let mut positions = window.positions;
            positions.sort_unstable();
            found.extend(positions);
            start = end;
            width = width.saturating_mul(4);
        }
        found.truncate(need);
        Ok(found)
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

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::replay::cpu::Cpu;

        /// The kernel's semantics (kernels/scan.cu) on the CPU. It collects positions last to
        /// first, so that a pass that overflows its slots keeps the worst ones.
        struct Emulated {
            dtype: DType,
            bounds: Bounds,
            data: Vec<u8>,
            slots: u64,
            runs: usize,
        }

        /// Whether `v` offends, its min / max key (not for NaN), whether it is a zero.
        fn judge(b: Bounds, v: Scalar) -> (bool, Option<u64>, bool) {
            const SIGN: u64 = 1 << 63;
            match (b.lane, v) {
                (Lane::I64, Scalar::Int(x)) => {
                    let (lo, hi) = (b.lo as i64, b.hi as i64);
                    let bad = !(x >= lo && x <= hi) && b.skip != Some(x as u64);
                    (bad, Some(x as u64 ^ SIGN), false)
                }
                (Lane::F32, Scalar::Float(x)) => {
                    let x = x as f32;
                    let (lo, hi) = (f32::from_bits(b.lo as u32), f32::from_bits(b.hi as u32));
                    let skip = b.skip.map(|s| f32::from_bits(s as u32));
                    let bad = !(x >= lo && x <= hi) && skip != Some(x);
                    let bits = if x == 0.0 { 0 } else { x.to_bits() };
                    let key = if bits & 0x8000_0000 != 0 {
                        !bits
                    } else {
                        bits | 0x8000_0000
                    };
                    (bad, (!x.is_nan()).then_some(u64::from(key)), x == 0.0)
                }
                (Lane::F64, Scalar::Float(x)) => {
                    let (lo, hi) = (f64::from_bits(b.lo), f64::from_bits(b.hi));
                    let bad = !(x >= lo && x <= hi) && b.skip.map(f64::from_bits) != Some(x);
                    let bits = if x == 0.0 { 0 } else { x.to_bits() };
                    let key = if bits & SIGN != 0 { !bits } else { bits | SIGN };
                    (bad, (!x.is_nan()).then_some(key), x == 0.0)
                }
                other => panic!("lane and value disagree: {other:?}"),
            }
        }

        impl Passes for Emulated {
            fn load(&mut self, bytes: &[u8]) -> Result<(), ReplayError> {
                self.data = bytes.to_vec();
                Ok(())
            }

            fn run(&mut self, begin: u64, end: u64, base: u64, collect: bool) -> Result<Found, ReplayError> {
                self.runs += 1;
                let mut f = Found::empty();
                for i in (begin..end).rev() {
                    let (bad, key, zero) = judge(self.bounds, read_scalar(self.dtype, &self.data, i));
                    if let Some(k) = key {
                        f.kmin = f.kmin.min(k);
                        f.kmax = f.kmax.max(k);
                    }
                    if zero {
                        f.zero = f.zero.min(base + i);
                    }
                    if bad {
                        f.count += 1;
                        f.first = f.first.min(base + i);
                        if collect && (f.positions.len() as u64) < self.slots {
                            f.positions.push(base + i);
                        }
                    }
                }
                Ok(f)
            }

            fn slots(&self) -> u64 {
                self.slots
            }
        }

        struct Rng(u64);

        impl Rng {
            fn next(&mut self) -> u64 {
                self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.0;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            }
        }

        /// `v` stored as `dtype` (`as` conversions).
        fn encode(dtype: DType, v: f64) -> Vec<u8> {
            match dtype {
                DType::Bool => vec![u8::from(v != 0.0)],
                DType::U8 => vec![v as u8],
                DType::I8 => (v as i8).to_le_bytes().to_vec(),
                DType::I16 => (v as i16).to_le_bytes().to_vec(),
                DType::U16 => (v as u16).to_le_bytes().to_vec(),
                DType::I32 => (v as i32).to_le_bytes().to_vec(),
                DType::U32 => (v as u32).to_le_bytes().to_vec(),
                DType::I64 => (v as i64).to_le_bytes().to_vec(),
                DType::U64 => (v as u64).to_le_bytes().to_vec(),
                DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
                DType::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
                DType::F32 => (v as f32).to_le_bytes().to_vec(),
                DType::F64 => v.to_le_bytes().to_vec(),
            }
        }

        /// Small integers, a share `bad` (of 100) of special values, some random bit patterns.
        fn values(rng: &mut Rng, dtype: DType, n: usize, bad: u64) -> Vec<u8> {
            const SPECIAL: [f64; 12] = [
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                0.0,
                -0.0,
                -100.0,
                -1.0,
                10.0,
                0.1,
                1e-40,
                9.223_372_036_854_776e18,
                -9.3e18,
            ];
            let mut out = Vec::with_capacity(n * dtype.size());
            for _ in 0..n {
                let r = rng.next();
                match r % 100 {
                    p if p < bad => out.extend(encode(dtype, SPECIAL[(r >> 8) as usize % SPECIAL.len()])),
                    p if p < bad + 5 => out.extend(&rng.next().to_le_bytes()[..dtype.size()]),
                    _ => out.extend(encode(dtype, ((r >> 8) % 10) as f64)),
                }
            }
            out
        }

        const SCANS: [Scan; 7] = [
            Scan::IntRange {
                lo: 0,
                hi: 10,
                skip: Some(-100),
            },
            Scan::IntRange {
                lo: -5,
                hi: 5,
                skip: None,
            },
            Scan::IntRange {
                lo: 0,
                hi: 0,
                skip: None,
            },
            Scan::IntRange {
                lo: i64::MIN,
                hi: i64::MAX,
                skip: Some(i64::MAX),
            },
            Scan::NonFinite,
            Scan::FloatRange { lo: 0.1, hi: 10.0 },
            Scan::FloatRange {
                lo: -0.5,
                hi: f64::INFINITY,
            },
        ];

        fn bits(s: &Scalar) -> (bool, u64) {
            match *s {
                Scalar::Int(i) => (false, i as u64),
                Scalar::Float(f) => (true, f.to_bits()),
            }
        }

        /// Field by field, scalars bit for bit.
        fn assert_same(cpu: &ScanOutput, gpu: &ScanOutput, what: &str) {
            assert_eq!(
                (cpu.elements, cpu.offending),
                (gpu.elements, gpu.offending),
                "{what}"
            );
            assert_eq!(
                cpu.min.as_ref().map(bits),
                gpu.min.as_ref().map(bits),
                "{what} min"
            );
            assert_eq!(
                cpu.max.as_ref().map(bits),
                gpu.max.as_ref().map(bits),
                "{what} max"
            );
            let first = |o: &ScanOutput| -> Vec<(u64, (bool, u64))> {
                o.first.iter().map(|(p, v)| (*p, bits(v))).collect()
            };
            assert_eq!(first(cpu), first(gpu), "{what} first");
        }

        fn emulated(tensor: &TensorRef<'_>, scan: Scan, per_chunk: u64, slots: u64) -> (ScanOutput, usize) {
            let bounds = Bounds::new(lane(tensor.dtype), scan);
            let mut passes = Emulated {
                dtype: tensor.dtype,
                bounds,
                data: Vec::new(),
                slots,
                runs: 0,
            };
            let out =
                scan_chunked(&mut passes, tensor, bounds.lane, per_chunk).unwrap_or_else(|e| panic!("{e}"));
            (out, passes.runs)
        }

        #[test]
        fn chunks_slots_and_rescans_give_the_cpu_result_for_every_dtype_and_scan() {
            let mut rng = Rng(1);
            for dtype in DType::ALL {
                for (n, bad) in [(1usize, 50), (5, 50), (333, 2), (3001, 40), (4096, 95)] {
                    let bytes = values(&mut rng, dtype, n, bad);
                    let shape = [n as u64];
                    let t = TensorRef {
                        name: "t",
                        dtype,
                        shape: &shape,
                        bytes: &bytes,
                    };
                    for scan in SCANS {
                        let cpu = Cpu::new().scan(t, scan).unwrap_or_else(|e| panic!("{e}"));
                        for per_chunk in [1, 7, 1000, 1 << 20] {
                            for slots in [16, 17, 1024] {
                                let (got, _) = emulated(&t, scan, per_chunk, slots);
                                let what =
                                    format!("{dtype:?} n={n} {scan:?} chunk={per_chunk} slots={slots}");
                                assert_same(&cpu, &got, &what);
                            }
                        }
                    }
                }
            }
        }

        #[test]
        fn a_late_dense_run_after_sparse_offenders_needs_few_rescans() {
            let n = 200_000u64;
            let values: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let bad = i % 20_011 == 5 || i > 150_000;
                    (if bad { 99i32 } else { 1 }).to_le_bytes()
                })
                .collect();
            let shape = [n];
            let t = TensorRef {
                name: "ids",
                dtype: DType::I32,
                shape: &shape,
                bytes: &values,
            };
            let scan = Scan::IntRange {
                lo: 0,
                hi: 10,
                skip: None,
            };
            let (got, runs) = emulated(&t, scan, 1 << 20, 16);
            let cpu = Cpu::new().scan(t, scan).unwrap_or_else(|e| panic!("{e}"));
            assert_same(&cpu, &got, "dense run");
            let positions: Vec<u64> = got.first.iter().map(|p| p.0).collect();
            assert_eq!(
                &positions[..8],
                &[5, 20_016, 40_027, 60_038, 80_049, 100_060, 120_071, 140_082]
            );
            assert_eq!(positions[8], 150_001);
            // A few windows per factor of 4 in distance, not one per offender or per slot.
            assert!(runs <= 30, "{runs} passes");
        }

        #[test]
        fn keys_decode_to_the_values_they_encode() {
            let f32s = [
                f32::NEG_INFINITY,
                -3.5,
                -1e-40,
                0.0,
                1e-45,
                2.0,
                f32::MAX,
                f32::INFINITY,
            ];
            let b = Bounds::new(Lane::F32, Scan::NonFinite);
            for x in f32s {
                let (_, key, _) = judge(b, Scalar::Float(f64::from(x)));
                let key = key.unwrap_or_else(|| panic!("{x} has no key"));
                assert_eq!(unkey(Lane::F32, key), Scalar::Float(f64::from(x)));
            }
            let keys: Vec<u64> = f32s
                .iter()
                .filter_map(|&x| judge(b, Scalar::Float(f64::from(x))).1)
                .collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys keep the order");
            let b = Bounds::new(Lane::I64, Scan::NonFinite);
            for x in [i64::MIN, -1, 0, 1, i64::MAX] {
                let (_, key, _) = judge(b, Scalar::Int(x));
                assert_eq!(key.map(|k| unkey(Lane::I64, k)), Some(Scalar::Int(x)));
            }
        }

        #[test]
        fn bounds_follow_the_cpu_rounding_rules() {
            let b = Bounds::new(Lane::F32, Scan::FloatRange { lo: 0.1, hi: 10.0 });
            assert_eq!(f32::from_bits(b.lo as u32), 0.1f32);
            let b = Bounds::new(
                Lane::F32,
                Scan::IntRange {
                    lo: 16_777_217,
                    hi: 16_777_219,
                    skip: Some(16_777_217),
                },
            );
            // 2^24 + 1 is no f32: the first allowed f32 is 2^24 + 2, the last one too.
            assert_eq!(f32::from_bits(b.lo as u32), 16_777_218.0);
            assert_eq!(f32::from_bits(b.hi as u32), 16_777_218.0);
            assert_eq!(b.skip, None);
            let b = Bounds::new(
                Lane::I64,
                Scan::IntRange {
                    lo: 0,
                    hi: i64::MIN,
                    skip: None,
                },
            );
            assert_eq!((b.lo as i64, b.hi as i64), (i64::MAX, i64::MIN));
            let b = Bounds::new(Lane::I64, Scan::FloatRange { lo: 0.5, hi: 1.5 });
            assert_eq!((b.lo as i64, b.hi as i64), (1, 1));
        }

        #[test]
        fn result_words_with_more_collected_than_slots_are_clamped() {
            let mut words = vec![40, 1, 2, 3, NONE, 99];
            words.extend(10..26);
            let f = Found::from_words(&words, 16);
            assert_eq!(f.count, 40);
            assert_eq!(f.positions, (10..26).collect::<Vec<u64>>());
            assert!(!f.complete());
        }
    }
}
