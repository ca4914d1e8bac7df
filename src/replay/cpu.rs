//! The CPU backend: always there, multithreaded, streaming over the tensor in chunks.
//!
//! Every [`Scan`] is the same test on every element: a value offends when it lies outside the
//! closed interval `[a, b]` (NaN always does) and is not the skipped value. The scan's bounds are
//! first turned into that interval in the element's own arithmetic (`i64` for integers and bool,
//! `f32` for f16 / bf16 / f32, `f64` for f64) without rounding errors, so the inner loop is a
//! branch-free compare, count, min and max that the compiler vectorizes. A block is read a
//! second time, to collect positions, only when it holds an offending value and fewer than
//! [`MAX_OFFENSES`] were found so far.
//!
//! Meaning of each scan on each kind of tensor (the GPU backend gives the same results):
//! - [`Scan::IntRange`]: integers outside `[lo, hi)` offend unless equal to `skip`; on a float
//!   tensor, NaN and every value outside `[lo, hi)` offend (fractions inside are allowed).
//! - [`Scan::NonFinite`]: NaN and ±Inf offend; an integer tensor has no offending value.
//! - [`Scan::FloatRange`]: values outside `[lo, hi]` and NaN offend; integers are compared exactly.
//! - `uint64` values above `i64::MAX` read as `i64::MAX`; bool reads as 0 / 1 (its byte);
//!   NaN is never a min or a max.

use std::num::NonZeroUsize;

use super::check::{Scalar, Scan, ScanOutput};
use super::snapshot::{DType, TensorRef};
use super::{Backend, MAX_OFFENSES, ReplayError, validate_scan};

/// Elements per block: counted in one pass, revisited only when it holds offending values.
const BLOCK: usize = 4096;

/// Independent accumulators in the inner loop (one vector register's worth or two).
const LANES: usize = 16;

/// Tensors below this many bytes are scanned on the calling thread.
const PARALLEL_BYTES: usize = 4 << 20;

/// The CPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    threads: usize,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu::new()
    }
}

impl Cpu {
    /// A backend using every core the process may run on.
    pub fn new() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        Cpu { threads }
    }

    /// A backend using `threads` threads (at least one) for large tensors.
    pub fn with_threads(threads: usize) -> Self {
        Cpu {
            threads: threads.max(1),
        }
    }

    /// Threads used for large tensors.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

impl Backend for Cpu {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn scan(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError> {
        validate_scan(&tensor, scan)?;
        let threads = self.threads;
        let b = tensor.bytes;
        Ok(match tensor.dtype {
            DType::Bool | DType::U8 => run::<1, i64>(b, scan, threads, |x| i64::from(x[0])),
            DType::I8 => run::<1, i64>(b, scan, threads, |x| i64::from(i8::from_le_bytes(*x))),
            DType::I16 => run::<2, i64>(b, scan, threads, |x| i64::from(i16::from_le_bytes(*x))),
            DType::U16 => run::<2, i64>(b, scan, threads, |x| i64::from(u16::from_le_bytes(*x))),
            DType::I32 => run::<4, i64>(b, scan, threads, |x| i64::from(i32::from_le_bytes(*x))),
            DType::U32 => run::<4, i64>(b, scan, threads, |x| i64::from(u32::from_le_bytes(*x))),
            DType::I64 => run::<8, i64>(b, scan, threads, |x| i64::from_le_bytes(*x)),
            DType::U64 => run::<8, i64>(b, scan, threads, |x| {
                i64::try_from(u64::from_le_bytes(*x)).unwrap_or(i64::MAX)
            }),
            DType::F16 => run::<2, f32>(b, scan, threads, |x| half::f16::from_le_bytes(*x).to_f32()),
            DType::BF16 => run::<2, f32>(b, scan, threads, |x| half::bf16::from_le_bytes(*x).to_f32()),
            DType::F32 => run::<4, f32>(b, scan, threads, |x| f32::from_le_bytes(*x)),
            DType::F64 => run::<8, f64>(b, scan, threads, |x| f64::from_le_bytes(*x)),
        })
    }
}

/// The number type a dtype is compared in.
trait Lane: Copy + PartialOrd + Send + Sync {
    /// Starting value of a running minimum (every value is `<=` it, NaN aside).
    const TOP: Self;
    /// Starting value of a running maximum.
    const BOTTOM: Self;
    /// The smallest lane value `>= lo`, if any.
    fn at_least_int(lo: i64) -> Option<Self>;
    /// The largest lane value `< hi`, if any.
    fn below_int(hi: i64) -> Option<Self>;
    /// The smallest lane value `>= lo`, if any.
    fn at_least_float(lo: f64) -> Option<Self>;
    /// The largest lane value `<= hi`, if any.
    fn at_most_float(hi: f64) -> Option<Self>;
    /// `v` when the lane holds it exactly.
    fn exact(v: i64) -> Option<Self>;
    /// The interval of values nothing offends against (for [`Scan::NonFinite`]).
    fn finite() -> (Self, Self);
    /// The value as reported.
    fn scalar(self) -> Scalar;
}

impl Lane for i64 {
    const TOP: Self = i64::MAX;
    const BOTTOM: Self = i64::MIN;
    fn at_least_int(lo: i64) -> Option<Self> {
        Some(lo)
    }
    fn below_int(hi: i64) -> Option<Self> {
        hi.checked_sub(1)
    }
    fn at_least_float(lo: f64) -> Option<Self> {
        let c = lo.ceil();
        // i64::MAX as f64 is 2^63, one past the largest i64.
        (c < i64::MAX as f64).then_some(c as i64)
    }
    fn at_most_float(hi: f64) -> Option<Self> {
        let f = hi.floor();
        (f >= i64::MIN as f64).then_some(f as i64)
    }
    fn exact(v: i64) -> Option<Self> {
        Some(v)
    }
    fn finite() -> (Self, Self) {
        (i64::MIN, i64::MAX)
    }
    fn scalar(self) -> Scalar {
        Scalar::Int(self)
    }
}

/// Float lanes: the rounding of bounds into the lane is corrected to keep comparisons exact.
macro_rules! float_lane {
    ($t:ty) => {
        impl Lane for $t {
            const TOP: Self = <$t>::INFINITY;
            const BOTTOM: Self = <$t>::NEG_INFINITY;
            fn at_least_int(lo: i64) -> Option<Self> {
                let c = lo as $t;
                Some(if (c as i128) < i128::from(lo) {
                    c.next_up()
                } else {
                    c
                })
            }
            fn below_int(hi: i64) -> Option<Self> {
                let c = hi as $t;
                Some(if (c as i128) >= i128::from(hi) {
                    c.next_down()
                } else {
                    c
                })
            }
            fn at_least_float(lo: f64) -> Option<Self> {
                let c = lo as $t;
                Some(if f64::from(c) < lo { c.next_up() } else { c })
            }
            fn at_most_float(hi: f64) -> Option<Self> {
                let c = hi as $t;
                Some(if f64::from(c) > hi { c.next_down() } else { c })
            }
            fn exact(v: i64) -> Option<Self> {
                let c = v as $t;
                ((c as i128) == i128::from(v)).then_some(c)
            }
            fn finite() -> (Self, Self) {
                (<$t>::MIN, <$t>::MAX)
            }
            fn scalar(self) -> Scalar {
                Scalar::Float(f64::from(self))
            }
        }
    };
}
float_lane!(f32);
float_lane!(f64);

/// A scan as the lane sees it: values outside `[lo, hi]` offend unless equal to `skip`.
#[derive(Debug, Clone, Copy)]
struct Test<L> {
    lo: L,
    hi: L,
    skip: Option<L>,
}

impl<L: Lane> Test<L> {
    fn new(scan: Scan) -> Self {
        let (lo, hi, skip) = match scan {
            Scan::IntRange { lo, hi, skip } => {
                (L::at_least_int(lo), L::below_int(hi), skip.and_then(L::exact))
            }
            Scan::NonFinite => {
                let (lo, hi) = L::finite();
                (Some(lo), Some(hi), None)
            }
            Scan::FloatRange { lo, hi } => (L::at_least_float(lo), L::at_most_float(hi), None),
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) => Test { lo, hi, skip },
            // No lane value is allowed: an interval nothing lies in.
            _ => Test {
                lo: L::TOP,
                hi: L::BOTTOM,
                skip,
            },
        }
    }
}

/// What one run over part of a tensor found.
#[derive(Debug, Clone)]
struct Partial<L> {
    offending: u64,
    min: L,
    max: L,
    first: Vec<(u64, L)>,
}

impl<L: Lane> Partial<L> {
    fn empty() -> Self {
        Partial {
            offending: 0,
            min: L::TOP,
            max: L::BOTTOM,
            first: Vec::new(),
        }
    }

    /// Adds the next part (in position order).
    fn merge(&mut self, next: Partial<L>) {
        self.offending += next.offending;
        if next.min < self.min {
            self.min = next.min;
        }
        if next.max > self.max {
            self.max = next.max;
        }
        let room = MAX_OFFENSES.saturating_sub(self.first.len());
        self.first.extend(next.first.into_iter().take(room));
    }
}

/// Scans `bytes` (elements of `N` bytes read by `read`) with `threads` threads.
fn run<const N: usize, L: Lane>(
    bytes: &[u8],
    scan: Scan,
    threads: usize,
    read: impl Fn(&[u8; N]) -> L + Copy + Send + Sync,
) -> ScanOutput {
    let (elements, _) = bytes.as_chunks::<N>();
    let test = Test::<L>::new(scan);
    let parts = if bytes.len() < PARALLEL_BYTES {
        1
    } else {
        threads.max(1)
    };
    // Whole blocks per thread, so that block boundaries do not depend on the thread count.
    let per_part = elements.len().div_ceil(parts).div_ceil(BLOCK) * BLOCK;
    let total = if parts == 1 || per_part == 0 {
        scan_part(elements, 0, test, read)
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = elements
                .chunks(per_part)
                .enumerate()
                .map(|(i, part)| s.spawn(move || scan_part(part, (i * per_part) as u64, test, read)))
                .collect();
            let mut total = Partial::empty();
            for handle in handles {
                match handle.join() {
                    Ok(part) => total.merge(part),
                    // A scan cannot panic; should one, report it where it happened.
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            total
        })
    };
    // min <= max exactly when some value was not NaN.
    let seen = total.min <= total.max;
    // -0.0 and 0.0 compare equal, so which zero the lanes kept is arbitrary: a zero min or max
    // is reported as the first zero of the tensor, with its sign (the GPU does the same).
    let first_zero_if_zero = |s: Scalar| match s {
        // The pattern 0.0 matches -0.0 as well (float patterns compare with ==).
        Scalar::Float(0.0) => elements
            .iter()
            .map(|x| read(x).scalar())
            .find(|v| matches!(v, Scalar::Float(z) if *z == 0.0))
            .unwrap_or(s),
        other => other,
    };
    ScanOutput {
        elements: elements.len() as u64,
        offending: total.offending,
        min: seen.then(|| first_zero_if_zero(total.min.scalar())),
        max: seen.then(|| first_zero_if_zero(total.max.scalar())),
        first: total.first.into_iter().map(|(i, v)| (i, v.scalar())).collect(),
    }
}

/// Scans one contiguous part whose first element is at flat position `base`, with AVX2 where
/// the CPU has it (the baseline x86-64 has no 64-bit integer vector compare).
fn scan_part<const N: usize, L: Lane>(
    elements: &[[u8; N]],
    base: u64,
    test: Test<L>,
    read: impl Fn(&[u8; N]) -> L + Copy,
) -> Partial<L> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: scan_part_avx2 only needs the CPU to have AVX2, detected just above.
        return unsafe { scan_part_avx2(elements, base, test, read) };
    }
    scan_part_portable(elements, base, test, read)
}

/// [`scan_part_portable`] compiled with AVX2 (it is inlined here).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_part_avx2<const N: usize, L: Lane>(
    elements: &[[u8; N]],
    base: u64,
    test: Test<L>,
    read: impl Fn(&[u8; N]) -> L + Copy,
) -> Partial<L> {
    scan_part_portable(elements, base, test, read)
}

#[inline(always)]
fn scan_part_portable<const N: usize, L: Lane>(
    elements: &[[u8; N]],
    base: u64,
    test: Test<L>,
    read: impl Fn(&[u8; N]) -> L + Copy,
) -> Partial<L> {
    match test.skip {
        Some(skip) => scan_blocks::<N, L, true>(elements, base, test, skip, read),
        None => scan_blocks::<N, L, false>(elements, base, test, test.lo, read),
    }
}

#[inline(always)]
fn scan_blocks<const N: usize, L: Lane, const SKIP: bool>(
    elements: &[[u8; N]],
    base: u64,
    test: Test<L>,
    skip: L,
    read: impl Fn(&[u8; N]) -> L + Copy,
) -> Partial<L> {
    let (lo, hi) = (test.lo, test.hi);
    let offends = move |v: L| {
        let outside = !((v >= lo) & (v <= hi));
        if SKIP { outside & (v != skip) } else { outside }
    };
    let mut out = Partial::empty();
    for (b, block) in elements.chunks(BLOCK).enumerate() {
        // LANES independent running counts, minima and maxima: no dependency from one element
        // to the next, so the compiler turns them into vector registers (float min / max
        // included, which it cannot vectorize as one running value).
        let mut counts = [0u64; LANES];
        let (mut mins, mut maxs) = ([out.min; LANES], [out.max; LANES]);
        let (groups, rest) = block.as_chunks::<LANES>();
        for group in groups {
            for j in 0..LANES {
                let v = read(&group[j]);
                counts[j] += u64::from(offends(v));
                mins[j] = if v < mins[j] { v } else { mins[j] };
                maxs[j] = if v > maxs[j] { v } else { maxs[j] };
            }
        }
        for (j, x) in rest.iter().enumerate() {
            let v = read(x);
            counts[j] += u64::from(offends(v));
            mins[j] = if v < mins[j] { v } else { mins[j] };
            maxs[j] = if v > maxs[j] { v } else { maxs[j] };
        }
        let count: u64 = counts.iter().sum();
        let (mut min, mut max) = (out.min, out.max);
        for j in 0..LANES {
            if mins[j] < min {
                min = mins[j];
            }
            if maxs[j] > max {
                max = maxs[j];
            }
        }
        out.min = min;
        out.max = max;
        out.offending += count;
        if count > 0 && out.first.len() < MAX_OFFENSES {
            let start = base + (b * BLOCK) as u64;
            let found = block
                .iter()
                .enumerate()
                .map(|(i, x)| (start + i as u64, read(x)))
                .filter(|&(_, v)| offends(v))
                .take(MAX_OFFENSES - out.first.len());
            out.first.extend(found);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor<'a>(dtype: DType, shape: &'a [u64], bytes: &'a [u8]) -> TensorRef<'a> {
        TensorRef {
            name: "t",
            dtype,
            shape,
            bytes,
        }
    }

    fn i64_bytes(values: &[i64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn scan(cpu: Cpu, dtype: DType, bytes: &[u8], scan: Scan) -> ScanOutput {
        let shape = [(bytes.len() / dtype.size()) as u64];
        cpu.scan(tensor(dtype, &shape, bytes), scan)
            .unwrap_or_else(|e| panic!("scan failed: {e}"))
    }

    const LABELS: Scan = Scan::IntRange {
        lo: 0,
        hi: 2,
        skip: Some(-100),
    };

    #[test]
    fn the_vectorized_and_the_portable_scans_agree() {
        // Pseudo-random int64 labels (some -100, some out of range) and f32 values with NaN / Inf.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let labels: Vec<[u8; 8]> = (0..20_011)
            .map(|_| match next() % 1000 {
                0 => (-100i64).to_le_bytes(),
                1 => 7i64.to_le_bytes(),
                2 => (-3i64).to_le_bytes(),
                r => ((r % 2) as i64).to_le_bytes(),
            })
            .collect();
        let read_i64 = |b: &[u8; 8]| i64::from_le_bytes(*b);
        let test = Test::<i64>::new(LABELS);
        let (fast, portable) = (
            scan_part(&labels, 5, test, read_i64),
            scan_part_portable(&labels, 5, test, read_i64),
        );
        assert_eq!(
            (fast.offending, fast.min, fast.max, &fast.first),
            (portable.offending, portable.min, portable.max, &portable.first)
        );
        let floats: Vec<[u8; 4]> = (0..20_011)
            .map(|_| match next() % 500 {
                0 => f32::NAN.to_le_bytes(),
                1 => f32::NEG_INFINITY.to_le_bytes(),
                r => (r as f32 - 250.0).to_le_bytes(),
            })
            .collect();
        let read_f32 = |b: &[u8; 4]| f32::from_le_bytes(*b);
        let test = Test::<f32>::new(Scan::NonFinite);
        let (fast, portable) = (
            scan_part(&floats, 0, test, read_f32),
            scan_part_portable(&floats, 0, test, read_f32),
        );
        assert_eq!(fast.offending, portable.offending);
        assert_eq!((fast.min, fast.max), (portable.min, portable.max));
        let positions = |p: &Partial<f32>| p.first.iter().map(|(i, _)| *i).collect::<Vec<_>>();
        assert_eq!(positions(&fast), positions(&portable));
    }

    #[test]
    fn a_zero_min_has_the_sign_of_the_first_zero_in_the_tensor() {
        // Lane 1 holds -0.0 and lane 0 +0.0: the lanes alone would report +0.0.
        let mut values = vec![1.0f32; 17];
        values[1] = -0.0;
        values[16] = 0.0;
        let out = scan(
            Cpu::with_threads(1),
            DType::F32,
            &f32_bytes(&values),
            Scan::NonFinite,
        );
        match out.min {
            Some(Scalar::Float(min)) => assert!(min == 0.0 && min.is_sign_negative(), "{min}"),
            other => panic!("{other:?}"),
        }
        values[1] = 0.0;
        values[16] = -0.0;
        let out = scan(
            Cpu::with_threads(1),
            DType::F32,
            &f32_bytes(&values),
            Scan::NonFinite,
        );
        assert!(matches!(out.min, Some(Scalar::Float(m)) if m == 0.0 && m.is_sign_positive()));
    }

    /// The same numbers written in `dtype` (only values every dtype holds: 0, 1, 2, 5).
    fn encode(dtype: DType, values: &[u8]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| match dtype {
                DType::Bool | DType::U8 => vec![v],
                DType::I8 => (v as i8).to_le_bytes().to_vec(),
                DType::I16 => i16::from(v).to_le_bytes().to_vec(),
                DType::U16 => u16::from(v).to_le_bytes().to_vec(),
                DType::I32 => i32::from(v).to_le_bytes().to_vec(),
                DType::U32 => u32::from(v).to_le_bytes().to_vec(),
                DType::I64 => i64::from(v).to_le_bytes().to_vec(),
                DType::U64 => u64::from(v).to_le_bytes().to_vec(),
                DType::F16 => half::f16::from(v).to_le_bytes().to_vec(),
                DType::BF16 => half::bf16::from(v).to_le_bytes().to_vec(),
                DType::F32 => f32::from(v).to_le_bytes().to_vec(),
                DType::F64 => f64::from(v).to_le_bytes().to_vec(),
            })
            .collect()
    }

    #[test]
    fn every_dtype_reports_the_same_offenders_min_and_max() {
        for dtype in DType::ALL {
            let values: &[u8] = if dtype == DType::Bool {
                &[0, 1, 1, 0]
            } else {
                &[0, 5, 1, 2]
            };
            let out = scan(Cpu::new(), dtype, &encode(dtype, values), LABELS);
            assert_eq!(out.elements, 4, "{dtype:?}");
            let number = |v: i64| {
                if dtype.is_float() {
                    Scalar::Float(v as f64)
                } else {
                    Scalar::Int(v)
                }
            };
            if dtype == DType::Bool {
                assert_eq!(out.offending, 0, "{dtype:?}");
                assert_eq!(out.max, Some(number(1)), "{dtype:?}");
            } else {
                assert_eq!(out.offending, 2, "{dtype:?}");
                assert_eq!(out.first, vec![(1, number(5)), (3, number(2))], "{dtype:?}");
                assert_eq!(
                    (out.min, out.max),
                    (Some(number(0)), Some(number(5))),
                    "{dtype:?}"
                );
            }
        }
    }

    #[test]
    fn an_empty_tensor_has_no_offenders_and_no_min() {
        let out = scan(Cpu::new(), DType::I64, &[], LABELS);
        assert_eq!(out.elements, 0);
        assert_eq!(out.offending, 0);
        assert_eq!(out.min, None);
        assert!(out.first.is_empty());
    }

    #[test]
    fn one_bad_element_is_found() {
        let out = scan(Cpu::new(), DType::I64, &i64_bytes(&[7]), LABELS);
        assert_eq!(out.offending, 1);
        assert_eq!(out.first, vec![(0, Scalar::Int(7))]);
    }

    #[test]
    fn ignore_index_is_skipped_but_other_negatives_offend() {
        let out = scan(Cpu::new(), DType::I64, &i64_bytes(&[-100, 1, -1, -100]), LABELS);
        assert_eq!(out.offending, 1);
        assert_eq!(out.first, vec![(2, Scalar::Int(-1))]);
        assert_eq!(out.min, Some(Scalar::Int(-100)));
    }

    #[test]
    fn all_bad_keeps_the_first_sixteen_in_order_across_threads() {
        let n = 3 * PARALLEL_BYTES / 8 + 17;
        let values: Vec<i64> = (0..n as i64).map(|i| i + 10).collect();
        let out = scan(Cpu::with_threads(3), DType::I64, &i64_bytes(&values), LABELS);
        assert_eq!(out.offending, n as u64);
        let expected: Vec<_> = (0..MAX_OFFENSES as u64)
            .map(|i| (i, Scalar::Int(i as i64 + 10)))
            .collect();
        assert_eq!(out.first, expected);
        assert_eq!(out.max, Some(Scalar::Int(n as i64 + 9)));
    }

    #[test]
    fn only_the_last_element_bad_is_found_whatever_the_thread_count() {
        // Not a multiple of the block or of the thread count.
        let n = PARALLEL_BYTES / 8 * 2 + BLOCK + 3;
        let mut values = vec![1i64; n];
        values[n - 1] = 2;
        let bytes = i64_bytes(&values);
        for threads in [1, 2, 3, 7] {
            let out = scan(Cpu::with_threads(threads), DType::I64, &bytes, LABELS);
            assert_eq!(out.offending, 1, "{threads} threads");
            assert_eq!(
                out.first,
                vec![((n - 1) as u64, Scalar::Int(2))],
                "{threads} threads"
            );
            assert_eq!(out.min, Some(Scalar::Int(1)));
        }
    }

    #[test]
    fn non_finite_finds_nan_and_inf_and_leaves_nan_out_of_min_max() {
        let bytes = f32_bytes(&[1.0, f32::NAN, -2.5, f32::INFINITY, f32::NEG_INFINITY]);
        let out = scan(Cpu::new(), DType::F32, &bytes, Scan::NonFinite);
        assert_eq!(out.offending, 3);
        assert_eq!(out.first[0].0, 1);
        assert_eq!(out.first[1], (3, Scalar::Float(f64::INFINITY)));
        assert_eq!(out.min, Some(Scalar::Float(f64::NEG_INFINITY)));
        assert_eq!(out.max, Some(Scalar::Float(f64::INFINITY)));
    }

    #[test]
    fn an_all_nan_tensor_has_no_min_or_max() {
        let out = scan(
            Cpu::new(),
            DType::F32,
            &f32_bytes(&[f32::NAN; 3]),
            Scan::NonFinite,
        );
        assert_eq!(out.offending, 3);
        assert_eq!((out.min, out.max), (None, None));
    }

    #[test]
    fn float_range_is_closed_and_exact_at_bounds_f32_cannot_hold() {
        let probs = Scan::FloatRange { lo: 0.0, hi: 1.0 };
        let out = scan(
            Cpu::new(),
            DType::F32,
            &f32_bytes(&[0.0, 1.0, 1.0000001, -0.0, f32::NAN]),
            probs,
        );
        assert_eq!(out.offending, 2);
        assert_eq!(out.first[0], (2, Scalar::Float(f64::from(1.0000001f32))));
        // 0.1 is not an f32: 0.1f32 is slightly above it, the f32 just below is under it.
        let tenth = Scan::FloatRange { lo: 0.1, hi: 10.0 };
        let below = 0.1f32.next_down();
        let out = scan(Cpu::new(), DType::F32, &f32_bytes(&[0.1, below]), tenth);
        assert_eq!(out.first, vec![(1, Scalar::Float(f64::from(below)))]);
    }

    #[test]
    fn integer_tensors_are_always_finite_and_compare_exactly_with_float_bounds() {
        let out = scan(
            Cpu::new(),
            DType::I64,
            &i64_bytes(&[i64::MIN, 0, i64::MAX]),
            Scan::NonFinite,
        );
        assert_eq!(out.offending, 0);
        let out = scan(
            Cpu::new(),
            DType::I64,
            &i64_bytes(&[0, 1, 2]),
            Scan::FloatRange { lo: 0.5, hi: 1.5 },
        );
        assert_eq!(out.first, vec![(0, Scalar::Int(0)), (2, Scalar::Int(2))]);
    }

    #[test]
    fn float_labels_offend_outside_the_class_range_and_when_nan() {
        let bytes = f32_bytes(&[0.0, 1.5, 2.0, f32::NAN, -100.0]);
        let out = scan(Cpu::new(), DType::F32, &bytes, LABELS);
        assert_eq!(out.offending, 2);
        assert_eq!(out.first[0], (2, Scalar::Float(2.0)));
        assert_eq!(out.first[1].0, 3);
    }

    #[test]
    fn uint64_above_i64_max_saturates() {
        let bytes: Vec<u8> = [u64::MAX, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = scan(Cpu::new(), DType::U64, &bytes, LABELS);
        assert_eq!(out.first, vec![(0, Scalar::Int(i64::MAX))]);
    }

    #[test]
    fn an_empty_class_range_makes_every_value_offend() {
        let empty = Scan::IntRange {
            lo: 0,
            hi: 0,
            skip: None,
        };
        let out = scan(Cpu::new(), DType::I64, &i64_bytes(&[0, 1]), empty);
        assert_eq!(out.offending, 2);
        let out = scan(Cpu::new(), DType::F32, &f32_bytes(&[0.0]), empty);
        assert_eq!(out.offending, 1);
    }

    #[test]
    fn bytes_that_disagree_with_the_shape_are_an_error_not_a_panic() {
        let err = Cpu::new().scan(tensor(DType::I64, &[2], &[0; 12]), Scan::NonFinite);
        assert!(matches!(err, Err(ReplayError::Check(m)) if m.contains("12 bytes")));
    }
}
