//! What the kernels compute, on the host: the bounds and keys they compare in, the result words
//! they write, and the chunked scan with windowed re-scans that drives them (behind [`Passes`],
//! so that it is tested on the CPU against an emulated kernel).

use crate::replay::check::{Scalar, Scan, ScanOutput};
use crate::replay::snapshot::{DType, TensorRef};
use crate::replay::{MAX_OFFENSES, ReplayError};

/// Words before the positions in the output buffer (see kernels/scan.cu).
pub(super) const HEADER: usize = 6;
/// "No position" / "no key" in the output buffer.
pub(super) const NONE: u64 = u64::MAX;

/// The number type a dtype is compared in (as on the CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    I64,
    F32,
    F64,
}

pub(super) fn lane(dtype: DType) -> Lane {
    match dtype {
        DType::F16 | DType::BF16 | DType::F32 => Lane::F32,
        DType::F64 => Lane::F64,
        _ => Lane::I64,
    }
}

/// One element as the CPU backend reads it.
pub(super) fn read_scalar(dtype: DType, bytes: &[u8], pos: u64) -> Scalar {
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
pub(super) struct Bounds {
    pub(super) lane: Lane,
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) skip: Option<u64>,
}

impl Bounds {
    /// The CPU backend's rules: bounds moved to the nearest lane value inside the allowed
    /// range, an empty interval when none is, `skip` only when the lane holds it exactly.
    pub(super) fn new(lane: Lane, scan: Scan) -> Self {
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
pub(super) fn unkey(lane: Lane, key: u64) -> Scalar {
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
pub(super) struct Found {
    pub(super) count: u64,
    pub(super) kmin: u64,
    pub(super) kmax: u64,
    pub(super) first: u64,
    pub(super) zero: u64,
    /// Collected positions (all of them when [`Found::complete`]).
    pub(super) positions: Vec<u64>,
}

impl Found {
    pub(super) fn empty() -> Self {
        Found {
            count: 0,
            kmin: NONE,
            kmax: 0,
            first: NONE,
            zero: NONE,
            positions: Vec::new(),
        }
    }

    pub(super) fn from_words(words: &[u64], slots: usize) -> Self {
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
    pub(super) fn complete(&self) -> bool {
        self.count <= self.positions.len() as u64
    }

    /// Adds a later part of the tensor (positions are handled by the caller).
    pub(super) fn merge(&mut self, next: &Found) {
        self.count += next.count;
        self.kmin = self.kmin.min(next.kmin);
        self.kmax = self.kmax.max(next.kmax);
        self.first = self.first.min(next.first);
        self.zero = self.zero.min(next.zero);
    }

    pub(super) fn output(&self, tensor: &TensorRef<'_>, lane: Lane, first: Vec<u64>) -> ScanOutput {
        let dtype = tensor.dtype;
        // Every integer is keyed; a float tensor may hold only NaN.
        let seen = match lane {
            Lane::I64 => tensor.elements() > 0,
            Lane::F32 | Lane::F64 => self.kmin != NONE,
        };
        // A zero min or max is the first zero in the tensor, with its sign (as the CPU reports it).
        let value = |key: u64| match unkey(lane, key) {
            Scalar::Float(v) if v == 0.0 && self.zero != NONE => read_scalar(dtype, tensor.bytes, self.zero),
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
pub(super) trait Passes {
    /// Puts `bytes` (one chunk of elements) at the start of the device buffer.
    fn load(&mut self, bytes: &[u8]) -> Result<(), ReplayError>;
    /// One pass over buffer elements `[begin, end)`, positions reported at `base + i`;
    /// collects positions when `collect`.
    fn run(&mut self, begin: u64, end: u64, base: u64, collect: bool) -> Result<Found, ReplayError>;
    /// Positions one pass can collect.
    fn slots(&self) -> u64;
}

/// Scans `tensor` in chunks of `per_chunk` elements.
pub(super) fn scan_chunked(
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
pub(super) fn first_positions(
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
