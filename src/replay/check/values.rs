//! `finite` and `value_range`: NaN / Inf, and values outside `[lo, hi]`.

use super::{Ctx, Found, Scalar, Scan, first_at, min_max};
use crate::replay::{ReplayError, Verdict};

pub(super) fn finite(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
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

pub(super) fn value_range(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
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
