"""Failing training steps whose error wordings come from host code, one per process.

    python tests/drift/steps.py NAME     run the step NAME: it fails, and its traceback ends the process
    python tests/drift/steps.py --list   print every step as NAME CLASS CONFIDENCE USES [ALSO...]

Each step is a mistake users make, written the way they write it, small enough to fail in a
second on a CPU: shapes that do not multiply, mixed dtypes, an index past its table, tensors on
two devices (``meta`` and ``cpu``: the device wording without a GPU), weights that do not fit
the model, NaN found by anomaly detection, CUDA asked of a machine without a driver, and
decoys (a tokenizer without a padding token, host memory) that must not read as a GPU failure.

Nothing is downloaded: the Hugging Face models are built from small configs, the tokenizers from
a word list written here, checkpoints are saved to a temporary folder first. The same steps run
under every torch / transformers pair of the matrix (``generate.py``), so that a wording that
changes between releases shows in the fixtures. The code keeps to what every version of the
matrix offers (torch 2.1 to the newest, transformers 4.36 to 5.x).

Each step declares the class of ``rules/taxonomy.toml`` its log must be diagnosed as (``none``:
no GPU cause may be claimed), the confidence the log warrants (``high`` when the log names the
failure itself), what it uses (``torch`` or ``transformers``: a torch-only step runs once per
torch version), and other classes that describe the same failure as well.
"""

import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Step:
    run: Callable[[], None]
    expected: str
    confidence: str
    uses: str = "torch"
    also: tuple = field(default_factory=tuple)


# ---------------------------------------------------------------- shapes


def shapes_mat1_mat2():
    """A flattened image size that is not the first layer's in_features."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
    images = torch.randn(8, 3, 28, 28)
    print(model(images).sum().item())


def shapes_broadcast_add():
    """A residual added to a projection of another width."""
    x = torch.randn(4, 16)
    proj = nn.Linear(16, 12)
    print((proj(x) + x).sum().item())


def shapes_bce_target_size():
    """One logit per sample of shape (N, 1) scored against targets of shape (N,)."""
    head = nn.Linear(16, 1)
    logits = head(torch.randn(8, 16))
    targets = torch.randint(0, 2, (8,)).float()
    print(F.binary_cross_entropy_with_logits(logits, targets).item())


def shapes_conv_channels():
    """A network for RGB images fed grayscale ones."""
    conv = nn.Conv2d(3, 16, kernel_size=3)
    print(conv(torch.randn(8, 1, 28, 28)).sum().item())


def shapes_view_invalid():
    """A reshape that assumes a batch size the last batch does not have."""
    x = torch.randn(6, 14)
    print(x.view(8, -1, 7).sum().item())


# ---------------------------------------------------------------- dtypes


def dtype_linear_half_weights():
    """A model cast to float16, its input still float32 (on the CPU)."""
    model = nn.Linear(16, 4).half()
    print(model(torch.randn(8, 16)).sum().item())


def dtype_mm_float_double():
    """Features loaded from NumPy (float64) multiplied by float32 weights."""
    import numpy as np

    features = torch.from_numpy(np.random.default_rng(0).standard_normal((8, 16)))
    weights = torch.randn(16, 4)
    print(torch.mm(features, weights).sum().item())


def dtype_conv_double_input():
    """Images loaded from NumPy (float64) into a float32 convolution."""
    import numpy as np

    conv = nn.Conv2d(3, 8, kernel_size=3)
    images = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 16, 16)))
    print(conv(images).sum().item())


def dtype_nll_float_target():
    """Class labels read as floats into nll_loss."""
    logp = F.log_softmax(torch.randn(8, 5), dim=-1)
    labels = torch.randint(0, 5, (8,)).float()
    print(F.nll_loss(logp, labels).item())


def dtype_embedding_float_ids():
    """Token ids stored as floats fed to an embedding."""
    embed = nn.Embedding(100, 8)
    ids = torch.randint(0, 100, (2, 6)).float()
    print(embed(ids).sum().item())


# ---------------------------------------------------------------- indices


def index_embedding_past_table():
    """A token id equal to the vocabulary size."""
    embed = nn.Embedding(500, 16)
    ids = torch.randint(0, 500, (4, 12))
    ids[2, 5] = 500
    print(embed(ids).sum().item())


def index_cross_entropy_target():
    """A label equal to the number of classes."""
    logits = torch.randn(8, 5)
    labels = torch.tensor([0, 1, 2, 3, 4, 5, 1, 2])
    print(F.cross_entropy(logits, labels).item())


def index_gather_past_dimension():
    """Per-class scores picked with gather by a label the head lacks."""
    logits = torch.randn(16, 10)
    labels = torch.randint(0, 10, (16,))
    labels[9] = 10
    print(logits.log_softmax(-1).gather(1, labels.unsqueeze(1)).mean().item())


def index_tensor_past_end():
    """A lookup table indexed by an id one past its end."""
    table = torch.randn(10, 4)
    print(table[torch.tensor([3, 10])].sum().item())


# ---------------------------------------------------------------- devices


def device_meta_weights_cpu_input():
    """A model built on the meta device (never materialized) given a batch on the CPU."""
    with torch.device("meta"):
        model = nn.Linear(16, 4)
    print(model(torch.randn(8, 16)))


def device_meta_cpu_cat():
    """A batch collated from pieces on two devices."""
    pieces = [torch.randn(2, 8), torch.randn(2, 8, device="meta")]
    print(torch.cat(pieces).sum())


# ---------------------------------------------------------------- CUDA asked of a machine without one


def cuda_tensor_without_driver():
    """A batch moved to the GPU on a machine without an NVIDIA driver."""
    print(torch.randn(8, 16).to("cuda").sum().item())


def cuda_model_without_driver():
    """model.cuda() on a machine without an NVIDIA driver."""
    model = nn.Linear(16, 4).cuda()
    print(model)


# ---------------------------------------------------------------- NaN


def nan_anomaly_log_zero():
    """log(0) in a loss, found by anomaly detection."""
    with torch.autograd.detect_anomaly():
        p = torch.tensor([0.5, 0.0, 0.25, 1.0], requires_grad=True)
        loss = -(p * torch.log(p)).sum()
        loss.backward()


def nan_anomaly_zero_over_zero():
    """A mean over an empty mask (0 / 0), found by anomaly detection."""
    with torch.autograd.detect_anomaly():
        x = torch.randn(6, requires_grad=True)
        mask = torch.zeros(6)
        loss = (x * mask).sum() / mask.sum()
        loss.backward()


# ---------------------------------------------------------------- checkpoints


def ckpt_load_state_dict_size():
    """A checkpoint of a 3-class head loaded into a 7-class model."""
    trained = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.save(trained.state_dict(), path)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 7))
    model.load_state_dict(torch.load(path))


# ---------------------------------------------------------------- decoys


def host_memory_decoy():
    """A tensor larger than the host's memory, on the CPU: not a GPU failure."""
    print(torch.empty(2**45, dtype=torch.float32).sum().item())


# ---------------------------------------------------------------- Hugging Face


def _bert_config(**overrides):
    from transformers import BertConfig

    sizes = dict(
        vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=3,
    )
    sizes.update(overrides)
    return BertConfig(**sizes)


def _word_tokenizer(vocab_size=1000, **kwargs):
    """A WordPiece-free word-level tokenizer over a word list, as a fast HF tokenizer."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(vocab_size - 5)]
    core = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    core.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", **kwargs)


def _sentence(n):
    return " ".join(f"w{(i * 7) % 990}" for i in range(n))


def hf_labels_past_num_labels():
    """A 3-class sequence classifier given label 3 (the dataset has four classes)."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(_bert_config())
    ids = torch.randint(5, 1000, (4, 16))
    out = model(input_ids=ids, labels=torch.tensor([0, 3, 1, 2]))
    out.loss.backward()


def hf_float_labels_single_label():
    """Class labels given as floats: transformers takes them for multi-label targets."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(_bert_config())
    ids = torch.randint(5, 1000, (4, 16))
    out = model(input_ids=ids, labels=torch.tensor([0.0, 2.0, 1.0, 2.0]))
    out.loss.backward()


def hf_added_tokens_without_resize():
    """Tokens added to the tokenizer without resize_token_embeddings."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    tokenizer = _word_tokenizer(pad_token="[PAD]")
    tokenizer.add_tokens(["<user>", "<bot>"])
    model = BertForSequenceClassification(_bert_config())
    batch = tokenizer(["<user> " + _sentence(10), "<bot> " + _sentence(6)], padding=True, return_tensors="pt")
    out = model(**batch, labels=torch.tensor([0, 1]))
    out.loss.backward()


def hf_sequence_longer_than_positions():
    """A text longer than the model's position table, not truncated."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    tokenizer = _word_tokenizer(pad_token="[PAD]", model_max_length=64)
    model = BertForSequenceClassification(_bert_config())
    batch = tokenizer([_sentence(100)], return_tensors="pt")
    out = model(**batch, labels=torch.tensor([1]))
    out.loss.backward()


def hf_checkpoint_num_labels():
    """A fine-tuned 3-class checkpoint loaded for 7 classes without ignore_mismatched_sizes."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    folder = tempfile.mkdtemp()
    BertForSequenceClassification(_bert_config(num_labels=3)).save_pretrained(folder)
    BertForSequenceClassification.from_pretrained(folder, num_labels=7)


def hf_bf16_model_float_inputs_embeds():
    """A model cast to bfloat16 given float32 inputs_embeds (embeddings computed elsewhere)."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(_bert_config()).to(torch.bfloat16)
    embeds = torch.randn(2, 16, model.config.hidden_size)
    out = model(inputs_embeds=embeds, labels=torch.tensor([0, 1]))
    out.loss.backward()


def hf_regression_nan_target():
    """A regression target with a missing value (NaN), found by anomaly detection."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    torch.autograd.set_detect_anomaly(True)
    model = BertForSequenceClassification(_bert_config(num_labels=1))
    ids = torch.randint(5, 1000, (2, 16))
    out = model(input_ids=ids, labels=torch.tensor([0.5, float("nan")]))
    out.loss.backward()


def hf_pad_without_pad_token_decoy():
    """A batch padded by a tokenizer that has no padding token: not a GPU failure."""
    tokenizer = _word_tokenizer()
    print(tokenizer([_sentence(5), _sentence(3)], padding=True, return_tensors="pt"))


STEPS = {
    "shapes_mat1_mat2": Step(shapes_mat1_mat2, "torch.shape_mismatch", "high"),
    "shapes_broadcast_add": Step(shapes_broadcast_add, "torch.shape_mismatch", "high"),
    "shapes_bce_target_size": Step(shapes_bce_target_size, "torch.shape_mismatch", "high"),
    "shapes_conv_channels": Step(shapes_conv_channels, "torch.shape_mismatch", "high"),
    "shapes_view_invalid": Step(shapes_view_invalid, "torch.shape_mismatch", "high"),
    "dtype_linear_half_weights": Step(dtype_linear_half_weights, "torch.dtype_mismatch", "high"),
    "dtype_mm_float_double": Step(dtype_mm_float_double, "torch.dtype_mismatch", "high"),
    "dtype_conv_double_input": Step(dtype_conv_double_input, "torch.dtype_mismatch", "high"),
    "dtype_nll_float_target": Step(dtype_nll_float_target, "torch.dtype_mismatch", "high"),
    "dtype_embedding_float_ids": Step(dtype_embedding_float_ids, "torch.dtype_mismatch", "high"),
    "index_embedding_past_table": Step(index_embedding_past_table, "cpu.index_error", "high"),
    "index_cross_entropy_target": Step(index_cross_entropy_target, "cpu.index_error", "high"),
    "index_gather_past_dimension": Step(index_gather_past_dimension, "cpu.index_error", "high"),
    "index_tensor_past_end": Step(index_tensor_past_end, "cpu.index_error", "high"),
    "device_meta_weights_cpu_input": Step(device_meta_weights_cpu_input, "torch.device_mismatch", "high"),
    "device_meta_cpu_cat": Step(device_meta_cpu_cat, "torch.device_mismatch", "high"),
    "cuda_tensor_without_driver": Step(cuda_tensor_without_driver, "cuda.not_available", "high"),
    "cuda_model_without_driver": Step(cuda_model_without_driver, "cuda.not_available", "high"),
    "nan_anomaly_log_zero": Step(nan_anomaly_log_zero, "torch.nan_inf", "high"),
    "nan_anomaly_zero_over_zero": Step(nan_anomaly_zero_over_zero, "torch.nan_inf", "high"),
    "ckpt_load_state_dict_size": Step(ckpt_load_state_dict_size, "hf.checkpoint_size_mismatch", "high"),
    "host_memory_decoy": Step(host_memory_decoy, "none", "-"),
    "hf_labels_past_num_labels": Step(hf_labels_past_num_labels, "cpu.index_error", "high", "transformers"),
    "hf_float_labels_single_label": Step(hf_float_labels_single_label, "torch.shape_mismatch", "high", "transformers"),
    "hf_added_tokens_without_resize": Step(hf_added_tokens_without_resize, "cpu.index_error", "high", "transformers"),
    "hf_sequence_longer_than_positions": Step(
        hf_sequence_longer_than_positions, "torch.shape_mismatch", "high", "transformers", ("cpu.index_error",)
    ),
    "hf_checkpoint_num_labels": Step(hf_checkpoint_num_labels, "hf.checkpoint_size_mismatch", "high", "transformers"),
    "hf_bf16_model_float_inputs_embeds": Step(
        hf_bf16_model_float_inputs_embeds, "torch.dtype_mismatch", "high", "transformers"
    ),
    "hf_regression_nan_target": Step(hf_regression_nan_target, "torch.nan_inf", "high", "transformers"),
    "hf_pad_without_pad_token_decoy": Step(hf_pad_without_pad_token_decoy, "none", "-", "transformers"),
}


if __name__ == "__main__":
    from step_cli import main

    sys.exit(main(sys.argv, STEPS, lambda step: [step.expected, step.confidence, step.uses, *step.also]))
