//! The checks on hand-made snapshots, on the CPU backend and a fake GPU.

use super::super::cpu::Cpu;
use super::super::snapshot::Format;
use super::*;

type Tensor = (String, DType, Vec<u64>, Vec<u8>);

fn ints(name: &str, dtype: DType, shape: &[u64], values: &[i64]) -> Tensor {
    let bytes = values
        .iter()
        .flat_map(|&v| match dtype {
            DType::I32 => (v as i32).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        })
        .collect();
    (name.into(), dtype, shape.to_vec(), bytes)
}

fn floats(name: &str, shape: &[u64], values: &[f32]) -> Tensor {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    (name.into(), DType::F32, shape.to_vec(), bytes)
}

fn zeros(name: &str, dtype: DType, shape: &[u64]) -> Tensor {
    let n: u64 = shape.iter().product();
    (
        name.into(),
        dtype,
        shape.to_vec(),
        vec![0; n as usize * dtype.size()],
    )
}

fn snapshot(tensors: Vec<Tensor>, params: &[(&str, &str)]) -> Snapshot {
    let params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Snapshot::from_tensors(Format::Safetensors, tensors, params)
        .unwrap_or_else(|e| panic!("bad test snapshot: {e}"))
}

fn spec(name: &str, params: &[(&str, &str)]) -> CheckSpec {
    CheckSpec {
        name: name.into(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn check(spec: &CheckSpec, snap: &Snapshot) -> CheckResult {
    run(spec, snap, &Cpu::new()).unwrap_or_else(|e| panic!("check failed: {e}"))
}

/// 512 labels in [0, 2) but 7 of them (from position 3) equal to 2.
fn binary_labels(bad: usize) -> Vec<i64> {
    let mut labels: Vec<i64> = (0..512).map(|i| i % 2).collect();
    for i in 0..bad {
        labels[3 + 10 * i] = 2;
    }
    labels
}

#[test]
fn labels_at_num_classes_confirm_the_cause() {
    let snap = snapshot(
        vec![ints("labels", DType::I64, &[512], &binary_labels(7))],
        &[("num_classes", "2")],
    );
    let r = check(&spec("target_bounds", &[("tensor", "labels")]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert_eq!(
        r.summary,
        "labels[3] = 2 >= num_classes = 2 (7 of 512 values out of range)"
    );
    assert_eq!((r.elements, r.offending), (512, 7));
    assert_eq!(r.max.as_deref(), Some("2"));
    assert_eq!(
        r.first_offenses[1],
        Offense {
            index: vec![13],
            value: "2".into()
        }
    );
    assert_eq!(r.params.get("num_classes").map(String::as_str), Some("2"));
    assert_eq!(r.params.get("ignore_index").map(String::as_str), Some("-100"));
    assert_eq!(r.tensor.as_deref(), Some("labels"));
    assert_eq!(r.backend, "cpu");
}

#[test]
fn labels_in_range_refute_the_cause() {
    let snap = snapshot(
        vec![ints("labels", DType::I64, &[512], &binary_labels(0))],
        &[("num_classes", "2")],
    );
    let r = check(&spec("target_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert_eq!(
        r.summary,
        "all 512 labels in [0, 2) or ignore_index -100; the assert comes from elsewhere"
    );
}

#[test]
fn a_negative_label_that_is_not_ignore_index_is_named_as_such() {
    let snap = snapshot(
        vec![ints("y", DType::I64, &[4], &[0, -100, -1, 1])],
        &[("role.labels", "y")],
    );
    let r = check(&spec("target_bounds", &[("num_classes", "2")]), &snap);
    assert_eq!(
        r.summary,
        "y[2] = -1 < 0 and not ignore_index -100 (1 of 4 values out of range)"
    );
}

#[test]
fn num_classes_comes_from_the_class_dim_of_the_logits() {
    let snap = snapshot(
        vec![
            zeros("logits", DType::F32, &[4, 3]),
            ints("labels", DType::I64, &[4], &[0, 1, 2, 3]),
        ],
        &[],
    );
    let r = check(&spec("target_bounds", &[("num_classes", "")]), &snap);
    assert_eq!(
        r.summary,
        "labels[3] = 3 >= logits.shape[1] = 3 (1 of 4 values out of range)"
    );
    assert_eq!(r.params.get("num_classes").map(String::as_str), Some("3"));
}

#[test]
fn lm_logits_give_their_last_dim_when_labels_match_the_rest() {
    let snap = snapshot(
        vec![
            zeros("logits", DType::F16, &[1, 2, 5]),
            ints("labels", DType::I64, &[1, 2], &[4, 5]),
        ],
        &[],
    );
    let r = check(&spec("target_bounds", &[]), &snap);
    assert_eq!(
        r.summary,
        "labels[0, 1] = 5 >= logits.shape[-1] = 5 (1 of 2 values out of range)"
    );
}

#[test]
fn without_num_classes_the_verdict_says_what_to_add() {
    let snap = snapshot(vec![ints("labels", DType::I64, &[3], &[0, 1, 7])], &[]);
    let r = check(&spec("target_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(
        r.summary
            .starts_with("no num_classes: add it to the snapshot metadata or pass --param num_classes=N"),
        "{}",
        r.summary
    );
    assert_eq!(r.max.as_deref(), Some("7"));
}

#[test]
fn float_labels_are_inconclusive_with_the_dtype_reason() {
    let snap = snapshot(vec![floats("labels", &[2], &[0.0, 5.0])], &[("num_classes", "2")]);
    let r = check(&spec("target_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(
        r.summary
            .starts_with("labels is float32: cross_entropy reads float targets"),
        "{}",
        r.summary
    );
}

fn token_ids(bad: &[(usize, i64)]) -> Vec<i64> {
    let mut ids: Vec<i64> = (0..4096).map(|i| i * 7 % 50257).collect();
    for &(at, v) in bad {
        ids[at] = v;
    }
    ids
}

#[test]
fn token_ids_past_the_vocabulary_confirm_the_cause() {
    let ids = token_ids(&[(17, 50257), (100, 50260), (2100, 50258)]);
    let snap = snapshot(
        vec![ints("input_ids", DType::I64, &[2, 2048], &ids)],
        &[("vocab_size", "50257"), ("size", "9")],
    );
    let r = check(&spec("index_bounds", &[("tensor", "input_ids")]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert_eq!(
        r.summary,
        "input_ids[0, 17] = 50257 >= vocab_size = 50257 (3 of 4096 values out of range; max 50260)"
    );
    assert_eq!(r.first_offenses[2].index, vec![1, 52]);
}

#[test]
fn token_ids_in_range_refute_the_cause() {
    let snap = snapshot(
        vec![ints("input_ids", DType::I64, &[2, 2048], &token_ids(&[]))],
        &[("vocab_size", "50257")],
    );
    let r = check(&spec("index_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert_eq!(
        r.summary,
        "all 4096 input_ids in [0, 50257); the assert comes from elsewhere"
    );
}

#[test]
fn the_table_size_comes_from_the_rows_of_weight() {
    let snap = snapshot(
        vec![
            ints("input_ids", DType::I32, &[3], &[0, 9, 10]),
            zeros("weight", DType::F32, &[10, 2]),
        ],
        &[],
    );
    let r = check(&spec("index_bounds", &[("size", "")]), &snap);
    assert_eq!(
        r.summary,
        "input_ids[2] = 10 >= len(weight) = 10 (1 of 3 values out of range; max 10)"
    );
    assert_eq!(r.params.get("size").map(String::as_str), Some("10"));
}

#[test]
fn negative_ids_confirm_even_without_a_size_unless_allowed() {
    let snap = snapshot(vec![ints("input_ids", DType::I64, &[3], &[5, -100, 2])], &[]);
    let r = check(&spec("index_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert!(r.summary.starts_with("input_ids[1] = -100 < 0"), "{}", r.summary);
    let r = check(&spec("index_bounds", &[("allow_negative", "true")]), &snap);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(r.summary.starts_with("no size for input_ids"), "{}", r.summary);
    let r = check(
        &spec("index_bounds", &[("allow_negative", "true"), ("size", "6")]),
        &snap,
    );
    assert_eq!(
        r.summary,
        "input_ids[1] = -100 < -6 (1 of 3 values out of range; min -100)"
    );
}

#[test]
fn position_ids_use_max_position_embeddings_not_the_vocabulary() {
    let snap = snapshot(
        vec![ints("position_ids", DType::I64, &[3], &[0, 511, 512])],
        &[
            ("vocab_size", "30522"),
            ("max_position_embeddings", "512"),
            ("model_type", "bert"),
        ],
    );
    let r = check(&spec("index_bounds", &[("tensor", "position_ids")]), &snap);
    assert_eq!(
        r.summary,
        "position_ids[2] = 512 >= max_position_embeddings = 512 (1 of 3 values out of range; max 512)"
    );
}

#[test]
fn a_missing_tensor_is_inconclusive_and_names_what_the_snapshot_holds() {
    let snap = snapshot(vec![ints("ids", DType::I64, &[1], &[0])], &[]);
    let r = check(&spec("target_bounds", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(
        r.summary
            .starts_with("no labels tensor in the snapshot (it holds: ids)"),
        "{}",
        r.summary
    );
}

#[test]
fn nan_in_the_logits_confirms_finite_and_clean_logits_refute_it() {
    let snap = snapshot(vec![floats("logits", &[2, 2], &[0.5, -1.0, f32::NAN, 2.0])], &[]);
    let r = check(&spec("finite", &[("tensor", "logits")]), &snap);
    assert_eq!(r.summary, "logits[1, 0] = nan (1 of 4 values are NaN or Inf)");
    assert_eq!((r.min.as_deref(), r.max.as_deref()), (Some("-1"), Some("2")));
    let snap = snapshot(vec![floats("logits", &[2], &[0.5, -1.0])], &[]);
    let r = check(&spec("finite", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert_eq!(r.summary, "all 2 logits finite (min -1, max 0.5)");
}

#[test]
fn bce_inputs_outside_zero_one_confirm_value_range() {
    let snap = snapshot(vec![floats("input", &[4], &[0.2, 1.7, -0.3, 1.0])], &[]);
    let r = check(
        &spec("value_range", &[("tensor", "input"), ("lo", "0"), ("hi", "1")]),
        &snap,
    );
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert_eq!(
        r.summary,
        "input[1] = 1.7 > 1 (2 of 4 values outside [0, 1] or NaN; min -0.3, max 1.7)"
    );
    let snap = snapshot(vec![floats("probs", &[2], &[0.0, 1.0])], &[]);
    let r = check(&spec("value_range", &[]), &snap);
    assert_eq!(r.summary, "all 2 probs in [0, 1] (min 0, max 1)");
}

#[test]
fn the_models_input_features_are_not_taken_for_the_bce_input() {
    // A cross-entropy job's batch: the features lie outside [0, 1], and say nothing about BCE.
    let snap = snapshot(
        vec![
            floats("x", &[2], &[-1.2, 3.4]),
            floats("inputs", &[2], &[-1.2, 3.4]),
        ],
        &[],
    );
    let r = check(&spec("value_range", &[("lo", "0"), ("hi", "1")]), &snap);
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert!(
        r.summary.starts_with("no input tensor in the snapshot"),
        "{}",
        r.summary
    );
}

#[test]
fn mixed_devices_and_int32_labels_break_consistency() {
    let snap = snapshot(
        vec![
            zeros("logits", DType::F32, &[4, 3]),
            ints("labels", DType::I32, &[4], &[0, 1, 2, 0]),
        ],
        &[("device.logits", "cuda:0"), ("device.labels", "cpu")],
    );
    let r = check(&spec("consistency", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert_eq!(
        r.summary,
        "mixed devices: logits on cuda:0, labels on cpu; labels is int32: cross_entropy wants int64 (torch.long) class indices"
    );
    assert_eq!(r.offending, 2);
    assert_eq!(r.tensor.as_deref(), Some("logits,labels"));
}

#[test]
fn lm_logits_with_unflattened_labels_break_consistency() {
    let snap = snapshot(
        vec![
            zeros("logits", DType::F32, &[2, 8, 5]),
            zeros("labels", DType::I64, &[2, 8]),
        ],
        &[],
    );
    let r = check(&spec("consistency", &[("dtype.labels", "torch.long")]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert!(
        r.summary
            .starts_with("labels [2, 8] does not match logits [2, 8, 5] without its class dim ([2, 5])"),
        "{}",
        r.summary
    );
}

#[test]
fn agreeing_tensors_refute_consistency() {
    let snap = snapshot(
        vec![
            zeros("logits", DType::F32, &[4, 3]),
            zeros("labels", DType::I64, &[4]),
        ],
        &[
            ("device.logits", "cuda"),
            ("device.labels", "cuda:0"),
            ("dtype.labels", "int64"),
        ],
    );
    let r = check(&spec("consistency", &[("tensors", "logits, labels")]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert_eq!(
        r.summary,
        "logits [4, 3] float32 on cuda:0, labels [4] int64 on cuda:0: dtypes, devices and shapes agree"
    );
}

#[test]
fn per_tensor_metadata_belongs_to_the_tensor_of_that_name() {
    // `role.labels = y` ties the role to `y`; `dtype.labels` describes the tensor named labels.
    let snap = snapshot(
        vec![
            zeros("logits", DType::F32, &[4, 3]),
            zeros("y", DType::I64, &[4]),
            zeros("labels", DType::I32, &[4]),
        ],
        &[
            ("role.labels", "y"),
            ("dtype.labels", "int32"),
            ("dtype.y", "int64"),
        ],
    );
    let r = check(&spec("consistency", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted, "{}", r.summary);
}

/// A backend whose cuBLAS answers `status`.
struct FakeGpu(&'static str);

impl Backend for FakeGpu {
    fn name(&self) -> String {
        "gpu:fake".into()
    }
    fn scan(&self, tensor: TensorRef<'_>, scan: Scan) -> Result<ScanOutput, ReplayError> {
        Cpu::new().scan(tensor, scan)
    }
    fn gemm_status(&self, _call: &GemmCall) -> Option<Result<String, ReplayError>> {
        Some(Ok(self.0.into()))
    }
}

#[test]
fn a_valid_gemm_is_refuted_with_the_call_cublas_gets() {
    let snap = snapshot(
        vec![
            zeros("a", DType::F16, &[32, 64]),
            zeros("b", DType::F16, &[64, 16]),
        ],
        &[],
    );
    let r = check(&spec("gemm", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert!(
        r.summary
            .contains("cublasGemmEx(transa=N, transb=N, m=16, n=32, k=64, lda=16, ldb=64, ldc=16)"),
        "{}",
        r.summary
    );
    let r =
        run(&spec("gemm", &[]), &snap, &FakeGpu("CUBLAS_STATUS_SUCCESS")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        r.summary.contains("the real call returned CUBLAS_STATUS_SUCCESS"),
        "{}",
        r.summary
    );
    assert_eq!(r.backend, "gpu:fake");
}

#[test]
fn a_failing_real_cublas_call_confirms_gemm() {
    let snap = snapshot(
        vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[3, 2])],
        &[],
    );
    let r = run(&spec("gemm", &[]), &snap, &FakeGpu("CUBLAS_STATUS_NOT_SUPPORTED"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert!(
        r.summary.contains("cuBLAS returned CUBLAS_STATUS_NOT_SUPPORTED"),
        "{}",
        r.summary
    );
}

#[test]
fn gemm_finds_inner_dims_dtypes_leading_dims_and_devices() {
    let snap = snapshot(
        vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[4, 2])],
        &[],
    );
    let r = check(&spec("gemm", &[]), &snap);
    assert!(
        r.summary.contains("inner dimensions differ (3 vs 4)"),
        "{}",
        r.summary
    );
    let snap = snapshot(
        vec![zeros("x", DType::F32, &[2, 3]), zeros("w", DType::F16, &[3, 4])],
        &[("stride.w", "2,1"), ("device.x", "cuda:0"), ("device.w", "cpu")],
    );
    let r = check(&spec("gemm", &[("a", "x"), ("b", "w")]), &snap);
    assert_eq!(r.verdict, Verdict::Confirmed);
    assert!(
        r.summary.contains("mixed devices: x on cuda:0, w on cpu"),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("lda = 2 < 4"), "{}", r.summary);
    assert!(
        r.summary.contains("operand dtypes differ (float32 and float16)"),
        "{}",
        r.summary
    );
    assert_eq!(r.offending, 3);
}

#[test]
fn a_cause_that_blames_one_aspect_is_confirmed_only_by_problems_of_that_aspect() {
    // A strided weight with a leading dimension cuBLAS refuses, in one dtype.
    let snap = snapshot(
        vec![zeros("x", DType::F16, &[2, 3]), zeros("w", DType::F16, &[3, 4])],
        &[("stride.w", "2,1")],
    );
    let blame = |aspect: &str| {
        check(
            &spec("gemm", &[("a", "x"), ("b", "w"), ("aspect", aspect)]),
            &snap,
        )
    };
    let layout = blame("layout");
    assert_eq!(layout.verdict, Verdict::Confirmed, "{}", layout.summary);
    assert!(layout.summary.contains("lda = 2 < 4"), "{}", layout.summary);
    let dtype = blame("dtype");
    assert_eq!(dtype.verdict, Verdict::Refuted, "{}", dtype.summary);
    assert!(
        dtype
            .summary
            .contains("the operands' dtype is valid; the call's problem is elsewhere: lda = 2 < 4"),
        "{}",
        dtype.summary
    );
    let failing = run(
        &spec("gemm", &[("aspect", "dtype")]),
        &snapshot(
            vec![zeros("a", DType::F32, &[2, 3]), zeros("b", DType::F32, &[3, 2])],
            &[],
        ),
        &FakeGpu("CUBLAS_STATUS_INVALID_VALUE"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(failing.verdict, Verdict::Inconclusive, "{}", failing.summary);
    let bad = run(&spec("gemm", &[("aspect", "colour")]), &snap, &Cpu::new());
    assert!(matches!(bad, Err(ReplayError::Check(m)) if m.contains("expected dtype, layout")));
}

#[test]
fn a_transposed_operand_is_passed_with_op_t() {
    let snap = snapshot(
        vec![zeros("a", DType::BF16, &[8, 4]), zeros("b", DType::BF16, &[4, 6])],
        &[("stride.b", "[1, 4]")],
    );
    let r = check(&spec("gemm", &[]), &snap);
    assert_eq!(r.verdict, Verdict::Refuted);
    assert!(
        r.summary
            .contains("transa=T, transb=N, m=6, n=8, k=4, lda=4, ldb=4, ldc=6"),
        "{}",
        r.summary
    );
}

#[test]
fn unknown_checks_and_parameters_are_errors_that_list_the_known_ones() {
    let snap = snapshot(vec![], &[]);
    let err = run(&spec("bounds", &[]), &snap, &Cpu::new())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(
            "unknown check \"bounds\" (known: index_bounds, target_bounds, finite, value_range, consistency, gemm, hidden_size)"
        )
    );
    let err = run(&spec("finite", &[("size", "3")]), &snap, &Cpu::new())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("check finite has no parameter \"size\" (known: tensor)")
    );
    let err = run(
        &spec("target_bounds", &[("num_classes", "two")]),
        &snapshot(vec![zeros("labels", DType::I64, &[1])], &[]),
        &Cpu::new(),
    );
    assert!(
        matches!(err, Err(ReplayError::Check(m)) if m == "parameter num_classes = \"two\" is not an integer")
    );
}

#[test]
fn every_check_knows_its_aliases_and_per_tensor_families() {
    let known = |c: &str, p: &str| check_info(c).is_some_and(|i| i.knows(p));
    assert!(known("index_bounds", "vocab_size"));
    assert!(known("index_bounds", "n_positions"));
    assert!(known("index_bounds", "frames"));
    assert!(known("index_bounds", "architectures"));
    assert!(known("index_bounds", "pad_token_id"));
    assert!(known("consistency", "dtype.labels"));
    assert!(known("gemm", "stride.a"));
    assert!(!known("gemm", "stride."));
    assert!(!known("finite", "lo"));
    assert!(describe_checks().contains("target_bounds: cross-entropy"));
}
