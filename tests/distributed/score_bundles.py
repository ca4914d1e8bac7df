#!/usr/bin/env python3
"""Scores the bundle core on every job of tests/fixtures/distributed/: per job, whether the root
rank it names is right, wrong or left out (no answer), at which confidence, and the stalled
collective's op it names.

Each job is analyzed by the faultline binary (`--format json`) with every file of its folder but
`expected.toml`, as `cargo test --test bundle_fixtures` does.

    cargo build --bin faultline
    python3 tests/distributed/score_bundles.py [--bin target/debug/faultline] [--only 2.9.1]
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOBS = ROOT / "tests" / "fixtures" / "distributed"


def job_files(job: pathlib.Path) -> list[str]:
    return sorted(str(p) for p in job.rglob("*") if p.is_file() and p.name != "expected.toml")


def op_name(op: str) -> str:
    return op.replace("_", "").upper()


def score(binary: str, job: pathlib.Path) -> dict:
    want = tomllib.loads((job / "expected.toml").read_text())
    run = subprocess.run(
        [binary, "analyze", "--format", "json", *job_files(job)],
        capture_output=True,
        text=True,
        check=False,
    )
    diagnosis = json.loads(run.stdout)
    fault = diagnosis.get("first_fault") or {}
    rank = fault.get("rank")
    roots = want["root"]["ranks"]
    if rank is None:
        root = "no answer"
    elif rank in roots:
        root = "right"
    else:
        root = "wrong"
    if not roots and rank is None:
        root = "right (none nameable)"
    collective = fault.get("collective") or {}
    want_op = want.get("collective", {}).get("op")
    got_op = collective.get("op")
    if got_op is None:
        op = "no answer"
    elif want_op is not None and op_name(got_op) == op_name(want_op):
        op = "right"
    else:
        op = "wrong"
    return {
        "job": job.name,
        "root": root,
        "rank": rank,
        "confidence": fault.get("confidence"),
        "kind": fault.get("kind"),
        "op": op,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "target" / "debug" / "faultline"))
    parser.add_argument("--only", default="", help="substring of the job names to score")
    args = parser.parse_args()
    jobs = sorted(j for j in JOBS.iterdir() if (j / "expected.toml").is_file() and args.only in j.name)
    totals: dict[str, int] = {}
    ops: dict[str, int] = {}
    for job in jobs:
        s = score(args.bin, job)
        totals[s["root"]] = totals.get(s["root"], 0) + 1
        ops[s["op"]] = ops.get(s["op"], 0) + 1
        print(f"{s['job']:55} root {s['root']:10} rank {s['rank']!s:5} {s['confidence']!s:7} "
              f"{s['kind']!s:14} op {s['op']}")
    print(f"{len(jobs)} jobs; root: {totals}; collective op: {ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
