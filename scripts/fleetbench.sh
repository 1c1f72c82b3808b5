#!/usr/bin/env bash
# make fleetbench (issue 38): N grid-wrappers and one simulated cloud, a WAN outage and the
# return, with and without throttling and a site relay (scripts/fleetbench.py says what and
# how). The whole run is one process group under a hard timeout (scripts/bounded.sh): nothing it
# started outlives it. Writes out/fleetbench.md (medians of the runs with their spread, also
# printed) and out/fleetbench.png.
#   bash scripts/fleetbench.sh BIN_DIR [GW_BIN]
# Environment: FLEET_N, FLEET_RUNS, FLEET_OUTAGE, FLEET_AFTER, FLEET_CONFIGS, ... (fleetbench.py);
# FLEETBENCH_TIMEOUT (seconds, default 7200) bounds the whole.
# A smoke run: FLEET_N=10 FLEET_RUNS=1 FLEET_OUTAGE=5 FLEET_AFTER=15 bash scripts/fleetbench.sh target/debug
set -euo pipefail
BIN=${1:-target/release}
GW=${2:-$BIN/grid-wrapper}
LIMIT=${FLEETBENCH_TIMEOUT:-7200}
# Each grid-wrapper holds a few sockets and the simulator one per connection: N = 200 needs
# a few thousand descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p out
BIN_DIR="$BIN" GW_BIN="$GW" bash "$(dirname "$0")/bounded.sh" fleetbench "$LIMIT" \
  python3 "$(dirname "$0")/fleetbench.py"
