#!/usr/bin/env bash
# Load benchmark of the HTTP service on loopback (wrk), each figure beside the trivial POST route
# of the same server in the same run. Needs wrk (apt-get install wrk) and python3. Bounded: ~1.5
# minutes. BIN=path runs another build of faultline (for before/after comparisons).
#   benches/load/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-10}
PORT=${PORT:-18181}
DIR=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$DIR"' EXIT

if [ -z "${BIN:-}" ]; then
    cargo build --release -q
    BIN=target/release/faultline
fi
DB="sqlite://$DIR/load.db"
TOKEN=$($BIN token create --name load --database "$DB" 2>/dev/null)
FAULTLINE_LOG=warn $BIN serve --database "$DB" --bind "127.0.0.1:$PORT" --rate-limit 0 >/dev/null &
SERVER=$!
sleep 1

export FAULTLINE_BENCH_BODY="$DIR/body.log" FAULTLINE_BENCH_TOKEN="$TOKEN"
# A 4 KB real-looking CUDA traceback (the benchmark generator's).
cargo run --release -q --example gen_noisy_log -- --traceback "$FAULTLINE_BENCH_BODY"
# As many bytes of the same CI noise with no failure in it: what reading 4 KB costs by itself.
NOISE="$DIR/noise.log"
cargo run --release -q --example gen_noisy_log -- --noise "$NOISE"
wc -c "$FAULTLINE_BENCH_BODY" "$NOISE"
# The real logs of the held-out corpus, NUL-separated, for the routes that post them in turn.
export FAULTLINE_BENCH_CORPUS="$DIR/corpus.bin"
python3 -c 'import json, sys; sys.stdout.write("\0".join(json.loads(l)["log"] for l in open(sys.argv[1])))' \
    tests/fixtures/corpus/held_out.jsonl > "$FAULTLINE_BENCH_CORPUS"

run() { # name path lua-variant [body file]
    echo "== $1"
    FAULTLINE_BENCH_BODY=${4:-$FAULTLINE_BENCH_BODY} VARY=$3 wrk -t2 -c32 -d"${SECS}s" --latency -s benches/load/post.lua "http://127.0.0.1:$PORT$2" \
        | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|Socket errors'
}
# Warm-up, not reported: the first analyses on each server thread compile regexes and build the
# automata's states (their cost is the CLI's start-up figure in benches/RESULTS.md).
for vary in same corpus; do
    VARY=$vary wrk -t2 -c32 -d2s -s benches/load/post.lua "http://127.0.0.1:$PORT/api/v1/analyze?store=false" >/dev/null
done
FAULTLINE_BENCH_BODY=$NOISE VARY=same wrk -t2 -c32 -d2s -s benches/load/post.lua \
    "http://127.0.0.1:$PORT/api/v1/analyze?store=false" >/dev/null
run "trivial POST (/api/v1/ping), 4 KB body" /api/v1/ping same
run "analyze, store=false, 4 KB of CI noise, nothing found" "/api/v1/analyze?store=false" same "$NOISE"
run "analyze, store=false, 4 KB traceback" "/api/v1/analyze?store=false" same
run "analyze, store=false, the held-out corpus's real logs in turn" "/api/v1/analyze?store=false" corpus
run "analyze and store (commit before 2xx), the same log each time" /api/v1/analyze same
run "analyze and store, a different log each time" /api/v1/analyze vary
run "analyze and store, the held-out corpus's real logs in turn" /api/v1/analyze corpus
echo "== incidents stored"
curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^faultline_incidents_stored_total'
