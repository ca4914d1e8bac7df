//! Version drift: the same failing training steps run under several releases of torch and
//! transformers (`tests/drift/steps.py`, written by `tests/drift/generate.py`), and the other
//! runtimes' words for the same classes (`framework_steps.py`: TensorFlow / Keras, JAX, ONNX
//! Runtime, PaddlePaddle, MXNet and Lightning, in `frameworks/`), each log kept as the job printed
//! it, with the versions in its name. New releases change wordings; when a rule
//! no longer fires on a newer wording, or fires with less confidence, these tests name the log,
//! its versions and what faultline said instead. `tests/fixtures/drift/manifest.toml` says what
//! each log must be diagnosed as; `tests/drift/README.md` how the logs were made and what the
//! rules said of them before any rule was changed for them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use faultline::diagnose::analyze_str;
use faultline::model::{Confidence, Diagnosis, Finding, Role};
use faultline::rules::RuleSet;
use serde::Deserialize;

/// The class of a log that shows no GPU failure: no root cause or symptom may be claimed.
const NONE: &str = "none";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    log: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    file: String,
    step: String,
    class: String,
    #[serde(default)]
    also: Vec<String>,
    confidence: Option<Confidence>,
    /// A torch step's versions (`steps.py`) …
    torch: Option<String>,
    transformers: Option<String>,
    /// … or another runtime's (`framework_steps.py`): `tensorflow`, `jax`, `onnxruntime`,
    /// `paddle`, `mxnet`, or `lightning` / `diffusers` (with the torch under it), and its version.
    framework: Option<String>,
    version: Option<String>,
    keras: Option<String>,
    jaxlib: Option<String>,
    python: String,
}

impl Entry {
    fn versions(&self) -> String {
        let named = [
            ("torch", &self.torch),
            ("transformers", &self.transformers),
            (self.framework.as_deref().unwrap_or("framework"), &self.version),
            ("keras", &self.keras),
            ("jaxlib", &self.jaxlib),
        ];
        let mut parts: Vec<String> = named
            .iter()
            .filter_map(|(name, v)| v.as_deref().map(|v| format!("{name} {v}")))
            .collect();
        parts.push(format!("Python {}", self.python));
        parts.join(", ")
    }

    /// The file name the generators give this log: the step, then the versions it ran under.
    fn expected_file_name(&self) -> String {
        match (&self.torch, &self.framework, &self.version) {
            (Some(torch), None, None) => {
                let hf = self
                    .transformers
                    .as_deref()
                    .map(|v| format!("-transformers{v}"))
                    .unwrap_or_default();
                format!("{}-torch{torch}{hf}.log", self.step)
            }
            (_, Some(framework), Some(version)) => format!("{}-{framework}{version}.log", self.step),
            _ => format!("{}: names neither torch nor one other framework", self.file),
        }
    }

    fn accepts(&self, class: &str) -> bool {
        self.class == class || self.also.iter().any(|a| a == class)
    }
}

/// The torch / transformers logs, and (`frameworks/`) the other runtimes'.
fn folders() -> [PathBuf; 2] {
    let drift = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/drift");
    [drift.join("frameworks"), drift]
}

fn manifest(folder: &Path) -> Manifest {
    let path = folder.join("manifest.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn diagnose(rules: &RuleSet, folder: &Path, file: &str) -> Diagnosis {
    let path = folder.join(file);
    let log = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    analyze_str(rules, &log)
}

/// The first root cause or symptom: what faultline claims (context alone is no diagnosis).
fn claim(diagnosis: &Diagnosis) -> Option<&Finding> {
    diagnosis.findings.iter().find(|f| f.role != Role::Context)
}

fn describe(finding: Option<&Finding>) -> String {
    finding.map_or_else(
        || "nothing".to_owned(),
        |f| format!("{} at {:?} ({})", f.class, f.confidence, f.rule),
    )
}

/// What is wrong with the diagnosis of one log, if anything.
fn misdiagnosis(entry: &Entry, diagnosis: &Diagnosis) -> Option<String> {
    let top = claim(diagnosis);
    let right = if entry.class == NONE {
        top.is_none()
    } else {
        top.is_some_and(|f| {
            f.role == Role::Root && entry.accepts(&f.class) && Some(f.confidence) == entry.confidence
        })
    };
    let expected = match entry.confidence {
        Some(c) => format!("{} at {c:?}", entry.class),
        None => "no GPU cause".to_owned(),
    };
    (!right).then(|| {
        format!(
            "{} ({}): expected {expected}, got {}",
            entry.file,
            entry.versions(),
            describe(top)
        )
    })
}

#[test]
fn every_log_of_every_release_is_diagnosed_as_its_class_at_top_1_with_the_confidence_it_warrants() {
    let rules = RuleSet::embedded().unwrap_or_else(|e| panic!("{e}"));
    for folder in folders() {
        let entries = manifest(&folder).log;
        let misses: Vec<String> = entries
            .iter()
            .filter_map(|entry| misdiagnosis(entry, &diagnose(&rules, &folder, &entry.file)))
            .collect();
        assert!(
            misses.is_empty(),
            "{} of {} logs of {} misdiagnosed:\n{}",
            misses.len(),
            entries.len(),
            folder.display(),
            misses.join("\n")
        );
    }
}

#[test]
fn the_manifest_lists_every_log_of_the_folder_and_names_the_versions_in_each_file_name() {
    for folder in folders() {
        let on_disk: BTreeSet<String> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .map(|entry| entry.unwrap_or_else(|e| panic!("{e}")).file_name())
            .filter_map(|name| name.to_str().map(str::to_owned))
            .filter(|name| Path::new(name).extension().is_some_and(|x| x == "log"))
            .collect();
        let entries = manifest(&folder).log;
        let listed: BTreeSet<String> = entries.iter().map(|e| e.file.clone()).collect();
        assert_eq!(
            on_disk,
            listed,
            "{}: logs on disk and in the manifest differ",
            folder.display()
        );
        assert_eq!(listed.len(), entries.len(), "a log is listed twice");
        for e in &entries {
            assert_eq!(e.file, e.expected_file_name());
            assert_eq!(
                e.confidence.is_none(),
                e.class == NONE,
                "{}: a confidence is given exactly when a class is",
                e.file
            );
        }
    }
}

#[test]
fn the_other_runtimes_logs_cover_tensorflow_jax_onnx_runtime_paddle_mxnet_lightning_and_diffusers_with_decoys()
 {
    let [frameworks, _] = folders();
    let entries = manifest(&frameworks).log;
    let runtimes: BTreeSet<&str> = entries.iter().filter_map(|e| e.framework.as_deref()).collect();
    assert_eq!(
        runtimes,
        BTreeSet::from([
            "diffusers",
            "jax",
            "lightning",
            "mxnet",
            "onnxruntime",
            "paddle",
            "tensorflow"
        ])
    );
    for runtime in runtimes {
        assert!(
            entries
                .iter()
                .any(|e| e.framework.as_deref() == Some(runtime) && e.class == NONE),
            "{runtime}: no decoy"
        );
    }
}

#[test]
fn the_logs_span_torch_releases_from_2_1_to_the_newest_and_transformers_4_and_5() {
    let [_, torch_folder] = folders();
    let entries = manifest(&torch_folder).log;
    let torch: BTreeSet<&str> = entries.iter().filter_map(|e| e.torch.as_deref()).collect();
    let transformers_majors: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e.transformers.as_deref()?.split('.').next())
        .collect();
    assert!(
        torch.len() >= 3 && torch.iter().any(|v| v.starts_with("2.1.")),
        "torch versions: {torch:?}"
    );
    assert_eq!(
        transformers_majors,
        BTreeSet::from(["4", "5"]),
        "transformers majors"
    );
}
