//! Writes a deterministic noisy CI log (see `benches/support/noisy_log.rs`).
//!
//! `cargo run --release --example gen_noisy_log -- OUT_PATH SIZE_MB [SEED]`, or
//! `… -- --traceback OUT_PATH` for the single ~4 KB CUDA traceback of the benchmarks, or
//! `… -- --noise OUT_PATH` for as many bytes of its noise alone, with no failure in it.

#[path = "../benches/support/noisy_log.rs"]
mod noisy_log;

use std::io::{BufWriter, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, path] = &args[..]
        && let Some(log) = single_log(flag)
    {
        return match std::fs::write(path, log) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cannot write {path}: {e}");
                ExitCode::from(2)
            }
        };
    }
    let (Some(path), Some(Ok(size_mb))) = (args.first(), args.get(1).map(|s| s.parse::<usize>())) else {
        eprintln!("usage: gen_noisy_log OUT_PATH SIZE_MB [SEED]");
        return ExitCode::from(2);
    };
    let seed = match args.get(2).map(|s| s.parse::<u64>()) {
        None => 42,
        Some(Ok(seed)) => seed,
        Some(Err(e)) => {
            eprintln!("invalid SEED: {e}");
            return ExitCode::from(2);
        }
    };
    let written = std::fs::File::create(path).and_then(|file| {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        noisy_log::generate(size_mb << 20, seed, &mut out)?;
        out.flush()
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write {path}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The log a `--traceback` or `--noise` flag asks for: the benchmarks' 4 KB traceback, or as many
/// bytes of noise.
fn single_log(flag: &str) -> Option<Vec<u8>> {
    let traceback = noisy_log::cuda_assert_traceback(42);
    match flag {
        "--traceback" => Some(traceback),
        "--noise" => Some(noisy_log::noise_only(traceback.len(), 42)),
        _ => None,
    }
}
