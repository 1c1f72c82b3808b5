#!/usr/bin/env bash
# The certificates of one site's relays (deploy/relay/README.md, "Certificates"), made with the
# openssl CLI into DIR:
#
#   site-ca.crt, site-ca.key      the site CA: it signs the relays' serving certificates and the
#                                 followers' client certificate, and is the trust anchor on both
#                                 sides (--relay-client-ca-file on relays, the relay kubeconfig's
#                                 certificate-authority on followers). Keep site-ca.key offline.
#   relay.crt, relay.key          the relays' serving certificate, with every relay address as a
#                                 subjectAltName (IP or DNS)
#   follower.crt, follower.key    the followers' client certificate (clientAuth)
#
# usage: make-certs.sh DIR SITE RELAY_ADDRESS [RELAY_ADDRESS...]
#        make-certs.sh DIR SITE --renew RELAY_ADDRESS [...]   new leaf certificates, same CA
# e.g.   make-certs.sh ./site-a site-a 10.20.0.11 10.20.0.12
#
# Leaf certificates last DAYS days (default 365), the CA CA_DAYS (default 3650). Rotation: run
# again with --renew before the leaves expire, update the two Secrets (README), and the relays
# reload theirs on the change (or SIGHUP); followers take theirs when their pod restarts.
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
dir=$1 site=$2
shift 2
renew=false
if [ "${1:-}" = "--renew" ]; then renew=true; shift; fi
[ $# -ge 1 ] || { echo "make-certs.sh: no relay address given" >&2; exit 2; }
days=${DAYS:-365}
ca_days=${CA_DAYS:-3650}
mkdir -p "$dir"
cd "$dir"
umask 077

san=""
for a in "$@"; do
  if [[ $a =~ ^[0-9.]+$ || $a == *:* ]]; then san+="IP:$a,"; else san+="DNS:$a,"; fi
done
san=${san%,}

if [ "$renew" = false ]; then
  if [ -e site-ca.key ]; then
    echo "make-certs.sh: $dir/site-ca.key exists; use --renew to make new leaves with it" >&2
    exit 1
  fi
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$ca_days" \
    -subj "/CN=grid-wrapper relay CA $site" -keyout site-ca.key -out site-ca.crt \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
elif [ ! -e site-ca.key ]; then
  echo "make-certs.sh: --renew needs $dir/site-ca.key" >&2
  exit 1
fi

leaf() { # name CN extensions
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA site-ca.crt -CAkey site-ca.key -CAcreateserial \
    -days "$days" -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
leaf relay "grid-wrapper-relay.$site" \
  "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=$san\n"
leaf follower "grid-wrapper-follower.$site" \
  "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
openssl verify -CAfile site-ca.crt relay.crt follower.crt
echo "made in $dir: site-ca.crt relay.crt relay.key follower.crt follower.key (relay SAN: $san)"
