//! Snapshot parameters from JSON: a flat object of scalars (`{"num_classes": 2, "role.labels": "y"}`).
//!
//! The same rule reads a safetensors `__metadata__`, an npz `params.json` member and the JSON part
//! of an upload: strings are kept as they are, numbers and booleans as their JSON text, `null` is
//! skipped, and nested arrays or objects are refused (a check parameter is one value).

use std::collections::BTreeMap;

use serde_json::Value;

use super::snapshot::{Limits, SnapshotError};

/// Reads a JSON document that must be a flat object of scalars.
pub fn parse_params(json: &[u8], limits: &Limits) -> Result<BTreeMap<String, String>, SnapshotError> {
    if json.len() > limits.max_header {
        return Err(SnapshotError::TooLarge {
            what: "parameter JSON".into(),
            actual: json.len() as u64,
            limit: limits.max_header as u64,
        });
    }
    let value: Value =
        serde_json::from_slice(json).map_err(|e| SnapshotError::Params(format!("not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(SnapshotError::Params(format!(
            "expected a JSON object of name: value, found {}",
            kind(&value)
        )));
    };
    flatten(map)
}

/// Turns a JSON object's scalar values into parameter text.
pub fn flatten(map: serde_json::Map<String, Value>) -> Result<BTreeMap<String, String>, SnapshotError> {
    let mut params = BTreeMap::new();
    for (key, value) in map {
        let text = match value {
            Value::Null => continue,
            Value::String(s) => s,
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            other @ (Value::Array(_) | Value::Object(_)) => {
                return Err(SnapshotError::Params(format!(
                    "`{key}` is {}; a parameter is one string, number or boolean \
                     (write a list as a string, e.g. \"cuda:0,cpu\")",
                    kind(&other)
                )));
            }
        };
        params.insert(key, text);
    }
    Ok(params)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Result<BTreeMap<String, String>, SnapshotError> {
        parse_params(json.as_bytes(), &Limits::default())
    }

    #[test]
    fn scalars_become_their_json_text_and_null_is_skipped() {
        let p = params(r#"{"num_classes": 2, "lr": 0.5, "strict": true, "role.labels": "y", "gone": null}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let expected: BTreeMap<String, String> = [
            ("lr", "0.5"),
            ("num_classes", "2"),
            ("role.labels", "y"),
            ("strict", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(p, expected);
    }

    #[test]
    fn nested_values_and_non_objects_are_refused_with_the_key() {
        let Err(SnapshotError::Params(message)) = params(r#"{"shape": [2, 3]}"#) else {
            panic!("an array parameter was accepted");
        };
        assert!(message.contains("`shape` is an array"), "{message}");
        assert!(matches!(params("[1, 2]"), Err(SnapshotError::Params(_))));
        assert!(matches!(params("{"), Err(SnapshotError::Params(_))));
    }

    #[test]
    fn a_parameter_document_over_the_header_limit_is_refused() {
        let limits = Limits {
            max_header: 8,
            ..Limits::default()
        };
        let result = parse_params(br#"{"num_classes": 2}"#, &limits);
        assert!(matches!(result, Err(SnapshotError::TooLarge { .. })));
    }
}
