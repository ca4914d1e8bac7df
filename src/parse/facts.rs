//! Facts stated in error messages: shapes, dtypes, devices, checkpoint sizes, indices.

use super::{Collector, Extractor};
use crate::model::{EventKind, Fact};
use crate::normalize::Line;

pub(super) const EXTRACTORS: &[Extractor] = &[
    Extractor {
        trigger: r"shapes cannot be multiplied|size mismatch, m1: |must match the size of tensor b|Target size .* must be the same as input size|Expected input batch_size|Using a target size .* that is different to the input size|he expanded size of the tensor",
        handle: shapes,
    },
    Extractor {
        trigger: r"expected scalar type \w+ but found|to have the same dtype|must have the same dtype|Found dtype \w+ but expected|can't be cast to the desired output type|Input type \(.*\) and (?:weight|bias) type|not implemented for '\w+'|Expected object of (?:scalar )?type|to have the same type as tensor for argument",
        handle: dtypes,
    },
    Extractor {
        trigger: r"Expected all tensors to be on the same device|found at least two devices, [\w:]+ and [\w:]+|Expected object of (?:device type|backend)|to have the same device as tensor|is on CPU, but expected it to be on GPU|Input and (?:parameter|hidden) tensors are not at the same device|expected device \S+ and dtype \w+ but got device|expected device [\w:]+ but got device [\w:]+|expected backend \w+ and dtype \w+ but got backend|expected TensorOptions\(dtype=|All input tensors must be on the same device\. Received",
        handle: devices,
    },
    Extractor {
        trigger: r"size mismatch for [\w.]+: copying a param|found shape torch\.Size\(\[[\d, ]*\]\) in the checkpoint|While copying the parameter named|Cannot load .* because [\w.]+ expected shape ",
        handle: checkpoint,
    },
    Extractor {
        trigger: r"Target -?\d+ is out of bounds|index -?\d+ is out of bounds for (?:dimension|axis)|index out of range in self",
        handle: index,
    },
];

/// `64x512`, `2, 768`, `64 x 512` → dimensions.
fn dims(text: &str) -> Vec<u64> {
    text.split(['x', '*', ','])
        .filter_map(|d| d.trim().parse().ok())
        .collect()
}

fn shapes(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    // (`1280*2048`: the message retyped with another sign)
    let fact = if let Some(c) = regex!(r"shapes cannot be multiplied \((?P<a>\d+[x*]\d+) and (?P<b>\d+[x*]\d+)\)").captures(text) {
        Fact::MatmulShapes {
            left: dims(&c["a"]),
            right: dims(&c["b"]),
        }
    } else if let Some(c) =
        regex!(r"size mismatch, m1: \[(?P<a>\d+ x \d+)\], m2: \[(?P<b>\d+ x \d+)\]").captures(text)
    {
        Fact::MatmulShapes {
            left: dims(&c["a"]),
            right: dims(&c["b"]),
        }
    } else if let Some(c) = regex!(
        r"size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\) at non-singleton dimension (?P<d>\d+)"
    )
    .captures(text)
    {
        let (Ok(a), Ok(b), Ok(dim)) = (c["a"].parse(), c["b"].parse(), c["d"].parse()) else {
            return;
        };
        Fact::BroadcastSizes { a, b, dim }
    } else if let Some(c) = regex!(
        r"Target size \((?:torch\.Size\()?\[(?P<t>[\d, ]*)\]\)?\) must be the same as input size \((?:torch\.Size\()?\[(?P<i>[\d, ]*)\]\)?\)"
    )
    .captures(text)
    {
        Fact::TargetInputShapes {
            target: dims(&c["t"]),
            input: dims(&c["i"]),
        }
    } else if let Some(c) =
        regex!(r"Expected input batch_size \((?P<i>\d+)\) to match target batch_size \((?P<t>\d+)\)").captures(text)
    {
        Fact::TargetInputShapes {
            target: dims(&c["t"]),
            input: dims(&c["i"]),
        }
    } else if let Some(c) = regex!(
        r"Using a target size \((?:torch\.Size\()?\[(?P<t>[\d, ]*)\]\)?\) that is different to the input size \((?:torch\.Size\()?\[(?P<i>[\d, ]*)\]\)?\)"
    )
    .captures(text)
    {
        Fact::TargetInputShapes {
            target: dims(&c["t"]),
            input: dims(&c["i"]),
        }
    } else if let Some(c) = regex!(
        r"expanded size of the tensor \((?P<a>\d+)\) must match the existing size \((?P<b>\d+)\) at non-singleton dimension (?P<d>\d+)"
    )
    .captures(text)
    {
        let (Ok(a), Ok(b), Ok(dim)) = (c["a"].parse(), c["b"].parse(), c["d"].parse()) else {
            return;
        };
        Fact::BroadcastSizes { a, b, dim }
    } else {
        return;
    };
    out.emit(line, EventKind::Fact(fact));
}

/// `torch.cuda.HalfTensor` → (`cuda`, `Half`); `torch.FloatTensor` → (`cpu`, `Float`);
/// ATen's `CUDAFloatType` → (`cuda`, `Float`).
fn tensor_type(name: &str, ends_line: bool) -> Option<(&'static str, String)> {
    // A name cut by a wrapped or clipped line (`torch.cud`, `CUDAFlo`, or `torc` at the line's
    // end) says neither.
    let legacy = name.contains('.') || name.starts_with("CUDA") || name.starts_with("CPU");
    if (legacy || ends_line) && !(name.ends_with("Tensor") || name.ends_with("Type")) {
        return None;
    }
    let device = if name.contains("cuda") || name.starts_with("CUDA") {
        "cuda"
    } else {
        "cpu"
    };
    let dtype = name
        .rsplit('.')
        .next()
        .unwrap_or(name)
        .trim_start_matches("CUDA")
        .trim_start_matches("CPU")
        .trim_end_matches("Tensor")
        .trim_end_matches("Type")
        .to_owned();
    Some((device, dtype))
}

fn dtypes(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let pair = |e: &str, f: &str| Fact::Dtypes {
        expected: e.to_owned(),
        found: f.to_owned(),
    };
    let fact = if let Some(c) = regex!(r"expected scalar type (?P<e>\w+) but found (?P<f>\w+)").captures(text)
    {
        pair(&c["e"], &c["f"])
    } else if let Some(c) =
        // (MSVC builds name the types `struct c10::Half`)
        regex!(r"to have the same dtype, but got:? (?:struct |class )?(?P<e>[\w:]+)\s*(?:!=|and)\s*(?:struct |class )?(?P<f>[\w:]+)").captures(text)
    {
        pair(&c["e"], &c["f"])
    } else if let Some(c) =
        regex!(r"must have the same dtype, but got (?P<e>\w+) and (?P<f>\w+)").captures(text)
    {
        pair(&c["e"], &c["f"])
    } else if let Some(c) = regex!(r"Found dtype (?P<f>\w+) but expected (?P<e>\w+)").captures(text) {
        pair(&c["e"], &c["f"])
    } else if let Some(c) =
        regex!(r"result type (?P<f>\w+) can't be cast to the desired output type (?P<e>\w+)").captures(text)
    {
        pair(&c["e"], &c["f"])
    } else if let Some(c) = regex!(r"Expected object of scalar type (?P<e>\w+) but got scalar type (?P<f>\w+)").captures(text) {
        pair(&c["e"], &c["f"])
    } else if let Some(c) = regex!(r"Input type \((?:struct |class )?(?P<f>[\w:]+)\) and bias type \((?:struct |class )?(?P<e>[\w:]+)\)").captures(text) {
        pair(&c["e"], &c["f"])
    } else if let Some(c) = regex!(
        r"(?:Input type \((?P<i>[\w.]+)\) and weight type \((?P<w>[\w.]+)\)|Expected object of type (?P<w2>[\w.]+) but found type (?P<i2>[\w.]+)|to have the same type as tensor for argument #\d+ '\w+'; but type (?P<i3>[\w.]+) does not equal (?P<w3>[\w.]+))"
    )
    .captures(text)
    {
        // Older releases: `Expected tensor for argument #1 'input' to have the same type as
        // tensor for argument #2 'weight'; but type torch.cuda.HalfTensor does not equal …`.
        let end = text.trim_end().len();
        let read = |m: Option<regex::Match<'_>>| {
            let m = m?;
            tensor_type(m.as_str(), m.end() == end)
        };
        let input = read(c.name("i").or(c.name("i2")).or(c.name("i3")));
        let weight = read(c.name("w").or(c.name("w2")).or(c.name("w3")));
        let (Some((input_device, input_dtype)), Some((weight_device, weight_dtype))) = (input, weight)
        else {
            return;
        };
        if input_device != weight_device {
            out.emit(
                line,
                EventKind::Fact(Fact::Devices {
                    first: input_device.to_owned(),
                    second: weight_device.to_owned(),
                }),
            );
        }
        if input_dtype == weight_dtype {
            return;
        }
        pair(&weight_dtype, &input_dtype)
    } else if let Some(c) = regex!(r#""(?P<op>\w+)" not implemented for '(?P<f>\w+)'"#).captures(text) {
        Fact::Dtypes {
            expected: format!("a dtype supported by {}", &c["op"]),
            found: c["f"].to_owned(),
        }
    } else {
        return;
    };
    out.emit(line, EventKind::Fact(fact));
}

fn devices(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let pair = |a: &str, b: &str| Fact::Devices {
        first: a.to_owned(),
        second: b.to_owned(),
    };
    let fact = if let Some(c) =
        regex!(r"found at least two devices, (?P<a>[\w:]+) and (?P<b>[\w:]+)").captures(text)
    {
        pair(&c["a"], &c["b"])
    } else if let Some(c) = regex!(
        r"Expected object of (?:device type|backend) (?P<a>\w+) but got (?:device type|backend) (?P<b>\w+)"
    )
    .captures(text)
    {
        pair(&c["a"].to_ascii_lowercase(), &c["b"].to_ascii_lowercase())
    } else if let Some(c) = regex!(r"but device (?P<a>\d+) does not equal (?P<b>\d+)").captures(text) {
        pair(&format!("cuda:{}", &c["a"]), &format!("cuda:{}", &c["b"]))
    } else if let Some(c) =
        regex!(r"but got \w+ is on (?P<a>[\w:]+), different from other tensors on (?P<b>[\w:]+)")
            .captures(text)
    {
        pair(&c["a"], &c["b"])
    } else if let Some(c) =
        regex!(r"found input tensor at (?P<a>[\w:]+) and (?:parameter|hidden) tensor at (?P<b>[\w:]+)").captures(text)
    {
        pair(&c["a"], &c["b"])
    } else if let Some(c) =
        // torch 1.0 to 1.3's TensorIterator: `expected device cuda:0 but got device cuda:1`
        regex!(r"expected device (?P<a>[\w:]+) but got device (?P<b>[\w:]+)").captures(text)
    {
        pair(&c["a"], &c["b"])
    } else if text.contains("is on CPU, but expected it to be on GPU") {
        pair("cpu", "cuda")
    } else if let Some(c) =
        regex!(r"All input tensors must be on the same device\. Received (?P<a>[\w:]+) and (?P<b>[\w:]+)").captures(text)
    {
        // torch.cat / stack
        pair(&c["a"], &c["b"])
    } else if let Some(c) = [
        // torch 1.x: `expected device cpu and dtype Float but got device cuda:0 and dtype Float`
        regex!(r"expected device (?P<a>[\w:]+) and dtype (?P<e>\w+) but got device (?P<b>[\w:]+) and dtype (?P<f>\w+)"),
        // torch 0.4 to 1.0: `expected backend CUDA and dtype Float but got backend CPU and dtype Float`
        regex!(r"expected backend (?P<a>\w+) and dtype (?P<e>\w+) but got backend (?P<b>\w+) and dtype (?P<f>\w+)"),
        // later: `expected TensorOptions(dtype=float, device=cpu, …) (got TensorOptions(dtype=float, device=cuda:0, …))`
        regex!(r"expected TensorOptions\(dtype=(?P<e>[\w:]+), device=(?P<a>[\w:]+),.*?\(got TensorOptions\(dtype=(?P<f>[\w:]+), device=(?P<b>[\w:]+),"),
    ]
    .into_iter()
    .find_map(|re| re.captures(text))
    {
        // Both devices and dtypes are named: the pair that differs is the mismatch.
        if c["a"] != c["b"] {
            pair(&c["a"].to_ascii_lowercase(), &c["b"].to_ascii_lowercase())
        } else if c["e"] != c["f"] {
            Fact::Dtypes {
                expected: c["e"].to_owned(),
                found: c["f"].to_owned(),
            }
        } else {
            return;
        }
    } else {
        return;
    };
    out.emit(line, EventKind::Fact(fact));
}

fn checkpoint(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let torch = regex!(
        // The model's shape is missing where a long line was cut after the checkpoint's. mmcv's
        // copy prints the checkpoint's shape as a `('name', torch.Size([…]))` pair, and no space
        // after `checkpoint,`.
        r"size mismatch for (?P<p>[\w.]+): copying a param with shape (?:\('[\w.]+', )?(?:torch\.Size\()?\[(?P<c>[\d, ]*)\]\)?\)? from checkpoint(?:, ?the shape in current model is (?:torch\.Size\()?\[(?P<m>[\d, ]*)\])?"
    );
    let hf = regex!(
        r"(?P<p>[\w.]+): found shape torch\.Size\(\[(?P<c>[\d, ]*)\]\) in the checkpoint and torch\.Size\(\[(?P<m>[\d, ]*)\]\) in the model"
    );
    // torch 0.4.1: `copying a param of torch.Size([10, 512]) from checkpoint, where the shape is
    // torch.Size([1000, 512]) in current model`; torch 0.3: `While copying the parameter named
    // fc.weight, whose dimensions in the model are torch.Size([…]) and whose dimensions in the
    // checkpoint are torch.Size([…])`.
    let old = regex!(
        r"size mismatch for (?P<p>[\w.]+): copying a param of torch\.Size\(\[(?P<c>[\d, ]*)\]\) from checkpoint, where the shape is torch\.Size\(\[(?P<m>[\d, ]*)\]\) in current model"
    );
    let oldest = regex!(
        r#"While copying the parameter named ["']?(?P<p>[\w.]+)["']?, whose dimensions in the model are torch\.Size\(\[(?P<m>[\d, ]*)\]\) and whose dimensions in the checkpoint are torch\.Size\(\[(?P<c>[\d, ]*)\]\)"#
    );
    // diffusers: `Cannot load <path> because embedding.1.weight expected shape tensor(...,
    // device='meta', size=(320, 64, 1, 1)), but got torch.Size([320, 16, 1, 1])` (the model's
    // shape first, printed as a meta tensor or a `torch.Size`).
    let diffusers = regex!(
        r"Cannot load .* because (?P<p>[\w.]+) expected shape (?:tensor\(\.\.\., device='meta', size=\((?P<m>[\d, ]*?),?\)\)|torch\.Size\(\[(?P<n>[\d, ]*)\]\)), but got torch\.Size\(\[(?P<c>[\d, ]*)\]\)"
    );
    // Since torch 1.0 the `While copying …` wording ends `, an exception occurred : (…)`: the
    // copy itself raised (a CUDA error, most often), the shapes being equal; no mismatch.
    let oldest_mismatches = oldest.captures_iter(text).filter(|c| {
        let end = c.get(0).map_or(0, |m| m.end());
        !text[end..].starts_with(", an exception occurred")
    });
    let all = torch
        .captures_iter(text)
        .chain(hf.captures_iter(text))
        .chain(old.captures_iter(text))
        .chain(oldest_mismatches)
        .chain(diffusers.captures_iter(text));
    for c in all {
        let checkpoint = dims(&c["c"]);
        let model_shape = c.name("m").or(c.name("n"));
        let model = model_shape.map_or_else(Vec::new, |m| dims(m.as_str()));
        if model_shape.is_some() && checkpoint == model {
            continue; // the same shape on both sides is not a mismatch, whatever the wording
        }
        let parameter = c["p"].to_owned();
        let fact = Fact::CheckpointSizeMismatch {
            parameter,
            checkpoint,
            model,
        };
        out.emit(line, EventKind::Fact(fact));
    }
}

fn index(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    let fact = if let Some(c) = regex!(r"Target (?P<v>-?\d+) is out of bounds").captures(text) {
        Fact::IndexOutOfBounds {
            value: c["v"].parse().ok(),
            size: None,
            dim: None,
        }
    } else if let Some(c) =
        regex!(r"index (?P<v>-?\d+) is out of bounds for (?:dimension|axis) (?P<d>\d+) with size (?P<s>\d+)")
            .captures(text)
    {
        Fact::IndexOutOfBounds {
            value: c["v"].parse().ok(),
            size: c["s"].parse().ok(),
            dim: c["d"].parse().ok(),
        }
    } else {
        Fact::IndexOutOfBounds {
            value: None,
            size: None,
            dim: None,
        }
    };
    out.emit(line, EventKind::Fact(fact));
}

#[cfg(test)]
mod tests {
    use crate::model::{EventKind, Fact};
    use crate::parse::parse_str;

    fn facts(log: &str) -> Vec<Fact> {
        parse_str(log)
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Fact(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn matmul_shapes_in_new_and_old_wording() {
        assert_eq!(
            facts("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64*512 and 768*10)"),
            facts("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 768x10)"),
        );
        assert_eq!(
            facts("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 768x10)"),
            vec![Fact::MatmulShapes {
                left: vec![64, 512],
                right: vec![768, 10]
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: size mismatch, m1: [32 x 2048], m2: [512 x 10] at /pytorch/aten/src/THC/generic/THCTensorMathBlas.cu:290"
            ),
            vec![Fact::MatmulShapes {
                left: vec![32, 2048],
                right: vec![512, 10]
            }]
        );
    }

    #[test]
    fn broadcast_and_target_shapes() {
        assert_eq!(
            facts(
                "RuntimeError: The size of tensor a (512) must match the size of tensor b (1024) at non-singleton dimension 1"
            ),
            vec![Fact::BroadcastSizes {
                a: 512,
                b: 1024,
                dim: 1
            }]
        );
        assert_eq!(
            facts(
                "ValueError: Target size (torch.Size([16])) must be the same as input size (torch.Size([16, 2]))"
            ),
            vec![Fact::TargetInputShapes {
                target: vec![16],
                input: vec![16, 2]
            }]
        );
        // an application's own wrapper may lower the message's first letter
        assert_eq!(
            facts(
                "inference failed: the expanded size of the tensor (3072) must match the existing size (8740) at non-singleton dimension 0. Target sizes: [3072,9]. Tensor sizes: [8740,9]"
            ),
            vec![Fact::BroadcastSizes {
                a: 3072,
                b: 8740,
                dim: 0
            }]
        );
        assert_eq!(
            facts("ValueError: Expected input batch_size (32) to match target batch_size (16)."),
            vec![Fact::TargetInputShapes {
                target: vec![16],
                input: vec![32]
            }]
        );
    }

    #[test]
    fn dtype_pairs_in_their_many_wordings() {
        let d = |e: &str, f: &str| Fact::Dtypes {
            expected: e.into(),
            found: f.into(),
        };
        assert_eq!(
            facts("RuntimeError: expected scalar type Float but found Half"),
            vec![d("Float", "Half")]
        );
        assert_eq!(
            facts(
                "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: struct c10::Half != float"
            ),
            facts("RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::Half != float"),
        );
        assert_eq!(
            facts("RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::Half != float"),
            vec![d("c10::Half", "float")]
        );
        assert_eq!(
            facts(
                "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same"
            ),
            vec![d("Float", "Half")]
        );
    }

    #[test]
    fn the_older_argument_type_wording_tells_dtype_from_device() {
        assert_eq!(
            facts(
                "RuntimeError: Expected tensor for argument #1 'grad_output' to have the same type as tensor for argument #2 'weight'; but type torch.cuda.HalfTensor does not equal torch.cuda.FloatTensor (while checking arguments for cudnn_convolution_backward_input)"
            ),
            vec![Fact::Dtypes {
                expected: "Float".into(),
                found: "Half".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Expected tensor for argument #1 'input' to have the same type as tensor for argument #2 'weight'; but type torch.FloatTensor does not equal torch.cuda.FloatTensor (while checking arguments for cudnn_convolution)"
            ),
            vec![Fact::Devices {
                first: "cpu".into(),
                second: "cuda".into()
            }]
        );
    }

    #[test]
    fn an_input_and_weight_on_different_devices_is_a_device_fact() {
        assert_eq!(
            facts(
                "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
            ),
            vec![Fact::Devices {
                first: "cuda".into(),
                second: "cpu".into()
            }]
        );
    }

    #[test]
    fn a_device_pair_wrapped_onto_its_own_line_is_still_read() {
        // A console that wraps long messages (rich's log handler) puts the pair on the next line.
        assert_eq!(
            facts(
                "RuntimeError: Expected all tensors to be on the same\n                             device, but found at least two devices, cuda:0 and cpu!\n"
            ),
            vec![Fact::Devices {
                first: "cuda:0".into(),
                second: "cpu".into()
            }]
        );
    }

    #[test]
    fn device_pairs() {
        assert_eq!(
            facts(
                "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
            ),
            vec![Fact::Devices {
                first: "cuda:0".into(),
                second: "cpu".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_index_select"
            ),
            vec![Fact::Devices {
                first: "cuda".into(),
                second: "cpu".into()
            }]
        );
    }

    #[test]
    fn old_torch_names_backend_and_dtype_and_the_pair_that_differs_is_the_mismatch() {
        assert_eq!(
            facts("RuntimeError: expected backend CUDA and dtype Float but got backend CPU and dtype Float"),
            vec![Fact::Devices {
                first: "cuda".into(),
                second: "cpu".into()
            }]
        );
        assert_eq!(
            facts("RuntimeError: expected backend CPU and dtype Double but got backend CPU and dtype Float"),
            vec![Fact::Dtypes {
                expected: "Double".into(),
                found: "Float".into()
            }]
        );
    }

    #[test]
    fn checkpoint_size_mismatches_in_mmcv_s_copy_of_the_torch_wording() {
        let got = facts(
            "size mismatch for conv.weight: copying a param with shape ('conv.weight', torch.Size([4, 16, 3])) from checkpoint,the shape in current model is torch.Size([16, 3, 4])\n",
        );
        assert_eq!(
            got,
            vec![Fact::CheckpointSizeMismatch {
                parameter: "conv.weight".into(),
                checkpoint: vec![4, 16, 3],
                model: vec![16, 3, 4]
            }]
        );
    }

    #[test]
    fn checkpoint_size_mismatches_in_diffusers_wording() {
        let got = facts(
            "ValueError: Cannot load /cache/stable-cascade/decoder because embedding.1.weight expected shape tensor(..., device='meta', size=(320, 64, 1, 1)), but got torch.Size([320, 16, 1, 1]). If you want to instead overwrite randomly initialized weights, please make sure to pass both `low_cpu_mem_usage=False` and `ignore_mismatched_sizes=True`.\n",
        );
        assert_eq!(
            got,
            vec![Fact::CheckpointSizeMismatch {
                parameter: "embedding.1.weight".into(),
                checkpoint: vec![320, 16, 1, 1],
                model: vec![320, 64, 1, 1]
            }]
        );
        let one_dim = facts(
            "ValueError: Cannot load unet because conv_in.bias expected shape tensor(..., device='meta', size=(320,)), but got torch.Size([640]).\n",
        );
        assert_eq!(
            one_dim,
            vec![Fact::CheckpointSizeMismatch {
                parameter: "conv_in.bias".into(),
                checkpoint: vec![640],
                model: vec![320]
            }]
        );
    }

    #[test]
    fn a_copy_that_raised_with_equal_shapes_is_no_size_mismatch() {
        let log = "Error(s) in loading state_dict for Whisper: While copying the parameter named \"encoder.blocks.0.attn.query.weight\", whose dimensions in the model are torch.Size([384, 384]) and whose dimensions in the checkpoint are torch.Size([384, 384]), an exception occurred : ('CUDA error: no kernel image is available for execution on the device',).";
        assert_eq!(facts(log), vec![]);
        // torch 0.3's size mismatch has the same start and no exception.
        let log = "While copying the parameter named fc.weight, whose dimensions in the model are torch.Size([10, 512]) and whose dimensions in the checkpoint are torch.Size([1000, 512]).";
        assert_eq!(facts(log).len(), 1);
    }

    #[test]
    fn checkpoint_size_mismatches_in_torch_and_transformers_wording() {
        let got = facts(
            "\tsize mismatch for classifier.weight: copying a param with shape torch.Size([2, 768]) from checkpoint, the shape in current model is torch.Size([10, 768]).\n- classifier.bias: found shape torch.Size([2]) in the checkpoint and torch.Size([10]) in the model instantiated\n",
        );
        assert_eq!(
            got,
            vec![
                Fact::CheckpointSizeMismatch {
                    parameter: "classifier.weight".into(),
                    checkpoint: vec![2, 768],
                    model: vec![10, 768]
                },
                Fact::CheckpointSizeMismatch {
                    parameter: "classifier.bias".into(),
                    checkpoint: vec![2],
                    model: vec![10]
                },
            ]
        );
    }

    #[test]
    fn a_size_mismatch_cut_before_the_model_shape_still_names_the_parameter() {
        assert_eq!(
            facts(
                "        size mismatch for lora_A.default.weight: copying a param with shape torch.Size([256, 4096]) from checkpoint, the shape in current mo"
            ),
            vec![Fact::CheckpointSizeMismatch {
                parameter: "lora_A.default.weight".into(),
                checkpoint: vec![256, 4096],
                model: vec![],
            }]
        );
    }

    #[test]
    fn msvc_type_names_in_the_bias_check_are_read_without_their_keyword() {
        assert_eq!(
            facts("RuntimeError: Input type (float) and bias type (struct c10::Half) should be the same"),
            vec![Fact::Dtypes {
                expected: "c10::Half".into(),
                found: "float".into()
            }]
        );
    }

    #[test]
    fn rnn_hidden_states_and_tensor_options_name_the_two_devices() {
        assert_eq!(
            facts(
                "RuntimeError: Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu"
            ),
            vec![Fact::Devices {
                first: "cuda:0".into(),
                second: "cpu".into()
            }]
        );
        assert_eq!(
            facts("RuntimeError: expected device cpu and dtype Float but got device cuda:0 and dtype Float"),
            vec![Fact::Devices {
                first: "cpu".into(),
                second: "cuda:0".into()
            }]
        );
        assert_eq!(
            facts(
                "TypeError: expected TensorOptions(dtype=float, device=cpu, layout=Strided, requires_grad=false (default)) (got TensorOptions(dtype=float, device=cuda:0, layout=Strided, requires_grad=false (default)))"
            ),
            vec![Fact::Devices {
                first: "cpu".into(),
                second: "cuda:0".into()
            }]
        );
        assert_eq!(
            facts("RuntimeError: All input tensors must be on the same device. Received cuda:0 and cpu"),
            vec![Fact::Devices {
                first: "cuda:0".into(),
                second: "cpu".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: expected device cuda:0 and dtype Float but got device cuda:0 and dtype Half"
            ),
            vec![Fact::Dtypes {
                expected: "Float".into(),
                found: "Half".into()
            }]
        );
    }

    #[test]
    fn a_tensor_type_cut_by_a_wrapped_line_is_no_fact() {
        // `torch.cuda.FloatTensor` cut after `torch.cud`: neither a dtype nor a device pair.
        assert_eq!(
            facts("RuntimeError: Expected object of type torch.FloatTensor but found type torch.cud\n"),
            vec![]
        );
        // … or cut inside `torch` itself.
        assert_eq!(
            facts("RuntimeError: Expected object of type torch.cuda.FloatTensor but found type torc\n"),
            vec![]
        );
    }

    #[test]
    fn torch_1_0_s_expected_device_but_got_device_is_a_device_fact() {
        assert_eq!(
            facts("RuntimeError: expected device cuda:0 but got device cuda:1\n"),
            vec![Fact::Devices {
                first: "cuda:0".into(),
                second: "cuda:1".into()
            }]
        );
    }

    #[test]
    fn older_and_newer_wordings_of_the_same_facts() {
        assert_eq!(
            facts(
                "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)"
            ),
            vec![Fact::Devices {
                first: "cpu".into(),
                second: "cuda:0".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Input type (CUDAFloatType) and weight type (CPUFloatType) should be the same"
            ),
            vec![Fact::Devices {
                first: "cuda".into(),
                second: "cpu".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be th"
            ),
            vec![Fact::Devices {
                first: "cpu".into(),
                second: "cuda".into()
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Expected object of scalar type Long but got scalar type Float for argument #2 'target'"
            ),
            vec![Fact::Dtypes {
                expected: "Long".into(),
                found: "Float".into()
            }]
        );
        assert_eq!(
            facts("RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float!= c10::Half"),
            vec![Fact::Dtypes {
                expected: "float".into(),
                found: "c10::Half".into()
            }]
        );
        assert_eq!(
            facts(
                "ValueError: Using a target size (torch.Size([8, 1])) that is different to the input size (torch.Size([8, 2])) is deprecated."
            ),
            vec![Fact::TargetInputShapes {
                target: vec![8, 1],
                input: vec![8, 2]
            }]
        );
        assert_eq!(
            facts(
                "RuntimeError: Error(s) in loading state_dict for ResNet:\n\tsize mismatch for fc.weight: copying a param of torch.Size([10, 512]) from checkpoint, where the shape is torch.Size([1000, 512]) in current model."
            ),
            vec![Fact::CheckpointSizeMismatch {
                parameter: "fc.weight".into(),
                checkpoint: vec![10, 512],
                model: vec![1000, 512]
            }]
        );
    }

    #[test]
    fn index_values() {
        assert_eq!(
            facts("IndexError: Target 5 is out of bounds."),
            vec![Fact::IndexOutOfBounds {
                value: Some(5),
                size: None,
                dim: None
            }]
        );
        assert_eq!(
            facts("IndexError: index 32000 is out of bounds for dimension 0 with size 32000"),
            vec![Fact::IndexOutOfBounds {
                value: Some(32000),
                size: Some(32000),
                dim: Some(0)
            }]
        );
        assert_eq!(
            facts("IndexError: index out of range in self"),
            vec![Fact::IndexOutOfBounds {
                value: None,
                size: None,
                dim: None
            }]
        );
    }
}
