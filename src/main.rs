//! The `faultline` binary: parses the command line and hands over to [`faultline::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    faultline::cli::main()
}
