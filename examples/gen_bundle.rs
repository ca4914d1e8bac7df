//! Writes a deterministic distributed job's files for the bundle benchmark (`benches/RESULTS.md`):
//! a job of RANKS workers, 8 per node, launched by torchrun with `--log-dir`, so each worker's
//! output is its own `node-NN/logs/<run id>/attempt_0/<local rank>/stderr.log`, without `[rankN]:`
//! prefixes. Each worker's log is `benches/support/noisy_log.rs`'s noise (its rank prefixes
//! removed) after NCCL's `NCCL_DEBUG=INFO` start-up lines. One worker fails with a CUDA device-side
//! assert and a traceback (and torchrun's `error.json`); its node's agent stops its 7 siblings;
//! every worker on the other nodes then times out in the same all-reduce (the NCCL watchdog's
//! lines and the `terminate called` that ends the process), and each agent prints its failure
//! summary into `node-NN/console.log`. Every line carries a time stamp.
//!
//! The same bytes, every file one after the other, go to `ONE_LOG`.
//!
//! `cargo run --release --example gen_bundle -- OUT_DIR ONE_LOG TOTAL_MB RANKS [FAILING_RANK]`

#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)] // its whole-log generator serves the other example and the benchmark
mod noisy_log;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

/// Workers per node.
const PER_NODE: u32 = 8;
/// The all-reduce every waiting worker times out in.
const SEQ: u64 = 1412;
/// The run id torchrun's agents share (each adds its own random suffix to its folder).
const RUN: &str = "llm-pretrain";
const SITE: &str = "/opt/conda/lib/python3.10/site-packages";
/// Seconds after 2024-05-06T00:00:00Z at which the failing worker's assert is printed.
const FAIL_AT: u64 = 7 * 3600 + 20 * 60;
/// NCCL's watchdog timeout, in seconds.
const TIMEOUT_S: u64 = 600;

/// What the command line asks for.
struct Job<'a> {
    dir: &'a Path,
    one_log: &'a Path,
    total: usize,
    ranks: u32,
    failing: u32,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(job) = job(&args) else {
        eprintln!("usage: gen_bundle OUT_DIR ONE_LOG TOTAL_MB RANKS [FAILING_RANK < RANKS]");
        return ExitCode::from(2);
    };
    match write_job(&job) {
        Ok(bytes) => {
            eprintln!(
                "wrote {} workers' files, {bytes} bytes, to {} and the same bytes to {} (rank {} fails)",
                job.ranks,
                job.dir.display(),
                job.one_log.display(),
                job.failing
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write the bundle: {e}");
            ExitCode::from(2)
        }
    }
}

fn job(args: &[String]) -> Option<Job<'_>> {
    let (dir, one_log, mb, ranks, failing) = match args {
        [d, o, m, r] => (d, o, m, r, None),
        [d, o, m, r, f] => (d, o, m, r, Some(f)),
        _ => return None,
    };
    let total = mb.parse::<usize>().ok().filter(|m| *m > 0)? << 20;
    let ranks = ranks.parse::<u32>().ok().filter(|r| *r > 0)?;
    let failing = match failing {
        Some(f) => f.parse::<u32>().ok()?,
        None => (ranks * 3 / 10).min(ranks - 1),
    };
    (failing < ranks).then_some(Job {
        dir: Path::new(dir),
        one_log: Path::new(one_log),
        total,
        ranks,
        failing,
    })
}

/// A node's host name and its agent's folder under `logs/`.
fn node(rank: u32) -> (String, String) {
    let n = rank / PER_NODE;
    (
        format!("node-{n:02}"),
        format!("{RUN}_{:08x}", 0x5eed_0000 + n * 7919),
    )
}

fn write_job(job: &Job<'_>) -> io::Result<u64> {
    let mut one = BufWriter::with_capacity(1 << 20, File::create(job.one_log)?);
    let mut written = 0u64;
    let mut emit = |path: &Path, bytes: &[u8]| -> io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
        one.write_all(bytes)?;
        written += bytes.len() as u64;
        Ok(())
    };
    let failing_node = job.failing / PER_NODE;
    let per_rank = job.total / job.ranks as usize;
    for rank in 0..job.ranks {
        let (host, agent) = node(rank);
        let slot = job
            .dir
            .join(&host)
            .join("logs")
            .join(&agent)
            .join("attempt_0")
            .join((rank % PER_NODE).to_string());
        let head = nccl_start(rank, job.ranks);
        let tail = if rank == job.failing {
            emit(&slot.join("error.json"), error_file().as_bytes())?;
            device_assert()
        } else if rank / PER_NODE == failing_node {
            String::new() // stopped by its agent when the failing sibling exited
        } else {
            watchdog(rank)
        };
        let budget = per_rank.saturating_sub(head.len() + tail.len());
        let noise = noisy_log::noise_only(budget, 1000 + u64::from(rank));
        let noise = String::from_utf8_lossy(&noise)
            .replace("[rank0]: ", "")
            .replace("[rank1]: ", "")
            .replace("[rank0]:", "")
            .replace("[rank1]:", "");
        emit(&slot.join("stderr.log"), (head + &noise + &tail).as_bytes())?;
        if rank % PER_NODE == PER_NODE - 1 || rank == job.ranks - 1 {
            let console = agent_summary(job, rank / PER_NODE);
            emit(&job.dir.join(&host).join("console.log"), console.as_bytes())?;
        }
    }
    one.flush()?;
    Ok(written)
}

/// A GitHub Actions style stamp (`2024-05-06T07:20:00.1234567Z `) `secs` after midnight.
fn stamp(secs: u64, frac: u64) -> String {
    format!(
        "2024-05-06T{:02}:{:02}:{:02}.{frac:07}Z ",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Each line of `text` behind a stamp `secs` after midnight.
fn stamped(secs: u64, text: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, line)| format!("{}{line}\n", stamp(secs, 1000 * i as u64)))
        .collect()
}

/// NCCL's start-up lines (`NCCL_DEBUG=INFO`): host, device, global rank and job size.
fn nccl_start(rank: u32, ranks: u32) -> String {
    let (host, _) = node(rank);
    let (local, pid) = (rank % PER_NODE, 4100 + rank % PER_NODE);
    let bus = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb][local as usize];
    let comm = format!(
        "comm 0x55d1c{:04x}0 rank {rank} nranks {ranks} cudaDev {local} nvmlDev {local} busId {bus:x}000 commId 0x6c4bf1c2a9e0d5f3",
        rank * 16
    );
    let text = format!(
        "{host}:{pid}:{pid} [{local}] NCCL INFO Bootstrap : Using eth0:10.1.0.{}<0>\n\
         {host}:{pid}:{pid} [{local}] NCCL INFO cudaDriverVersion 12040\n\
         NCCL version 2.20.5+cuda12.4\n\
         {host}:{pid}:{} [{local}] NCCL INFO {comm} - Init START\n\
         {host}:{pid}:{} [{local}] NCCL INFO {comm} - Init COMPLETE\n",
        rank / PER_NODE,
        pid + 70,
        pid + 70,
    );
    stamped(7 * 3600 + 8 * 60 + 5, &text)
}

/// The failing worker's end: the kernel's assertion lines and the traceback, behind stamps.
fn device_assert() -> String {
    let block = noisy_log::cuda_assert_traceback(7);
    // The shared block has its own stamps (from the start of the noise) and a rank prefix: both
    // are replaced, so that the assert comes after the worker's training output.
    let text = String::from_utf8_lossy(&block)
        .lines()
        .map(|line| {
            let line = line.split_once("Z ").map_or(line, |(_, rest)| rest);
            let line = line.strip_prefix("[rank0]: ").unwrap_or(line);
            format!("{line}\n")
        })
        .collect::<String>();
    stamped(FAIL_AT, &text)
}

/// torchrun's `error.json` of the failing worker (`@record`).
fn error_file() -> String {
    format!(
        r#"{{"message": {{"message": "RuntimeError: CUDA error: device-side assert triggered", "extraInfo": {{"py_callstack": "Traceback (most recent call last):\n  File \"{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 355, in wrapper\n    return f(*args, **kwargs)\n  File \"/workspace/train.py\", line 187, in main\n    loss = model(**batch).loss\nRuntimeError: CUDA error: device-side assert triggered\n", "timestamp": "{}"}}}}}}"#,
        1_714_953_600 + FAIL_AT
    )
}

/// A waiting worker's end: the NCCL watchdog's lines for all-reduce [`SEQ`], then the abort.
fn watchdog(rank: u32) -> String {
    let at = FAIL_AT + TIMEOUT_S + u64::from(rank % 5);
    let clock = format!("{:02}:{:02}:{:02}", at / 3600, at / 60 % 60, at % 60);
    let work = format!(
        "WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)={})",
        TIMEOUT_S * 1000
    );
    let caught = format!(
        "[Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {} milliseconds before timing out.",
        TIMEOUT_S * 1000 + 60
    );
    let state = format!(
        "last enqueued NCCL work: {SEQ}, last completed NCCL work: {}.",
        SEQ - 1
    );
    let text = format!(
        "[E506 {clock}.123456789 ProcessGroupNCCL.cpp:607] {caught}\n\
         [E506 {clock}.165150152 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {SEQ}, {state}\n\
         [E506 {clock}.165201736 ProcessGroupNCCL.cpp:1709] [PG 0 Rank {rank}] Timeout at NCCL work: {SEQ}, {state}\n\
         [E506 {clock}.165238290 ProcessGroupNCCL.cpp:621] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n\
         [E506 {clock}.165271113 ProcessGroupNCCL.cpp:627] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.\n\
         [E506 {clock}.166514901 ProcessGroupNCCL.cpp:1515] [PG 0 Rank {rank}] Process group watchdog thread terminated with exception: {caught}\n\
         terminate called after throwing an instance of 'c10::DistBackendError'\n\
         \x20 what():  [PG 0 Rank {rank}] Process group watchdog thread terminated with exception: {caught}\n"
    );
    stamped(at, &text)
}

/// One node's torchrun agent: the failed workers it saw and its failure summary.
fn agent_summary(job: &Job<'_>, n: u32) -> String {
    let first = n * PER_NODE;
    let ranks: Vec<u32> = (first..(first + PER_NODE).min(job.ranks)).collect();
    let (host, agent) = node(first);
    let failing_node = job.failing / PER_NODE == n;
    // The failing worker's node reports it alone (the agent stopped its siblings); every other
    // node reports all its workers aborted by the watchdog, the first to exit as the root cause.
    let failed: Vec<u32> = if failing_node {
        vec![job.failing]
    } else {
        ranks.clone()
    };
    let at = if failing_node {
        FAIL_AT + 2
    } else {
        FAIL_AT + TIMEOUT_S + 5
    };
    let entry = |i: usize, rank: u32| {
        let local = rank % PER_NODE;
        let pid = 4100 + local;
        let (code, error_file, traceback) = if rank == job.failing {
            (
                1,
                format!("/workspace/{host}/logs/{agent}/attempt_0/{local}/error.json"),
                "RuntimeError: CUDA error: device-side assert triggered".to_owned(),
            )
        } else {
            (
                -6,
                "<N/A>".to_owned(),
                format!("Signal 6 (SIGABRT) received by PID {pid}"),
            )
        };
        format!(
            "[{i}]:\n  time      : 2024-05-06_{:02}:{:02}:{:02}\n  host      : {host}\n  rank      : {rank} (local_rank: {local})\n  exitcode  : {code} (pid: {pid})\n  error_file: {error_file}\n  traceback : {traceback}\n",
            at / 3600,
            at / 60 % 60,
            at % 60
        )
    };
    let (root, others) = failed.split_first().map_or((0, &[][..]), |(r, o)| (*r, o));
    let others_text = if others.is_empty() {
        "  <NO_OTHER_FAILURES>\n".to_owned()
    } else {
        others.iter().enumerate().map(|(i, r)| entry(i + 1, *r)).collect()
    };
    let exits: String = failed
        .iter()
        .map(|r| {
            let code = if *r == job.failing { 1 } else { -6 };
            format!(
                "E0506 {:02}:{:02}:{:02}.512000 4000 {SITE}/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {code}) local_rank: {} (pid: {}) of binary: /opt/conda/bin/python3.10\n",
                at / 3600,
                at / 60 % 60,
                at % 60,
                r % PER_NODE,
                4100 + r % PER_NODE
            )
        })
        .collect();
    let text = format!(
        "W0506 07:08:01.000000 4000 {SITE}/torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.\n\
         {exits}\
         Traceback (most recent call last):\n\
         \x20 File \"/opt/conda/bin/torchrun\", line 33, in <module>\n\
         \x20   sys.exit(load_entry_point('torch', 'console_scripts', 'torchrun')())\n\
         \x20 File \"{SITE}/torch/distributed/launcher/api.py\", line 263, in launch_agent\n\
         \x20   raise ChildFailedError(\n\
         torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n\
         ============================================================\n\
         train.py FAILED\n\
         ------------------------------------------------------------\n\
         Failures:\n\
         {others_text}\
         ------------------------------------------------------------\n\
         Root Cause (first observed failure):\n\
         {}\
         ============================================================\n",
        entry(0, root)
    );
    stamped(at, &text)
}
