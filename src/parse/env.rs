//! Environment facts: versions of torch, CUDA, cuDNN, the driver, transformers, Python and NCCL,
//! and GPU names, from collect_env, nvidia-smi, pip lists, banners and paths.

use std::sync::LazyLock;

use regex::Regex;

use super::{Collector, Extractor, compile_table};
use crate::model::{EnvFact, EnvKey, EventKind};
use crate::normalize::Line;

pub(super) const EXTRACTORS: &[Extractor] = &[
    Extractor {
        trigger: r"PyTorch version|^\s*torch(?:==|\s+)\d|\+cu\d{2,3}\b|CUDA used to build PyTorch|CUDA runtime version|Cuda compilation tools|^\s*cudatoolkit(?:=|\s+)\d|CUDA Version: \d|Driver Version: \d|Nvidia driver version|cuDNN version: \d|transformers` version|^\s*transformers(?:==|\s+)\d|NCCL version \d|Python version: \d",
        handle: versions,
    },
    Extractor {
        // Only traceback frames: warnings print the same paths on every line and add nothing.
        trigger: r#"File "[^"]*(?:[Pp]ython3\.\d+[/\\](?:site|dist)-packages|[Pp]ython3\d{1,2}[/\\][Ll]ib[/\\])"#,
        handle: python_path,
    },
    Extractor {
        trigger: r"GPU \d+: |^\|\s+\d+\s+(?:NVIDIA|Tesla|GeForce|Quadro|TITAN)|with CUDA capability sm_\d+",
        handle: gpu_name,
    },
];

/// (pattern with a `v` group, key). Checked in order; every match on the line is recorded.
const VERSION_PATTERNS: &[(&str, EnvKey)] = &[
    (r"PyTorch version(?: \(GPU\?\))?: (?P<v>\d[\w.+]*)", EnvKey::Torch),
    (
        r"^\s*torch(?:==|\s+)(?P<v>\d+\.\d+(?:\.\d+)?[\w.+]*)\s*$",
        EnvKey::Torch,
    ),
    (r"CUDA used to build PyTorch: (?P<v>\d[\d.]*)", EnvKey::Cuda),
    (r"CUDA runtime version: (?P<v>\d[\d.]*)", EnvKey::Cuda),
    (r"Cuda compilation tools, release (?P<v>\d+\.\d+)", EnvKey::Cuda),
    (r"^\s*cudatoolkit(?:=|\s+)(?P<v>\d+\.\d+(?:\.\d+)?)", EnvKey::Cuda),
    (r"CUDA Version: (?P<v>\d+\.\d+)", EnvKey::DriverCuda),
    (r"Driver Version: (?P<v>\d[\d.]+)", EnvKey::Driver),
    (r"Nvidia driver version: (?P<v>\d[\d.]+)", EnvKey::Driver),
    (r"cuDNN version: (?P<v>\d[\d.]*)", EnvKey::Cudnn),
    (r"transformers` version: (?P<v>\d[\w.+]*)", EnvKey::Transformers),
    (
        r"^\s*transformers(?:==|\s+)(?P<v>\d+\.\d+(?:\.\d+)?[\w.+]*)\s*$",
        EnvKey::Transformers,
    ),
    (r"NCCL version (?P<v>\d[\d.]*(?:\+cuda[\d.]+)?)", EnvKey::Nccl),
    (r"Python version: (?P<v>\d+\.\d+(?:\.\d+)?)", EnvKey::Python),
];

static VERSION_REGEXES: LazyLock<Vec<(Regex, EnvKey)>> = LazyLock::new(|| compile_table(VERSION_PATTERNS));

fn emit(out: &mut Collector, line: &Line<'_>, key: EnvKey, value: &str) {
    out.emit(
        line,
        EventKind::Env(EnvFact {
            key,
            value: value.trim().to_owned(),
        }),
    );
}

fn versions(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    for (re, key) in VERSION_REGEXES.iter() {
        if let Some(c) = re.captures(text) {
            emit(out, line, *key, &c["v"]);
        }
    }
    // `2.1.0+cu121` names the CUDA version torch was built with.
    if let Some(c) = regex!(r"\b\d+\.\d+(?:\.\d+)?\+cu(?P<v>\d{2,3})\b").captures(text) {
        let digits = &c["v"];
        let (major, minor) = digits.split_at(digits.len() - 1);
        emit(out, line, EnvKey::Cuda, &format!("{major}.{minor}"));
    }
}

fn python_path(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    if let Some(c) = regex!(r"[Pp]ython(?P<v>3\.\d+)[/\\](?:site|dist)-packages").captures(text) {
        emit(out, line, EnvKey::Python, &c["v"]);
    } else if let Some(c) = regex!(r"[Pp]ython3(?P<m>\d{1,2})[/\\][Ll]ib[/\\]").captures(text) {
        emit(out, line, EnvKey::Python, &format!("3.{}", &c["m"]));
    }
}

fn gpu_name(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let name = regex!(r"GPU \d+: (?P<n>(?:NVIDIA|Tesla|GeForce|Quadro|TITAN|Titan)[^(]*?)\s*(?:\(UUID.*)?$")
        .captures(text)
        .or_else(|| {
            regex!(r"^\|\s+\d+\s+(?P<n>(?:NVIDIA|Tesla|GeForce|Quadro|TITAN)\b.*?)\s+(?:On|Off)\s+\|")
                .captures(text)
        })
        .or_else(|| {
            regex!(r"(?P<n>(?:NVIDIA|Tesla|GeForce|Quadro|TITAN)\b[\w -]*?) with CUDA capability sm_\d+")
                .captures(text)
        });
    if let Some(c) = name {
        emit(out, line, EnvKey::Gpu, &c["n"]);
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{EnvKey, EventKind};
    use crate::parse::parse_str;

    fn env(log: &str) -> Vec<(EnvKey, String)> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Env(f) => Some((f.key, f.value)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn collect_env_output_gives_versions_and_gpus() {
        let got = env(
            "PyTorch version: 2.0.1+cu117\nCUDA used to build PyTorch: 11.7\nPython version: 3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)\nGPU 0: NVIDIA A100-SXM4-80GB\nNvidia driver version: 525.85.12\ncuDNN version: 8.5.0\n",
        );
        assert_eq!(
            got,
            vec![
                (EnvKey::Torch, "2.0.1+cu117".into()),
                (EnvKey::Cuda, "11.7".into()),
                (EnvKey::Python, "3.10.12".into()),
                (EnvKey::Gpu, "NVIDIA A100-SXM4-80GB".into()),
                (EnvKey::Driver, "525.85.12".into()),
                (EnvKey::Cudnn, "8.5.0".into()),
            ]
        );
    }

    #[test]
    fn nvidia_smi_tables_give_driver_cuda_and_gpu_names() {
        let got = env(
            "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |\n|   0  NVIDIA GeForce RTX 3090        Off | 00000000:01:00.0 Off |                  N/A |\n",
        );
        assert_eq!(
            got,
            vec![
                (EnvKey::DriverCuda, "12.2".into()),
                (EnvKey::Driver, "535.104.05".into()),
                (EnvKey::Gpu, "NVIDIA GeForce RTX 3090".into()),
            ]
        );
    }

    #[test]
    fn pip_lists_paths_and_warnings_give_versions() {
        let got = env(
            "torch                    1.13.1\ntransformers==4.30.2\n  File \"/opt/conda/lib/python3.9/site-packages/torch/nn/modules/module.py\", line 1, in f\nNVIDIA GeForce RTX 4090 with CUDA capability sm_89 is not compatible with the current PyTorch installation.\n",
        );
        assert_eq!(
            got,
            vec![
                (EnvKey::Torch, "1.13.1".into()),
                (EnvKey::Transformers, "4.30.2".into()),
                (EnvKey::Python, "3.9".into()),
                (EnvKey::Gpu, "NVIDIA GeForce RTX 4090".into()),
            ]
        );
    }

    #[test]
    fn windows_python_folders_give_the_python_version() {
        let got = env(
            "  File \"C:\\Users\\user\\AppData\\Local\\Programs\\Python\\Python313\\Lib\\site-packages\\torch\\_utils.py\", line 733, in reraise",
        );
        assert_eq!(got, vec![(EnvKey::Python, "3.13".into())]);
    }
}
