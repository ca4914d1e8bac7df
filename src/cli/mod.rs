//! The command line: argument parsing, input opening, output writing and exit codes.
//!
//! Exit codes: 0 success (for `analyze`: a diagnosis), 1 nothing known found, 2 usage or input
//! error.

mod input;
mod parse_cmd;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use input::open_input;

/// faultline: diagnoses PyTorch / CUDA / Hugging Face training failures from their logs.
#[derive(Debug, Parser)]
#[command(name = "faultline", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints the events parsed from a log (tracebacks, CUDA errors, OOM figures, versions...).
    Parse(parse_cmd::ParseArgs),
}

/// Exit code for a usage or input error.
pub const EXIT_ERROR: u8 = 2;

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors.
            let code = if e.use_stderr() { EXIT_ERROR } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let result = match cli.command {
        Command::Parse(args) => parse_cmd::run(&args, &mut stdout),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = stdout.flush();
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
