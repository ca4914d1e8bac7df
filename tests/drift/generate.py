"""Version-drift fixtures: the failing steps of ``steps.py`` run under several library versions.

    python3 tests/drift/generate.py run PYTHON...      run every step under each Python (a venv's
                                                       interpreter) and write the logs + manifest
    python3 tests/drift/generate.py run --only A,B PYTHON...   the same for the steps named only
    python3 tests/drift/generate.py check FAULTLINE    diagnose every log of the manifest with the
                                                       binary FAULTLINE and print what it finds

``run`` asks each interpreter for its torch and transformers versions, then runs every step of
``steps.py`` in its own process, as a job would run it: everything the process prints (stdout and
stderr together, unbuffered, in the order printed) is the log. A step that uses only torch runs
once per torch version (the first interpreter with that version); a step that uses transformers
runs under every interpreter. Nothing is downloaded (``HF_HUB_OFFLINE=1``). The logs are written
as ``tests/fixtures/drift/STEP-torchX[-transformersY].log`` and listed in
``tests/fixtures/drift/manifest.toml`` with the class each must be diagnosed as and the versions;
entries of logs not written by this run are kept, so a new version can be added alone.

``check`` is the blind measurement: run it with the faultline binary of the rules as they are,
before changing any rule for a new batch, and keep the figure it prints (per environment, how
many logs are diagnosed as expected at top-1 and at the expected confidence).
"""

import json
import os
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "tests" / "fixtures" / "drift"
MANIFEST = OUT / "manifest.toml"
STEP_TIMEOUT_S = 300

VERSIONS = """
import sys, torch
try:
    import transformers
    hf = transformers.__version__
except ImportError:
    hf = ""
print(torch.__version__.split("+")[0], hf, ".".join(map(str, sys.version_info[:3])), sep="|")
"""


def job_env():
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    return env


def versions(python):
    out = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, check=True, env=job_env())
    fields = out.stdout.strip().split("|")
    if len(fields) != 3:
        raise SystemExit(f"{python}: cannot read the versions from {out.stdout!r}")
    return dict(zip(("torch", "transformers", "python"), fields))


def steps(python):
    out = subprocess.run(
        [python, str(HERE / "steps.py"), "--list"], capture_output=True, text=True, check=True, env=job_env()
    )
    for line in out.stdout.splitlines():
        name, expected, confidence, uses, *also = line.split()
        yield {"step": name, "class": expected, "confidence": confidence, "uses": uses, "also": also}


def run_step(python, name):
    """The job's log: what the step printed, as CI keeps it. The step must end in an exception."""
    done = subprocess.run(
        [python, "tests/drift/steps.py", name],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=job_env(), timeout=STEP_TIMEOUT_S,
    )
    if done.returncode != 1:
        tail = done.stdout.decode(errors="replace")[-2000:]
        raise SystemExit(f"{python} {name}: exit {done.returncode}, not a failing step:\n{tail}")
    return done.stdout


def file_name(step, v):
    hf = f"-transformers{v['transformers']}" if step["uses"] == "transformers" else ""
    return f"{step['step']}-torch{v['torch']}{hf}.log"


def read_manifest(manifest=MANIFEST):
    if not manifest.exists():
        return {}
    with manifest.open("rb") as f:
        return {e["file"]: e for e in tomllib.load(f).get("log", [])}


def toml_value(value):
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


TORCH_KEYS = ["file", "step", "class", "also", "confidence", "torch", "transformers", "python"]


def write_manifest(entries, manifest=MANIFEST, keys=TORCH_KEYS, writer="tests/drift/generate.py"):
    lines = [
        f"# Written by {writer}: one entry per log of this folder, the class",
        "# (rules/taxonomy.toml; `none`: no GPU cause may be claimed) and the confidence it must be",
        "# diagnosed with, and the versions it ran under. tests/drift.rs reads it.",
    ]
    for name in sorted(entries):
        e = entries[name]
        lines.append("")
        lines.append("[[log]]")
        lines.extend(f"{k} = {toml_value(e[k])}" for k in keys if k in e and e[k] not in ("", []))
    manifest.write_text("\n".join(lines) + "\n")


def run(pythons, only=None):
    OUT.mkdir(parents=True, exist_ok=True)
    entries = read_manifest()
    torch_done = set()
    for python in pythons:
        v = versions(python)
        print(f"== {python}: torch {v['torch']}, transformers {v['transformers'] or '-'}, Python {v['python']}")
        for step in steps(python):
            if only is not None and step["step"] not in only:
                continue
            if step["uses"] == "torch" and v["torch"] in torch_done:
                continue
            if step["uses"] == "transformers" and not v["transformers"]:
                continue
            name = file_name(step, v)
            (OUT / name).write_bytes(run_step(python, step["step"]))
            entry = {"file": name, **{k: step[k] for k in ("step", "class", "also")}}
            if step["class"] != "none":
                entry["confidence"] = step["confidence"]
            entry.update(torch=v["torch"], python=v["python"])
            if step["uses"] == "transformers":
                entry["transformers"] = v["transformers"]
            entries[name] = entry
            print(f"   {name}")
        torch_done.add(v["torch"])
    write_manifest(entries)


def top_finding(faultline, path):
    out = subprocess.run([faultline, "analyze", "--format", "json", str(path)], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{faultline} analyze {path}: exit {out.returncode}: {out.stderr}")
    claims = [f for f in json.loads(out.stdout)["findings"] if f["role"] != "context"]
    return claims[0] if claims else None


def torch_environment(entry):
    hf = f" + transformers {entry['transformers']}" if "transformers" in entry else ""
    return f"torch {entry['torch']}{hf}"


def check(faultline, folder=OUT, environment=torch_environment):
    """Diagnose every log of FOLDER's manifest and print, per environment, how many are right."""
    tally = defaultdict(lambda: [0, 0])
    for e in read_manifest(folder / "manifest.toml").values():
        top = top_finding(faultline, folder / e["file"])
        if e["class"] == "none":
            right = top is None
        else:
            classes = [e["class"], *e.get("also", [])]
            right = top is not None and top["class"] in classes and top["confidence"] == e["confidence"]
        want = e["class"] + (f" {e['confidence']}" if "confidence" in e else "")
        env = environment(e)
        tally[env][0] += right
        tally[env][1] += 1
        got = "-" if top is None else f"{top['class']} {top['confidence']} ({top['rule']})"
        print(f"{'ok  ' if right else 'MISS'} {e['file']}: expected {want}, got {got}")
    total = [sum(t[i] for t in tally.values()) for i in (0, 1)]
    for env, (right, n) in sorted(tally.items()):
        print(f"{env}: {right} of {n}")
    print(f"all: {total[0]} of {total[1]}")


def cli(argv, doc, run, check):
    """`run [--only STEP,...] PYTHON...` or `check FAULTLINE`; anything else prints DOC."""
    if len(argv) >= 5 and argv[1] == "run" and argv[2] == "--only":
        run(argv[4:], only=set(argv[3].split(",")))
    elif len(argv) >= 3 and argv[1] == "run" and argv[2] != "--only":
        run(argv[2:])
    elif len(argv) == 3 and argv[1] == "check":
        check(argv[2])
    else:
        print(doc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv, __doc__, run, check))
