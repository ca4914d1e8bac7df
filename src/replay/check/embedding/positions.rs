//! The position table's ids: explicit `position_ids` / `cache_position`, or the positions the
//! length of the encoder's and the decoder's ids implies (their attention mask's when it covers
//! cached tokens), the way the model's family counts them ([`Scheme`]: BART's row 2, RoBERTa's
//! positions after the padding, OPT's over the attention mask, LED's encoder padded to its
//! attention window).
//!
//! A position can only run past a table the model has: rotary, relative and ALiBi models
//! (Llama, Mistral, Qwen, GPT-NeoX, T5, …) carry `max_position_embeddings` but index nothing
//! with it. So a verdict needs a family known to use a learned (or fixed sinusoidal) absolute
//! table, or a `position_offset` that says it has one; any other family is "not checked".

use super::Side;
use super::model::{Model, int_setting, setting};
use crate::replay::check::bounds::ids_within;
use crate::replay::check::{Ctx, Found, Param, Scalar, Scan, first_at, shape_text};
use crate::replay::lookup::{self, PositionLookup};
use crate::replay::snapshot::TensorRef;
use crate::replay::{ReplayError, Verdict};

/// Families without a table a position can run past: rotary, relative or ALiBi positions,
/// sinusoids computed for any length (M2M100, NLLB, XGLM, FSMT, PEGASUS-X) or positions clamped
/// to the table (ProphetNet).
const NO_POSITION_TABLE: &[&str] = &[
    "t5",
    "mt5",
    "umt5",
    "longt5",
    "switchtransformers",
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen3moe",
    "gemma",
    "gemma2",
    "gemma3text",
    "phi",
    "phi3",
    "gptneox",
    "gptj",
    "codegen",
    "falcon",
    "bloom",
    "mpt",
    "starcoder2",
    "olmo",
    "olmo2",
    "stablelm",
    "cohere",
    "roformer",
    "modernbert",
    "funnel",
    "nezha",
    "m2m100",
    "nllbmoe",
    "xglm",
    "fsmt",
    "pegasusx",
    "prophetnet",
    "xlmprophetnet",
];

/// Families whose position p is row p of a table of `max_position_embeddings` rows (learned, or
/// a fixed sinusoidal `nn.Embedding` as in Marian and PEGASUS). (BigBird is not among them: in
/// its block-sparse mode it pads the input to a multiple of its block size first.)
const FROM_ROW_ZERO: &[&str] = &[
    "bert",
    "distilbert",
    "albert",
    "electra",
    "megatronbert",
    "convbert",
    "layoutlm",
    "rembert",
    "squeezebert",
    "ernie",
    "gpt2",
    "gptneo",
    "gptbigcode",
    "ctrl",
    "marian",
    "pegasus",
    "bigbirdpegasus",
    "blenderbot",
    "blenderbotsmall",
    "led",
];

/// Families whose position p is row p + 2 of a table of `max_position_embeddings + 2` rows.
const FROM_ROW_TWO: &[&str] = &["bart", "mbart", "plbart", "mvp"];

/// Families whose positions count the tokens of a row other than `padding_idx`, from row
/// `padding_idx + 1` of a table of `max_position_embeddings` rows.
const AFTER_PADDING: &[&str] = &[
    "roberta",
    "xlmroberta",
    "camembert",
    "longformer",
    "xmod",
    "data2vectext",
    "ibert",
    "luke",
    "mpnet",
];

/// Families whose positions count the attended tokens of a row (the attention mask's running
/// sum), from row 2 of a table of `max_position_embeddings + 2` rows.
const OVER_THE_MASK: &[&str] = &["opt"];

/// Families that pad the encoder's input to a multiple of `attention_window` before taking its
/// positions over the whole padded length.
const PADDED_TO_WINDOW: &[&str] = &["led"];

/// Which positions of a row index the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// Every position of the sequence.
    Length,
    /// The tokens other than this padding id (RoBERTa).
    BesidesPadding(i64),
    /// The attended tokens, the attention mask's nonzero values (OPT).
    AttentionMask,
}

impl Counting {
    /// The counting rule as the result records it.
    fn recorded(self) -> lookup::Counting {
        match self {
            Counting::Length => lookup::Counting::Length,
            Counting::BesidesPadding(pad) => lookup::Counting::BesidesPadding { pad_token_id: pad },
            Counting::AttentionMask => lookup::Counting::AttentionMask,
        }
    }
}

/// How the model turns positions into rows of its position table.
struct Offset {
    /// Rows before position 0.
    rows_before: i64,
    /// Rows the table has beyond its recorded size (BART's 2).
    extra_rows: i64,
    /// What said so, for the summary (`bart positions start at row 2 of a table of …`).
    why: Option<String>,
    /// Which positions count.
    counting: Counting,
    /// The encoder's input padded to a multiple of this window first (LED); `Some(None)` when the
    /// family pads but the window is not recorded.
    window: Option<Option<i64>>,
}

/// What the model's family says of its positions.
enum Scheme {
    /// A table, and how positions index it.
    Table(Offset),
    /// No table a position can run past: the family, and why.
    NoTable(String),
    /// Unknown: what is missing, as the "not checked" reason.
    Unknown(String),
}

/// The scheme of the model at hand: `position_offset` when given, else its family's.
fn scheme(ctx: &mut Ctx<'_>, model: &Model) -> Result<Scheme, ReplayError> {
    let family = model.family.as_deref().unwrap_or("");
    if NO_POSITION_TABLE.contains(&family) {
        return Ok(Scheme::NoTable(format!(
            "{family} has no fixed position table (rotary, relative, ALiBi or growing sinusoidal positions)"
        )));
    }
    // Families whose config decides: BERT-style `position_embedding_type`, DeBERTa's
    // `position_biased_input`.
    if let Some((key, kind)) = setting(ctx, "position_embedding_type") {
        ctx.used.insert("position_embedding_type".into(), kind.clone());
        if kind.eq_ignore_ascii_case("rotary") {
            return Ok(Scheme::NoTable(format!("{key} = {kind}: rotary positions")));
        }
        if !kind.eq_ignore_ascii_case("absolute") {
            return Ok(Scheme::Unknown(format!(
                "{key} = {kind}: the positions are not absolute, and this check knows only absolute position tables"
            )));
        }
    } else if family == "esm" {
        return Ok(Scheme::Unknown(
            "esm uses an absolute position table or rotary positions by its position_embedding_type, not recorded (add position_embedding_type to the metadata)".into(),
        ));
    }
    let deberta = matches!(family, "deberta" | "debertav2");
    if deberta {
        match setting(ctx, "position_biased_input") {
            Some((key, v)) if matches!(v.to_ascii_lowercase().as_str(), "false" | "0") => {
                return Ok(Scheme::NoTable(format!(
                    "{key} = {v}: {family} uses relative positions only"
                )));
            }
            Some(_) => {}
            None => {
                return Ok(Scheme::Unknown(format!(
                    "{family} has an absolute position table only when position_biased_input is true, not recorded (add position_biased_input to the metadata)"
                )));
            }
        }
    }
    let window = if PADDED_TO_WINDOW.contains(&family) {
        Some(attention_window(ctx)?)
    } else {
        None
    };
    let after_padding = AFTER_PADDING.contains(&family) || family == "esm";
    if let Some(p) = int_setting(ctx, "position_offset")? {
        if p.value < 0 {
            return Err(ReplayError::Check(format!(
                "parameter {} = {} is negative: it is the table row of position 0",
                p.label, p.value
            )));
        }
        ctx.used.insert("position_offset".into(), p.value.to_string());
        let grows = FROM_ROW_TWO.contains(&family) || OVER_THE_MASK.contains(&family);
        let counting = if after_padding {
            Counting::BesidesPadding(padding_idx(ctx)?)
        } else if OVER_THE_MASK.contains(&family) {
            Counting::AttentionMask
        } else {
            Counting::Length
        };
        return Ok(Scheme::Table(Offset {
            rows_before: p.value,
            extra_rows: if grows { p.value } else { 0 },
            why: Some(format!("{} = {}", p.label, p.value)),
            counting,
            window,
        }));
    }
    let offset = |rows: i64, why: Option<String>, counting| Offset {
        rows_before: rows,
        extra_rows: 0,
        why,
        counting,
        window,
    };
    Ok(
        if FROM_ROW_TWO.contains(&family) || OVER_THE_MASK.contains(&family) {
            let (counting, what) = if OVER_THE_MASK.contains(&family) {
                (Counting::AttentionMask, ", counted over the attention mask")
            } else {
                (Counting::Length, "")
            };
            Scheme::Table(Offset {
                extra_rows: 2,
                ..offset(
                    2,
                    Some(format!(
                        "{family} positions start at row 2 of a table of max_position_embeddings + 2 rows{what}"
                    )),
                    counting,
                )
            })
        } else if after_padding {
            let pad = padding_idx(ctx)?;
            Scheme::Table(offset(
                pad.saturating_add(1),
                Some(format!("{family} positions start after padding_idx {pad}")),
                Counting::BesidesPadding(pad),
            ))
        } else if FROM_ROW_ZERO.contains(&family) || deberta {
            Scheme::Table(offset(0, None, Counting::Length))
        } else if family.is_empty() {
            Scheme::Unknown(
            "model family unknown (record model_type: add model_type or architectures to the metadata); positions index a table only in families with learned absolute positions (BERT, GPT-2, BART, OPT, …), not in rotary, relative or ALiBi ones (Llama, Mistral, Qwen, GPT-NeoX, T5, …)".into(),
        )
        } else {
            Scheme::Unknown(format!(
                "model family {family} is not one whose positions faultline knows (give --param position_offset=N if it has a learned absolute position table)"
            ))
        },
    )
}

/// The padding id RoBERTa-style positions skip: `pad_token_id`, else 1.
fn padding_idx(ctx: &mut Ctx<'_>) -> Result<i64, ReplayError> {
    Ok(int_setting(ctx, "pad_token_id")?.map_or(1, |p| p.value))
}

/// LED's `attention_window`: one number, or one per layer (the largest pads); `None` when not
/// recorded.
fn attention_window(ctx: &mut Ctx<'_>) -> Result<Option<i64>, ReplayError> {
    let Some((key, text)) = setting(ctx, "attention_window") else {
        return Ok(None);
    };
    let numbers: Result<Vec<i64>, _> = text
        .split(',')
        .map(|w| w.trim_matches(|c: char| "[] ".contains(c)))
        .filter(|w| !w.is_empty())
        .map(str::parse::<i64>)
        .collect();
    match numbers.ok().and_then(|n| n.into_iter().max()).filter(|w| *w > 0) {
        Some(w) => {
            ctx.used.insert("attention_window".into(), w.to_string());
            Ok(Some(w))
        }
        None => Err(ReplayError::Check(format!(
            "parameter {key} = {text:?} is not a positive integer or a list of them"
        ))),
    }
}

/// The keys that give the number of positions of a side's table, most specific first.
fn limit_keys(side: Side) -> &'static [&'static str] {
    match side {
        Side::Encoder => &[
            "max_encoder_position_embeddings",
            "max_source_positions",
            "max_position_embeddings",
            "n_positions",
            "size",
        ],
        Side::Decoder => &[
            "max_decoder_position_embeddings",
            "max_target_positions",
            "max_position_embeddings",
            "n_positions",
            "size",
        ],
    }
}

/// The number of positions of a side's table: the spec, else the metadata (also `model.KEY`).
fn table_positions(ctx: &mut Ctx<'_>, side: Side) -> Result<Option<Param<i64>>, ReplayError> {
    let keys = limit_keys(side);
    let prefixed: Vec<String> = keys.iter().map(|k| format!("model.{k}")).collect();
    let mut meta: Vec<&str> = keys.to_vec();
    meta.extend(prefixed.iter().map(String::as_str));
    let name = match side {
        Side::Encoder => "size",
        Side::Decoder => "decoder_size",
    };
    ctx.int_in(name, keys, &meta)
}

/// The tensors that index the position table: explicit `position_ids`, else the length of the
/// encoder's ids; and the length of the decoder's ids for an encoder-decoder.
pub(super) fn positions(
    ctx: &mut Ctx<'_>,
    model: &Model,
    role: &str,
) -> Result<Vec<(Side, Found)>, ReplayError> {
    let explicit = ctx.find(role);
    let offset = match scheme(ctx, model)? {
        Scheme::Table(offset) => offset,
        Scheme::NoTable(why) => {
            // Its position ids index no table: max_position_embeddings bounds nothing here.
            return Ok(vec![(
                Side::Encoder,
                Found::inconclusive(format!(
                    "{why}, so no position can index past one; the lookup that failed is another"
                )),
            )]);
        }
        Scheme::Unknown(why) => {
            let facts = lengths(ctx, explicit.as_ref())?;
            return Ok(vec![(
                Side::Encoder,
                Found::inconclusive(format!("not checked: {why}{facts}")),
            )]);
        }
    };
    let limit = table_positions(ctx, Side::Encoder)?;
    let mut parts = Vec::new();
    if let Some(t) = &explicit {
        let found = explicit_fits(ctx, t, limit.as_ref(), &offset)?;
        parts.push((Side::Encoder, found));
    }
    // During generation the positions of the cached tokens come first: `cache_position` names
    // them, the attention mask covers them.
    if let Some(t) = ctx
        .find("cache_position")
        .filter(|t| Some(t.name) != explicit.map(|e| e.name))
    {
        // The index of a token in the whole sequence: position p is row p + offset in any table.
        let found = ids_within(ctx, &t, "position_ids", limit.as_ref(), false, None)?;
        let found = values_looked_up(found, &t, limit.as_ref(), 0, 0, None);
        parts.push((Side::Encoder, found));
    }
    let encoder = ctx.find("input_ids");
    if explicit.is_none() {
        let found = match encoder {
            Some(ids) => {
                let mask = ctx.find("attention_mask");
                implied(ctx, &ids, mask, "", limit.as_ref(), &offset, Side::Encoder)?
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
        .map(|t| (t, ctx.find("decoder_attention_mask"), ""))
        .or_else(|| {
            ctx.find("labels")
                .filter(|l| l.shape.len() >= 2)
                .map(|l| (l, None, " (the decoder's inputs once shifted right)"))
        });
    let Some((dec, dec_mask, how)) = decoder else {
        return Ok(parts);
    };
    match &model.encoder_decoder {
        Some((true, _)) => {
            let limit = table_positions(ctx, Side::Decoder)?;
            let found = implied(ctx, &dec, dec_mask, how, limit.as_ref(), &offset, Side::Decoder)?;
            parts.push((Side::Decoder, found));
        }
        Some((false, _)) => {}
        None => {
            let target = int_setting(ctx, "max_target_positions")?;
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

/// Explicit positions against the table: `[0, limit)`, or `[-extra, limit)` where the family adds
/// its offset to the positions it is given in a table that many rows larger (BART's and OPT's
/// 2: OPT itself computes -1 for the padding of a row).
fn explicit_fits(
    ctx: &mut Ctx<'_>,
    t: &TensorRef<'_>,
    limit: Option<&Param<i64>>,
    offset: &Offset,
) -> Result<Found, ReplayError> {
    let extra = offset.extra_rows;
    if extra == 0 {
        // The model takes the positions as given: `why` (the rows of implied ones) does not apply.
        let found = ids_within(ctx, t, "position_ids", limit, false, None)?;
        return Ok(values_looked_up(found, t, limit, 0, 0, None));
    }
    let name = t.name;
    let Some(limit) = limit else {
        return Ok(Found::inconclusive(format!(
            "{name}: max_position_embeddings unknown (add max_position_embeddings or n_positions to the metadata or --param max_position_embeddings=N)"
        )));
    };
    if t.dtype.is_float() {
        return Ok(Found::inconclusive(format!(
            "{name} is {}: torch refuses float indices before any bounds check; save the positions as integers",
            t.dtype.torch_name()
        )));
    }
    let (lo, hi) = (-extra, limit.value);
    let out = ctx.backend.scan(*t, Scan::IntRange { lo, hi, skip: None })?;
    let table = format!("{} = {}", limit.label, limit.value);
    let because = offset.why.as_ref().map_or_else(String::new, |w| format!("; {w}"));
    let found = match first_at(t, &out) {
        Some((place, _)) => Found::new(
            Verdict::Confirmed,
            format!(
                "{place} outside [{lo}, {hi}): the model adds {extra} to it in a table of {table} + {extra} rows ({} of {} values out of range{because})",
                out.offending, out.elements
            ),
        ),
        None => Found::new(
            Verdict::Refuted,
            format!("all {} {name} in [{lo}, {hi}) for {table}{because}", out.elements),
        ),
    };
    let found = found.scanned(t, out);
    Ok(values_looked_up(
        found,
        t,
        Some(limit),
        extra,
        extra,
        offset.why.clone(),
    ))
}

/// `found` (a verdict on the values of `t` as positions) with its lookup: row = value +
/// `first_row` in a table of `limit + extra` rows. A verdict that is not one, or a float tensor,
/// records none.
fn values_looked_up(
    found: Found,
    t: &TensorRef<'_>,
    limit: Option<&Param<i64>>,
    first_row: i64,
    extra: i64,
    why: Option<String>,
) -> Found {
    let Some(limit) = limit.filter(|_| found.verdict != Verdict::Inconclusive && !t.dtype.is_float()) else {
        return found;
    };
    let largest = found.scan.as_ref().and_then(|(out, _, _)| match out.max {
        Some(Scalar::Int(v)) => Some(v.saturating_add(first_row)),
        _ => None,
    });
    let lookup = PositionLookup {
        stack: lookup::Stack::Encoder,
        tensor: t.name.to_owned(),
        counting: lookup::Counting::Values,
        window: None,
        first_row,
        key: limit.label.clone(),
        size: limit.value,
        rows: limit.value.saturating_add(extra),
        why,
        largest_row: largest,
    };
    found.looked_up(lookup)
}

/// What the snapshot would have said with the family known: the lengths and the table's size.
fn lengths(ctx: &mut Ctx<'_>, explicit: Option<&TensorRef<'_>>) -> Result<String, ReplayError> {
    let mut seen: Vec<String> = ["input_ids", "decoder_input_ids", "attention_mask"]
        .iter()
        .filter_map(|role| ctx.find(role))
        .chain(explicit.copied())
        .map(|t| format!("{} {}", t.name, shape_text(t.shape)))
        .collect();
    seen.dedup();
    let limit = table_positions(ctx, Side::Encoder)?;
    let table = limit.map(|l| format!("{} = {}", l.label, l.value));
    const NO_SIZE: &str =
        "; max_position_embeddings unknown too (add max_position_embeddings or n_positions to the metadata)";
    Ok(match (seen.is_empty(), table) {
        (true, None) => NO_SIZE.to_owned(),
        (true, Some(t)) => format!(" ({t})"),
        (false, None) => format!(" ({}){NO_SIZE}", seen.join(", ")),
        (false, Some(t)) => format!(" ({} against {t})", seen.join(", ")),
    })
}

/// The positions `ids` implies, the way the family counts them, against `limit`.
fn implied(
    ctx: &mut Ctx<'_>,
    ids: &TensorRef<'_>,
    mask: Option<TensorRef<'_>>,
    how: &str,
    limit: Option<&Param<i64>>,
    offset: &Offset,
    side: Side,
) -> Result<Found, ReplayError> {
    let sequence = longest(*ids, mask);
    let window = match (side, offset.window) {
        (Side::Encoder, Some(w)) => Some(w),
        _ => None,
    };
    let found = length_fits(&sequence, how, limit, offset, window, side);
    match offset.counting {
        Counting::Length => Ok(found),
        Counting::BesidesPadding(pad) if sequence.name == ids.name => {
            past_padding(ctx, ids, found, limit, offset, pad, side)
        }
        Counting::BesidesPadding(_) => Ok(found),
        Counting::AttentionMask => over_the_mask(ctx, &sequence, mask, found, limit, offset, side),
    }
}

impl Offset {
    /// The lookup of `tensor`'s positions counted by `counting` in a table of `limit` rows plus
    /// the family's.
    fn lookup(
        &self,
        side: Side,
        tensor: &str,
        counting: Counting,
        limit: &Param<i64>,
        window: Option<i64>,
    ) -> PositionLookup {
        PositionLookup {
            stack: side.into(),
            tensor: tensor.to_owned(),
            counting: counting.recorded(),
            window,
            first_row: self.rows_before,
            key: limit.label.clone(),
            size: limit.value,
            rows: limit.value.saturating_add(self.extra_rows),
            why: self.why.clone(),
            largest_row: None,
        }
    }
}

/// A verdict the length alone decided for a family that counts only some positions: its lookups
/// read `tensor` by `counting`, the model's own rule (their largest row was not counted).
fn counted_by(mut found: Found, tensor: &str, counting: Counting) -> Found {
    for lookup in &mut found.positions {
        lookup.tensor = tensor.to_owned();
        lookup.counting = counting.recorded();
        lookup.largest_row = None;
    }
    found
}

/// The tensor whose last dim is the sequence's length: `ids`, or `mask` when it covers more (the
/// cached tokens of a generation step).
fn longest<'a>(ids: TensorRef<'a>, mask: Option<TensorRef<'a>>) -> TensorRef<'a> {
    match mask {
        Some(m) if m.shape.len() == ids.shape.len() && m.shape.last() > ids.shape.last() => m,
        _ => ids,
    }
}

/// Whether the positions the length of `ids` implies fit a table of `limit` positions (after
/// padding to `window`, `Some(None)` when the window is unknown).
fn length_fits(
    ids: &TensorRef<'_>,
    how: &str,
    limit: Option<&Param<i64>>,
    offset: &Offset,
    window: Option<Option<i64>>,
    side: Side,
) -> Found {
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
    let rows = limit.value.saturating_add(offset.extra_rows);
    let available = rows.saturating_sub(offset.rows_before);
    let because = offset.why.as_ref().map_or_else(String::new, |w| format!("; {w}"));
    // LED pads the encoder's input to a multiple of its attention window, and takes positions
    // over the padded length.
    let padded = match window {
        Some(Some(w)) if len > 0 => {
            let padded = (len / w + i64::from(len % w != 0)).saturating_mul(w);
            (padded != len).then_some((
                padded,
                format!(", padded to {padded} (a multiple of attention_window {w})"),
            ))
        }
        Some(None) if len <= available => {
            return Found::inconclusive(format!(
                "{name}{how} length {len} <= the {available} positions of {table}, but the model pads it to a multiple of attention_window, not recorded (add attention_window to the metadata)"
            ));
        }
        _ => None,
    };
    let (positions, padding) = padded.unwrap_or((len, String::new()));
    // Every position of the (padded) length: the last is row `positions - 1 + rows_before`.
    let lookup = PositionLookup {
        largest_row: Some(positions.saturating_sub(1).saturating_add(offset.rows_before)),
        ..offset.lookup(side, name, Counting::Length, limit, window.flatten())
    };
    let found = if positions > available {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{name}{how} length {len}{padding} > the {available} positions of {table}: positions {available}..{} have no row ({name} shape {shape}{because})",
                positions - 1
            ),
        )
    } else {
        Found::new(
            Verdict::Refuted,
            format!("{name}{how} length {len}{padding} <= the {available} positions of {table}{because}"),
        )
    };
    found.looked_up(lookup)
}

/// RoBERTa-style positions skip the padding of a row, so a padded batch longer than the table
/// may fit: a length past the table confirms only if a row's tokens besides padding are past it.
fn past_padding(
    ctx: &mut Ctx<'_>,
    ids: &TensorRef<'_>,
    found: Found,
    limit: Option<&Param<i64>>,
    offset: &Offset,
    pad: i64,
    side: Side,
) -> Result<Found, ReplayError> {
    let counting = Counting::BesidesPadding(pad);
    let (Verdict::Confirmed, Some(limit)) = (found.verdict, limit) else {
        return Ok(counted_by(found, ids.name, counting));
    };
    let available = limit
        .value
        .saturating_add(offset.extra_rows)
        .saturating_sub(offset.rows_before);
    let name = ids.name;
    let Some((row, tokens)) = most_values_besides(ctx, ids, pad)? else {
        return Ok(Found::inconclusive(format!(
            "{}; but positions that skip padding ({pad}) could not be counted per row of {name}",
            found.summary
        )));
    };
    let found = if tokens > available {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{name}[{row}] holds {tokens} tokens besides padding {pad}: more than the {available} positions of {} = {} (positions start after padding_idx {pad})",
                limit.label, limit.value
            ),
        )
    } else {
        Found::new(
            Verdict::Refuted,
            format!(
                "{name} length {} > {available}, but no row of {name} holds more than {tokens} tokens besides padding {pad}, within the {available} positions left after padding_idx",
                ids.shape.last().copied().unwrap_or(0)
            ),
        )
    };
    Ok(found.looked_up(PositionLookup {
        largest_row: Some(offset.rows_before.saturating_add(tokens).saturating_sub(1)),
        ..offset.lookup(side, name, counting, limit, None)
    }))
}

/// OPT-style positions count a row's attended tokens: a length past the table confirms only if a
/// row of the attention mask attends to more tokens than the table has positions.
fn over_the_mask(
    ctx: &mut Ctx<'_>,
    sequence: &TensorRef<'_>,
    mask: Option<TensorRef<'_>>,
    found: Found,
    limit: Option<&Param<i64>>,
    offset: &Offset,
    side: Side,
) -> Result<Found, ReplayError> {
    let mask = mask.filter(|m| m.shape.last() >= sequence.shape.last());
    let (Verdict::Confirmed, Some(limit)) = (found.verdict, limit) else {
        // Without a mask the model attends to every token: its positions are the length's.
        return Ok(match mask {
            Some(mask) => counted_by(found, mask.name, Counting::AttentionMask),
            None => found,
        });
    };
    let Some(mask) = mask else {
        return Ok(Found::inconclusive(format!(
            "{}; but the model counts positions over the attention mask, which the snapshot lacks (save attention_mask)",
            found.summary
        )));
    };
    let available = limit
        .value
        .saturating_add(offset.extra_rows)
        .saturating_sub(offset.rows_before);
    let name = mask.name;
    let Some((row, attended)) = most_values_besides(ctx, &mask, 0)? else {
        return Ok(Found::inconclusive(format!(
            "{}; but the attended tokens of {name} could not be counted per row",
            found.summary
        )));
    };
    let found = if attended > available {
        Found::new(
            Verdict::Confirmed,
            format!(
                "{name}[{row}] attends to {attended} tokens: more than the {available} positions of {} = {} (positions are counted over the attention mask)",
                limit.label, limit.value
            ),
        )
    } else {
        Found::new(
            Verdict::Refuted,
            format!(
                "{} length {} > {available}, but no row of {name} attends to more than {attended} tokens, within the {available} positions counted over the attention mask",
                sequence.name,
                sequence.shape.last().copied().unwrap_or(0)
            ),
        )
    };
    Ok(found.looked_up(PositionLookup {
        largest_row: Some(offset.rows_before.saturating_add(attended).saturating_sub(1)),
        ..offset.lookup(side, name, Counting::AttentionMask, limit, None)
    }))
}

/// The row of `t` ([..., T]) with the most values other than `skip`, and their count; `None`
/// for a float tensor, a scalar or more rows than are worth a scan each.
fn most_values_besides(
    ctx: &Ctx<'_>,
    t: &TensorRef<'_>,
    skip: i64,
) -> Result<Option<(u64, i64)>, ReplayError> {
    const MAX_ROWS: u64 = 1 << 16;
    let Some(&len) = t.shape.last() else {
        return Ok(None);
    };
    if t.dtype.is_float() || len == 0 {
        return Ok(None);
    }
    let rows = t.elements() / len;
    let row_bytes = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_mul(t.dtype.size()));
    let (Some(row_bytes), true) = (row_bytes, rows <= MAX_ROWS) else {
        return Ok(None);
    };
    let shape = [len];
    let mut best: Option<(u64, i64)> = None;
    for (row, bytes) in (0..rows).zip(t.bytes.chunks_exact(row_bytes)) {
        let view = TensorRef {
            name: t.name,
            dtype: t.dtype,
            shape: &shape,
            bytes,
        };
        let out = ctx.backend.scan(
            view,
            Scan::IntRange {
                lo: skip,
                hi: skip.saturating_add(1),
                skip: None,
            },
        )?;
        let count = i64::try_from(out.offending).unwrap_or(i64::MAX);
        if best.is_none_or(|(_, most)| count > most) {
            best = Some((row, count));
        }
    }
    Ok(best)
}
