//! The Python capture helper (`clients/python/src/faultline_capture.py`) against the Rust reader: its
//! unit tests pass, the snapshots it writes are read and checked by `faultline replay` and
//! `faultline analyze --snapshot`, and `.npz` files written by real numpy (big-endian,
//! Fortran-ordered, with a `params.json` member) are read in little-endian C order.
//!
//! Needs a Python with numpy and safetensors: `FAULTLINE_PYTHON`, else `python3` when it has both.
//! In CI (`CI` set) their absence fails the tests; by hand it skips them loudly.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use faultline::replay::snapshot::Format;
use faultline::replay::{DType, Limits, Snapshot};

/// The helper's source (on `PYTHONPATH`: these tests run the checkout's copy).
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/src")
}

/// The helper's Python unit tests.
fn python_tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/tests")
}

/// The Python to run, or None (with a loud message) when there is none outside CI.
fn python() -> Option<&'static str> {
    support::numpy_python("the capture helper tests")
}

/// A fresh temporary folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("faultline-capture-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        TempDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Python command with the helper importable, no bytecode left in the tree and no server.
fn python_command(python: &str) -> Command {
    let mut command = Command::new(python);
    command
        .env("PYTHONPATH", clients_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("FAULTLINE_SERVER")
        .env_remove("FAULTLINE_TOKEN")
        .env_remove("FAULTLINE_SNAPSHOT_DIR");
    command
}

/// Runs `script` with `args` (`sys.argv[1:]`); panics with its output when it fails.
fn run_python(python: &str, script: &str, args: &[&Path]) -> Output {
    let out = python_command(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "the Python snippet failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

fn faultline(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultline"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run faultline: {e}"))
}

/// `faultline replay FILE --check CHECK --format json` on the CPU, as JSON.
fn replay_json(file: &Path, check: &str) -> serde_json::Value {
    let out = faultline(&[
        "replay",
        &file.to_string_lossy(),
        "--check",
        check,
        "--format",
        "json",
        "--backend",
        "cpu",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}: {}", text(&out.stdout)))
}

fn read_snapshot(file: &Path) -> Snapshot {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    Snapshot::from_bytes(bytes, &Limits::default()).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn i64_values(snapshot: &Snapshot, name: &str) -> Vec<i64> {
    let Some(t) = snapshot.tensor(name) else {
        panic!("no tensor {name}");
    };
    assert_eq!(t.dtype, DType::I64, "{name}");
    t.bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_else(|e| panic!("{e}"))))
        .collect()
}

#[test]
fn the_python_unit_tests_of_the_helper_pass() {
    let Some(python) = python() else {
        return;
    };
    let out = python_command(python)
        .args(["-m", "unittest", "discover", "-s"])
        .arg(python_tests_dir())
        .args(["-t"])
        .arg(python_tests_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    // unittest reports on stderr.
    let report = text(&out.stderr);
    assert!(out.status.success(), "the Python unit tests failed:\n{report}");
    assert!(report.contains("\nOK"), "{report}");
}

const SAVE_LABELS: &str = r#"
import sys
import numpy as np
from faultline_capture import save_snapshot
save_snapshot(sys.argv[1], {"labels": np.array([0, 1, 2, 1], dtype=np.int64)}, params={"num_classes": 2})
"#;

#[test]
fn labels_saved_by_the_helper_confirm_the_target_bounds_check() {
    let Some(python) = python() else {
        return;
    };
    let dir = TempDir::new("labels");
    let file = dir.join("labels.safetensors");
    run_python(python, SAVE_LABELS, &[&file]);

    let doc = replay_json(&file, "target_bounds");
    assert_eq!(doc["verdict"], "confirmed", "{doc}");
    assert_eq!(
        doc["summary"],
        "labels[2] = 2 >= num_classes = 2 (1 of 4 values out of range)"
    );
    assert_eq!(doc["params"]["ignore_index"], "-100");

    let snapshot = read_snapshot(&file);
    assert_eq!(snapshot.format(), Format::Safetensors);
    assert_eq!(i64_values(&snapshot, "labels"), vec![0, 1, 2, 1]);
    assert_eq!(snapshot.param("num_classes"), Some("2"));
}

/// A failing step around a Hugging Face-like classifier whose batch holds an id past the embedding.
const CAPTURE_STEP: &str = r#"
import sys
import numpy as np
from faultline_capture import capture

class Weight:
    shape = (100, 16)

class Embedding:
    weight = Weight()

class Config:
    vocab_size = 100
    num_labels = 2
    pad_token_id = 0

class BertForSequenceClassification:
    config = Config()
    def get_input_embeddings(self):
        return Embedding()
    def get_output_embeddings(self):
        return None

batch = {"inputs": {"input_ids": np.array([[1, 5, 100], [2, 0, 0]])}, "labels": [1, 0]}
try:
    with capture(batch, model=BertForSequenceClassification(), path=sys.argv[1]):
        raise RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call")
except RuntimeError as e:
    assert "device-side assert" in str(e)
else:
    raise SystemExit("the error was not re-raised")
"#;

#[test]
fn a_step_captured_by_the_context_manager_is_diagnosed_with_its_snapshot() {
    let Some(python) = python() else {
        return;
    };
    let dir = TempDir::new("step");
    let file = dir.join("step.safetensors");
    let out = run_python(python, CAPTURE_STEP, &[&file]);
    let announced = text(&out.stderr);
    assert!(
        announced.contains("faultline analyze") && announced.contains(&*file.to_string_lossy()),
        "{announced}"
    );

    let snapshot = read_snapshot(&file);
    assert_eq!(snapshot.param("role.input_ids"), Some("inputs.input_ids"));
    assert_eq!(snapshot.param("vocab_size"), Some("100"));
    assert_eq!(snapshot.param("num_classes"), Some("2"));
    assert_eq!(i64_values(&snapshot, "labels"), vec![1, 0]);

    let doc = replay_json(&file, "index_bounds");
    assert_eq!(doc["verdict"], "confirmed", "{doc}");
    assert_eq!(
        doc["summary"],
        "inputs.input_ids[0, 2] = 100 >= num_embeddings = 100 (1 of 6 values out of range; max 100)"
    );

    // The traceback written next to the snapshot, diagnosed with it.
    let log = dir.join("step.log");
    let out = faultline(&[
        "analyze",
        &log.to_string_lossy(),
        "--snapshot",
        &file.to_string_lossy(),
        "--backend",
        "cpu",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let diagnosis: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"));
    let confirmed: Vec<&str> = diagnosis["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| f["causes"].as_array().into_iter().flatten())
        .filter(|c| c["outcome"]["verdict"] == "confirmed")
        .filter_map(|c| c["outcome"]["summary"].as_str())
        .collect();
    assert!(
        confirmed
            .iter()
            .any(|s| s.starts_with("inputs.input_ids[0, 2] = 100")),
        "{confirmed:?}"
    );
}

/// bfloat16 bits as the torch path hands them over: 1.0, NaN, 0.5.
const SAVE_BF16: &str = r#"
import sys
import numpy as np
import faultline_capture as fc
bits = np.array([0x3F80, 0x7FC0, 0x3F00], dtype=np.uint16)
with open(sys.argv[1], "wb") as f:
    f.write(fc._encode({"logits": bits}, {"k": "v"}, ["logits"]))
"#;

#[test]
fn bfloat16_written_by_the_helper_is_read_as_bfloat16() {
    let Some(python) = python() else {
        return;
    };
    let dir = TempDir::new("bf16");
    let file = dir.join("bf16.safetensors");
    run_python(python, SAVE_BF16, &[&file]);

    let snapshot = read_snapshot(&file);
    let Some(logits) = snapshot.tensor("logits") else {
        panic!("no logits");
    };
    assert_eq!(logits.dtype, DType::BF16);
    assert_eq!(logits.bytes, [0x80, 0x3F, 0xC0, 0x7F, 0x00, 0x3F]);
    assert_eq!(snapshot.param("k"), Some("v"));

    let doc = replay_json(&file, "finite");
    assert_eq!(doc["verdict"], "confirmed", "{doc}");
    assert_eq!(doc["summary"], "logits[1] = nan (1 of 3 values are NaN or Inf)");
}

/// The same arrays with `np.savez` and `np.savez_compressed`, then a `params.json` member.
const SAVE_NPZ: &str = r#"
import json
import sys
import zipfile
import numpy as np

labels = np.array([0, 1, 2, 1], dtype=">i8")
grid = np.asfortranarray(np.arange(24, dtype=">f8").reshape(2, 3, 4))
ids = np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3))
assert grid.flags.f_contiguous and not grid.flags.c_contiguous
for save, path in [(np.savez, sys.argv[1]), (np.savez_compressed, sys.argv[2])]:
    save(path, labels=labels, grid=grid, ids=ids)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("params.json", json.dumps({"num_classes": 2, "role.labels": "labels"}))
"#;

#[test]
fn npz_files_written_by_numpy_are_read_little_endian_in_c_order() {
    let Some(python) = python() else {
        return;
    };
    let dir = TempDir::new("npz");
    let (plain, compressed) = (dir.join("plain.npz"), dir.join("compressed.npz"));
    run_python(python, SAVE_NPZ, &[&plain, &compressed]);

    for file in [&plain, &compressed] {
        let snapshot = read_snapshot(file);
        assert_eq!(snapshot.format(), Format::Npz);
        assert_eq!(i64_values(&snapshot, "labels"), vec![0, 1, 2, 1]);

        let Some(grid) = snapshot.tensor("grid") else {
            panic!("no grid in {}", file.display());
        };
        assert_eq!((grid.dtype, grid.shape), (DType::F64, &[2u64, 3, 4][..]));
        let values: Vec<f64> = grid
            .bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_else(|e| panic!("{e}"))))
            .collect();
        let expected: Vec<f64> = (0..24).map(f64::from).collect();
        assert_eq!(values, expected, "{}", file.display());

        let Some(ids) = snapshot.tensor("ids") else {
            panic!("no ids in {}", file.display());
        };
        assert_eq!((ids.dtype, ids.shape), (DType::I32, &[2u64, 3][..]));
        let ids: Vec<i32> = ids
            .bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_else(|e| panic!("{e}"))))
            .collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);

        assert_eq!(snapshot.param("num_classes"), Some("2"));
        assert_eq!(snapshot.param("role.labels"), Some("labels"));

        let doc = replay_json(file, "target_bounds");
        assert_eq!(doc["verdict"], "confirmed", "{doc}");
        assert_eq!(
            doc["summary"],
            "labels[2] = 2 >= num_classes = 2 (1 of 4 values out of range)"
        );
    }
}

/// The helper's pre-flight on a batch whose ids pass the vocabulary, then on a clean one, with
/// the real binary.
const PREFLIGHT: &str = r#"
import sys
import numpy as np
import faultline_capture as fc

bad = {"input_ids": np.array([[1, 2, 12], [3, 4, 5]], dtype=np.int64)}
try:
    fc.preflight(bad, params={"vocab_size": 10}, path=sys.argv[1])
    print("NOT RAISED")
except fc.PreflightError as e:
    print("RAISED " + e.report.splitlines()[1])
good = {"input_ids": np.array([[1, 2, 3], [3, 4, 5]], dtype=np.int64)}
result = fc.preflight(good, params={"vocab_size": 10, "max_position_embeddings": 8}, path=sys.argv[1])
print("CLEAN %s %d" % (result.clean, result.returncode))
"#;

#[test]
fn the_helpers_preflight_stops_a_job_whose_batch_passes_the_vocabulary() {
    let Some(python) = python() else {
        return;
    };
    let dir = TempDir::new("preflight");
    let file = dir.join("batch.safetensors");
    let out = python_command(python)
        .env("FAULTLINE_BIN", env!("CARGO_BIN_EXE_faultline"))
        .arg("-c")
        .arg(PREFLIGHT)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("RAISED   problem: input_ids[0, 2] = 12 >= vocab_size = 10"),
        "{said}"
    );
    assert!(said.contains("CLEAN True 0"), "{said}");
}
