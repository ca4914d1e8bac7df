//! `faultline eval FILE.jsonl… [--json] [--misses] [--rules DIR]`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::{EXIT_OK, RulesOption};
use crate::diagnose::analyze_str;
use crate::eval::{EvalReport, judge, read_cases, report};

/// Arguments of `faultline eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Corpus files (JSON Lines with id, label, also, log).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the whole report as JSON.
    #[arg(long)]
    json: bool,
    /// List every case that is wrong at top-1.
    #[arg(long)]
    misses: bool,
    #[command(flatten)]
    rules: RulesOption,
}

pub(super) fn run(args: &EvalArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let rules = args.rules.load()?;
    let mut cases = Vec::new();
    for file in &args.files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
        cases.extend(read_cases(&text, &file.display().to_string()).map_err(anyhow::Error::msg)?);
    }
    let predictions = cases
        .iter()
        .map(|case| judge(case, &analyze_str(&rules, &case.log)))
        .collect();
    let report = report(predictions, &cases);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write_table(&report, args.misses, out)?;
        writeln!(out, "{}", report.summary_line())?;
    }
    Ok(EXIT_OK)
}

fn write_table(report: &EvalReport, misses: bool, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<32} {:>7} {:>9} {:>9} {:>7}",
        "class", "support", "precision", "recall", "predicted"
    )?;
    for (class, s) in &report.classes {
        writeln!(
            out,
            "{class:<32} {:>7} {:>9.3} {:>9.3} {:>7}",
            s.support,
            s.precision(),
            s.recall(),
            s.predicted
        )?;
    }
    writeln!(out, "{:<32} {:>7} {:>9}", "confidence", "cases", "right")?;
    for (level, c) in &report.calibration {
        writeln!(out, "{level:<32} {:>7} {:>9.3}", c.cases, c.accuracy())?;
    }
    let wrong: Vec<_> = report.predictions.iter().filter(|p| p.confident_wrong).collect();
    if !wrong.is_empty() {
        writeln!(out, "confidently wrong:")?;
        for p in wrong {
            writeln!(out, "  {} label {} got {:?}", p.id, p.label, p.classes.first())?;
        }
    }
    if misses {
        writeln!(out, "wrong at top-1:")?;
        for p in report.predictions.iter().filter(|p| !p.top1) {
            writeln!(
                out,
                "  {} label {} got {:?} ({:?})",
                p.id, p.label, p.classes, p.confidence
            )?;
        }
    }
    Ok(())
}
