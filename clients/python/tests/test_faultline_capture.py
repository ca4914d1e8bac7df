"""Tests of faultline_capture (numpy and safetensors only; the torch tests skip without torch).

Run against the installed package: ``pip install ./clients/python`` then
``python -m unittest discover -s clients/python/tests -v`` (or, without installing,
``PYTHONPATH=clients/python/src python -m unittest discover -s clients/python/tests -v``).
"""

from __future__ import annotations

import contextlib
import sys
import io
import json
import os
import socket
import struct
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file

import faultline_capture as fc  # the installed package (pip install ./clients/python)

try:
    import torch
except ImportError:
    torch = None

CUDA_ASSERT = "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported"


def metadata_of(path: str) -> Dict[str, str]:
    with safe_open(path, framework="np") as f:
        return dict(f.metadata() or {})


# ---------------------------------------------------------------------------------------------
# Fake Hugging Face objects


class Weight:
    def __init__(self, rows: int, cols: int = 8) -> None:
        self.shape = (rows, cols)


class Layer:
    def __init__(self, rows: int) -> None:
        self.weight = Weight(rows)


class Config:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class FakeForSequenceClassification:
    def __init__(self, vocab_size: int = 30522, rows: Optional[int] = None, num_labels: int = 3) -> None:
        self.config = Config(
            model_type="bert",
            vocab_size=vocab_size,
            num_labels=num_labels,
            pad_token_id=0,
            max_position_embeddings=512,
            type_vocab_size=2,
            problem_type=None,
        )
        self.embeddings = Layer(vocab_size if rows is None else rows)

    def get_input_embeddings(self) -> Layer:
        return self.embeddings

    def get_output_embeddings(self) -> None:
        return None


class FakeForCausalLM:
    """num_labels is 2 as in every HF config; the LM head, not num_labels, bounds the labels."""

    def __init__(self, vocab_size: int, rows: int) -> None:
        self.config = Config(model_type="gpt2", vocab_size=vocab_size, num_labels=2, pad_token_id=None)
        self.wte = Layer(rows)

    def get_input_embeddings(self) -> Layer:
        return self.wte

    def get_output_embeddings(self) -> Layer:
        return self.wte


class Wrapper:
    """DistributedDataParallel keeps the model in .module."""

    def __init__(self, module: Any) -> None:
        self.module = module


class Tokenizer:
    pad_token_id = 50256

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


class TempDirTest(unittest.TestCase):
    """A fresh folder per test and no FAULTLINE_* variables from the caller's shell."""

    def setUp(self) -> None:
        holder = tempfile.TemporaryDirectory()
        self.addCleanup(holder.cleanup)
        self.dir = holder.name
        clean = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
        patcher = mock.patch.dict(os.environ, clean, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)


# ---------------------------------------------------------------------------------------------
# save_snapshot


class SaveSnapshotTest(TempDirTest):
    def test_tensors_and_parameters_round_trip_through_safetensors(self) -> None:
        path = self.path("snap.safetensors")
        batch = {
            "labels": np.array([0, 1, 2, 1], dtype=np.int64),
            "attention_mask": np.ones((2, 3), dtype=bool),
            "scores": np.array([[0.5, -1.0]], dtype=np.float16),
            "inputs": {"input_ids": np.arange(6, dtype=np.int32).reshape(2, 3)},
            "weights": [1, 2, 3],
            "text": ["a sentence", "another"],
            "note": "not a tensor",
            "nothing": None,
        }
        written = fc.save_snapshot(path, batch, params={"num_classes": 2, "strict": True, "lo": 0.5})

        tensors = load_file(path)
        self.assertEqual(
            sorted(tensors), ["attention_mask", "inputs.input_ids", "labels", "scores", "weights"]
        )
        np.testing.assert_array_equal(tensors["labels"], [0, 1, 2, 1])
        self.assertEqual(tensors["labels"].dtype, np.int64)
        self.assertEqual(tensors["attention_mask"].dtype, np.bool_)
        np.testing.assert_array_equal(tensors["scores"], np.array([[0.5, -1.0]], dtype=np.float16))
        np.testing.assert_array_equal(tensors["inputs.input_ids"], [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(tensors["weights"].dtype, np.int64, "a list of ints is written as int64")

        metadata = metadata_of(path)
        self.assertEqual(metadata, written)
        self.assertEqual(metadata["num_classes"], "2")
        self.assertEqual(metadata["strict"], "true")
        self.assertEqual(metadata["lo"], "0.5")
        self.assertEqual(metadata["ignore_index"], "-100")
        self.assertEqual(metadata["role.input_ids"], "inputs.input_ids", "a nested role is named")
        self.assertNotIn("role.labels", metadata, "a top-level role needs no name")
        self.assertFalse(any(k.startswith("device.") for k in metadata), "numpy arrays have no device")

    def test_big_endian_and_fortran_arrays_are_written_little_endian_in_c_order(self) -> None:
        path = self.path("layout.safetensors")
        grid = np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3))
        strided = np.arange(10, dtype=np.float64)[::2]
        fc.save_snapshot(path, {"grid": grid, "strided": strided})

        with open(path, "rb") as f:
            data = f.read()
        header = fc.read_header(path)
        self.assertEqual(header["grid"]["dtype"], "I32")
        (length,) = struct.unpack("<Q", data[:8])
        begin, end = header["grid"]["data_offsets"]
        raw = data[8 + length + begin : 8 + length + end]
        self.assertEqual(raw, np.arange(6, dtype="<i4").tobytes(), "little-endian, row after row")
        np.testing.assert_array_equal(load_file(path)["strided"], [0.0, 2.0, 4.0, 6.0, 8.0])

    def test_bfloat16_bits_are_kept_and_marked_bf16_in_the_header(self) -> None:
        # 1.0, -2.0 and 0.5 as bfloat16 bit patterns, as the torch path hands them over.
        bits = np.array([0x3F80, 0xC000, 0x3F00], dtype=np.uint16)
        data = fc._encode({"logits": bits, "labels": np.array([1], dtype=np.int64)}, {"k": "v"}, ["logits"])
        (length,) = struct.unpack("<Q", data[:8])
        self.assertEqual(length % 8, 0)
        header = json.loads(data[8 : 8 + length])
        self.assertEqual(header["logits"]["dtype"], "BF16")
        self.assertEqual(header["labels"]["dtype"], "I64")
        self.assertEqual(header["__metadata__"], {"k": "v"})
        begin, end = header["logits"]["data_offsets"]
        self.assertEqual(data[8 + length + begin : 8 + length + end], bits.tobytes())
        # The safetensors library itself accepts the file.
        entries = dict(safetensors.deserialize(data))
        self.assertEqual(entries["logits"]["dtype"].upper(), "BF16")

    def test_unsupported_dtypes_and_ragged_lists_are_listed_not_written(self) -> None:
        path = self.path("skips.safetensors")
        written = fc.save_snapshot(
            path,
            {"labels": [0, 1], "phase": np.array([1 + 2j]), "ragged": [[1, 2], [3]]},
        )
        self.assertEqual(list(load_file(path)), ["labels"])
        self.assertIn("complex128", written["capture.skipped.phase"])
        self.assertIn("ragged", written["capture.skipped.ragged"])

    def test_a_none_parameter_removes_a_derived_one(self) -> None:
        written = fc.save_snapshot(self.path("p.safetensors"), {"y": [1]}, params={"ignore_index": None})
        self.assertNotIn("ignore_index", written)


# ---------------------------------------------------------------------------------------------
# Model facts


class ModelFactsTest(TempDirTest):
    def test_a_classifier_gives_its_vocabulary_classes_and_pad_id(self) -> None:
        facts = fc.model_facts(FakeForSequenceClassification())
        expected = {
            "vocab_size": "30522",
            "num_embeddings": "30522",
            "num_classes": "3",
            "padding_idx": "0",
            "max_position_embeddings": "512",
            "type_vocab_size": "2",
            "model_type": "bert",
            "pad_token_id": "0",
            "model.class": "FakeForSequenceClassification",
            "model.model_type": "bert",
            "model.vocab_size": "30522",
            "model.num_labels": "3",
            "model.pad_token_id": "0",
            "model.max_position_embeddings": "512",
            "model.type_vocab_size": "2",
            "model.input_embedding_rows": "30522",
        }
        self.assertEqual(facts, expected)

    def test_the_embedding_rows_bound_the_ids_when_the_config_disagrees(self) -> None:
        facts = fc.model_facts(FakeForSequenceClassification(vocab_size=50260, rows=50257))
        self.assertEqual(facts["vocab_size"], "50257")
        self.assertEqual(facts["model.vocab_size"], "50260")
        self.assertIn("50257 rows", facts["capture.note.vocab_size"])

    def test_a_language_model_bounds_labels_by_its_head_not_by_num_labels(self) -> None:
        facts = fc.model_facts(FakeForCausalLM(vocab_size=50257, rows=50257))
        self.assertEqual(facts["num_classes"], "50257")
        self.assertEqual(facts["model.num_labels"], "2")
        self.assertNotIn("padding_idx", facts)

    def test_a_wrapped_model_and_a_bare_config_are_read(self) -> None:
        wrapped = fc.model_facts(Wrapper(FakeForSequenceClassification()))
        self.assertEqual(wrapped["model.class"], "FakeForSequenceClassification")
        config = fc.model_facts(Config(vocab_size=100, num_labels=4))
        self.assertEqual(config["vocab_size"], "100")
        self.assertNotIn("num_classes", config, "no model class says whether num_labels is the class count")

    def test_a_tokenizer_longer_than_the_embedding_is_noted(self) -> None:
        facts = fc.model_facts(FakeForCausalLM(vocab_size=50257, rows=50257), tokenizer=Tokenizer(50260))
        self.assertEqual(facts["model.tokenizer_len"], "50260")
        self.assertIn("resize_token_embeddings", facts["capture.note.tokenizer"])
        self.assertEqual(facts["padding_idx"], "50256", "the tokenizer's pad id when the config has none")

    def test_an_encoder_decoder_records_its_position_tables_and_decoder_ids(self) -> None:
        bart = Config(
            model_type="bart",
            is_encoder_decoder=True,
            vocab_size=100,
            max_position_embeddings=32,
            decoder_start_token_id=2,
            pad_token_id=1,
            num_labels=3,
        )
        facts = fc.model_facts(bart)
        for key, value in {
            "model_type": "bart",
            "is_encoder_decoder": "true",
            "max_position_embeddings": "32",
            "decoder_start_token_id": "2",
            "pad_token_id": "1",
            "padding_idx": "1",
        }.items():
            self.assertEqual(facts.get(key), value, key)
        self.assertNotIn("num_labels", facts, "every config has num_labels: it bounds no LM's labels")
        fsmt = fc.model_facts(Config(vocab_size=100, max_target_positions=64, max_source_positions=128))
        self.assertEqual((fsmt["max_target_positions"], fsmt["max_source_positions"]), ("64", "128"))

    def test_a_gpt2_position_table_comes_from_n_positions(self) -> None:
        facts = fc.model_facts(Config(model_type="gpt2", vocab_size=50257, n_positions=1024))
        self.assertEqual(facts["max_position_embeddings"], "1024")
        self.assertEqual(facts["n_positions"], "1024")

    def test_leds_position_keys_window_and_width_are_recorded(self) -> None:
        facts = fc.model_facts(Config(
            model_type="led", vocab_size=100, d_model=64, hidden_size=64, attention_window=[16, 32],
            max_encoder_position_embeddings=128, max_decoder_position_embeddings=32,
        ))
        for key, value in {
            "max_encoder_position_embeddings": "128",
            "max_decoder_position_embeddings": "32",
            "attention_window": "16,32",
            "model.attention_window": "16,32",
            "hidden_size": "64",
        }.items():
            self.assertEqual(facts.get(key), value, key)

    def test_the_tokenizers_length_and_its_real_limit_are_recorded(self) -> None:
        tokenizer = Tokenizer(50260)
        tokenizer.model_max_length = 512
        facts = fc.model_facts(Config(vocab_size=50260), tokenizer=tokenizer)
        self.assertEqual((facts["tokenizer_len"], facts["model_max_length"]), ("50260", "512"))
        tokenizer.model_max_length = int(1e30)
        unlimited = fc.model_facts(Config(vocab_size=50260), tokenizer=tokenizer)
        self.assertNotIn("model_max_length", unlimited, "1e30 is the tokenizers' 'no limit'")

    def test_the_callers_parameters_override_the_model_facts(self) -> None:
        path = self.path("m.safetensors")
        written = fc.save_snapshot(
            path, {"labels": [0, 3]}, params={"num_classes": 4}, model=FakeForSequenceClassification()
        )
        self.assertEqual(metadata_of(path)["num_classes"], "4")
        self.assertEqual(written["vocab_size"], "30522")


# ---------------------------------------------------------------------------------------------
# The context manager


class CaptureTest(TempDirTest):
    def test_cuda_error_texts_are_recognised_and_others_are_not(self) -> None:
        for message in [
            CUDA_ASSERT,
            "CUDA out of memory. Tried to allocate 2.00 GiB",
            "CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, ...)`",
            "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED",
            "NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled cuda error",
            "index out of range in self",
            "Target 5 is out of bounds.",
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        ]:
            self.assertTrue(fc.looks_like_cuda_error(RuntimeError(message)), message)
        for message in ["bad value", "expected 3 channels", "cuda"]:
            self.assertFalse(fc.looks_like_cuda_error(ValueError(message)), message)
        try:
            try:
                raise RuntimeError(CUDA_ASSERT)
            except RuntimeError as inner:
                raise ValueError("the step failed") from inner
        except ValueError as outer:
            self.assertTrue(fc.looks_like_cuda_error(outer), "the cause is looked at")

    def test_a_cuda_error_saves_the_batch_and_the_traceback_and_is_reraised(self) -> None:
        path = self.path("step.safetensors")
        batch = {"input_ids": np.array([[5, 30522]]), "labels": np.array([1])}
        error = RuntimeError(CUDA_ASSERT)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError) as raised:
                with fc.capture(batch, model=FakeForSequenceClassification(), path=path) as cap:
                    cap.add(logits=np.zeros((1, 3), dtype=np.float32))
                    raise error
        self.assertIs(raised.exception, error, "the original exception comes through unchanged")
        self.assertIs(cap.error, error)
        self.assertEqual(cap.snapshot_path, os.path.abspath(path))

        self.assertEqual(sorted(load_file(path)), ["input_ids", "labels", "logits"])
        metadata = metadata_of(path)
        self.assertEqual(metadata["vocab_size"], "30522")
        self.assertEqual(metadata["capture.error"], "RuntimeError: CUDA error: device-side assert triggered")
        with open(self.path("step.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn("Traceback (most recent call last)", log)
        self.assertIn("RuntimeError: CUDA error: device-side assert triggered", log)

        line = stderr.getvalue()
        self.assertEqual(line.count("\n"), 1, line)
        self.assertIn(f"faultline analyze {cap.log_path} --snapshot {cap.snapshot_path}", line)
        self.assertIn(f"faultline replay {cap.snapshot_path} --check target_bounds", line)

    def test_an_unrelated_error_saves_nothing_unless_only_cuda_is_off(self) -> None:
        with self.assertRaises(ValueError):
            with fc.capture({"labels": [1]}, path=self.path("a.safetensors")) as cap:
                raise ValueError("bad value")
        self.assertIsNone(cap.snapshot_path)
        self.assertEqual(os.listdir(self.dir), [])

        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(ValueError):
                with fc.capture({"labels": [1]}, path=self.path("b.safetensors"), only_cuda=False):
                    raise ValueError("bad value")
        self.assertTrue(os.path.exists(self.path("b.safetensors")))

    def test_nothing_happens_when_the_step_succeeds_and_reraise_false_swallows(self) -> None:
        with fc.capture({"labels": [1]}, path=self.path("ok.safetensors")) as cap:
            pass
        self.assertIsNone(cap.error)
        self.assertEqual(os.listdir(self.dir), [])

        with contextlib.redirect_stderr(io.StringIO()):
            with fc.capture({"labels": [1]}, path=self.path("s.safetensors"), reraise=False) as cap:
                raise RuntimeError(CUDA_ASSERT)
        self.assertIsNotNone(cap.snapshot_path)

    def test_the_default_path_is_in_faultline_snapshot_dir(self) -> None:
        folder = self.path("snapshots")
        os.environ["FAULTLINE_SNAPSHOT_DIR"] = folder
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(RuntimeError):
                with fc.capture({"labels": [1]}) as cap:
                    raise RuntimeError(CUDA_ASSERT)
        self.assertEqual(os.path.dirname(cap.snapshot_path or ""), folder)
        name = os.path.basename(cap.snapshot_path or "")
        self.assertTrue(name.startswith("faultline-snapshot-") and name.endswith(".safetensors"), name)
        self.assertEqual(sorted(os.listdir(folder)), sorted([name, name[: -len(".safetensors")] + ".log"]))

    def test_a_failure_to_save_is_a_warning_and_the_original_error_still_comes_through(self) -> None:
        blocker = self.path("a-file")
        with open(blocker, "w") as f:
            f.write("x")
        stderr = io.StringIO()
        error = RuntimeError(CUDA_ASSERT)
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError) as raised:
                with fc.capture({"labels": [1]}, path=os.path.join(blocker, "snap.safetensors")):
                    raise error
        self.assertIs(raised.exception, error)
        self.assertIn("faultline: warning: the failing step could not be captured", stderr.getvalue())

    def test_a_batch_without_tensors_is_reported_not_saved(self) -> None:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError):
                with fc.capture({"text": "hello"}, path=self.path("x.safetensors")):
                    raise RuntimeError(CUDA_ASSERT)
        self.assertIn("no snapshot was saved", stderr.getvalue())
        self.assertEqual(os.listdir(self.dir), [])


# ---------------------------------------------------------------------------------------------
# Upload


class FakeServer:
    """A faultline server on 127.0.0.1 that records every request."""

    def __init__(self, analyze_status: int = 200) -> None:
        self.requests: List[Tuple[str, str, Dict[str, str], bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.requests.append((self.command, self.path, dict(self.headers.items()), body))
                if self.path.startswith("/api/v1/analyze"):
                    if analyze_status != 200:
                        self.answer(analyze_status, {"error": "unauthorized", "detail": "the token is not valid"})
                    else:
                        self.answer(200, {"findings": [], "incident_id": 7, "group_id": 2, "new_group": True})
                elif self.path.startswith("/api/v1/incidents/7/snapshots"):
                    self.answer(202, {"snapshot_id": 3, "job_id": 5, "status_url": "/api/v1/replay/jobs/5"})
                else:
                    self.answer(404, {"error": "not_found", "detail": f"no route {self.path}"})

            def answer(self, status: int, doc: Dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def closed_port_url() -> str:
    """A URL nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class UploadTest(TempDirTest):
    def serve(self, **kwargs: Any) -> FakeServer:
        server = FakeServer(**kwargs)
        self.addCleanup(server.close)
        return server

    def test_the_traceback_and_the_snapshot_are_uploaded_with_the_token(self) -> None:
        server = self.serve()
        path = self.path("up.safetensors")
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError):
                with fc.capture({"labels": [0, 5]}, path=path, server=server.url + "/", token="secret") as cap:
                    raise RuntimeError(CUDA_ASSERT)

        self.assertEqual([(m, p) for m, p, _, _ in server.requests], [
            ("POST", "/api/v1/analyze?store=true"),
            ("POST", "/api/v1/incidents/7/snapshots"),
        ])
        (_, _, analyze_headers, log), (_, _, snapshot_headers, body) = server.requests
        self.assertEqual(analyze_headers["Authorization"], "Bearer secret")
        self.assertEqual(analyze_headers["Content-Type"], "text/plain; charset=utf-8")
        self.assertIn(b"Traceback (most recent call last)", log)
        self.assertIn(b"RuntimeError: CUDA error: device-side assert triggered", log)
        self.assertEqual(snapshot_headers["Authorization"], "Bearer secret")
        self.assertEqual(snapshot_headers["Content-Type"], "application/octet-stream")
        with open(path, "rb") as f:
            self.assertEqual(body, f.read())
        self.assertEqual(
            cap.uploaded,
            {
                "incident_id": 7,
                "group_id": 2,
                "snapshot_id": 3,
                "job_id": 5,
                "status_url": server.url + "/api/v1/replay/jobs/5",
            },
        )
        self.assertIn("replay job at " + server.url + "/api/v1/replay/jobs/5", stderr.getvalue())
        self.assertNotIn("secret", stderr.getvalue())

    def test_the_server_from_the_environment_is_used(self) -> None:
        server = self.serve()
        os.environ.update({"FAULTLINE_SERVER": server.url, "FAULTLINE_TOKEN": "from-env"})
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(RuntimeError):
                with fc.capture({"labels": [0]}, path=self.path("env.safetensors")):
                    raise RuntimeError(CUDA_ASSERT)
        self.assertEqual(len(server.requests), 2)
        self.assertEqual(server.requests[0][2]["Authorization"], "Bearer from-env")

    def test_a_server_that_is_down_only_gives_a_warning(self) -> None:
        url = closed_port_url()
        error = RuntimeError(CUDA_ASSERT)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError) as raised:
                with fc.capture({"labels": [0]}, path=self.path("down.safetensors"), server=url, timeout=5) as cap:
                    raise error
        self.assertIs(raised.exception, error)
        self.assertIsNone(cap.uploaded)
        self.assertTrue(os.path.exists(self.path("down.safetensors")), "the snapshot is kept on disk")
        self.assertIn(f"faultline: warning: upload to {url} failed: cannot reach {url}", stderr.getvalue())

    def test_a_refusal_gives_the_servers_detail_as_a_warning(self) -> None:
        server = self.serve(analyze_status=401)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(RuntimeError):
                with fc.capture({"labels": [0]}, path=self.path("r.safetensors"), server=server.url, token="bad"):
                    raise RuntimeError(CUDA_ASSERT)
        self.assertIn("HTTP 401: the token is not valid", stderr.getvalue())
        self.assertEqual(len(server.requests), 1, "no snapshot without an incident")

    def test_the_command_line_uploads_a_snapshot_with_its_log(self) -> None:
        server = self.serve()
        path = self.path("cli.safetensors")
        fc.save_snapshot(path, {"labels": [0, 2]}, params={"num_classes": 2})
        with open(self.path("cli.log"), "w", encoding="utf-8") as f:
            f.write("RuntimeError: CUDA error: device-side assert triggered\n")
        os.environ["FAULTLINE_TOKEN"] = "cli-token"
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = fc.main(["upload", path, "--server", server.url, "--param", "role.labels=labels"])
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(stdout.getvalue())["job_id"], 5)
        self.assertEqual(server.requests[0][3], b"RuntimeError: CUDA error: device-side assert triggered\n")
        self.assertEqual(server.requests[1][1], "/api/v1/incidents/7/snapshots?role.labels=labels")
        self.assertEqual(server.requests[1][2]["Authorization"], "Bearer cli-token")

    def test_the_command_line_shows_a_snapshot(self) -> None:
        path = self.path("show.safetensors")
        fc.save_snapshot(path, {"labels": [0, 2]}, params={"num_classes": 2})
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            self.assertEqual(fc.main(["show", path]), 0)
        self.assertIn("labels: I64 [2]", stdout.getvalue())
        self.assertIn("  num_classes = 2", stdout.getvalue())


# ---------------------------------------------------------------------------------------------
# torch


@unittest.skipIf(torch is None, "torch is not installed: the torch tensor conversion is not tested")
class TorchTest(TempDirTest):
    def test_torch_tensors_keep_their_dtype_and_device_and_bfloat16_stays_bfloat16(self) -> None:
        path = self.path("torch.safetensors")
        labels = torch.tensor([0, 1, 2], dtype=torch.long)
        logits = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.bfloat16, requires_grad=True)
        written = fc.save_snapshot(path, {"labels": labels, "logits": logits, "mask": torch.ones(3).bool()})
        self.assertEqual(written["device.labels"], "cpu")
        self.assertEqual(written["dtype.labels"], "int64")
        self.assertEqual(written["dtype.logits"], "bfloat16")
        self.assertEqual(fc.read_header(path)["logits"]["dtype"], "BF16")
        self.assertEqual(fc.read_header(path)["mask"]["dtype"], "BOOL")
        from safetensors.torch import load_file as load_torch

        loaded = load_torch(path)
        self.assertTrue(torch.equal(loaded["logits"], logits.detach()))
        self.assertTrue(torch.equal(loaded["labels"], labels))


if __name__ == "__main__":
    unittest.main()


# ---------------------------------------------------------------------------------------------
# Pre-flight


FAKE_FAULTLINE = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_FAULTLINE_ARGS"], "w") as f:
    json.dump(args, f)
code = int(os.environ.get("FAKE_FAULTLINE_EXIT", "0"))
print("preflight " + args[args.index("--snapshot") + 1] + (": no problem found (3 checks)" if code == 0 else ": 1 problem(s)"))
if code == 1:
    print("  problem: labels[0] = 7 >= num_classes = 3 (target_bounds on labels)")
sys.exit(code)
"""


class PreflightTest(TempDirTest):
    """The plumbing around ``faultline preflight``, with a stand-in binary that records its
    arguments (the real binary runs in tests/capture_helper.rs)."""

    def setUp(self) -> None:
        super().setUp()
        self.binary = self.path("faultline")
        with open(self.binary, "w") as f:
            f.write(FAKE_FAULTLINE.format(python=sys.executable))
        os.chmod(self.binary, 0o755)
        os.environ["FAULTLINE_BIN"] = self.binary
        os.environ["FAKE_FAULTLINE_ARGS"] = self.path("args.json")

    def args(self) -> List[str]:
        with open(self.path("args.json")) as f:
            return json.load(f)

    def test_a_clean_batch_is_saved_and_checked_with_the_models_facts(self) -> None:
        result = fc.preflight({"labels": [0, 1, 2]}, model=FakeForSequenceClassification())
        self.assertTrue(result.clean, result.output)
        self.assertEqual(self.args(), ["preflight", "--snapshot", result.snapshot])
        self.assertEqual(metadata_of(result.snapshot)["num_classes"], "3")

    def test_a_problem_stops_the_job_with_the_report(self) -> None:
        os.environ["FAKE_FAULTLINE_EXIT"] = "1"
        with self.assertRaises(fc.PreflightError) as raised:
            fc.preflight({"labels": [0, 7]}, params={"num_classes": 3}, config="config.json")
        self.assertIn("labels[0] = 7 >= num_classes = 3", raised.exception.report)
        self.assertEqual(self.args()[-2:], ["--config", "config.json"])
        quiet = fc.preflight({"labels": [0, 7]}, raise_on_problem=False)
        self.assertEqual(quiet.returncode, 1)

    def test_a_missing_binary_is_a_warning_not_a_stopped_job(self) -> None:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            result = fc.preflight({"labels": [0]}, binary=self.path("no-such-faultline"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("FAULTLINE_BIN", stderr.getvalue())

    def test_the_trainer_callback_checks_the_first_batch_of_the_loader(self) -> None:
        fake = type(sys)("transformers")
        fake.TrainerCallback = object
        with mock.patch.dict(sys.modules, {"transformers": fake}):
            callback = fc.hf_preflight_callback(every=2)
        loader = [{"input_ids": [[1, 2, 3]]}]
        state = Config(global_step=0)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            callback.on_train_begin(None, state, None, train_dataloader=loader, model=None)
        self.assertIn("step 0: preflight", said.getvalue())
        snapshot = self.args()[2]
        self.assertEqual(list(fc.read_header(snapshot)), ["__metadata__", "input_ids"])
        os.remove(self.path("args.json"))
        callback.on_step_begin(None, Config(global_step=1), None, train_dataloader=loader)
        self.assertFalse(os.path.exists(self.path("args.json")), "step 1 is not checked")
        with contextlib.redirect_stderr(io.StringIO()):
            callback.on_step_begin(None, Config(global_step=2), None, train_dataloader=loader)
        self.assertTrue(os.path.exists(self.path("args.json")), "every 2nd step is")

    def test_the_lightning_callback_checks_the_batch_about_to_train(self) -> None:
        lightning = type(sys)("lightning")
        pytorch = type(sys)("lightning.pytorch")
        pytorch.Callback = object
        lightning.pytorch = pytorch
        with mock.patch.dict(sys.modules, {"lightning": lightning, "lightning.pytorch": pytorch}):
            callback = fc.lightning_preflight_callback()
        module = Config(model=FakeForSequenceClassification())
        os.environ["FAKE_FAULTLINE_EXIT"] = "1"
        with self.assertRaises(fc.PreflightError):
            callback.on_train_batch_start(Config(global_step=0), module, {"labels": [0, 9]}, 0)
        snapshot = self.args()[2]
        self.assertEqual(
            metadata_of(snapshot)["num_classes"], "3", "the LightningModule's .model gives the facts"
        )
        os.remove(self.path("args.json"))
        callback.on_train_batch_start(Config(global_step=5), module, {"labels": [0, 9]}, 5)
        self.assertFalse(os.path.exists(self.path("args.json")), "only the first batch by default")
