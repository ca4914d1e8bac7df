//! `index_bounds` and `target_bounds`: indices and class targets outside the table or the classes.
//!
//! This file owns the one-tensor checks and the table sizes; the ids of the word and the position
//! tables, which several tensors carry, are checked together in [`embedding`](super::embedding)
//! (`token_type_ids` alone feed theirs, and are checked here).

use super::embedding::Table;
use super::frames::Frames;
use super::{Ctx, Found, Param, Scalar, Scan, ScanOutput, first_at, min_max};
use crate::replay::snapshot::TensorRef;
use crate::replay::{ReplayError, Verdict};

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
fn extremes(out: &ScanOutput, lo: i64, hi: i64, skip: Option<i64>) -> String {
    let low = out.min.filter(|m| {
        matches!(*m, Scalar::Int(v) if v < lo && Some(v) != skip)
            || matches!(*m, Scalar::Float(v) if v < lo as f64)
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

/// Other names of the `size` parameter of `index_bounds`: the sizes of the tables a model indexes.
pub(crate) const TABLE_SIZE_ALIASES: [&str; 7] = [
    "vocab_size",
    "num_embeddings",
    "max_position_embeddings",
    "n_positions",
    "type_vocab_size",
    "num_classes",
    "num_labels",
];

/// The parameter names that give the size of the table `role` indexes, most telling first: an
/// embedding's rows (`num_embeddings`) before the config's `vocab_size`, which can disagree
/// with them after tokens were added.
pub(crate) fn size_keys(role: &str) -> Vec<&'static str> {
    let first: &[&'static str] = match role {
        "input_ids" | "decoder_input_ids" | "ids" | "tokens" => &["num_embeddings", "vocab_size"],
        "position_ids" => &["max_position_embeddings", "n_positions"],
        "token_type_ids" => &["type_vocab_size"],
        "labels" | "label" | "targets" | "target" => &["num_classes", "num_labels"],
        _ => &[],
    };
    let mut keys = first.to_vec();
    // Generic names next; the names of other tables only when given in the spec.
    keys.push("size");
    keys.extend(TABLE_SIZE_ALIASES.iter().filter(|k| !first.contains(k)));
    keys
}

/// The keys that give the size of the table `role` indexes, as a request (`vocab_size (or
/// num_embeddings / size)`).
fn size_hint(role: &str) -> String {
    let keys = size_keys(role);
    let own: Vec<&str> = keys.iter().copied().take_while(|k| *k != "size").collect();
    match own.as_slice() {
        [] => "size".to_owned(),
        ["num_embeddings", "vocab_size"] => "vocab_size (or num_embeddings / size)".to_owned(),
        [first, rest @ ..] => {
            let mut others: Vec<&str> = rest.to_vec();
            others.push("size");
            format!("{first} (or {})", others.join(" / "))
        }
    }
}

pub(super) fn index_bounds(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let role = ctx.text("tensor", "input_ids");
    // The ids of an embedding table: every tensor that indexes it is checked, not only this one.
    if let Some(table) = Table::of(&role) {
        return super::embedding::table_bounds(ctx, table, &role);
    }
    let Some(tensor) = ctx.find(&role) else {
        return Ok(Found::inconclusive(ctx.missing(&role)));
    };
    let allow_negative = ctx.flag("allow_negative", false)?;
    let size = table_size(ctx, &role, Some(tensor.name))?;
    if size.is_none()
        && matches!(role.as_str(), "labels" | "label" | "targets" | "target")
        && let Some((vocab, ignore, why)) = super::embedding::labels_as_tokens(ctx, &tensor)?
    {
        // A language model's labels index its vocabulary (and, shifted, its decoder's embedding):
        // one past it confirms. Within it they may still index something smaller.
        let mut found = ids_within(ctx, &tensor, &role, Some(&vocab), allow_negative, Some(ignore))?;
        if found.verdict == Verdict::Refuted {
            found.verdict = Verdict::Inconclusive;
            found.summary.push_str(&format!(
                " (the labels are token ids: {why}); what else they index is unknown: add num_classes (or num_labels / size) to the metadata or pass --param size=N"
            ));
        } else {
            found
                .summary
                .push_str(&format!("; the labels are token ids ({why})"));
        }
        return Ok(found);
    }
    let found = ids_within(ctx, &tensor, &role, size.as_ref(), allow_negative, None)?;
    Ok(elsewhere(found))
}

/// A refutation says where the assert must come from instead.
pub(super) fn elsewhere(mut found: Found) -> Found {
    if found.verdict == Verdict::Refuted {
        found.summary.push_str("; the assert comes from elsewhere");
    }
    found
}

/// The size of the table `role` indexes: the spec, the metadata (also under `model.KEY`, as the
/// capture helper writes a model's config), else the other tensors (the rows of `weight`).
/// `tensor` is the name of the tensor checked, never taken for its own table.
pub(super) fn table_size(
    ctx: &mut Ctx<'_>,
    role: &str,
    tensor: Option<&str>,
) -> Result<Option<Param<i64>>, ReplayError> {
    // Metadata keys of other tables would give the wrong size: those count only from the spec.
    let keys = size_keys(role);
    let own = keys
        .iter()
        .position(|k| *k == "size")
        .map_or(keys.len(), |i| i + 1);
    let prefixed: Vec<String> = keys[..own].iter().map(|k| format!("model.{k}")).collect();
    let mut meta: Vec<&str> = keys[..own].to_vec();
    meta.extend(prefixed.iter().map(String::as_str));
    let size = match ctx.int_in("size", &keys, &meta)? {
        Some(p) => Some(p),
        None => derived_size(ctx, role, tensor),
    };
    if let Some(p) = &size {
        ctx.used.insert("size".into(), p.value.to_string());
    }
    Ok(size)
}

/// One tensor of ids against `[0, size)` (`[-size, size)` when `allow_negative`), values equal to
/// `skip` allowed. Without a size, a negative id still confirms. A refutation's summary is the
/// bare fact (`all 512 input_ids in [0, 100)`): the caller says what it means.
pub(super) fn ids_within(
    ctx: &Ctx<'_>,
    tensor: &TensorRef<'_>,
    role: &str,
    size: Option<&Param<i64>>,
    allow_negative: bool,
    skip: Option<i64>,
) -> Result<Found, ReplayError> {
    let name = tensor.name;
    let or_skip = skip.map_or_else(String::new, |s| format!(" or ignore_index {s}"));
    let Some(size) = size else {
        // Without a size, negative indices still prove the cause when they are not allowed.
        let lo = if allow_negative { i64::MIN } else { 0 };
        let out = ctx.backend.scan(
            *tensor,
            Scan::IntRange {
                lo,
                hi: i64::MAX,
                skip,
            },
        )?;
        let found = match first_at(tensor, &out) {
            Some((place, _)) if !allow_negative && !tensor.dtype.is_float() => Found::new(
                Verdict::Confirmed,
                format!(
                    "{place} < 0{or_skip_not} ({} of {} values negative; {})",
                    out.offending,
                    out.elements,
                    min_max(&out, tensor.dtype),
                    or_skip_not = skip.map_or_else(String::new, |s| format!(" and not ignore_index {s}")),
                ),
            ),
            _ => Found::inconclusive(format!(
                "no size for {name}: add {} to the snapshot metadata or pass --param size=N ({name}: {})",
                size_hint(role),
                min_max(&out, tensor.dtype)
            )),
        };
        return Ok(found.scanned(tensor, out));
    };
    let (lo, hi) = (if allow_negative { -size.value } else { 0 }, size.value);
    let out = ctx.backend.scan(*tensor, Scan::IntRange { lo, hi, skip })?;
    let found = if tensor.dtype.is_float() {
        Found::inconclusive(format!(
            "{name} is {}: torch refuses float indices (they must be int64 or int32) before any bounds check, so this snapshot cannot show an out-of-range index; save the ids as integers ({} of {} values outside [{lo}, {hi}); {})",
            tensor.dtype.torch_name(),
            out.offending,
            out.elements,
            min_max(&out, tensor.dtype)
        ))
    } else if let Some((place, v)) = first_at(tensor, &out) {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{place} {} ({} of {} values out of range{})",
                beyond(v, lo, hi, &size.label),
                out.offending,
                out.elements,
                extremes(&out, lo, hi, skip)
            ),
        )
    } else if out.elements == 0 {
        Found::new(Verdict::Refuted, format!("{name} is empty"))
    } else {
        Found::new(
            Verdict::Refuted,
            format!("all {} {name} in [{lo}, {hi}){or_skip}", out.elements),
        )
    };
    Ok(found.scanned(tensor, out))
}

/// The size of the table `tensor` indexes, from the other tensors: the rows of `weight` for
/// token ids, the class dim of `logits` for labels.
fn derived_size(ctx: &Ctx<'_>, role: &str, tensor: Option<&str>) -> Option<Param<i64>> {
    match role {
        "position_ids" | "token_type_ids" => None,
        "labels" | "label" | "targets" | "target" => {
            let labels = ctx.find(role)?;
            ctx.find("logits")
                .filter(|l| l.name != labels.name)
                .and_then(|l| classes_of(&l, &labels))
        }
        _ => ctx
            .find("weight")
            .filter(|w| w.shape.len() == 2 && Some(w.name) != tensor)
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

pub(super) fn target_bounds(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
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
    let frames = ctx.lookup(&["frames"]).map(|(_, v)| Frames::parse(&v));
    if let Some(f) = frames.as_ref().filter(|f| !f.text.is_empty()) {
        ctx.used.insert("frames".into(), f.text.clone());
    }
    // Set when the classes are the vocabulary because the traceback shows a language model's
    // head in the loss: what the summary adds.
    let mut lm_head = String::new();
    let classes = match ctx.int("num_classes", &["num_classes", "num_labels"])? {
        Some(p) => Some(p),
        None => match ctx
            .find("logits")
            .filter(|l| l.name != labels.name)
            .and_then(|l| classes_of(&l, &labels))
        {
            Some(p) => Some(p),
            // The traceback shows a language model's head in the loss: its classes are the
            // vocabulary's rows.
            None if frames.as_ref().is_some_and(|f| f.lm_head) => {
                let vocab = table_size(ctx, "input_ids", Some(labels.name))?;
                if vocab.is_some() {
                    let shown = frames.as_ref().map_or("", |f| f.text.as_str());
                    lm_head = format!(
                        "; the loss is over the language model's head ({shown}): its classes are the vocabulary"
                    );
                }
                vocab
            }
            None => None,
        },
    };
    if let Some(c) = &classes {
        ctx.used.insert("num_classes".into(), c.value.to_string());
    }
    if classes.is_none()
        && !labels.dtype.is_float()
        && let Some(found) = past_the_vocabulary(ctx, &labels, ignore)?
    {
        return Ok(found);
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
        (Some(summary), _) => Found::new(Verdict::Confirmed, format!("{summary}{lm_head}")),
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
                "all {} {name} in [0, {}) or ignore_index {ignore}{lm_head}; the assert comes from elsewhere",
                out.elements, c.value
            ),
        ),
    };
    Ok(found.scanned(&labels, out))
}

/// A language model's labels past its vocabulary, without a class count: the loss's classes are
/// the vocabulary's rows, so one past it confirms. Within it, the class count stays unknown
/// (`None`: the caller says what to add).
fn past_the_vocabulary(
    ctx: &mut Ctx<'_>,
    labels: &TensorRef<'_>,
    ignore: i64,
) -> Result<Option<Found>, ReplayError> {
    let Some((vocab, _, why)) = super::embedding::labels_as_tokens(ctx, labels)? else {
        return Ok(None);
    };
    let out = ctx.backend.scan(
        *labels,
        Scan::IntRange {
            lo: 0,
            hi: vocab.value,
            skip: Some(ignore),
        },
    )?;
    let past = out
        .first
        .first()
        .is_some_and(|&(_, v)| matches!(v, Scalar::Int(i) if i >= vocab.value));
    let Some((place, _)) = first_at(labels, &out).filter(|_| past) else {
        return Ok(None);
    };
    let found = Found::new(
        Verdict::Confirmed,
        format!(
            "{place} >= {} = {} ({} of {} values out of range); the labels are token ids ({why})",
            vocab.label, vocab.value, out.offending, out.elements
        ),
    );
    Ok(Some(found.scanned(labels, out)))
}
