//! A short PyTorch script that loads the snapshot and makes the failing call.
//!
//! Tensor names, the file name and parameters come from the user: names and the file name are
//! written as JSON strings (valid Python string literals), numbers only after they parse as
//! numbers, and text in comments without its line breaks, so nothing in a snapshot can inject
//! code into the script.
//!
//! A position verdict's script ([`positions`](mod@positions)) takes its bounds from the check's
//! result, the lookups the check judged, and from nowhere else.

mod positions;

use std::fmt::Write;

use super::CheckResult;
use super::check::{Check, CheckSpec, check_info};
use super::snapshot::{Format, ROLE_NAMES, SnapshotSummary};

/// The script reproducing `check`'s failing call on the snapshot saved as `snapshot_file`;
/// `result` is what the check gave on it (a position verdict's script reproduces its lookups).
pub fn script(
    check: &CheckSpec,
    result: &CheckResult,
    summary: &SnapshotSummary,
    snapshot_file: &str,
) -> String {
    let p = Params { check, summary };
    let positions = p.value("tensor").is_some_and(|role| role == "position_ids");
    if check_info(&check.name).is_some_and(|info| info.check == Check::IndexBounds)
        && (positions || !result.positions.is_empty())
    {
        return positions::script(result, summary, snapshot_file);
    }
    let mut s = String::new();
    let file = quote(snapshot_file);
    let _ = writeln!(
        s,
        "# Reproduces the call faultline's {} check points at.",
        check.name
    );
    s.push_str("import os\n");
    s.push_str("os.environ[\"CUDA_LAUNCH_BLOCKING\"] = \"1\"  # errors surface at the failing call\n\n");
    s.push_str("import torch\nimport torch.nn.functional as F\n");
    match summary.format {
        Format::Safetensors => {
            s.push_str("from safetensors.torch import load_file\n\n");
            let _ = writeln!(
                s,
                "t = {{k: v.to(\"cuda\") for k, v in load_file({file}).items()}}"
            );
        }
        Format::Npz => {
            s.push_str("import numpy as np\n\n");
            let _ = writeln!(
                s,
                "t = {{k: torch.from_numpy(v).to(\"cuda\") for k, v in np.load({file}).items()}}"
            );
        }
    }
    let Some(info) = check_info(&check.name) else {
        let _ = writeln!(
            s,
            "# faultline knows no check {:?}: nothing to reproduce",
            check.name
        );
        return s;
    };
    match info.check {
        Check::TargetBounds => target_bounds(&mut s, &p),
        Check::IndexBounds => index_bounds(&mut s, &p),
        Check::ValueRange => value_range(&mut s, &p),
        Check::Finite => {
            let x = p.tensor("tensor", "logits");
            let _ = writeln!(s, "x = t[{x}]");
            s.push_str("bad = ~torch.isfinite(x)\n");
            s.push_str(
                "print(int(bad.sum()), \"NaN / Inf values, first at\", bad.nonzero()[:16].tolist())\n",
            );
            s.push_str(
                "torch.multinomial(x.float().reshape(-1, x.shape[-1]).softmax(-1), 1)  # NaN fails here\n",
            );
        }
        Check::Gemm => {
            let (a, b) = (p.tensor("a", "a"), p.tensor("b", "b"));
            let _ = writeln!(s, "a, b = t[{a}], t[{b}]");
            s.push_str("c = a @ b\n");
        }
        Check::HiddenSize => hidden_size(&mut s, &p),
        Check::Consistency => {
            let list = p.value("tensors").unwrap_or_else(|| "logits,labels".into());
            let roles: Vec<&str> = list.split(',').map(str::trim).collect();
            let logits = p.resolve(roles.first().copied().unwrap_or("logits"));
            let labels = p.resolve(roles.get(1).copied().unwrap_or("labels"));
            s.push_str("# The tensors as they were: on the devices the capture recorded.\n");
            let _ = writeln!(s, "logits = t[{}].to({})", quote(&logits), p.device(&logits));
            let _ = writeln!(s, "labels = t[{}].to({})", quote(&labels), p.device(&labels));
            s.push_str("loss = F.cross_entropy(logits, labels)\n");
        }
    }
    s.push_str("torch.cuda.synchronize()\nprint(\"the call ran without error\")\n");
    s
}

/// A Python string literal.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// `text` fit for a `#` comment: its control characters (line breaks among them) as spaces.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Where parameters and tensor names are looked up.
struct Params<'a> {
    check: &'a CheckSpec,
    summary: &'a SnapshotSummary,
}

impl Params<'_> {
    /// A non-empty parameter: the check's, else the snapshot's.
    fn value(&self, key: &str) -> Option<String> {
        [self.check.params.get(key), self.summary.params.get(key)]
            .into_iter()
            .flatten()
            .map(|v| v.trim().to_owned())
            .find(|v| !v.is_empty())
    }

    /// An integer parameter under one of `keys`.
    fn int(&self, keys: &[&str]) -> Option<i64> {
        keys.iter().find_map(|k| self.value(k)?.parse().ok())
    }

    /// The tensor name (quoted) that role parameter `param` names.
    fn tensor(&self, param: &str, default: &str) -> String {
        let role = self.value(param).unwrap_or_else(|| default.into());
        quote(&self.resolve(&role))
    }

    /// The name of the tensor playing `role` (as [`super::Snapshot::by_role`] finds it).
    fn resolve(&self, role: &str) -> String {
        let held = |n: &str| self.summary.tensors.iter().any(|t| t.name == n);
        if let Some(name) = self.summary.params.get(&format!("role.{role}")) {
            return name.clone();
        }
        if held(role) {
            return role.to_owned();
        }
        ROLE_NAMES
            .iter()
            .find(|(r, _)| *r == role)
            .and_then(|(_, names)| names.iter().find(|n| held(n)))
            .map_or_else(|| role.to_owned(), |n| (*n).to_owned())
    }

    /// The device `name` was on (quoted), `cuda` when not recorded.
    fn device(&self, name: &str) -> String {
        quote(
            &self
                .value(&format!("device.{name}"))
                .unwrap_or_else(|| "cuda".into()),
        )
    }

    fn has(&self, role: &str) -> bool {
        let name = self.resolve(role);
        self.summary.tensors.iter().any(|t| t.name == name)
    }
}

fn target_bounds(s: &mut String, p: &Params<'_>) {
    let labels = p.tensor("tensor", "labels");
    let ignore = p.int(&["ignore_index"]).unwrap_or(-100);
    let _ = writeln!(s, "labels = t[{labels}].long()");
    if p.has("logits") {
        let logits = quote(&p.resolve("logits"));
        let _ = writeln!(s, "logits = t[{logits}].float()");
        s.push_str("if logits.dim() > 2 and labels.shape == logits.shape[:-1]:  # LM logits [B, T, V]\n");
        s.push_str("    logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)\n");
    } else {
        match p.int(&["num_classes", "num_labels"]) {
            Some(n) => {
                let _ = writeln!(s, "num_classes = {n}");
            }
            None => s.push_str("num_classes = 2  # set to the model's number of classes\n"),
        }
        s.push_str("labels = labels.reshape(-1)\n");
        s.push_str("logits = torch.randn(labels.numel(), num_classes, device=\"cuda\")\n");
    }
    let _ = writeln!(s, "loss = F.cross_entropy(logits, labels, ignore_index={ignore})");
}

fn index_bounds(s: &mut String, p: &Params<'_>) {
    let role = p.value("tensor").unwrap_or_else(|| "input_ids".into());
    let ids = quote(&p.resolve(&role));
    let _ = writeln!(s, "ids = t[{ids}].long()");
    // The size the check itself reads, in its order.
    match p.int(&super::check::size_keys(&role)) {
        Some(size) => {
            let _ = writeln!(s, "size = {size}");
        }
        None if p.has("weight") => {
            let _ = writeln!(s, "size = t[{}].shape[0]", quote(&p.resolve("weight")));
        }
        None => s.push_str("size = 1000  # set to the embedding's num_embeddings\n"),
    }
    s.push_str("out = F.embedding(ids, torch.randn(size, 8, device=\"cuda\"))\n");
}

fn hidden_size(s: &mut String, p: &Params<'_>) {
    let list = p
        .value("tensors")
        .unwrap_or_else(|| super::check::DEFAULT_HIDDEN_SIZE_TENSORS.into());
    let Some(role) = list.split(',').map(str::trim).find(|r| p.has(r)) else {
        s.push_str("raise SystemExit(\"the snapshot holds no tensor to check; name it with --param tensors=NAME\")\n");
        return;
    };
    let x = quote(&p.resolve(role));
    let keys: &[&str] = if role.contains("inputs_embeds") {
        &[
            "embedding_size",
            "input_embedding_size",
            "word_embed_proj_dim",
            "hidden_size",
            "d_model",
            "n_embd",
        ]
    } else {
        &["hidden_size", "d_model", "n_embd"]
    };
    let _ = writeln!(s, "x = t[{x}].float()");
    match p.int(keys) {
        Some(width) => {
            let _ = writeln!(s, "width = {width}");
        }
        None => s.push_str("width = 768  # set to the model's hidden size\n"),
    }
    s.push_str("print(tuple(x.shape), \"last dim\", x.shape[-1], \"vs the model's width\", width)\n");
    s.push_str(
        "out = F.linear(x, torch.zeros(width, width, device=\"cuda\"))  # a layer of the model's width\n",
    );
}

fn value_range(s: &mut String, p: &Params<'_>) {
    let role = p.value("tensor").unwrap_or_else(|| "input".into());
    let x = quote(&p.resolve(&role));
    let _ = writeln!(s, "x = t[{x}].float()");
    if matches!(role.as_str(), "target" | "targets" | "labels" | "label") {
        s.push_str("loss = F.binary_cross_entropy(torch.full_like(x, 0.5), x)  # x as the target\n");
    } else {
        s.push_str("loss = F.binary_cross_entropy(x, torch.zeros_like(x))  # x as the input\n");
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::replay::snapshot::{DType, TensorSummary};

    fn summary(tensors: &[(&str, DType, &[u64])], params: &[(&str, &str)]) -> SnapshotSummary {
        SnapshotSummary {
            format: Format::Safetensors,
            data_bytes: 0,
            tensors: tensors
                .iter()
                .map(|(name, dtype, shape)| TensorSummary {
                    name: (*name).into(),
                    dtype: *dtype,
                    shape: shape.to_vec(),
                })
                .collect(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn spec(name: &str, params: &[(&str, &str)]) -> CheckSpec {
        CheckSpec {
            name: name.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// The script for a check that judged no position lookup (the result only routes positions).
    fn script(check: &CheckSpec, summary: &SnapshotSummary, file: &str) -> String {
        let result = CheckResult {
            check: check.name.clone(),
            verdict: crate::replay::Verdict::Inconclusive,
            summary: String::new(),
            tensor: None,
            elements: 0,
            offending: 0,
            min: None,
            max: None,
            first_offenses: Vec::new(),
            params: BTreeMap::new(),
            positions: Vec::new(),
            backend: "cpu".into(),
        };
        super::script(check, &result, summary, file)
    }

    /// Parses `script` with python3's `ast` when python3 is here; true when it parsed or no python3.
    pub(super) fn parses_as_python(script: &str) -> bool {
        use std::io::Write as _;
        use std::process::{Command, Stdio};
        let child = Command::new("python3")
            .args(["-c", "import ast,sys; ast.parse(sys.stdin.read())"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            return true;
        };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(script.as_bytes());
        }
        child.wait().is_ok_and(|status| status.success())
    }

    #[test]
    fn target_bounds_calls_cross_entropy_with_the_labels_and_ignore_index() {
        let sum = summary(
            &[("y", DType::I64, &[8]), ("scores", DType::F32, &[8, 3])],
            &[("role.labels", "y"), ("ignore_index", "-1")],
        );
        let out = script(
            &spec("target_bounds", &[("tensor", "labels")]),
            &sum,
            "batch.safetensors",
        );
        assert!(out.starts_with("# Reproduces the call faultline's target_bounds check points at.\nimport os\nos.environ[\"CUDA_LAUNCH_BLOCKING\"] = \"1\""), "{out}");
        assert!(out.contains("load_file(\"batch.safetensors\")"), "{out}");
        assert!(out.contains("labels = t[\"y\"].long()"), "{out}");
        assert!(out.contains("logits = t[\"scores\"].float()"), "{out}");
        assert!(
            out.contains("F.cross_entropy(logits, labels, ignore_index=-1)"),
            "{out}"
        );
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn target_bounds_without_logits_builds_them_from_num_classes() {
        let sum = summary(&[("labels", DType::I64, &[8])], &[("num_classes", "5")]);
        let out = script(&spec("target_bounds", &[]), &sum, "s.safetensors");
        assert!(out.contains("num_classes = 5\n"), "{out}");
        assert!(out.contains("ignore_index=-100"), "{out}");
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn index_bounds_embeds_the_ids_in_a_table_of_the_vocab_size() {
        let sum = summary(&[("input_ids", DType::I64, &[2, 4])], &[("vocab_size", "50257")]);
        let out = script(&spec("index_bounds", &[("tensor", "input_ids")]), &sum, "s.npz");
        assert!(out.contains("ids = t[\"input_ids\"].long()"), "{out}");
        assert!(out.contains("size = 50257\n"), "{out}");
        assert!(
            out.contains("F.embedding(ids, torch.randn(size, 8, device=\"cuda\"))"),
            "{out}"
        );
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn value_range_puts_targets_on_the_target_side_of_bce() {
        let sum = summary(&[("target", DType::F32, &[4])], &[]);
        let out = script(
            &spec("value_range", &[("tensor", "target")]),
            &sum,
            "s.safetensors",
        );
        assert!(
            out.contains("F.binary_cross_entropy(torch.full_like(x, 0.5), x)"),
            "{out}"
        );
        let out = script(
            &spec("value_range", &[("tensor", "input")]),
            &sum,
            "s.safetensors",
        );
        assert!(
            out.contains("F.binary_cross_entropy(x, torch.zeros_like(x))"),
            "{out}"
        );
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn gemm_finite_and_consistency_make_their_calls() {
        let sum = summary(
            &[("x", DType::F16, &[2, 3]), ("w", DType::F16, &[3, 4])],
            &[("device.w", "cpu")],
        );
        let out = script(&spec("gemm", &[("a", "x"), ("b", "w")]), &sum, "s.safetensors");
        assert!(out.contains("a, b = t[\"x\"], t[\"w\"]\nc = a @ b\n"), "{out}");
        assert!(parses_as_python(&out), "{out}");
        let out = script(&spec("finite", &[("tensor", "x")]), &sum, "s.safetensors");
        assert!(out.contains("x = t[\"x\"]\nbad = ~torch.isfinite(x)"), "{out}");
        assert!(parses_as_python(&out), "{out}");
        let out = script(&spec("consistency", &[("tensors", "x,w")]), &sum, "s.safetensors");
        assert!(out.contains("labels = t[\"w\"].to(\"cpu\")"), "{out}");
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn hidden_size_multiplies_the_states_by_a_layer_of_the_models_width() {
        let sum = summary(
            &[("encoder_outputs", DType::F32, &[2, 5, 512])],
            &[("model.d_model", "768"), ("d_model", "768")],
        );
        let out = script(&spec("hidden_size", &[]), &sum, "s.safetensors");
        assert!(
            out.contains("x = t[\"encoder_outputs\"].float()\nwidth = 768\n"),
            "{out}"
        );
        assert!(out.contains("F.linear(x, torch.zeros(width, width"), "{out}");
        assert!(parses_as_python(&out), "{out}");
        let none = summary(&[("logits", DType::F32, &[2, 5])], &[]);
        let out = script(&spec("hidden_size", &[]), &none, "s.safetensors");
        assert!(out.contains("raise SystemExit("), "{out}");
        assert!(parses_as_python(&out), "{out}");
    }

    #[test]
    fn names_and_numbers_from_the_snapshot_cannot_inject_code() {
        let evil = "x\"]); import os; os.system(\"rm -rf /\"); (t[\"";
        let sum = summary(
            &[(evil, DType::I64, &[1])],
            &[("num_classes", "2); os.system('x'")],
        );
        let out = script(
            &spec("target_bounds", &[("tensor", evil)]),
            &sum,
            "a\"b.safetensors",
        );
        assert!(!out.contains("os.system(\"rm"), "{out}");
        assert!(!out.contains("os.system('x'"), "{out}");
        assert!(out.contains("num_classes = 2  # set to"), "{out}");
        assert!(parses_as_python(&out), "{out}");
    }
}
