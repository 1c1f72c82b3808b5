#!/usr/bin/env bash
# make cross: static grid-wrapper binaries for aarch64 (musl), armv7 (glibc, +crt-static) and
# x86_64 (musl) with the size-optimized `edge` profile, collected under out/edge/ with sizes.
# Installs what it needs idempotently (Debian packages, rustup targets one per command).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-edge}
OUT=out/edge
TARGET_DIR=${CARGO_TARGET_DIR:-target}
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

mkdir -p "$OUT"
build() { # target, then env assignments
  local target=$1; shift
  say "building $target (profile $PROFILE)"
  env "$@" cargo build --locked --profile "$PROFILE" --target "$target" --bin grid-wrapper
  mkdir -p "$OUT/$target"
  cp "$TARGET_DIR/$target/$PROFILE/grid-wrapper" "$OUT/$target/grid-wrapper"
}
build aarch64-unknown-linux-musl CC_aarch64_unknown_linux_musl=clang \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld
build armv7-unknown-linux-gnueabihf CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc \
  CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc \
  CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUSTFLAGS="-C target-feature=+crt-static"
build x86_64-unknown-linux-musl CC_x86_64_unknown_linux_musl=gcc \
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld

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
