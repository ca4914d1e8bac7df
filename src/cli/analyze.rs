//! `faultline analyze [FILE|-] [--format human|json|github|sarif] [--rules DIR]
//! [--snapshot FILE [--param KEY=VALUE]… [--backend auto|cpu|gpu]]`; several files, a folder or a
//! `.zip` / `.tar.gz` are one distributed job's bundle (`bundle_cmd`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::client::{Submission, submit, upload_snapshot};
use super::{EXIT_NOTHING, EXIT_OK, RulesOption};
use crate::diagnose::analyze_reader;
use crate::model::Diagnosis;
use crate::output;
use crate::replay::summary;
use crate::replay::{BackendChoice, Limits, Snapshot, open_backend};

/// Arguments of `faultline analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Log file to read; `-` or nothing reads standard input. Several files, a folder or a
    /// `.zip` / `.tar.gz` are read as one distributed job (its ranks' logs, error files, dmesg,
    /// nvidia-smi, DCGM and flight-recorder dumps).
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    #[command(flatten)]
    rules: RulesOption,
    /// Submit to a faultline server instead of analysing locally (`http://faultline:8080`).
    #[arg(long, value_name = "URL", env = "FAULTLINE_SERVER")]
    server: Option<String>,
    /// API token for --server (needed to store the incident).
    #[arg(long, value_name = "TOKEN", env = "FAULTLINE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Project the incident belongs to (with --server).
    #[arg(long)]
    project: Option<String>,
    /// With --server: analyse without storing an incident.
    #[arg(long)]
    no_store: bool,
    /// A tensor snapshot of the failing step (safetensors or .npz): the replay checks of the
    /// diagnosis run on it (with --server: it is uploaded to the incident, and checked there).
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
    /// A snapshot parameter as KEY=VALUE (num_classes=10, role.labels=y; repeat for several).
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param, requires = "snapshot")]
    params: Vec<(String, String)>,
    /// Where the checks of --snapshot run: the GPU when one opens (auto), the CPU, or the GPU only.
    #[arg(long, value_name = "auto|cpu|gpu", default_value = "auto")]
    backend: BackendChoice,
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.trim().to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// Output formats of a diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people.
    Human,
    /// The diagnosis document.
    Json,
    /// GitHub Actions annotations.
    Github,
    /// SARIF 2.1.0.
    Sarif,
}

/// Renders a diagnosis in `format`.
pub fn render(diagnosis: &Diagnosis, format: Format, source: &str) -> String {
    match format {
        Format::Human => output::human(diagnosis, source),
        Format::Json => output::json(diagnosis) + "\n",
        Format::Github => output::github_annotations(diagnosis, source),
        Format::Sarif => output::sarif(diagnosis, source) + "\n",
    }
}

/// The exit code for a diagnosis: 0 when something is diagnosed, 1 when nothing known is found.
pub fn exit_code(diagnosis: &Diagnosis) -> u8 {
    if diagnosis.is_diagnosed() {
        EXIT_OK
    } else {
        EXIT_NOTHING
    }
}

pub(super) fn run(args: &AnalyzeArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    if super::bundle_cmd::is_bundle(&args.files)? {
        if args.server.is_some() || args.snapshot.is_some() {
            anyhow::bail!("--server and --snapshot take one log, not a bundle of several files");
        }
        let format = match args.format {
            Format::Human => super::bundle_cmd::BundleFormat::Human,
            Format::Json => super::bundle_cmd::BundleFormat::Json,
            Format::Github | Format::Sarif => {
                anyhow::bail!("--format github / sarif take one log; a bundle is shown as human or json")
            }
        };
        return super::bundle_cmd::run(&args.files, &args.rules, format, out);
    }
    let file = args.files.first();
    // A bad snapshot is refused before anything else is done.
    let keep_bytes = args.server.is_some();
    let snapshot = args
        .snapshot
        .as_deref()
        .map(|path| read_snapshot(path, &args.params, keep_bytes))
        .transpose()?;
    let replayed = snapshot.is_some() && !keep_bytes;
    let input = super::open_input(file.map(PathBuf::as_path))?;
    let source = file.map_or_else(|| "-".to_owned(), |p| p.display().to_string());
    let diagnosis = match &args.server {
        Some(server) => {
            let submission = Submission {
                server,
                token: args.token.as_deref(),
                project: args.project.as_deref(),
                store: !args.no_store,
            };
            let submitted = submit(&submission, input)?;
            if let (Some(incident), Format::Human) = (submitted.incident_id, args.format) {
                let group = match (submitted.group_id, submitted.new_group) {
                    (Some(g), Some(true)) => format!(", new group {g}"),
                    (Some(g), _) => format!(", group {g}"),
                    _ => String::new(),
                };
                writeln!(out, "stored as incident {incident} on {server}{group}")?;
            }
            if let Some((data, _)) = snapshot {
                let Some(incident) = submitted.incident_id else {
                    anyhow::bail!(
                        "--snapshot with --server needs the incident stored (leave out --no-store)"
                    );
                };
                let accepted = upload_snapshot(server, args.token.as_deref(), incident, &data, &args.params)?;
                eprintln!(
                    "faultline: snapshot {} uploaded to incident {incident}; replay job {} at {}{}",
                    accepted.snapshot_id,
                    accepted.job_id,
                    server.trim_end_matches('/'),
                    accepted.status_url
                );
            }
            submitted.diagnosis
        }
        None => {
            // The second core compiles the normalizer's patterns while this one loads the rules
            // (where no thread can be started, the first line compiles them instead).
            let _ = std::thread::Builder::new()
                .name("faultline-warm-up".into())
                .spawn(crate::normalize::warm_up);
            let rules = args.rules.load()?;
            let mut diagnosis = analyze_reader(&rules, input)
                .context("cannot read the log")?
                .diagnosis;
            if let Some((_, snapshot)) = &snapshot {
                let backend = open_backend(args.backend)?;
                crate::replay::replay_latest(&mut diagnosis, snapshot, backend.as_ref());
            }
            diagnosis
        }
    };
    out.write_all(render(&diagnosis, args.format, &source).as_bytes())?;
    if args.format == Format::Human && replayed {
        write_outcomes(&diagnosis, out)?;
    }
    Ok(exit_code(&diagnosis))
}

/// The snapshot file (its bytes when `keep_bytes`, for an upload) and the validated snapshot, or
/// why it is refused.
fn read_snapshot(
    path: &Path,
    params: &[(String, String)],
    keep_bytes: bool,
) -> anyhow::Result<(Vec<u8>, Snapshot)> {
    let limits = Limits::default();
    let data = super::replay_cmd::read_snapshot_file(path, &limits)?;
    let json = serde_json::Value::Object(
        params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect(),
    )
    .to_string();
    let kept = if keep_bytes { data.clone() } else { Vec::new() };
    let mut snapshot = Snapshot::from_bytes(data, &limits)
        .with_context(|| format!("invalid snapshot {}", path.display()))?;
    if !params.is_empty() {
        snapshot = snapshot
            .with_params(json.as_bytes(), &limits)
            .with_context(|| format!("invalid snapshot parameters for {}", path.display()))?;
    }
    Ok((kept, snapshot))
}

/// The replay's report: the causes a check decided, one line for those it could not, the
/// diagnosis's verdict.
fn write_outcomes(diagnosis: &Diagnosis, out: &mut impl Write) -> std::io::Result<()> {
    match &diagnosis.replay {
        Some(replay) => {
            for line in summary::lines(replay) {
                writeln!(out, "replay ({}): {line}", replay.backend)?;
            }
        }
        None => writeln!(
            out,
            "replay: no cause of this diagnosis names a check to run on the snapshot"
        )?,
    }
    Ok(())
}
