#!/usr/bin/env bash
# make cross-test: each ARM binary from `make cross` runs under qemu-user: --version, then a real
# smoke run against the in-repo simulated apiserver (x86, loopback): a list of endpointslices
# through the ARM grid-wrapper that shows pruning, a watch that receives one change, shutdown.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out/edge
say() { printf '== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

need=()
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
for t in aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf; do
  [ -x "$OUT/$t/grid-wrapper" ] || fail "$OUT/$t/grid-wrapper missing: run make cross first"
done
say "building the simulated apiserver (x86_64)"
cargo build --release --bin grid-wrapper-sim
SIMBIN=${CARGO_TARGET_DIR:-target}/release/grid-wrapper-sim

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

smoke() { # qemu, target
  local qemu=$1 target=$2 bin="$OUT/$2/grid-wrapper"
  say "$target: --version under $qemu"
  "$qemu" "$bin" --version || fail "$target --version"

  say "$target: smoke run against the simulated apiserver"
  "$SIMBIN" --fixture demo >"$WORK/sim.out" 2>"$WORK/sim.log" &
  local sim_pid=$!; PIDS+=($sim_pid)
  for _ in $(seq 100); do grep -q listening "$WORK/sim.out" 2>/dev/null && break; sleep 0.05; done
  local sim; sim=$(awk '/listening on/ {print $NF; exit}' "$WORK/sim.out")
  local port health; port=$(free_port); health=$(free_port)
  "$qemu" "$bin" --master="$sim" --hostname=edge-a1 --bind-address="127.0.0.1:$port" \
    --metrics-bind-address="127.0.0.1:$health" 2>"$WORK/gw.log" &
  local gw_pid=$!; PIDS+=($gw_pid)
  for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fsS "http://127.0.0.1:$health/readyz" >/dev/null || { cat "$WORK/gw.log"; fail "$target never became ready"; }

  curl -fsS "http://127.0.0.1:$port/apis/discovery.k8s.io/v1/namespaces/default/endpointslices" >"$WORK/list.json"
  python3 - "$WORK/list.json" <<'PY' || fail "$target: list is not pruned"
import json, sys
items = {i["metadata"]["name"]: i for i in json.load(open(sys.argv[1]))["items"]}
nodes = lambda s: sorted(e.get("nodeName") for e in s.get("endpoints") or [])
web, api = nodes(items["web-abc12"]), nodes(items["api-xyz89"])
print(f"   web-abc12 (topologyKeys zone) → {web}\n   api-xyz89 (no annotation)     → {api}")
assert web == ["edge-a1", "edge-a2"], web
assert len(api) == 3, api
PY
  local rv; rv=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["resourceVersion"])' "$WORK/list.json")
  curl -fsSN -m 20 "http://127.0.0.1:$port/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?watch=true&resourceVersion=$rv" >"$WORK/watch.out" 2>/dev/null &
  local watch_pid=$!; PIDS+=($watch_pid)
  sleep 0.5
  curl -fsS -X POST "$sim/sim/label-node" -d '{"name":"edge-b1","labels":{"zone":"zone-a"}}' >/dev/null
  for _ in $(seq 100); do grep -q edge-b1 "$WORK/watch.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '"type":"MODIFIED"' "$WORK/watch.out" && grep -q edge-b1 "$WORK/watch.out" \
    || { cat "$WORK/watch.out" "$WORK/gw.log"; fail "$target: the watch did not receive the relabel"; }
  echo "   watch received: MODIFIED web-abc12 with edge-b1's endpoint"
  kill "$watch_pid" 2>/dev/null || true

  kill -TERM "$gw_pid"
  local status=0; wait "$gw_pid" || status=$?
  # SIGTERM ends the process at once (nothing to flush: the cache is rebuilt from the apiserver).
  [ "$status" -eq 143 ] || [ "$status" -eq 0 ] || fail "$target: unexpected exit status $status"
  kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true
  say "$target: ok"
}
smoke qemu-aarch64-static aarch64-unknown-linux-musl
smoke qemu-arm-static armv7-unknown-linux-gnueabihf
say "cross-test passed"
