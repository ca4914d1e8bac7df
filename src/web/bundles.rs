//! What the incident page shows of a distributed job's bundle: the first fault with its evidence
//! per file, the cascades folded and counted, the collectives per process group (ranks in the same
//! state folded together), the Xids with what they mean and what to do, the files, and the
//! timeline drawing. Pure functions of the stored [`BundleDiagnosis`].

use std::collections::BTreeMap;

use super::human_bytes;
use super::timeline::timeline_svg;
use crate::kb::bundles::StoredFile;
use crate::model::{
    BundleDiagnosis, Confidence, FaultKind, GroupStall, RankCollectiveState, StateSource, XidAction,
    XidOrigin, XidReport,
};

/// The bundle part of an incident page.
#[derive(Debug, Clone)]
pub struct BundleView {
    /// The first fault, when one was elected.
    pub first_fault: Option<FirstFaultView>,
    /// Why none was, and what would settle it.
    pub missing: Vec<String>,
    /// Ranks that only followed the first fault.
    pub cascades: Vec<CascadeView>,
    /// Collective state per process group.
    pub stalls: Vec<StallView>,
    /// Xid events.
    pub xids: Vec<XidView>,
    /// Which ranks have files, in a sentence.
    pub coverage: String,
    /// The files, with links to their kept text.
    pub files: Vec<FileView>,
    /// The timeline drawing (SVG, escaped), when there is anything to draw.
    pub timeline_svg: Option<String>,
    /// Problems with the bundle.
    pub warnings: Vec<String>,
}

/// The first fault as the page shows it.
#[derive(Debug, Clone)]
pub struct FirstFaultView {
    /// One sentence.
    pub summary: String,
    /// What it is, in words.
    pub kind: &'static str,
    /// `high`, `medium`, `low`.
    pub confidence: &'static str,
    /// (name, value) rows: rank, host, GPU, collective, cause.
    pub facts: Vec<(&'static str, String)>,
    /// Why it was elected.
    pub reasons: Vec<String>,
    /// Per file: its name and its (line, text) evidence.
    pub evidence: Vec<(String, Vec<(u64, String)>)>,
}

/// A cascade folded into one line.
#[derive(Debug, Clone)]
pub struct CascadeView {
    /// `63 ranks: watchdog timeout on ALLREDUCE SeqNum 1412, cascade`.
    pub summary: String,
    /// How many ranks.
    pub count: usize,
    /// Their ranks, folded into ranges.
    pub ranks: String,
}

/// A process group's collectives.
#[derive(Debug, Clone)]
pub struct StallView {
    /// The group.
    pub pg: String,
    /// The collective the ranks were stuck in.
    pub stalled: Option<String>,
    /// Ranks in the same state, folded together.
    pub rows: Vec<StallRow>,
    /// Ranks that never entered the stalled collective.
    pub never_entered: String,
    /// Sequence numbers where ranks disagree, in words.
    pub desync: Vec<String>,
}

/// Ranks of a group in the same collective state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallRow {
    /// The ranks, folded into ranges.
    pub ranks: String,
    /// Last enqueued.
    pub enqueued: String,
    /// Last started.
    pub started: String,
    /// Last completed.
    pub completed: String,
    /// Timed out in.
    pub timed_out: String,
    /// What they called at the stalled sequence number.
    pub call: String,
    /// `log` or `dump`.
    pub source: &'static str,
}

/// An Xid event.
#[derive(Debug, Clone)]
pub struct XidView {
    /// The code.
    pub code: u32,
    /// What it means.
    pub meaning: String,
    /// Whose fault, settled for this job, in words (with why when settled).
    pub origin: String,
    /// What to do, in order.
    pub actions: String,
    /// Where: host, GPU, ranks.
    pub place: String,
    /// File and line.
    pub source: String,
    /// The line.
    pub text: String,
}

/// A file of the bundle.
#[derive(Debug, Clone)]
pub struct FileView {
    /// Its place (the link's number).
    pub ordinal: i64,
    /// Its name.
    pub name: String,
    /// What it is, in words.
    pub kind: String,
    /// Its size in words.
    pub size: String,
    /// Lines kept.
    pub lines: i64,
    /// How it was kept, when not as it came: `a flight-recorder pickle, kept as fr_3.json (its
    /// content in JSON)`.
    pub kept: Option<String>,
}

/// The page's view of a bundle and its stored files.
pub fn bundle_view(bundle: &BundleDiagnosis, files: &[StoredFile]) -> BundleView {
    BundleView {
        first_fault: bundle.first_fault.as_ref().map(|f| FirstFaultView {
            summary: f.summary.clone(),
            kind: match f.kind {
                FaultKind::RankFailure => "a rank failed by itself",
                FaultKind::Xid => "the kernel logged an Xid for a GPU",
                FaultKind::NeverEntered => "a rank never entered the collective the others waited in",
                FaultKind::Desync => "ranks called different collectives at the same sequence number",
                FaultKind::HealthCheck => "a GPU failed a health check",
            },
            confidence: confidence_word(f.confidence),
            facts: [
                ("Rank", f.rank.map(|r| r.to_string())),
                ("Local rank", f.local_rank.map(|r| r.to_string())),
                ("Host", f.host.clone()),
                (
                    "GPU",
                    f.gpu.as_ref().filter(|g| !g.is_empty()).map(ToString::to_string),
                ),
                ("Collective", f.collective.as_ref().map(ToString::to_string)),
                (
                    "Cause",
                    f.cause.as_ref().map(|c| format!("{} ({})", c.title, c.class)),
                ),
                (
                    "Xid",
                    f.xid.as_ref().map(|x| format!("{}: {}", x.code, x.meaning)),
                ),
            ]
            .into_iter()
            .filter_map(|(name, value)| value.map(|v| (name, v)))
            .collect(),
            reasons: f.reasons.clone(),
            evidence: f
                .evidence
                .iter()
                .map(|e| {
                    (
                        e.file.clone(),
                        e.lines.iter().map(|l| (l.line, l.text.clone())).collect(),
                    )
                })
                .collect(),
        }),
        missing: bundle.missing.clone(),
        cascades: bundle
            .cascades
            .iter()
            .map(|c| CascadeView {
                summary: c.summary.clone(),
                count: c.ranks.len(),
                ranks: ranges(&c.ranks),
            })
            .collect(),
        stalls: bundle.collectives.iter().map(stall_view).collect(),
        xids: bundle.xids.iter().map(xid_view).collect(),
        coverage: coverage_sentence(bundle),
        files: files
            .iter()
            .map(|f| FileView {
                ordinal: f.ordinal,
                name: f.name.clone(),
                kind: f.kind.replace('_', " "),
                size: human_bytes(usize::try_from(f.bytes).unwrap_or(usize::MAX)),
                lines: f.lines,
                kept: kept_words(f),
            })
            .collect(),
        timeline_svg: timeline_svg(bundle),
        warnings: bundle.warnings.iter().map(|w| w.message.clone()).collect(),
    }
}

/// How a file was kept, in words, when not as it came.
fn kept_words(file: &StoredFile) -> Option<String> {
    match (&file.kept_as, file.binary) {
        (Some(kept_as), _) => Some(format!(
            "a flight-recorder pickle, kept as {kept_as} (its content in JSON)"
        )),
        (None, true) => Some("binary: only its readable text was kept".to_owned()),
        (None, false) => None,
    }
}

fn confidence_word(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    }
}

fn stall_view(group: &GroupStall) -> StallView {
    let seq = |s: Option<u64>| s.map_or_else(|| "–".to_owned(), |s| s.to_string());
    let mut folded: BTreeMap<StallKey, Vec<u32>> = BTreeMap::new();
    for state in &group.ranks {
        folded.entry(StallKey::of(state)).or_default().push(state.rank);
    }
    let mut rows: Vec<(u32, StallRow)> = folded
        .into_iter()
        .map(|(key, ranks)| {
            let first = ranks.first().copied().unwrap_or(0);
            let row = StallRow {
                ranks: ranges(&ranks),
                enqueued: seq(key.enqueued),
                started: seq(key.started),
                completed: seq(key.completed),
                timed_out: seq(key.timed_out),
                call: key.call,
                source: key.source,
            };
            (first, row)
        })
        .collect();
    rows.sort_by_key(|(first, _)| *first);
    StallView {
        pg: group.pg.clone(),
        stalled: group.stalled.as_ref().map(ToString::to_string),
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        never_entered: ranges(&group.never_entered),
        desync: group
            .desync
            .iter()
            .map(|d| {
                let calls: Vec<String> = d
                    .calls
                    .iter()
                    .map(|c| format!("ranks {}: {}", ranges(&c.ranks), call_words(&c.call)))
                    .collect();
                format!("SeqNum {}: {}", d.seq, calls.join("; "))
            })
            .collect(),
    }
}

/// What makes two ranks' collective states the same row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct StallKey {
    enqueued: Option<u64>,
    started: Option<u64>,
    completed: Option<u64>,
    timed_out: Option<u64>,
    call: String,
    source: &'static str,
}

impl StallKey {
    fn of(state: &RankCollectiveState) -> Self {
        Self {
            enqueued: state.last_enqueued,
            started: state.last_started,
            completed: state.last_completed,
            timed_out: state.timed_out,
            call: state.call.as_ref().map(call_words).unwrap_or_default(),
            source: match state.source {
                StateSource::Log => "log",
                StateSource::Dump => "dump",
            },
        }
    }
}

fn call_words(call: &crate::model::CollectiveCall) -> String {
    let mut words = vec![call.op.clone().unwrap_or_else(|| "collective".to_owned())];
    if let Some(n) = call.numel_in {
        words.push(format!("{n} elements in"));
    }
    if let Some(n) = call.numel_out {
        words.push(format!("{n} out"));
    }
    if let Some(s) = &call.sizes {
        words.push(format!("sizes {s}"));
    }
    words.join(", ")
}

fn xid_view(x: &XidReport) -> XidView {
    let origin = |o: XidOrigin| match o {
        XidOrigin::Application => "the application",
        XidOrigin::Driver => "the driver",
        XidOrigin::Hardware => "the hardware",
        XidOrigin::Ambiguous => "ambiguous (the application or the hardware)",
    };
    let settled = match (&x.settled_by, x.settled == x.origin) {
        (Some(why), _) => format!("{} — settled: {why}", origin(x.settled)),
        (None, true) => origin(x.settled).to_owned(),
        (None, false) => format!("{} (the catalog says {})", origin(x.settled), origin(x.origin)),
    };
    let mut place = Vec::new();
    if let Some(host) = &x.host {
        place.push(host.clone());
    }
    if let Some(gpu) = x.gpu.as_ref().filter(|g| !g.is_empty()) {
        place.push(gpu.to_string());
    }
    if !x.ranks.is_empty() {
        place.push(format!("ranks {}", ranges(&x.ranks)));
    }
    XidView {
        code: x.code,
        meaning: x.meaning.clone(),
        origin: settled,
        actions: x
            .actions
            .iter()
            .map(|a| match a {
                XidAction::FixApplication => "fix the application",
                XidAction::RestartJob => "restart the job",
                XidAction::ResetGpu => "reset the GPU",
                XidAction::DrainNode => "drain the node",
                XidAction::UpdateDriver => "update the driver",
            })
            .collect::<Vec<_>>()
            .join(", then "),
        place: place.join(" · "),
        source: format!("{}:{}", x.file, x.line),
        text: x.text.clone(),
    }
}

fn coverage_sentence(bundle: &BundleDiagnosis) -> String {
    let c = &bundle.coverage;
    let mut parts = Vec::new();
    match (c.world_size, &c.world_size_from) {
        (Some(n), Some(from)) => parts.push(format!("{n} ranks (from {from})")),
        (Some(n), None) => parts.push(format!("{n} ranks")),
        _ => parts.push("the job's size is not known".to_owned()),
    }
    parts.push(format!("logs from {} rank(s)", c.with_log.len()));
    if !c.without_log.is_empty() {
        parts.push(format!("no log from ranks {}", ranges(&c.without_log)));
    }
    if !c.with_dump.is_empty() {
        parts.push(format!(
            "flight-recorder dumps from {} rank(s)",
            c.with_dump.len()
        ));
    }
    if !c.without_dump.is_empty() {
        parts.push(format!("no dump from ranks {}", ranges(&c.without_dump)));
    }
    parts.join("; ")
}

/// `0–2, 4, 6–7` from ranks in any order.
pub fn ranges(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}–{end}")
        });
        i += 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CollectiveCall, CollectiveRef, Desync, DesyncCall};

    #[test]
    fn ranks_fold_into_ranges() {
        assert_eq!(ranges(&[7, 0, 1, 2, 4, 6, 2]), "0–2, 4, 6–7");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[5]), "5");
    }

    fn state(rank: u32, completed: u64, source: StateSource) -> RankCollectiveState {
        RankCollectiveState {
            rank,
            last_enqueued: Some(completed + 1),
            last_started: Some(completed + 1),
            last_completed: Some(completed),
            timed_out: None,
            call: None,
            source,
        }
    }

    #[test]
    fn ranks_in_the_same_collective_state_are_one_row() {
        let mut ranks: Vec<RankCollectiveState> = (0..64)
            .filter(|r| *r != 17)
            .map(|r| state(r, 1411, StateSource::Log))
            .collect();
        ranks.push(state(17, 1410, StateSource::Dump));
        let group = GroupStall {
            pg: "0".into(),
            stalled: Some(CollectiveRef {
                pg: "0".into(),
                seq: Some(1412),
                op: Some("ALLREDUCE".into()),
            }),
            ranks,
            never_entered: vec![17],
            desync: vec![Desync {
                seq: 1412,
                calls: vec![
                    DesyncCall {
                        call: CollectiveCall {
                            op: Some("ALLREDUCE".into()),
                            numel_in: Some(1024),
                            numel_out: None,
                            sizes: None,
                        },
                        ranks: vec![0, 1, 2],
                    },
                    DesyncCall {
                        call: CollectiveCall {
                            op: Some("BROADCAST".into()),
                            numel_in: None,
                            numel_out: None,
                            sizes: None,
                        },
                        ranks: vec![3],
                    },
                ],
            }],
        };
        let view = stall_view(&group);
        assert_eq!(
            view.stalled.as_deref(),
            Some("ALLREDUCE SeqNum 1412 (process group 0)")
        );
        assert_eq!(
            view.rows
                .iter()
                .map(|r| (r.ranks.as_str(), r.completed.as_str(), r.source))
                .collect::<Vec<_>>(),
            vec![("0–16, 18–63", "1411", "log"), ("17", "1410", "dump")]
        );
        assert_eq!(view.never_entered, "17");
        assert_eq!(
            view.desync,
            vec!["SeqNum 1412: ranks 0–2: ALLREDUCE, 1024 elements in; ranks 3: BROADCAST".to_owned()]
        );
    }
}
