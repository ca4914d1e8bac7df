//! Profiling aid: what each stage of the analysis costs on the generated noisy log, stage by
//! stage (each line adds one stage to the one before), best of three runs. The stages run on one
//! thread (the log is fed in pieces smaller than the two-thread threshold); the last line is the
//! real analysis of the whole log, on two threads.
//!
//! `cargo run --release --example stage_costs -- [MB]` (default 100).
#[path = "../benches/support/noisy_log.rs"]
#[allow(dead_code)]
mod noisy_log;

use std::time::{Duration, Instant};

use faultline::normalize::Line;
use faultline::scan::{LineSink, Prefilter, scan_slice};

/// Takes normalized lines and does nothing with them.
struct Discard;

impl LineSink for Discard {
    fn line(&mut self, _: &Line<'_>) {}
}

/// Candidate lines found by the prefilter alone (no normalization).
fn count_candidates(prefilter: &Prefilter, log: &[u8]) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while let Some(hit) = prefilter.next_candidate(log, pos) {
        n += 1;
        pos = memchr::memchr(b'\n', &log[hit..]).map_or(log.len(), |i| hit + i + 1);
    }
    n
}

/// The log in pieces of whole lines, each small enough to be scanned on the calling thread.
fn pieces(log: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = log;
    while !rest.is_empty() {
        let cut = rest.len().min(256 << 10);
        let end = memchr::memrchr(b'\n', &rest[..cut]).map_or(cut, |i| i + 1);
        let end = if cut == rest.len() { cut } else { end };
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    out
}

fn best_of_three(mut stage: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            stage();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let rules = faultline::rules::RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut log = Vec::new();
    let _ = noisy_log::generate(mb << 20, 42, &mut log);
    let prefilter = rules.prefilter().unwrap_or_else(|e| panic!("{e}"));
    let mut candidates = 0;
    let find = best_of_three(|| candidates = count_candidates(prefilter, &log));
    let pieces = pieces(&log);
    let normalize = best_of_three(|| {
        for piece in &pieces {
            scan_slice(piece, prefilter, &mut Discard);
        }
    });
    let parse = best_of_three(|| {
        let mut parser = faultline::parse::Parser::new();
        for piece in &pieces {
            scan_slice(piece, prefilter, &mut parser);
        }
    });
    let one_thread = best_of_three(|| {
        let mut sink = faultline::diagnose::LineAnalyzer::new(&rules);
        for piece in &pieces {
            scan_slice(piece, prefilter, &mut sink);
        }
    });
    let analyze = best_of_three(|| {
        faultline::diagnose::analyze_bytes(&rules, &log);
    });
    println!("{mb} MB, {candidates} candidate lines");
    println!("find candidates:           {find:?}");
    println!("+ normalize them:          {normalize:?}");
    println!("+ parser (no rules):       {parse:?}");
    println!("parser and rule patterns:  {one_thread:?}");
    println!("analyze, two threads:      {analyze:?}");
}
