//! The NumPy `.npz` reader: a zip of `.npy` arrays (`np.savez`, `np.savez_compressed`), plus an
//! optional `params.json` member with the snapshot's parameters.
//!
//! The members' declared sizes are checked against [`Limits::max_inflated`] before anything is
//! inflated, and each member's inflation is cut one byte past its declared size, so a zip bomb
//! costs nothing. Reading ([`read`]) inflates each array once, straight into one buffer sized from
//! the declared sizes; the `.npy` header is parsed from the stream, never copied with the body.
//! Big-endian arrays are swapped in place, and only a Fortran-ordered array whose layout differs
//! from C order goes through a scratch buffer to be rewritten in C order, so checks see one
//! layout. Summarizing ([`summarize`]) validates the same way but inflates the bodies into a
//! counter: its memory is one `.npy` header, whatever the members inflate to. The zip reader
//! keeps a few hundred bytes per member of the archive's directory, so the members are counted
//! (by their directory signature) before it reads the directory.

use std::collections::BTreeMap;
use std::io::{self, Cursor, Read};
use std::ops::Range;

use zip::ZipArchive;

use super::params::parse_params;
use super::snapshot::{
    DType, Format, Limits, Snapshot, SnapshotError, SnapshotSummary, TensorInfo, element_count,
    may_need_reordering,
};

/// The first bytes of a zip file (a local file header, or the end record of an empty archive).
pub fn looks_like(data: &[u8]) -> bool {
    data.starts_with(b"PK\x03\x04") || data.starts_with(b"PK\x05\x06")
}

/// Members whose JSON object holds the snapshot's parameters.
const PARAM_MEMBERS: &[&str] = &["params.json", "metadata.json"];

/// Reads and validates an `.npz` file: its arrays inflated once, into one buffer.
pub fn read(data: &[u8], limits: &Limits) -> Result<Snapshot, SnapshotError> {
    let mut buffer = Buffer { data: Vec::new() };
    let (tensors, params) = walk(data, limits, &mut buffer)?;
    Ok(Snapshot::from_parts(Format::Npz, buffer.data, tensors, params))
}

/// Validates an `.npz` file as [`read`] does, its arrays inflated into a counter: what it holds.
pub fn summarize(data: &[u8], limits: &Limits) -> Result<SnapshotSummary, SnapshotError> {
    let (tensors, params) = walk(data, limits, &mut Counter { bytes: 0 })?;
    Ok(SnapshotSummary::of(Format::Npz, &tensors, params))
}

type Parts = (Vec<TensorInfo>, BTreeMap<String, String>);

/// Where the bodies of the arrays go.
trait Bodies {
    /// Room for every body, `bytes` at most together; called once, before the first is taken.
    fn reserve(&mut self, bytes: usize);

    /// Takes the `len` bytes of the body of `array` from `member`: their range in the snapshot's
    /// data. An error of kind `UnexpectedEof` when the member ends first.
    fn take(&mut self, member: &mut impl Read, len: usize, array: &ArrayHeader) -> io::Result<Range<usize>>;
}

/// The arrays' bytes, in little-endian C order, one after the other in one buffer.
struct Buffer {
    data: Vec<u8>,
}

impl Bodies for Buffer {
    fn reserve(&mut self, bytes: usize) {
        self.data.reserve_exact(bytes);
    }

    fn take(&mut self, member: &mut impl Read, len: usize, array: &ArrayHeader) -> io::Result<Range<usize>> {
        let start = self.data.len();
        let size = array.dtype.size();
        if array.fortran_order && may_need_reordering(&array.shape) {
            let mut column_major = Vec::with_capacity(len);
            append_exactly(member, len, &mut column_major)?;
            if array.big_endian {
                swap_bytes(&mut column_major, size);
            }
            fortran_to_c(&column_major, &array.shape, size, &mut self.data);
        } else {
            append_exactly(member, len, &mut self.data)?;
            if array.big_endian {
                swap_bytes(&mut self.data[start..], size);
            }
        }
        Ok(start..self.data.len())
    }
}

/// Counts the arrays' bytes and keeps none; the ranges are where [`Buffer`] would put them.
struct Counter {
    bytes: usize,
}

impl Bodies for Counter {
    fn reserve(&mut self, _bytes: usize) {}

    fn take(&mut self, member: &mut impl Read, len: usize, _array: &ArrayHeader) -> io::Result<Range<usize>> {
        let counted = io::copy(&mut member.take(len as u64), &mut io::sink())?;
        if counted < len as u64 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let start = self.bytes;
        // The declared sizes, whose sum is within `max_inflated`, bound the sum of the lengths.
        self.bytes = self.bytes.saturating_add(len);
        Ok(start..self.bytes)
    }
}

/// Appends exactly `len` bytes of `reader` to `out`, into its spare capacity when it has room (no
/// zero-filling, no regrowth).
fn append_exactly(reader: &mut impl Read, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let read = reader.take(len as u64).read_to_end(out)?;
    if read < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

fn swap_bytes(bytes: &mut [u8], size: usize) {
    for element in bytes.chunks_exact_mut(size) {
        element.reverse();
    }
}

/// The signature of a zip central directory header: one starts each member the zip reader keeps.
const CENTRAL_HEADER: &[u8] = b"PK\x01\x02";

/// Most members an `.npz` may have: its arrays, a directory entry beside each, its parameters.
fn max_members(limits: &Limits) -> usize {
    limits.max_tensors.saturating_mul(2) + PARAM_MEMBERS.len()
}

/// Reads the archive's members in order: the `.npy` bodies into `bodies`, the parameters.
fn walk(data: &[u8], limits: &Limits, bodies: &mut impl Bodies) -> Result<Parts, SnapshotError> {
    // An upper bound on the members the zip reader would decode (a stray signature in the data
    // only makes it larger): a directory of millions of empty members, a few hundred bytes of
    // memory each, is refused before the reader sees it.
    let max = max_members(limits);
    let members = memchr::memmem::find_iter(data, CENTRAL_HEADER)
        .take(max + 1)
        .count();
    if members > max {
        return Err(SnapshotError::TooLarge {
            what: "zip member count (central directory headers)".into(),
            actual: members as u64,
            limit: max as u64,
        });
    }
    let mut archive = ZipArchive::new(Cursor::new(data))
        .map_err(|e| SnapshotError::Header(format!("not a readable zip archive: {e}")))?;
    bodies.reserve(declared_array_bytes(&archive, limits)?);
    let mut tensors = Vec::new();
    let mut params = BTreeMap::new();
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
        if PARAM_MEMBERS.contains(&member_name.as_str()) {
            if size > limits.max_header as u64 {
                return Err(SnapshotError::TooLarge {
                    what: format!("parameter JSON {member_name}"),
                    actual: size,
                    limit: limits.max_header as u64,
                });
            }
            let bytes = read_member(&mut member, &member_name, size)?;
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
        let array = npy_header(name, &member_name, &mut member, limits)?;
        let Some(body) = size.checked_sub(array.header_bytes) else {
            return Err(inflates_past(&member_name, size));
        };
        let expected = array.elements * array.dtype.size() as u64;
        if body != expected {
            return Err(SnapshotError::Tensor {
                name: name.to_string(),
                problem: format!(
                    "{body} bytes of data for dtype {} and shape {:?} (expected {expected})",
                    array.descr, array.shape
                ),
            });
        }
        let len = usize::try_from(body).map_err(|_| SnapshotError::TooLarge {
            what: format!("tensor {name} bytes"),
            actual: body,
            limit: usize::MAX as u64,
        })?;
        let range = bodies
            .take(&mut member, len, &array)
            .map_err(|e| unreadable(&member_name, size, &e))?;
        expect_end(&mut member, &member_name, size)?;
        tensors.push(TensorInfo {
            name: name.to_string(),
            dtype: array.dtype,
            shape: array.shape,
            range,
        });
    }
    Ok((tensors, params))
}

/// The members' declared sizes, all together within `limits.max_inflated` (else the member that
/// crosses it is named): the room the `.npy` members need. Nothing is inflated.
fn declared_array_bytes(
    archive: &ZipArchive<Cursor<&[u8]>>,
    limits: &Limits,
) -> Result<usize, SnapshotError> {
    let (mut inflated, mut arrays) = (0u64, 0u64);
    for index in 0..archive.len() {
        let member = archive
            .by_index_data(index)
            .map_err(|e| SnapshotError::Header(format!("zip member {index}: {e}")))?;
        if member.is_dir() {
            continue;
        }
        let name = member
            .name()
            .map_err(|e| SnapshotError::Header(format!("zip member {index}: {e}")))?;
        inflated = inflated.saturating_add(member.size());
        if inflated > limits.max_inflated {
            return Err(SnapshotError::Inflated {
                member: name.into_owned(),
                inflated,
                limit: limits.max_inflated,
            });
        }
        if name.ends_with(".npy") {
            arrays += member.size();
        }
    }
    usize::try_from(arrays).map_err(|_| SnapshotError::TooLarge {
        what: "inflated npz bytes".into(),
        actual: arrays,
        limit: usize::MAX as u64,
    })
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

fn inflates_past(name: &str, size: u64) -> SnapshotError {
    SnapshotError::Header(format!(
        "zip member {name} inflates to more than its declared {size} bytes"
    ))
}

fn unreadable(name: &str, size: u64, e: &io::Error) -> SnapshotError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        SnapshotError::Header(format!(
            "zip member {name} inflates to fewer than its declared {size} bytes"
        ))
    } else {
        SnapshotError::Header(format!("zip member {name} cannot be read: {e}"))
    }
}

/// A small member (the parameters), whole.
fn read_member(member: &mut impl Read, name: &str, size: u64) -> Result<Vec<u8>, SnapshotError> {
    let mut bytes = Vec::new();
    // One byte past the declared size tells a member that lies about it.
    member
        .take(size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(name, size, &e))?;
    match (bytes.len() as u64).cmp(&size) {
        std::cmp::Ordering::Equal => Ok(bytes),
        std::cmp::Ordering::Greater => Err(inflates_past(name, size)),
        std::cmp::Ordering::Less => Err(unreadable(name, size, &io::ErrorKind::UnexpectedEof.into())),
    }
}

/// Checks that `member` ends at its declared size (one byte more: it lies about it); reaching its
/// end also has the zip reader check its CRC.
fn expect_end(member: &mut impl Read, name: &str, size: u64) -> Result<(), SnapshotError> {
    match fill(member, &mut [0u8; 1]) {
        Ok(0) => Ok(()),
        Ok(_) => Err(inflates_past(name, size)),
        Err(e) => Err(unreadable(name, size, &e)),
    }
}

/// Reads until `buf` is full or the reader ends: how many bytes it got.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What an `.npy` header says of its array.
struct ArrayHeader {
    /// The numpy dtype as written (`<i8`), for messages.
    descr: String,
    dtype: DType,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<u64>,
    elements: u64,
    /// The bytes before the body: magic, version, header length and header.
    header_bytes: u64,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Whether `data` is a bare `.npy` file (refused: its one array has no name).
pub fn is_npy(data: &[u8]) -> bool {
    data.starts_with(NPY_MAGIC)
}

/// Reads the `.npy` header at the start of `member` (the tensor `name`), leaving its body unread.
fn npy_header(
    name: &str,
    member_name: &str,
    member: &mut impl Read,
    limits: &Limits,
) -> Result<ArrayHeader, SnapshotError> {
    let fail = |problem: String| SnapshotError::Tensor {
        name: name.to_string(),
        problem,
    };
    let read_error =
        |e: io::Error| SnapshotError::Header(format!("zip member {member_name} cannot be read: {e}"));
    let mut preamble = [0u8; 12];
    let got = fill(member, &mut preamble[..10]).map_err(read_error)?;
    if got < 10 || !preamble.starts_with(NPY_MAGIC) {
        return Err(fail("not an .npy array (no \\x93NUMPY magic)".into()));
    }
    let (header_len, header_start) = match preamble[6] {
        1 => (u16::from_le_bytes([preamble[8], preamble[9]]) as usize, 10),
        2 | 3 => {
            if fill(member, &mut preamble[10..12]).map_err(read_error)? < 2 {
                return Err(fail("truncated .npy header length".into()));
            }
            let len = u32::from_le_bytes([preamble[8], preamble[9], preamble[10], preamble[11]]);
            (len as usize, 12)
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
    let mut header = vec![0u8; header_len];
    if fill(member, &mut header).map_err(read_error)? < header_len {
        return Err(fail("the .npy header runs past the member".into()));
    }
    let header =
        std::str::from_utf8(&header).map_err(|_| fail("the .npy header is not UTF-8 text".into()))?;
    let header = NpyHeader::parse(header).map_err(|e| fail(format!(".npy header: {e}")))?;
    let (dtype, big_endian) = descr(&header.descr).ok_or_else(|| {
        fail(format!(
            "numpy dtype '{}' is not supported (bool, int8-64, uint8-64, float16/32/64 are)",
            header.descr
        ))
    })?;
    let elements = element_count(name, &header.shape, limits)?;
    Ok(ArrayHeader {
        descr: header.descr,
        dtype,
        big_endian,
        fortran_order: header.fortran_order,
        shape: header.shape,
        elements,
        header_bytes: (header_start + header_len) as u64,
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

/// Appends a column-major (Fortran) array to `out` in row-major (C) order.
fn fortran_to_c(bytes: &[u8], shape: &[u64], size: usize, out: &mut Vec<u8>) {
    // Element strides of the Fortran layout: the first dimension varies fastest. (Products of
    // leading dimensions: within the element count whenever there is an element to move.)
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1u64;
    for &dim in shape {
        strides.push(stride);
        stride = stride.saturating_mul(dim);
    }
    out.reserve(bytes.len());
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
    use std::io::Write;

    use zip::write::SimpleFileOptions;
    use zip::{CompressionMethod, ZipWriter};

    use super::*;

    /// An `.npy` member as numpy writes it (version 1, header padded to 64 bytes).
    fn npy(descr: &str, fortran: bool, shape: &[u64], data: &[u8]) -> Vec<u8> {
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let fortran = if fortran { "True" } else { "False" };
        let mut header = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn npz(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        for (name, bytes) in members {
            zip.start_file(*name, options).unwrap_or_else(|e| panic!("{e}"));
            zip.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
        }
        zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
    }

    fn le<const N: usize>(values: &[[u8; N]]) -> Vec<u8> {
        values.concat()
    }

    /// Several dtypes, a big-endian array, a Fortran-ordered one and parameters.
    fn mixed_npz() -> Vec<u8> {
        let labels = le(&[0i64, 1, 2, 1].map(i64::to_le_bytes));
        let big = le(&[1i32, -2, 3].map(i32::to_be_bytes));
        // [[0, 1], [2, 3], [4, 5]] stored column by column.
        let fortran = le(&[0i16, 2, 4, 1, 3, 5].map(i16::to_le_bytes));
        npz(&[
            ("labels.npy", npy("<i8", false, &[2, 2], &labels)),
            ("big.npy", npy(">i4", false, &[3], &big)),
            ("f.npy", npy("<i2", true, &[3, 2], &fortran)),
            ("mask.npy", npy("|b1", false, &[2], &[1, 0])),
            (
                "params.json",
                br#"{"num_classes": 2, "role.labels": "labels"}"#.to_vec(),
            ),
        ])
    }

    fn values_i16(snapshot: &Snapshot, name: &str) -> Vec<i16> {
        let bytes = snapshot.tensor(name).map(|t| t.bytes).unwrap_or_default();
        bytes
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect()
    }

    #[test]
    fn a_summary_equals_the_one_the_full_reader_gives() {
        let file = mixed_npz();
        let limits = Limits::default();
        let read = read(&file, &limits).map(|s| s.summary());
        let summarized = summarize(&file, &limits);
        assert!(read.is_ok(), "{read:?}");
        assert_eq!(summarized, read);
        let summary = summarized.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.data_bytes, 32 + 12 + 12 + 2);
        assert_eq!(summary.params.get("num_classes").map(String::as_str), Some("2"));
    }

    #[test]
    fn a_member_over_the_inflated_limit_is_refused_before_anything_is_inflated_naming_it_and_the_limit() {
        // 64 MiB of zeros after 1 KiB of labels: the limit is crossed by the second member.
        let zeros = vec![0u8; 64 << 20];
        let file = npz(&[
            ("labels.npy", npy("|u1", false, &[1024], &[0; 1024])),
            ("zeros.npy", npy("|u1", false, &[zeros.len() as u64], &zeros)),
        ]);
        let limits = Limits {
            max_inflated: 16 << 20,
            ..Limits::default()
        };
        let expected = |e: &SnapshotError| matches!(e, SnapshotError::Inflated { member, limit, .. } if member == "zeros.npy" && *limit == 16 << 20);
        let summarized = summarize(&file, &limits).err();
        assert!(summarized.as_ref().is_some_and(expected), "{summarized:?}");
        let message = summarized.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.starts_with("zip member zeros.npy inflates the .npz to 67110",)
                && message.ends_with("over the limit of 16777216 inflated bytes"),
            "{message}"
        );
        let read = read(&file, &limits).err();
        assert!(read.as_ref().is_some_and(expected), "{read:?}");
    }

    #[test]
    fn a_member_that_inflates_past_its_declared_size_is_cut_one_byte_later() {
        // One int64, then 1 MiB more than the member's sizes will say.
        let member = npy("<i8", false, &[1], &[0u8; 8 + (1 << 20)]);
        let declared = (member.len() - (1 << 20)) as u32;
        let mut file = npz(&[("x.npy", member)]);
        // The uncompressed size of the local header (offset 22) and of the central one (24).
        file[22..26].copy_from_slice(&declared.to_le_bytes());
        let central =
            memchr::memmem::find(&file, b"PK\x01\x02").unwrap_or_else(|| panic!("no central header"));
        file[central + 24..central + 28].copy_from_slice(&declared.to_le_bytes());
        let limits = Limits::default();
        for result in [
            summarize(&file, &limits).map(|_| ()),
            read(&file, &limits).map(|_| ()),
        ] {
            // Said by this reader's probe past the end, or by the zip reader's own check.
            let message = result.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                message.starts_with("malformed header: zip member x.npy ")
                    && (message.ends_with(&format!("inflates to more than its declared {declared} bytes"))
                        || message.ends_with("File is larger than its declared uncompressed size")),
                "{message}"
            );
        }
    }

    #[test]
    fn an_archive_with_more_members_than_a_snapshot_may_have_is_refused_before_its_directory_is_read() {
        let limits = Limits {
            max_tensors: 2,
            ..Limits::default()
        };
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        for i in 0..=max_members(&limits) {
            zip.add_directory(format!("d{i}/"), SimpleFileOptions::default())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let file = zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        let expected = SnapshotError::TooLarge {
            what: "zip member count (central directory headers)".into(),
            actual: 7,
            limit: 6,
        };
        assert_eq!(summarize(&file, &limits).err(), Some(expected.clone()));
        assert_eq!(read(&file, &limits).err(), Some(expected));
    }

    #[test]
    fn fortran_order_is_rewritten_in_c_order_only_where_the_layouts_differ() {
        let snapshot = read(&mixed_npz(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values_i16(&snapshot, "f"), [0, 1, 2, 3, 4, 5]);
        // A (1, 3) or (3, 1) array is the same in both orders: read as it is.
        let row = le(&[7i16, 8, 9].map(i16::to_le_bytes));
        let file = npz(&[
            ("row.npy", npy("<i2", true, &[1, 3], &row)),
            ("column.npy", npy("<i2", true, &[3, 1], &row)),
        ]);
        let snapshot = read(&file, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values_i16(&snapshot, "row"), [7, 8, 9]);
        assert_eq!(values_i16(&snapshot, "column"), [7, 8, 9]);
        assert!(!may_need_reordering(&[1, 3]) && !may_need_reordering(&[3, 1, 1]));
        assert!(may_need_reordering(&[3, 2]));
    }

    #[test]
    fn the_arrays_are_inflated_into_one_buffer_sized_from_the_declared_sizes_never_regrown() {
        let file = mixed_npz();
        let mut buffer = Buffer { data: Vec::new() };
        let (tensors, _) = walk(&file, &Limits::default(), &mut buffer).unwrap_or_else(|e| panic!("{e}"));
        let archive = ZipArchive::new(Cursor::new(file.as_slice())).unwrap_or_else(|e| panic!("{e}"));
        let declared = declared_array_bytes(&archive, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        // The arrays' bodies and, unused, their four `.npy` headers (padded to 128 bytes).
        assert_eq!(buffer.data.len(), 32 + 12 + 12 + 2);
        assert_eq!(declared, buffer.data.len() + 4 * 128);
        assert_eq!(buffer.data.capacity(), declared, "the buffer was never regrown");
        let ends: Vec<usize> = tensors.iter().map(|t| t.range.end).collect();
        assert_eq!(ends, [32, 44, 56, 58]);
    }

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
        let mut c = Vec::new();
        fortran_to_c(&fortran, &[2, 3], 1, &mut c);
        assert_eq!(c, vec![0, 1, 2, 3, 4, 5]);
        // A 2x2x2 array: C index (i, j, k) holds 100i + 10j + k.
        let mut fortran3 = Vec::new();
        for k in 0..2u8 {
            for j in 0..2u8 {
                for i in 0..2u8 {
                    fortran3.push(100 * i + 10 * j + k);
                }
            }
        }
        let mut c3 = vec![9];
        fortran_to_c(&fortran3, &[2, 2, 2], 1, &mut c3);
        assert_eq!(
            c3,
            vec![9, 0, 1, 10, 11, 100, 101, 110, 111],
            "appended after what was there"
        );
    }
}
