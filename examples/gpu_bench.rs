//! GPU replay benchmark: the scan kernels' throughput beside a device-to-device copy of the same
//! bytes, in one run on the device, plus the end-to-end scan (host to device in chunks) and a check
//! that the GPU result equals the CPU's on the same data.
//!
//! ```text
//! cargo build --release --features cuda --example gpu_bench
//! target/release/examples/gpu_bench [--mib 1024] [--reps 20]
//! ```
//! The torch figure for the same check comes from `benches/gpu_torch_baseline.py`.

use std::process::ExitCode;
use std::time::Instant;

use faultline::replay::cpu::Cpu;
use faultline::replay::gpu::Gpu;
use faultline::replay::{Backend, DType, Scan, TensorRef};

/// splitmix64: random data, never zeros (zeros can time faster than real data).
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

const VOCAB: i64 = 50_257;

/// `bytes` of `dtype`: token ids in [0, VOCAB) (or floats in [0, 1)), with three offenders.
fn data(dtype: DType, bytes: usize, rng: &mut Rng) -> Vec<u8> {
    let n = bytes / dtype.size();
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next();
        let id = (r % VOCAB as u64) as i64;
        let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
        match dtype {
            DType::U8 => out.push(id as u8 % 100),
            DType::I32 => out.extend((id as i32).to_le_bytes()),
            DType::I64 => out.extend(id.to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(unit).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(unit).to_le_bytes()),
            DType::F32 => out.extend((unit as f32).to_le_bytes()),
            _ => out.extend(unit.to_le_bytes()),
        }
    }
    for at in [17, n / 2, n.saturating_sub(1)] {
        let bad: Vec<u8> = match dtype {
            DType::U8 => vec![200],
            DType::I32 => (VOCAB as i32).to_le_bytes().to_vec(),
            DType::I64 => (VOCAB + 3).to_le_bytes().to_vec(),
            DType::F16 => half::f16::NAN.to_le_bytes().to_vec(),
            DType::BF16 => half::bf16::INFINITY.to_le_bytes().to_vec(),
            DType::F32 => f32::NAN.to_le_bytes().to_vec(),
            _ => f64::NAN.to_le_bytes().to_vec(),
        };
        let s = dtype.size();
        if let Some(slot) = out.get_mut(at * s..(at + 1) * s) {
            slot.copy_from_slice(&bad);
        }
    }
    out
}

fn scan_for(dtype: DType) -> Scan {
    match dtype {
        DType::U8 => Scan::IntRange {
            lo: 0,
            hi: 100,
            skip: None,
        },
        DType::I32 | DType::I64 => Scan::IntRange {
            lo: 0,
            hi: VOCAB,
            skip: Some(-100),
        },
        _ => Scan::NonFinite,
    }
}

fn arg(name: &str, default: usize) -> Result<usize, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} takes a number")),
    }
}

fn run() -> Result<(), String> {
    let mib = arg("--mib", 1024)?;
    let reps = arg("--reps", 20)?;
    let gpu = Gpu::open(0).map_err(|e| e.to_string())?;
    println!(
        "device: {} (sm_{}{}), {mib} MiB per tensor, median of {reps}",
        gpu.device_name(),
        gpu.compute_capability().0,
        gpu.compute_capability().1
    );
    let mut rng = Rng(2024);
    let mut rows = Vec::new();
    for dtype in [
        DType::I64,
        DType::I32,
        DType::U8,
        DType::F32,
        DType::F16,
        DType::BF16,
    ] {
        let bytes = data(dtype, mib << 20, &mut rng);
        let shape = [(bytes.len() / dtype.size()) as u64];
        let t = TensorRef {
            name: "t",
            dtype,
            shape: &shape,
            bytes: &bytes,
        };
        let scan = scan_for(dtype);
        let timing = gpu.time_scan(t, scan, reps).map_err(|e| e.to_string())?;
        // End to end: chunks from host memory, and the same answer as the CPU.
        let start = Instant::now();
        let on_gpu = gpu.scan(t, scan).map_err(|e| e.to_string())?;
        let end_to_end = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let on_cpu = Cpu::new().scan(t, scan).map_err(|e| e.to_string())?;
        let cpu_s = start.elapsed().as_secs_f64();
        let agree = format!("{on_gpu:?}") == format!("{on_cpu:?}");
        if !agree {
            return Err(format!(
                "{dtype:?}: GPU and CPU disagree\n gpu {on_gpu:?}\n cpu {on_cpu:?}"
            ));
        }
        let gb = bytes.len() as f64 / 1e9;
        rows.push(format!(
            "{:<9} {:>9.3} {:>9.1} {:>9.3} {:>9.1} {:>7.0}% {:>10.1} {:>8.1} {:>6}",
            dtype.torch_name(),
            timing.scan_ms,
            timing.scan_gbps(),
            timing.copy_ms,
            timing.copy_gbps(),
            100.0 * timing.scan_gbps() / timing.copy_gbps(),
            gb / end_to_end,
            gb / cpu_s,
            timing.offending
        ));
    }
    println!(
        "\n{:<9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10} {:>8} {:>6}",
        "dtype", "scan ms", "scan GB/s", "copy ms", "copy GB/s", "vs copy", "e2e GB/s", "cpu GB/s", "bad"
    );
    for row in rows {
        println!("{row}");
    }
    println!(
        "\nscan GB/s: tensor bytes read per second by the kernel (device-resident).\n\
         copy GB/s: cuMemcpyDtoD of the same bytes, read + written.\n\
         vs copy: scan GB/s over copy GB/s (the goal is 80% or more).\n\
         e2e: Backend::scan from host memory (chunked transfers included); cpu: the CPU backend, same data.\n\
         Every GPU result equals the CPU's."
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
