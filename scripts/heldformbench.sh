#!/usr/bin/env bash
# What the held form costs (BENCHMARKS.md, "One held form per object"), at scale S with
# real-shaped objects, for each grid-wrapper binary given, 3 starts each, alternated:
#   lists:  the slices LIST of kube-proxy's selector 1 s after /readyz: first protobuf (encodes,
#           and with the held form decodes and compares, every slice), second protobuf, JSON,
#           JSON again (curl's time_total, seconds);
#   relist: after a protobuf client read kube-proxy's four lists, every reflector made to relist
#           (a headless Service applied, /sim/compact, /sim/close-watches); each kind's "applied by
#           the writer in" from grid-wrapper's own log line.
# Usage: bash scripts/heldformbench.sh lists|relist BIN [BIN...]
# The simulator is target/release/grid-wrapper-sim; ports 47131-47153 on 127.0.0.1.
set -u
MODE=${1:?lists or relist}; shift
SIMBIN=${SIMBIN:-target/release/grid-wrapper-sim}
SIZE="--nodes 500 --services 2000 --zones 20 --endpoints-per-slice 10"
T=$(mktemp -d)
SIM=""; GW=""
cleanup() { [ -n "$GW" ] && kill "$GW" 2>/dev/null; [ -n "$SIM" ] && kill "$SIM" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
"$SIMBIN" --fixture scale --shape real --history 20000 $SIZE --listen 127.0.0.1:47131 > "$T/sim.out" 2>&1 &
SIM=$!
for _ in $(seq 600); do grep -q http "$T/sim.out" && break; sleep 0.2; done
L="labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"
P="/apis/discovery.k8s.io/v1/endpointslices?$L"
PB='Accept: application/vnd.kubernetes.protobuf, */*'
GWURL=http://127.0.0.1:47132
for run in 1 2 3; do
  for bin in "$@"; do
    "$bin" --master=http://127.0.0.1:47131 --hostname=node-00000 --bind-address=127.0.0.1:47132 \
      --metrics-bind-address=127.0.0.1:47133 > "$T/gw.out" 2>&1 &
    GW=$!
    for _ in $(seq 1200); do curl -sf http://127.0.0.1:47133/readyz >/dev/null && break; sleep 0.1; done
    sleep 1
    if [ "$MODE" = lists ]; then
      t() { curl -s -o /dev/null -w "%{time_total}" "$@"; }
      echo "run $run $(basename "$bin"): first_pb=$(t -H "$PB" "$GWURL$P") second_pb=$(t -H "$PB" "$GWURL$P") json=$(t "$GWURL$P") json2=$(t "$GWURL$P")"
    else
      for p in "$P" "/api/v1/services?$L" "/api/v1/endpoints?$L" "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-00000"; do
        curl -s -o /dev/null -H "$PB" "$GWURL$p"
      done
      sleep 1
      curl -s -X POST -d '{"apiVersion":"v1","kind":"Service","metadata":{"name":"bump","namespace":"default","labels":{"service.kubernetes.io/headless":""}},"spec":{"clusterIP":"None","ports":[{"port":80}]}}' http://127.0.0.1:47131/sim/apply >/dev/null
      curl -s -X POST -d '{}' http://127.0.0.1:47131/sim/compact >/dev/null
      curl -s -X POST -d '{}' http://127.0.0.1:47131/sim/close-watches >/dev/null
      sleep 6
      echo "run $run $(basename "$bin"): $(grep 'items applied' "$T/gw.out" | tail -4 | sed -E 's/.*INFO +\[[^]]*\] //; s/: list of ([0-9]+) items applied.*writer in ([0-9.]+) ms.*/ (\1) writer \2 ms/' | tr '\n' ';')"
      curl -s -X POST -d '{"apiVersion":"v1","kind":"Service","metadata":{"name":"bump","namespace":"default"}}' http://127.0.0.1:47131/sim/delete >/dev/null
    fi
    kill "$GW"; wait "$GW" 2>/dev/null; GW=""
  done
done
