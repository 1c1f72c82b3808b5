#!/usr/bin/env bash
# The real Kubernetes components that make e2e runs beside grid-wrapper: kube-apiserver,
# kube-proxy, etcd and the test's kubectl, and its pb-compare (e2e/pb-compare: kube-proxy's lists
# from the apiserver and from grid-wrapper compared byte for byte), built from the pinned Go
# modules of e2e/ (go.mod + go.sum; no Kubernetes source is committed) into out/e2e/bin/. Reused
# while e2e/'s go.mod, go.sum and main packages and this script are unchanged (a stamp file holds
# their hash). Prints the folder's path.
#
# The version variables are stamped as Kubernetes' own hack/lib/version.sh stamps them, into
# both component-base/version (kube-apiserver's /version, the binaries' --version) and
# client-go/pkg/version (the User-Agent kube-proxy sends to grid-wrapper).
#
# Env: E2E_FORCE_BUILD=1 rebuilds even with a matching stamp; GOFLAGS, GOMODCACHE, GOCACHE as
# usual. The binaries are stripped (-s -w): nobody debugs them here, and they link faster.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out/e2e/bin
K8S_VERSION=v1.37.2
say() { printf '== e2e-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { echo "e2e-build: go is not on PATH" >&2; exit 1; }
key=$( { cat scripts/e2e-build.sh e2e/go.mod e2e/go.sum; find e2e -name '*.go' | sort | xargs cat; go version; } | sha256sum | cut -d' ' -f1)
if [ "${E2E_FORCE_BUILD:-0}" != 1 ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$key" ] \
  && [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/kube-proxy" ] && [ -x "$OUT/etcd" ] && [ -x "$OUT/kubectl" ] \
  && [ -x "$OUT/pb-compare" ]; then
  say "up to date ($OUT)"
  echo "$OUT"
  exit 0
fi

major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  # The module zip carries no commit: an empty gitCommit makes the User-Agent say
  # "kubernetes/unknown" instead of the unexpanded "$Format".
  ldflags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

rm -f "$OUT/.stamp"
mkdir -p "$OUT"
say "downloading modules (go mod download)"
t0=$(date +%s)
(cd e2e && go mod download)
t1=$(date +%s)
say "modules ready in $((t1 - t0)) s; building kube-apiserver, kube-proxy, etcd, kubectl ($K8S_VERSION), pb-compare"
# -mod=readonly: go.sum is the pin; a build that would change it fails instead.
(cd e2e && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" \
  -o "../$OUT/" ./kube-apiserver ./kube-proxy ./etcd ./kubectl ./pb-compare)
t2=$(date +%s)
say "built in $((t2 - t1)) s"
for b in kube-apiserver kube-proxy etcd kubectl pb-compare; do
  printf '== e2e-build: %-15s %10s bytes\n' "$b" "$(stat -c %s "$OUT/$b")" >&2
done
echo "$key" > "$OUT/.stamp"
echo "$OUT"
