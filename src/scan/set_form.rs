//! The form in which a line set runs a pattern: the same lines match, with fewer states.
//!
//! A set only says whether a pattern matches somewhere in a line, never where, so the part of a
//! pattern that cannot change that is left out of its automaton (captures are read later by the
//! pattern's own regex, on the lines the set found):
//!
//! - a leading loop of a class (`\w+ and`, `.*Error`, `(?P<what>\w+) was`) keeps one round, or
//!   none when it may take none: a match that starts inside a run starts as well at its last
//!   character. Such a loop is under way in every word of every line, and a lazy DFA builds
//!   states for each word it has not seen (`\b\w+ (?:and \w+ )?input of …` alone cost 2.3 % of a
//!   held-out `faultline eval`); `\b\w+` keeps one `\w` (a word run always starts at a boundary);
//! - a trailing loop of a class keeps the rounds it must take (`error: (.+)` → `error: .`), and
//!   `$` goes with it when the loop takes every byte but a newline (`(?P<msg>.+)$`): a line holds
//!   no newline, so such a loop can always run to its end.
//!
//! Anchored patterns (`^…`) keep their heads: their loop must start at the start of the line.

use std::borrow::Cow;

use regex_syntax::hir::{Class, Hir, HirKind, Look, Repetition};

/// `pattern` as a line set runs it: it matches a line (bytes without a newline) exactly when
/// `pattern` does. Borrowed when there is nothing to cut (most patterns: a copy of each would
/// cost every run a few milliseconds before its first line).
pub fn set_form(pattern: &Hir) -> Cow<'_, Hir> {
    cut(pattern).map_or(Cow::Borrowed(pattern), Cow::Owned)
}

/// The pattern cut, or `None` when nothing is to be cut.
fn cut(pattern: &Hir) -> Option<Hir> {
    match pattern.kind() {
        HirKind::Capture(capture) => cut(&capture.sub),
        HirKind::Alternation(branches) => {
            let cuts: Vec<Option<Hir>> = branches.iter().map(cut).collect();
            cuts.iter().any(Option::is_some).then(|| {
                Hir::alternation(
                    cuts.into_iter()
                        .zip(branches)
                        .map(|(cut, branch)| cut.unwrap_or_else(|| branch.clone()))
                        .collect(),
                )
            })
        }
        HirKind::Concat(pieces) => cut_pieces(pieces),
        _ => cut_pieces(std::slice::from_ref(pattern)),
    }
}

fn cut_pieces(pieces: &[Hir]) -> Option<Hir> {
    let head = head_cut(pieces);
    let rest = head.as_ref().map_or(pieces, |(_, taken)| &pieces[*taken..]);
    let tail = tail_cut(rest);
    if head.is_none() && tail.is_none() {
        return None;
    }
    let mut kept = head.map(|(rounds, _)| rounds).unwrap_or_default();
    kept.extend(tail.unwrap_or_else(|| rest.to_vec()));
    Some(Hir::concat(kept))
}

/// What replaces a leading class loop (with the `\b` before a `\w+`), and how many pieces it
/// replaces.
fn head_cut(pieces: &[Hir]) -> Option<(Vec<Hir>, usize)> {
    let boundary = pieces
        .first()
        .is_some_and(|p| matches!(p.kind(), HirKind::Look(Look::WordAscii)));
    let at = usize::from(boundary);
    let (class, min) = pieces.get(at).and_then(class_loop)?;
    if boundary && !(min >= 1 && is_ascii_word(&class)) {
        return None;
    }
    Some((rounds(&class, min.min(1)), at + 1))
}

/// The pieces with a trailing class loop cut to the rounds it must take, and `$` after a loop
/// that takes any byte but a newline; `None` when there is no such loop.
fn tail_cut(pieces: &[Hir]) -> Option<Vec<Hir>> {
    let (last, rest) = pieces.split_last()?;
    if is_end(last)
        && let Some((before, rest)) = rest.split_last()
        && let Some(before) = ends_in_any_loop(before)
    {
        let mut kept = rest.to_vec();
        kept.push(before);
        return Some(tail_cut(&kept).unwrap_or(kept));
    }
    let cut_last = match class_loop(last) {
        Some((class, min)) => rounds(&class, min),
        None => match last.kind() {
            HirKind::Capture(capture) => tail_cut(std::slice::from_ref(&capture.sub))?,
            HirKind::Concat(inner) => tail_cut(inner)?,
            HirKind::Alternation(branches) => vec![cut_branches(branches)?],
            _ => return None,
        },
    };
    let mut kept = rest.to_vec();
    kept.push(Hir::concat(cut_last));
    Some(kept)
}

/// The branches with their tails cut, or `None` when no branch has one.
fn cut_branches(branches: &[Hir]) -> Option<Hir> {
    let cuts: Vec<Option<Vec<Hir>>> = branches
        .iter()
        .map(|b| tail_cut(std::slice::from_ref(b)))
        .collect();
    cuts.iter().any(Option::is_some).then(|| {
        Hir::alternation(
            cuts.into_iter()
                .zip(branches)
                .map(|(cut, branch)| cut.map_or_else(|| branch.clone(), Hir::concat))
                .collect(),
        )
    })
}

/// `hir` cut to what it must match when it ends in a loop of any byte but a newline (which can
/// run to the end of a line): `None` when it does not end in one.
fn ends_in_any_loop(hir: &Hir) -> Option<Hir> {
    match hir.kind() {
        HirKind::Repetition(r) if r.max.is_none() && takes_any_byte_but_newline(&r.sub) => {
            let (class, min) = class_loop(hir)?;
            Some(Hir::concat(rounds(&class, min)))
        }
        HirKind::Capture(capture) => ends_in_any_loop(&capture.sub),
        HirKind::Concat(pieces) => {
            let (last, rest) = pieces.split_last()?;
            let last = ends_in_any_loop(last)?;
            let mut kept = rest.to_vec();
            kept.push(last);
            Some(Hir::concat(kept))
        }
        _ => None,
    }
}

/// A loop of one class, at least `min` rounds (through a capture).
fn class_loop(hir: &Hir) -> Option<(Class, u32)> {
    match hir.kind() {
        HirKind::Capture(capture) => class_loop(&capture.sub),
        HirKind::Repetition(Repetition { min, max, sub, .. }) if max.is_none_or(|m| m > 1) => {
            match sub.kind() {
                HirKind::Class(class) => Some((class.clone(), *min)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `class` `n` times.
fn rounds(class: &Class, n: u32) -> Vec<Hir> {
    (0..n).map(|_| Hir::class(class.clone())).collect()
}

fn is_end(hir: &Hir) -> bool {
    matches!(hir.kind(), HirKind::Look(Look::End))
}

fn is_ascii_word(class: &Class) -> bool {
    let Class::Bytes(bytes) = class else {
        return false;
    };
    let ranges: Vec<(u8, u8)> = bytes.ranges().iter().map(|r| (r.start(), r.end())).collect();
    ranges == [(b'0', b'9'), (b'A', b'Z'), (b'_', b'_'), (b'a', b'z')]
}

fn takes_any_byte_but_newline(hir: &Hir) -> bool {
    let HirKind::Class(class) = hir.kind() else {
        return false;
    };
    match class {
        Class::Bytes(bytes) => (0..=u8::MAX)
            .filter(|&b| b != b'\n')
            .all(|b| bytes.ranges().iter().any(|r| r.start() <= b && b <= r.end())),
        Class::Unicode(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pattern: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
    }

    fn form(pattern: &str) -> String {
        set_form(&parse(pattern)).to_string()
    }

    #[test]
    fn a_pattern_with_nothing_to_cut_is_not_copied() {
        assert!(matches!(
            set_form(&parse(r"CUDA error: out of memory")),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            set_form(&parse(r"^\s*(?:\w+\.)*KeyError")),
            Cow::Borrowed(_)
        ));
    }

    /// Whether both patterns match the same lines of `lines`.
    fn same_lines(pattern: &str, lines: &[&str]) {
        let bytes = |hir: &Hir| {
            regex::bytes::RegexBuilder::new(&hir.to_string())
                .unicode(false)
                .build()
                .unwrap_or_else(|e| panic!("{pattern}: {e}"))
        };
        let (whole, reduced) = (bytes(&parse(pattern)), bytes(&set_form(&parse(pattern))));
        for line in lines {
            assert_eq!(
                whole.is_match(line.as_bytes()),
                reduced.is_match(line.as_bytes()),
                "{pattern} on {line:?}"
            );
        }
    }

    #[test]
    fn a_leading_word_loop_keeps_one_character() {
        assert_eq!(
            form(r"\b\w+ (?:and \w+ )?input of"),
            form(r"\w (?:and \w+ )?input of")
        );
        assert_eq!(
            form(r"(?P<what>\w+) was not compiled"),
            form(r"\w was not compiled")
        );
        assert_eq!(form(r".*Error: x"), form(r"Error: x"));
    }

    #[test]
    fn a_trailing_loop_keeps_the_rounds_it_must_take() {
        assert_eq!(form(r"CUDA error: (?P<msg>.+)$"), form(r"CUDA error: ."));
        assert_eq!(form(r"NCCL WARN\s+(.+)$"), form(r"NCCL WARN\s+."));
        assert_eq!(
            form(r"ShapeError: (?P<d>.*\bshape\w*.*)$"),
            form(r"ShapeError: .*\bshape")
        );
        assert_eq!(form(r"id=\d{1,3}"), form(r"id=\d"));
        assert_eq!(
            form(r"\b(?:gpu\b|cu[A-Z]\w*)"),
            form(r"\b(?:gpu\b|cu[A-Z])"),
            "in each last branch"
        );
    }

    #[test]
    fn what_decides_a_match_is_kept() {
        assert_eq!(
            form(r"foo\s*$"),
            form(r"foo\s*$"),
            "the end of the line must follow"
        );
        assert_eq!(form(r"^\s*(?:\w+\.)*KeyError"), form(r"^\s*(?:\w+\.)*KeyError"));
        assert_eq!(
            form(r"\b[a-z]+ing\b"),
            form(r"\b[a-z]+ing\b"),
            "a run of part of \\w"
        );
        assert_eq!(
            form(r"\w+\S*$"),
            form(r"\w\S*$"),
            "`\\S*` cannot run over a space"
        );
        assert_eq!(form(r"\w+.*$"), form(r"\w"));
    }

    #[test]
    fn the_reduced_form_matches_the_same_lines() {
        let lines = [
            "",
            "Param and Grad input of AdamOp should have same dimension",
            "input of AdamOp should have same dimension",
            "(x) input of AdamOp should have same dimension",
            "torchvision was not compiled with CUDA support",
            " was not compiled",
            "CUDA error: ",
            "CUDA error: x",
            "ShapeError: the shape of x",
            "ShapeError: shapes",
            "ShapeError: nothing",
            "foo  ",
            "foo x",
            "id=7",
            "id=",
            "a.b.KeyError",
            "x a.KeyError",
            "gpus",
            "cuD",
            "a cuDevice",
        ];
        for pattern in [
            r"\b\w+ (?:and \w+ )?input of \w+Op should have (?:the )?same (?:dimension|shape|rank)",
            r"(?i)(?P<what>\w+) (?:was )?not compiled",
            r"CUDA error: (?P<msg>.+)$",
            r"ShapeError: (?P<d>.*\b(?:shape|dim|rank)\w*.*)$",
            r"foo\s*$",
            r"id=\d{1,3}",
            r"^\s*(?:\w+\.)*KeyError",
            r"\b[a-z]+\.KeyError",
            r"\b(?:gpu\b|cu[A-Z]\w*)",
        ] {
            same_lines(pattern, &lines);
        }
    }
}
