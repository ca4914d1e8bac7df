//! `faultline analyze [FILE|-] [--format human|json|github|sarif] [--rules DIR]`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::client::{Submission, submit};
use super::{EXIT_NOTHING, EXIT_OK, RulesOption};
use crate::diagnose::analyze_reader;
use crate::model::Diagnosis;
use crate::output;

/// Arguments of `faultline analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Log file to read; `-` or nothing reads standard input.
    file: Option<PathBuf>,
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
    let input = super::open_input(args.file.as_deref())?;
    let source = args
        .file
        .as_ref()
        .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
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
            submitted.diagnosis
        }
        None => {
            let rules = args.rules.load()?;
            analyze_reader(&rules, input)
                .context("cannot read the log")?
                .diagnosis
        }
    };
    out.write_all(render(&diagnosis, args.format, &source).as_bytes())?;
    Ok(exit_code(&diagnosis))
}
