#!/usr/bin/env bash
# make relaybench: the site relay bench (loadbench --only relay), RUNS times (default 3), each run
# bounded and in its own process group (scripts/bounded.sh), then the runs' tables folded into
# medians with their spread (scripts/medians.py) in out/relaybench.md, which is also printed.
#   bash scripts/relaybench.sh BIN_DIR [loadbench args...]
# e.g. only the relay's fan-out (~1.5 min a run): ... --relay-parts fanout
# RELAYBENCH_RUNS=N changes the number of runs; each run's table is out/relaybench-N.md.
set -euo pipefail
BIN=${1:-target/release}
RUNS=${RELAYBENCH_RUNS:-3}
OUT=${RELAYBENCH_OUT:-out/relaybench.md}
LIMIT=${RELAYBENCH_TIMEOUT:-1500}
mkdir -p out
runs=()
for i in $(seq 1 "$RUNS"); do
  echo "relaybench: run $i of $RUNS" >&2
  bash "$(dirname "$0")/bounded.sh" relaybench "$LIMIT" \
    "$BIN/examples/loadbench" --bin-dir "$BIN" --only relay --out "out/relaybench-$i.md" "${@:2}"
  runs+=("out/relaybench-$i.md")
done
python3 "$(dirname "$0")/medians.py" "${runs[@]}" > "$OUT"
cat "$OUT"
echo "relaybench: medians of $RUNS runs in $OUT" >&2
