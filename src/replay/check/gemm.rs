//! `gemm`: a matrix multiply's operands judged as cuBLAS would judge them, and on the GPU the
//! real call.

use super::{Ctx, Found, GemmCall, normalize_device, per_tensor, shape_text};
use crate::replay::snapshot::{DType, TensorRef};
use crate::replay::{ReplayError, Verdict};

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

pub(super) fn gemm(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
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
