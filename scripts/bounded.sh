#!/usr/bin/env bash
# bounded.sh NAME LIMIT_SECS CMD [ARGS...]: runs CMD in its own process group under a hard
# timeout, and kills the whole group on any exit, so nothing CMD started (simulator,
# grid-wrapper, nginx) outlives it. Exits with CMD's status. Used by loadbench.sh, snapbench.sh.
set -euo pipefail
NAME=$1; LIMIT=$2; shift 2
set -m  # CMD gets a process group of its own
"$@" &
PID=$!
trap 'kill -TERM -- -"$PID" 2>/dev/null || true' EXIT INT TERM
( sleep "$LIMIT"; echo "$NAME: hard timeout of ${LIMIT}s" >&2; kill -KILL -- -"$PID" 2>/dev/null ) &
GUARD=$!
disown "$GUARD"
rc=0; wait "$PID" || rc=$?
kill -- -"$GUARD" 2>/dev/null || true
trap - EXIT
kill -KILL -- -"$PID" 2>/dev/null || true  # anything left in its group
exit "$rc"
