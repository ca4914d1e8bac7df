//! `faultline rules test|lint|list [--rules DIR]`.

use std::io::Write;

use clap::{Args, Subcommand};

use super::{EXIT_NOTHING, EXIT_OK, RulesOption};
use crate::rulecheck::examples::run_examples;
use crate::rulecheck::lint::{LintLevel, lint};

/// Arguments of `faultline rules`.
#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    command: RulesCommand,
    #[command(flatten)]
    rules: RulesOption,
}

#[derive(Debug, Subcommand)]
enum RulesCommand {
    /// Runs every rule's examples; a failure names the rule file and the example.
    Test,
    /// Reports patterns that never fire, shadowed rules, missing examples, costly patterns.
    Lint {
        /// Fail on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Lists the rules: id, class, role, priority, title.
    List,
}

pub(super) fn run(args: &RulesArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let rules = args.rules.load()?;
    match &args.command {
        RulesCommand::Test => {
            let report = run_examples(&rules);
            for failure in &report.failures {
                writeln!(out, "FAIL {failure}")?;
            }
            writeln!(
                out,
                "{} rule(s), {} example(s), {} failure(s)",
                rules.rules().len(),
                report.run,
                report.failures.len()
            )?;
            Ok(if report.failures.is_empty() {
                EXIT_OK
            } else {
                EXIT_NOTHING
            })
        }
        RulesCommand::Lint { deny_warnings } => {
            let lints = lint(&rules);
            for l in &lints {
                writeln!(out, "{l}")?;
            }
            let errors = lints.iter().filter(|l| l.level == LintLevel::Error).count();
            let warnings = lints.len() - errors;
            writeln!(
                out,
                "{} rule(s): {errors} error(s), {warnings} warning(s)",
                rules.rules().len()
            )?;
            let failed = errors > 0 || (*deny_warnings && warnings > 0);
            Ok(if failed { EXIT_NOTHING } else { EXIT_OK })
        }
        RulesCommand::List => {
            for r in rules.rules() {
                writeln!(
                    out,
                    "{}\t{}\t{:?}\t{}\t{}",
                    r.id, r.class, r.role, r.priority, r.title
                )?;
            }
            Ok(EXIT_OK)
        }
    }
}
