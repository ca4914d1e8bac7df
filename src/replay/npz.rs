//! The NumPy `.npz` reader: a zip of `.npy` arrays (`np.savez`, `np.savez_compressed`), plus an
//! optional `params.json` member with the snapshot's parameters.
//!
//! Each member's declared size is checked against [`Limits`] before anything is inflated, and the
//! inflation is cut at that size, so a zip bomb costs nothing. Big-endian arrays are swapped to
//! little-endian and Fortran-ordered ones are rewritten in C order, so checks see one layout.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use zip::ZipArchive;

use super::params::parse_params;
use super::snapshot::{DType, Format, Limits, Snapshot, SnapshotError, TensorInfo, element_count};

/// The first bytes of a zip file (a local file header, or the end record of an empty archive).
pub fn looks_like(data: &[u8]) -> bool {
    data.starts_with(b"PK\x03\x04") || data.starts_with(b"PK\x05\x06")
}

/// Members whose JSON object holds the snapshot's parameters.
const PARAM_MEMBERS: &[&str] = &["params.json", "metadata.json"];

/// Reads and validates an `.npz` file.
pub fn read(data: &[u8], limits: &Limits) -> Result<Snapshot, SnapshotError> {
    let mut archive = ZipArchive::new(Cursor::new(data))
        .map_err(|e| SnapshotError::Header(format!("not a readable zip archive: {e}")))?;
    let mut out = Vec::new();
    let mut tensors = Vec::new();
    let mut params = BTreeMap::new();
    let mut budget = limits.max_bytes;
    for index in 0..archive.len() {
        let mut member = archive
            .by_index(index)
            .map_err(|e| SnapshotError::Header(format!("zip member {index}: {e}")))?;
        if member.is_dir() {
            continue;
        }
        let member_name = member
            .name()
            .map_err(|e| SnapshotError::Header(format!("zip member {index}: {e}")))?
            .into_owned();
        if member.encrypted() {
            return Err(SnapshotError::Header(format!(
                "zip member {member_name} is encrypted"
            )));
        }
        let size = member.size();
        if size > budget {
            return Err(SnapshotError::TooLarge {
                what: "inflated npz".into(),
                actual: limits.max_bytes - budget + size,
                limit: limits.max_bytes,
            });
        }
        budget -= size;
        let bytes = read_member(&mut member, &member_name, size)?;

        if PARAM_MEMBERS.contains(&member_name.as_str()) {
            params.extend(parse_params(&bytes, limits)?);
            continue;
        }
        let Some(name) = member_name.strip_suffix(".npy") else {
            return Err(SnapshotError::Header(unexpected_member(&member_name)));
        };
        if tensors.len() == limits.max_tensors {
            return Err(SnapshotError::TooLarge {
                what: "tensor count".into(),
                actual: limits.max_tensors as u64 + 1,
                limit: limits.max_tensors as u64,
            });
        }
        let array = npy(name, &bytes, limits)?;
        let start = out.len();
        out.extend_from_slice(&array.bytes);
        tensors.push(TensorInfo {
            name: name.to_string(),
            dtype: array.dtype,
            shape: array.shape,
            range: start..out.len(),
        });
    }
    Ok(Snapshot::from_parts(Format::Npz, out, tensors, params))
}

fn unexpected_member(name: &str) -> String {
    if name.ends_with("data.pkl") {
        format!(
            "member {name} is a pickle: this looks like a torch.save file; save the tensors with \
             safetensors.torch.save_file (or np.savez) instead"
        )
    } else {
        format!("member {name} is neither an .npy array nor params.json")
    }
}

fn read_member(member: &mut impl Read, name: &str, size: u64) -> Result<Vec<u8>, SnapshotError> {
    let mut bytes = Vec::new();
    // One byte past the declared size tells a member that lies about it.
    member
        .take(size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SnapshotError::Header(format!("zip member {name} cannot be read: {e}")))?;
    if bytes.len() as u64 != size {
        return Err(SnapshotError::Header(format!(
            "zip member {name} inflates to more than its declared {size} bytes"
        )));
    }
    Ok(bytes)
}

/// One `.npy` array in little-endian C order.
struct Array {
    dtype: DType,
    shape: Vec<u64>,
    bytes: Vec<u8>,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Whether `data` is a bare `.npy` file (refused: its one array has no name).
pub fn is_npy(data: &[u8]) -> bool {
    data.starts_with(NPY_MAGIC)
}

fn npy(name: &str, data: &[u8], limits: &Limits) -> Result<Array, SnapshotError> {
    let fail = |problem: String| SnapshotError::Tensor {
        name: name.to_string(),
        problem,
    };
    if !data.starts_with(NPY_MAGIC) || data.len() < 10 {
        return Err(fail("not an .npy array (no \\x93NUMPY magic)".into()));
    }
    let (header_len, header_start) = match data[6] {
        1 => (u16::from_le_bytes([data[8], data[9]]) as usize, 10),
        2 | 3 => {
            let Some(len) = data.get(8..12) else {
                return Err(fail("truncated .npy header length".into()));
            };
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            (len, 12)
        }
        major => return Err(fail(format!(".npy format version {major} is not known"))),
    };
    if header_len > limits.max_header {
        return Err(SnapshotError::TooLarge {
            what: format!("tensor {name} .npy header"),
            actual: header_len as u64,
            limit: limits.max_header as u64,
        });
    }
    let Some(header) = data.get(header_start..header_start + header_len) else {
        return Err(fail("the .npy header runs past the member".into()));
    };
    let header = std::str::from_utf8(header).map_err(|_| fail("the .npy header is not UTF-8 text".into()))?;
    let header = NpyHeader::parse(header).map_err(|e| fail(format!(".npy header: {e}")))?;
    let (dtype, big_endian) = descr(&header.descr).ok_or_else(|| {
        fail(format!(
            "numpy dtype '{}' is not supported (bool, int8-64, uint8-64, float16/32/64 are)",
            header.descr
        ))
    })?;
    let elements = element_count(name, &header.shape, limits)?;
    let body = &data[header_start + header_len..];
    let expected = elements * dtype.size() as u64;
    if body.len() as u64 != expected {
        return Err(fail(format!(
            "{} bytes of data for dtype {} and shape {:?} (expected {expected})",
            body.len(),
            header.descr,
            header.shape
        )));
    }
    let mut bytes = body.to_vec();
    if big_endian {
        for element in bytes.chunks_exact_mut(dtype.size()) {
            element.reverse();
        }
    }
    if header.fortran_order {
        bytes = fortran_to_c(&bytes, &header.shape, dtype.size());
    }
    Ok(Array {
        dtype,
        shape: header.shape,
        bytes,
    })
}

/// The element type of a numpy `descr` (`<i8`, `|b1`, `>f4`) and whether it is big-endian.
fn descr(descr: &str) -> Option<(DType, bool)> {
    let (order, code) = descr.split_at_checked(1)?;
    let big_endian = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return None,
    };
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return None,
    };
    Some((dtype, big_endian && dtype.size() > 1))
}

/// Rewrites a column-major (Fortran) array in row-major (C) order.
fn fortran_to_c(bytes: &[u8], shape: &[u64], size: usize) -> Vec<u8> {
    if shape.len() < 2 {
        return bytes.to_vec();
    }
    // Element strides of the Fortran layout: the first dimension varies fastest.
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1u64;
    for &dim in shape {
        strides.push(stride);
        stride *= dim;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = vec![0u64; shape.len()];
    let mut offset = 0u64;
    for _ in 0..bytes.len() / size {
        let at = offset as usize * size;
        out.extend_from_slice(&bytes[at..at + size]);
        // Advance the C-order odometer (last dimension fastest), keeping the Fortran offset.
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
    out
}

/// The Python dict literal of an `.npy` header: `{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }`.
#[derive(Debug, PartialEq)]
struct NpyHeader {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

impl NpyHeader {
    fn parse(text: &str) -> Result<Self, String> {
        let mut p = Literal { rest: text.trim() };
        p.expect('{')?;
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        while !p.eat('}') {
            let key = p.string()?;
            p.expect(':')?;
            match key.as_str() {
                "descr" => descr = Some(p.string()?),
                "fortran_order" => fortran_order = Some(p.boolean()?),
                "shape" => shape = Some(p.tuple()?),
                other => return Err(format!("unknown key '{other}'")),
            }
            if !p.eat(',') {
                p.expect('}')?;
                break;
            }
        }
        Ok(NpyHeader {
            descr: descr.ok_or("no 'descr' (a structured or object dtype is not supported)")?,
            fortran_order: fortran_order.ok_or("no 'fortran_order'")?,
            shape: shape.ok_or("no 'shape'")?,
        })
    }
}

/// A cursor over a Python literal.
struct Literal<'a> {
    rest: &'a str,
}

impl Literal<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{c}' at `{}`", self.preview()))
        }
    }

    fn preview(&self) -> String {
        self.rest.chars().take(20).collect()
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let quote = match self.rest.chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(format!("expected a quoted string at `{}`", self.preview())),
        };
        let body = &self.rest[1..];
        let end = body
            .find(quote)
            .ok_or_else(|| "unterminated string".to_string())?;
        self.rest = &body[end + 1..];
        Ok(body[..end].to_string())
    }

    fn boolean(&mut self) -> Result<bool, String> {
        self.skip_space();
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.rest.strip_prefix(word) {
                self.rest = rest;
                return Ok(value);
            }
        }
        Err(format!("expected True or False at `{}`", self.preview()))
    }

    fn tuple(&mut self) -> Result<Vec<u64>, String> {
        self.expect('(')?;
        let mut dims = Vec::new();
        while !self.eat(')') {
            self.skip_space();
            let digits = self.rest.len() - self.rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let dim = self.rest[..digits]
                .parse::<u64>()
                .map_err(|_| format!("expected a dimension at `{}`", self.preview()))?;
            self.rest = &self.rest[digits..];
            dims.push(dim);
            if !self.eat(',') {
                self.expect(')')?;
                break;
            }
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_numpy_writes_is_read() {
        let header = NpyHeader::parse("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }    \n");
        assert_eq!(
            header,
            Ok(NpyHeader {
                descr: "<i8".into(),
                fortran_order: false,
                shape: vec![3, 4],
            })
        );
    }

    #[test]
    fn a_scalar_and_a_one_dimensional_shape_are_read() {
        let scalar = NpyHeader::parse("{'descr': '<f4', 'fortran_order': False, 'shape': ()}");
        assert_eq!(scalar.map(|h| h.shape), Ok(vec![]));
        let vector = NpyHeader::parse("{'descr': '|u1', 'fortran_order': True, 'shape': (7,), }");
        assert_eq!(vector.map(|h| h.shape), Ok(vec![7]));
    }

    #[test]
    fn a_structured_dtype_is_refused_with_a_reason() {
        let header = NpyHeader::parse("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }");
        assert!(header.is_err());
    }

    #[test]
    fn descr_names_every_supported_dtype_and_the_byte_order() {
        assert_eq!(descr("<i8"), Some((DType::I64, false)));
        assert_eq!(descr(">f4"), Some((DType::F32, true)));
        assert_eq!(descr("|b1"), Some((DType::Bool, false)));
        assert_eq!(descr(">u1"), Some((DType::U8, false)));
        assert_eq!(descr("|O"), None);
        assert_eq!(descr("<c8"), None);
        assert_eq!(descr(""), None);
    }

    #[test]
    fn a_fortran_array_is_rewritten_in_c_order() {
        // [[0, 1, 2], [3, 4, 5]] stored column by column: 0 3 1 4 2 5.
        let fortran = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(fortran_to_c(&fortran, &[2, 3], 1), vec![0, 1, 2, 3, 4, 5]);
        // A 2x2x2 array: C index (i, j, k) holds 100i + 10j + k.
        let mut fortran3 = Vec::new();
        for k in 0..2u8 {
            for j in 0..2u8 {
                for i in 0..2u8 {
                    fortran3.push(100 * i + 10 * j + k);
                }
            }
        }
        assert_eq!(
            fortran_to_c(&fortran3, &[2, 2, 2], 1),
            vec![0, 1, 10, 11, 100, 101, 110, 111]
        );
    }
}
