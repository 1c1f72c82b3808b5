#!/usr/bin/env bash
# make e2e: grid-wrapper between a real kube-apiserver (with etcd) and a real kube-proxy
# (nftables mode), with packets. Needs root (network namespaces, nftables); everything it makes
# (namespaces, veth pairs, processes, a temporary folder) is removed at the end, also on failure.
#
# Topology, every address existing only inside the namespaces this script makes:
#   netns <P>c "cloud": etcd on its 127.0.0.1, kube-apiserver on 10.213.0.1:6443
#   netns <P>n "node" edge-a1: 10.213.0.2 (veth to cloud) and 10.213.1.1 (veth to pods);
#       grid-wrapper on 127.0.0.1:51006 (metrics 51007) and kube-proxy on its loopback
#   netns <P>p "pods": one HTTP server per pod on 10.213.1.x:8080, answering its own name
#   netns <P>f "node" edge-a2 (unless E2E_RELAY=0): 10.213.2.2 (veth to edge-a1's 10.213.2.1,
#       where edge-a1's grid-wrapper serves its relay port 51010), a follower grid-wrapper
# Each node runs a CRI runtime (e2e/cri-fake, a real grpc-go server) on a unix socket in the
# temporary folder, its sandboxes set by this script; grid-wrapper polls it every second
# (--container-runtime-poll-interval 1; 5 by default).
# The node netns has no default route: ClusterIPs (10.214.0.0/24) route to the pods' link and
# kube-proxy's DNAT sends them to a pod, nothing else leaves.
#
# usage: scripts/e2e.sh [GW_BIN]   (default target/debug/grid-wrapper; the Go components come
#        from scripts/e2e-build.sh). Env:
#   E2E_KEEP_LOGS=DIR     copy every log there at the end
#   E2E_HOLD_ON_FAIL=SECS keep everything running that long after a failure, for inspection
#   E2E_GW_TLS=1          grid-wrapper serves kube-proxy over TLS (--insecure=false; kube-proxy's
#                         kubeconfig says https://127.0.0.1:51006), so that kube-proxy sends its
#                         token (client-go sends no credentials to an http:// server)
#   E2E_DIRECT=1          kube-proxy talks to the apiserver directly, not to grid-wrapper: the
#                         run must then fail at its first assertion (pruned pods answer)
#   E2E_BOUND=SECS        how fast kube-proxy must follow each change (default 30)
#   E2E_PROXY_MODE=iptables  kube-proxy's iptables mode instead of nftables
#   E2E_RELAY=0           no relay and no second node: scenario B (a pod of the follower's node
#                         moves, the relay's kube-proxy follows) is skipped
#   E2E_ONLY=runtime      only the setup and the container runtime's scenarios (A: the offline
#                         site reboot on edge-a1; B: the relay and follower, unless E2E_RELAY=0);
#                         the other steps are skipped. About a minute instead of four.
set -euo pipefail
# The whole script is one compound command, read before it runs: editing the file during a run
# cannot change the running one.
{
cd "$(dirname "$0")/.."
GW=${1:-target/debug/grid-wrapper}
T0=$EPOCHREALTIME
since() { awk -v a="$EPOCHREALTIME" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
past() { awk -v a="$EPOCHREALTIME" -v e="$1" 'BEGIN { exit !(a > e) }'; }
step() { printf '[%7ss] %s\n' "$(since "$T0")" "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "e2e: SKIPPED: not root (network namespaces and nftables need root)"; exit 0
fi
if ! ip netns add "gwe2e-probe-$$" 2>/dev/null; then
  echo "e2e: SKIPPED: this machine does not allow network namespaces (ip netns add failed)"; exit 0
fi
ip netns del "gwe2e-probe-$$"

need_pkgs=()
command -v nft >/dev/null || need_pkgs+=(nftables)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v curl >/dev/null || need_pkgs+=(curl)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "e2e: installing Debian packages: ${need_pkgs[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi
[ -x "$GW" ] || { echo "e2e: no grid-wrapper binary at $GW (cargo build --bins)"; exit 1; }
GW=$(realpath "$GW")

step "building (or reusing) kube-apiserver, kube-proxy, etcd, kubectl, cri-fake"
BIN=$(realpath "$(bash scripts/e2e-build.sh)")
CRI_FAKE=$(realpath "$(bash scripts/cri-fake-build.sh)")
step "components: $("$BIN/kube-apiserver" --version) / $("$BIN/kube-proxy" --version) / etcd $("$BIN/etcd" --version | awk '/etcd Version/ {print $3}')"

MODE=${E2E_PROXY_MODE:-nftables}
case "$MODE" in nftables|iptables) ;; *) echo "e2e: E2E_PROXY_MODE must be nftables or iptables"; exit 2;; esac
ONLY=${E2E_ONLY:-}
case "$ONLY" in ""|runtime) ;; *) echo "e2e: E2E_ONLY must be empty or runtime"; exit 2;; esac
RELAY=${E2E_RELAY:-1}
P=gwe$$
NC=${P}c NN=${P}n NP=${P}p NF=${P}f
RELAY_IP=10.213.2.1 FOLLOWER_IP=10.213.2.2 RELAY_PORT=51010
CLOUD_IP=10.213.0.1 NODE_IP=10.213.0.2 NODE_POD_IP=10.213.1.1
SVC_CIDR=10.214.0.0/24
API=https://$CLOUD_IP:6443
T=$(mktemp -d /tmp/gw-e2e.XXXXXX)
declare -A PID=()
NETNS_MADE=()

stop_pid() { # name: TERM, up to 5 s, then KILL
  local p=${PID[$1]:-}
  [ -n "$p" ] || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  unset "PID[$1]"
}
cleanup() {
  local rc=$?
  set +e
  for n in "${!PID[@]}"; do stop_pid "$n"; done
  for ns in "${NETNS_MADE[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ -n "${E2E_KEEP_LOGS:-}" ]; then mkdir -p "$E2E_KEEP_LOGS" && cp "$T"/*.log "$E2E_KEEP_LOGS"/ 2>/dev/null; fi
  rm -rf "$T"
  if [ $rc = 0 ]; then step "PASSED (namespaces, processes and $T removed)"; else step "FAILED (rc $rc; namespaces, processes and $T removed)"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tail_logs() {
  for f in "$@"; do echo "---- last lines of $f"; tail -n 25 "$T/$f" 2>/dev/null | cut -c1-400; done
}
fail() {
  step "FAIL: $*"
  ip netns exec "$NN" nft list table ip kube-proxy > "$T/nft.log" 2>&1 || true
  tail_logs grid-wrapper.log kube-proxy.log kube-apiserver.log
  [ -n "${E2E_HOLD_ON_FAIL:-}" ] && { step "holding ${E2E_HOLD_ON_FAIL}s for inspection ($T)"; sleep "$E2E_HOLD_ON_FAIL"; }
  echo "e2e: $PASSED passed, $((${#FINDINGS[@]} + 1)) failed"
  exit 1
}
# A finding: a wrong answer of the system under test that does not stop the later steps; the
# run fails at the end with the list.
FINDINGS=()
PASSED=0
finding() { step "FINDING: $*"; FINDINGS+=("$*"); }
# wait_for SECONDS DESCRIPTION COMMAND...: polls every 0.2 s.
wait_for() {
  local secs=$1 what=$2; shift 2
  local end; end=$(awk -v a="$EPOCHREALTIME" -v s="$secs" 'BEGIN { printf "%.3f", a + s }')
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    past "$end" && fail "$what: not within ${secs}s"
    sleep 0.2
  done
}
start() { # name netns command...: runs it in the background, log in $T/name.log
  local name=$1 ns=$2; shift 2
  echo "==== $(date -u +%H:%M:%S.%N) start: $*" >>"$T/$name.log"
  ip netns exec "$ns" "$@" >>"$T/$name.log" 2>&1 &
  PID[$name]=$!
}
alive() { kill -0 "${PID[$1]}" 2>/dev/null; }
kp_alive() { alive kube-proxy || fail "kube-proxy exited"; }

# --- namespaces and links -------------------------------------------------------------------
step "network namespaces $NC (cloud), $NN (node edge-a1), $NP (pods)"
for ns in "$NC" "$NN" "$NP"; do ip netns add "$ns"; NETNS_MADE+=("$ns"); ip -n "$ns" link set lo up; done
ip link add "${P}cn" type veth peer name "${P}nc"
ip link set "${P}cn" netns "$NC"; ip link set "${P}nc" netns "$NN"
ip link add "${P}np" type veth peer name "${P}pn"
ip link set "${P}np" netns "$NN"; ip link set "${P}pn" netns "$NP"
ip -n "$NC" addr add "$CLOUD_IP/30" dev "${P}cn"; ip -n "$NC" link set "${P}cn" up
ip -n "$NN" addr add "$NODE_IP/30" dev "${P}nc"; ip -n "$NN" link set "${P}nc" up
ip -n "$NN" addr add "$NODE_POD_IP/24" dev "${P}np"; ip -n "$NN" link set "${P}np" up
ip -n "$NN" route add "$SVC_CIDR" dev "${P}np" src "$NODE_POD_IP"
ip -n "$NP" link set "${P}pn" up
# A pod moves by its address leaving the pods' link: the other addresses of its /24 must stay
# when the first one added (the primary) goes.
ip netns exec "$NP" sysctl -qw "net.ipv4.conf.${P}pn.promote_secondaries=1"
# A request DNATed to a vanished address leaves a SYN_SENT conntrack entry behind (120 s by
# default); a later request whose source port comes round to it again would follow that entry to
# the vanished address, whatever kube-proxy's rules say by then.
ip netns exec "$NN" sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_syn_sent=3 2>/dev/null || true
if [ "$RELAY" != 0 ]; then
  step "network namespace $NF (node edge-a2, the relay's follower), linked to $NN"
  ip netns add "$NF"; NETNS_MADE+=("$NF"); ip -n "$NF" link set lo up
  ip link add "${P}nf" type veth peer name "${P}fn"
  ip link set "${P}nf" netns "$NN"; ip link set "${P}fn" netns "$NF"
  ip -n "$NN" addr add "$RELAY_IP/24" dev "${P}nf"; ip -n "$NN" link set "${P}nf" up
  ip -n "$NF" addr add "$FOLLOWER_IP/24" dev "${P}fn"; ip -n "$NF" link set "${P}fn" up
fi

# --- PKI ------------------------------------------------------------------------------------
step "certificates and service-account keys (openssl)"
mkdir -p "$T/pki" && (
  cd "$T/pki" && umask 077
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=gw-e2e CA" \
    -keyout ca.key -out ca.crt -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=kube-apiserver" \
    -keyout apiserver.key -out apiserver.csr 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:%s,IP:127.0.0.1,IP:10.214.0.1,DNS:kubernetes,DNS:kubernetes.default.svc\n' "$CLOUD_IP" > apiserver.ext
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile apiserver.ext -out apiserver.crt 2>/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
  openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
)
if [ "$RELAY" != 0 ]; then
  # The site PKI as an operator makes it: the relay's serving certificate for its address, the
  # followers' client certificate, one site CA.
  bash deploy/relay/make-certs.sh "$T/site" e2e-site "$RELAY_IP" >/dev/null
fi
ADMIN_TOKEN=$(openssl rand -hex 24)
echo "$ADMIN_TOKEN,e2e-admin,e2e-admin,system:masters" > "$T/pki/tokens.csv"
chmod 600 "$T/pki/tokens.csv"
(umask 077; printf '%s' "$ADMIN_TOKEN" > "$T/pki/admin.token") # for e2e/pb-compare

K() { ip netns exec "$NC" "$BIN/kubectl" --server="$API" --certificate-authority="$T/pki/ca.crt" \
  --token="$ADMIN_TOKEN" --cache-dir="$T/kubectl-cache" --request-timeout=10s "$@"; }

# --- control plane --------------------------------------------------------------------------
start_etcd() { # name data-dir client-port peer-port
  start "$1" "$NC" "$BIN/etcd" --name e2e --data-dir "$2" \
    --listen-client-urls "http://127.0.0.1:$3" --advertise-client-urls "http://127.0.0.1:$3" \
    --listen-peer-urls "http://127.0.0.1:$4" --initial-advertise-peer-urls "http://127.0.0.1:$4" \
    --initial-cluster "e2e=http://127.0.0.1:$4" --unsafe-no-fsync --log-level warn
  wait_for 30 "etcd healthy ($1)" ip netns exec "$NC" curl -fsS "http://127.0.0.1:$3/health"
}
step "etcd in $NC (127.0.0.1:2379)"
start_etcd etcd "$T/etcd" 2379 2380
step "etcd ready"

APISERVER_ARGS=(--etcd-servers=http://127.0.0.1:2379 --bind-address="$CLOUD_IP" --secure-port=6443
  --advertise-address="$CLOUD_IP" --tls-cert-file="$T/pki/apiserver.crt"
  --tls-private-key-file="$T/pki/apiserver.key" --client-ca-file="$T/pki/ca.crt"
  --service-account-key-file="$T/pki/sa.pub" --service-account-signing-key-file="$T/pki/sa.key"
  --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range="$SVC_CIDR"
  --authorization-mode=RBAC --token-auth-file="$T/pki/tokens.csv" --profiling=false
  --enable-priority-and-fairness=true --v=1)
start_apiserver() {
  start kube-apiserver "$NC" "$BIN/kube-apiserver" "${APISERVER_ARGS[@]}"
  wait_for 90 "kube-apiserver /readyz" ip netns exec "$NC" curl -fsS --cacert "$T/pki/ca.crt" \
    -H "Authorization: Bearer $ADMIN_TOKEN" "$API/readyz"
}
step "kube-apiserver in $NC ($API, RBAC, token auth)"
start_apiserver
step "kube-apiserver ready: /version says $(ip netns exec "$NC" curl -fsS --cacert "$T/pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "$API/version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])')"
wait_for 60 "ClusterRole system:node-proxier bootstrapped" K get clusterrole system:node-proxier

# --- cluster objects --------------------------------------------------------------------------
step "deploy/namespace.yaml, serviceaccount.yaml, rbac.yaml, edge-kube-proxy-rbac.yaml applied"
for f in namespace serviceaccount rbac edge-kube-proxy-rbac; do K apply -f "deploy/$f.yaml" >/dev/null; done

node_yaml() { # name zone
  printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n    zone: "%s"\n    kubernetes.io/hostname: %s\n' "$1" "$2" "$1"
}
set_node_addr() { # name ip
  K patch node "$1" --subresource=status --type=merge \
    -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$2\"},{\"type\":\"Hostname\",\"address\":\"$1\"}]}}" >/dev/null
}
step "Nodes edge-a1 (zone a, the local node, $NODE_IP), edge-a2 (a), edge-b1 (b), with status.addresses"
for n in edge-a1:a edge-a2:a edge-b1:b; do node_yaml "${n%%:*}" "${n##*:}" | K apply -f - >/dev/null; done
# edge-a2's InternalIP is the follower's source address on the relay's link (a relay accepts a
# node's runtime report only from one of that Node's addresses).
set_node_addr edge-a1 "$NODE_IP"; set_node_addr edge-a2 "$FOLLOWER_IP"; set_node_addr edge-b1 10.213.2.3

# Pods: name ip node. Each answers GET with its own name.
PODS=(pa1:10.213.1.11:edge-a1 pa2:10.213.1.12:edge-a2 pa3:10.213.1.13:edge-a2 pb1:10.213.1.21:edge-b1 pb2:10.213.1.22:edge-b1)
cat >"$T/pod.py" <<'PY'
import http.server, sys
name, ip = sys.argv[1], sys.argv[2]
body = (name + "\n").encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((ip, 8080), H).serve_forever()
PY
step "pods: ${PODS[*]} (HTTP on :8080 in $NP)"
for p in "${PODS[@]}"; do
  IFS=: read -r name ip _ <<<"$p"
  ip -n "$NP" addr add "$ip/24" dev "${P}pn"
  start "pod-$name" "$NP" python3 "$T/pod.py" "$name" "$ip"
done
for p in "${PODS[@]}"; do
  IFS=: read -r name ip _ <<<"$p"
  wait_for 10 "pod $name answering" ip netns exec "$NN" curl -fsS --max-time 1 "http://$ip:8080/"
done

svc_yaml() { # name topology(yes|no)
  printf 'apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\n' "$1"
  [ "$2" = yes ] && printf '  annotations:\n    topologyKeys: %s\n' "'[\"zone\"]'"
  printf 'spec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n    protocol: TCP\n'
}
slice_apply() { # service pod-name...: the Service's one EndpointSlice, with these pods (each
  # endpoint with its node and its Pod as targetRef, as the EndpointSlice controller writes them)
  local svc=$1; shift
  {
    printf 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-e2e\n  namespace: default\n' "$svc"
    printf '  labels:\n    kubernetes.io/service-name: %s\n    endpointslice.kubernetes.io/managed-by: e2e.grid-wrapper.local\n' "$svc"
    printf 'addressType: IPv4\nports:\n- name: http\n  port: 8080\n  protocol: TCP\nendpoints:\n'
    local want
    for want in "$@"; do
      for p in "${PODS[@]}"; do
        IFS=: read -r name ip node <<<"$p"
        if [ "$name" = "$want" ]; then
          printf -- '- addresses: ["%s"]\n  conditions: {ready: true}\n  nodeName: %s\n  targetRef: {kind: Pod, namespace: default, name: %s}\n' "$ip" "$node" "$name"
        fi
      done
    done
  } | K apply -f - >/dev/null
}
step "Services topo (topologyKeys: '[\"zone\"]') and plain; their EndpointSlices (pa1 pa2 pb1 pb2)"
svc_yaml topo yes | K apply -f - >/dev/null
svc_yaml plain no | K apply -f - >/dev/null
slice_apply topo pa1 pa2 pb1 pb2
slice_apply plain pa1 pa2 pb1 pb2
TOPO_IP=$(K get svc topo -o jsonpath='{.spec.clusterIP}')
PLAIN_IP=$(K get svc plain -o jsonpath='{.spec.clusterIP}')
step "ClusterIPs: topo $TOPO_IP, plain $PLAIN_IP"

# --- grid-wrapper ---------------------------------------------------------------------------
GW_TOKEN=$(K -n edge-system create token application-grid-wrapper --duration=2h)
KP_TOKEN=$(K -n edge-system create token edge-kube-proxy --duration=2h)
mkdir -p "$T/gw" "$T/cache" "$T/kp"
printf '%s' "$GW_TOKEN" > "$T/gw/token"; printf '%s' "$KP_TOKEN" > "$T/kp/token"
# The DaemonSet's kubeconfig (deploy/configmap-kubeconfig.yaml) with server, CA and token here.
sed -n '/kubeconfig.conf: |/,$p' deploy/configmap-kubeconfig.yaml | tail -n +2 | sed 's/^    //' \
  | sed "s#certificate-authority: .*#certificate-authority: $T/pki/ca.crt#; s#server: .*#server: $API#; s#tokenFile: .*#tokenFile: $T/gw/token#" \
  > "$T/gw/kubeconfig.conf"
# kube-proxy's (deploy/kube-proxy-kubeconfig.yaml): server grid-wrapper, its own token kept.
sed -n '/kubeconfig.conf: |/,$p' deploy/kube-proxy-kubeconfig.yaml | tail -n +2 | sed 's/^    //' \
  | sed "s#certificate-authority: .*#certificate-authority: $T/pki/ca.crt#; s#tokenFile: .*#tokenFile: $T/kp/token#" \
  > "$T/kp/kubeconfig.conf"
grep -q 'server: http://127.0.0.1:51006' "$T/kp/kubeconfig.conf" || fail "kube-proxy kubeconfig: no grid-wrapper server"
GW_URL=http://127.0.0.1:51006
GW_CURL=()
GW_TLS_ARGS=()
if [ "${E2E_GW_TLS:-0}" = 1 ]; then
  (
    cd "$T/pki" && umask 077
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=grid-wrapper" \
      -keyout gw.key -out gw.csr 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' > gw.ext
    openssl x509 -req -in gw.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile gw.ext \
      -out gw.crt 2>/dev/null
  )
  GW_TLS_ARGS=(--insecure=false --cert-file="$T/pki/gw.crt" --key-file="$T/pki/gw.key")
  GW_URL=https://127.0.0.1:51006
  GW_CURL=(--cacert "$T/pki/ca.crt")
  sed -i "s#server: http://127.0.0.1:51006#server: $GW_URL#" "$T/kp/kubeconfig.conf"
  step "E2E_GW_TLS=1: grid-wrapper serves kube-proxy over TLS ($GW_URL, certificate from the test CA)"
fi
if [ "${E2E_DIRECT:-0}" = 1 ]; then
  sed -i "s#server: http://127.0.0.1:51006#server: $API#" "$T/kp/kubeconfig.conf"
  step "E2E_DIRECT=1: kube-proxy talks to the apiserver directly ($API): the topology assertion must fail"
fi

# --- the container runtime (CRI) ---------------------------------------------------------------
# Sandboxes per pod: the current one (READY) and the one before it (NOTREADY, as a sandbox is
# after a reboot until the kubelet removes it), each "id|ip|created_at(ns)|attempt".
declare -A SB_CUR=() SB_OLD=()
SB_SEQ=0
sandbox_new() { # pod ip: a new READY sandbox of the pod on ip; the current one becomes NOTREADY
  local attempt=0
  if [ -n "${SB_CUR[$1]:-}" ]; then SB_OLD[$1]=${SB_CUR[$1]}; attempt=$(( ${SB_CUR[$1]##*|} + 1 )); fi
  SB_SEQ=$((SB_SEQ + 1))
  SB_CUR[$1]="$(printf 'e2e%04d%s' "$SB_SEQ" "$1")|$2|$(date +%s%N)|$attempt"
}
cri_write() { # file pod...: the runtime's sandboxes of these pods, the file replaced whole
  local f=$1 pod rec state id ip at attempt sep=""; shift
  {
    printf '['
    for pod in "$@"; do
      for state in NOTREADY READY; do
        if [ $state = READY ]; then rec=${SB_CUR[$pod]}; else rec=${SB_OLD[$pod]:-}; fi
        [ -n "$rec" ] || continue
        IFS='|' read -r id ip at attempt <<<"$rec"
        printf '%s\n {"id":"%s","name":"%s","namespace":"default","uid":"uid-%s","attempt":%s,"state":"%s","created_at":%s,"ip":"%s"}' \
          "$sep" "$id" "$pod" "$pod" "$attempt" "$state" "$at" "$ip"
        sep=,
      done
    done
    printf '\n]\n'
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}
ready_lines() { grep -c "^ready " "$T/$1.log" 2>/dev/null || true; }
ready_lines_above() { [ "$(ready_lines "$1")" -gt "$2" ]; }
start_cri() { # name netns: cri-fake on $T/<name>.sock with $T/<name>.json
  local before; before=$(ready_lines "$1")
  start "$1" "$2" "$CRI_FAKE" -listen "$T/$1.sock" -sandboxes "$T/$1.json" -calls "$T/$1-calls.log"
  wait_for 30 "$1 serving" ready_lines_above "$1" "${before:-0}"
}
pod_ip() { local p n ip; for p in "${PODS[@]}"; do IFS=: read -r n ip _ <<<"$p"; [ "$n" = "$1" ] && echo "$ip"; done; return 0; }
step "edge-a1's container runtime (e2e/cri-fake on $T/cri-a1.sock): pa1's sandbox READY on $(pod_ip pa1)"
sandbox_new pa1 "$(pod_ip pa1)"
cri_write "$T/cri-a1.json" pa1
start_cri cri-a1 "$NN"

step "grid-wrapper check against the real apiserver (from $NN)"
if ! ip netns exec "$NN" "$GW" check --kubeconfig="$T/gw/kubeconfig.conf" --hostname=edge-a1 \
  --container-runtime-endpoint="unix://$T/cri-a1.sock" >"$T/check.log" 2>&1; then
  cat "$T/check.log"; fail "grid-wrapper check did not pass"
fi
sed 's/^/    /' "$T/check.log"

RELAY_ARGS=()
if [ "$RELAY" != 0 ]; then
  RELAY_ARGS=(--relay-bind-address="$RELAY_IP:$RELAY_PORT" --relay-cert-file="$T/site/relay.crt"
    --relay-key-file="$T/site/relay.key" --relay-client-ca-file="$T/site/site-ca.crt")
fi
GW_ARGS=(--kubeconfig="$T/gw/kubeconfig.conf" --bind-address=127.0.0.1:51006 --hostname=edge-a1
  --metrics-bind-address=127.0.0.1:51007 --cache-dir="$T/cache" "${GW_TLS_ARGS[@]}"
  --container-runtime-endpoint="unix://$T/cri-a1.sock" --container-runtime-poll-interval=1 "${RELAY_ARGS[@]}")
start_gw() {
  start grid-wrapper "$NN" "$GW" "${GW_ARGS[@]}" --v="${E2E_GW_V:-2}"
  wait_for 30 "grid-wrapper /readyz" ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/readyz
}
step "grid-wrapper in $NN as the DaemonSet runs it (127.0.0.1:51006, --cache-dir, the runtime polled every 1 s$([ "$RELAY" != 0 ] && echo ", relay port $RELAY_IP:$RELAY_PORT"))"
start_gw
step "grid-wrapper ready: $(ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/readyz | head -c 200)"

# --- kube-proxy -----------------------------------------------------------------------------
KP_ARGS=(--kubeconfig="$T/kp/kubeconfig.conf" --hostname-override=edge-a1 --proxy-mode="$MODE"
  --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0s
  --conntrack-tcp-timeout-close-wait=0s --healthz-bind-address=127.0.0.1:10256
  --metrics-bind-address=127.0.0.1:10249 --v=2)
[ "$MODE" = iptables ] && KP_ARGS+=(--iptables-localhost-nodeports=false)
step "kube-proxy ($MODE mode) in $NN, through $(awk '/server:/ {print $2}' "$T/kp/kubeconfig.conf")"
start kube-proxy "$NN" "$BIN/kube-proxy" "${KP_ARGS[@]}"
wait_for 90 "kube-proxy /healthz" ip netns exec "$NN" curl -fsS http://127.0.0.1:10256/healthz
kp_alive
step "kube-proxy healthy"

# --- assertions -------------------------------------------------------------------------------
# The pod names that kube-proxy's service chain for a Service DNATs to (in PODS order). Its
# nftables mode writes `dnat ip to numgen random mod N map { 0 : IP . PORT, ... }`, or
# `dnat to IP:PORT` for one endpoint, or jumps to per-endpoint chains named `...__IP/PORT`.
# In iptables mode, the KUBE-SVC chain's rules are commented "default/SVC:http -> IP:PORT".
rules_pods() {
  local svc=$1 out p name ip
  if [ "$MODE" = iptables ]; then
    out=$(ip netns exec "$NN" iptables-save -t nat 2>/dev/null | grep -- '^-A KUBE-SVC-' \
      | grep -o "\"default/$svc:http -> [0-9.]*:8080\"" || true)
  else
    out=$(ip netns exec "$NN" nft list table ip kube-proxy 2>/dev/null \
      | awk -v c="-default/$svc/tcp/http {" 'index($0, "chain service-") && index($0, c) {on=1; next} on && /^\t}/ {on=0} on' || true)
  fi
  local names=()
  for p in "${PODS[@]}"; do
    IFS=: read -r name ip _ <<<"$p"
    grep -qE "(^|[^0-9.])${ip//./\\.}( \. |:|/)8080" <<<"$out" && names+=("$name")
  done
  echo "${names[*]:-}"
}
# The pod names that answered N requests to the Service's ClusterIP (sorted, unique, one line).
traffic_pods() {
  local ip=$1 n=$2
  ip netns exec "$NN" bash -c "for i in \$(seq $n); do curl -s --max-time 2 http://$ip:80/ || echo '(no answer)'; done" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# expect SERVICE BOUND POD...: kube-proxy's rules have exactly those pods within BOUND seconds,
# then 40 requests reach every one of them and no other.
expect() {
  local svc=$1 bound=$2; shift 2
  local want="$*" ip got t1
  [ "$svc" = topo ] && ip=$TOPO_IP || ip=$PLAIN_IP
  t1=$EPOCHREALTIME
  local end; end=$(awk -v a="$t1" -v s="$bound" 'BEGIN { printf "%.3f", a + s }')
  while :; do
    kp_alive
    got=$(rules_pods "$svc")
    [ "$got" = "$want" ] && break
    if past "$end"; then
      # What the traffic says too: packets to pruned pods, or none to kept ones.
      miss "$svc: rules have [$got], expected [$want] within ${bound}s; 40 requests to $ip:80 reached [$(traffic_pods "$ip" 40)]"
      return 1
    fi
    sleep 0.2
  done
  local took; took=$(since "$t1")
  got=$(traffic_pods "$ip" 40)
  if [ "$got" != "$want" ]; then
    miss "$svc: 40 requests to $ip:80 reached [$got], expected [$want]"
    return 1
  fi
  step "  $svc: rules [$want] after ${took}s; 40 requests reached exactly [$got]"
  PASSED=$((PASSED + 1))
}
miss() { if [ -n "${EXPECT_SOFT:-}" ]; then finding "$*"; else fail "$*"; fi; }
# The same, a finding instead of a failure (the later steps still run).
expect_soft() { EXPECT_SOFT=1 expect "$@"; }

step "initial sync: topo reaches only zone a, plain reaches all"
expect topo 60 pa1 pa2
expect plain 60 pa1 pa2 pb1 pb2

# --- the scenario -----------------------------------------------------------------------------
B=${E2E_BOUND:-30} # seconds within which kube-proxy must follow each change
metric() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk -v m="$1" '$1 == m {print $2}'; }
failing() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk '/^grid_wrapper_upstream_failing[{ ]/ {s+=$NF} END {print s+0}'; }
lost() { [ "$(failing)" -gt 0 ]; }
# The reflectors asked the apiserver for protobuf (docs/SEMANTICS.md §1, "What grid-wrapper asks
# the upstream for") and got it: every list and watch of the sync, none in JSON.
responses() { metric "grid_wrapper_upstream_responses_total{verb=\"$1\",format=\"$2\"}"; }
PB_LISTS=$(responses list protobuf); PB_WATCHES=$(responses watch protobuf)
JSON_LISTS=$(responses list json); JSON_WATCHES=$(responses watch json)
if [ "${PB_LISTS:-0}" -ge 4 ] && [ "${PB_WATCHES:-0}" -ge 4 ] && [ -z "$JSON_LISTS$JSON_WATCHES" ]; then
  step "the reflectors read the apiserver in protobuf: ${PB_LISTS} lists and ${PB_WATCHES} watches so far, none in JSON"
  PASSED=$((PASSED + 1))
else
  fail "the reflectors' reads by format: protobuf lists '${PB_LISTS}', watches '${PB_WATCHES}'; JSON lists '${JSON_LISTS}', watches '${JSON_WATCHES}'"
fi
# E2E_ONLY=runtime skips from here to the container runtime's scenarios (not re-indented).
if [ "$ONLY" != runtime ]; then
step "endpoint added: pa3 (edge-a2, zone a) into topo's slice"
slice_apply topo pa1 pa2 pa3 pb1 pb2
expect topo "$B" pa1 pa2 pa3
step "endpoint removed: pa2 out of topo's slice"
slice_apply topo pa1 pa3 pb1 pb2
expect topo "$B" pa1 pa3
step "topo un-annotated: it reaches all its pods"
K annotate svc topo topologyKeys- >/dev/null
expect topo "$B" pa1 pa3 pb1 pb2
step "topo annotated again"
K annotate svc topo 'topologyKeys=["zone"]' >/dev/null
expect topo "$B" pa1 pa3
step "node edge-b1 relabelled into zone a"
K label node edge-b1 zone=a --overwrite >/dev/null
expect topo "$B" pa1 pa3 pb1 pb2
step "node edge-b1 relabelled out of zone a again"
K label node edge-b1 zone=b --overwrite >/dev/null
expect topo "$B" pa1 pa3
step "the local node edge-a1 relabelled into zone b (its unit changes; pa1 is on edge-a1 itself)"
K label node edge-a1 zone=b --overwrite >/dev/null
expect topo "$B" pa1 pb1 pb2
step "the local node edge-a1 back in zone a"
K label node edge-a1 zone=a --overwrite >/dev/null
LAST_CHANGE=$EPOCHREALTIME
expect topo "$B" pa1 pa3
expect plain "$B" pa1 pa2 pb1 pb2

# kube-proxy's table, without the empty chains it flushes at once and deletes on a later sync.
ruleset() {
  if [ "$MODE" = iptables ]; then
    # Sorted: kube-proxy writes KUBE-SERVICES' rules in no fixed order from one sync to the next.
    ip netns exec "$NN" iptables-save -t nat | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//' | sort
    return
  fi
  ip netns exec "$NN" nft list table ip kube-proxy \
    | awk '/^\tchain .* \{$/ {held=$0; next} held != "" && /^\t\}$/ {held=""; next} held != "" {print held; held=""} {print}' \
    | grep -v '^[[:space:]]*$'
}
step "apiserver stopped: kube-proxy keeps its rules and keeps running"
stop_pid kube-apiserver
sleep 10
kp_alive
expect topo 1 pa1 pa3
expect plain 1 pa1 pa2 pb1 pb2

open_watches() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk '/^grid_wrapper_open_watches[ {]/ {s+=$NF} END {print s+0}'; }
watches_open() { [ "$(open_watches)" -ge 3 ]; }
# kill_gw_offline WHAT: kill -9 grid-wrapper (the apiserver is down), restart it from --cache-dir,
# wait for kube-proxy's watches on it, then kube-proxy must still run with the same rules.
kill_gw_offline() {
  step "grid-wrapper killed (kill -9) and restarted offline from --cache-dir ($1; snapshot written $(( $(date +%s) - $(stat -c %Y "$T/cache/snapshot") )) s ago)"
  ruleset > "$T/rules.before"
  kill -9 "${PID[grid-wrapper]}"; wait "${PID[grid-wrapper]}" 2>/dev/null || true; unset 'PID[grid-wrapper]'
  start_gw
  step "  grid-wrapper ready offline: $(ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/readyz | head -c 200)"
  # kube-proxy's informers reconnect with backoff.
  wait_for 60 "kube-proxy's watches reopened on the restarted grid-wrapper" watches_open
  step "  $(open_watches) watches of kube-proxy open on grid-wrapper again"
  sleep 3
  kp_alive
  local ok=0
  expect_soft topo 1 pa1 pa3 || ok=1
  expect_soft plain 1 pa1 pa2 pb1 pb2 || ok=1
  ruleset > "$T/rules.after"
  if diff -q "$T/rules.before" "$T/rules.after" >/dev/null; then
    step "  kube-proxy's $MODE rules unchanged across the offline restart"
  else
    finding "kube-proxy's ruleset changed across the offline restart ($1): $(diff "$T/rules.before" "$T/rules.after" | grep '^[<>]' | tr -s '\t ' ' ' | head -4 | tr '\n' ';')"
    ok=1
  fi
  return $ok
}
# The snapshot holds what is served when the upstream goes away: a change made within
# --cache-write-interval (30 s by default) of the previous write is written at once when the
# reflectors lose the upstream, so a crash after that restarts from the state kube-proxy has.
kill_gw_offline "the last change $(since "$LAST_CHANGE") s ago" || true
step "apiserver back until every reflector recovered, then stopped again"
start_apiserver
expect topo 90 pa1 pa3
expect plain "$B" pa1 pa2 pb1 pb2
recovered() { [ "$(failing)" = 0 ] && [ "$(metric grid_wrapper_serving_snapshot)" = 0 ]; }
wait_for 90 "every reflector of grid-wrapper recovered (none failing, the snapshot no longer served)" recovered
step "  every reflector recovered"
stop_pid kube-apiserver
wait_for 30 "grid-wrapper's reflectors to notice the apiserver is gone" lost
# What was pending (a stopping apiserver removes itself from default/kubernetes) is written a
# settled second after the loss is noticed.
sleep 3
step "  snapshot written $(( $(date +%s) - $(stat -c %Y "$T/cache/snapshot") )) s ago"
kill_gw_offline "snapshot current" || true

step "offline node reboot: kube-proxy restarted with its rules gone, apiserver still down"
stop_pid kube-proxy
if [ "$MODE" = iptables ]; then ip netns exec "$NN" iptables -t nat -F; else ip netns exec "$NN" nft delete table ip kube-proxy; fi
[ -z "$(rules_pods topo)" ] || fail "kube-proxy's rules still there after the flush"
start kube-proxy "$NN" "$BIN/kube-proxy" "${KP_ARGS[@]}"
wait_for 90 "kube-proxy /healthz after its restart" ip netns exec "$NN" curl -fsS http://127.0.0.1:10256/healthz
expect topo 60 pa1 pa3
expect plain "$B" pa1 pa2 pb1 pb2
else
  step "E2E_ONLY=runtime: the earlier steps skipped; pa3 into topo's slice, then the apiserver stopped"
  slice_apply topo pa1 pa3 pb1 pb2
  expect topo "$B" pa1 pa3
  stop_pid kube-apiserver
  wait_for 30 "grid-wrapper's reflectors to notice the apiserver is gone" lost
  sleep 3
  step "  snapshot written $(( $(date +%s) - $(stat -c %Y "$T/cache/snapshot") )) s ago"
fi

# --- the container runtime (docs/SEMANTICS.md §13): pods back on new addresses -------------------
svc_ip() { if [ "$1" = topo ]; then echo "$TOPO_IP"; else echo "$PLAIN_IP"; fi; }
# pod_move POD IP: the pod's HTTP server stopped, its address removed from the pods' link (nothing
# answers there any more), the server started on IP. PODS then maps IP to the pod and the old
# address to "<pod>-gone", so that rules or answers still naming it show as such.
pod_move() {
  local pod=$1 new=$2 old p n ip node pnode="" out=()
  old=$(pod_ip "$pod")
  stop_pid "pod-$pod"
  ip -n "$NP" addr del "$old/24" dev "${P}pn"
  ip -n "$NP" addr add "$new/24" dev "${P}pn"
  start "pod-$pod" "$NP" python3 "$T/pod.py" "$pod" "$new"
  for p in "${PODS[@]}"; do
    IFS=: read -r n ip node <<<"$p"
    if [ "$n" = "$pod" ]; then out+=("$pod:$new:$node"); pnode=$node
    elif [ "$ip" != "$new" ]; then out+=("$p"); fi
  done
  PODS=("${out[@]}" "$pod-gone:$old:$pnode")
  wait_for 10 "pod $pod answering on $new" ip netns exec "$NN" curl -fsS --max-time 1 "http://$new:8080/"
}
# measure_move SVC POD T0 WANT...: from T0 (the moment the runtime's JSON named POD's new
# address), the seconds until kube-proxy's rules for SVC are exactly WANT (POD on its new address,
# no old one) and until the first request to SVC's ClusterIP answered by POD (it listens only
# on its new address). Sets MOVE_RULES and MOVE_FIRST; returns 1 after $B s without both.
measure_move() {
  local svc=$1 pod=$2 t0=$3; shift 3
  local want="$*" cip rq end got t_rules="" t_first=""
  MOVE_RULES="" MOVE_FIRST=""
  cip=$(svc_ip "$svc")
  # Two clients, each sending one request after the other (one to a vanished address gives up
  # after 0.3 s), each answer logged with the time it came, until the stop file exists.
  rm -f "$T/move-stop"
  ip netns exec "$NN" bash -c "for k in 1 2; do while [ ! -e $T/move-stop ]; do a=\$(curl -s --max-time 0.3 http://$cip:80/); echo \"\$EPOCHREALTIME \$a\"; done & done; wait" \
    >"$T/move-requests.log" 2>/dev/null &
  rq=$!
  end=$(awk -v a="$t0" -v s="$B" 'BEGIN { printf "%.3f", a + s }')
  while [ -z "$t_rules" ] || [ -z "$t_first" ]; do
    if [ -z "$t_rules" ]; then got=$(rules_pods "$svc"); [ "$got" != "$want" ] || t_rules=$EPOCHREALTIME; fi
    [ -n "$t_first" ] || t_first=$(awk -v p="$pod" -v t="$t0" '$2 == p && $1 + 0 > t + 0 {print $1}' "$T/move-requests.log" | sort -n | head -1)
    past "$end" && break
    sleep 0.05
  done
  touch "$T/move-stop"
  wait "$rq" 2>/dev/null || true
  [ -n "$t_rules" ] && MOVE_RULES=$(awk -v a="$t_rules" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
  [ -n "$t_first" ] && MOVE_FIRST=$(awk -v a="$t_first" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
  [ -n "$MOVE_RULES" ] && [ -n "$MOVE_FIRST" ] && return 0
  MOVE_MISS="within ${B}s of the runtime naming $pod's new address: rules of $svc [$(rules_pods "$svc")] (want [$want]$([ -n "$MOVE_RULES" ] && echo ", reached after ${MOVE_RULES}s")), first answer from $pod: ${MOVE_FIRST:-none} ($(awk '$2 != "" {n++} END {print n+0}' "$T/move-requests.log") of $(wc -l <"$T/move-requests.log") requests answered)"
  return 1
}
# stats N...: median and spread (min-max) of the samples.
stats() {
  printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median %.2f s (min %.2f, max %.2f; %d moves)", m, v[1], v[NR], NR}'
}
repairs() { metric grid_wrapper_runtime_repairs; }
# A move takes about as long as a poll interval: without a random pause before the runtime's
# change, every move would land at the same point of grid-wrapper's poll cycle.
poll_phase() { sleep "0.$(printf '%02d' $((RANDOM % 100)))"; }

# Scenario A, no relay: the node reboots while the site is offline. grid-wrapper, the runtime and
# kube-proxy restart (its table gone); the kubelet gave pa1 a new sandbox on a new address. Then
# pa1 moves again while everything runs (a restarted container on a new sandbox).
PA1_HOME=$(pod_ip pa1)
step "offline site reboot: pods back on new addresses (apiserver down; grid-wrapper killed, kube-proxy's table flushed, the runtime restarted; pa1's new sandbox on 10.213.1.31)"
kill -9 "${PID[grid-wrapper]}"; wait "${PID[grid-wrapper]}" 2>/dev/null || true; unset 'PID[grid-wrapper]'
stop_pid kube-proxy
if [ "$MODE" = iptables ]; then ip netns exec "$NN" iptables -t nat -F; else ip netns exec "$NN" nft delete table ip kube-proxy; fi
[ -z "$(rules_pods topo)" ] || fail "kube-proxy's rules still there after the flush"
stop_pid cri-a1
pod_move pa1 10.213.1.31
sandbox_new pa1 10.213.1.31
cri_write "$T/cri-a1.json" pa1
T_JSON=$EPOCHREALTIME
start_cri cri-a1 "$NN"
start_gw
step "  grid-wrapper ready offline: $(ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/readyz | head -c 120)"
start kube-proxy "$NN" "$BIN/kube-proxy" "${KP_ARGS[@]}"
measure_move topo pa1 "$T_JSON" pa1 pa3 || fail "after the offline reboot: $MOVE_MISS"
step "  pa1 on 10.213.1.31: kube-proxy's rules name it ${MOVE_RULES}s, the first request answered by it ${MOVE_FIRST}s after the runtime named it (grid-wrapper, runtime and kube-proxy restarted in between)"
expect topo "$B" pa1 pa3
expect plain "$B" pa1 pa2 pb1 pb2
step "  grid_wrapper_runtime_repairs $(repairs) (pa1's endpoint in topo's and plain's slices)"

step "a pod moving while the site runs offline (no restart): pa1 moved three times (its server on the new address first, then the runtime's JSON)"
A_RULES=() A_FIRST=()
for new in 10.213.1.32 10.213.1.33 10.213.1.34; do
  pod_move pa1 "$new"
  sandbox_new pa1 "$new"
  poll_phase
  cri_write "$T/cri-a1.json" pa1
  measure_move topo pa1 "$EPOCHREALTIME" pa1 pa3 || fail "pa1 moved to $new offline: $MOVE_MISS"
  A_RULES+=("$MOVE_RULES") A_FIRST+=("$MOVE_FIRST")
  step "  pa1 -> $new: rules ${MOVE_RULES}s, first answer ${MOVE_FIRST}s after the runtime named it"
  expect topo "$B" pa1 pa3
done
step "  runtime -> kube-proxy's rules: $(stats "${A_RULES[@]}")"
step "  runtime -> first request answered: $(stats "${A_FIRST[@]}")"
step "pa1 back on $PA1_HOME (a fourth sandbox), where the upstream's slices have it: the repair ends"
pod_move pa1 "$PA1_HOME"
sandbox_new pa1 "$PA1_HOME"
cri_write "$T/cri-a1.json" pa1
measure_move topo pa1 "$EPOCHREALTIME" pa1 pa3 || fail "pa1 moved back to $PA1_HOME: $MOVE_MISS"
step "  rules ${MOVE_RULES}s, first answer ${MOVE_FIRST}s after the runtime named it"
expect topo "$B" pa1 pa3
expect plain "$B" pa1 pa2 pb1 pb2
wait_for 10 "grid_wrapper_runtime_repairs back to 0" test "$(repairs)" = 0

# Scenario B, a relay and its follower: edge-a1's grid-wrapper is the site's relay; edge-a2 runs
# a follower with its own runtime, which reports its pods' addresses to the relay
# (PUT /grid-wrapper/v1/runtime-pods/edge-a2 on the relay port, with its client certificate,
# from edge-a2's InternalIP). A pod of edge-a2 moves: the relay's own kube-proxy must follow.
# Answers in JSON of edge-a1's grid-wrapper to the follower (its reflectors read the relay port
# in JSON), left out of the protobuf step's count of kube-proxy's answers below.
json_answers() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk '$1 == "grid_wrapper_cache_answers_total{format=\"json\"}" {print $2}'; }
RELAY_JSON=0
if [ "$RELAY" != 0 ]; then
  RELAY_JSON0=$(json_answers)
  step "relay and follower: edge-a2's grid-wrapper in $NF follows the relay https://$RELAY_IP:$RELAY_PORT, its runtime names pa2 and pa3 (apiserver still down)"
  mkdir -p "$T/follower"
  printf 'apiVersion: v1\nkind: Config\ncurrent-context: relays\ncontexts:\n- name: relays\n  context:\n    cluster: relays\n    user: follower\nclusters:\n- name: relays\n  cluster:\n    server: https://%s:%s\n    certificate-authority: %s\nusers:\n- name: follower\n  user:\n    client-certificate: %s\n    client-key: %s\n' \
    "$RELAY_IP" "$RELAY_PORT" "$T/site/site-ca.crt" "$T/site/follower.crt" "$T/site/follower.key" >"$T/follower/relay.kubeconfig"
  sandbox_new pa2 "$(pod_ip pa2)"; sandbox_new pa3 "$(pod_ip pa3)"
  cri_write "$T/cri-a2.json" pa2 pa3
  start_cri cri-a2 "$NF"
  # Its cloud kubeconfig is grid-wrapper's; the cloud is unreachable from $NF (no route) anyway.
  start follower "$NF" "$GW" --kubeconfig="$T/gw/kubeconfig.conf" --relay-kubeconfig="$T/follower/relay.kubeconfig" \
    --hostname=edge-a2 --bind-address=127.0.0.1:51006 --metrics-bind-address=127.0.0.1:51007 \
    --container-runtime-endpoint="unix://$T/cri-a2.sock" --container-runtime-poll-interval=1 --v="${E2E_GW_V:-2}"
  wait_for 60 "the follower's /readyz" ip netns exec "$NF" curl -fsS http://127.0.0.1:51007/readyz
  step "  follower ready, reading from: $(ip netns exec "$NF" curl -fsS http://127.0.0.1:51007/metrics | awk -F'"' '/^grid_wrapper_upstream_current_server_info\{/ && $NF ~ / 1$/ {for (i = 1; i < NF; i++) if ($i ~ /server=$/) print $(i + 1)}' | head -1)"
  PA3_HOME=$(pod_ip pa3)
  B_RULES=() B_FIRST=() B_ON=1
  # The follower serves its own node's repair to its own kube-proxy port whatever the relay does.
  follower_serves() { ip netns exec "$NF" curl -fsS http://127.0.0.1:51006/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/topo-e2e | grep -q "\"$1\""; }
  for new in 10.213.1.41 10.213.1.42 10.213.1.43; do
    pod_move pa3 "$new"
    sandbox_new pa3 "$new"
    poll_phase
    cri_write "$T/cri-a2.json" pa2 pa3
    if ! measure_move topo pa3 "$EPOCHREALTIME" pa1 pa3; then
      reports=$(grep -ciE 'runtime-pods|report' "$T/follower.log" || true)
      finding "the relay's kube-proxy (edge-a1) does not route to pa3 on edge-a2 after it moved to $new: $MOVE_MISS; the follower's log has $reports line(s) about reporting$([ "$reports" -gt 0 ] && echo " (first: $(grep -m1 -iE 'runtime-pods|report' "$T/follower.log" | cut -c1-200))"), the relay's $(grep -c 'runtime-pods' "$T/grid-wrapper.log" || true) naming runtime-pods"
      B_ON=0
    fi
    served=0
    for _ in $(seq 50); do if follower_serves "$new"; then served=1; break; fi; sleep 0.2; done
    if [ "$served" = 1 ]; then
      step "  the follower serves pa3 on $new on its own kube-proxy port (its node's own repair)"
      PASSED=$((PASSED + 1))
    else
      finding "the follower does not serve pa3 on $new on its kube-proxy port: $(ip netns exec "$NF" curl -sS http://127.0.0.1:51006/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/topo-e2e | grep -o '"addresses":[^]]*]' | tr '\n' ' ')"
    fi
    [ "$B_ON" = 1 ] || break
    B_RULES+=("$MOVE_RULES") B_FIRST+=("$MOVE_FIRST")
    step "  pa3 -> $new: the relay's kube-proxy's rules ${MOVE_RULES}s, first answer ${MOVE_FIRST}s after edge-a2's runtime named it"
    expect topo "$B" pa1 pa3
  done
  if [ "$B_ON" = 1 ]; then
    step "  edge-a2's runtime -> the relay's kube-proxy's rules: $(stats "${B_RULES[@]}")"
    step "  edge-a2's runtime -> first request answered: $(stats "${B_FIRST[@]}")"
  fi
  step "pa3 back on $PA3_HOME (a new sandbox), where the upstream's slices have it; the follower and edge-a2's runtime stopped"
  pod_move pa3 "$PA3_HOME"
  sandbox_new pa3 "$PA3_HOME"
  cri_write "$T/cri-a2.json" pa2 pa3
  expect topo "$B" pa1 pa3
  stop_pid follower
  stop_pid cri-a2
  RELAY_JSON=$(( $(json_answers) - ${RELAY_JSON0:-0} ))
fi

# E2E_ONLY=runtime skips the rest (not re-indented).
if [ "$ONLY" != runtime ]; then
step "node cut off (veth down), apiserver back, changes made: pa2 back in topo, edge-b1 into zone a"
ip -n "$NN" link set "${P}nc" down
start_apiserver
slice_apply topo pa1 pa2 pa3 pb1 pb2
K label node edge-b1 zone=a --overwrite >/dev/null
step "node reconnected: converges"
ip -n "$NN" link set "${P}nc" up
expect topo 90 pa1 pa2 pa3 pb1 pb2
K label node edge-b1 zone=b --overwrite >/dev/null
expect topo "$B" pa1 pa2 pa3

ev=$(K get events.events.k8s.io -A -o jsonpath='{range .items[*]}{.reportingController}/{.reason}/{.regarding.name}{"\n"}{end}' | grep -c '^kube-proxy/Starting/edge-a1' || true)
if [ "${E2E_GW_TLS:-0}" = 1 ]; then
  step "kube-proxy's own Events reached the apiserver through grid-wrapper (https: kube-proxy sends its token)"
  if [ "$ev" -ge 1 ]; then
    step "  $ev Starting event(s) of kube-proxy for edge-a1"
    PASSED=$((PASSED + 1))
  else
    finding "no Starting Event of kube-proxy for edge-a1 reached the apiserver; kube-proxy logged: $(grep -m1 'Server rejected event' "$T/kube-proxy.log" | sed 's/.*err="//; s/" event=.*//' | cut -c1-220)"
  fi
else
  # Over plain http client-go sends no credentials: the Event goes upstream anonymous, is
  # refused, and grid-wrapper says why, once (docs/SEMANTICS.md §8).
  step "kube-proxy's Events over plain http: refused upstream as anonymous, and grid-wrapper says why"
  hint=$(grep -c "the client sent no Authorization header" "$T/grid-wrapper.log" || true)
  if [ "$ev" = 0 ] && grep -q 'system:anonymous' "$T/kube-proxy.log" && [ "$hint" = 1 ]; then
    step "  kube-proxy: $(grep -m1 'Server rejected event' "$T/kube-proxy.log" | sed 's/.*err="//; s/" event=.*//' | cut -c1-120)"
    step "  grid-wrapper (one WARN): $(grep -m1 'the client sent no Authorization header' "$T/grid-wrapper.log" | cut -c1-160)…"
    PASSED=$((PASSED + 1))
  else
    finding "Events over http: $ev Starting event(s) stored, $hint WARN line(s) with the hint in grid-wrapper's log (want 0 and 1)"
  fi
fi

step "protobuf: kube-proxy asks for it (Accept: application/vnd.kubernetes.protobuf, */*); grid-wrapper answers its requests in it"
answers() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk -v f="$1" '$1 == "grid_wrapper_cache_answers_total{format=\""f"\"}" {print $2}'; }
pb=$(answers protobuf); js=$(( $(answers json) - RELAY_JSON ))
if [ "${pb:-0}" -gt 0 ] && [ "${js:-0}" = 0 ]; then
  step "  grid_wrapper_cache_answers_total: protobuf $pb, json $js (kube-proxy's lists, gets and watches since the last restart$([ "$RELAY_JSON" -gt 0 ] && echo "; the follower's $RELAY_JSON JSON answers on the relay port left out"))"
  PASSED=$((PASSED + 1))
else
  finding "kube-proxy's answers by format: protobuf ${pb:-none}, json ${js:-none} (want protobuf > 0, json 0)"
fi
for q in "/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone&labelSelector=%21service.kubernetes.io%2Fservice-proxy-name&limit=500&resourceVersion=0" \
  "/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&resourceVersion=0" \
  "/api/v1/nodes?fieldSelector=metadata.name%3Dedge-a1&limit=500&resourceVersion=0"; do
  ct=$(ip netns exec "$NN" curl -sS -o /dev/null -w '%{http_code} %{content_type}' "${GW_CURL[@]}" \
    -H 'Accept: application/vnd.kubernetes.protobuf, */*' "$GW_URL$q")
  case "$ct" in
    "200 application/vnd.kubernetes.protobuf"*) step "  ${q%%\?*}: $ct"; PASSED=$((PASSED + 1)) ;;
    *) finding "GET ${q%%\?*} with kube-proxy's Accept header: answered $ct, not protobuf" ;;
  esac
done
step "a Node status as a 1.37 kubelet writes it (status.nodeInfo with runningInUserNamespace, new in 1.37) on edge-a1"
K patch node edge-a1 --subresource=status --type=merge -p '{"status":{"nodeInfo":{"machineID":"e2e","systemUUID":"e2e","bootID":"e2e","kernelVersion":"6.0","osImage":"e2e","containerRuntimeVersion":"e2e://1","kubeletVersion":"v1.37.2","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64","runningInUserNamespace":true}}}' >/dev/null
stored=$(K get node edge-a1 -o jsonpath='{.status.nodeInfo.runningInUserNamespace}')
got_node_pb() { ip netns exec "$NN" curl -fsS -o /dev/null "${GW_CURL[@]}" -H 'Accept: application/vnd.kubernetes.protobuf' "$GW_URL/api/v1/nodes/edge-a1"; }
sleep 2; got_node_pb || true
n=$(ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk '/^grid_wrapper_protobuf_unknown_field_objects_total/ {s+=$NF} END {print s+0}')
if [ "$n" != 0 ]; then
  finding "Node with status.nodeInfo.runningInUserNamespace (stored by the apiserver: '$stored') encoded to protobuf with an unknown field: grid_wrapper_protobuf_unknown_field_objects_total $n; grid-wrapper logged: $(grep -m1 -i 'unknown' "$T/grid-wrapper.log" | cut -c1-250)"
else
  step "  no unknown protobuf field (apiserver stored runningInUserNamespace='$stored')"
  PASSED=$((PASSED + 1))
fi

# --- byte for byte against the apiserver ---------------------------------------------------------
# What kube-proxy receives in protobuf is what the apiserver would send it, but for grid-wrapper's
# documented changes (docs/SEMANTICS.md): e2e/pb-compare GETs kube-proxy's own lists (its
# selectors and Accept header) from both, decodes the apiserver's with the apiserver's serializer,
# gives each item grid-wrapper's item's resourceVersion, drops its managedFields, keeps in topo's
# slice only the endpoints on nodes of the local node's zone (from the apiserver's Node labels, not
# from grid-wrapper's answer), encodes it with the same serializer and compares the bytes with the
# raw items grid-wrapper sent, then the whole answers. It retries for up to 20 s (the Node patch
# above may still be on its way); a difference that stays is a finding with both objects.
PBC=(ip netns exec "$NN" "$BIN/pb-compare" -apiserver "$API" -apiserver-ca "$T/pki/ca.crt"
  -token-file "$T/pki/admin.token" -gw "$GW_URL" -node edge-a1)
[ "${E2E_GW_TLS:-0}" = 1 ] && PBC+=(-gw-ca "$T/pki/ca.crt")
step "byte for byte: kube-proxy's protobuf lists from grid-wrapper against the apiserver's, grid-wrapper's documented changes applied (e2e/pb-compare)"
for r in endpointslices services nodes servicecidrs; do
  more=()
  [ "$r" = endpointslices ] && more=(-min-pruned 1 -min-unpruned 1) # topo's slice pruned; plain's and kubernetes' not
  if "${PBC[@]}" -resources "$r" -wait 20s "${more[@]}" >"$T/pb-compare-$r.log" 2>&1; then
    step "  $(head -1 "$T/pb-compare-$r.log" | cut -c1-300)"
    PASSED=$((PASSED + 1))
  else
    sed 's/^/    /' "$T/pb-compare-$r.log" | cut -c1-3000
    finding "pb-compare $r: $(grep -v '^DIFFERENT' "$T/pb-compare-$r.log" | head -3 | tr '\n' ' ' | cut -c1-400)"
  fi
done
# The check sees what pruning changes: told that grid-wrapper serves the apiserver's slices
# unpruned, it must find topo's slice different, in the list and in the watch, and nothing else.
rc=0
"${PBC[@]}" -resources endpointslices -no-prune >"$T/pb-compare-no-prune.log" 2>&1 || rc=$?
if [ "$rc" = 1 ] && grep -q '^endpointslices default/topo-e2e: ' "$T/pb-compare-no-prune.log" \
  && grep -q '^endpointslices watch ADDED default/topo-e2e ' "$T/pb-compare-no-prune.log" \
  && [ "$(grep '^endpointslices ' "$T/pb-compare-no-prune.log" | grep -vc 'default/topo-e2e')" = 0 ]; then
  step "  the check's own negative control (pb-compare -no-prune): $(grep -m1 '^endpointslices default/topo-e2e: ' "$T/pb-compare-no-prune.log" | cut -c1-200)"
  PASSED=$((PASSED + 1))
else
  sed 's/^/    /' "$T/pb-compare-no-prune.log" | cut -c1-3000
  finding "pb-compare -no-prune (exit $rc) did not report exactly topo's slice as different"
fi

# --- a control plane restored from an older etcd state ------------------------------------------
# As after an etcd restore from a backup, or a control plane rebuilt at the same address: the new
# apiserver's resourceVersions are lower than those grid-wrapper holds, and a real apiserver
# accepts a watch from its future without an error and sends nothing on it (no event, no
# bookmark). grid-wrapper reads the upstream's current resourceVersion before it watches again,
# and relists from scratch when it went back (docs/SEMANTICS.md §7).
relists() { ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | awk '/^grid_wrapper_upstream_relists_total[{ ]/ {s+=$NF} END {print s+0}'; }
gw_get() { ip netns exec "$NN" curl -fsS "${GW_CURL[@]}" "$GW_URL$1"; }
step "control plane restarted, etcd's data dir copied while it was stopped (the backup)"
stop_pid kube-apiserver
stop_pid etcd
cp -a "$T/etcd" "$T/etcd-backup"
start_etcd etcd "$T/etcd" 2379 2380
start_apiserver
step "changes after the backup: 400 ConfigMaps (resourceVersions move on), then pa2 out of topo, pa3 into plain, and a label, an annotation or an object of each other kind grid-wrapper mirrors"
for i in $(seq 400); do printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-after-%s\n  namespace: default\n---\n' "$i"; done | K create -f - >/dev/null
slice_apply topo pa1 pa3 pb1 pb2
slice_apply plain pa1 pa2 pa3 pb1 pb2
# The local Node (edge-a1): the only one grid-wrapper serves (another is proxied, SEMANTICS §1.1).
K label node edge-a1 e2e-restore=after >/dev/null
K annotate svc plain e2e-restore=after >/dev/null
printf 'apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: e2e-restore\n  namespace: default\n' | K apply -f - >/dev/null
K annotate servicecidr kubernetes e2e-restore=after >/dev/null
# grid-wrapper's reflectors come back after the restart at their backoff's pace (up to 30 s
# between attempts after the earlier outages).
expect topo 120 pa1 pa3
expect plain "$B" pa1 pa2 pa3 pb1 pb2
after_served() {
  gw_get /api/v1/nodes/edge-a1 | grep -q '"e2e-restore":"after"' && gw_get /api/v1/namespaces/default/endpoints/e2e-restore >/dev/null \
    && gw_get /api/v1/services | grep -q '"e2e-restore":"after"' && gw_get /apis/networking.k8s.io/v1/servicecidrs | grep -q '"e2e-restore":"after"'
}
wait_for 120 "the changes after the backup served by grid-wrapper" after_served
# One more change of each kind, seen by every reflector on its watch: progress. Without it the
# failures of the restart above (a broken watch, a 410) count toward the three in a row after
# which a reflector relists from scratch without reading the upstream's resourceVersion first,
# and whether an apiserver bookmark happened to come in between decided whether any reflector
# could say below that the resourceVersion went back.
step "  one more change of each kind, on every reflector's watch (annotations e2e-progress)"
K annotate node edge-a1 e2e-progress=1 >/dev/null
K annotate svc plain e2e-progress=1 >/dev/null
K annotate endpoints e2e-restore e2e-progress=1 >/dev/null
K annotate endpointslice topo-e2e e2e-progress=1 >/dev/null
K annotate servicecidr kubernetes e2e-progress=1 >/dev/null
progress_served() {
  gw_get /api/v1/nodes/edge-a1 | grep -q '"e2e-progress":"1"' && gw_get /api/v1/namespaces/default/endpoints/e2e-restore | grep -q '"e2e-progress":"1"' \
    && gw_get /api/v1/services | grep -q '"e2e-progress":"1"' && gw_get /apis/networking.k8s.io/v1/servicecidrs | grep -q '"e2e-progress":"1"' \
    && gw_get /apis/discovery.k8s.io/v1/namespaces/default/endpointslices/topo-e2e | grep -q '"e2e-progress":"1"'
}
wait_for 60 "the e2e-progress annotations served by grid-wrapper" progress_served
step "the restored control plane started beside it: etcd from the backup on 127.0.0.1:2479, kube-apiserver on $CLOUD_IP:6444"
cp -a "$T/etcd-backup" "$T/etcd-restored"
start_etcd etcd-restored "$T/etcd-restored" 2479 2480
RESTORED_ARGS=() # --etcd-servers is a list flag: a second one would add to the first
for a in "${APISERVER_ARGS[@]}"; do
  case "$a" in --etcd-servers=*|--secure-port=*) ;; *) RESTORED_ARGS+=("$a") ;; esac
done
start kube-apiserver-restored "$NC" "$BIN/kube-apiserver" "${RESTORED_ARGS[@]}" --etcd-servers=http://127.0.0.1:2479 --secure-port=6444
wait_for 90 "restored kube-apiserver /readyz" ip netns exec "$NC" curl -fsS --cacert "$T/pki/ca.crt" \
  -H "Authorization: Bearer $ADMIN_TOKEN" "https://$CLOUD_IP:6444/readyz"
# grid-wrapper's own watch of its Node: it must never say DELETED (kube-proxy exits on that).
start node-watch "$NN" curl -sSN "${GW_CURL[@]}" --max-time 600 "$GW_URL/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dedge-a1"
relists_before=$(relists)
went_back_before=$(grep -c "resourceVersion went back from" "$T/grid-wrapper.log" || true)
step "  the old control plane replaced at the same address: $API now reaches the restored one (nftables DNAT in $NC), the old kube-apiserver and etcd stopped"
ip netns exec "$NC" nft -f - <<NFT
table ip gwe2e-restore {
  chain pre { type nat hook prerouting priority dstnat; ip daddr $CLOUD_IP tcp dport 6443 dnat to $CLOUD_IP:6444; }
  chain out { type nat hook output priority -100; ip daddr $CLOUD_IP tcp dport 6443 dnat to $CLOUD_IP:6444; }
}
NFT
T_RESTORED=$EPOCHREALTIME
stop_pid kube-apiserver
stop_pid etcd
step "  kube-proxy converges to the restored state (pa2 back in topo, pa3 out of plain), within 60 s"
expect topo 60 pa1 pa2 pa3
expect plain 60 pa1 pa2 pb1 pb2
restored_served() {
  ! gw_get /api/v1/nodes/edge-a1 | grep -q e2e-restore && ! gw_get /api/v1/namespaces/default/endpoints/e2e-restore >/dev/null 2>&1 \
    && ! gw_get /api/v1/services | grep -q e2e-restore && ! gw_get /apis/networking.k8s.io/v1/servicecidrs | grep -q e2e-restore
}
wait_for 60 "the restored Node, Service, Endpoints and ServiceCIDR served by grid-wrapper" restored_served
step "  grid-wrapper serves the restored state $(since "$T_RESTORED") s after the replacement"
kp_alive
relists_after=$(relists)
went_back=$(( $(grep -c "resourceVersion went back from" "$T/grid-wrapper.log" || true) - went_back_before ))
if [ "$relists_after" -gt "$relists_before" ] && [ "$went_back" -ge 1 ]; then
  step "  grid_wrapper_upstream_relists_total $relists_before -> $relists_after; $went_back reflector(s) said: $(grep -m1 "resourceVersion went back from" "$T/grid-wrapper.log" | sed 's/.*relisting/relisting/' | cut -c1-200)"
  PASSED=$((PASSED + 1))
else
  finding "after the restore: grid_wrapper_upstream_relists_total $relists_before -> $relists_after, $went_back 'went back' line(s) in grid-wrapper's log (want a rise and at least one)"
fi
if grep -q '"type":"DELETED"' "$T/node-watch.log"; then
  finding "grid-wrapper served a DELETED of its Node edge-a1 during the restore: $(grep -m1 DELETED "$T/node-watch.log" | cut -c1-200)"
elif grep -q '"name":"edge-a1"' "$T/node-watch.log"; then
  step "  grid-wrapper's watch of Node edge-a1: no DELETED through the replacement"
  PASSED=$((PASSED + 1))
else
  finding "grid-wrapper's watch of Node edge-a1 received nothing: $(head -c 200 "$T/node-watch.log")"
fi
fi # E2E_ONLY

step "grid-wrapper's request counts (kube-proxy's requests):"
ip netns exec "$NN" curl -fsS http://127.0.0.1:51007/metrics | grep -E '^grid_wrapper_requests_total' | sed 's/^/    /'
kp_alive

if [ ${#FINDINGS[@]} -gt 0 ]; then
  step "${#FINDINGS[@]} finding(s):"
  for f in "${FINDINGS[@]}"; do echo "    - $f"; done
fi
# Each assertion (kube-proxy's rules and traffic for one Service at one step, the Event, each
# protobuf answer) counts once.
echo "e2e: $PASSED passed, ${#FINDINGS[@]} failed"
[ ${#FINDINGS[@]} = 0 ]
exit
}
