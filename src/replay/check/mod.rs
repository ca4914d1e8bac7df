//! The checks: what each one asks of a snapshot, and how its scans become a verdict.
//!
//! A check is pure logic over [`Scan`]s, the one primitive every [`Backend`](super::Backend)
//! implements, so the CPU and the GPU give the same results by construction.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::lookup::PositionLookup;
use super::snapshot::{DType, Snapshot, TensorRef};
use super::{Backend, CheckResult, Offense, ReplayError, Verdict};
use crate::model::ReplaySpec;

mod bounds;
mod catalog;
mod consistency;
mod embedding;
mod frames;
mod gemm;
mod values;
mod width;

pub(crate) use bounds::size_keys;
use bounds::{index_bounds, target_bounds};
pub use catalog::{CHECKS, Check, CheckInfo, ParamInfo, check_info, describe_checks};
use consistency::consistency;
pub(crate) use frames::Frames;
use gemm::gemm;
pub use gemm::{GemmAspect, GemmProblem, judge_gemm};
use values::{finite, value_range};
pub(crate) use width::DEFAULT_TENSORS as DEFAULT_HIDDEN_SIZE_TENSORS;
use width::hidden_size;

/// A check to run: its name and parameters (from a rule's `replay` part or the command line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSpec {
    /// `index_bounds`, `target_bounds`, `finite`, `value_range`, `consistency`, `gemm`,
    /// `hidden_size`.
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
    let result = match info.check {
        Check::IndexBounds => index_bounds(&mut ctx)?,
        Check::TargetBounds => target_bounds(&mut ctx)?,
        Check::Finite => finite(&mut ctx)?,
        Check::ValueRange => value_range(&mut ctx)?,
        Check::Consistency => consistency(&mut ctx)?,
        Check::Gemm => gemm(&mut ctx)?,
        Check::HiddenSize => hidden_size(&mut ctx)?,
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
        positions: Vec::new(),
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
    /// The position lookups this verdict rests on.
    positions: Vec<PositionLookup>,
}

impl Found {
    fn new(verdict: Verdict, summary: String) -> Self {
        Found {
            verdict,
            summary,
            tensor: None,
            scan: None,
            offending: 0,
            positions: Vec::new(),
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

    /// With the position lookup it judged.
    fn looked_up(mut self, lookup: PositionLookup) -> Self {
        self.positions.push(lookup);
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
            positions: self.positions,
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

#[cfg(test)]
mod tests;
