//! Real distributed jobs (`tests/fixtures/distributed/<job>/`: generated gloo runs under torchrun
//! and multi-rank logs from public threads) analyzed as bundles: each diagnosis must say what the
//! job's `expected.toml` says (schema in `tests/fixtures/README.md`).
//!
//! Nothing a diagnosis says may be wrong: a root rank, host, local rank, class, collective,
//! cascade or world size that the job's verdict contradicts fails. What the files cannot tell (a
//! root rank without dumps or time stamps, a second node's global ranks) may be left out, but then
//! the diagnosis says what is missing; a generated job with dumps must name who never entered the
//! stalled collective.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use faultline::bundle::analyze_files;
use faultline::bundle::xid::XidCatalog;
use faultline::model::{BundleDiagnosis, FaultKind, RankOutcome, TimelineKind};
use faultline::rules::RuleSet;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Expected {
    job: Job,
    root: Root,
    #[serde(default)]
    collective: Option<Collective>,
    ranks: Ranks,
}

#[derive(Debug, Deserialize)]
struct Job {
    origin: String,
    #[serde(default)]
    world_size: Option<u32>,
    #[serde(default)]
    nnodes: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct Root {
    ranks: Vec<u32>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    local_rank: Option<u32>,
    what: String,
    class: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Collective {
    op: String,
    process_group: String,
    #[serde(default)]
    fr_seq: Option<u64>,
    #[serde(default)]
    watchdog_seq: Option<u64>,
    #[serde(default)]
    fingerprint_seq: Option<u64>,
    #[serde(default)]
    disagree_op: Option<String>,
    #[serde(default)]
    disagree_numel: Vec<u64>,
}

#[derive(Debug, Deserialize)]
struct Ranks {
    cascade: Vec<u32>,
    never_entered: Vec<u32>,
    disagree: Vec<u32>,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/distributed")
}

fn jobs() -> Vec<PathBuf> {
    let mut jobs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap_or_else(|e| panic!("tests/fixtures/distributed: {e}"))
        .map(|entry| entry.unwrap_or_else(|e| panic!("{e}")).path())
        .filter(|p| p.join("expected.toml").is_file())
        .collect();
    jobs.sort();
    assert!(!jobs.is_empty(), "no job under tests/fixtures/distributed");
    jobs
}

/// Every file of a job but its verdict, named by its path inside the job's folder.
fn job_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != "expected.toml") {
                let name = path.strip_prefix(dir).unwrap_or(&path).display().to_string();
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.push((name, bytes));
            }
        }
    }
    files.sort();
    files
}

fn diagnose_job(dir: &Path) -> BundleDiagnosis {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let catalog = XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    let files = job_files(dir);
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    analyze_files(&rules, catalog, &borrowed)
}

fn expected_of(dir: &Path) -> Expected {
    let path = dir.join("expected.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `all_reduce`, `ALLREDUCE`, `_allgather_base` → `ALLREDUCE`, `ALLGATHERBASE`.
fn op(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_uppercase()
}

/// The last part of a dotted exception type (`torch.OutOfMemoryError` → `OutOfMemoryError`).
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// What in `d` disagrees with `want` (empty when it all agrees).
fn problems(want: &Expected, d: &BundleDiagnosis) -> Vec<String> {
    let mut out = Vec::new();
    let generated = want.job.origin == "generated";
    let fault = d.first_fault.as_ref();
    // The root: never a wrong rank; a generated job's root always named.
    let named = fault.and_then(|f| f.rank);
    match (want.root.ranks.as_slice(), named) {
        ([root], Some(rank)) if rank != *root => out.push(format!("root rank {rank}, expected {root}")),
        // Left unnamed only where the files cannot tell (no dump, no stamp): then it says so.
        ([_], None) if generated && d.missing.is_empty() => {
            out.push(format!(
                "no root rank named and nothing said missing: {:?}",
                fault.map(|f| &f.summary)
            ));
        }
        ([], Some(rank)) => out.push(format!("root rank {rank} named where no rank can be")),
        ([_, _, ..], Some(rank)) if !want.root.ranks.contains(&rank) => {
            out.push(format!("root rank {rank}, expected one of {:?}", want.root.ranks));
        }
        _ => {}
    }
    if fault.is_none() && d.missing.is_empty() {
        out.push("no first fault and nothing said missing".to_owned());
    }
    if named.is_none() && !want.root.ranks.is_empty() && d.missing.is_empty() {
        out.push("no root rank and nothing said missing".to_owned());
    }
    if let Some(f) = fault.filter(|f| f.rank.is_some()) {
        match (&want.root.host, &f.host) {
            (Some(w), Some(h)) if w != h => out.push(format!("root host {h}, expected {w}")),
            _ => {}
        }
        match (want.root.local_rank, f.local_rank) {
            (Some(w), Some(l)) if w != l => out.push(format!("root local rank {l}, expected {w}")),
            _ => {}
        }
    }
    // What failed.
    if let Some(f) = fault {
        let kind_ok = match want.root.what.as_str() {
            "exception" | "signal" => f.kind == FaultKind::RankFailure,
            "straggler" => f.kind == FaultKind::NeverEntered,
            "skipped_collective" | "size_mismatch" => f.kind == FaultKind::Desync,
            _ => true,
        };
        if !kind_ok {
            out.push(format!(
                "first fault is {:?}, expected {}",
                f.kind, want.root.what
            ));
        }
        if f.kind == FaultKind::RankFailure {
            let cause = f.cause.as_ref().map(|c| c.class.as_str());
            match (want.root.class.as_str(), cause) {
                ("none", Some(c)) => out.push(format!("cause {c}, expected no class")),
                (w, Some(c)) if w != "none" && w != c => out.push(format!("cause {c}, expected {w}")),
                (w, None) if w != "none" => out.push(format!("no cause, expected {w}")),
                _ => {}
            }
            if let (Some(error), "none", Some(rank)) = (&want.root.error, want.root.class.as_str(), f.rank) {
                let own = d
                    .ranks
                    .iter()
                    .find(|r| r.rank == rank)
                    .and_then(|r| r.first_failure.as_ref())
                    .map(|e| e.kind.clone());
                match own {
                    Some(TimelineKind::Fault { class }) if short(&class) == short(error) => {}
                    other => out.push(format!("root's own failure {other:?}, expected {error}")),
                }
            }
        }
    }
    if let (Some(c), Some(f)) = (&want.collective, fault) {
        let seqs: Vec<u64> = [c.fr_seq, c.watchdog_seq, c.fingerprint_seq]
            .into_iter()
            .flatten()
            .collect();
        if !seqs.is_empty() {
            match &f.collective {
                None => out.push(format!("no collective named, expected {} at {seqs:?}", c.op)),
                Some(k) => {
                    if !k.seq.is_some_and(|s| seqs.contains(&s)) {
                        out.push(format!("collective SeqNum {:?}, expected one of {seqs:?}", k.seq));
                    }
                    // A line that names no group leaves it unknown: left out, not wrong.
                    let pg_ok = k.pg == c.process_group
                        || (c.process_group == "default_pg" && k.pg == "0")
                        || k.pg == faultline::bundle::UNKNOWN_PG;
                    if !pg_ok {
                        out.push(format!("process group {}, expected {}", k.pg, c.process_group));
                    }
                    let ops: BTreeSet<String> = [Some(&c.op), c.disagree_op.as_ref()]
                        .into_iter()
                        .flatten()
                        .map(|o| op(o))
                        .collect();
                    if let Some(o) = &k.op
                        && !ops.contains(o)
                    {
                        out.push(format!("collective {o}, expected {ops:?}"));
                    }
                }
            }
        }
        if f.kind == FaultKind::Desync {
            let desync = d.collectives.iter().flat_map(|g| &g.desync).next();
            match desync {
                None => out.push("a desync first fault with no desync listed".to_owned()),
                Some(ds) => {
                    let numels: BTreeSet<u64> = ds.calls.iter().filter_map(|c| c.call.numel_in).collect();
                    let want_numels: BTreeSet<u64> = c.disagree_numel.iter().copied().collect();
                    if !want_numels.is_empty() && numels != want_numels {
                        out.push(format!("desync sizes {numels:?}, expected {want_numels:?}"));
                    }
                    if let Some(other) = &c.disagree_op {
                        let ops: BTreeSet<String> =
                            ds.calls.iter().filter_map(|k| k.call.op.clone()).collect();
                        let want_ops: BTreeSet<String> = [op(&c.op), op(other)].into_iter().collect();
                        if ops != want_ops {
                            out.push(format!("desync ops {ops:?}, expected {want_ops:?}"));
                        }
                    }
                    let majority = ds.calls.len() > 1 && ds.calls[0].ranks.len() > ds.calls[1].ranks.len();
                    let disagreeing: BTreeSet<u32> = ds
                        .calls
                        .iter()
                        .skip(usize::from(majority))
                        .flat_map(|k| k.ranks.iter().copied())
                        .collect();
                    let want_disagree: BTreeSet<u32> = want.ranks.disagree.iter().copied().collect();
                    // Without a majority (ranks' dumps missing) every call disagrees: it holds the
                    // true ones, and no rank is named.
                    let holds = if majority {
                        disagreeing == want_disagree
                    } else {
                        want_disagree.is_subset(&disagreeing)
                    };
                    if !holds {
                        out.push(format!(
                            "disagreeing ranks {disagreeing:?}, expected {want_disagree:?}"
                        ));
                    }
                }
            }
        }
    }
    // The other ranks: a cascade is never a root, a root is never folded into a cascade.
    let want_cascade: BTreeSet<u32> = want.ranks.cascade.iter().copied().collect();
    // With no root named, every rank only waited as far as the files show: the root may be among
    // the ranks folded (a rank that skipped a collective then timed out in the next one).
    let roots: BTreeSet<u32> = want.root.ranks.iter().copied().collect();
    for c in &d.cascades {
        for rank in &c.ranks {
            let root_of_no_answer = named.is_none() && roots.contains(rank);
            if !(want_cascade.contains(rank) || root_of_no_answer) {
                out.push(format!("rank {rank} folded into the cascade {:?}", c.summary));
            }
        }
    }
    for r in &d.ranks {
        if want_cascade.contains(&r.rank) && r.outcome == RankOutcome::Fault {
            out.push(format!("cascade rank {} reported as failing by itself", r.rank));
        }
    }
    if generated && d.cascades.iter().map(|c| c.ranks.len()).sum::<usize>() == 0 && !want_cascade.is_empty() {
        out.push("no cascade folded".to_owned());
    }
    let want_never: BTreeSet<u32> = want.ranks.never_entered.iter().copied().collect();
    let mut never: BTreeSet<u32> = BTreeSet::new();
    for g in d
        .collectives
        .iter()
        .filter(|g| g.pg == "0" || g.pg == "default_pg")
    {
        never.extend(g.never_entered.iter().copied());
    }
    if let Some(extra) = never.difference(&want_never).next() {
        out.push(format!(
            "rank {extra} said never to have entered the stalled collective"
        ));
    }
    // Where the dumps hold the stalled collective (`fr_seq`), who never entered it is known.
    if generated && want.collective.as_ref().is_some_and(|c| c.fr_seq.is_some()) {
        let root_never = fault
            .filter(|f| f.kind == FaultKind::NeverEntered)
            .and_then(|f| f.rank);
        let root_rank = fault.and_then(|f| f.rank);
        for rank in &want_never {
            // A rank killed before the collective leaves no dump: it is the root instead.
            if !never.contains(rank) && root_never != Some(*rank) && root_rank != Some(*rank) {
                out.push(format!(
                    "rank {rank} not found to have never entered the collective"
                ));
            }
        }
    }
    // The job's shape.
    match (want.job.world_size, d.coverage.world_size) {
        (Some(w), Some(n)) if w != n => out.push(format!("world size {n}, expected {w}")),
        (None, Some(n)) => out.push(format!("world size {n} where the files do not say one")),
        _ => {}
    }
    out
}

#[test]
fn every_distributed_job_is_diagnosed_as_its_expected_toml_says() {
    let mut failures = Vec::new();
    for dir in jobs() {
        let want = expected_of(&dir);
        let d = diagnose_job(&dir);
        let found = problems(&want, &d);
        if !found.is_empty() {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            failures.push(format!("{name}:\n  {}", found.join("\n  ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} job(s) misdiagnosed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A root a line names (its own failure, a monitored barrier, a sequence number it stopped
/// before, a desync) is named at high confidence. A straggler inferred from absence (the one
/// rank whose log is silent while the others timed out) is never high: medium when every rank
/// of a known world size has a log, low when the world size is unknown, and then the diagnosis
/// says what is missing.
#[test]
fn a_generated_jobs_root_rank_is_high_when_a_line_names_it_and_lower_when_inferred_from_absence() {
    use faultline::model::Confidence;
    for dir in jobs() {
        if expected_of(&dir).job.origin != "generated" {
            continue;
        }
        let d = diagnose_job(&dir);
        let Some(f) = d.first_fault.as_ref().filter(|f| f.rank.is_some()) else {
            continue;
        };
        let inferred = f.kind == FaultKind::NeverEntered && f.confidence != Confidence::High;
        if !inferred {
            assert_eq!(
                f.confidence,
                Confidence::High,
                "{}: {:?}",
                dir.display(),
                f.reasons
            );
            continue;
        }
        let whole_world_logged = d.coverage.world_size.is_some() && d.coverage.without_log.is_empty();
        let want = if whole_world_logged {
            Confidence::Medium
        } else {
            Confidence::Low
        };
        assert_eq!(f.confidence, want, "{}: {:?}", dir.display(), f.reasons);
        assert!(
            !d.missing.is_empty(),
            "{}: an inferred straggler says nothing missing",
            dir.display()
        );
        if d.coverage.world_size.is_none() {
            assert!(
                d.missing.iter().any(|m| m.contains("world size")),
                "{}: {:?}",
                dir.display(),
                d.missing
            );
        }
    }
}

/// torchrun gives one agent's workers consecutive global ranks: a worker folder with no line of
/// its own naming its rank (a straggler prints nothing) takes it from its agent's other folders.
#[test]
fn a_silent_worker_folder_takes_its_global_rank_from_its_agents_other_folders() {
    let dir = fixtures_dir().join("sleep-past-timeout-2nodes-torch2.4.1-gloo-n12");
    let d = diagnose_job(&dir);
    let straggler = d
        .files
        .iter()
        .find(|f| {
            f.name.starts_with("host-b/")
                && faultline::bundle::torchrun_slot(&f.name).is_some_and(|s| s.local_rank == 3)
        })
        .unwrap_or_else(|| {
            panic!(
                "no file of host-b's local rank 3: {:?}",
                d.files.iter().map(|f| &f.name).collect::<Vec<_>>()
            )
        });
    assert_eq!(straggler.ranks, vec![9]);
    assert!(
        d.warnings.iter().all(|w| w.code != "global_rank_unknown"),
        "{:?}",
        d.warnings
    );
}

#[test]
fn on_a_two_node_job_a_worker_folder_is_never_taken_for_its_global_rank() {
    let two_node: Vec<PathBuf> = jobs()
        .into_iter()
        .filter(|dir| expected_of(dir).job.nnodes == Some(2) && expected_of(dir).job.origin == "generated")
        .collect();
    assert!(
        !two_node.is_empty(),
        "no generated two-node job among the fixtures"
    );
    for dir in two_node {
        let d = diagnose_job(&dir);
        for file in &d.files {
            let Some(slot) = faultline::bundle::torchrun_slot(&file.name) else {
                continue;
            };
            // A file in `<host>/…/attempt_0/<local>/` of the second node speaks for another rank.
            for rank in &file.ranks {
                let report = d.ranks.iter().find(|r| r.rank == *rank);
                let local = report.and_then(|r| r.local_rank);
                assert!(
                    local.is_none() || local == Some(slot.local_rank),
                    "{}: {} is local rank {} but was given rank {rank} with local rank {local:?}",
                    dir.display(),
                    file.name,
                    slot.local_rank
                );
            }
        }
        // Both nodes have a local rank 0..n: at least one folder's rank differs from its local rank.
        let shifted = d.files.iter().any(|file| {
            faultline::bundle::torchrun_slot(&file.name)
                .is_some_and(|slot| file.ranks.iter().any(|r| *r != slot.local_rank))
        });
        assert!(
            shifted,
            "{}: every worker folder was read as its local rank",
            dir.display()
        );
    }
}

#[test]
fn a_worker_killed_by_a_signal_with_only_its_local_rank_known_is_named_by_its_local_rank() {
    let dir = fixtures_dir().join("public-colossalai-3514");
    let d = diagnose_job(&dir);
    let fault = d
        .first_fault
        .as_ref()
        .unwrap_or_else(|| panic!("no first fault: {:?}", d.missing));
    assert_eq!(
        (fault.kind, fault.rank, fault.local_rank),
        (FaultKind::RankFailure, None, Some(3))
    );
    assert!(
        d.missing
            .iter()
            .any(|m| m.contains("global rank of local rank 3")),
        "{:?}",
        d.missing
    );
}

#[test]
fn under_detail_the_debug_wrappers_helper_group_is_never_shown_as_the_stalled_collective() {
    let dir = fixtures_dir().join("sleep-past-timeout-detail-torch2.15.0-gloo-n4");
    let d = diagnose_job(&dir);
    let shown = d.first_fault.as_ref().and_then(|f| f.collective.as_ref());
    assert!(shown.is_none_or(|c| c.pg == "0"), "{shown:?}");
    for g in d.collectives.iter().filter(|g| g.pg == "1") {
        assert!(g.stalled.is_none() && g.never_entered.is_empty(), "{g:?}");
    }
}

/// A job's files with each flight-recorder dump in one form: `fr_<rank>` (torch's pickle) as it
/// came, `Torch` its `fr_<rank>.json` (torch's own JSON) or `Kept` the JSON the service keeps of the
/// pickle, both under the pickle's name; `KeptAs` the kept JSON under the name it is kept as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DumpForm {
    Pickle,
    Torch,
    Kept,
    KeptAs,
}

/// Whether a file of a job is one of its dumps, in either form.
fn is_dump(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    let stem = base.strip_suffix(".json").unwrap_or(base);
    stem.strip_prefix("fr_")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
}

/// The job's files with its dumps in `form` (none when the job has no dump).
fn with_dumps(dir: &Path, form: DumpForm) -> Option<Vec<(String, Vec<u8>)>> {
    use faultline::service::bundle::{Kept, Upload, kept};
    let files = job_files(dir);
    let pickles: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(n, _)| is_dump(n) && !n.ends_with(".json"))
        .collect();
    if pickles.is_empty() {
        return None;
    }
    let mut out: Vec<(String, Vec<u8>)> = files.iter().filter(|(n, _)| !is_dump(n)).cloned().collect();
    for (name, bytes) in pickles {
        let json_name = format!("{name}.json");
        let dump = match form {
            DumpForm::Pickle => (name.clone(), bytes.clone()),
            DumpForm::Torch => {
                let (_, torch) = files
                    .iter()
                    .find(|(n, _)| *n == json_name)
                    .unwrap_or_else(|| panic!("{}: no {json_name} beside {name}", dir.display()));
                (name.clone(), torch.clone())
            }
            DumpForm::Kept | DumpForm::KeptAs => {
                let upload = Upload {
                    name: name.clone(),
                    bytes: bytes.clone().into(),
                };
                let Kept::Text(text) = kept(&upload) else {
                    panic!("{}: {name} was not kept", dir.display());
                };
                assert_eq!(text.kept_as.as_deref(), Some(json_name.as_str()));
                let kept_name = if form == DumpForm::KeptAs {
                    json_name
                } else {
                    name.clone()
                };
                (kept_name, text.text.into_bytes())
            }
        };
        out.push(dump);
    }
    out.sort();
    Some(out)
}

fn diagnose_files(files: &[(String, Vec<u8>)]) -> BundleDiagnosis {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    let catalog = XidCatalog::embedded().unwrap_or_else(|e| panic!("{e}"));
    let borrowed: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    analyze_files(&rules, catalog, &borrowed)
}

/// The diagnosis without its list of files (whose sizes differ with the dumps' form).
fn without_files(d: &BundleDiagnosis) -> serde_json::Value {
    let mut doc = serde_json::to_value(d).unwrap_or_else(|e| panic!("{e}"));
    if let Some(map) = doc.as_object_mut() {
        map.remove("files");
    }
    doc
}

/// What the service keeps of a flight-recorder pickle (its content as JSON) gives the diagnosis
/// the pickle gives, and so does torch's own JSON dump: the analysis can be run again from what
/// is kept.
#[test]
fn a_jobs_dumps_kept_as_json_give_the_diagnosis_their_pickles_give() {
    let (mut compared, mut dumps_matter) = (0, 0);
    for dir in jobs() {
        let Some(pickles) = with_dumps(&dir, DumpForm::Pickle) else {
            continue;
        };
        let from_pickles = diagnose_files(&pickles);
        assert!(
            from_pickles.coverage.without_dump.len() < from_pickles.ranks.len(),
            "{}: the pickles were read",
            dir.display()
        );
        for form in [DumpForm::Torch, DumpForm::Kept] {
            let files = with_dumps(&dir, form).unwrap_or_default();
            assert_eq!(
                without_files(&diagnose_files(&files)),
                without_files(&from_pickles),
                "{}: the dumps as {form:?} give another diagnosis",
                dir.display()
            );
        }
        // Run again from the files as kept, each dump under the name it is kept as.
        let rerun = diagnose_files(&with_dumps(&dir, DumpForm::KeptAs).unwrap_or_default());
        assert_eq!(rerun.collectives, from_pickles.collectives, "{}", dir.display());
        let fault = |d: &BundleDiagnosis| {
            d.first_fault
                .as_ref()
                .map(|f| (f.kind, f.rank, f.collective.clone(), f.confidence))
        };
        assert_eq!(fault(&rerun), fault(&from_pickles), "{}", dir.display());
        let without_dumps: Vec<(String, Vec<u8>)> =
            pickles.into_iter().filter(|(n, _)| !is_dump(n)).collect();
        if without_files(&diagnose_files(&without_dumps)) != without_files(&from_pickles) {
            dumps_matter += 1;
        }
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} jobs with dumps");
    assert!(
        dumps_matter > 0,
        "no job's diagnosis depends on its dumps: the comparison shows nothing"
    );
}
