//! A deterministic generator of a long, noisy CI log: a GitHub Actions / torchrun training job whose
//! output is mostly noise (pip, tqdm bars, rank-prefixed losses, logging, ANSI colours, warnings,
//! nvidia-smi tables), with one real failure block about every 5 MB. Std only; shared by the
//! `pipeline` benchmark and the `gen_noisy_log` example.

use std::io::{self, Write};

/// Average number of bytes between two failure blocks.
const FAILURE_EVERY: usize = 5 << 20;
const SITE: &str = "/opt/conda/lib/python3.10/site-packages";
const PKGS: &[&str] = &[
    "transformers",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "numpy",
];

/// xorshift64*: small, fast and the same on every machine.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Writes lines with GitHub Actions timestamps, counting bytes.
struct Log<'w, W: Write> {
    out: &'w mut W,
    rng: Rng,
    /// 100 ns ticks since 2024-05-06T07:08:09Z.
    clock: u64,
    written: usize,
    step: u64,
}

impl<W: Write> Log<'_, W> {
    /// Writes every line of `text`, each behind a fresh timestamp and `prefix`.
    fn block(&mut self, prefix: &str, text: &str) -> io::Result<()> {
        for line in text.split('\n') {
            self.clock += self.rng.below(200_000);
            let (day, h, m, s) = self.time();
            let frac = self.clock % 10_000_000;
            let mut buf = Vec::with_capacity(line.len() + 40);
            writeln!(
                buf,
                "2024-05-{day:02}T{h:02}:{m:02}:{s:02}.{frac:07}Z {prefix}{line}"
            )?;
            self.written += buf.len();
            self.out.write_all(&buf)?;
        }
        Ok(())
    }

    /// Day of May 2024, hour, minute, second of the clock.
    fn time(&self) -> (u64, u64, u64, u64) {
        let secs = 7 * 3600 + 8 * 60 + 9 + self.clock / 10_000_000;
        (6 + secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60)
    }

    fn noise(&mut self) -> io::Result<()> {
        let (step, (day, h, m, s)) = (self.step, self.time());
        let r = &mut self.rng;
        let (rank, pkg) = (r.below(2), r.pick(PKGS));
        let (loss, lr) = (1.2 + 2.0 * r.unit(), r.unit() * 3e-4);
        let text = match r.below(100) {
            0..=34 => {
                self.step += 1;
                let tps = 9000 + r.below(3000);
                format!("[rank{rank}]:[INFO] step {step}: loss={loss:.4} lr={lr:.3e} tokens/s={tps}")
            }
            35..=44 => {
                format!("[rank{rank}]: {{'loss': {loss:.4}, 'learning_rate': {lr:.3e}, 'epoch': 0.42}}")
            }
            45..=56 => format!(
                "2024-05-{day:02} {h:02}:{m:02}:{s:02},{:03} - INFO - {} - {}",
                r.below(1000),
                r.pick(&["__main__", "transformers.trainer", "accelerate.accelerator"]),
                r.pick(&[
                    "Saving model checkpoint",
                    "***** Running evaluation *****",
                    "  Batch size = 32"
                ])
            ),
            57..=66 => {
                let total = 500 + r.below(5000);
                (0..2 + r.below(5))
                    .map(|i| {
                        let n = total * i / 6;
                        let bar = "█".repeat((10 * n / total) as usize);
                        format!(
                            "Epoch 3: {:3}%|{bar:<10}| {n}/{total} [00:{i:02}<04:11, 7.12it/s]",
                            100 * n / total
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\r")
            }
            67..=74 => match r.below(3) {
                0 => format!("Collecting {pkg}>=0.{}", r.below(40)),
                1 => format!(
                    "  Downloading {pkg}-4.41.2-py3-none-any.whl ({}.1 MB)",
                    r.below(20)
                ),
                _ => format!("Requirement already satisfied: {pkg} in {SITE} (from -r requirements.txt)"),
            },
            75..=81 => match r.below(3) {
                0 => "\x1b[36m##[group]Run torchrun --nproc_per_node=2 train.py\x1b[0m".to_owned(),
                1 => format!("\x1b[32mINFO\x1b[0m eval step {step}: accuracy {:.3}", r.unit()),
                _ => format!("\x1b[33;1mWARNING\x1b[0m gradient overflow, skipping step {step}"),
            },
            82..=87 => format!(
                "{SITE}/torch/{}:{}: UserWarning: {}\n  warnings.warn(",
                r.pick(&[
                    "utils/data/dataloader.py",
                    "nn/parallel/distributed.py",
                    "optim/lr_scheduler.py"
                ]),
                10 + r.below(900),
                r.pick(&[
                    "This DataLoader will create 8 worker processes",
                    "TypedStorage is deprecated"
                ])
            ),
            88..=98 => String::new(),
            _ => NVIDIA_SMI.replace("{mem}", &format!("{:5}", 70000 + r.below(9000))),
        };
        self.block("", &text)
    }

    /// One failure block, its numbers drawn at random.
    fn failure(&mut self) -> io::Result<()> {
        let r = &mut self.rng;
        let (seq, gib) = (1000 + r.below(9000), 1 + r.below(8));
        let (which, rank) = (r.below(5), r.below(2));
        if which == 0 {
            return self.cuda_assert();
        }
        let template = [OOM, CUBLAS, NCCL_TIMEOUT, CHAINED][which as usize - 1];
        let text = template
            .replace("{site}", SITE)
            .replace("{rank}", &rank.to_string())
            .replace("{seq}", &seq.to_string())
            .replace("{gib}", &gib.to_string())
            .replace("{step}", &self.step.to_string());
        self.block("", &text)
    }

    fn cuda_assert(&mut self) -> io::Result<()> {
        let block = self.rng.below(64);
        for thread in 96..106 {
            let line = INDEX_ASSERT.replace("{block}", &block.to_string());
            self.block("", &line.replace("{thread}", &thread.to_string()))?;
        }
        self.block("[rank0]: ", &ASSERT_TRACEBACK.replace("{site}", SITE))
    }
}

const INDEX_ASSERT: &str = "/opt/conda/conda-bld/pytorch_1720538643151/work/aten/src/ATen/native/cuda/Indexing.cu:1236: \
indexSelectSmallIndex: block: [{block},0,0], thread: [{thread},0,0] Assertion `srcIndex < srcSelectDimSize` failed.";

const ASSERT_TRACEBACK: &str = r#"Traceback (most recent call last):
  File "/workspace/train.py", line 211, in <module>
    main()
  File "/workspace/train.py", line 187, in main
    loss = model(**batch).loss
  File "{site}/torch/nn/modules/module.py", line 1553, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "{site}/torch/nn/modules/sparse.py", line 164, in forward
    return F.embedding(
  File "{site}/torch/nn/functional.py", line 2267, in embedding
    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"#;

const OOM: &str = r#"[rank{rank}]: Traceback (most recent call last):
[rank{rank}]:   File "/workspace/train.py", line 190, in main
[rank{rank}]:     outputs = model(**batch)
[rank{rank}]:   File "{site}/torch/nn/modules/module.py", line 1553, in _wrapped_call_impl
[rank{rank}]:     return self._call_impl(*args, **kwargs)
[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gib}.95 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free. Process 4242 has 77.91 GiB memory in use. Of the allocated memory 75.50 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."#;

const CUBLAS: &str = r#"Traceback (most recent call last):
  File "/workspace/train.py", line 190, in main
    outputs = model(**batch)
  File "{site}/torch/nn/modules/linear.py", line 117, in forward
    return F.linear(input, self.weight, self.bias)
RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"#;

const NCCL_TIMEOUT: &str = r#"[rank{rank}]:[E506 07:09:10.123456789 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[rank{rank}]:[E506 07:09:10.165150152 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}.
Traceback (most recent call last):
  File "/opt/conda/bin/torchrun", line 33, in <module>
    sys.exit(load_entry_point('torch', 'console_scripts', 'torchrun')())
  File "{site}/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-06_07:19:12
  host      : gh-runner-gpu-7
  rank      : {rank} (local_rank: {rank})
  exitcode  : -6 (pid: 4244)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 4244
============================================================"#;

const CHAINED: &str = r#"Traceback (most recent call last):
  File "/workspace/train.py", line 142, in train_step
    loss.backward()
  File "{site}/torch/_tensor.py", line 521, in backward
    torch.autograd.backward(
RuntimeError: CUDA error: an illegal memory access was encountered

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/workspace/train.py", line 196, in main
    raise TrainingError(f"step {i} failed") from e
__main__.TrainingError: step {step} failed"#;

const NVIDIA_SMI: &str =
    "+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   34C    P0              61W / 400W | {mem}MiB / 81920MiB |     97%      Default |
+-----------------------------------------+----------------------+----------------------+";

fn new_log<W: Write>(out: &mut W, seed: u64) -> Log<'_, W> {
    Log {
        out,
        rng: Rng::new(seed),
        clock: 0,
        written: 0,
        step: 0,
    }
}

/// Writes about `target_bytes` (a little more: whole lines) of noisy log for `seed` to `out`.
pub fn generate(target_bytes: usize, seed: u64, out: &mut impl Write) -> io::Result<()> {
    let mut log = new_log(out, seed);
    let mut next_failure = log.rng.below(FAILURE_EVERY as u64) as usize;
    while log.written < target_bytes {
        if log.written >= next_failure {
            log.failure()?;
            next_failure = log.written + FAILURE_EVERY / 2 + log.rng.below(FAILURE_EVERY as u64) as usize;
        } else {
            log.noise()?;
        }
    }
    Ok(())
}

/// A single ~4 KB CUDA device-side assert failure (10 kernel assertion lines, then the traceback).
#[allow(dead_code)] // used by the benchmark, not by the example
pub fn cuda_assert_traceback(seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = new_log(&mut out, seed).cuda_assert();
    out
}

/// At most `max_bytes` of the noise alone (whole lines), without a failure block: a CI log in
/// which nothing fails.
#[allow(dead_code)] // used by the example, not by the benchmark
pub fn noise_only(max_bytes: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut log = new_log(&mut out, seed);
    while log.written < max_bytes {
        // Writing into a Vec cannot fail.
        let _ = log.noise();
    }
    let end = out[..max_bytes.min(out.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    out.truncate(end);
    out
}
