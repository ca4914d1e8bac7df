//! From the per-rank summaries to the bundle's diagnosis: one clock (the bundle's year, the hosts'
//! offsets), the collectives per process group, the Xids settled, the first fault elected, the
//! cascades folded, the timeline.

use std::collections::{BTreeMap, BTreeSet};

use super::merge::UNKNOWN_PG;
use super::merge::{CascadeEvent, CascadeKind, Place, RankState, State};
use super::own::OwnFault;
use super::stamp::FALLBACK_YEAR;
use crate::model::{
    BUNDLE_FORMAT_VERSION, BundleDiagnosis, Cascade, ClockOffset, CollectiveCall, CollectiveRef, Confidence,
    Coverage, Desync, DesyncCall, EvidenceLine, FaultKind, FileEvidence, FirstFault, GpuRef, GroupStall,
    RankCollectiveState, RankOutcome, RankReport, StateSource, TimelineEvent, TimelineKind, Warning,
    XidOrigin, XidReport,
};

/// Smallest clock offset between hosts worth correcting (ranks time out a little apart anyway).
const MIN_OFFSET_US: i64 = 1_000_000;

/// Most timeline events.
const MAX_TIMELINE: usize = 2000;

/// The common clock: the bundle's year for stamps without one, each host's offset removed.
struct Clock {
    year: i32,
    offsets: BTreeMap<String, i64>,
}

impl Clock {
    fn at(&self, place: &Place) -> Option<i64> {
        let when = place.when.as_ref()?;
        let offset = place
            .host
            .as_ref()
            .and_then(|h| self.offsets.get(h))
            .copied()
            .unwrap_or(0);
        Some(when.wall.to_us(self.year) - offset)
    }
}

/// Builds the diagnosis.
pub fn finish(mut state: State) -> BundleDiagnosis {
    state.resolve_slots();
    state.settle_unknown_groups();
    state.promote_fatal_exits();
    fill_hosts(&mut state);
    enrich_gpus(&mut state);
    let year = state.year.unwrap_or(FALLBACK_YEAR);
    let (offsets, clock_offsets) = clock_offsets(&state, year);
    let clock = Clock { year, offsets };
    let collectives = collectives(&state);
    let xids = xid_reports(&state, &clock);
    let coverage = coverage(&state);
    let election = elect(&state, &clock, &collectives, &xids);
    let first_fault = election.as_ref().map(|e| e.fault.clone());
    let root_rank = first_fault.as_ref().and_then(|f| f.rank);
    let cascades = fold_cascades(&state, &root_ranks(first_fault.as_ref(), &collectives));
    let mut missing = missing(&state, &coverage, first_fault.as_ref());
    if let Some(e) = &election {
        missing.extend(e.missing.iter().cloned());
    }
    let timeline = timeline(&state, &clock, root_rank, &xids);
    let ranks = rank_reports(&state, &clock);
    let hosts: BTreeSet<String> = state
        .ranks
        .values()
        .filter_map(|r| r.host.clone())
        .chain(state.files.iter().filter_map(|f| f.host.clone()))
        .collect();
    let mut warnings = state.warnings;
    if state.year.is_none()
        && state
            .ranks
            .values()
            .any(|r| r.own.as_ref().is_some_and(|o| o.place.when.is_some()))
    {
        warnings.push(Warning::new(
            "no_year",
            "no stamp shows a year: times are read in one assumed year (their order and gaps hold)",
            None,
        ));
    }
    BundleDiagnosis {
        format_version: BUNDLE_FORMAT_VERSION,
        first_fault,
        cascades,
        missing,
        collectives,
        xids,
        coverage,
        ranks,
        hosts: hosts.into_iter().collect(),
        clock_offsets,
        timeline,
        files: state.files,
        warnings,
    }
}

/// Places without a host take their rank's.
fn fill_hosts(state: &mut State) {
    for rank in state.ranks.values_mut() {
        let host = rank.host.clone();
        if let Some(own) = &mut rank.own
            && own.place.host.is_none()
        {
            own.place.host.clone_from(&host);
        }
        for c in &mut rank.cascades {
            if c.place.host.is_none() {
                c.place.host.clone_from(&host);
            }
        }
    }
}

/// Completes each rank's GPU from the host's GPU lists (nvidia-smi, the driver's UUID lines).
fn enrich_gpus(state: &mut State) {
    let gpus = state.gpus.clone();
    for rank in state.ranks.values_mut() {
        for (host, gpu) in &gpus {
            let same_host = host.is_none() || rank.host.is_none() || *host == rank.host;
            if same_host && !rank.gpu.is_empty() && rank.gpu.same_as(gpu) {
                rank.gpu.merge(gpu);
            }
        }
    }
}

/// Hosts' clock offsets from the collective timeouts every rank shares (the same process group
/// and sequence number time out at nearly the same moment everywhere).
fn clock_offsets(state: &State, year: i32) -> (BTreeMap<String, i64>, Vec<ClockOffset>) {
    // (pg, seq) → host → earliest time.
    let mut shared: BTreeMap<(String, u64), BTreeMap<String, i64>> = BTreeMap::new();
    let mut first_host = None;
    for rank in state.ranks.values() {
        for c in &rank.cascades {
            let (Some(coll), Some(host), Some(when)) = (&c.collective, &c.place.host, &c.place.when) else {
                continue;
            };
            let Some(seq) = coll.seq else { continue };
            first_host.get_or_insert_with(|| host.clone());
            let t = when.wall.to_us(year);
            let slot = shared
                .entry((coll.pg.clone(), seq))
                .or_default()
                .entry(host.clone())
                .or_insert(t);
            *slot = (*slot).min(t);
        }
    }
    let Some(reference) = first_host else {
        return (BTreeMap::new(), Vec::new());
    };
    let mut diffs: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for ((pg, seq), hosts) in &shared {
        let Some(base) = hosts.get(&reference) else {
            continue;
        };
        for (host, t) in hosts {
            if *host != reference {
                diffs
                    .entry(host.clone())
                    .or_default()
                    .push((t - base, format!("process group {pg} SeqNum {seq}")));
            }
        }
    }
    let mut offsets = BTreeMap::new();
    let mut report = Vec::new();
    for (host, mut d) in diffs {
        d.sort();
        let (median, _) = d[d.len() / 2].clone();
        if median.abs() >= MIN_OFFSET_US {
            offsets.insert(host.clone(), median);
            report.push(ClockOffset {
                host,
                offset_ms: median / 1000,
                from: format!(
                    "timeouts shared with {reference}: {}",
                    d.iter()
                        .map(|(_, what)| what.as_str())
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                samples: d.len() as u32,
            });
        }
    }
    (offsets, report)
}

/// Each process group's collectives across ranks.
fn collectives(state: &State) -> Vec<GroupStall> {
    let mut pgs: BTreeSet<String> = BTreeSet::new();
    for rank in state.ranks.values() {
        pgs.extend(rank.groups.keys().cloned());
        if let Some(dump) = &rank.dump {
            pgs.extend(dump.groups.keys().cloned());
        }
    }
    let mut out = Vec::new();
    for pg in pgs {
        let mut states = Vec::new();
        let mut calls: BTreeMap<u64, Vec<(u32, CollectiveCall)>> = BTreeMap::new();
        for (rank, r) in &state.ranks {
            let log = r.groups.get(&pg);
            let dump = r.dump.as_ref().and_then(|d| d.groups.get(&pg));
            if log.is_none() && dump.is_none() {
                continue;
            }
            let source = if dump.is_some() {
                StateSource::Dump
            } else {
                StateSource::Log
            };
            let mut rank_calls: BTreeMap<u64, CollectiveCall> = BTreeMap::new();
            if let Some(l) = log {
                rank_calls.extend(l.calls.clone());
            }
            if let Some(d) = dump {
                rank_calls.extend(d.calls.clone());
            }
            for (seq, call) in &rank_calls {
                calls.entry(*seq).or_default().push((*rank, call.clone()));
            }
            states.push(RankCollectiveState {
                rank: *rank,
                last_enqueued: dump.and_then(|d| d.enqueued).or(log.and_then(|l| l.enqueued)),
                last_started: dump.and_then(|d| d.started),
                last_completed: dump.and_then(|d| d.completed).or(log.and_then(|l| l.completed)),
                timed_out: log.and_then(|l| l.timed_out),
                call: None,
                source,
            });
        }
        let stalled_seq = states.iter().filter_map(|s| s.timed_out).min().or_else(|| {
            let next = states.iter().filter_map(|s| s.last_completed).min()? + 1;
            states
                .iter()
                .any(|s| s.last_enqueued.is_some_and(|e| e >= next))
                .then_some(next)
        });
        for s in &mut states {
            s.call = stalled_seq.and_then(|seq| {
                calls
                    .get(&seq)?
                    .iter()
                    .find(|(r, _)| *r == s.rank)
                    .map(|(_, c)| c.clone())
            });
        }
        let op = stalled_seq.and_then(|seq| majority(calls.get(&seq)?).and_then(|c| c.op));
        let never_entered = match stalled_seq {
            Some(seq) => states
                .iter()
                .filter(|s| s.last_enqueued.is_some_and(|e| e < seq))
                .map(|s| s.rank)
                .collect(),
            None => Vec::new(),
        };
        let desync = calls
            .iter()
            .filter_map(|(seq, made)| desync_at(*seq, made))
            .take(1)
            .collect();
        // A group the dumps' own configuration does not list is internal (the debug wrapper's
        // helper group under TORCH_DISTRIBUTED_DEBUG=DETAIL): its checks are not the training's
        // collectives, so no stall and no rank left out is claimed from it.
        let (stalled_seq, never_entered) = if internal_group(state, &pg) {
            (None, Vec::new())
        } else {
            (stalled_seq, never_entered)
        };
        out.push(GroupStall {
            stalled: stalled_seq.map(|seq| CollectiveRef {
                pg: pg.clone(),
                seq: Some(seq),
                op,
            }),
            pg,
            ranks: states,
            never_entered,
            desync,
        });
    }
    add_logged_mismatches(state, &mut out);
    out
}

/// Whether every dump that holds `pg` lists other groups in its configuration but not this one.
fn internal_group(state: &State, pg: &str) -> bool {
    let mut dumps = state
        .ranks
        .values()
        .filter_map(|r| r.dump.as_ref())
        .filter_map(|d| d.groups.get(pg).map(|g| (d, g)))
        .peekable();
    dumps.peek().is_some()
        && dumps.all(|(d, g)| g.ranks.is_empty() && d.groups.values().any(|other| !other.ranks.is_empty()))
}

/// The call most ranks made.
fn majority(calls: &[(u32, CollectiveCall)]) -> Option<CollectiveCall> {
    let mut counts: BTreeMap<String, (usize, &CollectiveCall)> = BTreeMap::new();
    for (_, c) in calls {
        counts.entry(format!("{c:?}")).or_insert((0, c)).0 += 1;
    }
    counts
        .into_values()
        .max_by_key(|(n, _)| *n)
        .map(|(_, c)| c.clone())
}

/// Two calls disagree: different ops, or different sizes where both are known.
fn disagree(a: &CollectiveCall, b: &CollectiveCall) -> bool {
    fn differ<T: PartialEq>(x: &Option<T>, y: &Option<T>) -> bool {
        matches!((x, y), (Some(p), Some(q)) if p != q)
    }
    differ(&a.op, &b.op) || differ(&a.numel_in, &b.numel_in) || differ(&a.numel_out, &b.numel_out)
}

fn desync_at(seq: u64, made: &[(u32, CollectiveCall)]) -> Option<Desync> {
    let mut groups: Vec<DesyncCall> = Vec::new();
    for (rank, call) in made {
        match groups.iter_mut().find(|g| !disagree(&g.call, call)) {
            Some(g) => g.ranks.push(*rank),
            None => groups.push(DesyncCall {
                call: call.clone(),
                ranks: vec![*rank],
            }),
        }
    }
    if groups.len() < 2 {
        return None;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.ranks.len()));
    Some(Desync { seq, calls: groups })
}

/// `TORCH_DISTRIBUTED_DEBUG=DETAIL`'s mismatch lines, as desyncs of the group the line names, or
/// of group [`UNKNOWN_PG`] when it names none (DETAIL's fingerprint line never does: it checks
/// every group alike).
fn add_logged_mismatches(state: &State, out: &mut Vec<GroupStall>) {
    let mut by_seq: BTreeMap<(String, u64), Vec<(u32, CollectiveCall)>> = BTreeMap::new();
    for m in &state.mismatches {
        let pg = m.pg.clone().unwrap_or_else(|| UNKNOWN_PG.to_owned());
        for (rank, seq, call) in &m.calls {
            let made = by_seq.entry((pg.clone(), seq.unwrap_or(0))).or_default();
            if !made.iter().any(|(r, _)| r == rank) {
                made.push((*rank, call.clone()));
            }
        }
    }
    for ((pg, seq), made) in by_seq {
        let Some(desync) = desync_at(seq, &made) else {
            continue;
        };
        match out.iter_mut().find(|g| g.pg == pg) {
            Some(g) if !g.desync.iter().any(|d| d.seq == seq) => g.desync.push(desync),
            Some(_) => {}
            None => out.push(GroupStall {
                pg,
                stalled: None,
                ranks: Vec::new(),
                never_entered: Vec::new(),
                desync: vec![desync],
            }),
        }
    }
}

/// Each Xid with what it means, its GPU and ranks, settled against the ranks' own failures.
fn xid_reports(state: &State, clock: &Clock) -> Vec<XidReport> {
    let mut out: Vec<XidReport> = state
        .xids
        .iter()
        .map(|x| {
            let entry = state.catalog.get(x.code);
            let mut gpu = GpuRef {
                bus_id: x.bus_id.clone(),
                ..GpuRef::default()
            };
            for (host, known) in &state.gpus {
                if (host.is_none() || *host == x.place.host) && gpu.same_as(known) {
                    gpu.merge(known);
                }
            }
            let ranks: Vec<u32> = state
                .ranks
                .iter()
                .filter(|(_, r)| {
                    (r.host.is_none() || x.place.host.is_none() || r.host == x.place.host) && r.gpu.same_as(&gpu)
                })
                .map(|(rank, _)| *rank)
                .collect();
            let origin = entry.map_or(XidOrigin::Ambiguous, |e| e.origin);
            let app_fault = ranks.iter().find_map(|rank| {
                let own = state.ranks.get(rank)?.own.as_ref()?;
                let confirmed = own
                    .finding
                    .as_ref()
                    .is_some_and(|f| f.tier == crate::model::EvidenceTier::Confirmed);
                (state.catalog.settles_as_application(&own.class) || confirmed).then(|| (*rank, own.class.clone()))
            });
            let (settled, settled_by) = match (origin, app_fault) {
                (XidOrigin::Ambiguous, Some((rank, class))) => (
                    XidOrigin::Application,
                    Some(format!("rank {rank} on this GPU failed with {class} in its own code")),
                ),
                (o, _) => (o, None),
            };
            XidReport {
                code: x.code,
                meaning: entry.map_or_else(
                    || format!("Xid {} is not in faultline's catalog (rules/xid.toml): read NVIDIA's Xid catalog", x.code),
                    |e| format!("{}: {}", e.name, e.meaning),
                ),
                origin,
                settled,
                settled_by,
                actions: entry.map(|e| e.actions.clone()).unwrap_or_default(),
                host: x.place.host.clone(),
                gpu: (!gpu.is_empty()).then_some(gpu),
                ranks,
                at_us: clock.at(&x.place),
                file: x.place.file.clone(),
                line: x.place.line,
                text: x.place.text.clone(),
                sources: state.catalog.sources.clone(),
            }
        })
        .collect();
    out.sort_by_key(|x| (x.at_us.is_none(), x.at_us, x.file.clone(), x.line));
    out
}

/// The ranks the bundle has files for.
fn coverage(state: &State) -> Coverage {
    let dump_ranks: Option<usize> = state
        .ranks
        .values()
        .filter_map(|r| r.dump.as_ref()?.groups.get("0").map(|g| g.ranks.len()))
        .max()
        .filter(|n| *n > 0);
    let printed = state.world.iter().max_by_key(|(n, _)| *n).cloned();
    let (world_size, from) = match (printed, dump_ranks) {
        (Some((n, at)), _) => (Some(n), Some(format!("printed at {at}"))),
        (None, Some(n)) => (
            u32::try_from(n).ok(),
            Some("a flight-recorder dump's group".to_owned()),
        ),
        // The highest rank seen is only a lower bound: the world size stays unknown.
        (None, None) => (None, None),
    };
    let with_log: Vec<u32> = state
        .ranks
        .iter()
        .filter(|(_, r)| r.has_log)
        .map(|(k, _)| *k)
        .collect();
    let with_dump: Vec<u32> = state
        .ranks
        .iter()
        .filter(|(_, r)| r.dump.is_some())
        .map(|(k, _)| *k)
        .collect();
    let all: Vec<u32> = world_size
        .filter(|n| *n <= 1_000_000)
        .map(|n| (0..n).collect())
        .unwrap_or_default();
    Coverage {
        world_size,
        world_size_from: from,
        without_log: if with_log.is_empty() {
            Vec::new()
        } else {
            all.iter().filter(|r| !with_log.contains(r)).copied().collect()
        },
        without_dump: if with_dump.is_empty() {
            Vec::new()
        } else {
            all.iter().filter(|r| !with_dump.contains(r)).copied().collect()
        },
        with_log,
        with_dump,
    }
}

/// An elected first fault with what would settle the rest.
struct Election {
    fault: FirstFault,
    missing: Vec<String>,
}

/// A candidate for the first fault.
struct Candidate<'a> {
    rank: Option<u32>,
    at: Option<i64>,
    own: Option<&'a OwnFault>,
    xid: Option<&'a XidReport>,
    launcher_root: bool,
}

fn elect(state: &State, clock: &Clock, collectives: &[GroupStall], xids: &[XidReport]) -> Option<Election> {
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for (rank, r) in &state.ranks {
        if let Some(own) = &r.own {
            candidates.push(Candidate {
                rank: Some(*rank),
                at: clock.at(&own.place),
                own: Some(own),
                xid: None,
                launcher_root: r.launcher_root,
            });
        }
    }
    for own in &state.unranked {
        candidates.push(Candidate {
            rank: None,
            at: clock.at(&own.place),
            own: Some(own),
            xid: None,
            launcher_root: false,
        });
    }
    for x in xids.iter().filter(|x| x.settled != XidOrigin::Application) {
        candidates.push(Candidate {
            rank: (x.ranks.len() == 1).then(|| x.ranks[0]),
            at: x.at_us,
            own: None,
            xid: Some(x),
            launcher_root: false,
        });
    }
    if candidates.is_empty() {
        return elect_without_faults(state, clock, collectives);
    }
    candidates.sort_by_key(|c| (c.at.is_none(), c.at, !c.launcher_root, c.xid.is_none(), c.rank));
    // A hardware or driver Xid on the host of a rank whose failure is a CUDA or NCCL error
    // explains that error, unless the error is known to come first.
    let winner_index = candidates
        .iter()
        .position(|c| {
            let Some(x) = c.xid else { return false };
            x.settled != XidOrigin::Ambiguous
                && candidates.iter().any(|o| {
                    o.own.is_some_and(|own| {
                        (own.class.starts_with("cuda.") || own.class.starts_with("nccl."))
                            && own.place.host == x.host
                            && match (o.at, c.at) {
                                (Some(fault), Some(xid)) => xid <= fault,
                                _ => true,
                            }
                    })
                })
        })
        .filter(|i| {
            candidates[..*i].iter().all(|o| {
                o.own
                    .is_some_and(|own| own.class.starts_with("cuda.") || own.class.starts_with("nccl."))
            })
        })
        .unwrap_or(0);
    let winner = &candidates[winner_index];
    let others: Vec<&Candidate<'_>> = candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != winner_index)
        .map(|(_, c)| c)
        .collect();
    let mut reasons = Vec::new();
    let mut missing = Vec::new();
    let untimed_rivals: Vec<String> = others.iter().filter(|o| o.at.is_none()).map(|o| who(o)).collect();
    let confidence = if others.is_empty() {
        reasons.push("the only failure of its own in the bundle; every other failure follows it".to_owned());
        if winner.rank.is_none() && winner.xid.is_none() {
            reasons.push("its file does not say which rank it is".to_owned());
            Confidence::Medium
        } else {
            Confidence::High
        }
    } else if winner.at.is_some() && untimed_rivals.is_empty() {
        reasons.push(format!(
            "the earliest of {} failures of their own: {}",
            others.len() + 1,
            others.iter().map(|o| who(o)).collect::<Vec<_>>().join(", ")
        ));
        Confidence::High
    } else if winner.at.is_some() {
        reasons.push(format!(
            "the earliest timed failure; {} have no time stamp",
            untimed_rivals.join(", ")
        ));
        missing.push(format!(
            "time stamps on the failure lines of {}",
            untimed_rivals.join(", ")
        ));
        Confidence::Medium
    } else if winner.launcher_root {
        reasons.push(
            "torchrun names it as the first observed failure; the failures carry no time stamps".to_owned(),
        );
        Confidence::Medium
    } else if winner_index != 0 {
        reasons.push(
            "a hardware Xid on the host of a rank that failed with a CUDA / NCCL error explains that error"
                .to_owned(),
        );
        Confidence::Medium
    } else {
        reasons.push(format!(
            "several ranks failed by themselves and none of the failures carries a time stamp: {}",
            candidates.iter().map(who).collect::<Vec<_>>().join(", ")
        ));
        missing.push("time stamps on every rank's failure lines (glog lines, logging with %(asctime)s), or torchrun's error files".to_owned());
        Confidence::Low
    };
    if winner_index != 0 && winner.xid.is_some() {
        reasons.push(format!(
            "{} happened on the same host; the Xid explains it",
            who(&candidates[0])
        ));
    }
    let fault = match (winner.own, winner.xid) {
        (_, Some(x)) => xid_fault(state, x, confidence, reasons),
        (Some(own), None) => own_fault(
            state,
            winner.rank,
            own,
            winner.at,
            confidence,
            reasons,
            collectives,
            xids,
        ),
        (None, None) => return None,
    };
    Some(Election { fault, missing })
}

fn who(c: &Candidate<'_>) -> String {
    match (c.rank, c.own, c.xid) {
        (_, _, Some(x)) => format!(
            "Xid {} on {}",
            x.code,
            x.host.as_deref().unwrap_or("an unnamed host")
        ),
        (Some(rank), Some(own), None) => format!("rank {rank} ({})", own.class),
        (None, Some(own), None) => format!("{} in {}", own.class, own.place.file),
        (_, None, None) => "an unknown failure".to_owned(),
    }
}

/// The collective the others waited in: a stalled one of the default group first.
fn waited_in(collectives: &[GroupStall]) -> Option<CollectiveRef> {
    collectives.iter().find_map(|g| g.stalled.clone())
}

#[allow(clippy::too_many_arguments)]
fn own_fault(
    state: &State,
    rank: Option<u32>,
    own: &OwnFault,
    at: Option<i64>,
    confidence: Confidence,
    reasons: Vec<String>,
    collectives: &[GroupStall],
    xids: &[XidReport],
) -> FirstFault {
    let r = rank.and_then(|k| state.ranks.get(&k));
    let host = r.and_then(|r| r.host.clone()).or_else(|| own.place.host.clone());
    let gpu = r.map(|r| r.gpu.clone()).filter(|g| !g.is_empty());
    let xid = rank.and_then(|k| xids.iter().find(|x| x.ranks.contains(&k)).cloned());
    let collective = waited_in(collectives);
    let title = own
        .finding
        .as_ref()
        .map_or_else(|| own.place.text.clone(), |f| f.title.to_string());
    let mut summary = match (rank, own.local_rank) {
        (Some(k), _) => format!("rank {k}"),
        (None, Some(local)) => format!("local rank {local} (global rank unknown, {})", own.place.file),
        (None, None) => format!("{} (rank unknown)", own.place.file),
    };
    if let Some(h) = &host {
        summary.push_str(&format!(" on {h}"));
    }
    if let Some(g) = &gpu {
        summary.push_str(&format!(" ({g})"));
    }
    summary.push_str(&format!(" failed first: {title}"));
    if let Some(c) = &collective {
        summary.push_str(&format!("; the other ranks waited in {c}"));
    }
    FirstFault {
        kind: FaultKind::RankFailure,
        summary,
        rank,
        host,
        local_rank: r.and_then(|r| r.local_rank).or(own.local_rank),
        gpu,
        collective,
        cause: own.finding.clone(),
        xid,
        at_us: at,
        confidence,
        reasons,
        evidence: own
            .evidence
            .iter()
            .map(|e| FileEvidence {
                file: e.file.clone(),
                lines: e.lines.iter().take(6).cloned().collect(),
            })
            .collect(),
    }
}

fn xid_fault(state: &State, x: &XidReport, confidence: Confidence, reasons: Vec<String>) -> FirstFault {
    let rank = (x.ranks.len() == 1).then(|| x.ranks[0]);
    let r = rank.and_then(|k| state.ranks.get(&k));
    let mut summary = format!(
        "Xid {} on {}",
        x.code,
        x.host.as_deref().unwrap_or("an unnamed host")
    );
    if let Some(g) = &x.gpu {
        summary.push_str(&format!(" ({g})"));
    }
    summary.push_str(&format!(": {}", x.meaning));
    FirstFault {
        kind: FaultKind::Xid,
        summary,
        rank,
        host: x.host.clone(),
        local_rank: r.and_then(|r| r.local_rank),
        gpu: x.gpu.clone(),
        collective: None,
        cause: None,
        xid: Some(x.clone()),
        at_us: x.at_us,
        confidence,
        reasons,
        evidence: vec![FileEvidence {
            file: x.file.clone(),
            lines: vec![EvidenceLine {
                line: x.line,
                text: x.text.clone(),
                rank,
                repeats: None,
            }],
        }],
    }
}

/// No rank failed by itself: a desync, a rank a barrier blamed, a rank that never entered the
/// collective the others waited in, or a rank that stayed silent while the others timed out.
fn elect_without_faults(state: &State, clock: &Clock, collectives: &[GroupStall]) -> Option<Election> {
    let stalled = waited_in(collectives);
    if let Some((group, desync)) = collectives.iter().find_map(|g| g.desync.first().map(|d| (g, d))) {
        let minority = desync
            .calls
            .last()
            .filter(|c| c.ranks.len() < desync.calls[0].ranks.len());
        let describe = |c: &DesyncCall| {
            format!(
                "ranks {:?} called {} with {} elements",
                c.ranks,
                c.call.op.as_deref().unwrap_or("a collective"),
                c.call.numel_in.map_or_else(|| "?".to_owned(), |n| n.to_string())
            )
        };
        let calls: Vec<String> = desync.calls.iter().map(describe).collect();
        let rank = minority.filter(|m| m.ranks.len() == 1).map(|m| m.ranks[0]);
        let summary = format!(
            "desync in process group {} at SeqNum {}: {}",
            group.pg,
            desync.seq,
            calls.join("; ")
        );
        let evidence = state
            .mismatches
            .iter()
            .take(2)
            .map(|m| FileEvidence {
                file: m.place.file.clone(),
                lines: vec![EvidenceLine {
                    line: m.place.line,
                    text: m.place.text.clone(),
                    rank: None,
                    repeats: None,
                }],
            })
            .collect();
        return Some(Election {
            fault: FirstFault {
                kind: FaultKind::Desync,
                summary,
                rank,
                host: rank.and_then(|k| state.ranks.get(&k)?.host.clone()),
                local_rank: rank.and_then(|k| state.ranks.get(&k)?.local_rank),
                gpu: None,
                collective: Some(CollectiveRef {
                    pg: group.pg.clone(),
                    seq: Some(desync.seq),
                    op: desync.calls[0].call.op.clone(),
                }),
                cause: None,
                xid: None,
                at_us: None,
                confidence: Confidence::High,
                reasons: vec!["the ranks called different collectives, or the same one with different sizes, at the same sequence number".to_owned()],
                evidence,
            },
            missing: vec!["the code path that makes one rank's tensor (or collective) differ: run with TORCH_DISTRIBUTED_DEBUG=DETAIL".to_owned()],
        });
    }
    let blamed: BTreeSet<u32> = state
        .ranks
        .values()
        .flat_map(|r| r.cascades.iter())
        .flat_map(|c| c.blamed.iter().copied())
        .collect();
    let entered_not: BTreeSet<u32> = collectives
        .iter()
        .flat_map(|g| g.never_entered.iter().copied())
        .collect();
    let mut also_missing = None;
    let (suspects, confidence, reason): (BTreeSet<u32>, Confidence, String) = if !blamed.is_empty() {
        (
            blamed.clone(),
            Confidence::High,
            "a monitored barrier names them as the ranks that did not arrive".to_owned(),
        )
    } else if !entered_not.is_empty() {
        (
            entered_not,
            Confidence::High,
            "their last enqueued collective is before the one the others waited in".to_owned(),
        )
    } else if let Some(lone) = lone_silent_rank(state) {
        also_missing = lone.missing;
        (BTreeSet::from([lone.rank]), lone.confidence, lone.reason)
    } else {
        return None;
    };
    let rank = suspects.iter().next().copied();
    let r = rank.and_then(|k| state.ranks.get(&k));
    let mut summary = format!(
        "rank{} {} never entered {}",
        if suspects.len() > 1 { "s" } else { "" },
        suspects.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        stalled.as_ref().map_or_else(
            || "the collective the others waited in".to_owned(),
            |c| c.to_string()
        )
    );
    if let Some(h) = r.and_then(|r| r.host.as_ref()) {
        summary.push_str(&format!(" (on {h})"));
    }
    summary.push_str(": it hung, was slow, or took another code path; its logs show no error of its own");
    let evidence: Vec<FileEvidence> = state
        .ranks
        .values()
        .flat_map(|r| r.cascades.iter())
        .filter(|c| !c.blamed.is_empty() || c.kind == CascadeKind::Timeout)
        .take(3)
        .map(|c| FileEvidence {
            file: c.place.file.clone(),
            lines: vec![EvidenceLine {
                line: c.place.line,
                text: c.place.text.clone(),
                rank: None,
                repeats: None,
            }],
        })
        .collect();
    let at = state
        .ranks
        .values()
        .flat_map(|r| r.cascades.iter())
        .filter_map(|c| clock.at(&c.place))
        .min();
    Some(Election {
        fault: FirstFault {
            kind: FaultKind::NeverEntered,
            summary,
            rank,
            host: r.and_then(|r| r.host.clone()),
            local_rank: r.and_then(|r| r.local_rank),
            gpu: r.map(|r| r.gpu.clone()).filter(|g| !g.is_empty()),
            collective: stalled,
            cause: None,
            xid: None,
            at_us: at,
            confidence,
            reasons: vec![reason],
            evidence,
        },
        missing: [format!(
            "what rank {} was doing: its Python stacks at the hang (py-spy dump --pid PID), or a flight-recorder dump (TORCH_FR_BUFFER_SIZE=2000, TORCH_FR_DUMP_ON_TIMEOUT=1)",
            rank.map_or_else(|| "?".to_owned(), |k| k.to_string())
        )]
        .into_iter()
        .chain(also_missing)
        .collect(),
    })
}

/// A straggler inferred from absence: the one rank whose log shows nothing while the others
/// waited.
struct LoneSilent {
    rank: u32,
    confidence: Confidence,
    reason: String,
    missing: Option<String>,
}

/// The straggler no line names: exactly one rank has a log with no failure and no cascade of
/// its own, while every other rank with a log waited (a timeout, a lost peer) and at least one
/// timed out. Inferred from absence, it is never high: medium when the job's world size is
/// known and every rank has a log (no rank without files can be the one instead), low when the
/// world size is unknown (a rank of a node whose files are not here may be), and no answer when
/// ranks of a known world have no log. High needs a line that names the rank: a monitored
/// barrier, or a sequence number it stopped before (the branches above).
fn lone_silent_rank(state: &State) -> Option<LoneSilent> {
    let with_log: BTreeMap<u32, &RankState> = state
        .ranks
        .iter()
        .filter(|(_, r)| r.has_log)
        .map(|(k, r)| (*k, r))
        .collect();
    let silent: Vec<u32> = with_log
        .iter()
        .filter(|(_, r)| r.own.is_none() && r.cascades.is_empty())
        .map(|(k, _)| *k)
        .collect();
    let timed_out = with_log
        .values()
        .filter(|r| r.cascades.iter().any(|c| c.kind == CascadeKind::Timeout))
        .count();
    let [rank] = silent.as_slice() else {
        return None;
    };
    let others_waited = with_log.iter().all(|(k, r)| k == rank || !r.cascades.is_empty());
    if timed_out == 0 || !others_waited {
        return None;
    }
    let reason = format!(
        "its log shows no failure and no timeout while the {} other ranks waited ({timed_out} timed out): it was most likely not in the collective (hung or slow before it); no line names it",
        with_log.len() - 1
    );
    match state.known_world_size() {
        Some(world) if (0..world).all(|k| with_log.contains_key(&k)) => Some(LoneSilent {
            rank: *rank,
            confidence: Confidence::Medium,
            reason: format!("{reason}; every one of the job's {world} ranks has a log"),
            missing: None,
        }),
        Some(_) => None,
        None => Some(LoneSilent {
            rank: *rank,
            confidence: Confidence::Low,
            reason: format!("{reason}; the job's world size is not known, so a rank with no file here may have stayed out instead"),
            missing: Some("the job's world size (WORLD_SIZE printed, gloo's connected peers, NCCL's nranks, a flight-recorder dump), and the logs of every node".to_owned()),
        }),
    }
}

/// The ranks the first fault is about: its rank, or in a desync every rank that called something
/// other than the majority (all of them when there is no majority).
fn root_ranks(fault: Option<&FirstFault>, collectives: &[GroupStall]) -> BTreeSet<u32> {
    let mut out: BTreeSet<u32> = fault.and_then(|f| f.rank).into_iter().collect();
    if fault.is_some_and(|f| f.kind == FaultKind::Desync)
        && let Some(desync) = collectives.iter().find_map(|g| g.desync.first())
    {
        let majority = desync.calls.len() > 1 && desync.calls[0].ranks.len() > desync.calls[1].ranks.len();
        out.extend(
            desync
                .calls
                .iter()
                .skip(usize::from(majority))
                .flat_map(|c| c.ranks.iter().copied()),
        );
    }
    out
}

/// Ranks that only followed the first fault, folded by what they show.
fn fold_cascades(state: &State, roots: &BTreeSet<u32>) -> Vec<Cascade> {
    let mut groups: BTreeMap<(CascadeKind, Option<CollectiveRef>), Vec<u32>> = BTreeMap::new();
    for (rank, r) in &state.ranks {
        if roots.contains(rank) || r.own.is_some() {
            continue;
        }
        let Some(first) = r.cascades.iter().min_by_key(|c| c.kind) else {
            continue;
        };
        let collective = first.collective.clone().filter(|c| c.seq.is_some());
        groups.entry((first.kind, collective)).or_default().push(*rank);
    }
    let mut out: Vec<Cascade> = groups
        .into_iter()
        .map(|((kind, collective), ranks)| {
            let on = collective
                .as_ref()
                .map(|c| format!(" on {c}"))
                .unwrap_or_default();
            Cascade {
                summary: format!(
                    "{} rank{}: {}{on}, cascade",
                    ranks.len(),
                    if ranks.len() == 1 { "" } else { "s" },
                    kind.label()
                ),
                what: kind.label().to_owned(),
                ranks,
                collective,
            }
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.ranks.len()));
    out
}

/// What would settle what the bundle cannot.
fn missing(state: &State, coverage: &Coverage, fault: Option<&FirstFault>) -> Vec<String> {
    let mut out = Vec::new();
    if !coverage.without_log.is_empty() {
        out.push(format!("the logs of ranks {}", ranges(&coverage.without_log)));
    }
    if !coverage.without_dump.is_empty() {
        out.push(format!(
            "flight-recorder dumps of ranks {}",
            ranges(&coverage.without_dump)
        ));
    }
    match fault {
        None => out.push(
            "which rank failed first: no file shows a failure of a rank's own, only ranks that waited or were stopped (the failing rank's output may be missing, cut, or it hung or was killed without a word); the logs of every rank from the start, torchrun's error files, dmesg of every host".to_owned(),
        ),
        Some(f) if f.kind == FaultKind::RankFailure && f.rank.is_none() => out.push(format!(
            "the global rank of {}: a `[rankN]:` prefix in its output, or torchrun's failure summary (Root Cause, rank : N)",
            f.local_rank.map_or_else(|| "the failing process".to_owned(), |l| format!("local rank {l}"))
        )),
        Some(f) if f.kind == FaultKind::RankFailure && f.xid.is_none() => {
            let cuda = f.cause.as_ref().is_some_and(|c| c.class.starts_with("cuda.") || c.class.starts_with("nccl."));
            let has_kernel = state.files.iter().any(|file| file.kind == crate::model::FileKind::KernelLog);
            if cuda && !has_kernel {
                out.push(format!(
                    "`dmesg -T` of {}, to rule out an Xid behind the CUDA error",
                    f.host.as_deref().unwrap_or("the failing rank's host")
                ));
            }
        }
        _ => {}
    }
    out
}

/// `0-3, 7, 9-10`.
fn ranges(ranks: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end + 1 {
            i += 1;
            end = ranks[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

fn timeline(state: &State, clock: &Clock, root: Option<u32>, xids: &[XidReport]) -> Vec<TimelineEvent> {
    let mut out = Vec::new();
    let event = |rank: Option<u32>, place: &Place, kind: TimelineKind, cascade: bool| TimelineEvent {
        at_us: clock.at(place),
        stamp: place.when.as_ref().map(|w| w.text.clone()),
        rank,
        host: place.host.clone(),
        file: place.file.clone(),
        line: place.line,
        kind,
        text: place.text.clone(),
        cascade,
    };
    for (rank, r) in &state.ranks {
        if let Some(own) = &r.own {
            out.push(event(
                Some(*rank),
                &own.place,
                TimelineKind::Fault {
                    class: own.class.clone(),
                },
                root.is_some_and(|k| k != *rank),
            ));
        }
        for c in r.cascades.iter().take(3) {
            out.push(event(Some(*rank), &c.place, cascade_kind(c), true));
        }
        if let Some(exit) = &r.exit {
            out.push(event(
                Some(*rank),
                &exit.place,
                TimelineKind::Exit {
                    code: exit.code,
                    signal: exit.signal.clone(),
                },
                root.is_some_and(|k| k != *rank),
            ));
        }
    }
    for own in &state.unranked {
        out.push(event(
            None,
            &own.place,
            TimelineKind::Fault {
                class: own.class.clone(),
            },
            false,
        ));
    }
    for x in xids {
        out.push(TimelineEvent {
            at_us: x.at_us,
            stamp: None,
            rank: (x.ranks.len() == 1).then(|| x.ranks[0]),
            host: x.host.clone(),
            file: x.file.clone(),
            line: x.line,
            kind: TimelineKind::Xid { code: x.code },
            text: x.text.clone(),
            cascade: false,
        });
    }
    for h in &state.health {
        out.push(event(
            None,
            &h.place,
            TimelineKind::HealthCheck {
                test: h.failure.test.clone(),
            },
            false,
        ));
    }
    out.sort_by_key(|e| (e.at_us.is_none(), e.at_us, e.rank, e.file.clone(), e.line));
    out.truncate(MAX_TIMELINE);
    out
}

fn cascade_kind(c: &CascadeEvent) -> TimelineKind {
    match c.kind {
        CascadeKind::Timeout => TimelineKind::CollectiveTimeout {
            collective: c.collective.clone(),
        },
        CascadeKind::PeerLost | CascadeKind::Mismatch => TimelineKind::PeerLost {
            blamed_rank: c.blamed.first().copied(),
        },
        CascadeKind::Terminated => TimelineKind::Exit {
            code: None,
            signal: Some("SIGTERM".to_owned()),
        },
    }
}

fn rank_reports(state: &State, clock: &Clock) -> Vec<RankReport> {
    let mut out: Vec<RankReport> = state
        .ranks
        .iter()
        .map(|(rank, r)| report(*rank, r, clock))
        .collect();
    let known: BTreeSet<u32> = state.ranks.keys().copied().collect();
    let world = coverage(state).world_size.unwrap_or(0).min(1_000_000);
    for rank in (0..world).filter(|k| !known.contains(k)) {
        out.push(RankReport {
            rank,
            host: None,
            local_rank: None,
            gpu: None,
            files: Vec::new(),
            outcome: RankOutcome::NoLog,
            root: None,
            first_failure: None,
        });
    }
    out.sort_by_key(|r| r.rank);
    out
}

fn report(rank: u32, r: &RankState, clock: &Clock) -> RankReport {
    let outcome = if r.own.is_some() {
        RankOutcome::Fault
    } else if !r.cascades.is_empty() {
        RankOutcome::Cascade
    } else if r.has_log || r.dump.is_some() || !r.files.is_empty() {
        RankOutcome::NoFailure
    } else {
        RankOutcome::NoLog
    };
    let first_failure = r
        .own
        .as_ref()
        .map(|o| {
            (
                &o.place,
                TimelineKind::Fault {
                    class: o.class.clone(),
                },
            )
        })
        .or_else(|| r.cascades.first().map(|c| (&c.place, cascade_kind(c))))
        .map(|(place, kind)| TimelineEvent {
            at_us: clock.at(place),
            stamp: place.when.as_ref().map(|w| w.text.clone()),
            rank: Some(rank),
            host: place.host.clone(),
            file: place.file.clone(),
            line: place.line,
            kind,
            text: place.text.clone(),
            cascade: r.own.is_none(),
        });
    RankReport {
        rank,
        host: r.host.clone(),
        local_rank: r.local_rank,
        gpu: (!r.gpu.is_empty()).then(|| r.gpu.clone()),
        files: r.files.iter().cloned().collect(),
        outcome,
        root: r.own.as_ref().and_then(|o| o.finding.clone()),
        first_failure,
    }
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn rank_lists_read_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(ranges(&[]), "");
    }
}
