//! Prints the patterns the analysis looks for, one per line, for `rg -f` / `grep -E -f`:
//! the parser's trigger patterns, and with `--rules` also every line pattern of the embedded rule
//! base (the comparator of the "analyze vs rg" benchmark). As written (for normalized lines), or
//! with `--relaxed` as the raw-bytes prefilter uses them.

use std::process::ExitCode;

fn main() -> ExitCode {
    let relaxed = std::env::args().any(|a| a == "--relaxed");
    let with_rules = std::env::args().any(|a| a == "--rules");
    let mut patterns: Vec<String> = faultline::parse::trigger_patterns().collect();
    if with_rules {
        let rules = match faultline::rules::RuleSet::embedded() {
            Ok(rules) => rules,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let table = rules.patterns();
        // Rule patterns are matched with ASCII classes (see `rules::pattern`).
        patterns.extend((0..table.len()).map(|id| format!("(?-u:{})", table.source(id))));
    }
    for pattern in &patterns {
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
