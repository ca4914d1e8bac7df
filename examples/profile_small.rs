//! Profiling aid: analyzes the bench's 4 KB traceback N times after a warm-up of 20, so that
//! `valgrind --tool=callgrind --toggle-collect='profile_small::measured'` counts only warm
//! analyses (the lazy DFA's states are built during the warm-up).
#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;

use faultline::rules::RuleSet;

/// The service's allocator, so that the counts are the service's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let json = std::env::args().any(|a| a == "--json");
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let log = noisy_log::cuda_assert_traceback(42);
    let warm = warm_up(&rules, &log, json);
    println!("{}", warm + measured(&rules, &log, json, n));
}

#[inline(never)]
fn warm_up(rules: &RuleSet, log: &[u8], json: bool) -> usize {
    (0..20).map(|_| analyze(rules, log, json)).sum()
}

#[inline(never)]
fn measured(rules: &RuleSet, log: &[u8], json: bool, n: usize) -> usize {
    (0..n).map(|_| analyze(rules, log, json)).sum()
}

fn analyze(rules: &RuleSet, log: &[u8], json: bool) -> usize {
    let analysis = faultline::diagnose::analyze_bytes(rules, log);
    if json {
        serde_json::to_vec(&analysis.diagnosis).map_or(0, |v| v.len())
    } else {
        analysis.diagnosis.findings.len()
    }
}
