//! The `faultline` binary: parses the command line and hands over to [`faultline::cli`].

use std::process::ExitCode;

/// mimalloc instead of the system allocator: compiling the rule base's automata and the
/// analysis allocate many small, short-lived objects (a 1 KB log's `faultline analyze`: 47 →
/// 44 ms; the 100 MB log's CPU time: −4 %). Transparent huge pages stay off (`no_thp`): they made
/// the short runs faster but cost the 100 MB one a fifth more CPU zeroing pages, and twice the
/// memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    faultline::cli::main()
}
