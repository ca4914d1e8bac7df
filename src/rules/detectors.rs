//! The class detectors' own automata: a line set and a raw-bytes prefilter over the patterns of
//! the rules under `rules/detect/`, apart from the specific rules' set.
//!
//! A detector recognizes a class by its vocabulary (memory words with an allocation and a GPU, a
//! GPU and a CPU in one error, …). Such word lists in the specific rules' set made every line of
//! every log slower (held-out eval 0.79 s → ~5 s with seven detectors); here they are built the
//! first time a log no specific rule explains is analyzed, and run only over such logs.

use regex_syntax::hir::Hir;

use crate::scan::{LineSet, Prefilter, SetMatches};

/// The detectors' line sets and prefilter.
#[derive(Debug, Clone)]
pub struct DetectorAutomata {
    /// One line set per detector, with the slot (index into `ids`) of each of its patterns. One
    /// set of all their word lists builds far more lazy-DFA states (each a product of all the
    /// lists): over the dev negatives the detectors cost 217 M instructions as one set, 113 M
    /// as one set each.
    sets: Vec<(LineSet, Vec<usize>)>,
    /// Finds, in raw bytes, the lines on which a detector could record a hit: its `any`, `all`,
    /// `not` and `extract` patterns. A `same_line` pattern counts only on an `any` line, so it
    /// makes no line a candidate (`\d` or `[\[(]\d` would make most of them one).
    pub prefilter: Prefilter,
    /// The pattern table's ids of the detectors' patterns, ascending: the slots.
    ids: Vec<usize>,
}

impl DetectorAutomata {
    /// Builds the automata: a set for each detector's patterns (`detectors`: table ids) and the
    /// prefilter of `candidates`, `parsed[id]` being each pattern as parsed at load.
    pub(super) fn build(
        detectors: &[Vec<usize>],
        candidates: &[usize],
        parsed: &[Hir],
    ) -> Result<Self, String> {
        let mut ids: Vec<usize> = detectors.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let sets = detectors
            .iter()
            .map(|own| {
                let patterns: Vec<&Hir> = own.iter().filter_map(|&id| parsed.get(id)).collect();
                let set = LineSet::from_hirs(&patterns).map_err(|e| e.to_string())?;
                let slots = own.iter().filter_map(|id| ids.binary_search(id).ok()).collect();
                Ok((set, slots))
            })
            .collect::<Result<_, String>>()?;
        let prefilter = Prefilter::from_hirs(candidates.iter().filter_map(|&id| parsed.get(id)))
            .map_err(|e| e.to_string())?;
        Ok(Self { sets, prefilter, ids })
    }

    /// The pattern table's ids of the slots [`DetectorAutomata::matches`] reports, ascending.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// Match state for [`DetectorAutomata::matches`], one per set.
    pub fn new_matches(&self) -> Vec<SetMatches> {
        self.sets.iter().map(|(set, _)| set.new_matches()).collect()
    }

    /// The slots of the patterns that match `line`, ascending, into `out`; `state` comes from
    /// [`DetectorAutomata::new_matches`].
    pub fn matches(&self, line: &[u8], state: &mut [SetMatches], out: &mut Vec<usize>) {
        out.clear();
        for ((set, slots), matches) in self.sets.iter().zip(state) {
            if set.matches(line, matches) {
                out.extend(matches.as_slice().iter().filter_map(|&i| slots.get(i)));
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}
