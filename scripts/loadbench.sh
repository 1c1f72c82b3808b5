#!/usr/bin/env bash
# make loadbench: installs nginx for the LIST baseline when absent (Debian package, as root;
# skipped otherwise: that column then says n/a), then runs the loadbench example against the
# release binaries. The example runs in its own process group, killed on any exit, and under a
# hard timeout, so nothing it started (simulator, grid-wrapper, nginx) outlives this script.
# Arguments after the binary directory go to the example, e.g. only the LIST phase (~30 s):
#   bash scripts/loadbench.sh target/release --only list [--list-runs 5] [--list-requests 200]
# which writes out/listbench.md, or scale ×10 (opt-in, ≤ 6 min, hard timeout 360 s):
#   bash scripts/loadbench.sh target/release --scale x10
# which writes out/loadbench-x10.md, or the WAN bytes and CPU of a full sync at S and ×10 with
# --upstream-gzip on and off (≤ 6.5 min, hard timeout 400 s):
#   bash scripts/loadbench.sh target/release --only wan
# which writes out/wanbench.md, or the watch fan-out alone, latency at 200/s and the sustained-rate
# sweep with grid-wrapper's CPU in cores (~2 min):
#   bash scripts/loadbench.sh target/release --only fanout [--epoll-threads 2]
# which writes out/fanoutbench.md, or issue 46's memory and sync figures, A/B alternated
# (--mem-runs runs each; add --scale x10 for ×10, which writes out/membench-x10.md):
#   bash scripts/loadbench.sh target/release --only mem --gw-bin A --gw-bin-b B
# which writes out/membench.md (LOADBENCH_OUT overrides any default).
# LOADBENCH_SHAPE=real runs every scale fixture of the bench with real-shaped objects (the
# simulator's `--shape real`, through GRID_WRAPPER_SIM_SHAPE; default flat). Either way the
# report ends with the shape and the bytes of the upstream's JSON lists per kind
# (`grid-wrapper-sim --list-bytes`), computed from the fixture after the run.
set -euo pipefail
BIN=${1:-target/release}
LIMIT=${LOADBENCH_TIMEOUT:-420}
case " ${*:2} " in
  *" --only mem "*)
    case " ${*:2} " in
      *" --scale x10 "*) OUT=${LOADBENCH_OUT:-out/membench-x10.md} ;;
      *) OUT=${LOADBENCH_OUT:-out/membench.md} ;;
    esac
    LIMIT=${LOADBENCH_TIMEOUT:-2400} ;;
  *" --only list "*) OUT=${LOADBENCH_OUT:-out/listbench.md} ;;
  *" --only fanout "*) OUT=${LOADBENCH_OUT:-out/fanoutbench.md} ;;
  *" --only wan "*) OUT=${LOADBENCH_OUT:-out/wanbench.md}; LIMIT=${LOADBENCH_TIMEOUT:-400} ;;
  *" --scale x10 "*) OUT=${LOADBENCH_OUT:-out/loadbench-x10.md}; LIMIT=${LOADBENCH_TIMEOUT:-360} ;;
  *) OUT=${LOADBENCH_OUT:-out/loadbench.md} ;;
esac

nginx_bin() { command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; }
if [ -z "$(nginx_bin)" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "loadbench: installing nginx (Debian package) for the LIST baseline" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends nginx-light \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx-light; } \
    || apt-get install -y -qq --no-install-recommends nginx; } >/dev/null 2>&1 \
    || echo "loadbench: nginx could not be installed; its column will be n/a" >&2
  # The package may start a system nginx on port 80; the bench runs its own on a free port.
fi
NGINX=$(nginx_bin); NGINX=${NGINX:-none}

SHAPE=${LOADBENCH_SHAPE:-flat}
case "$SHAPE" in
  flat|real) export GRID_WRAPPER_SIM_SHAPE=$SHAPE ;;
  *) echo "loadbench: LOADBENCH_SHAPE must be flat or real, not '$SHAPE'" >&2; exit 2 ;;
esac

rc=0
bash "$(dirname "$0")/bounded.sh" loadbench "$LIMIT" \
  "$BIN/examples/loadbench" --bin-dir "$BIN" --out "$OUT" --nginx "$NGINX" "${@:2}" || rc=$?

# The scales the example runs (examples/loadbench: SCALE in main.rs, X10 in scale.rs).
S_ARGS="--nodes 500 --services 2000 --zones 20 --endpoints-per-slice 10"
X10_ARGS="--nodes 5000 --services 20000 --zones 200 --endpoints-per-slice 10"
case " ${*:2} " in
  *" --scale x10 "*) SCALES="x10" ;;
  *" --only wan "*) SCALES="S x10" ;;
  *) SCALES="S" ;;
esac
if [ "$rc" = 0 ] && [ -f "$OUT" ]; then
  {
    echo
    echo "Fixture shape: \`$SHAPE\` (LOADBENCH_SHAPE; the simulator's \`--shape $SHAPE\`)."
    echo "Upstream JSON lists, as the simulator serves them without a selector, before gzip"
    echo "(\`grid-wrapper-sim --list-bytes\`):"
    echo
    for sc in $SCALES; do
      if [ "$sc" = S ]; then a=$S_ARGS; else a=$X10_ARGS; fi
      # shellcheck disable=SC2086
      line=$("$BIN/grid-wrapper-sim" --fixture scale --shape "$SHAPE" $a --list-bytes 2>/dev/null \
        | sed -n 's/.*JSON list bytes: //p') || line=""
      echo "- $sc (\`$a\`): ${line:-n/a}"
    done
  } >> "$OUT"
fi
exit "$rc"
