//! Advice lines printed by torch, NCCL and torchrun. They help the reader but are never a cause:
//! the rules must not take them as evidence.

use std::sync::LazyLock;

use regex::Regex;

use super::{Collector, Extractor, compile_table};
use crate::model::{Advice, EventKind};
use crate::normalize::Line;

/// Each advice with the pattern that recognises a line that IS that advice (anchored at the start:
/// a line where the advice follows an error, flattened by a copy-paste, is the error's line).
const ADVICE: &[(&str, Advice)] = &[
    (
        r"^\s*(?:CUDA|HIP) kernel errors might be asynchronously reported",
        Advice::AsyncReport,
    ),
    (
        r"^\s*(?:For debugging,? consider passing|Consider (?:passing|setting)) CUDA_LAUNCH_BLOCKING=1",
        Advice::LaunchBlocking,
    ),
    (
        r"^\s*(?:Compile with .TORCH_USE_CUDA_DSA. to enable device-side assertions|Device-side assertion tracking was not enabled)",
        Advice::DeviceSideAssertions,
    ),
    (
        r"^\s*(?:If reserved (?:but unallocated )?memory is .*(?:max_split_size_mb|PYTORCH_CUDA_ALLOC_CONF)|See documentation for Memory Management)",
        Advice::AllocatorConfig,
    ),
    (
        r"^\s*\(?(?:run with |set |Set )?NCCL_DEBUG=INFO for",
        Advice::NcclDebug,
    ),
    (
        r"^\s*(?:traceback\s*: )?To enable traceback see: \S*elastic/errors",
        Advice::ElasticTraceback,
    ),
];

pub(super) const EXTRACTORS: &[Extractor] = &[Extractor {
    trigger: r"kernel errors might be asynchronously reported|CUDA_LAUNCH_BLOCKING=1|TORCH_USE_CUDA_DSA|Device-side assertion tracking|max_split_size_mb|PYTORCH_CUDA_ALLOC_CONF|Memory Management|NCCL_DEBUG=INFO|To enable traceback see",
    handle: advice_line,
}];

/// What every pattern of [`ADVICE`] starts with (after leading whitespace): most lines are ruled
/// out by this before any regex runs.
const ADVICE_STARTS: &[&str] = &[
    "CUDA",
    "HIP",
    "For",
    "Consider",
    "Compile",
    "Device",
    "If",
    "See",
    "(",
    "run ",
    "set ",
    "Set ",
    "NCCL",
    "traceback",
    "To ",
];

static ADVICE_REGEXES: LazyLock<Vec<(Regex, Advice)>> = LazyLock::new(|| compile_table(ADVICE));

/// The advice a normalized line consists of, if it is an advice line.
pub fn advice_kind(text: &str) -> Option<Advice> {
    let start = text.trim_start();
    if !ADVICE_STARTS.iter().any(|word| start.starts_with(word)) {
        return None;
    }
    ADVICE_REGEXES
        .iter()
        .find(|(re, _)| re.is_match(text))
        .map(|(_, advice)| *advice)
}

fn advice_line(out: &mut Collector, line: &Line<'_>) {
    if let Some(advice) = advice_kind(line.text) {
        out.emit(line, EventKind::Advice(advice));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_words_let_every_form_of_every_advice_through() {
        let lines = [
            "CUDA kernel errors might be asynchronously reported at some other API call",
            "  HIP kernel errors might be asynchronously reported at some other API call",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "For debugging, consider passing CUDA_LAUNCH_BLOCKING=1.",
            "Consider passing CUDA_LAUNCH_BLOCKING=1",
            "Consider setting CUDA_LAUNCH_BLOCKING=1",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
            "Device-side assertion tracking was not enabled by user.",
            "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "See documentation for Memory Management",
            "(run with NCCL_DEBUG=INFO for details)",
            "set NCCL_DEBUG=INFO for details",
            "Set NCCL_DEBUG=INFO for details",
            "NCCL_DEBUG=INFO for details",
            "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
            "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        ];
        for line in lines {
            let by_regex = ADVICE_REGEXES
                .iter()
                .find(|(re, _)| re.is_match(line))
                .map(|(_, a)| *a);
            assert!(by_regex.is_some(), "{line}");
            assert_eq!(advice_kind(line), by_regex, "{line}");
        }
        assert_eq!(advice_kind("{'loss': 1.0}"), None);
    }

    #[test]
    fn the_asynchronous_report_block_is_three_advice_lines() {
        assert_eq!(
            advice_kind(
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
            ),
            Some(Advice::AsyncReport)
        );
        assert_eq!(
            advice_kind("For debugging consider passing CUDA_LAUNCH_BLOCKING=1."),
            Some(Advice::LaunchBlocking)
        );
        assert_eq!(
            advice_kind("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."),
            Some(Advice::DeviceSideAssertions)
        );
    }

    #[test]
    fn an_error_line_that_ends_with_advice_is_not_an_advice_line() {
        assert_eq!(
            advice_kind(
                "RuntimeError: CUDA error: device-side assert triggered CUDA kernel errors might be asynchronously reported"
            ),
            None
        );
        assert_eq!(
            advice_kind(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
            ),
            None
        );
    }

    #[test]
    fn every_advice_pattern_compiles() {
        assert_eq!(ADVICE_REGEXES.len(), ADVICE.len());
    }
}
