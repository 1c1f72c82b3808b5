#!/usr/bin/env bash
# make cross: static grid-wrapper binaries for aarch64 (musl), armv7 (glibc, +crt-static) and
# x86_64 (musl) with the size-optimized `edge` profile, collected under out/edge/ with sizes.
# Installs what it needs idempotently (Debian packages, rustup targets one per command).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-edge}
OUT=out/edge
say() { printf '== %s\n' "$*"; }

need_pkgs=()
command -v clang >/dev/null || need_pkgs+=(clang)
command -v arm-linux-gnueabihf-gcc >/dev/null || need_pkgs+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross)
command -v file >/dev/null || need_pkgs+=(file)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi
installed=$(rustup target list --installed)
for t in aarch64-unknown-linux-musl x86_64-unknown-linux-musl armv7-unknown-linux-gnueabihf; do
  # One target per command: a failing target makes rustup roll back the whole command.
  grep -qx "$t" <<<"$installed" || { say "adding rustup target $t"; rustup target add "$t"; }
done

mkdir -p "$OUT" "$OUT/order"
build() { # target, then env assignments
  local target=$1; shift
  say "building $target (profile $PROFILE)"
  env "$@" cargo build --locked --profile "$PROFILE" --target "$target" --bin grid-wrapper
  mkdir -p "$OUT/$target"
  cp "target/$target/$PROFILE/grid-wrapper" "$OUT/$target/grid-wrapper"
}
# The lld-linked targets (aarch64, x86_64) get their functions ordered: what a start and an idle
# run execute goes first and together, so fewer text pages are mapped (scripts/edge_order.py;
# README "Edge devices"). The flags are the same in both links (the order file's content
# changes, not the flags), so the second build only relinks.
A64=aarch64-unknown-linux-musl
X64=x86_64-unknown-linux-musl
link_flags() { # target
  local o="$PWD/$OUT/order/$1"
  echo "-C link-arg=-Map=$o.map -C link-arg=--symbol-ordering-file=$o.order -C link-arg=--no-warn-symbol-ordering"
}
build_a64() {
  build $A64 CC_aarch64_unknown_linux_musl=clang CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld \
    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS=$(link_flags $A64)"
}
build_x64() {
  build $X64 CC_x86_64_unknown_linux_musl=gcc CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld \
    "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS=$(link_flags $X64)"
}
: > "$OUT/order/$A64.order"
: > "$OUT/order/$X64.order"
build_a64
build armv7-unknown-linux-gnueabihf CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc \
  CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc \
  CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUSTFLAGS="-C target-feature=+crt-static"
build_x64

say "tracing a start of the x86_64 build (callgrind) for the function order"
bash scripts/edge-trace.sh "$OUT/$X64/grid-wrapper" "$OUT/order/$X64.callgrind"
python3 scripts/edge_order.py hot "$OUT/order/$X64.map" "$OUT/order/$X64.callgrind" "$OUT/order/$X64.order"
python3 scripts/edge_order.py translate "$OUT/order/$X64.order" "$OUT/order/$A64.map" "$OUT/order/$A64.order"
# Relink with the orders: only the binary crate is rebuilt (cargo sees its source touched).
touch src/main.rs
build_a64
build_x64
for t in $X64 $A64; do
  python3 scripts/edge_order.py check "$OUT/order/$t.map" "$OUT/order/$t.order"
done

say "artifacts"
printf '%-32s %10s  %s\n' target bytes file
fail=0
for t in aarch64-unknown-linux-musl armv7-unknown-linux-gnueabihf x86_64-unknown-linux-musl; do
  f="$OUT/$t/grid-wrapper"
  desc=$(file -b "$f")
  printf '%-32s %10s  %s\n' "$t" "$(stat -c %s "$f")" "$desc"
  case "$desc" in *"statically linked"*|*"static-pie linked"*) ;; *) echo "NOT STATIC: $f"; fail=1;; esac
done | tee "$OUT/sizes.txt"
grep -q "NOT STATIC" "$OUT/sizes.txt" && exit 1
exit $fail
