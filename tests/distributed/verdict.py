"""The verdict a correct diagnosis gives a run of generate.py, written as its expected.toml.

Everything here follows from what the run was told to do (which rank fails, how, at which step);
the run's files decide only which sequence numbers are given (those the files show) and which
ranks torchrun's summaries blamed. The schema is in tests/fixtures/README.md.
"""

SAMPLES_PER_RANK = 64  # worker.py's
FEATURES, CLASSES = 32, 4  # worker.py's model: Linear(FEATURES, CLASSES)


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


def expected(run, job, ids, blamed, has_fr, shows_watchdog):
    """The verdict a correct diagnosis gives, from what the run was told to do (the files only
    decide which sequence numbers are given: those they show)."""
    what, root_class, error = ROOT[run.scenario]
    world = run.world_size
    root = run.root_rank
    others = [r for r in range(world) if r != root]
    bucket = FEATURES * CLASSES + CLASSES
    # The stalled collective, numbered as torch numbers the default group's collectives: the
    # flight recorder from 1 (collective_seq_id), DETAIL's fingerprints from 0 (SequenceNumber).
    step = {"skip_collective": run.steps, "size_mismatch": 1}.get(run.scenario, run.fail_step)
    never_entered = [root] if what in ("exception", "straggler", "signal") else []
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
            "name": job["name"],
            "origin": "generated",
            "generator": "tests/distributed/generate.py",
            "scenario": run.scenario,
            "torch": job["torch"],
            "backend": job["backend"],
            "launcher": "torchrun",
            "world_size": world,
            "nnodes": run.nnodes,
            "nproc_per_node": run.nproc,
            "hosts": job["hosts"],
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
            # DETAIL's checks stall every rank before the step's collective is enqueued.
            "fr_seq": step if has_fr and not run.detail else None,
            "watchdog_seq": step if shows_watchdog else None,
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
