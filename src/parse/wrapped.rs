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

use super::Collector;
use super::cuda::assertion;
use crate::normalize::{Line, LineMeta};

/// A line with a kernel's thread grid whose assertion expression opens and does not close.
pub(super) const TRIGGERS: &[&str] = &[r"\] Assertion [`'][^`']*$"];

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
    pub(super) fn line(&mut self, out: &mut Collector, line: &Line<'_>, starts: bool) {
        if let Some(head) = self.held.take()
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
    fn a_line_that_completes_its_own_assertion_is_not_held() {
        let log = "Indexing.cu:1292: indexSelectLargeIndex: block: [1,0,0], thread: [2,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nIndexing.cu:1292: indexSelectLargeIndex: block: [1,0,0], thread: [3,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n";
        assert_eq!(expressions(log), ["srcIndex < srcSelectDimSize"]);
    }
}
