//! `consistency`: the dtypes, devices and shapes of the tensors a rule names, judged together.

use super::{Ctx, Found, normalize_device, parse_dtype, per_tensor, shape_text};
use crate::replay::snapshot::{DType, TensorRef};
use crate::replay::{ReplayError, Verdict};

pub(super) fn consistency(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
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
