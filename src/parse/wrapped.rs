//! Device assertion lines that a terminal wrapped inside their expression.
//!
//! A kernel's assertion line is long (file, kernel signature, thread grid, expression); pasted from
//! a terminal it is often split at the window's width, mid-word:
//!
//! ```text
//! Indexing.cu:1292: indexSelectLargeIndex: block: [126,0,0], thread: [32,0,0] Assertion `srcIndex < srcSelectDim
//! Size` failed.
//! ```
//!
//! The first line is held until the next one says whether it completes the expression; the two
//! are then read as one assertion line (joined as the wrap split them: with nothing between).
//!
//! A line's end can also come alone, its start cut away (a log viewer's elision, a paste that
//! began mid-line): `< srcSelectDimSize` failed.`. Such a tail is read only when it ends exactly
//! one of PyTorch's kernel assertions ([`KERNEL_ASSERTIONS`]), long enough to tell which.

use super::cuda::{assertion, new_assert};
use super::{AssertId, Collector};
use crate::normalize::{Line, LineMeta};

/// A line with a kernel's thread grid whose assertion expression opens and does not close, then
/// the end of an assertion line with no start ([`TAIL`]).
pub(super) const TRIGGERS: &[&str] = &[r"\] Assertion [`'][^`']*$", r"^[^`']+` failed\.?\s*$"];

/// The index in [`TRIGGERS`] of the lone tail's trigger.
pub(super) const TAIL: usize = 1;

/// The expressions of PyTorch's kernel assertions that real logs print most, as they print them.
const KERNEL_ASSERTIONS: &[&str] = &[
    "srcIndex < srcSelectDimSize",
    "dstIndex < dstAddDimSize",
    "t >= 0 && t < n_classes",
    "cur_target >= 0 && cur_target < n_classes",
    r#"index >= -sizes[i] && index < sizes[i] && "index out of bounds""#,
    r#"-sizes[i] <= index && index < sizes[i] && "index out of bounds""#,
    r#"idx_dim >= 0 && idx_dim < index_size && "index out of bounds""#,
    r#"idx_dim >= 0 && idx_dim < index_size && "scatter gather kernel index out of bounds""#,
    r#"ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds""#,
    "indexValue >= 0 && indexValue < tensor.sizes[dim]",
    "0 <= input_idx && input_idx < numRows",
    "input_val >= zero && input_val <= one",
    "target_val >= zero && target_val <= one",
];

/// The fewest characters (spaces aside) a lone tail must keep to name its assertion.
const MIN_TAIL: usize = 8;

/// The head of an assertion line, held for one line.
#[derive(Debug, Default)]
pub(super) struct WrappedAssertions {
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    number: u64,
    meta: LineMeta,
    text: String,
}

impl WrappedAssertions {
    /// The line after a held head must be seen, whatever its triggers.
    pub(super) fn wants_every_line(&self) -> bool {
        self.held.is_some()
    }

    /// Reads `line`: completes the head held from the line before, or holds `line` when it opens
    /// an assertion expression it does not close (`starts`: its trigger matched).
    /// A line that is only an assertion's end (`tail`: its trigger matched) and completes no held
    /// head is read by what it ends.
    pub(super) fn line(&mut self, out: &mut Collector, line: &Line<'_>, starts: bool, tail: bool) {
        let held = self.held.take();
        if tail && held.is_none() {
            lone_tail(out, line);
            return;
        }
        if let Some(head) = held
            && completes_expression(line.text)
        {
            let joined = format!("{}{}", head.text, line.text.trim_start());
            let whole = Line {
                number: head.number,
                text: &joined,
                meta: head.meta,
            };
            assertion(out, &whole);
            return;
        }
        if starts && line.text.contains("block: [") {
            self.held = Some(Held {
                number: line.number,
                meta: line.meta,
                text: line.text.to_owned(),
            });
        }
    }
}

/// Reads the end of an assertion line whose start was cut away, when it ends exactly one known
/// kernel assertion.
fn lone_tail(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    if text.contains("Assertion") {
        return;
    }
    let Some(end) = text.find("` failed") else {
        return;
    };
    let tail = without_spaces(&text[..end]);
    if tail.len() < MIN_TAIL {
        return;
    }
    let mut ending = KERNEL_ASSERTIONS
        .iter()
        .filter(|known| without_spaces(known).ends_with(&tail));
    let (Some(expression), None) = (ending.next(), ending.next()) else {
        return;
    };
    let id = AssertId {
        file: None,
        source_line: None,
        expression,
    };
    out.assertion(line, id, || new_assert(id, None), None, None);
}

fn without_spaces(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The rest of a wrapped expression: its closing quote and `failed`, and no assertion of its own.
fn completes_expression(text: &str) -> bool {
    (text.contains("` failed") || text.contains("' failed")) && !text.contains("Assertion ")
}

#[cfg(test)]
mod tests {
    use crate::model::EventKind;
    use crate::parse::parse_str;

    fn expressions(log: &str) -> Vec<String> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::CudaAssert(a) => Some(a.expression),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_assertion_wrapped_inside_its_expression_is_read_whole() {
        let log = "../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [126,0,0], thread: [32,0,0] Assertion `srcIndex < srcSelectDim\nSize` failed.\n";
        assert_eq!(expressions(log), ["srcIndex < srcSelectDimSize"]);
    }

    #[test]
    fn the_wrapped_assertion_keeps_the_line_number_of_its_head() {
        let log = "step 1\n/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_cl\nasses` failed.\n";
        let parsed = parse_str(log);
        let line = parsed.events.iter().find_map(|e| match &e.kind {
            EventKind::CudaAssert(a) => Some((a.expression.clone(), e.lines.start)),
            _ => None,
        });
        assert_eq!(line, Some(("t >= 0 && t < n_classes".to_owned(), 2)));
    }

    #[test]
    fn a_head_whose_next_line_does_not_complete_it_gives_no_assertion() {
        let log = "Indexing.cu:1292: indexSelectLargeIndex: block: [1,0,0], thread: [2,0,0] Assertion `srcIndex < srcSel\nTraceback (most recent call last):\n";
        assert!(expressions(log).is_empty());
    }

    #[test]
    fn a_lone_tail_that_ends_one_known_assertion_is_read_as_it() {
        let log = "CUDA error: device-side assert triggered\n...\n< srcSelectDimSize` failed.\n";
        assert_eq!(expressions(log), ["srcIndex < srcSelectDimSize"]);
    }

    #[test]
    fn a_lone_tail_too_short_or_shared_by_two_assertions_is_not_read() {
        assert!(expressions("Size` failed.\n").is_empty());
        assert!(expressions("n_classes` failed.\n").is_empty());
    }

    #[test]
    fn a_lone_tail_of_an_unknown_assertion_is_not_read() {
        assert!(expressions("... && ptr != nullptr` failed.\n").is_empty());
    }

    #[test]
    fn the_tail_of_a_wrapped_head_is_read_once_with_its_head() {
        let log = "../aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [8320,0,0], thread: [64,0,0] Assertion `-sizes[i] <= index && in\ndex < sizes[i] && \"index out of bounds\"` failed.\n";
        let parsed = parse_str(log);
        let lines: Vec<_> = parsed
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::CudaAssert(_)))
            .map(|e| (e.lines.start, e.lines.end))
            .collect();
        assert_eq!(lines, [(1, 1)]);
    }

    #[test]
    fn a_line_that_completes_its_own_assertion_is_not_held() {
        let log = "Indexing.cu:1292: indexSelectLargeIndex: block: [1,0,0], thread: [2,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nIndexing.cu:1292: indexSelectLargeIndex: block: [1,0,0], thread: [3,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n";
        assert_eq!(expressions(log), ["srcIndex < srcSelectDimSize"]);
    }
}
