//! `faultline preflight`: the replay checks on a batch before a job starts, no log needed.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use super::replay_cmd::{parse_param, read_snapshot_file};
use crate::replay::preflight::{self, Report};
use crate::replay::{BackendChoice, CheckResult, Limits, Snapshot, Verdict, open_backend};

/// Arguments of `faultline preflight`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit codes: 0 no check found a problem (some may not have run: they say which fact they need); \
1 a check found a problem the job would meet; 2 the snapshot, the config or a parameter is wrong.

The model's facts (vocab_size, max_position_embeddings, is_encoder_decoder, ...) come from the \
snapshot's metadata, then from --config (a Hugging Face config.json), then from --param, each \
overriding the one before.")]
pub struct PreflightArgs {
    /// The batch: a safetensors or NumPy .npz snapshot (the capture helper's `save_snapshot`
    /// writes one).
    #[arg(long)]
    snapshot: PathBuf,
    /// The model's Hugging Face config.json.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A fact, as KEY=VALUE (repeat for several): vocab_size=32100, max_position_embeddings=512.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Where the checks run: the GPU when one opens (auto), the CPU, or the GPU only.
    #[arg(long, value_name = "auto|cpu|gpu", default_value = "auto")]
    backend: BackendChoice,
}

/// Runs the command.
pub fn run(args: &PreflightArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let limits = Limits::default();
    let path = &args.snapshot;
    let mut snapshot = Snapshot::from_bytes(read_snapshot_file(path, &limits)?, &limits)
        .with_context(|| format!("invalid snapshot {}", path.display()))?;
    if let Some(config) = &args.config {
        let text = std::fs::read(config).with_context(|| format!("cannot read {}", config.display()))?;
        let facts = preflight::config_params(&text).with_context(|| config.display().to_string())?;
        snapshot = snapshot.with_params(serde_json::Value::Object(facts).to_string().as_bytes(), &limits)?;
    }
    if !args.params.is_empty() {
        let given: serde_json::Map<String, serde_json::Value> = args
            .params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        snapshot = snapshot.with_params(serde_json::Value::Object(given).to_string().as_bytes(), &limits)?;
    }
    let backend = open_backend(args.backend)?;
    let report = preflight::run(&snapshot, backend.as_ref())?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write_human(&report, &path.display().to_string(), out)?;
    }
    Ok(if report.has_problems() {
        super::EXIT_NOTHING
    } else {
        super::EXIT_OK
    })
}

fn write_human(report: &Report, snapshot: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let ran = report.results.len();
    match report.problems {
        0 => writeln!(out, "preflight {snapshot}: no problem found ({ran} checks)")?,
        n => writeln!(
            out,
            "preflight {snapshot}: {n} problem(s) the job would meet ({ran} checks)"
        )?,
    }
    let line = |r: &CheckResult| {
        let on = r
            .tensor
            .as_deref()
            .map(|t| format!(" on {t}"))
            .unwrap_or_default();
        format!("{} ({}{on})", r.summary, r.check)
    };
    for r in &report.results {
        let word = match r.verdict {
            Verdict::Confirmed => "problem",
            Verdict::Refuted => "ok",
            _ => "not checked",
        };
        let text = line(r);
        // An inconclusive summary may already begin with what it could not do.
        let text = text.strip_prefix("not checked: ").unwrap_or(&text);
        writeln!(out, "  {word}: {text}")?;
    }
    Ok(())
}
