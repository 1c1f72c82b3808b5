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

exec bash "$(dirname "$0")/bounded.sh" snapbench "$LIMIT" \
  "$BIN/examples/loadbench" --snapshot --bin-dir "$BIN" --out "$OUT" "${@:2}"
