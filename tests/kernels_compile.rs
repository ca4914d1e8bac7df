//! Every GPU kernel compiles with NVRTC, to PTX and to CUBIN for sm_80 and sm_90, with no GPU.
//!
//! Needs libnvrtc on the library path (`pip install nvidia-cuda-nvrtc`, then LD_LIBRARY_PATH at
//! the folder holding `libnvrtc.so.*`). Without it the tests say SKIPPED, unless `CI` is set,
//! where they fail.
#![cfg(feature = "cuda")]

mod support;

use std::sync::Once;

use faultline::replay::ReplayError;
use faultline::replay::gpu::{Output, compile_kernels, compile_source, nvrtc_present, nvrtc_version};

/// Every kernel entry point the GPU backend loads.
const KERNELS: [&str; 12] = [
    "scan_u8",
    "scan_i8",
    "scan_i16",
    "scan_u16",
    "scan_i32",
    "scan_u32",
    "scan_i64",
    "scan_u64",
    "scan_f16",
    "scan_bf16",
    "scan_f32",
    "scan_f64",
];

/// Whether NVRTC is here; says so loudly when it is not (and fails under CI).
fn nvrtc_here() -> bool {
    if nvrtc_present() {
        return true;
    }
    // Once per run: every test of this file asks.
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        support::skip_unless_ci(
            "the kernel compile tests",
            "libnvrtc (pip install nvidia-cuda-nvrtc and put its folder on LD_LIBRARY_PATH)",
        );
    });
    false
}

fn compiled(arch: Option<&str>, output: Output) -> Vec<u8> {
    compile_kernels(arch, output).unwrap_or_else(|e| panic!("{arch:?} {output:?}: {e}"))
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn every_kernel_compiles_to_ptx_with_an_entry_point() {
    if !nvrtc_here() {
        return;
    }
    let version = nvrtc_version().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("NVRTC {}.{}", version.0, version.1);
    for arch in [None, Some("compute_80"), Some("compute_90")] {
        let ptx = String::from_utf8(compiled(arch, Output::Ptx)).unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.contains(".version"), "{arch:?}: no PTX header");
        for kernel in KERNELS {
            assert!(
                ptx.contains(&format!(".entry {kernel}(")),
                "{arch:?}: no entry {kernel}"
            );
        }
        // No 64-bit atomics lowered to a software loop, no local-memory spills in the scan.
        assert!(ptx.contains("atom.global.add.u64"), "{arch:?}");
        assert!(ptx.contains("atom.global.min.u64"), "{arch:?}");
        assert!(!ptx.contains(".local"), "{arch:?}: a kernel uses local memory");
    }
}

#[test]
fn every_kernel_compiles_to_a_cubin_for_ampere_and_hopper() {
    if !nvrtc_here() {
        return;
    }
    for arch in ["sm_80", "sm_90"] {
        let cubin = compiled(Some(arch), Output::Cubin);
        assert_eq!(&cubin[..4], b"\x7fELF", "{arch}: not an ELF image");
        for kernel in KERNELS {
            assert!(holds(&cubin, kernel), "{arch}: no symbol {kernel}");
        }
    }
}

#[test]
fn a_cubin_without_a_real_architecture_is_an_error() {
    if !nvrtc_here() {
        return;
    }
    let err = compile_kernels(Some("compute_90"), Output::Cubin).err();
    assert!(
        matches!(&err, Some(ReplayError::Kernel(m)) if m.contains("real architecture")),
        "{err:?}"
    );
}

#[test]
fn a_kernel_that_does_not_compile_reports_the_nvrtc_log() {
    if !nvrtc_here() {
        return;
    }
    let err = compile_source(
        "extern \"C\" __global__ void broken(int *x) { x[0] = undeclared_name; }",
        Some("sm_90"),
        Output::Cubin,
    )
    .err();
    assert!(
        matches!(&err, Some(ReplayError::Kernel(m)) if m.contains("undeclared_name")),
        "{err:?}"
    );
}
