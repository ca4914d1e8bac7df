"""Run real multi-process gloo (or NCCL) jobs that fail, and keep what they wrote as fixtures.

    python3 tests/distributed/generate.py --venv /work/venvs/dist-2.15.0 [--only NAME ...] [--list]
    python3 tests/distributed/generate.py --python python3 --backend nccl --gpus 8 --out DIR

For each run of RUNS this starts one ``torchrun`` agent per "node", each in namespaces of its own
(``unshare --uts --mount``, which needs root) so that it has its own host name, and an /etc/hosts
that resolves host-a and host-b to two loopback addresses; with error files
(``@record`` in worker.py), ``--log-dir`` and per-rank redirects, and ``--tee`` so the console
shows every rank's lines with torchrun's ``[defaultN]:`` prefix. What the agents wrote is copied
to ``tests/fixtures/distributed/<name>/<host>/`` (the console, torchrun's log folder, the flight
recorder dumps where torch has them), with only the home directory and user name anonymised, and
an ``expected.toml`` is written from what the run was told to do (verdict.py; the schema is in
``tests/fixtures/README.md``). ``check_expected.py`` then checks the fixture against its files;
a run that did not fail the way it was meant to is reported and not kept. Without root, the
single-host runs still run (under the machine's own host name) and the two-host runs are skipped.
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

from verdict import expected

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "distributed"
WORKER = HERE / "worker.py"
HOSTS = {"host-a": "127.0.1.1", "host-b": "127.0.1.2"}  # loopback addresses, one per "node"


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

    def name(self, torch_version, backend="gloo"):
        parts = [self.scenario.replace("_", "-")]
        if self.detail:
            parts.append("detail")
        if self.nnodes > 1:
            parts.append(f"{self.nnodes}nodes")
        return "-".join(parts) + f"-torch{torch_version}-{backend}-n{self.world_size}"

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


@dataclass(frozen=True)
class Setup:
    """Where and how the runs happen."""

    launcher: tuple  # torchrun, as a command
    version: str  # torch's, without the local suffix
    backend: str  # gloo, or nccl on a machine with a GPU per rank
    out: Path  # the folder the fixtures go to
    namespaces: bool  # each agent has its own host name (root and unshare(1) needed)
    keep_failed: bool

    def hosts(self, run):
        if self.namespaces:
            return list(HOSTS)[: run.nnodes]
        return [socket.gethostname()]

    @property
    def address(self):
        return HOSTS["host-a"] if self.namespaces else "127.0.0.1"


def can_unshare():
    """Whether agents can have host names of their own (root, and namespaces allowed here)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "--uts", "--mount", "true"], capture_output=True).returncode == 0


def torch_version(python):
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], check=True,
                         capture_output=True, text=True).stdout.strip()
    return out.split("+")[0]


def free_port(address):
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def agent_command(setup, run, name, port, node_dir):
    torchrun = [
        *setup.launcher,
        f"--nnodes={run.nnodes}",
        f"--nproc-per-node={run.nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={'host-a' if setup.namespaces else setup.address}:{port}",
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
        f"--backend={setup.backend}",
    ]
    if not setup.namespaces:
        return torchrun
    host = node_dir.name
    # Its own host name, and an /etc/hosts that resolves every node's name (bound over the real
    # one in a private mount namespace: nothing outside the agent sees it).
    hosts_file = node_dir.parent / f"hosts.{host}"
    lines = [f"{HOSTS[host]} {host}"] + [f"{ip} {h}" for h, ip in HOSTS.items() if h != host]
    hosts_file.write_text("\n".join(lines + ["127.0.0.1 localhost", ""]))
    script = f'mount --bind {hosts_file} /etc/hosts && hostname {host} && exec "$@"'
    return ["unshare", "--uts", "--mount", "sh", "-c", script, "sh", *torchrun]


def run_agents(setup, run, name, work):
    """Start the agents, wait for them; the console of each is written to <host>/console.log."""
    port = free_port(setup.address)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCH_DISTRIBUTED_DEBUG="DETAIL" if run.detail else "OFF")
    agents = []
    for host in setup.hosts(run):
        node_dir = work / host
        dumps = node_dir / "fr_trace"
        dumps.mkdir(parents=True)
        shutil.copy(WORKER, node_dir / "train.py")
        console = open(node_dir / "console.log", "wb")
        agent_env = dict(env, TORCH_FR_DUMP_TEMP_FILE=str(dumps / "fr_"))
        if setup.backend == "nccl":
            # torch's own flight recorder, dumped by the watchdog on a timeout.
            agent_env.update(TORCH_NCCL_TRACE_BUFFER_SIZE="2000", TORCH_NCCL_DUMP_ON_TIMEOUT="1",
                             TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(dumps / "nccl_trace_rank_"),
                             NCCL_DEBUG="WARN")
        agents.append((subprocess.Popen(agent_command(setup, run, name, port, node_dir), cwd=node_dir,
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


WORK = Path("/tmp/faultline-dist")  # fixed, so tracebacks and torchrun's summary name the same paths


def generate(setup, run):
    name = run.name(setup.version, setup.backend)
    started = time.monotonic()
    work = WORK / name
    if work.exists():
        shutil.rmtree(work)
    codes = run_agents(setup, run, name, work)
    ids = identities(work)
    problems = []
    if all(code == 0 for code in codes):
        problems.append("every agent exited 0")
    if sorted(ids) != list(range(run.world_size)):
        problems.append(f"identity lines for ranks {sorted(ids)}")
    if not problems:
        for host in setup.hosts(run):
            (work / host / "train.py").unlink()
            hosts_file = work / f"hosts.{host}"
            if hosts_file.exists():
                hosts_file.unlink()
            fr = work / host / "fr_trace"
            if not any(fr.iterdir()):
                fr.rmdir()
        anonymise(work)
        has_fr = any(work.glob("*/fr_trace/fr_*.json"))
        shows_watchdog = any("WorkNCCL(SeqNum=" in p.read_text(errors="replace")
                             for p in work.rglob("*.log"))
        job = {"name": name, "torch": setup.version, "backend": setup.backend, "hosts": setup.hosts(run)}
        (work / "expected.toml").write_text(
            expected(run, job, ids, launcher_root_causes(work), has_fr, shows_watchdog))
        check = subprocess.run([sys.executable, str(HERE / "check_expected.py"), str(work)],
                               capture_output=True, text=True)
        if check.returncode != 0:
            problems.append("check_expected: " + (check.stdout + check.stderr).strip())
    took = time.monotonic() - started
    if problems:
        print(f"{name}: NOT KEPT ({took:.0f} s, agents exit {codes}): {'; '.join(problems)}", flush=True)
        if setup.keep_failed:
            print(f"  its files: {work}", flush=True)
        else:
            shutil.rmtree(work)
        return False
    target = setup.out / name
    if target.exists():
        shutil.rmtree(target)
    setup.out.mkdir(parents=True, exist_ok=True)
    shutil.move(work, target)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"{name}: kept ({took:.0f} s, agents exit {codes}, {size // 1024} KiB)", flush=True)
    return True


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    torch_from = parser.add_mutually_exclusive_group(required=True)
    torch_from.add_argument("--venv", type=Path, help="a virtual environment with torch (runs its torchrun)")
    torch_from.add_argument("--python", help="a Python with torch (runs python -m torch.distributed.run)")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--gpus", type=int, default=0, help="nccl: GPUs per node (runs with more ranks per node are skipped)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where the fixtures go")
    parser.add_argument("--only", nargs="*", default=[], help="scenario names or fixture names")
    parser.add_argument("--list", action="store_true", help="print the runs' names and stop")
    parser.add_argument("--keep-failed", action="store_true", help="leave a failed run's files in /tmp/faultline-dist")
    args = parser.parse_args(argv)
    if args.venv is not None:
        if not (args.venv / "bin" / "torchrun").exists():
            parser.error("--venv must name a virtual environment with torch installed")
        python, launcher = str(args.venv / "bin" / "python"), (str(args.venv / "bin" / "torchrun"),)
    else:
        python, launcher = args.python, (args.python, "-m", "torch.distributed.run")
    namespaces = can_unshare()
    setup = Setup(launcher, torch_version(python), args.backend, args.out, namespaces, args.keep_failed)
    runs = [r for r in RUNS if not args.only or r.scenario in args.only
            or r.name(setup.version, setup.backend) in args.only]
    if args.list:
        print("\n".join(r.name(setup.version, setup.backend) for r in runs))
        return 0
    skipped = [r for r in runs if (r.nnodes > 1 and not namespaces)
               or (args.backend == "nccl" and r.nproc > args.gpus)]
    for run in skipped:
        why = "needs a GPU per rank" if args.backend == "nccl" and run.nproc > args.gpus else \
            "two hosts need root and unshare(1)"
        print(f"{run.name(setup.version, setup.backend)}: skipped ({why})", flush=True)
    failed = [r.name(setup.version, setup.backend) for r in runs if r not in skipped and not generate(setup, r)]
    if failed:
        print(f"{len(failed)} of {len(runs)} runs not kept: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
