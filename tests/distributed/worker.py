"""One rank of a small data-parallel training job that fails the way --scenario says.

    torchrun ... tests/distributed/worker.py --scenario NAME --root-rank R [--fail-step K] [--backend nccl]

Every rank trains the same small classifier on its shard of a random data set and averages its
gradients with one ``all_reduce`` per step (one bucket, as DDP does for a small model). At step
``--fail-step`` the rank ``--root-rank`` goes wrong, the way real jobs do:

- ``raise_index``: it reads a sample past the end of its data set (``IndexError``), while the
  other ranks already wait in the step's ``all_reduce``;
- ``raise_value``: its data pipeline meets a label it cannot parse (``ValueError``);
- ``skip_collective``: its batch is empty, so it ``continue``s past the step's ``all_reduce``
  and runs one collective ahead of the others until the final ``barrier``;
- ``sleep_past_timeout``: it stalls (a slow file system, a checkpoint load) for longer than the
  process group's timeout before the step's ``all_reduce``;
- ``size_mismatch``: its model has one extra output class, so its gradient bucket is larger than
  the others' in the same ``all_reduce``;
- ``sigkill``: it is killed by SIGKILL (what the kernel's out-of-memory killer sends) during its
  step, while the other ranks wait in the step's ``all_reduce``;
- ``sigsegv``: it dereferences a null pointer during its step (a crash in a native extension): a
  real SIGSEGV, while the other ranks wait in the step's ``all_reduce``.

(A rank that starts its ``all_reduce`` and dies a moment later does not die "inside" it: the
others are there, the collective completes, and they stall in the next one; the first runs of
this script showed it, so the signal scenarios die before the collective.)

Each rank prints one line with its identity when it starts; rank 0 prints the loss of each step.
Nothing else is printed by this script: what follows a failure is what torch and torchrun print.
With ``--backend nccl`` each rank computes on GPU LOCAL_RANK (the data set stays on the CPU, as a
``Dataset``'s does, so the failures are the same ones).

Where the installed torch records gloo collectives in its flight recorder (torch 2.8 and later:
``torch._C._distributed_c10d._dump_fr_trace_file``), a rank that leaves by an exception or by
SIGTERM (torchrun stopping the job) first dumps its recorder to ``$TORCH_FR_DUMP_TEMP_FILE<rank>``
as torch's own dump does (and to ``….json``): torch dumps NCCL's recorder on a timeout by itself,
but not gloo's, so this script does it (for gloo only) where a user following the
flight-recorder tutorial would.
"""

import argparse
import ctypes
import os
import signal
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record

SCENARIOS = (
    "raise_index",
    "raise_value",
    "skip_collective",
    "sleep_past_timeout",
    "size_mismatch",
    "sigkill",
    "sigsegv",
)
SAMPLES_PER_RANK = 64
FEATURES = 32
CLASSES = 4


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--root-rank", type=int, required=True)
    parser.add_argument("--fail-step", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=10.0, help="process group timeout, seconds")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    return parser.parse_args(argv)


def flight_recorder_dump():
    """The function that writes this rank's gloo flight recorder, or None where torch has none.

    It writes torch's pickle (``_dump_fr_trace_file``: ``$TORCH_FR_DUMP_TEMP_FILE<rank>``, what
    torch's ``fr_trace`` tool reads) and the same recorder as JSON beside it (``….json``).
    """
    c10d = torch._C._distributed_c10d
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not hasattr(c10d, "_dump_fr_trace_file") or not prefix:
        return None

    def dump(rank):
        c10d._dump_fr_trace_file(rank)
        with open(f"{prefix}{rank}.json", "wb") as out:
            out.write(c10d._dump_fr_trace_json())

    return dump


def dump_on_sigterm(dump, rank):
    """Dump the recorder when torchrun stops this rank, then die by SIGTERM as before."""

    def handler(signum, _frame):
        dump(rank)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, handler)


def gradient_bucket(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def read_sample(data, index):
    return data[index]


def parse_label(text):
    return int(float(text))


def train(args, rank, world, device):
    torch.manual_seed(0)
    data = torch.randn(SAMPLES_PER_RANK * world, FEATURES)
    labels = torch.randint(0, CLASSES, (SAMPLES_PER_RANK * world,))
    classes = CLASSES + 1 if args.scenario == "size_mismatch" and rank == args.root_rank else CLASSES
    model = torch.nn.Linear(FEATURES, classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    shard = range(rank * SAMPLES_PER_RANK, (rank + 1) * SAMPLES_PER_RANK)
    batch_size = 16
    for step in range(1, args.steps + 1):
        failing = step == args.fail_step and rank == args.root_rank
        start = shard.start + ((step - 1) * batch_size) % SAMPLES_PER_RANK
        indices = list(range(start, start + batch_size))
        if failing and args.scenario == "raise_index":
            indices[-1] = len(data)  # an index computed one shard too far
        if failing and args.scenario == "skip_collective":
            continue  # "empty batch": nothing to average
        if failing and args.scenario == "sleep_past_timeout":
            time.sleep(args.timeout * 4)
        x = torch.stack([read_sample(data, i) for i in indices])
        y = labels[indices]
        if failing and args.scenario == "raise_value":
            y = torch.tensor([parse_label(t) for t in ["1", "0", "n/a", "3"]])
            x = x[: len(y)]
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        bucket = gradient_bucket(model)
        if failing and args.scenario == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if failing and args.scenario == "sigsegv":
            ctypes.string_at(0)  # a null pointer read: SIGSEGV
        dist.all_reduce(bucket)
        bucket /= world
        offset = 0
        for p in model.parameters():
            p.grad.copy_(bucket[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)


@record
def main(argv):
    args = parse_args(argv)
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}, local rank {local_rank} on {socket.gethostname()}", flush=True)
    dump = flight_recorder_dump() if args.backend == "gloo" else None
    if dump is not None:
        dump_on_sigterm(dump, rank)
    try:
        train(args, rank, world, device)
    except BaseException:
        if dump is not None:
            dump(rank)
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
