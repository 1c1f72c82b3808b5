#!/usr/bin/env bash
# make helm-check: the Helm chart (deploy/helm/grid-wrapper) and its monitoring, checked by the
# real tools (helm and promtool from tools/, kubectl, etcd and kube-apiserver from e2e/):
#   1. helm lint --strict, default values and every preset of the chart's presets/;
#   2. drift: the default rendering equals `kubectl kustomize deploy/` object by object (but the
#      Namespace, which the chart renders only with createNamespace=true: then all of it), the
#      relay preset equals deploy/ with the deploy/relay component, the container-runtime preset
#      (alone and with the relay preset) equals deploy/ with the deploy/container-runtime
#      component (and has the flag, the read-only mount and the socket's group in every
#      DaemonSet, which no other rendering has), and the kube-proxy values
#      equal deploy/kube-proxy-kubeconfig.yaml and deploy/edge-kube-proxy-rbac.yaml
#      (scripts/helm-compare.py);
#   3. the PrometheusRule: `promtool check rules`, and `promtool test rules` with
#      deploy/monitoring/alerts-test.yaml (a firing and a quiet case per alert); each alert's
#      section in docs/RUNBOOK.md;
#   4. every Grafana panel query parses (`promtool check rules` on them as recording rules);
#   5. every metric name the rules and the dashboard use is in the /metrics of a real
#      grid-wrapper (target/debug, as built by make test) serving the simulator's cluster;
#   6. every preset's rendering created with `kubectl apply --dry-run=server` against a real
#      kube-apiserver (with etcd, on loopback; the prometheus-operator CRDs applied first), then
#      helm install, upgrade and uninstall against it.
# Needs go (the tools' first build), python3 with PyYAML, openssl, curl.
#
# usage: scripts/helm-check.sh [GW_BIN_DIR]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${1:-target/debug}
CHART=deploy/helm/grid-wrapper
PROM_OPERATOR=v0.85.0   # github.com/prometheus-operator/prometheus-operator: its CRDs, for step 6
T0=$(date +%s)
step() { printf '== helm-check [%4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
die() { echo "helm-check: FAILED: $*" >&2; exit 1; }

python3 -c 'import yaml' 2>/dev/null || die "python3 has no PyYAML (apt python3-yaml, or pip install PyYAML)"
step "tools (scripts/helm-tools.sh, scripts/e2e-build.sh)"
TOOLS=$(bash scripts/helm-tools.sh)
E2E=$(bash scripts/e2e-build.sh)
TOOLS=$PWD/$TOOLS E2E=$PWD/$E2E
HELM=$TOOLS/helm PROMTOOL=$TOOLS/promtool KUBECTL=$E2E/kubectl
echo "helm $("$HELM" version --short), $("$PROMTOOL" --version 2>&1 | head -1), kubectl $("$KUBECTL" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')"

T=$(mktemp -d)
declare -A PID=()
stop_all() { # TERM, up to 5 s, then KILL: kube-apiserver can take minutes to drain
  local p
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PID[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "${PID[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PID=()
}
cleanup() {
  stop_all
  rm -rf "$T" out/helm-check
}
trap cleanup EXIT
render() { "$HELM" template grid-wrapper "$CHART" "$@"; }
PRESETS=(default)
for f in "$CHART"/presets/*.yaml; do PRESETS+=("$(basename "$f" .yaml)"); done
preset_args() { [ "$1" = default ] || echo "-f $CHART/presets/$1.yaml"; }

# --- 1 ------------------------------------------------------------------------------------------
step "1. helm lint --strict: ${PRESETS[*]}"
for p in "${PRESETS[@]}"; do
  # shellcheck disable=SC2046
  "$HELM" lint --strict "$CHART" $(preset_args "$p") >"$T/lint.log" 2>&1 || { cat "$T/lint.log"; die "helm lint ($p)"; }
  # shellcheck disable=SC2046
  render $(preset_args "$p") >"$T/$p.yaml" || die "helm template ($p)"
  echo "  $p: lint ok, $(grep -c '^kind:' "$T/$p.yaml") objects"
done

# --- 2 ------------------------------------------------------------------------------------------
step "2. drift: the chart against deploy/"
"$KUBECTL" kustomize deploy/ >"$T/deploy.yaml"
python3 scripts/helm-compare.py --skip-kind Namespace "$T/deploy.yaml" "$T/default.yaml" || die "default values vs deploy/"
render --set createNamespace=true >"$T/default-ns.yaml"
python3 scripts/helm-compare.py "$T/deploy.yaml" "$T/default-ns.yaml" || die "createNamespace=true vs deploy/"
# A site overlay as deploy/relay/kustomization.yaml describes it (kustomize wants it relative).
mkdir -p out/helm-check/site
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../../deploy]\ncomponents: [../../../deploy/relay]\n' \
  >out/helm-check/site/kustomization.yaml
"$KUBECTL" kustomize out/helm-check/site >"$T/deploy-relay.yaml"
render --set createNamespace=true -f "$CHART/presets/relay.yaml" >"$T/relay-ns.yaml"
python3 scripts/helm-compare.py "$T/deploy-relay.yaml" "$T/relay-ns.yaml" || die "presets/relay.yaml vs deploy/ + deploy/relay"
# The container runtime (off by default): the preset against deploy/ with the
# deploy/container-runtime component, alone and after the relay component (both DaemonSets).
overlay() { # overlay NAME COMPONENT...: kustomize deploy/ with these components into $T/deploy-NAME.yaml
  local name=$1; shift
  mkdir -p "out/helm-check/$name"
  { printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../../deploy]\ncomponents:\n'
    for c in "$@"; do printf '  - ../../../deploy/%s\n' "$c"; done; } >"out/helm-check/$name/kustomization.yaml"
  "$KUBECTL" kustomize "out/helm-check/$name" >"$T/deploy-$name.yaml"
}
overlay runtime container-runtime
render --set createNamespace=true -f "$CHART/presets/container-runtime.yaml" >"$T/runtime-ns.yaml"
python3 scripts/helm-compare.py "$T/deploy-runtime.yaml" "$T/runtime-ns.yaml" || die "presets/container-runtime.yaml vs deploy/ + deploy/container-runtime"
overlay relay-runtime relay container-runtime
render --set createNamespace=true -f "$CHART/presets/relay.yaml" -f "$CHART/presets/container-runtime.yaml" >"$T/relay-runtime-ns.yaml"
python3 scripts/helm-compare.py "$T/deploy-relay-runtime.yaml" "$T/relay-runtime-ns.yaml" || die "relay + container-runtime presets vs deploy/ + deploy/relay + deploy/container-runtime"
# ...and what both must say: in every DaemonSet the flag, the socket's directory mounted
# read-only from a hostPath Directory, the socket's group; none of it by default.
check_runtime() { # check_runtime FILE DAEMONSETS [ENDPOINT DIR]: DAEMONSETS with all of it, the others none
  python3 - "$@" <<'PY'
import sys, yaml
path, want = sys.argv[1], int(sys.argv[2])
endpoint, host_dir = (sys.argv[3:5] + [None, None])[:2]
with_it = 0
for d in yaml.safe_load_all(open(path, encoding="utf-8")):
    if not d or d.get("kind") != "DaemonSet":
        continue
    spec = d["spec"]["template"]["spec"]
    c = spec["containers"][0]
    name = d["metadata"]["name"]
    flags = [a for a in c.get("args", []) if a.startswith("--container-runtime-endpoint")]
    mounts = [m for m in c.get("volumeMounts", []) if m["name"] == "container-runtime"]
    vols = [v for v in spec.get("volumes", []) if v["name"] == "container-runtime"]
    groups = spec.get("securityContext", {}).get("supplementalGroups")
    if not (flags or mounts or vols or groups):
        continue
    with_it += 1
    assert endpoint, f"{name}: {flags} {mounts} {vols} {groups}"
    assert flags == [f"--container-runtime-endpoint={endpoint}"], f"{name}: {flags}"
    assert mounts == [{"name": "container-runtime", "mountPath": host_dir, "readOnly": True}], f"{name}: {mounts}"
    assert vols == [{"name": "container-runtime", "hostPath": {"path": host_dir, "type": "Directory"}}], f"{name}: {vols}"
    assert groups == [0], f"{name}: {groups}"
assert with_it == want, f"{with_it} DaemonSets with the container runtime, want {want}"
PY
}
check_runtime "$T/relay-runtime-ns.yaml" 2 unix:///run/containerd/containerd.sock /run/containerd \
  || die "the container runtime's flag, mount or group missing"
check_runtime "$T/default.yaml" 0 || die "the default rendering has the container runtime"
check_runtime "$T/relay.yaml" 0 || die "the relay preset has the container runtime"
{ cat deploy/kube-proxy-kubeconfig.yaml; echo ---; cat deploy/edge-kube-proxy-rbac.yaml; } >"$T/deploy-kp.yaml"
render --set kubeProxy.kubeconfig.enabled=true --set kubeProxy.rbac.enabled=true \
  --show-only templates/kube-proxy.yaml >"$T/kp.yaml"
python3 scripts/helm-compare.py "$T/deploy-kp.yaml" "$T/kp.yaml" || die "kubeProxy values vs deploy/kube-proxy-kubeconfig.yaml + edge-kube-proxy-rbac.yaml"

# --- 3, 4 ---------------------------------------------------------------------------------------
step "3. the alerts: promtool check rules, promtool test rules"
mkdir -p "$T/rules"
python3 scripts/monitoring-check.py rules "$T/monitoring.yaml" "$T/rules/rules.yaml"
cp deploy/monitoring/alerts-test.yaml "$T/rules/"
"$PROMTOOL" check rules "$T/rules/rules.yaml" || die "promtool check rules"
(cd "$T/rules" && "$PROMTOOL" test rules alerts-test.yaml) || die "promtool test rules"
python3 scripts/monitoring-check.py runbook "$T/rules/rules.yaml" docs/RUNBOOK.md || die "an alert without its runbook section"
step "4. the dashboard's queries parse (promtool check rules)"
python3 scripts/monitoring-check.py dashboard "$CHART/dashboards/grid-wrapper.json" "$T/dashboard-rules.yaml"
"$PROMTOOL" check rules "$T/dashboard-rules.yaml" || die "a dashboard query does not parse"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["uid"] and d["panels"]' "$CHART/dashboards/grid-wrapper.json"

# --- 5 ------------------------------------------------------------------------------------------
step "5. every metric name of the rules and the dashboard in a real /metrics ($BIN_DIR)"
[ -x "$BIN_DIR/grid-wrapper" ] && [ -x "$BIN_DIR/grid-wrapper-sim" ] || die "$BIN_DIR/grid-wrapper and grid-wrapper-sim: run cargo build --bins first"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
"$BIN_DIR/grid-wrapper-sim" --fixture demo >"$T/sim.out" 2>"$T/sim.log" &
PID[sim]=$!
for _ in $(seq 100); do grep -q listening "$T/sim.out" 2>/dev/null && break; sleep 0.05; done
SIM=$(awk '/listening on/ {print $NF; exit}' "$T/sim.out")
[ -n "$SIM" ] || die "the simulator did not start: $(cat "$T/sim.log")"
GW_PORT=$(free_port) GW_METRICS=$(free_port)
"$BIN_DIR/grid-wrapper" --master="$SIM" --hostname=edge-a1 --bind-address="127.0.0.1:$GW_PORT" \
  --metrics-bind-address="127.0.0.1:$GW_METRICS" --cache-dir="$T/cache" >"$T/gw.log" 2>&1 &
PID[gw]=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$GW_METRICS/readyz" 2>/dev/null && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$GW_METRICS/readyz" || die "grid-wrapper not ready: $(tail -5 "$T/gw.log")"
curl -fsS -o /dev/null "http://127.0.0.1:$GW_PORT/api/v1/services" || die "grid-wrapper list"
curl -fsS "http://127.0.0.1:$GW_METRICS/metrics" >"$T/metrics.txt" || die "/metrics"
python3 scripts/monitoring-check.py names "$T/metrics.txt" "$T/rules/rules.yaml" "$CHART/dashboards/grid-wrapper.json" \
  || die "a metric name is not in grid-wrapper's /metrics"
stop_all

# --- 6 ------------------------------------------------------------------------------------------
step "6. every preset created with kubectl apply --dry-run=server (etcd + kube-apiserver on loopback)"
# One self-signed serving certificate (its own trust anchor for kubectl), a service-account
# key pair, and a token of system:masters: all the apiserver needs to answer dry runs.
mkdir -p "$T/pki" && (
  cd "$T/pki" && umask 077
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=helm-check apiserver" \
    -addext "subjectAltName=IP:127.0.0.1" -keyout apiserver.key -out apiserver.crt 2>/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
  openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
)
TOKEN=$(openssl rand -hex 24)
echo "$TOKEN,helm-check,helm-check,system:masters" >"$T/pki/tokens.csv"
ETCD_PORT=$(free_port) ETCD_PEER=$(free_port) API_PORT=$(free_port)
"$E2E/etcd" --name helm-check --data-dir "$T/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "helm-check=http://127.0.0.1:$ETCD_PEER" --unsafe-no-fsync --log-level warn >"$T/etcd.log" 2>&1 &
PID[etcd]=$!
"$E2E/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" --bind-address=127.0.0.1 \
  --secure-port="$API_PORT" --advertise-address=127.0.0.1 --tls-cert-file="$T/pki/apiserver.crt" \
  --tls-private-key-file="$T/pki/apiserver.key" \
  --service-account-key-file="$T/pki/sa.pub" --service-account-signing-key-file="$T/pki/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.215.0.0/24 \
  --authorization-mode=RBAC --token-auth-file="$T/pki/tokens.csv" --profiling=false --v=1 \
  --endpoint-reconciler-type=none \
  >"$T/kube-apiserver.log" 2>&1 &
PID[apiserver]=$!
K() { "$KUBECTL" --kubeconfig=/dev/null --server="https://127.0.0.1:$API_PORT" \
  --certificate-authority="$T/pki/apiserver.crt" --token="$TOKEN" --cache-dir="$T/kubectl-cache" --request-timeout=20s "$@"; }
ok=false
for _ in $(seq 180); do
  if K get --raw /readyz >/dev/null 2>&1; then ok=true; break; fi
  kill -0 "${PID[apiserver]}" 2>/dev/null || break
  sleep 0.5
done
$ok || { tail -20 "$T/kube-apiserver.log"; die "kube-apiserver did not become ready"; }
echo "  kube-apiserver $(K version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])') ready"
crds=$(cd /tmp && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/example/prometheus-operator-crd
for c in podmonitors servicemonitors prometheusrules; do
  K apply --server-side -f "$crds/monitoring.coreos.com_$c.yaml" >/dev/null || die "CRD $c"
done
K wait --for condition=established --timeout=60s crd/podmonitors.monitoring.coreos.com \
  crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com >/dev/null
# The namespace exists for real: a dry run of the namespaced objects needs it.
K create namespace edge-system >/dev/null
# ServiceMonitor (its headless Service) is not in a preset: checked here beside them.
render -f "$CHART/presets/monitoring.yaml" --set monitoring.podMonitor.enabled=false \
  --set monitoring.serviceMonitor.enabled=true >"$T/servicemonitor.yaml"
for p in "${PRESETS[@]}" servicemonitor; do
  K apply --dry-run=server -f "$T/$p.yaml" >"$T/apply.log" 2>&1 || { cat "$T/apply.log"; die "server-side dry run of $p"; }
  echo "  $p: $(grep -c 'created (server dry run)' "$T/apply.log") objects accepted:" \
    "$(grep -o '^[a-z0-9.]*/' "$T/apply.log" | tr -d / | sort | uniq -c | awk '{printf "%s %s; ", $1, $2}')"
done
# Helm itself against the same apiserver: install the default values into the existing
# namespace (what the chart's README says to run), upgrade to the monitoring and relay presets,
# uninstall; the namespace stays.
cat >"$T/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$T/pki/apiserver.crt"}}]
users: [{name: u, user: {token: "$TOKEN"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KC
HK() { "$HELM" --kubeconfig "$T/kubeconfig" -n edge-system "$@"; }
HK install grid-wrapper "$CHART" >/dev/null || die "helm install (default values)"
K -n edge-system get daemonset application-grid-wrapper >/dev/null || die "helm install made no DaemonSet"
HK upgrade grid-wrapper "$CHART" -f "$CHART/presets/monitoring.yaml" -f "$CHART/presets/relay.yaml" >/dev/null \
  || die "helm upgrade (monitoring + relay presets)"
K -n edge-system get daemonset/application-grid-wrapper-relay podmonitor/application-grid-wrapper \
  prometheusrule/application-grid-wrapper >/dev/null || die "helm upgrade's objects missing"
HK uninstall grid-wrapper >/dev/null || die "helm uninstall"
K get namespace edge-system >/dev/null || die "helm uninstall took the namespace"
echo "  helm install (default values), upgrade (monitoring + relay presets), uninstall: ok"
step "all checks passed"
