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
//! This file owns which tensors a table implicates for the model at hand ([`Model`], read from
//! the Hugging Face config keys of the metadata and from the tensors' shapes; [`Trace`], the
//! traceback's model frames a rule passes), the limit each is checked against, and the verdict
//! they make together ([`combine`]): confirmed when one tensor offends, refuted only when every
//! implicated tensor was checked against a known limit, else inconclusive saying what was
//! checked, what was not and which key would tell. Everything here is logic over
//! [`Scan`]s, so the CPU and the GPU agree by construction.

use super::bounds::{elsewhere, ids_within, table_size};
use super::{Ctx, Found, Param, Scalar, Scan, shape_text};
use crate::replay::snapshot::TensorRef;
use crate::replay::{ReplayError, Verdict};

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

/// What the log's traceback says: the `frames` parameter, the model frames a rule extracted
/// from it (`decoder embed_tokens` for `self.decoder(` then `self.embed_tokens(`).
struct Trace {
    /// The frames as given, for the summary.
    frames: String,
    /// Whether the lookup ran inside a `decoder` module.
    decoder: bool,
}

impl Trace {
    fn read(ctx: &mut Ctx<'_>) -> Trace {
        let frames = ctx.lookup(&["frames"]).map(|(_, v)| v).unwrap_or_default();
        if !frames.is_empty() {
            ctx.used.insert("frames".into(), frames.clone());
        }
        let decoder = frames
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w.eq_ignore_ascii_case("decoder"));
        Trace { frames, decoder }
    }
}

/// Checks every tensor that indexes `table` and gives their one verdict.
pub(super) fn table_bounds(ctx: &mut Ctx<'_>, table: Table, role: &str) -> Result<Found, ReplayError> {
    let trace = Trace::read(ctx);
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
            (true, true) => format!("the traceback is in the decoder: {}", trace.frames),
            (true, false) => format!("the traceback is in the decoder: {}; {why}", trace.frames),
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
    if trace.decoder {
        // Stable: the decoder's results first, each side in its own order.
        parts.sort_by_key(|(side, _)| *side != Side::Decoder);
    }
    Ok(combine(parts.into_iter().map(|(_, found)| found).collect()))
}

/// A fact about the model and what said so (`model_type = t5`), or `None` when nothing did.
type Known<T> = Option<(T, String)>;

/// Model families whose decoder takes the labels shifted right (encoder-decoders).
const ENCODER_DECODERS: &[&str] = &[
    "t5",
    "mt5",
    "umt5",
    "longt5",
    "switchtransformers",
    "bart",
    "mbart",
    "plbart",
    "mvp",
    "marian",
    "pegasus",
    "pegasusx",
    "bigbirdpegasus",
    "led",
    "blenderbot",
    "blenderbotsmall",
    "m2m100",
    "nllbmoe",
    "fsmt",
    "prophetnet",
    "xlmprophetnet",
    "encoderdecoder",
];

/// Decoder-only language models: labels are token ids, there is no decoder of their own.
const CAUSAL_LMS: &[&str] = &[
    "gpt2",
    "gptneo",
    "gptneox",
    "gptj",
    "gptbigcode",
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
    "falcon",
    "opt",
    "bloom",
    "mpt",
    "codegen",
    "starcoder2",
    "olmo",
    "olmo2",
    "stablelm",
    "cohere",
    "xglm",
    "ctrl",
];

/// Encoders: no decoder; labels are classes or (masked LM) token ids.
const ENCODERS: &[&str] = &[
    "bert",
    "roberta",
    "xlmroberta",
    "camembert",
    "distilbert",
    "albert",
    "electra",
    "deberta",
    "debertav2",
    "mpnet",
    "longformer",
    "bigbird",
    "modernbert",
    "esm",
    "xmod",
    "data2vectext",
    "ibert",
    "luke",
    "megatronbert",
    "roformer",
    "funnel",
    "convbert",
    "layoutlm",
    "rembert",
    "squeezebert",
    "ernie",
    "nezha",
];

/// Families without a fixed position table: rotary, relative or ALiBi positions, or sinusoidal
/// tables that grow with the sequence (M2M100, NLLB, XGLM, FSMT).
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
    "phi",
    "m2m100",
    "nllbmoe",
    "xglm",
    "fsmt",
];

/// Families whose positions start after `padding_idx` in a table of `max_position_embeddings` rows.
const PADDING_OFFSET: &[&str] = &[
    "roberta",
    "xlmroberta",
    "camembert",
    "longformer",
    "xmod",
    "data2vectext",
    "ibert",
    "luke",
    "mpnet",
    "esm",
];

/// Families whose learned positions start at row 2 of a table of `max_position_embeddings + 2` rows.
const ROW_TWO_OFFSET: &[&str] = &["bart", "mbart", "plbart", "mvp", "opt"];

/// What the metadata and the tensors say of the model: enough to know which tensors feed a table.
struct Model {
    /// The family (`model_type`, else read from the architecture), lower case without `_` / `-`.
    family: Option<String>,
    /// The architecture (`T5ForConditionalGeneration`), when given.
    architecture: Option<String>,
    /// Whether a decoder takes the labels shifted right (or `decoder_input_ids`).
    encoder_decoder: Known<bool>,
}

/// A metadata or spec value under `key`, or under `model.key` as the capture helper writes a config.
fn setting(ctx: &Ctx<'_>, key: &str) -> Option<(String, String)> {
    let prefixed = format!("model.{key}");
    ctx.lookup_in(&[key], &[key, prefixed.as_str()])
}

/// An integer setting; a value that is not one is an error.
fn int_setting(ctx: &mut Ctx<'_>, key: &str) -> Result<Option<Param<i64>>, ReplayError> {
    let prefixed = format!("model.{key}");
    ctx.int_in(key, &[key], &[key, prefixed.as_str()])
}

fn family_of(text: &str) -> String {
    text.trim()
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect()
}

/// The family an architecture name tells (`MBartForConditionalGeneration` -> `mbart`).
fn family_of_architecture(arch: &str) -> String {
    // The last `For`: `RoFormerForMaskedLM` is a roformer.
    let head = arch
        .rfind("For")
        .map(|i| &arch[..i])
        .or_else(|| arch.strip_suffix("LMHeadModel"))
        .or_else(|| arch.strip_suffix("MTModel"))
        .or_else(|| arch.strip_suffix("Model"))
        .unwrap_or(arch);
    family_of(head)
}

impl Model {
    fn read(ctx: &mut Ctx<'_>) -> Result<Model, ReplayError> {
        let architecture = setting(ctx, "architectures")
            .or_else(|| setting(ctx, "class"))
            .and_then(|(_, text)| {
                text.split(',')
                    .map(|a| a.trim_matches(|c: char| "[]\"' ".contains(c)).to_owned())
                    .find(|a| !a.is_empty())
            });
        let model_type = setting(ctx, "model_type");
        if let Some((_, text)) = &model_type {
            ctx.used.insert("model_type".into(), text.clone());
        }
        let family = model_type
            .map(|(_, t)| family_of(&t))
            .filter(|f| !f.is_empty())
            .or_else(|| architecture.as_deref().map(family_of_architecture))
            .filter(|f| !f.is_empty());
        let told = match setting(ctx, "is_encoder_decoder") {
            Some((key, text)) => {
                let value = match text.to_ascii_lowercase().as_str() {
                    "true" | "1" | "yes" => true,
                    "false" | "0" | "no" => false,
                    _ => {
                        return Err(ReplayError::Check(format!(
                            "parameter {key} = {text:?} is not true or false"
                        )));
                    }
                };
                ctx.used.insert("is_encoder_decoder".into(), value.to_string());
                Some((value, format!("{key} = {text}")))
            }
            None => None,
        };
        let by_family = family.as_deref().and_then(|f| {
            let what = format!("model_type {f}");
            if ENCODER_DECODERS.contains(&f) {
                Some((true, what))
            } else if CAUSAL_LMS.contains(&f) || ENCODERS.contains(&f) {
                Some((false, what))
            } else {
                None
            }
        });
        let by_tensor = ctx
            .find("decoder_input_ids")
            .map(|t| (true, format!("the snapshot holds {}", t.name)));
        Ok(Model {
            family,
            architecture,
            encoder_decoder: told.or(by_family).or(by_tensor),
        })
    }

    /// Whether `labels` are token ids (a language-model head over the vocabulary of `vocab` rows)
    /// rather than classes, and what says so.
    fn labels_are_tokens(&self, ctx: &Ctx<'_>, labels: &TensorRef<'_>, vocab: Option<i64>) -> Known<bool> {
        if let Some(arch) = &self.architecture {
            const TOKENS: [&str; 5] = [
                "ForConditionalGeneration",
                "ForCausalLM",
                "LMHeadModel",
                "ForMaskedLM",
                "MTModel",
            ];
            const CLASSES: [&str; 5] = [
                "ForSequenceClassification",
                "ForTokenClassification",
                "ForQuestionAnswering",
                "ForMultipleChoice",
                "ForImageClassification",
            ];
            if TOKENS.iter().any(|s| arch.contains(s)) {
                return Some((true, arch.clone()));
            }
            if CLASSES.iter().any(|s| arch.contains(s)) {
                return Some((false, arch.clone()));
            }
        }
        let ids = ctx.find("input_ids").filter(|t| t.name != labels.name);
        if let Some(ids) = &ids
            && labels.shape.len() < ids.shape.len()
        {
            return Some((
                false,
                format!(
                    "{} {} has one value per sequence of {} {}",
                    labels.name,
                    shape_text(labels.shape),
                    ids.name,
                    shape_text(ids.shape)
                ),
            ));
        }
        if let Some((true, why)) = &self.encoder_decoder {
            return Some((true, why.clone()));
        }
        if let (Some(f), Some(ids)) = (&self.family, &ids)
            && CAUSAL_LMS.contains(&f.as_str())
            && labels.shape == ids.shape
        {
            return Some((true, format!("model_type {f}")));
        }
        if let Some(logits) = ctx.find("logits").filter(|l| l.name != labels.name)
            && let Some((last, rest)) = logits.shape.split_last()
            && rest == labels.shape
        {
            let why = format!("{} {}", logits.name, shape_text(logits.shape));
            let classes = i64::try_from(*last).ok();
            return match vocab {
                Some(v) if Some(v) == classes => Some((true, why)),
                Some(_) => Some((false, why)),
                None => None,
            };
        }
        // Per-token labels and no class count: the ids of a language model's targets.
        let classes = ctx
            .lookup_in(
                &["num_classes", "num_labels"],
                &["num_classes", "num_labels", "model.num_labels"],
            )
            .is_some();
        match &ids {
            Some(ids) if !classes && labels.shape.len() >= 2 && labels.shape.len() == ids.shape.len() => {
                Some((
                    true,
                    format!(
                        "{} {} holds one id per token like {} {} and no num_labels is given",
                        labels.name,
                        shape_text(labels.shape),
                        ids.name,
                        shape_text(ids.shape)
                    ),
                ))
            }
            _ => None,
        }
    }
}

/// The vocabulary size, the ignore index and the reason when the model says `labels` are token
/// ids (a language model's or an encoder-decoder's); `None` when it does not say so.
pub(super) fn labels_as_tokens(
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
fn words(ctx: &mut Ctx<'_>, model: &Model, role: &str) -> Result<Vec<(Side, Found)>, ReplayError> {
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
fn positions(ctx: &mut Ctx<'_>, model: &Model, role: &str) -> Result<Vec<(Side, Found)>, ReplayError> {
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
    // The first scanned part's numbers stand for the whole.
    let scanned = parts.into_iter().find(|p| p.scan.is_some());
    Found {
        verdict,
        summary,
        tensor: scanned.as_ref().and_then(|p| p.tensor.clone()),
        offending: scanned.as_ref().map_or(0, |p| p.offending),
        scan: scanned.and_then(|p| p.scan),
    }
}
