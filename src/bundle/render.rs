//! The bundle diagnosis as text for a terminal.

use std::fmt::Write;

use crate::model::{BundleDiagnosis, Confidence, FileKind, XidAction, XidOrigin};

/// Files listed one by one; more are counted.
const SHOWN_FILES: usize = 24;

/// Renders the diagnosis; `source` names what was given (a folder, an archive, files).
pub fn human(d: &BundleDiagnosis, source: &str) -> String {
    let mut out = String::new();
    let logs = d.files.iter().filter(|f| f.kind.is_log()).count();
    let _ = writeln!(
        out,
        "faultline: {source}: {} file(s) ({logs} log(s)), {} rank(s){}, {} host(s)",
        d.files.len(),
        d.coverage.with_log.len(),
        d.coverage
            .world_size
            .map(|n| format!(" of {n}"))
            .unwrap_or_default(),
        d.hosts.len()
    );
    match &d.first_fault {
        Some(f) => {
            let _ = writeln!(
                out,
                "\nFIRST FAULT [{} confidence] {}",
                confidence(f.confidence),
                f.summary
            );
            for reason in &f.reasons {
                let _ = writeln!(out, "  why: {reason}");
            }
            if let Some(cause) = &f.cause {
                let _ = writeln!(
                    out,
                    "  cause: {} (class {} · rule {})",
                    cause.summary, cause.class, cause.rule
                );
                for fix in cause.fixes.iter().take(2) {
                    let _ = writeln!(out, "  fix: {}", fix.title);
                }
            }
            if let Some(x) = &f.xid {
                let _ = writeln!(
                    out,
                    "  xid: Xid {} ({}), {}",
                    x.code,
                    origin(x.settled),
                    actions(&x.actions)
                );
            }
            let _ = writeln!(out, "  evidence:");
            for e in &f.evidence {
                for line in &e.lines {
                    let rank = line.rank.map(|r| format!(" [rank {r}]")).unwrap_or_default();
                    let _ = writeln!(out, "    {}:{}{rank}: {}", e.file, line.line, line.text);
                }
            }
        }
        None => {
            let _ = writeln!(out, "\nNo first fault could be elected.");
        }
    }
    if !d.cascades.is_empty() {
        let _ = writeln!(out, "\ncascades:");
        for c in &d.cascades {
            let _ = writeln!(out, "  {} (ranks {})", c.summary, list(&c.ranks));
        }
    }
    for g in &d.collectives {
        let mut parts = Vec::new();
        if let Some(s) = &g.stalled {
            parts.push(format!("stalled in {s}"));
        }
        if !g.never_entered.is_empty() {
            parts.push(format!("never entered by ranks {}", list(&g.never_entered)));
        }
        for desync in &g.desync {
            let calls: Vec<String> = desync
                .calls
                .iter()
                .map(|c| {
                    format!(
                        "ranks {} {} {}",
                        list(&c.ranks),
                        c.call.op.as_deref().unwrap_or("?"),
                        c.call
                            .sizes
                            .clone()
                            .or_else(|| c.call.numel_in.map(|n| format!("{n} elements")))
                            .unwrap_or_default()
                    )
                })
                .collect();
            parts.push(format!("desync at SeqNum {}: {}", desync.seq, calls.join(" vs ")));
        }
        if !parts.is_empty() {
            let _ = writeln!(out, "\nprocess group {}: {}", g.pg, parts.join("; "));
        }
    }
    for x in &d.xids {
        let _ = writeln!(
            out,
            "\nXid {} on {}{}: {}\n  {}{}; {}",
            x.code,
            x.host.as_deref().unwrap_or("an unnamed host"),
            x.gpu.as_ref().map(|g| format!(" ({g})")).unwrap_or_default(),
            x.meaning,
            origin(x.settled),
            x.settled_by
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default(),
            actions(&x.actions)
        );
    }
    for c in &d.clock_offsets {
        let _ = writeln!(
            out,
            "\nclock: {} is {:+.3} s from the reference ({}; {} shared event(s))",
            c.host,
            c.offset_ms as f64 / 1000.0,
            c.from,
            c.samples
        );
    }
    if !d.missing.is_empty() {
        let _ = writeln!(out, "\nmissing:");
        for m in &d.missing {
            let _ = writeln!(out, "  - {m}");
        }
    }
    let _ = writeln!(out, "\nfiles:");
    for f in d.files.iter().take(SHOWN_FILES) {
        let primary = f
            .diagnosis
            .as_ref()
            .and_then(|d| d.primary())
            .map(|p| format!(" — {}", p.title))
            .unwrap_or_default();
        let ranks = if f.ranks.is_empty() {
            String::new()
        } else {
            format!(" ranks {}", list(&f.ranks))
        };
        let _ = writeln!(out, "  {} ({}{ranks}){primary}", f.name, kind(f.kind));
        for w in &f.warnings {
            let _ = writeln!(out, "    warning: {}", w.message);
        }
    }
    if d.files.len() > SHOWN_FILES {
        let _ = writeln!(out, "  … {} more", d.files.len() - SHOWN_FILES);
    }
    for w in &d.warnings {
        let _ = writeln!(out, "warning: {}", w.message);
    }
    out
}

fn confidence(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    }
}

fn origin(o: XidOrigin) -> &'static str {
    match o {
        XidOrigin::Application => "the application's fault",
        XidOrigin::Driver => "a driver / firmware fault",
        XidOrigin::Hardware => "a hardware fault",
        XidOrigin::Ambiguous => "ambiguous: the application's or the hardware's",
    }
}

fn actions(a: &[XidAction]) -> String {
    let words: Vec<&str> = a
        .iter()
        .map(|a| match a {
            XidAction::FixApplication => "fix the application",
            XidAction::RestartJob => "restart the job",
            XidAction::ResetGpu => "reset the GPU",
            XidAction::DrainNode => "drain the node",
            XidAction::UpdateDriver => "update the driver",
        })
        .collect();
    if words.is_empty() {
        "no action in the catalog".to_owned()
    } else {
        format!("do: {}", words.join(", then "))
    }
}

fn kind(k: FileKind) -> &'static str {
    k.name()
}

fn list(ranks: &[u32]) -> String {
    let shown: Vec<String> = ranks.iter().take(16).map(u32::to_string).collect();
    if ranks.len() > 16 {
        format!("{} … ({} in all)", shown.join(", "), ranks.len())
    } else {
        shown.join(", ")
    }
}
