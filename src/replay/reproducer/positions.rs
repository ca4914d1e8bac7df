//! The script for a position verdict: it recomputes, from the snapshot, the rows each judged
//! lookup indexes — with the tensor, counting rule, first row, table rows and key the check
//! recorded ([`PositionLookup`]), never a family rule of its own — prints them, then makes the
//! embedding call with torch when torch is there.
//!
//! The rows are computed with numpy alone (the snapshot read by `safetensors` or `np.load`), so
//! the script shows the lookups on a machine without torch or a GPU.

use std::fmt::Write;

use super::{comment, quote};
use crate::replay::CheckResult;
use crate::replay::lookup::{Counting, PositionLookup, Stack};
use crate::replay::snapshot::{Format, SnapshotSummary};

/// The script reproducing the position lookups of `result` on `snapshot_file`.
pub(super) fn script(result: &CheckResult, summary: &SnapshotSummary, snapshot_file: &str) -> String {
    let mut s = String::new();
    let verdict = serde_json::to_value(result.verdict)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "# Reproduces the position lookups faultline's {} check judged ({verdict}):",
        result.check
    );
    let _ = writeln!(s, "# {}", comment(&result.summary));
    if result.positions.is_empty() {
        let _ = writeln!(
            s,
            "raise SystemExit({})",
            quote(&format!(
                "faultline judged no position lookup on this snapshot, so there is none to reproduce: {}",
                result.summary
            ))
        );
        return s;
    }
    s.push_str("import os\n");
    s.push_str("os.environ[\"CUDA_LAUNCH_BLOCKING\"] = \"1\"  # errors surface at the failing call\n\n");
    s.push_str("import numpy as np\n");
    let file = quote(snapshot_file);
    match summary.format {
        Format::Safetensors => {
            s.push_str("from safetensors import safe_open\n\n\ndef tensor(name):\n");
            let _ = writeln!(s, "    with safe_open({file}, framework=\"np\") as f:");
            s.push_str("        return f.get_tensor(name)\n");
        }
        Format::Npz => {
            s.push_str("\n\ndef tensor(name):\n");
            let _ = writeln!(s, "    return np.load({file})[name]");
        }
    }
    s.push_str(SHOW);
    s.push_str("lookups = []\n");
    for (i, lookup) in result.positions.iter().enumerate() {
        write_lookup(&mut s, i + 1, lookup);
    }
    s.push_str(CALL);
    s
}

/// Prints the rows one lookup indexes against its table.
const SHOW: &str = r#"

def show(name, row, rows):
    if row.size == 0:
        print(name, "gives no position")
    else:
        fits = 0 <= row.min() and row.max() < rows
        print(name, "positions index rows", int(row.min()), "to", int(row.max()), "of a table of", rows,
              "rows:", "all within it" if fits else "past its last row %d" % (rows - 1))


"#;

/// The embedding call of every lookup, made with torch where it is installed.
const CALL: &str = r#"
try:
    import torch
except ImportError:
    raise SystemExit("torch is not installed: the rows above are the lookups the model makes; install torch to make the call")
device = "cuda" if torch.cuda.is_available() else "cpu"
for row, rows in lookups:
    ids = torch.from_numpy(np.ascontiguousarray(row)).to(device)
    torch.nn.functional.embedding(ids, torch.zeros(rows, 8, device=device))
if device == "cuda":
    torch.cuda.synchronize()
print("the call ran without error")
"#;

fn write_lookup(s: &mut String, n: usize, lookup: &PositionLookup) {
    let stack = match lookup.stack {
        Stack::Encoder => "the encoder's positions",
        Stack::Decoder => "the decoder's positions",
    };
    let name = quote(&lookup.tensor);
    let how = match lookup.counting {
        Counting::Values => "its values",
        Counting::Length => "every position of its length",
        Counting::BesidesPadding { .. } => "its tokens other than padding",
        Counting::AttentionMask => "the tokens its attention mask attends to",
    };
    let _ = writeln!(s, "# {n}. {stack}: {how} ({}).", comment(&lookup.tensor));
    if let Some(why) = &lookup.why {
        let _ = writeln!(s, "# {}", comment(why));
    }
    let _ = writeln!(s, "x = tensor({name})");
    match lookup.counting {
        Counting::Values => s.push_str("positions = x.astype(np.int64)\n"),
        Counting::Length => {
            s.push_str("length = x.shape[-1]\n");
            if let Some(w) = lookup.window {
                let _ = writeln!(
                    s,
                    "length = -(-length // {w}) * {w}  # padded to a multiple of attention_window {w}"
                );
            }
            s.push_str("positions = np.broadcast_to(np.arange(length), x.shape[:-1] + (length,))\n");
        }
        Counting::BesidesPadding { pad_token_id } => {
            let _ = writeln!(s, "kept = x != {pad_token_id}  # pad_token_id");
            s.push_str("positions = np.cumsum(kept, axis=-1) * kept - 1  # padding takes position -1\n");
        }
        Counting::AttentionMask => {
            s.push_str("kept = x != 0\n");
            s.push_str("positions = np.cumsum(kept, axis=-1) * kept - 1  # unattended: position -1\n");
        }
    }
    let extra = lookup.rows.saturating_sub(lookup.size);
    let added = if extra == 0 {
        String::new()
    } else {
        format!(", + {extra} rows the model adds")
    };
    let _ = writeln!(
        s,
        "rows = {}  # {} = {}{added}",
        lookup.rows,
        comment(&lookup.key),
        lookup.size
    );
    let _ = writeln!(
        s,
        "row = positions.astype(np.int64) + {}  # position 0 is row {}",
        lookup.first_row, lookup.first_row
    );
    let _ = writeln!(s, "show({name}, row, rows)");
    s.push_str("lookups.append((row, rows))\n\n");
}

#[cfg(test)]
mod tests {
    use super::super::tests::parses_as_python;
    use crate::replay::check::{self, CheckSpec};
    use crate::replay::cpu::Cpu;
    use crate::replay::lookup::{Counting, Stack};
    use crate::replay::snapshot::{DType, Format, Snapshot};
    use crate::replay::{CheckResult, Verdict};

    /// An int64 tensor of `shape` holding `values`.
    fn ids(name: &str, shape: &[u64], values: &[i64]) -> (String, DType, Vec<u64>, Vec<u8>) {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (name.into(), DType::I64, shape.to_vec(), bytes)
    }

    /// `n` ids counting up from 3 (no padding id among them).
    fn tokens(n: usize) -> Vec<i64> {
        (0..n).map(|i| 3 + i as i64 % 50).collect()
    }

    /// The position check on a snapshot of `tensors` and `params`, and the script for it.
    fn judged(
        tensors: Vec<(String, DType, Vec<u64>, Vec<u8>)>,
        params: &[(&str, &str)],
    ) -> (CheckResult, String) {
        let params = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let snap = Snapshot::from_tensors(Format::Safetensors, tensors, params)
            .unwrap_or_else(|e| panic!("bad test snapshot: {e}"));
        let spec = CheckSpec {
            name: "index_bounds".into(),
            params: [("tensor".to_owned(), "position_ids".to_owned())].into(),
        };
        let result = check::run(&spec, &snap, &Cpu::new()).unwrap_or_else(|e| panic!("{e}"));
        let out = super::super::script(&spec, &result, &snap.summary(), "s.safetensors");
        assert!(parses_as_python(&out), "{out}");
        (result, out)
    }

    #[test]
    fn a_bart_input_past_the_table_is_looked_up_from_row_2_of_a_table_two_rows_larger() {
        let (r, out) = judged(
            vec![ids("input_ids", &[1, 40], &tokens(40))],
            &[("model_type", "bart"), ("max_position_embeddings", "32")],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        let [lookup] = r.positions.as_slice() else {
            panic!("not one lookup: {r:?}")
        };
        assert_eq!(
            (lookup.counting, lookup.first_row, lookup.rows, lookup.largest_row),
            (Counting::Length, 2, 34, Some(41))
        );
        assert!(
            out.contains("x = tensor(\"input_ids\")\nlength = x.shape[-1]\n"),
            "{out}"
        );
        assert!(
            out.contains("rows = 34  # max_position_embeddings = 32, + 2 rows the model adds\n"),
            "{out}"
        );
        assert!(
            out.contains("row = positions.astype(np.int64) + 2  # position 0 is row 2\n"),
            "{out}"
        );
        assert!(out.contains("from safetensors import safe_open\n"), "{out}");
        assert!(!out.contains("torch.arange"), "{out}");
    }

    #[test]
    fn roberta_positions_count_the_tokens_besides_padding_after_row_pad_plus_one() {
        // Length 12 > the 8 positions after padding_idx 1, but no row holds more than 8 tokens.
        let mut values = tokens(8);
        values.extend([1; 4]);
        values.extend(tokens(6));
        values.extend([1; 6]);
        let (r, out) = judged(
            vec![ids("input_ids", &[2, 12], &values)],
            &[
                ("model_type", "roberta"),
                ("max_position_embeddings", "10"),
                ("pad_token_id", "1"),
            ],
        );
        assert_eq!(r.verdict, Verdict::Refuted, "{}", r.summary);
        let [lookup] = r.positions.as_slice() else {
            panic!("not one lookup: {r:?}")
        };
        assert_eq!(lookup.counting, Counting::BesidesPadding { pad_token_id: 1 });
        assert_eq!(
            (lookup.first_row, lookup.rows, lookup.largest_row),
            (2, 10, Some(9))
        );
        assert!(out.contains("kept = x != 1  # pad_token_id\n"), "{out}");
        assert!(
            out.contains("rows = 10  # max_position_embeddings = 10\n"),
            "{out}"
        );
        assert!(out.contains("+ 2  # position 0 is row 2\n"), "{out}");
    }

    #[test]
    fn opt_positions_are_counted_over_the_attention_mask() {
        let mut mask = vec![0; 10];
        mask.extend([1; 20]);
        mask.extend([1; 30]);
        let (r, out) = judged(
            vec![
                ids("input_ids", &[2, 30], &tokens(60)),
                ids("attention_mask", &[2, 30], &mask),
            ],
            &[("model_type", "opt"), ("max_position_embeddings", "24")],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        let [lookup] = r.positions.as_slice() else {
            panic!("not one lookup: {r:?}")
        };
        assert_eq!(
            (lookup.tensor.as_str(), lookup.counting, lookup.largest_row),
            ("attention_mask", Counting::AttentionMask, Some(31))
        );
        assert!(
            out.contains("x = tensor(\"attention_mask\")\nkept = x != 0\n"),
            "{out}"
        );
        assert!(
            out.contains("rows = 26  # max_position_embeddings = 24, + 2 rows"),
            "{out}"
        );
    }

    #[test]
    fn led_s_decoder_is_looked_up_in_the_table_of_its_own_key() {
        // The encoder's 40 tokens, padded to 48, fit its 60 positions; the decoder's 24 do not fit 20.
        let (r, out) = judged(
            vec![
                ids("input_ids", &[1, 40], &tokens(40)),
                ids("decoder_input_ids", &[1, 24], &tokens(24)),
            ],
            &[
                ("model_type", "led"),
                ("max_encoder_position_embeddings", "60"),
                ("max_decoder_position_embeddings", "20"),
                ("attention_window", "16"),
            ],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        let [lookup] = r.positions.as_slice() else {
            panic!("not one lookup: {r:?}")
        };
        assert_eq!(
            (lookup.stack, lookup.key.as_str(), lookup.rows, lookup.largest_row),
            (Stack::Decoder, "max_decoder_position_embeddings", 20, Some(23))
        );
        assert!(
            out.contains("rows = 20  # max_decoder_position_embeddings = 20\n"),
            "{out}"
        );
        assert!(out.contains("# 1. the decoder's positions"), "{out}");
    }

    #[test]
    fn led_s_encoder_is_padded_to_its_attention_window_first() {
        let (r, out) = judged(
            vec![ids("input_ids", &[1, 50], &tokens(50))],
            &[
                ("model_type", "led"),
                ("max_encoder_position_embeddings", "60"),
                ("attention_window", "[16, 16]"),
            ],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        assert_eq!(r.positions[0].window, Some(16));
        assert_eq!(r.positions[0].largest_row, Some(63));
        assert!(out.contains("length = -(-length // 16) * 16"), "{out}");
        assert!(
            out.contains("rows = 60  # max_encoder_position_embeddings = 60\n"),
            "{out}"
        );
    }

    #[test]
    fn explicit_bart_positions_are_shifted_by_the_rows_the_model_adds() {
        let (r, out) = judged(
            vec![
                ids("input_ids", &[1, 4], &tokens(4)),
                ids("position_ids", &[1, 4], &[0, 1, 2, 33]),
            ],
            &[("model_type", "bart"), ("max_position_embeddings", "32")],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        let [lookup] = r.positions.as_slice() else {
            panic!("not one lookup: {r:?}")
        };
        assert_eq!(
            (lookup.counting, lookup.first_row, lookup.rows, lookup.largest_row),
            (Counting::Values, 2, 34, Some(35))
        );
        assert!(
            out.contains("x = tensor(\"position_ids\")\npositions = x.astype(np.int64)\n"),
            "{out}"
        );
    }

    #[test]
    fn a_family_the_check_does_not_know_gets_no_bound_of_the_script_s_own() {
        let (r, out) = judged(
            vec![ids("input_ids", &[4, 80], &tokens(320))],
            &[("max_position_embeddings", "32")],
        );
        assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.summary);
        assert!(r.positions.is_empty(), "{r:?}");
        assert!(
            out.contains("raise SystemExit(\"faultline judged no position lookup"),
            "{out}"
        );
        assert!(!out.contains("rows =") && !out.contains("import torch"), "{out}");
    }

    #[test]
    fn a_tensor_name_with_line_breaks_stays_in_its_comment_and_its_string() {
        let evil = "ids\nos.system('x')";
        let (r, out) = judged(
            vec![ids(evil, &[1, 40], &tokens(40))],
            &[
                ("role.input_ids", evil),
                ("model_type", "gpt2"),
                ("n_positions", "24"),
            ],
        );
        assert_eq!(r.verdict, Verdict::Confirmed, "{}", r.summary);
        assert!(out.lines().all(|l| !l.starts_with("os.system")), "{out}");
    }
}
