#!/usr/bin/env bash
# make snapbench: runs the loadbench example in --snapshot mode against the release binaries:
# the --cache-dir snapshot at scale S (size, write time and CPU, LIST latency with and without
# writes, offline start from the snapshot). The example runs in its own process group, killed on
# any exit, and under a hard timeout, so nothing it started (simulator, grid-wrapper) outlives
# this script.
set -euo pipefail
BIN=${1:-target/release}
OUT=${SNAPBENCH_OUT:-out/snapbench.md}
LIMIT=${SNAPBENCH_TIMEOUT:-240}

set -m  # the example gets a process group of its own
"$BIN/examples/loadbench" --snapshot --bin-dir "$BIN" --out "$OUT" "${@:2}" &
PID=$!
trap 'kill -TERM -- -"$PID" 2>/dev/null || true' EXIT INT TERM
( sleep "$LIMIT"; echo "snapbench: hard timeout of ${LIMIT}s" >&2; kill -KILL -- -"$PID" 2>/dev/null ) &
GUARD=$!
disown "$GUARD"
rc=0; wait "$PID" || rc=$?
kill -- -"$GUARD" 2>/dev/null || true
trap - EXIT
kill -KILL -- -"$PID" 2>/dev/null || true  # anything left in its group
exit "$rc"
