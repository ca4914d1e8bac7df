//! The checks: what each one asks of a snapshot, and how its scans become a verdict.
//!
//! A check is pure logic over [`Scan`]s, the one primitive every [`Backend`](super::Backend)
//! implements, so the CPU and the GPU give the same results by construction.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::snapshot::{DType, Snapshot, TensorRef};
use super::{Backend, CheckResult, Offense, ReplayError, Verdict};
use crate::model::ReplaySpec;

/// A check to run: its name and parameters (from a rule's `replay` part or the command line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSpec {
    /// `index_bounds`, `target_bounds`, `finite`, `value_range`, `consistency`, `gemm`.
    pub name: String,
    /// Parameters; an empty value means "not known, take it from the snapshot".
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

impl From<&ReplaySpec> for CheckSpec {
    fn from(spec: &ReplaySpec) -> Self {
        CheckSpec {
            name: spec.check.clone(),
            params: spec.params.clone(),
        }
    }
}

/// One pass over one tensor: which elements offend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scan {
    /// Integer (or bool) values outside `[lo, hi)` offend, except those equal to `skip`.
    IntRange {
        /// Smallest allowed value.
        lo: i64,
        /// One past the largest allowed value.
        hi: i64,
        /// A value always allowed (`ignore_index`).
        skip: Option<i64>,
    },
    /// Floating-point NaN and ±Inf offend.
    NonFinite,
    /// Floating-point values outside `[lo, hi]`, and NaN, offend.
    FloatRange {
        /// Smallest allowed value.
        lo: f64,
        /// Largest allowed value.
        hi: f64,
    },
}

/// One element value, as read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    /// Integer and bool tensors (`uint64` above `i64::MAX` saturates).
    Int(i64),
    /// Floating-point tensors (f16 / bf16 widened).
    Float(f64),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) if v.is_nan() => f.write_str("nan"),
            Scalar::Float(v) if v.is_infinite() => f.write_str(if *v > 0.0 { "inf" } else { "-inf" }),
            Scalar::Float(v) => write!(f, "{v}"),
        }
    }
}

/// What a [`Scan`] found. Backends must agree on every field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanOutput {
    /// Elements read.
    pub elements: u64,
    /// Elements that offend.
    pub offending: u64,
    /// Smallest value (NaN excluded), `None` when the tensor is empty or all NaN.
    pub min: Option<Scalar>,
    /// Largest value (NaN excluded).
    pub max: Option<Scalar>,
    /// The first offending elements by flat (C-order) position, at most
    /// [`MAX_OFFENSES`](super::MAX_OFFENSES), ascending.
    pub first: Vec<(u64, Scalar)>,
}

/// A matrix multiply as cuBLAS would be called for it (column-major, as `torch` calls `cublasGemmEx`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmCall {
    /// Transpose A (`N` / `T`).
    pub transa: bool,
    /// Transpose B.
    pub transb: bool,
    /// Rows of op(A) and C.
    pub m: i64,
    /// Columns of op(B) and C.
    pub n: i64,
    /// Columns of op(A), rows of op(B).
    pub k: i64,
    /// Leading dimension of A.
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Leading dimension of C.
    pub ldc: i64,
    /// Element type of A.
    pub a_dtype: super::snapshot::DType,
    /// Element type of B.
    pub b_dtype: super::snapshot::DType,
}

/// One parameter of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    /// Its name.
    pub name: &'static str,
    /// Other names accepted for it (`vocab_size` for `size`).
    pub aliases: &'static [&'static str],
    /// Where its value comes from when not given.
    pub default: &'static str,
    /// What it means.
    pub help: &'static str,
}

/// A check: its name, what it shows and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckInfo {
    /// Name (`target_bounds`).
    pub name: &'static str,
    /// What it shows.
    pub help: &'static str,
    /// Its parameters.
    pub params: &'static [ParamInfo],
    /// Parameter families named per tensor (`dtype.` as in `dtype.labels = int64`).
    pub per_tensor: &'static [&'static str],
}

impl CheckInfo {
    /// Whether `param` is one of its parameters (a name, an alias or a per-tensor family).
    pub fn knows(&self, param: &str) -> bool {
        self.params
            .iter()
            .any(|p| p.name == param || p.aliases.contains(&param))
            || self
                .per_tensor
                .iter()
                .any(|prefix| param.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty()))
    }
}

const TENSOR_HELP: &str = "the tensor: a role (labels, logits, input_ids, …) or a tensor name";

/// Every check, with its parameters.
pub const CHECKS: &[CheckInfo] = &[
    CheckInfo {
        name: "index_bounds",
        help: "embedding / index_select / gather indices outside [0, size)",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "input_ids",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "size",
                aliases: &[
                    "vocab_size",
                    "num_embeddings",
                    "max_position_embeddings",
                    "type_vocab_size",
                    "num_classes",
                    "num_labels",
                ],
                default: "metadata (vocab_size for input_ids, max_position_embeddings for position_ids, …), else the rows of `weight`",
                help: "rows of the table indexed",
            },
            ParamInfo {
                name: "allow_negative",
                aliases: &[],
                default: "false",
                help: "whether -size..-1 are valid (advanced indexing t[idx] wraps them; embedding and index_select do not)",
            },
        ],
        per_tensor: &[],
    },
    CheckInfo {
        name: "target_bounds",
        help: "cross-entropy / NLL class targets outside [0, num_classes) that are not ignore_index",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "labels",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "num_classes",
                aliases: &["num_labels"],
                default: "metadata, else the class dim of `logits`",
                help: "number of classes (logits' class dim)",
            },
            ParamInfo {
                name: "ignore_index",
                aliases: &[],
                default: "metadata, else -100",
                help: "the target value the loss skips",
            },
            ParamInfo {
                name: "value",
                aliases: &[],
                default: "none",
                help: "the offending value the log printed (informational)",
            },
        ],
        per_tensor: &[],
    },
    CheckInfo {
        name: "finite",
        help: "NaN or ±Inf values",
        params: &[ParamInfo {
            name: "tensor",
            aliases: &[],
            default: "logits",
            help: TENSOR_HELP,
        }],
        per_tensor: &[],
    },
    CheckInfo {
        name: "value_range",
        help: "values outside [lo, hi] or NaN (BCE inputs and targets must lie in [0, 1])",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "input",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "lo",
                aliases: &[],
                default: "metadata, else 0",
                help: "smallest allowed value",
            },
            ParamInfo {
                name: "hi",
                aliases: &[],
                default: "metadata, else 1",
                help: "largest allowed value",
            },
        ],
        per_tensor: &[],
    },
    CheckInfo {
        name: "consistency",
        help: "dtype, device and shape agreement of the named tensors (logits [N, C] with labels [N])",
        params: &[
            ParamInfo {
                name: "tensors",
                aliases: &[],
                default: "logits,labels",
                help: "comma-separated roles or tensor names",
            },
            ParamInfo {
                name: "same_batch",
                aliases: &[],
                default: "true",
                help: "whether every tensor must have the same dim 0",
            },
        ],
        per_tensor: &["dtype.", "device."],
    },
    CheckInfo {
        name: "gemm",
        help: "a @ b judged as cuBLAS would: shapes, leading dimensions, dtypes, devices; the real call on the GPU",
        params: &[
            ParamInfo {
                name: "a",
                aliases: &[],
                default: "a",
                help: "left operand (role or tensor name)",
            },
            ParamInfo {
                name: "b",
                aliases: &[],
                default: "b",
                help: "right operand",
            },
            ParamInfo {
                name: "aspect",
                aliases: &[],
                default: "all",
                help: "what the cause blames: dtype, layout (shapes, strides, leading dimensions), size (32-bit limits), device, or all",
            },
        ],
        per_tensor: &["stride.", "device."],
    },
];

/// The check called `name`.
pub fn check_info(name: &str) -> Option<&'static CheckInfo> {
    CHECKS.iter().find(|c| c.name == name)
}

/// The known checks and their parameters, as text (for `faultline replay --list-checks`).
pub fn describe_checks() -> String {
    let mut out = String::new();
    for check in CHECKS {
        out.push_str(&format!("{}: {}\n", check.name, check.help));
        for p in check.params {
            let aliases = if p.aliases.is_empty() {
                String::new()
            } else {
                format!(" (or {})", p.aliases.join(", "))
            };
            out.push_str(&format!(
                "    {}{aliases}: {}; default: {}\n",
                p.name, p.help, p.default
            ));
        }
        for prefix in check.per_tensor {
            out.push_str(&format!(
                "    {prefix}<tensor>: per tensor, from the snapshot metadata when not given\n"
            ));
        }
    }
    out
}

/// Runs `spec` on `snapshot`. An unknown check, an unknown or malformed parameter or a backend
/// failure is an error; a missing tensor or parameter is an inconclusive verdict saying what to add.
pub fn run(spec: &CheckSpec, snapshot: &Snapshot, backend: &dyn Backend) -> Result<CheckResult, ReplayError> {
    let info = check_info(&spec.name).ok_or_else(|| {
        let known: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
        ReplayError::Check(format!(
            "unknown check {:?} (known: {})",
            spec.name,
            known.join(", ")
        ))
    })?;
    if let Some(unknown) = spec.params.keys().find(|k| !info.knows(k)) {
        let known: Vec<&str> = info.params.iter().map(|p| p.name).collect();
        return Err(ReplayError::Check(format!(
            "check {} has no parameter {unknown:?} (known: {})",
            info.name,
            known.join(", ")
        )));
    }
    let mut ctx = Ctx {
        spec,
        snap: snapshot,
        backend,
        used: BTreeMap::new(),
    };
    let result = match info.name {
        "index_bounds" => index_bounds(&mut ctx)?,
        "target_bounds" => target_bounds(&mut ctx)?,
        "finite" => finite(&mut ctx)?,
        "value_range" => value_range(&mut ctx)?,
        "consistency" => consistency(&mut ctx)?,
        _ => gemm(&mut ctx)?,
    };
    Ok(result.finish(info.name, ctx))
}

/// The result of a check that could not run (`error` says why): inconclusive.
pub fn not_run(spec: &CheckSpec, backend: &dyn Backend, error: &ReplayError) -> CheckResult {
    CheckResult {
        check: spec.name.clone(),
        verdict: Verdict::Inconclusive,
        summary: format!("the check could not run: {error}"),
        tensor: None,
        elements: 0,
        offending: 0,
        min: None,
        max: None,
        first_offenses: Vec::new(),
        params: spec.params.clone(),
        backend: backend.name(),
    }
}

/// What a check found, before the common fields are filled in.
struct Found {
    verdict: Verdict,
    summary: String,
    tensor: Option<String>,
    scan: Option<(ScanOutput, Vec<u64>, DType)>,
    offending: u64,
}

impl Found {
    fn new(verdict: Verdict, summary: String) -> Self {
        Found {
            verdict,
            summary,
            tensor: None,
            scan: None,
            offending: 0,
        }
    }

    fn inconclusive(summary: String) -> Self {
        Found::new(Verdict::Inconclusive, summary)
    }

    /// With the scan of `tensor` attached.
    fn scanned(mut self, tensor: &TensorRef<'_>, out: ScanOutput) -> Self {
        self.tensor = Some(tensor.name.to_owned());
        self.offending = out.offending;
        self.scan = Some((out, tensor.shape.to_vec(), tensor.dtype));
        self
    }

    fn finish(self, check: &str, ctx: Ctx<'_>) -> CheckResult {
        let (elements, min, max, first_offenses) = match self.scan {
            Some((out, shape, dtype)) => {
                let view = TensorRef {
                    name: "",
                    dtype,
                    shape: &shape,
                    bytes: &[],
                };
                let first = out
                    .first
                    .iter()
                    .map(|(flat, v)| Offense {
                        index: view.unravel(*flat),
                        value: show(*v, dtype),
                    })
                    .collect();
                (
                    out.elements,
                    out.min.map(|v| show(v, dtype)),
                    out.max.map(|v| show(v, dtype)),
                    first,
                )
            }
            None => (0, None, None, Vec::new()),
        };
        CheckResult {
            check: check.to_owned(),
            verdict: self.verdict,
            summary: self.summary,
            tensor: self.tensor,
            elements,
            offending: self.offending,
            min,
            max,
            first_offenses,
            params: ctx.used,
            backend: ctx.backend.name(),
        }
    }
}

/// Parameters and tensors as one check sees them.
struct Ctx<'a> {
    spec: &'a CheckSpec,
    snap: &'a Snapshot,
    backend: &'a dyn Backend,
    /// Parameters used, by their canonical name.
    used: BTreeMap<String, String>,
}

/// Where a parameter's value came from: the key it was given under, or how it was derived.
struct Param<T> {
    value: T,
    label: String,
}

impl<'a> Ctx<'a> {
    /// The first of `keys` with a value, in the spec, then in the snapshot's parameters.
    fn lookup(&self, keys: &[&str]) -> Option<(String, String)> {
        self.lookup_in(keys, keys)
    }

    /// The first of `given` with a value in the spec, else the first of `meta` in the snapshot's
    /// parameters.
    fn lookup_in(&self, given: &[&str], meta: &[&str]) -> Option<(String, String)> {
        let found = |k: &&str, v: Option<&str>| {
            v.map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| (k.to_string(), v.to_owned()))
        };
        given
            .iter()
            .find_map(|k| found(k, self.spec.params.get(*k).map(String::as_str)))
            .or_else(|| meta.iter().find_map(|k| found(k, self.snap.param(k))))
    }

    /// A text parameter (recorded under `name`), else `default`.
    fn text(&mut self, name: &str, default: &str) -> String {
        let value = self
            .lookup(&[name])
            .map_or_else(|| default.to_owned(), |(_, v)| v);
        self.used.insert(name.to_owned(), value.clone());
        value
    }

    /// An integer parameter under any of `keys`, recorded under `name`.
    fn int(&mut self, name: &str, keys: &[&str]) -> Result<Option<Param<i64>>, ReplayError> {
        self.int_in(name, keys, keys)
    }

    /// An integer parameter under any of `given` in the spec or of `meta` in the metadata.
    fn int_in(
        &mut self,
        name: &str,
        given: &[&str],
        meta: &[&str],
    ) -> Result<Option<Param<i64>>, ReplayError> {
        let Some((key, text)) = self.lookup_in(given, meta) else {
            return Ok(None);
        };
        let value = text
            .parse::<i64>()
            .map_err(|_| ReplayError::Check(format!("parameter {key} = {text:?} is not an integer")))?;
        self.used.insert(name.to_owned(), value.to_string());
        Ok(Some(Param { value, label: key }))
    }

    /// A number parameter, else `default`.
    fn float(&mut self, name: &str, default: f64) -> Result<f64, ReplayError> {
        let value =
            match self.lookup(&[name]) {
                Some((key, text)) => text.parse::<f64>().ok().filter(|v| !v.is_nan()).ok_or_else(|| {
                    ReplayError::Check(format!("parameter {key} = {text:?} is not a number"))
                })?,
                None => default,
            };
        self.used
            .insert(name.to_owned(), Scalar::Float(value).to_string());
        Ok(value)
    }

    /// A yes / no parameter, else `default`.
    fn flag(&mut self, name: &str, default: bool) -> Result<bool, ReplayError> {
        let value = match self.lookup(&[name]) {
            Some((key, text)) => match text.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => true,
                "false" | "0" | "no" => false,
                _ => {
                    return Err(ReplayError::Check(format!(
                        "parameter {key} = {text:?} is not true or false"
                    )));
                }
            },
            None => default,
        };
        self.used.insert(name.to_owned(), value.to_string());
        Ok(value)
    }

    /// The tensor the `tensor` parameter names (a role or a name), or why there is none.
    fn tensor(&mut self, default: &str) -> Result<TensorRef<'a>, String> {
        let role = self.text("tensor", default);
        self.find(&role).ok_or_else(|| self.missing(&role))
    }

    fn find(&self, role: &str) -> Option<TensorRef<'a>> {
        self.snap.by_role(role)
    }

    fn missing(&self, role: &str) -> String {
        let names: Vec<&str> = self.snap.tensors().map(|t| t.name).collect();
        let held = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        format!(
            "no {role} tensor in the snapshot (it holds: {held}); name it with --param tensor=NAME or the metadata key role.{role}"
        )
    }
}

/// `name[i, j]`, or `name` for a scalar.
fn at(name: &str, index: &[u64]) -> String {
    if index.is_empty() {
        return name.to_owned();
    }
    let parts: Vec<String> = index.iter().map(u64::to_string).collect();
    format!("{name}[{}]", parts.join(", "))
}

/// `name[i, j] = value` for the first offending element, and its value.
fn first_at(tensor: &TensorRef<'_>, out: &ScanOutput) -> Option<(String, Scalar)> {
    out.first.first().map(|&(flat, v)| {
        let place = at(tensor.name, &tensor.unravel(flat));
        (format!("{place} = {}", show(v, tensor.dtype)), v)
    })
}

/// A value as its tensor's dtype prints it (an f32 `1.7`, not its f64 widening).
fn show(v: Scalar, dtype: DType) -> String {
    match v {
        Scalar::Float(f) if matches!(dtype, DType::F16 | DType::BF16 | DType::F32) && f.is_finite() => {
            format!("{}", f as f32)
        }
        _ => v.to_string(),
    }
}

fn min_max(out: &ScanOutput, dtype: DType) -> String {
    match (out.min, out.max) {
        (Some(min), Some(max)) => format!("min {}, max {}", show(min, dtype), show(max, dtype)),
        _ => "no number".into(),
    }
}

/// How far out of `[lo, hi)` a value is, for the summary.
fn beyond(v: Scalar, lo: i64, hi: i64, hi_label: &str) -> String {
    match v {
        Scalar::Float(f) if f.is_nan() => "is NaN".into(),
        Scalar::Int(i) if i < lo => format!("< {lo}"),
        Scalar::Float(f) if f < lo as f64 => format!("< {lo}"),
        _ => format!(">= {hi_label} = {hi}"),
    }
}

/// What part of an out-of-range tensor lies below and above the range.
fn extremes(out: &ScanOutput, lo: i64, hi: i64) -> String {
    let low = out.min.filter(|m| {
        matches!(*m, Scalar::Int(v) if v < lo) || matches!(*m, Scalar::Float(v) if v < lo as f64)
    });
    let high = out.max.filter(|m| {
        matches!(*m, Scalar::Int(v) if v >= hi) || matches!(*m, Scalar::Float(v) if v >= hi as f64)
    });
    match (low, high) {
        (Some(l), Some(h)) => format!("; min {l}, max {h}"),
        (Some(l), None) => format!("; min {l}"),
        (None, Some(h)) => format!("; max {h}"),
        (None, None) => String::new(),
    }
}

/// The parameter names that give the size of the table `role` indexes, most telling first: an
/// embedding's rows (`num_embeddings`) before the config's `vocab_size`, which can disagree
/// with them after tokens were added.
fn size_keys(role: &str) -> Vec<&'static str> {
    let first: &[&'static str] = match role {
        "input_ids" | "decoder_input_ids" | "ids" | "tokens" => &["num_embeddings", "vocab_size"],
        "position_ids" => &["max_position_embeddings"],
        "token_type_ids" => &["type_vocab_size"],
        "labels" | "label" | "targets" | "target" => &["num_classes", "num_labels"],
        _ => &[],
    };
    let all = [
        "size",
        "vocab_size",
        "num_embeddings",
        "max_position_embeddings",
        "type_vocab_size",
        "num_classes",
        "num_labels",
    ];
    let mut keys = first.to_vec();
    // Generic names next; the names of other tables only when given in the spec.
    keys.push("size");
    keys.extend(all.iter().filter(|k| !first.contains(k) && **k != "size"));
    keys
}

fn index_bounds(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let tensor = match ctx.tensor("input_ids") {
        Ok(t) => t,
        Err(why) => return Ok(Found::inconclusive(why)),
    };
    let role = ctx.used.get("tensor").cloned().unwrap_or_default();
    let allow_negative = ctx.flag("allow_negative", false)?;
    // Metadata keys of other tables would give the wrong size: those count only from the spec.
    let keys = size_keys(&role);
    let own = keys
        .iter()
        .position(|k| *k == "size")
        .map_or(keys.len(), |i| i + 1);
    let size = match ctx.int_in("size", &keys, &keys[..own])? {
        Some(p) => Some(p),
        None => derived_size(ctx, &role, &tensor),
    };
    if let Some(p) = &size {
        ctx.used.insert("size".into(), p.value.to_string());
    }
    let name = tensor.name;
    let Some(size) = size else {
        // Without a size, negative indices still prove the cause when they are not allowed.
        let lo = if allow_negative { i64::MIN } else { 0 };
        let out = ctx.backend.scan(
            tensor,
            Scan::IntRange {
                lo,
                hi: i64::MAX,
                skip: None,
            },
        )?;
        let found = match first_at(&tensor, &out) {
            Some((place, _)) if !allow_negative && !tensor.dtype.is_float() => Found::new(
                Verdict::Confirmed,
                format!(
                    "{place} < 0 ({} of {} values negative; {})",
                    out.offending,
                    out.elements,
                    min_max(&out, tensor.dtype)
                ),
            ),
            _ => Found::inconclusive(format!(
                "no size for {name}: add vocab_size (or num_embeddings / size) to the snapshot metadata or pass --param size=N ({name}: {})",
                min_max(&out, tensor.dtype)
            )),
        };
        return Ok(found.scanned(&tensor, out));
    };
    let (lo, hi) = (if allow_negative { -size.value } else { 0 }, size.value);
    let out = ctx.backend.scan(tensor, Scan::IntRange { lo, hi, skip: None })?;
    let found = if tensor.dtype.is_float() {
        Found::inconclusive(format!(
            "{name} is {}: torch refuses float indices (they must be int64 or int32) before any bounds check, so this snapshot cannot show an out-of-range index; save the ids as integers ({} of {} values outside [{lo}, {hi}); {})",
            tensor.dtype.torch_name(),
            out.offending,
            out.elements,
            min_max(&out, tensor.dtype)
        ))
    } else if let Some((place, v)) = first_at(&tensor, &out) {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{place} {} ({} of {} values out of range{})",
                beyond(v, lo, hi, &size.label),
                out.offending,
                out.elements,
                extremes(&out, lo, hi)
            ),
        )
    } else if out.elements == 0 {
        Found::new(
            Verdict::Refuted,
            format!("{name} is empty; the assert comes from elsewhere"),
        )
    } else {
        Found::new(
            Verdict::Refuted,
            format!(
                "all {} {name} in [{lo}, {hi}); the assert comes from elsewhere",
                out.elements
            ),
        )
    };
    Ok(found.scanned(&tensor, out))
}

/// The size of the table `tensor` indexes, from the other tensors: the rows of `weight` for
/// token ids, the class dim of `logits` for labels.
fn derived_size(ctx: &Ctx<'_>, role: &str, tensor: &TensorRef<'_>) -> Option<Param<i64>> {
    match role {
        "position_ids" | "token_type_ids" => None,
        "labels" | "label" | "targets" | "target" => ctx
            .find("logits")
            .filter(|l| l.name != tensor.name)
            .and_then(|l| classes_of(&l, tensor)),
        _ => ctx
            .find("weight")
            .filter(|w| w.shape.len() == 2 && w.name != tensor.name)
            .and_then(|w| {
                let rows = i64::try_from(w.shape[0]).ok()?;
                Some(Param {
                    value: rows,
                    label: format!("len({})", w.name),
                })
            }),
    }
}

/// The number of classes the logits have, and where it was read (`logits.shape[1]`).
fn classes_of(logits: &TensorRef<'_>, labels: &TensorRef<'_>) -> Option<Param<i64>> {
    let shape = logits.shape;
    // torch's class dim is 1; an LM's [B, T, V] logits with [B, T] labels are flattened first.
    let lm = shape.len() > 2 && labels.shape == &shape[..shape.len() - 1];
    let dim = match shape.len() {
        0 => return None,
        1 => 0,
        n if lm => n - 1,
        _ => 1,
    };
    let label = if dim + 1 == shape.len() && dim > 1 {
        format!("{}.shape[-1]", logits.name)
    } else {
        format!("{}.shape[{dim}]", logits.name)
    };
    Some(Param {
        value: i64::try_from(shape[dim]).ok()?,
        label,
    })
}

fn target_bounds(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let labels = match ctx.tensor("labels") {
        Ok(t) => t,
        Err(why) => return Ok(Found::inconclusive(why)),
    };
    let ignore = ctx
        .int("ignore_index", &["ignore_index"])?
        .map_or(-100, |p| p.value);
    ctx.used.insert("ignore_index".into(), ignore.to_string());
    if let Some((_, value)) = ctx.lookup(&["value"]) {
        ctx.used.insert("value".into(), value);
    }
    let classes = match ctx.int("num_classes", &["num_classes", "num_labels"])? {
        Some(p) => Some(p),
        None => ctx
            .find("logits")
            .filter(|l| l.name != labels.name)
            .and_then(|l| classes_of(&l, &labels)),
    };
    if let Some(c) = &classes {
        ctx.used.insert("num_classes".into(), c.value.to_string());
    }
    let name = labels.name;
    let hi = classes.as_ref().map_or(i64::MAX, |c| c.value);
    let out = ctx.backend.scan(
        labels,
        Scan::IntRange {
            lo: 0,
            hi,
            skip: Some(ignore),
        },
    )?;
    if labels.dtype.is_float() {
        let found = Found::inconclusive(format!(
            "{name} is {}: cross_entropy reads float targets as class probabilities (shaped like the logits) or refuses them (\"expected scalar type Long\"); it never bounds-checks them, so this snapshot cannot show a label out of range; save the labels as int64 ({})",
            labels.dtype.torch_name(),
            min_max(&out, labels.dtype)
        ));
        return Ok(found.scanned(&labels, out));
    }
    let offense = first_at(&labels, &out).map(|(place, v)| {
        let why = match v {
            Scalar::Int(i) if i < 0 => format!("< 0 and not ignore_index {ignore}"),
            _ => format!(
                ">= {} = {hi}",
                classes.as_ref().map_or("num_classes", |c| c.label.as_str())
            ),
        };
        format!(
            "{place} {why} ({} of {} values out of range)",
            out.offending, out.elements
        )
    });
    let found = match (offense, &classes) {
        (Some(summary), _) => Found::new(Verdict::Confirmed, summary),
        (None, None) => Found::inconclusive(format!(
            "no num_classes: add it to the snapshot metadata or pass --param num_classes=N (no negative {name} other than ignore_index {ignore}; {})",
            min_max(&out, labels.dtype)
        )),
        (None, Some(_)) if out.elements == 0 => Found::new(
            Verdict::Refuted,
            format!("{name} is empty; the assert comes from elsewhere"),
        ),
        (None, Some(c)) => Found::new(
            Verdict::Refuted,
            format!(
                "all {} {name} in [0, {}) or ignore_index {ignore}; the assert comes from elsewhere",
                out.elements, c.value
            ),
        ),
    };
    Ok(found.scanned(&labels, out))
}

fn finite(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let tensor = match ctx.tensor("logits") {
        Ok(t) => t,
        Err(why) => return Ok(Found::inconclusive(why)),
    };
    let out = ctx.backend.scan(tensor, Scan::NonFinite)?;
    let name = tensor.name;
    let found = match first_at(&tensor, &out) {
        Some((place, _)) => Found::new(
            Verdict::Confirmed,
            format!(
                "{place} ({} of {} values are NaN or Inf)",
                out.offending, out.elements
            ),
        ),
        None if !tensor.dtype.is_float() => Found::new(
            Verdict::Refuted,
            format!(
                "{name} is {}: integers are always finite ({})",
                tensor.dtype.torch_name(),
                min_max(&out, tensor.dtype)
            ),
        ),
        None => Found::new(
            Verdict::Refuted,
            format!(
                "all {} {name} finite ({})",
                out.elements,
                min_max(&out, tensor.dtype)
            ),
        ),
    };
    Ok(found.scanned(&tensor, out))
}

fn value_range(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let tensor = match ctx.tensor("input") {
        Ok(t) => t,
        Err(why) => return Ok(Found::inconclusive(why)),
    };
    let lo = ctx.float("lo", 0.0)?;
    let hi = ctx.float("hi", 1.0)?;
    let out = ctx.backend.scan(tensor, Scan::FloatRange { lo, hi })?;
    let (name, lo_s, hi_s) = (tensor.name, Scalar::Float(lo), Scalar::Float(hi));
    let found = match first_at(&tensor, &out) {
        Some((place, v)) => {
            let why = match v {
                Scalar::Float(f) if f.is_nan() => "is NaN".to_owned(),
                Scalar::Float(f) if f < lo => format!("< {lo_s}"),
                Scalar::Int(i) if (i as f64) < lo => format!("< {lo_s}"),
                _ => format!("> {hi_s}"),
            };
            Found::new(
                Verdict::Confirmed,
                format!(
                    "{place} {why} ({} of {} values outside [{lo_s}, {hi_s}] or NaN; {})",
                    out.offending,
                    out.elements,
                    min_max(&out, tensor.dtype)
                ),
            )
        }
        None => Found::new(
            Verdict::Refuted,
            format!(
                "all {} {name} in [{lo_s}, {hi_s}] ({})",
                out.elements,
                min_max(&out, tensor.dtype)
            ),
        ),
    };
    Ok(found.scanned(&tensor, out))
}

/// A dtype as written (`int64`, `torch.long`, `float`).
fn parse_dtype(text: &str) -> Option<DType> {
    let t = text.trim().trim_start_matches("torch.").to_ascii_lowercase();
    let alias = match t.as_str() {
        "long" => "int64",
        "int" => "int32",
        "short" => "int16",
        "float" => "float32",
        "half" => "float16",
        "double" => "float64",
        other => other,
    };
    DType::ALL.into_iter().find(|d| d.torch_name() == alias)
}

/// A device as written; `cuda` alone is the current device, taken as `cuda:0`.
fn normalize_device(text: &str) -> String {
    let t = text.trim().to_ascii_lowercase();
    if t == "cuda" { "cuda:0".into() } else { t }
}

fn shape_text(shape: &[u64]) -> String {
    let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A per-tensor parameter (`dtype.labels`) under the role or the tensor's own name.
fn per_tensor(ctx: &mut Ctx<'_>, prefix: &str, role: &str, name: &str) -> Option<String> {
    let (role_key, name_key) = (format!("{prefix}.{role}"), format!("{prefix}.{name}"));
    // `dtype.labels` speaks of the tensor named `labels` when there is one, even if the role
    // `labels` was tied to another tensor (`role.labels = y`).
    let keys: &[&str] = if role != name && ctx.snap.tensor(role).is_some() {
        &[name_key.as_str()]
    } else {
        &[name_key.as_str(), role_key.as_str()]
    };
    let (key, value) = ctx.lookup(keys)?;
    ctx.used.insert(key, value.clone());
    Some(value)
}

fn consistency(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let list = ctx.text("tensors", "logits,labels");
    let same_batch = ctx.flag("same_batch", true)?;
    let mut present = Vec::new();
    let mut missing = Vec::new();
    for role in list.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        match ctx.find(role) {
            Some(t) => present.push((role.to_owned(), t)),
            None => missing.push(role.to_owned()),
        }
    }
    let mut problems = Vec::new();
    let mut devices = Vec::new();
    for (role, t) in &present {
        if let Some(expected) = per_tensor(ctx, "dtype", role, t.name) {
            let want = parse_dtype(&expected)
                .ok_or_else(|| ReplayError::Check(format!("dtype.{role} = {expected:?} is not a dtype")))?;
            if want != t.dtype {
                problems.push(format!(
                    "{} is {}, expected {}",
                    t.name,
                    t.dtype.torch_name(),
                    want.torch_name()
                ));
            }
        }
        if let Some(device) = per_tensor(ctx, "device", role, t.name) {
            devices.push((t.name, normalize_device(&device)));
        }
    }
    if devices.iter().any(|(_, d)| *d != devices[0].1) {
        let each: Vec<String> = devices.iter().map(|(n, d)| format!("{n} on {d}")).collect();
        problems.push(format!("mixed devices: {}", each.join(", ")));
    }
    let batched: Vec<&TensorRef<'_>> = present
        .iter()
        .map(|(_, t)| t)
        .filter(|t| !t.shape.is_empty())
        .collect();
    if same_batch && batched.iter().any(|t| t.shape[0] != batched[0].shape[0]) {
        let each: Vec<String> = batched
            .iter()
            .map(|t| format!("{} {}", t.name, t.shape[0]))
            .collect();
        problems.push(format!("batch sizes differ: {}", each.join(", ")));
    }
    let logits = present.iter().find(|(r, _)| r == "logits").map(|(_, t)| *t);
    let labels = present.iter().find(|(r, _)| r == "labels").map(|(_, t)| *t);
    if let (Some(logits), Some(labels)) = (logits, labels) {
        problems.extend(cross_entropy_shapes(&logits, &labels));
    }
    let names: Vec<&str> = present.iter().map(|(_, t)| t.name).collect();
    let mut found = if !problems.is_empty() {
        let mut f = Found::new(Verdict::Confirmed, problems.join("; "));
        f.offending = problems.len() as u64;
        f
    } else if !missing.is_empty() {
        Found::inconclusive(ctx.missing(&missing[0]))
    } else if present.is_empty() {
        Found::inconclusive("no tensors named: pass --param tensors=a,b".into())
    } else {
        let each: Vec<String> = present
            .iter()
            .map(|(_, t)| {
                let on = devices
                    .iter()
                    .find(|(n, _)| *n == t.name)
                    .map_or(String::new(), |(_, d)| format!(" on {d}"));
                format!("{} {} {}{on}", t.name, shape_text(t.shape), t.dtype.torch_name())
            })
            .collect();
        let unknown = if devices.len() < present.len() {
            " (devices not all recorded)"
        } else {
            ""
        };
        Found::new(
            Verdict::Refuted,
            format!("{}: dtypes, devices and shapes agree{unknown}", each.join(", ")),
        )
    };
    found.tensor = (!names.is_empty()).then(|| names.join(","));
    Ok(found)
}

/// What cross_entropy would refuse in the shapes and dtypes of `logits` and `labels`.
fn cross_entropy_shapes(logits: &TensorRef<'_>, labels: &TensorRef<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    if labels.dtype.is_float() {
        if labels.shape != logits.shape {
            problems.push(format!(
                "{} {} is {} (class probabilities) but not shaped like {} {}",
                labels.name,
                shape_text(labels.shape),
                labels.dtype.torch_name(),
                logits.name,
                shape_text(logits.shape)
            ));
        }
        return problems;
    }
    if labels.dtype != DType::I64 {
        problems.push(format!(
            "{} is {}: cross_entropy wants int64 (torch.long) class indices",
            labels.name,
            labels.dtype.torch_name()
        ));
    }
    let mut expected = logits.shape.to_vec();
    if !expected.is_empty() {
        expected.remove(if expected.len() == 1 { 0 } else { 1 });
    }
    if labels.shape != expected.as_slice() {
        problems.push(format!(
            "{} {} does not match {} {} without its class dim ({}): flatten both (logits.view(-1, C), labels.view(-1)) or move the class dim to 1",
            labels.name, shape_text(labels.shape), logits.name, shape_text(logits.shape), shape_text(&expected)
        ));
    }
    problems
}

/// One operand of a matmul: its matrix (last two dims) and how it lies in memory.
struct Operand {
    rows: i64,
    cols: i64,
    /// Stored column by column (a transposed view).
    col_major: bool,
    /// Leading dimension.
    ld: i64,
}

fn operand(ctx: &mut Ctx<'_>, role: &str, t: &TensorRef<'_>) -> Result<Operand, ReplayError> {
    let n = t.shape.len();
    let dim = |d: u64| i64::try_from(d).unwrap_or(i64::MAX);
    let (rows, cols) = (dim(t.shape[n - 2]), dim(t.shape[n - 1]));
    let strides = match per_tensor(ctx, "stride", role, t.name) {
        Some(text) => {
            let parsed: Result<Vec<i64>, _> = text
                .trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')')
                .split(',')
                .map(|s| s.trim().parse::<i64>())
                .collect();
            match parsed {
                Ok(s) if s.len() == n => (s[n - 2], s[n - 1]),
                _ => {
                    return Err(ReplayError::Check(format!(
                        "stride.{role} = {text:?} is not {n} comma-separated integers"
                    )));
                }
            }
        }
        None => (cols, 1),
    };
    Ok(match strides {
        (s0, 1) => Operand {
            rows,
            cols,
            col_major: false,
            ld: s0,
        },
        (1, s1) => Operand {
            rows,
            cols,
            col_major: true,
            ld: s1,
        },
        // torch copies any other layout to a contiguous one before calling cuBLAS.
        _ => Operand {
            rows,
            cols,
            col_major: false,
            ld: cols,
        },
    })
}

/// What cuBLAS would refuse in `call` (its own argument checks).
pub fn judge_gemm(call: &GemmCall) -> Vec<GemmProblem> {
    let mut problems = Vec::new();
    let max = i64::from(i32::MAX);
    for (name, v) in [
        ("m", call.m),
        ("n", call.n),
        ("k", call.k),
        ("lda", call.lda),
        ("ldb", call.ldb),
        ("ldc", call.ldc),
    ] {
        if v < 0 {
            problems.push(GemmProblem::new(GemmAspect::Layout, format!("{name} = {v} < 0")));
        } else if v > max {
            problems.push(GemmProblem::new(
                GemmAspect::Size,
                format!("{name} = {v} exceeds the 32-bit int cuBLAS takes ({max})"),
            ));
        }
    }
    let need_a = if call.transa { call.k } else { call.m };
    let need_b = if call.transb { call.n } else { call.k };
    for (name, ld, need) in [
        ("lda", call.lda, need_a),
        ("ldb", call.ldb, need_b),
        ("ldc", call.ldc, call.m),
    ] {
        if ld < need.max(1) {
            problems.push(GemmProblem::new(
                GemmAspect::Layout,
                format!(
                    "{name} = {ld} < {} (cuBLAS needs at least the rows it reads)",
                    need.max(1)
                ),
            ));
        }
    }
    if call.a_dtype != call.b_dtype {
        problems.push(GemmProblem::new(
            GemmAspect::Dtype,
            format!(
                "operand dtypes differ ({} and {})",
                call.b_dtype.torch_name(),
                call.a_dtype.torch_name()
            ),
        ));
    } else if !matches!(call.a_dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
        problems.push(GemmProblem::new(
            GemmAspect::Dtype,
            format!(
                "{} is not a dtype torch multiplies with cuBLAS (float16, bfloat16, float32, float64)",
                call.a_dtype.torch_name()
            ),
        ));
    }
    problems
}

/// What a cuBLAS argument problem is about, so a rule's cause can blame one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmAspect {
    /// Operand dtypes (mixed, or not a cuBLAS type).
    Dtype,
    /// Shapes, strides and leading dimensions.
    Layout,
    /// Sizes past the 32-bit integers cuBLAS takes.
    Size,
    /// Operands on different devices.
    Device,
}

impl GemmAspect {
    /// The `aspect` parameter's value for it.
    pub fn name(self) -> &'static str {
        match self {
            GemmAspect::Dtype => "dtype",
            GemmAspect::Layout => "layout",
            GemmAspect::Size => "size",
            GemmAspect::Device => "device",
        }
    }
}

/// One reason cuBLAS (or torch before it) refuses a matrix multiply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemmProblem {
    /// What it is about.
    pub aspect: GemmAspect,
    /// What is wrong, in one phrase.
    pub text: String,
}

impl GemmProblem {
    fn new(aspect: GemmAspect, text: String) -> Self {
        GemmProblem { aspect, text }
    }
}

fn gemm_text(c: &GemmCall) -> String {
    let op = |t: bool| if t { "T" } else { "N" };
    format!(
        "cublasGemmEx(transa={}, transb={}, m={}, n={}, k={}, lda={}, ldb={}, ldc={})",
        op(c.transa),
        op(c.transb),
        c.m,
        c.n,
        c.k,
        c.lda,
        c.ldb,
        c.ldc
    )
}

fn gemm(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let a_role = ctx.text("a", "a");
    let b_role = ctx.text("b", "b");
    let focus = ctx.text("aspect", "all");
    if focus != "all"
        && ![
            GemmAspect::Dtype,
            GemmAspect::Layout,
            GemmAspect::Size,
            GemmAspect::Device,
        ]
        .iter()
        .any(|a| a.name() == focus)
    {
        return Err(ReplayError::Check(format!(
            "aspect = {focus:?}: expected dtype, layout, size, device or all"
        )));
    }
    let (a, b) = match (ctx.find(&a_role), ctx.find(&b_role)) {
        (Some(a), Some(b)) => (a, b),
        (None, _) => return Ok(Found::inconclusive(ctx.missing(&a_role))),
        (_, None) => return Ok(Found::inconclusive(ctx.missing(&b_role))),
    };
    let what = format!(
        "{} {} @ {} {}",
        a.name,
        shape_text(a.shape),
        b.name,
        shape_text(b.shape)
    );
    let pair = format!("{},{}", a.name, b.name);
    let with = |mut f: Found| {
        f.tensor = Some(pair.clone());
        Ok(f)
    };
    if let Some(t) = [a, b].into_iter().find(|t| t.shape.len() < 2) {
        return with(Found::inconclusive(format!(
            "{what}: {} has {} dims, so torch uses a matrix-vector or dot product, not gemm",
            t.name,
            t.shape.len()
        )));
    }
    let mut problems = Vec::new();
    let devices: Vec<Option<String>> = [(&a_role, a), (&b_role, b)]
        .into_iter()
        .map(|(r, t)| per_tensor(ctx, "device", r, t.name).map(|d| normalize_device(&d)))
        .collect();
    if let [Some(da), Some(db)] = devices.as_slice() {
        if da != db {
            problems.push(GemmProblem::new(
                GemmAspect::Device,
                format!("mixed devices: {} on {da}, {} on {db}", a.name, b.name),
            ));
        } else if !da.starts_with("cuda") {
            return with(Found::inconclusive(format!(
                "{what}: both on {da}, so no cuBLAS call was made"
            )));
        }
    }
    let (pa, pb) = (operand(ctx, &a_role, &a)?, operand(ctx, &b_role, &b)?);
    let (ba, bb) = (&a.shape[..a.shape.len() - 2], &b.shape[..b.shape.len() - 2]);
    let broadcast = ba
        .iter()
        .rev()
        .zip(bb.iter().rev())
        .all(|(x, y)| x == y || *x == 1 || *y == 1);
    if !broadcast {
        problems.push(GemmProblem::new(
            GemmAspect::Layout,
            format!(
                "batch dims {} and {} do not broadcast",
                shape_text(ba),
                shape_text(bb)
            ),
        ));
    }
    if pa.cols != pb.rows {
        problems.push(GemmProblem::new(
            GemmAspect::Layout,
            format!(
                "inner dimensions differ ({} vs {}): torch refuses it before cuBLAS (\"shapes cannot be multiplied\")",
                pa.cols, pb.rows
            ),
        ));
        return with(gemm_verdict(&what, &focus, &problems, None, String::new()));
    }
    // Row-major C = A @ B is column-major C^T = B^T A^T: cuBLAS's A is b, its B is a.
    let call = GemmCall {
        transa: pb.col_major,
        transb: pa.col_major,
        m: pb.cols,
        n: pa.rows,
        k: pa.cols,
        lda: pb.ld,
        ldb: pa.ld,
        ldc: pb.cols,
        a_dtype: b.dtype,
        b_dtype: a.dtype,
    };
    problems.extend(judge_gemm(&call));
    let mut real = String::new();
    let mut failed_status = None;
    if call.m > 0 && call.n > 0 && call.k > 0 && problems.is_empty() {
        match ctx.backend.gemm_status(&call) {
            Some(Ok(status)) => {
                real = format!("; the real call returned {status}");
                if status != "CUBLAS_STATUS_SUCCESS" {
                    failed_status = Some(status);
                }
            }
            Some(Err(e)) => real = format!("; the real call could not be made: {e}"),
            None => {}
        }
    }
    let call_text = gemm_text(&call);
    let mut found = if problems.is_empty() && failed_status.is_none() {
        if call.m == 0 || call.n == 0 || call.k == 0 {
            Found::new(
                Verdict::Refuted,
                format!("{what} is an empty product: torch makes no cuBLAS call"),
            )
        } else {
            let unknown = if devices.iter().any(Option::is_none) {
                " (devices not recorded)"
            } else {
                ""
            };
            Found::new(
                Verdict::Refuted,
                format!(
                    "{what} ({}) is a valid call: {call_text}{real}; the cuBLAS error comes from elsewhere{unknown}",
                    a.dtype.torch_name()
                ),
            )
        }
    } else {
        gemm_verdict(
            &what,
            &focus,
            &problems,
            failed_status.as_deref(),
            format!(" in {call_text}{real}"),
        )
    };
    if found.verdict == Verdict::Confirmed && found.offending == 0 {
        found.offending = 1;
    }
    with(found)
}

/// The verdict on the problems a gemm has, for a cause that blames `focus` (an aspect or `all`).
/// `status` is a failed status of the real call, when the GPU made one.
fn gemm_verdict(
    what: &str,
    focus: &str,
    problems: &[GemmProblem],
    status: Option<&str>,
    context: String,
) -> Found {
    let (mine, others): (Vec<&GemmProblem>, Vec<&GemmProblem>) = problems
        .iter()
        .partition(|p| focus == "all" || p.aspect.name() == focus);
    let join = |list: &[&GemmProblem]| {
        list.iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !mine.is_empty() {
        let mut f = Found::new(Verdict::Confirmed, format!("{what}: {}{context}", join(&mine)));
        f.offending = mine.len() as u64;
        return f;
    }
    match (status, others.is_empty()) {
        (Some(status), true) if focus == "all" => Found::new(
            Verdict::Confirmed,
            format!("{what}: cuBLAS returned {status}{context}"),
        ),
        (Some(status), true) => Found::inconclusive(format!(
            "{what}: cuBLAS returned {status}{context}, yet the operands' {focus} is valid"
        )),
        _ => Found::new(
            Verdict::Refuted,
            format!(
                "{what}: the operands' {focus} is valid; the call's problem is elsewhere: {}",
                join(&others)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::cpu::Cpu;
    use super::super::snapshot::Format;
    use super::*;

    type Tensor = (String, DType, Vec<u64>, Vec<u8>);

    fn ints(name: &str, dtype: DType, shape: &[u64], values: &[i64]) -> Tensor {
        let bytes = values
            .iter()
            .flat_map(|&v| match dtype {
                DType::I32 => (v as i32).to_le_bytes().to_vec(),
                _ => v.to_le_bytes().to_vec(),
            })
            .collect();
        (name.into(), dtype, shape.to_vec(), bytes)
    }

    fn floats(name: &str, shape: &[u64], values: &[f32]) -> Tensor {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (name.into(), DType::F32, shape.to_vec(), bytes)
    }

    fn zeros(name: &str, dtype: DType, shape: &[u64]) -> Tensor {
        let n: u64 = shape.iter().product();
        (
            name.into(),
            dtype,
            shape.to_vec(),
            vec![0; n as usize * dtype.size()],
        )
    }

    fn snapshot(tensors: Vec<Tensor>, params: &[(&str, &str)]) -> Snapshot {
        let params = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Snapshot::from_tensors(Format::Safetensors, tensors, params)
            .unwrap_or_else(|e| panic!("bad test snapshot: {e}"))
    }

    fn spec(name: &str, params: &[(&str, &str)]) -> CheckSpec {
        CheckSpec {
            name: name.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn check(spec: &CheckSpec, snap: &Snapshot) -> CheckResult {
        run(spec, snap, &Cpu::new()).unwrap_or_else(|e| panic!("check failed: {e}"))
    }

    /// 512 labels in [0, 2) but 7 of them (from position 3) equal to 2.
    fn binary_labels(bad: usize) -> Vec<i64> {
        let mut labels: Vec<i64> = (0..512).map(|i| i % 2).collect();
        for i in 0..bad {
            labels[3 + 10 * i] = 2;
        }
        labels
    }

    #[test]
    fn labels_at_num_classes_confirm_the_cause() {
        let snap = snapshot(
            vec![ints("labels", DType::I64, &[512], &binary_labels(7))],
            &[("num_classes", "2")],
        );
        let r = check(&spec("target_bounds", &[("tensor", "labels")]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert_eq!(
            r.summary,
            "labels[3] = 2 >= num_classes = 2 (7 of 512 values out of range)"
        );
        assert_eq!((r.elements, r.offending), (512, 7));
        assert_eq!(r.max.as_deref(), Some("2"));
        assert_eq!(
            r.first_offenses[1],
            Offense {
                index: vec![13],
                value: "2".into()
            }
        );
        assert_eq!(r.params.get("num_classes").map(String::as_str), Some("2"));
        assert_eq!(r.params.get("ignore_index").map(String::as_str), Some("-100"));
        assert_eq!(r.tensor.as_deref(), Some("labels"));
        assert_eq!(r.backend, "cpu");
    }

    #[test]
    fn labels_in_range_refute_the_cause() {
        let snap = snapshot(
            vec![ints("labels", DType::I64, &[512], &binary_labels(0))],
            &[("num_classes", "2")],
        );
        let r = check(&spec("target_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert_eq!(
            r.summary,
            "all 512 labels in [0, 2) or ignore_index -100; the assert comes from elsewhere"
        );
    }

    #[test]
    fn a_negative_label_that_is_not_ignore_index_is_named_as_such() {
        let snap = snapshot(
            vec![ints("y", DType::I64, &[4], &[0, -100, -1, 1])],
            &[("role.labels", "y")],
        );
        let r = check(&spec("target_bounds", &[("num_classes", "2")]), &snap);
        assert_eq!(
            r.summary,
            "y[2] = -1 < 0 and not ignore_index -100 (1 of 4 values out of range)"
        );
    }

    #[test]
    fn num_classes_comes_from_the_class_dim_of_the_logits() {
        let snap = snapshot(
            vec![
                zeros("logits", DType::F32, &[4, 3]),
                ints("labels", DType::I64, &[4], &[0, 1, 2, 3]),
            ],
            &[],
        );
        let r = check(&spec("target_bounds", &[("num_classes", "")]), &snap);
        assert_eq!(
            r.summary,
            "labels[3] = 3 >= logits.shape[1] = 3 (1 of 4 values out of range)"
        );
        assert_eq!(r.params.get("num_classes").map(String::as_str), Some("3"));
    }

    #[test]
    fn lm_logits_give_their_last_dim_when_labels_match_the_rest() {
        let snap = snapshot(
            vec![
                zeros("logits", DType::F16, &[1, 2, 5]),
                ints("labels", DType::I64, &[1, 2], &[4, 5]),
            ],
            &[],
        );
        let r = check(&spec("target_bounds", &[]), &snap);
        assert_eq!(
            r.summary,
            "labels[0, 1] = 5 >= logits.shape[-1] = 5 (1 of 2 values out of range)"
        );
    }

    #[test]
    fn without_num_classes_the_verdict_says_what_to_add() {
        let snap = snapshot(vec![ints("labels", DType::I64, &[3], &[0, 1, 7])], &[]);
        let r = check(&spec("target_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.summary
                .starts_with("no num_classes: add it to the snapshot metadata or pass --param num_classes=N"),
            "{}",
            r.summary
        );
        assert_eq!(r.max.as_deref(), Some("7"));
    }

    #[test]
    fn float_labels_are_inconclusive_with_the_dtype_reason() {
        let snap = snapshot(vec![floats("labels", &[2], &[0.0, 5.0])], &[("num_classes", "2")]);
        let r = check(&spec("target_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.summary
                .starts_with("labels is float32: cross_entropy reads float targets"),
            "{}",
            r.summary
        );
    }

    fn token_ids(bad: &[(usize, i64)]) -> Vec<i64> {
        let mut ids: Vec<i64> = (0..4096).map(|i| i * 7 % 50257).collect();
        for &(at, v) in bad {
            ids[at] = v;
        }
        ids
    }

    #[test]
    fn token_ids_past_the_vocabulary_confirm_the_cause() {
        let ids = token_ids(&[(17, 50257), (100, 50260), (2100, 50258)]);
        let snap = snapshot(
            vec![ints("input_ids", DType::I64, &[2, 2048], &ids)],
            &[("vocab_size", "50257"), ("size", "9")],
        );
        let r = check(&spec("index_bounds", &[("tensor", "input_ids")]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert_eq!(
            r.summary,
            "input_ids[0, 17] = 50257 >= vocab_size = 50257 (3 of 4096 values out of range; max 50260)"
        );
        assert_eq!(r.first_offenses[2].index, vec![1, 52]);
    }

    #[test]
    fn token_ids_in_range_refute_the_cause() {
        let snap = snapshot(
            vec![ints("input_ids", DType::I64, &[2, 2048], &token_ids(&[]))],
            &[("vocab_size", "50257")],
        );
        let r = check(&spec("index_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert_eq!(
            r.summary,
            "all 4096 input_ids in [0, 50257); the assert comes from elsewhere"
        );
    }

    #[test]
    fn the_table_size_comes_from_the_rows_of_weight() {
        let snap = snapshot(
            vec![
                ints("input_ids", DType::I32, &[3], &[0, 9, 10]),
                zeros("weight", DType::F32, &[10, 2]),
            ],
            &[],
        );
        let r = check(&spec("index_bounds", &[("size", "")]), &snap);
        assert_eq!(
            r.summary,
            "input_ids[2] = 10 >= len(weight) = 10 (1 of 3 values out of range; max 10)"
        );
        assert_eq!(r.params.get("size").map(String::as_str), Some("10"));
    }

    #[test]
    fn negative_ids_confirm_even_without_a_size_unless_allowed() {
        let snap = snapshot(vec![ints("input_ids", DType::I64, &[3], &[5, -100, 2])], &[]);
        let r = check(&spec("index_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert!(r.summary.starts_with("input_ids[1] = -100 < 0"), "{}", r.summary);
        let r = check(&spec("index_bounds", &[("allow_negative", "true")]), &snap);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.summary.starts_with("no size for input_ids"), "{}", r.summary);
        let r = check(
            &spec("index_bounds", &[("allow_negative", "true"), ("size", "6")]),
            &snap,
        );
        assert_eq!(
            r.summary,
            "input_ids[1] = -100 < -6 (1 of 3 values out of range; min -100)"
        );
    }

    #[test]
    fn position_ids_use_max_position_embeddings_not_the_vocabulary() {
        let snap = snapshot(
            vec![ints("position_ids", DType::I64, &[3], &[0, 511, 512])],
            &[("vocab_size", "30522"), ("max_position_embeddings", "512")],
        );
        let r = check(&spec("index_bounds", &[("tensor", "position_ids")]), &snap);
        assert_eq!(
            r.summary,
            "position_ids[2] = 512 >= max_position_embeddings = 512 (1 of 3 values out of range; max 512)"
        );
    }

    #[test]
    fn a_missing_tensor_is_inconclusive_and_names_what_the_snapshot_holds() {
        let snap = snapshot(vec![ints("ids", DType::I64, &[1], &[0])], &[]);
        let r = check(&spec("target_bounds", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.summary
                .starts_with("no labels tensor in the snapshot (it holds: ids)"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn nan_in_the_logits_confirms_finite_and_clean_logits_refute_it() {
        let snap = snapshot(vec![floats("logits", &[2, 2], &[0.5, -1.0, f32::NAN, 2.0])], &[]);
        let r = check(&spec("finite", &[("tensor", "logits")]), &snap);
        assert_eq!(r.summary, "logits[1, 0] = nan (1 of 4 values are NaN or Inf)");
        assert_eq!((r.min.as_deref(), r.max.as_deref()), (Some("-1"), Some("2")));
        let snap = snapshot(vec![floats("logits", &[2], &[0.5, -1.0])], &[]);
        let r = check(&spec("finite", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert_eq!(r.summary, "all 2 logits finite (min -1, max 0.5)");
    }

    #[test]
    fn bce_inputs_outside_zero_one_confirm_value_range() {
        let snap = snapshot(vec![floats("input", &[4], &[0.2, 1.7, -0.3, 1.0])], &[]);
        let r = check(
            &spec("value_range", &[("tensor", "input"), ("lo", "0"), ("hi", "1")]),
            &snap,
        );
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert_eq!(
            r.summary,
            "input[1] = 1.7 > 1 (2 of 4 values outside [0, 1] or NaN; min -0.3, max 1.7)"
        );
        let snap = snapshot(vec![floats("probs", &[2], &[0.0, 1.0])], &[]);
        let r = check(&spec("value_range", &[]), &snap);
        assert_eq!(r.summary, "all 2 probs in [0, 1] (min 0, max 1)");
    }

    #[test]
    fn mixed_devices_and_int32_labels_break_consistency() {
        let snap = snapshot(
            vec![
                zeros("logits", DType::F32, &[4, 3]),
                ints("labels", DType::I32, &[4], &[0, 1, 2, 0]),
            ],
            &[("device.logits", "cuda:0"), ("device.labels", "cpu")],
        );
        let r = check(&spec("consistency", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert_eq!(
            r.summary,
            "mixed devices: logits on cuda:0, labels on cpu; labels is int32: cross_entropy wants int64 (torch.long) class indices"
        );
        assert_eq!(r.offending, 2);
        assert_eq!(r.tensor.as_deref(), Some("logits,labels"));
    }

    #[test]
    fn lm_logits_with_unflattened_labels_break_consistency() {
        let snap = snapshot(
            vec![
                zeros("logits", DType::F32, &[2, 8, 5]),
                zeros("labels", DType::I64, &[2, 8]),
            ],
            &[],
        );
        let r = check(&spec("consistency", &[("dtype.labels", "torch.long")]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert!(
            r.summary
                .starts_with("labels [2, 8] does not match logits [2, 8, 5] without its class dim ([2, 5])"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn agreeing_tensors_refute_consistency() {
        let snap = snapshot(
            vec![
                zeros("logits", DType::F32, &[4, 3]),
                zeros("labels", DType::I64, &[4]),
            ],
            &[
                ("device.logits", "cuda"),
                ("device.labels", "cuda:0"),
                ("dtype.labels", "int64"),
            ],
        );
        let r = check(&spec("consistency", &[("tensors", "logits, labels")]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert_eq!(
            r.summary,
            "logits [4, 3] float32 on cuda:0, labels [4] int64 on cuda:0: dtypes, devices and shapes agree"
        );
    }

    #[test]
    fn per_tensor_metadata_belongs_to_the_tensor_of_that_name() {
        // `role.labels = y` ties the role to `y`; `dtype.labels` describes the tensor named labels.
        let snap = snapshot(
            vec![
                zeros("logits", DType::F32, &[4, 3]),
                zeros("y", DType::I64, &[4]),
                zeros("labels", DType::I32, &[4]),
            ],
            &[
                ("role.labels", "y"),
                ("dtype.labels", "int32"),
                ("dtype.y", "int64"),
            ],
        );
        let r = check(&spec("consistency", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted, "{}", r.summary);
    }

    /// A backend whose cuBLAS answers `status`.
    struct FakeGpu(&'static str);

    impl Backend for FakeGpu {
        fn name(&self) -> String {
            "gpu:fake".into()
        }
        fn scan(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError> {
            Cpu::new().scan(tensor, scan)
        }
        fn gemm_status(&self, _call: &GemmCall) -> Option<Result<String, ReplayError>> {
            Some(Ok(self.0.into()))
        }
    }

    #[test]
    fn a_valid_gemm_is_refuted_with_the_call_cublas_gets() {
        let snap = snapshot(
            vec![
                zeros("a", DType::F16, &[32, 64]),
                zeros("b", DType::F16, &[64, 16]),
            ],
            &[],
        );
        let r = check(&spec("gemm", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert!(
            r.summary
                .contains("cublasGemmEx(transa=N, transb=N, m=16, n=32, k=64, lda=16, ldb=64, ldc=16)"),
            "{}",
            r.summary
        );
        let r = run(&spec("gemm", &[]), &snap, &FakeGpu("CUBLAS_STATUS_SUCCESS"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            r.summary.contains("the real call returned CUBLAS_STATUS_SUCCESS"),
            "{}",
            r.summary
        );
        assert_eq!(r.backend, "gpu:fake");
    }

    #[test]
    fn a_failing_real_cublas_call_confirms_gemm() {
        let snap = snapshot(
            vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[3, 2])],
            &[],
        );
        let r = run(&spec("gemm", &[]), &snap, &FakeGpu("CUBLAS_STATUS_NOT_SUPPORTED"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert!(
            r.summary.contains("cuBLAS returned CUBLAS_STATUS_NOT_SUPPORTED"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn gemm_finds_inner_dims_dtypes_leading_dims_and_devices() {
        let snap = snapshot(
            vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[4, 2])],
            &[],
        );
        let r = check(&spec("gemm", &[]), &snap);
        assert!(
            r.summary.contains("inner dimensions differ (3 vs 4)"),
            "{}",
            r.summary
        );
        let snap = snapshot(
            vec![zeros("x", DType::F32, &[2, 3]), zeros("w", DType::F16, &[3, 4])],
            &[("stride.w", "2,1"), ("device.x", "cuda:0"), ("device.w", "cpu")],
        );
        let r = check(&spec("gemm", &[("a", "x"), ("b", "w")]), &snap);
        assert_eq!(r.verdict, Verdict::Confirmed);
        assert!(
            r.summary.contains("mixed devices: x on cuda:0, w on cpu"),
            "{}",
            r.summary
        );
        assert!(r.summary.contains("lda = 2 < 4"), "{}", r.summary);
        assert!(
            r.summary.contains("operand dtypes differ (float32 and float16)"),
            "{}",
            r.summary
        );
        assert_eq!(r.offending, 3);
    }

    #[test]
    fn a_cause_that_blames_one_aspect_is_confirmed_only_by_problems_of_that_aspect() {
        // A strided weight with a leading dimension cuBLAS refuses, in one dtype.
        let snap = snapshot(
            vec![zeros("x", DType::F16, &[2, 3]), zeros("w", DType::F16, &[3, 4])],
            &[("stride.w", "2,1")],
        );
        let blame = |aspect: &str| {
            check(
                &spec("gemm", &[("a", "x"), ("b", "w"), ("aspect", aspect)]),
                &snap,
            )
        };
        let layout = blame("layout");
        assert_eq!(layout.verdict, Verdict::Confirmed, "{}", layout.summary);
        assert!(layout.summary.contains("lda = 2 < 4"), "{}", layout.summary);
        let dtype = blame("dtype");
        assert_eq!(dtype.verdict, Verdict::Refuted, "{}", dtype.summary);
        assert!(
            dtype
                .summary
                .contains("the operands' dtype is valid; the call's problem is elsewhere: lda = 2 < 4"),
            "{}",
            dtype.summary
        );
        let failing = run(
            &spec("gemm", &[("aspect", "dtype")]),
            &snapshot(
                vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[3, 2])],
                &[],
            ),
            &FakeGpu("CUBLAS_STATUS_INVALID_VALUE"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(failing.verdict, Verdict::Inconclusive, "{}", failing.summary);
        let bad = run(&spec("gemm", &[("aspect", "colour")]), &snap, &Cpu::new());
        assert!(matches!(bad, Err(ReplayError::Check(m)) if m.contains("expected dtype, layout")));
    }

    #[test]
    fn a_transposed_operand_is_passed_with_op_t() {
        let snap = snapshot(
            vec![zeros("a", DType::BF16, &[8, 4]), zeros("b", DType::BF16, &[4, 6])],
            &[("stride.b", "[1, 4]")],
        );
        let r = check(&spec("gemm", &[]), &snap);
        assert_eq!(r.verdict, Verdict::Refuted);
        assert!(
            r.summary
                .contains("transa=T, transb=N, m=6, n=8, k=4, lda=4, ldb=4, ldc=6"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn unknown_checks_and_parameters_are_errors_that_list_the_known_ones() {
        let snap = snapshot(vec![], &[]);
        let err = run(&spec("bounds", &[]), &snap, &Cpu::new())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "unknown check \"bounds\" (known: index_bounds, target_bounds, finite, value_range, consistency, gemm)"
            )
        );
        let err = run(&spec("finite", &[("size", "3")]), &snap, &Cpu::new())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("check finite has no parameter \"size\" (known: tensor)")
        );
        let err = run(
            &spec("target_bounds", &[("num_classes", "two")]),
            &snapshot(vec![zeros("labels", DType::I64, &[1])], &[]),
            &Cpu::new(),
        );
        assert!(
            matches!(err, Err(ReplayError::Check(m)) if m == "parameter num_classes = \"two\" is not an integer")
        );
    }

    #[test]
    fn every_check_knows_its_aliases_and_per_tensor_families() {
        let known = |c: &str, p: &str| check_info(c).is_some_and(|i| i.knows(p));
        assert!(known("index_bounds", "vocab_size"));
        assert!(known("consistency", "dtype.labels"));
        assert!(known("gemm", "stride.a"));
        assert!(!known("gemm", "stride."));
        assert!(!known("finite", "lo"));
        assert!(describe_checks().contains("target_bounds: cross-entropy"));
    }
}
