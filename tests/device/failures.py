"""Real training-step failures on a real GPU, one per process, for the device session.

    python3 tests/device/failures.py NAME DIR

runs the failing step NAME on the first CUDA device inside ``faultline_capture.capture``: the
batch (as the DataLoader gives it, on the CPU) and the model facts are saved as
``DIR/NAME.safetensors`` and the traceback beside it; the exception then ends the process as it
would end a training job, its traceback on stderr. ``tests/device/run.sh`` keeps that output as
the job's log and gives it to faultline. ``--list`` prints the names.

Each step is what users write, wrong in the way the articles in the seeds describe: a label equal
to the number of classes, a token id past the embedding, a probability outside [0, 1], tensors
on two devices, mixed dtypes, shapes that do not multiply, an allocation larger than the card;
and (``hf_*``) encoder-decoder and decoder-only Hugging Face steps past their tables: T5 labels
past the vocabulary, BART / GPT-2 / OPT / LED inputs past their positions, labels padded with
vocab_size, a token type past type_vocab_size. Their CPU twins, with the CPU's wording, are the
fixtures of ``tests/fixtures/replay`` (its ``generate.py``): each ``hf_*`` step should get the
verdicts listed in its README, on the GPU and on the CPU. The last steps are failures whose
wording only a GPU prints (a sampling kernel's assert, a memory-fraction cap, index_put / scatter /
one_hot asserts, Triton kernels reading past their input, two NCCL ranks on one GPU), kept so
that a newer torch's wording is checked against the rules.
Nothing here is downloaded: the Hugging Face model is built from a small config.
"""

import os
import sys
import time

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


def _hf_step(model, batch):
    """One training step of a Hugging Face model on the GPU (the batch moved there)."""
    outputs = model(**{k: v.to(CUDA) for k, v in batch.items()})
    outputs.loss.backward()
    print(f"loss {outputs.loss.item():.4f}")


def _bart(max_positions):
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(vocab_size=120, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_position_embeddings=max_positions)
    return BartForConditionalGeneration(config).to(CUDA)


def hf_t5_labels_past_the_vocabulary(out):
    """T5 labels holding an id >= vocab_size: shifted right, they are the decoder's input ids
    (the decoder's embedding asserts). Saved with vocab_size only, as issue 20's user did."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config).to(CUDA)
    labels = torch.randint(1, 100, (2, 8))
    labels[1, 5] = 103
    batch = {"input_ids": torch.randint(1, 100, (2, 12)), "labels": labels}
    with capture(batch, path=out, params={"vocab_size": 100}):
        _hf_step(model, batch)


def hf_bart_input_longer_than_the_position_table(out):
    """BART inputs of 40 tokens against 32 positions (no truncation)."""
    torch.manual_seed(1)
    model = _bart(32)
    batch = {"input_ids": torch.randint(3, 120, (4, 40)), "attention_mask": torch.ones(4, 40, dtype=torch.long),
             "labels": torch.randint(3, 120, (4, 16))}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_bart_labels_padded_with_vocab_size(out):
    """BART labels padded with vocab_size instead of -100: they reach the decoder's embedding."""
    torch.manual_seed(2)
    model = _bart(64)
    labels = torch.randint(3, 120, (3, 12))
    labels[0, 9:] = 120
    labels[2, 6:] = 120
    batch = {"input_ids": torch.randint(3, 120, (3, 20)), "labels": labels}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_gpt2_past_n_positions(out):
    """A GPT-2 fed 30 tokens with n_positions 24."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(3)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=24, n_embd=32, n_layer=1, n_head=2)).to(CUDA)
    ids = torch.randint(0, 100, (2, 30))
    batch = {"input_ids": ids, "labels": ids.clone()}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_gpt2_labels_padded_with_vocab_size(out):
    """GPT-2 labels padded with vocab_size: the loss's class assert (nll_loss)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(4)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=1, n_head=2)).to(CUDA)
    ids = torch.randint(0, 100, (2, 16))
    labels = ids.clone()
    labels[1, 10:] = 100
    batch = {"input_ids": ids, "labels": labels}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_opt_past_its_positions(out):
    """An OPT (positions over the attention mask, from row 2) with a row of 30 tokens, 24 positions."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(5)
    config = OPTConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, ffn_dim=64,
                       num_attention_heads=2, max_position_embeddings=24, word_embed_proj_dim=32)
    model = OPTForCausalLM(config).to(CUDA)
    ids = torch.randint(3, 100, (2, 30))
    mask = torch.ones(2, 30, dtype=torch.long)
    mask[0, :10] = 0
    batch = {"input_ids": ids, "attention_mask": mask, "labels": ids.clone()}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_bert_token_type_past_type_vocab_size(out):
    """Token type 2 on a BERT with two token types."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(6)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, num_labels=3)
    model = BertForSequenceClassification(config).to(CUDA)
    types = torch.zeros(2, 16, dtype=torch.long)
    types[:, 8:] = 1
    types[1, 12:] = 2
    batch = {"input_ids": torch.randint(1, 100, (2, 16)), "token_type_ids": types, "labels": torch.tensor([0, 2])}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


def hf_led_encoder_past_its_positions(out):
    """An LED whose 50 input tokens, padded to its window of 16, pass 60 encoder positions."""
    from transformers import LEDConfig, LEDForConditionalGeneration

    torch.manual_seed(7)
    config = LEDConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                       decoder_ffn_dim=64, max_encoder_position_embeddings=60,
                       max_decoder_position_embeddings=20, attention_window=[16])
    model = LEDForConditionalGeneration(config).to(CUDA)
    batch = {"input_ids": torch.randint(3, 100, (2, 50)), "labels": torch.randint(3, 100, (2, 10))}
    with capture(batch, model=model, path=out):
        _hf_step(model, batch)


# CUDA-only wordings: failures whose message only a GPU prints (a kernel's assertion, the
# allocator's figures, the driver's and NCCL's statuses), kept so that a newer torch's wording is
# checked against the rules (tests/device_logs.rs).


def multinomial_with_nan_probabilities(out):
    """Sampling from float16 logits that overflowed: softmax gives NaN rows and the CUDA
    multinomial kernel asserts; the error surfaces at the next synchronizing call."""
    torch.manual_seed(6)
    batch = {"logits": torch.randn(4, 50)}
    with capture(batch, path=out, only_cuda=False):
        logits = batch["logits"].to(CUDA).half() * 1e5
        probs = torch.softmax(logits, dim=-1)
        tokens = torch.multinomial(probs, 1)
        print(tokens.tolist())


def device_index_past_the_gpus(out):
    """A device index written for a bigger machine: ``cuda:N`` with N GPUs visible."""
    model = nn.Linear(16, 4)
    batch = {"x": torch.randn(8, 16)}
    with capture(batch, path=out, only_cuda=False):
        model.to(f"cuda:{torch.cuda.device_count()}")
        print(model(batch["x"]).sum().item())


def memory_capped_by_fraction(out):
    """A process capped at 1 % of the card (set_per_process_memory_fraction) asking for 4 GiB."""
    torch.cuda.set_per_process_memory_fraction(0.01)
    model = nn.Linear(4096, 4096).to(CUDA)
    batch = {"x": torch.randn(64, 4096)}
    with capture(batch, path=out, only_cuda=False):
        x = batch["x"].to(CUDA).repeat(4096, 1)
        print(model(x).sum().item())


def activations_that_fill_the_card(out):
    """Activations kept step after step until the card is full, with expandable segments on
    (PYTORCH_CUDA_ALLOC_CONF, set before the first allocation): the allocator's figures when the
    card itself is exhausted."""
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    model = nn.Linear(4096, 4096).to(CUDA)
    batch = {"x": torch.randn(256, 4096)}
    with capture(batch, path=out, only_cuda=False):
        kept = []
        x = batch["x"].to(CUDA)
        while True:
            kept.append(torch.empty(1 << 29, 4, device=CUDA))
            kept.append(model(x))


def index_put_past_the_end(out):
    """Seen tokens marked in a per-row mask by ids that include the vocabulary size."""
    batch = {"token_ids": torch.randint(0, 100, (4, 20))}
    batch["token_ids"][1, 3] = 100
    with capture(batch, path=out, params={"vocab_size": 100}):
        ids = batch["token_ids"].to(CUDA)
        seen = torch.zeros(4, 100, device=CUDA)
        seen[torch.arange(4, device=CUDA).unsqueeze(1), ids] = 1.0
        print(seen.sum().item())


def scatter_add_past_the_classes(out):
    """Per-class counts accumulated with scatter_add_ by labels that include a class the head lacks."""
    batch = {"labels": torch.randint(0, 10, (64,))}
    batch["labels"][17] = 10
    with capture(batch, path=out, params={"num_classes": 10}):
        labels = batch["labels"].to(CUDA)
        counts = torch.zeros(10, device=CUDA).scatter_add_(0, labels, torch.ones(64, device=CUDA))
        print(counts.tolist())


def one_hot_past_num_classes(out):
    """Segmentation-style one-hot targets from labels that include num_classes."""
    batch = {"labels": torch.randint(0, 4, (32,))}
    batch["labels"][5] = 4
    with capture(batch, path=out, params={"num_classes": 4}):
        print(F.one_hot(batch["labels"].to(CUDA), num_classes=4).sum().item())


def embedding_ids_left_on_the_cpu(out):
    """An embedding moved to the GPU, its token ids not."""
    embed = nn.Embedding(100, 16).to(CUDA)
    batch = {"input_ids": torch.randint(0, 100, (4, 8))}
    with capture(batch, path=out, only_cuda=False):
        print(embed(batch["input_ids"]).sum().item())


def _triton_rows_with_a_stride_bug(out, elements, stride):
    """A hand-written Triton kernel that reads element ``i * stride`` for each ``i`` (unmasked):
    a stride applied where none belongs sends its loads far past the input."""
    import triton
    import triton.language as tl

    @triton.jit
    def gather_rows(src, dst, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs * stride))

    batch = {"x": torch.randn(elements)}
    with capture(batch, path=out, only_cuda=False):
        src = batch["x"].to(CUDA)
        dst = torch.empty_like(src)
        gather_rows[(src.numel() // 1024,)](src, dst, stride, BLOCK=1024)
        print(dst.sum().item())


def triton_kernel_offsets_overflowing_int32(out):
    """The stride bug with offsets that overflow int32: the addresses wrap out of the global
    address space."""
    _triton_rows_with_a_stride_bug(out, 1 << 20, 1_000_003)


def triton_kernel_reading_past_its_buffer(out):
    """The same bug, smaller: loads land up to 256 MiB past the input, in memory nothing mapped
    (with a stride of 30_000, 7.8 GB past it, an H200 answered like the int32 case)."""
    _triton_rows_with_a_stride_bug(out, 1 << 16, 1024)


# Cascades: a kernel that asserted leaves the CUDA context unusable, and the next library to
# start up (cuDNN, cuBLAS) reports its own failure. The assertion lines above are the root.


def assert_then_first_convolution(out):
    """Labels past the classes picked with gather (the assert is reported later), then the
    model's first convolution: cuDNN starts up in a context that is already broken."""
    batch = {"labels": torch.randint(0, 10, (16,))}
    batch["labels"][3] = 12
    conv = nn.Conv2d(3, 8, 3).to(CUDA)
    images = torch.randn(2, 3, 32, 32, device=CUDA)
    scores = torch.randn(16, 10, device=CUDA)
    with capture(batch, path=out, params={"num_classes": 10}):
        picked = scores.gather(1, batch["labels"].to(CUDA).unsqueeze(1))
        time.sleep(1)  # the host prepares the next batch; the kernel has asserted meanwhile
        print(conv(images).sum().item() + picked.sum().item())


def assert_then_first_matmul(out):
    """The same assert, then the first matrix product: cuBLAS creates its handle in the broken
    context."""
    batch = {"labels": torch.randint(0, 10, (16,))}
    batch["labels"][5] = 10
    head = nn.Linear(64, 10).to(CUDA)
    features = torch.randn(4, 64, device=CUDA)
    scores = torch.randn(16, 10, device=CUDA)
    with capture(batch, path=out, params={"num_classes": 10}):
        picked = scores.gather(1, batch["labels"].to(CUDA).unsqueeze(1))
        time.sleep(1)  # the host prepares the next batch; the kernel has asserted meanwhile
        print(head(features).sum().item() + picked.sum().item())

def _nccl_rank(rank, world):
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timedelta(seconds=20))
    t = torch.ones(4, device="cuda:0")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank}: {t.tolist()}")


def nccl_two_ranks_on_one_gpu(out):
    """Two ranks of one job both put on cuda:0 (LOCAL_RANK ignored): NCCL's communicator refuses
    them, or they wait out the collective's timeout."""
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    mp.spawn(_nccl_rank, args=(2,), nprocs=2)


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
    hf_t5_labels_past_the_vocabulary,
    hf_bart_input_longer_than_the_position_table,
    hf_bart_labels_padded_with_vocab_size,
    hf_gpt2_past_n_positions,
    hf_gpt2_labels_padded_with_vocab_size,
    hf_opt_past_its_positions,
    hf_bert_token_type_past_type_vocab_size,
    hf_led_encoder_past_its_positions,
    multinomial_with_nan_probabilities,
    device_index_past_the_gpus,
    memory_capped_by_fraction,
    activations_that_fill_the_card,
    index_put_past_the_end,
    scatter_add_past_the_classes,
    one_hot_past_num_classes,
    embedding_ids_left_on_the_cpu,
    triton_kernel_offsets_overflowing_int32,
    triton_kernel_reading_past_its_buffer,
    nccl_two_ranks_on_one_gpu,
    assert_then_first_convolution,
    assert_then_first_matmul,
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
