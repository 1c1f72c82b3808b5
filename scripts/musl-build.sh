#!/usr/bin/env bash
# The static musl x86_64 release build of grid-wrapper, what users run on x86_64 nodes and what
# make loadbench / make snapbench measure: target/x86_64-unknown-linux-musl/release/grid-wrapper.
# Installs the rustup target if missing (one command, idempotent); linked with rust-lld as in
# make cross. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
T=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$T" || rustup target add "$T" >&2
CC_x86_64_unknown_linux_musl=gcc CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=rust-lld \
  cargo build --release --target "$T" --bin grid-wrapper >&2
echo "target/$T/release/grid-wrapper"
