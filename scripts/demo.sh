#!/usr/bin/env bash
# make demo: a simulated 3-zone cluster, grid-wrapper in front of it as node edge-a1 (zone-a),
# the topology Service "web" pruned to zone-a next to the unpruned "api", why each endpoint is
# kept or pruned (/debug/topology), then a live relabel seen on an open watch. Everything it
# starts is stopped on exit.
set -euo pipefail
BIN=${1:-target/release}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "starting the simulated apiserver (3 zones, 4 nodes)"
"$BIN/grid-wrapper-sim" --fixture demo --listen 127.0.0.1:0 >"$WORK/sim.out" 2>"$WORK/sim.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q listening "$WORK/sim.out" 2>/dev/null && break; sleep 0.05; done
SIM=$(awk '/listening on/ {print $NF; exit}' "$WORK/sim.out")
[ -n "$SIM" ] || { echo "simulator did not start"; cat "$WORK/sim.log"; exit 1; }
echo "apiserver (simulated): $SIM"

PORT=$(free_port); HEALTH=$(free_port)
say "starting grid-wrapper as node edge-a1 (zone-a) on 127.0.0.1:$PORT"
"$BIN/grid-wrapper" --master="$SIM" --hostname=edge-a1 --bind-address="127.0.0.1:$PORT" \
  --metrics-bind-address="127.0.0.1:$HEALTH" 2>"$WORK/wrapper.log" &
PIDS+=($!)
for _ in $(seq 200); do curl -fsS "http://127.0.0.1:$HEALTH/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -fsS "http://127.0.0.1:$HEALTH/readyz" >/dev/null || { echo "grid-wrapper not ready"; cat "$WORK/wrapper.log"; exit 1; }
echo "grid-wrapper is ready: $(curl -fsS "http://127.0.0.1:$HEALTH/readyz")"

kcfg() { # a kubeconfig like kube-proxy's, pointing at $1
  cat >"$WORK/$2.kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$1"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KCFG
  echo "$WORK/$2.kubeconfig"
}
explain() { # why web's endpoints are kept or pruned, from the metrics address
  say "why? grid-wrapper explains each endpoint of web: curl $HEALTH_URL/debug/topology/default/web?format=text"
  curl -fsS "$HEALTH_URL/debug/topology/default/web?format=text"
}
HEALTH_URL="http://127.0.0.1:$HEALTH"
COLS='NAME:.metadata.name,SERVICE:.metadata.labels.kubernetes\.io/service-name,RV:.metadata.resourceVersion,ADDRESSES:.endpoints[*].addresses[0],NODES:.endpoints[*].nodeName'

if command -v kubectl >/dev/null; then
  UP=$(kcfg "$SIM" upstream); GW=$(kcfg "http://127.0.0.1:$PORT" wrapper)
  say "kubectl → apiserver: every endpoint of web (topologyKeys [\"zone\"]) and api (no annotation)"
  kubectl --kubeconfig "$UP" get endpointslices -n default -o custom-columns="$COLS"
  say "kubectl → grid-wrapper: web is pruned to zone-a (edge-a1, edge-a2); api is untouched; headless db and other-proxy are never served"
  kubectl --kubeconfig "$GW" get endpointslices -n default -o custom-columns="$COLS"
  explain
  say "opening a watch through grid-wrapper, then relabelling edge-b1 to zone-a upstream"
  kubectl --kubeconfig "$GW" get endpointslices -n default --watch-only -o custom-columns="$COLS" >"$WORK/watch.out" 2>&1 &
  WPID=$!; PIDS+=($WPID)
else
  echo "(kubectl not found: showing the same with curl)"
  show() { curl -fsS "$1/apis/discovery.k8s.io/v1/namespaces/default/endpointslices" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    m = s["metadata"]
    eps = s.get("endpoints") or []
    svc = m.get("labels", {}).get("kubernetes.io/service-name", "")
    ips = ",".join(e["addresses"][0] for e in eps)
    nodes = ",".join(e.get("nodeName") or "<none>" for e in eps)
    print("%-18s %-12s rv=%-18s %-45s %s" % (m["name"], svc, m["resourceVersion"], ips, nodes))'; }
  say "apiserver view"; show "$SIM"
  say "grid-wrapper view (web pruned to zone-a)"; show "http://127.0.0.1:$PORT"
  explain
  say "opening a watch through grid-wrapper, then relabelling edge-b1 to zone-a upstream"
  RV=$(curl -fsS "http://127.0.0.1:$PORT/apis/discovery.k8s.io/v1/endpointslices" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
  curl -fsSN "http://127.0.0.1:$PORT/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=true&resourceVersion=$RV" >"$WORK/watch.out" 2>&1 &
  WPID=$!; PIDS+=($WPID)
fi
sleep 1
curl -fsS -X POST "$SIM/sim/label-node" -H 'Content-Type: application/json' \
  -d '{"name":"edge-b1","labels":{"zone":"zone-a"}}' >/dev/null
for _ in $(seq 100); do grep -q web "$WORK/watch.out" 2>/dev/null && break; sleep 0.05; done
say "the watch received (edge-b1's endpoint joined web, with a new resourceVersion):"
if grep -q web "$WORK/watch.out"; then
  cat "$WORK/watch.out"
else
  echo "no change arrived on the watch"; cat "$WORK/watch.out"; cat "$WORK/wrapper.log"; exit 1
fi
say "done: stopping grid-wrapper and the simulator"
