//! What makes a line pattern costly in the rule base's line set, read from the pattern alone.
//!
//! The line set is a lazy DFA searched forward from every position of a line: a state of it is
//! the set of patterns under way there, built the first time a line leads to it, and each holds
//! the starts of all the patterns. A pattern whose match can begin with a loop over a wide class
//! is under way inside every word it meets, so on text the automaton has not seen, every word
//! builds new states. The set cuts such a loop where it leads the pattern
//! ([`crate::scan::set_form`]: `\b\w+ (?:and \w+ )?input of …` alone had cost 2.3 % of a
//! held-out `faultline eval`); what it cannot cut is costly: a loop behind a short literal
//! (`"(\w+)" not implemented`, two patterns 2.2 %) or a loop of a group (`(?:\w+\.)+Error`).
//! A loop behind [`GUARD`] bytes of literal (`CUDA error: (.+)`) runs only where that literal
//! is; one at the start of the line (`^\s*(?:\w+\.)*Error`) only over its first word.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// Bytes of literal a match must read before its first loop over a wide class.
pub const GUARD: usize = 3;

/// A class with more bytes than this is wide: `\w`, `\S`, `.`, `[^)]`, `[A-Za-z_]`. Digits,
/// spaces and a letter in either case are narrow: their runs are short or they are a literal.
const WIDE_CLASS: usize = 10;

/// The bytes of literal that a match of `hir` can have read when it enters a loop over a wide
/// class, when fewer than [`GUARD`]; `None` when no match can loop before that much literal (or
/// the start of the line). Give it the form the set runs ([`crate::scan::set_form`]).
pub fn unguarded_loop(hir: &Hir) -> Option<usize> {
    walk(hir).first_loop.filter(|&n| n < GUARD)
}

/// What the beginning of a piece of pattern reads.
#[derive(Debug, Clone, Copy)]
struct Lead {
    /// Narrow bytes read before the earliest wide loop the piece can enter, when it has one.
    first_loop: Option<usize>,
    /// Narrow bytes every match of the piece reads (capped: only the first [`GUARD`] matter).
    narrow: usize,
}

fn walk(hir: &Hir) -> Lead {
    match hir.kind() {
        // A pattern anchored at the start of the line is under way only there.
        HirKind::Look(Look::Start) => Lead {
            first_loop: None,
            narrow: GUARD,
        },
        HirKind::Empty | HirKind::Look(_) => Lead {
            first_loop: None,
            narrow: 0,
        },
        HirKind::Literal(literal) => Lead {
            first_loop: None,
            narrow: literal.0.len().min(GUARD),
        },
        HirKind::Class(class) => Lead {
            first_loop: None,
            narrow: usize::from(!is_wide(class)),
        },
        HirKind::Capture(capture) => walk(&capture.sub),
        HirKind::Repetition(repetition) => {
            let sub = walk(&repetition.sub);
            let loops = repetition.max != Some(1) && has_wide_class(&repetition.sub);
            let min = usize::try_from(repetition.min).unwrap_or(usize::MAX);
            Lead {
                first_loop: if loops {
                    Some(sub.first_loop.unwrap_or(0))
                } else {
                    sub.first_loop
                },
                narrow: sub.narrow.saturating_mul(min).min(GUARD),
            }
        }
        HirKind::Concat(pieces) => {
            let mut read: usize = 0;
            for piece in pieces {
                let lead = walk(piece);
                if let Some(n) = lead.first_loop {
                    return Lead {
                        first_loop: Some(read.saturating_add(n).min(GUARD)),
                        narrow: GUARD,
                    };
                }
                read = read.saturating_add(lead.narrow).min(GUARD);
            }
            Lead {
                first_loop: None,
                narrow: read,
            }
        }
        HirKind::Alternation(branches) => {
            let leads: Vec<Lead> = branches.iter().map(walk).collect();
            Lead {
                first_loop: leads.iter().filter_map(|l| l.first_loop).min(),
                narrow: leads.iter().map(|l| l.narrow).min().unwrap_or(0),
            }
        }
    }
}

fn is_wide(class: &Class) -> bool {
    let bytes: usize = match class {
        Class::Bytes(c) => c
            .ranges()
            .iter()
            .map(|r| usize::from(r.end() - r.start()) + 1)
            .sum(),
        Class::Unicode(c) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.end()) - u32::from(r.start())) as usize + 1)
            .sum(),
    };
    bytes > WIDE_CLASS
}

fn has_wide_class(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Class(class) => is_wide(class),
        HirKind::Capture(capture) => has_wide_class(&capture.sub),
        HirKind::Repetition(repetition) => has_wide_class(&repetition.sub),
        HirKind::Concat(pieces) | HirKind::Alternation(pieces) => pieces.iter().any(has_wide_class),
        HirKind::Empty | HirKind::Look(_) | HirKind::Literal(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::pattern::Pattern;

    fn costly(pattern: &str) -> bool {
        let hir = Pattern::parse(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        unguarded_loop(&hir).is_some()
    }

    fn costly_in_the_set(pattern: &str) -> bool {
        let hir = Pattern::parse(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        unguarded_loop(&crate::scan::set_form(&hir)).is_some()
    }

    #[test]
    fn the_set_cuts_a_leading_word_loop_but_not_a_loop_of_dotted_words() {
        assert!(!costly_in_the_set(
            r"\b\w+ (?:and \w+ )?input of \w+Op should have"
        ));
        assert!(!costly_in_the_set(r#"(?P<kernel>\w+)" not implemented for"#));
        assert!(costly_in_the_set(r"(?:\w+\.)+(?:KeyError|ValueError):"));
        assert!(costly_in_the_set(r#""(?P<kernel>\w+)" not implemented for"#));
    }

    #[test]
    fn a_word_loop_at_the_start_is_costly() {
        assert!(costly(r"\b\w+ (?:and \w+ )?input of \w+Op should have"));
        assert!(costly(r"(?i)(?P<what>\w+) (?:was )?not compiled with"));
        assert!(costly(r".*\d+"));
    }

    #[test]
    fn a_loop_behind_a_short_literal_is_still_costly() {
        assert!(costly(r#""(?P<kernel>\w+)" not implemented for"#));
        assert!(costly(r"(?:CUDA error: |x)(?P<msg>.+)"), "one branch is enough");
    }

    #[test]
    fn a_loop_at_the_start_of_the_line_is_cheap() {
        // It runs over a line's first word only.
        assert!(!costly(r"^\s*(?:\w+\.)*(?:KeyError|ValueError)(?::|\s*$)"));
        assert!(!costly(r"^\s*(?P<parameter>[\w.]+)\s*\|\s*MISMATCH"));
        assert!(
            costly(r"(?:^|\w+ )Allocation on device"),
            "unless a branch is not anchored"
        );
    }

    #[test]
    fn a_loop_behind_a_literal_is_cheap() {
        assert!(!costly(r"CUDA error: (?P<msg>.+)"));
        assert!(!costly(r"(?i)\bout of memory\b.*tried to allocate"));
        assert!(!costly(r"\|\s*MISMATCH\s*\|.*\bckpt:"));
        assert!(!costly(r"NCCL WARN\s+(.+)$"));
    }

    #[test]
    fn narrow_loops_and_single_wide_bytes_are_cheap() {
        assert!(!costly(r"^\s*rank\s*:\s*(\d+)"), "spaces and digits are narrow");
        assert!(!costly(r"^=+ Invalid __"));
        assert!(!costly(r"[\[(]\d"));
        assert!(!costly(r"\w input of"), "one wide byte is not a loop");
        assert!(!costly(r"(?i)['\x22]?\b(?:train_)?loss['\x22]?\s*[:=]\s*nan"));
    }
}
