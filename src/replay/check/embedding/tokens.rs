//! The word table's ids: the tensors that index the vocabulary (the input ids, the decoder's
//! input ids, the labels when they are token ids) and the ids the shift to the right adds to an
//! encoder-decoder's decoder inputs (`decoder_start_token_id`, `pad_token_id`).

use super::Side;
use super::model::{Model, int_setting};
use crate::replay::check::bounds::{ids_within, table_size};
use crate::replay::check::{Ctx, Found, Param, Scalar};
use crate::replay::snapshot::TensorRef;
use crate::replay::{ReplayError, Verdict};

/// The vocabulary size, the ignore index and the reason when the model says `labels` are token
/// ids (a language model's or an encoder-decoder's); `None` when it does not say so.
pub(in crate::replay::check) fn labels_as_tokens(
    ctx: &mut Ctx<'_>,
    labels: &TensorRef<'_>,
) -> Result<Option<(Param<i64>, i64, String)>, ReplayError> {
    let model = Model::read(ctx)?;
    let Some(vocab) = table_size(ctx, "input_ids", Some(labels.name))? else {
        return Ok(None);
    };
    let Some((true, why)) = model.labels_are_tokens(ctx, labels, Some(vocab.value)) else {
        return Ok(None);
    };
    let ignore = ctx
        .int("ignore_index", &["ignore_index"])?
        .map_or(-100, |p| p.value);
    ctx.used.insert("ignore_index".into(), ignore.to_string());
    Ok(Some((vocab, ignore, why)))
}

/// The tensors whose ids index the word embedding, each against the vocabulary.
pub(super) fn words(ctx: &mut Ctx<'_>, model: &Model, role: &str) -> Result<Vec<(Side, Found)>, ReplayError> {
    let allow_negative = ctx.flag("allow_negative", false)?;
    let primary = ctx.find(role);
    let size = table_size(ctx, role, primary.map(|t| t.name))?;
    let side_of = |t: &TensorRef<'_>| {
        if ctx.find("decoder_input_ids").is_some_and(|d| d.name == t.name) {
            Side::Decoder
        } else {
            Side::Encoder
        }
    };
    let mut checked: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    match &primary {
        Some(t) => {
            checked.push(t.name);
            let found = ids_within(ctx, t, role, size.as_ref(), allow_negative, None)?;
            parts.push((side_of(t), found));
        }
        None => parts.push((Side::Encoder, Found::inconclusive(ctx.missing(role)))),
    }
    // The encoder's and the decoder's ids, whichever the role did not name.
    for other in ["input_ids", "decoder_input_ids"] {
        if let Some(t) = ctx.find(other).filter(|t| !checked.contains(&t.name)) {
            checked.push(t.name);
            let found = ids_within(ctx, &t, other, size.as_ref(), false, None)?;
            parts.push((side_of(&t), found));
        }
    }
    if let Some(labels) = ctx.find("labels").filter(|t| !checked.contains(&t.name)) {
        parts.extend(labels_as_ids(ctx, model, &labels, size.as_ref())?);
    }
    Ok(parts)
}

/// The labels among the word table's ids: a language model's targets, an encoder-decoder's
/// decoder inputs once shifted right (with the ids the shift adds), nothing for classes.
fn labels_as_ids(
    ctx: &mut Ctx<'_>,
    model: &Model,
    labels: &TensorRef<'_>,
    size: Option<&Param<i64>>,
) -> Result<Vec<(Side, Found)>, ReplayError> {
    let mut parts = Vec::new();
    let ignore = ctx
        .int("ignore_index", &["ignore_index"])?
        .map_or(-100, |p| p.value);
    ctx.used.insert("ignore_index".into(), ignore.to_string());
    let tokens = model.labels_are_tokens(ctx, labels, size.map(|s| s.value));
    let labels_feed_a_decoder = !matches!(model.encoder_decoder, Some((false, _)))
        && !matches!(tokens, Some((false, _)))
        && ctx.find("decoder_input_ids").is_none();
    let side = if labels_feed_a_decoder {
        Side::Decoder
    } else {
        Side::Encoder
    };
    let Some(vocab) = size else {
        if !matches!(tokens, Some((false, _))) {
            parts.push((side, Found::inconclusive(format!(
                "{} (token ids of a language model or an encoder-decoder) have no vocabulary size to be checked against: add vocab_size to the metadata or --param vocab_size=N",
                labels.name
            ))));
        }
        return Ok(parts);
    };
    let part = ids_within(ctx, labels, "input_ids", Some(vocab), false, Some(ignore))?;
    let has_ignore = ignore >= 0
        || part
            .scan
            .as_ref()
            .is_some_and(|(out, _, _)| matches!(out.min, Some(Scalar::Int(m)) if m < 0));
    match (&tokens, part.verdict) {
        (Some((false, _)), _) => {}
        (Some((true, why)), Verdict::Confirmed) => {
            let mut part = part;
            let role = if model.encoder_decoder.as_ref().is_some_and(|(e, _)| *e) {
                "token ids, the decoder's input ids once shifted right"
            } else {
                "token ids"
            };
            part.summary.push_str(&format!("; the labels are {role} ({why})"));
            parts.push((side, part));
        }
        (Some((true, _)), _) => parts.push((side, part)),
        (None, Verdict::Confirmed) => parts.push((side, Found::inconclusive(format!(
            "{} (unknown whether the labels are token ids or classes: add model_type, architectures or is_encoder_decoder to the metadata)",
            part.summary
        )))),
        // Labels within the vocabulary cannot carry the cause, whatever they are.
        (None, _) => parts.push((side, part)),
    }
    if labels_feed_a_decoder {
        parts.push((Side::Decoder, shifted_in(ctx, model, vocab, has_ignore)?));
    }
    Ok(parts)
}

/// The ids the shift to the right adds to the decoder's inputs: `decoder_start_token_id` in
/// front, and `pad_token_id` where the labels hold the ignore index.
fn shifted_in(
    ctx: &mut Ctx<'_>,
    model: &Model,
    vocab: &Param<i64>,
    has_ignore: bool,
) -> Result<Found, ReplayError> {
    let mut keys = vec!["decoder_start_token_id"];
    if has_ignore {
        keys.push("pad_token_id");
    }
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for key in keys {
        match int_setting(ctx, key)? {
            Some(p) => known.push(p),
            None => unknown.push(key),
        }
    }
    if let Some(p) = known.iter().find(|p| p.value < 0 || p.value >= vocab.value) {
        let why = if p.value < 0 {
            "< 0".to_owned()
        } else {
            format!(">= {} = {}", vocab.label, vocab.value)
        };
        return Ok(match &model.encoder_decoder {
            Some((true, told)) => Found::new(
                Verdict::Confirmed,
                format!(
                    "{} = {} {why}: the decoder's inputs are the labels shifted right, which puts it in them ({told})",
                    p.label, p.value
                ),
            ),
            _ => Found::inconclusive(format!(
                "{} = {} {why}, an id of the decoder's inputs if the model is an encoder-decoder (unknown: add is_encoder_decoder or model_type)",
                p.label, p.value
            )),
        });
    }
    if unknown.is_empty() {
        let named: Vec<String> = known.iter().map(|p| format!("{} {}", p.label, p.value)).collect();
        return Ok(Found::new(
            Verdict::Refuted,
            format!("{} in [0, {})", named.join(" and "), vocab.value),
        ));
    }
    let missing = unknown.join(" / ");
    Ok(Found::inconclusive(match &model.encoder_decoder {
        Some((true, told)) => format!(
            "the ids the shift to the right adds to the decoder's inputs ({told}): add {missing} to the metadata or --param {}=N",
            unknown[0]
        ),
        _ => format!(
            "whether the labels reach a decoder, shifted right behind {missing}: add is_encoder_decoder or model_type, and {missing}, to the metadata"
        ),
    }))
}
