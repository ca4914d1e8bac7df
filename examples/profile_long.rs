//! Profiling aid: analyzes a generated noisy CI log of N MB once (`perf record`).
#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;
fn main() {
    let mb: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut log = Vec::new();
    let _ = noisy_log::generate(mb << 20, 42, &mut log);
    let t = std::time::Instant::now();
    let parsed = faultline::parse::parse_bytes(&log);
    let parse = t.elapsed();
    let t = std::time::Instant::now();
    let a = faultline::diagnose::analyze_bytes(&rules, &log);
    struct Count(u64);
    impl faultline::scan::LineSink for Count {
        fn line(&mut self, _: &faultline::normalize::Line<'_>) {
            self.0 += 1;
        }
    }
    let mut c = Count(0);
    let prefilter = rules.prefilter().unwrap_or_else(|e| panic!("{e}"));
    let stats = faultline::scan::scan_slice(&log, prefilter, &mut c);
    let mut c2 = Count(0);
    let _ = faultline::scan::scan_slice(&log, faultline::parse::prefilter(), &mut c2);
    println!(
        "candidates: rules {} parser {} of {} lines",
        c.0, c2.0, stats.lines
    );
    println!(
        "{mb} MB: parse {parse:?}, analyze {:?}, {} events, {} findings",
        t.elapsed(),
        parsed.events.len(),
        a.diagnosis.findings.len()
    );
}
