//! The diagnosis: ranked findings, each with its evidence, captured values, causes and fixes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Text, Warning};

/// Version of the diagnosis JSON document.
pub const DIAGNOSIS_FORMAT_VERSION: u32 = 1;

/// What a finding is to the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The cause of the failure.
    Root,
    /// A consequence of a root cause (the generic error the root cause surfaced as).
    Symptom,
    /// Useful context that is not a failure by itself.
    Context,
}

/// How sure a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// A guess worth checking.
    Low,
    /// Likely, but other causes fit the log too.
    Medium,
    /// The log names this failure explicitly.
    High,
}

impl Confidence {
    /// One step less sure.
    pub fn lowered(self) -> Self {
        match self {
            Self::High => Self::Medium,
            _ => Self::Low,
        }
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The job failed because of it.
    Error,
    /// Worth fixing, may not be fatal.
    Warning,
    /// For information.
    Info,
}

/// Where a finding's evidence stands: matched in the log, or checked against the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceTier {
    /// Matched by the rule's patterns.
    #[default]
    Pattern,
    /// A replay of the tensor snapshot confirmed the failure: a cause, or an observation its
    /// causes share.
    Confirmed,
    /// A replay of the tensor snapshot refuted the causes it checked.
    Refuted,
}

/// What produced a finding: a rule written for the failure's wording, or a class detector that
/// recognized the class by its vocabulary (a sign that a specific rule should be written, with
/// the log as its example).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingOrigin {
    /// A specific rule (`rules/<area>/*.toml`).
    #[default]
    Rule,
    /// A class detector (`rules/detect/*.toml`), run only over a log no specific rule explains;
    /// never at high confidence.
    Detector,
}

/// One line of the log that supports a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceLine {
    /// Original line number.
    pub line: u64,
    /// The normalized text of the line.
    pub text: String,
    /// Rank that printed it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// How many lines like it the log holds (repeats folded), when more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
}

/// A check the replay worker can run on a tensor snapshot to confirm or refute a cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySpec {
    /// Check name (`target_bounds`, `index_bounds`, `finite`, `gemm`, …).
    pub check: String,
    /// Parameters of the check; values may reference captures as `{name}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// A possible cause, ranked within its finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// Short statement of the cause.
    pub title: Text,
    /// Explanation, with captured values filled in.
    pub detail: Text,
    /// How to confirm it on a snapshot, when the replay worker can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySpec>,
    /// What the replay of a snapshot said about it, once one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ReplayOutcome>,
}

/// What a replay check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The data shows the suspected cause (an offending value was found).
    Confirmed,
    /// The data rules the cause out (every value checked is fine).
    Refuted,
    /// A cause's only: the data shows what the cause would produce (labels out of range), but
    /// other causes sharing that observation would produce it too, and nothing in the offending
    /// values tells them apart. Never a check's own verdict.
    Consistent,
    /// The check could not decide (a tensor or a parameter is missing).
    Inconclusive,
}

/// A replay check's verdict on one cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayOutcome {
    /// The verdict.
    pub verdict: Verdict,
    /// One sentence with the offending values (`labels[3] = 2 >= num_classes = 2 (7 of 512 values out of range)`).
    pub summary: String,
    /// Where it ran (`cpu`, `gpu:NVIDIA H100`).
    pub backend: String,
}

/// What a replay said of the diagnosis as a whole: one verdict, the causes a check decided with
/// the value that decided each, and one line for every cause no check could decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// Confirmed when a cause or a shared observation was confirmed; refuted only when every cause that names a check was
    /// refuted; inconclusive otherwise (a cause could not be checked, so none is ruled out).
    pub verdict: Verdict,
    /// The causes a check decided: confirmed first, then refuted.
    pub decided: Vec<DecidedCause>,
    /// Observations the data confirmed that several causes share, each reported once with the
    /// causes consistent with it (none of them confirmed alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<SharedObservation>,
    /// The causes no check could decide (their titles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<String>,
    /// What would let them run: metadata keys or `--param` names (`vocab_size`,
    /// `max_position_embeddings`, `role.input_ids`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Where the checks ran.
    pub backend: String,
}

/// A cause a replay check decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedCause {
    /// The cause's title.
    pub cause: String,
    /// Confirmed or refuted.
    pub verdict: Verdict,
    /// The value that decided it.
    pub summary: String,
}

/// What the data showed that several causes would produce alike (`labels[1, 10] = 100 >=
/// vocab_size = 100`), and those causes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedObservation {
    /// The observation, with the value that decided it.
    pub summary: String,
    /// The causes consistent with it, which the data does not tell apart.
    pub causes: Vec<String>,
}

/// A concrete step to fix the failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// What to do.
    pub title: Text,
    /// Code that does it, when code helps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Text>,
}

/// One known failure found in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Rule id (`cuda.assert_index_select`).
    pub rule: String,
    /// Taxonomy class (`cuda.device_assert.index`).
    pub class: String,
    /// Rule title.
    pub title: Text,
    /// Plain-words summary with captured values filled in.
    pub summary: String,
    /// Severity.
    pub severity: Severity,
    /// Role after ranking (a root that yielded to another root becomes a symptom).
    pub role: Role,
    /// A specific rule's finding, or a class detector's.
    #[serde(default)]
    pub origin: FindingOrigin,
    /// The rule id of the root cause this finding is a symptom of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symptom_of: Option<String>,
    /// Confidence.
    pub confidence: Confidence,
    /// Why this confidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confidence_reasons: Vec<String>,
    /// Evidence tier.
    #[serde(default)]
    pub tier: EvidenceTier,
    /// Rule priority (ties between findings of the same role).
    pub priority: i32,
    /// Log lines that support it.
    pub evidence: Vec<EvidenceLine>,
    /// Values extracted from the log.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub captures: BTreeMap<String, String>,
    /// Possible causes, most likely first.
    pub causes: Vec<Cause>,
    /// Fixes, in the order to try them.
    pub fixes: Vec<Fix>,
    /// The next artifact that would tell the remaining causes apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_artifact: Option<Text>,
    /// Further reading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Text>,
}

/// The analysis of one log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Format version of this document.
    pub format_version: u32,
    /// Lines in the log.
    pub lines: u64,
    /// Bytes in the log.
    pub bytes: u64,
    /// Groups incidents of the same failure (class, masked message, top in-app frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Findings, root causes first.
    pub findings: Vec<Finding>,
    /// In a log with no diagnosis (no root cause or symptom), the exception its last traceback
    /// ends with, when no finding has it as evidence: where to look first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained_error: Option<EvidenceLine>,
    /// Versions and GPUs named in the log (`torch`, `cuda`, `gpu`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, Vec<String>>,
    /// Problems met while reading the log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// What a replay of the failing step's tensors said, once one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySummary>,
}

impl Diagnosis {
    /// The finding to show first, if any.
    pub fn primary(&self) -> Option<&Finding> {
        self.findings.first()
    }

    /// Whether a root cause or a symptom was found (context alone is no diagnosis).
    pub fn is_diagnosed(&self) -> bool {
        self.findings.iter().any(|f| f.role != Role::Context)
    }
}
