//! The checks: what each one asks of a snapshot, and how its scans become a verdict.
//!
//! A check is pure logic over [`Scan`]s, the one primitive every [`Backend`](super::Backend)
//! implements, so the CPU and the GPU give the same results by construction.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

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
