//! Throughput of the CPU replay checks beside a plain memcpy of the same bytes, in the same run:
//! `target_bounds` (an int64 class-range scan with an ignore value) and `finite` (an f32 NaN / Inf
//! scan) over 256 MiB each (or `FAULTLINE_BENCH_MB` MiB). The goal is >= 80 % of the memcpy.
//!
//! `cargo bench --bench replay -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use faultline::replay::cpu::Cpu;
use faultline::replay::{Backend, DType, Scan, TensorRef};

fn bench_mb() -> usize {
    std::env::var("FAULTLINE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&mb| mb > 0)
        .unwrap_or(256)
}

/// `bytes` pseudo-random bytes made of `make(i)` values (a fixed xorshift, so runs compare).
fn filled<const N: usize>(bytes: usize, make: impl Fn(u64) -> [u8; N]) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&make(state));
    }
    out
}

fn replay(c: &mut Criterion) {
    let bytes = bench_mb() << 20;
    // Labels in [0, 10) and a few ignore_index values; every value in range.
    let labels = filled(bytes, |r| {
        (if r % 97 == 0 { -100i64 } else { (r % 10) as i64 }).to_le_bytes()
    });
    let logits = filled(bytes, |r| ((r % 20_000) as f32 / 1000.0 - 10.0).to_le_bytes());
    let mut copy = vec![0u8; bytes];
    let cpu = Cpu::new();
    let shape_i64 = [(bytes / 8) as u64];
    let shape_f32 = [(bytes / 4) as u64];
    let labels_ref = TensorRef {
        name: "labels",
        dtype: DType::I64,
        shape: &shape_i64,
        bytes: &labels,
    };
    let logits_ref = TensorRef {
        name: "logits",
        dtype: DType::F32,
        shape: &shape_f32,
        bytes: &logits,
    };
    let targets = Scan::IntRange {
        lo: 0,
        hi: 10,
        skip: Some(-100),
    };

    let mut group = c.benchmark_group(format!("cpu_{}mib", bytes >> 20));
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.bench_function("memcpy", |b| {
        b.iter(|| {
            copy.copy_from_slice(black_box(&labels));
            black_box(&copy);
        })
    });
    group.bench_function(format!("target_bounds_int64_{}threads", cpu.threads()), |b| {
        b.iter(|| cpu.scan(black_box(labels_ref), targets))
    });
    group.bench_function(format!("finite_f32_{}threads", cpu.threads()), |b| {
        b.iter(|| cpu.scan(black_box(logits_ref), Scan::NonFinite))
    });
    let one = Cpu::with_threads(1);
    group.bench_function("target_bounds_int64_1thread", |b| {
        b.iter(|| one.scan(black_box(labels_ref), targets))
    });
    group.bench_function("finite_f32_1thread", |b| {
        b.iter(|| one.scan(black_box(logits_ref), Scan::NonFinite))
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
