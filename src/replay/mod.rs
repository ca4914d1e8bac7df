//! Replay: a tensor snapshot of the failing step checked against the suspected cause.
//!
//! A snapshot ([`snapshot::Snapshot`]: safetensors, or NumPy `.npz`) holds the tensors of the step
//! and parameters (`num_classes`, `vocab_size`, `ignore_index`, …) from its metadata. A check
//! ([`CheckSpec`]: a name and parameters, from a rule's `replay` part or the command line) runs on a
//! [`Backend`] — the CPU always, the GPU (cudarc, feature `cuda`) when a device opens — and gives a
//! [`CheckResult`]: confirmed, refuted or inconclusive, with counts, min / max and the first
//! offending positions and values. A cause is refuted only when every tensor that could carry it
//! was checked against a known limit (the ids of an embedding table: see `check::embedding`;
//! positions only for a model family known to index a learned absolute table); otherwise the
//! verdict is inconclusive and says what was not checked and which key would tell. A check whose
//! refutation speaks for its own cause only (`hidden_size`) never refutes a finding or the
//! diagnosis by itself.

pub mod check;
pub mod cpu;
pub mod gpu;
pub mod lookup;
mod npz;
mod params;
pub mod preflight;
pub mod reproducer;
mod safetensors;
pub mod shows;
pub mod snapshot;
pub mod summary;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::model::Verdict;
pub use check::{CheckSpec, GemmCall, Scalar, Scan, ScanOutput};
pub use snapshot::{DType, Limits, Snapshot, SnapshotError, TensorRef};

/// One offending element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offense {
    /// Position in the tensor (one index per dimension).
    pub index: Vec<u64>,
    /// The value, as printed (`2`, `nan`, `-inf`, `1.5`).
    pub value: String,
}

/// The outcome of one check on one snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Check name.
    pub check: String,
    /// The verdict.
    pub verdict: Verdict,
    /// One sentence with the offending values (`labels[3] = 2 >= num_classes = 2 (7 of 512 values out of range)`).
    pub summary: String,
    /// The tensor checked (its name in the snapshot), when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// Elements examined.
    pub elements: u64,
    /// Elements that break the condition.
    pub offending: u64,
    /// Smallest value seen (as printed), when numeric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    /// Largest value seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    /// The first offending elements (at most [`MAX_OFFENSES`]), in index order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_offenses: Vec<Offense>,
    /// The parameters the check used, after defaults and metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// The position lookups the verdict rests on (index_bounds on the position table): the rows,
    /// offset, counting rule and key the check used, which the reproducer writes out as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub positions: Vec<lookup::PositionLookup>,
    /// `cpu` or `gpu:<device name>`.
    pub backend: String,
}

/// Offending elements reported by position.
pub const MAX_OFFENSES: usize = 16;

/// A replay failure (not a verdict: the check could not run at all).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// No GPU backend here (feature off, no driver, no device). Expected; callers use the CPU.
    #[error("no GPU available: {0}")]
    GpuUnavailable(String),
    /// The snapshot is not valid.
    #[error("invalid snapshot: {0}")]
    Snapshot(#[from] SnapshotError),
    /// The check does not exist or its parameters are wrong.
    #[error("{0}")]
    Check(String),
    /// A GPU kernel failed to compile or run.
    #[error("GPU kernel: {0}")]
    Kernel(String),
}

/// What every backend refuses before scanning: bytes that disagree with dtype x shape, and a NaN
/// bound of a value range.
pub(crate) fn validate_scan(tensor: &TensorRef<'_>, scan: Scan) -> Result<(), ReplayError> {
    let expected = tensor
        .elements()
        .checked_mul(tensor.dtype.size() as u64)
        .filter(|&n| n == tensor.bytes.len() as u64);
    if expected.is_none() {
        return Err(ReplayError::Check(format!(
            "tensor {}: {} bytes for dtype {} and shape {:?}",
            tensor.name,
            tensor.bytes.len(),
            tensor.dtype.torch_name(),
            tensor.shape
        )));
    }
    if let Scan::FloatRange { lo, hi } = scan
        && (lo.is_nan() || hi.is_nan())
    {
        return Err(ReplayError::Check("a value range bound is NaN".into()));
    }
    Ok(())
}

/// Something that runs scans: the CPU always, the GPU when a device opens.
pub trait Backend: Send + Sync {
    /// `cpu` or `gpu:<device name>`.
    fn name(&self) -> String;

    /// Runs one scan over one tensor.
    fn scan(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError>;

    /// Makes the real cuBLAS call for `call` on zero-filled operands and returns the status it
    /// gave (`CUBLAS_STATUS_SUCCESS`, `CUBLAS_STATUS_INVALID_VALUE`, …); `None` where this
    /// backend has no cuBLAS (the CPU).
    fn gemm_status(&self, _call: &GemmCall) -> Option<Result<String, ReplayError>> {
        None
    }
}

/// Which backend to run on (`--backend auto|cpu|gpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// The GPU when a device opens, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// The GPU; an error when none opens.
    Gpu,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    /// `auto`, `cpu` or `gpu`, in any case: what `--backend`, `replay_backend` and
    /// `FAULTLINE_REPLAY_BACKEND` take.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::Gpu),
            _ => Err(format!("{text:?} is not auto, cpu or gpu")),
        }
    }
}

/// Runs the replay check of every cause in `diagnosis` that names one, on `snapshot`, records each
/// verdict on its cause ([`crate::model::Cause::outcome`]) and sets each finding's evidence tier:
/// confirmed when the data shows the failure (a cause, or an observation its causes share),
/// refuted when every checked cause is refuted (and, where a refutation speaks for its own cause
/// only, every cause of the finding was checked).
///
/// A confirmation several causes of a finding share (the same observation of the same tensor)
/// confirms none of them alone: each is `consistent` with the data, unless the offending values
/// discriminate it as its rule's `shows` condition says ([`shows`]). A refutation they share
/// refutes them all.
pub fn replay_diagnosis(
    diagnosis: &mut crate::model::Diagnosis,
    snapshot: &Snapshot,
    backend: &dyn Backend,
) -> Vec<CheckResult> {
    use crate::model::{EvidenceTier, ReplayOutcome};

    // Each distinct check runs once, however many causes name it.
    let mut done: Vec<(CheckSpec, CheckResult)> = Vec::new();
    for finding in &mut diagnosis.findings {
        // The result of each cause's check, by cause, with its `shows` condition.
        let mut results: Vec<(usize, CheckResult, Option<String>)> = Vec::new();
        for (i, cause) in finding.causes.iter().enumerate() {
            let Some(mut spec) = cause.replay.as_ref().map(CheckSpec::from) else {
                continue;
            };
            let shows = spec.params.remove(shows::PARAM);
            let result = match done.iter().find(|(s, _)| *s == spec) {
                Some((_, result)) => result.clone(),
                None => {
                    let result = check::run(&spec, snapshot, backend)
                        .unwrap_or_else(|e| check::not_run(&spec, backend, &e));
                    done.push((spec, result.clone()));
                    result
                }
            };
            results.push((i, result, shows));
        }
        // What the offending values show of each cause whose confirmation others share.
        let shared = |r: &CheckResult| results.iter().filter(|(_, o, _)| same_observation(r, o)).count() > 1;
        let judged: Vec<Judged> = results
            .iter()
            .map(|(_, r, shows)| {
                if r.verdict == Verdict::Confirmed && shared(r) {
                    judge(r, shows.as_deref(), snapshot, backend)
                } else {
                    Judged::NotShared
                }
            })
            .collect();
        let (mut confirmed, mut refuted) = (0, 0);
        // A refutation that speaks for its own cause only (`CheckInfo::refutes_finding`).
        let mut narrow = false;
        for (j, (i, result, _)) in results.iter().enumerate() {
            let (verdict, summary) = match (result.verdict, &judged[j]) {
                (Verdict::Confirmed, Judged::NotShared) => {
                    confirmed += 1;
                    (Verdict::Confirmed, result.summary.clone())
                }
                (Verdict::Confirmed, own) => {
                    confirmed += 1;
                    // Alone only when no other cause sharing the observation is shown as well.
                    let rival = results
                        .iter()
                        .zip(&judged)
                        .enumerate()
                        .any(|(k, ((_, other, _), shown))| {
                            k != j && same_observation(result, other) && matches!(shown, Judged::Shows(_))
                        });
                    match own {
                        Judged::Shows(why) if !rival => {
                            (Verdict::Confirmed, format!("{}; {why}", result.summary))
                        }
                        Judged::Unjudged(why) => (
                            Verdict::Consistent,
                            format!(
                                "{} (what would tell this cause apart could not be judged: {why})",
                                result.summary
                            ),
                        ),
                        _ => (Verdict::Consistent, result.summary.clone()),
                    }
                }
                (Verdict::Refuted, _) => {
                    refuted += 1;
                    narrow |= !check::check_info(&result.check).is_some_and(|c| c.refutes_finding);
                    (Verdict::Refuted, result.summary.clone())
                }
                (verdict, _) => (verdict, result.summary.clone()),
            };
            finding.causes[*i].outcome = Some(ReplayOutcome {
                verdict,
                summary,
                backend: result.backend.clone(),
            });
        }
        let checked = results.len();
        let every_cause_checked = checked == finding.causes.len();
        if confirmed > 0 {
            finding.tier = EvidenceTier::Confirmed;
        } else if checked > 0 && refuted == checked && (!narrow || every_cause_checked) {
            finding.tier = EvidenceTier::Refuted;
        }
    }
    diagnosis.replay = summary::summarize(diagnosis);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Whether two confirmations are one observation: the same check saw the same offending values
/// of the same tensor (however the causes' parameters differ).
fn same_observation(a: &CheckResult, b: &CheckResult) -> bool {
    b.verdict == Verdict::Confirmed && a.check == b.check && a.tensor == b.tensor && a.summary == b.summary
}

/// What the offending values of a shared confirmation show of one cause.
enum Judged {
    /// The confirmation is this cause's alone (or not a confirmation).
    NotShared,
    /// Its `shows` condition holds, in these words.
    Shows(String),
    /// It has no `shows` condition, or the condition does not hold.
    NotShown,
    /// Its `shows` condition could not be judged (malformed, or a scan failed): why.
    Unjudged(String),
}

/// Judges a cause's `shows` condition on the confirmation `result` it shares with other causes.
fn judge(result: &CheckResult, shows: Option<&str>, snapshot: &Snapshot, backend: &dyn Backend) -> Judged {
    let Some(text) = shows else {
        return Judged::NotShown;
    };
    let judged = text
        .parse::<shows::Shows>()
        .map_err(|e| e.to_string())
        .and_then(|s| s.judge(result, snapshot, backend).map_err(|e| e.to_string()));
    match judged {
        Ok(Some(why)) => Judged::Shows(why),
        Ok(None) => Judged::NotShown,
        Err(why) => Judged::Unjudged(why),
    }
}

/// Whether a refutation by `spec`'s check speaks for its whole finding (an unknown check's
/// does not: it never runs).
pub(crate) fn refutes_finding(spec: &CheckSpec) -> bool {
    check::check_info(&spec.name).is_some_and(|info| info.refutes_finding)
}

/// Runs the replay checks of `diagnosis` on `snapshot`: the latest snapshot speaks, so outcomes
/// and tiers of an earlier replay are cleared first.
pub fn replay_latest(
    diagnosis: &mut crate::model::Diagnosis,
    snapshot: &Snapshot,
    backend: &dyn Backend,
) -> Vec<CheckResult> {
    for finding in &mut diagnosis.findings {
        if finding.causes.iter().any(|c| c.replay.is_some()) {
            finding.tier = crate::model::EvidenceTier::Pattern;
        }
        for cause in &mut finding.causes {
            cause.outcome = None;
        }
    }
    replay_diagnosis(diagnosis, snapshot, backend)
}

/// Opens the backend `choice` asks for: `Auto` tries the GPU and falls back to the CPU.
pub fn open_backend(choice: BackendChoice) -> Result<Box<dyn Backend>, ReplayError> {
    match choice {
        BackendChoice::Cpu => Ok(Box::new(cpu::Cpu::new())),
        BackendChoice::Gpu => open_gpu(),
        BackendChoice::Auto => match open_gpu() {
            Ok(gpu) => Ok(gpu),
            Err(e) => {
                tracing::debug!("replay runs on the CPU: {e}");
                Ok(Box::new(cpu::Cpu::new()))
            }
        },
    }
}

/// The GPU backend, when this build has one and a device opens.
fn open_gpu() -> Result<Box<dyn Backend>, ReplayError> {
    #[cfg(feature = "cuda")]
    return gpu::open().map(|g| Box::new(g) as Box<dyn Backend>);
    #[cfg(not(feature = "cuda"))]
    Err(ReplayError::GpuUnavailable(
        "this faultline was built without the GPU backend (build with `--features cuda`)".into(),
    ))
}
