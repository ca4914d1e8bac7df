#!/usr/bin/env bash
# Everything that needs a GPU, in one call of the device tool (DEVELOPERS.md, "Running the GPU
# tests and the benchmark on a lent GPU machine"): the binaries built here are carried in
# .devbin; what they print lands in $OUT.
#
#   1. the device, the driver and the libraries found;
#   2. the kernel compile test and the GPU tests (GPU results == CPU results, real cuBLAS);
#   3. the capture helper's unit tests with torch;
#   4. real failing training steps (tests/device/failures.py) on the GPU: faultline analyzes each
#      job's log, then replays its snapshot on the GPU; one of them goes through `faultline
#      serve` (upload by the capture helper, the embedded worker on the GPU);
#   5. the GPU benchmark beside the torch baseline.
#
# Usage (on the device machine, from the repository root): OUT=dir tests/device/run.sh [STEPS]
# where STEPS is any of info tests python failures service bench (default: all).
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder the results go to}"
BIN=${BIN:-.devbin}
STEPS=${*:-info tests python failures service bench}
want() { [[ " $STEPS " == *" $1 "* ]]; }
say() { printf '\n=== %s ===\n' "$*"; }

LIBS=$(find /usr/local /usr/lib /opt \( -name 'libnvrtc.so*' -o -name 'libcublas.so*' \) 2>/dev/null \
  | grep -v '/stubs/' | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
FAULTLINE=$BIN/faultline
summary=$OUT/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

if want info; then
  say info
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi 2>&1 | tee "$OUT/info.txt"

if want tests; then
  say kernels_compile
  CI=1 timeout 120 "$BIN/kernels_compile" 2>&1
  note "kernels_compile: exit $?"
  say gpu tests
  FAULTLINE_REQUIRE_GPU=1 timeout 300 "$BIN/gpu" --test-threads 4 2>&1
  note "gpu tests: exit $?"
fi >"$OUT/tests.txt" 2>&1
tail -n 30 "$OUT/tests.txt"

if want python; then
  say capture helper unit tests with torch
  (cd clients/python/tests && PYTHONPATH=../src timeout 180 python3 -m unittest -v test_faultline_capture 2>&1)
  note "capture helper unit tests: exit $?"
fi >"$OUT/python.txt" 2>&1
tail -n 5 "$OUT/python.txt"

cases=$OUT/cases
mkdir -p "$cases"
if want failures; then
  say failures
  for name in $(python3 tests/device/failures.py --list); do
    blocking=0
    [[ $name == *_blocking ]] && blocking=1
    # The job's log: everything the step printed, as a CI job keeps it.
    CUDA_LAUNCH_BLOCKING=$blocking timeout 120 python3 tests/device/failures.py "$name" "$cases" \
      >"$cases/$name.job.log" 2>&1
    step=$?
    "$FAULTLINE" analyze --format json "$cases/$name.job.log" >"$cases/$name.json" 2>"$cases/$name.err"
    top=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d["findings"]; print(f[0]["class"], f[0]["confidence"], f[0]["rule"]) if f else print("-")' \
      "$cases/$name.json" 2>/dev/null)
    replay=-
    if [[ -f $cases/$name.safetensors ]]; then
      "$FAULTLINE" analyze --backend gpu --snapshot "$cases/$name.safetensors" "$cases/$name.job.log" \
        >"$cases/$name.replay.txt" 2>&1
      replay=$(grep -E '^replay' "$cases/$name.replay.txt" | sed 's/ — .*//' | paste -sd'|')
    fi
    note "$name: step exit $step; top: $top; $replay"
  done
fi 2>&1 | tee "$OUT/failures.txt"

if want service; then
  say service
  db=$cases/service.db
  rm -f "$db"*
  token=$("$FAULTLINE" token create --name device --database "sqlite://$db" 2>/dev/null | tail -n 1)
  FAULTLINE_REPLAY_BACKEND=gpu "$FAULTLINE" serve --bind 127.0.0.1:18080 --database "sqlite://$db" \
    --snapshot-store "$cases/service-snapshots" >"$cases/service.serve.log" 2>&1 &
  server=$!
  for _ in $(seq 50); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.2; done
  FAULTLINE_SERVER=http://127.0.0.1:18080 FAULTLINE_TOKEN=$token timeout 120 \
    python3 tests/device/failures.py classifier_labels_out_of_range "$cases/service" >"$cases/service.job.log" 2>&1
  status=$(grep -o 'replay job at [^ ]*' "$cases/service.job.log" | awk '{print $4}')
  echo "status url: $status"
  for _ in $(seq 100); do
    curl -s "$status" >"$cases/service.job.json"
    grep -q '"state":"done"\|"state":"failed"' "$cases/service.job.json" && break
    sleep 0.2
  done
  python3 - "$cases/service.job.json" <<'EOF' | tee -a "$summary"
import json, sys
job = json.load(open(sys.argv[1]))
results = job.get("results") or []
print("service job:", job.get("state"), "|", "; ".join(f"{r.get('backend')} {r.get('verdict')}: {r.get('summary')}" for r in results))
EOF
  kill -TERM $server
  wait $server
  note "service: serve exit $?"
fi >"$OUT/service.txt" 2>&1
tail -n 3 "$OUT/service.txt"

if want bench; then
  say gpu_bench
  timeout 240 "$BIN/gpu_bench" --mib 1024 --reps 20 2>&1
  note "gpu_bench: exit $?"
  say torch baseline
  timeout 120 python3 benches/gpu_torch_baseline.py --mib 1024 --reps 20 2>&1
  note "torch baseline: exit $?"
fi >"$OUT/bench.txt" 2>&1

tar -czf "$OUT/cases.tgz" -C "$OUT" cases && rm -rf "$cases"
say summary
cat "$OUT/bench.txt" 2>/dev/null | tail -n 25
cat "$summary"
