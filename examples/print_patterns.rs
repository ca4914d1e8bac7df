//! Prints the parser's trigger patterns one per line, as written (for normalized lines) or, with
//! `--relaxed`, as the raw-bytes prefilter uses them (for `rg -f`, `grep -E -f`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let relaxed = std::env::args().any(|a| a == "--relaxed");
    for pattern in faultline::parse::trigger_patterns() {
        if !relaxed {
            println!("{pattern}");
            continue;
        }
        match faultline::scan::relax(pattern) {
            Ok(p) => println!("{p}"),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
