#!/usr/bin/env bash
# make run: the simulated 3-zone apiserver in the background and grid-wrapper in the foreground
# as node edge-a1 on 127.0.0.1:51006 (health on 127.0.0.1:51007). Ctrl-C stops both.
# Try: curl -s localhost:51006/apis/discovery.k8s.io/v1/endpointslices
#      curl -s -X POST "$SIM/sim/label-node" -d '{"name":"edge-b1","labels":{"zone":"zone-a"}}'
set -euo pipefail
BIN=${1:-target/release}
WORK=$(mktemp -d)
"$BIN/grid-wrapper-sim" --fixture demo >"$WORK/sim.out" 2>"$WORK/sim.log" &
SIM_PID=$!
trap 'kill $SIM_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q listening "$WORK/sim.out" 2>/dev/null && break; sleep 0.05; done
SIM=$(awk '/listening on/ {print $NF; exit}' "$WORK/sim.out")
echo "simulated apiserver: $SIM   (control API: POST $SIM/sim/label-node, /sim/apply, /sim/delete)"
echo "grid-wrapper: http://127.0.0.1:51006 as node edge-a1; Ctrl-C stops both"
"$BIN/grid-wrapper" --master="$SIM" --hostname=edge-a1 --bind-address=127.0.0.1:51006 \
  --metrics-bind-address=127.0.0.1:51007 -v 2 || true
