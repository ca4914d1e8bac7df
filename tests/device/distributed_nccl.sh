#!/usr/bin/env bash
# The distributed scenarios of tests/distributed/ (one rank raises, skips a collective, sleeps past
# the timeout, all-reduces another size, dies by SIGKILL / SIGSEGV) on NCCL instead of gloo, kept
# as fixtures in the same layout, with torch's own flight-recorder dumps (written by the NCCL
# watchdog on a timeout: TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT).
#
# NOT RUN YET: NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU
# detected"), so it needs a machine with a GPU per rank (4 at least; the 16-rank run needs 16),
# and the machines lent so far have one GPU. Written to be ready for a multi-GPU session; the
# NCCL path of worker.py and generate.py is checked here only for syntax and by the gloo runs
# that share it.
#
# Usage (on the device machine, from the repository root): OUT=dir tests/device/distributed_nccl.sh
# The fixtures land in $OUT/distributed/<scenario>-torch<version>-nccl-n<N>/; a run that did not
# fail as meant is reported and left in /tmp/faultline-dist for a look.
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder the results go to}"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if ((gpus < 4)); then
  echo "distributed_nccl.sh needs a GPU per rank, 4 at least; this machine has $gpus" | tee "$OUT/distributed.txt"
  exit 2
fi
timeout 540 python3 tests/distributed/generate.py --python python3 --backend nccl --gpus "$gpus" \
  --out "$OUT/distributed" --keep-failed 2>&1 | tee "$OUT/distributed.txt"
status=${PIPESTATUS[0]}
python3 tests/distributed/check_expected.py "$OUT"/distributed/*/ 2>&1 | tee -a "$OUT/distributed.txt"
exit "$status"
