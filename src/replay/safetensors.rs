//! The safetensors reader: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the bytes.
//!
//! Every field is checked against the file and [`Limits`] before a check runs; the tensor bytes
//! are never copied (the snapshot keeps the file and each tensor's range in it, and a summary
//! reads the header where the file is).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::params::flatten;
use super::snapshot::{
    DType, Format, Limits, Snapshot, SnapshotError, SnapshotSummary, TensorInfo, element_count,
};

/// Whether `data` starts like a safetensors file (a header length, then a JSON object).
pub fn looks_like(data: &[u8]) -> bool {
    data.len() > 8 && data[8] == b'{'
}

/// Reads and validates a safetensors file; the snapshot keeps `data` as it is.
pub fn read(data: Vec<u8>, limits: &Limits) -> Result<Snapshot, SnapshotError> {
    let (tensors, params) = parse(&data, limits)?;
    Ok(Snapshot::from_parts(Format::Safetensors, data, tensors, params))
}

/// Validates a safetensors file: what it holds.
pub fn summarize(data: &[u8], limits: &Limits) -> Result<SnapshotSummary, SnapshotError> {
    let (tensors, params) = parse(data, limits)?;
    Ok(SnapshotSummary::of(Format::Safetensors, &tensors, params))
}

type Parts = (Vec<TensorInfo>, BTreeMap<String, String>);

/// The tensors (each with its range in `data`, sorted by it) and the metadata of a file.
fn parse(data: &[u8], limits: &Limits) -> Result<Parts, SnapshotError> {
    let Some(len_bytes) = data.first_chunk::<8>() else {
        return Err(SnapshotError::Header(
            "shorter than the 8-byte header length".into(),
        ));
    };
    let header_len = u64::from_le_bytes(*len_bytes);
    if header_len > limits.max_header as u64 {
        return Err(SnapshotError::TooLarge {
            what: "safetensors header".into(),
            actual: header_len,
            limit: limits.max_header as u64,
        });
    }
    // header_len <= max_header (a usize), so the cast is exact.
    let base = 8 + header_len as usize;
    let Some(header) = data.get(8..base) else {
        return Err(SnapshotError::Header(format!(
            "the header is said to be {header_len} bytes but the file has only {} after the length",
            data.len() - 8
        )));
    };
    let entries: Entries = serde_json::from_slice(header)
        .map_err(|e| SnapshotError::Header(format!("the JSON header is not valid: {e}")))?;

    let buffer_len = (data.len() - base) as u64;
    let mut params = BTreeMap::new();
    let mut tensors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (name, value) in entries.0 {
        if name == "__metadata__" {
            let Value::Object(map) = value else {
                return Err(SnapshotError::Header(
                    "__metadata__ must be an object of name: value".into(),
                ));
            };
            params = flatten(map)?;
            continue;
        }
        if !seen.insert(name.clone()) {
            return Err(SnapshotError::Header(format!("tensor `{name}` is named twice")));
        }
        if tensors.len() == limits.max_tensors {
            return Err(SnapshotError::TooLarge {
                what: "tensor count".into(),
                actual: limits.max_tensors as u64 + 1,
                limit: limits.max_tensors as u64,
            });
        }
        tensors.push(tensor(name, value, buffer_len, base, limits)?);
    }

    tensors.sort_by_key(|t| (t.range.start, t.range.end));
    let mut previous: Option<&TensorInfo> = None;
    for t in tensors.iter().filter(|t| !t.range.is_empty()) {
        if let Some(p) = previous
            && t.range.start < p.range.end
        {
            return Err(SnapshotError::Tensor {
                name: t.name.clone(),
                problem: format!("its bytes overlap those of `{}`", p.name),
            });
        }
        previous = Some(t);
    }
    Ok((tensors, params))
}

/// One tensor's header entry.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

fn tensor(
    name: String,
    value: Value,
    buffer_len: u64,
    base: usize,
    limits: &Limits,
) -> Result<TensorInfo, SnapshotError> {
    let fail = |problem: String| SnapshotError::Tensor {
        name: name.clone(),
        problem,
    };
    let entry: Entry = serde_json::from_value(value)
        .map_err(|e| fail(format!("header entry is not {{dtype, shape, data_offsets}}: {e}")))?;
    let dtype = dtype(&entry.dtype).ok_or_else(|| {
        fail(format!(
            "dtype {} is not supported (BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 are)",
            entry.dtype
        ))
    })?;
    let elements = element_count(&name, &entry.shape, limits)?;
    let [begin, end] = entry.data_offsets;
    if begin > end || end > buffer_len {
        return Err(fail(format!(
            "data_offsets [{begin}, {end}] are outside the {buffer_len} bytes of tensor data"
        )));
    }
    let expected = elements * dtype.size() as u64;
    if end - begin != expected {
        return Err(fail(format!(
            "{} bytes for dtype {} and shape {:?} (expected {expected})",
            end - begin,
            entry.dtype,
            entry.shape
        )));
    }
    // end <= buffer_len, which came from a usize, so both offsets fit.
    let range = base + begin as usize..base + end as usize;
    Ok(TensorInfo {
        name,
        dtype,
        shape: entry.shape,
        range,
    })
}

fn dtype(name: &str) -> Option<DType> {
    Some(match name {
        "BOOL" => DType::Bool,
        "U8" => DType::U8,
        "I8" => DType::I8,
        "I16" => DType::I16,
        "U16" => DType::U16,
        "I32" => DType::I32,
        "U32" => DType::U32,
        "I64" => DType::I64,
        "U64" => DType::U64,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F32" => DType::F32,
        "F64" => DType::F64,
        _ => return None,
    })
}

/// The header's entries in file order, duplicates kept (a JSON map would silently keep the last).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensor name: {dtype, shape, data_offsets}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}
