#!/usr/bin/env bash
# make fuzz FUZZ_SECS=N: every cargo-fuzz target for N seconds each (libFuzzer, nightly).
# Without a nightly toolchain it says so and exits 0. New inputs go to fuzz/corpus-local/
# (ignored by git); the committed seeds in fuzz/corpus/ are read only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECS:-30}
TARGETS=${FUZZ_TARGETS:-"http_request selectors watch_decode kubeconfig cache_ops snapshot list_item pack list_split object_ref proto_encode watch_transition cri_frames cri_hpack cri_messages site_report proto_decode proto_list_split"}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: no nightly toolchain installed (rustup toolchain install nightly); skipping fuzzing"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
cd fuzz
cargo +nightly fuzz build
for t in $TARGETS; do
  mkdir -p "corpus-local/$t"
  echo "== fuzz $t for ${SECS}s"
  log="corpus-local/$t.log"
  status=0
  cargo +nightly fuzz run "$t" "corpus-local/$t" "corpus/$t" -- \
    -max_total_time="$SECS" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 \
    || status=$?
  grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|Done )|==[0-9]+==ERROR|panicked at|^SUMMARY|Test unit written" "$log" || true
  # A target that did not run (a missing seed corpus, a build error) must not pass silently.
  if [ "$status" != 0 ] && ! grep -q "^Done " "$log"; then
    echo "fuzz: $t did not run (exit $status):"; tail -5 "$log"; exit 1
  fi
  # libFuzzer writes crash-*/timeout-* artifacts on a finding: fail loudly.
  # (any one of them: `ls a b c` fails when one pattern matches nothing)
  if compgen -G "artifacts/$t/crash-*" >/dev/null || compgen -G "artifacts/$t/timeout-*" >/dev/null \
    || compgen -G "artifacts/$t/oom-*" >/dev/null; then
    echo "fuzz: $t has findings in fuzz/artifacts/$t"; exit 1
  fi
done
echo "fuzz: all targets ran ${SECS}s without findings"
