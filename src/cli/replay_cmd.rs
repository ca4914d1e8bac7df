//! `faultline replay`: runs one replay check offline.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::ValueEnum;

use crate::replay::check::{self, CheckSpec};
use crate::replay::{BackendChoice, CheckResult, Limits, Snapshot, open_backend, reproducer};

/// Arguments of `faultline replay`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit codes: 0 the check ran, whatever its verdict (read `verdict`: confirmed, refuted or \
inconclusive); 2 the snapshot, the check or a parameter is wrong, or the backend failed.

Parameters left out come from the snapshot's metadata, then from its other tensors (num_classes \
from the logits, the table size from `weight`). `faultline replay --list-checks` lists the checks.")]
pub struct ReplayArgs {
    /// Snapshot file: safetensors or NumPy .npz.
    #[arg(required_unless_present = "list_checks")]
    snapshot: Option<PathBuf>,
    /// Check to run (index_bounds, target_bounds, finite, value_range, consistency, gemm;
    /// `list` lists them with their parameters).
    #[arg(long, required_unless_present = "list_checks")]
    check: Option<String>,
    /// A parameter of the check, as KEY=VALUE (repeat for several).
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Where the check runs: the GPU when one opens (auto), the CPU, or the GPU only.
    #[arg(long, value_name = "auto|cpu|gpu", default_value = "auto")]
    backend: BackendChoice,
    /// Also print a PyTorch script that reproduces the failing call on this snapshot.
    #[arg(long)]
    reproducer: bool,
    /// Lists the checks and their parameters.
    #[arg(long)]
    list_checks: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// The verdict and its figures, for people.
    Human,
    /// The check result as JSON (`verdict`, `summary`, counts, first offenses).
    Json,
}

/// `KEY=VALUE` of a `--param`.
pub(super) fn parse_param(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.trim().to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// Runs the command.
pub fn run(args: &ReplayArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let name = args.check.as_deref().unwrap_or("list");
    if args.list_checks || name == "list" {
        out.write_all(check::describe_checks().as_bytes())?;
        return Ok(super::EXIT_OK);
    }
    let Some(path) = args.snapshot.as_deref() else {
        anyhow::bail!("no snapshot file given");
    };
    // Offline bounds, larger than the server's (`Config::snapshot_limits`): the user chose this file.
    let limits = Limits::default();
    let snapshot = Snapshot::from_bytes(read_snapshot_file(path, &limits)?, &limits)
        .with_context(|| format!("invalid snapshot {}", path.display()))?;
    let spec = CheckSpec {
        name: name.to_owned(),
        params: args.params.iter().cloned().collect(),
    };
    let backend = open_backend(args.backend)?;
    let result = check::run(&spec, &snapshot, backend.as_ref())?;
    let script = args.reproducer.then(|| {
        let file = path.file_name().unwrap_or(path.as_os_str()).to_string_lossy();
        reproducer::script(&spec, &result, &snapshot.summary(), &file)
    });
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&result)?;
            if let (Some(script), Some(map)) = (script, doc.as_object_mut()) {
                map.insert("reproducer".into(), script.into());
            }
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        Format::Human => {
            write_human(&result, out)?;
            if let Some(script) = script {
                writeln!(out, "\nreproducer:\n{script}")?;
            }
        }
    }
    Ok(super::EXIT_OK)
}

fn write_human(r: &CheckResult, out: &mut dyn Write) -> std::io::Result<()> {
    let verdict = serde_json::to_value(r.verdict)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    writeln!(out, "{verdict}: {}", r.summary)?;
    let on = r
        .tensor
        .as_deref()
        .map(|t| format!(" on {t}"))
        .unwrap_or_default();
    write!(out, "check {}{on} ({})", r.check, r.backend)?;
    if r.elements > 0 {
        write!(out, ": {} elements, {} offending", r.elements, r.offending)?;
    }
    if let (Some(min), Some(max)) = (&r.min, &r.max) {
        write!(out, ", min {min}, max {max}")?;
    }
    writeln!(out)?;
    if !r.params.is_empty() {
        let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "params: {}", params.join(" "))?;
    }
    if !r.first_offenses.is_empty() {
        writeln!(out, "first offending values:")?;
        let name = r.tensor.as_deref().unwrap_or("");
        for o in &r.first_offenses {
            let index: Vec<String> = o.index.iter().map(u64::to_string).collect();
            writeln!(out, "  {name}[{}] = {}", index.join(", "), o.value)?;
        }
    }
    Ok(())
}

/// The bytes of a snapshot file, refused unread when it is over `limits.max_bytes`.
pub(super) fn read_snapshot_file(path: &Path, limits: &Limits) -> anyhow::Result<Vec<u8>> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if size > limits.max_bytes {
        anyhow::bail!(
            "{} is {size} bytes, over the limit of {} bytes",
            path.display(),
            limits.max_bytes
        );
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}
