#!/usr/bin/env bash
# The real gRPC CRI server of the CRI client's tests (tests/it/cri_runtime.rs): e2e/cri-fake, a
# grpc-go RuntimeService from k8s.io/cri-client's fake runtime, built from the pinned Go module
# of e2e/ into out/e2e/bin/cri-fake. Reused while e2e/'s go.mod, go.sum, the cri-fake main and
# this script are unchanged (a stamp file holds their hash). Prints the binary's path.
#
# Env: CRI_FAKE_FORCE_BUILD=1 rebuilds even with a matching stamp; GOFLAGS, GOMODCACHE, GOCACHE
# as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out/e2e/bin
say() { printf '== cri-fake-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { echo "cri-fake-build: go is not on PATH" >&2; exit 1; }
key=$( { cat scripts/cri-fake-build.sh e2e/go.mod e2e/go.sum e2e/cri-fake/*.go; go version; } | sha256sum | cut -d' ' -f1)
if [ "${CRI_FAKE_FORCE_BUILD:-0}" != 1 ] && [ -f "$OUT/.stamp-cri-fake" ] \
  && [ "$(cat "$OUT/.stamp-cri-fake")" = "$key" ] && [ -x "$OUT/cri-fake" ]; then
  say "up to date ($OUT/cri-fake)"
  echo "$OUT/cri-fake"
  exit 0
fi
rm -f "$OUT/.stamp-cri-fake"
mkdir -p "$OUT"
t0=$(date +%s)
# -mod=readonly: go.sum is the pin; a build that would change it fails instead.
(cd e2e && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "../$OUT/cri-fake" ./cri-fake)
say "built in $(( $(date +%s) - t0 )) s ($(stat -c %s "$OUT/cri-fake") bytes)"
echo "$key" > "$OUT/.stamp-cri-fake"
echo "$OUT/cri-fake"
