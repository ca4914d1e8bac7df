//! A distributed job's diagnosis: many files in (per-rank logs, torchrun error files, kernel logs,
//! nvidia-smi and DCGM reports, flight-recorder dumps), the first fault out.
//!
//! [`BundleDiagnosis`] names the rank, host, GPU and collective that failed first, folds the
//! ranks that only waited for it into counted [`Cascade`]s, shows each process group's collective
//! state per rank ([`GroupStall`]) and each NVIDIA Xid with what it means ([`XidReport`]).

use serde::{Deserialize, Serialize};

use super::{Confidence, Diagnosis, EvidenceLine, Finding, Warning};

/// Version of the bundle diagnosis JSON document.
pub const BUNDLE_FORMAT_VERSION: u32 = 1;

/// What a file of a bundle is, told from its content (its name only breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// The output of one rank (stdout, stderr or both).
    RankLog,
    /// The output of several ranks in one file, each line prefixed with its rank (`[rank3]:`,
    /// `[default3]:`, `3: `).
    InterleavedLog,
    /// A SLURM job's output (`srun:` / `slurmstepd:` lines, `srun -l` rank prefixes).
    SlurmOutput,
    /// A launcher's own log with no rank output (torchrun's agent).
    LauncherLog,
    /// torchrun's error file, written by `@record` (`{"message": {"message": …, "extraInfo": …}}`).
    ErrorFile,
    /// Kernel messages: `dmesg` or the journal (`NVRM: Xid …`).
    KernelLog,
    /// `nvidia-smi -q` output.
    NvidiaSmi,
    /// DCGM diagnostics (`dcgmi diag -j`) as JSON.
    DcgmDiag,
    /// A PyTorch flight-recorder dump (pickle, or JSON when asked for).
    FlightRecorder,
    /// Not recognised: read as a log, kept out of the rank count.
    Unknown,
}

impl FileKind {
    /// Whether the file is a program's output, read by the single-log analysis.
    pub fn is_log(self) -> bool {
        matches!(
            self,
            Self::RankLog | Self::InterleavedLog | Self::SlurmOutput | Self::LauncherLog | Self::Unknown
        )
    }

    /// The snake_case name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::RankLog => "rank_log",
            Self::InterleavedLog => "interleaved_log",
            Self::SlurmOutput => "slurm_output",
            Self::LauncherLog => "launcher_log",
            Self::ErrorFile => "error_file",
            Self::KernelLog => "kernel_log",
            Self::NvidiaSmi => "nvidia_smi",
            Self::DcgmDiag => "dcgm_diag",
            Self::FlightRecorder => "flight_recorder",
            Self::Unknown => "unknown",
        }
    }
}

/// A GPU as the files name it: any of its index, PCI bus id and UUID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct GpuRef {
    /// Index on its host (`cuda:3`, `GPU 3`), when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// PCI bus id, normalized to `0000:3b:00` (domain:bus:device, lower case, no function).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// UUID (`GPU-5c6b…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Model name (`NVIDIA H100 80GB HBM3`), when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl GpuRef {
    /// Whether nothing identifies the GPU.
    pub fn is_empty(&self) -> bool {
        self.index.is_none() && self.bus_id.is_none() && self.uuid.is_none()
    }

    /// Whether two references may name the same GPU: no identifier they both carry differs, and
    /// they share at least one.
    pub fn same_as(&self, other: &GpuRef) -> bool {
        fn agree<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> (bool, bool) {
            match (a, b) {
                (Some(x), Some(y)) => (x == y, true),
                _ => (true, false),
            }
        }
        let checks = [
            agree(&self.uuid, &other.uuid),
            agree(&self.bus_id, &other.bus_id),
            agree(&self.index, &other.index),
        ];
        checks.iter().all(|(same, _)| *same) && checks.iter().any(|(_, shared)| *shared)
    }

    /// Fills the identifiers `self` lacks from `other`.
    pub fn merge(&mut self, other: &GpuRef) {
        if self.index.is_none() {
            self.index = other.index;
        }
        if self.bus_id.is_none() {
            self.bus_id.clone_from(&other.bus_id);
        }
        if self.uuid.is_none() {
            self.uuid.clone_from(&other.uuid);
        }
        if self.name.is_none() {
            self.name.clone_from(&other.name);
        }
    }
}

impl std::fmt::Display for GpuRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(i) = self.index {
            parts.push(format!("GPU {i}"));
        }
        if let Some(b) = &self.bus_id {
            parts.push(format!("bus {b}"));
        }
        if let Some(u) = &self.uuid {
            parts.push(u.clone());
        }
        if parts.is_empty() {
            parts.push("GPU (unidentified)".to_owned());
        }
        f.write_str(&parts.join(", "))
    }
}

/// One file of the bundle and what was read from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleFile {
    /// The name it was given (a path inside a folder or an archive).
    pub name: String,
    /// What it is.
    pub kind: FileKind,
    /// Bytes read.
    pub bytes: u64,
    /// Lines read (0 for a binary dump).
    pub lines: u64,
    /// The ranks it speaks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    /// The host it comes from, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The single-log diagnosis of a log (what `faultline analyze FILE` gives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Diagnosis>,
    /// Problems met while reading it (it was still used as far as it could be).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// What became of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankOutcome {
    /// It failed by itself (an exception, a device assert, an OOM, an Xid on its GPU).
    Fault,
    /// It failed because another rank did (a watchdog timeout, a peer that closed the connection,
    /// a signal from the launcher).
    Cascade,
    /// Its files show no failure.
    NoFailure,
    /// No file of the bundle speaks for it.
    NoLog,
}

/// One rank of the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// Global rank.
    pub rank: u32,
    /// Host it ran on, when a file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Local rank on its host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// Its GPU, when a file names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    /// The files that speak for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// What became of it.
    pub outcome: RankOutcome,
    /// Its own root cause, from the single-log diagnosis of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<Finding>,
    /// Its first failure line (time and text), when one was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<TimelineEvent>,
}

/// What a timeline event is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TimelineKind {
    /// A failure of the rank's own (the root finding of its single-log diagnosis, or an
    /// exception its error file records).
    Fault {
        /// Taxonomy class (`cuda.device_assert.index`), or the exception type when no rule
        /// names it (`IndexError`).
        class: String,
    },
    /// An NVIDIA Xid logged by the kernel.
    Xid {
        /// The Xid code.
        code: u32,
    },
    /// A collective that did not finish in time (NCCL watchdog, gloo timeout).
    CollectiveTimeout {
        /// The collective, as far as the line says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        collective: Option<CollectiveRef>,
    },
    /// A peer went away: a connection closed or reset, a remote error, a rank that failed a
    /// monitored barrier.
    PeerLost {
        /// The rank the line blames, when it names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blamed_rank: Option<u32>,
    },
    /// The process ended (an exit code or a signal reported by the launcher or SLURM).
    Exit {
        /// Exit code (negative for a signal).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// Signal name (`SIGTERM`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// A failing GPU health check (DCGM).
    HealthCheck {
        /// The check that failed.
        test: String,
    },
}

/// One event on a rank's (or a host's) timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Microseconds since the Unix epoch on the bundle's common clock (the host's clock offset
    /// removed), when the line carries a time. A time printed without a year or zone is read in
    /// the year the bundle's other stamps show, as UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_us: Option<i64>,
    /// The time as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<String>,
    /// The rank, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// The host, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The file it was read from.
    pub file: String,
    /// Its line in that file (0 for a file without lines, such as a dump).
    pub line: u64,
    /// What it is.
    pub kind: TimelineKind,
    /// The line as normalized, cut to a reasonable length.
    pub text: String,
    /// Whether it is a consequence of the first fault (greyed on a timeline).
    #[serde(default)]
    pub cascade: bool,
}

/// A collective of a process group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CollectiveRef {
    /// Process group (`0`, `default_pg`), as the files name it.
    pub pg: String,
    /// Sequence number within the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Operation (`ALLREDUCE`), upper case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
}

impl std::fmt::Display for CollectiveRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.op.as_deref().unwrap_or("collective"))?;
        if let Some(seq) = self.seq {
            write!(f, " SeqNum {seq}")?;
        }
        write!(f, " (process group {})", self.pg)
    }
}

/// What the first fault is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A rank failed by itself (its own root cause is in `cause`).
    RankFailure,
    /// The kernel logged an Xid for a GPU (see `xid`).
    Xid,
    /// A rank never entered the collective the others waited in (it hung, was slow, or took
    /// another path); its logs show no failure of its own.
    NeverEntered,
    /// Ranks called different collectives, or the same one with different sizes, at the same
    /// sequence number.
    Desync,
    /// A GPU failed a DCGM health check.
    HealthCheck,
}

/// Evidence lines of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEvidence {
    /// The file.
    pub file: String,
    /// Its lines (original line numbers).
    pub lines: Vec<EvidenceLine>,
}

/// The failure that came first: the earliest event that is not a consequence of another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstFault {
    /// What it is.
    pub kind: FaultKind,
    /// One sentence: which rank, host, GPU and collective, and what happened.
    pub summary: String,
    /// The rank that failed first, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Its host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its local rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// Its GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    /// The collective the other ranks were left waiting in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<CollectiveRef>,
    /// The rank's own root cause, from the single-log diagnosis of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Finding>,
    /// The Xid, when the first fault is one (or when one on the same GPU goes with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xid: Option<XidReport>,
    /// When it happened, on the bundle's common clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_us: Option<i64>,
    /// How sure the election is.
    pub confidence: Confidence,
    /// Why it was elected, and why at this confidence.
    pub reasons: Vec<String>,
    /// The lines that show it, per file.
    pub evidence: Vec<FileEvidence>,
}

/// Ranks that failed the same way because of the first fault, folded into one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cascade {
    /// `63 ranks: watchdog timeout on ALLREDUCE SeqNum 1412, cascade`.
    pub summary: String,
    /// What they show (`watchdog timeout`, `peer lost`, `terminated by the launcher`).
    pub what: String,
    /// The ranks.
    pub ranks: Vec<u32>,
    /// The collective they waited in, when they agree on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<CollectiveRef>,
}

/// Where a rank's collective state was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateSource {
    /// Its log (`SeqNum=…`, `last enqueued … last completed …`).
    Log,
    /// Its flight-recorder dump.
    Dump,
}

/// One collective as one rank called it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct CollectiveCall {
    /// Operation, upper case (`ALLREDUCE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Elements in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numel_in: Option<u64>,
    /// Elements out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numel_out: Option<u64>,
    /// Tensor sizes as a dump records them (`[[4, 8]]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<String>,
}

/// One rank's collective state in one process group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankCollectiveState {
    /// The rank.
    pub rank: u32,
    /// Last sequence number it enqueued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_enqueued: Option<u64>,
    /// Last sequence number it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_started: Option<u64>,
    /// Last sequence number it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<u64>,
    /// The collective it timed out in, when it reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<u64>,
    /// What it called at the stalled sequence number, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CollectiveCall>,
    /// Where this was read.
    pub source: StateSource,
}

/// Ranks that called different things at the same sequence number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desync {
    /// The sequence number.
    pub seq: u64,
    /// Each distinct call with the ranks that made it, the most common first.
    pub calls: Vec<DesyncCall>,
}

/// One of the calls of a [`Desync`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesyncCall {
    /// The call.
    pub call: CollectiveCall,
    /// The ranks that made it.
    pub ranks: Vec<u32>,
}

/// A process group's collectives across ranks: where they stopped, who never arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStall {
    /// The process group (`0`, `default_pg`).
    pub pg: String,
    /// The collective the ranks were stuck in (the lowest sequence number not completed by every
    /// rank that reported), when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<CollectiveRef>,
    /// Each rank's state, by rank.
    pub ranks: Vec<RankCollectiveState>,
    /// Ranks whose last enqueued collective is before the stalled one: they never entered it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never_entered: Vec<u32>,
    /// Sequence numbers where ranks disagree on the op or the size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desync: Vec<Desync>,
}

/// Which ranks the bundle has files for, and which it lacks.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coverage {
    /// Ranks in the job, when a file says (`WORLD_SIZE`, a dump's group, torchrun's summary,
    /// the highest rank seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// Where the world size was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size_from: Option<String>,
    /// Ranks with at least one log line.
    pub with_log: Vec<u32>,
    /// Ranks of the job with no log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without_log: Vec<u32>,
    /// Ranks with a flight-recorder dump.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with_dump: Vec<u32>,
    /// Ranks of the job with no dump, when any rank has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without_dump: Vec<u32>,
}

/// Whose fault an Xid is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidOrigin {
    /// The application (a bad address, a killed context).
    Application,
    /// The driver or its firmware.
    Driver,
    /// The hardware (memory, links, the bus, the board).
    Hardware,
    /// Either: the application's or the hardware's, depending on what else happened.
    Ambiguous,
}

/// What to do about an Xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidAction {
    /// Fix the application and restart the job.
    FixApplication,
    /// Restart the job; the GPU is fine.
    RestartJob,
    /// Reset the GPU (or reboot the node) before the next job.
    ResetGpu,
    /// Take the node out of service and have the GPU checked.
    DrainNode,
    /// Update or reinstall the driver.
    UpdateDriver,
}

/// One Xid event and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidReport {
    /// The code.
    pub code: u32,
    /// What it means, in a sentence (from `rules/xid.toml`).
    pub meaning: String,
    /// Whose fault the catalog says it is.
    pub origin: XidOrigin,
    /// Whose fault it is in this job: an ambiguous Xid is settled as the application's when the
    /// rank on that GPU shows an application fault; otherwise it stays ambiguous.
    pub settled: XidOrigin,
    /// Why it was settled so, when the catalog's origin was ambiguous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_by: Option<String>,
    /// What to do, in order.
    pub actions: Vec<XidAction>,
    /// Host whose kernel logged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The GPU (bus id from the line; index and UUID when another file maps them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRef>,
    /// The ranks that ran on that GPU, when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    /// When, on the bundle's common clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_us: Option<i64>,
    /// The file and line.
    pub file: String,
    /// Its line.
    pub line: u64,
    /// The line as printed (normalized).
    pub text: String,
    /// Where the catalog's meaning comes from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

/// How far one host's clock is from the bundle's reference clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The host (or the file, when no host is known).
    pub host: String,
    /// Milliseconds to subtract from its stamps to get the reference clock's.
    pub offset_ms: i64,
    /// The shared events it was estimated from (`watchdog timeout on SeqNum 1412`).
    pub from: String,
    /// How many shared events agreed.
    pub samples: u32,
}

/// The diagnosis of a distributed job from all its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleDiagnosis {
    /// Format version of this document.
    pub format_version: u32,
    /// The failure that came first, when one could be elected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_fault: Option<FirstFault>,
    /// The ranks that only followed it, folded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cascades: Vec<Cascade>,
    /// What would settle what the bundle cannot (a missing rank's log, a dump, dmesg).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Per process group: the collective the ranks stalled in, who never entered it, desyncs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<GroupStall>,
    /// Xid events, earliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xids: Vec<XidReport>,
    /// Which ranks have files.
    pub coverage: Coverage,
    /// The ranks, by rank.
    pub ranks: Vec<RankReport>,
    /// Hosts seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Clock offsets between hosts, when they could be estimated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_offsets: Vec<ClockOffset>,
    /// The events that matter (failures, timeouts, exits, Xids), in time order where times are
    /// known, then by rank.
    pub timeline: Vec<TimelineEvent>,
    /// The files read.
    pub files: Vec<BundleFile>,
    /// Problems with the bundle as a whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

impl BundleDiagnosis {
    /// Whether a first fault was elected, or any file was diagnosed.
    pub fn is_diagnosed(&self) -> bool {
        self.first_fault.is_some()
            || self
                .files
                .iter()
                .any(|f| f.diagnosis.as_ref().is_some_and(Diagnosis::is_diagnosed))
    }
}
