"""Real training-step failures on a real GPU, one per process, for the device session.

    python3 tests/device/failures.py NAME DIR

runs the failing step NAME on the first CUDA device inside ``faultline_capture.capture``: the
batch (as the DataLoader gives it, on the CPU) and the model facts are saved as
``DIR/NAME.safetensors`` and the traceback beside it; the exception then ends the process as it
would end a training job, its traceback on stderr. ``tests/device/run.sh`` keeps that output as
the job's log and gives it to faultline. ``--list`` prints the names.

Each step is what users write, wrong in the way the articles in the seeds describe: a label equal
to the number of classes, a token id past the embedding, a probability outside [0, 1], tensors
on two devices, mixed dtypes, shapes that do not multiply, an allocation larger than the card.
Nothing here is downloaded: the Hugging Face model is built from a small config.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from faultline_capture import capture  # noqa: E402

CUDA = torch.device("cuda")


def classifier_labels_out_of_range(out):
    """A binary classifier fed a label 2 (the dataset has three classes): the loss's assert is
    reported asynchronously, at ``loss.item()``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(CUDA)
    batch = {"features": torch.randn(64, 16), "labels": torch.randint(0, 2, (64,))}
    batch["labels"][[3, 40]] = 2
    with capture(batch, path=out, params={"num_classes": 2}):
        x, y = batch["features"].to(CUDA), batch["labels"].to(CUDA)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        print(f"loss {loss.item():.4f}")


def nll_labels_out_of_range_blocking(out):
    """The same mistake with CUDA_LAUNCH_BLOCKING=1 (set by run.sh) and an explicit log-softmax."""
    torch.manual_seed(1)
    model = nn.Linear(8, 5).to(CUDA)
    batch = {"x": torch.randn(32, 8), "labels": torch.randint(0, 5, (32,))}
    batch["labels"][31] = 5
    with capture(batch, path=out, params={"num_classes": 5}):
        logp = F.log_softmax(model(batch["x"].to(CUDA)), dim=-1)
        loss = F.nll_loss(logp, batch["labels"].to(CUDA))
        loss.backward()


def hf_token_id_past_the_embedding(out):
    """Tokens added to the tokenizer without ``resize_token_embeddings``: ids 1000..1001 reach a
    BERT whose embedding has 1000 rows."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(2)
    config = BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=128, num_labels=3,
    )
    model = BertForSequenceClassification(config).to(CUDA)
    ids = torch.randint(5, 1000, (4, 48))
    ids[1, 7] = 1000
    ids[2, 30] = 1001
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor([0, 2, 1, 0])}
    with capture(batch, model=model, path=out):
        outputs = model(**{k: v.to(CUDA) for k, v in batch.items()})
        outputs.loss.backward()
        print(f"loss {outputs.loss.item():.4f}")


def bce_on_logits_not_probabilities(out):
    """``binary_cross_entropy`` given raw scores (no sigmoid): values outside [0, 1]."""
    torch.manual_seed(3)
    batch = {"scores": torch.randn(128) * 3, "targets": torch.randint(0, 2, (128,)).float()}
    with capture(batch, path=out, params={"role.input": "scores"}):
        loss = F.binary_cross_entropy(batch["scores"].to(CUDA), batch["targets"].to(CUDA))
        print(f"loss {loss.item():.4f}")


def gather_index_past_the_dimension(out):
    """Per-class scores picked with ``gather`` by labels that include a class the head lacks."""
    torch.manual_seed(5)
    batch = {"logits": torch.randn(16, 10), "labels": torch.randint(0, 10, (16,))}
    batch["labels"][9] = 10
    with capture(batch, path=out, params={"num_classes": 10}):
        logits, labels = batch["logits"].to(CUDA), batch["labels"].to(CUDA)
        picked = logits.log_softmax(-1).gather(1, labels.unsqueeze(1))
        print(-picked.mean().item())


def input_left_on_the_cpu(out):
    """The model moved to the GPU, the batch not."""
    model = nn.Linear(16, 4).to(CUDA)
    batch = {"x": torch.randn(8, 16)}
    with capture(batch, path=out, only_cuda=False):
        print(model(batch["x"]).sum().item())


def half_weights_float_input(out):
    """A model cast to float16, its input still float32."""
    model = nn.Linear(16, 4).to(CUDA).half()
    batch = {"x": torch.randn(8, 16)}
    with capture(batch, path=out, only_cuda=False):
        print(model(batch["x"].to(CUDA)).sum().item())


def shapes_that_do_not_multiply(out):
    """A flattened feature size that is not the first layer's in_features."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10)).to(CUDA)
    batch = {"images": torch.randn(8, 3, 28, 28)}
    with capture(batch, path=out, only_cuda=False):
        print(model(batch["images"].to(CUDA)).sum().item())


def allocation_larger_than_the_card(out):
    """A batch far too large for the card: the caching allocator's out-of-memory message with
    its figures (a plain allocation that fails at once; nothing is over-committed)."""
    model = nn.Linear(4096, 4096).to(CUDA)
    batch = {"x": torch.randn(2, 4096)}
    with capture(batch, path=out):
        x = batch["x"].to(CUDA).repeat(6_000_000, 1)
        print(model(x).sum().item())


def nan_found_by_anomaly_detection(out):
    """``log(0)`` in a loss, found by ``torch.autograd.detect_anomaly``."""
    batch = {"probs": torch.tensor([0.5, 0.0, 0.25, 1.0])}
    with capture(batch, path=out, only_cuda=False):
        with torch.autograd.detect_anomaly():
            p = batch["probs"].to(CUDA).requires_grad_()
            loss = -(p * torch.log(p)).sum()
            loss.backward()


def embedding_then_matmul_without_blocking(out):
    """An out-of-range embedding lookup followed by more work: the error surfaces later, in
    whatever call synchronizes first."""
    torch.manual_seed(4)
    embed = nn.Embedding(500, 256).to(CUDA)
    proj = nn.Linear(256, 256).to(CUDA)
    batch = {"input_ids": torch.randint(0, 500, (8, 64))}
    batch["input_ids"][5, 60] = 500
    with capture(batch, path=out, params={"vocab_size": 500}):
        h = embed(batch["input_ids"].to(CUDA))
        for _ in range(4):
            h = torch.tanh(proj(h))
        print(h.norm().item())


CASES = {f.__name__: f for f in [
    classifier_labels_out_of_range,
    nll_labels_out_of_range_blocking,
    hf_token_id_past_the_embedding,
    bce_on_logits_not_probabilities,
    gather_index_past_the_dimension,
    input_left_on_the_cpu,
    half_weights_float_input,
    shapes_that_do_not_multiply,
    allocation_larger_than_the_card,
    nan_found_by_anomaly_detection,
    embedding_then_matmul_without_blocking,
]}


def main(argv):
    if argv[1:] == ["--list"]:
        print("\n".join(CASES))
        return 0
    if len(argv) != 3 or argv[1] not in CASES:
        print(f"usage: {argv[0]} NAME DIR (--list for the names)", file=sys.stderr)
        return 2
    name, directory = argv[1], argv[2]
    os.makedirs(directory, exist_ok=True)
    CASES[name](os.path.join(directory, f"{name}.safetensors"))
    print(f"{name}: the step did not fail", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
