"""Check every distributed fixture's expected.toml against the fixture's own files.

    python3 tests/distributed/check_expected.py [FIXTURE_DIR ...]

With no argument it checks every folder of tests/fixtures/distributed/. For each: the keys the
schema (tests/fixtures/README.md) requires are there with the right types; every rank named is
within the world size and no rank is both root and cascade; the root's class is in
rules/taxonomy.toml (or "none"); the root's host and local rank are those the root rank printed
when it started (generated fixtures); every evidence line is in one of the fixture's files; a
sequence number the logs print (NCCL's watchdog, DETAIL's fingerprints) is given, and every
sequence number given is the one the files show for the stalled collective (for the flight
recorder: the last entry of a cascade rank's dump). Prints one line per problem and exits 1 if there is any. Needs Python 3.11+ (tomllib).
"""

import json
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "distributed"
TAXONOMY = REPO / "rules" / "taxonomy.toml"
WHATS = {"exception", "signal", "straggler", "skipped_collective", "size_mismatch", "hardware", "unknown"}
ORIGINS = {"generated", "public"}
IDENTITY = re.compile(r"^rank (\d+) of (\d+), local rank (\d+) on (\S+)$", re.M)


def taxonomy_classes():
    return {c["id"] for c in tomllib.loads(TAXONOMY.read_text())["class"]} | {"none"}


def text_files(fixture):
    for path in sorted(fixture.rglob("*")):
        if path.is_file() and path.name != "expected.toml":
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                continue  # torch's pickled flight-recorder dumps


def flight_recorder_dumps(fixture):
    """{rank: [entries]} from the JSON dumps (fr_trace/fr_<rank>.json)."""
    dumps = {}
    for path in fixture.glob("*/fr_trace/fr_*.json"):
        rank = int(path.stem.removeprefix("fr_"))
        dumps[rank] = json.loads(path.read_text()).get("entries", [])  # an empty recorder has none
    return dumps


class Checker:
    def __init__(self, fixture, classes):
        self.fixture = fixture
        self.classes = classes
        self.problems = []

    def problem(self, message):
        self.problems.append(f"{self.fixture.name}: {message}")

    def need(self, table, key, kind, doc):
        value = doc.get(table, {}).get(key)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            self.problem(f"[{table}] {key} is missing or not {kind.__name__}")
            return None
        return value

    def ranks(self, table, key, doc, world):
        value = doc.get(table, {}).get(key, [])
        if not isinstance(value, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in value):
            self.problem(f"[{table}] {key} is not a list of ranks")
            return set()
        if world is not None:
            for rank in value:
                if not 0 <= rank < world:
                    self.problem(f"[{table}] {key}: rank {rank} is outside the world of {world}")
        return set(value)

    def check(self):
        path = self.fixture / "expected.toml"
        if not path.is_file():
            self.problem("no expected.toml")
            return self.problems
        try:
            doc = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            self.problem(f"expected.toml is not TOML: {err}")
            return self.problems
        name = self.need("job", "name", str, doc)
        if name is not None and name != self.fixture.name:
            self.problem(f"[job] name {name!r} is not the folder's name")
        origin = self.need("job", "origin", str, doc)
        if origin is not None and origin not in ORIGINS:
            self.problem(f"[job] origin {origin!r} is not one of {sorted(ORIGINS)}")
        world = doc.get("job", {}).get("world_size")
        if origin == "generated" or world is not None:
            world = self.need("job", "world_size", int, doc)
        if world is not None and world < 2:
            self.problem("[job] world_size is below 2")
        self.need("job", "backend", str, doc)
        files = list(text_files(self.fixture))
        if not files:
            self.problem("no log files")
        self.check_root(doc, world, files)
        self.check_ranks(doc, world)
        self.check_collective(doc, files)
        if origin == "generated":
            self.check_generated(doc, world)
        if origin == "public":
            source = self.need("job", "source", str, doc)
            if source is not None and not source.startswith("https://"):
                self.problem("[job] source is not an https address")
            self.need("job", "note", str, doc)
        elif not doc.get("root", {}).get("ranks"):
            self.problem("[root] ranks is empty: only a public log may leave its root unknown")
        local = doc.get("root", {}).get("local_rank")
        nproc = doc.get("job", {}).get("nproc_per_node")
        if isinstance(local, int) and isinstance(nproc, int) and not 0 <= local < nproc:
            self.problem(f"[root] local_rank {local} is outside nproc_per_node {nproc}")
        return self.problems

    def check_root(self, doc, world, files):
        self.ranks("root", "ranks", doc, world)
        what = self.need("root", "what", str, doc)
        if what is not None and what not in WHATS:
            self.problem(f"[root] what {what!r} is not one of {sorted(WHATS)}")
        cls = self.need("root", "class", str, doc)
        if cls is not None and cls not in self.classes:
            self.problem(f"[root] class {cls!r} is not in rules/taxonomy.toml")
        evidence = doc.get("root", {}).get("evidence", [])
        if not isinstance(evidence, list) or not all(isinstance(e, str) and e for e in evidence):
            self.problem("[root] evidence is not a list of lines")
            return
        for line in evidence:
            if not any(line in text for _, text in files):
                self.problem(f"[root] evidence {line!r} is in none of the files")

    def check_ranks(self, doc, world):
        roots = self.ranks("root", "ranks", doc, world)
        cascade = self.ranks("ranks", "cascade", doc, world)
        if roots & cascade:
            self.problem(f"ranks {sorted(roots & cascade)} are both root and cascade")
        for key in ("never_entered", "disagree", "launcher_blamed", "no_log"):
            self.ranks("ranks", key, doc, world)
        cls = doc.get("ranks", {}).get("cascade_class")
        if cascade and cls not in self.classes:
            self.problem(f"[ranks] cascade_class {cls!r} is not in rules/taxonomy.toml")

    def check_collective(self, doc, files):
        collective = doc.get("collective", {})
        op = collective.get("op")
        dumps = flight_recorder_dumps(self.fixture)
        fr_seq = collective.get("fr_seq")
        if fr_seq is not None and not dumps:
            self.problem("[collective] fr_seq is given, but there is no flight-recorder dump")
        if fr_seq is not None:
            cascade = set(doc.get("ranks", {}).get("cascade", []))
            last = {rank: entries[-1] for rank, entries in dumps.items() if entries and rank in cascade}
            stalled = [e for e in last.values() if e["collective_seq_id"] == fr_seq
                       and e["profiling_name"].split(":")[-1].replace("_", "") == op]
            if not stalled:
                self.problem(f"no cascade rank's flight recorder ends in {op} #{fr_seq}")
        self.check_shown_seq("watchdog_seq", r"WorkNCCL\(SeqNum=(\d+)", "SeqNum={}, OpType={}", op, collective, files)
        self.check_shown_seq("fingerprint_seq", r"SequenceNumber=(\d+)", "SequenceNumber={}, OpType={}", op, collective, files)

    def check_shown_seq(self, key, pattern, wanted, op, collective, files):
        """A sequence number the logs print is in expected.toml, and the logs show it for its op."""
        shown = sorted({int(n) for _, text in files for n in re.findall(pattern, text)})
        seq = collective.get(key)
        if shown and seq is None:
            self.problem(f"the files show sequence numbers {shown}, [collective] {key} is missing")
        if seq is not None:
            line = wanted.format(seq, str(op).upper())
            if not any(line in text for _, text in files):
                self.problem(f"[collective] {key}: no file shows {line!r}")

    def check_generated(self, doc, world):
        nnodes = self.need("job", "nnodes", int, doc)
        nproc = self.need("job", "nproc_per_node", int, doc)
        hosts = doc.get("job", {}).get("hosts")
        self.need("job", "torch", str, doc)
        if None not in (nnodes, nproc, world) and nnodes * nproc != world:
            self.problem(f"nnodes {nnodes} x nproc_per_node {nproc} is not world_size {world}")
        if not isinstance(hosts, list) or len(hosts) != nnodes:
            self.problem("[job] hosts is not one host per node")
            return
        for host in hosts:
            if not (self.fixture / host / "console.log").is_file():
                self.problem(f"no {host}/console.log")
        printed = {}
        for stdout in self.fixture.glob("*/logs/*/attempt_0/*/stdout.log"):
            for rank, _w, local, host in IDENTITY.findall(stdout.read_text(errors="replace")):
                printed[int(rank)] = (host, int(local))
        host = self.need("root", "host", str, doc)
        local = self.need("root", "local_rank", int, doc)
        for rank in doc.get("root", {}).get("ranks", []):
            if printed.get(rank) != (host, local):
                self.problem(f"root rank {rank} printed {printed.get(rank)}, expected.toml says {(host, local)}")
        roots = set(doc.get("root", {}).get("ranks", []))
        cascade = set(doc.get("ranks", {}).get("cascade", []))
        if world is not None and roots | cascade != set(range(world)):
            self.problem("in a generated job every rank is root or cascade")


def main(argv):
    fixtures = [Path(a).resolve() for a in argv] or sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    classes = taxonomy_classes()
    problems = [p for fixture in fixtures for p in Checker(fixture, classes).check()]
    for problem in problems:
        print(problem)
    print(f"{len(fixtures)} fixtures checked, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
