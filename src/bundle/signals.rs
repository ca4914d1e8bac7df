//! What one line of a distributed job's log says about the job: a collective that timed out, the
//! work a rank had enqueued and completed, a peer that went away, a process that exited, the host,
//! GPU and world size a launcher or NCCL printed, an Xid. Pure functions of the line's text.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::CollectiveCall;

macro_rules! re {
    ($pattern:expr) => {{
        static RE: LazyLock<Regex> = LazyLock::new(|| {
            // The patterns are constants of this file; the unit tests run every one of them.
            #[allow(clippy::expect_used)]
            Regex::new($pattern).expect("signal pattern compiles")
        });
        &*RE
    }};
}

/// Literals one of which every line worth reading here holds; the scan looks only at those lines.
pub const TRIGGERS: &[&str] = &[
    "SeqNum",
    "NCCL work",
    "monitoredBarrier",
    "by peer",
    "Timed out waiting",
    "remote process exited",
    "NCCL INFO",
    "NCCL WARN",
    "srun: error",
    "exitcode",
    "running collective",
    "collective mismatch",
    "WORLD_SIZE",
    "world_size",
    "NVRM",
    "Error",
    "error",
    "Traceback",
    "Assertion",
    "terminate called",
    "Fatal Python",
    "peer ranks",
];

/// Whether a line may be a failure (its time stamp is kept to time a finding on it).
pub fn is_error_like(text: &str) -> bool {
    [
        "Error",
        "error",
        "Traceback",
        "Assertion",
        "terminate called",
        "Fatal Python",
    ]
    .iter()
    .any(|t| text.contains(t))
}

/// One thing a line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A collective timed out (NCCL watchdog, gloo's wait).
    Timeout {
        /// Process group, when the line names it.
        pg: Option<String>,
        /// Sequence number.
        seq: Option<u64>,
        /// What was called.
        call: CollectiveCall,
    },
    /// `last enqueued NCCL work: N, last completed NCCL work: M` (and the work that timed out).
    WorkState {
        /// Process group, when the line names it.
        pg: Option<String>,
        /// The work that timed out or failed.
        at: Option<u64>,
        /// Last enqueued.
        enqueued: Option<u64>,
        /// Last completed.
        completed: Option<u64>,
    },
    /// A peer went away (and the ranks a monitored barrier blames).
    PeerLost {
        /// The ranks blamed.
        blamed: Vec<u32>,
    },
    /// Two ranks called different collectives (`TORCH_DISTRIBUTED_DEBUG=DETAIL`'s check, or
    /// gloo's size check).
    Mismatch {
        /// Process group, when the line names it (DETAIL's fingerprint line does not).
        pg: Option<String>,
        /// Each rank's call with its sequence number, as the line shows them.
        calls: Vec<(u32, Option<u64>, CollectiveCall)>,
    },
    /// A process exited, as a launcher reports it.
    Exit {
        /// Global rank (SLURM tasks).
        ranks: Vec<u32>,
        /// Local rank (torchrun's agent).
        local_rank: Option<u32>,
        /// Host.
        host: Option<String>,
        /// Exit code.
        code: Option<i32>,
        /// Signal name.
        signal: Option<String>,
    },
    /// NCCL's communicator line: rank, size, GPU.
    NcclRank {
        /// Global rank within the communicator.
        rank: u32,
        /// Ranks in the communicator.
        nranks: Option<u32>,
        /// CUDA device index.
        cuda_dev: Option<u32>,
        /// PCI bus id (normalized).
        bus_id: Option<String>,
    },
    /// The host (and CUDA device) an NCCL line or a stream tag names.
    Host {
        /// Host name.
        host: String,
        /// CUDA device of an NCCL line's `[N]`.
        cuda_dev: Option<u32>,
    },
    /// The number of ranks in the job.
    WorldSize(u32),
    /// gloo's `[Gloo] Rank N is connected to K peer ranks` (torch 2.9 prints it as each group
    /// connects): the rank's number in a group of K + 1 ranks. The default group is the largest a
    /// rank is in, and a group as large as the world holds every rank in order (`new_group`
    /// sorts its ranks), so there N is the global rank.
    GlooConnected {
        /// The rank in the group.
        rank: u32,
        /// The other ranks of the group.
        peers: u32,
    },
    /// The rank an NCCL label names (`[PG 0 Rank 3]`), for lines without a rank prefix.
    LabelRank(u32),
    /// torchrun's summary names a worker's error file (`error_file: …/attempt_0/2/error.json`):
    /// with the summary's rank and host, it ties that worker folder to a global rank.
    ErrorFilePath(String),
    /// An NVIDIA Xid.
    Xid {
        /// The code.
        code: u32,
        /// The GPU's bus id.
        bus_id: Option<String>,
    },
    /// The kernel's `NVRM: GPU at PCI:0000:2b:00: GPU-0b11…`: a bus id and its UUID.
    GpuUuid {
        /// Bus id.
        bus_id: String,
        /// UUID.
        uuid: String,
    },
}

fn num<T: std::str::FromStr>(c: &regex::Captures<'_>, name: &str) -> Option<T> {
    c.name(name).and_then(|m| m.as_str().parse().ok())
}

/// `ALL_REDUCE`, `nccl:all_reduce`, `allreduce` → `ALLREDUCE`.
pub fn normalize_op(op: &str) -> String {
    let op = op.rsplit(':').next().unwrap_or(op);
    op.chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_uppercase()
}

/// The process group a label names: `[PG 1 Rank 0]`, `[PG ID 0 PG GUID 0(default_pg) Rank 3]`.
fn pg_label(text: &str) -> Option<String> {
    re!(r"\[PG (?:ID )?(?P<pg>\d+)")
        .captures(text)
        .map(|c| c["pg"].to_owned())
}

/// Everything `text` (a normalized line) says.
pub fn read(text: &str) -> Vec<Signal> {
    let mut out = Vec::new();
    if let Some(c) = re!(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]").captures(text)
        && let Some(rank) = num(&c, "rank")
    {
        out.push(Signal::LabelRank(rank));
    }
    if let Some(c) =
        re!(r"\[Gloo\] Rank (?P<rank>\d+) is connected to (?P<peers>\d+) peer ranks").captures(text)
        && let (Some(rank), Some(peers)) = (num(&c, "rank"), num(&c, "peers"))
    {
        out.push(Signal::GlooConnected { rank, peers });
    }
    if let Some(c) =
        re!(r"(?:Watchdog caught|Caught) collective operation timeout: \w*\((?P<body>[^)]*)\)").captures(text)
    {
        let body = &c["body"];
        let field = |name: &str| -> Option<u64> {
            body.split(',')
                .filter_map(|kv| kv.trim().split_once('='))
                .find(|(k, _)| *k == name)
                .and_then(|(_, v)| v.trim().parse().ok())
        };
        let op = body
            .split(',')
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == "OpType")
            .map(|(_, v)| normalize_op(v.trim()));
        out.push(Signal::Timeout {
            pg: pg_label(text),
            seq: field("SeqNum"),
            call: CollectiveCall {
                op,
                numel_in: field("NumelIn"),
                numel_out: field("NumelOut"),
                sizes: None,
            },
        });
    }
    if let Some(c) = re!(r"(?:Timeout at NCCL work|detected by watchdog at work|Exception (?:\(either an error or timeout\) )?detected by watchdog at work): (?P<at>\d+)(?:, last enqueued NCCL work: (?P<enq>-?\d+))?(?:, last completed NCCL work: (?P<done>-?\d+))?").captures(text) {
        out.push(Signal::WorkState {
            pg: pg_label(text),
            at: num(&c, "at"),
            enqueued: num::<i64>(&c, "enq").and_then(|v| u64::try_from(v).ok()),
            completed: num::<i64>(&c, "done").and_then(|v| u64::try_from(v).ok()),
        });
    }
    if re!(r"Timed out waiting \d+ ?ms for (?:recv|send) operation").is_match(text) {
        out.push(Signal::Timeout {
            pg: None,
            seq: None,
            call: CollectiveCall::default(),
        });
    }
    if let Some(c) = re!(r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier").captures(text) {
        let blamed = c["ranks"]
            .split(',')
            .filter_map(|r| r.trim().parse().ok())
            .collect();
        out.push(Signal::PeerLost { blamed });
    } else if re!(r"Connection (?:closed|reset) by peer|received errors while waiting for send/recv from rank|remote process exited or there was a network error|ncclRemoteError|Socket Timeout|Broken pipe").is_match(text) {
        out.push(Signal::PeerLost { blamed: Vec::new() });
    }
    if text.contains("running collective: CollectiveFingerPrint") {
        let calls = re!(r"Rank (?P<rank>\d+) is running collective: CollectiveFingerPrint\((?P<body>(?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")
            .captures_iter(text)
            .filter_map(|c| {
                let body = &c["body"];
                let seq = re!(r"SequenceNumber=(?P<v>\d+)").captures(body).and_then(|s| num(&s, "v"));
                let op = re!(r"OpType=(?P<v>\w+)").captures(body).map(|s| normalize_op(&s["v"]));
                let shape = re!(r"TensorShape=(?P<v>\[[^\]]*\])").captures(body).map(|s| s["v"].to_owned());
                let numel = shape.as_deref().and_then(numel_of_shape);
                Some((
                    num(&c, "rank")?,
                    seq,
                    CollectiveCall {
                        op,
                        numel_in: numel,
                        numel_out: None,
                        sizes: shape,
                    },
                ))
            })
            .collect::<Vec<_>>();
        if !calls.is_empty() {
            out.push(Signal::Mismatch {
                pg: pg_label(text),
                calls,
            });
        }
    } else if text.contains("Is there a distributed collective mismatch")
        || text.contains("Received data size doesn't match expected size")
    {
        out.push(Signal::Mismatch {
            pg: pg_label(text),
            calls: Vec::new(),
        });
    }
    if let Some(c) = re!(r"^\s*error_file\s*:\s*(?P<path>\S+)$").captures(text)
        && c["path"] != *"<N/A>"
    {
        out.push(Signal::ErrorFilePath(c["path"].to_owned()));
    }
    if let Some(c) = re!(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+)").captures(text) {
        let code: Option<i32> = num(&c, "code");
        out.push(Signal::Exit {
            ranks: Vec::new(),
            local_rank: num(&c, "lr"),
            host: None,
            code,
            signal: code.and_then(signal_name),
        });
    }
    if let Some(c) =
        re!(r"srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,\-\[\] ]+): (?P<msg>.+)$").captures(text)
    {
        let msg = &c["msg"];
        let code = re!(r"exit code (?P<v>-?\d+)")
            .captures(msg)
            .and_then(|m| num(&m, "v"));
        let signal = if msg.contains("Killed") {
            Some("SIGKILL".to_owned())
        } else if msg.contains("Terminated") {
            Some("SIGTERM".to_owned())
        } else {
            None
        };
        out.push(Signal::Exit {
            ranks: task_list(&c["tasks"]),
            local_rank: None,
            host: Some(c["host"].to_owned()),
            code,
            signal,
        });
    }
    if let Some(c) = re!(r"^(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?:INFO|WARN)")
        .captures(text)
    {
        out.push(Signal::Host {
            host: c["host"].to_owned(),
            cuda_dev: num(&c, "dev"),
        });
    }
    if let Some(c) = re!(r"NCCL INFO (?:comm 0x[0-9a-f]+ )?rank (?P<rank>\d+) nranks (?P<n>\d+) cudaDev (?P<dev>\d+)(?: nvmlDev \d+)?(?: busId (?P<bus>[0-9a-f]+))?").captures(text)
        && let Some(rank) = num(&c, "rank")
    {
        out.push(Signal::NcclRank {
            rank,
            nranks: num(&c, "n"),
            cuda_dev: num(&c, "dev"),
            bus_id: c.name("bus").and_then(|b| super::xid::bus_id_from_nccl(b.as_str())),
        });
    }
    if let Some(x) = super::xid::parse_line(text) {
        out.push(Signal::Xid {
            code: x.code,
            bus_id: x.bus_id,
        });
    }
    if let Some(c) =
        re!(r"NVRM: GPU at (?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+): (?P<uuid>GPU-[0-9a-fA-F-]{8,})").captures(text)
        && let Some(bus_id) = super::xid::normalize_bus_id(&c["bus"])
    {
        out.push(Signal::GpuUuid {
            bus_id,
            uuid: c["uuid"].to_owned(),
        });
    }
    if let Some(c) = re!(r"\b(?:WORLD_SIZE|world_size)\s*[=:]\s*(?P<n>\d{1,7})\b").captures(text)
        && let Some(n) = num(&c, "n")
        && n > 0
    {
        out.push(Signal::WorldSize(n));
    }
    out
}

/// A host and stream tag at the start of a raw line (`node-3.cluster [stderr] `).
pub fn host_stream_tag(raw: &str) -> Option<&str> {
    re!(r"^(?P<host>[\w.-]{1,100}) \[std(?:out|err)\] ")
        .captures(raw)
        .and_then(|c| c.name("host"))
        .map(|m| m.as_str())
}

/// SLURM's task lists: `5`, `0-3`, `0,2,5-7`, `[0-3]`.
pub fn task_list(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in text.trim_matches(|c| c == '[' || c == ']' || c == ' ').split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>())
                    && a <= b
                    && b - a < 100_000
                {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

/// The number of elements of a shape `[4, 8]` (`[]` is a scalar: 1).
pub fn numel_of_shape(shape: &str) -> Option<u64> {
    let inner = shape.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(1);
    }
    inner
        .split(',')
        .try_fold(1u64, |acc, d| acc.checked_mul(d.trim().parse::<u64>().ok()?))
}

/// The signal a negative exit code stands for.
pub fn signal_name(code: i32) -> Option<String> {
    let name = match -code {
        1 => "SIGHUP",
        2 => "SIGINT",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    };
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gloos_connection_line_gives_the_rank_and_its_groups_size() {
        let line =
            "[Gloo] Rank 3 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7";
        assert_eq!(read(line), vec![Signal::GlooConnected { rank: 3, peers: 7 }]);
    }

    #[test]
    fn an_nccl_watchdog_timeout_gives_its_group_sequence_op_and_sizes() {
        let line = "[PG ID 0 PG GUID 0(default_pg) Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out.";
        let signals = read(line);
        assert!(signals.contains(&Signal::LabelRank(4)));
        assert!(signals.contains(&Signal::Timeout {
            pg: Some("0".into()),
            seq: Some(1580),
            call: CollectiveCall {
                op: Some("ALLREDUCE".into()),
                numel_in: Some(466_119_168),
                numel_out: Some(466_119_168),
                sizes: None
            }
        }));
    }

    #[test]
    fn the_work_a_rank_enqueued_and_completed_is_read() {
        let line = "[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.";
        assert!(read(line).contains(&Signal::WorkState {
            pg: Some("1".into()),
            at: Some(1580),
            enqueued: Some(1582),
            completed: Some(1579)
        }));
        let short = "[PG 0 (default_pg) Rank 3] Timeout at NCCL work: 2070, last enqueued NCCL work: 2082, last completed NCCL work: 2069.";
        assert!(read(short).iter().any(|s| matches!(
            s,
            Signal::WorkState {
                at: Some(2070),
                enqueued: Some(2082),
                ..
            }
        )));
    }

    #[test]
    fn a_monitored_barrier_blames_the_ranks_that_did_not_arrive() {
        let line = "RuntimeError: [Rank 0]: Ranks 2, 5 failed to pass monitoredBarrier in 10000 ms";
        assert!(read(line).contains(&Signal::PeerLost { blamed: vec![2, 5] }));
        let reset = "RuntimeError: [pair.cc:545] Read error [127.0.0.1]:896: Connection reset by peer. This is typically caused by a remote worker hanging";
        assert!(read(reset).contains(&Signal::PeerLost { blamed: vec![] }));
    }

    #[test]
    fn a_detail_mismatch_gives_each_ranks_call() {
        let line = "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[6], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, memory_format=(nullopt))), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, memory_format=(nullopt))).";
        let Some(Signal::Mismatch { calls, .. }) = read(line)
            .into_iter()
            .find(|s| matches!(s, Signal::Mismatch { .. }))
        else {
            panic!("no mismatch read");
        };
        let sizes: Vec<(u32, Option<u64>, Option<u64>)> =
            calls.iter().map(|(r, s, c)| (*r, *s, c.numel_in)).collect();
        assert_eq!(sizes, vec![(1, Some(1), Some(6)), (0, Some(1), Some(4))]);
    }

    #[test]
    fn launchers_report_exits_with_hosts_and_ranks() {
        let agent = "failed (exitcode: -6) local_rank: 2 (pid: 4194) of binary: /usr/bin/python";
        assert!(read(agent).iter().any(|s| matches!(s, Signal::Exit { local_rank: Some(2), code: Some(-6), signal: Some(sig), .. } if sig == "SIGABRT")));
        let srun = "srun: error: node-3: tasks 8-10,12: Exited with exit code 1";
        assert!(read(srun).iter().any(|s| matches!(s, Signal::Exit { ranks, host: Some(h), code: Some(1), .. } if ranks == &[8, 9, 10, 12] && h == "node-3")));
    }

    #[test]
    fn nccl_info_lines_give_host_rank_world_size_and_gpu() {
        let line = "node-3:12345:12400 [5] NCCL INFO comm 0x55d1 rank 13 nranks 16 cudaDev 5 nvmlDev 5 busId 3b000 commId 0x1 - Init COMPLETE";
        let s = read(line);
        assert!(s.contains(&Signal::Host {
            host: "node-3".into(),
            cuda_dev: Some(5)
        }));
        assert!(s.contains(&Signal::NcclRank {
            rank: 13,
            nranks: Some(16),
            cuda_dev: Some(5),
            bus_id: Some("0000:3b:00".into())
        }));
        assert!(read("WORLD_SIZE=64").contains(&Signal::WorldSize(64)));
        assert!(read("ddp world_size: 0").is_empty());
    }

    #[test]
    fn small_helpers_read_their_formats() {
        assert_eq!(normalize_op("nccl:all_reduce"), "ALLREDUCE");
        assert_eq!(numel_of_shape("[4, 8]"), Some(32));
        assert_eq!(numel_of_shape("[]"), Some(1));
        assert_eq!(task_list("[0-2]"), vec![0, 1, 2]);
        assert_eq!(host_stream_tag("node-1.c [stderr] [rank3]: x"), Some("node-1.c"));
        assert_eq!(signal_name(-15).as_deref(), Some("SIGTERM"));
        assert!(is_error_like("RuntimeError: x") && !is_error_like("step 3 loss 0.1"));
    }
}
