"""Save the tensors of a failing training step for ``faultline replay``.

Wrap a training step in :func:`capture`. When the step raises a CUDA error (a device-side assert,
an illegal memory access, a cuBLAS / cuDNN / NCCL failure, out of memory) the batch and the model
facts that explain it (vocabulary size, number of classes, pad and ignore ids) are written as a
safetensors snapshot with its metadata, the traceback is written next to it, and the exception is
re-raised unchanged::

    from faultline_capture import capture

    for step, batch in enumerate(loader):
        with capture(batch, model=model):          # batch as the DataLoader gives it (CPU)
            batch = {k: v.to("cuda") for k, v in batch.items()}
            loss = model(**batch).loss
            loss.backward()

then ``faultline analyze faultline-snapshot-….log --snapshot faultline-snapshot-….safetensors``.

After a device-side assert the CUDA context is lost and no tensor can be copied off the GPU
any more: give :func:`capture` the batch *before* ``.to(device)`` (a CPU tensor stays readable).
Tensors that cannot be read are listed in the metadata (``capture.skipped.<name>``).

Needs numpy and safetensors; torch is used only when the tensors given are torch tensors (it is
never imported here). Uploads to a faultline server use urllib only.

bfloat16: ``safetensors.numpy`` has no bfloat16, so a bfloat16 tensor is written as its raw
16-bit patterns and its header entry is then marked ``BF16``: the snapshot holds the exact values
with their real dtype, and ``dtype.<name>`` in the metadata stays true. (Converting to float32
and recording ``dtype.<name>=bfloat16`` would make faultline's ``consistency`` check report a
dtype mismatch that never happened.)

Metadata written (all values are strings, as safetensors requires):

* ``ignore_index`` (-100 unless given), and from a Hugging Face style model: ``vocab_size`` and
  ``num_embeddings`` (the rows of ``get_input_embeddings()``, the bound the lookup really has;
  ``config.vocab_size`` when there is no embedding), ``num_classes`` (the rows of the LM head
  for a language model, ``config.num_labels`` for a ``…Classification`` model, left out
  otherwise: every HF config has ``num_labels = 2``), ``max_position_embeddings``,
  ``type_vocab_size``, ``padding_idx`` (``pad_token_id``), the position keys of encoder and
  decoder (``max_encoder_position_embeddings``, LED's ``attention_window`` as ``"512,512"``, …),
  the widths the ``hidden_size`` check reads (``hidden_size``, ``embedding_size``, …), and
  ``model.<field>`` for the config fields as they are;
* ``device.<tensor>`` and ``dtype.<tensor>`` for torch tensors (read by the ``consistency``
  check), ``role.<role>`` when a nested batch holds a role under a prefixed name;
* ``capture.*``: what was captured and why (error line, time, skipped tensors, notes);
* the caller's ``params`` last: they override everything above.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import numbers
import os
import re
import shlex
import struct
import sys
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type, Union

import numpy as np
import safetensors.numpy

__all__ = [
    "Capture",
    "PreflightError",
    "PreflightResult",
    "UploadError",
    "capture",
    "hf_preflight_callback",
    "lightning_preflight_callback",
    "looks_like_cuda_error",
    "model_facts",
    "preflight",
    "read_header",
    "save_snapshot",
    "upload",
]

__version__ = "0.1.0"

#: The target value PyTorch's losses skip by default.
IGNORE_INDEX = -100

#: faultline refuses snapshots larger than this by default (``Limits::max_bytes``).
FAULTLINE_MAX_BYTES = 2 << 30

#: Roles the replay checks look tensors up by (``role.<role>`` names the tensor).
ROLES = (
    "labels",
    "logits",
    "input_ids",
    "decoder_input_ids",
    "position_ids",
    "token_type_ids",
    "attention_mask",
)

#: Config fields recorded as ``model.<field>``.
CONFIG_FIELDS = (
    "model_type",
    "vocab_size",
    "num_labels",
    "problem_type",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "decoder_start_token_id",
    "max_position_embeddings",
    "n_positions",
    "max_target_positions",
    "max_source_positions",
    "max_encoder_position_embeddings",
    "max_decoder_position_embeddings",
    "attention_window",
    "position_embedding_type",
    "position_biased_input",
    "type_vocab_size",
    "is_encoder_decoder",
    "hidden_size",
    "embedding_size",
    "input_embedding_size",
    "word_embed_proj_dim",
    "cross_attention_hidden_size",
)

#: Config fields copied to the top level as they are: the limits and roles the replay checks
#: read (positions of encoder and decoder, whether labels feed a decoder). ``num_labels`` is not
#: among them: every Hugging Face config has one (2 by default), so it says nothing of a language
#: model's labels.
TOP_LEVEL_FIELDS = (
    "model_type",
    "is_encoder_decoder",
    "max_position_embeddings",
    "n_positions",
    "max_target_positions",
    "max_source_positions",
    "max_encoder_position_embeddings",
    "max_decoder_position_embeddings",
    "attention_window",
    "position_embedding_type",
    "position_biased_input",
    "type_vocab_size",
    "pad_token_id",
    "decoder_start_token_id",
    "problem_type",
    "hidden_size",
    "embedding_size",
    "input_embedding_size",
    "word_embed_proj_dim",
    "cross_attention_hidden_size",
)

#: Tokenizers say "no limit" with a huge ``model_max_length`` (int(1e30)).
_NO_LIMIT = 10**9

# numpy kinds and sizes faultline reads (bool, int8-64, uint8-64, float16/32/64).
_SUPPORTED = {("b", 1), ("i", 1), ("i", 2), ("i", 4), ("i", 8), ("u", 1), ("u", 2), ("u", 4), ("u", 8),
              ("f", 2), ("f", 4), ("f", 8)}

# What a CUDA / GPU failure, or the CPU form of a failure the replay checks confirm, says.
_ERROR_PATTERN = re.compile(
    "|".join(
        [
            r"CUDA",
            r"cu(?:BLAS|DNN|FFT|SOLVER|SPARSE)",
            r"CU(?:BLAS|DNN|FFT|SOLVER|SPARSE)_STATUS",
            r"NCCL",
            r"device-side assert",
            r"out of memory",
            r"illegal memory access",
            r"illegal instruction",
            r"misaligned address",
            r"unspecified launch failure",
            r"cudaError",
            r"HIP error|hipError",
            # The CPU forms of the same faults (embedding, nll_loss, mixed devices, dtypes).
            r"index out of range in self",
            r"Target -?\d+ is out of bounds",
            r"Expected all tensors to be on the same device",
            r"expected scalar type",
        ]
    )
)
_ERROR_TYPES = {"OutOfMemoryError", "AcceleratorError", "DistBackendError", "CudaError"}


def looks_like_cuda_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) looks like a CUDA/GPU failure.

    Matches CUDA, cuBLAS, cuDNN, NCCL, HIP errors, device-side asserts, out of memory
    (``torch.cuda.OutOfMemoryError``), and the CPU forms of the faults faultline's replay checks
    confirm (``index out of range in self``, ``Target 5 is out of bounds``, mixed devices,
    ``expected scalar type``).
    """
    seen: List[int] = []
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.append(id(current))
        if type(current).__name__ in _ERROR_TYPES or _ERROR_PATTERN.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


# ---------------------------------------------------------------------------------------------
# Tensors


class _Tensor(NamedTuple):
    """A tensor ready to write: little-endian, C order; bfloat16 as its raw uint16 patterns."""

    array: np.ndarray
    bf16: bool
    torch_dtype: Optional[str]
    device: Optional[str]


class _Skip(Exception):
    """A value that looked like a tensor but cannot be written (the reason is the message)."""


def _is_torch_tensor(value: Any) -> bool:
    # torch is never imported here: a torch tensor can only exist if the caller imported it.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_number_list(value: Any) -> bool:
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(
        _is_number_list(v) or (isinstance(v, numbers.Real) and not isinstance(v, np.ndarray)) for v in value
    )


def _is_tensor(value: Any) -> bool:
    if isinstance(value, (np.str_, np.bytes_)):
        return False
    return isinstance(value, (np.ndarray, np.generic)) or _is_torch_tensor(value) or _is_number_list(value)


def _flatten(value: Any, prefix: str, out: Dict[str, Any]) -> None:
    """Collects the tensors in ``value`` under dotted names; anything else is ignored."""
    if _is_tensor(value):
        out.setdefault(prefix or "batch", value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten(item, f"{prefix or 'batch'}.{i}", out)


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _from_torch(value: Any) -> _Tensor:
    torch = sys.modules["torch"]
    t = value.detach()
    dtype = str(t.dtype).replace("torch.", "")
    device = str(t.device)
    try:
        t = t.cpu().contiguous()
    except Exception as e:  # a sticky CUDA error: the context is gone
        raise _Skip(
            f"{dtype} {_shape_text(t.shape)} on {device} could not be copied to the CPU "
            f"({_first_line(e)}); capture the batch before .to(device)"
        ) from None
    try:
        if t.dtype == torch.bfloat16:
            array = t.view(torch.int16).numpy().view(np.uint16)
            return _Tensor(array, True, dtype, device)
        array = t.numpy()
    except Exception as e:
        raise _Skip(f"torch dtype {dtype} is not supported ({_first_line(e)})") from None
    return _Tensor(_little_endian_c(array), False, dtype, device)


def _little_endian_c(array: np.ndarray) -> np.ndarray:
    if (array.dtype.kind, array.dtype.itemsize) not in _SUPPORTED:
        raise _Skip(f"numpy dtype {array.dtype} is not supported")
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array)


def _convert(value: Any) -> _Tensor:
    if _is_torch_tensor(value):
        return _from_torch(value)
    if _is_number_list(value):
        try:
            array = np.asarray(value)
        except ValueError:
            raise _Skip("a ragged list (rows of different lengths)") from None
        if array.dtype == object:
            raise _Skip("a ragged list (rows of different lengths)")
        if array.dtype.kind == "i":  # Python ints; uint64 only when one is past int64
            array = array.astype(np.int64)
    else:
        array = np.asarray(value)
    if array.dtype.name == "bfloat16":  # ml_dtypes (JAX) bfloat16
        return _Tensor(np.ascontiguousarray(array).view(np.uint16), True, None, None)
    return _Tensor(_little_endian_c(array), False, None, None)


def _text(value: Any) -> str:
    """A parameter value as metadata text (booleans as JSON writes them)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _first_line(exc: BaseException, limit: int = 500) -> str:
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line[:limit]


# ---------------------------------------------------------------------------------------------
# Model facts


def _unwrap(model: Any) -> Any:
    """The model inside DistributedDataParallel (``.module``), torch.compile (``._orig_mod``) or
    a LightningModule that holds it as ``.model`` (only when the outer object is no model itself:
    a Hugging Face model's own ``.model`` is its body, without the head)."""
    for _ in range(8):
        inner = None
        outer_is_model = hasattr(model, "config") or hasattr(model, "get_input_embeddings")
        wrappers = ("module", "_orig_mod") if outer_is_model else ("module", "_orig_mod", "model")
        for attr in wrappers:
            candidate = getattr(model, attr, None)
            if candidate is not None and candidate is not model and (
                hasattr(candidate, "config") or hasattr(candidate, "get_input_embeddings")
            ):
                inner = candidate
                break
        if inner is None:
            return model
        model = inner
    return model


def _rows(model: Any, method: str) -> Optional[int]:
    """``model.<method>().weight.shape[0]``, or None (no CUDA call: shapes live on the host)."""
    fn = getattr(model, method, None)
    if not callable(fn):
        return None
    try:
        module = fn()
        shape = getattr(getattr(module, "weight", None), "shape", None)
        return int(shape[0]) if shape is not None and len(shape) >= 1 else None
    except Exception:
        return None


def _int_or_none(value: Any) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def _number_list(value: Any) -> Any:
    """A list of integers (LED's ``attention_window``, one per layer) as ``"512,512"``; any other
    value as it is."""
    if isinstance(value, (list, tuple)) and value and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value
    ):
        return ",".join(str(int(v)) for v in value)
    return value


def model_facts(model: Any = None, tokenizer: Any = None) -> Dict[str, str]:
    """The parameters a Hugging Face style model (or its config) gives the replay checks.

    ``model`` may be a ``PreTrainedModel`` (possibly wrapped in DDP or torch.compile) or a bare
    config. ``tokenizer``, when given, adds ``model.tokenizer_len`` and a note when it has more
    tokens than the embedding has rows (``add_tokens`` without ``resize_token_embeddings``).
    """
    facts: Dict[str, str] = {}
    config = None
    if model is not None:
        model = _unwrap(model)
        config = getattr(model, "config", None)
        if config is None and not hasattr(model, "get_input_embeddings") and (
            hasattr(model, "vocab_size") or hasattr(model, "num_labels")
        ):
            config, model = model, None  # a bare config
        if model is not None:
            facts["model.class"] = type(model).__name__
    if config is not None:
        for field in CONFIG_FIELDS:
            try:
                value = getattr(config, field, None)
            except Exception:
                value = None
            value = _number_list(value)
            if isinstance(value, (bool, numbers.Real, str)):
                facts[f"model.{field}"] = _text(value)

    vocab = _int_or_none(getattr(config, "vocab_size", None))
    embedding_rows = _rows(model, "get_input_embeddings")
    head_rows = _rows(model, "get_output_embeddings")
    if embedding_rows is not None:
        facts["model.input_embedding_rows"] = str(embedding_rows)
        facts["vocab_size"] = facts["num_embeddings"] = str(embedding_rows)
        if vocab is not None and vocab != embedding_rows:
            facts["capture.note.vocab_size"] = (
                f"config.vocab_size = {vocab} but the input embedding has {embedding_rows} rows; "
                f"vocab_size is the rows (the bound of the lookup)"
            )
    elif vocab is not None:
        facts["vocab_size"] = str(vocab)

    class_name = type(model).__name__ if model is not None else ""
    num_labels = _int_or_none(getattr(config, "num_labels", None))
    if head_rows is not None:
        facts["model.output_embedding_rows"] = str(head_rows)
        facts["num_classes"] = str(head_rows)
    elif num_labels is not None and class_name.endswith("Classification"):
        facts["num_classes"] = str(num_labels)

    for field in TOP_LEVEL_FIELDS:
        try:
            value = getattr(config, field, None)
        except Exception:
            value = None
        value = _number_list(value)
        if isinstance(value, (bool, numbers.Integral, str)):
            facts[field] = _text(value)
    # GPT-2 style configs name their position table n_positions.
    if "max_position_embeddings" not in facts and "n_positions" in facts:
        facts["max_position_embeddings"] = facts["n_positions"]
    pad = _int_or_none(getattr(config, "pad_token_id", None))

    if tokenizer is not None:
        try:
            tokens = len(tokenizer)
        except Exception:
            tokens = None
        longest = _int_or_none(getattr(tokenizer, "model_max_length", None))
        if longest is not None and 0 < longest < _NO_LIMIT:
            facts["model_max_length"] = str(longest)
        if tokens is not None:
            facts["model.tokenizer_len"] = facts["tokenizer_len"] = str(tokens)
            rows = embedding_rows if embedding_rows is not None else vocab
            if rows is not None and tokens > rows:
                facts["capture.note.tokenizer"] = (
                    f"the tokenizer has {tokens} tokens but the embedding has {rows} rows: "
                    f"call model.resize_token_embeddings(len(tokenizer)) after add_tokens"
                )
        if pad is None:
            pad = _int_or_none(getattr(tokenizer, "pad_token_id", None))
    if pad is not None:
        facts["padding_idx"] = str(pad)
    return facts


# ---------------------------------------------------------------------------------------------
# Snapshots


def _encode(arrays: Dict[str, np.ndarray], metadata: Dict[str, str], bf16: Sequence[str] = ()) -> bytes:
    """The safetensors bytes of ``arrays``; the tensors named in ``bf16`` hold raw bfloat16 bits
    (as uint16) and are marked ``BF16`` in the header (same element size, so no offset moves)."""
    data = safetensors.numpy.save(arrays, metadata=metadata)
    if not bf16:
        return data
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length].decode("utf-8"))
    for name in bf16:
        header[name]["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data[8 + length :]


def _write_atomically(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def save_snapshot(
    path: Union[str, "os.PathLike[str]"],
    tensors: Any,
    params: Optional[Mapping[str, Any]] = None,
    model: Any = None,
    tokenizer: Any = None,
) -> Dict[str, str]:
    """Writes ``tensors`` as a safetensors snapshot at ``path``; returns the metadata written.

    ``tensors`` is a mapping (nested mappings are flattened with ``.``: ``{"inputs": {"ids": t}}``
    gives ``inputs.ids``), a sequence (``batch.0``, ``batch.1``) or one tensor (``batch``). numpy
    arrays, torch tensors (``.detach().cpu()``) and lists of numbers (integers as int64) are
    written; strings, ``None`` and other objects are ignored; tensors that cannot be written
    (an unsupported dtype, a CUDA tensor after the context was lost) are listed as
    ``capture.skipped.<name>``.

    ``params`` are check parameters (``num_classes``, ``vocab_size``, ``ignore_index``,
    ``role.labels``, …), written as text (``None`` drops one); they override what ``model`` and
    ``tokenizer`` give (see :func:`model_facts`).
    """
    found: Dict[str, Any] = {}
    _flatten(tensors, "", found)

    arrays: Dict[str, np.ndarray] = {}
    bf16: List[str] = []
    metadata: Dict[str, str] = {"ignore_index": str(IGNORE_INDEX)}
    metadata.update(model_facts(model, tokenizer))
    for name, value in found.items():
        try:
            tensor = _convert(value)
        except _Skip as why:
            metadata[f"capture.skipped.{name}"] = str(why)
            continue
        arrays[name] = tensor.array
        if tensor.bf16:
            bf16.append(name)
        if tensor.device is not None:
            metadata[f"device.{name}"] = tensor.device
        if tensor.torch_dtype is not None:
            metadata[f"dtype.{name}"] = tensor.torch_dtype

    # A role held under a prefixed name (inputs.labels) is named for the checks.
    for role in ROLES:
        if role in arrays:
            continue
        holders = [n for n in arrays if n.rsplit(".", 1)[-1] == role]
        if len(holders) == 1:
            metadata[f"role.{role}"] = holders[0]

    for key, value in (params or {}).items():
        if value is None:
            metadata.pop(str(key), None)
        else:
            metadata[str(key)] = _text(value)

    _write_atomically(os.fspath(path), _encode(arrays, metadata, bf16))
    return metadata


def read_header(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The JSON header of a safetensors file: ``{name: {dtype, shape, data_offsets}, "__metadata__": {…}}``."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (length,) = struct.unpack("<Q", prefix)
        if length > 100 << 20:
            raise ValueError(f"{path}: not a safetensors file (header length {length})")
        header = json.loads(f.read(length).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the safetensors header is not a JSON object")
    return header


# ---------------------------------------------------------------------------------------------
# Upload


class UploadError(Exception):
    """An upload to a faultline server failed; ``result`` holds what had succeeded."""

    def __init__(self, message: str, result: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.result: Dict[str, Any] = dict(result or {})


def _post(url: str, body: bytes, content_type: str, token: Optional[str], timeout: float) -> Dict[str, Any]:
    headers = {
        "Content-Type": content_type,
        "Accept": "application/json",
        "User-Agent": f"faultline-capture/{__version__}",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    where = urllib.parse.urlsplit(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raw = e.read().decode("utf-8", "replace") if e.fp is not None else ""
        try:
            detail = json.loads(raw).get("detail") or raw
        except (ValueError, AttributeError):
            detail = raw
        raise UploadError(f"{where.path}: HTTP {e.code}: {str(detail).strip()[:500]}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise UploadError(f"cannot reach {where.scheme}://{where.netloc}: {reason}") from None
    try:
        answer = json.loads(text)
    except ValueError:
        raise UploadError(f"{where.path}: the answer is not JSON: {text[:200]!r}") from None
    if not isinstance(answer, dict):
        raise UploadError(f"{where.path}: the answer is not a JSON object: {text[:200]!r}")
    return answer


def upload(
    server: str,
    log: Union[str, bytes],
    snapshot: Union[str, "os.PathLike[str]", bytes, None] = None,
    token: Optional[str] = None,
    project: Optional[str] = None,
    params: Optional[Mapping[str, Any]] = None,
    timeout: float = 120.0,
) -> Dict[str, Any]:
    """Stores ``log`` as an incident on a faultline server and attaches ``snapshot`` to it.

    ``POST {server}/api/v1/analyze?store=true`` with the log (``text/plain``), then
    ``POST {server}/api/v1/incidents/{incident_id}/snapshots`` with the snapshot's bytes
    (``application/octet-stream``; ``params`` go in the query string and override the file's
    metadata). Both carry ``Authorization: Bearer <token>``.

    Returns ``{"incident_id", "group_id", "snapshot_id", "job_id", "status_url"}`` (the last three
    only with a snapshot; ``status_url`` absolute). Raises :class:`UploadError`.
    """
    base = server.rstrip("/")
    query = {"store": "true"}
    if project:
        query["project"] = project
    body = log.encode("utf-8") if isinstance(log, str) else bytes(log)
    answer = _post(
        f"{base}/api/v1/analyze?{urllib.parse.urlencode(query)}",
        body,
        "text/plain; charset=utf-8",
        token,
        timeout,
    )
    incident = answer.get("incident_id")
    if isinstance(incident, bool) or not isinstance(incident, int):
        raise UploadError("the server stored no incident (its answer has no incident_id)")
    result: Dict[str, Any] = {"incident_id": incident, "group_id": answer.get("group_id")}
    if snapshot is None:
        return result
    if isinstance(snapshot, (bytes, bytearray)):
        data = bytes(snapshot)
    else:
        with open(snapshot, "rb") as f:
            data = f.read()
    url = f"{base}/api/v1/incidents/{incident}/snapshots"
    if params:
        url += "?" + urllib.parse.urlencode({str(k): _text(v) for k, v in params.items() if v is not None})
    try:
        accepted = _post(url, data, "application/octet-stream", token, timeout)
    except UploadError as e:
        raise UploadError(f"incident {incident} stored, but the snapshot was refused: {e}", result) from None
    result["snapshot_id"] = accepted.get("snapshot_id")
    result["job_id"] = accepted.get("job_id")
    status = accepted.get("status_url")
    result["status_url"] = base + status if isinstance(status, str) and status.startswith("/") else status
    return result


# ---------------------------------------------------------------------------------------------
# The context manager


def _default_path(directory: Optional[str] = None) -> str:
    directory = directory or os.environ.get("FAULTLINE_SNAPSHOT_DIR") or os.getcwd()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    rank = os.environ.get("RANK")
    stem = f"faultline-snapshot-{stamp}-pid{os.getpid()}" + (f"-rank{rank}" if rank else "")
    path = os.path.join(directory, stem + ".safetensors")
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(directory, f"{stem}-{n}.safetensors")
    return path


def _suggest_check(names: Sequence[str], metadata: Mapping[str, str], error: str) -> str:
    """The replay check most likely to explain ``error`` on these tensors (for the hint line)."""
    leaves = {n.rsplit(".", 1)[-1] for n in names} | {k[len("role.") :] for k in metadata if k.startswith("role.")}
    if "same device" in error or "expected scalar type" in error:
        return "consistency"
    if "index out of range" in error or ("input_ids" in leaves and "labels" not in leaves):
        return "index_bounds"
    if leaves & {"labels", "label", "targets", "target", "y"}:
        return "target_bounds"
    if "input_ids" in leaves:
        return "index_bounds"
    return "finite"


def _warn(message: str) -> None:
    print(f"faultline: warning: {message}", file=sys.stderr, flush=True)


def _tail(path: str, limit: int = 1 << 20) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read().decode("utf-8", "replace")


class Capture:
    """The context manager :func:`capture` returns; after the block it tells what happened.

    Attributes: ``snapshot_path`` and ``log_path`` (None until something was saved),
    ``metadata`` (what :func:`save_snapshot` wrote), ``error`` (the exception captured),
    ``uploaded`` (what :func:`upload` returned). ``add(name=tensor)`` adds tensors made inside
    the block (``cap.add(logits=out.logits)``).
    """

    def __init__(
        self,
        batch: Any = None,
        model: Any = None,
        path: Union[str, "os.PathLike[str]", None] = None,
        params: Optional[Mapping[str, Any]] = None,
        server: Optional[str] = None,
        token: Optional[str] = None,
        reraise: bool = True,
        only_cuda: bool = True,
        tokenizer: Any = None,
        project: Optional[str] = None,
        log_file: Union[str, "os.PathLike[str]", None] = None,
        timeout: float = 120.0,
    ) -> None:
        self.batch = batch
        self.model = model
        self.path = path
        self.params = dict(params or {})
        self.server = os.environ.get("FAULTLINE_SERVER") if server is None else server
        self.token = os.environ.get("FAULTLINE_TOKEN") if token is None else token
        self.reraise = reraise
        self.only_cuda = only_cuda
        self.tokenizer = tokenizer
        self.project = project
        self.log_file = log_file
        self.timeout = timeout
        self.extra: Dict[str, Any] = {}
        self.snapshot_path: Optional[str] = None
        self.log_path: Optional[str] = None
        self.metadata: Optional[Dict[str, str]] = None
        self.error: Optional[BaseException] = None
        self.uploaded: Optional[Dict[str, Any]] = None

    def add(self, tensors: Optional[Mapping[str, Any]] = None, **named: Any) -> None:
        """Adds tensors to save with the batch on failure (later ones win on a name clash)."""
        self.extra.update(tensors or {})
        self.extra.update(named)

    def __enter__(self) -> "Capture":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        if self.only_cuda and not looks_like_cuda_error(exc):
            return False
        self.error = exc
        try:
            self._record(exc, tb)
        except Exception as e:  # the original exception must come through, whatever happens here
            _warn(f"the failing step could not be captured: {_first_line(e)}")
        return not self.reraise

    def _resolve_path(self) -> str:
        if self.path is None:
            return _default_path()
        path = os.fspath(self.path)
        is_dir = os.path.isdir(path) or path.endswith(("/", os.sep))
        return _default_path(path) if is_dir else path

    def _record(self, exc: BaseException, tb: Optional[TracebackType]) -> None:
        log = "".join(traceback.format_exception(type(exc), exc, tb))
        if self.log_file is not None:
            try:
                log = _tail(os.fspath(self.log_file)) + "\n" + log
            except OSError as e:
                _warn(f"cannot read the log file {self.log_file}: {e}")

        tensors: Dict[str, Any] = {}
        _flatten(self.batch, "", tensors)
        for name, value in self.extra.items():
            tensors.pop(name, None)
            _flatten(value, name, tensors)

        snapshot: Optional[str] = None
        if tensors:
            snapshot = self._resolve_path()
            info = {
                "capture.error": _first_line(exc),
                "capture.time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "capture.version": __version__,
            }
            torch = sys.modules.get("torch")
            if torch is not None:
                info["capture.torch"] = str(getattr(torch, "__version__", "?"))
            self.metadata = save_snapshot(
                snapshot, tensors, params={**info, **self.params}, model=self.model, tokenizer=self.tokenizer
            )
            self.snapshot_path = os.path.abspath(snapshot)
            self.log_path = os.path.splitext(self.snapshot_path)[0] + ".log"
            with open(self.log_path, "w", encoding="utf-8") as f:
                f.write(log)
            self._announce()
        else:
            _warn(f"{_first_line(exc, 120)}: the batch holds no tensors, no snapshot was saved")

        if self.server:
            try:
                self.uploaded = upload(
                    self.server, log, self.snapshot_path, self.token, self.project, timeout=self.timeout
                )
            except Exception as e:
                _warn(f"upload to {self.server} failed: {e}")
            else:
                where = self.uploaded.get("status_url") or f"incident {self.uploaded['incident_id']}"
                print(f"faultline: uploaded to {self.server}: replay job at {where}", file=sys.stderr, flush=True)

    def _announce(self) -> None:
        metadata = self.metadata or {}
        names = [k for k in read_header(self.snapshot_path or "") if k != "__metadata__"]
        saved = len(names)
        check = _suggest_check(names, metadata, str(self.error))
        skipped = sorted(k[len("capture.skipped.") :] for k in metadata if k.startswith("capture.skipped."))
        snap, log = shlex.quote(self.snapshot_path or ""), shlex.quote(self.log_path or "")
        note = f" ({len(skipped)} not readable: {', '.join(skipped)}; see capture.skipped.*)" if skipped else ""
        print(
            f"faultline: saved {saved} tensors of the failing step to {snap}{note} and the traceback to "
            f"{log}; diagnose with `faultline analyze {log} --snapshot {snap}` "
            f"or run one check: `faultline replay {snap} --check {check}` (--list-checks lists them)",
            file=sys.stderr,
            flush=True,
        )
        size = os.path.getsize(self.snapshot_path or "")
        if size > FAULTLINE_MAX_BYTES:
            _warn(f"the snapshot is {size} bytes; faultline refuses snapshots over {FAULTLINE_MAX_BYTES} by default")


def capture(
    batch: Any = None,
    model: Any = None,
    path: Union[str, "os.PathLike[str]", None] = None,
    params: Optional[Mapping[str, Any]] = None,
    server: Optional[str] = None,
    token: Optional[str] = None,
    reraise: bool = True,
    only_cuda: bool = True,
    tokenizer: Any = None,
    project: Optional[str] = None,
    log_file: Union[str, "os.PathLike[str]", None] = None,
    timeout: float = 120.0,
) -> Capture:
    """A context manager that saves the failing step's tensors when the block raises.

    On an exception that :func:`looks_like_cuda_error` (any ``Exception`` with
    ``only_cuda=False``), ``batch`` (and tensors given to ``Capture.add``) is saved with
    :func:`save_snapshot` at ``path`` (default: ``faultline-snapshot-<time>-pid<pid>.safetensors``
    in ``$FAULTLINE_SNAPSHOT_DIR`` or the working directory; a directory puts it there), the
    traceback next to it (``.log``, with the tail of ``log_file`` before it when given), and one
    line on stderr says how to run ``faultline analyze --snapshot`` / ``faultline replay``.

    With a ``server`` (default ``$FAULTLINE_SERVER``; ``""`` for none) and ``token`` (default
    ``$FAULTLINE_TOKEN``) the traceback and the snapshot are uploaded (:func:`upload`).

    Nothing here ever replaces the original exception: failures to save or upload are printed as
    warnings. The exception is re-raised unless ``reraise=False`` (then a captured exception is
    swallowed; one that was not captured always propagates). Nothing is done while the block
    succeeds (no copy, no allocation).
    """
    return Capture(
        batch=batch,
        model=model,
        path=path,
        params=params,
        server=server,
        token=token,
        reraise=reraise,
        only_cuda=only_cuda,
        tokenizer=tokenizer,
        project=project,
        log_file=log_file,
        timeout=timeout,
    )


# ---------------------------------------------------------------------------------------------
# Command line


def _param(text: str) -> Tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


# ---------------------------------------------------------------------------------------------
# Pre-flight: the batch checked before the job spends GPU hours


class PreflightError(Exception):
    """``faultline preflight`` found a problem the job would meet (its report is the message)."""

    def __init__(self, report: str, snapshot: str) -> None:
        super().__init__(report)
        self.report = report
        self.snapshot = snapshot


class PreflightResult(NamedTuple):
    """What ``faultline preflight`` said of a batch."""

    #: 0 no problem found, 1 a problem, 2 bad input (see ``output``).
    returncode: int
    #: Its report (standard output, then standard error).
    output: str
    #: Where the batch was saved.
    snapshot: str

    @property
    def clean(self) -> bool:
        return self.returncode == 0


def _faultline_binary(binary: Optional[str]) -> str:
    return binary or os.environ.get("FAULTLINE_BIN") or "faultline"


def preflight(
    batch: Any,
    model: Any = None,
    tokenizer: Any = None,
    params: Optional[Mapping[str, Any]] = None,
    config: Optional[str] = None,
    path: Optional[str] = None,
    binary: Optional[str] = None,
    raise_on_problem: bool = True,
    timeout: float = 300.0,
) -> PreflightResult:
    """Saves ``batch`` (with the facts of ``model`` / ``tokenizer``, see :func:`save_snapshot`)
    and runs ``faultline preflight`` on it: labels or ids past the vocabulary, sequences longer
    than the position table, NaN / Inf, tensors that disagree, before the job starts.

    ``binary`` is the faultline executable (default ``$FAULTLINE_BIN``, else ``faultline`` on the
    PATH); ``config`` a Hugging Face ``config.json`` to read facts from. A problem raises
    :class:`PreflightError` unless ``raise_on_problem`` is false; a missing binary or a snapshot
    faultline cannot read gives a result with ``returncode`` 2 and a warning, never an exception,
    so a broken check never stops training by itself.
    """
    import subprocess
    import tempfile

    if path is None:
        handle, path = tempfile.mkstemp(prefix="faultline-preflight-", suffix=".safetensors")
        os.close(handle)
    save_snapshot(path, batch, params=params, model=model, tokenizer=tokenizer)
    command = [_faultline_binary(binary), "preflight", "--snapshot", path]
    if config is not None:
        command += ["--config", os.fspath(config)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        _warn(f"preflight did not run ({command[0]}: {e}); set FAULTLINE_BIN to the faultline binary")
        return PreflightResult(2, str(e), path)
    result = PreflightResult(run.returncode, run.stdout + run.stderr, path)
    if run.returncode == 1 and raise_on_problem:
        raise PreflightError(result.output.strip(), path)
    if run.returncode not in (0, 1):
        _warn(f"preflight could not check the batch: {result.output.strip()}")
    return result


class _Every:
    """Which steps a callback checks: the first, then every ``every``-th (0: only the first)."""

    def __init__(self, every: int) -> None:
        if every < 0:
            raise ValueError("every is a number of steps, 0 for the first batch only")
        self.every = every

    def wants(self, step: int) -> bool:
        return step == 0 or (self.every > 0 and step % self.every == 0)


def hf_preflight_callback(every: int = 0, **options: Any) -> Any:
    """A ``transformers.TrainerCallback`` that runs :func:`preflight` on the first training batch
    (``every`` > 0: on a fresh batch every ``every`` steps too) before the step runs, with the
    trainer's model and tokenizer; ``options`` go to :func:`preflight` (``binary``, ``config``,
    ``params``, ``raise_on_problem``). A problem stops training with :class:`PreflightError`::

        trainer = Trainer(..., callbacks=[hf_preflight_callback()])

    The Trainer gives its callbacks the data loader, not the batch: the batch checked is the
    loader's first (a fresh iterator's, so with shuffling it is one of the epoch's batches).
    """
    from transformers import TrainerCallback  # only when asked for

    steps = _Every(every)

    class FaultlinePreflight(TrainerCallback):  # type: ignore[misc, valid-type]
        def _check(self, state: Any, kwargs: Dict[str, Any]) -> None:
            loader = kwargs.get("train_dataloader")
            if loader is None:
                _warn("preflight: the Trainer gave no train_dataloader; nothing checked")
                return
            batch = next(iter(loader))
            model = kwargs.get("model")
            tokenizer = kwargs.get("processing_class", kwargs.get("tokenizer"))
            result = preflight(batch, model=model, tokenizer=tokenizer, **options)
            _announce_preflight(result, getattr(state, "global_step", 0))

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._check(state, kwargs)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = getattr(state, "global_step", 0)
            if step > 0 and steps.wants(step):
                self._check(state, kwargs)

    return FaultlinePreflight()


def lightning_preflight_callback(every: int = 0, **options: Any) -> Any:
    """A Lightning ``Callback`` that runs :func:`preflight` on the first training batch (and every
    ``every``-th batch when ``every`` > 0), the batch the step is about to train on, with the
    LightningModule as the model (its ``tokenizer`` attribute when it has one); ``options`` go to
    :func:`preflight`::

        trainer = L.Trainer(callbacks=[lightning_preflight_callback(every=1000)])
    """
    try:
        from lightning.pytorch import Callback  # Lightning 2
    except ImportError:
        from pytorch_lightning import Callback  # the older package name

    steps = _Every(every)

    class FaultlinePreflight(Callback):  # type: ignore[misc, valid-type]
        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            step = getattr(trainer, "global_step", batch_idx)
            if steps.wants(step):
                tokenizer = getattr(pl_module, "tokenizer", None)
                result = preflight(batch, model=pl_module, tokenizer=tokenizer, **options)
                _announce_preflight(result, step)

    return FaultlinePreflight()


def _announce_preflight(result: PreflightResult, step: int) -> None:
    if result.clean:
        first = result.output.splitlines()[0] if result.output else "no problem found"
        print(f"faultline: step {step}: {first}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``upload`` a snapshot with its log to a server, or ``show`` what a snapshot holds."""
    parser = argparse.ArgumentParser(prog="faultline-capture", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upload", help="store the log as an incident and attach the snapshot")
    up.add_argument("snapshot", help="safetensors or .npz snapshot")
    up.add_argument("--log", help="log or traceback to analyse ('-' for stdin; default: the snapshot's .log)")
    up.add_argument("--server", default=os.environ.get("FAULTLINE_SERVER"), help="default $FAULTLINE_SERVER")
    up.add_argument("--token", default=os.environ.get("FAULTLINE_TOKEN"), help="default $FAULTLINE_TOKEN")
    up.add_argument("--project")
    up.add_argument("--param", action="append", type=_param, default=[], metavar="KEY=VALUE")
    up.add_argument("--timeout", type=float, default=600.0)
    show = commands.add_parser("show", help="print the tensors and metadata of a safetensors snapshot")
    show.add_argument("snapshot")
    args = parser.parse_args(argv)

    if args.command == "show":
        header = read_header(args.snapshot)
        for name, entry in header.items():
            if name != "__metadata__":
                print(f"{name}: {entry['dtype']} {_shape_text(entry['shape'])}")
        for key, value in sorted((header.get("__metadata__") or {}).items()):
            print(f"  {key} = {value}")
        return 0

    if not args.server:
        parser.error("no server: pass --server URL or set FAULTLINE_SERVER")
    log_path = args.log or os.path.splitext(args.snapshot)[0] + ".log"
    try:
        if log_path == "-":
            log = sys.stdin.read()
        else:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                log = f.read()
        result = upload(
            args.server, log, args.snapshot, args.token, args.project, dict(args.param), args.timeout
        )
    except (OSError, UploadError) as e:
        print(f"faultline_capture: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
