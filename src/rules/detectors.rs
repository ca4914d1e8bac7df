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
    /// Finds the lines on which a detector pattern could match, in raw bytes.
    pub prefilter: Prefilter,
    /// The pattern table's id of each of the set's patterns, ascending.
    ids: Vec<usize>,
}

impl DetectorAutomata {
    /// Builds the automata of `ids` (table ids, ascending, no repeats), `parsed[id]` being each
    /// pattern as parsed at load.
    pub(super) fn build(ids: Vec<usize>, parsed: &[Hir]) -> Result<Self, String> {
        let patterns: Vec<&Hir> = ids.iter().filter_map(|&id| parsed.get(id)).collect();
        let set = LineSet::from_hirs(&patterns).map_err(|e| e.to_string())?;
        let prefilter = Prefilter::from_hirs(patterns).map_err(|e| e.to_string())?;
        Ok(Self { set, prefilter, ids })
    }

    /// The table ids of the set's matches on a line (`matched`: set indices, ascending), into
    /// `out`, ascending.
    pub fn table_ids(&self, matched: &[usize], out: &mut Vec<usize>) {
        out.clear();
        out.extend(matched.iter().filter_map(|&i| self.ids.get(i).copied()));
    }
}
