#!/usr/bin/env bash
# The code a start runs, for scripts/edge_order.py: BIN (an x86_64 edge build) under callgrind
# against the in-repo simulator's demo cluster, as the idle row of make loadbench runs it (node
# edge-a1): start, sync, /readyz 200, 6 s of idle (watches, health probes), then SIGINT.
#   bash scripts/edge-trace.sh BIN OUT.callgrind
set -euo pipefail
BIN=$1; OUT=$2
SIMBIN=${SIMBIN:-target/release/grid-wrapper-sim}
[ -x "$SIMBIN" ] || cargo build --release --bin grid-wrapper-sim
command -v valgrind >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$SIMBIN" --fixture demo --listen 127.0.0.1:0 > "$WORK/sim.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/sim.log" && break; sleep 0.05; done
MASTER=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$WORK/sim.log" | head -1)
[ -n "$MASTER" ] || { echo "edge-trace: the simulator did not start" >&2; exit 1; }
PORT=$(free_port); HEALTH=$(free_port)
valgrind --tool=callgrind --callgrind-out-file="$OUT" --dump-instr=yes --compress-strings=no \
  --compress-pos=no "$BIN" --master="$MASTER" --hostname=edge-a1 \
  --bind-address="127.0.0.1:$PORT" --metrics-bind-address="127.0.0.1:$HEALTH" > "$WORK/gw.log" 2>&1 &
GW=$!
PIDS+=($GW)
ready=0
for _ in $(seq 1 600); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$HEALTH/readyz" || true)" = 200 ]; then ready=1; break; fi
  sleep 0.05
done
[ $ready = 1 ] || { echo "edge-trace: not ready under valgrind within 30 s" >&2; tail -20 "$WORK/gw.log" >&2; exit 1; }
sleep 6
kill -INT "$GW"
wait "$GW" || true
[ -s "$OUT" ] || { echo "edge-trace: no callgrind output" >&2; tail -20 "$WORK/gw.log" >&2; exit 1; }
