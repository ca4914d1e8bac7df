//! Events: what the parser recognised in a log, each pointing at its original lines.

use serde::{Deserialize, Serialize};

use super::Span;

/// One thing the parser recognised, with where it sits in the raw log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Original lines the event covers (first to last line of its text, or of its repeats).
    pub lines: Span,
    /// The process rank that printed it, when a multi-process prefix told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// How many times an identical event was seen (repeats are folded into one event).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Line of the last repeat, when `count` > 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_line: Option<u64>,
    /// The event's key line as normalized (the error line of a traceback), cut to
    /// [`MAX_EVENT_TEXT`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The key line is a warning (a logged warning, `SomethingWarning:`, an error the library
    /// says it recovers from), not a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
    /// What was recognised.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Longest key-line text kept on an event.
pub const MAX_EVENT_TEXT: usize = 500;

/// `text` cut to [`MAX_EVENT_TEXT`] characters.
pub fn clip_text(text: &str) -> String {
    clipped_text(text).into_owned()
}

/// `text` cut to [`MAX_EVENT_TEXT`] characters, borrowed when it is short enough.
pub fn clipped_text(text: &str) -> std::borrow::Cow<'_, str> {
    // No more bytes than the limit means no more characters either.
    if text.len() <= MAX_EVENT_TEXT {
        return text.into();
    }
    match text.char_indices().nth(MAX_EVENT_TEXT) {
        Some((i, _)) => format!("{}…", &text[..i]).into(),
        None => text.into(),
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Event {
    /// An event seen once on `lines`.
    pub fn new(lines: Span, rank: Option<u32>, kind: EventKind) -> Self {
        Self {
            lines,
            rank,
            count: 1,
            last_line: None,
            text: None,
            warning: false,
            kind,
        }
    }
}

/// The kinds of event, each with its payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A Python traceback, possibly a chain of exceptions.
    Traceback(Traceback),
    /// A C++ stack ("Exception raised from … frame #N").
    CppTrace(CppTrace),
    /// `terminate called after throwing an instance of 'X'` with its `what():`.
    CppException(CppException),
    /// A CUDA device-side assertion, folded over all its lines, blocks and threads.
    CudaAssert(CudaAssert),
    /// A CUDA runtime or driver error.
    CudaError(CudaError),
    /// A cuBLAS status.
    Cublas(CublasError),
    /// A cuDNN status or failure.
    Cudnn(CudnnError),
    /// An NCCL warning, error or watchdog timeout.
    Nccl(NcclEvent),
    /// An out-of-memory report with its figures.
    Oom(OomReport),
    /// A line of advice printed by a library: context, never a cause.
    Advice(Advice),
    /// A fact stated in an error message (shapes, dtypes, devices, indices).
    Fact(Fact),
    /// A fact about the environment (versions, GPU names).
    Env(EnvFact),
    /// A child process failure reported by torchrun / torch.distributed.elastic.
    ChildFailure(ChildFailure),
}

impl EventKind {
    /// The snake_case name used in JSON and in rule conditions.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Traceback(_) => "traceback",
            Self::CppTrace(_) => "cpp_trace",
            Self::CppException(_) => "cpp_exception",
            Self::CudaAssert(_) => "cuda_assert",
            Self::CudaError(_) => "cuda_error",
            Self::Cublas(_) => "cublas",
            Self::Cudnn(_) => "cudnn",
            Self::Nccl(_) => "nccl",
            Self::Oom(_) => "oom",
            Self::Advice(_) => "advice",
            Self::Fact(_) => "fact",
            Self::Env(_) => "env",
            Self::ChildFailure(_) => "child_failure",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Python tracebacks

/// A Python traceback: one or more exceptions linked by chaining.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Traceback {
    /// How it was printed.
    pub style: TracebackStyle,
    /// Where the traceback came from when a parent process or a DataLoader re-raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// The chain in print order: the first entry is the earliest exception.
    pub chain: Vec<ChainedException>,
}

impl Traceback {
    /// The exception that ends the chain (the one the program died with), if it was printed.
    pub fn final_exception(&self) -> Option<&Exception> {
        self.chain.iter().rev().find_map(|c| c.exception.as_ref())
    }

    /// Every exception of the chain, earliest first.
    pub fn exceptions(&self) -> impl Iterator<Item = &Exception> {
        self.chain.iter().filter_map(|c| c.exception.as_ref())
    }
}

/// How a traceback was rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TracebackStyle {
    /// CPython's own `Traceback (most recent call last):` format.
    Plain,
    /// rich's boxed traceback (`╭─ Traceback ─╮ │ file.py:12 in f │`).
    Rich,
    /// IPython / Jupyter (`----> 1 f()`, `Cell In[3], line 5`).
    Ipython,
}

/// Where a re-raised traceback originally happened.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Origin {
    /// `-- Process N terminated with the following error:` (torch.multiprocessing.spawn).
    ChildProcess {
        /// Process index N.
        index: u32,
    },
    /// `Caught X in DataLoader worker process N. Original Traceback …`.
    DataLoaderWorker {
        /// Worker index N.
        index: u32,
    },
}

/// How an exception relates to the one printed before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainLink {
    /// "The above exception was the direct cause of the following exception:"
    Cause,
    /// "During handling of the above exception, another exception occurred:"
    Context,
}

/// One exception of a chain with the frames printed above it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChainedException {
    /// How it is linked to the previous entry (`None` for the first one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<ChainLink>,
    /// Lines covered by this part of the chain.
    pub lines: Span,
    /// Frames, caller first, as Python prints them (capped; see `frames_omitted`).
    pub frames: Vec<Frame>,
    /// Frames left out of `frames` because the traceback was very deep.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub frames_omitted: u32,
    /// The exception line, when it was printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<Exception>,
    /// The header or the exception line is missing (the log was cut).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A Python stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// File path as printed.
    pub file: String,
    /// Line number, when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Function name.
    pub function: String,
    /// Source line shown under the frame, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The frame is the user's own code, not a library or the standard library.
    pub in_app: bool,
}

/// An exception type and its message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Exception {
    /// The type exactly as printed, qualified when Python qualified it (`torch.OutOfMemoryError`).
    pub type_name: String,
    /// The message, all of its lines joined with `\n`.
    pub message: String,
    /// The line of the `Type: message` line.
    pub line: u64,
}

impl Exception {
    /// The `Type: first line of the message` line as printed.
    pub fn line_text(&self) -> String {
        match self.message.lines().next() {
            Some(first) if !first.is_empty() => format!("{}: {first}", self.type_name),
            _ => self.type_name.clone(),
        }
    }

    /// The unqualified type name (`torch.cuda.OutOfMemoryError` → `OutOfMemoryError`).
    pub fn short_type(&self) -> &str {
        self.type_name
            .rsplit(['.', ':'])
            .next()
            .unwrap_or(&self.type_name)
    }
}

// ---------------------------------------------------------------------------------------------
// C++

/// A C++ stack printed by c10 (`Exception raised from f at file:line (most recent call first):`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CppTrace {
    /// Function that raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_from: Option<String>,
    /// Source location `file:line` that raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Frames, most recent first (capped).
    pub frames: Vec<CppFrame>,
}

/// One `frame #N:` line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CppFrame {
    /// N.
    pub index: u32,
    /// Symbol (demangled when the runtime demangled it).
    pub symbol: String,
    /// Shared library or binary, when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
}

/// A C++ exception that terminated the process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CppException {
    /// The thrown type (`c10::Error`, `std::runtime_error`).
    pub type_name: String,
    /// The `what():` text, when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// CUDA

/// A CUDA device-side assertion (`X.cu:LINE: fn: block: [..], thread: [..] Assertion `expr` failed.`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CudaAssert {
    /// Kernel source file, when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line in the kernel source file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_line: Option<u32>,
    /// Kernel function (short name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The asserted expression.
    pub expression: String,
    /// Number of log lines reporting this assertion.
    pub occurrences: u32,
    /// Distinct blocks reported.
    pub blocks: u32,
    /// Distinct (block, thread) pairs reported.
    pub threads: u32,
}

/// Which CUDA API reported an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaApi {
    /// The runtime API (`CUDA error: …`, `cudaError…`).
    Runtime,
    /// The driver API (`CUDA_ERROR_…`, `CUDA driver error`).
    Driver,
    /// The pre-1.0 THC message (`cuda runtime error (N) : …`).
    Legacy,
}

/// A CUDA runtime or driver error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CudaError {
    /// The message as printed (`an illegal memory access was encountered`).
    pub message: String,
    /// Numeric error code, when printed or known from the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u32>,
    /// Canonical runtime name (`cudaErrorIllegalAddress`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which API reported it.
    pub api: CudaApi,
}

/// A cuBLAS status with the call that returned it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CublasError {
    /// Status name without the prefix (`INVALID_VALUE`, `EXECUTION_FAILED`).
    pub status: String,
    /// The cuBLAS function called, when printed (`cublasGemmEx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// Its arguments as printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// CUDA data types among the arguments (`CUDA_R_16F`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dtypes: Vec<String>,
    /// `On entry to SGEMM parameter number N had an illegal value`: the parameter number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub illegal_parameter: Option<u32>,
}

/// A cuDNN failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CudnnError {
    /// Status name without the prefix (`NOT_SUPPORTED`), when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The message as printed.
    pub message: String,
}

/// What an NCCL line reported.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NcclKind {
    /// `NCCL WARN …`.
    Warn,
    /// An NCCL error result (`unhandled cuda error`, `ncclSystemError`).
    Error {
        /// Canonical result name (`ncclUnhandledCudaError`).
        code: String,
    },
    /// A ProcessGroupNCCL watchdog timeout.
    WatchdogTimeout {
        /// Sequence number of the collective.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        /// Collective type (`ALLREDUCE`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        op: Option<String>,
        /// Elements in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        numel_in: Option<u64>,
        /// Elements out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        numel_out: Option<u64>,
        /// Configured timeout.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// How long it ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ran_ms: Option<u64>,
    },
}

/// An NCCL warning, error or timeout.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NcclEvent {
    /// What happened.
    #[serde(flatten)]
    pub kind: NcclKind,
    /// The message as printed.
    pub message: String,
}

/// Which memory ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// GPU memory.
    Gpu,
    /// Host memory (`DefaultCPUAllocator: can't allocate memory`).
    Host,
    /// Memory of another accelerator (Apple MPS, Intel XPU).
    OtherAccelerator,
    /// A wording that XLA, TensorFlow and others print for any device (`RESOURCE_EXHAUSTED: Out
    /// of memory allocating … bytes`), on a line that names none: the host's memory on a
    /// CPU-only run, the GPU's on a GPU.
    Unspecified,
}

/// An out-of-memory report and every figure it printed, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct OomReport {
    /// Which memory.
    pub memory: Option<MemoryKind>,
    /// GPU index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// "Tried to allocate".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried_bytes: Option<u64>,
    /// "total capacity".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// "already allocated" / "is allocated by PyTorch".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<u64>,
    /// "free" / "of which X is free".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// "reserved in total by PyTorch".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<u64>,
    /// "reserved by PyTorch but unallocated" (fragmentation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_unallocated_bytes: Option<u64>,
    /// "Process N has X memory in use" (whole process, non-PyTorch memory included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_bytes: Option<u64>,
    /// "X allowed": the process's cap, printed when `set_per_process_memory_fraction` set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_bytes: Option<u64>,
    /// The first line of the report as printed.
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// Advice, facts, environment

/// Advice printed by a library. It is context: it never makes a diagnosis by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "advice", rename_all = "snake_case")]
pub enum Advice {
    /// "CUDA kernel errors might be asynchronously reported at some other API call".
    AsyncReport,
    /// "For debugging consider passing CUDA_LAUNCH_BLOCKING=1".
    LaunchBlocking,
    /// "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions".
    DeviceSideAssertions,
    /// "try setting max_split_size_mb / PYTORCH_CUDA_ALLOC_CONF".
    AllocatorConfig,
    /// "run with NCCL_DEBUG=INFO for details".
    NcclDebug,
    /// "To enable traceback see: …/elastic/errors.html".
    ElasticTraceback,
}

/// A fact stated in an error message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// `mat1 and mat2 shapes cannot be multiplied (64x512 and 768x10)`.
    MatmulShapes {
        /// Left operand shape.
        left: Vec<u64>,
        /// Right operand shape.
        right: Vec<u64>,
    },
    /// `The size of tensor a (X) must match the size of tensor b (Y) at non-singleton dimension D`.
    BroadcastSizes {
        /// Size of a.
        a: u64,
        /// Size of b.
        b: u64,
        /// Dimension.
        dim: u32,
    },
    /// `Target size (…) must be the same as input size (…)`, `Expected input batch_size (X) to match target batch_size (Y)`.
    TargetInputShapes {
        /// Target shape.
        target: Vec<u64>,
        /// Input shape.
        input: Vec<u64>,
    },
    /// Two dtypes that had to agree (`expected scalar type Float but found Half`).
    Dtypes {
        /// The expected dtype (or the first operand's).
        expected: String,
        /// The dtype found (or the second operand's).
        found: String,
    },
    /// Two devices that had to agree (`cuda:0 and cpu`).
    Devices {
        /// First device.
        first: String,
        /// Second device.
        second: String,
    },
    /// A checkpoint parameter whose shape differs from the model's.
    CheckpointSizeMismatch {
        /// Parameter name (`classifier.weight`).
        parameter: String,
        /// Shape in the checkpoint.
        checkpoint: Vec<u64>,
        /// Shape in the model (empty when the line was cut before it).
        model: Vec<u64>,
    },
    /// An index or target value out of bounds (`Target 5 is out of bounds`).
    IndexOutOfBounds {
        /// The offending value, when printed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<i64>,
        /// Size of the indexed dimension, when printed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        /// The dimension, when printed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dim: Option<u32>,
    },
}

/// Which part of the environment a fact describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvKey {
    /// PyTorch version.
    Torch,
    /// CUDA version (the build's or the toolkit's).
    Cuda,
    /// Highest CUDA version the driver supports (nvidia-smi "CUDA Version").
    DriverCuda,
    /// cuDNN version.
    Cudnn,
    /// NVIDIA driver version.
    Driver,
    /// Hugging Face transformers version.
    Transformers,
    /// Python version.
    Python,
    /// NCCL version.
    Nccl,
    /// A GPU model name.
    Gpu,
}

impl EnvKey {
    /// The name used in JSON and rule files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Torch => "torch",
            Self::Cuda => "cuda",
            Self::DriverCuda => "driver_cuda",
            Self::Cudnn => "cudnn",
            Self::Driver => "driver",
            Self::Transformers => "transformers",
            Self::Python => "python",
            Self::Nccl => "nccl",
            Self::Gpu => "gpu",
        }
    }
}

/// A fact about the environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnvFact {
    /// What it describes.
    pub key: EnvKey,
    /// The value as printed (`2.1.0+cu121`, `NVIDIA A100-SXM4-80GB`).
    pub value: String,
}

/// A failed child process reported by torch.distributed.elastic (`ChildFailedError`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ChildFailure {
    /// Listed under "Root Cause (first observed failure)".
    pub root_cause: bool,
    /// Global rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_rank: Option<u32>,
    /// Local rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// Exit code (negative for a signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exitcode: Option<i32>,
    /// Host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Signal name, when the child was killed by one (`SIGKILL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}
