#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster on 127.0.0.1:$PGPORT (default 55432) for the tests and
# prints its URL. Needs Debian's postgresql package (.ci/run installs it). Stop it with
# `.ci/postgres.sh stop`.
set -euo pipefail
PORT=${PGPORT:-55432}
DIR=${FAULTLINE_PG_DIR:-/tmp/faultline-pg}
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$BIN" ] || { echo "postgres.sh: no PostgreSQL server installed (apt-get install postgresql)" >&2; exit 1; }

as_pg() {
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

if [ "${1:-start}" = stop ]; then
    as_pg "$BIN/pg_ctl -D $DIR -m fast stop" >/dev/null 2>&1 || true
    exit 0
fi

if ! as_pg "$BIN/pg_ctl -D $DIR status" >/dev/null 2>&1; then
    rm -rf "$DIR"
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    as_pg "$BIN/initdb -D $DIR -A trust -U postgres" >/dev/null
    as_pg "$BIN/pg_ctl -D $DIR -o '-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off' -l $DIR/log -w start" >/dev/null
fi
echo "postgres://postgres@127.0.0.1:$PORT/postgres"
