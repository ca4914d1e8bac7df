//! A rank's own failure, gathered over all its files (its output, torchrun's error file): the
//! time and place come from the earliest of them, the cause (class, finding) from the most
//! specific one, and the evidence from each file that gave either.

use super::merge::Place;
use super::stamp::FALLBACK_YEAR;
use crate::model::{Confidence, EvidenceLine, FileEvidence, Finding, Role};

/// A rank's own failure.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnFault {
    /// Taxonomy class, or the exception type when no rule names it.
    pub class: String,
    /// Where it was first seen: the earliest event of the rank.
    pub place: Place,
    /// The finding of the single-log diagnosis, when a rule named it.
    pub finding: Option<Finding>,
    /// Evidence lines per file: the cause's file first, then the file that gave the time.
    pub evidence: Vec<FileEvidence>,
    /// The local rank, for a failure whose global rank is not known (a launcher's exit line).
    pub local_rank: Option<u32>,
}

impl OwnFault {
    /// A failure seen in one file: its lines are evidence of the place's file.
    pub fn new(class: String, place: Place, finding: Option<Finding>, lines: Vec<EvidenceLine>) -> Self {
        let evidence = vec![FileEvidence {
            file: place.file.clone(),
            lines,
        }];
        Self {
            class,
            place,
            finding,
            evidence,
            local_rank: None,
        }
    }

    /// Every evidence line, of every file.
    pub fn lines_mut(&mut self) -> impl Iterator<Item = &mut EvidenceLine> {
        self.evidence.iter_mut().flat_map(|e| e.lines.iter_mut())
    }

    /// How specific its cause is, in the single-log ranking's terms: a rule's finding over a bare
    /// exception, then the more confident, then a root over a symptom, then the higher priority.
    fn specificity(&self) -> Option<(Confidence, bool, i32)> {
        self.finding
            .as_ref()
            .map(|f| (f.confidence, f.role == Role::Root, f.priority))
    }

    /// Whether it was seen before `other` (a time stamp beats none).
    fn earlier_than(&self, other: &OwnFault) -> bool {
        match (&self.place.when, &other.place.when) {
            (Some(a), Some(b)) => a.wall.to_us(FALLBACK_YEAR) < b.wall.to_us(FALLBACK_YEAR),
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// Adds another sighting of the same rank's failure: the slot keeps the earliest place and the
/// most specific cause (the one already there on a tie), with the evidence of both files.
pub fn combine(slot: &mut Option<OwnFault>, new: OwnFault) {
    let Some(old) = slot.take() else {
        *slot = Some(new);
        return;
    };
    let (timed, caused) = (new.earlier_than(&old), new.specificity() > old.specificity());
    let (mut out, other) = if caused { (new, old) } else { (old, new) };
    let time_file = if timed == caused {
        out.place.file.clone()
    } else {
        out.place = other.place;
        out.place.file.clone()
    };
    out.local_rank = out.local_rank.or(other.local_rank);
    let cause_file = out.evidence.first().map(|e| e.file.clone());
    for e in other.evidence {
        if !out.evidence.iter().any(|o| o.file == e.file) {
            out.evidence.push(e);
        }
    }
    out.evidence
        .retain(|e| Some(&e.file) == cause_file.as_ref() || e.file == time_file);
    *slot = Some(out);
}
