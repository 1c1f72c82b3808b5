#!/usr/bin/env bash
# make image-test: checks the OCI layout `make image` wrote (out/image) with skopeo, not with the
# script that wrote it: the index lists exactly linux/amd64, linux/arm64/v8 and linux/arm/v7;
# for each platform skopeo resolves the index to that platform's manifest, whose config says the
# same architecture, Entrypoint ["/grid-wrapper"] and the DaemonSet's numeric non-root user; its
# single layer holds only /grid-wrapper, the binary `make cross` built for that architecture (an
# ELF for that machine), which prints the Cargo.toml version (--version: under qemu-user for the
# ARM ones, natively for amd64). Last, rebuilding the layout from the same binaries gives the
# same digests. Installs what it needs idempotently (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
LAYOUT=out/image
EDGE=out/edge
say() { printf '== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

need=()
command -v skopeo >/dev/null || need+=(skopeo)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v file >/dev/null || need+=(file)
if [ ${#need[@]} -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

VERSION=$(sed -n '/^\[package\]/,/^\[/ s/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$VERSION" ] || fail "no [package] version in Cargo.toml"
REF="oci:$LAYOUT:$VERSION"
[ -f "$LAYOUT/index.json" ] || fail "$LAYOUT/index.json missing: run make image first"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# skopeo copy insists on a signature policy; this one is for reading our own local layout only,
# so the machine's /etc/containers is neither needed nor touched.
echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$WORK/policy.json"

# The user the DaemonSet runs grid-wrapper as (every non-root runAsUser / runAsGroup in it).
USER_WANT=$(python3 - deploy/daemonset.yaml <<'PY'
import re, sys
text = open(sys.argv[1]).read()
ids = lambda key: {v for v in re.findall(rf"^\s*{key}:\s*(\d+)\s*$", text, re.M) if v != "0"}
uid, gid = ids("runAsUser"), ids("runAsGroup")
assert len(uid) == 1 and len(gid) == 1, f"want one non-root runAsUser/runAsGroup, got {uid} {gid}"
print(f"{uid.pop()}:{gid.pop()}")
PY
) || fail "deploy/daemonset.yaml: cannot tell the user grid-wrapper runs as"

say "$REF: the index"
skopeo inspect --raw "$REF" >"$WORK/index.json" || fail "skopeo cannot read $REF"
python3 - "$WORK/index.json" <<'PY' || fail "the index does not list the three platforms"
import json, sys
index = json.load(open(sys.argv[1]))
assert index.get("mediaType") == "application/vnd.oci.image.index.v1+json", index.get("mediaType")
got = sorted("/".join(filter(None, [p.get("os"), p.get("architecture"), p.get("variant")]))
             for p in (m.get("platform") or {} for m in index["manifests"]))
for m in index["manifests"]:
    print(f"   {m['platform']} {m['digest']}")
assert got == ["linux/amd64", "linux/arm/v7", "linux/arm64/v8"], got
PY

check() { # architecture, variant ("" for none), rust target, runner ("" for native), `file` must say
  local arch=$1 variant=$2 target=$3 runner=$4 machine=$5
  local plat="linux/$arch${variant:+/$variant}" dir="$WORK/$arch"
  local over=(--override-os linux --override-arch "$arch")
  [ -z "$variant" ] || over+=(--override-variant "$variant")
  say "$plat"
  skopeo inspect --config "${over[@]}" "$REF" >"$WORK/$arch.config.json" || fail "$plat: no config"
  skopeo --policy "$WORK/policy.json" copy -q "${over[@]}" "$REF" "dir:$dir" || fail "$plat: copy"
  local layer
  layer=$(python3 - "$WORK/$arch.config.json" "$dir/manifest.json" "$arch" "$variant" "$USER_WANT" <<'PY'
import json, sys
config, manifest = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
arch, variant, user_want = sys.argv[3:6]
def need(ok, what):
    if not ok:
        sys.exit(f"   {what}")
need(manifest.get("mediaType") == "application/vnd.oci.image.manifest.v1+json", f"manifest mediaType {manifest.get('mediaType')}")
need((config.get("os"), config.get("architecture"), config.get("variant", "")) == ("linux", arch, variant),
     f"config platform {config.get('os')}/{config.get('architecture')}/{config.get('variant', '')}")
c = config.get("config") or {}
need(c.get("Entrypoint") == ["/grid-wrapper"], f"Entrypoint {c.get('Entrypoint')}")
user = c.get("User", "")
uid, _, gid = user.partition(":")
need(uid.isdigit() and gid.isdigit() and int(uid) != 0 and int(gid) != 0, f"User {user!r} is not a numeric non-root uid:gid")
need(user == user_want, f"User {user} is not the DaemonSet's {user_want}")
need(len(manifest.get("layers", [])) == 1, f"{len(manifest.get('layers', []))} layers")
print(f"   config: {config['os']}/{arch}{'/' + variant if variant else ''}, Entrypoint {c['Entrypoint']}, User {user}", file=sys.stderr)
print(manifest["layers"][0]["digest"].split(":", 1)[1])
PY
) || fail "$plat: manifest or config"
  mkdir "$dir/rootfs"
  tar -xzf "$dir/$layer" -C "$dir/rootfs" || fail "$plat: layer does not unpack"
  [ "$(cd "$dir/rootfs" && find . -mindepth 1)" = ./grid-wrapper ] || fail "$plat: layer holds more than /grid-wrapper"
  local bin="$dir/rootfs/grid-wrapper" desc
  [ -x "$bin" ] || fail "$plat: /grid-wrapper is not executable"
  cmp -s "$bin" "$EDGE/$target/grid-wrapper" || fail "$plat: /grid-wrapper is not $EDGE/$target/grid-wrapper (stale image? run make image)"
  desc=$(file -b "$bin")
  echo "   /grid-wrapper: $desc"
  case "$desc" in *"$machine"*) ;; *) fail "$plat: /grid-wrapper is not an ELF for $machine";; esac
  local out
  out=$(${runner:+"$runner"} "$bin" --version) || fail "$plat: --version failed"
  echo "   --version${runner:+ under $runner}: $out"
  [ "$out" = "grid-wrapper $VERSION" ] || fail "$plat: --version printed '$out', want 'grid-wrapper $VERSION'"
}
check amd64 "" x86_64-unknown-linux-musl "" "x86-64"
check arm64 v8 aarch64-unknown-linux-musl qemu-aarch64-static "ARM aarch64"
check arm v7 armv7-unknown-linux-gnueabihf qemu-arm-static "ARM, EABI5"
# A runtime that asks for arm64 without a variant (most do) gets the arm64/v8 image.
arch=$(skopeo inspect --config --override-os linux --override-arch arm64 "$REF" \
  | python3 -c 'import json,sys; c=json.load(sys.stdin); print(c["architecture"], c.get("variant", ""))') \
  || fail "linux/arm64 without a variant: no image"
[ "$arch" = "arm64 v8" ] || fail "linux/arm64 without a variant resolves to '$arch'"
echo "   linux/arm64 without a variant resolves to the arm64/v8 image"

say "reproducible: the same binaries give the same digests"
python3 scripts/oci-image.py --edge "$EDGE" --out "$WORK/again" >/dev/null
cmp -s "$LAYOUT/index.json" "$WORK/again/index.json" || fail "a second build of the layout has other digests"
diff <(cd "$LAYOUT" && find . -type f | sort) <(cd "$WORK/again" && find . -type f | sort) >/dev/null \
  || fail "a second build of the layout has other blobs"
echo "   $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$LAYOUT/index.json") both times"
say "image-test passed ($REF)"
