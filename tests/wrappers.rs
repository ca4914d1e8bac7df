//! A log reaches faultline through whatever ran the program: Docker Compose, journald, a logging
//! module, Open MPI, Ray, Hydra, a CI runner, a Windows console, a Markdown quote. The prefixes
//! they put in front of each line must not change the diagnosis: every held-out log, each behind
//! one wrapper (the wrappers take turns), gets the classes and the confidence of the plain log; so
//! does a log whose copy replaced its spaces and quotes (a web page, a chat) or escaped it as HTML.
//! A copy hard-wrapped at a terminal's width may lose its diagnosis where a message spans the cut,
//! but must never mislead: no held-out log, wrapped, gets a confidently wrong answer.

mod support;

use faultline::diagnose::analyze_str;
use faultline::eval::{Case, judge};
use faultline::rules::RuleSet;
use support::held_out_cases;

/// A wrapper's name and how it writes line `i` of a program's output.
type Wrapper = (&'static str, fn(usize, &str) -> String);

const WRAPPERS: &[Wrapper] = &[
    ("docker compose", |_, l| format!("trainer-1  | {l}")),
    ("docker compose v1", |_, l| format!("detect_worker_1  | {l}")),
    ("journald", |i, l| {
        format!("Nov 27 10:00:{:02} gpu-node-3 python[48213]: {l}", i % 60)
    }),
    ("journalctl -o short-iso", |i, l| {
        format!("2026-11-27T10:00:{:02}+0000 gpu-node-3 ollama[1234]: {l}", i % 60)
    }),
    ("kubectl --timestamps", |i, l| {
        format!("2026-11-27T10:00:{:02}.123456789Z {l}", i % 60)
    }),
    ("kubectl --prefix", |_, l| format!("[pod/trainer-0/pytorch] {l}")),
    ("python logging", |i, l| {
        format!("2026-11-27 10:00:{:02},123 - ERROR - {l}", i % 60)
    }),
    ("open mpi", |_, l| format!("[1,0]<stderr>:{l}")),
    ("ray", |_, l| {
        format!("(RayTrainWorker pid=4821, ip=10.0.0.3) {l}")
    }),
    ("windows console", |_, l| format!("{l}\r")),
    ("markdown quote", |_, l| format!("> {l}")),
    ("moreutils ts", |i, l| format!("Nov 27 10:00:{:02} {l}", i % 60)),
    ("hydra", |i, l| {
        format!("[2026-11-27 10:00:{:02},123][__main__][ERROR] - {l}", i % 60)
    }),
    ("sagemaker mpi", |_, l| {
        format!("[1,mpirank:0,algo-1]<stderr>:{l}")
    }),
    ("accelerate", |i, l| {
        format!("[2026-11-27 10:00:{:02},123] [ERROR] [RANK 0] {l}", i % 60)
    }),
    ("raylet", |_, l| format!("(raylet) {l}")),
];

fn wrapped(log: &str, wrap: fn(usize, &str) -> String) -> String {
    log.split('\n')
        .enumerate()
        .map(|(i, line)| wrap(i, line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The held-out cases whose classes or confidence change when `transform` rewrites their log
/// (it returns its name and the new log), one line each.
fn changed_diagnoses(transform: impl Fn(usize, &Case) -> (&'static str, String)) -> Vec<String> {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let cases = held_out_cases();
    assert!(cases.len() > 2_000, "{} cases", cases.len());
    let mut changed = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let (name, log) = transform(i, case);
        let plain = judge(case, &analyze_str(&rules, &case.log));
        let through = judge(case, &analyze_str(&rules, &log));
        if (&plain.classes, plain.confidence) != (&through.classes, through.confidence) {
            changed.push(format!(
                "{} through {name}: {:?} ({:?}) became {:?} ({:?})",
                case.id, plain.classes, plain.confidence, through.classes, through.confidence
            ));
        }
    }
    changed
}

#[test]
fn every_wrapper_leaves_every_held_out_diagnosis_as_it_is() {
    let changed = changed_diagnoses(|i, case| {
        let (name, wrap) = WRAPPERS[i % WRAPPERS.len()];
        (name, wrapped(&case.log, wrap))
    });
    assert!(
        changed.is_empty(),
        "{} changed:\n{}",
        changed.len(),
        changed.join("\n")
    );
}

/// How a copy from a web page, a chat or a word processor rewrites a whole log.
type Copy = (&'static str, fn(&str) -> String);

const COPIES: &[Copy] = &[
    ("no-break spaces (a rendered web page)", |log| {
        log.replace(' ', "\u{a0}")
    }),
    ("curly quotes (a chat or a word processor)", |log| {
        log.replace('\'', "\u{2019}").replace('"', "\u{201d}")
    }),
    ("HTML entities (a page's source, an API)", |log| {
        log.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#39;")
    }),
];

#[test]
fn a_copy_s_substitute_characters_leave_every_held_out_diagnosis_as_it_is() {
    let changed = changed_diagnoses(|i, case| {
        let (name, copy) = COPIES[i % COPIES.len()];
        (name, copy(&case.log))
    });
    assert!(
        changed.is_empty(),
        "{} changed:\n{}",
        changed.len(),
        changed.join("\n")
    );
}

/// `log` with every line longer than `width` characters cut into lines of `width` (as a terminal
/// or `fold -w` leaves a copy).
fn hard_wrapped(log: &str, width: usize) -> String {
    let mut out = Vec::new();
    for line in log.split('\n') {
        let chars: Vec<char> = line.chars().collect();
        if chars.is_empty() {
            out.push(String::new());
        }
        out.extend(chars.chunks(width).map(|piece| piece.iter().collect::<String>()));
    }
    out.join("\n")
}

#[test]
fn a_copy_hard_wrapped_at_200_120_or_80_columns_is_never_confidently_wrong() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    for case in &held_out_cases() {
        for width in [200, 120, 80] {
            let through = judge(case, &analyze_str(&rules, &hard_wrapped(&case.log, width)));
            if through.confident_wrong {
                wrong.push(format!("{} at {width} columns: {:?}", case.id, through.classes));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} confidently wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn hard_wrapping_cuts_long_lines_and_keeps_short_and_empty_ones() {
    assert_eq!(hard_wrapped("abcdefg\n\nxy", 3), "abc\ndef\ng\n\nxy");
}
