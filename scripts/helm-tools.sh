#!/usr/bin/env bash
# The tools make helm-check runs: helm and promtool, built from the pinned Go modules of
# tools/helm and tools/promtool (go.mod + go.sum; each declares its tool with a `tool` line, so
# `go build` takes exactly the pinned version; no binary is committed) into out/tools/bin/.
# Two modules, not one: helm and prometheus each pin their own Kubernetes client libraries, and
# one module would force both onto the newer of each.
# Reused while the modules and this script are unchanged (a stamp holds their hash). Prints
# the folder's path.
#
# Env: TOOLS_FORCE_BUILD=1 rebuilds even with a matching stamp; GOFLAGS, GOMODCACHE, GOCACHE
# as usual. The binaries are stripped (-s -w).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out/tools/bin
say() { printf '== helm-tools: %s\n' "$*" >&2; }

command -v go >/dev/null || { echo "helm-tools: go is not on PATH" >&2; exit 1; }
key=$( { cat scripts/helm-tools.sh tools/helm/go.mod tools/helm/go.sum tools/promtool/go.mod tools/promtool/go.sum; go version; } | sha256sum | cut -d' ' -f1)
if [ "${TOOLS_FORCE_BUILD:-0}" != 1 ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$key" ] \
  && [ -x "$OUT/helm" ] && [ -x "$OUT/promtool" ]; then
  say "up to date ($OUT)"
  echo "$OUT"
  exit 0
fi
rm -f "$OUT/.stamp"
mkdir -p "$OUT"
say "downloading modules (go mod download)"
t0=$(date +%s)
(cd tools/helm && go mod download) && (cd tools/promtool && go mod download)
# The versions the binaries report, stamped as helm's and prometheus' own builds stamp them (the
# module zips carry no commit), read from the pins so that they cannot disagree.
helm_v=$(cd tools/helm && go list -m -f '{{.Version}}' helm.sh/helm/v4)
prom_v=$(cd tools/promtool && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
# -mod=readonly: go.sum is the pin; a build that would change it fails instead.
(cd tools/helm && CGO_ENABLED=0 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_v -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "../../$OUT/helm" helm.sh/helm/v4/cmd/helm)
t1=$(date +%s)
say "helm built in $((t1 - t0)) s (modules included): $("$OUT/helm" version --short)"
(cd tools/promtool && CGO_ENABLED=0 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_v" \
  -o "../../$OUT/promtool" github.com/prometheus/prometheus/cmd/promtool)
t2=$(date +%s)
say "promtool built in $((t2 - t1)) s: $("$OUT/promtool" --version 2>&1 | head -1)"
echo "$key" > "$OUT/.stamp"
echo "$OUT"
