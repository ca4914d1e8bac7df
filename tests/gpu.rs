//! The GPU backend gives exactly the CPU backend's scan results (random inputs of every dtype and
//! every scan kind, and the edge cases), and makes the real cuBLAS call.
//!
//! Needs a CUDA device, its driver and libnvrtc (and libcublas for the GEMM test). Without one
//! the tests print `SKIPPED (no GPU): <reason>` and pass, unless `FAULTLINE_REQUIRE_GPU` is set,
//! where they fail.
#![cfg(feature = "cuda")]

use std::io::Write;
use std::sync::{Once, OnceLock};

use faultline::replay::cpu::Cpu;
use faultline::replay::gpu::{Gpu, OFFENSE_SLOTS};
use faultline::replay::{
    Backend, BackendChoice, DType, GemmCall, MAX_OFFENSES, ReplayError, Scalar, Scan, ScanOutput, TensorRef,
    open_backend,
};

/// The device, opened once; `None` (said loudly) when there is none.
fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    match GPU.get_or_init(|| Gpu::open(0).map_err(|e| e.to_string())) {
        Ok(gpu) => Some(gpu),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// A device of its own, for the tests that change chunk or slot sizes.
fn fresh_gpu() -> Option<Gpu> {
    gpu()?;
    Gpu::open(0).map_err(|e| skip(&e.to_string())).ok()
}

fn skip(reason: &str) {
    assert!(
        std::env::var_os("FAULTLINE_REQUIRE_GPU").is_none(),
        "FAULTLINE_REQUIRE_GPU is set but no GPU opened: {reason}"
    );
    // Straight to stderr, past the test harness's capture, once per run.
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED (no GPU): {reason} ***\n*** set FAULTLINE_REQUIRE_GPU=1 to make this a failure ***\n"
        );
    });
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One value to store, converted to the dtype as `as` would.
#[derive(Debug, Clone, Copy)]
enum Val {
    Int(i64),
    Float(f64),
    Bits(u64),
}

fn encode(dtype: DType, v: Val) -> Vec<u8> {
    let size = dtype.size();
    match v {
        Val::Bits(b) => b.to_le_bytes()[..size].to_vec(),
        Val::Int(i) => match dtype {
            DType::Bool => vec![u8::from(i != 0)],
            DType::F16 => half::f16::from_f64(i as f64).to_le_bytes().to_vec(),
            DType::BF16 => half::bf16::from_f64(i as f64).to_le_bytes().to_vec(),
            DType::F32 => (i as f32).to_le_bytes().to_vec(),
            DType::F64 => (i as f64).to_le_bytes().to_vec(),
            _ => i.to_le_bytes()[..size].to_vec(),
        },
        Val::Float(f) => match dtype {
            DType::Bool => vec![u8::from(f != 0.0)],
            DType::U8 => vec![f as u8],
            DType::I8 => (f as i8).to_le_bytes().to_vec(),
            DType::I16 => (f as i16).to_le_bytes().to_vec(),
            DType::U16 => (f as u16).to_le_bytes().to_vec(),
            DType::I32 => (f as i32).to_le_bytes().to_vec(),
            DType::U32 => (f as u32).to_le_bytes().to_vec(),
            DType::I64 => (f as i64).to_le_bytes().to_vec(),
            DType::U64 => (f as u64).to_le_bytes().to_vec(),
            DType::F16 => half::f16::from_f64(f).to_le_bytes().to_vec(),
            DType::BF16 => half::bf16::from_f64(f).to_le_bytes().to_vec(),
            DType::F32 => (f as f32).to_le_bytes().to_vec(),
            DType::F64 => f.to_le_bytes().to_vec(),
        },
    }
}

fn encode_all(dtype: DType, values: &[Val]) -> Vec<u8> {
    values.iter().flat_map(|&v| encode(dtype, v)).collect()
}

/// Values around the bounds the scans below use, the extremes, NaN, ±Inf, ±0, subnormals.
const SPECIAL: [Val; 22] = [
    Val::Float(f64::NAN),
    Val::Float(f64::INFINITY),
    Val::Float(f64::NEG_INFINITY),
    Val::Float(0.0),
    Val::Float(-0.0),
    Val::Float(1.0),
    Val::Float(0.1),
    Val::Float(0.099_999_99),
    Val::Float(10.0),
    Val::Float(10.000_001),
    Val::Float(7.25),
    Val::Float(-0.5),
    Val::Float(1e-40),
    Val::Float(-1e-45),
    Val::Float(6e-8),
    Val::Int(-100),
    Val::Int(-1),
    Val::Int(9),
    Val::Int(10),
    Val::Int(i64::MIN),
    Val::Int(i64::MAX),
    Val::Bits(u64::MAX),
];

/// `n` values: mostly small integers (a few out of [0, 10)), some random bits, some special.
fn random_values(rng: &mut Rng, n: usize, bad_percent: u64) -> Vec<Val> {
    (0..n)
        .map(|_| match rng.below(100) {
            p if p < bad_percent => SPECIAL[rng.below(SPECIAL.len() as u64) as usize],
            p if p < bad_percent + 5 => Val::Bits(rng.next()),
            _ => Val::Int(rng.below(10) as i64),
        })
        .collect()
}

/// Every kind of scan, with bounds that fall between and on representable values.
fn scans() -> Vec<Scan> {
    vec![
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
        Scan::IntRange {
            lo: 16_777_217,
            hi: 16_777_219,
            skip: None,
        },
        Scan::NonFinite,
        Scan::FloatRange { lo: 0.0, hi: 1.0 },
        Scan::FloatRange { lo: 0.1, hi: 10.0 },
        Scan::FloatRange { lo: -0.5, hi: 7.25 },
        Scan::FloatRange {
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
        },
    ]
}

fn tensor<'a>(dtype: DType, shape: &'a [u64], bytes: &'a [u8]) -> TensorRef<'a> {
    TensorRef {
        name: "t",
        dtype,
        shape,
        bytes,
    }
}

/// A scalar compared bit for bit (NaN equal to itself, -0 unequal to +0).
fn bits(s: &Scalar) -> (bool, u64) {
    match *s {
        Scalar::Int(i) => (false, i as u64),
        Scalar::Float(f) => (true, f.to_bits()),
    }
}

fn same(a: &ScanOutput, b: &ScanOutput) -> bool {
    a.elements == b.elements
        && a.offending == b.offending
        && a.min.as_ref().map(bits) == b.min.as_ref().map(bits)
        && a.max.as_ref().map(bits) == b.max.as_ref().map(bits)
        && a.first.len() == b.first.len()
        && a.first
            .iter()
            .zip(&b.first)
            .all(|(x, y)| x.0 == y.0 && bits(&x.1) == bits(&y.1))
}

/// Runs `scan` on both backends, asserts they agree, and returns the GPU's result.
fn agree(gpu: &Gpu, dtype: DType, bytes: &[u8], scan: Scan) -> ScanOutput {
    let shape = [(bytes.len() / dtype.size()) as u64];
    let t = tensor(dtype, &shape, bytes);
    let cpu = Cpu::new()
        .scan(t, scan)
        .unwrap_or_else(|e| panic!("cpu {dtype:?} {scan:?}: {e}"));
    let got = gpu
        .scan(t, scan)
        .unwrap_or_else(|e| panic!("gpu {dtype:?} {scan:?}: {e}"));
    assert!(
        same(&cpu, &got),
        "{dtype:?} {scan:?} on {} elements:\n cpu {cpu:?}\n gpu {got:?}",
        shape[0]
    );
    got
}

#[test]
fn random_tensors_of_every_dtype_and_scan_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(6);
    for n in [1usize, 2, 3, 7, 255, 1000, 4097, 65_537, 300_001] {
        for dtype in DType::ALL {
            let bytes = encode_all(dtype, &random_values(&mut rng, n, 3));
            for scan in scans() {
                agree(gpu, dtype, &bytes, scan);
            }
        }
    }
}

#[test]
fn dense_random_offenders_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(7);
    for dtype in DType::ALL {
        let bytes = encode_all(dtype, &random_values(&mut rng, 100_003, 60));
        for scan in scans() {
            agree(gpu, dtype, &bytes, scan);
        }
    }
}

#[test]
fn empty_tensors_have_no_offenders_and_no_min() {
    let Some(gpu) = gpu() else { return };
    for dtype in DType::ALL {
        for scan in scans() {
            let out = agree(gpu, dtype, &[], scan);
            assert_eq!((out.elements, out.offending, out.min), (0, 0, None));
        }
    }
}

#[test]
fn one_element_tensors_match_good_or_bad() {
    let Some(gpu) = gpu() else { return };
    for dtype in DType::ALL {
        for v in SPECIAL.iter().chain(&[Val::Int(3)]) {
            let bytes = encode(dtype, *v);
            for scan in scans() {
                let out = agree(gpu, dtype, &bytes, scan);
                assert_eq!(out.elements, 1);
            }
        }
    }
}

#[test]
fn all_bad_reports_every_offender_and_the_first_sixteen_in_order() {
    let Some(gpu) = gpu() else { return };
    let n = 200_000usize;
    let labels = Scan::IntRange {
        lo: 0,
        hi: 2,
        skip: Some(-100),
    };
    for dtype in DType::ALL {
        if dtype == DType::Bool {
            continue;
        }
        let bytes = encode_all(dtype, &vec![Val::Int(5); n]);
        let out = agree(gpu, dtype, &bytes, labels);
        assert_eq!(out.offending, n as u64, "{dtype:?}");
        let positions: Vec<u64> = out.first.iter().map(|p| p.0).collect();
        assert_eq!(positions, (0..MAX_OFFENSES as u64).collect::<Vec<_>>());
    }
}

#[test]
fn only_the_last_element_bad_is_found_at_sizes_off_the_block() {
    let Some(gpu) = gpu() else { return };
    for n in [17usize, 4099, 65_535, 1_000_003] {
        for dtype in [
            DType::U8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::F16,
            DType::F64,
        ] {
            let mut values = vec![Val::Int(1); n];
            values[n - 1] = Val::Int(2);
            let bytes = encode_all(dtype, &values);
            let scan = Scan::IntRange {
                lo: 0,
                hi: 2,
                skip: None,
            };
            let out = agree(gpu, dtype, &bytes, scan);
            assert_eq!(out.offending, 1);
            assert_eq!(out.first[0].0, (n - 1) as u64, "{dtype:?} n={n}");
        }
    }
}

#[test]
fn more_offenders_than_device_slots_still_give_the_first_sixteen() {
    let Some(gpu) = gpu() else { return };
    let n = 20 * OFFENSE_SLOTS + 5;
    // Offenders from position 1000 on, every third one, and a lone one at 37.
    let values: Vec<Val> = (0..n)
        .map(|i| {
            Val::Int(if i == 37 || (i >= 1000 && i % 3 == 0) {
                50
            } else {
                1
            })
        })
        .collect();
    let scan = Scan::IntRange {
        lo: 0,
        hi: 10,
        skip: None,
    };
    for dtype in [DType::I8, DType::I32, DType::I64, DType::BF16, DType::F32] {
        let out = agree(gpu, dtype, &encode_all(dtype, &values), scan);
        assert_eq!(out.first[0].0, 37);
        assert_eq!(out.first[1].0, 1002);
        assert_eq!(out.first[15].0, 1002 + 14 * 3);
    }
}

#[test]
fn few_slots_and_small_chunks_force_the_windowed_rescan_across_chunks() {
    let Some(gpu) = fresh_gpu() else { return };
    let gpu = gpu.with_chunk_bytes(4096).with_offense_slots(16);
    let mut rng = Rng(8);
    for dtype in DType::ALL {
        for bad in [1, 30, 90] {
            let bytes = encode_all(dtype, &random_values(&mut rng, 20_011, bad));
            for scan in scans() {
                agree(&gpu, dtype, &bytes, scan);
            }
        }
        // Sparse offenders, then a dense run late in the tensor, spread over many chunks.
        let values: Vec<Val> = (0..50_000)
            .map(|i| Val::Int(if i % 7919 == 0 || i > 40_000 { 99 } else { 1 }))
            .collect();
        let scan = Scan::IntRange {
            lo: 0,
            hi: 10,
            skip: None,
        };
        agree(&gpu, dtype, &encode_all(dtype, &values), scan);
    }
}

#[test]
fn values_at_the_exact_bounds_are_allowed_and_one_past_them_offend() {
    let Some(gpu) = gpu() else { return };
    let ints = [-1, 0, 9, 10, -100].map(Val::Int);
    let scan = Scan::IntRange {
        lo: 0,
        hi: 10,
        skip: Some(-100),
    };
    for dtype in [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
    ] {
        let out = agree(gpu, dtype, &encode_all(dtype, &ints), scan);
        let positions: Vec<u64> = out.first.iter().map(|p| p.0).collect();
        assert_eq!(positions, vec![0, 3], "{dtype:?}");
    }
    // 0.1 is no f32: the f32 nearest above it is allowed, the one below is not.
    let below = f64::from(0.1f32.next_down());
    let floats = [
        Val::Float(0.1),
        Val::Float(below),
        Val::Float(10.0),
        Val::Float(10.000_01),
    ];
    let out = agree(
        gpu,
        DType::F32,
        &encode_all(DType::F32, &floats),
        Scan::FloatRange { lo: 0.1, hi: 10.0 },
    );
    assert_eq!(
        out.first,
        vec![
            (1, Scalar::Float(below)),
            (3, Scalar::Float(f64::from(10.000_01f32)))
        ]
    );
}

#[test]
fn nan_and_inf_offend_and_nan_is_never_a_min_or_max() {
    let Some(gpu) = gpu() else { return };
    let values = [
        Val::Float(1.0),
        Val::Float(f64::NAN),
        Val::Float(-2.5),
        Val::Float(f64::INFINITY),
        Val::Float(f64::NEG_INFINITY),
    ];
    for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        let out = agree(gpu, dtype, &encode_all(dtype, &values), Scan::NonFinite);
        assert_eq!(out.offending, 3);
        assert_eq!(out.min, Some(Scalar::Float(f64::NEG_INFINITY)));
        assert_eq!(out.max, Some(Scalar::Float(f64::INFINITY)));
        let out = agree(
            gpu,
            dtype,
            &encode_all(dtype, &[Val::Float(f64::NAN); 3]),
            Scan::NonFinite,
        );
        assert_eq!((out.offending, out.min, out.max), (3, None, None));
    }
}

#[test]
fn a_zero_min_or_max_keeps_the_sign_of_the_first_zero() {
    let Some(gpu) = gpu() else { return };
    for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for (values, sign_negative) in [
            ([Val::Float(-0.0), Val::Float(0.0), Val::Float(f64::NAN)], true),
            ([Val::Float(0.0), Val::Float(-0.0), Val::Float(f64::NAN)], false),
        ] {
            let out = agree(gpu, dtype, &encode_all(dtype, &values), Scan::NonFinite);
            let min = match out.min {
                Some(Scalar::Float(v)) => v,
                other => panic!("{other:?}"),
            };
            assert_eq!(min, 0.0);
            assert_eq!(min.is_sign_negative(), sign_negative, "{dtype:?}");
        }
        // Past the CPU's 16 lanes: -0.0 at index 1 (lane 1), +0.0 at index 16 (lane 0).
        let mut values = vec![Val::Float(1.0); 17];
        values[1] = Val::Float(-0.0);
        values[16] = Val::Float(0.0);
        let out = agree(gpu, dtype, &encode_all(dtype, &values), Scan::NonFinite);
        assert!(
            matches!(out.min, Some(Scalar::Float(m)) if m == 0.0 && m.is_sign_negative()),
            "{dtype:?}: {:?}",
            out.min
        );
    }
}

#[test]
fn uint64_above_i64_max_saturates_like_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let bytes = encode_all(DType::U64, &[Val::Bits(u64::MAX), Val::Int(1)]);
    let scan = Scan::IntRange {
        lo: 0,
        hi: 2,
        skip: None,
    };
    let out = agree(gpu, DType::U64, &bytes, scan);
    assert_eq!(out.first, vec![(0, Scalar::Int(i64::MAX))]);
}

#[test]
fn bad_inputs_are_the_same_errors_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let err = gpu
        .scan(tensor(DType::I64, &[2], &[0; 12]), Scan::NonFinite)
        .err();
    assert!(
        matches!(&err, Some(ReplayError::Check(m)) if m.contains("12 bytes")),
        "{err:?}"
    );
    let err = gpu
        .scan(
            tensor(DType::F32, &[1], &[0; 4]),
            Scan::FloatRange {
                lo: f64::NAN,
                hi: 1.0,
            },
        )
        .err();
    assert!(
        matches!(&err, Some(ReplayError::Check(m)) if m == "a value range bound is NaN"),
        "{err:?}"
    );
}

#[test]
fn scans_from_several_threads_agree() {
    let Some(gpu) = gpu() else { return };
    let bytes = encode_all(DType::I64, &random_values(&mut Rng(9), 100_000, 20));
    let scan = Scan::IntRange {
        lo: 0,
        hi: 10,
        skip: Some(-100),
    };
    let expected = agree(gpu, DType::I64, &bytes, scan);
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| agree(gpu, DType::I64, &bytes, scan)))
            .collect();
        for run in runs {
            let out = run.join().unwrap_or_else(|_| panic!("a scan thread panicked"));
            assert!(same(&out, &expected));
        }
    });
}

#[test]
fn the_backend_is_named_after_the_device_and_open_backend_finds_it() {
    let Some(gpu) = gpu() else { return };
    assert_eq!(gpu.name(), format!("gpu:{}", gpu.device_name()));
    let backend = open_backend(BackendChoice::Gpu).unwrap_or_else(|e| panic!("{e}"));
    assert!(backend.name().starts_with("gpu:"), "{}", backend.name());
    let auto = open_backend(BackendChoice::Auto).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(auto.name(), backend.name());
}

fn gemm(m: i64, n: i64, k: i64, lda: i64, dtype: DType) -> GemmCall {
    GemmCall {
        transa: false,
        transb: false,
        m,
        n,
        k,
        lda,
        ldb: k,
        ldc: m,
        a_dtype: dtype,
        b_dtype: dtype,
    }
}

#[test]
fn the_real_cublas_call_succeeds_on_valid_shapes_and_reports_invalid_ones() {
    let Some(gpu) = gpu() else { return };
    let status = |call: &GemmCall| gpu.gemm_status(call).map(|r| r.map_err(|e| e.to_string()));
    match status(&gemm(16, 32, 64, 16, DType::F16)) {
        Some(Err(e)) if e.contains("libcublas") => return skip(&e),
        other => assert_eq!(other, Some(Ok("CUBLAS_STATUS_SUCCESS".to_string()))),
    }
    for dtype in [DType::BF16, DType::F32, DType::F64] {
        assert_eq!(
            status(&gemm(8, 4, 6, 8, dtype)),
            Some(Ok("CUBLAS_STATUS_SUCCESS".to_string())),
            "{dtype:?}"
        );
    }
    assert_eq!(
        status(&gemm(16, 32, 64, 8, DType::F32)),
        Some(Ok("CUBLAS_STATUS_INVALID_VALUE".to_string()))
    );
    let huge = status(&gemm(1 << 20, 1 << 20, 1 << 20, 1 << 20, DType::F32));
    assert!(
        matches!(&huge, Some(Err(e)) if e.contains("over the")),
        "{huge:?}"
    );
}

/// Calls around every limit cuBLAS checks: each transpose, sizes 0 and 1 and odd ones, each
/// leading dimension one short, exact and padded, and mixed dtypes.
fn gemm_calls() -> Vec<GemmCall> {
    let mut calls = Vec::new();
    for (transa, transb) in [(false, false), (true, false), (false, true), (true, true)] {
        for (m, n, k) in [
            (0, 3, 5),
            (1, 1, 1),
            (7, 5, 3),
            (16, 0, 8),
            (5, 9, 0),
            (33, 17, 65),
        ] {
            let need_a = if transa { k } else { m };
            let need_b = if transb { n } else { k };
            let exact = (need_a.max(1), need_b.max(1), m.max(1));
            let mut lds = vec![exact, (exact.0 + 3, exact.1 + 1, exact.2 + 2)];
            lds.push((exact.0 - 1, exact.1, exact.2));
            lds.push((exact.0, exact.1 - 1, exact.2));
            lds.push((exact.0, exact.1, exact.2 - 1));
            for (lda, ldb, ldc) in lds {
                calls.push(GemmCall {
                    transa,
                    transb,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    a_dtype: DType::F32,
                    b_dtype: DType::F32,
                });
            }
        }
    }
    let mixed = GemmCall {
        b_dtype: DType::F32,
        ..gemm(8, 4, 6, 8, DType::F16)
    };
    calls.push(mixed);
    calls
}

#[test]
fn the_cpu_judgement_of_a_gemm_agrees_with_the_real_cublas_call() {
    let Some(gpu) = gpu() else { return };
    let mut disagreements = Vec::new();
    for call in gemm_calls() {
        let status = match gpu.gemm_status(&call) {
            Some(Ok(status)) => status,
            Some(Err(e)) if e.to_string().contains("libcublas") => return skip(&e.to_string()),
            other => panic!("{call:?}: {other:?}"),
        };
        let problems = faultline::replay::check::judge_gemm(&call);
        if problems.is_empty() != (status == "CUBLAS_STATUS_SUCCESS") {
            disagreements.push(format!("{call:?}: cuBLAS {status}, judged {problems:?}"));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} calls judged otherwise than cuBLAS:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
