//! Compiling the kernels with NVRTC (no GPU needed), and the CUBIN cache per compute capability.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char};
use std::panic::catch_unwind;
use std::sync::{Arc, Mutex, PoisonError};

use super::panic_text;
use crate::replay::ReplayError;

/// The kernel sources, by file name, compiled together as one program.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[("scan.cu", include_str!("../../../kernels/scan.cu"))];

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

pub(super) fn no_nvrtc() -> ReplayError {
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

/// CUBINs compiled in this process, by compute capability.
pub(super) fn cubin_for(cc: (i32, i32)) -> Result<Arc<Vec<u8>>, ReplayError> {
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
