"""Run real multi-process gloo jobs that fail, and keep what they wrote as fixtures.

    python3 tests/distributed/generate.py --venv /work/venvs/dist-2.15.0 [--only NAME ...] [--list]

For each run of RUNS this starts one ``torchrun`` agent per "node", each in namespaces of its own
(``unshare --uts --mount``, which needs root) so that it has its own host name, and an /etc/hosts
that resolves host-a and host-b to two loopback addresses; with error files
(``@record`` in worker.py), ``--log-dir`` and per-rank redirects, and ``--tee`` so the console
shows every rank's lines with torchrun's ``[defaultN]:`` prefix. What the agents wrote is copied
to ``tests/fixtures/distributed/<name>/<host>/`` (the console, torchrun's log folder, the flight
recorder dumps where torch has them), with only the home directory and user name anonymised, and
an ``expected.toml`` is written from what the run was told to do (the schema is in
``tests/fixtures/README.md``). ``check_expected.py`` then checks the fixture against its files;
a run that did not fail the way it was meant to is reported and not kept.
"""

import argparse
import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "distributed"
WORKER = HERE / "worker.py"
HOSTS = {"host-a": "127.0.1.1", "host-b": "127.0.1.2"}  # loopback addresses, one per "node"
SAMPLES_PER_RANK = 64  # worker.py's
FEATURES, CLASSES = 32, 4  # worker.py's model: Linear(FEATURES, CLASSES)


@dataclass(frozen=True)
class Run:
    scenario: str
    nproc: int  # ranks per node
    root_rank: int
    nnodes: int = 1
    detail: bool = False  # TORCH_DISTRIBUTED_DEBUG=DETAIL
    fail_step: int = 4
    steps: int = 6

    @property
    def world_size(self):
        return self.nproc * self.nnodes

    def name(self, torch_version):
        parts = [self.scenario.replace("_", "-")]
        if self.detail:
            parts.append("detail")
        if self.nnodes > 1:
            parts.append(f"{self.nnodes}nodes")
        return "-".join(parts) + f"-torch{torch_version}-gloo-n{self.world_size}"

    @property
    def timeout(self):
        """The process group's timeout: long enough for every rank to start on a 2-core machine."""
        return 10 + self.world_size


RUNS = [
    Run("raise_index", nproc=4, root_rank=2),
    Run("raise_value", nproc=4, nnodes=2, root_rank=6),
    Run("skip_collective", nproc=8, root_rank=5),
    Run("sleep_past_timeout", nproc=8, root_rank=3),
    Run("sleep_past_timeout", nproc=4, root_rank=1, detail=True),
    Run("sleep_past_timeout", nproc=6, nnodes=2, root_rank=9),
    Run("size_mismatch", nproc=4, root_rank=2),
    Run("size_mismatch", nproc=6, root_rank=4, detail=True),
    Run("sigkill", nproc=16, root_rank=11),
    Run("sigsegv", nproc=4, nnodes=2, root_rank=1),
]


def torch_version(python):
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], check=True,
                         capture_output=True, text=True).stdout.strip()
    return out.split("+")[0]


def free_port():
    with socket.socket() as s:
        s.bind((HOSTS["host-a"], 0))
        return s.getsockname()[1]


def agent_command(venv, run, name, port, node_dir):
    torchrun = [
        str(venv / "bin" / "torchrun"),
        f"--nnodes={run.nnodes}",
        f"--nproc-per-node={run.nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=host-a:{port}",
        f"--rdzv-id={name}",
        f"--log-dir={node_dir / 'logs'}",
        "--redirects=3",
        "--tee=3",
        str(node_dir / "train.py"),
        f"--scenario={run.scenario}",
        f"--root-rank={run.root_rank}",
        f"--fail-step={run.fail_step}",
        f"--steps={run.steps}",
        f"--timeout={run.timeout}",
    ]
    host = node_dir.name
    # Its own host name, and an /etc/hosts that resolves every node's name (bound over the real
    # one in a private mount namespace: nothing outside the agent sees it).
    hosts_file = node_dir.parent / f"hosts.{host}"
    lines = [f"{HOSTS[host]} {host}"] + [f"{ip} {h}" for h, ip in HOSTS.items() if h != host]
    hosts_file.write_text("\n".join(lines + ["127.0.0.1 localhost", ""]))
    script = f'mount --bind {hosts_file} /etc/hosts && hostname {host} && exec "$@"'
    return ["unshare", "--uts", "--mount", "sh", "-c", script, "sh", *torchrun]


def run_agents(venv, run, name, work):
    """Start the agents, wait for them; the console of each is written to <host>/console.log."""
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCH_DISTRIBUTED_DEBUG="DETAIL" if run.detail else "OFF")
    agents = []
    for host in list(HOSTS)[: run.nnodes]:
        node_dir = work / host
        (node_dir / "fr_trace").mkdir(parents=True)
        shutil.copy(WORKER, node_dir / "train.py")
        console = open(node_dir / "console.log", "wb")
        agent_env = dict(env, TORCH_FR_DUMP_TEMP_FILE=str(node_dir / "fr_trace" / "fr_"))
        agents.append((subprocess.Popen(agent_command(venv, run, name, port, node_dir), cwd=node_dir,
                                        env=agent_env, stdout=console, stderr=subprocess.STDOUT,
                                        start_new_session=True), console))
    deadline = time.monotonic() + 120 + 8 * run.timeout
    codes = []
    for proc, console in agents:
        try:
            codes.append(proc.wait(timeout=max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            codes.append(proc.wait())
        console.close()
    return codes


IDENTITY = re.compile(r"^rank (\d+) of (\d+), local rank (\d+) on (\S+)$", re.M)


def identities(work):
    """{global rank: (host, local rank)} from the line each rank printed when it started."""
    found = {}
    for stdout in work.glob("*/logs/*/attempt_0/*/stdout.log"):
        for rank, _world, local, host in IDENTITY.findall(stdout.read_text(errors="replace")):
            found[int(rank)] = (host, int(local))
    return found


def launcher_root_causes(work):
    """The ranks torchrun's summary names as 'Root Cause (first observed failure)', per agent."""
    ranks = []
    for console in sorted(work.glob("*/console.log")):
        text = console.read_text(errors="replace")
        for block in re.findall(r"Root Cause \(first observed failure\):\n\[\d+\]:\n(.*?\n.*?\n.*?\n)", text):
            match = re.search(r"rank\s*: (\d+)", block)
            if match:
                ranks.append(int(match.group(1)))
    return sorted(set(ranks))


def anonymise(work):
    """Replace the home directory and the user name in every text file (the dumps are pickles
    and JSON without paths: checked, not rewritten)."""
    home = os.path.expanduser("~")
    user = getpass.getuser()
    for path in work.rglob("*"):
        if not path.is_file() or path.name == "train.py" or path.name.startswith("hosts."):
            continue
        data = path.read_bytes()
        new = data
        if home not in ("", "/"):
            new = new.replace(home.encode(), b"/home/user")
        if user and user != "root":
            new = re.sub(rb"\b" + re.escape(user.encode()) + rb"\b", b"user", new)
        if path.parent.name == "fr_trace" and new != data:
            raise SystemExit(f"{path}: a flight-recorder dump holds the home directory or user")
        if new != data:
            path.write_bytes(new)


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def toml_document(tables):
    lines = []
    for table, rows in tables:
        lines.append(f"[{table}]")
        for key, value in rows.items():
            if value is not None:
                lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


# What each scenario's root rank did, and the class of the taxonomy a diagnosis gives it.
ROOT = {
    "raise_index": ("exception", "cpu.index_error", "IndexError"),
    "raise_value": ("exception", "none", "ValueError"),
    "skip_collective": ("skipped_collective", "nccl.error", None),
    "sleep_past_timeout": ("straggler", "nccl.error", None),
    "size_mismatch": ("size_mismatch", "nccl.error", None),
    "sigkill": ("signal", "none", "SIGKILL"),
    "sigsegv": ("signal", "none", "SIGSEGV"),
}


def expected(run, name, version, ids, blamed, has_fr):
    """The verdict a correct diagnosis gives, from what the run was told to do."""
    what, root_class, error = ROOT[run.scenario]
    world = run.world_size
    root = run.root_rank
    others = [r for r in range(world) if r != root]
    bucket = FEATURES * CLASSES + CLASSES
    # The stalled collective, numbered as torch numbers the default group's collectives: the
    # flight recorder from 1 (collective_seq_id), DETAIL's fingerprints from 0 (SequenceNumber).
    step = {"skip_collective": run.steps, "size_mismatch": 1}.get(run.scenario, run.fail_step)
    never_entered = [root] if what in ("exception", "straggler") else []
    disagree = [root] if what in ("skipped_collective", "size_mismatch") else []
    evidence = []
    if run.scenario == "raise_index":
        n = SAMPLES_PER_RANK * world
        evidence.append(f"IndexError: index {n} is out of bounds for dimension 0 with size {n}")
    if run.scenario == "raise_value":
        evidence.append("ValueError: could not convert string to float: 'n/a'")
    if run.scenario == "sleep_past_timeout" and run.detail:
        evidence.append(f"Rank {root} failed to pass monitoredBarrier")
    if run.scenario == "size_mismatch" and run.detail:
        evidence.append(f"TensorShape=[{(FEATURES + 1) * (CLASSES + 1)}]")
    if run.scenario == "sigkill":
        evidence.append("Signal 9 (SIGKILL) received by PID")
    if run.scenario == "sigsegv":
        evidence.append("Signal 11 (SIGSEGV) received by PID")
    host, local_rank = ids[root]
    return toml_document([
        ("job", {
            "name": name,
            "origin": "generated",
            "generator": "tests/distributed/generate.py",
            "scenario": run.scenario,
            "torch": version,
            "backend": "gloo",
            "launcher": "torchrun",
            "world_size": world,
            "nnodes": run.nnodes,
            "nproc_per_node": run.nproc,
            "hosts": list(HOSTS)[: run.nnodes],
            "debug": "DETAIL" if run.detail else "OFF",
            "timeout_s": run.timeout,
        }),
        ("root", {
            "ranks": [root],
            "host": host,
            "local_rank": local_rank,
            "what": what,
            "class": root_class,
            "error": error,
            "evidence": evidence,
        }),
        ("collective", {
            "op": "allreduce",
            "process_group": "default_pg",
            "step": step,
            "fr_seq": step if has_fr else None,
            "fingerprint_seq": step - 1 if run.detail and run.scenario == "size_mismatch" else None,
            "disagree_op": "barrier" if run.scenario == "skip_collective" else None,
            "disagree_numel": [bucket, (FEATURES + 1) * (CLASSES + 1)] if run.scenario == "size_mismatch" else None,
        }),
        ("ranks", {
            "cascade": others,
            "cascade_class": "nccl.error",
            "never_entered": never_entered,
            "disagree": disagree,
            "launcher_blamed": blamed,
        }),
    ])


WORK = Path("/tmp/faultline-dist")  # fixed, so tracebacks and torchrun's summary name the same paths


def generate(venv, run, version, keep_failed):
    name = run.name(version)
    started = time.monotonic()
    work = WORK / name
    if work.exists():
        shutil.rmtree(work)
    codes = run_agents(venv, run, name, work)
    ids = identities(work)
    problems = []
    if all(code == 0 for code in codes):
        problems.append("every agent exited 0")
    if sorted(ids) != list(range(run.world_size)):
        problems.append(f"identity lines for ranks {sorted(ids)}")
    if not problems:
        for host in list(HOSTS)[: run.nnodes]:
            (work / host / "train.py").unlink()
            (work / f"hosts.{host}").unlink()
            fr = work / host / "fr_trace"
            if not any(fr.iterdir()):
                fr.rmdir()
        anonymise(work)
        has_fr = any(work.glob("*/fr_trace/fr_*.json"))
        (work / "expected.toml").write_text(
            expected(run, name, version, ids, launcher_root_causes(work), has_fr))
        check = subprocess.run([sys.executable, str(HERE / "check_expected.py"), str(work)],
                               capture_output=True, text=True)
        if check.returncode != 0:
            problems.append("check_expected: " + (check.stdout + check.stderr).strip())
    took = time.monotonic() - started
    if problems:
        print(f"{name}: NOT KEPT ({took:.0f} s, agents exit {codes}): {'; '.join(problems)}")
        if keep_failed:
            print(f"  its files: {work}")
        else:
            shutil.rmtree(work)
        return False
    target = FIXTURES / name
    if target.exists():
        shutil.rmtree(target)
    shutil.move(work, target)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"{name}: kept ({took:.0f} s, agents exit {codes}, {size // 1024} KiB)")
    return True


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, help="a virtual environment with torch (from PyPI)")
    parser.add_argument("--only", nargs="*", default=[], help="scenario names or fixture names")
    parser.add_argument("--list", action="store_true", help="print the runs' names and stop")
    parser.add_argument("--keep-failed", action="store_true", help="leave a failed run's files in /tmp/faultline-dist")
    args = parser.parse_args(argv)
    if args.venv is None or not (args.venv / "bin" / "torchrun").exists():
        parser.error("--venv must name a virtual environment with torch installed")
    version = torch_version(str(args.venv / "bin" / "python"))
    runs = [r for r in RUNS if not args.only or r.scenario in args.only or r.name(version) in args.only]
    if args.list:
        print("\n".join(r.name(version) for r in runs))
        return 0
    if shutil.which("unshare") is None or os.geteuid() != 0:
        print("generate.py needs root and unshare(1): each agent gets its own host name", file=sys.stderr)
        return 2
    failed = [r.name(version) for r in runs if not generate(args.venv, r, version, args.keep_failed)]
    if failed:
        print(f"{len(failed)} of {len(runs)} runs not kept: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
