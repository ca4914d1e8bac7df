//! What the bundle keeps of each file as it is read: per-rank summaries (host, GPU, the rank's
//! own first fault, the cascade events, the collective state per process group), the Xids, the
//! GPU maps, the world size. Bounded by the number of ranks, never by the size of a log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::detect::{Detected, Slot, dump_rank_from_name, host_from_name, rank_from_name, torchrun_slot};
use super::own::{OwnFault, combine};
use super::scan::{LineFact, LogFacts};
use super::signals::Signal;
use super::sources::{self, Dump, HealthFailure};
use super::stamp::Wall;
use super::xid::XidCatalog;
use crate::diagnose::{Analysis, analyze_bytes};
use crate::model::{
    BundleFile, CollectiveCall, CollectiveRef, EventKind, EvidenceLine, FileKind, Finding, GpuRef, Role,
    Warning, clip_text,
};
use crate::rules::RuleSet;

/// The process group of a collective whose line names none and whose group no other line settles.
pub const UNKNOWN_PG: &str = "unknown";

/// Cascade events kept per rank.
const MAX_CASCADE_EVENTS: usize = 8;

/// The first key given to a torchrun worker folder whose global rank is not known yet (no job has
/// this many ranks: [`State::resolve_slots`] replaces every such key before the election).
const PROVISIONAL: u32 = 1 << 31;

/// Signals a process dies of by itself (a crash, the kernel's OOM killer), not the launcher's stop.
/// Not SIGABRT: gloo and NCCL abort the ranks left waiting (a size check, the watchdog), so an
/// abort is as often a cascade as a failure of the rank's own.
const FATAL_SIGNALS: &[&str] = &["SIGKILL", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"];

/// A time as read, before the bundle's year and clock offsets are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    /// The time.
    pub wall: Wall,
    /// As printed.
    pub text: String,
}

/// A line of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub file: String,
    /// The line (0 for a file without lines).
    pub line: u64,
    /// Its text.
    pub text: String,
    /// Its time.
    pub when: Option<When>,
    /// Host, when the line or its file says.
    pub host: Option<String>,
}

/// What a cascade event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CascadeKind {
    /// A collective timed out.
    Timeout,
    /// A peer went away.
    PeerLost,
    /// Ranks called different collectives.
    Mismatch,
    /// The launcher terminated it.
    Terminated,
}

impl CascadeKind {
    /// How a cascade of this kind is named.
    pub fn label(self) -> &'static str {
        match self {
            Self::Timeout => "collective timeout",
            Self::PeerLost => "peer lost",
            Self::Mismatch => "collective mismatch",
            Self::Terminated => "terminated by the launcher",
        }
    }
}

/// A rank's failure that follows another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CascadeEvent {
    /// What.
    pub kind: CascadeKind,
    /// The collective, when the line names it.
    pub collective: Option<CollectiveRef>,
    /// Ranks it blames (a monitored barrier).
    pub blamed: Vec<u32>,
    /// Where.
    pub place: Place,
}

/// A rank's collective state in one process group, from its log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogGroup {
    /// The lowest sequence number it timed out in.
    pub timed_out: Option<u64>,
    /// Last enqueued.
    pub enqueued: Option<u64>,
    /// Last completed.
    pub completed: Option<u64>,
    /// Calls by sequence number (from timeouts).
    pub calls: BTreeMap<u64, CollectiveCall>,
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// Exit code.
    pub code: Option<i32>,
    /// Signal.
    pub signal: Option<String>,
    /// Where it was reported.
    pub place: Place,
}

/// Everything known of one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankState {
    /// Host.
    pub host: Option<String>,
    /// Local rank.
    pub local_rank: Option<u32>,
    /// GPU.
    pub gpu: GpuRef,
    /// Files that speak for it.
    pub files: BTreeSet<String>,
    /// Whether a log speaks for it.
    pub has_log: bool,
    /// Its first own failure.
    pub own: Option<OwnFault>,
    /// Its cascade events, first ones.
    pub cascades: Vec<CascadeEvent>,
    /// How it ended.
    pub exit: Option<Exit>,
    /// Collective state per process group, from logs.
    pub groups: BTreeMap<String, LogGroup>,
    /// Its flight-recorder dump.
    pub dump: Option<Dump>,
    /// Whether the launcher named it as the first observed failure.
    pub launcher_root: bool,
}

impl RankState {
    /// Adds what another key learned of the same rank (a torchrun worker folder's files).
    fn absorb(&mut self, other: RankState) {
        if self.host.is_none() {
            self.host = other.host;
        }
        self.local_rank = self.local_rank.or(other.local_rank);
        self.gpu.merge(&other.gpu);
        self.files.extend(other.files);
        self.has_log |= other.has_log;
        if let Some(own) = other.own {
            combine(&mut self.own, own);
        }
        for c in other.cascades {
            push_cascade(self, c);
        }
        if self.exit.is_none() {
            self.exit = other.exit;
        }
        for (pg, group) in other.groups {
            let mine = self.groups.entry(pg).or_default();
            mine.timed_out = match (mine.timed_out, group.timed_out) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            mine.enqueued = mine.enqueued.max(group.enqueued);
            mine.completed = mine.completed.max(group.completed);
            for (seq, call) in group.calls {
                mine.calls.entry(seq).or_insert(call);
            }
        }
        if self.dump.is_none() {
            self.dump = other.dump;
        }
        self.launcher_root |= other.launcher_root;
    }
}

/// A row of torchrun's failure summary: which worker of which host had which global rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// The worker folder of its error file, when the row names one.
    pub slot: Option<Slot>,
    /// Host.
    pub host: Option<String>,
    /// Local rank.
    pub local_rank: Option<u32>,
    /// Global rank.
    pub global_rank: Option<u32>,
}

/// An Xid as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidSeen {
    /// Code.
    pub code: u32,
    /// Bus id.
    pub bus_id: Option<String>,
    /// Where.
    pub place: Place,
}

/// A DCGM failure as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSeen {
    /// The failure.
    pub failure: HealthFailure,
    /// Where (host from the file's name).
    pub place: Place,
}

/// Ranks two collectives disagree on, as a log said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MismatchSeen {
    /// The process group, when the line names it.
    pub pg: Option<String>,
    /// Each rank's call.
    pub calls: Vec<(u32, Option<u64>, CollectiveCall)>,
    /// Where.
    pub place: Place,
}

/// The bundle's state while files are read.
pub struct State {
    /// The Xid catalog.
    pub catalog: XidCatalog,
    /// The files read.
    pub files: Vec<BundleFile>,
    /// Per rank.
    pub ranks: BTreeMap<u32, RankState>,
    /// Own failures of files whose rank is not known.
    pub unranked: Vec<OwnFault>,
    /// Xids.
    pub xids: Vec<XidSeen>,
    /// DCGM failures.
    pub health: Vec<HealthSeen>,
    /// GPUs per host (nvidia-smi, the kernel's bus id ↔ UUID lines).
    pub gpus: Vec<(Option<String>, GpuRef)>,
    /// World sizes printed, with where.
    pub world: Vec<(u32, String)>,
    /// Collective mismatches printed.
    pub mismatches: Vec<MismatchSeen>,
    /// The first full year a stamp showed.
    pub year: Option<i32>,
    /// Provisional keys of torchrun worker folders (`attempt_N/<local_rank>/`) read so far.
    pub slots: BTreeMap<Slot, u32>,
    /// Global ranks the folders' own content gave (a `[rankN]:` prefix).
    pub slot_ranks: BTreeMap<Slot, u32>,
    /// torchrun's summary rows.
    pub summary_rows: Vec<SummaryRow>,
    /// Workers an agent saw exit, by local rank (`failed (exitcode: -9) local_rank: 3`), whose
    /// global rank the line does not say.
    pub agent_exits: Vec<(u32, Exit)>,
    /// Problems with the bundle.
    pub warnings: Vec<Warning>,
}

static JOURNAL_HOST: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(
        r"^(?:[A-Z][a-z]{2} +\d{1,2} [\d:.]+|\d{4}-\d{2}-\d{2}T[\d:.,+-]+Z?) (?P<host>[\w.-]+) kernel: ",
    )
    .expect("the journal pattern compiles")
});

/// The exceptions a launcher raises about its children, not a failure of a rank's own.
const LAUNCHER_EXCEPTIONS: &[&str] = &[
    "ChildFailedError",
    "SignalException",
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousTimeoutError",
    "RendezvousStateError",
    "RendezvousGracefulExitError",
    "RendezvousError",
];

impl State {
    /// An empty state.
    pub fn new(catalog: XidCatalog) -> Self {
        Self {
            catalog,
            files: Vec::new(),
            ranks: BTreeMap::new(),
            unranked: Vec::new(),
            xids: Vec::new(),
            health: Vec::new(),
            gpus: Vec::new(),
            world: Vec::new(),
            mismatches: Vec::new(),
            year: None,
            slots: BTreeMap::new(),
            slot_ranks: BTreeMap::new(),
            summary_rows: Vec::new(),
            agent_exits: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Records a problem with the bundle.
    pub fn warn(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    fn rank(&mut self, rank: u32) -> &mut RankState {
        self.ranks.entry(rank).or_default()
    }

    /// The key a torchrun worker folder's facts are kept under until its global rank is known.
    fn slot_key(&mut self, slot: Slot) -> u32 {
        let next = PROVISIONAL + self.slots.len() as u32;
        let key = *self.slots.entry(slot.clone()).or_insert(next);
        self.rank(key).local_rank = Some(slot.local_rank);
        key
    }

    /// The rank a file speaks for: its name's global rank, else its torchrun worker folder's
    /// provisional key.
    fn rank_of_name(&mut self, name: &str) -> Option<u32> {
        rank_from_name(name).or_else(|| torchrun_slot(name).map(|slot| self.slot_key(slot)))
    }

    /// Gives each torchrun worker folder its global rank, from its files' `[rankN]:` prefixes or
    /// from torchrun's summary (a row whose error file lies in the folder, or the row of the same
    /// host and local rank, the host named by the summary or by the folder's own lines). A folder's local rank is never taken for its global rank: on a
    /// multi-node job they differ. A folder left without one keeps its failure as a failure of an
    /// unknown rank, and says so.
    pub fn resolve_slots(&mut self) {
        let mut resolved = self.slot_ranks.clone();
        let mut agent_host: BTreeMap<String, String> = BTreeMap::new();
        let mut host_local: BTreeMap<(String, u32), u32> = BTreeMap::new();
        for row in &self.summary_rows {
            if let (Some(slot), Some(global)) = (&row.slot, row.global_rank) {
                resolved.entry(slot.clone()).or_insert(global);
            }
            if let (Some(slot), Some(host)) = (&row.slot, &row.host) {
                agent_host
                    .entry(slot.agent.clone())
                    .or_insert_with(|| host.clone());
            }
            if let (Some(host), Some(local), Some(global)) = (&row.host, row.local_rank, row.global_rank) {
                host_local.entry((host.clone(), local)).or_insert(global);
            }
        }
        // An agent that ran as many workers as the job has ranks ran the whole job on one node,
        // where torchrun gives each worker its local rank as its global rank.
        if let Some(world) = self.known_world_size() {
            let mut per_agent: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
            for slot in self.slots.keys() {
                per_agent.entry(&slot.agent).or_default().insert(slot.local_rank);
            }
            for (agent, locals) in per_agent {
                let whole_job = locals.len() == world as usize && locals.iter().copied().eq(0..world);
                let agrees = resolved
                    .iter()
                    .all(|(slot, global)| slot.agent != agent || slot.local_rank == *global);
                if whole_job && agrees {
                    for local in locals {
                        let slot = Slot {
                            agent: agent.to_owned(),
                            local_rank: local,
                        };
                        resolved.entry(slot).or_insert(local);
                    }
                }
            }
        }
        self.follow_agent_layouts(&mut resolved);
        let mut keys: BTreeMap<u32, Option<u32>> = BTreeMap::new();
        for (slot, key) in std::mem::take(&mut self.slots) {
            let Some(mut state) = self.ranks.remove(&key) else {
                continue;
            };
            // The folder's host: its agent's (from a summary row naming a file in it), else the
            // one its own lines print (NCCL's `host:pid:tid [dev]` prefix).
            let host = agent_host.get(&slot.agent).or(state.host.as_ref()).cloned();
            let global = resolved.get(&slot).copied().or_else(|| {
                host.as_ref()
                    .and_then(|h| host_local.get(&(h.clone(), slot.local_rank)).copied())
            });
            if state.host.is_none() {
                state.host = host;
            }
            keys.insert(key, global);
            match global {
                Some(global) => {
                    if let Some(own) = &mut state.own {
                        for e in own.lines_mut() {
                            if e.rank == Some(key) {
                                e.rank = Some(global);
                            }
                        }
                    }
                    self.rank(global).absorb(state);
                }
                None => {
                    self.warnings.push(Warning::new(
                        "global_rank_unknown",
                        format!(
                            "torchrun's worker folder {} (local rank {}): no file says its global rank (a `[rankN]:` prefix, torchrun's failure summary); its failure is kept as one of an unknown rank",
                            slot.agent, slot.local_rank
                        ),
                        None,
                    ));
                    if let Some(mut own) = state.own {
                        for e in own.lines_mut() {
                            e.rank = None;
                        }
                        own.place.host = own.place.host.or(state.host);
                        self.unranked.push(own);
                    }
                }
            }
        }
        for file in &mut self.files {
            let ranks: BTreeSet<u32> = file
                .ranks
                .iter()
                .filter_map(|r| {
                    if *r < PROVISIONAL {
                        Some(*r)
                    } else {
                        keys.get(r).copied().flatten()
                    }
                })
                .collect();
            file.ranks = ranks.into_iter().collect();
        }
    }

    /// The global ranks of an agent's other worker folders, from those already known: torchrun
    /// gives the workers of one agent consecutive global ranks, its base rank plus the local rank
    /// (`SimpleElasticAgent._assign_worker_ranks`: `group_rank * nproc_per_node + local_rank` on
    /// a homogeneous job, the local world sizes of the agents before it summed otherwise; read in
    /// the sources of torch 2.4.1, 2.9.1 and 2.15.0, where every worker gets `base_global_rank +
    /// local_rank`). An
    /// agent whose known folders all give the same base gives it to its other folders; one whose
    /// folders disagree, or whose base would give a folder a rank another folder has, gives none.
    fn follow_agent_layouts(&self, resolved: &mut BTreeMap<Slot, u32>) {
        let mut bases: BTreeMap<&str, BTreeSet<Option<u32>>> = BTreeMap::new();
        for (slot, global) in resolved.iter() {
            bases
                .entry(slot.agent.as_str())
                .or_default()
                .insert(global.checked_sub(slot.local_rank));
        }
        let taken: BTreeSet<u32> = resolved.values().copied().collect();
        let mut derived: BTreeMap<Slot, u32> = BTreeMap::new();
        for (agent, bases) in &bases {
            let mut only = bases.iter().copied();
            let (Some(Some(base)), None) = (only.next(), only.next()) else {
                continue;
            };
            let unknown: Vec<&Slot> = self
                .slots
                .keys()
                .filter(|s| s.agent == *agent && !resolved.contains_key(*s))
                .collect();
            let ranks: Option<Vec<(Slot, u32)>> = unknown
                .into_iter()
                .map(|s| base.checked_add(s.local_rank).map(|g| (s.clone(), g)))
                .collect();
            let Some(ranks) = ranks else { continue };
            if ranks.iter().all(|(_, g)| !taken.contains(g)) {
                derived.extend(ranks);
            }
        }
        let mut seen = BTreeSet::new();
        if derived.values().all(|g| seen.insert(*g)) {
            resolved.extend(derived);
        }
    }

    /// A rank's collective in an unknown group that a line naming its group shows at the same
    /// sequence number (read before that line) moves to that group.
    pub fn settle_unknown_groups(&mut self) {
        for state in self.ranks.values_mut() {
            let Some(unknown) = state.groups.get(UNKNOWN_PG) else {
                continue;
            };
            let seqs: BTreeSet<u64> = unknown
                .timed_out
                .into_iter()
                .chain(unknown.calls.keys().copied())
                .collect();
            let named: Vec<String> = state
                .groups
                .iter()
                .filter(|(pg, g)| {
                    pg.as_str() != UNKNOWN_PG
                        && g.timed_out
                            .into_iter()
                            .chain(g.calls.keys().copied())
                            .any(|s| seqs.contains(&s))
                })
                .map(|(pg, _)| pg.clone())
                .collect();
            let [pg] = named.as_slice() else { continue };
            let Some(unknown) = state.groups.remove(UNKNOWN_PG) else {
                continue;
            };
            let group = state.groups.entry(pg.clone()).or_default();
            group.timed_out = match (group.timed_out, unknown.timed_out) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            group.enqueued = group.enqueued.max(unknown.enqueued);
            group.completed = group.completed.max(unknown.completed);
            for (seq, call) in unknown.calls {
                group.calls.entry(seq).or_insert(call);
            }
            for c in &mut state.cascades {
                if let Some(k) = c.collective.as_mut().filter(|k| k.pg == UNKNOWN_PG) {
                    k.pg.clone_from(pg);
                }
            }
        }
    }

    /// The job's world size, when a file says it (a printed world size, a dump's default group).
    pub fn known_world_size(&self) -> Option<u32> {
        let printed = self.world.iter().map(|(n, _)| *n).max();
        let dumped = self
            .ranks
            .values()
            .filter_map(|r| r.dump.as_ref()?.groups.get("0").map(|g| g.ranks.len()))
            .max()
            .filter(|n| *n > 0)
            .and_then(|n| u32::try_from(n).ok());
        printed.or(dumped)
    }

    /// A rank killed by a signal of its own (a crash, the OOM killer), with no failure and no
    /// cascade in its output, failed by itself: the signal is its failure.
    pub fn promote_fatal_exits(&mut self) {
        self.place_agent_exits();
        for (rank, state) in &mut self.ranks {
            let Some(exit) = &state.exit else { continue };
            let Some(signal) = exit.signal.as_deref().filter(|s| FATAL_SIGNALS.contains(s)) else {
                continue;
            };
            if state.own.is_some() || !state.cascades.is_empty() {
                continue;
            }
            let line = EvidenceLine {
                line: exit.place.line,
                text: exit.place.text.clone(),
                rank: Some(*rank),
                repeats: None,
            };
            state.own = Some(OwnFault::new(
                signal.to_owned(),
                exit.place.clone(),
                None,
                vec![line],
            ));
        }
    }

    /// An agent's exit line names a local rank only: it is the exit of the one rank known with that
    /// local rank on the agent's host; with none known, a worker killed by a fatal signal is a
    /// failure of a rank whose global rank is unknown (kept with its local rank); with several,
    /// nothing is guessed.
    fn place_agent_exits(&mut self) {
        for (local, exit) in std::mem::take(&mut self.agent_exits) {
            let host = exit.place.host.clone();
            let same: Vec<u32> = self
                .ranks
                .iter()
                .filter(|(_, r)| {
                    r.local_rank == Some(local) && (host.is_none() || r.host.is_none() || r.host == host)
                })
                .map(|(k, _)| *k)
                .collect();
            match same.as_slice() {
                [rank] => {
                    self.rank(*rank).exit.get_or_insert(exit);
                }
                [] => {
                    let Some(signal) = exit.signal.as_deref().filter(|s| FATAL_SIGNALS.contains(s)) else {
                        continue;
                    };
                    let line = EvidenceLine {
                        line: exit.place.line,
                        text: exit.place.text.clone(),
                        rank: None,
                        repeats: None,
                    };
                    self.unranked.push(OwnFault {
                        local_rank: Some(local),
                        ..OwnFault::new(signal.to_owned(), exit.place, None, vec![line])
                    });
                }
                _ => {}
            }
        }
    }

    fn see_year(&mut self, year: Option<i32>) {
        if self.year.is_none() {
            self.year = year;
        }
    }

    /// A file that was not read.
    pub fn skipped(&mut self, name: &str, kind: FileKind, bytes: u64, why: String) {
        self.files.push(BundleFile {
            name: name.to_owned(),
            kind,
            bytes,
            lines: 0,
            ranks: Vec::new(),
            host: None,
            diagnosis: None,
            warnings: vec![Warning::new("not_read", why, None)],
        });
    }

    /// A dump, an error file, an nvidia-smi report or a DCGM report.
    pub fn structured(&mut self, rules: &RuleSet, name: &str, kind: FileKind, bytes: &[u8]) {
        let mut file = BundleFile {
            name: name.to_owned(),
            kind,
            bytes: bytes.len() as u64,
            lines: memchr::memchr_iter(b'\n', bytes).count() as u64,
            ranks: Vec::new(),
            host: None,
            diagnosis: None,
            warnings: Vec::new(),
        };
        match kind {
            FileKind::FlightRecorder => match sources::read_dump(bytes) {
                Ok(dump) => self.dump(name, dump, &mut file),
                Err(e) => file.warnings.push(Warning::new("dump_unreadable", e, None)),
            },
            FileKind::ErrorFile => match sources::read_error_file(bytes) {
                Ok(error) => {
                    let rank = self.rank_of_name(name);
                    self.error_file(rules, name, rank, error, &mut file);
                }
                Err(e) => file.warnings.push(Warning::new("error_file_unreadable", e, None)),
            },
            FileKind::NvidiaSmi => {
                let host = host_from_name(name);
                let text = String::from_utf8_lossy(bytes);
                for gpu in sources::read_nvidia_smi(&text) {
                    self.gpus.push((host.clone(), gpu));
                }
                file.host = host;
            }
            FileKind::DcgmDiag => match sources::read_dcgm(bytes) {
                Ok(failures) => {
                    let host = host_from_name(name);
                    for failure in failures {
                        let place = Place {
                            file: name.to_owned(),
                            line: 0,
                            text: clip_text(&format!("DCGM {} failed: {}", failure.test, failure.message)),
                            when: None,
                            host: host.clone(),
                        };
                        self.health.push(HealthSeen { failure, place });
                    }
                    file.host = host;
                }
                Err(e) => file.warnings.push(Warning::new("dcgm_unreadable", e, None)),
            },
            _ => {}
        }
        self.files.push(file);
    }

    /// A flight-recorder pickle, decoded.
    pub fn decoded_dump(&mut self, name: &str, bytes: u64, dump: Dump) {
        let mut file = BundleFile {
            name: name.to_owned(),
            kind: FileKind::FlightRecorder,
            bytes,
            lines: 0,
            ranks: Vec::new(),
            host: None,
            diagnosis: None,
            warnings: Vec::new(),
        };
        self.dump(name, dump, &mut file);
        self.files.push(file);
    }

    /// A dump, given to the rank its name ends with.
    fn dump(&mut self, name: &str, dump: Dump, file: &mut BundleFile) {
        match dump_rank_from_name(name) {
            Some(rank) => {
                file.ranks.push(rank);
                let state = self.rank(rank);
                state.files.insert(name.to_owned());
                state.dump = Some(dump);
            }
            None => file.warnings.push(Warning::new(
                "dump_rank_unknown",
                "a flight-recorder dump holds no rank; keep the name PyTorch gave it (its prefix and the rank, `nccl_trace_rank_3`) so its rank can be read",
                None,
            )),
        }
    }

    fn error_file(
        &mut self,
        rules: &RuleSet,
        name: &str,
        rank: Option<u32>,
        error: sources::ErrorFile,
        file: &mut BundleFile,
    ) {
        let text = error.traceback.clone().unwrap_or_else(|| error.message.clone());
        let analysis = analyze_bytes(rules, text.as_bytes());
        let when = error.timestamp.and_then(Wall::from_unix).map(|wall| When {
            wall,
            text: error.timestamp.map(|t| t.to_string()).unwrap_or_default(),
        });
        self.see_year(when.as_ref().and_then(|w| w.wall.year));
        let place = Place {
            file: name.to_owned(),
            line: 0,
            text: clip_text(&error.message),
            when,
            host: None,
        };
        let cascade = cascade_of_text(&error.message, place.clone());
        let own = if cascade.is_some() {
            None
        } else {
            // The finding's evidence lines number the recorded traceback's lines, not the file's.
            let traceback = Place {
                file: format!("{name} (py_callstack)"),
                ..place.clone()
            };
            own_fault_of(rules, &analysis, rank, traceback).or_else(|| {
                let class = error.message.split(':').next().unwrap_or("").trim();
                let class = class.rsplit('.').next().unwrap_or(class);
                (!class.is_empty() && !LAUNCHER_EXCEPTIONS.contains(&class)).then(|| {
                    let line = EvidenceLine {
                        line: 0,
                        text: place.text.clone(),
                        rank,
                        repeats: None,
                    };
                    OwnFault::new(class.to_owned(), place.clone(), None, vec![line])
                })
            })
        };
        file.diagnosis = Some(analysis.diagnosis);
        let Some(rank) = rank else {
            file.warnings.push(Warning::new(
                "error_file_rank_unknown",
                "an error file holds no rank; keep torchrun's `attempt_N/<local_rank>/error.json` path",
                None,
            ));
            self.unranked.extend(own);
            return;
        };
        file.ranks.push(rank);
        let state = self.rank(rank);
        state.files.insert(name.to_owned());
        if let Some(own) = own {
            combine(&mut state.own, own);
        }
        if let Some(c) = cascade
            && state.cascades.len() < MAX_CASCADE_EVENTS
        {
            state.cascades.push(c);
        }
    }

    /// A kernel log: Xids, and the bus ids and UUIDs the driver printed.
    pub fn kernel_log(&mut self, name: &str, facts: LogFacts) {
        self.see_year(facts.year);
        let file_host = host_from_name(name);
        let mut hosts = BTreeSet::new();
        for fact in &facts.facts {
            let host = JOURNAL_HOST
                .captures(&fact.text)
                .map(|c| c["host"].to_owned())
                .or_else(|| file_host.clone());
            hosts.extend(host.clone());
            for signal in &fact.signals {
                match signal {
                    Signal::Xid { code, bus_id } => self.xids.push(XidSeen {
                        code: *code,
                        bus_id: bus_id.clone(),
                        place: place_of(name, fact, host.clone()),
                    }),
                    Signal::GpuUuid { bus_id, uuid } => self.gpus.push((
                        host.clone(),
                        GpuRef {
                            bus_id: Some(bus_id.clone()),
                            uuid: Some(uuid.clone()),
                            ..GpuRef::default()
                        },
                    )),
                    _ => {}
                }
            }
        }
        self.files.push(BundleFile {
            name: name.to_owned(),
            kind: FileKind::KernelLog,
            bytes: facts.bytes,
            lines: facts.lines,
            ranks: Vec::new(),
            host: if hosts.len() == 1 {
                hosts.into_iter().next()
            } else {
                file_host
            },
            diagnosis: None,
            warnings: Vec::new(),
        });
    }

    /// A program's output: its single-log diagnosis and the bundle pass's facts.
    pub fn log(
        &mut self,
        rules: &RuleSet,
        name: &str,
        detected: &Detected,
        analysis: Analysis,
        facts: LogFacts,
    ) {
        self.see_year(facts.year);
        let label_ranks: BTreeSet<u32> = facts
            .facts
            .iter()
            .flat_map(|f| &f.signals)
            .filter_map(|s| match s {
                Signal::LabelRank(r) => Some(*r),
                _ => None,
            })
            .collect();
        let slot = torchrun_slot(name);
        if let (Some(slot), Some(rank)) = (&slot, world_group_rank(&facts)) {
            self.slot_ranks.entry(slot.clone()).or_insert(rank);
        }
        let file_rank = match detected.kind {
            FileKind::RankLog | FileKind::Unknown => match detected.prefixed_ranks.len() {
                1 => {
                    let rank = detected.prefixed_ranks.iter().next().copied();
                    if let (Some(slot), Some(rank)) = (slot, rank) {
                        self.slot_ranks.entry(slot).or_insert(rank);
                    }
                    rank
                }
                _ => rank_from_name(name)
                    .or_else(|| slot.map(|slot| self.slot_key(slot)))
                    .or_else(|| {
                        (label_ranks.len() == 1)
                            .then(|| label_ranks.iter().next().copied())
                            .flatten()
                    }),
            },
            _ => None,
        };
        self.summary_rows_of(&analysis, &facts);
        let mut seen_ranks = BTreeSet::new();
        let mut hosts = BTreeSet::new();
        let mut cascade_lines = BTreeSet::new();
        for fact in &facts.facts {
            let label = fact.signals.iter().find_map(|s| match s {
                Signal::LabelRank(r) => Some(*r),
                _ => None,
            });
            let rank = fact.rank.or(file_rank).or(label);
            seen_ranks.extend(rank);
            let host = fact.host.clone().or_else(|| {
                fact.signals.iter().find_map(|s| match s {
                    Signal::Host { host, .. } => Some(host.clone()),
                    _ => None,
                })
            });
            hosts.extend(host.clone());
            if self.fact(name, fact, rank, host) {
                cascade_lines.insert(fact.line);
            }
        }
        self.children(name, &analysis, file_rank);
        // The rank's own failures: a rule's root or symptom that is not a distributed cascade, else
        // the final exception of its traceback when that is not a cascade either.
        let mut owned = BTreeSet::new();
        for finding in &analysis.diagnosis.findings {
            if finding.role == Role::Context || is_cascade_finding(rules, finding) {
                continue;
            }
            let Some(first) = finding.evidence.first() else {
                continue;
            };
            let rank = first.rank.or(file_rank);
            if !owned.insert(rank) {
                continue;
            }
            let place = self.place_at(name, &facts, rank, first.line, &first.text);
            let own = OwnFault::new(
                finding.class.clone(),
                place,
                Some(finding.clone()),
                finding.evidence.clone(),
            );
            self.own(rank, own);
        }
        for event in &analysis.parsed.events {
            let EventKind::Traceback(tb) = &event.kind else {
                continue;
            };
            let Some(exception) = tb.final_exception() else {
                continue;
            };
            let rank = event.rank.or(file_rank);
            let short = exception.short_type();
            if owned.contains(&rank)
                || LAUNCHER_EXCEPTIONS.contains(&short)
                || cascade_lines.contains(&exception.line)
                || cascade_of_text(
                    &exception.line_text(),
                    self.place_at(name, &facts, rank, exception.line, ""),
                )
                .is_some()
            {
                continue;
            }
            owned.insert(rank);
            let text = clip_text(&exception.line_text());
            let place = self.place_at(name, &facts, rank, exception.line, &text);
            let line = EvidenceLine {
                line: exception.line,
                text,
                rank,
                repeats: None,
            };
            let own = OwnFault::new(short.to_owned(), place, None, vec![line]);
            self.own(rank, own);
        }
        for rank in &seen_ranks {
            let state = self.rank(*rank);
            state.has_log = true;
            state.files.insert(name.to_owned());
        }
        if let Some(rank) = file_rank {
            let state = self.rank(rank);
            state.has_log = true;
            state.files.insert(name.to_owned());
            seen_ranks.insert(rank);
        }
        let mut warnings = Vec::new();
        if facts.dropped > 0 {
            warnings.push(Warning::new(
                "facts_dropped",
                format!("{} lines about collectives and failures in the middle of the log were not kept (the first and last ones were)", facts.dropped),
                None,
            ));
        }
        self.files.push(BundleFile {
            name: name.to_owned(),
            kind: detected.kind,
            bytes: facts.bytes,
            lines: facts.lines,
            ranks: seen_ranks.into_iter().collect(),
            host: if hosts.len() == 1 {
                hosts.into_iter().next()
            } else {
                None
            },
            diagnosis: Some(analysis.diagnosis),
            warnings,
        });
    }

    fn own(&mut self, rank: Option<u32>, own: OwnFault) {
        match rank {
            Some(rank) => combine(&mut self.rank(rank).own, own),
            None => self.unranked.push(own),
        }
    }

    /// The place of line `line` of a log, timed by the nearest fact at or before it.
    fn place_at(&self, name: &str, facts: &LogFacts, rank: Option<u32>, line: u64, text: &str) -> Place {
        let near = facts
            .facts
            .iter()
            .rfind(|f| f.line <= line && (f.rank == rank || f.rank.is_none() || rank.is_none()));
        Place {
            file: name.to_owned(),
            line,
            text: text.to_owned(),
            when: near.and_then(|f| {
                Some(When {
                    wall: f.wall?,
                    text: f.stamp.clone()?,
                })
            }),
            host: near.and_then(|f| f.host.clone()),
        }
    }

    /// One fact of a log; whether it is a cascade event.
    fn fact(&mut self, name: &str, fact: &LineFact, rank: Option<u32>, host: Option<String>) -> bool {
        let mut cascade = false;
        let place = || place_of(name, fact, host.clone());
        for signal in &fact.signals {
            match signal {
                Signal::Timeout { pg, seq, call } => {
                    cascade = true;
                    let Some(rank) = rank else { continue };
                    let pg = pg.clone().unwrap_or_else(|| self.guess_pg(rank, *seq));
                    let state = self.rank(rank);
                    let group = state.groups.entry(pg.clone()).or_default();
                    if let Some(seq) = seq {
                        group.timed_out = Some(group.timed_out.map_or(*seq, |t| t.min(*seq)));
                        group.calls.entry(*seq).or_insert_with(|| call.clone());
                    }
                    push_cascade(
                        state,
                        CascadeEvent {
                            kind: CascadeKind::Timeout,
                            collective: Some(CollectiveRef {
                                pg,
                                seq: *seq,
                                op: call.op.clone(),
                            }),
                            blamed: Vec::new(),
                            place: place(),
                        },
                    );
                }
                Signal::WorkState {
                    pg,
                    at,
                    enqueued,
                    completed,
                } => {
                    // The watchdog found the work at `at` failed or timed out: a cascade like a
                    // timeout line (a rank may print only this one).
                    cascade |= at.is_some();
                    let Some(rank) = rank else { continue };
                    let pg = pg.clone().unwrap_or_else(|| self.guess_pg(rank, *at));
                    let state = self.rank(rank);
                    let group = state.groups.entry(pg.clone()).or_default();
                    if let Some(at) = at {
                        group.timed_out = Some(group.timed_out.map_or(*at, |t| t.min(*at)));
                    }
                    group.enqueued = enqueued.or(group.enqueued);
                    group.completed = completed.or(group.completed);
                    let op = at
                        .and_then(|seq| group.calls.get(&seq))
                        .and_then(|c| c.op.clone());
                    let known = state.cascades.iter().any(|c| {
                        c.kind == CascadeKind::Timeout && c.collective.as_ref().is_some_and(|k| k.seq == *at)
                    });
                    if at.is_some() && !known {
                        push_cascade(
                            state,
                            CascadeEvent {
                                kind: CascadeKind::Timeout,
                                collective: Some(CollectiveRef { pg, seq: *at, op }),
                                blamed: Vec::new(),
                                place: place(),
                            },
                        );
                    }
                }
                Signal::PeerLost { blamed } => {
                    cascade = true;
                    if let Some(rank) = rank {
                        push_cascade(
                            self.rank(rank),
                            CascadeEvent {
                                kind: CascadeKind::PeerLost,
                                collective: None,
                                blamed: blamed.clone(),
                                place: place(),
                            },
                        );
                    }
                }
                Signal::Mismatch { pg, calls } => {
                    cascade = true;
                    self.mismatches.push(MismatchSeen {
                        pg: pg.clone(),
                        calls: calls.clone(),
                        place: place(),
                    });
                    if let Some(rank) = rank {
                        push_cascade(
                            self.rank(rank),
                            CascadeEvent {
                                kind: CascadeKind::Mismatch,
                                collective: None,
                                blamed: Vec::new(),
                                place: place(),
                            },
                        );
                    }
                }
                Signal::Exit {
                    ranks,
                    local_rank,
                    host: exit_host,
                    code,
                    signal,
                } => {
                    if let (true, Some(local)) = (ranks.is_empty(), local_rank) {
                        self.agent_exits.push((
                            *local,
                            Exit {
                                code: *code,
                                signal: signal.clone(),
                                place: place(),
                            },
                        ));
                    }
                    for r in ranks {
                        let state = self.rank(*r);
                        if state.host.is_none() {
                            state.host.clone_from(exit_host);
                        }
                        state.exit.get_or_insert_with(|| Exit {
                            code: *code,
                            signal: signal.clone(),
                            place: place(),
                        });
                    }
                }
                Signal::NcclRank {
                    nranks,
                    cuda_dev,
                    bus_id,
                    ..
                } => {
                    if let Some(n) = nranks {
                        self.world
                            .push((*n, format!("{name}:{} (NCCL nranks)", fact.line)));
                    }
                    if let Some(rank) = rank {
                        let gpu = &mut self.rank(rank).gpu;
                        gpu.index = gpu.index.or(*cuda_dev);
                        if gpu.bus_id.is_none() {
                            gpu.bus_id.clone_from(bus_id);
                        }
                    }
                }
                Signal::Host { host: h, cuda_dev } => {
                    if let Some(rank) = rank {
                        let state = self.rank(rank);
                        state.host.get_or_insert_with(|| h.clone());
                        state.gpu.index = state.gpu.index.or(*cuda_dev);
                    }
                }
                Signal::WorldSize(n) => self.world.push((*n, format!("{name}:{}", fact.line))),
                Signal::Xid { code, bus_id } => self.xids.push(XidSeen {
                    code: *code,
                    bus_id: bus_id.clone(),
                    place: place(),
                }),
                Signal::GpuUuid { bus_id, uuid } => self.gpus.push((
                    host.clone(),
                    GpuRef {
                        bus_id: Some(bus_id.clone()),
                        uuid: Some(uuid.clone()),
                        ..GpuRef::default()
                    },
                )),
                Signal::GlooConnected { peers, .. } => self.world.push((
                    peers.saturating_add(1),
                    format!("{name}:{} (gloo's connected peers)", fact.line),
                )),
                Signal::LabelRank(_) | Signal::ErrorFilePath(_) => {}
            }
        }
        if let (Some(rank), Some(h)) = (rank, &host) {
            self.rank(rank).host.get_or_insert_with(|| h.clone());
        }
        cascade
    }

    /// The process group of a line that names none: the group of another line of the same rank
    /// about the same sequence number, else `unknown` (a rank's only group seen so far is not
    /// certain: a later line may name another; [`State::settle_unknown_groups`] looks again).
    fn guess_pg(&self, rank: u32, seq: Option<u64>) -> String {
        let groups = self.ranks.get(&rank).map(|s| &s.groups);
        let by_seq = groups.and_then(|g| {
            g.iter()
                .find(|(_, grp)| {
                    seq.is_some() && (grp.timed_out == seq || grp.calls.keys().any(|k| Some(*k) == seq))
                })
                .map(|(pg, _)| pg.clone())
        });
        by_seq.unwrap_or_else(|| UNKNOWN_PG.to_owned())
    }

    /// torchrun's summary rows, each tied to the worker folder of its error file when it names one.
    fn summary_rows_of(&mut self, analysis: &Analysis, facts: &LogFacts) {
        for event in &analysis.parsed.events {
            let EventKind::ChildFailure(child) = &event.kind else {
                continue;
            };
            let slot = facts
                .facts
                .iter()
                .filter(|f| event.lines.start <= f.line && f.line <= event.lines.end)
                .flat_map(|f| &f.signals)
                .find_map(|s| match s {
                    Signal::ErrorFilePath(path) => torchrun_slot(path),
                    _ => None,
                });
            self.summary_rows.push(SummaryRow {
                slot,
                host: child.host.clone(),
                local_rank: child.local_rank,
                global_rank: child.global_rank,
            });
        }
    }

    /// torchrun's summary of its failed children: host, local rank, exit, first observed failure.
    fn children(&mut self, name: &str, analysis: &Analysis, file_rank: Option<u32>) {
        for event in &analysis.parsed.events {
            let EventKind::ChildFailure(child) = &event.kind else {
                continue;
            };
            let Some(rank) = child.global_rank.or(file_rank) else {
                continue;
            };
            let state = self.rank(rank);
            if state.host.is_none() {
                state.host.clone_from(&child.host);
            }
            state.local_rank = state.local_rank.or(child.local_rank);
            state.launcher_root |= child.root_cause;
            if child.exitcode.is_some() || child.signal.is_some() {
                let place = Place {
                    file: name.to_owned(),
                    line: event.lines.start,
                    text: clip_text(event.text.as_deref().unwrap_or("exited")),
                    when: None,
                    host: child.host.clone(),
                };
                let signal = child
                    .signal
                    .clone()
                    .or_else(|| child.exitcode.and_then(super::signals::signal_name));
                if matches!(signal.as_deref(), Some("SIGTERM" | "SIGINT" | "SIGHUP"))
                    && !state.launcher_root
                    && state.cascades.len() < MAX_CASCADE_EVENTS
                {
                    state.cascades.push(CascadeEvent {
                        kind: CascadeKind::Terminated,
                        collective: None,
                        blamed: Vec::new(),
                        place: place.clone(),
                    });
                }
                state.exit.get_or_insert(Exit {
                    code: child.exitcode,
                    signal,
                    place,
                });
            }
        }
    }
}

/// The global rank a worker's own log gives by gloo's connection lines: the rank it has in the
/// largest group it joined (the default group, the whole world), when one rank alone is named
/// at that size.
fn world_group_rank(facts: &LogFacts) -> Option<u32> {
    let connected: Vec<(u32, u32)> = facts
        .facts
        .iter()
        .flat_map(|f| &f.signals)
        .filter_map(|s| match s {
            Signal::GlooConnected { rank, peers } => Some((*peers, *rank)),
            _ => None,
        })
        .collect();
    let largest = connected.iter().map(|(peers, _)| *peers).max()?;
    let ranks: BTreeSet<u32> = connected
        .iter()
        .filter(|(peers, _)| *peers == largest)
        .map(|(_, rank)| *rank)
        .collect();
    match ranks.len() {
        1 => ranks.into_iter().next(),
        _ => None,
    }
}

fn push_cascade(state: &mut RankState, event: CascadeEvent) {
    if state.cascades.len() < MAX_CASCADE_EVENTS {
        state.cascades.push(event);
    }
}

fn place_of(name: &str, fact: &LineFact, host: Option<String>) -> Place {
    Place {
        file: name.to_owned(),
        line: fact.line,
        text: fact.text.clone(),
        when: fact
            .wall
            .zip(fact.stamp.clone())
            .map(|(wall, text)| When { wall, text }),
        host,
    }
}

/// The cascade event a failure's text is, if it is one (a timeout, a lost peer, a mismatch).
fn cascade_of_text(text: &str, place: Place) -> Option<CascadeEvent> {
    super::signals::read(text).into_iter().find_map(|s| {
        let (kind, collective, blamed) = match s {
            Signal::Timeout { pg, seq, call } => (
                CascadeKind::Timeout,
                Some(CollectiveRef {
                    pg: pg.unwrap_or_else(|| UNKNOWN_PG.to_owned()),
                    seq,
                    op: call.op,
                }),
                Vec::new(),
            ),
            Signal::PeerLost { blamed } => (CascadeKind::PeerLost, None, blamed),
            Signal::Mismatch { .. } => (CascadeKind::Mismatch, None, Vec::new()),
            _ => return None,
        };
        Some(CascadeEvent {
            kind,
            collective,
            blamed,
            place: place.clone(),
        })
    })
}

/// Whether a finding only says that another rank failed: a distributed rule that yields to
/// every other root (a watchdog timeout, a remote error, a backend error after a peer died).
pub fn is_cascade_finding(rules: &RuleSet, finding: &Finding) -> bool {
    rules.rule(&finding.rule).is_some_and(|rule| {
        rule.tags.iter().any(|t| t == "distributed") && rule.yields_to.iter().any(|y| y == "*")
    })
}

/// The rank's own failure in a diagnosis with no rank (an error file's traceback).
fn own_fault_of(rules: &RuleSet, analysis: &Analysis, rank: Option<u32>, place: Place) -> Option<OwnFault> {
    let finding = analysis
        .diagnosis
        .findings
        .iter()
        .find(|f| f.role != Role::Context && !is_cascade_finding(rules, f))?;
    let mut evidence = finding.evidence.clone();
    for e in &mut evidence {
        e.rank = e.rank.or(rank);
    }
    Some(OwnFault::new(
        finding.class.clone(),
        place,
        Some(finding.clone()),
        evidence,
    ))
}
