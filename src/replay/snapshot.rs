//! A tensor snapshot: the tensors of the failing step and the parameters that explain them.
//!
//! Read from safetensors (parameters in `__metadata__`) or NumPy `.npz`; a JSON part of an upload
//! adds parameters ([`Snapshot::with_params`]). Everything is validated before a check runs (see
//! [`Limits`]); tensor names are labels only, never paths. [`Snapshot::summarize`] validates a
//! file the same way without holding its tensors (what an upload needs).

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

/// Element types a snapshot may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// `bool` (one byte, 0 or 1).
    Bool,
    /// `uint8`.
    U8,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `uint16`.
    U16,
    /// `int32`.
    I32,
    /// `uint32`.
    U32,
    /// `int64`.
    I64,
    /// `uint64`.
    U64,
    /// `float16`.
    F16,
    /// `bfloat16`.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl DType {
    /// Every dtype, for tests and tables.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// Whether values are floating point.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The name torch prints (`torch.int64` without the prefix).
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::I64 => "int64",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }
}

/// Bounds on what a snapshot may hold, checked before anything is read past the header.
///
/// [`Limits::default`] is the offline bound (the command line reads files its user chose);
/// `Config::snapshot_limits` is the smaller one of uploads and of the jobs of the server's workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted.
    pub max_bytes: u64,
    /// Most bytes an `.npz`'s members may inflate to, all together (checked on their declared
    /// sizes before anything is inflated; a member that inflates past its declared size is cut).
    pub max_inflated: u64,
    /// Largest safetensors JSON header (and npy header, and JSON parameter part).
    pub max_header: usize,
    /// Most tensors in one snapshot.
    pub max_tensors: usize,
    /// Most elements in one tensor.
    pub max_elements: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 2 << 30,
            max_inflated: 2 << 30,
            max_header: 1 << 20,
            max_tensors: 1024,
            max_elements: 1 << 31,
        }
    }
}

/// The file format a snapshot came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// safetensors.
    Safetensors,
    /// NumPy `.npz` (a zip of `.npy`).
    Npz,
}

/// Why a snapshot was refused. Each one is the user's input at fault (HTTP 422 / exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Neither safetensors nor npz.
    #[error("not a safetensors or .npz file: {0}")]
    UnknownFormat(String),
    /// The members of an `.npz` declare more inflated bytes than [`Limits::max_inflated`].
    #[error(
        "zip member {member} inflates the .npz to {inflated} bytes, over the limit of {limit} \
         inflated bytes"
    )]
    Inflated {
        /// The member that crosses the limit (with the members before it).
        member: String,
        /// The declared inflated size of the members up to and including it.
        inflated: u64,
        /// The limit.
        limit: u64,
    },
    /// A size limit was exceeded.
    #[error("{what} is {actual}, over the limit of {limit}")]
    TooLarge {
        /// What was measured (`header`, `file`, `tensor labels elements`, `tensor count`).
        what: String,
        /// Its size.
        actual: u64,
        /// The limit.
        limit: u64,
    },
    /// The header (safetensors JSON, npy dict, zip directory) is malformed.
    #[error("malformed header: {0}")]
    Header(String),
    /// A tensor's description does not agree with its bytes.
    #[error("tensor {name}: {problem}")]
    Tensor {
        /// Tensor name.
        name: String,
        /// What is wrong (offsets outside the file, overlap, byte length vs dtype x shape, dtype unknown).
        problem: String,
    },
    /// The JSON parameter part is not a flat object of scalars.
    #[error("parameters: {0}")]
    Params(String),
}

/// One tensor's description; its bytes are `Snapshot::data[range]`, little-endian, C order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name in the file (a label only).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Byte range in the snapshot's data.
    pub range: Range<usize>,
}

/// A borrowed view of one tensor.
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    /// Its name in the snapshot.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [u64],
    /// Little-endian, C-order element bytes (`elements() * dtype.size()` of them).
    pub bytes: &'a [u8],
}

impl TensorRef<'_> {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The multi-dimensional index of flat position `flat` (C order).
    pub fn unravel(&self, flat: u64) -> Vec<u64> {
        let mut index = vec![0; self.shape.len()];
        let mut rest = flat;
        for (slot, &dim) in index.iter_mut().zip(self.shape).rev() {
            if dim > 0 {
                *slot = rest % dim;
                rest /= dim;
            }
        }
        index
    }
}

/// What a snapshot holds, without its tensor bytes: kept in "summary only" storage and shown on the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotSummary {
    /// File format.
    pub format: Format,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Each tensor: name, dtype, shape.
    pub tensors: Vec<TensorSummary>,
    /// The parameters (metadata and JSON part merged).
    pub params: BTreeMap<String, String>,
}

/// One tensor in a [`SnapshotSummary`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorSummary {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<u64>,
}

impl SnapshotSummary {
    /// What a reader's `tensors` (in file order) and `params` amount to.
    pub(super) fn of(format: Format, tensors: &[TensorInfo], params: BTreeMap<String, String>) -> Self {
        SnapshotSummary {
            format,
            data_bytes: tensors.iter().map(|t| t.range.len() as u64).sum(),
            tensors: tensors
                .iter()
                .map(|t| TensorSummary {
                    name: t.name.clone(),
                    dtype: t.dtype,
                    shape: t.shape.clone(),
                })
                .collect(),
            params,
        }
    }

    /// Adds the parameters of a JSON object, as [`Snapshot::with_params`] does.
    pub fn with_params(mut self, json: &[u8], limits: &Limits) -> Result<Self, SnapshotError> {
        self.params.extend(super::params::parse_params(json, limits)?);
        Ok(self)
    }

    /// The most memory [`Snapshot::from_bytes`] holds for this snapshot, read from its file of
    /// `file_bytes`: the file, and for an `.npz` its inflated tensors plus room to rewrite the
    /// largest one that may be in Fortran order (more than one dimension over 1) in C order.
    pub fn load_bytes(&self, file_bytes: u64) -> u64 {
        if self.format != Format::Npz {
            return file_bytes;
        }
        let reordered = self
            .tensors
            .iter()
            .filter(|t| may_need_reordering(&t.shape))
            .map(|t| {
                t.shape
                    .iter()
                    .fold(t.dtype.size() as u64, |n, &d| n.saturating_mul(d))
            })
            .max()
            .unwrap_or(0);
        file_bytes
            .saturating_add(self.data_bytes)
            .saturating_add(reordered)
    }
}

/// Whether an array of `shape` is laid out differently in Fortran and C order: only when more than
/// one of its dimensions is over 1.
pub(super) fn may_need_reordering(shape: &[u64]) -> bool {
    shape.iter().filter(|&&d| d > 1).count() > 1
}

/// A validated snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    format: Format,
    data: Vec<u8>,
    tensors: Vec<TensorInfo>,
    params: BTreeMap<String, String>,
}

/// The element count of `shape`, refused when it overflows or passes `limits.max_elements`.
pub(super) fn element_count(name: &str, shape: &[u64], limits: &Limits) -> Result<u64, SnapshotError> {
    let count = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= limits.max_elements);
    count.ok_or_else(|| SnapshotError::TooLarge {
        what: format!("tensor {name} elements (shape {shape:?})"),
        actual: shape.iter().fold(1u64, |acc, &d| acc.saturating_mul(d)),
        limit: limits.max_elements,
    })
}

/// Common tensor names per role, tried in order when the metadata names none (`role.labels = "y"`).
pub const ROLE_NAMES: &[(&str, &[&str])] = &[
    ("labels", &["labels", "label", "targets", "target", "y"]),
    (
        "logits",
        &["logits", "outputs", "output", "scores", "pred", "preds"],
    ),
    ("input_ids", &["input_ids", "ids", "tokens"]),
    ("decoder_input_ids", &["decoder_input_ids"]),
    ("position_ids", &["position_ids"]),
    ("token_type_ids", &["token_type_ids"]),
    ("attention_mask", &["attention_mask"]),
    ("weight", &["weight", "embedding.weight", "embed_tokens.weight"]),
    ("index", &["index", "indices"]),
    // What BCE takes as `input`: probabilities, the model's output. `x` / `inputs` are the
    // model's own inputs (features), never taken for it.
    ("input", &["input", "probs", "probabilities", "predictions"]),
    ("target", &["target", "targets", "labels"]),
];

impl Snapshot {
    /// Reads and validates a safetensors or `.npz` file (told apart by their first bytes).
    ///
    /// A safetensors snapshot keeps `data` as it is; an `.npz` snapshot inflates its arrays once,
    /// into one buffer sized from the members' declared sizes.
    pub fn from_bytes(data: Vec<u8>, limits: &Limits) -> Result<Self, SnapshotError> {
        match Self::format_of(&data, limits)? {
            Format::Npz => super::npz::read(&data, limits),
            Format::Safetensors => super::safetensors::read(data, limits),
        }
    }

    /// What a file holds, validated as [`Snapshot::from_bytes`] validates it, without its tensors
    /// in memory: an `.npz`'s members are inflated into a counter (memory: one `.npy` header at a
    /// time, whatever they inflate to), a safetensors file is read where it is.
    pub fn summarize(data: &[u8], limits: &Limits) -> Result<SnapshotSummary, SnapshotError> {
        match Self::format_of(data, limits)? {
            Format::Npz => super::npz::summarize(data, limits),
            Format::Safetensors => super::safetensors::summarize(data, limits),
        }
    }

    /// The format of a file within the size limit, told by its first bytes.
    fn format_of(data: &[u8], limits: &Limits) -> Result<Format, SnapshotError> {
        if data.len() as u64 > limits.max_bytes {
            return Err(SnapshotError::TooLarge {
                what: "snapshot file".into(),
                actual: data.len() as u64,
                limit: limits.max_bytes,
            });
        }
        if super::npz::looks_like(data) {
            Ok(Format::Npz)
        } else if super::npz::is_npy(data) {
            Err(SnapshotError::UnknownFormat(
                "a bare .npy array has no tensor name; save it with np.savez(path, labels=array)".into(),
            ))
        } else if super::safetensors::looks_like(data) {
            Ok(Format::Safetensors)
        } else {
            Err(SnapshotError::UnknownFormat(format!(
                "{} bytes starting {:02x?}; save tensors with safetensors (save_file) or np.savez",
                data.len(),
                &data[..data.len().min(8)]
            )))
        }
    }

    /// Adds the parameters of a JSON object (`{"num_classes": 2, "role.labels": "y"}`); numbers and
    /// booleans are kept as their JSON text, `null` is skipped, nested values are refused. They
    /// override the file's own metadata.
    pub fn with_params(mut self, json: &[u8], limits: &Limits) -> Result<Self, SnapshotError> {
        self.params.extend(super::params::parse_params(json, limits)?);
        Ok(self)
    }

    /// A snapshot whose parts a reader has already validated.
    pub(super) fn from_parts(
        format: Format,
        data: Vec<u8>,
        tensors: Vec<TensorInfo>,
        params: BTreeMap<String, String>,
    ) -> Self {
        Snapshot {
            format,
            data,
            tensors,
            params,
        }
    }

    /// A snapshot from tensors already in memory (tests, benchmarks, the capture of a `.npz`).
    /// Each tensor is `(name, dtype, shape, little-endian bytes)`.
    pub fn from_tensors(
        format: Format,
        tensors: Vec<(String, DType, Vec<u64>, Vec<u8>)>,
        params: BTreeMap<String, String>,
    ) -> Result<Self, SnapshotError> {
        let mut data = Vec::new();
        let mut infos = Vec::with_capacity(tensors.len());
        for (name, dtype, shape, bytes) in tensors {
            let expected = shape
                .iter()
                .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d));
            if expected != Some(bytes.len() as u64) {
                return Err(SnapshotError::Tensor {
                    name,
                    problem: format!(
                        "{} bytes for dtype {} and shape {:?}",
                        bytes.len(),
                        dtype.torch_name(),
                        shape
                    ),
                });
            }
            let start = data.len();
            data.extend_from_slice(&bytes);
            infos.push(TensorInfo {
                name,
                dtype,
                shape,
                range: start..data.len(),
            });
        }
        Ok(Snapshot {
            format,
            data,
            tensors: infos,
            params,
        })
    }

    /// The file format it came in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef<'_>> {
        self.tensors.iter().map(|t| self.view(t))
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        self.tensors.iter().find(|t| t.name == name).map(|t| self.view(t))
    }

    /// The tensor playing `role`: the one the parameter `role.<role>` names, else a tensor with
    /// the role's own name, else one of its common names ([`ROLE_NAMES`]).
    pub fn by_role(&self, role: &str) -> Option<TensorRef<'_>> {
        if let Some(name) = self.params.get(&format!("role.{role}")) {
            return self.tensor(name);
        }
        if let Some(t) = self.tensor(role) {
            return Some(t);
        }
        let (_, names) = ROLE_NAMES.iter().find(|(r, _)| *r == role)?;
        names.iter().find_map(|n| self.tensor(n))
    }

    /// A parameter (`num_classes`, `vocab_size`, `ignore_index`, `role.labels`, …).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Every parameter.
    pub fn params(&self) -> &BTreeMap<String, String> {
        &self.params
    }

    /// Bytes of tensor data.
    pub fn data_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.range.len() as u64).sum()
    }

    /// What it holds, without the tensor bytes.
    pub fn summary(&self) -> SnapshotSummary {
        SnapshotSummary::of(self.format, &self.tensors, self.params.clone())
    }

    fn view<'a>(&'a self, t: &'a TensorInfo) -> TensorRef<'a> {
        TensorRef {
            name: &t.name,
            dtype: t.dtype,
            shape: &t.shape,
            bytes: &self.data[t.range.clone()],
        }
    }
}
