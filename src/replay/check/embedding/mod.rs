//! The ids of one embedding table, wherever the model takes them from, and their one verdict.
//!
//! A cause such as "a token id past the vocabulary" can be carried by several tensors: the
//! encoder's `input_ids`, the decoder's inputs (`decoder_input_ids`, or the labels shifted right
//! behind `decoder_start_token_id`, with `pad_token_id` where the labels hold the ignore index),
//! the labels of a language model (token ids, the ignore index allowed). "A sequence longer than
//! the position table" is carried by explicit `position_ids` / `cache_position`, or by the length
//! of the encoder's and the decoder's ids (their attention mask's when it covers cached tokens),
//! with the family's offset (BART's row 2, RoBERTa's positions after the padding).
//!
//! This module owns which tensors a table implicates for the model at hand ([`Model`], read from
//! the Hugging Face config keys of the metadata and from the tensors' shapes; [`Trace`], the
//! traceback's model frames a rule passes), the limit each is checked against, and the verdict
//! they make together ([`combine`]): confirmed when one tensor offends, refuted only when every
//! implicated tensor was checked against a known limit, else inconclusive saying what was
//! checked, what was not and which key would tell. Everything here is logic over
//! [`Scan`](super::Scan)s, so the CPU and the GPU agree by construction.
//!
//! Its files, one concern each: [`model`] reads what kind of model it is (encoder, causal LM or
//! encoder-decoder, and the family); [`tokens`] gathers the word table's ids (input ids, decoder
//! ids, labels and what the shift to the right adds); [`positions`](mod@positions) the position
//! table's (explicit positions, or lengths with the family's offset). This file reads the
//! traceback's frames ([`Frames`]: the loss puts the labels first, the decoder its inputs), asks
//! for the decoder's part where it is missing, and makes the one verdict.

pub(super) mod model;
mod positions;
mod tokens;

use super::bounds::elsewhere;
use super::frames::Frames;
use super::{Ctx, Found};
use crate::replay::{ReplayError, Verdict};
use model::Model;
use positions::positions;
pub(super) use tokens::labels_as_tokens;
use tokens::words;

/// An embedding table whose ids several tensors carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Table {
    /// The word (token) embedding: `vocab_size` rows.
    Words,
    /// The learned position embedding: `max_position_embeddings` rows.
    Positions,
}

impl Table {
    /// The table whose ids the role `role` names.
    pub(super) fn of(role: &str) -> Option<Table> {
        match role {
            "input_ids" | "decoder_input_ids" | "ids" | "tokens" => Some(Table::Words),
            "position_ids" => Some(Table::Positions),
            _ => None,
        }
    }
}

/// Which stack a tensor feeds: the results of the stack the log's traceback is in come first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The encoder, or the only stack of an encoder-only or decoder-only model.
    Encoder,
    /// The decoder of an encoder-decoder.
    Decoder,
}

impl From<Side> for crate::replay::lookup::Stack {
    fn from(side: Side) -> Self {
        match side {
            Side::Encoder => crate::replay::lookup::Stack::Encoder,
            Side::Decoder => crate::replay::lookup::Stack::Decoder,
        }
    }
}

/// Checks every tensor that indexes `table` and gives their one verdict.
pub(super) fn table_bounds(ctx: &mut Ctx<'_>, table: Table, role: &str) -> Result<Found, ReplayError> {
    let trace = read_frames(ctx);
    let model = Model::read(ctx)?;
    let mut parts = match table {
        Table::Words => words(ctx, &model, role)?,
        Table::Positions => positions(ctx, &model, role)?,
    };
    // A decoder the log or the model implicates must have had its inputs checked (an OPT-style
    // decoder-only model calls its stack `decoder` too: then its inputs are the input ids).
    let decoder_checked = parts.iter().any(|(side, _)| *side == Side::Decoder);
    let decoder_implicated = match &model.encoder_decoder {
        Some((true, why)) => Some(why.clone()),
        Some((false, _)) => None,
        None => trace.decoder.then(String::new),
    };
    if let Some(why) = decoder_implicated.filter(|_| !decoder_checked) {
        let what = match table {
            Table::Words => "input ids",
            Table::Positions => "length",
        };
        let because = match (trace.decoder, why.is_empty()) {
            (true, true) => format!("the traceback is in the decoder: {}", trace.text),
            (true, false) => format!("the traceback is in the decoder: {}; {why}", trace.text),
            (false, _) => why,
        };
        let held = if ctx.find("labels").is_none() {
            "the snapshot holds neither decoder_input_ids nor labels (save them)"
        } else {
            "the snapshot holds no decoder_input_ids and nothing says the labels are token ids the decoder took (add decoder_input_ids, or model_type / architectures)"
        };
        parts.push((
            Side::Decoder,
            Found::inconclusive(format!("the decoder's {what} ({because}): {held}")),
        ));
    }
    // The log picks the suspects (stable: each group in its own order): the labels first when
    // the traceback is in the loss, then the decoder's results when it is in the decoder.
    let labels = ctx.find("labels").map(|t| t.name);
    parts.sort_by_key(|(side, found)| {
        let is_labels = labels.is_some() && found.tensor.as_deref() == labels;
        (
            !(trace.loss && is_labels),
            !(trace.decoder && *side == Side::Decoder),
        )
    });
    Ok(combine(parts.into_iter().map(|(_, found)| found).collect()))
}

/// The `frames` parameter, recorded among the parameters used when given.
fn read_frames(ctx: &mut Ctx<'_>) -> Frames {
    let text = ctx.lookup(&["frames"]).map(|(_, v)| v).unwrap_or_default();
    let frames = Frames::parse(&text);
    if !frames.text.is_empty() {
        ctx.used.insert("frames".into(), frames.text.clone());
    }
    frames
}

/// One verdict from the parts: the first offending part confirms; all parts refuted refute;
/// anything else is inconclusive, saying what was checked and what was not.
pub(super) fn combine(mut parts: Vec<Found>) -> Found {
    if parts.is_empty() {
        return Found::inconclusive("no tensor of the snapshot indexes this table".into());
    }
    if parts.len() == 1
        && let Some(only) = parts.pop()
    {
        return elsewhere(only);
    }
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
        .filter(|p| p.verdict == Verdict::Inconclusive)
        .map(|p| p.summary.as_str())
        .collect();
    let summary = if unchecked.is_empty() {
        format!("{}; the assert comes from elsewhere", checked.join("; "))
    } else if checked.is_empty() {
        format!("not checked: {}", unchecked.join("; "))
    } else {
        format!(
            "checked: {}; not checked: {}",
            checked.join("; "),
            unchecked.join("; ")
        )
    };
    let verdict = if unchecked.is_empty() && !checked.is_empty() {
        Verdict::Refuted
    } else {
        Verdict::Inconclusive
    };
    // Every lookup judged stands in the result; the first scanned part's numbers for the whole.
    let positions = parts
        .iter_mut()
        .flat_map(|p| std::mem::take(&mut p.positions))
        .collect();
    let scanned = parts.into_iter().find(|p| p.scan.is_some());
    Found {
        verdict,
        summary,
        tensor: scanned.as_ref().and_then(|p| p.tensor.clone()),
        offending: scanned.as_ref().map_or(0, |p| p.offending),
        scan: scanned.and_then(|p| p.scan),
        positions,
    }
}
