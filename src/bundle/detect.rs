//! What a file of a bundle is, told from its first bytes; the rank and host its name suggests
//! when its content does not say.

use std::collections::BTreeSet;

use crate::model::FileKind;
use crate::normalize::Normalizer;

/// Bytes of a file's head read to tell what it is.
pub const HEAD_BYTES: usize = 64 << 10;

/// Lines of the head looked at for rank prefixes and kernel lines.
const HEAD_LINES: usize = 2000;

/// What the head of a file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The kind.
    pub kind: FileKind,
    /// The ranks whose prefixes the head shows (`[rank3]:`, `[default3]:`, `3: `).
    pub prefixed_ranks: BTreeSet<u32>,
}

/// Tells what `head` (the first [`HEAD_BYTES`] of the file named `name`) is.
pub fn detect(name: &str, head: &[u8]) -> Detected {
    let prefixed_ranks = BTreeSet::new();
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first == Some(0x80) && contains(head, b"entries") | contains(head, b"pg_config") {
        return Detected {
            kind: FileKind::FlightRecorder,
            prefixed_ranks,
        };
    }
    if first == Some(b'{') {
        let kind = if contains(head, b"\"pg_config\"") || contains(head, b"\"collective_seq_id\"") {
            FileKind::FlightRecorder
        } else if contains(head, b"\"extraInfo\"") || contains(head, b"\"py_callstack\"") {
            FileKind::ErrorFile
        } else if contains(head, b"DCGM") || contains(head, b"\"test_categories\"") {
            FileKind::DcgmDiag
        } else {
            FileKind::Unknown
        };
        return Detected { kind, prefixed_ranks };
    }
    if contains(head, b"==NVSMI LOG==") || contains(head, b"Attached GPUs") && contains(head, b"Product Name")
    {
        return Detected {
            kind: FileKind::NvidiaSmi,
            prefixed_ranks,
        };
    }
    let text = String::from_utf8_lossy(head);
    let mut normalizer = Normalizer::new();
    let mut ranks = BTreeSet::new();
    let (mut lines, mut kernel, mut elastic) = (0usize, 0usize, 0usize);
    for (i, line) in text.lines().take(HEAD_LINES).enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        if is_kernel_line(line) {
            kernel += 1;
            continue;
        }
        elastic +=
            usize::from(line.contains("torch/distributed/elastic") || line.contains("torch.distributed.run"));
        if let Some(rank) = normalizer.normalize(i as u64 + 1, line.as_bytes()).meta.rank {
            ranks.insert(rank);
        }
    }
    let slurm =
        contains(head, b"srun: error:") || contains(head, b"slurmstepd: ") || contains(head, b"srun: Job ");
    let kind = if lines > 0 && kernel * 2 >= lines {
        FileKind::KernelLog
    } else if slurm {
        FileKind::SlurmOutput
    } else if ranks.len() >= 2 {
        FileKind::InterleavedLog
    } else if ranks.is_empty() && elastic > 0 && elastic * 4 >= lines {
        FileKind::LauncherLog
    } else if !ranks.is_empty() || rank_from_name(name).is_some() {
        FileKind::RankLog
    } else {
        FileKind::Unknown
    };
    Detected {
        kind,
        prefixed_ranks: ranks,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// A kernel message: `dmesg` (`[ 1234.5678] …`, `[Wed Nov 27 …] …`), the journal or syslog
/// (`Nov 27 05:33:50 host kernel: …`), or a bare `NVRM:` line (`dmesg | grep NVRM`).
pub fn is_kernel_line(line: &str) -> bool {
    let s = line.trim_start();
    if s.starts_with("NVRM:") {
        return true;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let rest = rest.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest.as_bytes().get(digits) == Some(&b'.') {
            return true;
        }
        return super::stamp::at_start(s).is_some_and(|(w, _)| w.year.is_some()) && !s.contains("]:");
    }
    super::stamp::syslog_at_start(s).is_some() && (s.contains(" kernel: ") || s.contains("NVRM"))
}

/// The rank a file's name suggests: `rank3.log`, `worker-3.out`, torchrun's
/// `attempt_0/3/stderr.log` (its local rank), a dump's `nccl_trace_rank_3`.
pub fn rank_from_name(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let base = lower.rsplit('/').next().unwrap_or(&lower);
    for key in ["rank", "worker", "proc", "task"] {
        if let Some(at) = base.rfind(key) {
            let rest = base[at + key.len()..].trim_start_matches(['_', '-', '.']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty() {
                return digits.parse().ok();
            }
        }
    }
    // torchrun --log-dir: `<run>/attempt_N/<local_rank>/{stdout,stderr}.log` and `error.json`.
    let parts: Vec<&str> = lower.split('/').collect();
    if parts.len() >= 2 {
        let folder = parts[parts.len() - 2];
        let in_attempt = parts.len() >= 3 && parts[parts.len() - 3].starts_with("attempt_");
        if in_attempt && !folder.is_empty() && folder.bytes().all(|b| b.is_ascii_digit()) {
            return folder.parse().ok();
        }
    }
    None
}

/// The host a kernel log's name suggests: its folder (`node-3/dmesg.txt`), or its name without
/// the usual words (`dmesg-node-3.txt`).
pub fn host_from_name(name: &str) -> Option<String> {
    const GENERIC: &[&str] = &[
        "dmesg",
        "kern",
        "kernel",
        "journal",
        "journalctl",
        "syslog",
        "messages",
        "log",
        "logs",
        "txt",
        "out",
    ];
    let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty()).collect();
    let base = parts.last()?;
    let stem: Vec<&str> = base
        .split(['.', '_', '-'])
        .filter(|w| !w.is_empty() && !GENERIC.contains(&w.to_ascii_lowercase().as_str()))
        .collect();
    if !stem.is_empty() {
        return Some(stem.join("-"));
    }
    let folder = parts.iter().rev().nth(1)?;
    (!GENERIC.contains(&folder.to_ascii_lowercase().as_str()) && !folder.starts_with('.'))
        .then(|| (*folder).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str, text: &str) -> FileKind {
        detect(name, text.as_bytes()).kind
    }

    #[test]
    fn a_log_with_two_ranks_prefixes_is_interleaved() {
        let log = "[rank0]: step 1\n[rank1]: step 1\n[rank1]: RuntimeError: boom\n";
        assert_eq!(kind("train.log", log), FileKind::InterleavedLog);
        assert_eq!(
            kind("train.log", "[default3]:step 0 ok\n").to_owned(),
            FileKind::RankLog
        );
    }

    #[test]
    fn kernel_logs_are_told_by_their_lines_not_their_name() {
        let dmesg = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n[ 1234.6] eth0: link up\n";
        assert_eq!(kind("node3.txt", dmesg), FileKind::KernelLog);
        let journal = "Nov 27 05:33:50 node-3 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n";
        assert_eq!(kind("whatever", journal), FileKind::KernelLog);
        assert_eq!(
            kind("dmesg.txt", "[rank0]: hello\n[rank1]: hello\n"),
            FileKind::InterleavedLog
        );
    }

    #[test]
    fn json_files_are_error_files_dumps_or_dcgm_reports_by_their_keys() {
        let error = r#"{"message": {"message": "IndexError: x", "extraInfo": {"py_callstack": "", "timestamp": "1"}}}"#;
        assert_eq!(kind("rank.json", error), FileKind::ErrorFile);
        let dump = r#"{"version": "2.10", "pg_config": {}, "entries": []}"#;
        assert_eq!(kind("x", dump), FileKind::FlightRecorder);
        assert_eq!(kind("x", r#"{"DCGM GPU Diagnostic": {}}"#), FileKind::DcgmDiag);
        assert_eq!(kind("x", r#"{"a": 1}"#), FileKind::Unknown);
        assert_eq!(kind("x", "\u{80}\u{2}}entries"), FileKind::Unknown);
        assert_eq!(
            detect("x", b"\x80\x02}q\x00X\x07\x00\x00\x00entries").kind,
            FileKind::FlightRecorder
        );
    }

    #[test]
    fn slurm_output_and_nvidia_smi_reports_are_recognised() {
        assert_eq!(
            kind(
                "slurm-12.out",
                "0: hi\nsrun: error: node-3: task 5: Exited with exit code 1\n"
            ),
            FileKind::SlurmOutput
        );
        assert_eq!(
            kind("smi.txt", "==============NVSMI LOG==============\n"),
            FileKind::NvidiaSmi
        );
    }

    #[test]
    fn names_suggest_ranks_and_hosts() {
        assert_eq!(rank_from_name("logs/rank12.log"), Some(12));
        assert_eq!(rank_from_name("trace/nccl_trace_rank_7"), Some(7));
        assert_eq!(rank_from_name("run/attempt_0/3/stderr.log"), Some(3));
        assert_eq!(rank_from_name("run/2024/stderr.log"), None);
        assert_eq!(rank_from_name("train.log"), None);
        assert_eq!(host_from_name("node-3/dmesg.txt").as_deref(), Some("node-3"));
        assert_eq!(host_from_name("dmesg-node-3.txt").as_deref(), Some("node-3"));
        assert_eq!(host_from_name("dmesg.txt"), None);
    }
}
