#!/usr/bin/env bash
# make relayflood: the kube-proxy port's LIST latency while the relay port is flooded with
# reconnects (docs/SEMANTICS.md §12.1), RUNS times (default 3) alternated between the binaries,
# bounded and in its own process group (scripts/bounded.sh); every run and the medians with their
# spread in out/relayflood.md, which is also printed.
#   bash scripts/relayflood.sh BIN_DIR GW_BIN [BEFORE_BIN]
# BIN_DIR holds grid-wrapper-sim; GW_BIN is measured as "this", BEFORE_BIN (e.g. an older
# commit's build) as "before". RELAYFLOOD_RUNS, RELAYFLOOD_SECS (20 s of LISTs without the flood,
# then as long with it), RELAYFLOOD_PARTIAL=1 (the sockets send the start of a ClientHello only).
set -euo pipefail
BIN=$1
RUNS=${RELAYFLOOD_RUNS:-3}
SECS=${RELAYFLOOD_SECS:-20}
OUT=${RELAYFLOOD_OUT:-out/relayflood.md}
LIMIT=${RELAYFLOOD_TIMEOUT:-1800}
bins=("this=$2")
if [ -n "${3:-}" ]; then bins=("before=$3" "${bins[@]}"); fi
partial=()
if [ "${RELAYFLOOD_PARTIAL:-0}" = 1 ]; then partial=(--partial); fi
mkdir -p out
bash "$(dirname "$0")/bounded.sh" relayflood "$LIMIT" \
  python3 "$(dirname "$0")/relayflood.py" bench --sim "$BIN/grid-wrapper-sim" --out "$OUT" \
  --runs "$RUNS" --secs "$SECS" "${partial[@]}" "${bins[@]}"
echo "relayflood: $RUNS runs in $OUT" >&2
