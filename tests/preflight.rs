//! `faultline preflight`: a batch checked before the job starts, as a CI step runs it (the real
//! binary, snapshots written by the independent `safetensors` crate, a Hugging Face config.json).

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use safetensors::tensor::TensorView;

/// A batch of int64 tensors `[(name, shape, values)]` with metadata, written to `dir/name`.
fn batch(
    dir: &Path,
    name: &str,
    tensors: &[(&str, Vec<usize>, Vec<i64>)],
    metadata: &[(&str, &str)],
) -> PathBuf {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, values)| values.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), data)| {
            let view = TensorView::new(safetensors::Dtype::I64, shape.clone(), data)
                .unwrap_or_else(|e| panic!("{e}"));
            (*name, view)
        })
        .collect();
    let metadata: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let file = safetensors::serialize(views, (!metadata.is_empty()).then_some(metadata))
        .unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(name);
    std::fs::write(&path, file).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn preflight(args: &[&str]) -> Output {
    support::faultline()
        .arg("preflight")
        .args(args)
        .args(["--backend", "cpu"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Ids in `[0, n)`, `count` of them.
fn ids(count: usize, n: i64) -> Vec<i64> {
    (0..count as i64).map(|i| (i * 7) % n).collect()
}

const T5_CONFIG: &str = r#"{"model_type": "t5", "is_encoder_decoder": true, "vocab_size": 100,
    "decoder_start_token_id": 0, "pad_token_id": 0, "architectures": ["T5ForConditionalGeneration"]}"#;

#[test]
fn a_label_past_the_vocabulary_of_a_seq2seq_model_fails_the_preflight_with_its_place() {
    let db = support::TempDb::new("preflight-t5");
    let config = db.dir.join("config.json");
    std::fs::write(&config, T5_CONFIG).unwrap_or_else(|e| panic!("{e}"));
    let mut labels = ids(24, 100);
    labels[13] = 150;
    let bad = batch(
        &db.dir,
        "bad.safetensors",
        &[
            ("input_ids", vec![2, 16], ids(32, 100)),
            ("labels", vec![2, 12], labels),
        ],
        &[],
    );
    let run = preflight(&[
        "--snapshot",
        &bad.display().to_string(),
        "--config",
        &config.display().to_string(),
    ]);
    let out = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{out}{}", text(&run.stderr));
    assert!(
        out.contains("problem: labels[1, 1] = 150 >= vocab_size = 100"),
        "{out}"
    );

    let good = batch(
        &db.dir,
        "good.safetensors",
        &[
            ("input_ids", vec![2, 16], ids(32, 100)),
            ("labels", vec![2, 12], ids(24, 100)),
        ],
        &[],
    );
    let run = preflight(&[
        "--snapshot",
        &good.display().to_string(),
        "--config",
        &config.display().to_string(),
    ]);
    let out = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{out}");
    assert!(
        out.contains("no problem found") && out.contains("ok: all 32 input_ids"),
        "{out}"
    );
}

#[test]
fn a_batch_longer_than_the_position_table_fails_the_preflight() {
    let db = support::TempDb::new("preflight-bart");
    let long = batch(
        &db.dir,
        "long.safetensors",
        &[("input_ids", vec![4, 80], ids(320, 50))],
        &[
            ("model_type", "bart"),
            ("vocab_size", "50"),
            ("max_position_embeddings", "32"),
        ],
    );
    let run = preflight(&["--snapshot", &long.display().to_string(), "--json"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stdout));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report["problems"], 1, "{report}");
    assert_eq!(
        report["results"][0]["verdict"], "confirmed",
        "problems come first: {report}"
    );
    let summary = report["results"][0]["summary"]
        .as_str()
        .unwrap_or_else(|| panic!("expected a summary of the first result in {report}"));
    assert!(summary.contains("80") && summary.contains("32"), "{summary}");
}

#[test]
fn what_cannot_be_checked_says_which_fact_it_needs_and_does_not_fail_the_job() {
    let db = support::TempDb::new("preflight-unknown");
    let bare = batch(
        &db.dir,
        "bare.safetensors",
        &[("input_ids", vec![2, 8], ids(16, 100))],
        &[],
    );
    let run = preflight(&["--snapshot", &bare.display().to_string()]);
    let out = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{out}");
    assert!(
        out.contains("not checked:") && out.contains("max_position_embeddings"),
        "{out}"
    );
    let given = preflight(&[
        "--snapshot",
        &bare.display().to_string(),
        "--param",
        "vocab_size=10",
    ]);
    assert_eq!(
        given.status.code(),
        Some(1),
        "a --param counts: {}",
        text(&given.stdout)
    );
}

#[test]
fn bad_input_is_exit_two_with_a_message() {
    let db = support::TempDb::new("preflight-bad");
    let missing = preflight(&[
        "--snapshot",
        &db.dir.join("nope.safetensors").display().to_string(),
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("cannot read"),
        "{}",
        text(&missing.stderr)
    );
    let snapshot = batch(
        &db.dir,
        "b.safetensors",
        &[("input_ids", vec![2], vec![1, 2])],
        &[],
    );
    let config = db.dir.join("config.json");
    std::fs::write(&config, "[1, 2]").unwrap_or_else(|e| panic!("{e}"));
    let bad_config = preflight(&[
        "--snapshot",
        &snapshot.display().to_string(),
        "--config",
        &config.display().to_string(),
    ]);
    assert_eq!(bad_config.status.code(), Some(2));
    assert!(
        text(&bad_config.stderr).contains("not a JSON object"),
        "{}",
        text(&bad_config.stderr)
    );
}
