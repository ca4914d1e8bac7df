//! `hidden_size`: the float tensors a model takes at its width (`inputs_embeds`,
//! `decoder_inputs_embeds`, `encoder_hidden_states`, `encoder_outputs`) against the width its
//! config records (`hidden_size`, `d_model` or `n_embd`; for embeddings, the family's own
//! `embedding_size` where it has one).
//!
//! A shape check: it reads the tensors' shapes, never an element, so it needs no kernel and the
//! CPU and the GPU give it alike. A width that differs confirms; widths that match refute the
//! cause for the tensors checked only, and say so: a layer's own `in_features` or a projector
//! inside the model is not in a snapshot.

use super::embedding::model::Model;
use super::{Ctx, Found, Param, shape_text};
use crate::replay::ReplayError;
use crate::replay::Verdict;
use crate::replay::snapshot::TensorRef;

/// The tensors checked when the spec names none.
pub(crate) const DEFAULT_TENSORS: &str =
    "inputs_embeds,decoder_inputs_embeds,encoder_hidden_states,encoder_outputs";

/// Families that can take `inputs_embeds` at a width of their own (`embedding_size`,
/// `input_embedding_size`, `word_embed_proj_dim`) projected to the hidden size: their embeddings
/// are judged only by that key.
const OWN_EMBEDDING_WIDTH: &[&str] = &[
    "albert",
    "electra",
    "convbert",
    "mobilebert",
    "squeezebert",
    "roformer",
    "deberta",
    "debertav2",
    "rembert",
    "opt",
];

/// What width a tensor must have, by what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Embeddings the model takes instead of ids.
    Embeddings,
    /// States at the model's width (an encoder's output, a decoder's cross-attention input).
    States,
}

impl Kind {
    fn of(name: &str) -> Kind {
        if name.contains("inputs_embeds") {
            Kind::Embeddings
        } else {
            Kind::States
        }
    }
}

pub(super) fn hidden_size(ctx: &mut Ctx<'_>) -> Result<Found, ReplayError> {
    let list = ctx.text("tensors", DEFAULT_TENSORS);
    let model = Model::read(ctx)?;
    let width = width_setting(ctx, "hidden_size", &["hidden_size", "d_model", "n_embd"])?;
    let embedding = width_setting(
        ctx,
        "embedding_size",
        &["embedding_size", "input_embedding_size", "word_embed_proj_dim"],
    )?;
    let cross = width_setting(
        ctx,
        "cross_attention_hidden_size",
        &["cross_attention_hidden_size"],
    )?;
    let roles: Vec<&str> = list.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
    let mut tensors: Vec<TensorRef<'_>> = Vec::new();
    for role in &roles {
        if let Some(t) = ctx
            .find(role)
            .filter(|t| !tensors.iter().any(|s| s.name == t.name))
        {
            tensors.push(t);
        }
    }
    if tensors.is_empty() {
        let held: Vec<&str> = ctx.snap.tensors().map(|t| t.name).collect();
        return Ok(Found::inconclusive(format!(
            "the snapshot holds none of {} (it holds: {}): save the float tensor the failing layer took, or name it with --param tensors=NAME",
            roles.join(", "),
            if held.is_empty() {
                "none".to_owned()
            } else {
                held.join(", ")
            }
        )));
    }
    let family = model.family.as_deref();
    let parts: Vec<Found> = tensors
        .iter()
        .map(|t| {
            let expected = expected_width(
                Kind::of(t.name),
                family,
                width.as_ref(),
                embedding.as_ref(),
                cross.as_ref(),
            );
            judge(t, expected)
        })
        .collect();
    Ok(combine(parts))
}

/// A width setting under any of `keys` (also `model.KEY`), recorded under `name`; a value that
/// is not a positive integer is an error.
fn width_setting(ctx: &mut Ctx<'_>, name: &str, keys: &[&str]) -> Result<Option<Param<i64>>, ReplayError> {
    let prefixed: Vec<String> = keys.iter().map(|k| format!("model.{k}")).collect();
    let mut meta: Vec<&str> = keys.to_vec();
    meta.extend(prefixed.iter().map(String::as_str));
    let found = ctx.int_in(name, keys, &meta)?;
    match found {
        Some(p) if p.value <= 0 => Err(ReplayError::Check(format!(
            "parameter {} = {} is not a width (a positive number of features)",
            p.label, p.value
        ))),
        other => Ok(other),
    }
}

/// The width a tensor of `kind` must have, or why it is not known.
fn expected_width<'p>(
    kind: Kind,
    family: Option<&str>,
    width: Option<&'p Param<i64>>,
    embedding: Option<&'p Param<i64>>,
    cross: Option<&'p Param<i64>>,
) -> Result<&'p Param<i64>, String> {
    if kind == Kind::Embeddings
        && let Some(e) = embedding
    {
        return Ok(e);
    }
    let Some(family) = family else {
        return Err(match kind {
            Kind::Embeddings => "model family unknown (record model_type: add model_type or architectures to the metadata): some families (ALBERT, ELECTRA, OPT, …) take inputs_embeds at an embedding_size of their own",
            Kind::States => "model family unknown (record model_type: add model_type or architectures to the metadata): which width the model takes these states at depends on it",
        }
        .to_owned());
    };
    if kind == Kind::Embeddings && OWN_EMBEDDING_WIDTH.contains(&family) {
        return Err(format!(
            "{family} takes inputs_embeds at a width of its own, not recorded (add embedding_size, input_embedding_size or word_embed_proj_dim to the metadata)"
        ));
    }
    if kind == Kind::States
        && let Some(c) = cross
    {
        return Err(format!(
            "{} = {} is recorded: whether the states reach a cross-attention of that width or are projected first depends on the wrapper",
            c.label, c.value
        ));
    }
    width.ok_or_else(|| {
        "the model's width is unknown (add hidden_size, d_model or n_embd to the metadata or --param hidden_size=N)"
            .to_owned()
    })
}

/// One tensor's last dim against the width it must have.
fn judge(t: &TensorRef<'_>, expected: Result<&Param<i64>, String>) -> Found {
    let shape = shape_text(t.shape);
    let name = t.name;
    if !t.dtype.is_float() {
        return Found::inconclusive(format!(
            "{name} {shape} is {}, not hidden states (they are floating point)",
            t.dtype.torch_name()
        ));
    }
    let Some(&last) = t.shape.last() else {
        return Found::inconclusive(format!("{name} is a scalar: it has no feature dim"));
    };
    let expected = match expected {
        Ok(p) => p,
        Err(why) => return Found::inconclusive(format!("{name} {shape}: {why}")),
    };
    let last = i64::try_from(last).unwrap_or(i64::MAX);
    let mut found = if last == expected.value {
        Found::new(
            Verdict::Refuted,
            format!(
                "{name} {shape}: last dim {last} = {} = {}",
                expected.label, expected.value
            ),
        )
    } else {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{name} {shape} has {last} features but {} = {}: the model's layers take {}",
                expected.label, expected.value, expected.value
            ),
        )
    };
    found.tensor = Some(name.to_owned());
    found.offending = u64::from(found.verdict == Verdict::Confirmed);
    found
}

/// One verdict: the first mismatch confirms; all matching refute for these tensors only;
/// anything else is inconclusive, saying what was checked and what was not.
fn combine(mut parts: Vec<Found>) -> Found {
    if let Some(i) = parts.iter().position(|p| p.verdict == Verdict::Confirmed) {
        return parts.swap_remove(i);
    }
    let checked: Vec<&str> = parts
        .iter()
        .filter(|p| p.verdict == Verdict::Refuted)
        .map(|p| p.summary.as_str())
        .collect();
    let unchecked: Vec<&str> = parts
        .iter()
        .filter(|p| p.verdict != Verdict::Refuted)
        .map(|p| p.summary.as_str())
        .collect();
    if unchecked.is_empty() {
        let names: Vec<&str> = parts.iter().filter_map(|p| p.tensor.as_deref()).collect();
        return Found::new(
            Verdict::Refuted,
            format!(
                "{}; refuted for {} only: a layer's own in_features, or tensors the snapshot does not hold, were not checked",
                checked.join("; "),
                names.join(", ")
            ),
        );
    }
    let summary = if checked.is_empty() {
        format!("not checked: {}", unchecked.join("; "))
    } else {
        format!(
            "checked: {}; not checked: {}",
            checked.join("; "),
            unchecked.join("; ")
        )
    };
    Found::inconclusive(summary)
}
