//! Reading snapshots: safetensors files written by the safetensors crate, `.npz` files written the
//! way numpy writes them, and every malformed file refused with a reason instead of a panic.

use std::io::{Cursor, Write};

use faultline::replay::snapshot::{Format, SnapshotSummary};
use faultline::replay::{DType, Limits, Snapshot, SnapshotError};
use proptest::prelude::*;
use safetensors::tensor::{Dtype, TensorView};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

fn read(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    Snapshot::from_bytes(bytes.to_vec(), &Limits::default())
}

/// What the upload path keeps of a file (nothing materialized), next to what reading it gives.
fn summarized_and_read(
    bytes: &[u8],
) -> (
    Result<SnapshotSummary, SnapshotError>,
    Result<SnapshotSummary, SnapshotError>,
) {
    (
        Snapshot::summarize(bytes, &Limits::default()),
        read(bytes).map(|s| s.summary()),
    )
}

fn ok(bytes: &[u8]) -> Snapshot {
    read(bytes).unwrap_or_else(|e| panic!("refused: {e}"))
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i64_values(snapshot: &Snapshot, name: &str) -> Vec<i64> {
    let Some(t) = snapshot.tensor(name) else {
        panic!("no tensor {name}");
    };
    t.bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_else(|e| panic!("{e}"))))
        .collect()
}

/// A safetensors file made by the safetensors crate.
fn safetensors_file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)], meta: &[(&str, &str)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = TensorView::new(*dtype, shape.clone(), bytes).unwrap_or_else(|e| panic!("{e}"));
            (name.to_string(), view)
        })
        .collect();
    let meta: std::collections::HashMap<String, String> =
        meta.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    safetensors::serialize(views, Some(meta)).unwrap_or_else(|e| panic!("{e}"))
}

/// A safetensors file with a hand-written header.
fn raw_safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}

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

fn npz(members: &[(&str, Vec<u8>)], compression: CompressionMethod) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(compression);
    for (name, bytes) in members {
        zip.start_file(*name, options).unwrap_or_else(|e| panic!("{e}"));
        zip.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    zip.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

#[test]
fn a_safetensors_file_gives_its_tensors_in_file_order_and_its_metadata_as_parameters() {
    let file = safetensors_file(
        &[
            ("labels", Dtype::I64, vec![4], i64_bytes(&[0, 1, 2, 1])),
            ("logits", Dtype::F32, vec![2, 2], vec![0; 16]),
        ],
        &[("num_classes", "2"), ("role.labels", "labels")],
    );
    let snapshot = ok(&file);
    assert_eq!(snapshot.format(), Format::Safetensors);
    let names: Vec<&str> = snapshot.tensors().map(|t| t.name).collect();
    assert_eq!(names, ["labels", "logits"]);
    assert_eq!(i64_values(&snapshot, "labels"), [0, 1, 2, 1]);
    let logits = snapshot.tensor("logits").unwrap_or_else(|| panic!("no logits"));
    assert_eq!((logits.dtype, logits.shape), (DType::F32, &[2u64, 2][..]));
    assert_eq!(snapshot.param("num_classes"), Some("2"));
    assert_eq!(snapshot.data_bytes(), 32 + 16);
}

#[test]
fn every_safetensors_dtype_faultline_checks_is_read() {
    let table = [
        (Dtype::BOOL, DType::Bool),
        (Dtype::U8, DType::U8),
        (Dtype::I8, DType::I8),
        (Dtype::I16, DType::I16),
        (Dtype::U16, DType::U16),
        (Dtype::I32, DType::I32),
        (Dtype::U32, DType::U32),
        (Dtype::I64, DType::I64),
        (Dtype::U64, DType::U64),
        (Dtype::F16, DType::F16),
        (Dtype::BF16, DType::BF16),
        (Dtype::F32, DType::F32),
        (Dtype::F64, DType::F64),
    ];
    for (theirs, ours) in table {
        let file = safetensors_file(&[("t", theirs, vec![3], vec![1; 3 * ours.size()])], &[]);
        let snapshot = ok(&file);
        let t = snapshot.tensor("t").unwrap_or_else(|| panic!("no tensor"));
        assert_eq!((t.dtype, t.elements()), (ours, 3), "{theirs:?}");
    }
}

#[test]
fn a_scalar_and_an_empty_tensor_are_read() {
    let file = safetensors_file(
        &[
            ("n", Dtype::I64, vec![], i64_bytes(&[7])),
            ("empty", Dtype::F32, vec![0, 3], vec![]),
        ],
        &[],
    );
    let snapshot = ok(&file);
    assert_eq!(i64_values(&snapshot, "n"), [7]);
    assert_eq!(snapshot.tensor("empty").map(|t| t.elements()), Some(0));
}

#[test]
fn malformed_safetensors_files_are_refused_with_the_reason() {
    let labels = r#""labels":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}"#;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty file", vec![], "not a safetensors or .npz file"),
        (
            "text",
            b"labels = [0, 1]\n".to_vec(),
            "not a safetensors or .npz file",
        ),
        (
            "header past the end",
            [&200u64.to_le_bytes()[..], b"{}"].concat(),
            "only 2",
        ),
        (
            "header over the limit",
            [&(2u64 << 20).to_le_bytes()[..], b"{}"].concat(),
            "header is 2097152, over the limit",
        ),
        (
            "header not JSON",
            raw_safetensors("{labels}", &[]),
            "JSON header is not valid",
        ),
        (
            "unknown dtype",
            raw_safetensors(
                r#"{"x":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}"#,
                &[0],
            ),
            "dtype F8_E4M3 is not supported",
        ),
        (
            "missing field",
            raw_safetensors(r#"{"x":{"dtype":"I64","shape":[1]}}"#, &[0; 8]),
            "data_offsets",
        ),
        (
            "offsets past the data",
            raw_safetensors(&format!("{{{labels}}}"), &[0; 8]),
            "outside the 8 bytes",
        ),
        (
            "offsets reversed",
            raw_safetensors(
                r#"{"x":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}"#,
                &[0; 8],
            ),
            "outside",
        ),
        (
            "bytes disagree with the shape",
            raw_safetensors(
                r#"{"x":{"dtype":"I64","shape":[3],"data_offsets":[0,16]}}"#,
                &[0; 16],
            ),
            "16 bytes for dtype I64 and shape [3] (expected 24)",
        ),
        (
            "overlap",
            raw_safetensors(
                &format!(r#"{{{labels},"y":{{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}}}"#),
                &[0; 16],
            ),
            "overlap",
        ),
        (
            "a name twice",
            raw_safetensors(&format!("{{{labels},{labels}}}"), &[0; 16]),
            "named twice",
        ),
        (
            "nested metadata",
            raw_safetensors(r#"{"__metadata__":{"shape":[2]}}"#, &[]),
            "`shape` is an array",
        ),
        (
            "shape overflow",
            raw_safetensors(
                r#"{"x":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}"#,
                &[],
            ),
            "over the limit",
        ),
    ];
    for (what, file, expected) in cases {
        let message = match read(&file) {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(message.contains(expected), "{what}: {message}");
    }
}

#[test]
fn the_tensor_count_element_count_and_file_size_limits_hold() {
    let file = safetensors_file(
        &[
            ("a", Dtype::U8, vec![4], vec![0; 4]),
            ("b", Dtype::U8, vec![4], vec![0; 4]),
        ],
        &[],
    );
    let tight = |limits: Limits| match Snapshot::from_bytes(file.clone(), &limits) {
        Ok(_) => panic!("accepted under {limits:?}"),
        Err(e) => e.to_string(),
    };
    let base = Limits::default();
    assert!(
        tight(Limits {
            max_tensors: 1,
            ..base
        })
        .contains("tensor count")
    );
    assert!(
        tight(Limits {
            max_elements: 3,
            ..base
        })
        .contains("tensor a elements")
    );
    assert!(
        tight(Limits {
            max_bytes: 16,
            ..base
        })
        .contains("snapshot file")
    );
}

#[test]
fn json_parameters_add_to_and_override_the_metadata() {
    let file = safetensors_file(
        &[("y", Dtype::I64, vec![1], i64_bytes(&[3]))],
        &[("num_classes", "2"), ("note", "kept")],
    );
    let snapshot = ok(&file)
        .with_params(br#"{"num_classes": 4, "role.labels": "y"}"#, &Limits::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snapshot.param("num_classes"), Some("4"));
    assert_eq!(snapshot.param("note"), Some("kept"));
    assert_eq!(snapshot.by_role("labels").map(|t| t.name), Some("y"));
}

#[test]
fn an_npz_gives_its_arrays_compressed_or_not_and_its_params_json() {
    for compression in [CompressionMethod::Stored, CompressionMethod::Deflated] {
        let file = npz(
            &[
                ("labels.npy", npy("<i8", false, &[3], &i64_bytes(&[0, 5, 1]))),
                ("mask.npy", npy("|b1", false, &[3], &[1, 1, 0])),
                ("params.json", br#"{"num_classes": 5}"#.to_vec()),
            ],
            compression,
        );
        let snapshot = ok(&file);
        assert_eq!(snapshot.format(), Format::Npz);
        assert_eq!(i64_values(&snapshot, "labels"), [0, 5, 1]);
        assert_eq!(snapshot.tensor("mask").map(|t| t.dtype), Some(DType::Bool));
        assert_eq!(snapshot.param("num_classes"), Some("5"));
    }
}

#[test]
fn big_endian_and_fortran_ordered_arrays_are_read_as_little_endian_c_order() {
    let big: Vec<u8> = [1i32, -2, 3].iter().flat_map(|v| v.to_be_bytes()).collect();
    // [[0, 1, 2], [3, 4, 5]] stored column by column.
    let fortran: Vec<u8> = [0i16, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let file = npz(
        &[
            ("big.npy", npy(">i4", false, &[3], &big)),
            ("f.npy", npy("<i2", true, &[2, 3], &fortran)),
        ],
        CompressionMethod::Deflated,
    );
    let snapshot = ok(&file);
    let big = snapshot.tensor("big").unwrap_or_else(|| panic!("no big"));
    let values: Vec<i32> = big
        .bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!((big.dtype, values), (DType::I32, vec![1, -2, 3]));
    let f = snapshot.tensor("f").unwrap_or_else(|| panic!("no f"));
    let values: Vec<i16> = f
        .bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(values, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn malformed_npz_files_are_refused_with_the_reason() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "object dtype",
            npz(
                &[("x.npy", npy("|O", false, &[1], &[0; 8]))],
                CompressionMethod::Stored,
            ),
            "numpy dtype '|O' is not supported",
        ),
        (
            "complex dtype",
            npz(
                &[("x.npy", npy("<c8", false, &[1], &[0; 8]))],
                CompressionMethod::Stored,
            ),
            "'<c8' is not supported",
        ),
        (
            "short data",
            npz(
                &[("x.npy", npy("<i8", false, &[2], &[0; 8]))],
                CompressionMethod::Stored,
            ),
            "8 bytes of data for dtype <i8 and shape [2] (expected 16)",
        ),
        (
            "not npy",
            npz(&[("x.npy", b"hello".to_vec())], CompressionMethod::Stored),
            "not an .npy array",
        ),
        (
            "a pickle",
            npz(&[("archive/data.pkl", vec![0x80, 2])], CompressionMethod::Stored),
            "torch.save",
        ),
        (
            "another member",
            npz(&[("notes.txt", b"hi".to_vec())], CompressionMethod::Stored),
            "neither an .npy array nor params.json",
        ),
        (
            "bad params",
            npz(&[("params.json", b"[1]".to_vec())], CompressionMethod::Stored),
            "expected a JSON object",
        ),
        (
            "a bare npy",
            npy("<i8", false, &[1], &[0; 8]),
            "bare .npy array has no tensor name",
        ),
        (
            "a truncated zip",
            b"PK\x03\x04\x14\x00".to_vec(),
            "not a readable zip archive",
        ),
    ];
    for (what, file, expected) in cases {
        let message = match read(&file) {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(message.contains(expected), "{what}: {message}");
    }
}

#[test]
fn an_npz_that_inflates_past_the_size_limit_is_refused_before_inflating() {
    // 64 MiB of zeros deflate to a few kilobytes: a small zip bomb.
    let zeros = vec![0u8; 64 << 20];
    let file = npz(
        &[("x.npy", npy("|u1", false, &[zeros.len() as u64], &zeros))],
        CompressionMethod::Deflated,
    );
    assert!(file.len() < 1 << 20, "the bomb is {} bytes", file.len());
    let limits = Limits {
        max_inflated: 16 << 20,
        ..Limits::default()
    };
    let message = match Snapshot::from_bytes(file, &limits) {
        Ok(_) => panic!("the bomb was inflated"),
        Err(e) => e.to_string(),
    };
    assert!(
        message.contains("zip member x.npy inflates the .npz to")
            && message.contains("over the limit of 16777216 inflated bytes"),
        "{message}"
    );
}

#[test]
fn tensor_names_are_kept_as_labels_even_when_they_look_like_paths() {
    let file = npz(
        &[("../../etc/passwd.npy", npy("<i8", false, &[1], &i64_bytes(&[1])))],
        CompressionMethod::Stored,
    );
    let snapshot = ok(&file);
    assert_eq!(i64_values(&snapshot, "../../etc/passwd"), [1]);
}

fn valid_safetensors() -> Vec<u8> {
    safetensors_file(
        &[
            ("labels", Dtype::I64, vec![4], i64_bytes(&[0, 1, 2, 1])),
            ("logits", Dtype::F16, vec![2, 2], vec![0; 8]),
        ],
        &[("num_classes", "2")],
    )
}

fn valid_npz() -> Vec<u8> {
    npz(
        &[
            (
                "labels.npy",
                npy("<i8", false, &[2, 2], &i64_bytes(&[0, 1, 2, 1])),
            ),
            ("params.json", br#"{"num_classes": 2}"#.to_vec()),
        ],
        CompressionMethod::Deflated,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_are_read_or_refused_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let (summarized, read) = summarized_and_read(&bytes);
        prop_assert_eq!(summarized, read);
    }

    #[test]
    fn a_corrupted_safetensors_file_is_read_or_refused(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut file = valid_safetensors();
        for (at, byte) in flips {
            let i = at.index(file.len());
            file[i] = byte;
        }
        let keep = cut.index(file.len() + 1);
        let (summarized, read_cut) = summarized_and_read(&file[..keep]);
        prop_assert_eq!(summarized, read_cut);
        let (summarized, read_whole) = summarized_and_read(&file);
        prop_assert_eq!(summarized, read_whole);
        if let Ok(snapshot) = read(&file) {
            for t in snapshot.tensors() {
                prop_assert_eq!(t.bytes.len() as u64, t.elements() * t.dtype.size() as u64);
            }
        }
    }

    #[test]
    fn a_corrupted_npz_file_is_read_or_refused(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut file = valid_npz();
        for (at, byte) in flips {
            let i = at.index(file.len());
            file[i] = byte;
        }
        let (summarized, read_whole) = summarized_and_read(&file);
        prop_assert_eq!(summarized, read_whole);
        if let Ok(snapshot) = read(&file) {
            for t in snapshot.tensors() {
                prop_assert_eq!(t.bytes.len() as u64, t.elements() * t.dtype.size() as u64);
            }
        }
    }
}

#[test]
fn a_summary_made_without_reading_the_tensors_is_the_one_reading_them_gives() {
    let big: Vec<u8> = [1i32, -2, 3].iter().flat_map(|v| v.to_be_bytes()).collect();
    let fortran: Vec<u8> = [0i16, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mixed = npz(
        &[
            ("big.npy", npy(">i4", false, &[3], &big)),
            ("f.npy", npy("<i2", true, &[2, 3], &fortran)),
            ("params.json", br#"{"num_classes": 2}"#.to_vec()),
        ],
        CompressionMethod::Deflated,
    );
    for file in [valid_safetensors(), valid_npz(), mixed] {
        let (summarized, read) = summarized_and_read(&file);
        assert!(read.is_ok(), "{read:?}");
        assert_eq!(summarized, read);
    }
}
