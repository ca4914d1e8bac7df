//! The position table's ids: explicit `position_ids` / `cache_position`, or the positions the
//! length of the encoder's and the decoder's ids implies (their attention mask's when it covers
//! cached tokens), with the family's offset (BART's row 2, RoBERTa's positions after the
//! padding, counted per row).

use super::Side;
use super::model::{
    CAUSAL_LMS, ENCODER_DECODERS, ENCODERS, Model, NO_POSITION_TABLE, PADDING_OFFSET, ROW_TWO_OFFSET,
    int_setting,
};
use crate::replay::check::bounds::{ids_within, table_size};
use crate::replay::check::{Ctx, Found, Param, Scan, shape_text};
use crate::replay::snapshot::TensorRef;
use crate::replay::{ReplayError, Verdict};

/// Where position 0 sits in the table, and how many rows the table has.
struct Offset {
    /// Rows before position 0.
    rows_before: i64,
    /// Rows the table has beyond `max_position_embeddings` (BART's 2).
    extra_rows: i64,
    /// What said so, for the summary (`bart positions start at row 2 of a table of …`).
    why: Option<String>,
    /// The padding id whose tokens take no position (RoBERTa-style positions count the other
    /// tokens of a row, after `padding_idx`); `None` when positions run over the whole length.
    padding: Option<i64>,
}

/// The position offset: `position_offset` when given, else the family's, else unknown (`None`).
fn offset(ctx: &mut Ctx<'_>, model: &Model) -> Result<Option<Offset>, ReplayError> {
    let family = model.family.as_deref().unwrap_or("");
    let row_two = ROW_TWO_OFFSET.contains(&family);
    if let Some(p) = int_setting(ctx, "position_offset")? {
        if p.value < 0 {
            return Err(ReplayError::Check(format!(
                "parameter {} = {} is negative: it is the table row of position 0",
                p.label, p.value
            )));
        }
        ctx.used.insert("position_offset".into(), p.value.to_string());
        let padding = if PADDING_OFFSET.contains(&family) {
            Some(int_setting(ctx, "pad_token_id")?.map_or(1, |p| p.value))
        } else {
            None
        };
        return Ok(Some(Offset {
            rows_before: p.value,
            extra_rows: if row_two { p.value } else { 0 },
            why: Some(format!("{} = {}", p.label, p.value)),
            padding,
        }));
    }
    if row_two {
        return Ok(Some(Offset {
            rows_before: 2,
            extra_rows: 2,
            why: Some(format!(
                "{family} positions start at row 2 of a table of max_position_embeddings + 2 rows"
            )),
            padding: None,
        }));
    }
    if PADDING_OFFSET.contains(&family) {
        let pad = int_setting(ctx, "pad_token_id")?.map_or(1, |p| p.value);
        return Ok(Some(Offset {
            rows_before: pad.saturating_add(1),
            extra_rows: 0,
            why: Some(format!("{family} positions start after padding_idx {pad}")),
            padding: Some(pad),
        }));
    }
    let known =
        ENCODER_DECODERS.contains(&family) || CAUSAL_LMS.contains(&family) || ENCODERS.contains(&family);
    Ok(known.then_some(Offset {
        rows_before: 0,
        extra_rows: 0,
        why: None,
        padding: None,
    }))
}

/// The tensors that index the position table: explicit `position_ids`, else the length of the
/// encoder's ids; and the length of the decoder's ids for an encoder-decoder.
pub(super) fn positions(
    ctx: &mut Ctx<'_>,
    model: &Model,
    role: &str,
) -> Result<Vec<(Side, Found)>, ReplayError> {
    let explicit = ctx.find(role);
    let limit = table_size(ctx, "position_ids", explicit.map(|t| t.name))?;
    if let Some(f) = model.family.as_deref().filter(|f| NO_POSITION_TABLE.contains(f)) {
        // Its position ids index no table: max_position_embeddings bounds nothing here.
        return Ok(vec![(
            Side::Encoder,
            Found::inconclusive(format!(
                "{f} has no fixed position table (rotary, relative, ALiBi or growing sinusoidal positions), so no position can index past one; the lookup that failed is another"
            )),
        )]);
    }
    let mut parts = Vec::new();
    if let Some(t) = &explicit {
        let found = ids_within(ctx, t, "position_ids", limit.as_ref(), false, None)?;
        parts.push((Side::Encoder, found));
    }
    // During generation the positions of the cached tokens come first: `cache_position` names
    // them, the attention mask covers them.
    if let Some(t) = ctx
        .find("cache_position")
        .filter(|t| Some(t.name) != explicit.map(|e| e.name))
    {
        let found = ids_within(ctx, &t, "position_ids", limit.as_ref(), false, None)?;
        parts.push((Side::Encoder, found));
    }
    let offset = offset(ctx, model)?;
    let encoder = ctx.find("input_ids");
    if explicit.is_none() {
        let found = match encoder {
            Some(ids) => {
                let sequence = longest(ids, ctx.find("attention_mask"));
                let found = length_fits(&sequence, "", limit.as_ref(), offset.as_ref());
                if sequence.name == ids.name {
                    past_padding(ctx, &ids, found, limit.as_ref(), offset.as_ref())?
                } else {
                    found
                }
            }
            None => Found::inconclusive(format!(
                "{}, and no input_ids whose length implies them",
                ctx.missing(role)
            )),
        };
        parts.push((Side::Encoder, found));
    }
    let decoder = ctx
        .find("decoder_input_ids")
        .map(|t| (longest(t, ctx.find("decoder_attention_mask")), ""))
        .or_else(|| {
            ctx.find("labels")
                .filter(|l| l.shape.len() >= 2)
                .map(|l| (l, " (the decoder's inputs once shifted right)"))
        });
    let Some((dec, how)) = decoder else {
        return Ok(parts);
    };
    let target = int_setting(ctx, "max_target_positions")?;
    match &model.encoder_decoder {
        Some((true, _)) => {
            let limit = target.as_ref().or(limit.as_ref());
            parts.push((Side::Decoder, length_fits(&dec, how, limit, offset.as_ref())));
        }
        Some((false, _)) => {}
        None => {
            let longer = encoder
                .as_ref()
                .is_none_or(|ids| ids.shape.last() < dec.shape.last());
            if !longer && target.is_none() && explicit.is_none() {
                // A decoder fed these would see no more positions than the encoder checked above.
                parts.push((
                    Side::Decoder,
                    Found::new(
                        Verdict::Refuted,
                        format!(
                            "{} length {} <= that of input_ids (the decoder's inputs if the model is an encoder-decoder)",
                            dec.name,
                            dec.shape.last().copied().unwrap_or(0)
                        ),
                    ),
                ));
            } else {
                parts.push((Side::Decoder, Found::inconclusive(format!(
                    "the length {} of {}: unknown whether the model is an encoder-decoder whose decoder takes it (add is_encoder_decoder or model_type to the metadata)",
                    dec.shape.last().copied().unwrap_or(0),
                    dec.name
                ))));
            }
        }
    }
    Ok(parts)
}

/// The tensor whose last dim is the sequence's length: `ids`, or `mask` when it covers more (the
/// cached tokens of a generation step).
fn longest<'a>(ids: TensorRef<'a>, mask: Option<TensorRef<'a>>) -> TensorRef<'a> {
    match mask {
        Some(m) if m.shape.len() == ids.shape.len() && m.shape.last() > ids.shape.last() => m,
        _ => ids,
    }
}

/// Whether the positions the length of `ids` implies fit a table of `limit` positions.
fn length_fits(ids: &TensorRef<'_>, how: &str, limit: Option<&Param<i64>>, offset: Option<&Offset>) -> Found {
    let name = ids.name;
    let shape = shape_text(ids.shape);
    let Some(&len) = ids.shape.last() else {
        return Found::inconclusive(format!("{name}{how} is a scalar: no sequence length"));
    };
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let Some(limit) = limit else {
        return Found::inconclusive(format!(
            "positions implied by {name}{how} (length {len}): max_position_embeddings unknown (add max_position_embeddings or n_positions to the metadata or --param max_position_embeddings=N)"
        ));
    };
    let table = format!("{} = {}", limit.label, limit.value);
    let Some(offset) = offset else {
        // Any offset leaves fewer positions than rows: past the rows, past the table.
        return if len > limit.value {
            Found::new(
                Verdict::Confirmed,
                format!(
                    "{name}{how} length {len} > {table}: positions {}..{} have no row ({name} shape {shape}; position offset unknown, 0 assumed, a larger one only leaves fewer)",
                    limit.value,
                    len - 1
                ),
            )
        } else if len.saturating_add(2) <= limit.value {
            Found::new(
                Verdict::Refuted,
                format!(
                    "{name}{how} length {len} <= {table}, even with positions starting at row 2 as in RoBERTa-style models"
                ),
            )
        } else {
            Found::inconclusive(format!(
                "{name}{how} length {len} fits {table} only if positions start at row 0 (RoBERTa-style models start at row 2): add model_type or position_offset to the metadata"
            ))
        };
    };
    let rows = limit.value.saturating_add(offset.extra_rows);
    let available = rows.saturating_sub(offset.rows_before);
    let because = offset.why.as_ref().map_or_else(String::new, |w| format!("; {w}"));
    if len > available {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{name}{how} length {len} > the {available} positions of {table}: positions {available}..{} have no row ({name} shape {shape}{because})",
                len - 1
            ),
        )
    } else {
        Found::new(
            Verdict::Refuted,
            format!("{name}{how} length {len} <= the {available} positions of {table}{because}"),
        )
    }
}

/// A length past the table confirms only if the positions a model counts are past it too:
/// RoBERTa-style positions skip the padding of a row, so a padded batch longer than the table
/// may fit. With the family unknown, the length confirms only when it is past the table both
/// ways (positions over the whole length, or after `pad_token_id`, 1 when not given).
fn past_padding(
    ctx: &mut Ctx<'_>,
    ids: &TensorRef<'_>,
    found: Found,
    limit: Option<&Param<i64>>,
    offset: Option<&Offset>,
) -> Result<Found, ReplayError> {
    let (Verdict::Confirmed, Some(limit)) = (found.verdict, limit) else {
        return Ok(found);
    };
    let (pad, rows_before, rows) = match offset {
        Some(o) => match o.padding {
            Some(pad) => (pad, o.rows_before, limit.value.saturating_add(o.extra_rows)),
            None => return Ok(found),
        },
        None => {
            let pad = int_setting(ctx, "pad_token_id")?.map_or(1, |p| p.value);
            (pad, pad.saturating_add(1), limit.value)
        }
    };
    let available = rows.saturating_sub(rows_before);
    let name = ids.name;
    let Some((row, tokens)) = most_tokens_besides(ctx, ids, pad)? else {
        return Ok(Found::inconclusive(format!(
            "{}; but positions that skip padding ({pad}) could not be counted per row of {name}",
            found.summary
        )));
    };
    if tokens > available {
        return Ok(match offset {
            Some(_) => Found::new(
                Verdict::Confirmed,
                format!(
                    "{name}[{row}] holds {tokens} tokens besides padding {pad}: more than the {available} positions of {} = {} (positions start after padding_idx {pad})",
                    limit.label, limit.value
                ),
            ),
            None => Found {
                summary: format!(
                    "{}; also past it for positions that skip padding: {name}[{row}] holds {tokens} tokens besides {pad}",
                    found.summary
                ),
                ..found
            },
        });
    }
    let fits = format!(
        "no row of {name} holds more than {tokens} tokens besides padding {pad}, within the {available} positions left after padding_idx"
    );
    Ok(match offset {
        Some(_) => Found::new(
            Verdict::Refuted,
            format!(
                "{name} length {} > {available}, but {fits}",
                ids.shape.last().copied().unwrap_or(0)
            ),
        ),
        None => Found::inconclusive(format!(
            "{}; but {fits}: a RoBERTa-style model would not fail (add model_type to the metadata)",
            found.summary
        )),
    })
}

/// The row of `ids` ([..., T]) with the most tokens other than `pad`, and their count; `None`
/// for float ids, a scalar or more rows than are worth a scan each.
fn most_tokens_besides(
    ctx: &Ctx<'_>,
    ids: &TensorRef<'_>,
    pad: i64,
) -> Result<Option<(u64, i64)>, ReplayError> {
    const MAX_ROWS: u64 = 1 << 16;
    let Some(&len) = ids.shape.last() else {
        return Ok(None);
    };
    if ids.dtype.is_float() || len == 0 {
        return Ok(None);
    }
    let rows = ids.elements() / len;
    let row_bytes = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_mul(ids.dtype.size()));
    let (Some(row_bytes), true) = (row_bytes, rows <= MAX_ROWS) else {
        return Ok(None);
    };
    let shape = [len];
    let mut best: Option<(u64, i64)> = None;
    for (row, bytes) in (0..rows).zip(ids.bytes.chunks_exact(row_bytes)) {
        let view = TensorRef {
            name: ids.name,
            dtype: ids.dtype,
            shape: &shape,
            bytes,
        };
        let out = ctx.backend.scan(
            view,
            Scan::IntRange {
                lo: pad,
                hi: pad.saturating_add(1),
                skip: None,
            },
        )?;
        let tokens = i64::try_from(out.offending).unwrap_or(i64::MAX);
        if best.is_none_or(|(_, most)| tokens > most) {
            best = Some((row, tokens));
        }
    }
    Ok(best)
}
