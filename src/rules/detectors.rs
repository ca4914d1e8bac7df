//! The class detectors' own automata: a line set and a raw-bytes prefilter over the patterns of
//! the rules under `rules/detect/`, apart from the specific rules' set.
//!
//! A detector recognizes a class by its vocabulary (memory words with an allocation and a GPU, a
//! GPU and a CPU in one error, …). Such word lists in the specific rules' set made every line of
//! every log slower (held-out eval 0.79 s → ~5 s with seven detectors); here they are built the
//! first time a log no specific rule explains is analyzed, and run only over such logs.

use regex_syntax::hir::Hir;

use crate::scan::{LineSet, Prefilter};

/// The detectors' line set and prefilter.
#[derive(Debug, Clone)]
pub struct DetectorAutomata {
    /// The detectors' patterns: pattern `i` of the set is the rule set's pattern `ids[i]`.
    pub set: LineSet,
    /// Finds, in raw bytes, the lines on which a detector could record a hit: its `any`, `all`,
    /// `not` and `extract` patterns. A `same_line` pattern counts only on an `any` line, so it
    /// makes no line a candidate (`\d` or `[\[(]\d` would make most of them one).
    pub prefilter: Prefilter,
    /// The pattern table's id of each of the set's patterns, ascending.
    ids: Vec<usize>,
}

impl DetectorAutomata {
    /// Builds the automata: the set of `ids` (table ids, ascending, no repeats) and the prefilter
    /// of `candidates` (some of them), `parsed[id]` being each pattern as parsed at load.
    pub(super) fn build(ids: Vec<usize>, candidates: &[usize], parsed: &[Hir]) -> Result<Self, String> {
        let patterns: Vec<&Hir> = ids.iter().filter_map(|&id| parsed.get(id)).collect();
        let set = LineSet::from_hirs(&patterns).map_err(|e| e.to_string())?;
        let prefilter = Prefilter::from_hirs(candidates.iter().filter_map(|&id| parsed.get(id)))
            .map_err(|e| e.to_string())?;
        Ok(Self { set, prefilter, ids })
    }

    /// The pattern table's id of each of the set's patterns (set index `i` is `ids()[i]`),
    /// ascending.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }
}
