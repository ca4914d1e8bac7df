//! Profiling aid: analyzes the bench's 4 KB traceback N times (`valgrind --tool=callgrind`).
#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let log = noisy_log::cuda_assert_traceback(42);
    let mut total = 0;
    for _ in 0..n {
        total += faultline::diagnose::analyze_bytes(&rules, &log)
            .diagnosis
            .findings
            .len();
    }
    println!("{total}");
}
