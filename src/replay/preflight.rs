//! Pre-flight: the replay checks run on a batch before a job starts, with no log to say what
//! failed. The snapshot's tensors decide which checks apply ([`plan`]): the word and position
//! tables of the ids, the token types, the labels, the width of embeddings and encoder states,
//! every floating-point tensor's finiteness, and the batch's consistency. A Hugging Face `config.json` gives the model's facts
//! ([`config_params`]) when the snapshot's metadata lacks them.
//!
//! A confirmed check is a problem the job would meet; refuted ones are fine; inconclusive ones
//! are what could not be checked, each saying which fact would let it run.

use serde::Serialize;
use serde_json::Value;

use super::check::{self, CheckSpec};
use super::snapshot::Snapshot;
use super::{Backend, CheckResult, ReplayError, Verdict};

/// Keys of a Hugging Face `config.json` the checks read, taken as they are.
const CONFIG_KEYS: &[&str] = &[
    "vocab_size",
    "max_position_embeddings",
    "n_positions",
    "max_target_positions",
    "max_source_positions",
    "max_encoder_position_embeddings",
    "max_decoder_position_embeddings",
    "position_embedding_type",
    "position_biased_input",
    "attention_window",
    "type_vocab_size",
    "hidden_size",
    "d_model",
    "n_embd",
    "embedding_size",
    "input_embedding_size",
    "word_embed_proj_dim",
    "cross_attention_hidden_size",
    "is_encoder_decoder",
    "model_type",
    "decoder_start_token_id",
    "pad_token_id",
    "problem_type",
];

/// The facts of a Hugging Face `config.json`, as snapshot parameters (a JSON object of strings):
/// the keys the checks read, `architectures` joined by commas, and `num_labels` (from `id2label`)
/// only for a classification head, since every config has a default one that bounds nothing.
pub fn config_params(config: &[u8]) -> Result<serde_json::Map<String, Value>, ReplayError> {
    let value: Value = serde_json::from_slice(config)
        .map_err(|e| ReplayError::Check(format!("the model config is not JSON: {e}")))?;
    let Value::Object(config) = value else {
        return Err(ReplayError::Check(
            "the model config is not a JSON object (expected a Hugging Face config.json)".into(),
        ));
    };
    let mut params = serde_json::Map::new();
    for key in CONFIG_KEYS {
        match config.get(*key) {
            Some(value) if is_scalar(value) => {
                params.insert((*key).to_owned(), Value::String(scalar_text(value)));
            }
            // LED's attention_window, one per layer.
            Some(Value::Array(list)) if !list.is_empty() && list.iter().all(Value::is_number) => {
                let items: Vec<String> = list.iter().map(scalar_text).collect();
                params.insert((*key).to_owned(), Value::String(items.join(",")));
            }
            _ => {}
        }
    }
    let architectures: Vec<&str> = config
        .get("architectures")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !architectures.is_empty() {
        params.insert("architectures".into(), Value::String(architectures.join(",")));
    }
    let classifier = architectures.iter().any(|a| a.ends_with("Classification"));
    let labels = config.get("id2label").and_then(Value::as_object).map(|m| m.len());
    if let (true, Some(n)) = (classifier, labels.filter(|n| *n > 0)) {
        params.insert("num_labels".into(), Value::String(n.to_string()));
    }
    Ok(params)
}

fn is_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The checks that apply to `snapshot`, each with the tensor it starts from.
pub fn plan(snapshot: &Snapshot) -> Vec<CheckSpec> {
    let spec = |name: &str, params: &[(&str, &str)]| CheckSpec {
        name: name.to_owned(),
        params: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let mut checks = Vec::new();
    let has_ids = snapshot.by_role("input_ids").is_some() || snapshot.tensor("decoder_input_ids").is_some();
    if has_ids {
        checks.push(spec("index_bounds", &[("tensor", "input_ids")]));
    }
    if has_ids || snapshot.by_role("position_ids").is_some() {
        checks.push(spec("index_bounds", &[("tensor", "position_ids")]));
    }
    if snapshot.by_role("token_type_ids").is_some() {
        checks.push(spec("index_bounds", &[("tensor", "token_type_ids")]));
    }
    if snapshot.by_role("labels").is_some() {
        checks.push(spec("target_bounds", &[]));
    }
    let states = super::check::DEFAULT_HIDDEN_SIZE_TENSORS.split(',');
    if states.into_iter().any(|role| snapshot.by_role(role).is_some()) {
        checks.push(spec("hidden_size", &[]));
    }
    for tensor in snapshot.tensors() {
        if tensor.dtype.is_float() {
            checks.push(spec("finite", &[("tensor", tensor.name)]));
        }
    }
    let names: Vec<&str> = snapshot.tensors().map(|t| t.name).collect();
    if names.len() >= 2 {
        checks.push(spec("consistency", &[("tensors", &names.join(","))]));
    }
    checks
}

/// What pre-flight found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Confirmed checks: problems the job would meet.
    pub problems: usize,
    /// Every check that ran, problems first, then the fine ones, then those that could not run.
    pub results: Vec<CheckResult>,
}

impl Report {
    /// Whether a check found a problem.
    pub fn has_problems(&self) -> bool {
        self.problems > 0
    }
}

/// Runs the [`plan`] of `snapshot` on `backend`.
pub fn run(snapshot: &Snapshot, backend: &dyn Backend) -> Result<Report, ReplayError> {
    let mut results = plan(snapshot)
        .iter()
        .map(|spec| check::run(spec, snapshot, backend))
        .collect::<Result<Vec<_>, _>>()?;
    results.sort_by_key(|r| match r.verdict {
        Verdict::Confirmed => 0,
        Verdict::Refuted => 1,
        _ => 2,
    });
    let problems = results.iter().filter(|r| r.verdict == Verdict::Confirmed).count();
    Ok(Report { problems, results })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> serde_json::Map<String, Value> {
        config_params(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_configs_limits_and_roles_become_parameters() {
        let p = params(
            r#"{"model_type": "bart", "vocab_size": 50265, "max_position_embeddings": 1024,
                "is_encoder_decoder": true, "decoder_start_token_id": 2, "pad_token_id": 1,
                "architectures": ["BartForConditionalGeneration"], "d_model": 768,
                "id2label": {"0": "LABEL_0", "1": "LABEL_1"}}"#,
        );
        assert_eq!(p["vocab_size"], "50265");
        assert_eq!(p["is_encoder_decoder"], "true");
        assert_eq!(p["architectures"], "BartForConditionalGeneration");
        assert_eq!(p["d_model"], "768", "the width the hidden_size check reads");
        assert!(!p.contains_key("id2label"), "only the keys the checks read");
        assert!(
            !p.contains_key("num_labels"),
            "a generation model's default labels bound nothing"
        );
    }

    #[test]
    fn leds_attention_window_per_layer_is_kept_as_a_list() {
        let p = params(
            r#"{"model_type": "led", "attention_window": [512, 512, 1024],
                "max_encoder_position_embeddings": 16384, "max_decoder_position_embeddings": 1024}"#,
        );
        assert_eq!(p["attention_window"], "512,512,1024");
        assert_eq!(p["max_encoder_position_embeddings"], "16384");
    }

    #[test]
    fn a_classifier_config_gives_its_number_of_labels() {
        let p = params(
            r#"{"architectures": ["BertForSequenceClassification"],
                "id2label": {"0": "neg", "1": "neutral", "2": "pos"}}"#,
        );
        assert_eq!(p["num_labels"], "3");
    }

    #[test]
    fn a_config_that_is_not_a_json_object_is_an_error() {
        assert!(config_params(b"[1, 2]").is_err());
        assert!(config_params(b"vocab_size = 3").is_err());
    }
}
