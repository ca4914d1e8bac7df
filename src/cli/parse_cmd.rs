//! `faultline parse [FILE|-] [--format json|human]`: the events of a log.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use crate::model::{Event, EventKind, Fact, NcclKind};
use crate::parse::{Parsed, parse_reader};

/// Arguments of `faultline parse`.
#[derive(Debug, Args)]
pub struct ParseArgs {
    /// Log file to read; `-` or nothing reads standard input.
    file: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One line per event.
    Human,
    /// The whole parse as JSON.
    Json,
}

pub(super) fn run(args: &ParseArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let input = super::open_input(args.file.as_deref())?;
    let parsed = parse_reader(input).context("cannot read the log")?;
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &parsed)?;
            writeln!(out)?;
        }
        Format::Human => write_human(&parsed, out)?,
    }
    Ok(0)
}

fn write_human(parsed: &Parsed, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{} lines, {} bytes, {} events",
        parsed.lines,
        parsed.bytes,
        parsed.events.len()
    )?;
    for w in &parsed.warnings {
        writeln!(out, "warning: {}", w.message)?;
    }
    for event in &parsed.events {
        writeln!(out, "{}", describe(event))?;
    }
    Ok(())
}

/// One line about an event: where, which rank, what.
pub fn describe(event: &Event) -> String {
    let rank = event.rank.map(|r| format!(" [rank {r}]")).unwrap_or_default();
    let repeats = match (event.count, event.last_line) {
        (n, Some(last)) if n > 1 => format!(" (x{n}, last at line {last})"),
        _ => String::new(),
    };
    format!(
        "line {}{rank} {}: {}{repeats}",
        event.lines,
        event.kind.name(),
        summary(&event.kind)
    )
}

fn summary(kind: &EventKind) -> String {
    match kind {
        EventKind::Traceback(t) => {
            let frames: usize = t.chain.iter().map(|c| c.frames.len()).sum();
            let exceptions: Vec<String> = t
                .exceptions()
                .map(|e| {
                    let first = e.message.lines().next().unwrap_or("");
                    format!("{}: {first}", e.type_name)
                })
                .collect();
            let origin = t
                .origin
                .as_ref()
                .map(|o| format!(" from {o:?}"))
                .unwrap_or_default();
            format!("{frames} frame(s){origin}; {}", exceptions.join(" -> "))
        }
        EventKind::CppTrace(t) => format!(
            "raised from {} at {}, {} frame(s)",
            t.raised_from.as_deref().unwrap_or("?"),
            t.location.as_deref().unwrap_or("?"),
            t.frames.len()
        ),
        EventKind::CppException(e) => format!("{}: {}", e.type_name, e.what.as_deref().unwrap_or("")),
        EventKind::CudaAssert(a) => format!(
            "`{}` in {}:{} ({}) — {} line(s), {} block(s), {} thread(s)",
            a.expression,
            a.file.as_deref().unwrap_or("?"),
            a.source_line.map_or("?".into(), |l| l.to_string()),
            a.function.as_deref().unwrap_or("?"),
            a.occurrences,
            a.blocks,
            a.threads
        ),
        EventKind::CudaError(e) => format!(
            "{} ({}, code {})",
            e.message,
            e.name.as_deref().unwrap_or("?"),
            e.code.map_or("?".into(), |c| c.to_string())
        ),
        EventKind::Cublas(c) => format!(
            "CUBLAS_STATUS_{}{}{}",
            c.status,
            c.call
                .as_ref()
                .map(|call| format!(" in {call}"))
                .unwrap_or_default(),
            if c.dtypes.is_empty() {
                String::new()
            } else {
                format!(" dtypes {}", c.dtypes.join(","))
            }
        ),
        EventKind::Cudnn(c) => match &c.status {
            Some(s) => format!("CUDNN_STATUS_{s}"),
            None => c.message.clone(),
        },
        EventKind::Nccl(n) => match &n.kind {
            NcclKind::WatchdogTimeout {
                seq, op, timeout_ms, ..
            } => format!(
                "watchdog timeout: {} SeqNum={} after {} ms",
                op.as_deref().unwrap_or("?"),
                seq.map_or("?".into(), |s| s.to_string()),
                timeout_ms.map_or("?".into(), |t| t.to_string())
            ),
            NcclKind::Error { code } => format!("{code}: {}", n.message),
            NcclKind::Warn => format!("WARN {}", n.message),
        },
        EventKind::Oom(o) => {
            let gib = |b: Option<u64>| {
                b.map_or("?".into(), |b| {
                    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
                })
            };
            format!(
                "tried {} of {} total, {} free, {} allocated, {} reserved",
                gib(o.tried_bytes),
                gib(o.total_bytes),
                gib(o.free_bytes),
                gib(o.allocated_bytes),
                gib(o.reserved_bytes)
            )
        }
        EventKind::Advice(a) => format!("{a:?}"),
        EventKind::Fact(f) => match f {
            Fact::MatmulShapes { left, right } => format!("matmul shapes {left:?} x {right:?}"),
            Fact::BroadcastSizes { a, b, dim } => format!("sizes {a} vs {b} at dim {dim}"),
            Fact::TargetInputShapes { target, input } => format!("target {target:?} vs input {input:?}"),
            Fact::Dtypes { expected, found } => format!("dtype expected {expected}, found {found}"),
            Fact::Devices { first, second } => format!("devices {first} and {second}"),
            Fact::CheckpointSizeMismatch {
                parameter,
                checkpoint,
                model,
            } => {
                format!("{parameter}: checkpoint {checkpoint:?} vs model {model:?}")
            }
            Fact::IndexOutOfBounds { value, size, .. } => format!(
                "index {} out of bounds (size {})",
                value.map_or("?".into(), |v| v.to_string()),
                size.map_or("?".into(), |s| s.to_string())
            ),
        },
        EventKind::Env(e) => format!("{} {}", e.key.name(), e.value),
        EventKind::ChildFailure(c) => format!(
            "{}rank {} exit {}{}",
            if c.root_cause { "root cause: " } else { "" },
            c.global_rank.map_or("?".into(), |r| r.to_string()),
            c.exitcode.map_or("?".into(), |x| x.to_string()),
            c.signal.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
    }
}
