//! What kind of model the snapshot comes from: encoder, causal language model or encoder-decoder,
//! and its family, read from the Hugging Face config keys of the metadata and from the tensors'
//! shapes; the family lists that decide it; whether labels are token ids or classes. (How each
//! family counts positions is `positions`'.)

use crate::replay::ReplayError;
use crate::replay::check::{Ctx, Param, shape_text};
use crate::replay::snapshot::TensorRef;

/// A fact about the model and what said so (`model_type = t5`), or `None` when nothing did.
type Known<T> = Option<(T, String)>;

/// Model families whose decoder takes the labels shifted right (encoder-decoders).
pub(super) const ENCODER_DECODERS: &[&str] = &[
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
pub(super) const CAUSAL_LMS: &[&str] = &[
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
pub(super) const ENCODERS: &[&str] = &[
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

/// What the metadata and the tensors say of the model: enough to know which tensors feed a table.
pub(in crate::replay::check) struct Model {
    /// The family (`model_type`, else read from the architecture), lower case without `_` / `-`.
    pub(in crate::replay::check) family: Option<String>,
    /// The architecture (`T5ForConditionalGeneration`), when given.
    architecture: Option<String>,
    /// Whether a decoder takes the labels shifted right (or `decoder_input_ids`).
    pub(super) encoder_decoder: Known<bool>,
}

/// A metadata or spec value under `key`, or under `model.key` as the capture helper writes a config.
pub(super) fn setting(ctx: &Ctx<'_>, key: &str) -> Option<(String, String)> {
    let prefixed = format!("model.{key}");
    ctx.lookup_in(&[key], &[key, prefixed.as_str()])
}

/// An integer setting; a value that is not one is an error.
pub(super) fn int_setting(ctx: &mut Ctx<'_>, key: &str) -> Result<Option<Param<i64>>, ReplayError> {
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
    pub(in crate::replay::check) fn read(ctx: &mut Ctx<'_>) -> Result<Model, ReplayError> {
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
    pub(super) fn labels_are_tokens(
        &self,
        ctx: &Ctx<'_>,
        labels: &TensorRef<'_>,
        vocab: Option<i64>,
    ) -> Known<bool> {
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
