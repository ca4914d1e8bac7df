"""Drift fixtures of the other runtimes: the failing steps of ``framework_steps.py`` (TensorFlow /
Keras, JAX, ONNX Runtime, PaddlePaddle, MXNet, Lightning and diffusers) run under an interpreter that has them.

    python3 tests/drift/generate_frameworks.py run PYTHON...      run every step under each Python and
                                                                  write the logs + manifest
    python3 tests/drift/generate_frameworks.py run --only A,B PYTHON...   the steps named only
    python3 tests/drift/generate_frameworks.py check FAULTLINE    diagnose every log with FAULTLINE

Like ``generate.py``: each step runs in its own process, everything it prints is its log
(``tests/fixtures/drift/frameworks/STEP-tensorflowX.log``, ``STEP-jaxX.log``,
``STEP-onnxruntimeX.log``, ``STEP-paddleX.log``, ``STEP-mxnetX.log``, ``STEP-lightningX.log`` or
``STEP-diffusersX.log``), and
``manifest.toml`` beside the logs lists the class, confidence and versions of each; entries of
logs not written by this run are kept. ``check`` is the blind measurement: run it with the rules
as they are before changing any for these logs.
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import ROOT, STEP_TIMEOUT_S, cli, job_env, read_manifest, write_manifest  # noqa: E402
from generate import check as check_folder  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "drift" / "frameworks"
MANIFEST = OUT / "manifest.toml"
STEPS = "tests/drift/framework_steps.py"

VERSIONS = """
import sys, importlib.metadata as m
def v(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return ""
print(v("tensorflow") or v("tensorflow-cpu"), v("keras"), v("jax"), v("jaxlib"), v("onnxruntime"), v("paddlepaddle"), v("mxnet"), v("lightning") or v("pytorch-lightning"), v("diffusers"), v("torch"), ".".join(map(str, sys.version_info[:3])), sep="|")
"""
KEYS = ["file", "step", "class", "also", "confidence", "framework", "version", "keras", "jaxlib", "torch", "python"]


def versions(python):
    out = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, check=True, env=job_env())
    tf, keras, jax, jaxlib, ort, paddle, mxnet, lightning, diffusers, torch, py = out.stdout.strip().split("|")
    return {"tensorflow": tf, "keras": keras, "jax": jax, "jaxlib": jaxlib, "onnxruntime": ort, "paddle": paddle, "mxnet": mxnet, "lightning": lightning, "diffusers": diffusers, "torch": torch, "python": py}


def steps(python):
    out = subprocess.run([python, STEPS, "--list"], cwd=ROOT, capture_output=True, text=True, check=True, env=job_env())
    for line in out.stdout.splitlines():
        name, expected, confidence, framework, *also = line.split()
        yield {"step": name, "class": expected, "confidence": confidence, "framework": framework, "also": also}


def run(pythons, only=None):
    OUT.mkdir(parents=True, exist_ok=True)
    entries = read_manifest(MANIFEST)
    for python in pythons:
        v = versions(python)
        found = ", ".join(f"{k} {v[k] or '-'}" for k in ("tensorflow", "keras", "jax", "onnxruntime", "paddle", "mxnet", "lightning", "diffusers"))
        print(f"== {python}: {found}")
        for step in steps(python):
            if only is not None and step["step"] not in only:
                continue
            version = v[step["framework"]]
            if not version:
                continue
            done = subprocess.run(
                [python, STEPS, step["step"]],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=job_env(), timeout=STEP_TIMEOUT_S,
            )
            if done.returncode != 1:
                raise SystemExit(f"{step['step']}: exit {done.returncode}, not a failing step")
            name = f"{step['step']}-{step['framework']}{version}.log"
            (OUT / name).write_bytes(done.stdout)
            entry = {"file": name, **{k: step[k] for k in ("step", "class", "also", "framework")}}
            if step["class"] != "none":
                entry["confidence"] = step["confidence"]
            entry.update(version=version, python=v["python"])
            if step["framework"] == "tensorflow":
                entry["keras"] = v["keras"]
            elif step["framework"] == "jax":
                entry["jaxlib"] = v["jaxlib"]
            elif step["framework"] in ("lightning", "diffusers"):
                entry["torch"] = v["torch"]
            entries[name] = entry
            print(f"   {name}")
    write_manifest(entries, MANIFEST, KEYS, writer="tests/drift/generate_frameworks.py")


def check(faultline):
    check_folder(faultline, OUT, lambda e: f"{e['framework']} {e['version']}")


if __name__ == "__main__":
    sys.exit(cli(sys.argv, __doc__, run, check))
