//! The catalog of checks: each one's name, purpose and parameters (what `faultline replay
//! --list-checks` prints and `rules lint` validates against).

/// One parameter of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    /// Its name.
    pub name: &'static str,
    /// Other names accepted for it (`vocab_size` for `size`).
    pub aliases: &'static [&'static str],
    /// Where its value comes from when not given.
    pub default: &'static str,
    /// What it means.
    pub help: &'static str,
}

/// The checks there are. Every `match` on it is exhaustive (the run in `check::run`, the script
/// in `reproducer`), so a check added here and not wired there does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Indices outside the table they index.
    IndexBounds,
    /// Class targets outside the classes.
    TargetBounds,
    /// NaN and Inf.
    Finite,
    /// Values outside a range.
    ValueRange,
    /// Tensors that disagree on dtype, device or shape.
    Consistency,
    /// Matrix-multiply arguments.
    Gemm,
    /// Hidden states or embeddings of another width than the model's.
    HiddenSize,
}

/// A check: which one, its name, what it shows and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckInfo {
    /// Which check.
    pub check: Check,
    /// Name (`target_bounds`).
    pub name: &'static str,
    /// What it shows.
    pub help: &'static str,
    /// Its parameters.
    pub params: &'static [ParamInfo],
    /// Parameter families named per tensor (`dtype.` as in `dtype.labels = int64`).
    pub per_tensor: &'static [&'static str],
    /// Whether its refutation speaks for the whole finding (it checks the values the failure is
    /// about: labels in range refute a label assert), or for its own cause only (widths that
    /// match say nothing of a layer's own in_features, another cause of the same error).
    pub refutes_finding: bool,
}

impl CheckInfo {
    /// Whether `param` is one of its parameters (a name, an alias or a per-tensor family).
    pub fn knows(&self, param: &str) -> bool {
        self.params
            .iter()
            .any(|p| p.name == param || p.aliases.contains(&param))
            || self
                .per_tensor
                .iter()
                .any(|prefix| param.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty()))
    }
}

const TENSOR_HELP: &str = "the tensor: a role (labels, logits, input_ids, …) or a tensor name";

/// Every check, with its parameters.
pub const CHECKS: &[CheckInfo] = &[
    CheckInfo {
        check: Check::IndexBounds,
        name: "index_bounds",
        help: "embedding / index_select / gather indices outside [0, size); for input_ids and position_ids, every tensor that indexes the same table (decoder inputs, a language model's labels, positions implied by the sequence length)",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "input_ids",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "size",
                aliases: &super::bounds::TABLE_SIZE_ALIASES,
                default: "metadata (vocab_size for input_ids, max_position_embeddings for position_ids, …), else the rows of `weight`",
                help: "rows of the table indexed",
            },
            ParamInfo {
                name: "allow_negative",
                aliases: &[],
                default: "false",
                help: "whether -size..-1 are valid (advanced indexing t[idx] wraps them; embedding and index_select do not)",
            },
            ParamInfo {
                name: "ignore_index",
                aliases: &[],
                default: "metadata, else -100",
                help: "the label value a language model's loss skips (labels checked as token ids)",
            },
            ParamInfo {
                name: "frames",
                aliases: &[],
                default: "none (a rule fills it from the traceback: `{stack|} {table|}`)",
                help: "the model frames of the log's traceback (decoder, embed_tokens, embed_positions, the loss, …): they order the results (the decoder's inputs first for a decoder frame, the labels first for a loss frame), never decide them",
            },
            ParamInfo {
                name: "max_source_positions",
                aliases: &["max_encoder_position_embeddings"],
                default: "metadata, else max_position_embeddings / n_positions",
                help: "positions of the encoder's table (LED's max_encoder_position_embeddings)",
            },
            ParamInfo {
                name: "max_target_positions",
                aliases: &["max_decoder_position_embeddings"],
                default: "metadata, else max_position_embeddings / n_positions",
                help: "positions of an encoder-decoder's decoder (LED's max_decoder_position_embeddings)",
            },
            ParamInfo {
                name: "position_offset",
                aliases: &[],
                default: "metadata, else the family's (BERT, GPT-2, LED, …: 0; RoBERTa: pad_token_id + 1, counting the tokens besides padding; BART / mBART: 2, in a table of max_position_embeddings + 2 rows; OPT: the same, counting the attention mask), else unknown: no verdict",
                help: "the table row of position 0; giving it says the model has a learned absolute position table",
            },
            ParamInfo {
                name: "position_embedding_type",
                aliases: &[],
                default: "metadata (also model.KEY), else absolute (ESM: unknown)",
                help: "a BERT-style model has an absolute position table only when it is absolute",
            },
            ParamInfo {
                name: "position_biased_input",
                aliases: &[],
                default: "metadata (also model.KEY), else unknown for DeBERTa",
                help: "a DeBERTa has an absolute position table only when it is true",
            },
            ParamInfo {
                name: "attention_window",
                aliases: &[],
                default: "metadata (also model.KEY)",
                help: "LED pads the encoder's input to a multiple of it (the largest, for one per layer) before taking positions",
            },
            ParamInfo {
                name: "is_encoder_decoder",
                aliases: &[],
                default: "metadata (also model.KEY), else model_type / architectures, else whether decoder_input_ids is in the snapshot",
                help: "whether a decoder takes the labels shifted right",
            },
            ParamInfo {
                name: "model_type",
                aliases: &["architectures"],
                default: "metadata (also model.KEY)",
                help: "the model family (t5, bart, bert, gpt2, …): which tensors carry ids and the position offset",
            },
            ParamInfo {
                name: "decoder_start_token_id",
                aliases: &["pad_token_id"],
                default: "metadata (also model.KEY)",
                help: "the ids the shift to the right adds to an encoder-decoder's decoder inputs (pad_token_id replaces ignore_index)",
            },
        ],
        per_tensor: &[],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::TargetBounds,
        name: "target_bounds",
        help: "cross-entropy / NLL class targets outside [0, num_classes) that are not ignore_index",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "labels",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "num_classes",
                aliases: &["num_labels"],
                default: "metadata, else the class dim of `logits`",
                help: "number of classes (logits' class dim)",
            },
            ParamInfo {
                name: "ignore_index",
                aliases: &[],
                default: "metadata, else -100",
                help: "the target value the loss skips",
            },
            ParamInfo {
                name: "value",
                aliases: &[],
                default: "none",
                help: "the offending value the log printed (informational)",
            },
            ParamInfo {
                name: "frames",
                aliases: &[],
                default: "none (a rule fills it from the traceback: `{loss|} {head|}`)",
                help: "the model frames of the log's traceback: a language model's head (lm_head, lm_logits, ForCausalLMLoss) says the classes are the vocabulary (vocab_size bounds the labels)",
            },
            ParamInfo {
                name: "shows",
                aliases: &[],
                default: "none (a confirmation other causes of the finding share leaves this one consistent with the data, not confirmed)",
                help: "what the offending values must show for this cause alone to be confirmed: `padding:-1,pad_token_id` (every offender is one of these marks, integers or metadata keys); read by the replay of a diagnosis, not by the check",
            },
        ],
        per_tensor: &[],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::Finite,
        name: "finite",
        help: "NaN or ±Inf values",
        params: &[ParamInfo {
            name: "tensor",
            aliases: &[],
            default: "logits",
            help: TENSOR_HELP,
        }],
        per_tensor: &[],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::ValueRange,
        name: "value_range",
        help: "values outside [lo, hi] or NaN (BCE inputs and targets must lie in [0, 1])",
        params: &[
            ParamInfo {
                name: "tensor",
                aliases: &[],
                default: "input",
                help: TENSOR_HELP,
            },
            ParamInfo {
                name: "lo",
                aliases: &[],
                default: "metadata, else 0",
                help: "smallest allowed value",
            },
            ParamInfo {
                name: "hi",
                aliases: &[],
                default: "metadata, else 1",
                help: "largest allowed value",
            },
        ],
        per_tensor: &[],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::Consistency,
        name: "consistency",
        help: "dtype, device and shape agreement of the named tensors (logits [N, C] with labels [N])",
        params: &[
            ParamInfo {
                name: "tensors",
                aliases: &[],
                default: "logits,labels",
                help: "comma-separated roles or tensor names",
            },
            ParamInfo {
                name: "same_batch",
                aliases: &[],
                default: "true",
                help: "whether every tensor must have the same dim 0",
            },
        ],
        per_tensor: &["dtype.", "device."],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::Gemm,
        name: "gemm",
        help: "a @ b judged as cuBLAS would: shapes, leading dimensions, dtypes, devices; the real call on the GPU",
        params: &[
            ParamInfo {
                name: "a",
                aliases: &[],
                default: "a",
                help: "left operand (role or tensor name)",
            },
            ParamInfo {
                name: "b",
                aliases: &[],
                default: "b",
                help: "right operand",
            },
            ParamInfo {
                name: "aspect",
                aliases: &[],
                default: "all",
                help: "what the cause blames: dtype, layout (shapes, strides, leading dimensions), size (32-bit limits), device, or all",
            },
        ],
        per_tensor: &["stride.", "device."],
        refutes_finding: true,
    },
    CheckInfo {
        check: Check::HiddenSize,
        name: "hidden_size",
        help: "the last dim of the float tensors a model takes at its width (inputs_embeds, encoder_hidden_states, …) against the width its config records; a shape check (no element read, no kernel: the CPU and the GPU give it alike); widths that match refute its own cause for those tensors only",
        params: &[
            ParamInfo {
                name: "tensors",
                aliases: &[],
                default: super::width::DEFAULT_TENSORS,
                help: "comma-separated roles or tensor names; a name with inputs_embeds is taken at the embedding width, the others at the hidden size",
            },
            ParamInfo {
                name: "hidden_size",
                aliases: &["d_model", "n_embd"],
                default: "metadata (also model.KEY)",
                help: "the model's width",
            },
            ParamInfo {
                name: "embedding_size",
                aliases: &["input_embedding_size", "word_embed_proj_dim"],
                default: "metadata (also model.KEY), else the hidden size for families without a width of their own for embeddings (ALBERT, ELECTRA, OPT, … have one)",
                help: "the width of inputs_embeds",
            },
            ParamInfo {
                name: "cross_attention_hidden_size",
                aliases: &[],
                default: "metadata (also model.KEY)",
                help: "when recorded, encoder states are not judged by the hidden size (a wrapper may project them)",
            },
            ParamInfo {
                name: "model_type",
                aliases: &["architectures"],
                default: "metadata (also model.KEY)",
                help: "the model family: which width its embeddings and states have",
            },
            ParamInfo {
                name: "is_encoder_decoder",
                aliases: &[],
                default: "metadata (also model.KEY)",
                help: "whether a decoder takes the encoder's states",
            },
        ],
        per_tensor: &[],
        refutes_finding: false,
    },
];

/// The check called `name`.
pub fn check_info(name: &str) -> Option<&'static CheckInfo> {
    CHECKS.iter().find(|c| c.name == name)
}

/// The known checks and their parameters, as text (for `faultline replay --list-checks`).
pub fn describe_checks() -> String {
    let mut out = String::new();
    for check in CHECKS {
        out.push_str(&format!("{}: {}\n", check.name, check.help));
        for p in check.params {
            let aliases = if p.aliases.is_empty() {
                String::new()
            } else {
                format!(" (or {})", p.aliases.join(", "))
            };
            out.push_str(&format!(
                "    {}{aliases}: {}; default: {}\n",
                p.name, p.help, p.default
            ));
        }
        for prefix in check.per_tensor {
            out.push_str(&format!(
                "    {prefix}<tensor>: per tensor, from the snapshot metadata when not given\n"
            ));
        }
    }
    out
}
