//! Readers of the bundle's structured files: PyTorch flight-recorder dumps (pickle or JSON),
//! torchrun's error files, `nvidia-smi -q` reports and DCGM diagnostics. Each reads bytes held in
//! memory (these files are small) and returns what the bundle needs, or why it cannot.

use std::collections::BTreeMap;

use super::pickle::{self, Value};
use super::signals::normalize_op;
use super::xid::normalize_bus_id;
use crate::model::{CollectiveCall, GpuRef};

/// One process group's state in one rank's dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpGroup {
    /// Last enqueued collective.
    pub enqueued: Option<u64>,
    /// Last started.
    pub started: Option<u64>,
    /// Last completed.
    pub completed: Option<u64>,
    /// The calls recorded, by collective sequence number.
    pub calls: BTreeMap<u64, CollectiveCall>,
    /// The ranks of the group, when the dump lists them.
    pub ranks: Vec<u32>,
}

/// What a flight-recorder dump says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    /// The dump format's version (`2.10`).
    pub version: String,
    /// Per process group id.
    pub groups: BTreeMap<String, DumpGroup>,
}

/// Reads a flight-recorder dump (the pickle PyTorch writes by default, or its JSON).
pub fn read_dump(bytes: &[u8]) -> Result<Dump, String> {
    let value = if bytes.first() == Some(&0x80) {
        pickle::read(bytes).map_err(|e| e.to_string())?
    } else {
        let json: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not a JSON dump: {e}"))?;
        Value::from_json(&json)
    };
    dump_of(&value)
}

/// What a dump's decoded content (its pickle's value, or its JSON) says.
pub fn dump_of(value: &Value) -> Result<Dump, String> {
    let version = value
        .get("version")
        .and_then(Value::as_str)
        .ok_or("no `version` key: not a flight-recorder dump")?
        .to_owned();
    let mut groups: BTreeMap<String, DumpGroup> = BTreeMap::new();
    for (pg, status) in value.get("pg_status").map(Value::entries).unwrap_or_default() {
        let Some(pg) = key_text(pg) else { continue };
        let seq = |name: &str| {
            status
                .get(name)
                .and_then(Value::as_i64)
                .and_then(|v| u64::try_from(v).ok())
        };
        let group = groups.entry(pg).or_default();
        group.enqueued = seq("last_enqueued_collective");
        group.started = seq("last_started_collective");
        group.completed = seq("last_completed_collective");
    }
    for entry in value.get("entries").map(Value::items).unwrap_or_default() {
        if entry.get("is_p2p") == Some(&Value::Bool(true)) {
            continue;
        }
        let pg = entry
            .get("pg_id")
            .and_then(Value::as_i64)
            .map(|v| v.to_string())
            .or_else(|| {
                entry
                    .get("process_group")
                    .and_then(|p| p.items().first())
                    .and_then(key_text)
            });
        let (Some(pg), Some(seq)) = (pg, entry.get("collective_seq_id").and_then(Value::as_i64)) else {
            continue;
        };
        let Ok(seq) = u64::try_from(seq) else { continue };
        let sizes = |key: &str| entry.get(key).map(shape_text);
        let numel = |key: &str| entry.get(key).and_then(numel_of);
        let call = CollectiveCall {
            op: entry
                .get("profiling_name")
                .and_then(Value::as_str)
                .map(normalize_op),
            numel_in: numel("input_sizes"),
            numel_out: numel("output_sizes"),
            sizes: sizes("input_sizes"),
        };
        groups.entry(pg).or_default().calls.insert(seq, call);
    }
    for (_, config) in value.get("pg_config").map(Value::entries).unwrap_or_default() {
        let Some(name) = config.get("name").and_then(Value::as_str) else {
            continue;
        };
        let ranks: Vec<u32> = config
            .get("ranks")
            .and_then(Value::as_str)
            .map(|r| {
                r.trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let key = if name.is_empty() { "0" } else { name };
        if let Some(group) = groups.get_mut(key) {
            group.ranks = ranks;
        }
    }
    Ok(Dump { version, groups })
}

fn key_text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

fn shape_text(v: &Value) -> String {
    match v {
        Value::List(items) | Value::Tuple(items) => {
            format!(
                "[{}]",
                items.iter().map(shape_text).collect::<Vec<_>>().join(", ")
            )
        }
        Value::Int(i) => i.to_string(),
        _ => "?".to_owned(),
    }
}

/// Elements over all tensors of a sizes list (`[[4, 8], [2]]` → 34).
fn numel_of(v: &Value) -> Option<u64> {
    v.items().iter().try_fold(0u64, |sum, tensor| {
        let n = tensor
            .items()
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(u64::try_from(d.as_i64()?).ok()?))?;
        sum.checked_add(n)
    })
}

/// What torchrun's error file (`@record`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFile {
    /// The exception line (`IndexError: index 7 is out of bounds …`).
    pub message: String,
    /// The Python traceback, when recorded.
    pub traceback: Option<String>,
    /// When it was written (Unix seconds).
    pub timestamp: Option<i64>,
}

/// Reads an error file.
pub fn read_error_file(bytes: &[u8]) -> Result<ErrorFile, String> {
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let outer = json
        .get("message")
        .ok_or("no `message` key: not a torchrun error file")?;
    let (message, extra) = match outer {
        serde_json::Value::String(s) => (s.clone(), None),
        other => (
            other
                .get("message")
                .and_then(|m| m.as_str())
                .ok_or("no `message.message`: not a torchrun error file")?
                .to_owned(),
            other.get("extraInfo"),
        ),
    };
    let traceback = extra
        .and_then(|e| e.get("py_callstack"))
        .and_then(|t| t.as_str())
        .map(str::to_owned);
    let timestamp = extra.and_then(|e| e.get("timestamp")).and_then(|t| match t {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Number(n) => n.as_i64(),
        _ => None,
    });
    Ok(ErrorFile {
        message,
        traceback,
        timestamp,
    })
}

/// The GPUs an `nvidia-smi -q` report lists, in its order (the index is that order).
pub fn read_nvidia_smi(text: &str) -> Vec<GpuRef> {
    let mut gpus: Vec<GpuRef> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(bus) = trimmed.strip_prefix("GPU ").filter(|_| !line.starts_with(' ')) {
            gpus.push(GpuRef {
                index: u32::try_from(gpus.len()).ok(),
                bus_id: normalize_bus_id(bus),
                ..GpuRef::default()
            });
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_owned());
        let Some(gpu) = gpus.last_mut() else { continue };
        match key {
            "Product Name" if gpu.name.is_none() => gpu.name = Some(value),
            "GPU UUID" if gpu.uuid.is_none() => gpu.uuid = Some(value),
            _ => {}
        }
    }
    gpus
}

/// A failed DCGM diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthFailure {
    /// The test (`Memory`, `pcie`).
    pub test: String,
    /// The GPU index, when the result names one.
    pub gpu: Option<u32>,
    /// What DCGM said.
    pub message: String,
}

/// The failed tests of a DCGM diagnostics report (`dcgmi diag -j`), whatever its version's
/// layout: every object whose `status` is a failure, with the nearest test name above it.
pub fn read_dcgm(bytes: &[u8]) -> Result<Vec<HealthFailure>, String> {
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let mut out = Vec::new();
    walk_dcgm(&json, "", 0, &mut out);
    Ok(out)
}

fn walk_dcgm(v: &serde_json::Value, test: &str, depth: usize, out: &mut Vec<HealthFailure>) {
    use serde_json::Value as J;
    if depth > 32 || out.len() >= 256 {
        return;
    }
    match v {
        J::Object(map) => {
            let name = map
                .get("name")
                .or_else(|| map.get("test_name"))
                .and_then(J::as_str)
                .filter(|_| map.contains_key("results") || map.contains_key("status"))
                .unwrap_or(test);
            let failed = map
                .get("status")
                .and_then(J::as_str)
                .is_some_and(|s| s.eq_ignore_ascii_case("fail"));
            if failed && !map.contains_key("results") {
                let gpu = ["gpu_id", "entity_id", "gpu"]
                    .iter()
                    .find_map(|k| map.get(*k))
                    .and_then(|g| g.as_u64().or_else(|| g.as_str().and_then(|s| s.parse().ok())))
                    .and_then(|g| u32::try_from(g).ok());
                let message = map
                    .get("warnings")
                    .or_else(|| map.get("errors"))
                    .or_else(|| map.get("warning"))
                    .map(|w| match w {
                        J::String(s) => s.clone(),
                        other => crate::model::clip_text(&other.to_string()),
                    })
                    .unwrap_or_default();
                out.push(HealthFailure {
                    test: name.to_owned(),
                    gpu,
                    message,
                });
            }
            for child in map.values() {
                walk_dcgm(child, name, depth + 1, out);
            }
        }
        J::Array(items) => {
            for item in items {
                walk_dcgm(item, test, depth + 1, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_dump_gives_each_groups_state_and_calls() {
        let json = br#"{"version": "2.10", "comm_lib_version": "",
            "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
            "pg_status": {"0": {"last_enqueued_collective": "4", "last_started_collective": "-1", "last_completed_collective": "3"}},
            "entries": [{"pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 4, "is_p2p": false,
                         "profiling_name": "gloo:all_reduce", "input_sizes": [[2, 3]], "output_sizes": [[2, 3]], "state": "scheduled"}]}"#;
        let dump = read_dump(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dump.version, "2.10");
        let group = &dump.groups["0"];
        assert_eq!(
            (group.enqueued, group.started, group.completed),
            (Some(4), None, Some(3))
        );
        assert_eq!(group.ranks, vec![0, 1]);
        let call = &group.calls[&4];
        assert_eq!(call.op.as_deref(), Some("ALLREDUCE"));
        assert_eq!(
            (call.numel_in, call.sizes.as_deref()),
            (Some(6), Some("[[2, 3]]"))
        );
    }

    #[test]
    fn a_file_that_is_no_dump_says_why() {
        assert!(read_dump(b"{\"a\": 1}").is_err_and(|e| e.contains("version")));
        assert!(read_dump(b"\x80\x02}q\x00").is_err());
    }

    #[test]
    fn an_error_file_gives_its_exception_traceback_and_time() {
        let json = br#"{"message": {"message": "IndexError: index 7 is out of bounds", "extraInfo": {"py_callstack": "Traceback (most recent call last):\nIndexError: index 7 is out of bounds\n", "timestamp": "1795757937"}}}"#;
        let file = read_error_file(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file.message, "IndexError: index 7 is out of bounds");
        assert_eq!(file.timestamp, Some(1_795_757_937));
        assert!(file.traceback.is_some_and(|t| t.starts_with("Traceback")));
        assert!(read_error_file(b"{}").is_err());
    }

    #[test]
    fn nvidia_smi_lists_each_gpus_bus_id_uuid_and_name() {
        let text = "==============NVSMI LOG==============\n\nAttached GPUs : 2\nGPU 00000000:3B:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    GPU UUID : GPU-aaaa-1111\nGPU 00000000:5E:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n    GPU UUID : GPU-bbbb-2222\n";
        let gpus = read_nvidia_smi(text);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].index, Some(1));
        assert_eq!(gpus[1].bus_id.as_deref(), Some("0000:5e:00"));
        assert_eq!(gpus[1].uuid.as_deref(), Some("GPU-bbbb-2222"));
    }

    #[test]
    fn dcgm_failures_name_their_test_and_gpu() {
        let json = br#"{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
            {"name": "Memory", "results": [{"gpu_id": "0", "status": "Pass"}, {"gpu_id": "3", "status": "Fail", "warnings": [{"warning": "DBE detected"}]}]}]}]}}"#;
        let failures = read_dcgm(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(failures.len(), 1);
        assert_eq!((failures[0].test.as_str(), failures[0].gpu), ("Memory", Some(3)));
        assert!(failures[0].message.contains("DBE"));
    }
}
