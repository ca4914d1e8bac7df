//! The command line: argument parsing, input opening, output writing and exit codes.
//!
//! Exit codes: 0 success (for `analyze`: a diagnosis), 1 nothing known found (or failing rule
//! examples / lints / eval targets), 2 usage or input error.

mod analyze;
mod bundle_cmd;
mod client;
mod eval_cmd;
mod input;
mod parse_cmd;
mod preflight_cmd;
mod replay_cmd;
mod rules_cmd;
mod serve;
mod worker_cmd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use input::open_input;

use crate::rules::RuleSet;

/// faultline: diagnoses PyTorch / CUDA / Hugging Face training failures from their logs.
#[derive(Debug, Parser)]
#[command(name = "faultline", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Diagnoses a log: root cause first, with evidence, causes and fixes.
    Analyze(analyze::AnalyzeArgs),
    /// Prints the events parsed from a log (tracebacks, CUDA errors, OOM figures, versions...).
    Parse(parse_cmd::ParseArgs),
    /// Works on the rule base: run its examples, lint it, list it.
    Rules(rules_cmd::RulesArgs),
    /// Measures accuracy on labelled corpus files (JSON Lines: id, label, also, log).
    Eval(eval_cmd::EvalArgs),
    /// Runs the HTTP service (REST API, knowledge base) on http://127.0.0.1:8080 by default.
    Serve(serve::ServeArgs),
    /// Brings the knowledge base's schema up to date.
    Migrate(serve::MigrateArgs),
    /// Manages API tokens.
    Token(serve::TokenArgs),
    /// Runs one check on a tensor snapshot offline (confirmed / refuted / inconclusive).
    Replay(replay_cmd::ReplayArgs),
    /// Runs the replay checks on a batch before a job starts (exit 1 on a problem, 0 clean).
    Preflight(preflight_cmd::PreflightArgs),
    /// Runs a standalone replay worker that leases jobs from the knowledge base.
    Worker(worker_cmd::WorkerArgs),
}

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: nothing known found / checks failed.
pub const EXIT_NOTHING: u8 = 1;
/// Exit code: usage or input error.
pub const EXIT_ERROR: u8 = 2;

/// Where to take rules from: `--rules DIR` / `FAULTLINE_RULES`, else the embedded rule base.
#[derive(Debug, Clone, clap::Args)]
pub struct RulesOption {
    /// Rules directory (taxonomy.toml and <area>/<name>.toml) replacing the embedded rule base.
    #[arg(long = "rules", value_name = "DIR", env = "FAULTLINE_RULES", global = true)]
    pub dir: Option<PathBuf>,
}

impl RulesOption {
    /// Loads the rule base.
    pub fn load(&self) -> anyhow::Result<RuleSet> {
        load_rules(self.dir.as_deref())
    }
}

/// Loads the rules in `dir`, or the embedded ones.
pub fn load_rules(dir: Option<&Path>) -> anyhow::Result<RuleSet> {
    let loaded = match dir {
        Some(dir) => RuleSet::load_dir(dir),
        None => RuleSet::embedded(),
    };
    loaded.map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors.
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(&args, &mut stdout),
        Command::Parse(args) => parse_cmd::run(&args, &mut stdout),
        Command::Rules(args) => rules_cmd::run(&args, &mut stdout),
        Command::Eval(args) => eval_cmd::run(&args, &mut stdout),
        Command::Serve(args) => serve::serve(&args, &mut stdout),
        Command::Migrate(args) => serve::migrate(&args, &mut stdout),
        Command::Token(args) => serve::token(&args, &mut stdout),
        Command::Replay(args) => replay_cmd::run(&args, &mut stdout),
        Command::Preflight(args) => preflight_cmd::run(&args, &mut stdout),
        Command::Worker(args) => worker_cmd::run(&args, &mut stdout),
    };
    let _ = stdout.flush();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("faultline: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Output cut short by the reader (`faultline parse big.log | head`) is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
