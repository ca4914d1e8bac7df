use super::host::*;
use crate::replay::check::{Scalar, Scan, ScanOutput};
use crate::replay::cpu::Cpu;
use crate::replay::snapshot::{DType, TensorRef};
use crate::replay::{Backend, ReplayError};

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
    let first =
        |o: &ScanOutput| -> Vec<(u64, (bool, u64))> { o.first.iter().map(|(p, v)| (*p, bits(v))).collect() };
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
    let out = scan_chunked(&mut passes, tensor, bounds.lane, per_chunk).unwrap_or_else(|e| panic!("{e}"));
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
                        let what = format!("{dtype:?} n={n} {scan:?} chunk={per_chunk} slots={slots}");
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

#[test]
fn a_stub_libcuda_is_named_with_what_to_do() {
    use cudarc::driver::DriverError;
    use cudarc::driver::sys::CUresult;
    let hint = super::device::driver_hint(&DriverError(CUresult::CUDA_ERROR_STUB_LIBRARY));
    assert!(hint.contains("`stubs` folder off LD_LIBRARY_PATH"), "{hint}");
    assert_eq!(
        super::device::driver_hint(&DriverError(CUresult::CUDA_ERROR_NO_DEVICE)),
        ""
    );
}
