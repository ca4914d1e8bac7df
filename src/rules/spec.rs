//! The on-disk rule format (TOML), exactly as authors write it. Validation and compilation into
//! something the matcher can run happen in `compile`.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::{Confidence, Role, Severity};

/// One rule file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Dotted id; must equal the id derived from the file path (`rules/cuda/x.toml` → `cuda.x`).
    pub id: String,
    /// Taxonomy class (see `rules/taxonomy.toml`).
    pub class: String,
    /// Short title.
    pub title: String,
    /// Plain-words explanation; may use `{capture}` and `{capture|fallback}` placeholders.
    pub summary: String,
    /// Severity.
    pub severity: Severity,
    /// Ties between findings of the same role: higher wins.
    pub priority: i32,
    /// Root cause, symptom or context.
    pub role: Role,
    /// Confidence when the rule matches.
    pub confidence: Confidence,
    /// Class globs (`cuda.device_assert.*`) or `*` (any other class): when a root finding of
    /// such a class is present, this finding becomes its symptom.
    #[serde(default)]
    pub yields_to: Vec<String>,
    /// Free tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Conditions.
    #[serde(rename = "match")]
    pub conditions: MatchSpec,
    /// Named values to extract from lines: name → regex with one group (named like the value or
    /// the first group).
    #[serde(default)]
    pub extract: BTreeMap<String, String>,
    /// Possible causes, most likely first.
    #[serde(default, rename = "cause")]
    pub causes: Vec<CauseSpec>,
    /// Fixes, in the order to try them.
    #[serde(default, rename = "fix")]
    pub fixes: Vec<FixSpec>,
    /// What to capture next to tell the causes apart.
    #[serde(default)]
    pub next_artifact: Option<String>,
    /// Further reading.
    #[serde(default)]
    pub links: Vec<String>,
    /// The rule's own tests.
    #[serde(default, rename = "example")]
    pub examples: Vec<ExampleSpec>,
}

/// Conditions: every condition given must hold.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// At least one line matches one of these.
    #[serde(default)]
    pub any: Vec<String>,
    /// Each of these matches at least one line.
    #[serde(default)]
    pub all: Vec<String>,
    /// Each of these matches the same line as an `any` pattern: one line holds them all. Short
    /// patterns joined this way say what one pattern with gaps between its parts would, without
    /// the gaps' cost in the line set's automaton.
    #[serde(default)]
    pub same_line: Vec<String>,
    /// No line matches any of these.
    #[serde(default)]
    pub not: Vec<String>,
    /// Lines matching `all` must lie within this many lines of a line matching `any`.
    #[serde(default)]
    pub within: Option<u64>,
    /// The matched lines report that the run stopped (`non-finite loss, ending training`): at
    /// warning level they are the failure itself, and the confidence is not lowered for it.
    #[serde(default)]
    pub fatal_warning: bool,
    /// A traceback's exception matches.
    #[serde(default)]
    pub exception: Option<ExceptionSpec>,
    /// A CUDA device assertion matches.
    #[serde(default)]
    pub cuda_assert: Option<AssertSpec>,
    /// A CUDA runtime / driver error whose name or message matches this regex.
    #[serde(default)]
    pub cuda_error: Option<String>,
    /// A cuBLAS status (without `CUBLAS_STATUS_`) matching this regex, or a table with regexes on
    /// `status`, `call` (`cublasGemmEx`) and `dtypes` (the CUDA data types, comma-joined).
    #[serde(default)]
    pub cublas: Option<CublasSpec>,
    /// A cuDNN status or message matching this regex.
    #[serde(default)]
    pub cudnn: Option<String>,
    /// An NCCL event: `watchdog_timeout`, `warn`, or an error code (`ncclUnhandledCudaError`) regex.
    #[serde(default)]
    pub nccl: Option<String>,
    /// An out-of-memory report matching these figures.
    #[serde(default)]
    pub oom: Option<OomSpec>,
    /// A fact of this kind is present (`dtypes`, `devices`, `matmul_shapes`, …).
    #[serde(default)]
    pub fact: Option<String>,
    /// A traceback frame (in any traceback style) matches.
    #[serde(default)]
    pub frame: Option<FrameSpec>,
    /// Version ranges (`torch = ">=1.13, <2.1"`); a version absent from the log does not block
    /// unless `require_versions` is set.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// The versions named in `versions` must be printed in the log.
    #[serde(default)]
    pub require_versions: bool,
}

/// Condition on a cuBLAS event.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CublasSpec {
    /// A regex on the status.
    Status(String),
    /// Regexes on several fields.
    Fields(CublasFields),
}

/// Regexes on a cuBLAS event's fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CublasFields {
    /// Status without `CUBLAS_STATUS_`.
    pub status: Option<String>,
    /// The cuBLAS function.
    pub call: Option<String>,
    /// The data types, comma-joined (`CUDA_R_16BF, CUDA_R_32F`).
    pub dtypes: Option<String>,
}

/// Condition on a traceback frame.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameSpec {
    /// Regex on the frame's file.
    pub file: Option<String>,
    /// Regex on the frame's function.
    pub function: Option<String>,
}

/// Condition on a traceback's exception.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExceptionSpec {
    /// Regex on the exception type as printed (`torch\.OutOfMemoryError|RuntimeError`).
    #[serde(rename = "type")]
    pub type_name: Option<String>,
    /// Regex on the exception message.
    pub message: Option<String>,
}

/// Condition on a CUDA device assertion.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssertSpec {
    /// Regex on the kernel source file.
    pub file: Option<String>,
    /// Regex on the asserted expression.
    pub expression: Option<String>,
    /// Regex on the kernel function.
    pub function: Option<String>,
}

/// Condition on an out-of-memory report.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OomSpec {
    /// `gpu` or `host`.
    pub memory: Option<String>,
    /// Comparisons between figures, all of which must hold: `"tried > free"`,
    /// `"reserved_unallocated >= 0.2 * total"`, `"tried > 1 GiB"`.
    #[serde(default)]
    pub compare: Vec<String>,
}

/// A cause as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CauseSpec {
    /// Short statement.
    pub title: String,
    /// Explanation; may use placeholders.
    pub detail: String,
    /// How the replay worker confirms it.
    #[serde(default)]
    pub replay: Option<ReplayConfig>,
}

/// A replay check as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// Check name.
    pub check: String,
    /// Parameters; values may use placeholders.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// A fix as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixSpec {
    /// What to do.
    pub title: String,
    /// Code that does it.
    #[serde(default)]
    pub code: Option<String>,
}

/// One example: a log and what the rule must make of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExampleSpec {
    /// Name used in test reports.
    pub name: String,
    /// Where the log comes from (a URL), when it is real.
    #[serde(default)]
    pub source: Option<String>,
    /// The log.
    pub log: String,
    /// The expectation.
    pub expect: ExpectSpec,
}

/// What an example expects.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    /// Whether the rule must produce a finding.
    pub matched: bool,
    /// The finding must be the diagnosis's primary finding.
    #[serde(default)]
    pub primary: bool,
    /// Captured values that must be present with these values.
    #[serde(default)]
    pub captures: BTreeMap<String, String>,
}

/// `rules/taxonomy.toml`: the classes rules may use.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaxonomySpec {
    /// The classes.
    #[serde(rename = "class")]
    pub classes: Vec<ClassSpec>,
}

/// A taxonomy class.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Dotted id (`cuda.device_assert.index`).
    pub id: String,
    /// What it means.
    pub description: String,
    /// The failure lies in the program's own tensors, data or checkpoint (their shapes, dtypes,
    /// devices, indices, values): an environment problem that a warning before it names did not
    /// cause it.
    #[serde(default)]
    pub program_error: bool,
}
